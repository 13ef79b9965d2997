"""A user's snapshot of the fold kept beside their partition, so a fleet task folds only the
events after it.

``DIR/_snapshots/bucket=<bb>/user=<enc>/snapshot.duckdb`` is a DuckDB file holding the user's
``snapshots`` row and ``uac_snap`` tables (see ``checkpoints.snapshot``) as the last task that
committed left them, and the partition's files that task stood on, each with its SHA-256: the
files its checkout verified and those of its own commit.

A checkout copies the snapshot into its new store, where the open checks it against the chain
position it claims (the event at its ``user_seq`` must carry its hash, the latest checkpoint
must be the one it names, every table must be as written: else a full fold, with a
``SnapshotIgnored`` warning, and the same answers). When every file the partition lists is one
the snapshot recorded, byte for byte, the checkout takes their chains as verified and checks
only that the last commit's heads are the rows' (``uac verify DIR`` still reads every row);
a file it did not record (a later ``uac export``, a rewritten part) makes it verify them all.
The file is written through ``fleetfiles.noted``, so a forget deletes it with the other files
holding the user's data.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path

import duckdb

from uac_kernel.checkpoints.snapshot import SCHEMA, user_tag
from uac_kernel.core.display import shorten
from uac_kernel.core.errors import SnapshotIgnored
from uac_kernel.fleet import files as fleetfiles
from uac_kernel.fleet.partition import Fleet, bucket, encode
from uac_kernel.log.migrations import migrate

__all__ = ["DIR", "digests", "save", "snapshot_path", "start_from"]

DIR = "_snapshots"
FORMAT = 1
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
        out[path.relative_to(fleet.root).as_posix()] = h.hexdigest()
    return out


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def save(fleet: Fleet, user: str, store: Path, head: int, verified: Mapping[str, str]) -> bool:
    """Keep the snapshot of ``user`` in the closed store at ``store`` beside their partition,
    with the files ``verified`` (path in the fleet -> SHA-256) it stands on; ``head``: the
    user's event head it covers. False when the store holds no snapshot of the user."""
    tag = user_tag(user)
    target = snapshot_path(fleet, user)
    with duckdb.connect(str(store), read_only=True) as src:
        row = src.execute(_ROW, [user]).fetchall()
        if len(row) != 1:
            return False
        if _kept(target, user) == (row[0], dict(verified)):
            return True  # the one kept already: the task folded nothing new
        tables = [
            name
            for (name,) in src.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = ?",
                [SCHEMA],
            ).fetchall()
            if name.startswith(tag + "_")
        ]
    # an empty store holding the snapshot alone: a checkout starts from a copy of it
    with (
        fleetfiles.noted(fleet.root, target, {user: head}) as tmp,
        duckdb.connect(str(tmp)) as out,
    ):
        migrate(out)
        out.execute(f"ATTACH {_literal(store)} AS src (READ_ONLY)")
        out.execute("INSERT INTO snapshots SELECT * FROM src.snapshots WHERE user_id = ?",
                        [user])  # fmt: skip
        for name in tables:
            table = f"{SCHEMA}.{_quote(name)}"
            out.execute(f"CREATE TABLE {table} AS SELECT * FROM src.{table}")
        out.execute("DETACH src")
        out.execute(f"CREATE TABLE {_META} (format INTEGER, user_id VARCHAR)")
        out.execute(f"INSERT INTO {_META} VALUES (?, ?)", [FORMAT, user])
        out.execute(f"CREATE TABLE {_VERIFIED} (path VARCHAR, sha256 VARCHAR)")
        if verified:
            out.executemany(f"INSERT INTO {_VERIFIED} VALUES (?, ?)", sorted(verified.items()))
    return True


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
# What a database holds beyond its tables: a kept snapshot holds none of it.
_EXTRAS = (
    "SELECT view_name FROM duckdb_views() WHERE NOT internal",
    "SELECT function_name FROM duckdb_functions() WHERE NOT internal",
    "SELECT type_name FROM duckdb_types() WHERE NOT internal",
    "SELECT sequence_name FROM duckdb_sequences()",
    "SELECT index_name FROM duckdb_indexes()",
    "SELECT schema_name FROM duckdb_schemas() WHERE NOT internal AND schema_name <> 'uac_snap'",
)
_LOG = ("events", "model_calls", "checkpoints", "checkpoint_segments", "uncompacted")


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


def start_from(fleet: Fleet, user: str, path: Path) -> dict[str, str] | None:
    """Make the new store at ``path`` a copy of ``user``'s kept snapshot: an empty store with
    the snapshot alone. Return the files the snapshot recorded as verified; None (and no file
    at ``path``) when there is none, or one that is not such a store (a ``SnapshotIgnored``
    warning: the task folds the whole log)."""
    kept = snapshot_path(fleet, user)
    if kept.is_symlink() or not kept.is_file():
        return None
    try:
        shutil.copyfile(kept, path)
        with duckdb.connect(str(path)) as con:
            fresh = duckdb.connect()
            migrate(fresh)
            if _catalog(con) != _catalog(fresh):
                raise ValueError("it is not a store of this uac's tables")
            if any(con.execute(q).fetchall() for q in _EXTRAS):
                raise ValueError("it holds views, macros, types, sequences or indexes")
            if any(con.execute(f"SELECT count(*) FROM {t}").fetchall() != [(0,)] for t in _LOG):
                raise ValueError("it holds rows of the log")
            if con.execute(f"SELECT format, user_id FROM {_META}").fetchall() != [(FORMAT, user)]:
                raise ValueError(f"it is not a format-{FORMAT} snapshot of this user")
            if con.execute("SELECT DISTINCT user_id FROM snapshots").fetchall() != [(user,)]:
                raise ValueError("it is not a snapshot of this user alone")
            tag = user_tag(user)
            for (name,) in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE schema_name = ?", [SCHEMA]
            ).fetchall():
                if not ((m := _TABLE.match(name)) and m.group(1) == tag):
                    raise ValueError(f"it holds a table {shorten(repr(name), 60)} of no snapshot")
            verified = {
                str(p): str(h)
                for p, h in con.execute(f"SELECT path, sha256 FROM {_VERIFIED}").fetchall()
            }
            con.execute(f"DROP TABLE {_META}")
            con.execute(f"DROP TABLE {_VERIFIED}")
    except (OSError, duckdb.Error, ValueError) as exc:
        path.unlink(missing_ok=True)
        Path(f"{path}.wal").unlink(missing_ok=True)
        why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        warnings.warn(
            f"the snapshot kept for {user} in {fleet.root} is ignored ({shorten(why, 120)}); "
            "folding the log",
            SnapshotIgnored,
            stacklevel=2,
        )
        return None
    return verified
