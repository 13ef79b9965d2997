"""The SQL view's tables built by SQL over the log (sqlbuild) equal, cell for cell (value and
Python type) and column type for column type, the tables the Python build makes from the fold."""

from __future__ import annotations

import random
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers.events import fact
from helpers.sql import (
    Tables,
    assert_same_tables,
    assert_sql_build_matches,
    python_tables,
    read_tables,
)

from uac_kernel import Workbench
from uac_kernel.checkpoints.snapshot import stored_current
from uac_kernel.checkpoints.snaptypes import SnapTypeState
from uac_kernel.demo.life import demo_events
from uac_kernel.log.store import NewEvent, Store
from uac_kernel.sql.build import Stored
from uac_kernel.sql.view import SqlView
from uac_kernel.state.fold import fold

# -- a generated history --------------------------------------------------------------------

STRINGS = ["plain", "", "it's", 'say "hi"', "a,b", "[x]", "back\\slash", "tab\there", "naïve ☃"]
EDGE_FLOATS = [0.1 + 0.2, 1e300, -2.5, 5e-324, 1 / 3, 123456.789]
# Ints past int64 that a log can hold: ingest refuses them, but a store written before may have
# them, and orjson reads them as ints up to 2**64 - 1 (past that, as floats: the fold never holds
# an int the HUGEINT or VARCHAR column of a larger one would be for).
BIG = [2**63, 2**64 - 1, 2**63 + 12345, -(2**63)]


def _value(rng: random.Random, ftype: str, big: int, first: bool = False) -> Any:
    """A JSON value of ``ftype``; an int field's ``big`` picks how large its ints may be; a
    ``first`` value is one ingest infers ``ftype`` from."""
    if ftype.startswith("list["):
        n = rng.randint(1, 3) if first else rng.randint(0, 3)
        return [_value(rng, ftype[5:-1], big, first) for _ in range(n)]
    if ftype == "float" and first:
        return rng.choice(EDGE_FLOATS)
    if ftype == "str":
        return rng.choice(STRINGS) + str(rng.randint(0, 9))
    if ftype == "int":
        pool = [rng.randint(-1000, 1000)] + (BIG if big else [])
        return rng.choice(pool) if rng.random() < 0.3 else pool[0]
    if ftype == "float":
        return rng.choice([*EDGE_FLOATS, rng.uniform(-100, 100), rng.randint(-5, 5)])
    if ftype == "bool":
        return rng.random() < 0.5
    day = date(2024, 1, 1) + timedelta(days=rng.randint(0, 700))
    if ftype == "date":
        return day.isoformat()
    moment = datetime.combine(day, datetime.min.time()) + timedelta(
        seconds=rng.randint(0, 86_399), microseconds=rng.choice([0, 123456])
    )
    zone = rng.choice(
        [None, UTC, timezone(timedelta(hours=5, minutes=30)), timezone(-timedelta(hours=7))]
    )
    return moment.replace(tzinfo=zone).isoformat()


# Field names SQL keywords would break unquoted, and every field type; a type's later fields
# come after records exist.
FIELDS = {
    "Item": {
        "name": "str",
        "count": "int",
        "price": "float",
        "done": "bool",
        "order": "str",
        "select": "int",
        "tags": "list[str]",
    },
    "Visit": {
        "day": "date",
        "at": "datetime",
        "dates": "list[date]",
        "nums": "list[int]",
        "group": "list[float]",
        "flags": "list[bool]",
        "moments": "list[datetime]",
    },
    "Ledger": {"small": "int", "wide": "int", "many": "list[int]"},
}
BIGNESS = {"wide": 1, "many": 1}


def _fields(
    rng: random.Random, type_: str, known: list[str], seen: set[tuple[str, str]], big: bool
) -> dict[str, Any]:
    chosen = rng.sample(known, rng.randint(1, len(known)))
    out = {}
    for f in chosen:
        first = (type_, f) not in seen
        seen.add((type_, f))
        if not first and rng.random() < 0.2:
            out[f] = None  # an update (or add) setting the field to null
        else:
            out[f] = _value(rng, FIELDS[type_][f], BIGNESS.get(f, 0) if big else 0, first)
    return out


def history(seed: int, n: int = 120, *, raw: bool = False) -> list[dict[str, Any]]:
    """Adds, updates (some setting fields to null), retracts and re-adds over a few keys per
    type; each type starts with two fields and gains the others as the history goes on. A
    ``raw`` history (for ``append_raw``) has ints past 64 bits, and ts that go back even within
    a key, which ingest refuses and the fold takes as they come."""
    big = raw
    rng = random.Random(seed)
    live: dict[str, set[str]] = {t: set() for t in FIELDS}
    seen: set[tuple[str, str]] = set()
    known = {t: list(FIELDS[t])[:2] for t in FIELDS}
    start = datetime(2025, 1, 1)
    events = []
    for i in range(n):
        type_ = rng.choice(list(FIELDS))
        if rng.random() < 0.08 and len(known[type_]) < len(FIELDS[type_]):
            known[type_].append(list(FIELDS[type_])[len(known[type_])])
        key = f"k{rng.randint(0, 5)}"
        ts = (start + timedelta(hours=i * 3 - rng.randint(0, 30 if raw else 2))).isoformat()
        if key not in live[type_]:
            live[type_].add(key)
            fields = _fields(rng, type_, known[type_], seen, big)
            events.append(fact(ts, "add", type_, key, **fields))
        elif rng.random() < 0.25:
            live[type_].discard(key)
            events.append(fact(ts, "retract", type_, key))
        else:
            fields = _fields(rng, type_, known[type_], seen, big)
            events.append(fact(ts, "update", type_, key, **fields))
    return events


def _ingest(wb: Workbench, events: list[dict[str, Any]]) -> None:
    for lo in range(0, len(events), 40):
        wb.ingest(events[lo : lo + 40])


def append_raw(db: Path, user: str, events: list[dict[str, Any]]) -> None:
    """Append facts as they are, each field's schema event before its first use: values ingest
    would refuse or rewrite (ints past 64 bits, date-times with offsets, ints in float fields)
    as an older uac or another writer may have logged them; the fold reads them all."""
    store = Store(str(db))
    store.append(raw_events(user, events))
    store.close()


def raw_events(user: str, events: list[dict[str, Any]]) -> list[NewEvent]:
    """``events`` as the log's rows, each field's schema event before its first use."""
    out: list[NewEvent] = []
    known: set[Any] = set()
    for ev in events:
        ts = datetime.fromisoformat(ev["ts"])
        type_ = ev["type"]
        if type_ not in known:
            known.add(type_)
            out.append(NewEvent(ts, "schema", user, {"type": type_}))
        for f in ev.get("fields", {}):
            if (type_, f) not in known:
                known.add((type_, f))
                out.append(
                    NewEvent(
                        ts, "schema", user, {"type": type_, "field": f, "ftype": FIELDS[type_][f]}
                    )
                )
        payload = {k: ev[k] for k in ("op", "type", "key", "fields") if k in ev}
        out.append(NewEvent(ts, "fact", user, payload))
    return out


@pytest.mark.parametrize("seed", range(10))
def test_generated_history_builds_the_same_tables(tmp_path: Path, seed: int) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="gen")
    _ingest(wb, history(seed))
    assert assert_sql_build_matches(wb) > 500


@pytest.mark.parametrize("seed", range(10))
def test_raw_history_builds_the_same_tables(tmp_path: Path, seed: int) -> None:
    append_raw(tmp_path / "u.duckdb", "gen", history(seed, raw=True))
    wb = Workbench(tmp_path / "u.duckdb", user="gen")
    assert assert_sql_build_matches(wb) > 500


def test_ints_past_int64_pick_the_same_columns(tmp_path: Path) -> None:
    append_raw(
        tmp_path / "u.duckdb",
        "gen",
        [
            fact("2025-01-01T09:00:00", "add", "Ledger", "a", small=1, wide=1, many=[1]),
            fact("2025-01-02T09:00:00", "add", "Ledger", "b", small=2, wide=2**63),
            fact("2025-01-03T09:00:00", "update", "Ledger", "b", many=[3, 2**64 - 1, None]),
            fact("2025-01-04T09:00:00", "update", "Ledger", "a", wide=-(2**63)),
        ],
    )
    wb = Workbench(tmp_path / "u.duckdb", user="gen")
    assert_sql_build_matches(wb)
    query = "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'Ledger'"
    columns = dict(wb.sql(query).rows)
    assert columns["small"] == "BIGINT" and columns["wide"] == "HUGEINT"
    assert columns["many"] == "HUGEINT[]"
    assert wb.sql("SELECT many FROM Ledger WHERE key = 'b'").rows == [([3, 2**64 - 1, None],)]


def test_demo_builds_the_same_tables(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="maya")
    wb.ingest(demo_events())
    assert assert_sql_build_matches(wb) > 5000


def test_values_the_fold_reads_but_ingest_never_writes(tmp_path: Path) -> None:
    """A log written by another writer: an int in a float field, a date-time with an offset or
    a bare date, a field set to null on add. The fold reads them; the SQL build reads the same."""
    db = tmp_path / "u.duckdb"
    ts = datetime(2025, 1, 1, 9)
    schema = [{"type": "Odd"}] + [
        {"type": "Odd", "field": f, "ftype": t}
        for f, t in [
            ("x", "float"),
            ("at", "datetime"),
            ("ats", "list[datetime]"),
            ("xs", "list[float]"),
        ]
    ]
    facts = [
        {"op": "add", "type": "Odd", "key": "a", "fields": {"x": 3, "at": "2025-03-01T10:00:00+02:00", "ats": ["2025-03-01T23:30:00-05:00", "2025-03-02"], "xs": [1, 2.5]}},
        {"op": "add", "type": "Odd", "key": "b", "fields": {"x": None, "at": "2025-03-01"}},
        {"op": "update", "type": "Odd", "key": "a", "fields": {"at": "2025-03-01T10:00:00Z", "x": -7}},
        {"op": "update", "type": "Odd", "key": "b", "fields": {"at": "2025-03-01T10:00:00.5+0530"}},
    ]  # fmt: skip
    store = Store(str(db))
    store.append(
        [NewEvent(ts, "schema", "odd", s) for s in schema]
        + [NewEvent(ts + timedelta(minutes=i), "fact", "odd", f) for i, f in enumerate(facts)]
    )
    store.close()
    wb = Workbench(db, user="odd")
    assert_sql_build_matches(wb)
    assert wb.sql('SELECT x, "at" FROM Odd ORDER BY key').rows == [
        (-7.0, datetime(2025, 3, 1, 10)),
        (None, datetime(2025, 3, 1, 4, 30, 0, 500000)),
    ]


def test_the_tables_show_the_state_up_to_its_seq(tmp_path: Path) -> None:
    """A state folded up to some seq (as one read from a snapshot would be) gets the tables of
    that state, not of later events in the store; and only changed types are rebuilt."""
    wb = Workbench(tmp_path / "u.duckdb", user="gen")
    _ingest(wb, history(3, 200))
    store = wb.store
    events = list(store.events("gen"))
    view = SqlView(store=store)
    for upto in (events[len(events) // 3].seq, events[2 * len(events) // 3].seq, events[-1].seq):
        state = fold("gen", store.events("gen", upto_seq=upto))
        view.refresh(state)
        assert_same_tables(read_tables(view), python_tables(state))
        assert view._built == state.type_seq
    loads = view._loads
    view.refresh(state)
    assert view._loads == loads  # nothing changed: nothing built
    wb.ingest([fact("2026-01-01T09:00:00", "add", "Item", "new", name="x", count=1)])
    built = dict(view._built)
    view.refresh(wb.state)
    assert view._loads == loads + 1
    assert {t for t in built if built[t] != view._built[t]} == {"Item"}
    assert_same_tables(read_tables(view), python_tables(wb.state))


def test_the_view_reads_no_file_but_its_build(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="gen")
    _ingest(wb, history(1))
    wb.sql("SELECT 1")
    view = wb._sql
    assert view is not None and view._dir is not None
    assert list(Path(view._dir.name).iterdir()) == []  # the build file is gone
    (tmp_path / "x.csv").write_text("a\n1\n")
    with pytest.raises(duckdb.PermissionException):
        view.con.execute(f"SELECT * FROM read_csv('{tmp_path / 'x.csv'}')")
    with pytest.raises(duckdb.Error):
        view.con.execute(f"ATTACH '{tmp_path / 'u.duckdb'}' AS s (READ_ONLY)")


# -- current tables from a snapshot ---------------------------------------------------------


def _snapshot_store(db: Path, seed: int, raw: bool) -> None:
    """A store of a generated history whose snapshot covers its first two thirds; the rest
    (updates, retracts, records added again, new fields) is logged after it."""
    rows = raw_events("gen", history(seed, 240, raw=raw))
    cut = len(rows) * 2 // 3
    store = Store(str(db))
    store.append(rows[:cut])
    store.close()
    with Workbench(db, user="gen") as wb:
        wb.checkpoint()  # writes the snapshot
    store = Store(str(db))
    store.append(rows[cut:])
    store.close()


def _current_only(tables: Tables, view: SqlView) -> Tables:
    return {cur: tables[cur] for cur, _ in view.tables.values()}


@pytest.mark.parametrize("raw", [False, True], ids=["ingested", "raw"])
@pytest.mark.parametrize("seed", range(6))
def test_current_tables_from_a_snapshot_equal_the_fold(
    tmp_path: Path, seed: int, raw: bool
) -> None:
    """A query that names only current tables reads them from the snapshot's typed tables and
    the records changed since; cell, type and row order are the fold's, and the history tables
    built after them agree in every column type."""
    db = tmp_path / "u.duckdb"
    _snapshot_store(db, seed, raw)
    with Workbench(db, user="gen", read_only=True) as wb:
        assert any(isinstance(ts, SnapTypeState) for ts in wb.state.types.values())
        given: dict[str, bool] = {}

        def stored(cur: duckdb.DuckDBPyConnection, name: str) -> Stored | None:
            rows = stored_current(cur, wb.state, wb._snap, name)
            given[name] = rows is not None
            return rows

        view = SqlView(store=wb.store, stored=stored)
        view.query(wb.state, "SELECT * FROM uac_tables")
        for cur, _ in view.tables.values():
            view.query(wb.state, f'SELECT count(*) FROM "{cur}"')
        assert given.keys() == set(wb.state.types) and any(given.values())
        want = python_tables(wb.state)
        assert_same_tables(_current_only(read_tables_now(view), view), _current_only(want, view))
        view.refresh(wb.state)  # every history table, from the log
        assert_same_tables(read_tables(view), want)


def read_tables_now(view: SqlView) -> Tables:
    """The tables the view holds (a current table without its history table)."""
    held = {n for (n,) in view.con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    out = {}
    for table in held - {"uac_tables", "uac_constraints", "uac_vocabulary"}:
        columns = view.con.execute(f'DESCRIBE "{table}"').fetchall()
        out[table] = (columns, view.con.execute(f'FROM "{table}"').fetchall())
    return out


def test_a_value_the_snapshot_column_cannot_hold_is_read_from_the_log(tmp_path: Path) -> None:
    """A date-time with an offset logged after a snapshot whose column holds naive times (a
    wider column), and a field added after it: that type's current table comes from the log."""
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="odd") as wb:
        wb.ingest(
            [
                fact("2025-01-01T09:00:00", "add", "Odd", "a", at="2025-02-01T10:00:00"),
                fact("2025-01-01T09:00:00", "add", "Item", "i", name="x", count=1),
            ]
        )
        wb.checkpoint()
    store = Store(str(db))
    ts = datetime(2025, 1, 2, 9)
    store.append(
        [
            NewEvent(ts, "fact", "odd", {"op": "update", "type": "Odd", "key": "a", "fields": {"at": "2025-02-01T10:00:00+05:30"}}),
            NewEvent(ts, "schema", "odd", {"type": "Item", "field": "price", "ftype": "float"}),
            NewEvent(ts, "fact", "odd", {"op": "add", "type": "Item", "key": "j", "fields": {"price": 2.5}}),
        ]
    )  # fmt: skip
    store.close()
    with Workbench(db, user="odd", read_only=True) as wb:
        cur = wb.store.con.cursor()
        assert stored_current(cur, wb.state, wb._snap, "Odd") is None  # wider
        assert stored_current(cur, wb.state, wb._snap, "Item") is None  # new field
        cur.close()
        assert wb.sql('SELECT "at" FROM Odd').rows == [(datetime(2025, 2, 1, 4, 30),)]
        assert wb.sql("SELECT key, price FROM Item ORDER BY key").rows == [("i", None), ("j", 2.5)]
        assert_sql_build_matches(wb)


def test_a_snapshot_another_workbench_rewrote_is_not_read_for_this_state(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    _snapshot_store(db, 1, False)
    with Workbench(db, user="gen") as a, Workbench(db, user="gen") as b:
        state, mark = a.state, a._snap
        assert mark is not None
        count = a.sql("SELECT count(*) FROM Item").rows[0][0]
        b.ingest([fact("2026-01-01T09:00:00", "add", "Item", "new", name="x", count=1)])
        b.checkpoint()  # a new snapshot generation
        cur = a.store.con.cursor()
        assert stored_current(cur, state, mark, "Item") is None
        cur.close()
        assert a.sql("SELECT count(*) FROM Item").rows == [(count + 1,)]
        assert_sql_build_matches(a)
