"""Snapshots of the fold (uac_kernel.checkpoints.snapshot): an open from a snapshot plus the events after it
gives every answer a full fold gives; a snapshot that does not fit the log is ignored with a
warning; forget leaves nothing erased in one. Real DuckDB files, copied so that the same store
is opened once with its snapshot and once without."""

from __future__ import annotations

import importlib
import shutil
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import duckdb
import pytest
from helpers.constraints import TAX
from helpers.snapshots import (
    answers,
    compare,
    demo_store,
    opened_from_snapshot,
    put_back,
    snapshot_of,
    split_demo,
)

from uac_kernel.checkpoints.snapshot import drop_snapshots
from uac_kernel.checkpoints.snaptypes import SnapTypeState
from uac_kernel.core.errors import SnapshotIgnored
from uac_kernel.demo.life import write_demo_jsonl
from uac_kernel.log.store import Store
from uac_kernel.workbench import Workbench

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def scale(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """bench/scale.py as a module, for its ``History`` generator."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    return importlib.import_module("scale")


def test_demo_with_snapshot_and_new_events_answers_as_the_full_fold(tmp_path: Path) -> None:
    db = demo_store(tmp_path)
    store = Store(db, read_only=True)
    row = store.con.execute("SELECT user_id, seq FROM snapshots").fetchall()
    last = store.con.execute("SELECT max(seq) FROM events").fetchone()
    store.close()
    assert row and row[0][0] == "demo" and last and row[0][1] < last[0]  # new events after it
    compare(db, "demo", tmp_path)
    with Workbench(db, user="demo", read_only=True) as wb:  # verify reads the log, not snapshots
        report = wb.verify()
        assert report.ok and report.events == last[0], report.problem


def test_snapshot_written_at_checkpoint_is_incremental_and_still_exact(tmp_path: Path) -> None:
    """Open from a snapshot, ingest, checkpoint again (new rows only), reopen: still exact; and
    a workbench that never read some types writes them untouched."""
    db = demo_store(tmp_path)
    with Workbench(db, user="demo") as wb:
        gen = wb._snap.gen if wb._snap else 0
        wb.ingest(
            [
                {"kind": "fact", "ts": "2026-01-02T09:00:00", "op": "add", "type": "Book",
                 "key": "late-book", "fields": {"title": "Late", "pages_late": 10}},
            ]
        )  # fmt: skip
        wb.checkpoint()
        assert wb._snap is not None and wb._snap.gen == gen + 1
    compare(db, "demo", tmp_path)


def history_store(tmp_path: Path, scale: ModuleType, rounds: int = 3) -> Path:
    """A generated history in rounds, each checkpointed (a snapshot, incremental after the
    first), then events not in any snapshot: updates, retractions, a re-add, late new fields,
    a new type with the widest ints, aware date-times, lists, and constraints."""
    history = scale.History(1500)
    db = tmp_path / "gen.duckdb"
    for r in range(rounds):
        events = [history.next() for _ in range(400)]
        ts = events[-1]["ts"]
        t = "Transaction" if history.live["Transaction"] else scale.TYPES[0]
        live = history.live[t][0]
        events += [
            {"kind": "fact", "ts": ts, "op": "update", "type": t, "key": live,
             "fields": {f"late_{r}": r, f"when_{r}": "2025-01-01T10:00:00+02:00"}},
            {"kind": "fact", "ts": ts, "op": "add", "type": "Gadget", "key": f"g{r}",
             "fields": {"big": 2**63 - 1 if r else -(2**63), "tags": ["a", "b"],
                        "days": ["2025-01-01", "2025-02-01"], "ratio": 1.5,
                        "stamp": "2025-01-01T10:00:00+02:00" if r else "2025-01-01T10:00"}},
        ]  # fmt: skip
        with Workbench(db, user="me") as wb:
            wb.ingest(events)
            if r == 0:
                wb.constrain(TAX, key="tax")
            wb.checkpoint()
    tail = [history.next() for _ in range(300)]
    ts = tail[-1]["ts"]
    tail += [
        {"kind": "fact", "ts": ts, "op": "retract", "type": "Gadget", "key": "g0"},
        {"kind": "fact", "ts": ts, "op": "add", "type": "Gadget", "key": "g0",
         "fields": {"big": 7, "when": "2025-03-01T10:00:00"}},
        {"kind": "fact", "ts": ts, "op": "add", "type": "Newcomer", "key": "n1",
         "fields": {"x": 1}},
    ]  # fmt: skip
    with Workbench(db, user="me") as wb:
        wb.ingest(tail)
        wb.retract_constraint("tax", reason="filed")
    return db


def test_generated_history_with_snapshot_answers_as_the_full_fold(
    tmp_path: Path, scale: ModuleType
) -> None:
    db = history_store(tmp_path, scale)
    compare(db, "me", tmp_path)


def test_snapshot_open_reads_only_the_rows_the_new_events_touch(
    tmp_path: Path, scale: ModuleType
) -> None:
    """With no rules in force, an open after a snapshot reads no type's table whole: the fold
    of the new events fetched the rows of their keys only."""
    db = history_store(tmp_path, scale, rounds=1)
    with Workbench(db, user="me", read_only=True, rules=()) as wb:
        lazy = [ts for ts in wb.state.types.values() if isinstance(ts, SnapTypeState)]
        assert lazy and all(not ts._loaded for ts in lazy)
        assert wb.eval("1") == 1 and all(not ts._loaded for ts in lazy)
        n = wb.eval("len(user.all('Gadget'))")
        assert n == 1 and all(ts._loaded == {"current", "history", "order"} for ts in lazy)


def test_versions_of_one_record_are_read_by_key_and_equal_the_full_folds(
    tmp_path: Path, scale: ModuleType
) -> None:
    """``State.versions`` (an alert cleared names what changed; ``uac history``) reads one
    key's ended versions with a query, not the type's whole history table."""
    db = history_store(tmp_path, scale, rounds=1)
    with Workbench(db, user="me", read_only=True, rules=(), snapshots=False) as full:
        wanted = {
            (t, k): [r.model_dump() for r in full.state.versions(t, k)]
            for t, ts in full.state.types.items()
            for k in dict.fromkeys(r.key for r in ts.history)
        }
    assert len(wanted) > 5 and any(len(v) > 1 for v in wanted.values())
    with Workbench(db, user="me", read_only=True, rules=()) as wb:
        lazy = {t for t, ts in wb.state.types.items() if isinstance(ts, SnapTypeState)}
        for (t, k), versions in list(wanted.items())[:4]:  # within the reads-by-key budget
            if t in lazy:
                assert [r.model_dump() for r in wb.state.versions(t, k)] == versions
                assert "history" not in wb.state.types[t]._loaded
        for (t, k), versions in wanted.items():  # past it, the history is read whole, once
            assert [r.model_dump() for r in wb.state.versions(t, k)] == versions
        t, k = next(iter(wanted))
        if k.isdigit():  # a key is text: the number it spells names no record
            assert wb.state.versions(t, int(k)) == []  # type: ignore[arg-type]
        assert wb.state.types[t].ended(5) == []  # type: ignore[arg-type]


def _corrupt(db: Path, how: str) -> None:
    con = duckdb.connect(str(db))
    try:
        tables = [
            r[0]
            for r in con.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = 'uac_snap' ORDER BY table_name"
            ).fetchall()
        ]
        cur = next(t for t in tables if t.endswith("_cur"))
        if how == "hash":
            con.execute("UPDATE snapshots SET hash = 'sha256:' || repeat('0', 64)")
        elif how == "missing table":
            con.execute(f'DROP TABLE uac_snap."{cur}"')
        elif how == "column type":
            con.execute(f'ALTER TABLE uac_snap."{cur}" ALTER COLUMN pos TYPE VARCHAR')
        elif how == "meta":
            con.execute("""UPDATE snapshots SET meta = '{"schema": [1, 2], "types": 3}'""")
        elif how == "meta types":
            con.execute("UPDATE snapshots SET meta = json_merge_patch(meta, '{\"types\": 7}')")
        elif how == "rows":
            con.execute(f'DELETE FROM uac_snap."{cur.removesuffix("_cur")}_hist"')
        elif how == "format":
            con.execute("UPDATE snapshots SET format = 999")
        else:
            raise AssertionError(how)
    finally:
        con.close()


@pytest.mark.parametrize(
    "how", ["hash", "missing table", "column type", "meta", "meta types", "rows", "format"]
)
def test_a_damaged_snapshot_is_ignored_with_a_warning(tmp_path: Path, how: str) -> None:
    db = demo_store(tmp_path)
    _corrupt(db, how)
    compare(db, "demo", tmp_path, ignored=True)


def _holding(db: Path, needle: str) -> list[str]:
    """The tables of the store file with a cell holding ``needle``."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        found = []
        for schema, name in con.execute(
            "SELECT table_schema, table_name FROM information_schema.tables"
        ).fetchall():
            rows = con.execute(f'SELECT * FROM "{schema}"."{name}"').fetchall()
            if needle in repr(rows):
                found.append(f"{schema}.{name}")
        return found
    finally:
        con.close()


SECRET = "Zebra-Secret-4711"


def forget_store(tmp_path: Path) -> Path:
    db = demo_store(tmp_path)
    with Workbench(db, user="demo") as wb:
        wb.ingest(
            [
                {"kind": "fact", "ts": "2026-01-02T09:00:00", "op": "add", "type": "Book",
                 "key": "secret-book", "fields": {"title": SECRET}},
            ]
        )  # fmt: skip
        wb.checkpoint()
    assert any(t.startswith("uac_snap.") for t in _holding(db, SECRET))
    return db


def test_forget_leaves_no_erased_value_in_a_snapshot(tmp_path: Path) -> None:
    db = forget_store(tmp_path)
    with Workbench(db, user="demo") as wb:
        wb.forget(type="Book", key="secret-book")
        assert wb.state.get("Book", "secret-book") is None
    assert _holding(db, SECRET) == []
    assert SECRET.encode() not in db.read_bytes()
    with Workbench(db, user="demo") as wb:  # the next snapshot is written without it
        wb.checkpoint()
        assert wb.store.con.execute("SELECT count(*) FROM snapshots").fetchone() == (1,)
    assert _holding(db, SECRET) == []
    compare(db, "demo", tmp_path)


def test_a_snapshot_from_before_a_forget_is_ignored(tmp_path: Path) -> None:
    db = forget_store(tmp_path)
    kept = snapshot_of(db)
    with Workbench(db, user="demo") as wb:
        wb.forget(type="Book", key="secret-book")
    put_back(db, kept)  # as if the forget had left it
    stale = "a forget erased events since it was written"
    with (
        pytest.warns(SnapshotIgnored, match=stale),
        Workbench(db, user="demo", read_only=True) as wb,
    ):
        assert wb.state.get("Book", "secret-book") is None
    compare(db, "demo", tmp_path, ignored=True)


def test_deleting_the_snapshot_rows_means_a_full_fold(tmp_path: Path) -> None:
    db = demo_store(tmp_path)
    con = duckdb.connect(str(db))
    con.execute("DELETE FROM snapshots")
    con.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error", SnapshotIgnored)
        assert not opened_from_snapshot(db, "demo")
        with Workbench(db, user="demo") as wb:  # the next write replaces the orphan tables
            wb.checkpoint()
    assert opened_from_snapshot(db, "demo")
    compare(db, "demo", tmp_path)


def test_two_users_keep_a_snapshot_each(tmp_path: Path, scale: ModuleType) -> None:
    db = tmp_path / "two.duckdb"
    histories = {"ann": scale.History(400, seed=1), "bob": scale.History(400, seed=2)}
    for user, history in histories.items():
        with Workbench(db, user=user) as wb:
            wb.ingest([history.next() for _ in range(300)])
            wb.checkpoint()
    for user, history in histories.items():
        with Workbench(db, user=user) as wb:
            wb.ingest([history.next() for _ in range(100)])
    assert opened_from_snapshot(db, "ann") and opened_from_snapshot(db, "bob")
    compare(db, "ann", tmp_path / "a" if (tmp_path / "a").mkdir() is None else tmp_path)
    compare(db, "bob", tmp_path / "b" if (tmp_path / "b").mkdir() is None else tmp_path)
    store = Store(db)
    assert drop_snapshots(store.con, "ann") == 1
    users = [r[0] for r in store.con.execute("SELECT user_id FROM snapshots").fetchall()]
    store.close()
    assert users == ["bob"] and opened_from_snapshot(db, "bob")
    assert not opened_from_snapshot(db, "ann")


def test_close_writes_a_snapshot_after_enough_events(
    tmp_path: Path, scale: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uac_kernel.workbench as workbench

    monkeypatch.setattr(workbench, "CLOSE_AFTER", 200)
    history = scale.History(400)
    db = tmp_path / "close.duckdb"
    with Workbench(db, user="me") as wb:
        wb.ingest([history.next() for _ in range(100)])
    assert not opened_from_snapshot(db, "me")  # 100 events: not worth a write at close
    with Workbench(db, user="me") as wb:
        wb.ingest([history.next() for _ in range(150)])
    assert opened_from_snapshot(db, "me")
    with Workbench(db, user="me") as wb:
        gen = wb._snap.gen if wb._snap else 0
        wb.ingest([history.next() for _ in range(50)])
    with Workbench(db, user="me", read_only=True) as wb:
        assert wb._snap is not None and wb._snap.gen == gen
    compare(db, "me", tmp_path)


def test_field_indexes_of_unread_types_answer_as_the_full_fold(
    tmp_path: Path, scale: ModuleType
) -> None:
    """``where`` and ``unset`` over types still in their tables (the index is built from the
    key and field columns, the records of a range fetched by key) give the fold's records."""
    db = history_store(tmp_path, scale, rounds=2)
    full = tmp_path / "full.duckdb"
    shutil.copy(db, full)
    store = Store(full)
    drop_snapshots(store.con)
    store.close()

    def ranges(path: Path) -> tuple[dict[str, Any], list[set[str]]]:
        got: dict[str, Any] = {}
        with Workbench(path, user="me", read_only=True, rules=()) as wb:
            st = wb.state
            for name, fields in st.schema.types.items():
                for f in fields:
                    got[f"{name}.{f}:unset"] = [r.__dict__ for r in st.unset(name, f)]
                    entries = st.types[name].index(f).entries
                    mid = entries[len(entries) // 2][0] if entries else None
                    got[f"{name}.{f}:from"] = [r.__dict__ for r in st.where(name, f, lo=mid)]
                    got[f"{name}.{f}:upto"] = [r.__dict__ for r in st.where(name, f, hi=mid)]
            loaded = [set(ts._loaded) for ts in st.types.values() if isinstance(ts, SnapTypeState)]
        return got, loaded

    lazy, loaded = ranges(db)
    want, _ = ranges(full)
    assert loaded and any(not parts for parts in loaded)  # some types were never read whole
    assert lazy.keys() == want.keys()
    for k in want:
        assert lazy[k] == want[k], k


def test_a_store_from_before_snapshots_gains_the_table_by_its_migration(tmp_path: Path) -> None:
    """A store whose migrations stop before m005 (as uac wrote it before snapshots) gets the
    table and schema on its first read-write open, then keeps a snapshot like any other."""
    _, lines = split_demo(tmp_path)
    events = tmp_path / "events.jsonl"
    events.write_text("".join(lines[:300]))
    db = tmp_path / "old.duckdb"
    with Workbench(db, user="demo") as wb:
        wb.ingest(events)
    con = duckdb.connect(str(db))
    con.execute("DROP TABLE snapshots")
    con.execute("DROP SCHEMA uac_snap")
    con.execute("DELETE FROM uac_migrations WHERE name = 'm005_snapshots'")
    con.close()
    with Workbench(db, user="demo", read_only=True) as wb:  # read-only: no migration, no snapshot
        assert wb.state.counts() and not opened_from_snapshot(db, "demo")
    with Workbench(db, user="demo") as wb:
        wb.checkpoint()
    assert opened_from_snapshot(db, "demo")
    compare(db, "demo", tmp_path)


def test_a_workbench_without_snapshots_writes_none_and_answers_the_same(tmp_path: Path) -> None:
    """``snapshots=False`` (a fleet task's throwaway store): checkpoint and close write no
    snapshot, and every answer is the one a workbench with snapshots gives."""
    src = tmp_path / "demo.jsonl"
    write_demo_jsonl(src)
    for name, snaps in (("with", True), ("without", False)):
        with Workbench(tmp_path / f"{name}.duckdb", user="demo", snapshots=snaps) as wb:
            wb.ingest(src)
            wb.constrain(TAX, key="tax")
            wb.checkpoint()
    counts = {}
    for name in ("with", "without"):
        store = Store(tmp_path / f"{name}.duckdb", read_only=True)
        counts[name] = store.con.execute("SELECT count(*) FROM snapshots").fetchone()
        store.close()
    assert counts == {"with": (1,), "without": (0,)}
    assert answers(tmp_path / "with.duckdb", "demo") == answers(tmp_path / "without.duckdb", "demo")


# -- reads by type, not by key ---------------------------------------------------------------


def many_keys_store(tmp_path: Path, scale: ModuleType, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A generated history of ~2,500 records whose ingest's close wrote the snapshot (the state
    a big ``uac ingest`` leaves: nothing checkpointed, every block to render)."""
    import uac_kernel.workbench as workbench

    monkeypatch.setattr(workbench, "CLOSE_AFTER", 1000)
    history = scale.History(3000)
    db = tmp_path / "many.duckdb"
    with Workbench(db, user="me") as wb:
        wb.ingest([history.next() for _ in range(3000)])
    assert opened_from_snapshot(db, "me")
    return db


def snapshot_reads(wb: Workbench) -> int:
    """The queries the snapshot's lazy types made so far."""
    return sum(ts._src.reads for ts in wb.state.types.values() if isinstance(ts, SnapTypeState))


def updates(wb: Workbench, n: int, start: int = 0) -> list[dict[str, Any]]:
    """``n`` updates of distinct current records, spread over the types (keys in order)."""
    keys = [(t, k) for t, ts in wb.state.types.items() for k in ts.order if k in ts.current]
    step = max(1, len(keys) // n)
    return [
        {"kind": "fact", "ts": f"2030-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}", "op": "update",
         "type": t, "key": k, "fields": {"note": f"n{i}"}}
        for i, (t, k) in enumerate(keys[start * step :: step][:n])
    ]  # fmt: skip


def _ingest_many(wb: Workbench) -> Any:
    return wb.ingest(updates(wb, 600)).appended


def _ingest_batches(wb: Workbench) -> Any:
    events = updates(wb, 200)
    return [wb.ingest(events[i : i + 5]).appended for i in range(0, len(events), 5)]


def _whatif(wb: Workbench) -> Any:
    w = wb.whatif(updates(wb, 300))
    return [repr(x) for x in (w.records, w.raised, w.cleared, w.updated)]


def _forget(wb: Workbench) -> Any:
    ts = wb.state.types["Transaction"]
    key = next(k for k in ts.order[::-1] if k in ts.current)
    return wb.forget(type="Transaction", key=key).events


TRIPS = {"kind": "window_limit", "title": "At most 90 days of trips in any 180",
         "subject": {"type": "Trip"}, "measure": "days", "window_days": 180, "limit": 90}  # fmt: skip
OPERATIONS = {
    "checkpoint": lambda wb: None,
    "ingest_more_than_prefetch_max": _ingest_many,
    "ingest_small_batches": _ingest_batches,
    "rules": lambda wb: [a.message for a in wb.constrain(TRIPS, key="trips").raised],
    "eval": lambda wb: wb.eval("[(r.key, r.valid_from) for r in user.all('Meal')]"),
    "sql": lambda wb: wb.sql("SELECT * FROM Transaction ORDER BY key").rows,
    "whatif": _whatif,
    "forget": _forget,
}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_snapshot_reads_are_bounded_by_types_not_keys(
    tmp_path: Path, scale: ModuleType, monkeypatch: pytest.MonkeyPatch, operation: str
) -> None:
    """An operation, then a checkpoint, on a store opened from its snapshot reads each type's
    tables in a bounded number of queries, however many keys it reads (~2,500 here, each once
    a query before), and answers and renders byte for byte what the plain fold does."""
    import uac_kernel.checkpoints.snaptypes as snaptypes

    db = many_keys_store(tmp_path, scale, monkeypatch)
    plain = tmp_path / "plain.duckdb"
    shutil.copy(db, plain)
    store = Store(plain)
    drop_snapshots(store.con, "me")
    store.close()
    # A batch of 600 keys (about 300 of a type) is past the bound: the type is read whole.
    monkeypatch.setattr(snaptypes, "PREFETCH_MAX", 100)
    run = OPERATIONS[operation]
    got: list[Any] = []
    for path in (db, plain):
        with Workbench(path, user="me") as wb:
            lazy = isinstance(wb.state.types["Transaction"], SnapTypeState)
            assert lazy == (path == db)
            bound = (snaptypes.BY_KEY_QUERIES + 4) * len(wb.state.types)
            answer = run(wb)
            assert not lazy or snapshot_reads(wb) <= bound, "the operation"
            cp = wb.checkpoint()
            assert not lazy or snapshot_reads(wb) <= bound, "the checkpoint after it"
            got.append((answer, cp.new, wb.code(cp.version)))
    assert got[0] == got[1]
