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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.constraints import TAX
from helpers.events import fact

from uac_kernel.cli.main import main
from uac_kernel.workbench import Workbench

UAC = [sys.executable, "-m", "uac_kernel.cli.main"]
NASTY = "'''\"\"\"\\ \\n \n __import__('os').system('touch CANARY') {0} </script><img src=x onerror=alert(1)>"


def clock(ts: str, source: str | None = None, text: str = "hello") -> dict[str, Any]:
    return {
        "kind": "utterance",
        "ts": ts,
        "speaker": "user",
        "text": text,
        "source": source or f"u@{ts}",
    }


def cev(ts: str, op: str, key: str, body: Any = None, **extra: Any) -> dict[str, Any]:
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
        return [
            (e.seq, e.kind, json.dumps(e.payload, sort_keys=True), e.hash)
            for e in wb.store.events(erased=True)
        ]


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
        assert not [a.message for a in wb.alerts() if a.category == "rule_error"]


# -- uac constrain FILE: what a file may hold --------------------------------------------------

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
    for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)

BAD_FILES: list[Any] = [
    pytest.param(
        "bomb.yaml", BOMB.encode(), ["bomb.yaml", "line 2", "alias"], id="yaml-billion-laughs"
    ),
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
    pytest.param(
        "huge.json",
        b'{"kind": "obligation", "title": "' + b"x" * (1 << 20) + b'"}',
        ["huge.json", "at most"],
        id="huge-file",
    ),
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
        (
            json.dumps(cev("2025-04-01", "add", "k", TAX))
            + "\n"
            + json.dumps(cev("2025-04-01", "add", "j", TAX))
            + "\n"
        ).encode(),
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
        (
            "- "
            + json.dumps(TAX)
            + "\n- "
            + json.dumps(TAX)
            + "\n- "
            + json.dumps({**TAX, "lead_days": "soon"})
            + "\n"
        ).encode(),
        ["item3.yaml", "item 3", "lead_days"],
        id="third-item-bad-nothing-of-the-first-two",
    ),
    pytest.param(
        "mapbad.yaml",
        b"ok:\n  kind: obligation\n  title: ok\n  due: {date: 2025-04-15}\nbad:\n  kind: obligation\n  title: bad\n  due: {fields: ['_etc']}\n",
        ["mapbad.yaml", "'bad'", "due.fields"],
        id="mapping-bad-field-name",
    ),
    pytest.param(
        "kind.json",
        json.dumps(
            {"kind": "run_code", "title": "x", "code": "__import__('os').system('touch CANARY')"}
        ).encode(),
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
    ),
    pytest.param(
        "longkey.yaml",
        ("k" * 201 + ":\n  kind: obligation\n  title: x\n  due: {date: 2025-04-15}\n").encode(),
        ["longkey.yaml", "key"],
        id="mapping-key-over-200",
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
    ),
    pytest.param(
        "deep.yaml",
        b"a: " + b"[" * 100_000 + b"]" * 100_000 + b"\n",
        ["deep.yaml"],
        id="yaml-100k-flow-nesting",
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


def test_a_bad_file_does_not_create_a_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "new.duckdb"
    (tmp_path / "c.yaml").write_text("kind: obligation\ntitle: x\n", encoding="utf-8")
    one_line_error(uac(capsys, db, "constrain", str(tmp_path / "c.yaml")), "due")
    assert not db.exists()


GOOD_FILES: list[Any] = [
    pytest.param(
        "bom.json",
        b"\xef\xbb\xbf" + json.dumps({**TAX, "title": "Pay rent"}).encode(),
        ["pay-rent"],
        id="utf8-bom-json",
    ),
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


@pytest.mark.parametrize(("name", "data"), DUPLICATES)
def test_duplicate_keys_in_a_constraint_file_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, data: bytes
) -> None:
    db = base_store(tmp_path)
    before = snapshot(db)
    (tmp_path / name).write_bytes(data)
    one_line_error(uac(capsys, db, "constrain", str(tmp_path / name)), name, "twice")
    assert snapshot(db) == before


# -- uac ingest: constraint events among facts; a bad one on line 57 ----------------------------


def mixed(bad: dict[str, Any] | None) -> list[dict[str, Any]]:
    """56 good lines (facts, utterances, constraints), then ``bad`` on line 57, then 3 more."""
    events: list[dict[str, Any]] = []
    for i in range(56):
        if i % 4 == 0:
            events.append(cev("2025-04-02T09:00:00", "add", f"c{i}", {**TAX, "title": f"Task {i}"}))
        elif i % 4 == 1:
            events.append(clock("2025-04-02T09:00:00", source=f"chat#{i}", text=f"turn {i}"))
        else:
            events.append(
                fact("2025-04-02T09:00:00", "add", "Trip", f"t{i}", destination=f"City {i}")
            )
    if bad is not None:
        events.append(bad)
    events += [
        fact("2025-04-03T09:00:00", "add", "Trip", f"after{i}", destination="X") for i in range(3)
    ]
    return events


BAD_LINES: list[Any] = [
    pytest.param(
        cev("2025-04-02", "add", "x", {**TAX, "due": {"fields": ["bad\tfield"]}}),
        "constraint.due.fields",
        id="bad-field-inside",
    ),
    pytest.param(
        cev("2025-04-02", "add", "x", {"kind": "exec", "title": "x"}),
        "constraint",
        id="unknown-kind",
    ),
    pytest.param(cev("2025-04-02", "add", "x", None), "constraint", id="add-without-constraint"),
    pytest.param(cev("2025-04-02", "add", "tax", TAX), "key", id="add-of-key-in-force"),
    pytest.param(cev("2025-04-02", "update", "ghost", TAX), "key", id="update-of-key-not-in-force"),
    pytest.param(cev("2025-04-02", "retract", "ghost"), "key", id="retract-of-key-not-in-force"),
    pytest.param(
        cev("2025-01-01", "update", "tax", {**TAX, "lead_days": 3}),
        "ts",
        id="update-dated-before-version",
    ),
    pytest.param(cev("2025-04-02", "add", "", TAX), "key", id="empty-key"),
    pytest.param(cev("2025-04-02", "add", "x" * 201, TAX), "key", id="key-over-200"),
    pytest.param(
        cev("2025-04-02", "add", "x", "kind: obligation"),
        "constraint",
        id="constraint-as-yaml-text",
    ),
    pytest.param(
        cev("2025-04-02", "add", "x", {**TAX, "title": "t" * 301}),
        "constraint.title",
        id="title-over-300",
    ),
    pytest.param(
        cev("2025-04-02", "add", "x", {**TAX, "lead_days": 10**30}),
        "constraint.lead_days",
        id="huge-int",
    ),
    pytest.param(cev("2025-04-02", "frobnicate", "x", TAX), "op", id="unknown-op"),
    pytest.param(
        cev("2025-04-02", "add", "x", TAX, derived_from="chat#1"),
        "derived_from",
        id="derived-from-not-a-list",
    ),
    pytest.param(cev("2025-04-02", "add", "c0", TAX), "key", id="add-twice-within-the-batch"),
    pytest.param(
        cev(
            "2025-04-02",
            "add",
            "x",
            {**TAX, "subject": {"type": "Trip", "where": {f"f{i}": i for i in range(11)}}},
        ),
        "constraint.subject.where",
        id="where-over-10",
    ),
]


@pytest.mark.parametrize(("bad", "field"), BAD_LINES)
def test_a_bad_constraint_on_line_57_leaves_the_log_byte_identical(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: dict[str, Any], field: str
) -> None:
    db = base_store(tmp_path)
    before = snapshot(db)
    raw = db.read_bytes()
    path = jsonl(tmp_path / "mixed.jsonl", mixed(bad))
    line = one_line_error(uac(capsys, db, "ingest", str(path)), "mixed.jsonl", "57", field)
    assert "line 57" in line or "mixed.jsonl:57" in line
    assert snapshot(db) == before
    assert db.read_bytes() == raw  # nothing written at all
    with Workbench(db, read_only=True) as wb:
        assert list(wb.state.constraints) == ["tax"] and not wb.state.types.get("Trip")


def test_the_same_batch_without_the_bad_line_lands_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = base_store(tmp_path)
    path = jsonl(tmp_path / "mixed.jsonl", mixed(None))
    run = uac(capsys, db, "ingest", str(path))
    assert run.code == 0, run.err
    with Workbench(db, read_only=True) as wb:
        assert len(wb.state.constraints) == 15 and len(wb.state.all("Trip")) == 31
    no_rule_errors(db)
    assert uac(capsys, db, "verify").code == 0


def test_a_bad_constraint_in_a_new_store_leaves_no_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "fresh.duckdb"
    path = jsonl(tmp_path / "mixed.jsonl", mixed(BAD_LINES[0].values[0]))
    one_line_error(uac(capsys, db, "ingest", str(path)), "57")
    assert not db.exists()


# -- uac constrain --retract, uac constraints --json/--history ----------------------------------

RETRACTS: list[Any] = [
    pytest.param(["--retract", "ghost"], ["'ghost'", "tax"], id="unknown-key-names-those-in-force"),
    pytest.param(["--retract", "tax", "x.yaml"], ["--retract"], id="retract-with-file"),
    pytest.param(["--retract", "tax", "--key", "k"], ["--retract"], id="retract-with-key"),
    pytest.param(
        ["--retract", "\x1b[31mtax\nrm -rf /"],
        ["\\x1b[31mtax\\nrm -rf /"],
        id="control-chars-in-key",
    ),
    pytest.param(["--retract", ""], ["''"], id="empty-key"),
    pytest.param([], ["FILE", "--retract"], id="neither-file-nor-retract"),
]


@pytest.mark.parametrize(("args", "words"), RETRACTS)
def test_a_bad_retract_is_one_line_and_appends_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], words: list[str]
) -> None:
    db = base_store(tmp_path)
    before = snapshot(db)
    one_line_error(uac(capsys, db, "constrain", *args), *words)
    assert snapshot(db) == before


def test_retract_twice_then_history_json_and_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = base_store(tmp_path)
    odd = "odd\nkey\t\x1b[2J"
    with Workbench(db) as wb:
        wb.constrain({**TAX, "title": NASTY[:300]}, key=odd)
    run = uac(capsys, db, "constrain", "--retract", "tax", "--reason", "done\nby\x1b[31m me")
    assert run.code == 0 and "\x1b" not in run.out
    assert (
        "cleared" in run.out
        and "why: constraint 'tax' was retracted: done\\nby\\u001b[31m me" in run.out
    )
    one_line_error(uac(capsys, db, "constrain", "--retract", "tax"), "'tax'")
    shown = uac(capsys, db, "constraints", "--json")
    assert shown.code == 0 and len(shown.out.splitlines()) == 1 and "\x1b" not in shown.out
    rows = json.loads(shown.out)
    assert [r["key"] for r in rows] == [odd] and rows[0]["title"] == NASTY[:300].strip()
    hist = json.loads(uac(capsys, db, "constraints", "--history", "--json").out)
    assert [(r["key"], r["retracted"]) for r in hist] == [("tax", True), (odd, False)]
    text = uac(capsys, db, "constraints", "--history")
    lines = text.out.splitlines()
    assert len(lines) == 3 and "\x1b" not in text.out and all(ln.count("\t") == 6 for ln in lines)
    assert "odd\\nkey\\t\\u001b[2J" in lines[2]  # under the header


# -- uac alerts, uac sql, the alert inspector -----------------------------------------------------


def test_alerts_name_a_hostile_constraint_on_one_line_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.duckdb"
    with Workbench(db) as wb:
        wb.ingest([clock("2025-04-01T09:00:00")])
        wb.constrain({**TAX, "title": NASTY[:300]}, key="k\nq")
    run = uac(capsys, db, "alerts")
    assert run.code == 0
    lines = run.out.splitlines()
    assert lines[0].startswith(("[warning] constraint_k_q: ", "[info] constraint_k_q: "))
    assert lines[-1].startswith("    constraint: k\\nq (obligation): '''")
    assert "\n __import__" not in run.out and "\x1b" not in run.out
    got = json.loads(uac(capsys, db, "alerts", "--json").out)
    assert got[0]["message"].startswith(NASTY[:300].strip()[:40])
    no_rule_errors(db)


SQL_TITLES = [
    "'); DROP TABLE uac_constraints; --",
    "x' OR '1'='1",
    "\"; ATTACH '/tmp/evil.db' AS e; --",
    "$$ || (SELECT 1) || $$",
]


@pytest.mark.parametrize(
    "title", SQL_TITLES, ids=["drop-table", "or-1-1", "attach", "dollar-quote"]
)
def test_sql_injection_through_titles_stays_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], title: str
) -> None:
    db = base_store(tmp_path)
    with Workbench(db) as wb:
        wb.constrain({**TAX, "title": title}, key=title)
    run = uac(
        capsys,
        db,
        "sql",
        "--json",
        "SELECT key, title, rule FROM uac_constraints ORDER BY valid_from, key",
    )
    assert run.code == 0, run.err
    rows = json.loads(run.out)
    assert sorted(r["title"] for r in rows) == sorted(["File the tax return", title])
    assert sorted(r["key"] for r in rows) == sorted(["tax", title])
    assert not Path("/tmp/evil.db").exists()


@pytest.mark.parametrize(
    "type_name",
    ["Uac_constraints", "UAC_CONSTRAINTS", "Uac_Constraints", "Uac_constraints_"],
    ids=["cap", "upper", "mixed", "trailing-underscore"],
)
def test_a_record_type_named_like_the_constraints_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], type_name: str
) -> None:
    db = base_store(tmp_path)
    path = jsonl(tmp_path / "t.jsonl", [fact("2025-04-02", "add", type_name, "k", title="shadow")])
    run = uac(capsys, db, "ingest", str(path))
    if type_name.lower() == "uac_constraints":
        one_line_error(run, "t.jsonl", "uac_constraints")
    else:
        assert run.code == 0, run.err
    got = json.loads(uac(capsys, db, "sql", "--json", "SELECT title FROM uac_constraints").out)
    assert got == [{"title": "File the tax return"}]


def test_the_alert_inspector_state_holds_hostile_titles_as_data() -> None:
    from uac_kernel.notebook.widget_base import asset
    from uac_kernel.notebook.widgets import AlertInspector

    with Workbench() as wb:
        wb.ingest([clock("2025-04-01T09:00:00")])
        title = "</script><script>alert(1)</script>" + NASTY[:200]
        wb.constrain({**TAX, "title": title}, key="<img src=x onerror=alert(2)>")
        inspector = AlertInspector(wb)
        state = inspector.get_state()
        wire = json.loads(json.dumps(state["alerts"]))  # what the front end receives
        (shown,) = [a for a in wire if a["constraint"] is not None]
        assert shown["constraint"]["title"] == title.strip()
        assert shown["constraint"]["key"] == "<img src=x onerror=alert(2)>"
        assert json.loads(shown["constraint"]["json"])["title"] == title.strip()
        assert shown["message"].startswith(title.strip()[:30])
    js = asset("alert_inspector.js")
    assert "innerHTML" not in js and "outerHTML" not in js and "insertAdjacentHTML" not in js
    assert "textContent" in js or "text:" in js


# -- forget and verify after constraint events ---------------------------------------------------


def constraint_keys(wb: Workbench) -> set[str]:
    """The keys of the constraints behind the standing alerts."""
    return {cv.key for a in wb.alerts() if (cv := wb.constraint_of(a.rule)) is not None}


@pytest.mark.parametrize("how", ["text", "source"])
def test_forget_of_a_constraint_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    db = tmp_path / "s.duckdb"
    with Workbench(db) as wb:
        wb.ingest(
            [
                clock("2025-04-01T09:00:00"),
                clock("2025-04-01T09:10:00", "chat#7", "remind me about the Vexlorian permit"),
            ]
        )
        wb.constrain(
            {**TAX, "title": "Renew the Vexlorian permit"},
            key="permit",
            source="ex#7",
            derived_from=["chat#7"],
        )
        wb.constrain({**TAX, "title": "Renew the Vexlorian permit", "lead_days": 20}, key="permit")
        wb.constrain({**TAX, "title": "Pay rent"}, key="rent")
        assert constraint_keys(wb) == {"permit", "rent"}
    args = ["--text", "Vexlorian"] if how == "text" else ["--source", "ex#7"]
    run = uac(capsys, db, "forget", *args)
    assert run.code == 0, run.err
    assert uac(capsys, db, "verify").code == 0
    with Workbench(db, read_only=True) as wb:
        assert list(wb.state.constraints) == ["rent"]
        assert constraint_keys(wb) == {"rent"}
        assert not any(a.rule.startswith("constraint_permit") for a in wb.alerts())
        assert not [e for e in wb.store.events(erased=True) if "Vexlorian" in json.dumps(e.payload)]
    assert "Vexlorian" not in uac(capsys, db, "constraints", "--history", "--json").out
    assert "Vexlorian" not in uac(capsys, db, "sql", "--json", "SELECT * FROM uac_constraints").out
    with Workbench(db) as wb:
        code = wb.checkpoint().code
        assert "Vexlorian" not in code and "'rent'" in code.split("# Constraints in force")[1]
    assert b"Vexlorian" not in db.read_bytes()


def test_verify_holds_after_every_kind_of_constraint_event(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = base_store(tmp_path)
    path = jsonl(
        tmp_path / "c.jsonl",
        [
            cev("2025-04-02", "update", "tax", {**TAX, "lead_days": 3}),
            cev("2025-04-03", "add", "rent", {**TAX, "title": "Pay rent"}),
            cev("2025-04-04", "retract", "tax", reason="filed"),
            cev("2025-04-05", "add", "tax", {**TAX, "title": "File again"}),
        ],
    )
    assert uac(capsys, db, "ingest", str(path)).code == 0
    assert uac(capsys, db, "verify").code == 0
    hist = json.loads(uac(capsys, db, "constraints", "--history", "--json").out)
    assert [(r["key"], r["retracted"]) for r in hist] == [
        ("tax", False),
        ("tax", True),
        ("rent", False),
        ("tax", False),
    ] or len(hist) == 4
    no_rule_errors(db)


# -- checkpoint code: hostile titles and keys as escaped literals, imported fresh ----------------

IMPORT = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("model", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
print(json.dumps(mod.constraints))
"""

CODE_TITLES: list[Any] = [
    pytest.param("end ''' here", id="triple-single"),
    pytest.param('end """ here', id="triple-double"),
    pytest.param("ends with a backslash \\", id="trailing-backslash"),
    pytest.param("line one\nline two\r\nthree", id="newlines"),
    pytest.param("x'''+__import__('os').system('touch CANARY')+'''", id="break-out-import"),
    pytest.param('x"""+__import__("os").system("touch CANARY")+"""', id="break-out-import-double"),
    pytest.param("\\N{BULLET} \\x41 \\u0041 {0} %s", id="escape-sequences-literal"),
    pytest.param("sep\u2028para\u2029end\x85", id="unicode-line-separators"),
    pytest.param("nul\x00byte\x0b\x0c", id="nul-and-form-feed"),
    pytest.param("# coding: latin-1", id="coding-cookie"),
    pytest.param("\ufeffbom title", id="bom-in-title"),
]


@pytest.mark.parametrize("title", CODE_TITLES)
def test_checkpoint_code_renders_a_hostile_title_and_key_as_literals(
    tmp_path: Path, title: str
) -> None:
    from uac_kernel.checkpoints.codegen import parse_module
    from uac_kernel.constraints import constraint_json, parse_constraint

    db = tmp_path / "s.duckdb"
    body = {
        **TAX,
        "title": title,
        "subject": {"type": "Trip", "where": {"note": title}, "mentions": [title[:80]]},
    }
    with Workbench(db) as wb:
        wb.ingest(
            [
                clock("2025-04-01T09:00:00"),
                fact("2025-04-01", "add", "Trip", "t", destination=title),
            ]
        )
        wb.constrain(body, key=title)
        wb.constrain(TAX, key="constraints")  # a key named like the block itself
        code = wb.checkpoint().code
        types = set(wb.state.types)
        no_rule_errors_wb = [a for a in wb.alerts() if a.category == "rule_error"]
    assert no_rule_errors_wb == []
    path = tmp_path / "model.py"
    path.write_text(code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-I", "-c", IMPORT, str(path)],
        capture_output=True, text=True, cwd=tmp_path, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout)
    assert got == {title: constraint_json(parse_constraint(body)), "constraints": TAX}
    assert not (tmp_path / "CANARY").exists()
    assert set(parse_module(code).types) == types


# -- %%uac cell edits touching the constraints block ----------------------------------------------

CELL_EDITS: list[Any] = [
    pytest.param("constraints = {}", id="assign"),
    pytest.param("constraints: dict = {}", id="annotated-assign"),
    pytest.param("constraints |= {'x': {}}", id="aug-assign"),
    pytest.param("x = constraints = {}", id="chained-assign"),
    pytest.param(
        "constraints['tax'] = {'kind': 'obligation', 'title': 'gone', 'due': {'date': '2030-01-01'}}",
        id="subscript-assign",
    ),
    pytest.param("constraints['tax']['lead_days'] = 1", id="nested-subscript-assign"),
    pytest.param("constraints, y = {}, 1", id="tuple-assign"),
    pytest.param("del constraints", id="del"),
    pytest.param("del constraints['tax']", id="del-item"),
    pytest.param("constraints.update({'x': {}})", id="method-call"),
    pytest.param("constraints.clear()", id="clear-call"),
    pytest.param("(constraints := {})", id="walrus"),
    pytest.param("for constraints in [{}]: pass", id="for-target"),
]
OTHER_STATEMENTS = [
    "import os as constraints",
    "globals()['constraints'] = {}",
    "print(constraints)",
]


def _cell_refused(wb: Workbench, version: int, extra: str) -> Exception | None:
    cell = wb.cell("Trip") + "\n" + extra + "\n"
    try:
        wb.apply_edit(cell, version=version, part="Trip")
    except Exception as exc:
        return exc
    return None


@pytest.mark.parametrize("extra", CELL_EDITS)
def test_a_cell_that_touches_the_constraints_block_is_refused_and_changes_nothing(
    extra: str,
) -> None:
    from uac_kernel.core.errors import UacError

    with Workbench() as wb:
        wb.ingest(
            [
                clock("2025-04-01T09:00:00"),
                fact("2025-04-01", "add", "Trip", "t1", destination="Oslo"),
            ]
        )
        wb.constrain(TAX, key="tax")
        version = wb.checkpoint().version
        n = len(list(wb.store.events(erased=True)))
        err = _cell_refused(wb, version, extra)
        assert isinstance(err, UacError), f"accepted or crashed: {err!r}"
        assert "\n" not in str(err) and "line " in str(err)
        assert (
            list(wb.state.constraints) == ["tax"]
            and wb.state.constraints["tax"].constraint.title == TAX["title"]
        )
        assert len(list(wb.store.events(erased=True))) == n


@pytest.mark.parametrize("extra", OTHER_STATEMENTS, ids=["import-as", "globals-subscript", "print"])
def test_other_statements_naming_constraints_are_not_run_and_change_nothing(extra: str) -> None:
    with Workbench() as wb:
        wb.ingest(
            [
                clock("2025-04-01T09:00:00"),
                fact("2025-04-01", "add", "Trip", "t1", destination="Oslo"),
            ]
        )
        wb.constrain(TAX, key="tax")
        version = wb.checkpoint().version
        n = len(list(wb.store.events(erased=True)))
        _cell_refused(wb, version, extra)  # refused or ignored; never run
        assert (
            list(wb.state.constraints) == ["tax"] and len(list(wb.store.events(erased=True))) == n
        )


# -- %%uac constraint and %uac constraints in a real IPython shell --------------------------------


@pytest.fixture
def tax_ip(kernel_shell: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Unlike conftest's ``ip``: maya's store open (``%uac open``), its clock on 2025-04-01 and
    the tax obligation in force (key ``tax``)."""
    monkeypatch.chdir(tmp_path)
    shell = kernel_shell
    shell.reset(new_session=False)
    shell.payload_manager.clear_payload()
    shell.config.pop("UacMagics", None)
    for src in ("%load_ext uac", f"%config UacMagics.db = {str(tmp_path / 'maya.duckdb')!r}",
                "%config UacMagics.user = 'maya'", "%uac open"):  # fmt: skip
        shell.run_cell(src).raise_error()
    wb = shell.user_ns["wb"]
    wb.ingest([clock("2025-04-01T09:00:00")])
    wb.constrain(TAX, key="tax")
    yield shell
    shell.run_cell("%unload_ext uac")


def usage_error(shell: Any, source: str) -> str:
    from IPython.core.error import UsageError
    from IPython.utils.capture import capture_output

    with capture_output() as cap:
        result = shell.run_cell(source)
    err = result.error_in_exec
    assert isinstance(err, UsageError), repr(err)[:500]
    message = str(err)
    assert "\n" not in message and "Traceback" not in cap.stderr
    return message


MAGIC_CELLS: list[Any] = [
    pytest.param("%%uac constraint\n" + BOMB, ["%%uac constraint", "alias"], id="alias-bomb"),
    pytest.param(
        "%%uac constraint\nkind: obligation\ntitle: !!python/object/apply:os.system ['touch CANARY']\ndue: {date: 2025-04-15}\n",
        ["%%uac constraint", "line 2"],
        id="python-tag",
    ),
    pytest.param("%%uac constraint\n", ["cell magic"], id="empty-cell"),
    pytest.param(
        "%%uac constraint\nkind: obligation\ntitle: x\ndue:\n\tdate: 2025-04-15\n",
        ["line 4"],
        id="tabs",
    ),
    pytest.param(
        "%%uac constraint\n- " + json.dumps(TAX) + "\n- {kind: obligation, title: y}\n",
        ["item 2", "due"],
        id="list-item-2-bad",
    ),
    pytest.param(
        "%%uac constraint --key k\n- " + json.dumps(TAX) + "\n- " + json.dumps(TAX) + "\n",
        ["--key"],
        id="key-with-two",
    ),
    pytest.param(
        "%uac constraint", ["FILE", "%%uac constraint"], id="line-magic-without-file-or-cell"
    ),
    pytest.param("%uac constraint --retract ghost", ["'ghost'", "tax"], id="retract-unknown"),
    pytest.param(
        "%%uac constraint --retract tax\n" + json.dumps(TAX), ["retract"], id="retract-with-cell"
    ),
    pytest.param("%%uac constraint --key ''\n" + json.dumps(TAX), ["key"], id="empty-key-flag"),
    pytest.param(
        '%%uac constraint\n{"kind": "obligation", "title": "x", "due": ',
        ["invalid JSON"],
        id="truncated-json",
    ),
    pytest.param(
        "%%uac constraint\n" + "[" * 50_000 + "]" * 50_000,
        ["%%uac constraint"],
        id="json-50k-nesting",
    ),
]


@pytest.mark.parametrize(("source", "words"), MAGIC_CELLS)
def test_a_bad_constraint_cell_is_a_one_line_usage_error(
    tax_ip: Any, tmp_path: Path, source: str, words: list[str]
) -> None:
    wb = tax_ip.user_ns["wb"]
    n = len(list(wb.store.events(erased=True)))
    message = usage_error(tax_ip, source)
    for w in words:
        assert w in message, (w, message)
    assert len(list(wb.store.events(erased=True))) == n and list(wb.state.constraints) == ["tax"]
    assert not (tmp_path / "CANARY").exists()


def test_constraints_magic_shows_hostile_titles_as_escaped_data(tax_ip: Any) -> None:
    from IPython.utils.capture import capture_output

    wb = tax_ip.user_ns["wb"]
    title = "<script>alert(1)</script>" + NASTY[:200]
    wb.constrain({**TAX, "title": title}, key="<b>k</b>")
    with capture_output():
        result = tax_ip.run_cell("%uac constraints")
    result.raise_error()
    table = result.result
    assert [r[:3] for r in table.rows][1] == ("<b>k</b>", "obligation", title.strip())
    html = table._repr_html_()
    assert "<script>" not in html and "<b>k</b>" not in html and "&lt;script&gt;" in html


# -- extraction: a model proposes hostile constraints (real openai client, ChatServer) ------------

TURN = clock(
    "2025-05-20T09:00:00",
    "chat-1#1",
    "I must send the signed lease back to the landlord by June 1st.",
)
LEASE = {
    "op": "add",
    "type": "Lease",
    "key": "lease-flat",
    "fields": [{"name": "landlord", "value": "the landlord"}],
    "utterances": ["chat-1#1"],
}
RETURN_LEASE = {
    "kind": "obligation",
    "title": "Send the signed lease back by June 1st",
    "subject": {"type": "Lease", "key": "lease-flat"},
    "due": {"date": "2025-06-01"},
}


def proposal(
    key: str, constraint: Any, op: str = "add", utterances: list[str] | None = None, **extra: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {"op": op, "key": key, "utterances": utterances or ["chat-1#1"], **extra}
    if op != "retract":
        out["constraint"] = constraint if isinstance(constraint, str) else json.dumps(constraint)
    return out


def answer(facts: list[dict[str, Any]], constraints: list[dict[str, Any]]) -> str:
    return json.dumps({"operations": facts, "constraints": constraints})


@pytest.fixture
def server() -> Iterator[Any]:
    from uac_kernel.model.testing import ChatServer

    with ChatServer() as srv:
        yield srv


@pytest.fixture
def mwb(tmp_path: Path, server: Any) -> Iterator[Workbench]:
    from uac_kernel.model.client import ModelSettings

    settings = ModelSettings(model="stand-in", base_url=server.base_url, max_retries=0)
    with Workbench(tmp_path / "u.duckdb", user="maya", model=settings) as wb:
        wb.ingest([TURN])
        yield wb


def constraint_events(wb: Workbench) -> list[Any]:
    return [e for e in wb.log() if e.kind == "constraint"]


def nested(depth: int) -> str:
    where_value = "[" * depth + "1" + "]" * depth
    return (
        '{"kind": "obligation", "title": "t", "due": {"date": "2025-06-01"}, "subject": {"type": "Lease", "where": {"a": '
        + where_value
        + "}}}"
    )


HOSTILE_PROPOSALS: list[Any] = [
    pytest.param(
        proposal("long", {**RETURN_LEASE, "title": "x" * 10_000}), "title", id="10k-title"
    ),
    pytest.param(
        proposal(
            "long-json",
            json.dumps(
                {**RETURN_LEASE, "subject": {"type": "Lease", "mentions": ["w" * 70] * 140}}
            ),
        ),
        "mentions",
        id="10k-json-many-mentions",
    ),
    pytest.param(proposal("deep", nested(100)), "where", id="100-levels-nesting"),
    pytest.param(proposal("deeper", nested(5000)), "JSON object", id="5000-levels-nesting"),
    pytest.param(
        proposal(
            "nan",
            '{"kind": "projection", "title": "t", "subject": {"type": "Lease"}, "quantity": "n", "rate": NaN}',
        ),
        "JSON object",
        id="nan-literal",
    ),
    pytest.param(
        proposal("dbl", json.dumps(json.dumps(RETURN_LEASE))), "constraint", id="double-encoded"
    ),
    pytest.param(
        proposal("made-up", RETURN_LEASE, utterances=["chat-9#9"]),
        "utterances",
        id="utterance-that-does-not-exist",
    ),
    pytest.param(
        proposal(
            "code",
            {
                "kind": "obligation",
                "title": "t",
                "due": {"date": "2025-06-01"},
                "code": "__import__('os').system('touch CANARY')",
            },
        ),
        "code",
        id="code-field",
    ),
    pytest.param(proposal("", RETURN_LEASE), "key", id="empty-key"),
    pytest.param(proposal("k" * 201, RETURN_LEASE), "key", id="key-over-200"),
    pytest.param(
        proposal("ghost", None, op="retract", reason="gone"),
        "ghost",
        id="retract-of-key-not-in-force",
    ),
]


@pytest.mark.parametrize(("bad", "why"), HOSTILE_PROPOSALS)
def test_a_hostile_proposal_is_dropped_with_its_reason_and_the_facts_are_kept(
    mwb: Workbench, server: Any, tmp_path: Path, bad: dict[str, Any], why: str
) -> None:
    wrong = answer([LEASE], [proposal("ok", RETURN_LEASE), bad])
    server.enqueue(wrong, wrong)
    report = mwb.extract(progress=False)
    assert (report.applied, report.operations, report.constraints, report.pending) == (1, 1, 1, 0)
    assert len(report.dropped) == 1 and why in report.dropped[0] and "\n" not in report.dropped[0]
    assert len(report.dropped[0]) < 1000
    assert mwb.state.get("Lease", "lease-flat") is not None
    assert [c.key for c in mwb.constraints()] == ["ok"]
    marker = next(e for e in reversed(mwb.log()) if e.kind == "extraction").payload
    assert marker["dropped"] == report.dropped
    assert not [a for a in mwb.alerts() if a.category == "rule_error"]
    assert not (tmp_path / "CANARY").exists()


@pytest.mark.parametrize(
    "key",
    ["../../etc/passwd", "a\nb\r\nc", "constraints", "__import__('os')", "x'''y"],
    ids=["path", "newlines", "block-name", "import-call", "triple-quote"],
)
def test_a_proposed_key_that_looks_like_a_path_or_code_is_data(
    mwb: Workbench, server: Any, tmp_path: Path, key: str
) -> None:
    server.enqueue(answer([LEASE], [proposal(key, RETURN_LEASE)]))
    report = mwb.extract(progress=False)
    assert report.applied == 1
    if report.dropped:  # refused: with a reason naming the key
        assert "key" in report.dropped[0] and mwb.constraints() == []
        return
    (cv,) = mwb.constraints()
    assert cv.key == key
    rule = [a.rule for a in mwb.alerts() if mwb.constraint_of(a.rule) is not None]
    assert rule and all(r.isidentifier() for r in rule)
    code = mwb.checkpoint().code
    path = tmp_path / "model.py"
    path.write_text(code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-I", "-c", IMPORT, str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-1500:]
    assert list(json.loads(done.stdout)) == [key]
    assert not list(tmp_path.glob("etc*")) and not (tmp_path.parent / "etc").exists()


def test_a_flood_over_the_cap_applies_nothing_and_keeps_the_batch_pending(
    mwb: Workbench, server: Any
) -> None:
    flood = answer(
        [LEASE], [proposal(f"c{i}", {**RETURN_LEASE, "title": f"t{i}"}) for i in range(21)]
    )
    server.enqueue(flood, flood)
    report = mwb.extract(progress=False)
    assert (report.applied, report.pending) == (1 - 1, 1)
    assert "21 constraints" in report.errors[0]
    assert constraint_events(mwb) == [] and mwb.state.get("Lease", "lease-flat") is None
    # the retry message does not send the flood back whole
    assert len(server.requests[1]["messages"][-2]["content"]) < 20_000


def test_a_valid_constraint_with_an_invalid_fact_never_half_applies(
    mwb: Workbench, server: Any
) -> None:
    bad_fact = {**LEASE, "fields": [{"name": "bad\nname!", "value": 1}]}
    wrong = answer([bad_fact], [proposal("ok", RETURN_LEASE)])
    server.enqueue(wrong, wrong)
    n = len(list(mwb.store.events(erased=True)))
    report = mwb.extract(progress=False)
    assert (report.applied, report.pending) == (0, 1)
    assert constraint_events(mwb) == [] and mwb.constraints() == []
    assert mwb.state.get("Lease", "lease-flat") is None
    kinds = [e.kind for e in list(mwb.store.events(erased=True))[n:]]
    assert "constraint" not in kinds and "fact" not in kinds


def _in_force(wb: Workbench, n: int) -> None:
    for i in range(n):
        wb.constrain(
            {**RETURN_LEASE, "title": f"Standing duty {i}", "subject": {"type": "Lease"}},
            key=f"duty{i}",
        )


def test_a_retract_of_every_constraint_in_force_is_held_for_review(
    mwb: Workbench, server: Any
) -> None:
    _in_force(mwb, 5)
    mwb.ingest([clock("2025-05-21T09:00:00", "chat-1#2", "Drop all of them.")])
    server.enqueue(
        answer(
            [],
            [
                proposal(
                    f"duty{i}", None, op="retract", utterances=["chat-1#2"], reason="user said"
                )
                for i in range(5)
            ],
        )
    )
    report = mwb.extract(progress=False)
    assert report.held == 1 and report.applied == 0
    assert [c.key for c in mwb.constraints()] == [f"duty{i}" for i in range(5)]


def test_a_retract_of_a_constraint_the_turns_never_mention_is_held(
    mwb: Workbench, server: Any
) -> None:
    _in_force(mwb, 1)
    mwb.ingest([clock("2025-05-21T09:00:00", "chat-1#2", "What a sunny morning.")])
    server.enqueue(
        answer([], [proposal("duty0", None, op="retract", utterances=["chat-1#2"], reason="done")])
    )
    report = mwb.extract(progress=False)
    assert report.held == 1
    assert [c.key for c in mwb.constraints()] == ["duty0"]


def test_an_update_of_every_constraint_in_force_is_held_for_review(
    mwb: Workbench, server: Any
) -> None:
    _in_force(mwb, 5)
    mwb.ingest([clock("2025-05-21T09:00:00", "chat-1#2", "Nothing much.")])
    loose = {
        **RETURN_LEASE,
        "title": "whatever",
        "due": {"date": "2099-01-01"},
        "subject": {"type": "Lease"},
    }
    server.enqueue(
        answer(
            [],
            [proposal(f"duty{i}", loose, op="update", utterances=["chat-1#2"]) for i in range(5)],
        )
    )
    report = mwb.extract(progress=False)
    assert report.held == 1
    assert {c.constraint.title for c in mwb.constraints()} == {
        f"Standing duty {i}" for i in range(5)
    }


def test_a_constraint_citing_an_earlier_batchs_utterance_is_dropped(
    mwb: Workbench, server: Any
) -> None:
    server.enqueue(answer([LEASE], []))
    assert mwb.extract(progress=False).applied == 1
    mwb.ingest([clock("2025-05-21T09:00:00", "chat-1#2", "Also the keys by June 2nd.")])
    wrong = answer(
        [], [proposal("keys", {**RETURN_LEASE, "title": "Keys"}, utterances=["chat-1#1"])]
    )
    server.enqueue(wrong, wrong)
    report = mwb.extract(progress=False)
    assert report.constraints == 0 and len(report.dropped) == 1 and "chat-1#1" in report.dropped[0]
    assert mwb.constraints() == [] and report.applied == 1  # the batch itself lands (its marker)


# -- two processes: one appends constraints, another reads `uac constraints` ----------------------

WRITER = """
import sys, time
from uac_kernel.workbench import Workbench
db, n = sys.argv[1], int(sys.argv[2])
with Workbench(db) as wb:
    print("open", flush=True)
    for i in range(n):
        wb.constrain({"kind": "obligation", "title": f"Duty {i}", "due": {"date": "2025-06-01"}}, key=f"c{i:03d}")
    print("done", flush=True)
"""


def _reader_ok_or_one_line(done: subprocess.CompletedProcess[str], db: Path) -> list[str] | None:
    """The keys a reader saw, or None when it got a clean one-line error naming the store."""
    assert "Traceback" not in done.stderr, done.stderr[-1500:]
    if done.returncode != 0:
        lines = done.stderr.splitlines()
        assert done.returncode == 1 and len(lines) == 1 and lines[0].startswith("uac: error: "), (
            done.stderr
        )
        assert db.name in lines[0]
        return None
    return [r["key"] for r in json.loads(done.stdout)]


def test_a_reader_while_a_writer_holds_the_store(tmp_path: Path) -> None:
    db = base_store(tmp_path)
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "open"
        seen: list[list[str] | None] = []
        for _ in range(3):
            done = subprocess.run(
                [*UAC, "constraints", "--json", "--db", str(db)],
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
            seen.append(_reader_ok_or_one_line(done, db))
            one = subprocess.run(
                [*UAC, "constraints", "--db", str(db)],
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            assert "Traceback" not in one.stderr, one.stderr[-1500:]
        for keys in seen:
            if keys is not None:  # a consistent view: 'tax', then a prefix of c000, c001, ...
                assert keys[0] == "tax" and keys[1:] == [f"c{i:03d}" for i in range(len(keys) - 1)]
    finally:
        _out, err = writer.communicate(timeout=300)
    assert writer.returncode == 0, err[-1500:]
    with Workbench(db, read_only=True) as wb:
        assert len(wb.state.constraints) == 61


def test_readers_between_cli_writers_see_whole_batches(tmp_path: Path) -> None:
    db = base_store(tmp_path)
    files = []
    for b in range(4):
        f = tmp_path / f"b{b}.yaml"
        f.write_text(
            "".join(
                f"b{b}k{i}:\n  kind: obligation\n  title: Batch {b} item {i}\n  due: {{date: 2025-06-01}}\n"
                for i in range(5)
            ),
            encoding="utf-8",
        )
        files.append(f)
    writer = subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess, sys, time\n"
         "for f in sys.argv[2:]:\n"
         "    for _ in range(300):  # the store has one writer: retry while a reader holds it\n"
         "        r = subprocess.run([sys.executable, '-m', 'uac_kernel.cli.main', 'constrain', '--db', sys.argv[1], f],\n"
         "                           capture_output=True, text=True)\n"
         "        if r.returncode == 0: break\n"
         "        assert len(r.stderr.splitlines()) == 1 and 'is open in process' in r.stderr, r.stderr\n"
         "        time.sleep(0.05)\n"
         "    else: raise SystemExit('never got the store')\n",
         str(db), *map(str, files)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        seen: list[list[str] | None] = []
        while writer.poll() is None and len(seen) < 12:
            done = subprocess.run(
                [*UAC, "constraints", "--json", "--db", str(db)],
                capture_output=True, text=True, timeout=120, check=False,
            )  # fmt: skip
            seen.append(_reader_ok_or_one_line(done, db))
        for keys in seen:
            if keys is not None:  # never half a file: whole batches of five
                assert keys[0] == "tax" and (len(keys) - 1) % 5 == 0, keys
    finally:
        _, err = writer.communicate(timeout=300)
    assert writer.returncode == 0, err[-1500:]
    with Workbench(db, read_only=True) as wb:
        assert len(wb.state.constraints) == 21


def test_constrain_while_another_process_writes_is_a_one_line_lock_error(tmp_path: Path) -> None:
    db = base_store(tmp_path)
    (tmp_path / "c.yaml").write_text(
        "kind: obligation\ntitle: Pay rent\ndue: {date: 2025-04-03}\n", encoding="utf-8"
    )
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), "40"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "open"
        done = subprocess.run(
            [*UAC, "constrain", "--db", str(db), str(tmp_path / "c.yaml")],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert "Traceback" not in done.stderr
        if done.returncode != 0:
            lines = done.stderr.splitlines()
            assert len(lines) == 1 and db.name in lines[0], done.stderr
    finally:
        _, err = writer.communicate(timeout=300)
    assert writer.returncode == 0, err[-1500:]
    with Workbench(db, read_only=True) as wb:
        assert len(wb.state.constraints) in (41, 42)


# -- what a constraint meets in the data: huge numbers and far dates never crash its rule -------

DATA_CASES: list[Any] = [
    pytest.param(
        [fact("2025-04-01", "add", "Medication", "m", pills_left=1e300, as_of="2025-04-01")],
        {
            "kind": "projection",
            "title": "t",
            "subject": {"type": "Medication"},
            "quantity": "pills_left",
            "rate": 1e-300,
            "until": {"date": "2026-01-01"},
        },
        id="projection-1e300-pills",
    ),
    pytest.param(
        [
            fact("2025-04-01", "add", "Expense", f"e{i}", amount=1e308, date="2025-04-01")
            for i in range(2)
        ],
        {
            "kind": "window_limit",
            "title": "t",
            "subject": {"type": "Expense"},
            "measure": "sum",
            "period": "month",
            "limit": 1,
        },
        id="window-sum-overflows-to-inf",
    ),
    pytest.param(
        [
            fact(
                "2025-04-01",
                "add",
                "Medication",
                "m",
                pills_left=10,
                as_of="2025-04-01",
                dose=1e200,
                times=1e200,
            )
        ],
        {
            "kind": "projection",
            "title": "t",
            "subject": {"type": "Medication"},
            "quantity": "pills_left",
            "rate_fields": ["dose", "times"],
            "until": {"date": "2026-01-01"},
        },
        id="projection-rate-product-inf",
    ),
    pytest.param(
        [fact("2025-04-01", "add", "Medication", "m", pills_left=10, as_of="2025-04-01")],
        {
            "kind": "projection",
            "title": "t",
            "subject": {"type": "Medication"},
            "quantity": "pills_left",
            "rate": 1e-300,
            "until": {"date": "2026-01-01"},
        },
        id="projection-tiny-rate",
    ),
    pytest.param(
        [fact("2025-04-01", "add", "Car", "c", expires="9999-12-01")],
        {
            "kind": "obligation",
            "title": "t",
            "subject": {"type": "Car"},
            "due": {"fields": ["expires"], "months": 1200},
        },
        id="obligation-due-past-year-9999",
    ),
    pytest.param(
        [fact("2025-04-01", "add", "Car", "c", expires="0001-01-02")],
        {
            "kind": "obligation",
            "title": "t",
            "subject": {"type": "Car"},
            "due": {"fields": ["expires"], "days": -36600},
        },
        id="obligation-due-before-year-1",
    ),
    pytest.param(
        [fact("2025-04-01", "add", "Stay", "s", start="2025-04-01", end="9999-12-31")],
        {
            "kind": "window_limit",
            "title": "t",
            "subject": {"type": "Stay"},
            "measure": "days",
            "window_days": 180,
            "limit": 90,
        },
        id="window-stay-to-9999",
    ),
    pytest.param(
        [
            fact(
                "2025-04-01",
                "add",
                "Appointment",
                "a",
                start="9999-12-31T23:00:00",
                end="9999-12-31T23:59:00",
            ),
            fact("2025-04-01", "add", "Appointment", "b", start="9999-12-31T23:30:00"),
        ],
        {"kind": "no_overlap", "title": "t", "a": {"type": "Appointment"}, "buffer_minutes": 10080},
        id="overlap-at-the-end-of-time",
    ),
    pytest.param(
        [
            fact("2025-04-01", "add", "Appointment", "a", start="9999-12-31", tz="-12:00"),
            fact("2025-04-01", "add", "Appointment", "b", start="9999-12-31", tz="+14:00"),
        ],
        {"kind": "no_overlap", "title": "t", "a": {"type": "Appointment"}},
        id="overlap-tz-past-9999",
    ),
    pytest.param(
        [fact("2025-04-01", "add", "Trip", "t", start="0001-01-01")],
        {
            "kind": "before",
            "title": "t",
            "first": {"type": "Vax"},
            "then": {"type": "Trip"},
            "gap_days": 3660,
        },
        id="before-gap-before-year-1",
    ),
    pytest.param(
        [
            fact("2025-04-01", "add", "Trip", "t", start="2025-05-01", end="9999-12-31"),
            fact("2025-04-01", "add", "Insurance", "i", start="2025-05-01", expires="2025-06-01"),
        ],
        {
            "kind": "valid_on",
            "title": "t",
            "document": {"type": "Insurance"},
            "each": {"type": "Trip"},
            "at": {"fields": ["start"]},
            "until": {"fields": ["end"], "months": 1200},
        },
        id="valid-on-until-past-9999",
    ),
]


@pytest.mark.parametrize(("facts", "body"), DATA_CASES)
def test_a_constraint_over_extreme_data_never_becomes_a_rule_error(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    facts: list[dict[str, Any]],
    body: dict[str, Any],
) -> None:
    db = tmp_path / "s.duckdb"
    path = jsonl(
        tmp_path / "e.jsonl",
        [clock("2025-04-01T09:00:00"), *facts, cev("2025-04-01T10:00:00", "add", "k", body)],
    )
    run = uac(capsys, db, "ingest", str(path))
    assert run.code == 0, run.err
    assert "failed:" not in run.out
    no_rule_errors(db)


@pytest.mark.parametrize("year_from", ["13-45", "02-30", "00-00"])
def test_an_impossible_year_from_is_refused_when_parsed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], year_from: str
) -> None:
    db = base_store(tmp_path)
    before = snapshot(db)
    body = {
        "kind": "window_limit",
        "title": "t",
        "subject": {"type": "Expense"},
        "measure": "sum",
        "year_from": year_from,
        "limit": 1,
    }
    (tmp_path / "w.json").write_text(json.dumps(body), encoding="utf-8")
    one_line_error(uac(capsys, db, "constrain", str(tmp_path / "w.json")), "w.json", "year_from")
    assert snapshot(db) == before


# -- bounds and edges of the faces ---------------------------------------------------------------


def test_a_file_over_the_constraints_in_force_limit_appends_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = base_store(tmp_path)
    before = snapshot(db)
    many = {f"k{i}": {**TAX, "title": f"Duty {i}"} for i in range(200)}  # with 'tax': 201 in force
    (tmp_path / "many.json").write_text(json.dumps(many), encoding="utf-8")
    one_line_error(uac(capsys, db, "constrain", str(tmp_path / "many.json")), "200")
    assert snapshot(db) == before


def test_constraints_faces_on_a_store_without_constraints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.duckdb"
    with Workbench(db) as wb:
        wb.ingest([clock("2025-04-01T09:00:00")])
    assert uac(capsys, db, "constraints").out == "no constraints in force\n"
    assert json.loads(uac(capsys, db, "constraints", "--json").out) == []
    run = uac(capsys, db, "sql", "--json", "SELECT * FROM uac_constraints")
    assert run.code == 0 and json.loads(run.out) == []
    one_line_error(uac(capsys, tmp_path / "none.duckdb", "constraints"), "none.duckdb")
    assert not (tmp_path / "none.duckdb").exists()


INGEST_BOUNDS: list[Any] = [
    pytest.param(
        cev("2025-04-02", "add", "x", TAX, derived_from=[f"chat#{i}" for i in range(10_000)]),
        "derived_from",
        id="10k-derived-from",
    ),
    pytest.param(
        cev("2025-04-02", "retract", "tax", reason=["not", "text"]),
        "reason",
        id="reason-not-a-string",
    ),
    pytest.param(
        cev("2025-04-02", "retract", "tax", reason="r" * 1_100_000),
        "line",
        id="1m-reason-over-line-bytes",
    ),
    pytest.param(
        cev("2025-04-02", "add", "x", TAX, source="s" * 100_000), "source", id="100k-source"
    ),
    pytest.param(
        cev("2025-04-02", "add", "x", TAX, author={"name": "me"}),
        "author",
        id="author-not-a-string",
    ),
]


@pytest.mark.parametrize(("bad", "field"), INGEST_BOUNDS)
def test_oversized_constraint_event_fields_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: dict[str, Any], field: str
) -> None:
    db = base_store(tmp_path)
    before = snapshot(db)
    path = jsonl(tmp_path / "b.jsonl", [clock("2025-04-02T08:00:00"), bad])
    line = one_line_error(uac(capsys, db, "ingest", str(path)), "b.jsonl", "2", field)
    assert len(line) < 2000
    assert snapshot(db) == before


def test_rerunning_the_same_constraint_cell_appends_nothing(tax_ip: Any) -> None:
    from IPython.utils.capture import capture_output

    wb = tax_ip.user_ns["wb"]
    cell = (
        "%%uac constraint --key rent\nkind: obligation\ntitle: Pay rent\ndue: {date: 2025-04-03}\n"
    )
    for _ in range(3):
        with capture_output():
            tax_ip.run_cell(cell).raise_error()
    assert [e.payload["key"] for e in wb.log(kinds=["constraint"])] == ["tax", "rent"]


def test_a_model_retract_with_a_long_reason_is_kept_as_data(mwb: Workbench, server: Any) -> None:
    mwb.constrain(RETURN_LEASE, key="return-lease")
    mwb.ingest(
        [
            clock(
                "2025-05-21T09:00:00",
                "chat-1#2",
                # names the constraint whole (its key's words), so the retract is not held
                "Forget the return lease deadline, the signed lease went back.",
            )
        ]
    )
    retract = proposal(
        "return-lease", None, op="retract", utterances=["chat-1#2"], reason="because " * 5000
    )
    server.enqueue(answer([], [retract]), answer([], [retract]))
    report = mwb.extract(progress=False)
    events = constraint_events(mwb)
    # under the 1,000,000-character bound of a reason (Limits.value_chars): applied, kept as said
    assert report.constraints == 1 and report.dropped == [] and mwb.constraints() == []
    assert events[-1].payload["reason"] == "because " * 5000


@pytest.mark.parametrize(
    "word",
    [pytest.param(w, id=w) for w in ("NO", "no", "Off", "y")],
)
def test_yaml_11_booleans_in_where_values_are_not_silently_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], word: str
) -> None:
    db = base_store(tmp_path)
    text = f"kind: before\ntitle: Shots before Norway\nfirst: {{type: Vaccination}}\nthen: {{type: Trip, where: {{country: {word}}}}}\n"
    (tmp_path / "no.yaml").write_text(text, encoding="utf-8")
    run = uac(capsys, db, "constrain", str(tmp_path / "no.yaml"))
    if run.code == 1:  # refused, saying to quote it: also safe
        one_line_error(run, "no.yaml", "country")
        return
    with Workbench(db, read_only=True) as wb:
        (cv,) = [c for c in wb.constraints() if c.key != "tax"]
        assert cv.constraint.then.where == {"country": word}  # type: ignore[union-attr]


def test_printable_escapes_bidi_and_carriage_returns_in_constraint_faces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.duckdb"
    title = "Pay \u202erent\u202c now\rOVERWRITE\u200b"
    with Workbench(db) as wb:
        wb.ingest([clock("2025-04-01T09:00:00")])
        wb.constrain({**TAX, "title": title}, key="k\u202e")
    for args in (
        ["alerts"],
        ["constraints"],
        ["constraints", "--history"],
        ["constraints", "--json"],
        ["alerts", "--json"],
    ):
        out = uac(capsys, db, *args).out
        assert "\u202e" not in out and "\r" not in out and "\u200b" not in out, args


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs a named pipe")
def test_a_pipe_is_refused_before_it_is_read(tmp_path: Path) -> None:
    # A FIFO has no end (and no writer here: opening it would wait for one): refused by what
    # it is, before it is opened; a hang would reach the timeout.
    fifo = tmp_path / "endless.yaml"
    os.mkfifo(fifo)
    try:
        done = subprocess.run(
            [*UAC, "constrain", "--db", str(tmp_path / "s.duckdb"), str(fifo)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("uac constrain hung on a pipe")
    lines = done.stderr.splitlines()
    assert done.returncode == 1 and len(lines) == 1 and "not a regular file" in lines[0]


@pytest.mark.parametrize(
    "query",
    [
        "DELETE FROM uac_constraints",
        "DROP TABLE uac_constraints",
        "UPDATE uac_constraints SET title = 'x'",
        "INSERT INTO uac_constraints (key) VALUES ('evil')",
        "CREATE TABLE uac_constraints2 AS SELECT * FROM uac_constraints",
        "SELECT 1; DROP TABLE uac_constraints",
    ],
    ids=["delete", "drop", "update", "insert", "create", "stacked"],
)
def test_sql_cannot_change_the_constraints_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], query: str
) -> None:
    db = base_store(tmp_path)
    before = snapshot(db)
    one_line_error(uac(capsys, db, "sql", query))
    assert snapshot(db) == before
    rows = json.loads(uac(capsys, db, "sql", "--json", "SELECT key FROM uac_constraints").out)
    assert rows == [{"key": "tax"}]


def test_the_cli_alias_constraint_retracts_like_constrain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = base_store(tmp_path)
    run = uac(capsys, db, "constraint", "--retract", "tax", "--reason", "filed")
    assert run.code == 0 and "why: constraint 'tax' was retracted: filed" in run.out
    assert uac(capsys, db, "constraints").out == "no constraints in force\n"
    assert uac(capsys, db, "verify").code == 0


def test_marimo_constrain_with_deep_nesting_shows_an_error() -> None:
    pytest.importorskip("marimo")
    import uac.marimo as um

    with Workbench() as wb:
        wb.ingest([clock("2025-04-01T09:00:00")])
        try:
            keys, _view = um.constrain(wb, "[" * 50_000 + "]" * 50_000)
        except RecursionError:
            pytest.fail("RecursionError escaped uac.marimo.constrain")
        assert keys == [] and wb.constraints() == []


def test_a_retraction_names_the_key_it_retracted_in_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = uac(capsys, base_store(tmp_path), "constrain", "--retract", "tax")
    assert run.code == 0 and run.out.startswith("retracted: tax; 1 event appended")


def test_a_retraction_names_the_key_it_retracted_in_a_notebook(tax_ip: Any) -> None:
    from IPython.utils.capture import capture_output

    with capture_output() as out:
        tax_ip.run_cell("%uac constrain --retract tax").raise_error()
    assert out.stdout.startswith("retracted: tax; 1 event appended")


def test_a_retraction_names_the_key_it_retracted_in_marimo() -> None:
    pytest.importorskip("marimo")
    import uac.marimo as um

    with Workbench() as wb:
        wb.ingest([clock("2025-04-01T09:00:00")])
        wb.constrain(TAX, key="tax")
        _keys, view = um.constrain(wb, "", retract="tax")
        assert "retracted: tax; 1 event appended" in view.text
