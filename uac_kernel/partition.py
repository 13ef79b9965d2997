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
import urllib.parse
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from uac_kernel._chain import GENESIS
from uac_kernel._display import printable, shorten
from uac_kernel._migrations import migrate
from uac_kernel.errors import FleetConflict, FleetDiverged, FleetError
from uac_kernel.store import Store

__all__ = [
    "BUCKETS",
    "FORMAT",
    "TABLES",
    "Fleet",
    "bucket",
    "checkout",
    "commit",
    "encode",
    "parquet_source",
]

FORMAT = 1
BUCKETS = 256
TABLES = ("events", "model_calls", "checkpoints", "checkpoint_segments")
"""The store's tables a partition holds (snapshots are a cache of the fold: never exported)."""
MARKER = "uac-fleet.json"
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
            meta = json.loads(marker.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FleetError(
                f"{self.root} is not a fleet directory (no {MARKER}); make one with "
                f"`uac export STORE {self.root}`"
            ) from None
        except (OSError, ValueError) as exc:
            raise FleetError(
                f"cannot read {marker} ({exc}); restore the fleet from a copy"
            ) from exc
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise FleetError(
                f"{marker} is not format {FORMAT}; upgrade uac to read this fleet directory"
            )

    def dir(self, table: str, user: str) -> Path:
        """The directory of ``user``'s files of ``table`` (or of commits, ``_commits``)."""
        return self.root / table / f"bucket={bucket(user)}" / f"user={encode(user)}"

    def commits(self, user: str) -> list[dict[str, Any]]:
        """Every commit of ``user``, in order (FleetError if they are not 1..n, or one names
        another user)."""
        return _read_commits(self.dir(COMMITS, user), user)

    def live(self, user: str) -> list[dict[str, Any]]:
        """The commits readers use: from the last base commit on."""
        commits = self.commits(user)
        start = max((i for i, c in enumerate(commits) if c.get("base")), default=0)
        return commits[start:]

    def users(self) -> list[str]:
        """Users with at least one commit, sorted."""
        found = []
        for udir in self._user_dirs():
            names = sorted(p.name for p in udir.iterdir() if _COMMIT_NAME.match(p.name))
            if names:
                meta = _load_commit(udir / names[-1])
                user = meta.get("user")
                if not isinstance(user, str):
                    raise FleetError(f"{udir / names[-1]} names no user; restore it from a copy")
                found.append(user)
        return sorted(found)

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


def _load_commit(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads(path.read_text(encoding="utf-8", errors="surrogatepass"))
    except (OSError, ValueError) as exc:
        raise FleetError(f"cannot read commit {path} ({exc}); restore it from a copy") from exc
    if not isinstance(meta, dict):
        raise FleetError(f"commit {path} is not a commit object; restore it from a copy")
    return meta


def _read_commits(cdir: Path, user: str) -> list[dict[str, Any]]:
    try:
        names = sorted(p.name for p in cdir.iterdir() if _COMMIT_NAME.match(p.name))
    except FileNotFoundError:
        return []
    out = []
    for n, name in enumerate(names, 1):
        if int(name[:6]) != n:
            raise FleetError(
                f"user {_who(user)}: commit {n} is missing from {cdir} (the next is {name}); "
                "restore it from a copy"
            )
        meta = _load_commit(cdir / name)
        if meta.get("user") != user or meta.get("commit") != n:
            raise FleetError(
                f"commit {cdir / name} is not commit {n} of user {_who(user)}; "
                "restore it from a copy"
            )
        if not isinstance(meta.get("files"), dict) or not isinstance(meta.get("heads"), dict):
            raise FleetError(
                f"commit {cdir / name} lists no files or heads; restore it from a copy"
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


# --- appending one user's rows -------------------------------------------------------------


def _store_heads(con: duckdb.DuckDBPyConnection, user: str) -> dict[str, list[Any]]:
    """``user``'s heads in the store: [user_seq, hash], [calls, last hash], [version, hash]."""
    out: dict[str, list[Any]] = {}
    for table, count in (
        ("events", "max(user_seq)"),
        ("model_calls", "count(*)"),
        ("checkpoints", "max(version)"),
    ):
        row = con.execute(
            f"SELECT {count}, arg_max(hash, {ORDER[table]}) FROM {table} WHERE user_id = ?",
            [user],
        ).fetchone()
        n, h = row if row else (None, None)
        out[table] = [int(n or 0), str(h) if h is not None else GENESIS]
    return out


def _erased(
    con: duckdb.DuckDBPyConnection, user: str, heads: dict[str, list[Any]], last_call: int
) -> tuple[int, ...]:
    """Counts that a ``forget`` changes in rows already committed: erased events, calls and
    segments, and segment rows (a forget may add re-rendered ones)."""
    ev, cp = heads["events"][0], heads["checkpoints"][0]
    row = con.execute(
        "SELECT (SELECT count(*) FROM events WHERE user_id = $u AND user_seq <= $ev "
        "AND salt = ''), "
        "(SELECT count(*) FROM model_calls WHERE user_id = $u AND call_id <= $call "
        "AND salt = ''), "
        "(SELECT count(*) FROM checkpoint_segments WHERE user_id = $u AND version <= $cp), "
        "(SELECT count(*) FROM checkpoint_segments WHERE user_id = $u AND version <= $cp "
        "AND salt = '')",
        {"u": user, "ev": ev, "call": last_call, "cp": cp},
    ).fetchone()
    return tuple(int(v) for v in row or ())


def _load(con: duckdb.DuckDBPyConnection, fleet: Fleet, user: str) -> None:
    """Insert ``user``'s committed rows into the store tables of ``con``, in chain order."""
    for table in TABLES:
        files = fleet.files(table, [user])
        if files:
            con.execute(
                f"INSERT INTO {table} BY NAME SELECT * FROM {parquet_source(files)} "
                f"ORDER BY {ORDER[table]}"
            )


def _memory_tables() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the store's tables, empty."""
    con = duckdb.connect()
    migrate(con)
    return con


def _check_extends(
    con: duckdb.DuckDBPyConnection, user: str, heads: dict[str, list[Any]], where: str, there: str
) -> int:
    """Raise FleetDiverged unless the store's chains of ``user`` pass through ``heads`` (the
    partition's); return the call_id of the partition's last call (0 if none)."""
    ev_n, ev_h = heads["events"]
    call_n, call_h = heads["model_calls"]
    cp_n, cp_h = heads["checkpoints"]
    checks = (
        ("events", ev_n, ev_h, "SELECT hash, user_seq FROM events WHERE user_id = ? AND user_seq = ?",
         [user, ev_n]),
        ("model calls", call_n, call_h,
         "SELECT hash, call_id FROM model_calls WHERE user_id = ? ORDER BY call_id "
         "LIMIT 1 OFFSET ?", [user, call_n - 1]),
        ("checkpoints", cp_n, cp_h,
         "SELECT hash, version FROM checkpoints WHERE user_id = ? AND version = ?", [user, cp_n]),
    )  # fmt: skip
    last_call = 0
    for what, n, h, sql, params in checks:
        if n == 0:
            continue
        row = con.execute(sql, params).fetchone()
        if row is None:
            raise FleetDiverged(
                f"user {_who(user)}: {where} holds fewer {what} than {there} ({n}): it is behind; "
                f"bring it up to date from {there} first, nothing was written"
            )
        if row[0] != h:
            raise FleetDiverged(
                f"user {_who(user)}: {where} and {there} differ at {what[:-1]} {n}: the two "
                "chains diverged (one was rewritten or both grew apart); nothing was written"
            )
        if what == "model calls":
            last_call = int(row[1])
    return last_call


def _write_part(
    con: duckdb.DuckDBPyConnection, select: str, params: list[Any], directory: Path, n: int
) -> Path:
    """Write the rows of ``select`` as a new part file of commit ``n`` in ``directory``: to a
    temporary name first, so a killed writer never leaves a half file under a part's name."""
    directory.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(4)
    final = directory / f"part-{n:06d}-{token}.parquet"
    tmp = directory / f".part-{n:06d}-{token}.parquet.tmp"
    con.execute(f"COPY ({select}) TO {_quote(str(tmp))} (FORMAT parquet)", params)
    os.replace(tmp, final)
    return final


def _append_user(fleet: Fleet, user: str, con: duckdb.DuckDBPyConnection, *, by: str,
                 where: str) -> int | None:  # fmt: skip
    """Commit ``user``'s rows of the store on ``con`` beyond the partition's heads (a base
    commit of all of them when a forget erased committed content since); None if none."""
    commits = fleet.commits(user)
    n = len(commits) + 1
    base = not commits
    there = str(fleet.root)
    store_heads = _store_heads(con, user)
    after = {"events": 0, "model_calls": 0, "checkpoints": 0, "checkpoint_segments": 0}
    if commits:
        heads = commits[-1]["heads"]
        last_call = _check_extends(con, user, heads, where, there)
        mine = _erased(con, user, heads, last_call)
        with contextlib.closing(_memory_tables()) as mem:
            _load(mem, fleet, user)
            theirs = _erased(mem, user, heads, last_call)
        base = mine != theirs
        if not base:
            after = {
                "events": heads["events"][0],
                "model_calls": last_call,
                "checkpoints": heads["checkpoints"][0],
                "checkpoint_segments": heads["checkpoints"][0],
            }
    key = {"events": "user_seq", "model_calls": "call_id", "checkpoints": "version",
           "checkpoint_segments": "version"}  # fmt: skip
    rows: dict[str, int] = {}
    for table in TABLES:
        row = con.execute(
            f"SELECT count(*) FROM {table} WHERE user_id = ? AND {key[table]} > ?",
            [user, after[table]],
        ).fetchone()
        if row and row[0]:
            rows[table] = int(row[0])
    if not rows:
        return None
    files: dict[str, str] = {}
    meta = {
        "format": FORMAT,
        "user": user,
        "commit": n,
        "base": base,
        "files": files,
        "rows": rows,
        "heads": store_heads,
        "by": by,
        "created_at": datetime.now(UTC).replace(tzinfo=None).isoformat(),
    }
    cdir = fleet.dir(COMMITS, user)
    try:
        for table in rows:
            path = _write_part(
                con,
                f"SELECT * FROM {table} WHERE user_id = ? AND {key[table]} > ? "
                f"ORDER BY {ORDER[table]}",
                [user, after[table]],
                fleet.dir(table, user),
                n,
            )
            files[table] = path.relative_to(fleet.root).as_posix()
        cdir.mkdir(parents=True, exist_ok=True)
        _write_new(cdir / f"{n:06d}.json", meta)
    except BaseException as exc:
        # Nothing of a commit that did not happen stays behind (a killed process's files do,
        # and are ignored: no commit lists them).
        for rel in files.values():
            (fleet.root / rel).unlink(missing_ok=True)
        if isinstance(exc, FileExistsError):
            raise FleetConflict(
                f"user {_who(user)}: another writer made commit {n} in {there} at the same "
                "time; nothing of this one was kept, rerun to commit on top of it"
            ) from None
        raise
    if base and commits:
        _drop_before(fleet, user, n)
    return n


def _drop_before(fleet: Fleet, user: str, n: int) -> None:
    """After base commit ``n`` of ``user``: delete every file of the user's partition it does
    not list and that was written for an earlier commit (listed or left by a killed writer),
    so content a forget erased is in no file of the directory."""
    keep = {fleet.root / rel for rel in fleet.commits(user)[n - 1]["files"].values()}
    for table in TABLES:
        directory = fleet.dir(table, user)
        if not directory.is_dir():
            continue
        for path in directory.iterdir():
            m = _PART_NAME.match(path.name)
            if m and int(m.group(1)) <= n and path not in keep:
                path.unlink(missing_ok=True)


def checkout(fleet: Fleet, user: str, path: Path) -> None:
    """Write a new single-file store at ``path`` holding exactly ``user``'s committed rows,
    every number as committed; a user with no commit gives an empty store."""
    path = Path(path)
    if path.exists():
        raise FleetError(f"{path} exists; check a user out into a new file")
    try:
        with contextlib.closing(duckdb.connect(str(path))) as con:
            migrate(con)
            con.execute("BEGIN TRANSACTION")
            _load(con, fleet, user)
            con.execute("COMMIT")
    except BaseException:
        path.unlink(missing_ok=True)
        Path(f"{path}.wal").unlink(missing_ok=True)
        raise


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
                return _append_user(fleet, user, con, by=by, where=str(path))
            finally:
                con.execute("ROLLBACK")
    finally:
        store.close()
