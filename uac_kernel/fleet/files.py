"""The files uac writes in a fleet directory beside the partitions, and what a forget does to them.

A ``uac fleet run`` keeps copies of users' content outside their partitions: the split input of
an ingest, each user's result, the run's ``summary.parquet``. Every such file is written through
``write`` (or ``noted``), which first records it in ``DIR/_written/<hash of its path>/`` with the
users whose data it holds and each one's event head (``user_seq``) when it was written. A
forget reaches a fleet as a *base* commit of the user (``uac export`` of the store that forgot,
see ``partition``): every file recorded from that user's data at a head before the base commit
may hold what was erased, so ``purge`` deletes it (a file of that user alone) or rewrites it
without the user's rows (a Parquet table keyed by ``user_id``). ``stale`` finds the same files
without knowing what was erased, which is how ``uac verify DIR`` fails while one is left.

A record is written before its file and the older records of the path are dropped only after
the file is in place, so a writer killed at any point leaves the file covered by its oldest
(most cautious) head; a new kind of file is covered as soon as it is written through ``write``.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "SPLIT",
    "STAGING",
    "WRITTEN",
    "Purged",
    "note",
    "noted",
    "purge",
    "recorded_heads",
    "split_leftovers",
    "staging_dir",
    "stale",
    "unreached",
    "write",
]

WRITTEN = "_written"
# Directories of files being written, moved into place by rename: an export's commit files
# (in the fleet's root) and the split of a run's input (beside the split it will become).
STAGING, SPLIT = ".staging-", ".split-"
# What a purge does to a file: delete it, or rewrite it without the user's rows.
DELETE, ROWS = "delete", "rows"
# The directories a fleet itself keeps (partitions and commits), which `partition` checks.
_OWN = frozenset({"uac-fleet.json", "_commits", WRITTEN, "events", "model_calls", "checkpoints",
                  "checkpoint_segments"})  # fmt: skip


@dataclass(frozen=True)
class _Record:
    where: Path  # the record's own file
    path: str  # the file it describes, relative to the fleet
    users: dict[str, int]  # user -> event head the file was written at
    on_forget: str


def _dir(root: Path, rel: str) -> Path:
    return root / WRITTEN / hashlib.sha256(rel.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _rel(root: Path, path: Path) -> str:
    return path.relative_to(root).as_posix()


def _temp(path: Path) -> Path:
    """The temporary name ``path`` is written under (``purge`` deletes one a kill left)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def note(
    root: Path, path: Path, users: Mapping[str, int], *, keyed_rows: bool = False
) -> tuple[Path, str]:
    """Record ``path`` as holding ``users``' data, before it is written (see ``noted``); the
    record's directory and name."""
    rel = _rel(root, path)
    here = _dir(root, rel)
    here.mkdir(parents=True, exist_ok=True)
    token = f"{secrets.token_hex(8)}.json"
    body = {"path": rel, "users": dict(users), "on_forget": ROWS if keyed_rows else DELETE}
    tmp_record = here / f".{token}.tmp"
    tmp_record.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp_record, here / token)
    return here, token


@contextmanager
def noted(
    root: Path, path: Path, users: Mapping[str, int], *, keyed_rows: bool = False
) -> Iterator[Path]:
    """Record ``path`` as holding ``users``' data (each at its event head), yield a temporary
    path to write it to, then move it into place and drop the path's older records.
    ``keyed_rows``: a Parquet table with a ``user_id`` column, rewritten without a forgotten
    user's rows rather than deleted."""
    here, token = note(root, path, users, keyed_rows=keyed_rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _temp(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    for old in here.glob("*.json"):
        if old.name != token:
            old.unlink(missing_ok=True)


def write(root: Path, path: Path, text: str, users: Mapping[str, int]) -> None:
    """Write ``text`` to ``path`` atomically, recorded as holding ``users``' data."""
    with noted(root, path, users) as tmp:
        tmp.write_text(text, encoding="utf-8")


def _records(root: Path) -> Iterator[_Record]:
    base = root / WRITTEN
    if not base.is_dir():
        return
    for here in sorted(base.iterdir()):
        for where in sorted(here.glob("*.json")) if here.is_dir() else ():
            try:
                body = json.loads(where.read_text(encoding="utf-8"))
                users = {str(u): int(h) for u, h in body["users"].items()}
                yield _Record(where, str(body["path"]), users, str(body["on_forget"]))
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                # a damaged record: be cautious, its file is stale for everyone
                yield _Record(where, "", {}, DELETE)


def recorded_heads(root: Path, paths: list[Path]) -> dict[str, int]:
    """The users whose data the files at ``paths`` hold, each at the lowest head recorded: what
    a file gathered from them holds."""
    out: dict[str, int] = {}
    wanted = {_rel(root, p) for p in paths}
    for rec in _records(root):
        if rec.path in wanted:
            for user, head in rec.users.items():
                out[user] = min(head, out.get(user, head))
    return out


def stale(root: Path, bases: Mapping[str, int]) -> list[tuple[str, str]]:
    """(user, path) of each recorded file that holds data of a user from before their last
    base commit (``bases``: the event head of it, for users with one past their first) and
    still exists: it may hold what a forget erased."""
    out = []
    for rec in _records(root):
        path = root / rec.path
        if not rec.path or not (path.exists() or _temps(path)):
            continue
        for user, head in rec.users.items():
            if head < bases.get(user, 0):
                out.append((user, rec.path))
    return sorted(set(out))


def _temps(path: Path) -> list[Path]:
    """The temporary copies of ``path`` killed writers left: the file, and the write-ahead log
    DuckDB keeps beside a database being written (it holds the rows written)."""
    if not path.parent.is_dir():
        return []
    return [p for pat in (".*.tmp", ".*.tmp.wal") for p in path.parent.glob(f".{path.name}{pat}")]


@dataclass
class Purged:
    """What ``purge`` did: files deleted, files rewritten without a user's rows."""

    deleted: list[str] = field(default_factory=list)
    rewritten: list[str] = field(default_factory=list)


def purge(root: Path, bases: Mapping[str, int]) -> Purged:
    """Delete, or rewrite without the users' rows, every file ``stale`` names, with any
    temporary copy of it a killed writer left."""
    done = Purged()
    for rec in list(_records(root)):
        gone = {u for u, h in rec.users.items() if h < bases.get(u, 0)}
        if not gone and rec.path:
            continue
        path = root / rec.path if rec.path else None
        if path is not None:
            for tmp in _temps(path):
                tmp.unlink(missing_ok=True)
        if path is None or not path.exists():
            rec.where.unlink(missing_ok=True)
            continue
        left = {u: h for u, h in rec.users.items() if u not in gone}
        if rec.on_forget == ROWS and left:
            with noted(root, path, left, keyed_rows=True) as tmp:
                _drop_rows(path, tmp, gone)
            done.rewritten.append(rec.path)
        else:
            path.unlink()
            shutil.rmtree(rec.where.parent, ignore_errors=True)
            done.deleted.append(rec.path)
    return done


def _drop_rows(src: Path, dst: Path, users: set[str]) -> None:
    """Copy the Parquet table ``src`` to ``dst`` without the rows of ``users``, in its order."""
    import duckdb

    with duckdb.connect() as con:
        con.execute("SET threads = 1")  # one writer thread: the rows stay in their order
        con.execute(
            "CREATE TABLE kept AS SELECT * FROM read_parquet($src) "
            "WHERE user_id NOT IN (SELECT unnest($users))",
            {"src": str(src), "users": sorted(users)},
        )
        quoted = str(dst).replace("'", "''")
        con.execute(f"COPY kept TO '{quoted}' (FORMAT parquet)")


def unreached(root: Path) -> list[str]:
    """Files in the fleet directory a forget cannot check: neither the fleet's own (partitions,
    commits) nor recorded as holding users' data (a run's ``run.json``, the job's arguments as
    typed, is recorded with none), or not written by uac at all."""
    recorded = {rec.path for rec in _records(root) if rec.users}
    out = []
    for top in sorted(root.iterdir()):
        if top.name in _OWN or top.name.startswith((STAGING, ".making-")):
            continue
        files = [top] if not top.is_dir() else sorted(p for p in top.rglob("*") if p.is_file())
        # (a split cut short is uac's: the next run or export deletes it, verify fails on it)
        out += [
            r
            for p in files
            if (r := _rel(root, p)) not in recorded
            and not any(part.startswith(SPLIT) for part in p.relative_to(root).parts)
        ]
    return out


def staging_dir(parent: Path, prefix: str) -> tuple[Path, int]:
    """A new staging directory ``<prefix><token>`` in ``parent`` (the same file system, so its
    files move into place by rename), locked by this process for as long as the returned
    descriptor is open: made under another name and locked before it is renamed, so no other
    writer ever sees it unlocked while its writer lives."""
    token = secrets.token_hex(4)
    making = parent / f".making-{token}"
    making.mkdir()
    fd = os.open(making, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    staging = parent / f"{prefix}{token}"
    os.rename(making, staging)
    return staging, fd


def _abandoned(parent: Path, prefix: str) -> Iterator[Path]:
    """The staging directories ``<prefix>*`` in ``parent`` of writers killed mid-way: no
    process holds their lock (see ``staging_dir``)."""
    if not parent.is_dir():
        return
    for path in sorted(parent.iterdir()):
        # (a `.making-` dir is left empty by a writer killed before its rename: nothing in it)
        if not path.name.startswith(prefix):
            continue
        if path.is_symlink() or not path.is_dir():
            yield path
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue  # gone meanwhile
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # a live writer's
        finally:
            os.close(fd)  # closing releases the lock taken, if any
        yield path


def _remove(path: Path) -> None:
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)


def split_leftovers(root: Path) -> list[Path]:
    """The splits of runs' input cut short (``SPLIT`` staging directories no one writes)."""
    return [p for d in sorted(root.glob("runs/*/input")) for p in _abandoned(d, SPLIT)]


def clear_split(parent: Path) -> None:
    """Remove the input splits in ``parent`` cut short: they hold copies of users' events,
    which a later forget's rewrite would otherwise miss."""
    for path in _abandoned(parent, SPLIT):
        _remove(path)


def clear_staging(root: Path) -> None:
    """Remove the staging directories of the fleet's writers killed mid-way (an export's, a
    run's input split): they hold copies of users' rows, which a later forget's rewrite would
    otherwise miss."""
    for path in [*_abandoned(root, STAGING), *split_leftovers(root)]:
        _remove(path)
