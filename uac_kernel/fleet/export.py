"""Export a whole store into a fleet directory: each user's rows staged, written as Parquet parts
and committed, only what a fleet lacks."""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from uac_kernel.core.chain import GENESIS
from uac_kernel.core.display import plural
from uac_kernel.core.errors import FleetConflict, FleetDiverged, FleetError
from uac_kernel.fleet import files as fleetfiles
from uac_kernel.fleet.partition import (
    COMMITS,
    FORMAT,
    ORDER,
    TABLES,
    Fleet,
    _base_head,
    _drop_before,
    _quote,
    _stale,
    _who,
    _write_new,
    parquet_source,
)
from uac_kernel.log.store import Store

__all__ = ["ExportReport", "export_store"]


@dataclass(frozen=True)
class ExportReport:
    """What ``export_store`` wrote: users given a first commit, appended to, rewritten whole
    (a forget erased what the fleet held), unchanged; rows written per table."""

    root: Path
    new: int = 0
    appended: int = 0
    rewritten: int = 0
    unchanged: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    # what carrying a forget did to the files uac wrote beside the partitions, and the files
    # of the directory it cannot check (only when a forget was carried)
    purged: fleetfiles.Purged = field(default_factory=fleetfiles.Purged)
    unreached: list[str] = field(default_factory=list)

    def summary(self) -> str:
        done = self.new + self.appended + self.rewritten
        text = (
            f"{self.root}: {plural(done, 'user')} committed ({self.new} new, {self.appended} "
            f"appended, {self.rewritten} rewritten after a forget), {self.unchanged} unchanged; "
            f"{plural(self.rows.get('events', 0), 'event')}, "
            f"{plural(self.rows.get('model_calls', 0), 'model call')}, "
            f"{plural(self.rows.get('checkpoints', 0), 'checkpoint')} written"
        )
        if not (self.rewritten or self.purged.deleted or self.purged.rewritten):
            return text
        lines = [text, "the forget reached these files uac wrote in the directory:"]
        lines += [f"  deleted {p}" for p in self.purged.deleted]
        lines += [f"  rewrote {p} without the forgotten user's rows" for p in self.purged.rewritten]
        lines.append("not reached (check or delete them yourself):")
        lines += [f"  {p} (not written from users' data by uac)" for p in self.unreached]
        lines.append(
            "  copies outside this directory: files you wrote, notebook outputs, other copies "
            "of the store or of this directory"
        )
        return "\n".join(lines)


def _columns(values: dict[str, list[Any]]) -> tuple[str, dict[str, list[Any]]]:
    """A table expression over parallel lists bound as parameters (one row per index), for the
    per-user plan of a bulk query: no temporary table, so it works on a read-only store."""
    names = ", ".join(f"unnest(${name}) AS {name}" for name in values)
    return f"(SELECT {names})", values


def _bulk_heads(con: duckdb.DuckDBPyConnection, users: list[str]) -> dict[str, dict[str, Any]]:
    """Each user's heads in the store, and the counts a forget changes, in one grouped pass
    per table."""
    out: dict[str, dict[str, Any]] = {
        u: {"events": [0, GENESIS], "model_calls": [0, GENESIS], "checkpoints": [0, GENESIS]}
        for u in users
    }
    for table, count in (
        ("events", "max(user_seq)"),
        ("model_calls", "count(*)"),
        ("checkpoints", "max(version)"),
    ):
        for user, n, h in con.execute(
            f"SELECT user_id, {count}, arg_max(hash, {ORDER[table]}) FROM {table} "
            "WHERE user_id IN (SELECT unnest($users)) GROUP BY user_id",
            {"users": users},
        ).fetchall():
            out[str(user)][table] = [int(n), str(h)]
    return out


def export_store(
    store: str | Path, root: str | Path, *, users: Iterable[str] | None = None
) -> ExportReport:
    """Export the store's users (or ``users``) into the fleet directory ``root`` (created if
    new): a first commit for a user new to it, a commit of the rows beyond the partition for
    one it holds, a base commit rewriting the partition when a forget erased content it holds.

    Every table is read in one ordered pass for all users and written by DuckDB partitioned
    by user into a staging directory, whose files are then moved into the layout and
    committed user by user. A user whose store chain does not extend the partition's stops the
    export before anything is written (FleetDiverged)."""
    source = Store(store, read_only=True, create=False)  # first: a bad STORE makes no DIR
    try:
        fleet = Fleet(root, create=True)
        with source.hold():
            con = source.con
            con.execute("BEGIN TRANSACTION")  # one consistent view of every table
            try:
                return _export(fleet, con, str(store), users, by="export", strict=True)[0]
            finally:
                con.execute("ROLLBACK")
    finally:
        source.close()


def _export(
    fleet: Fleet,
    con: duckdb.DuckDBPyConnection,
    where: str,
    chosen: Iterable[str] | None,
    *,
    by: str,
    strict: bool = False,
) -> tuple[ExportReport, dict[str, int]]:
    """Commit the rows of ``chosen`` users (default: all) the fleet does not hold yet; the
    report and the number of each commit made."""
    there = str(fleet.root)
    found = [
        str(r[0])
        for r in con.execute(
            "SELECT DISTINCT user_id FROM (SELECT user_id FROM events UNION ALL "
            "SELECT user_id FROM model_calls UNION ALL SELECT user_id FROM checkpoints) "
            "ORDER BY user_id"
        ).fetchall()
    ]
    if chosen is not None:
        wanted = set(chosen)
        if strict and (missing := sorted(wanted - set(found))):
            raise FleetError(
                f"{where} holds no user {_who(missing[0])}; `uac users --db {where}` lists them"
            )
        found = [u for u in found if u in wanted]
    heads = _bulk_heads(con, found)
    commits = {u: fleet.commits(u) for u in found}
    held = [u for u in found if commits[u]]
    theirs = {u: commits[u][-1]["heads"] for u in held}
    for user in held:
        # a writer killed between a base commit and deleting the older files left them: the
        # next writer of the user finishes that deletion (erased content must not outlive it)
        for path in _stale(fleet, user, commits[user]):
            path.unlink(missing_ok=True)
    last_call = _bulk_extends(con, theirs, where, there)
    changed = [u for u in held if heads[u] != theirs[u]]
    # a forget appends a forget event, so only a user whose heads moved can have erased more
    rewrite = _bulk_erased(fleet, con, {u: theirs[u] for u in changed}, last_call)
    plan: list[tuple[str, bool, dict[str, int]]] = []  # user, base, rows after which are new
    for user in found:
        if not commits[user] or user in rewrite:
            plan.append((user, True, dict.fromkeys(TABLES, 0)))
        elif user in changed:
            cp = int(theirs[user]["checkpoints"][0])
            after = {
                "events": int(theirs[user]["events"][0]),
                "model_calls": last_call[user],
                "checkpoints": cp,
                "checkpoint_segments": cp,
            }
            plan.append((user, False, after))
    report = {"new": 0, "appended": 0, "rewritten": 0}
    made: dict[str, int] = {}
    rows_total = dict.fromkeys(TABLES, 0)
    fleetfiles.clear_staging(fleet.root)
    if plan:
        staging, lock = fleetfiles.staging_dir(fleet.root, fleetfiles.STAGING)
        try:
            staged = _stage(con, plan, staging)
            conflicts = []
            for idx, (user, base, _after) in enumerate(plan, 1):
                files = staged.get(idx, {})
                if not files:
                    continue
                try:
                    n = _commit_staged(
                        fleet, user, len(commits[user]) + 1, base, files, heads[user], by=by
                    )
                except FleetConflict as exc:
                    conflicts.append(str(exc))
                    continue
                made[user] = n
                for table, (_path, count) in files.items():
                    rows_total[table] += count
                kind = "new" if n == 1 else "rewritten" if base else "appended"
                report[kind] += 1
            if conflicts:
                more = f" (and {len(conflicts) - 1} more)" if len(conflicts) > 1 else ""
                raise FleetConflict(conflicts[0] + more)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            os.close(lock)
    # a forget reaches the files uac wrote from these users' data too (also finishing what a
    # writer killed after a base commit left)
    bases = {
        u: _base_head(fleet.commits(u) if u in made else commits[u]) for u in held + list(made)
    }
    purged = fleetfiles.purge(fleet.root, bases) if any(bases.values()) else fleetfiles.Purged()
    carried = report["rewritten"] or purged.deleted or purged.rewritten
    done = report["new"] + report["appended"] + report["rewritten"]
    summary = ExportReport(
        fleet.root,
        **report,
        unchanged=len(found) - done,
        rows=rows_total,
        purged=purged,
        unreached=fleetfiles.unreached(fleet.root) if carried else [],
    )
    return summary, made


def _bulk_extends(
    con: duckdb.DuckDBPyConnection,
    theirs: dict[str, dict[str, Any]],
    where: str,
    there: str,
    prefix: str = "",
) -> dict[str, int]:
    """FleetDiverged unless every user's chains in the tables ``prefix``+name of ``con`` (the
    store's, of ``where``) pass through the heads ``theirs`` (of ``there``); the call_id of
    each user's call at that head (0 if none)."""
    if not theirs:
        return {}
    users = sorted(theirs)
    plan, params = _columns(
        {
            "u": users,
            "ev_n": [int(theirs[u]["events"][0]) for u in users],
            "call_n": [int(theirs[u]["model_calls"][0]) for u in users],
            "cp_n": [int(theirs[u]["checkpoints"][0]) for u in users],
        }
    )
    found: dict[str, dict[str, Any]] = {u: {} for u in users}
    for table, sql in (
        ("events", f"SELECT p.u, e.hash, e.user_seq FROM {plan} p JOIN {prefix}events e "
         "ON e.user_id = p.u AND e.user_seq = p.ev_n"),
        ("model_calls", f"SELECT p.u, c.hash, c.call_id FROM {plan} p JOIN "
         "(SELECT user_id, hash, call_id, row_number() OVER (PARTITION BY user_id "
         f"ORDER BY call_id) AS k FROM {prefix}model_calls WHERE user_id IN (SELECT unnest($u))) c "
         "ON c.user_id = p.u AND c.k = p.call_n"),
        ("checkpoints", f"SELECT p.u, c.hash, c.version FROM {plan} p JOIN "
         f"{prefix}checkpoints c ON c.user_id = p.u AND c.version = p.cp_n"),
    ):  # fmt: skip
        for user, h, at in con.execute(sql, params).fetchall():
            found[str(user)][table] = (str(h), int(at))
    last_call: dict[str, int] = {}
    for user in users:
        for table, what in (("events", "events"), ("model_calls", "model calls"),
                            ("checkpoints", "checkpoints")):  # fmt: skip
            n, h = theirs[user][table]
            if not n:
                continue
            got = found[user].get(table)
            if got is None:
                raise FleetDiverged(
                    f"user {_who(user)}: {where} holds fewer {what} than {there} ({n}): it is "
                    f"behind; bring it up to date from {there} first, nothing was written"
                )
            if got[0] != h:
                raise FleetDiverged(
                    f"user {_who(user)}: {where} and {there} differ at {what[:-1]} {n}: the "
                    "two chains diverged (one was rewritten or both grew apart); nothing was "
                    "written"
                )
        last_call[user] = found[user].get("model_calls", ("", 0))[1]
    return last_call


def _bulk_erased(
    fleet: Fleet,
    con: duckdb.DuckDBPyConnection,
    theirs: dict[str, dict[str, Any]],
    last_call: dict[str, int],
) -> set[str]:
    """Users whose store erased content (``forget``) that their partition still holds: the
    counts ``_erased`` compares, for every user at once, from the store and the Parquet."""
    if not theirs:
        return set()
    users = sorted(theirs)
    plan, params = _columns(
        {
            "u": users,
            "ev_n": [int(theirs[u]["events"][0]) for u in users],
            "call_id": [last_call[u] for u in users],
            "cp_n": [int(theirs[u]["checkpoints"][0]) for u in users],
        }
    )
    counts = (
        "SELECT p.u, "
        "(SELECT count(*) FROM {ev} e WHERE e.user_id = p.u AND e.user_seq <= p.ev_n "
        "AND e.salt = ''), "
        "(SELECT count(*) FROM {mc} c WHERE c.user_id = p.u AND c.call_id <= p.call_id "
        "AND c.salt = ''), "
        "(SELECT count(*) FROM {cs} s WHERE s.user_id = p.u AND s.version <= p.cp_n), "
        "(SELECT count(*) FROM {cs} s WHERE s.user_id = p.u AND s.version <= p.cp_n "
        "AND s.salt = '') "
        f"FROM {plan} p"
    )
    mine = {
        str(r[0]): tuple(r[1:])
        for r in con.execute(
            counts.format(ev="events", mc="model_calls", cs="checkpoint_segments"), params
        ).fetchall()
    }
    with duckdb.connect() as mem:
        parts = {}
        for table, key in (("events", "user_seq"), ("model_calls", "call_id"),
                           ("checkpoint_segments", "version")):  # fmt: skip
            files = fleet.files(table, users)
            source = (
                parquet_source(files)
                if files
                else f"(SELECT ''::VARCHAR AS user_id, ''::VARCHAR AS salt, 0::BIGINT AS {key} "
                "WHERE false)"
            )
            mem.execute(f"CREATE TABLE p_{table} AS SELECT user_id, salt, {key} FROM {source}")
            parts[table] = f"p_{table}"
        theirs_counts = {
            str(r[0]): tuple(r[1:])
            for r in mem.execute(
                counts.format(
                    ev=parts["events"], mc=parts["model_calls"], cs=parts["checkpoint_segments"]
                ),
                params,
            ).fetchall()
        }
    return {u for u in users if mine[u] != theirs_counts[u]}


# Rows one partitioned COPY of the export writes at most: DuckDB holds them while it sorts and
# writes, so memory stays bounded whatever the store's size (2,000 users x 1,000 events in
# one COPY peaked at 1.8 GB; in groups of 250 users, 0.5 GB, and took less time).
_STAGE_ROWS = 250_000


def _stage(
    con: duckdb.DuckDBPyConnection,
    plan: list[tuple[str, bool, dict[str, int]]],
    staging: Path,
) -> dict[int, dict[str, tuple[Path, int]]]:
    """Write the planned rows of every table, partitioned by the user's index in ``plan``, into
    ``staging``; return, by index, each table's file and row count."""
    key = {"events": "user_seq", "model_calls": "call_id", "checkpoints": "version",
           "checkpoint_segments": "version"}  # fmt: skip
    columns: dict[str, list[Any]] = {
        "u": [u for u, _b, _a in plan],
        "idx": list(range(1, len(plan) + 1)),
        **{f"a_{t}": [a[t] for _u, _b, a in plan] for t in TABLES},
    }
    staged: dict[int, dict[str, tuple[Path, int]]] = {}
    staging.mkdir(exist_ok=True)
    for table in TABLES:
        cond = f"t.user_id = p.u AND t.{key[table]} > p.a_{table}"
        table_plan, params = _columns(columns)
        counts = dict(
            con.execute(
                f"SELECT p.idx, count(*) FROM {table} t JOIN {table_plan} p ON {cond} "
                "GROUP BY p.idx ORDER BY p.idx",
                params,
            ).fetchall()
        )
        # users in groups of at most _STAGE_ROWS rows (a bigger user alone), one COPY each
        groups: list[list[int]] = [[]]
        rows = 0
        for idx, count in counts.items():
            if groups[-1] and rows + count > _STAGE_ROWS:
                groups.append([])
                rows = 0
            groups[-1].append(int(idx) - 1)
            rows += count
        for g, members in enumerate(g for g in groups if g):
            chunk_plan, chunk_params = _columns(
                {name: [values[i] for i in members] for name, values in columns.items()}
            )
            out = staging / f"{table}-{g}"
            # one writer per user's partition open at once, or DuckDB splits a partition's file
            con.execute(f"SET partitioned_write_max_open_files = {len(members) + 1}")
            con.execute(
                f"COPY (SELECT t.*, p.idx AS uac_idx FROM {table} t JOIN {chunk_plan} p "
                f"ON {cond} ORDER BY p.idx, "
                f"{', '.join('t.' + c.strip() for c in ORDER[table].split(','))}) "
                f"TO {_quote(str(out))} (FORMAT parquet, PARTITION_BY (uac_idx))",
                chunk_params,
            )
            for i in members:
                idx = i + 1
                pdir = out / f"uac_idx={idx}"
                pieces = sorted(pdir.glob("*.parquet"))
                if len(pieces) != 1:  # DuckDB split it after all: one file, in chain order
                    merged = pdir / "merged.parquet.tmp"
                    con.execute(
                        f"COPY (SELECT * FROM {parquet_source(pieces)} ORDER BY {ORDER[table]}) "
                        f"TO {_quote(str(merged))} (FORMAT parquet)"
                    )
                    pieces = [merged]
                staged.setdefault(idx, {})[table] = (pieces[0], int(counts[idx]))
    return staged


def _commit_staged(
    fleet: Fleet,
    user: str,
    n: int,
    base: bool,
    files: dict[str, tuple[Path, int]],
    heads: dict[str, Any],
    *,
    by: str,
) -> int:
    """Move staged part files into ``user``'s partition and create commit ``n`` listing them."""
    listed: dict[str, str] = {}
    meta = {
        "format": FORMAT,
        "user": user,
        "commit": n,
        "base": base,
        "files": listed,
        "rows": {t: c for t, (_p, c) in files.items()},
        "heads": heads,
        "by": by,
        "created_at": datetime.now(UTC).replace(tzinfo=None).isoformat(),
    }
    try:
        for table, (path, _count) in files.items():
            directory = fleet.dir(table, user)
            directory.mkdir(parents=True, exist_ok=True)
            final = directory / f"part-{n:06d}-{secrets.token_hex(4)}.parquet"
            os.replace(path, final)
            listed[table] = final.relative_to(fleet.root).as_posix()
        cdir = fleet.dir(COMMITS, user)
        cdir.mkdir(parents=True, exist_ok=True)
        _write_new(cdir / f"{n:06d}.json", meta)
    except BaseException as exc:
        for rel in listed.values():
            (fleet.root / rel).unlink(missing_ok=True)
        if isinstance(exc, FileExistsError):
            raise FleetConflict(
                f"user {_who(user)}: another writer made commit {n} in {fleet.root} at the "
                "same time; nothing of this one was kept, rerun to commit on top of it"
            ) from None
        raise
    if base and n > 1:
        _drop_before(fleet, user)
    return n
