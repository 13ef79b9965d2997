"""Attacks on ``uac sql`` reading a current table from the snapshot's typed table (and building
a history table only when a query names it): every answer must be the full fold's, as the
Python build of a fresh fold of the whole log gives it (column types and row order included).

Real stores under tmp_path, real workbenches, no mocks."""

from __future__ import annotations

import json
import random
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers.events import fact, jsonl, notes
from helpers.sharing import patient_uac
from helpers.sql import Tables, assert_same_tables, python_tables

from uac_kernel import Workbench
from uac_kernel.checkpoints.snapshot import stored_current
from uac_kernel.core.errors import QueryError
from uac_kernel.log.store import NewEvent, Store
from uac_kernel.state.fold import fold

# -- helpers ---------------------------------------------------------------------------------


def full_fold(wb: Workbench) -> Tables:
    """The Python build of a fold of the whole log (no snapshot): the reference."""
    return python_tables(fold(wb.user, wb.store.events(wb.user)))


def held(wb: Workbench, table: str) -> tuple[list[Any], list[tuple[Any, ...]]]:
    view = wb._sql
    assert view is not None
    quoted = '"' + table.replace('"', '""') + '"'
    return view.con.execute(f"DESCRIBE {quoted}").fetchall(), view.con.execute(
        f"FROM {quoted}"
    ).fetchall()


def assert_fold(wb: Workbench, *tables: str, ref: Tables | None = None) -> None:
    """The view's ``tables`` (as built by the queries so far) equal the full fold's."""
    ref = full_fold(wb) if ref is None else ref
    assert_same_tables({t: held(wb, t) for t in tables}, {t: ref[t] for t in tables})


def q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def append_raw(
    db: Path, user: str, events: list[dict[str, Any]], ftypes: dict[str, str], known: set[Any]
) -> None:
    """Append facts as an older uac or another writer logged them (past today's ingest checks),
    each type's and field's schema event before its first use (``known`` carries over)."""
    out = []
    for ev in events:
        ts = datetime.fromisoformat(ev["ts"])
        t = ev["type"]
        if t not in known:
            known.add(t)
            out.append(NewEvent(ts, "schema", user, {"type": t}))
        for f in ev.get("fields", {}):
            if (t, f) not in known:
                known.add((t, f))
                schema = {"type": t, "field": f, "ftype": ftypes.get(f, "int")}
                out.append(NewEvent(ts, "schema", user, schema))
        payload = {k: ev[k] for k in ("op", "type", "key", "fields") if k in ev}
        out.append(NewEvent(ts, "fact", user, payload))
    store = Store(str(db))
    store.append(out)
    store.close()


def stored_types(wb: Workbench) -> set[str]:
    """The types whose current table the workbench's snapshot can give now."""
    cur = wb.store.con.cursor()
    try:
        return {n for n in wb.state.types if stored_current(cur, wb.state, wb._snap, n)}
    finally:
        cur.close()


def retract(ev: dict[str, Any], source: str) -> dict[str, Any]:
    return {k: ev[k] for k in ("kind", "ts", "type", "key")} | {"op": "retract", "source": source}


# -- defects ---------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["pos", "POS"])
def test_a_field_named_pos_keeps_the_creation_order(tmp_path: Path, field: str) -> None:
    """``build_stored`` orders the copied rows by ``pos``, the snapshot's creation position; a
    field named ``pos`` (any case; names.py allows it) is a select-list alias of the same name,
    and DuckDB's ORDER BY binds the alias first: the rows come sorted by the field's values."""
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="u") as wb:
        wb.ingest(
            [
                fact("2025-01-01T09:00:00", "add", "Slot", "a", **{field: 3}),
                fact("2025-01-01T09:01:00", "add", "Slot", "b", **{field: 1}),
                fact("2025-01-01T09:02:00", "add", "Slot", "c", **{field: 2}),
            ]
        )
        wb.checkpoint()
    with Workbench(db, user="u", read_only=True) as wb:
        assert stored_types(wb) == {"Slot"}  # the current table comes from the snapshot
        assert wb.sql("SELECT key FROM Slot").rows == [("a",), ("b",), ("c",)]
        assert_fold(wb, "Slot")


def test_a_catalog_function_beside_a_current_table_sees_its_fresh_history(
    tmp_path: Path,
) -> None:
    """A query naming ``Trip`` now leaves ``Trip_history`` as an earlier query built it, and
    ``pragma_table_info``/``duckdb_columns()``/``duckdb_tables()`` take a table by a string
    (no table name for ``reads``): they see the stale history table (a field added since is
    missing). Before, a query naming ``Trip`` rebuilt both of its tables."""
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="u") as wb:
        wb.ingest([fact("2025-01-01T09:00:00", "add", "Trip", "a", miles=1)])
        wb.sql("SELECT count(*) FROM Trip_history")
        wb.ingest(
            [
                fact("2025-01-01T10:00:00", "update", "Trip", "a", miles=2, note="x"),
                fact("2025-01-01T10:00:00", "add", "Trip", "b", miles=3),
            ]
        )
        assert wb.sql("SELECT count(*) FROM Trip").rows == [(2,)]
        got = wb.sql(
            "SELECT name FROM pragma_table_info('Trip_history'), (FROM Trip LIMIT 1) ORDER BY cid"
        ).rows
    assert got == [
        ("key",),
        ("miles",),
        ("note",),
        ("valid_from",),
        ("valid_to",),
        ("sources",),
        ("retracted",),
    ]


def test_a_snapshot_retyped_by_hand_with_its_meta_does_not_retype_the_sql_column(
    tmp_path: Path,
) -> None:
    """A hostile store: an int field's snapshot columns and the meta's column type both made
    VARCHAR. The open accepts it (columns as the meta says) and the state reads the ints back
    (``_reader``), but ``build_stored`` copies the column as it is: ``Note.n`` is VARCHAR of
    digits, where the fold (and ``eval`` on this very state) has BIGINT ints."""
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="u") as wb:
        wb.ingest(notes("a", 3))
        wb.checkpoint()
    con = duckdb.connect(str(db))
    (table,) = [
        r[0]
        for r in con.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = 'uac_snap' AND table_name LIKE '%_cur'"
        ).fetchall()
    ]
    row = con.execute("SELECT meta FROM snapshots").fetchone()
    assert row is not None
    meta = json.loads(row[0])
    for f in meta["types"]["Note"]["fields"]:
        if f[0] == "n":
            f[2] = "VARCHAR"
    con.execute("UPDATE snapshots SET meta = ?", [json.dumps(meta)])
    for part in ("cur", "hist"):
        con.execute(f'ALTER TABLE uac_snap."{table[:-3]}{part}" ALTER c1 TYPE VARCHAR')
    con.close()
    with Workbench(db, user="u", read_only=True) as wb:
        assert wb._snap is not None  # accepted
        assert wb.eval("[r.n for r in user.all('Note')]") == [0, 1, 2]  # the state is right
        assert wb.sql("SELECT n FROM Note").rows == [(0,), (1,), (2,)]
        assert_fold(wb, "Note")


# -- cases that held -------------------------------------------------------------------------


def test_current_then_history_then_current_after_ingests_in_one_workbench(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="u") as wb:
        wb.ingest(
            [fact(f"2025-01-01T09:0{i}:00", "add", "Trip", f"k{i}", miles=i) for i in range(5)]
        )
        wb.checkpoint()
        steps = [
            [fact("2025-01-02T09:00:00", "update", "Trip", "k1", miles=None, note="n")],
            [fact("2025-01-02T10:00:00", "retract", "Trip", "k2")],
            [fact("2025-01-02T11:00:00", "add", "Trip", "k2", miles=9)],
            [fact("2025-01-02T12:00:00", "add", "Trip", "k9", tags=["a", "b"])],
        ]
        for n, batch in enumerate(steps):
            wb.ingest(batch)
            wb.sql("SELECT count(*) FROM Trip")
            assert_fold(wb, "Trip")
            wb.sql("SELECT count(*) FROM trip_HISTORY")
            assert_fold(wb, "Trip", "Trip_history")
            if n == 1:
                wb.checkpoint()
            wb.sql('SELECT count(*) FROM "Trip"')
            assert_fold(wb, "Trip")
        # a stale history table is not reachable by the ways a query names it
        wb.ingest([fact("2025-01-03T09:00:00", "update", "Trip", "k0", miles=100)])
        want = full_fold(wb)["Trip_history"][1]
        for query in [
            "SELECT count(*) FROM Trip, query_table('Trip_history')",
            "SELECT count(*) FROM Trip, query('FROM Trip_history')",
            "SELECT (SELECT count(*) FROM Trip_history) FROM Trip LIMIT 1",
            "WITH h AS (FROM Trip_history) SELECT count(*) FROM Trip, h",
            "SELECT count(*) FROM Trip t, LATERAL (FROM Trip_history h WHERE h.key = t.key)",
            "SELECT count(*) FROM Trip, (FROM query_table('Trip' || '_history'))",
            "SELECT count(*) FROM Trip, main.TRIP_HISTORY",
        ]:
            wb.sql(query)
            assert held(wb, "Trip_history")[1] == want, query
            wb.ingest([fact("2025-01-03T09:00:00", "update", "Trip", "k0", miles=len(query))])
            want = full_fold(wb)["Trip_history"][1]
            wb.sql("SELECT 1 FROM Trip")  # current only: the history goes stale again


def test_changes_after_a_snapshot_of_every_kind(tmp_path: Path) -> None:
    """Updates, retracts, re-adds, nulls, lists, aware date-times and ints past 64 bits after the
    snapshot; a type new since, a field new since, a type retracted whole before it."""
    db = tmp_path / "u.duckdb"
    ftypes = {
        "n": "int",
        "big": "int",
        "at": "datetime",
        "ats": "list[datetime]",
        "tags": "list[str]",
        "ints": "list[int]",
        "x": "float",
        "new": "str",
    }
    known: set[Any] = set()
    before = [
        fact("2025-01-01T09:00:00", "add", "A", "a1", n=1, at="2025-01-01T10:00:00+05:30", ats=["2025-01-01T10:00:00", "2025-01-01T10:00:00Z"]),
        fact("2025-01-01T09:00:00", "add", "A", "a2", n=2, big=2**63, at="2025-01-01T10:00:00"),
        fact("2025-01-01T09:00:00", "add", "A", "a3", n=3, tags=["x"], ints=[1, 2]),
        fact("2025-01-01T09:00:00", "add", "B", "b1", n=1, at="2025-01-01T10:00:00"),
        fact("2025-01-01T09:00:00", "add", "B", "b2", n=2, at="2025-01-01T11:00:00"),
        fact("2025-01-01T09:00:00", "add", "Gone", "g", n=1),
        fact("2025-01-01T09:30:00", "retract", "Gone", "g"),
        fact("2025-01-01T09:00:00", "add", "Empty", "e"),
        fact("2025-01-01T09:00:00", "add", "Wide", "w", n=1, ints=[1]),
    ]  # fmt: skip
    append_raw(db, "u", before, ftypes, known)
    with Workbench(db, user="u") as wb:
        wb.checkpoint()
    after = [
        fact("2025-01-02T09:00:00", "update", "A", "a1", n=None, at="2025-01-05T23:30:00-07:00"),
        fact("2025-01-02T09:00:00", "update", "A", "a2", big=2**64 - 1, ats=["2025-03-01T01:02:03.123456+05:30", None]),
        fact("2025-01-02T09:00:00", "retract", "A", "a3"),
        fact("2025-01-02T10:00:00", "add", "A", "a3", n=33),
        fact("2025-01-02T10:00:00", "add", "A", "a0", tags=[], ints=[]),
        fact("2025-01-02T09:00:00", "update", "B", "b1", at=None),
        fact("2025-01-02T09:00:00", "add", "Gone", "g", n=2),
        fact("2025-01-02T09:00:00", "add", "Empty", "f"),
        fact("2025-01-02T09:00:00", "add", "Late", "l", n=5, x=0.5),
        fact("2025-01-02T09:00:00", "update", "Wide", "w", ints=[2**63 + 1]),
        fact("2025-01-02T09:00:00", "add", "B", "b3", n=3, new="since"),
    ]  # fmt: skip
    append_raw(db, "u", after, ftypes, known)
    with Workbench(db, user="u", read_only=True) as wb:
        # B has a new field, Wide a wider column, Late no snapshot table: from the log
        assert stored_types(wb) == {"A", "Gone", "Empty"}
        ref = full_fold(wb)
        for name in ["A", "B", "Gone", "Empty", "Late", "Wide"]:
            wb.sql(f"SELECT count(*) FROM {name}")
            assert_fold(wb, name, ref=ref)
        wb.sql("SELECT count(*) FROM A_history, Wide_history")
        assert_fold(wb, "A", "A_history", "Wide", "Wide_history", ref=ref)


def test_another_workbench_ingests_and_rewrites_the_snapshot_between_two_queries(
    tmp_path: Path,
) -> None:
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="u") as wb:
        wb.ingest(notes("a", 40))
        wb.checkpoint()
    with Workbench(db, user="u") as a, Workbench(db, user="u") as b:
        assert a.sql("SELECT count(*), sum(n) FROM Note").rows == [(40, sum(range(40)))]
        b.ingest([{**notes("a", 1)[0], "op": "update", "fields": {"n": 1000}, "source": "u:0"}])
        assert a.sql("SELECT count(*), sum(n) FROM Note").rows == [(40, sum(range(40)) + 1000)]
        assert_fold(a, "Note")
        b.ingest(notes("b", 3))
        b.checkpoint()  # a new generation: a opens again
        assert a.sql("SELECT count(*), sum(n) FROM Note").rows == [(43, sum(range(40)) + 1003)]
        assert_fold(a, "Note")
        b.ingest([retract(notes("b", 1)[0], "r:0")])
        b.checkpoint()
        a.sql("SELECT count(*) FROM Note")
        assert_fold(a, "Note")


def test_another_process_forgets_and_writes_a_snapshot_of_the_same_generation(
    tmp_path: Path,
) -> None:
    """A forget drops the snapshot, so the next one written is generation 1 again, as the one
    this workbench read: the forget event still makes it open again."""
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="u") as wb:
        wb.ingest(notes("a", 30))
        wb.checkpoint()
    nb = Workbench(db, user="u")
    try:
        assert nb._snap is not None and nb._snap.gen == 1
        assert nb.sql("SELECT count(*) FROM Note").rows == [(30,)]
        run = patient_uac(
            "forget", "--db", str(db), "--user", "u", "--record", "Note", "a1", cwd=tmp_path
        )
        assert run.returncode == 0, run.stderr
        more = jsonl(tmp_path / "more.jsonl", notes("b", 5))
        assert (
            patient_uac(
                "ingest", str(more), "--db", str(db), "--user", "u", cwd=tmp_path
            ).returncode
            == 0
        )
        assert (
            patient_uac("checkpoint", "--db", str(db), "--user", "u", cwd=tmp_path).returncode == 0
        )
        assert nb.sql("SELECT count(*) FROM Note WHERE key = 'a1'").rows == [(0,)]
        assert nb._snap is not None and nb._snap.gen == 1
        assert_fold(nb, "Note")
    finally:
        nb.close()


def test_a_forget_after_the_snapshot_is_not_read_back_from_it(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="u") as wb:
        wb.ingest(notes("a", 10))
        wb.checkpoint()
        assert wb.sql("SELECT count(*) FROM Note").rows == [(10,)]
        wb.forget(type="Note", key="a3")
        assert wb.sql("SELECT count(*) FROM Note WHERE key = 'a3'").rows == [(0,)]
        assert_fold(wb, "Note")
        wb.checkpoint()
        wb.ingest(notes("c", 2))
        wb.sql("SELECT count(*) FROM Note")
        assert_fold(wb, "Note")


def test_hostile_names_and_keys_from_the_snapshot(tmp_path: Path) -> None:
    """Types renamed in SQL (TRIP after Trip and Trip_2, a type named like a history table or
    uac_tables), field names c0/c1 (the snapshot's column names), quotes, unicode, SQL."""
    db = tmp_path / "u.duckdb"
    types = ["Trip", "TRIP", "Trip_history", "it's", "naïve ☃", "uac_tables", "Trip_2", "h0",
             "uac_snap_changed", "Select", "trip_2_history"]  # fmt: skip
    fields = ["c1", "c0", 'a"b', "select", "ünï", "key_", "uac_snap_changed"]
    keys = ["k'1", 'k"2', "k3' OR '1'='1", "☃", " ", "a\\b", "NULL"]
    known: set[Any] = set()
    append_raw(
        db,
        "u\"'x",
        [
            fact(f"2025-01-01T09:{j:02d}:00", "add", t, k, **{f: (j * 7 + n) % 5 for n, f in enumerate(fields)})
            for t in types
            for j, k in enumerate(keys)
        ],
        {},
        known,
    )  # fmt: skip
    with Workbench(db, user="u\"'x") as wb:
        wb.checkpoint()
    append_raw(
        db,
        "u\"'x",
        [fact("2025-01-02T09:00:00", "update", t, keys[0], c0=99) for t in types]
        + [fact("2025-01-02T09:00:00", "retract", t, keys[1]) for t in types]
        + [fact("2025-01-02T09:00:00", "add", t, keys[1], c1=7) for t in types[::2]],
        {},
        known,
    )
    with Workbench(db, user="u\"'x", read_only=True) as wb:
        assert stored_types(wb) == set(types)
        ref = full_fold(wb)
        names = wb.sql_tables()
        assert names["TRIP"] == ("TRIP_3", "TRIP_3_history")
        for cur, _ in names.values():
            wb.sql(f"SELECT count(*) FROM {q(cur)}")
        assert_fold(wb, *(cur for cur, _ in names.values()), ref=ref)
        wb.sql("SHOW TABLES")
        assert_fold(wb, *(t for pair in names.values() for t in pair), ref=ref)


def test_many_types_some_from_the_snapshot_some_from_the_log_in_one_query(tmp_path: Path) -> None:
    """The ``h<i>`` tables of one build mix types copied from the snapshot and folded from the
    log (new field, wider column, new type): each lands in its own table."""
    db = tmp_path / "u.duckdb"
    rng = random.Random(7)
    known: set[Any] = set()
    first = [
        fact("2025-01-01T09:00:00", "add", f"T{i}", f"k{j}", n=i * 100 + j)
        for i in range(30)
        for j in range(3)
    ]
    append_raw(db, "u", first, {"s": "str"}, known)
    with Workbench(db, user="u") as wb:
        wb.checkpoint()
    later = []
    for i in range(30):
        kind = rng.choice(["none", "update", "field", "wide", "retract"])
        if kind == "update":
            later.append(fact("2025-01-02T09:00:00", "update", f"T{i}", "k1", n=-i))
        elif kind == "field":
            later.append(fact("2025-01-02T09:00:00", "update", f"T{i}", "k0", s=f"s{i}"))
        elif kind == "wide":
            later.append(fact("2025-01-02T09:00:00", "update", f"T{i}", "k2", n=2**63 + i))
        elif kind == "retract":
            later.append(fact("2025-01-02T09:00:00", "retract", f"T{i}", "k0"))
    later += [fact("2025-01-02T09:00:00", "add", f"New{i}", "k", n=i) for i in range(5)]
    append_raw(db, "u", later, {"s": "str"}, known)
    with Workbench(db, user="u", read_only=True) as wb:
        ref = full_fold(wb)
        names = wb.sql_tables()
        order = list(names)
        rng.shuffle(order)
        tables = [names[t][0] for t in order]
        wb.sql("SELECT count(*) FROM " + ", ".join(f"(SELECT count(*) FROM {t})" for t in tables))
        assert_fold(wb, *tables, ref=ref)
        wb.sql(f"SELECT count(*) FROM {names[order[0]][1]}, {names[order[1]][0]}")
        assert_fold(wb, names[order[0]][1], *tables, ref=ref)


@pytest.mark.parametrize("snapshots", [True, False])
def test_a_workbench_without_snapshots_and_a_read_only_one(tmp_path: Path, snapshots: bool) -> None:
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="u") as wb:
        wb.ingest(notes("a", 20))
        wb.checkpoint()
    with Workbench(db, user="u", snapshots=snapshots) as wb:
        wb.ingest(notes("b", 3))
        wb.checkpoint()  # writes no snapshot without snapshots
        wb.ingest([retract(notes("a", 2)[1], "r")])
        assert wb.sql("SELECT count(*) FROM Note").rows == [(22,)]
        assert_fold(wb, "Note")
    with Workbench(db, user="u", read_only=True) as wb:
        assert wb.sql("SELECT count(*) FROM Note").rows == [(22,)]
        assert_fold(wb, "Note")
        with pytest.raises(QueryError):
            wb.sql("DELETE FROM Note")


def test_a_whatif_leaves_the_current_table_as_the_log_has_it(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="u") as wb:
        wb.ingest(notes("a", 5))
        wb.checkpoint()
        assert wb.sql("SELECT count(*) FROM Note").rows == [(5,)]
        report = wb.whatif([*notes("w", 3), retract(notes("a", 1)[0], "x")])
        assert report.new == 4
        assert wb.sql("SELECT count(*) FROM Note").rows == [(5,)]
        wb.apply_whatif(report)
        assert wb.sql("SELECT count(*) FROM Note").rows == [(7,)]
        assert_fold(wb, "Note")


def test_sql_tables_builds_nothing_and_names_as_the_view_does(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    known: set[Any] = set()
    append_raw(
        db,
        "u",
        [fact("2025-01-01T09:00:00", "add", t, "k", n=1) for t in ["Trip", "TRIP", "Trip_2"]],
        {},
        known,
    )
    with Workbench(db, user="u") as wb:
        names = wb.sql_tables()
        assert wb._sql is None
        wb.sql("SELECT 1 FROM uac_tables")
        assert wb._sql is not None and wb._sql.tables == names
        got = {r[0]: (r[1], r[2]) for r in wb.sql("FROM uac_tables").rows}
        assert got == names


def test_a_snapshot_column_tampered_by_hand_is_not_read(tmp_path: Path) -> None:
    """A hostile store: the snapshot's current table retyped and a row added. The open checks
    columns and row counts and folds the log instead."""
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="u") as wb:
        wb.ingest(notes("a", 5))
        wb.checkpoint()
    con = duckdb.connect(str(db))
    (table,) = [
        r[0]
        for r in con.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = 'uac_snap' AND table_name LIKE '%_cur'"
        ).fetchall()
    ]
    con.execute(f'ALTER TABLE uac_snap."{table}" ALTER c1 TYPE VARCHAR')
    con.execute(f"INSERT INTO uac_snap.\"{table}\" (key, pos) VALUES ('evil', 99)")
    con.close()
    with pytest.warns(Warning), Workbench(db, user="u", read_only=True) as wb:
        assert wb._snap is None
        assert wb.sql("SELECT count(*) FROM Note").rows == [(5,)]
        assert_fold(wb, "Note")


def test_two_users_with_snapshots_each_read_their_own(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    for user, n in (("ann", 4), ("bob", 6)):
        with Workbench(db, user=user) as wb:
            wb.ingest(notes(user, n))
            wb.checkpoint()
    for user in ("ann", "bob"):
        with Workbench(db, user=user) as wb:
            wb.ingest([retract(notes(user, 1)[0], "r"), *notes(user + "x", 2)])
    for user, count in (("ann", 5), ("bob", 7)):
        with Workbench(db, user=user, read_only=True) as wb:
            assert stored_types(wb) == {"Note"}
            assert wb.sql("SELECT count(*) FROM Note").rows == [(count,)]
            assert wb.sql(f"SELECT count(*) FROM Note WHERE key NOT LIKE '{user}%'").rows == [(0,)]
            assert_fold(wb, "Note")
