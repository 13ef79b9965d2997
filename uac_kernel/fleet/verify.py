"""Verify a fleet directory on its own: every user's commits, files and hash chains, one line a
problem."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from uac_kernel.core.display import plural, printable, shorten
from uac_kernel.core.errors import FleetError
from uac_kernel.fleet import files as fleetfiles
from uac_kernel.fleet.export import _bulk_heads, _columns
from uac_kernel.fleet.partition import (
    _COMMIT_NAME,
    COMMITS,
    TABLES,
    Fleet,
    _base_head,
    _count,
    _foreign,
    _load_commit,
    _quote,
    _read_commits,
    _stale,
    _who,
    parquet_source,
)
from uac_kernel.log.store import Store

__all__ = ["FleetVerifyReport", "verify_fleet"]


@dataclass(frozen=True)
class FleetVerifyReport:
    """What ``verify_fleet`` checked, and one line per problem found."""

    root: Path
    users: int = 0
    events: int = 0
    calls: int = 0
    checkpoints: int = 0
    problems: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        if self.problems:
            return (
                f"{self.root}: integrity check failed: {plural(len(self.problems), 'problem')} "
                f"in the fleet directory"
            )
        return (
            f"{self.root}: {self.events} events, {self.calls} model calls, {self.checkpoints} "
            f"checkpoints of {self.users} user(s) verified: commits complete, hash chains intact"
        )


def verify_fleet(root: str | Path, *, users: Iterable[str] | None = None) -> FleetVerifyReport:
    """Check the fleet directory: every user's commits (numbered 1..n, in the right directory,
    listing files that exist with the rows and user they say), and their three chains over the
    committed rows, in one pass over each table for all users; the last commit's heads must be
    where the chains end."""
    fleet = Fleet(root)
    wanted = None if users is None else set(users)
    problems: list[tuple[str | None, str]] = []  # (user, problem)
    good: dict[str, list[dict[str, Any]]] = {}
    for udir in fleet._user_dirs():
        user, commits, problem = _user_commits(fleet, udir)
        if user is not None and wanted is not None and user not in wanted:
            continue
        if problem:
            problems.append((user, problem))
        elif user is not None and commits:
            good[user] = commits
    if wanted is not None:
        seen = set(good) | {u for u, _p in problems}
        problems.extend((u, f"{fleet.root} holds no user {_who(u)}") for u in sorted(wanted - seen))
    files: dict[str, list[tuple[Path, str, int, int]]] = {t: [] for t in TABLES}
    # a split cut short holds users' events but belongs to no commit: only the check of the
    # whole directory names it (an import checks the users it reads)
    for p in fleetfiles.split_leftovers(fleet.root) if users is None else ():
        where = printable(str(p.relative_to(fleet.root)))
        problems.append((None, f"{where} is a run's input split cut short (it holds users' "
                               "events); the next `uac fleet run` or `uac export` deletes it"))  # fmt: skip
    for user, commits in good.items():
        if left := _stale(fleet, user, commits):
            problems.append((user, f"user {_who(user)}: {plural(len(left), 'file')} of commits "
                                   "before its last base commit remain (they may hold what a "
                                   "forget erased); `uac export` of the store deletes them"))  # fmt: skip
    bases = {u: _base_head(c) for u, c in good.items()}
    for user, rel in fleetfiles.stale(fleet.root, bases) if any(bases.values()) else ():
        problems.append((user, f"user {_who(user)}: {printable(rel)} was written from their "
                               "data before a forget erased some of it (it may hold that); "
                               "`uac export` of the store that forgot deletes or rewrites it"))  # fmt: skip
    for user, commits in good.items():
        start = max((i for i, c in enumerate(commits) if c.get("base")), default=0)
        for c in commits[start:]:
            rows: dict[str, Any] = c["rows"] if isinstance(c.get("rows"), dict) else {}
            for table, rel in sorted(c["files"].items()):
                path = fleet.root / str(rel)
                if table not in files:
                    problems.append((user, f"user {_who(user)}: commit {c['commit']} lists a "
                                           f"table {printable(repr(table))} no fleet has"))  # fmt: skip
                elif not path.is_file():
                    problems.append((user, f"user {_who(user)}: commit {c['commit']} lists "
                                           f"{printable(str(rel))}, which is missing; restore "
                                           "it from a copy"))  # fmt: skip
                else:
                    files[table].append((path, user, int(c["commit"]), int(rows.get(table, -1))))
    with duckdb.connect() as con:
        for table, listed in files.items():
            problems.extend(_check_files(table, listed, con))
    bad = {u for u, _p in problems}
    ok_users = [u for u in good if u not in bad]
    totals = dict.fromkeys(TABLES, 0)
    if ok_users:
        chain_problems, totals = _check_chains(files, ok_users, good)
        problems.extend(chain_problems)
    return FleetVerifyReport(
        fleet.root,
        users=len(good),
        events=totals["events"],
        calls=totals["model_calls"],
        checkpoints=totals["checkpoints"],
        problems=tuple(printable(p) for _u, p in problems),
    )


def _user_commits(fleet: Fleet, udir: Path) -> tuple[str | None, list[dict[str, Any]], str]:
    """The user whose commits ``udir`` holds, the commits, and the problem with them ('')."""
    names = sorted(p.name for p in udir.iterdir() if _COMMIT_NAME.match(p.name))
    if not names:
        return None, [], ""
    where = udir.relative_to(fleet.root)
    try:
        user = _load_commit(udir / names[-1]).get("user")
    except FleetError as exc:
        return None, [], str(exc)
    if not isinstance(user, str):
        return None, [], f"{where / names[-1]} names no user; restore it from a copy"
    if udir != fleet.dir(COMMITS, user):
        return user, [], (
            f"user {_who(user)}: commits in {where}, not in "
            f"{fleet.dir(COMMITS, user).relative_to(fleet.root)}; restore them from a copy"
        )  # fmt: skip
    try:
        return user, _read_commits(fleet, udir, user), ""
    except FleetError as exc:
        return user, [], str(exc)


def _check_files(
    table: str, listed: list[tuple[Path, str, int, int]], con: duckdb.DuckDBPyConnection
) -> list[tuple[str, str]]:
    """Each file's row count against its commit, and every row's user against it."""
    if not listed:
        return []
    problems = []
    foreign = _foreign(table, [p for p, _u, _n, _r in listed], con)
    for path, user, n, _rows in listed:
        if path in foreign:
            problems.append((user, f"user {_who(user)}: the {table} file of commit {n} "
                                   f"{foreign[path]}; restore it from a copy"))  # fmt: skip
    listed = [f for f in listed if f[0] not in foreign]
    if not listed:
        return problems
    plan, params = _columns(
        {"f": [str(p) for p, _u, _n, _r in listed], "u": [u for _p, u, _n, _r in listed]}
    )
    try:
        found = {
            str(f): (int(n), int(other))
            for f, n, other in con.execute(
                "SELECT p.f, count(r.filename), count(r.filename) FILTER (r.user_id <> p.u) "
                f"FROM {plan} p LEFT JOIN read_parquet({_list(listed)}, filename = true, "
                "hive_partitioning = false) r ON r.filename = p.f GROUP BY p.f",
                params,
            ).fetchall()
        }
    except duckdb.Error:  # a damaged file: find which, one by one
        found = {}
        for path, user, n, _rows in listed:
            try:
                row = con.execute(
                    "SELECT count(*), count(*) FILTER (user_id <> ?) FROM "
                    f"{parquet_source([path])}",
                    [user],
                ).fetchone()
                found[str(path)] = (int(row[0]), int(row[1])) if row else (0, 0)
            except duckdb.Error as exc:
                first = shorten(str(exc).splitlines()[0], 120)
                problems.append((user, f"user {_who(user)}: the {table} file of commit {n} "
                                       f"cannot be read ({first}); restore it from a copy"))  # fmt: skip
    for path, user, n, rows in listed:
        if str(path) not in found:
            continue
        count, other = found[str(path)]
        if other:
            problems.append((user, f"user {_who(user)}: {plural(other, 'row')} of {table} in "
                                   f"commit {n} belong to another user; restore the file from "
                                   "a copy"))  # fmt: skip
        elif count != rows:
            problems.append((user, f"user {_who(user)}: commit {n} says {rows} rows of {table}, "
                                   f"its file holds {count}; restore it from a copy"))  # fmt: skip
    return problems


def _list(listed: list[tuple[Path, str, int, int]]) -> str:
    return "[" + ", ".join(_quote(str(p)) for p, _u, _n, _r in listed) + "]"


def _check_chains(
    files: dict[str, list[tuple[Path, str, int, int]]],
    users: list[str],
    commits: dict[str, list[dict[str, Any]]],
) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """The chains of ``users`` over their committed rows (integrity's checks, on a DuckDB
    whose tables are views over the files), and the last commit's heads against them."""
    from uac_kernel.log.integrity import verify_users

    keep = set(users)
    problems: list[tuple[str, str]] = []
    store = Store(":memory:")
    try:
        con = store.con
        for table in TABLES:
            listed = [f for f in files[table] if f[1] in keep]
            if listed:
                con.execute(f"DROP TABLE {table}")
                con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet({_list(listed)}, "
                            "hive_partitioning = false)")  # fmt: skip
        problems.extend((u, p) for u, p in verify_users(store) if p)
        broken = {u for u, _p in problems}
        ends = _bulk_heads(con, users)
        for user in users:
            said = commits[user][-1]["heads"]
            for table in ("events", "model_calls", "checkpoints"):
                if user not in broken and list(said.get(table, [])) != ends[user][table]:
                    problems.append((user, f"user {_who(user)}: the heads of commit "
                                           f"{len(commits[user])} do not match its {table} rows "
                                           f"(they end at {ends[user][table][0]}); restore the "
                                           "commit from a copy"))  # fmt: skip
                    broken.add(user)
        totals = {t: _count(con.execute(f"SELECT count(*) FROM {t}")) for t in TABLES}
    finally:
        store.close()
    return problems, totals
