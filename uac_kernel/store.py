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

__all__ = ["GENESIS", "LoggedEvent", "NewEvent", "Store", "VerifyReport", "event_hash"]

GENESIS = "0" * 64
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

    def __init__(self, path: str | Path = ":memory:", *, read_only: bool = False):
        self.path = str(path)
        self.read_only = read_only
        if read_only and self.path != ":memory:" and not Path(self.path).exists():
            raise StoreError(
                f"no store at {self.path}; create one with `uac ingest FILE` or `uac demo`"
            )
        try:
            self.con = duckdb.connect(self.path, read_only=read_only)
        except duckdb.IOException as exc:
            raise _open_error(self.path, exc) from exc
        if not read_only:
            migrate(self.con)
        row = self.con.execute("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1").fetchone()
        self._last_seq: int = row[0] if row else 0
        self._last_hash: str = row[1] if row else GENESIS

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
        return [
            r[0]
            for r in self.con.execute(
                "SELECT DISTINCT user_id FROM events ORDER BY user_id"
            ).fetchall()
        ]

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


def _open_error(path: str, exc: duckdb.IOException) -> StoreError:
    text = str(exc)
    if "lock" in text.lower():
        pid = _LOCK_PID.search(text)
        who = f"process {pid.group(1)}" if pid else "another process"
        return StoreLocked(
            f"{path} is open read-write in {who}; close that notebook or program, "
            "or open this store read-only"
        )
    return StoreError(f"cannot open store {path}: {text}")
