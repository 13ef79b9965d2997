"""A fleet directory: every user's log as Parquet files of their own, appended by commits.

::

    DIR/uac-fleet.json                                  {"format": 1, "buckets": 256}
    DIR/<table>/bucket=<bb>/user=<enc>/part-<n>-<token>.parquet
    DIR/_commits/bucket=<bb>/user=<enc>/<n>.json

A user's partition holds their rows of the store's four chained tables (``TABLES``), with the
store's columns and types, each value as the store that wrote it had it. A part file is visible
only once a commit json lists it; the commit json is created last and exclusively (``os.link``
fails when it exists), so of two writers of the same commit one wins and nothing half-written
is ever read: a killed writer leaves only files no commit names, which every reader ignores.
A commit with ``"base": true`` starts the partition over (after a ``forget`` erased content
already written): readers use it and the later ones only, and the older files are deleted.

The user id is never read back from a path (``enc`` is a one-way, collision-free name for it):
it comes from the commit json and each row's ``user_id``, which ``verify_fleet`` checks agree.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from uac_kernel.core.chain import GENESIS
from uac_kernel.core.display import plural, printable, shorten
from uac_kernel.core.errors import FleetConflict, FleetDiverged, FleetError
from uac_kernel.core.outputs import FLEET_MARKER
from uac_kernel.fleet import files as fleetfiles
from uac_kernel.log.migrations import migrate
from uac_kernel.log.store import Store

__all__ = [
    "BUCKETS",
    "FORMAT",
    "TABLES",
    "ExportReport",
    "Fleet",
    "FleetVerifyReport",
    "ImportReport",
    "bucket",
    "check_columns",
    "checkout",
    "commit",
    "encode",
    "export_store",
    "import_fleet",
    "parquet_source",
    "verify_fleet",
]

FORMAT = 1
BUCKETS = 256
TABLES = ("events", "model_calls", "checkpoints", "checkpoint_segments")
"""The store's tables a partition holds (snapshots are a cache of the fold: never exported)."""
MARKER = FLEET_MARKER
COMMITS = "_commits"
# Each table's order within one user: the order of its chain.
ORDER = {
    "events": "user_seq",
    "model_calls": "call_id",
    "checkpoints": "version",
    "checkpoint_segments": "version, segment",
}
_LONG = 150
_COMMIT_NAME = re.compile(r"(\d{6})\.json\Z")
# A part file, or the temporary name it is written under, with the commit it was written for.
_PART_NAME = re.compile(r"\.?part-(\d{6})-[0-9a-f]+\.parquet(\.tmp)?\Z")


def bucket(user: str) -> str:
    """The two hex digits of the user's bucket (256 of them, so no directory grows huge)."""
    return hashlib.sha256(user.encode("utf-8", "surrogatepass")).hexdigest()[:2]


def encode(user: str) -> str:
    """The user's directory name: percent-encoded, with no '.' or '~' (so never '.' or '..'),
    or for a long id ``~`` and a hash of it (a name must fit in a path component)."""
    enc = urllib.parse.quote(user, safe="", errors="surrogatepass")
    enc = enc.replace(".", "%2E").replace("~", "%7E")
    if len(enc) > _LONG:
        return "~" + hashlib.sha256(user.encode("utf-8", "surrogatepass")).hexdigest()[:40]
    return enc


def parquet_source(files: Iterable[Path]) -> str:
    """A ``read_parquet`` table expression over ``files`` (none: an error to be avoided by the
    caller); hive partitioning is off, since ``bucket=``/``user=`` directories are not columns."""
    listed = ", ".join(_quote(str(f)) for f in files)
    return f"read_parquet([{listed}], hive_partitioning = false)"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _who(user: str) -> str:
    return printable(shorten(repr(user), 80))


class Fleet:
    """A fleet directory (``uac export STORE DIR`` makes one)."""

    def __init__(self, root: str | Path, *, create: bool = False) -> None:
        self.root = Path(root)
        marker = self.root / MARKER
        if not marker.is_file() and create:
            if self.root.exists() and not self.root.is_dir():
                raise FleetError(f"{self.root} is a file, not a fleet directory; pass a directory")
            if self.root.is_dir() and any(self.root.iterdir()):
                raise FleetError(
                    f"{self.root} is a directory of other files, not a fleet directory; "
                    "pass a new or empty directory"
                )
            self.root.mkdir(parents=True, exist_ok=True)
            _write_new(marker, {"format": FORMAT, "buckets": BUCKETS}, exist_ok=True)
        try:
            meta = _read_json(marker, "the fleet's marker")
        except FileNotFoundError:
            raise FleetError(
                f"{self.root} is not a fleet directory (no {MARKER}); make one with "
                f"`uac export STORE {self.root}`"
            ) from None
        if (
            not isinstance(meta, dict)
            or meta.get("format") != FORMAT
            or not _is_int(meta.get("format"))
            or meta.get("buckets") != BUCKETS
            or not _is_int(meta.get("buckets"))
        ):
            raise FleetError(
                f"{marker} is not format {FORMAT}; upgrade uac to read this fleet directory"
            )

    def dir(self, table: str, user: str) -> Path:
        """The directory of ``user``'s files of ``table`` (or of commits, ``_commits``)."""
        return self.root / table / f"bucket={bucket(user)}" / f"user={encode(user)}"

    def commits(self, user: str) -> list[dict[str, Any]]:
        """Every commit of ``user``, in order (FleetError if they are not 1..n, or one names
        another user)."""
        return _read_commits(self, self.dir(COMMITS, user), user)

    def live(self, user: str) -> list[dict[str, Any]]:
        """The commits readers use: from the last base commit on."""
        commits = self.commits(user)
        start = max((i for i, c in enumerate(commits) if c.get("base")), default=0)
        return commits[start:]

    def users(self) -> list[str]:
        """Users with at least one commit, sorted (FleetError if a user's last commit cannot
        be read)."""
        found, damaged = self.scan()
        if damaged:
            raise FleetError(next(iter(damaged.values())))
        return found

    def scan(self) -> tuple[list[str], dict[str, str]]:
        """Users with at least one commit, sorted, and the directories of commits that name no
        user of theirs, each with a one-line why (named as ``_label`` says): a last commit that
        cannot be read, that names no user or another user, a symbolic link."""
        found: set[str] = set()
        damaged: dict[str, str] = {}
        for udir in self._user_dirs():
            try:
                if udir.is_symlink():
                    raise FleetError(f"{udir} is a symbolic link, not a user's commits; remove it")
                names = sorted(p.name for p in udir.iterdir() if _COMMIT_NAME.match(p.name))
                if not names:
                    continue
                last = udir / names[-1]
                user = _load_commit(last).get("user")
                if not isinstance(user, str):
                    raise FleetError(f"{last} names no user; restore it from a copy")
                if self.dir(COMMITS, user) != udir:
                    raise FleetError(
                        f"{last} names user {_who(user)}, whose commits are elsewhere; restore "
                        "it from a copy"
                    )
            except (FleetError, OSError) as exc:
                damaged[self._label(udir)] = printable(str(exc))
                continue
            found.add(user)
        return sorted(found), {u: why for u, why in damaged.items() if u not in found}

    def _label(self, udir: Path) -> str:
        """The user a directory of commits is named for, when its name is that user's (in
        that user's bucket, and UTF-8); else its path in the fleet, printable (a long id's
        hash, or a stray)."""
        name = udir.name.removeprefix("user=")
        try:
            user: str | None = urllib.parse.unquote(name, errors="strict")
            (user or "").encode("utf-8")
        except UnicodeError:
            user = None
        if user and encode(user) == name and udir.parent.name == f"bucket={bucket(user)}":
            return user
        return printable(udir.relative_to(self.root).as_posix())

    def _user_dirs(self) -> Iterator[Path]:
        top = self.root / COMMITS
        if not top.is_dir():
            return
        for bdir in sorted(top.iterdir()):
            if bdir.is_dir() and bdir.name.startswith("bucket="):
                yield from (u for u in sorted(bdir.iterdir()) if u.is_dir())

    def files(self, table: str, users: Iterable[str] | None = None) -> list[Path]:
        """The committed files of ``table`` of ``users`` (default: all), each user's in commit
        order. Read them with ``parquet_source`` (hive partitioning off)."""
        if table not in TABLES:
            raise FleetError(f"no table {table!r} in a fleet; one of {', '.join(TABLES)}")
        out = []
        for user in self.users() if users is None else users:
            for c in self.live(user):
                rel = c["files"].get(table)
                if rel:
                    out.append(self.root / rel)
        return out

    def head(self, user: str) -> dict[str, Any]:
        """The last commit's heads of ``user`` ({} when the user has no commit)."""
        commits = self.commits(user)
        return dict(commits[-1]["heads"]) if commits else {}


# A commit json is a few hundred bytes; anything far bigger or deeper is damage, read no further.
_MAX_JSON = 1 << 20


def _read_json(path: Path, what: str) -> Any:
    """The JSON in ``path`` (not a symlink, at most ``_MAX_JSON`` bytes, not nested deep enough
    to exhaust the parser): a one-line FleetError otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise FleetError(f"{what} {path} is not a regular file; restore it from a copy")
            data = handle.read(_MAX_JSON + 1)
    except FileNotFoundError:
        raise
    except OSError as exc:
        why = "a symlink" if path.is_symlink() else exc.strerror or str(exc)
        raise FleetError(f"cannot read {what} {path} ({why}); restore it from a copy") from None
    if len(data) > _MAX_JSON:
        raise FleetError(f"{what} {path} is over {_MAX_JSON} bytes; restore it from a copy")
    try:
        return json.loads(data.decode("utf-8", errors="surrogatepass"))
    except RecursionError:
        raise FleetError(f"{what} {path} is nested too deep; restore it from a copy") from None
    except ValueError as exc:
        raise FleetError(
            f"cannot read {what} {path} ({shorten(str(exc), 80)}); restore it from a copy"
        ) from None


def _load_commit(path: Path) -> dict[str, Any]:
    meta = _read_json(path, "commit")
    if not isinstance(meta, dict):
        raise FleetError(f"commit {path} is not a commit object; restore it from a copy")
    return meta


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _commit_problem(fleet: Fleet, user: str, n: int, meta: dict[str, Any]) -> str:
    """What is wrong with the fields of ``meta`` as commit ``n`` of ``user`` ('' if nothing):
    every field of its exact type, and every file a relative path to a regular file (no
    symlink on the way) in the user's own partition directory of its table."""
    if meta.get("format") != FORMAT or not _is_int(meta.get("format")):
        return f"is not format {FORMAT}"
    if meta.get("user") != user:
        return f"is not of user {_who(user)}"
    if not _is_int(meta.get("commit")) or meta["commit"] != n:
        return f"is not commit {n}"
    if not isinstance(meta.get("base"), bool):
        return "has no true/false 'base'"
    files, rows, heads = meta.get("files"), meta.get("rows"), meta.get("heads")
    if not isinstance(files, dict) or not isinstance(rows, dict) or not isinstance(heads, dict):
        return "lists no files, rows or heads"
    for table, rel in files.items():
        if table not in TABLES:
            return f"lists a table {printable(repr(table))} no fleet has"
        if not isinstance(rel, str) or not _is_int(rows.get(table)) or rows[table] < 0:
            return f"lists a {table} file or row count that is not a path and a number"
        if problem := _file_problem(fleet, user, table, rel):
            return problem
    if set(rows) - set(files):
        return "counts rows of a table it lists no file of"
    for table in ("events", "model_calls", "checkpoints"):
        head = heads.get(table)
        if not (
            isinstance(head, list)
            and len(head) == 2
            and _is_int(head[0])
            and head[0] >= 0
            and isinstance(head[1], str)
        ):
            return f"has no [number, hash] head of {table}"
    return ""


def _file_problem(fleet: Fleet, user: str, table: str, rel: str) -> str:
    """Why ``rel`` is not a part file of ``user``'s own partition of ``table`` ('' if it is)."""
    directory = fleet.dir(table, user)
    name = rel.rsplit("/", 1)[-1]
    expected = directory.relative_to(fleet.root).as_posix() + "/" + name
    if rel != expected or not _PART_NAME.match(name) or name.startswith("."):
        return (
            f"lists {printable(shorten(repr(rel), 120))}, which is not a file of the user's own "
            f"{table} partition (another user's, or outside {fleet.root})"
        )
    # no symlink from the fleet's root down to the file: nothing leads a reader out of DIR
    at = fleet.root
    for part in Path(expected).parts:
        at = at / part
        try:
            mode = os.lstat(at).st_mode
        except FileNotFoundError:
            return ""  # a missing file is reported (and refused) where it is read
        except OSError as exc:
            return f"lists {printable(rel)}, which cannot be read ({exc.strerror})"
        if stat.S_ISLNK(mode):
            return f"lists {printable(rel)}, which passes through a symlink ({printable(part)})"
    if not stat.S_ISREG(mode):
        return f"lists {printable(rel)}, which is not a regular file"
    return ""


def _read_commits(fleet: Fleet, cdir: Path, user: str) -> list[dict[str, Any]]:
    if any(p.is_symlink() for p in (cdir, cdir.parent, cdir.parent.parent)):
        raise FleetError(
            f"user {_who(user)}: the commit directory {cdir} is a symlink; restore it from a copy"
        )
    try:
        names = sorted(p.name for p in cdir.iterdir() if _COMMIT_NAME.match(p.name))
    except FileNotFoundError:
        return []
    out: list[dict[str, Any]] = []
    for n, name in enumerate(names, 1):
        if int(name[:6]) != n:
            raise FleetError(
                f"user {_who(user)}: commit {n} is missing from {cdir} (the next is {name}); "
                "restore it from a copy"
            )
        meta = _load_commit(cdir / name)
        problem = _commit_problem(fleet, user, n, meta)
        if not problem and out:
            # the chains only grow (a forget appends too): a commit, base or not, whose heads
            # are behind the one before it would hide history
            before = out[-1]["heads"]
            if any(meta["heads"][t][0] < before[t][0] for t in ORDER if t in before):
                problem = f"has heads behind those of commit {n - 1} (history would be lost)"
        if problem:
            raise FleetError(
                f"user {_who(user)}: commit {cdir / name} {problem}; restore it from a copy"
            )
        out.append(meta)
    return out


def _write_new(path: Path, obj: dict[str, Any], *, exist_ok: bool = False) -> bool:
    """Create ``path`` holding ``obj`` as JSON, whole or not at all, only if it does not exist
    (a temp file hard-linked to the name: the link fails if another writer made it first).
    Returns whether this call created it."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    data = json.dumps(obj, ensure_ascii=True, sort_keys=True).encode()
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.link(tmp, path)
    except FileExistsError:
        if exist_ok:
            return False
        raise
    finally:
        tmp.unlink(missing_ok=True)
    return True


# --- checkout and commit: one user's partition as a store of its own ---------------------


def _load(con: duckdb.DuckDBPyConnection, fleet: Fleet, user: str) -> None:
    """Insert ``user``'s committed rows into the store tables of ``con``, in chain order."""
    for table in TABLES:
        files = fleet.files(table, [user])
        if files:
            con.execute(
                f"INSERT INTO {table} BY NAME SELECT * FROM {parquet_source(files)} "
                f"ORDER BY {ORDER[table]}"
            )


_COLUMNS: dict[str, list[tuple[str, str, None]]] = {}


def _store_columns(table: str) -> list[tuple[str, str, None]]:
    """The store's columns of ``table`` as ``parquet_schema`` describes a part file's."""
    if not _COLUMNS:
        with contextlib.closing(_memory_tables()) as con:
            for t in TABLES:
                _COLUMNS[t] = [
                    (str(r[0]), str(r[1]), None) for r in con.execute(f"DESCRIBE {t}").fetchall()
                ]
    return _COLUMNS[table]


def _foreign(table: str, files: list[Path], con: duckdb.DuckDBPyConnection) -> dict[Path, str]:
    """The ``files`` whose columns are not the store's of ``table`` (or that cannot be read),
    each with why; read from the files' footers on ``con``, in one pass when all can be read."""
    if not files:
        return {}
    expected = _store_columns(table)
    sql = (
        "SELECT file_name, list((name, duckdb_type, num_children) ORDER BY column_id) "
        "FROM parquet_schema([{}]) WHERE column_id > 0 GROUP BY file_name"
    )
    found: dict[str, list[Any]] = {}
    out: dict[Path, str] = {}
    try:
        found = dict(con.execute(sql.format(", ".join(_quote(str(f)) for f in files))).fetchall())
    except duckdb.Error:  # a damaged file: find which, one by one
        for path in files:
            try:
                found.update(con.execute(sql.format(_quote(str(path)))).fetchall())
            except duckdb.Error as exc:
                out[path] = f"cannot be read ({shorten(str(exc).splitlines()[0], 120)})"
    for path in files:
        if path in out:
            continue
        got = [
            tuple(c.values()) if isinstance(c, dict) else tuple(c) for c in found.get(str(path), [])
        ]
        if got != expected:
            out[path] = f"does not have the store's {table} columns and types"
    return out


def check_columns(
    fleet: Fleet, users: Iterable[str], con: duckdb.DuckDBPyConnection | None = None
) -> None:
    """FleetError naming the first of ``users`` with a committed file whose columns are not
    the store's (or that cannot be read): before a reader copies rows out of them. Read on
    ``con`` when given (a DuckDB connection costs tens of milliseconds to make)."""
    if con is None:
        with duckdb.connect() as own:
            check_columns(fleet, users, own)
        return
    users = list(users)
    for table in TABLES:
        listed = [(f, u) for u in users for f in fleet.files(table, [u])]
        bad = _foreign(table, [f for f, _u in listed], con)
        for path, user in listed:
            if path in bad:
                raise FleetError(
                    f"cannot read a committed {table} file of user {_who(user)} "
                    f"({path.relative_to(fleet.root)}): it {bad[path]}; "
                    f"`uac verify {fleet.root}` checks the fleet, restore it from a copy"
                )


def _memory_tables() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the store's tables, empty."""
    con = duckdb.connect()
    migrate(con)
    return con


def _drop_before(fleet: Fleet, user: str) -> None:
    """After a base commit of ``user``: delete every file of the user's partition it does
    not list and that was written for an earlier commit (listed or left by a killed writer),
    so content a forget erased is in no file of the directory."""
    for path in _stale(fleet, user, fleet.commits(user)):
        path.unlink(missing_ok=True)


def _base_head(commits: list[dict[str, Any]]) -> int:
    """The event head of the user's last base commit past the first (0 if none): a forget
    erased content from before it, so a file written from their data before it may hold that."""
    bases = [c for c in commits[1:] if c.get("base")]
    return int(bases[-1]["heads"]["events"][0]) if bases else 0


def _stale(fleet: Fleet, user: str, commits: list[dict[str, Any]]) -> list[Path]:
    """The files of ``user``'s partition written for a commit up to the last base commit that
    it does not list: what a writer killed before ``_drop_before`` finished left behind."""
    n = max((c["commit"] for c in commits if c["base"]), default=1)
    if n == 1:
        return []
    keep = {fleet.root / rel for rel in commits[n - 1]["files"].values()}
    out = []
    for table in TABLES:
        directory = fleet.dir(table, user)
        if not directory.is_dir() or directory.is_symlink():
            continue
        for path in directory.iterdir():
            m = _PART_NAME.match(path.name)
            if m and int(m.group(1)) <= n and path not in keep:
                out.append(path)
    return out


def checkout(fleet: Fleet, user: str, path: Path) -> None:
    """Write a new single-file store at ``path`` holding exactly ``user``'s committed rows,
    every number as committed; a user with no commit gives an empty store."""
    path = Path(path)
    if path.exists():
        raise FleetError(f"{path} exists; check a user out into a new file")
    try:
        with contextlib.closing(duckdb.connect(str(path))) as con:
            check_columns(fleet, [user], con)
            migrate(con)
            con.execute("BEGIN TRANSACTION")
            try:
                _load(con, fleet, user)
            except duckdb.Error as exc:
                raise FleetError(
                    f"user {_who(user)}: cannot check out the committed files of {fleet.root} "
                    f"({shorten(str(exc).splitlines()[0], 120)}); `uac verify {fleet.root}` "
                    "names the damaged file"
                ) from None
            con.execute("COMMIT")
        _check_checkout(fleet, user, path)
    except BaseException:
        path.unlink(missing_ok=True)
        Path(f"{path}.wal").unlink(missing_ok=True)
        raise


def _check_checkout(fleet: Fleet, user: str, path: Path) -> None:
    """FleetError unless the checked-out ``user``'s chains are intact and end at the last
    commit's heads: no job runs on (and commits on top of) a partition verify rejects."""
    from uac_kernel.log.integrity import verify_users

    store = Store(path, read_only=True, create=False)
    try:
        problems = [p for _u, p in verify_users(store) if p]
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


# --- export: a whole store into a fleet directory ------------------------------------------


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


# --- import: a fleet directory into a store ------------------------------------------------


@dataclass(frozen=True)
class ImportReport:
    """What ``import_fleet`` appended to a store: users new to it, users extended, users it
    already held whole; rows appended per table, and rows erased to follow a fleet's forget."""

    store: str
    new: int = 0
    extended: int = 0
    unchanged: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    erased: int = 0

    def summary(self) -> str:
        text = (
            f"{self.store}: {plural(self.new + self.extended, 'user')} imported ({self.new} new, "
            f"{self.extended} extended), {self.unchanged} already up to date; "
            f"{plural(self.rows.get('events', 0), 'event')}, "
            f"{plural(self.rows.get('model_calls', 0), 'model call')}, "
            f"{plural(self.rows.get('checkpoints', 0), 'checkpoint')} appended"
        )
        if self.erased:
            text += f"; {plural(self.erased, 'row')} erased as a forget in the fleet erased them"
        return text


def _chosen(fleet: Fleet, users: Iterable[str] | None) -> list[str]:
    held = fleet.users()
    if users is None:
        return held
    wanted = sorted(set(users))
    missing = [u for u in wanted if u not in set(held)]
    if missing:
        raise FleetError(
            f"{fleet.root} holds no user {_who(missing[0])}; its users are listed by "
            f"`uac fleet summary {fleet.root}`"
        )
    return wanted


def _live_files(fleet: Fleet, users: Iterable[str]) -> dict[str, list[tuple[Path, str, int]]]:
    """By table, each committed file of ``users`` with its user and commit number."""
    out: dict[str, list[tuple[Path, str, int]]] = {t: [] for t in TABLES}
    for user in users:
        for c in fleet.live(user):
            for table, rel in c["files"].items():
                if table in out:
                    out[table].append((fleet.root / rel, user, int(c["commit"])))
    return out


def import_fleet(
    root: str | Path, store: str | Path, *, users: Iterable[str] | None = None
) -> ImportReport:
    """Append the fleet's users (or ``users``) to the store (created if new), in one
    transaction: a user new to the store whole, a user it holds from where its chains end,
    once the fleet's chains pass through them (else FleetDiverged, nothing imported). Events
    get new store-wide ``seq`` numbers in the order they were recorded; call ids and
    checkpoints keep theirs (the chains cover them)."""
    fleet = Fleet(root)
    chosen = _chosen(fleet, users)
    # what will be imported must pass verify first: the chains of each user over the very
    # files read below (a tampered, repeated, swapped or foreign file is refused, not copied)
    checked = verify_fleet(fleet.root, users=chosen)
    if checked.problems:
        more = f" (and {len(checked.problems) - 1} more)" if len(checked.problems) > 1 else ""
        raise FleetError(
            f"cannot import {fleet.root}: {checked.problems[0]}{more}; `uac verify "
            f"{fleet.root}` lists every problem, nothing was imported"
        )
    files = _live_files(fleet, chosen)
    target = Store(store)
    try:
        with target.writing():
            con = target.con
            con.execute("BEGIN TRANSACTION")
            try:
                report = _import(fleet, con, str(store), chosen, files)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
            finally:
                for table in TABLES:
                    con.execute(f"DROP VIEW IF EXISTS temp.imp_{table}")
        if target.compaction_owed:
            target.compact()  # no erased byte stays in the file's free blocks
    except duckdb.Error as exc:
        raise FleetError(
            f"cannot import {fleet.root} into {store} ({shorten(str(exc).splitlines()[0], 160)});"
            f" check it with `uac verify {fleet.root}`, nothing was imported"
        ) from exc
    finally:
        target.close()
    return report


def _import(
    fleet: Fleet,
    con: duckdb.DuckDBPyConnection,
    where: str,
    chosen: list[str],
    files: dict[str, list[tuple[Path, str, int]]],
) -> ImportReport:
    # The fleet's rows are read where they are (views over the files), not copied first.
    for table in TABLES:
        listed = [f for f, _u, _n in files[table]]
        rows_of = parquet_source(listed) if listed else f"main.{table} LIMIT 0"
        con.execute(f"CREATE TEMP VIEW imp_{table} AS SELECT * FROM {rows_of}")
    # A row of another user than its commit's is damage: refuse before anything is written.
    odd = con.execute(
        "SELECT user_id FROM (SELECT user_id FROM imp_events UNION ALL SELECT user_id FROM "
        "imp_model_calls UNION ALL SELECT user_id FROM imp_checkpoints UNION ALL SELECT "
        "user_id FROM imp_checkpoint_segments) WHERE user_id NOT IN (SELECT unnest(?)) LIMIT 1",
        [chosen],
    ).fetchone()
    if odd is not None:
        raise FleetError(
            f"{fleet.root} holds rows of user {_who(str(odd[0]))} in another user's partition; "
            f"check it with `uac verify {fleet.root}`, nothing was imported"
        )
    mine = _bulk_heads(con, chosen)
    held = [u for u in chosen if any(mine[u][t][0] for t in mine[u])]
    # the fleet's chains must pass through the store's heads: the store is not ahead of them
    _bulk_extends(con, {u: mine[u] for u in held}, str(fleet.root), where, prefix="temp.imp_")
    from uac_kernel.checkpoints.forget import follow_forgets  # only forget rewrites a logged row

    erased = follow_forgets(con, held, staged="temp.imp_")
    plan, params = _columns(
        {
            "u": chosen,
            "ev_n": [int(mine[u]["events"][0]) for u in chosen],
            "cp_n": [int(mine[u]["checkpoints"][0]) for u in chosen],
            "call_id": _last_calls(con, chosen),
        }
    )
    rows: dict[str, int] = {}
    last = con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()
    # New store-wide numbers in recording order; a user's running latest recording time keeps
    # their own events in chain order even if a clock went back.
    events = (
        "INSERT INTO events (seq, user_seq, recorded_at, ts, kind, user_id, source, payload, "
        "salt, payload_hash, hash) "
        "SELECT $last + row_number() OVER (ORDER BY seen_at, user_id, user_seq), user_seq, "
        "recorded_at, ts, kind, user_id, source, payload, salt, payload_hash, hash FROM ("
        "SELECT i.*, max(i.recorded_at) OVER (PARTITION BY i.user_id ORDER BY i.user_seq "
        "ROWS UNBOUNDED PRECEDING) AS seen_at "
        f"FROM temp.imp_events i JOIN {plan} p ON i.user_id = p.u WHERE i.user_seq > p.ev_n)"
    )
    rows["events"] = _count(con.execute(events, {**params, "last": int(last[0]) if last else 0}))
    for table, cond in (
        ("model_calls", "i.call_id > p.call_id"),
        ("checkpoints", "i.version > p.cp_n"),
        ("checkpoint_segments", "i.version > p.cp_n"),
    ):
        rows[table] = _count(
            con.execute(
                f"INSERT INTO {table} BY NAME SELECT i.* FROM temp.imp_{table} i "
                f"JOIN {plan} p ON i.user_id = p.u WHERE {cond}",
                params,
            )
        )
    after = _bulk_heads(con, chosen)
    grown = [u for u in chosen if after[u] != mine[u]]
    new = [u for u in grown if u not in held]
    return ImportReport(
        where,
        new=len(new),
        extended=len(grown) - len(new),
        unchanged=len(chosen) - len(grown),
        rows=rows,
        erased=erased,
    )


def _count(result: duckdb.DuckDBPyConnection) -> int:
    row = result.fetchone()
    return int(row[0]) if row else 0


def _last_calls(con: duckdb.DuckDBPyConnection, users: list[str]) -> list[int]:
    found = dict(
        con.execute(
            "SELECT user_id, max(call_id) FROM model_calls WHERE user_id IN (SELECT unnest(?)) "
            "GROUP BY user_id",
            [users],
        ).fetchall()
    )
    return [int(found.get(u, 0)) for u in users]


# --- verify: a fleet directory on its own --------------------------------------------------


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
