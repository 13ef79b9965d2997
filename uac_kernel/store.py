"""The event log: an append-only, hash-chained DuckDB table shared by many users.

Nothing here updates or deletes an event (``forget`` erases a payload, see ``_chain``). A batch
is appended in one transaction, so it lands whole or not at all. Each user's events form their
own hash chain: an event's hash covers its own columns, the salted hash of its payload and the
previous event of the same user, so ``verify`` detects any change to any past event, and one
user's log can be checked without reading the others'.
"""

from __future__ import annotations

import os
import re
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import duckdb
import orjson

from uac_kernel._chain import GENESIS, call_hash, content_hash, event_hash, new_salt
from uac_kernel._display import shorten
from uac_kernel._migrations import migrate
from uac_kernel.errors import StoreError, StoreLocked

if TYPE_CHECKING:
    from uac_kernel.integrity import VerifyReport

__all__ = [
    "EVENT_KINDS",
    "GENESIS",
    "LoggedEvent",
    "NewEvent",
    "Store",
    "damaged",
    "event_hash",
    "open_paths",
]

EVENT_KINDS = (
    "utterance",
    "fact",
    "schema",
    "alert",
    "rule",
    "extraction",
    "review",
    "forget",
    "constraint",
)
"""The kinds of event uac writes to the log."""
_FETCH = 50_000


# Named tuples rather than frozen dataclasses: as immutable, and three times cheaper to make
# (a frozen dataclass sets each field through object.__setattr__), which the fold of a
# million-event log and every ingested event pay.
class NewEvent(NamedTuple):
    """An event about to be appended: the store adds ``seq``, ``recorded_at`` and ``hash``."""

    ts: datetime
    kind: str
    user: str
    payload: dict[str, Any]
    source: str | None = None


class LoggedEvent(NamedTuple):
    """An event as the log holds it."""

    seq: int
    recorded_at: datetime
    ts: datetime
    kind: str
    user: str
    source: str | None
    payload: dict[str, Any]
    hash: str


def dump_payload(payload: dict[str, Any]) -> str:
    """The canonical JSON text of a payload (what is stored and hashed): compact, sorted keys."""
    return orjson.dumps(payload, option=orjson.OPT_SORT_KEYS).decode()


class Store:
    """One DuckDB file (or ``:memory:``) holding the event log and checkpoints of many users."""

    def __init__(
        self, path: str | Path = ":memory:", *, read_only: bool = False, create: bool = True
    ):
        """Open the store at ``path``; a new file is created only when ``create`` and not
        ``read_only``. A path that is not a uac store (a directory, an events file, an empty
        or damaged file, another program's DuckDB database) is a one-line ``StoreError``."""
        self.path = str(path)
        self.read_only = read_only
        if self.path != ":memory:":
            if not Path(self.path).exists():
                if read_only or not create:
                    raise StoreError(
                        f"no store at {self.path}; create one with `uac ingest FILE` or `uac demo`"
                    )
            else:
                _check_store_file(Path(self.path))
        # DuckDB shares one database between the connections of a process, all read-write or
        # all read-only: a read-only Store beside a writing one reads through a read-write
        # connection (this class refuses its writes); the reverse is a clear error.
        peers = [s for s in _OPEN.get(_key(self.path), ()) if self.path != ":memory:"]
        writable = any(not s.read_only for s in peers)
        if peers and not read_only and not writable:
            raise StoreError(
                f"{self.path} is open read-only in this process; close that workbench "
                "(wb.close()) before opening the store to write"
            )
        try:
            self.con = duckdb.connect(self.path, read_only=read_only and not writable)
        except duckdb.Error as exc:
            raise _open_error(self.path, exc, read_only) from exc
        try:
            self._check_tables()
            if not read_only:
                migrate(self.con)
        except BaseException:
            self.con.close()
            raise
        self._last_seq = self._max_seq()
        # Each user's chain head (user_seq, hash), read on a user's first append.
        self._heads: dict[str, tuple[int, str]] = {}
        self._lock = _writer_lock(self.path)
        self._shared = _shared(self.path)
        _OPEN.setdefault(_key(self.path), weakref.WeakSet()).add(self)

    def _check_tables(self) -> None:
        """Refuse a DuckDB database uac did not make, rather than write its tables into it."""
        tables = {
            r[0]
            for r in self.con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
            ).fetchall()
        }
        if "uac_migrations" in tables:
            return
        if tables:
            shown = ", ".join(sorted(tables)[:5]) + (", ..." if len(tables) > 5 else "")
            raise StoreError(
                f"{self.path} is a DuckDB database of another program, not a uac store "
                f"(its tables: {shown}); pass another path, or a new file name to create a store"
            )
        if self.read_only:
            raise StoreError(
                f"{self.path} is an empty DuckDB database, not a uac store yet; "
                "create the store with `uac ingest FILE` into it"
            )

    def close(self) -> None:
        self.con.close()
        _OPEN.get(_key(self.path), weakref.WeakSet()).discard(self)

    def compact(self) -> None:
        """Rewrite the file with only its live rows, so nothing erased lingers in its free
        blocks or write-ahead log. Every open Store of this process on the file is reconnected
        to the new file; a read-only process that has it open keeps the old one until it
        reopens."""
        if self.path == ":memory:":
            return
        with self._lock:
            path = Path(self.path)
            peers = [s for s in _OPEN.get(_key(self.path), ()) if s is not self]
            fresh = path.with_name(path.name + ".compact")
            fresh.unlink(missing_ok=True)
            self.con.execute("CHECKPOINT")
            row = self.con.execute("SELECT current_database()").fetchone()
            name = (row[0] if row else "main").replace('"', '""')
            quoted = str(fresh).replace("'", "''")
            self.con.execute(f"ATTACH '{quoted}' AS uac_compact")
            try:
                self.con.execute(f'COPY FROM DATABASE "{name}" TO uac_compact')
            finally:
                self.con.execute("DETACH uac_compact")
            everyone = [self, *peers]
            for s in everyone:
                s.con.close()
            os.replace(fresh, path)
            Path(f"{path}.wal").unlink(missing_ok=True)
            # as in __init__: beside a writer, a read-only Store reads through a writable
            # connection (this class still refuses its writes)
            writable = any(not s.read_only for s in everyone)
            for s in everyone:
                s.con = duckdb.connect(self.path, read_only=s.read_only and not writable)
            self._shared.erasures += 1

    @property
    def erasures(self) -> int:
        """How many times a Store of this process rewrote the file after erasing (``forget``);
        a workbench that saw fewer folds again."""
        return self._shared.erasures

    def written(self, user: str) -> int:
        """The seq of the last event a Store of this process appended for ``user`` (0: none)."""
        return self._shared.written.get(user, 0)

    @property
    def last_seq(self) -> int:
        return self._last_seq

    def _max_seq(self) -> int:
        row = self.con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()
        return int(row[0]) if row else 0

    def head(self, user: str) -> tuple[int, str]:
        """``user``'s chain head: the number of their events and the last one's hash."""
        if user not in self._heads:
            row = self.con.execute(
                "SELECT user_seq, hash FROM events WHERE user_id = ? ORDER BY seq DESC LIMIT 1",
                [user],
            ).fetchone()
            self._heads[user] = (int(row[0]), str(row[1])) if row else (0, GENESIS)
        return self._heads[user]

    def append(
        self,
        events: Sequence[NewEvent],
        *,
        within: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
    ) -> list[LoggedEvent]:
        """Append ``events`` atomically, in order; return them as logged. ``within`` runs in
        the same transaction after the rows are appended (``forget`` erases there)."""
        if self.read_only:
            raise StoreError(f"{self.path} is open read-only; open it without read_only to write")
        if not events:
            return []
        with self._lock:
            self._catch_up()
            now = datetime.now(UTC).replace(tzinfo=None)
            seq = self._last_seq
            heads: dict[str, tuple[int, str]] = {}
            rows: list[tuple[Any, ...]] = []
            logged: list[LoggedEvent] = []
            for n, ev in enumerate(events, 1):
                seq += 1
                user_seq, prev = heads.get(ev.user) or self.head(ev.user)
                user_seq += 1
                try:
                    text = dump_payload(ev.payload)
                    salt = new_salt()
                    payload_hash = content_hash(salt, text, ev.source or "")
                    prev = event_hash(prev, user_seq, now, ev.ts, ev.kind, ev.user, payload_hash)
                except (TypeError, ValueError, orjson.JSONEncodeError) as exc:
                    raise StoreError(
                        f"event {n} of the batch cannot be stored ({exc}); nothing was written"
                    ) from exc
                heads[ev.user] = (user_seq, prev)
                row = (seq, user_seq, now, ev.ts, ev.kind, ev.user, ev.source, text, salt)
                rows.append((*row, payload_hash, prev))
                logged.append(
                    LoggedEvent(seq, now, ev.ts, ev.kind, ev.user, ev.source, ev.payload, prev)
                )
            self._append_rows(rows, within)
            self._last_seq = seq
            self._heads.update(heads)
            for done in logged:
                self._shared.written[done.user] = done.seq
        return logged

    def head_at_seq(self, user: str, seq: int) -> tuple[int, str]:
        """``user``'s chain head as it was when the store's last event was ``seq``."""
        row = self.con.execute(
            "SELECT user_seq, hash FROM events WHERE user_id = ? AND seq <= ? "
            "ORDER BY seq DESC LIMIT 1",
            [user, seq],
        ).fetchone()
        return (int(row[0]), str(row[1])) if row else (0, GENESIS)

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold this process's write lock of the store (for writes outside ``append``)."""
        if self.read_only:
            raise StoreError(f"{self.path} is open read-only; open it without read_only to write")
        with self._lock:
            self._catch_up()
            yield

    def _append_rows(
        self,
        rows: list[tuple[Any, ...]],
        within: Callable[[duckdb.DuckDBPyConnection], None] | None = None,
    ) -> None:
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            appender = con.appender("events")
            appender.append_rows(rows)
            appender.flush()
            if within is not None:
                within(con)
            con.execute("COMMIT")
        except BaseException as exc:
            con.execute("ROLLBACK")
            if isinstance(exc, duckdb.Error):
                raise StoreError(f"{self.path}: append failed, nothing was written: {exc}") from exc
            raise

    def _catch_up(self) -> None:
        """Forget cached heads if another Store object of this process appended to the file
        (DuckDB shares one database between connections of a process, so both can write)."""
        last = self._max_seq()
        if last != self._last_seq:
            self._last_seq = last
            self._heads.clear()

    def record_call(
        self,
        *,
        user: str,
        purpose: str,
        model: str,
        base_url: str,
        request_key: str,
        request: str,
        response: str,
        content: str,
        tokens_in: int,
        tokens_out: int,
        latency_ms: float,
        outcome: str,
        error: str,
        created_at: datetime | None = None,
    ) -> int:
        """Append one model call to ``model_calls``, chained to the user's earlier calls and
        naming the user's event chain head; return its ``call_id``."""
        with self.writing():
            created = created_at or datetime.now(UTC).replace(tzinfo=None)
            row = self.con.execute(
                "SELECT (SELECT coalesce(max(call_id), 0) + 1 FROM model_calls), "
                "(SELECT hash FROM model_calls WHERE user_id = ? ORDER BY call_id DESC LIMIT 1)",
                [user],
            ).fetchone()
            call_id = int(row[0]) if row else 1
            prev = str(row[1]) if row and row[1] is not None else GENESIS
            event_seq, head = self.head(user)
            salt = new_salt()
            chash = content_hash(salt, request, response, content, error)
            link = call_hash(
                prev, call_id, created, user, purpose, model, base_url, tokens_in, tokens_out,
                latency_ms, outcome, event_seq, head, chash,
            )  # fmt: skip
            self.con.execute(
                "INSERT INTO model_calls (call_id, created_at, user_id, purpose, model, base_url, "
                "request_key, request, response, content, tokens_in, tokens_out, latency_ms, "
                "outcome, error, salt, content_hash, event_seq, event_hash, hash) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    call_id, created, user, purpose, model, base_url, request_key, request,
                    response, content, tokens_in, tokens_out, latency_ms, outcome, error, salt,
                    chash, event_seq, head, link,
                ],
            )  # fmt: skip
        return call_id

    def events(
        self,
        user: str | None = None,
        *,
        after_seq: int = 0,
        upto_seq: int | None = None,
        until_ts: datetime | None = None,
        kinds: Sequence[str] | None = None,
        limit: int | None = None,
        erased: bool = False,
    ) -> Iterator[LoggedEvent]:
        """Events in log order, fetched in chunks so a million events never sit in one list.

        Events whose payload ``forget`` erased are left out unless ``erased``; the fold, search
        and rules never see them."""
        where = ["seq > ?"] if erased else ["seq > ?", "salt <> ''"]
        params: list[Any] = [after_seq]
        if user is not None:
            where.append("user_id = ?")
            params.append(user)
        if upto_seq is not None:
            where.append("seq <= ?")
            params.append(upto_seq)
        if until_ts is not None:
            where.append("ts <= ?")
            params.append(until_ts)
        if kinds:
            where.append("kind IN (SELECT unnest(?))")
            params.append(list(kinds))
        cur = self.con.cursor()
        cur.execute(
            "SELECT seq, recorded_at, ts, kind, user_id, source, payload, hash FROM events "
            f"WHERE {' AND '.join(where)} ORDER BY seq"
            + ("" if limit is None else f" LIMIT {int(limit)}"),
            params,
        )
        loads = orjson.loads
        while chunk := cur.fetchmany(_FETCH):
            for s, rec, ts, kind, u, src, payload, h in chunk:
                yield LoggedEvent(s, rec, ts, kind, u, src, loads(payload), h)

    def sources(self, user: str) -> set[str]:
        """Every ``source`` already logged for ``user``."""
        rows = self.con.execute(
            "SELECT source FROM events WHERE user_id = ? AND source IS NOT NULL", [user]
        ).fetchall()
        return {r[0] for r in rows}

    def users(self) -> list[str]:
        return list(self.user_counts())

    def user_counts(self) -> dict[str, int]:
        """Every user of the store and the number of their events, by user id."""
        rows = self.con.execute(
            "SELECT user_id, count(*) FROM events GROUP BY user_id ORDER BY user_id"
        ).fetchall()
        return {str(u): int(n) for u, n in rows}

    def user_kind_counts(self) -> dict[str, dict[str, int]]:
        """Every user of the store and the number of their events of each kind, by user id."""
        rows = self.con.execute(
            "SELECT user_id, kind, count(*) FROM events GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        counts: dict[str, dict[str, int]] = {}
        for user, kind, n in rows:
            counts.setdefault(str(user), {})[str(kind)] = int(n)
        return counts

    def kinds(self) -> list[str]:
        """The kinds of event the log holds (of any user)."""
        rows = self.con.execute("SELECT DISTINCT kind FROM events ORDER BY kind").fetchall()
        return [str(r[0]) for r in rows]

    def has_events(self, user: str) -> bool:
        """Whether ``user`` has any event in the store (a user exists by having events)."""
        row = self.con.execute("SELECT 1 FROM events WHERE user_id = ? LIMIT 1", [user]).fetchone()
        return row is not None

    def verify(self, user: str | None = None) -> VerifyReport:
        """Check ``user``'s chains (or every user's, and the store-wide ``seq``); see
        ``integrity.verify``."""
        from uac_kernel.integrity import verify

        return verify(self, user)


_LOCK_PID = re.compile(r"PID (\d+)")
_WRITER_LOCKS: dict[str, threading.RLock] = {}
_WRITER_LOCKS_GUARD = threading.Lock()
# The Store objects of this process open on each file, so `compact` can reconnect them all.
_OPEN: dict[str, weakref.WeakSet[Store]] = {}


def open_paths() -> list[str]:
    """The files (or ``:memory:``) a Store of this process still has open; the ``uac`` command
    leaves without the interpreter's teardown only when there is none (``cli.run``)."""
    return [path for path, stores in _OPEN.items() if len(stores)]


def _key(path: str) -> str:
    return path if path == ":memory:" else str(Path(path).resolve())


@dataclass
class _Shared:
    """What the Store objects of one file in this process tell each other."""

    written: dict[str, int] = field(default_factory=dict)
    erasures: int = 0


_SHARED: dict[str, _Shared] = {}


def _shared(path: str) -> _Shared:
    if path == ":memory:":
        return _Shared()
    with _WRITER_LOCKS_GUARD:
        return _SHARED.setdefault(_key(path), _Shared())


def _writer_lock(path: str) -> threading.RLock:
    """The one lock of this process for appends to ``path``: every Store object of the same
    file takes it, so two of them cannot interleave their appends."""
    if path == ":memory:":
        return threading.RLock()  # each in-memory store is its own database
    with _WRITER_LOCKS_GUARD:
        return _WRITER_LOCKS.setdefault(_key(path), threading.RLock())


def _check_store_file(path: Path) -> None:
    """A one-line ``StoreError`` for an existing path that cannot be a store, before DuckDB
    reads it: DuckDB's own messages name no way out, and it opens some files (``.json``,
    ``.jsonl``, ``.csv``) as an in-memory database over the file instead of failing."""
    if path.is_dir():
        raise StoreError(
            f"{path} is a directory, not a store; pass the path of a .duckdb file "
            "(a new file name creates a store)"
        )
    try:
        with path.open("rb") as handle:
            head = handle.read(12)
    except OSError as exc:
        raise StoreError(
            f"cannot read store {path}: {exc.strerror}; check its permissions"
        ) from exc
    if not head:
        raise StoreError(f"{path} is an empty file, not a store; delete it or pass another path")
    if head[8:12] != _DUCKDB_MAGIC:
        looks = head.lstrip()[:1]
        hint = (
            f"it looks like JSON: ingest it with `uac ingest {path} --db STORE.duckdb`"
            if looks in (b"{", b"[")
            else "pass the path of a store, or a new file name to create one"
        )
        raise StoreError(f"{path} is not a uac store (not a DuckDB database file); {hint}")


# A DuckDB database file starts with an 8-byte checksum, then these 4 bytes.
_DUCKDB_MAGIC = b"DUCK"


def damaged(path: str, exc: duckdb.Error) -> StoreError:
    """A DuckDB failure while reading or writing a store opened fine, as one line: a damaged
    file (a truncated file or a corrupt block is found only when a query reaches it) says to
    restore it; anything else names DuckDB's message."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    if any(s in text for s in ("Corrupt database", "Could not read enough bytes", "checksum")):
        return StoreError(
            f"store {path} is damaged ({shorten(first, 160)}); restore it from a copy — "
            "nothing was written to it"
        )
    return StoreError(f"DuckDB failed on store {path}: {shorten(first, 200)}")


def _open_error(path: str, exc: duckdb.Error, read_only: bool) -> StoreError:
    text = str(exc)
    if isinstance(exc, duckdb.IOException) and "lock" in text.lower():
        pid = _LOCK_PID.search(text)
        who = f"process {pid.group(1)}" if pid else "another process"
        if read_only:  # only a writer keeps a reader out
            return StoreLocked(
                f"{path} is open read-write in {who}; close that notebook or program first "
                "(readers share a store, a writer has it alone)"
            )
        return StoreLocked(
            f"{path} is open in {who}; to write, close that notebook or program first; if it "
            "only reads, open this store read-only too (readers share a store)"
        )
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return StoreError(
        f"cannot open store {path}, it is damaged or not a DuckDB database ({first}); "
        "restore it from a copy, or pass another path"
    )
