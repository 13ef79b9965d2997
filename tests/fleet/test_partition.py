"""Fleet directories on real DuckDB files and Parquet dirs: a user's partition is checked out
into a store of its own and committed back, appended only by whole commits; a killed or losing
writer leaves the partition as it was."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers.events import fact
from helpers.processes import suite_path

from uac_kernel.core.errors import FleetConflict, FleetDiverged, FleetError, UacError
from uac_kernel.fleet.checkout import checkout, commit
from uac_kernel.fleet.export import export_store
from uac_kernel.fleet.importing import import_fleet
from uac_kernel.fleet.partition import Fleet, parquet_source
from uac_kernel.fleet.verify import verify_fleet
from uac_kernel.log.integrity import verify
from uac_kernel.log.store import Store
from uac_kernel.workbench import Workbench

ROOT = Path(__file__).resolve().parents[2]


def trips(user_tag: str, start: int, count: int) -> list[dict[str, Any]]:
    return [
        {
            **fact(
                f"2025-01-{i:02d}T09:00:00", "add", "Trip", f"t{i}", city=f"{user_tag[:20]}-{i}"
            ),
            "source": f"trip#{i}",
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
    assert verify(Store(work), "ann").ok
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
from uac_kernel.core.errors import FleetError
from uac_kernel.fleet.checkout import commit
from uac_kernel.fleet.partition import Fleet

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
        env={**os.environ, "PYTHONPATH": suite_path()},
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


# -- export, import and verify of whole stores ------------------------------------------------


def answers(db: Path, user: str) -> dict[str, Any]:
    """What a user's workbench answers: the state, each checkpoint's code and parts, diffs."""
    with Workbench(db, user=user, read_only=True) as wb:
        versions = [c.version for c in wb.checkpoints.all()]
        return {
            "keys": wb.eval("sorted(r.key for r in user.all(Trip))"),
            "cities": wb.eval("sorted(r.city for r in user.all(Trip))"),
            "code": {v: wb.code(v) for v in versions},
            "parts": {v: wb.parts(v) for v in versions},
            "diff": [str(wb.diff(a, b)) for a, b in itertools.pairwise(versions)],
            "records": [c.records for c in wb.checkpoints.all()],
            "calls": store_rows(db, "model_calls", user, "call_id"),
        }


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "uac_kernel.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": suite_path()},
        timeout=120,
    )


def all_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def test_round_trip_store_dir_store(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    users = ["ann", "bob", "cy"]
    for n, user in enumerate(users):  # interleaved, so each user's seq numbers have gaps
        grow(db, user, 1, 2 + n)
    for user in users:
        grow(db, user, 10, 2)
    out = cli("export", str(db), str(tmp_path / "fleet"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith(
        "3 users committed (3 new, 0 appended, 0 rewritten after a forget), 0 unchanged; "
        "21 events, 6 model calls, 6 checkpoints written"  # trips, 2 schema events, each user
    ), out.stdout
    out = cli("verify", str(tmp_path / "fleet"))
    assert out.returncode == 0, out.stderr
    assert "of 3 user(s) verified: commits complete, hash chains intact" in out.stdout
    back = tmp_path / "back.duckdb"
    out = cli("import", str(tmp_path / "fleet"), str(back))
    assert out.returncode == 0, out.stderr
    assert "3 users imported (3 new, 0 extended)" in out.stdout
    assert cli("verify", "--db", str(back)).returncode == 0
    for user in users:
        assert answers(back, user) == answers(db, user)
    for args in (["eval", "sorted(t.city for t in user.all(Trip))"], ["code", "--version", "1"]):
        here, there = (cli("--db", str(d), "--user", "cy", *args) for d in (db, back))
        assert here.returncode == there.returncode == 0 and here.stdout == there.stdout
    # the imported store numbers its events 1..n in recording order, whatever the source did
    with duckdb.connect(str(back), read_only=True) as con:
        got = con.execute("SELECT user_id, user_seq FROM events ORDER BY seq").fetchall()
    with duckdb.connect(str(db), read_only=True) as con:
        want = con.execute(
            "SELECT user_id, user_seq FROM events ORDER BY recorded_at, user_id, user_seq"
        ).fetchall()
    assert got == want
    # importing again appends nothing
    out = cli("import", str(tmp_path / "fleet"), str(back))
    assert "0 users imported (0 new, 0 extended), 3 already up to date" in out.stdout


def test_export_twice_appends_only_new_files(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    grow(db, "ann", 1, 3)
    grow(db, "bob", 1, 3)
    fleet = Fleet(tmp_path / "fleet", create=True)
    first = export_store(db, fleet.root)
    assert (first.new, first.appended, first.unchanged) == (2, 0, 0)
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in fleet.root.rglob("*.parquet")}
    grow(db, "bob", 4, 2)
    again = export_store(db, fleet.root)
    assert (again.new, again.appended, again.rewritten, again.unchanged) == (0, 1, 0, 1)
    assert again.rows["events"] == 2 and again.rows["model_calls"] == 1
    after = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in fleet.root.rglob("*.parquet")}
    assert {p: after[p] for p in before} == before  # nothing written was touched
    added = sorted(str(p.relative_to(fleet.root)) for p in set(after) - set(before))
    assert len(added) == 4 and all("/user=bob/part-000002-" in a for a in added)
    assert [c["commit"] for c in fleet.commits("ann")] == [1]
    assert export_store(db, fleet.root).unchanged == 2  # a third export writes nothing
    with pytest.raises(FleetError, match="holds no user 'zed'"):
        export_store(db, fleet.root, users=["zed"])
    assert len(list(fleet.root.rglob("*.parquet"))) == len(after)
    assert verify_fleet(fleet.root).ok


SECRET = "Zyloprimarex"  # a made-up name that appears nowhere else


def test_forget_then_export_rewrites_the_partition(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    grow(db, "bob", 1, 2)
    with Workbench(db, user="ann") as wb:
        wb.ingest(
            [
                {
                    "kind": "utterance",
                    "ts": "2025-03-01T09:00:00",
                    "speaker": "user",
                    "text": f"I am allergic to {SECRET}.",
                    "source": "chat#1",
                },
                {
                    **fact("2025-03-01T09:00:00", "add", "Allergy", "a1", substance=SECRET),
                    "source": "fact#1",
                    "derived_from": ["chat#1"],
                },
                {
                    **fact("2025-03-02T09:00:00", "add", "Trip", "t1", city="Lisbon"),
                    "source": "fact#2",
                },
            ]
        )
        wb.checkpoint()
    root = tmp_path / "fleet"
    export_store(db, root)
    with Workbench(db, user="ann") as wb:
        wb.ingest(
            [{**fact("2025-03-03T09:00:00", "add", "Trip", "t2", city="Oslo"), "source": "f3"}]
        )
    export_store(db, root)  # commit 2 of ann, still holding the secret in commit 1's files
    fleet = Fleet(root)
    assert SECRET.encode() in all_bytes(root)  # the search below finds it where it is
    bob_files = sorted(fleet.root.glob("*/bucket=*/user=bob/*.parquet"))
    early = tmp_path / "early.duckdb"  # a store the fleet was imported into before the forget
    import_fleet(root, early)
    assert SECRET.encode() in early.read_bytes()
    with Workbench(db, user="ann") as wb:
        assert not wb.forget(text=SECRET).empty
    report = export_store(db, root)
    assert (report.rewritten, report.unchanged) == (1, 1)
    commits = fleet.commits("ann")
    assert [c["base"] for c in commits] == [True, False, True]
    assert SECRET.encode() not in all_bytes(root)
    assert sorted(fleet.root.glob("*/bucket=*/user=bob/*.parquet")) == bob_files
    # only the base commit's files are left of ann's partition
    listed = {root / rel for rel in commits[-1]["files"].values()}
    assert set(fleet.root.glob("*/bucket=*/user=ann/*.parquet")) == listed
    assert verify_fleet(root).ok
    back = tmp_path / "back.duckdb"
    import_fleet(root, back)
    assert verify(Store(back, read_only=True)).ok
    assert answers(back, "ann")["keys"] == answers(db, "ann")["keys"] == ["t1", "t2"]
    # importing the forget into the earlier copy erases there what it erased, file and all
    again = import_fleet(root, early)
    assert again.extended == 1 and again.erased > 0
    assert verify(Store(early, read_only=True)).ok
    assert SECRET.encode() not in early.read_bytes()
    assert answers(early, "ann") == answers(back, "ann")


HOSTILE = [
    'o\'brien "quoted"',
    "a/b\\c",
    "..",
    ".",
    "../../etc/passwd",
    "line\nbreak\rcr",
    "x" * 1000,
    "ünïcödé 用户 🙂",
    "%2E%2E",
    "~tilde",
    "a\tb;DROP TABLE events;--",
]


def test_hostile_user_ids_round_trip(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    users = list(HOSTILE)
    try:  # a lone surrogate: only if the store takes it
        grow(db, "bad\udcff", 1, 1, call=False)
        users.append("bad\udcff")
    except (UnicodeError, UacError):
        pass
    for user in HOSTILE:
        grow(db, user, 1, 2)
    root = tmp_path / "fleet"
    assert export_store(db, root).new == len(users)
    fleet = Fleet(root)
    assert fleet.users() == sorted(users)
    names = [p.name for p in root.rglob("*")]
    assert all(n not in (".", "..") and "/" not in n and "\n" not in n for n in names)
    assert all(len(n.encode()) <= 160 for n in names)
    # every file is inside the directory of its own user
    for user in users:
        for table in ("events", "model_calls"):
            for path in fleet.files(table, [user]):
                assert path.resolve().is_relative_to(root.resolve())
                assert path.parent == fleet.dir(table, user)
    report = verify_fleet(root)
    assert report.ok, report.problems
    back = tmp_path / "back.duckdb"
    import_fleet(root, back)
    for user in users:
        for table, order in (("model_calls", "call_id"), ("checkpoint_segments", "version")):
            assert store_rows(back, table, user, order) == store_rows(db, table, user, order)
        with duckdb.connect(str(back), read_only=True) as con:
            got = con.execute(
                "SELECT user_seq, payload, hash FROM events WHERE user_id = ? ORDER BY seq", [user]
            ).fetchall()
        assert got == [r[1:2] + r[7:8] + r[10:] for r in store_rows(db, "events", user, "seq")]
    assert verify(Store(back, read_only=True)).ok
    assert keys(back, HOSTILE[6]) == keys(db, HOSTILE[6]) == ["t1", "t2"]  # the long id


def test_verify_names_each_problem_on_one_line(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    for user in ("ann", "bob", "cy", "dee", "eve", "fay"):
        grow(db, user, 1, 2)
    root = tmp_path / "fleet"
    export_store(db, root)
    for user in ("ann", "cy"):
        grow(db, user, 5, 1)
    export_store(db, root)
    grow(db, "cy", 7, 1)
    export_store(db, root)  # cy: commits 1, 2, 3
    fleet = Fleet(root)
    # ann: a payload changed inside a part file, rewritten whole with the same rows
    part = fleet.files("events", ["ann"])[0]
    with duckdb.connect() as con:
        con.execute(
            f"COPY (SELECT * REPLACE (replace(payload, 'ann-1', 'ann-X') AS payload) "
            f"FROM {parquet_source([part])}) TO '{part}.new' (FORMAT parquet)"
        )
    os.replace(f"{part}.new", part)
    # bob: a listed file is gone
    fleet.files("model_calls", ["bob"])[0].unlink()
    # cy: a gap in the commits
    (fleet.dir("_commits", "cy") / "000002.json").unlink()
    # dee: a row of another user in dee's file
    part = fleet.files("checkpoints", ["dee"])[0]
    with duckdb.connect() as con:
        con.execute(
            f"COPY (SELECT * REPLACE ('eve' AS user_id) FROM {parquet_source([part])}) "
            f"TO '{part}.new' (FORMAT parquet)"
        )
    os.replace(f"{part}.new", part)
    # fay: a commit whose heads are not where its rows end
    path = fleet.dir("_commits", "fay") / "000001.json"
    meta = json.loads(path.read_text())
    meta["heads"]["events"][0] += 1
    path.write_text(json.dumps(meta))
    report = verify_fleet(root)
    assert not report.ok
    assert len(report.problems) == 5, report.problems
    ann, bob, cy, dee, fay = sorted(report.problems)
    assert fay.startswith("user 'fay': the heads of commit 1 do not match its events rows")
    assert ann.startswith("user 'ann': event ") and "was changed after it was written" in ann
    assert bob.startswith("user 'bob': commit 1 lists model_calls/") and "missing" in bob
    assert cy.startswith("user 'cy': commit 2 is missing from ") and "000003.json" in cy
    assert dee.startswith("user 'dee': 1 row of checkpoints in commit 1 belong")
    assert all("\n" not in p for p in report.problems)
    out = cli("verify", str(root))
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert sorted(lines[:-1]) == sorted(report.problems)
    assert (
        lines[-1]
        == f"uac: error: {root}: integrity check failed: 5 problems in the fleet directory"
    )
    # eve is intact, and checked alone
    assert verify_fleet(root, users=["eve"]).ok
    # a part file whose bytes were damaged is a problem of its own user only
    part = fleet.files("events", ["eve"])[0]
    data = bytearray(part.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = b"\0" * 64
    part.write_bytes(bytes(data))
    (problem,) = verify_fleet(root, users=["eve"]).problems
    assert problem.startswith("user 'eve': ")


def test_import_extends_a_user_and_refuses_a_diverged_one(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    grow(db, "ann", 1, 2)
    grow(db, "bob", 1, 2)
    root = tmp_path / "fleet"
    export_store(db, root)
    target = tmp_path / "target.duckdb"
    import_fleet(root, target, users=["ann"])
    grow(db, "ann", 5, 2)
    grow(db, "bob", 5, 1)
    export_store(db, root)
    report = import_fleet(root, target)
    assert (report.new, report.extended, report.unchanged) == (1, 1, 0)
    assert verify(Store(target, read_only=True)).ok
    for user in ("ann", "bob"):
        assert answers(target, user) == answers(db, user)
    # the target's ann grows on its own: the fleet's ann no longer passes through it
    grow(target, "ann", 20, 1, call=False)
    grow(db, "ann", 30, 1, call=False)
    grow(db, "bob", 30, 1, call=False)
    export_store(db, root)
    before = {t: store_rows(target, t, u, "1") for t in ("events", "model_calls") for u in ("ann", "bob")}  # fmt: skip
    with pytest.raises(FleetDiverged, match=r"user 'ann': .* differ at event \d+"):
        import_fleet(root, target)
    after = {t: store_rows(target, t, u, "1") for t in ("events", "model_calls") for u in ("ann", "bob")}  # fmt: skip
    assert after == before  # bob was not imported either: one transaction
    out = cli("import", str(root), str(target))
    assert out.returncode == 1 and out.stderr.count("\n") == 1
    assert out.stderr.startswith("uac: error: user 'ann': ")
    # a store ahead of the fleet is refused too
    ahead = tmp_path / "ahead.duckdb"
    import_fleet(root, ahead, users=["bob"])
    grow(ahead, "bob", 25, 1, call=False)
    with pytest.raises(FleetDiverged, match=r"user 'bob': .* holds fewer events"):
        import_fleet(root, ahead, users=["bob"])
    with pytest.raises(FleetError, match="holds no user 'zed'"):
        import_fleet(root, ahead, users=["zed"])


def test_call_ids_and_checkpoint_seqs_are_per_user_after_import(tmp_path: Path) -> None:
    """Two users from two stores: their call ids and checkpoint seqs collide in the store the
    fleet is imported into, and each user's code, diffs, calls, forget and verify still work."""
    one, two = tmp_path / "one.duckdb", tmp_path / "two.duckdb"
    grow(one, "ann", 1, 3)
    grow(one, "ann", 4, 2)
    grow(two, "bob", 1, 1)
    grow(two, "bob", 2, 4)
    root = tmp_path / "fleet"
    export_store(one, root)
    export_store(two, root)
    target = tmp_path / "target.duckdb"
    import_fleet(root, target)
    with duckdb.connect(str(target), read_only=True) as con:
        ids = con.execute("SELECT user_id, call_id FROM model_calls ORDER BY ALL").fetchall()
        seqs = con.execute("SELECT user_id, version, seq FROM checkpoints ORDER BY ALL").fetchall()
    assert [i for _u, i in ids if _u == "ann"] == [i for _u, i in ids if _u == "bob"] == [1, 2]
    assert {s for u, _v, s in seqs if u == "ann"} & {s for u, _v, s in seqs if u == "bob"}
    assert answers(target, "ann") == answers(one, "ann")
    assert answers(target, "bob") == answers(two, "bob")
    # a new call gets a new id; the listing shows each user's own
    grow(target, "bob", 10, 1)
    with duckdb.connect(str(target), read_only=True) as con:
        assert con.execute("SELECT max(call_id) FROM model_calls").fetchone() == (3,)
    # forget in one user re-renders that user's checkpoint code only; both still verify
    code_before = answers(target, "ann")["code"]
    with Workbench(target, user="bob") as wb:
        plan = wb.forget(type="Trip", key="t3")
        assert plan.checkpoints == [2, 3]  # the versions taken after the forgotten fact
        assert "bob-3" not in wb.code(2)
        assert wb.verify().ok
    assert answers(target, "ann")["code"] == code_before
    assert verify(Store(target, read_only=True)).ok
    out = cli("verify", "--db", str(target))
    assert out.returncode == 0, out.stderr
