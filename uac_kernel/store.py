"""The event log: an append-only, hash-chained DuckDB table shared by many users.

Nothing here updates or deletes an event. A batch is appended in one transaction, so it lands
whole or not at all. Every event's hash covers its own columns and the previous event's hash,
so ``verify`` detects any change to any past event.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NamedTuple

import duckdb
import orjson

from uac_kernel._migrations import migrate
from uac_kernel.errors import StoreError, StoreLocked

__all__ = [
    "EVENT_KINDS",
    "GENESIS",
    "LoggedEvent",
    "NewEvent",
    "Store",
    "VerifyReport",
    "event_hash",
]

GENESIS = "0" * 64
EVENT_KINDS = ("utterance", "fact", "schema", "alert", "rule", "extraction", "review")
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


@dataclass(frozen=True)
class VerifyReport:
    """Result of re-computing the hash chain."""

    ok: bool
    events: int
    first_bad_seq: int | None = None
    problem: str = ""


def dump_payload(payload: dict[str, Any]) -> str:
    """The canonical JSON text of a payload (what is stored and hashed): compact, sorted keys."""
    return orjson.dumps(payload, option=orjson.OPT_SORT_KEYS).decode()


def event_hash(
    prev: str,
    seq: int,
    recorded_at: datetime,
    ts: datetime,
    kind: str,
    user: str,
    source: str | None,
    payload: str,
) -> str:
    src = source or ""
    # Length prefixes on the free-text parts keep the encoding unambiguous whatever they hold;
    # the payload comes last, so it needs none.
    blob = (
        f"{prev}|{seq}|{recorded_at.isoformat()}|{ts.isoformat()}|{len(kind)}:{kind}|"
        f"{len(user)}:{user}|{len(src)}:{src}|{payload}"
    )
    return hashlib.sha256(blob.encode()).hexdigest()


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
        try:
            self.con = duckdb.connect(self.path, read_only=read_only)
        except duckdb.Error as exc:
            raise _open_error(self.path, exc) from exc
        try:
            self._check_tables()
            if not read_only:
                migrate(self.con)
        except BaseException:
            self.con.close()
            raise
        row = self.con.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
        self._last_seq: int = row[0] if row else 0
        self._last_hash: str = row[1] if row else GENESIS

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

    @property
    def last_seq(self) -> int:
        return self._last_seq

    def append(self, events: Sequence[NewEvent]) -> list[LoggedEvent]:
        """Append ``events`` atomically, in order; return them as logged."""
        if self.read_only:
            raise StoreError(f"{self.path} is open read-only; open it without read_only to write")
        if not events:
            return []
        now = datetime.now(UTC).replace(tzinfo=None)
        seq, prev = self._last_seq, self._last_hash
        rows: list[tuple[Any, ...]] = []
        logged: list[LoggedEvent] = []
        for n, ev in enumerate(events, 1):
            seq += 1
            try:
                text = dump_payload(ev.payload)
                prev = event_hash(prev, seq, now, ev.ts, ev.kind, ev.user, ev.source, text)
            except (TypeError, ValueError, orjson.JSONEncodeError) as exc:
                raise StoreError(
                    f"event {n} of the batch cannot be stored ({exc}); nothing was written"
                ) from exc
            rows.append((seq, now, ev.ts, ev.kind, ev.user, ev.source, text, prev))
            logged.append(
                LoggedEvent(seq, now, ev.ts, ev.kind, ev.user, ev.source, ev.payload, prev)
            )
        self._append_rows(rows)
        self._last_seq, self._last_hash = seq, prev
        return logged

    def _append_rows(self, rows: list[tuple[Any, ...]]) -> None:
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            appender = con.appender("events")
            appender.append_rows(rows)
            appender.flush()
            con.execute("COMMIT")
        except BaseException as exc:
            con.execute("ROLLBACK")
            if isinstance(exc, duckdb.Error):
                raise StoreError(f"{self.path}: append failed, nothing was written: {exc}") from exc
            raise

    def events(
        self,
        user: str | None = None,
        *,
        after_seq: int = 0,
        upto_seq: int | None = None,
        until_ts: datetime | None = None,
        kinds: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> Iterator[LoggedEvent]:
        """Events in log order, fetched in chunks so a million events never sit in one list."""
        where = ["seq > ?"]
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

    def verify(self) -> VerifyReport:
        """Re-compute the whole hash chain; report the first event that does not match."""
        cur = self.con.cursor()
        cur.execute(
            "SELECT seq, recorded_at, ts, kind, user_id, source, payload, hash "
            "FROM events ORDER BY seq"
        )
        prev, expected_seq, count = GENESIS, 1, 0
        while chunk := cur.fetchmany(_FETCH):
            for s, rec, ts, kind, user, src, payload, h in chunk:
                count += 1
                if s != expected_seq:
                    return VerifyReport(
                        False, count, s, f"seq {expected_seq} is missing or repeated"
                    )
                if event_hash(prev, s, rec, ts, kind, user, src, payload) != h:
                    return VerifyReport(
                        False, count, s, f"event {s} was changed after it was written"
                    )
                prev, expected_seq = h, expected_seq + 1
        return VerifyReport(True, count)


_LOCK_PID = re.compile(r"PID (\d+)")


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


def _open_error(path: str, exc: duckdb.Error) -> StoreError:
    text = str(exc)
    if isinstance(exc, duckdb.IOException) and "lock" in text.lower():
        pid = _LOCK_PID.search(text)
        who = f"process {pid.group(1)}" if pid else "another process"
        return StoreLocked(
            f"{path} is open read-write in {who}; close that notebook or program, "
            "or open this store read-only"
        )
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return StoreError(
        f"cannot open store {path}, it is damaged or not a DuckDB database ({first}); "
        "restore it from a copy, or pass another path"
    )
