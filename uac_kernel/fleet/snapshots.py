"""The user's store as the last fleet task left it, kept beside their partition with its snapshot
of the fold, so the next task starts from it: it folds only the events after it and reads only
the partition files committed since.

``DIR/_snapshots/bucket=<bb>/user=<enc>/snapshot.duckdb`` is a copy of the task's store after its
commit: the user's rows of the log (those of the partition files the task stood on), their
``snapshots`` row and ``uac_snap`` tables (see ``checkpoints.snapshot``), and those partition
files, each with its SHA-256 (table ``uac_fleet_verified``): the files the task's checkout
verified and those of its own commit.

A checkout starts from a copy of it when it fits the partition: every file it recorded is still
listed and unchanged, byte for byte. It then reads only the files committed since (a ``uac
export``), and when there are none it takes the chains as verified, checking only that the last
commit's heads are the rows' (``uac verify DIR`` still reads every row); otherwise it verifies
every row, as without it. The open checks the snapshot against the chain position it claims (the
event at its ``user_seq`` must carry its hash, the latest checkpoint must be the one it names,
every table must be as written: else a full fold, with a ``SnapshotIgnored`` warning, and the
same answers). A kept store that is not one of this uac's stores holding that user alone is
ignored with the same warning. It is written through ``fleetfiles.noted``, so a forget carried by
``uac export`` deletes it with the other files holding the user's data.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import duckdb

from uac_kernel.checkpoints.snapshot import CLOSE_AFTER, SCHEMA, user_tag
from uac_kernel.core.chain import GENESIS
from uac_kernel.core.display import shorten
from uac_kernel.core.errors import SnapshotIgnored
from uac_kernel.fleet import files as fleetfiles
from uac_kernel.fleet.export import _bulk_heads
from uac_kernel.fleet.partition import TABLES, Fleet, bucket, encode
from uac_kernel.log.migrations import migrate

__all__ = ["DIR", "KEEP_FROM", "digests", "relative", "save", "snapshot_path", "start_from"]

DIR = "_snapshots"
FORMAT = 1
KEEP_FROM = CLOSE_AFTER
"""A task keeps the store of a user whose log holds this many events, as a store's close writes
a snapshot after as many new ones: a shorter log's kept store would be mostly DuckDB's own size
(2.6 MB for 13 events, 8.7 MB for 4,000, against 36 kB and 1.5 MB of Parquet), and folding and
verifying it whole costs about what starting from one saves (bench/fleet_history.py)."""
_CHUNK = 1 << 20


def snapshot_path(fleet: Fleet, user: str) -> Path:
    """Where ``user``'s snapshot is kept in ``fleet``."""
    return fleet.root / DIR / f"bucket={bucket(user)}" / f"user={encode(user)}" / "snapshot.duckdb"


def digests(fleet: Fleet, files: Iterable[Path]) -> dict[str, str]:
    """Each file's path in the fleet and the SHA-256 of its bytes."""
    out = {}
    for path in files:
        h = hashlib.sha256()
        with open(path, "rb") as handle:
            while chunk := handle.read(_CHUNK):
                h.update(chunk)
        out[relative(fleet, path)] = h.hexdigest()
    return out


def relative(fleet: Fleet, path: Path) -> str:
    """A partition file's path in the fleet, as commits and kept stores name it."""
    return path.relative_to(fleet.root).as_posix()


def save(fleet: Fleet, user: str, store: Path, verified: Mapping[str, str]) -> bool:
    """Keep the closed store at ``store``, whose rows of ``user`` are those of the partition
    files ``verified`` (path in the fleet -> SHA-256), beside the partition, with the SHA-256 of
    its bytes beside it. False when the store holds no snapshot of the user."""
    target = snapshot_path(fleet, user)
    with duckdb.connect(str(store)) as src:
        row = src.execute(_ROW, [user]).fetchall()
        if len(row) != 1:
            return False
        if _kept(target, user) == (row[0], dict(verified)):
            return True  # the one kept already: the task wrote nothing new
        src.execute("CHECKPOINT")  # the file alone holds every row: no write-ahead log
        found = src.execute(
            "SELECT coalesce(max(user_seq), 0) FROM events WHERE user_id = ?", [user]
        ).fetchone()
    # a forget erasing what the store holds is one after the events it holds
    users = {user: int(found[0]) if found else 0}
    with fleetfiles.noted(fleet.root, target, users) as tmp:
        shutil.copyfile(store, tmp)
        with duckdb.connect(str(tmp)) as out:
            out.execute(f"CREATE TABLE {_META} (format INTEGER, user_id VARCHAR)")
            out.execute(f"INSERT INTO {_META} VALUES (?, ?)", [FORMAT, user])
            out.execute(f"CREATE TABLE {_VERIFIED} (path VARCHAR, sha256 VARCHAR)")
            if verified:
                out.executemany(f"INSERT INTO {_VERIFIED} VALUES (?, ?)", sorted(verified.items()))
        digest = _copy(tmp, None)
    # written after the store: a writer killed between leaves a digest that does not match,
    # and the next task folds the log and keeps both anew
    fleetfiles.write(fleet.root, _digest_path(target), digest, users)
    return True


def _digest_path(kept: Path) -> Path:
    return kept.with_name("snapshot.sha256")


def _copy(src: Path, dst: Path | None) -> str:
    """Copy ``src`` to ``dst`` (or only read it) in one pass; the SHA-256 of its bytes."""
    h = hashlib.sha256()
    with open(src, "rb") as reader, open(dst or os.devnull, "wb") as writer:
        while chunk := reader.read(_CHUNK):
            h.update(chunk)
            if dst is not None:
                writer.write(chunk)
    return h.hexdigest()


_ROW = "SELECT user_seq, hash, seq, gen, created_at FROM snapshots WHERE user_id = ?"
_META, _VERIFIED = "uac_fleet_snapshot", "uac_fleet_verified"


def _kept(path: Path, user: str) -> tuple[tuple[object, ...], dict[str, str]] | None:
    """The snapshot row and verified files of the snapshot kept at ``path`` (None: none, or
    one that cannot be read)."""
    if path.is_symlink() or not path.is_file():
        return None
    try:
        with duckdb.connect(str(path), read_only=True) as kept:
            row = kept.execute(_ROW, [user]).fetchall()
            files = kept.execute(f"SELECT path, sha256 FROM {_VERIFIED}").fetchall()
    except duckdb.Error:
        return None
    return (row[0], {str(p): str(h) for p, h in files}) if len(row) == 1 else None


# A snapshot table's name: the user's tag, the type's index, the part (checkpoints.snapshot).
_TABLE = re.compile(r"(u[0-9a-f]{16})_\d{1,9}_(cur|hist|ord)\Z")
# What a database holds beyond its tables: a kept store holds none of it.
_EXTRAS = (
    "SELECT view_name FROM duckdb_views() WHERE NOT internal",
    "SELECT function_name FROM duckdb_functions() WHERE NOT internal",
    "SELECT type_name FROM duckdb_types() WHERE NOT internal",
    "SELECT sequence_name FROM duckdb_sequences()",
    "SELECT index_name FROM duckdb_indexes()",
    "SELECT schema_name FROM duckdb_schemas() WHERE NOT internal AND schema_name <> 'uac_snap'",
    # a snapshot table is created bare: a constraint or a default would fail or steer its writes
    f"SELECT constraint_text FROM duckdb_constraints() WHERE schema_name = '{SCHEMA}'",
    f"SELECT column_name FROM duckdb_columns() WHERE schema_name = '{SCHEMA}' "
    "AND column_default IS NOT NULL",
)
_USERS = ("events", "model_calls", "checkpoints", "checkpoint_segments", "snapshots")


def _catalog(con: duckdb.DuckDBPyConnection) -> list[tuple[object, ...]]:
    """The store tables of ``con`` as created, and its migrations: what a fresh store has."""
    return (
        con.execute(
            "SELECT schema_name, table_name, sql FROM duckdb_tables() "
            f"WHERE schema_name <> '{SCHEMA}' AND table_name NOT IN ('{_META}', '{_VERIFIED}') "
            "ORDER BY ALL"
        ).fetchall()
        + con.execute("SELECT name FROM uac_migrations ORDER BY name").fetchall()
    )


def _check(con: duckdb.DuckDBPyConnection, user: str) -> None:
    """ValueError unless ``con`` is a store of this uac's tables holding ``user`` alone, with
    their snapshot tables and nothing else."""
    fresh = duckdb.connect()
    migrate(fresh)
    if _catalog(con) != _catalog(fresh):
        raise ValueError("it is not a store of this uac's tables")
    if any(con.execute(q).fetchall() for q in _EXTRAS):
        raise ValueError(
            "it holds views, macros, types, sequences, indexes, constraints or defaults"
        )
    if con.execute(f"SELECT format, user_id FROM {_META}").fetchall() != [(FORMAT, user)]:
        raise ValueError(f"it is not a format-{FORMAT} store of this user")
    for table in _USERS:
        if con.execute(f"SELECT count(*) FROM {table} WHERE user_id <> ?", [user]).fetchall() != [
            (0,)
        ]:
            raise ValueError(f"its {table} hold another user's rows")
    if con.execute("SELECT count(*) FROM uncompacted").fetchall() != [(0,)]:
        raise ValueError("it is owed a compaction after a forget")
    tag = user_tag(user)
    for (name,) in con.execute(
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = ?", [SCHEMA]
    ).fetchall():
        if not ((m := _TABLE.match(name)) and m.group(1) == tag):
            raise ValueError(f"it holds a table {shorten(repr(name), 60)} of no snapshot")


def _holds(con: duckdb.DuckDBPyConnection, fleet: Fleet, user: str, recorded: set[str]) -> bool:
    """Whether the store of ``con`` holds as many rows of each table as the commits listing
    the files ``recorded`` say, ending at the heads of the last of them."""
    counts = dict.fromkeys(TABLES, 0)
    heads: dict[str, Any] = {}
    for commit in fleet.live(user):
        listed = set(commit["files"].values())
        if listed <= recorded:
            for table in commit["files"]:
                counts[table] += int(commit["rows"].get(table, 0))
            heads = commit["heads"]
        elif listed & recorded:
            return False  # a commit half held: not a store a task kept
    for table, n in counts.items():
        if con.execute(f"SELECT count(*) FROM {table}").fetchall() != [(n,)]:
            return False
    ends = _bulk_heads(con, [user])[user]
    return all(list(heads.get(t, [0, GENESIS])) == ends[t] for t in ends)


def start_from(fleet: Fleet, user: str, path: Path, held: Mapping[str, str]) -> set[str] | None:
    """Make the new store at ``path`` a copy of ``user``'s kept store when it fits the partition
    files ``held`` (path in the fleet -> SHA-256): every file it recorded is still one of them,
    unchanged. Return the files whose rows it holds; None (and no file at ``path``) when there
    is no kept store, or one that does not fit (a ``SnapshotIgnored`` warning when it is not a
    store of that user alone, or cannot be read: the task folds the whole log)."""
    kept = snapshot_path(fleet, user)
    if kept.is_symlink() or not kept.is_file():
        return None
    try:
        said = _digest_path(kept)
        if said.is_symlink() or not said.is_file() or said.stat().st_size > 100:
            raise ValueError("its SHA-256 is not beside it")
        if _copy(kept, path) != said.read_text(encoding="ascii", errors="replace").strip():
            raise ValueError("its bytes are not those it was kept with (damaged or changed)")
        with duckdb.connect(str(path)) as con:
            _check(con, user)
            recorded = {
                str(p): str(h)
                for p, h in con.execute(f"SELECT path, sha256 FROM {_VERIFIED}").fetchall()
            }
            if any(held.get(rel) != sha for rel, sha in recorded.items()):
                # a base commit (a forget) rewrote the partition, or a file changed on disk: the
                # checkout reads every file, and verifies them
                path.unlink()
                return None
            if not _holds(con, fleet, user, set(recorded)):
                raise ValueError("its rows are not those of the partition files it names")
            con.execute(f"DROP TABLE {_META}")
            con.execute(f"DROP TABLE {_VERIFIED}")
    except (OSError, duckdb.Error, ValueError) as exc:
        path.unlink(missing_ok=True)
        Path(f"{path}.wal").unlink(missing_ok=True)
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        warnings.warn(
            f"the store kept for {user} in {fleet.root} is ignored ({shorten(why, 120)}); "
            "folding the log",
            SnapshotIgnored,
            stacklevel=2,
        )
        return None
    return set(recorded)
