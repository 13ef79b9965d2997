"""The store a fleet task keeps beside a long log's partition: the next task starts from it and
gives the answers a full fold gives; a partition file changed since is verified row by row; a
kept file that is not a store of that user alone is ignored with a warning; a forget carried by
`uac export` deletes it. Real fleet runs, real DuckDB and Parquet files."""

from __future__ import annotations

import hashlib
import json
import shutil
import signal
import subprocess
import sys
import urllib.parse
import warnings
from pathlib import Path
from typing import Any

import duckdb
import pytest

from uac_kernel.core.errors import FleetError, SnapshotIgnored
from uac_kernel.fleet.checkout import checkout
from uac_kernel.fleet.partition import Fleet
from uac_kernel.fleet.run import Job, run
from uac_kernel.fleet.snapshots import KEEP_FROM, snapshot_path
from uac_kernel.fleet.verify import verify_fleet
from uac_kernel.workbench import Workbench

USERS = ["ann", "b'o\"b"]  # ann's log is long enough to keep a store (KEEP_FROM), bob's is not
LONG, SHORT = USERS
QUERY = "[sorted((t.key, t.nights) for t in user.all('Trip')), len(user.all('Medication'))]"


def batch(user: str, n: int) -> list[dict[str, Any]]:
    """Batch ``n`` of a user: trips added and updated, one retracted, and from the second on a
    medication the first batch's allergy conflicts with (an alert)."""
    out: list[dict[str, Any]] = []
    for k in range(6):
        ts = f"2025-0{1 + n}-{10 + k}T09:00:00"
        out.append({"kind": "fact", "ts": ts, "op": "add", "type": "Trip", "key": f"t{n}-{k}",
                    "fields": {"destination": f"{user} city {k}", "nights": k + 1}})  # fmt: skip
    if n:
        out.append({"kind": "fact", "ts": f"2025-0{1 + n}-20T09:00:00", "op": "update",
                    "type": "Trip", "key": f"t{n - 1}-1", "fields": {"nights": 30 + n}})  # fmt: skip
        out.append({"kind": "fact", "ts": f"2025-0{1 + n}-21T09:00:00", "op": "retract",
                    "type": "Trip", "key": f"t{n - 1}-2"})  # fmt: skip
    if n == 0:
        out.append({"kind": "fact", "ts": "2025-01-01T09:00:00", "op": "add", "type": "Allergy",
                    "key": "pen", "fields": {"substance": "penicillin"}})  # fmt: skip
        if user == LONG:
            out += [{"kind": "fact", "ts": f"2024-12-{1 + k % 28:02d}T10:00:00", "op": "add",
                     "type": "Note", "key": f"n{k}", "fields": {"text": f"note {k}"}}
                    for k in range(KEEP_FROM)]  # fmt: skip
    if n == 1:
        out.append({"kind": "fact", "ts": "2025-02-22T09:00:00", "op": "add",
                    "type": "Medication", "key": "amox",
                    "fields": {"name": "Amoxicillin 500 mg", "start": "2025-02-22"}})  # fmt: skip
    return out


def source(directory: Path, n: int) -> Path:
    directory.mkdir(parents=True)
    for user in USERS:
        body = "".join(json.dumps(e) + "\n" for e in batch(user, n))
        (directory / f"{urllib.parse.quote(user, safe='')}.jsonl").write_text(body)
    return directory


def answers(root: Path, n: int, *, fold: bool) -> dict[str, tuple[Any, ...]]:
    """Each user's answers to a query and to a checkpoint, alerts and a query (``n`` tells
    the runs apart: a job already done is not run again); with ``fold`` no task has a kept
    snapshot."""
    rows: dict[str, list[Any]] = {}
    for job in (Job("eval", (f"[{n}, {QUERY}]",)), Job("bench", (f"{n}",))):
        if fold:
            shutil.rmtree(root / "_snapshots", ignore_errors=True)
        report = run(root, job)
        assert report.failed == 0, report.rows
        for r in report.rows:
            rows.setdefault(r["user_id"], []).append((r["value"], r["alerts_by_rule"]))
    return {u: tuple(v) for u, v in rows.items()}


def kept_head(root: Path, user: str) -> int:
    with duckdb.connect(str(snapshot_path(Fleet(root), user)), read_only=True) as con:
        return int(con.execute("SELECT user_seq FROM snapshots").fetchone()[0])  # type: ignore[index]


def head(root: Path, user: str) -> int:
    return int(Fleet(root).head(user)["events"][0])


def test_each_task_keeps_a_snapshot_the_next_starts_from_with_a_full_folds_answers(
    tmp_path: Path,
) -> None:
    kept, bare = tmp_path / "kept", tmp_path / "bare"
    for n in range(2):
        src = source(tmp_path / f"src{n}", n)
        for root in (kept, bare):
            report = run(root, Job("ingest", (str(src),)))
            assert (report.ok, report.failed) == (2, 0)
        assert kept_head(kept, LONG) == head(kept, LONG)  # the kept store follows the commits
        assert not snapshot_path(Fleet(kept), SHORT).exists()
        with_kept = answers(kept, n, fold=False)
        assert with_kept == answers(bare, n, fold=True)
        shutil.rmtree(bare / "_snapshots")  # the next ingest on `bare` folds the whole log
    assert json.loads(with_kept["ann"][1][1]) != {}  # the allergy's alert stands
    assert verify_fleet(kept).ok

    # a checkout starts from it: the open restores the snapshot without a warning
    out = tmp_path / "ann.duckdb"
    verified = checkout(Fleet(kept), "ann", out, snapshot=True)
    assert verified and all(len(sha) == 64 for sha in verified.values())
    with warnings.catch_warnings():
        warnings.simplefilter("error", SnapshotIgnored)
        wb = Workbench(out, user="ann")
        try:
            assert json.dumps([1, wb.eval(QUERY)]) == with_kept["ann"][0][0]
        finally:
            wb.close()


@pytest.fixture(scope="module")
def ingested(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("ingested")
    root = work / "fleet"
    for n in range(2):
        assert run(root, Job("ingest", (str(source(work / f"src{n}", n)),)), jobs=1).ok == 2
    return root


@pytest.fixture
def fleet(ingested: Path, tmp_path: Path) -> Path:
    """A copy of a fleet of a long log and a short one, each ingested twice."""
    return Path(shutil.copytree(ingested, tmp_path / "fleet"))


def _rewrite(path: Path, select: str) -> None:
    tmp = path.with_name("x.parquet")
    with duckdb.connect() as con:
        query = select.format(src=f"read_parquet('{path}', hive_partitioning = false)")
        con.execute(f"COPY ({query}) TO '{tmp}'")
    tmp.replace(path)


def test_a_part_file_changed_after_the_snapshot_is_verified_row_by_row(
    fleet: Path, tmp_path: Path
) -> None:
    part = Fleet(fleet).files("events", ["ann"])[0]
    _rewrite(part, "SELECT * REPLACE (replace(payload, 'city', 'town') AS payload) FROM {src}")
    with pytest.raises(FleetError, match="fails its integrity check"):
        checkout(Fleet(fleet), "ann", tmp_path / "c.duckdb", snapshot=True)
    assert not (tmp_path / "c.duckdb").exists()
    report = run(fleet, Job("eval", ("1",)), jobs=1)
    assert report.ok == 1 and report.rows  # the other user still runs
    checkout(Fleet(fleet), "b'o\"b", tmp_path / "b.duckdb", snapshot=True)


def _spoil_view(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE VIEW v AS SELECT 1")


def _spoil_rows(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("INSERT INTO uncompacted VALUES (now()::TIMESTAMP)")


def _spoil_other(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("UPDATE events SET user_id = 'mallory' WHERE user_seq = 1")


def _spoil_gap(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("DELETE FROM events WHERE user_seq = 5")


def _spoil_user(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("UPDATE uac_fleet_snapshot SET user_id = 'mallory'")


def _spoil_table(con: duckdb.DuckDBPyConnection) -> None:
    con.execute('CREATE TABLE uac_snap."u0000000000000000_0_cur" (x INT)')


def _spoil_macro(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("CREATE MACRO m(x) AS x")


def _spoil_schema(con: duckdb.DuckDBPyConnection) -> None:
    con.execute("ALTER TABLE events ADD COLUMN extra INT")


@pytest.mark.parametrize(
    "spoil",
    [
        _spoil_view,
        _spoil_rows,
        _spoil_other,
        _spoil_gap,
        _spoil_user,
        _spoil_table,
        _spoil_macro,
        _spoil_schema,
    ],
)
def test_a_kept_store_that_is_not_one_of_the_user_alone_is_ignored(
    fleet: Path, tmp_path: Path, spoil: Any
) -> None:
    path = snapshot_path(Fleet(fleet), "ann")
    with duckdb.connect(str(path)) as con:
        spoil(con)
    out = tmp_path / "c.duckdb"
    with pytest.warns(SnapshotIgnored, match="ignored"):
        checkout(Fleet(fleet), "ann", out, snapshot=True)
    with duckdb.connect(str(out), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM snapshots").fetchone() == (0,)
        tables = "SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'uac_snap'"
        assert con.execute(tables).fetchone() == (0,)
    # the task folds the log and keeps a good snapshot again
    assert run(fleet, Job("eval", (QUERY,)), jobs=1).failed == 0
    checkout(Fleet(fleet), "ann", tmp_path / "again.duckdb", snapshot=True)


@pytest.mark.parametrize("kind", ["garbage", "empty", "symlink", "directory"])
def test_an_unreadable_kept_snapshot_is_ignored(fleet: Path, tmp_path: Path, kind: str) -> None:
    path = snapshot_path(Fleet(fleet), "ann")
    if kind != "symlink":
        path.unlink()
    if kind == "garbage":
        path.write_bytes(b"DUCK" * 5000)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "symlink":
        other = tmp_path / "elsewhere.duckdb"
        shutil.copyfile(snapshot_path(Fleet(fleet), LONG), other)
        path.unlink()
        path.symlink_to(other)
    else:
        path.mkdir()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        checkout(Fleet(fleet), "ann", tmp_path / "c.duckdb", snapshot=True)
    wb = Workbench(tmp_path / "c.duckdb", user="ann", snapshots=False)
    try:
        assert len(wb.eval("user.all('Trip')")) == 11
    finally:
        wb.close()


def uac(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "uac_kernel.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_forget_carried_by_export_deletes_the_kept_store(fleet: Path, tmp_path: Path) -> None:
    secret = b"note 4321"  # one of the long log's notes
    kept = snapshot_path(Fleet(fleet), LONG)
    assert kept.is_file()
    store = tmp_path / "s.duckdb"
    uac("import", str(fleet), str(store))
    uac("forget", "--db", str(store), "--user", LONG, "--text", secret.decode())
    report = uac("export", str(store), str(fleet))
    assert not kept.exists() and "_snapshots" in report
    assert [p for p in fleet.rglob("*") if p.is_file() and secret in p.read_bytes()] == []
    # the next task folds what is left and keeps a store again, without the note
    assert run(fleet, Job("eval", ("len(user.all('Note'))",)), jobs=1).failed == 0
    assert kept.is_file() and secret not in kept.read_bytes()
    assert verify_fleet(fleet).ok


# -- attacks (a reviewer's cases) -----------------------------------------------------------


def test_a_commit_edited_to_list_fewer_files_is_refused_with_a_kept_store(
    fleet: Path, tmp_path: Path
) -> None:
    """Commit 2 no longer lists its events file: every file still listed is one the kept store
    recorded, but the chain has a gap, which the checkout must still refuse."""
    commit = Fleet(fleet).dir("_commits", LONG) / "000002.json"
    meta = json.loads(commit.read_text())
    meta["files"].pop("events")
    meta["rows"].pop("events")
    commit.write_text(json.dumps(meta))
    assert not verify_fleet(fleet).ok
    with pytest.raises(FleetError, match="fails its integrity check"):
        checkout(Fleet(fleet), LONG, tmp_path / "kept.duckdb", snapshot=True)
    report = run(fleet, Job("eval", ("1",)), jobs=1)
    assert {r["user_id"]: r["status"] for r in report.rows} == {LONG: "failed", SHORT: "ok"}


def _snapshot_table(con: duckdb.DuckDBPyConnection) -> str:
    """The current-records table of a type in the kept store (quoted)."""
    row = con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'uac_snap' "
        "AND table_name LIKE '%\\_cur' ESCAPE '\\' ORDER BY table_name"
    ).fetchone()
    assert row is not None
    return f'uac_snap."{row[0]}"'


def _block_of(path: Path, table: str) -> int:
    """A storage block holding ``table``'s rows and no other table's."""
    with duckdb.connect(str(path), read_only=True) as con:
        owners: dict[int, set[str]] = {}
        for schema, name in con.execute(
            "SELECT schema_name, table_name FROM duckdb_tables()"
        ).fetchall():
            ref = f'{schema}."{name}"'
            for (block,) in con.execute(
                "SELECT DISTINCT block_id FROM pragma_storage_info(?) WHERE block_id >= 0", [ref]
            ).fetchall():
                owners.setdefault(int(block), set()).add(ref)
    return next(b for b, names in sorted(owners.items()) if names == {table})


def test_a_kept_store_with_a_damaged_block_is_ignored_not_failing_every_task(
    fleet: Path,
) -> None:
    """A bit flip in a block of a snapshot table, which no check on the copy reads: the task
    folds the log (SnapshotIgnored), rather than failing on DuckDB's 'Corrupt database file'
    at every run."""
    want = answers(fleet, 7, fold=False)
    kept = snapshot_path(Fleet(fleet), LONG)
    with duckdb.connect(str(kept), read_only=True) as con:
        table = _snapshot_table(con)
    block = _block_of(kept, table)
    data = bytearray(kept.read_bytes())
    at = 3 * 4096 + block * 262144 + 64  # the file's headers, then blocks of 256 KiB
    data[at : at + 64] = bytes(b ^ 0xFF for b in data[at : at + 64])
    kept.write_bytes(bytes(data))
    for n in (8, 9):  # not once: every run
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SnapshotIgnored)
            got = answers(fleet, n, fold=False)
        assert {u: (json.loads(v[0][0])[1:], v[1][1]) for u, v in got.items()} == {
            u: (json.loads(v[0][0])[1:], v[1][1]) for u, v in want.items()
        }


def test_a_kept_store_whose_table_has_a_constraint_is_ignored_even_with_its_digest(
    fleet: Path, tmp_path: Path
) -> None:
    """A snapshot table rebuilt with a CHECK the next write breaks, and the digest beside the
    store written anew to match (as a hostile writer of the directory could): the columns and
    counts are as written, so only the catalog check stands between it and a task failing at
    every close."""
    kept = snapshot_path(Fleet(fleet), LONG)
    with duckdb.connect(str(kept)) as con:
        table = _snapshot_table(con)
        (most,) = con.execute(f"SELECT max(pos) FROM {table}").fetchone()  # type: ignore[misc]
        (ddl,) = con.execute(
            "SELECT sql FROM duckdb_tables() WHERE schema_name = 'uac_snap' AND table_name = ?",
            [table.split('"')[1]],
        ).fetchone()  # type: ignore[misc]
        checked = ddl.replace("pos BIGINT", f"pos BIGINT CHECK (pos <= {int(most)})", 1)
        assert checked != ddl
        con.execute(f"CREATE TABLE keep AS SELECT * FROM {table}")
        con.execute(f"DROP TABLE {table}")
        con.execute(checked)
        con.execute(f"INSERT INTO {table} SELECT * FROM keep")
        con.execute("DROP TABLE keep")
    digest = hashlib.sha256(kept.read_bytes()).hexdigest()
    kept.with_name("snapshot.sha256").write_text(digest)
    with pytest.warns(SnapshotIgnored, match="constraint or a default|views, macros"):
        checkout(Fleet(fleet), LONG, tmp_path / "c.duckdb", snapshot=True)
    for job in (Job("ingest", (str(source(tmp_path / "src2", 2)),)), Job("bench", ("1",))):
        report = run(fleet, job, jobs=1)
        assert report.failed == 0, [r["error"] for r in report.rows]


SECRET = "Quixotrelline"

_KILLED_WRITER = """
import os, signal, sys
from pathlib import Path
import duckdb
from uac_kernel.fleet import files as fleetfiles
from uac_kernel.fleet.checkout import checkout
from uac_kernel.fleet.partition import Fleet
from uac_kernel.fleet.snapshots import snapshot_path

fleet, user, work = Fleet(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
checkout(fleet, user, work / "co.duckdb")
target = snapshot_path(fleet, user)
# as `snapshots.save` writes a kept store: a temporary file through `noted`, DuckDB writing the
# user's rows into it (each statement committed, so in its write-ahead log) when it is killed
with fleetfiles.noted(fleet.root, target, {user: 0}) as tmp:
    con = duckdb.connect(str(tmp))
    quoted = str(work / "co.duckdb").replace("'", "''")
    con.execute(f"ATTACH '{quoted}' AS src (READ_ONLY)")
    con.execute("CREATE TABLE events AS SELECT * FROM src.events")
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_forget_deletes_what_a_kept_store_writer_killed_mid_way_left(tmp_path: Path) -> None:
    """A writer killed while writing a kept store leaves its ``.tmp`` and ``.tmp.wal`` (which
    holds the user's rows): a forget carried by `uac export` deletes both."""
    src = tmp_path / "all.jsonl"
    src.write_text(
        json.dumps({"user": "ana", "kind": "fact", "ts": "2025-03-02T09:00:00", "op": "add",
                    "type": "Allergy", "key": "a1", "fields": {"substance": SECRET}}) + "\n"
    )  # fmt: skip
    root = tmp_path / "fleet"
    uac("fleet", "run", str(root), "ingest", str(src))
    argv = [sys.executable, "-c", _KILLED_WRITER, str(root), "ana", str(tmp_path)]
    assert subprocess.run(argv, timeout=120).returncode == -signal.SIGKILL
    left = [p.name for p in snapshot_path(Fleet(root), "ana").parent.iterdir()]
    assert any(name.endswith(".tmp.wal") for name in left), left

    def holding() -> list[Path]:
        return [p for p in root.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]

    assert any("_snapshots" in str(p) for p in holding())
    store = tmp_path / "s.duckdb"
    uac("import", str(root), str(store))
    uac("forget", "--db", str(store), "--user", "ana", "--text", SECRET)
    uac("export", str(store), str(root))
    assert holding() == []
