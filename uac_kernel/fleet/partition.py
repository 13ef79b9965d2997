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
import stat
import urllib.parse
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import duckdb

from uac_kernel.core.display import printable, shorten
from uac_kernel.core.errors import FleetError
from uac_kernel.core.outputs import FLEET_MARKER
from uac_kernel.log.migrations import migrate

__all__ = [
    "BUCKETS",
    "FORMAT",
    "TABLES",
    "Fleet",
    "bucket",
    "check_columns",
    "encode",
    "parquet_source",
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


def _count(result: duckdb.DuckDBPyConnection) -> int:
    row = result.fetchone()
    return int(row[0]) if row else 0


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


# --- export: a whole store into a fleet directory ------------------------------------------


# --- import: a fleet directory into a store ------------------------------------------------


# --- verify: a fleet directory on its own --------------------------------------------------
