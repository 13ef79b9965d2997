"""A last adversarial pass over issue 12's input limits, the store's integrity and ``forget``,
written apart from the code: hostile files (encodings, FIFOs, sparse files, symlink loops),
each limit exactly at and one over through every way in (Event JSONL, objects, the LoCoMo,
LongMemEval and chat adapters, notebook edits), date-time and 64-bit edges, type names SQL could
confuse, two workbenches of one user in one process, kill -9 of checkpoint and extract, verify
on thousands of users, hand-made old stores, forget of text in odd places, and a fresh clone.

Real parts only: DuckDB files in ``tmp_path``, the CLI in subprocesses, the real openai client
against ``ChatServer``, a real IPython shell. The bugs this pass found were fixed; their cases,
once strict xfails, now pass like the rest.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers.cli import uac_here
from helpers.store import append_as_before

from uac_kernel.core.errors import EventError, StoreError, UacError
from uac_kernel.core.limits import Limits
from uac_kernel.log.integrity import verify
from uac_kernel.log.migrations import MIGRATIONS, _v1_event_hash
from uac_kernel.log.store import NewEvent, Store
from uac_kernel.model.client import ModelSettings
from uac_kernel.model.testing import ChatServer, Reply
from uac_kernel.rules import Finding, rule
from uac_kernel.workbench import Workbench

UAC = [sys.executable, "-m", "uac_kernel.cli.main"]
SECRET = "Quorvexalin"  # a made-up word: it appears nowhere else
REPO = Path(__file__).resolve().parents[2]


# -- helpers ---------------------------------------------------------------------------------


def fa(
    key: str, ts: str = "2025-01-01", op: str = "add", type: str = "Trip", **fields: Any
) -> dict[str, Any]:
    ev: dict[str, Any] = {"kind": "fact", "ts": ts, "op": op, "type": type, "key": key}
    if op != "retract":
        ev["fields"] = fields
    return ev


def utt(text: str, source: str, ts: str = "2025-03-01T09:00:00", **extra: Any) -> dict[str, Any]:
    return {
        "kind": "utterance",
        "ts": ts,
        "speaker": "user",
        "text": text,
        "source": source,
        **extra,
    }


def jsonl(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path


def cli(
    *args: str, cwd: Path, process: bool = False, env: dict[str, str] | None = None, **kw: Any
) -> subprocess.CompletedProcess[str]:
    """``uac ARGS`` in this process; in another with ``process`` (to meet a lock) or with
    ``subprocess.run``'s keywords (a memory limit)."""
    if process or kw:
        return subprocess.run(
            [*UAC, *args], cwd=cwd, capture_output=True, text=True, timeout=300, env=env, **kw
        )
    return uac_here(*args, cwd=cwd, env=env)


def one_line_error(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 1, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    return lines[0]


def files_digest(db: Path) -> dict[str, str]:
    """The SHA-256 of the store file and its write-ahead log (if any)."""
    out = {}
    for p in (db, Path(f"{db}.wal")):
        if p.exists():
            out[p.name] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def raw_count(db: Path, text: str = SECRET) -> int:
    """Occurrences of ``text`` in the raw bytes of the store file and its write-ahead log."""
    n = 0
    for p in (db, Path(f"{db}.wal")):
        if p.exists():
            n += p.read_bytes().count(text.encode())
    return n


def log_rows(db: Path) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT seq, kind, user_id, source, payload FROM events").fetchall()
    finally:
        con.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "s.duckdb"


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as srv:
        yield srv


def settings(server: ChatServer) -> ModelSettings:
    return ModelSettings(model="stand-in", base_url=server.base_url, max_retries=0)


def extraction(*ops: dict[str, Any]) -> str:
    return json.dumps({"operations": list(ops)})


def op(kind: str, type_: str, key: str, cites: list[str], **fields: Any) -> dict[str, Any]:
    return {
        "op": kind,
        "type": type_,
        "key": key,
        "fields": [{"name": k, "value": v} for k, v in fields.items()],
        "utterances": cites,
    }


# == 1. every limit exactly at and one over, through every way in ==========================

SMALL = Limits(
    value_chars=10,
    text_chars=12,
    list_items=3,
    meta_depth=2,
    fields_per_type=6,
    new_fields_per_event=4,
    types=3,
)


def _limit_cases() -> dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]], str]]:
    """Per limit of SMALL: a batch exactly at it, the same batch one over, the error's words."""
    four = {f"f{i}": i for i in range(4)}
    five = {f"f{i}": i for i in range(5)}
    return {
        "value_chars": ([fa("k", s="x" * 10)], [fa("k", s="x" * 11)], "a value holds at most 10"),
        "value_chars-list-item": (
            [fa("k", s=["x" * 10])],
            [fa("k", s=["x" * 11])],
            "item 0: a string of 11",
        ),
        "reason": (
            [fa("k", s="a"), {**fa("k", op="retract", ts="2025-01-02"), "reason": "r" * 10}],
            [fa("k", s="a"), {**fa("k", op="retract", ts="2025-01-02"), "reason": "r" * 11}],
            "reason has 11 characters",
        ),
        "text_chars": (
            [utt("t" * 12, "u1")],
            [utt("t" * 13, "u1")],
            "the text has 13 characters; at most 12",
        ),
        "list_items": ([fa("k", s=[1, 2, 3])], [fa("k", s=[1, 2, 3, 4])], "a list of 4 items"),
        "derived_from": (
            [{**fa("k", s=1), "derived_from": ["a", "b", "c"]}],
            [{**fa("k", s=1), "derived_from": ["a", "b", "c", "d"]}],
            "derived_from must be a list of at most 3",
        ),
        "meta_depth": (
            [utt("t", "u1", meta={"a": {"b": 1}})],
            [utt("t", "u1", meta={"a": {"b": {"c": 1}}})],
            "more than 2 levels deep",
        ),
        "new_fields_per_event": (
            [fa("k", **four)],
            [fa("k", **five)],
            "adds more than 4 new fields",
        ),
        "fields_per_type-over-two-events": (
            [fa("k", **four), fa("k", op="update", ts="2025-01-02", g0=1, g1=2)],
            [fa("k", **four), fa("k", op="update", ts="2025-01-02", g0=1, g1=2, g2=3)],
            "would have 7 fields, more than the 6",
        ),
        "types": (
            [fa("k", type=t, s=1) for t in ("A", "B", "C")],
            [fa("k", type=t, s=1) for t in ("A", "B", "C", "D")],
            "would make 4 record types, more than the 3",
        ),
    }


LIMIT_CASES = _limit_cases()


@pytest.mark.parametrize("via", ["jsonl", "objects"])
@pytest.mark.parametrize("limit", sorted(LIMIT_CASES))
def test_each_limit_exactly_at_passes_and_one_over_is_refused_whole(
    tmp_path: Path, limit: str, via: str
) -> None:
    at, over, words = LIMIT_CASES[limit]
    for n, (batch, ok) in enumerate(((over, False), (at, True))):
        path = tmp_path / f"{limit}-{n}.duckdb"
        with Workbench(path, user="u", limits=SMALL) as wb:
            src: Any = jsonl(tmp_path / f"{limit}-{n}.jsonl", batch) if via == "jsonl" else batch
            if ok:
                report = wb.ingest(src)
                assert report.appended == len(batch)
            else:
                with pytest.raises(EventError) as err:
                    wb.ingest(src)
                assert words in str(err.value) and "\n" not in str(err.value)
                assert wb.store.last_seq == 0


def _locomo(turns: list[dict[str, Any]], date: str = "1:56 pm on 8 May, 2023") -> list[Any]:
    conv: dict[str, Any] = {"speaker_a": "A", "speaker_b": "B", "session_1_date_time": date}
    conv["session_1"] = turns
    return [{"sample_id": "s1", "conversation": conv, "qa": []}]


def _lme(turns: list[dict[str, Any]], date: str = "2023/05/20 (Sat) 02:21") -> list[Any]:
    return [
        {
            "question_id": "q1",
            "question_type": "single-session-user",
            "question": "?",
            "answer": "a",
            "question_date": date,
            "haystack_session_ids": ["s1"],
            "haystack_dates": [date],
            "haystack_sessions": [turns],
        }
    ]


def _chat(texts: list[str], ts: str = "2025-01-01T10:00:00") -> list[Any]:
    return [{"role": "user", "content": t, "ts": ts} for t in texts]


ADAPTERS = {
    "locomo": lambda text: _locomo([{"speaker": "A", "dia_id": "D1:1", "text": text}]),
    "longmemeval": lambda text: _lme([{"role": "user", "content": text}]),
    "chat": lambda text: _chat([text]),
}


@pytest.mark.parametrize("fmt", sorted(ADAPTERS))
def test_the_adapters_hold_an_utterance_to_text_chars_at_and_one_over(
    tmp_path: Path, fmt: str
) -> None:
    for n, (size, ok) in enumerate(((13, False), (12, True))):
        f = tmp_path / f"{fmt}{n}.json"
        f.write_text(json.dumps(ADAPTERS[fmt]("w" * size)))
        with Workbench(tmp_path / f"{fmt}{n}.duckdb", user="u", limits=SMALL) as wb:
            if ok:
                assert wb.ingest(f, format=fmt).appended == 1
            else:
                with pytest.raises(EventError, match="the text has 13 characters; at most 12"):
                    wb.ingest(f, format=fmt)
                assert wb.store.last_seq == 0


@pytest.mark.parametrize(
    ("fmt", "data"),
    [
        pytest.param(
            "locomo",
            _locomo([{"speaker": "A", "dia_id": "D1:1", "text": "hi", "img_url": "x" * (2 << 20)}]),
            id="locomo-img_url-2MiB",
        ),
        pytest.param(
            "chat",
            [{"role": "user", "content": "hi", "ts": "2025-01-01", "name": "n" * (3 << 20)}],
            id="chat-name-3MiB",
        ),
    ],
)
def test_an_adapter_meta_string_past_the_event_size_is_refused(
    tmp_path: Path, fmt: str, data: Any
) -> None:
    f = tmp_path / "in.json"
    f.write_text(json.dumps(data))
    with (
        Workbench(tmp_path / "a.duckdb", user="u") as wb,
        pytest.raises(EventError, match="bytes as JSON, more than the 1,048,576"),
    ):
        wb.ingest(f, format=fmt)


def test_a_notebook_edit_is_held_to_the_workbench_limits_at_and_over(tmp_path: Path) -> None:
    with Workbench(tmp_path / "e.duckdb", user="u", limits=SMALL) as wb:
        wb.ingest([fa("k1", tags=[1, 2])])
        version = wb.checkpoint().version
        code = wb.cell("Trip")
        with pytest.raises(EventError, match="a list of 4 items; a value holds at most 3"):
            wb.apply_edit(code.replace("[1, 2]", "[1, 2, 3, 4]"), version=version, part="Trip")
        assert wb.store.last_seq == 3
        _plan, report = wb.apply_edit(
            code.replace("[1, 2]", "[1, 2, 3]"), version=version, part="Trip"
        )
        assert report.appended == 1
        assert wb.state.get("Trip", "k1").tags == [1, 2, 3]  # type: ignore[union-attr]


def test_a_uac_cell_magic_over_the_default_new_fields_is_one_line(
    kernel_shell: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    ip = kernel_shell
    ip.reset(new_session=False)
    ip.config.pop("UacMagics", None)
    store = tmp_path / "m.duckdb"
    with Workbench(store, user="u") as wb:
        wb.ingest([fa("k1", a=1)])
        wb.checkpoint()
    ip.run_cell("%load_ext uac").raise_error()
    ip.run_cell(f"%config UacMagics.db = {str(store)!r}").raise_error()
    ip.run_cell("%config UacMagics.user = 'u'").raise_error()
    fields = ", ".join(f"n{i}={i}" for i in range(101))
    code = (
        "%%uac cell --version 1 --part Trip\n"
        "class Trip(Record):\n    a: int | None\n\n\n"
        f"records[Trip] = [\n    Trip(key='k1', a=1, {fields}),\n]\n"
    )
    result = ip.run_cell(code)
    ip.run_cell("%uac close")
    ip.run_cell("%unload_ext uac")
    err = result.error_in_exec
    assert err is not None and type(err).__name__ == "UsageError", err
    assert "adds more than 100 new fields" in str(err) and "\n" not in str(err)
    assert Store(store, read_only=True).last_seq == 3


def test_300_types_over_two_batches_then_one_more_leaves_the_file_unchanged(
    tmp_path: Path,
) -> None:
    db = tmp_path / "t.duckdb"
    first = jsonl(tmp_path / "a.jsonl", [fa("k", type=f"T{i}", v=1) for i in range(150)])
    second = jsonl(tmp_path / "b.jsonl", [fa("k", type=f"U{i}", v=1) for i in range(150)])
    one_more = jsonl(tmp_path / "c.jsonl", [fa("k", type="V0", v=1)])
    assert cli("ingest", str(first), "--db", str(db), cwd=tmp_path).returncode == 0
    assert cli("ingest", str(second), "--db", str(db), cwd=tmp_path).returncode == 0
    before = files_digest(db)
    line = one_line_error(cli("ingest", str(one_more), "--db", str(db), cwd=tmp_path))
    assert "c.jsonl:1" in line and "would make 301 record types, more than the 300" in line
    assert files_digest(db) == before


def test_a_failed_batch_at_its_last_line_leaves_the_store_byte_for_byte(tmp_path: Path) -> None:
    db = tmp_path / "f.duckdb"
    good = jsonl(tmp_path / "g.jsonl", [fa(f"k{i}", n=i) for i in range(50)])
    assert cli("ingest", str(good), "--db", str(db), cwd=tmp_path).returncode == 0
    assert cli("checkpoint", "--db", str(db), cwd=tmp_path).returncode == 0
    before = files_digest(db)
    bad = [fa(f"x{i}", n=i) for i in range(999)] + [fa("x999", n=2**63)]
    line = one_line_error(
        cli("ingest", str(jsonl(tmp_path / "b.jsonl", bad)), "--db", str(db), cwd=tmp_path)
    )
    assert "b.jsonl:1000" in line and "does not fit in 64 bits" in line
    assert files_digest(db) == before


# == 2. hostile files: encodings, special files ============================================

L1 = json.dumps(utt("first", "s1"))
L2 = json.dumps(utt("second", "s2", ts="2025-03-02T09:00:00"))


@pytest.mark.parametrize(
    ("data", "words"),
    [
        pytest.param(
            (L1 + "\n").encode() + codecs.BOM_UTF8 + (L2 + "\n").encode(),
            ":2: invalid JSON (UTF-8 byte order mark",
            id="utf8-bom-mid-file",
        ),
        pytest.param((L1 + "\r" + L2 + "\r").encode(), ":1: invalid JSON", id="lone-cr-line-ends"),
        pytest.param(
            (L1 + "\n" + L2.replace("second", "\xc0\xaf") + "\n").encode("latin-1"),
            ":2: byte 0xc0 at column",
            id="overlong-utf8-slash",
        ),
        pytest.param(
            (L1 + "\n" + L2.replace("second", "\xed\xa0\x80") + "\n").encode("latin-1"),
            ":2: byte 0xed at column",
            id="utf8-encoded-surrogate",
        ),
        pytest.param((L1 + "\n").encode("utf-32-be"), ":1: a NUL byte at column 1", id="utf32-be"),
        pytest.param(
            (L1 + "\n").encode("utf-16-le"), ":1: a NUL byte at column 2", id="utf16-le-no-bom"
        ),
    ],
)
def test_an_encoding_problem_is_one_line_at_its_line_and_nothing_is_appended(
    tmp_path: Path, data: bytes, words: str
) -> None:
    f = tmp_path / "in.jsonl"
    f.write_bytes(data)
    db = tmp_path / "e.duckdb"
    with Workbench(db, user="u") as wb:
        wb.ingest([utt("kept", "s0")])
        with pytest.raises(EventError) as err:
            wb.ingest(f)
        assert words in str(err.value) and "\n" not in str(err.value)
        assert wb.store.last_seq == 1


def test_crlf_line_ends_are_read_as_lines(tmp_path: Path) -> None:
    f = tmp_path / "crlf.jsonl"
    f.write_bytes((L1 + "\r\n" + L2 + "\r\n\r\n").encode())
    with Workbench(tmp_path / "c.duckdb", user="u") as wb:
        assert wb.ingest(f).appended == 2
        assert [e.payload["text"] for e in wb.log(kinds=["utterance"])] == ["first", "second"]


def test_a_utf32_file_is_named_utf32(tmp_path: Path) -> None:
    f = tmp_path / "u32.jsonl"
    f.write_bytes((L1 + "\n").encode("utf-32"))
    with Workbench(tmp_path / "c.duckdb", user="u") as wb, pytest.raises(EventError) as err:
        wb.ingest(f)
    assert "UTF-32" in str(err.value) and "utf-32" in str(err.value)


def test_a_directory_and_a_symlink_loop_are_one_line(tmp_path: Path) -> None:
    loop_a, loop_b = tmp_path / "loop_a.jsonl", tmp_path / "loop_b.jsonl"
    loop_a.symlink_to(loop_b)
    loop_b.symlink_to(loop_a)
    (tmp_path / "dir.jsonl").mkdir()
    db = tmp_path / "d.duckdb"
    for name, words in (
        ("dir.jsonl", "Is a directory"),
        ("loop_a.jsonl", "Too many levels of symbolic links"),
    ):
        line = one_line_error(cli("ingest", name, "--db", str(db), cwd=tmp_path))
        assert words in line and "check the path" in line
    assert not db.exists()  # ingest reads its input before it creates a store


def _fifo_writer(path: Path, chunks: list[bytes], pause: float) -> threading.Thread:
    def write() -> None:
        with path.open("wb") as f:
            for c in chunks:
                f.write(c)
                f.flush()
                time.sleep(pause)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


def test_a_fifo_is_read_as_a_stream(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    writer = _fifo_writer(fifo, [(L1 + "\n").encode(), (L2 + "\n").encode()], 0.2)
    with Workbench(tmp_path / "p.duckdb", user="u") as wb:
        assert wb.ingest(fifo).appended == 2
    writer.join(10)


def test_a_file_that_turns_bad_while_being_read_appends_nothing(tmp_path: Path) -> None:
    """A FIFO stands for a file that changes under the reader: good lines first, then, later,
    garbage. The batch is validated whole, so nothing of it lands."""
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    chunks = [(json.dumps(utt(f"t{i}", f"s{i}")) + "\n").encode() for i in range(20)]
    writer = _fifo_writer(fifo, [*chunks, b'{"kind": "utterance", "ts": \n'], 0.01)
    with Workbench(tmp_path / "p.duckdb", user="u") as wb:
        with pytest.raises(EventError, match=r"pipe.jsonl:21: invalid JSON"):
            wb.ingest(fifo)
        assert wb.store.last_seq == 0
    writer.join(10)


def _sparse(path: Path, head: bytes, size: int = 10 << 30) -> Path:
    with path.open("wb") as f:
        f.write(head)
        f.truncate(size)
    return path


def _limited(mb: int) -> Any:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mb << 20, mb << 20))

    return limit


def test_a_10_gb_sparse_jsonl_fails_at_its_second_line_within_1_gb(tmp_path: Path) -> None:
    f = _sparse(tmp_path / "sparse.jsonl", (L1 + "\n").encode())
    db = tmp_path / "sp.duckdb"
    out = cli("ingest", str(f), "--db", str(db), cwd=tmp_path, preexec_fn=_limited(1500))
    line = one_line_error(out)
    assert "sparse.jsonl:2" in line and "NUL byte at column 1" in line


@pytest.mark.parametrize("fmt", ["locomo", "longmemeval", "chat"])
def test_a_10_gb_sparse_json_file_is_refused_without_reading_it_all(
    tmp_path: Path, fmt: str
) -> None:
    # a megabyte of blanks first, so the format peek finds no NUL byte to refuse it by
    f = _sparse(tmp_path / "sparse.json", b"[" + b" " * (1 << 20))
    out = cli(
        "ingest", str(f), "--format", fmt, "--db", str(tmp_path / "x.duckdb"),
        cwd=tmp_path, preexec_fn=_limited(1500),
    )  # fmt: skip
    one_line_error(out)


# == 3. time stamps ==========================================================================


@pytest.mark.parametrize(
    ("ts", "ok"),
    [
        pytest.param("0001-01-01T00:00:00-01:00", True, id="year-1-west-of-utc"),
        pytest.param("9999-12-31T23:59:59+01:00", True, id="year-9999-east-of-utc"),
        pytest.param("9999-12-31T23:59:59-00:01", False, id="year-10000-in-utc"),
        pytest.param("0001-01-01T00:00:00+00:01", False, id="year-0-in-utc"),
        pytest.param("2025-01-01T24:00:00", False, id="hour-24"),
        pytest.param("2016-12-31T23:59:60Z", False, id="leap-second"),
        pytest.param("2025-02-29", False, id="not-a-leap-year"),
    ],
)
def test_ts_edges_are_taken_or_refused_in_one_line(tmp_path: Path, ts: str, ok: bool) -> None:
    ev = {"kind": "fact", "ts": ts, "op": "add", "type": "Note", "key": "k", "fields": {"n": 1}}
    with Workbench(tmp_path / "t.duckdb", user="u", rules=[]) as wb:
        if ok:
            assert wb.ingest([ev]).appended == 1
            assert wb.verify().ok
        else:
            with pytest.raises(EventError, match="field 'ts'") as err:
                wb.ingest([ev])
            assert "\n" not in str(err.value)
            assert wb.store.last_seq == 0


def test_a_ts_in_year_1_does_not_break_a_shipped_rule(tmp_path: Path) -> None:
    with Workbench(tmp_path / "t.duckdb", user="u") as wb:
        report = wb.ingest([utt("hello", "s1", ts="0001-01-01T00:00:00-01:00")])
        assert report.raised == [] and wb.alerts() == []


def test_a_datetime_field_past_9999_in_utc_is_refused_not_typed_as_text(tmp_path: Path) -> None:
    with (
        Workbench(tmp_path / "t.duckdb", user="u") as wb,
        pytest.raises(EventError, match=r"fields\.at"),
    ):
        wb.ingest([fa("k", at="9999-12-31T23:30:00-01:00")])


ADAPTER_TS = {
    "locomo-turns-past-9999": (
        "locomo",
        _locomo(
            [{"speaker": "A", "dia_id": f"D1:{i}", "text": "hi"} for i in range(1, 4)],
            date="11:59 pm on 31 December, 9999",
        ),
    ),
    "longmemeval-iso-offset-before-year-1": (
        "longmemeval",
        _lme([{"role": "user", "content": "hi"}], date="0001-01-01T00:00:00+01:00"),
    ),
    "chat-iso-offset-before-year-1": ("chat", _chat(["hi"], ts="0001-01-01T00:00:00+01:00")),
    "chat-same-second-at-9999-12-31T23:59:59": (
        "chat",
        _chat(["a", "b"], ts="9999-12-31T23:59:59"),
    ),
}


@pytest.mark.parametrize("case", sorted(ADAPTER_TS))
def test_adapter_times_out_of_range_are_one_line(tmp_path: Path, case: str) -> None:
    fmt, data = ADAPTER_TS[case]
    f = tmp_path / "in.json"
    f.write_text(json.dumps(data))
    with Workbench(tmp_path / "a.duckdb", user="u") as wb:
        with pytest.raises(EventError, match=r"in\.json"):
            wb.ingest(f, format=fmt)
        assert wb.store.last_seq == 0


# == 4. 64-bit integers in lists and meta =====================================================


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        pytest.param([2**63 - 1, -(2**63)], True, id="list-both-ends"),
        pytest.param([0, 2**63], False, id="list-2**63"),
        pytest.param([0, -(2**63) - 1], False, id="list-minus-2**63-1"),
        pytest.param({"m": [{"x": 2**63 - 1}, -(2**63)]}, True, id="meta-both-ends"),
        pytest.param({"m": [{"x": 2**63}]}, False, id="meta-2**63-nested"),
        pytest.param({"m": [[[-(2**63) - 1]]]}, False, id="meta-minus-2**63-1-nested"),
    ],
)
def test_64_bit_edges_inside_lists_and_meta_via_jsonl(tmp_path: Path, value: Any, ok: bool) -> None:
    ev = utt("t", "s1", meta=value) if isinstance(value, dict) else fa("k", n=value)
    f = jsonl(tmp_path / "i.jsonl", [ev])
    with Workbench(tmp_path / "i.duckdb", user="u") as wb:
        if ok:
            wb.ingest(f)
            if isinstance(value, list):
                assert wb.sql("SELECT n FROM Trip").rows == [(value,)]
                assert wb.eval("user.get(Trip, 'k').n") == value
            else:
                (logged,) = wb.log(kinds=["utterance"])
                assert logged.payload["meta"] == value
        else:
            with pytest.raises(EventError, match="does not fit in 64 bits"):
                wb.ingest(f)
            assert wb.store.last_seq == 0


def test_an_int_a_float_field_cannot_hold_exactly_is_not_rounded(tmp_path: Path) -> None:
    with Workbench(tmp_path / "f.duckdb", user="u") as wb:
        wb.ingest([fa("k", x=1.5)])
        try:
            wb.ingest([fa("k", op="update", ts="2025-01-02", x=2**63 - 1)])
        except EventError:
            return
        assert wb.eval("user.get(Trip, 'k').x") == 2**63 - 1


# == 5. type names SQL could confuse ==========================================================


@pytest.mark.parametrize(
    "name",
    [
        "ＴＲＩＰ",  # fullwidth: NFKC makes it TRIP
        "TRİP",  # dotted capital I: casefold makes it "tri̇p"
        "\u212arip",  # Kelvin sign: NFKC makes it Krip
        "Tri\u0070",  # plain ASCII p: the same name, must be taken as the existing type
        "Trip\u200b",  # a zero-width space after it
        "ﬃ",  # a ligature that NFKC and casefold expand
    ],
)
def test_type_names_that_collide_after_nfkc_or_casefold_never_make_a_second_table(
    tmp_path: Path, name: str
) -> None:
    with Workbench(tmp_path / "n.duckdb", user="u") as wb:
        wb.ingest([fa("k1", a=1)])
        if name == "Trip":
            wb.ingest([fa("k2", type=name, a=2)])
            assert wb.sql("SELECT count(*) FROM trip").rows == [(2,)]
            return
        if name in ("ＴＲＩＰ", "Trip\u200b"):  # Trip in other letters, or with an invisible one
            with pytest.raises(EventError, match=r"'Trip'|invisible"):
                wb.ingest([fa("k2", type=name, a=2)])
            assert wb.sql_tables() == {"Trip": ("Trip", "Trip_history")}
            return
        # another name (names.py keeps it as written): its own table, Trip's keeps its record
        wb.ingest([fa("k2", type=name, a=2)])
        assert wb.sql_tables()[name] == (name, f"{name}_history")
        assert wb.sql("SELECT count(*) FROM Trip").rows == [(1,)]


@pytest.mark.parametrize(
    ("existing", "new"),
    [("Trip", "Trip_History"), ("Trip_HISTORY", "TRIP"), ("Note", "UAC_TABLES")],
)
def test_history_and_index_names_clash_in_any_case(tmp_path: Path, existing: str, new: str) -> None:
    with Workbench(tmp_path / "h.duckdb", user="u") as wb:
        wb.ingest([fa("k1", type=existing, a=1)])
        with pytest.raises(EventError, match="field 'type'"):
            wb.ingest([fa("k2", type=new, a=2)])
        assert wb.store.last_seq == 3


def test_a_new_type_named_like_a_renamed_table_does_not_read_another_type(db: Path) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([fa("k1", a=1)])
    append_as_before(db, "u", [fa("k2", type="TRIP", b=2)])
    with Workbench(db, user="u") as wb:
        try:
            wb.ingest([fa("k3", type="Trip_2", c=3)])
        except EventError as exc:
            assert "TRIP" in str(exc)
            return
        assert wb.sql("SELECT key FROM Trip_2").rows == [("k3",)]


# == 6. two workbenches of one user in one process ===========================================


def test_two_workbenches_of_one_user_cannot_log_the_same_add_twice(db: Path) -> None:
    a, b = Workbench(db, user="u"), Workbench(db, user="u")
    try:
        a.ingest([fa("k1", n=1)])
        with pytest.raises(UacError):
            b.ingest([fa("k1", n="one")])
    finally:
        a.close()
        b.close()
    with Workbench(db, user="u") as wb:
        assert wb.verify().ok and wb.state.get("Trip", "k1").n == 1  # type: ignore[union-attr]


def test_two_workbenches_of_one_user_cannot_pass_the_types_limit_together(db: Path) -> None:
    small = Limits(types=3)
    a, b = Workbench(db, user="u", limits=small), Workbench(db, user="u", limits=small)
    try:
        a.ingest([fa("k", type="A", n=1), fa("k", type="B", n=1)])
        with pytest.raises(EventError, match="more than the 3"):
            b.ingest([fa("k", type="C", n=1), fa("k", type="D", n=1)])
    finally:
        a.close()
        b.close()


def test_threads_ingesting_on_two_workbenches_while_a_third_forgets(db: Path) -> None:
    with Workbench(db, user="alice") as wb:
        wb.ingest([fa(f"s{i}", note=f"{SECRET}{i:02d}") for i in range(10)])
    with Workbench(db, user="bob") as wb:
        wb.ingest([fa("b0", note="x")])
    a, b, c = Workbench(db, user="alice"), Workbench(db, user="bob"), Workbench(db, user="alice")
    errors: list[BaseException] = []

    def ingest(wb: Workbench, who: str) -> None:
        try:
            for i in range(25):
                wb.ingest([fa(f"new-{who}-{i}", ts="2025-02-01", note="plain")])
        except BaseException as exc:
            errors.append(exc)

    def forget() -> None:
        try:
            for i in range(10):
                c.forget(text=f"{SECRET}{i:02d}")
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=ingest, args=(a, "a")),
        threading.Thread(target=ingest, args=(b, "b")),
        threading.Thread(target=forget),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    for wb in (a, b, c):
        wb.close()
    assert errors == []
    with Workbench(db, user="alice") as wb:
        report = wb.verify(all_users=True)
        assert report.ok, report.problem
        assert report.forgotten == 10
        assert sorted(r.key for r in wb.state.all("Trip")) == sorted(
            f"new-a-{i}" for i in range(25)
        )
    assert raw_count(db) == 0


def test_a_second_process_cannot_write_while_one_holds_the_store(db: Path, tmp_path: Path) -> None:
    f = jsonl(tmp_path / "e.jsonl", [fa("k9", n=9)])
    short = {**os.environ, "UAC_LOCK_TIMEOUT": "0.2"}
    with Workbench(db, user="u") as wb:
        wb.ingest([fa("k1", n=1)])
        with wb.store.hold():  # an operation running: the file is held until it ends
            wb.store.con.execute("SELECT 1")
            for args in (
                ["ingest", str(f)],
                ["checkpoint"],
                ["forget", "--record", "Trip", "k1"],
            ):
                out = cli(
                    *args, "--db", str(db), "--user", "u", cwd=tmp_path, env=short, process=True
                )
                line = one_line_error(out)
                assert f"process {os.getpid()}" in line and "close that notebook" in line
            assert wb.store.last_seq == 3
        # between operations the workbench holds nothing: the terminal writes, it sees that
        done = cli("ingest", str(f), "--db", str(db), "--user", "u", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert wb.eval("sorted(r.key for r in user.all('Trip'))") == ["k1", "k9"]


# == 7. kill -9 during checkpoint and extract ==============================================

CHECKPOINT_LOOP = """
import sys
from uac_kernel.workbench import Workbench
wb = Workbench(sys.argv[1], user="u")
i = 0
print("go", flush=True)
while True:
    wb.ingest([{"kind": "fact", "ts": "2025-06-01", "op": "update", "type": "Trip",
                "key": f"k{i % 400}", "fields": {"n": i}}])
    wb.checkpoint()
    i += 1
"""


@pytest.mark.parametrize("after", [0.3, 0.9, 1.7])
def test_kill_9_during_ingest_and_checkpoint_leaves_a_store_that_verifies(
    db: Path, tmp_path: Path, after: float
) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([fa(f"k{i}", n=0, note="x" * 50) for i in range(400)])
        wb.checkpoint()
    proc = subprocess.Popen(
        [sys.executable, "-c", CHECKPOINT_LOOP, str(db)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"go"
    time.sleep(after)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    out = cli("verify", "--db", str(db), cwd=tmp_path)
    assert out.returncode == 0 and "hash chains intact" in out.stdout, out.stderr
    again = cli("checkpoint", "--db", str(db), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    with Workbench(db, user="u") as wb:
        assert len(wb.state.all("Trip")) == 400
        assert wb.verify().ok


EXTRACT = """
import sys
from uac_kernel.model.client import ModelSettings
from uac_kernel.workbench import Workbench
wb = Workbench(sys.argv[1], user="u",
               model=ModelSettings(model="stand-in", base_url=sys.argv[2], max_retries=0))
print("go", flush=True)
print(wb.extract(progress=False).summary(), flush=True)
"""


@pytest.mark.parametrize("moment", ["waiting-for-the-model", "while-dripping-the-answer"])
def test_kill_9_during_extract_then_rerun_finishes(
    db: Path, tmp_path: Path, server: ChatServer, moment: str
) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([utt("I booked a trip to Oslo for May.", "chat#1")])
    good = extraction(op("add", "Trip", "oslo", ["chat#1"], destination="Oslo"))
    if moment == "waiting-for-the-model":
        server.enqueue(Reply(good, delay=30))
    else:
        server.enqueue(Reply(good, drip=0.05))
    proc = subprocess.Popen(
        [sys.executable, "-c", EXTRACT, str(db), server.base_url],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"go"
    time.sleep(2.0)
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert cli("verify", "--db", str(db), cwd=tmp_path).returncode == 0
    server.enqueue(good)
    with Workbench(db, user="u", model=settings(server)) as wb:
        assert wb.state.get("Trip", "oslo") is None  # nothing half-applied
        report = wb.extract(progress=False)
        assert (report.applied, report.pending) == (1, 0)
        assert wb.state.get("Trip", "oslo").destination == "Oslo"  # type: ignore[union-attr]
        assert wb.verify().ok


# == 8. verify and heads on thousands of users ==============================================


@pytest.fixture(scope="module")
def many_users(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("many") / "many.duckdb"
    store = Store(path)
    ts = datetime(2025, 1, 1)
    events = [
        NewEvent(ts, "utterance", f"user-{u:04d}", {"speaker": "user", "text": f"hi {i}"}, f"s{i}")
        for i in range(3)
        for u in range(2500)
    ]
    store.append(events)
    store.close()
    return path


def test_verify_user_and_head_on_2500_users(many_users: Path, tmp_path: Path) -> None:
    heads = cli("head", "--db", str(many_users), cwd=tmp_path)
    assert heads.returncode == 0 and len(heads.stdout.splitlines()) == 2500
    kept = tmp_path / "heads.txt"
    kept.write_text(heads.stdout)
    one = cli("verify", "--db", str(many_users), "--user", "user-1234", cwd=tmp_path)
    assert one.returncode == 0 and "3 events" in one.stdout and "1 user(s)" in one.stdout
    both = cli(
        "verify", "--db", str(many_users), "--user", "user-0007", "--head", str(kept), cwd=tmp_path
    )
    assert both.returncode == 0 and "passes through 1 kept head" in both.stdout, both.stderr
    every = cli("verify", "--db", str(many_users), "--head", str(kept), cwd=tmp_path)
    assert every.returncode == 0 and "7500 events" in every.stdout
    assert "2500 user(s)" in every.stdout and "passes through 2500 kept head" in every.stdout


def test_a_head_of_a_user_not_in_the_store_among_thousands(
    many_users: Path, tmp_path: Path
) -> None:
    line = cli("head", "--db", str(many_users), "--user", "user-0001", cwd=tmp_path).stdout.strip()
    out = cli(
        "verify", "--db", str(many_users), "--user", "user-9999", "--head", line, cwd=tmp_path
    )
    assert "user-9999" in one_line_error(out)


def test_a_kept_head_then_forget_of_the_event_at_the_head_still_verifies(
    db: Path, tmp_path: Path
) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([fa("k1", note="plain"), fa("k2", note=SECRET)])
        wb.checkpoint()
        head = wb.head()
    kept = tmp_path / "head.txt"
    kept.write_text(head + "\n")
    out = cli("forget", "--db", str(db), "--user", "u", "--record", "Trip", "k2", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert raw_count(db) == 0
    ok = cli("verify", "--db", str(db), "--user", "u", "--head", str(kept), cwd=tmp_path)
    assert ok.returncode == 0 and "passes through 1 kept head" in ok.stdout, ok.stderr
    assert "erased by forget" in ok.stdout


# == 9. migration of a hand-made pre-issue-12 store ==========================================

ODD_USER = "ü\u202eser\x00with\nnewline"


def _old_store(path: Path) -> None:
    """A store as uac wrote it before issue 12: one chain across all users over the payload,
    checkpoints and model calls without hashes; users interleave."""
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE uac_migrations (name VARCHAR NOT NULL, applied_at TIMESTAMP)")
    for name, fn in MIGRATIONS[:3]:
        fn(con)
        con.execute("INSERT INTO uac_migrations VALUES (?, current_timestamp)", [name])
    prev = "0" * 64
    rows = [
        (ODD_USER, "utterance", {"speaker": "user", "text": f"I take {SECRET} daily"}, "c#1"),
        ("plain", "utterance", {"speaker": "user", "text": "hello"}, "p#1"),
        (ODD_USER, "schema", {"type": "Med"}, None),
        (ODD_USER, "schema", {"type": "Med", "field": "name", "ftype": "str"}, None),
        (
            ODD_USER,
            "fact",
            {
                "op": "add",
                "type": "Med",
                "key": "m1",
                "fields": {"name": SECRET},
                "derived_from": ["c#1"],
            },
            "f#1",
        ),
        ("plain", "utterance", {"speaker": "user", "text": "bye"}, "p#2"),
    ]
    for seq, (user, kind, payload, src) in enumerate(rows, 1):
        rec = datetime(2025, 6, 1, 12, 0, seq)
        ts = datetime(2025, 1, seq)
        text = json.dumps(payload, separators=(",", ":"), sort_keys=True)
        h = _v1_event_hash(prev, seq, rec, ts, kind, user, src, text)
        con.execute(
            "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [seq, rec, ts, kind, user, src, text, h],
        )
        prev = h
    con.execute(
        "INSERT INTO model_calls VALUES (1, ?, ?, 'extraction', 'm', '', 'k1', ?, ?, ?, 10, 5, "
        "12.5, 'ok', '')",
        [datetime(2025, 6, 1, 12, 0, 4), ODD_USER, f'{{"q": "{SECRET}"}}', "{}", "{}"],
    )
    con.execute(
        "INSERT INTO checkpoints VALUES (?, 1, 5, ?, 1, 1)", [ODD_USER, datetime(2025, 6, 2)]
    )
    con.execute(
        "INSERT INTO checkpoint_segments VALUES (?, 1, '0', ?)", [ODD_USER, f"# {SECRET}\n"]
    )
    con.close()


def test_an_old_store_with_an_odd_user_id_migrates_verifies_and_forgets(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.duckdb"
    _old_store(path)
    store = Store(path)  # migrates
    report = verify(store)
    assert report.ok, report.problem
    assert (report.events, report.calls, report.checkpoints, report.users) == (6, 1, 1, 2)
    for user in (ODD_USER, "plain"):
        assert verify(store, user).ok
    store.close()
    with Workbench(path, user=ODD_USER) as wb:
        assert wb.state.get("Med", "m1").name == SECRET  # type: ignore[union-attr]
        wb.ingest([fa("k", type="Trip", n=1)])
        plan = wb.forget(text=SECRET)
        assert plan.calls == [1] and len(plan.events) == 2
        assert wb.verify(all_users=True).ok
    assert raw_count(path) == 0
    heads = cli("head", "--db", str(path), cwd=tmp_path)
    assert heads.returncode == 0 and len(heads.stdout.splitlines()) == 2
    (tmp_path / "h.txt").write_text(heads.stdout)
    out = cli("verify", "--db", str(path), "--head", str(tmp_path / "h.txt"), cwd=tmp_path)
    assert out.returncode == 0 and "passes through 2 kept head" in out.stdout, out.stderr


# == 10. forget: where the text hides ========================================================


def test_a_text_split_across_two_utterances_is_not_found_and_the_dry_run_says_so(
    db: Path, tmp_path: Path
) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([utt("my diagnosis is", "c#1"), utt("Quorvex syndrome", "c#2")])
    out = cli(
        "forget", "--db", str(db), "--text", "diagnosis is Quorvex", "--dry-run", cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "nothing of u matches; nothing to forget\n"
    with Workbench(db, user="u") as wb:
        assert wb.forget(text="diagnosis is Quorvex").empty
        assert len(wb.log(kinds=["utterance"])) == 2


@pytest.mark.parametrize("where", ["field-name", "type-name"])
def test_forget_of_a_text_in_a_name_says_the_name_stays(db: Path, where: str) -> None:
    ev = fa("k1", quorvexalin_dose=5) if where == "field-name" else fa("k1", type=SECRET, x=1)
    with Workbench(db, user="u") as wb:
        wb.ingest([ev])
        plan = wb.forget(text=SECRET, dry_run=True)
        shown = " ".join(plan.lines()) + plan.summary()
        assert "stays" in shown or "stay" in shown


@rule(watch=["Trip"], severity="warning", category="travel")
def quorvexalin_warning(user: Any) -> Any:
    for t in user.all("Trip"):
        yield Finding(f"{SECRET} warning for this trip", [t])


def test_a_text_in_an_alert_message_does_not_come_back_at_once(db: Path) -> None:
    with Workbench(db, user="u", rules=[quorvexalin_warning]) as wb:
        wb.ingest([fa("k1", destination="Oslo")])
        assert [a.message for a in wb.alerts()] == [f"{SECRET} warning for this trip"]
        wb.forget(text=SECRET)
        assert wb.alerts() == []
    assert raw_count(db) == 0


@rule(watch=["Trip"], severity="info", category="travel")
def silent(user: Any) -> Any:
    yield from ()


def test_a_text_only_in_a_rules_source_leaves_the_file(db: Path) -> None:
    source = f"def silent(user):\n    # {SECRET}\n    yield from ()\n"
    with Workbench(db, user="u") as wb:
        wb.ingest([fa("k1", destination="Oslo")])
        wb.define_rule(silent, source)
        wb.checkpoint()
    assert raw_count(db) > 0
    with Workbench(db, user="u", rules=[]) as wb:
        plan = wb.forget(text=SECRET)
        assert [e.kind for e in plan.events] == ["rule"]
        assert SECRET not in wb.code() and wb.verify().ok
    assert raw_count(db) == 0


def test_a_held_reviews_reason_goes_with_the_record_it_names(
    tmp_path: Path, server: ChatServer
) -> None:
    db = tmp_path / "r.duckdb"
    with Workbench(db, user="u", model=settings(server)) as wb:
        wb.ingest([fa(f"trip-{SECRET.lower()}", destination="Oslo")])
        wb.ingest([utt("I love rainy days.", "chat#1")])
        server.enqueue(extraction(op("retract", "Trip", f"trip-{SECRET.lower()}", ["chat#1"])))
        assert wb.extract(progress=False).held == 1
        (held,) = wb.log(kinds=["review"])
        assert SECRET.lower() in held.payload["reason"]
        wb.forget(type="Trip", key=f"trip-{SECRET.lower()}")
        assert wb.review() == [] and wb.verify().ok
    assert raw_count(db, SECRET.lower()) == 0


def test_a_text_in_an_extraction_marker_is_erased(tmp_path: Path, server: ChatServer) -> None:
    db = tmp_path / "x.duckdb"
    source = f"chat-{SECRET}#1"
    with Workbench(db, user="u", model=settings(server)) as wb:
        wb.ingest([utt("I booked a trip to Oslo.", source)])
        server.enqueue(extraction(op("add", "Trip", "oslo", [source], destination="Oslo")))
        assert wb.extract(progress=False).applied == 1
        wb.forget(text=SECRET)
        assert wb.verify().ok
    assert raw_count(db) == 0


def test_forget_then_reingest_of_the_same_file_brings_nothing_back(
    db: Path, tmp_path: Path
) -> None:
    f = jsonl(
        tmp_path / "h.jsonl",
        [
            utt(f"I am allergic to {SECRET}.", "c#1"),
            {
                **fa("a1", type="Allergy", substance=SECRET),
                "source": "f#1",
                "derived_from": ["c#1"],
            },
            {**fa("t1", destination="Oslo"), "source": "f#2"},
        ],
    )
    assert cli("ingest", str(f), "--db", str(db), cwd=tmp_path).returncode == 0
    assert cli("forget", "--db", str(db), "--text", SECRET, cwd=tmp_path).returncode == 0
    again = cli("ingest", str(f), "--db", str(db), cwd=tmp_path)
    assert again.returncode == 0 and "0 events appended, 3 already in the log" in again.stdout
    assert raw_count(db) == 0
    assert cli("verify", "--db", str(db), cwd=tmp_path).returncode == 0


def test_forgetting_a_record_another_records_alert_cites(db: Path) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest(
            [
                fa("allergy-1", ts="2025-02-01", type="Allergy", substance="penicillin",
                   severity="severe"),
                fa("med-1", ts="2025-11-01", type="Medication", name="amoxicillin",
                   active=True, start="2025-11-01"),
            ]
        )  # fmt: skip
        raised = wb.alerts()
        assert raised and all(
            {("Allergy", "allergy-1"), ("Medication", "med-1")}
            <= {(e.type, e.key) for e in a.evidence}
            for a in raised
            if a.category != "rule_error"
        )
        wb.forget(type="Medication", key="med-1")
        assert wb.alerts() == []
        assert wb.state.get("Allergy", "allergy-1") is not None
        assert wb.verify().ok
    assert raw_count(db, "amoxicillin") == 0


def test_forgetting_everything_of_a_user_leaves_nothing_but_structure(db: Path) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([utt(f"{SECRET} one", "c#1"), fa("k1", note=f"{SECRET} two")])
        wb.checkpoint()
    with Workbench(db, user="other") as wb:
        wb.ingest([utt("untouched", "o#1")])
    with Workbench(db, user="u") as wb:
        wb.forget(source="c#1")
        wb.forget(type="Trip", key="k1")
        assert wb.state.all("Trip") == [] and wb.log(kinds=["utterance"]) == []
        assert SECRET not in wb.code()
        assert wb.verify(all_users=True).ok
    assert raw_count(db) == 0
    with Workbench(db, user="other") as wb:
        assert [e.payload["text"] for e in wb.log(kinds=["utterance"])] == ["untouched"]


def test_forget_on_a_memory_store(tmp_path: Path) -> None:
    with Workbench(":memory:", user="u") as wb:
        wb.ingest([utt(f"about {SECRET}", "c#1"), fa("k1", note=SECRET)])
        wb.checkpoint()
        plan = wb.forget(text=SECRET.upper())
        assert len(plan.events) == 2
        assert wb.verify().ok and wb.state.all("Trip") == []
        assert SECRET not in wb.code() and wb.search_index.search(SECRET, 5) == []


def test_forget_of_nothing_in_a_read_only_workbench_is_one_line(db: Path) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([fa("k1", note=SECRET)])
    with (
        Workbench(db, user="u", read_only=True) as ro,
        pytest.raises(StoreError, match="open read-only"),
    ):
        ro.forget(text="nothing-like-this")


def test_a_read_only_workbench_beside_a_writer_never_rewrites_the_file(db: Path) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([fa("k1", note=SECRET)])
    writer = Workbench(db, user="u")
    ro = Workbench(db, user="u", read_only=True)
    try:
        inode = db.stat().st_ino
        with pytest.raises(StoreError, match="open read-only"):
            ro.forget(text="nothing-like-this")
        assert db.stat().st_ino == inode
    finally:
        ro.close()
        writer.close()


def test_forget_of_a_match_in_a_read_only_workbench_changes_nothing(db: Path) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([fa("k1", note=SECRET)])
    before = files_digest(db)
    with (
        Workbench(db, user="u", read_only=True) as ro,
        pytest.raises(StoreError, match="open read-only; open it without read_only"),
    ):
        ro.forget(text=SECRET)
    assert files_digest(db) == before


def test_the_text_is_in_the_raw_files_before_and_in_neither_after(db: Path, tmp_path: Path) -> None:
    long_text = f"{SECRET} " + "and then some " * 40
    with Workbench(db, user="u") as wb:
        wb.ingest([utt(long_text, "c#1"), fa("k1", note=long_text)])
        wb.checkpoint()
        wb.ingest([fa("k1", op="update", ts="2025-02-01", note=f"no longer {SECRET}")])
        wb.checkpoint()
        assert raw_count(db) >= 4  # payloads and code, in the file or its write-ahead log
        wb.forget(text=SECRET)
        assert raw_count(db) == 0 and not Path(f"{db}.compact").exists()
    assert raw_count(db) == 0


# -- a peer workbench of the same user in the same process, after a forget ---------------------


def _peer_after_forget(db: Path) -> Workbench:
    a = Workbench(db, user="u")
    a.ingest([fa("k1", note=SECRET), fa("k2", note="plain")])
    a.checkpoint()
    with Workbench(db, user="u") as c:
        c.forget(text=SECRET)
    assert raw_count(db) == 0
    return a


def test_a_peer_workbench_no_longer_answers_with_a_forgotten_text(db: Path) -> None:
    a = _peer_after_forget(db)
    try:
        assert a.eval("[t.note for t in user.all(Trip)]") == ["plain"]
    finally:
        a.close()


def test_a_peer_workbench_checkpoint_does_not_write_a_forgotten_text_back(db: Path) -> None:
    a = _peer_after_forget(db)
    try:
        a.ingest([fa("k3", ts="2025-02-01", note="new")])
        assert SECRET not in a.checkpoint().code
    finally:
        a.close()
    assert raw_count(db) == 0


def test_a_peer_workbench_cannot_update_a_forgotten_record(db: Path) -> None:
    a = _peer_after_forget(db)
    try:
        with pytest.raises(EventError, match=r"does not exist|was retracted|forgotten"):
            a.ingest([fa("k1", op="update", ts="2025-03-01", note="changed")])
    finally:
        a.close()
    with Workbench(db, user="u") as wb:
        assert wb.verify().ok


# == 11. a fresh clone ========================================================================


def test_a_fresh_clone_runs_the_demo_then_verifies_and_forgets(tmp_path: Path) -> None:
    clone = tmp_path / "x"
    subprocess.run(
        ["git", "clone", "-q", str(REPO), str(clone)], check=True, capture_output=True, timeout=120
    )
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UAC_DB", "UAC_USER")}
    demo = subprocess.run(
        ["./scripts/demo"], cwd=clone, capture_output=True, text=True, timeout=900, env=env
    )
    assert demo.returncode == 0, demo.stderr[-2000:]
    store = clone / "uac-demo.duckdb"
    uac = [str(clone / ".venv" / "bin" / "uac"), "--db", str(store)]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*uac, *args], cwd=clone, capture_output=True, text=True, timeout=600)

    ok = run("verify")
    assert ok.returncode == 0 and "hash chains intact" in ok.stdout, ok.stderr
    assert store.read_bytes().count(b"penicillin") > 0
    dry = run("forget", "--text", "penicillin", "--dry-run")
    assert dry.returncode == 0 and "penicillin" in dry.stdout.lower()
    gone = run("forget", "--text", "penicillin")
    assert gone.returncode == 0, gone.stderr
    assert store.read_bytes().lower().count(b"penicillin") == 0
    again = run("verify")
    assert again.returncode == 0 and "erased by forget" in again.stdout, again.stderr
    shutil.rmtree(clone, ignore_errors=True)
