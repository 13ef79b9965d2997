"""One user's partition as a store of its own: checked out into a DuckDB file, worked on, and
committed back as the parts it added."""

from __future__ import annotations

import contextlib
from pathlib import Path

import duckdb

from uac_kernel.core.display import printable, shorten
from uac_kernel.core.errors import FleetError
from uac_kernel.fleet import snapshots
from uac_kernel.fleet.export import _bulk_heads, _export
from uac_kernel.fleet.partition import ORDER, TABLES, Fleet, _who, check_columns, parquet_source
from uac_kernel.log.migrations import migrate
from uac_kernel.log.store import Store

__all__ = ["checkout", "commit"]


def _load(con: duckdb.DuckDBPyConnection, files: dict[str, list[Path]]) -> None:
    """Insert the rows of the committed ``files`` of each table into the store tables of
    ``con``, in chain order."""
    for table, paths in files.items():
        if paths:
            con.execute(
                f"INSERT INTO {table} BY NAME SELECT * FROM {parquet_source(paths)} "
                f"ORDER BY {ORDER[table]}"
            )


def checkout(fleet: Fleet, user: str, path: Path, *, snapshot: bool = False) -> dict[str, str]:
    """Write a new single-file store at ``path`` holding exactly ``user``'s committed rows,
    every number as committed; a user with no commit gives an empty store.

    With ``snapshot`` the store starts as a copy of the one the last task kept beside the
    partition when it fits (``fleet.snapshots``): only the files committed since are read, and
    when there are none the chains are taken as verified (else every row is verified, as
    without it). Returns the partition's files, each with its SHA-256 ({} without
    ``snapshot``): what the next kept store stands on."""
    path = Path(path)
    if path.exists():
        raise FleetError(f"{path} exists; check a user out into a new file")
    try:
        files = {table: fleet.files(table, [user]) for table in TABLES}
        held = (
            snapshots.digests(fleet, (f for fs in files.values() for f in fs)) if snapshot else {}
        )
        have = (snapshots.start_from(fleet, user, path, held) if snapshot else None) or set()
        with contextlib.closing(duckdb.connect(str(path))) as con:
            check_columns(fleet, [user], con)
            migrate(con)
            con.execute("BEGIN TRANSACTION")
            try:
                _load(
                    con,
                    {
                        t: [f for f in fs if snapshots.relative(fleet, f) not in have]
                        for t, fs in files.items()
                    },
                )
            except duckdb.Error as exc:
                raise FleetError(
                    f"user {_who(user)}: cannot check out the committed files of {fleet.root} "
                    f"({shorten(str(exc).splitlines()[0], 120)}); `uac verify {fleet.root}` "
                    "names the damaged file"
                ) from None
            con.execute("COMMIT")
        # every file's rows as the task that kept the store verified or wrote them
        trusted = bool(held) and set(held) == have
        _check_checkout(fleet, user, path, chains=not trusted)
    except BaseException:
        path.unlink(missing_ok=True)
        Path(f"{path}.wal").unlink(missing_ok=True)
        raise
    return held


def _check_checkout(fleet: Fleet, user: str, path: Path, *, chains: bool = True) -> None:
    """FleetError unless the checked-out ``user``'s chains are intact (checked only with
    ``chains``) and end at the last commit's heads: no job runs on (and commits on top of) a
    partition verify rejects."""
    from uac_kernel.log.integrity import verify_users

    store = Store(path, read_only=True, create=False)
    try:
        problems = [p for _u, p in verify_users(store) if p] if chains else []
        if not problems:
            ends = _bulk_heads(store.con, [user])[user]
            said = fleet.head(user)
            if said and any(list(said[t]) != ends[t] for t in ends):
                problems = ["the last commit's heads do not match its rows"]
    finally:
        store.close()
    if problems:
        raise FleetError(
            f"user {_who(user)}: the partition in {fleet.root} fails its integrity check "
            f"({shorten(printable(problems[0]), 160)}); `uac verify {fleet.root}` lists every "
            "problem, restore it from a copy"
        )


def commit(fleet: Fleet, user: str, path: Path, *, by: str) -> int | None:
    """Append what the store at ``path`` holds of ``user`` beyond the partition's heads as one
    commit; return its number, or None when nothing is new. FleetDiverged if the store's
    chains do not extend the partition's, FleetConflict if another writer committed first."""
    store = Store(path, read_only=True, create=False)
    try:
        with store.hold():
            con = store.con
            con.execute("BEGIN TRANSACTION")  # one consistent view of the store's rows
            try:
                _report, made = _export(fleet, con, str(path), [user], by=by)
            finally:
                con.execute("ROLLBACK")
    finally:
        store.close()
    return made.get(user)
