"""Fleet directories on real DuckDB files and Parquet dirs: a user's partition is checked out
into a store of its own and committed back, appended only by whole commits; a killed or losing
writer leaves the partition as it was."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import fact

from uac_kernel.errors import FleetConflict, FleetDiverged, FleetError
from uac_kernel.partition import Fleet, checkout, commit, parquet_source
from uac_kernel.store import Store
from uac_kernel.workbench import Workbench

ROOT = Path(__file__).resolve().parents[1]


def trips(user_tag: str, start: int, count: int) -> list[dict[str, Any]]:
    return [
        {
            **fact(f"2025-01-{i:02d}T09:00:00", "add", "Trip", f"t{i}", city=f"{user_tag}-{i}"),
            "source": f"{user_tag}#{i}",
        }
        for i in range(start, start + count)
    ]


def grow(db: Path, user: str, start: int, count: int, *, call: bool = True) -> None:
    """Append ``count`` trips of ``user`` to the store at ``db``, a checkpoint and a call."""
    with Workbench(db, user=user) as wb:
        wb.ingest(trips(user, start, count))
        wb.checkpoint()
    if call:
        store = Store(db)
        try:
            store.record_call(
                user=user, purpose="extract", model="m", base_url="http://x", request_key=f"k{start}",
                request=f"req {user} {start}", response="{}", content="{}", tokens_in=3,
                tokens_out=4, latency_ms=1.5, outcome="ok", error="",
            )  # fmt: skip
        finally:
            store.close()


def keys(db: Path, user: str) -> list[str]:
    with Workbench(db, user=user, read_only=True) as wb:
        return list(wb.eval("sorted(r.key for r in user.all(Trip))"))


def rows(files: list[Path], order: str) -> list[tuple[Any, ...]]:
    if not files:
        return []
    with duckdb.connect() as con:
        return con.execute(f"SELECT * FROM {parquet_source(files)} ORDER BY {order}").fetchall()


def store_rows(db: Path, table: str, user: str, order: str) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(
            f"SELECT * FROM {table} WHERE user_id = ? ORDER BY {order}", [user]
        ).fetchall()


def test_commit_checkout_and_commit_again(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    grow(db, "ann", 1, 3)
    grow(db, "bob", 1, 2)
    fleet = Fleet(tmp_path / "fleet", create=True)
    assert fleet.users() == [] and fleet.head("ann") == {}
    assert commit(fleet, "ann", db, by="export") == 1
    assert commit(fleet, "bob", db, by="export") == 1
    assert commit(fleet, "ann", db, by="export") is None  # nothing new
    assert fleet.users() == ["ann", "bob"]
    for table, order in (("events", "user_seq"), ("model_calls", "call_id")):
        assert rows(fleet.files(table, ["ann"]), order) == store_rows(db, table, "ann", order)
    head = fleet.head("ann")
    assert head["events"][0] == 3 + 2  # three facts, a schema event for the type and one field

    # A task's round: check out, work on the private store, commit the new rows.
    work = tmp_path / "work.duckdb"
    checkout(fleet, "ann", work)
    assert keys(work, "ann") == ["t1", "t2", "t3"]
    grow(work, "ann", 4, 2)
    assert Store(work).verify("ann").ok
    assert commit(fleet, "ann", work, by="run r1") == 2
    meta = fleet.commits("ann")[1]
    assert meta["base"] is False and meta["by"] == "run r1"
    assert meta["rows"] == {"events": 2, "model_calls": 1, "checkpoints": 1,
                            "checkpoint_segments": meta["rows"]["checkpoint_segments"]}  # fmt: skip
    again = tmp_path / "again.duckdb"
    checkout(fleet, "ann", again)
    assert keys(again, "ann") == ["t1", "t2", "t3", "t4", "t5"]
    for table, order in (
        ("events", "user_seq"),
        ("model_calls", "call_id"),
        ("checkpoints", "version"),
        ("checkpoint_segments", "version, segment"),
    ):
        assert store_rows(again, table, "ann", order) == store_rows(work, table, "ann", order)
    # another user's partition did not move; an unknown user checks out as an empty store
    assert [c["commit"] for c in fleet.commits("bob")] == [1]
    empty = tmp_path / "empty.duckdb"
    checkout(fleet, "nobody", empty)
    assert Store(empty, read_only=True).users() == []
    with pytest.raises(FleetError, match="exists"):
        checkout(fleet, "ann", again)


def test_not_a_fleet_and_diverged_chains(tmp_path: Path) -> None:
    with pytest.raises(FleetError, match=r"not a fleet directory.*uac export"):
        Fleet(tmp_path)
    (tmp_path / "other.txt").write_text("x")
    with pytest.raises(FleetError, match="other files"):
        Fleet(tmp_path, create=True)
    db = tmp_path / "a.duckdb"
    grow(db, "ann", 1, 2)
    fleet = Fleet(tmp_path / "fleet", create=True)
    commit(fleet, "ann", db, by="export")
    one, two = tmp_path / "one.duckdb", tmp_path / "two.duckdb"
    checkout(fleet, "ann", one)
    checkout(fleet, "ann", two)
    grow(one, "ann", 10, 1, call=False)
    grow(two, "ann", 20, 1, call=False)
    assert commit(fleet, "ann", one, by="run a") == 2
    before = fleet.files("events", ["ann"])
    with pytest.raises(
        FleetDiverged, match=r"user 'ann': .*differ at event 5.*nothing was written"
    ):
        commit(fleet, "ann", two, by="run b")
    behind = tmp_path / "behind.duckdb"
    grow(behind, "ann", 1, 1, call=False)  # another store's ann, shorter
    with pytest.raises(FleetDiverged, match="user 'ann'"):
        commit(fleet, "ann", behind, by="run c")
    assert fleet.files("events", ["ann"]) == before
    assert len(list(fleet.dir("events", "ann").iterdir())) == 2  # no part file left behind


# A writer that stops just before it creates its commit json (its part files are written),
# says so through a file, and goes on when told.
PAUSED_WRITER = r"""
import os, sys, time
from pathlib import Path
from uac_kernel.errors import FleetError
from uac_kernel.partition import Fleet, commit

root, user, store, ready, go = sys.argv[1:6]

def pause(frame, event, arg):
    if event == "c_call" and arg is os.link:
        sys.setprofile(None)
        Path(ready).touch()
        while not Path(go).exists():
            time.sleep(0.01)

sys.setprofile(pause)
try:
    print("commit", commit(Fleet(root), user, Path(store), by="run paused"))
except FleetError as exc:
    print(type(exc).__name__, exc)
"""


def paused_writer(fleet: Fleet, user: str, store: Path, tmp: Path) -> subprocess.Popen[str]:
    ready, go = tmp / "ready", tmp / "go"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            PAUSED_WRITER,
            str(fleet.root),
            user,
            str(store),
            str(ready),
            str(go),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    while not ready.exists():
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    return proc


def test_a_killed_writer_leaves_the_partition_as_it_was(tmp_path: Path) -> None:
    db = tmp_path / "a.duckdb"
    grow(db, "ann", 1, 2)
    fleet = Fleet(tmp_path / "fleet", create=True)
    commit(fleet, "ann", db, by="export")
    work = tmp_path / "work.duckdb"
    checkout(fleet, "ann", work)
    grow(work, "ann", 3, 2)
    files = {t: fleet.files(t, ["ann"]) for t in ("events", "model_calls", "checkpoints")}
    head = fleet.head("ann")
    proc = paused_writer(fleet, "ann", work, tmp_path)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    # its part files are on disk, but no commit lists them: nobody reads them
    assert len(list(fleet.dir("events", "ann").iterdir())) == 2
    assert {t: fleet.files(t, ["ann"]) for t in files} == files
    assert fleet.head("ann") == head
    seen = tmp_path / "seen.duckdb"
    checkout(fleet, "ann", seen)
    assert keys(seen, "ann") == ["t1", "t2"]
    # the rerun commits the same rows as commit 2
    assert commit(fleet, "ann", work, by="run again") == 2
    assert rows(fleet.files("events", ["ann"]), "user_seq") == store_rows(
        work, "events", "ann", "user_seq"
    )


def test_two_writers_of_the_same_commit_one_wins(tmp_path: Path) -> None:
    db = tmp_path / "a.duckdb"
    grow(db, "ann", 1, 2)
    fleet = Fleet(tmp_path / "fleet", create=True)
    commit(fleet, "ann", db, by="export")
    one, two = tmp_path / "one.duckdb", tmp_path / "two.duckdb"
    checkout(fleet, "ann", one)
    checkout(fleet, "ann", two)
    grow(one, "ann", 10, 1)
    grow(two, "ann", 20, 1)
    loser = paused_writer(fleet, "ann", two, tmp_path)  # read commit 1, wrote its parts
    assert commit(fleet, "ann", one, by="run winner") == 2
    (tmp_path / "go").touch()
    out, err = loser.communicate(timeout=60)
    assert loser.returncode == 0, err
    line = out.strip()
    assert line.startswith(f"{FleetConflict.__name__} user 'ann': another writer made commit 2")
    assert "rerun" in line and "\n" not in line
    assert [c["by"] for c in fleet.commits("ann")] == ["export", "run winner"]
    won = tmp_path / "won.duckdb"
    checkout(fleet, "ann", won)
    assert keys(won, "ann") == ["t1", "t10", "t2"]
    # the loser removed its part files; rerun, it finds its chain no longer extends the fleet's
    assert len(list(fleet.dir("events", "ann").iterdir())) == 2
    with pytest.raises(FleetDiverged):
        commit(fleet, "ann", two, by="run loser")
