"""The event log on a real DuckDB file: append-only, atomic, hash-chained, locked."""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from uac_kernel.core.errors import StoreError, StoreLocked
from uac_kernel.log.integrity import verify
from uac_kernel.log.store import NewEvent, Store


def ev(i: int, user: str = "u") -> NewEvent:
    return NewEvent(
        datetime(2025, 1, 1, 0, i % 60),
        "utterance",
        user,
        {"speaker": "user", "text": f"t{i}"},
        f"s{i}",
    )


def test_append_assigns_seq_and_chains_hashes(db: Path) -> None:
    store = Store(db)
    logged = store.append([ev(1), ev(2)])
    assert [e.seq for e in logged] == [1, 2]
    assert logged[0].hash != logged[1].hash
    store.close()
    reopened = Store(db)
    more = reopened.append([ev(3)])
    assert more[0].seq == 3
    report = verify(reopened)
    assert report.ok and report.events == 3


def test_many_users_share_one_store(db: Path) -> None:
    store = Store(db)
    store.append([ev(1, "a"), ev(2, "b"), ev(3, "a")])
    assert [e.seq for e in store.events("a")] == [1, 3]
    assert store.users() == ["a", "b"]
    assert store.logged_sources("b", {"s1", "s2", "s9"}) == {"s2"}


def test_verify_detects_a_changed_payload(db: Path) -> None:
    store = Store(db)
    store.append([ev(i) for i in range(1, 6)])
    store.close()
    con = duckdb.connect(str(db))  # an outside tool tampering with the file
    con.execute(
        """UPDATE events SET payload = '{"speaker":"user","text":"forged"}' WHERE seq = 3"""
    )
    con.close()
    report = verify(Store(db))
    assert not report.ok and report.first_bad_seq == 3


def test_verify_detects_a_deleted_event(db: Path) -> None:
    store = Store(db)
    store.append([ev(i) for i in range(1, 6)])
    store.close()
    con = duckdb.connect(str(db))
    con.execute("DELETE FROM events WHERE seq = 2")
    con.close()
    report = verify(Store(db))
    assert not report.ok and report.first_bad_seq == 3


def test_failed_append_leaves_the_log_as_it_was(db: Path) -> None:
    store = Store(db)
    store.append([ev(1)])
    bad = NewEvent(datetime(2025, 1, 2), "utterance", "u", {"text": "lone surrogate \ud800"}, None)
    with pytest.raises(StoreError, match="nothing was written"):
        store.append([ev(2), bad])
    assert [e.seq for e in store.events()] == [1]
    assert store.append([ev(3)])[0].seq == 2
    assert verify(store).ok


def test_second_writer_gets_a_clear_lock_error(db: Path) -> None:
    Store(db).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb,time; c=duckdb.connect({str(db)!r}); print('ok', flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ok"
        with pytest.raises(StoreLocked, match=rf"open in process {holder.pid}.*read-only"):
            Store(db)
    finally:
        holder.kill()
        holder.wait()


def test_read_only_store_refuses_writes_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no store at"):
        Store(tmp_path / "missing.duckdb", read_only=True)
    Store(tmp_path / "x.duckdb").close()
    ro = Store(tmp_path / "x.duckdb", read_only=True)
    with pytest.raises(StoreError, match="read-only"):
        ro.append([ev(1)])


def test_migrations_are_recorded_once(db: Path) -> None:
    Store(db).close()
    store = Store(db)
    names = [r[0] for r in store.con.execute("SELECT name FROM uac_migrations").fetchall()]
    assert names == sorted(set(names)) and "m001_event_log" in names


def test_no_update_or_delete_statement_in_the_engine() -> None:
    """The log is append-only: only the migrations rebuild its tables, and only ``forget``
    rewrites a row (it erases content; see test_forget)."""
    root = Path(__file__).parents[2] / "uac_kernel"
    allowed = {"UPDATE EVENTS": "forget.py", "UPDATE CHECKPOINT": "forget.py"}
    for path in root.rglob("*.py"):
        text = path.read_text().upper()
        for stmt in ("UPDATE EVENTS", "DELETE FROM", "UPDATE CHECKPOINT", "DROP TABLE EVENTS"):
            if path.name in (allowed.get(stmt), "migrations.py") and stmt != "DELETE FROM":
                continue
            if path.name == "snapshot.py" and stmt == "DELETE FROM":
                # A snapshot is a cache of the fold, not the log: only its own rows are replaced.
                targets = set(re.findall(r"DELETE FROM (\w+|\{\w+\})", text))
                assert targets <= {"SNAPSHOTS", "{CUR}"}, f"{path} deletes from {targets}"
                continue
            if path.name == "store.py" and stmt == "DELETE FROM":
                # The note that the file owes a rewrite is cleared in the rewritten copy.
                targets = set(re.findall(r"DELETE FROM ([\w.]+)", text))
                assert targets <= {"UAC_COMPACT.UNCOMPACTED"}, f"{path} deletes from {targets}"
                continue
            assert stmt not in text, f"{path} contains {stmt}"


def test_the_last_events_are_the_newest_in_log_order(db: Path) -> None:
    """``events(last=N)``: the N newest events that match (user, kind, after), oldest first;
    `uac log --last` and ``Workbench.log(last=)`` read them this way, not the whole log."""
    store = Store(db)
    store.append([ev(i, "a" if i % 3 else "b") for i in range(1, 31)])
    store.append([NewEvent(datetime(2025, 2, 1), "fact", "a", {"op": "x"}, "f1")])
    mine = [e.seq for e in store.events("a")]
    assert [e.seq for e in store.events("a", last=4)] == mine[-4:]
    assert [e.seq for e in store.events("a", last=100)] == mine
    assert [e.seq for e in store.events("a", last=2, kinds=["utterance"])] == mine[-3:-1]
    assert [e.seq for e in store.events("a", last=2, after_seq=mine[-2])] == [mine[-1]]
    assert [e.seq for e in store.events("b", last=1)] == [30]
    assert list(store.events("a", last=0)) == []
    with pytest.raises(ValueError, match="limit or last, not both"):
        list(store.events("a", limit=2, last=2))
    store.close()
