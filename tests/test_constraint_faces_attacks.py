"""Adversarial cases against the faces of constraints: how they come in (``uac constrain FILE``,
``uac ingest`` of constraint events mixed with facts, ``%%uac constraint`` cells, a model's
proposals through the real ``openai`` client against ``ChatServer``) and how they go out
(``uac constraints``, ``uac alerts``, ``uac sql``, the alert inspector's state, checkpoint code
imported in a fresh interpreter, ``%%uac cell`` edits), plus ``forget``/``verify`` after
constraint events and a second process reading while one appends.

Real parts only: the CLI's ``main`` in process (and as a subprocess where a second process or a
fresh interpreter is the point), real DuckDB files in ``tmp_path``, a real IPython shell, the
real ``openai`` client. Each case asserts the exact safe outcome: a one-line error naming the
file (or cell), the line or item and the field, saying what to do; nothing appended on failure;
no ``rule_error`` alert; no exception escaping; no code executed from data. Defects found are
strict xfails with the defect in one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import fact

from uac_kernel.cli import main
from uac_kernel.workbench import Workbench

UAC = [sys.executable, "-m", "uac_kernel.cli"]
TAX = {
    "kind": "obligation",
    "title": "File the tax return",
    "due": {"date": "2025-04-15"},
    "lead_days": 30,
    "done_by": {"type": "TaxReturn"},
}
NASTY = "'''\"\"\"\\ \\n \n __import__('os').system('touch CANARY') {0} </script><img src=x onerror=alert(1)>"


def clock(ts: str, source: str | None = None, text: str = "hello") -> dict[str, Any]:
    return {"kind": "utterance", "ts": ts, "speaker": "user", "text": text, "source": source or f"u@{ts}"}


def cev(ts: str, op: str, key: str, body: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    ev: dict[str, Any] = {"kind": "constraint", "ts": ts, "op": op, "key": key, **extra}
    if body is not None:
        ev["constraint"] = body
    return ev


def jsonl(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path


def snapshot(db: Path) -> list[tuple[Any, ...]]:
    """Every event of the store, erased ones too: seq, kind, payload, hash."""
    with Workbench(db, read_only=True) as wb:
        return [(e.seq, e.kind, json.dumps(e.payload, sort_keys=True), e.hash) for e in wb.store.events(erased=True)]


def base_store(tmp_path: Path) -> Path:
    """A store with a clock on 2025-04-01 and the tax obligation in force (key ``tax``)."""
    db = tmp_path / "s.duckdb"
    with Workbench(db) as wb:
        wb.ingest([clock("2025-04-01T09:00:00")])
        wb.constrain(TAX, key="tax")
    return db


class Run:
    def __init__(self, code: int, out: str, err: str):
        self.code, self.out, self.err = code, out, err


def uac(capsys: pytest.CaptureFixture[str], db: Path, *args: str) -> Run:
    """``uac --db DB ARGS`` in process; an exception escaping ``main`` fails the case."""
    capsys.readouterr()
    code = main([*args[:1], "--db", str(db), *args[1:]])
    got = capsys.readouterr()
    return Run(code, got.out, got.err)


def one_line_error(run: Run, *words: str) -> str:
    assert run.code == 1, (run.out, run.err)
    lines = run.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("uac: error: "), run.err
    assert "Traceback" not in run.err
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def no_rule_errors(db: Path) -> None:
    with Workbench(db, read_only=True) as wb:
        assert not [a for a in wb.alerts() if a.rule == "rule_error" or "rule_error" in a.rule]


# -- uac constrain FILE: what a file may hold --------------------------------------------------

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)

BAD_FILES: list[Any] = [
    pytest.param("bomb.yaml", BOMB.encode(), ["bomb.yaml", "line 2", "alias"], id="yaml-billion-laughs"),
    pytest.param(
        "alias.yaml",
        b"t: &t File it\nx:\n  kind: obligation\n  title: *t\n  due: {date: 2025-04-15}\n",
        ["alias.yaml", "alias"],
        id="yaml-single-alias",
    ),
    pytest.param(
        "tag.yaml",
        b"kind: obligation\ntitle: !!python/object/apply:os.system ['touch CANARY']\ndue: {date: 2025-04-15}\n",
        ["tag.yaml", "line 2", "invalid YAML"],
        id="python-apply-tag",
    ),
    pytest.param(
        "tag2.yaml",
        b"!!python/object/new:subprocess.Popen [['touch', 'CANARY']]\n",
        ["tag2.yaml", "invalid YAML"],
        id="python-new-tag-toplevel",
    ),
    pytest.param(
        "name.yaml",
        b"kind: obligation\ntitle: !!python/name:os.system\ndue: {date: 2025-04-15}\n",
        ["name.yaml", "invalid YAML"],
        id="python-name-tag",
    ),
    pytest.param("huge.json", b'{"kind": "obligation", "title": "' + b"x" * (1 << 20) + b'"}', ["huge.json", "at most"], id="huge-file"),
    pytest.param("scalar.yaml", b"42\n", ["scalar.yaml"], id="scalar-int"),
    pytest.param("str.yaml", b"just some words\n", ["str.yaml"], id="scalar-string"),
    pytest.param("null.yaml", b"~\n", ["null.yaml"], id="yaml-null"),
    pytest.param("empty.yaml", b"", ["empty.yaml"], id="empty-file"),
    pytest.param("blank.json", b"   \n\n", ["blank.json"], id="whitespace-only"),
    pytest.param("emptylist.json", b"[]", ["emptylist.json", "empty list"], id="empty-list"),
    pytest.param(
        "tabs.yaml",
        b"kind: obligation\ntitle: x\ndue:\n\tdate: 2025-04-15\n",
        ["tabs.yaml", "line 4", "invalid YAML"],
        id="tab-indentation",
    ),
    pytest.param(
        "latin1.yaml",
        "kind: obligation\ntitle: Caf\xe9 bill\ndue: {date: 2025-04-15}\n".encode("latin-1"),
        ["latin1.yaml", "UTF-8"],
        id="non-utf8-bytes",
    ),
    pytest.param(
        "nul.yaml",
        b"kind: obligation\ntitle: a\x00b\ndue: {date: 2025-04-15}\n",
        ["nul.yaml", "invalid YAML"],
        id="nul-byte-yaml",
    ),
    pytest.param(
        "events.jsonl",
        (json.dumps(cev("2025-04-01", "add", "k", TAX)) + "\n" + json.dumps(cev("2025-04-01", "add", "j", TAX)) + "\n").encode(),
        ["events.jsonl", "line 2", "invalid JSON"],
        id="jsonl-of-events",
    ),
    pytest.param(
        "event.json",
        json.dumps(cev("2025-04-01", "add", "k", TAX)).encode(),
        ["event.json", "kind", "'constraint'"],
        id="one-constraint-event-object",
    ),
    pytest.param(
        "item3.yaml",
        ("- " + json.dumps(TAX) + "\n- " + json.dumps(TAX) + "\n- " + json.dumps({**TAX, "lead_days": "soon"}) + "\n").encode(),
        ["item3.yaml", "item 3", "lead_days"],
        id="third-item-bad-nothing-of-the-first-two",
    ),
    pytest.param(
        "mapbad.yaml",
        b"ok:\n  kind: obligation\n  title: ok\n  due: {date: 2025-04-15}\nbad:\n  kind: obligation\n  title: bad\n  due: {fields: ['../etc']}\n",
        ["mapbad.yaml", "'bad'", "due.fields"],
        id="mapping-bad-field-name",
    ),
    pytest.param(
        "kind.json",
        json.dumps({"kind": "run_code", "title": "x", "code": "__import__('os').system('touch CANARY')"}).encode(),
        ["kind.json", "kind"],
        id="unknown-kind-with-code",
    ),
    pytest.param(
        "extra.json",
        json.dumps({**TAX, "__class__": "os.system"}).encode(),
        ["extra.json", "__class__"],
        id="extra-dunder-field",
    ),
    pytest.param(
        "emptykey.yaml",
        b"'':\n  kind: obligation\n  title: x\n  due: {date: 2025-04-15}\n",
        ["emptykey.yaml", "key"],
        id="mapping-empty-key",
        marks=pytest.mark.xfail(
            strict=True,
            reason="a bad key of a mapping file is reported as 'constrain:1: field key', naming neither the file nor the item",
        ),
    ),
    pytest.param(
        "longkey.yaml",
        ("k" * 201 + ":\n  kind: obligation\n  title: x\n  due: {date: 2025-04-15}\n").encode(),
        ["longkey.yaml", "key"],
        id="mapping-key-over-200",
        marks=pytest.mark.xfail(
            strict=True,
            reason="a bad key of a mapping file is reported as 'constrain:1: field key', naming neither the file nor the item",
        ),
    ),
    pytest.param(
        "complexkey.yaml",
        b"? [a, b]\n: {kind: obligation, title: x, due: {date: 2025-04-15}}\n",
        ["complexkey.yaml", "invalid YAML"],
        id="yaml-complex-key",
    ),
    pytest.param(
        "surrogate.json",
        b'{"kind": "obligation", "title": "bad \\ud800 half", "due": {"date": "2025-04-15"}}',
        ["surrogate.json", "title"],
        id="lone-surrogate-title",
    ),
    pytest.param(
        "inf.yaml",
        b"kind: window_limit\ntitle: x\nsubject: {type: Expense}\nmeasure: sum\nperiod: month\nlimit: .inf\n",
        ["inf.yaml", "limit"],
        id="yaml-infinite-limit",
    ),
    pytest.param(
        "deep.json",
        b"[" * 200_000 + b"]" * 200_000,
        ["deep.json"],
        id="json-200k-nesting",
        marks=pytest.mark.xfail(
            strict=True,
            reason="deeply nested JSON raises RecursionError out of read_constraints: a traceback, not a one-line error",
        ),
    ),
    pytest.param(
        "deep.yaml",
        b"a: " + b"[" * 100_000 + b"]" * 100_000 + b"\n",
        ["deep.yaml"],
        id="yaml-100k-flow-nesting",
        marks=pytest.mark.xfail(
            strict=True,
            reason="deeply nested YAML raises RecursionError out of PyYAML's composer: a traceback, not a one-line error",
        ),
    ),
    pytest.param(
        "deepblock.yaml",
        b"".join(b"  " * i + b"- \n" for i in range(3000)),
        ["deepblock.yaml"],
        id="yaml-3000-block-nesting",
    ),
]


@pytest.mark.parametrize(("name", "data", "words"), BAD_FILES)
def test_a_bad_constraint_file_is_one_line_and_appends_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    name: str, data: bytes, words: list[str],
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    db = base_store(tmp_path)
    before = snapshot(db)
    (tmp_path / name).write_bytes(data)
    try:
        run = uac(capsys, db, "constrain", name)
    except RecursionError:
        pytest.fail("RecursionError escaped main")
    line = one_line_error(run, *words)
    assert len(line) < 2000  # a one-line message, not the file echoed back
    assert snapshot(db) == before
    assert not (tmp_path / "CANARY").exists()


def test_a_bad_file_does_not_create_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "new.duckdb"
    (tmp_path / "c.yaml").write_text("kind: obligation\ntitle: x\n", encoding="utf-8")
    one_line_error(uac(capsys, db, "constrain", str(tmp_path / "c.yaml")), "due")
    assert not db.exists()


GOOD_FILES: list[Any] = [
    pytest.param("bom.json", b"\xef\xbb\xbf" + json.dumps({**TAX, "title": "Pay rent"}).encode(), ["pay-rent"], id="utf8-bom-json"),
    pytest.param(
        "bom.yaml",
        b"\xef\xbb\xbfkind: obligation\ntitle: Pay rent\ndue: {date: 2025-04-03}\n",
        ["pay-rent"],
        id="utf8-bom-yaml",
    ),
    pytest.param(
        "crlf.yaml",
        b"kind: obligation\r\ntitle: Pay rent\r\ndue: {date: 2025-04-03}\r\n",
        ["pay-rent"],
        id="crlf-line-ends",
    ),
    pytest.param(
        "map.yaml",
        b"rent:\n  kind: obligation\n  title: Pay rent\n  due: {date: 2025-04-03}\n"
        b"gas:\n  kind: obligation\n  title: Pay gas\n  due: {date: 2025-04-04}\n",
        ["rent", "gas"],
        id="mapping-of-two",
    ),
    pytest.param(
        "datekey.yaml",
        b"2025-04-03:\n  kind: obligation\n  title: Pay rent\n  due: {date: 2025-04-03}\n",
        ["2025-04-03"],
        id="yaml-date-as-key",
    ),
]


@pytest.mark.parametrize(("name", "data", "keys"), GOOD_FILES)
def test_a_good_constraint_file_in_odd_dress_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, data: bytes, keys: list[str]
) -> None:
    db = base_store(tmp_path)
    (tmp_path / name).write_bytes(data)
    run = uac(capsys, db, "constrain", str(tmp_path / name))
    assert run.code == 0, run.err
    with Workbench(db, read_only=True) as wb:
        assert [k for k in wb.state.constraints if k != "tax"] == keys
    no_rule_errors(db)


DUPLICATES: list[Any] = [
    pytest.param(
        "dup.yaml",
        b"rent:\n  kind: obligation\n  title: Pay rent\n  due: {date: 2025-04-03}\n"
        b"rent:\n  kind: obligation\n  title: Pay gas\n  due: {date: 2025-04-04}\n",
        id="yaml-duplicate-mapping-key",
    ),
    pytest.param(
        "dup.json",
        b'{"rent": {"kind": "obligation", "title": "Pay rent", "due": {"date": "2025-04-03"}},'
        b' "rent": {"kind": "obligation", "title": "Pay gas", "due": {"date": "2025-04-04"}}}',
        id="json-duplicate-mapping-key",
    ),
    pytest.param(
        "dupfield.yaml",
        b"kind: obligation\ntitle: Pay rent\ndue: {date: 2025-04-03}\ndue: {date: 2026-04-03}\n",
        id="yaml-duplicate-field",
    ),
]


@pytest.mark.xfail(
    strict=True,
    reason="duplicate keys in a constraint file are silently resolved to the last one: a constraint or a field is dropped without a word",
)
@pytest.mark.parametrize(("name", "data"), DUPLICATES)
def test_duplicate_keys_in_a_constraint_file_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, data: bytes
) -> None:
    db = base_store(tmp_path)
    before = snapshot(db)
    (tmp_path / name).write_bytes(data)
    one_line_error(uac(capsys, db, "constrain", str(tmp_path / name)), name, "twice")
    assert snapshot(db) == before
