"""The event log: an append-only, hash-chained DuckDB table shared by many users.

Nothing here updates or deletes an event (``forget`` erases a payload, see ``core.chain``). A batch
is appended in one transaction, so it lands whole or not at all. Each user's events form their
own hash chain: an event's hash covers its own columns, the salted hash of its payload and the
previous event of the same user, so ``verify`` detects any change to any past event, and one
user's log can be checked without reading the others'.
"""

from __future__ import annotations

import os
import random
import re
import stat
import threading
import time
import weakref
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import duckdb
import orjson

from uac_kernel.core import settings
from uac_kernel.core.chain import (
    GENESIS,
    call_hash,
    content_hash,
    event_hash,
    event_linker,
    new_salt,
    new_salts,
)
from uac_kernel.core.display import shorten
from uac_kernel.core.errors import StoreError, StoreLocked
from uac_kernel.log import handover
from uac_kernel.log.migrations import migrate

if TYPE_CHECKING:
    pass

__all__ = [
    "EVENT_KINDS",
    "GENESIS",
    "LoggedEvent",
    "NewEvent",
    "Store",
    "damaged",
    "event_hash",
    "is_damage",
    "open_paths",
    "owe_compaction",
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
    "vocabulary",
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
        self,
        path: str | Path = ":memory:",
        *,
        read_only: bool = False,
        create: bool = True,
        lock_timeout: float | None = None,
    ):
        """Open the store at ``path``; a new file is created only when ``create`` and not
        ``read_only``. A path that is not a uac store (a directory, an events file, an empty
        or damaged file, another program's DuckDB database) is a one-line ``StoreError``.

        The file is shared with other processes: the connection is held only while an
        operation runs (see ``hold`` and ``release``), and opening it waits up to
        ``lock_timeout`` seconds (default: env ``UAC_LOCK_TIMEOUT``, else 10) while another
        process has it, then raises a ``StoreLocked`` naming that process."""
        self.path = settings.store_path(path)
        self.read_only = read_only
        self.lock_timeout = _lock_timeout() if lock_timeout is None else lock_timeout
        self._con: duckdb.DuckDBPyConnection | None = None
        self._depth = 0  # operations running that hold the connection (see ``hold``)
        self._guard = threading.Lock()
        # Bumped by every use of the connection: the watcher closes an idle connection only if
        # no use came since it last looked (see ``_watch``).
        self._gen = 0
        self._watching = False  # a watcher thread runs (one per Store, see ``_keep``)
        self._kept_gen = 0  # the generation when the connection was last seen idle
        self._idle_since = 0.0
        self._asked_seen = 0  # the want file's stamp when the connection was made (handover)
        self._yielded = False  # it let go for a process that asked (see ``_connect``)
        self._closed = False
        if self.path != ":memory:":
            if not Path(self.path).exists():
                if read_only or not create:
                    raise StoreError(
                        f"no store at {self.path}; create one with `uac ingest FILE` or `uac demo`"
                    )
            elif not any(s._con is not None for s in _OPEN.get(_key(self.path), ())):
                # (a Store of this process connected to it shows it is a store; and reading
                # it here would drop this process's DuckDB lock, see ``fingerprint``)
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
        self._con = self._connect(writable)
        try:
            self._check_tables()
            if not read_only:
                migrate(self.con)
        except BaseException:
            self._con.close()
            raise
        self._last_seq = self._max_seq()
        # Each user's chain head (user_seq, hash), read on a user's first append.
        self._heads: dict[str, tuple[int, str]] = {}
        self._owed_check = False  # see ``_catch_up``
        self._lock = _writer_lock(self.path)
        self._shared = _shared(self.path)
        _OPEN.setdefault(_key(self.path), weakref.WeakSet()).add(self)
        if not read_only and self.compaction_owed:
            self.compact()  # a forget (or an import carrying one) was cut short before it

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The connection, opened on demand; ``release`` closes it once no operation holds it."""
        with self._guard:  # read with the watcher kept out (see ``_watch``)
            if self._depth == 0:
                self._gen += 1  # a use outside any operation is not idleness
            con = self._con
        if con is None:
            if self._closed:
                raise StoreError(f"store {self.path} is closed; open it again to use it")
            peers = [s for s in _OPEN.get(_key(self.path), ()) if s is not self]
            con = self._con = self._connect(any(not s.read_only for s in peers))
        return con

    def _connect(self, writable: bool) -> duckdb.DuckDBPyConnection:
        """Connect, retrying with a growing, jittered backoff while another process holds the
        file (DuckDB lets one process write, or several read; each of ours holds it only for
        an operation), up to ``lock_timeout`` seconds."""
        # as in __init__: beside a writer, a read-only Store reads through a writable
        # connection (this class still refuses its writes)
        read_only = self.read_only and not writable
        deadline = time.monotonic() + self.lock_timeout
        if self._yielded:  # the turn of the process that asked (see ``_let_go``)
            self._yielded = False
            handover.quiet(self.path, deadline)
        pause = 0.005
        while True:
            try:
                con = duckdb.connect(self.path, read_only=read_only)
                self._asked_seen = handover.asked(self.path)
                return con
            except duckdb.Error as exc:
                left = deadline - time.monotonic()
                if not _is_lock_error(exc) or left <= 0:
                    raise _open_error(self.path, exc, self.read_only, self.lock_timeout) from exc
                handover.ask(self.path)  # the holder lets go at its next look
                time.sleep(min(left, random.uniform(pause / 2, pause)))
                pause = min(pause * 2, handover.GAP)

    @contextmanager
    def hold(self) -> Iterator[bool]:
        """Keep the connection open for one operation; at the end of the outermost one it stays
        open for the next (``_keep``) unless another process asked for the file meanwhile.
        Yields whether this one is outermost."""
        with self._guard:
            self._depth += 1
            self._gen += 1
            outer = self._depth == 1
        try:
            yield outer
        finally:
            with self._guard:
                self._depth -= 1
                if self._depth == 0:
                    if self._asked():
                        self._gen += 1
                        self._let_go()
                    else:
                        self._keep()

    def _asked(self) -> bool:
        """Whether another process asked for the file since this Store connected."""
        return (
            self._con is not None
            and self.path != ":memory:"
            and handover.asked(self.path) != self._asked_seen
        )

    def _let_go(self) -> None:
        """Close the connection for a process that asked; the next connect waits until the
        asking stops (``handover.quiet``), so the asker gets its turn."""
        self._disconnect()
        self._yielded = True

    def _keep(self) -> None:
        """Keep the idle connection until another process asks for the file or ``KEEP``
        seconds pass (``handover``), watched by one thread per Store while it is connected.
        Called with ``_guard`` held."""
        if self._con is None or self.path == ":memory:":
            return
        self._kept_gen = self._gen
        self._idle_since = time.monotonic()
        if not self._watching:
            self._watching = True
            # The thread holds the Store weakly: a workbench dropped without close() is
            # collected, its connection with it.
            ref = weakref.ref(self)
            threading.Thread(
                target=_watch, args=(ref,), name="uac-store-watch", daemon=True
            ).start()

    def _look(self) -> bool:
        """One look of the watcher at an idle connection; False once it has no more to watch."""
        with self._guard:
            if self._con is None or self._closed:
                return False
            if self._depth > 0:
                return True  # the operation's end looks
            if self._gen != self._kept_gen:  # used outside any operation since: not idle
                self._kept_gen, self._idle_since = self._gen, time.monotonic()
                return True
            try:
                if self._asked():
                    self._let_go()
                elif time.monotonic() - self._idle_since >= handover.KEEP:
                    self._disconnect()
                else:
                    return True
            except duckdb.Error:
                # still running a query begun outside any operation: look again next time
                self._kept_gen, self._idle_since = self._gen, time.monotonic()
                return True
            return False

    def release(self, *, keep: bool = False) -> None:
        """Close the connection unless an operation holds it, so another process can open
        the file; the next use opens it again. With ``keep``, keep it open until another
        process asks for the file (``handover``). An in-memory store keeps it (closing would
        drop the database)."""
        with self._guard:
            if self._depth == 0:
                if keep:
                    self._keep()
                else:
                    self._gen += 1
                    self._disconnect()

    @property
    def connected(self) -> bool:
        """Whether this Store holds a connection to its file now."""
        return self._con is not None

    def _disconnect(self) -> None:
        if self._con is not None and self.path != ":memory:":
            self._con.close()
            self._con = None

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
        with self._guard:
            self._closed = True
            self._gen += 1
            if self._con is not None:
                self._con.close()
                self._con = None
        _OPEN.get(_key(self.path), weakref.WeakSet()).discard(self)

    def compact(self) -> None:
        """Rewrite the file with only its live rows, so nothing erased lingers in its free
        blocks or write-ahead log. Every open Store of this process on the file opens the new
        file on its next use."""
        if self.path == ":memory:":
            return
        with self._lock, self.hold():
            path = Path(self.path)
            peers = [s for s in _OPEN.get(_key(self.path), ()) if s is not self]
            fresh = path.with_name(path.name + ".compact")
            fresh.unlink(missing_ok=True)
            # Every other connection of this process closes first: one left with a result not
            # fetched to its end holds a transaction open, and CHECKPOINT refuses to run.
            # Each Store opens the new file on its next use.
            for s in peers:
                with s._guard:  # not while its watcher looks at it
                    s._disconnect()
            self.con.execute("CHECKPOINT")
            row = self.con.execute("SELECT current_database()").fetchone()
            name = (row[0] if row else "main").replace('"', '""')
            quoted = str(fresh).replace("'", "''")
            self.con.execute(f"ATTACH '{quoted}' AS uac_compact")
            try:
                self.con.execute(f'COPY FROM DATABASE "{name}" TO uac_compact')
                # owed no more, in the new file only: a kill before it replaces the old one
                # leaves the old one owing
                self.con.execute("DELETE FROM uac_compact.uncompacted")
            finally:
                self.con.execute("DETACH uac_compact")
            self._disconnect()  # the file is replaced: this one reopens it on its next use too
            os.replace(fresh, path)
            Path(f"{path}.wal").unlink(missing_ok=True)
            self._shared.erasures += 1

    @property
    def compaction_owed(self) -> bool:
        """Whether the file may still hold bytes a forget erased: an erasure committed, and the
        rewrite (``compact``) it owes has not replaced the file since (see ``owe_compaction``)."""
        if self.path == ":memory:":
            return False
        try:
            row = self.con.execute("SELECT count(*) FROM uncompacted").fetchone()
        except duckdb.CatalogException:  # a store from before the table, opened read-only
            return False
        return bool(row and row[0])

    @property
    def erasures(self) -> int:
        """How many times a Store of this process rewrote the file after erasing (``forget``);
        a workbench that saw fewer folds again."""
        return self._shared.erasures

    @property
    def last_seq(self) -> int:
        """The seq of the store's last event, read from the file (another process may have
        appended since this one last did)."""
        return self._max_seq()

    def fingerprint(self) -> tuple[int, ...] | None:
        """What changes whenever any process commits to the file, found without connecting:
        the inode (``compact`` replaces the file), size and modification time of the file and
        of its write-ahead log (a commit grows the log; closing checkpoints it into the file).
        None for an in-memory or unreadable store.

        Only ``stat``: opening the file here and closing it would drop this process's DuckDB
        lock on it (POSIX record locks go with any descriptor of the file closed)."""
        if self.path == ":memory:":
            return None
        try:
            main = os.stat(self.path)
        except OSError:
            return None
        try:
            log = os.stat(f"{self.path}.wal")
            wal = (log.st_ino, log.st_size, log.st_mtime_ns)
        except OSError:
            wal = (-1, -1, -1)
        return (main.st_ino, main.st_size, main.st_mtime_ns, *wal)

    def user_last_seq(self, user: str, after: int = 0) -> int:
        """The seq of ``user``'s last event that is not erased, if after ``after``, else
        ``after``: one cheap query (the zone maps of ``seq`` skip the older row groups) by
        which a workbench sees what other processes appended."""
        row = self.con.execute(
            "SELECT max(seq) FROM events WHERE seq > ? AND user_id = ? AND salt <> ''",
            [after, user],
        ).fetchall()  # to its end: a result left open would hold a transaction open
        return int(row[0][0]) if row and row[0][0] is not None else after

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
        # The connection is held from reading the head to the commit: no other process can
        # write the file in between, so seq and each user's chain stay unique across them.
        with self._lock, self.hold():
            self._catch_up()
            now = datetime.now(UTC).replace(tzinfo=None)
            seq = self._last_seq
            heads: dict[str, tuple[int, str]] = {}
            rows: list[tuple[Any, ...]] = []
            logged: list[LoggedEvent] = []
            salts, link = new_salts(len(events)), event_linker(now)
            for n, ev in enumerate(events, 1):
                seq += 1
                user_seq, prev = heads.get(ev.user) or self.head(ev.user)
                user_seq += 1
                try:
                    text = dump_payload(ev.payload)
                    salt = salts[n - 1]
                    payload_hash = content_hash(salt, text, ev.source or "")
                    prev = link(prev, user_seq, ev.ts, ev.kind, ev.user, payload_hash)
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
        self._finish_owed()
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
        with self.exclusive():
            self._catch_up()
            yield
        self._finish_owed()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the connection and this process's lock of the file, for reads that must not
        meet another thread's append or ``compact`` (which closes every connection)."""
        with self._lock, self.hold():
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
        """Forget cached heads if another Store object, of this process or another, appended
        to the file since this one last did: a held connection is the only time no one else
        can, so the cache is checked against the table on each write."""
        last = self._max_seq()
        if last != self._last_seq:
            self._last_seq = last
            self._heads.clear()
            # another writer's forget may have been cut short before its rewrite
            self._owed_check = not self.read_only

    def _finish_owed(self) -> None:
        """After a write that found another writer's: finish the rewrite a forget cut short
        owes, as opening the store to write does."""
        if self._owed_check:
            self._owed_check = False
            if self.compaction_owed:
                self.compact()

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
        last: int | None = None,
        erased: bool = False,
    ) -> Iterator[LoggedEvent]:
        """Events in log order, fetched in chunks so a million events never sit in one list.

        ``limit``: the first ``limit`` events that match; ``last``: the ``last`` newest that
        match, handed back in log order (DuckDB's top-N reads the seq column and skips every
        row group below the newest: 3 ms for 5 of 1M events, as for the first 5); not both. Events whose payload ``forget``
        erased are left out unless ``erased``; the fold, search and rules never see them."""
        if last is not None and (limit is not None or last < 0):
            raise ValueError("events(): give limit or last, not both; last is 0 or more")
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
        select = (
            "SELECT seq, recorded_at, ts, kind, user_id, source, payload, hash FROM events "
            f"WHERE {' AND '.join(where)} ORDER BY seq"
        )
        if last is not None:  # the newest first, at most `last` rows, turned back to log order
            select = f"SELECT * FROM ({select} DESC LIMIT {int(last)}) ORDER BY seq"
        elif limit is not None:
            select += f" LIMIT {int(limit)}"
        cur.execute(select, params)
        loads = orjson.loads
        while chunk := cur.fetchmany(_FETCH):
            for s, rec, ts, kind, u, src, payload, h in chunk:
                yield LoggedEvent(s, rec, ts, kind, u, src, loads(payload), h)

    def events_at(self, user: str, seqs: Collection[int]) -> dict[int, LoggedEvent]:
        """``user``'s events at ``seqs``, by seq (one query; those ``forget`` erased are left
        out): the events behind a record's versions, for its history."""
        if not seqs:
            return {}
        rows = self.con.execute(
            "SELECT seq, recorded_at, ts, kind, user_id, source, payload, hash FROM events "
            "WHERE user_id = ? AND salt <> '' AND seq IN (SELECT unnest(?))",
            [user, sorted(seqs)],
        ).fetchall()
        return {
            s: LoggedEvent(s, rec, ts, kind, u, src, orjson.loads(payload), h)
            for s, rec, ts, kind, u, src, payload, h in rows
        }

    def logged_sources(self, user: str, sources: Collection[str]) -> set[str]:
        """Which of ``sources`` are already logged for ``user``: one query per batch, so no set
        of every source ever logged is loaded (at 300k events that set took 137 ms and tens of
        MB; this query takes about 20 ms for a 10k-event batch)."""
        if not sources:
            return set()
        rows = self.con.execute(
            "SELECT source FROM events WHERE user_id = ? AND source IN (SELECT unnest(?))",
            [user, list(sources)],
        ).fetchall()
        return {r[0] for r in rows}

    def logged_of_sources(
        self, user: str, sources: Collection[str]
    ) -> list[tuple[str, str, datetime, dict[str, Any] | None]]:
        """``user``'s logged events whose source is one of ``sources``, as (source, kind, ts,
        payload) in log order; the payload of an event ``forget`` erased is None. Asked only for
        the sources ``logged_sources`` found (the re-ingest path), to compare their content."""
        if not sources:
            return []
        rows = self.con.execute(
            "SELECT source, kind, ts, payload, salt = '' FROM events "
            "WHERE user_id = ? AND source IN (SELECT unnest(?)) ORDER BY seq",
            [user, list(sources)],
        ).fetchall()
        return [
            (str(src), str(kind), ts, None if erased else orjson.loads(payload))
            for src, kind, ts, payload, erased in rows
        ]

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


_LOCK_PID = re.compile(r"PID (\d+)")
_DEFAULT_LOCK_TIMEOUT = 10.0


def _lock_timeout() -> float:
    """Seconds to wait for a store another process holds: env ``UAC_LOCK_TIMEOUT``, else 10."""
    return settings.LOCK_TIMEOUT.get(_DEFAULT_LOCK_TIMEOUT)


def _is_lock_error(exc: duckdb.Error) -> bool:
    return isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower()


def _holder(pid: str) -> str:
    """``process 1234 (python -m uac ingest a.jsonl)``: the command line when readable."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return f"process {pid}"
    words = [w for w in raw.decode(errors="replace").split("\0") if w]
    if words:
        words[0] = Path(words[0]).name  # python, not /home/…/.venv/bin/python
    return f"process {pid} ({shorten(' '.join(words), 80)})" if words else f"process {pid}"


def _watch(ref: weakref.ref[Store]) -> None:
    """The watcher thread of a kept connection (``Store._keep``)."""
    try:
        while True:
            time.sleep(handover.WATCH)
            store = ref()
            if store is None or not store._look():
                break
            del store  # held only while it looks
    finally:
        store = ref()
        if store is not None:
            with store._guard:
                store._watching = False


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

    erasures: int = 0


_SHARED: dict[str, _Shared] = {}


def _shared(path: str) -> _Shared:
    if path == ":memory:":
        return _Shared()
    with _WRITER_LOCKS_GUARD:
        return _SHARED.setdefault(_key(path), _Shared())


def owe_compaction(con: duckdb.DuckDBPyConnection) -> None:
    """Record, in the transaction that erases, that the file must be rewritten: a process
    killed before its ``Store.compact`` leaves the record, the next Store opened to write
    rewrites the file, and ``verify`` fails until then."""
    con.execute("INSERT INTO uncompacted VALUES (current_timestamp)")


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
    try:
        mode = path.stat().st_mode
        if stat.S_ISDIR(mode):
            raise StoreError(
                f"{path} is a directory, not a store; pass the path of a .duckdb file "
                "(a new file name creates a store)"
            )
        if not stat.S_ISREG(mode):  # opening a FIFO would wait for a writer for ever
            raise StoreError(
                f"{path} is a device, pipe or socket, not a store; pass the path of a .duckdb "
                "file (a new file name creates a store)"
            )
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


def is_damage(exc: duckdb.Error) -> bool:
    """Whether DuckDB failed because the file is damaged (truncated, or a corrupt block)."""
    text = str(exc)
    return any(s in text for s in ("Corrupt database", "Could not read enough bytes", "checksum"))


def damaged(path: str, exc: duckdb.Error) -> StoreError:
    """A DuckDB failure while reading or writing a store opened fine, as one line: a damaged
    file (a truncated file or a corrupt block is found only when a query reaches it) says to
    restore it; anything else names DuckDB's message."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else type(exc).__name__
    if is_damage(exc):
        return StoreError(
            f"store {path} is damaged ({shorten(first, 160)}); restore it from a copy — "
            "nothing was written to it"
        )
    return StoreError(f"DuckDB failed on store {path}: {shorten(first, 200)}")


def _open_error(path: str, exc: duckdb.Error, read_only: bool, waited: float) -> StoreError:
    text = str(exc)
    if _is_lock_error(exc):
        pid = _LOCK_PID.search(text)
        who = _holder(pid.group(1)) if pid else "another process"
        after = f"still open after {waited:g} s (UAC_LOCK_TIMEOUT)"
        if read_only:  # only a writer keeps a reader out
            return StoreLocked(
                f"{path} is open read-write in {who}, {after}; wait for it to finish or close "
                "that notebook or program (readers share a store, a writer has it alone)"
            )
        return StoreLocked(
            f"{path} is open in {who}, {after}; to write, wait for it to finish or close that "
            "notebook or program; if it only reads, open this store read-only too "
            "(readers share a store)"
        )
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    if not Path(path).exists():  # it was to be created
        return StoreError(
            f"cannot create store {path} ({first}); pass a path in a directory that exists "
            "and that you can write"
        )
    return StoreError(
        f"cannot open store {path}, it is damaged or not a DuckDB database ({first}); "
        "restore it from a copy, or pass another path"
    )
