"""Kernel-side paging over the event log, for the widgets: only one page leaves DuckDB.

Every read is a parameterised SELECT on the store's connection, restricted to one user; user
text only ever travels as a parameter. Paging is keyed by ``seq``: the next page is
``seq > last of this page``, the previous one ``seq < first of this page`` read backwards, so
turning pages costs the same on page 20,000 as on page 1. A jump to a page not seen yet finds
its first ``seq`` with an ``OFFSET`` over the ``seq`` column alone, from whichever end is
nearer. The log is append-only and ``seq`` only grows, so a page's bounds never change once
seen (except the end of a page that was not full, which is therefore not kept).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from uac_kernel.log.store import LoggedEvent, Store

__all__ = ["LogFilter", "LogPager", "events_by_seq", "utterances_by_source"]

_COLUMNS = "seq, recorded_at, ts, kind, user_id, source, payload, hash"


@dataclass(frozen=True)
class LogFilter:
    """Which events of a user to show. Empty parts match everything.

    ``text`` matches case-insensitively anywhere in the stored JSON payload (keys included) or
    the source; ``ts_to`` is exclusive.
    """

    kind: str = ""
    type: str = ""
    text: str = ""
    ts_from: datetime | None = None
    ts_to: datetime | None = None

    def where(self, user: str) -> tuple[str, list[Any]]:
        """The WHERE clause (fixed text) and its parameters."""
        clauses: list[str] = ["user_id = ?"]
        params: list[Any] = [user]
        if self.kind:
            clauses.append("kind = ?")
            params.append(self.kind)
        if self.type:
            # The substring test is cheap and rules out almost every row before the JSON parse;
            # payloads are canonical JSON (compact, sorted keys), so the needle is exact.
            clauses.append(
                "kind IN ('fact', 'schema') AND contains(payload, ?) "
                "AND json_extract_string(payload, '$.type') = ?"
            )
            params += ['"type":' + orjson.dumps(self.type).decode(), self.type]
        if self.text:
            # Payloads are stored as JSON, so look for the text as JSON would write it
            # (quotes and backslashes escaped).
            clauses.append(
                "(contains(lower(payload), lower(?)) OR contains(lower(coalesce(source, '')), lower(?)))"
            )
            params += [orjson.dumps(self.text).decode()[1:-1], self.text]
        if self.ts_from is not None:
            clauses.append("ts >= ?")
            params.append(self.ts_from)
        if self.ts_to is not None:
            clauses.append("ts < ?")
            params.append(self.ts_to)
        return " AND ".join(clauses), params


class LogPager:
    """Pages of one user's events under one filter, ``page_size`` events a page, in log order."""

    def __init__(self, store: Store, user: str, page_size: int = 50):
        self.store = store
        self.user = user
        self.filter = LogFilter()
        self._total: int | None = None
        self._counted_at = -1
        # page -> seq of its first event; and of its last event, for full pages only
        self._first: dict[int, int] = {}
        self._last: dict[int, int] = {}
        self._size = 0
        self.page_size = page_size

    @property
    def page_size(self) -> int:
        return self._size

    @page_size.setter
    def page_size(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"page_size must be at least 1, not {size}")
        if size != self._size:
            self._size = size
            self._first.clear()
            self._last.clear()

    def set_filter(self, f: LogFilter) -> None:
        if f != self.filter:
            self.filter = f
            self._total = None
            self._first.clear()
            self._last.clear()

    def total(self) -> int:
        """How many events match (re-counted when the log has grown)."""
        # Each read is an operation of its own (a widget's page turn is no operation
        # of the workbench), handed over when asked: another process can write between pages.
        with self.store.hold():
            if self._total is None or self._counted_at != self.store.last_seq:
                where, params = self.filter.where(self.user)
                row = self.store.con.execute(f"SELECT count(*) FROM events WHERE {where}", params)
                self._total = int(row.fetchone()[0])  # type: ignore[index]
                self._counted_at = self.store.last_seq
            return self._total

    def pages(self) -> int:
        return max(1, -(-self.total() // self.page_size))

    def page(self, n: int) -> tuple[int, list[LoggedEvent]]:
        """Page ``n`` (from 0; past the end: the last page) and its events."""
        total = self.total()
        n = max(0, min(n, self.pages() - 1))
        size = self.page_size
        if n == 0:
            rows = self._fetch("", [], "ASC", size)
        elif n - 1 in self._last:
            rows = self._fetch("seq > ?", [self._last[n - 1]], "ASC", size)
        elif n + 1 in self._first:
            rows = self._fetch("seq < ?", [self._first[n + 1]], "DESC", size)[::-1]
        else:
            # A jump: find where the page starts reading the seq column alone (a large OFFSET
            # over whole rows is twenty times slower), counting from the nearer end.
            skip = n * size
            where, params = self.filter.where(self.user)
            order, offset = ("ASC", skip) if skip <= total - skip else ("DESC", total - skip - 1)
            with self.store.hold():
                found = self.store.con.execute(
                    f"SELECT seq FROM events WHERE {where} ORDER BY seq {order} LIMIT 1 OFFSET ?",
                    [*params, offset],
                ).fetchall()
            rows = self._fetch("seq >= ?", [found[0][0]], "ASC", size) if found else []
        if rows:
            self._first[n] = rows[0].seq
            if len(rows) == size:
                self._last[n] = rows[-1].seq
        return n, rows

    def _fetch(
        self, extra: str, extra_params: list[Any], order: str, limit: int
    ) -> list[LoggedEvent]:
        where, params = self.filter.where(self.user)
        if extra:
            where += f" AND {extra}"
        with self.store.hold():
            cur = self.store.con.execute(
                f"SELECT {_COLUMNS} FROM events WHERE {where} ORDER BY seq {order} LIMIT ?",
                [*params, *extra_params, limit],
            )
            return _events(cur.fetchall())

    def kinds(self) -> dict[str, int]:
        """Each kind of event this user has, with its count."""
        with self.store.hold():
            rows = self.store.con.execute(
                "SELECT kind, count(*) FROM events WHERE user_id = ? GROUP BY kind ORDER BY kind",
                [self.user],
            ).fetchall()
        return {k: int(c) for k, c in rows}


def events_by_seq(store: Store, user: str, seqs: Iterable[int]) -> dict[int, LoggedEvent]:
    """The events of ``user`` with these seqs."""
    wanted = sorted(set(seqs))
    if not wanted:
        return {}
    with store.hold():
        rows = store.con.execute(
            f"SELECT {_COLUMNS} FROM events WHERE user_id = ? AND seq IN (SELECT unnest(?)) "
            "ORDER BY seq",
            [user, wanted],
        ).fetchall()
    return {ev.seq: ev for ev in _events(rows)}


def utterances_by_source(store: Store, user: str, sources: Iterable[str]) -> dict[str, LoggedEvent]:
    """The utterances of ``user`` with these sources (what ``derived_from`` names)."""
    wanted = sorted(set(sources))
    if not wanted:
        return {}
    with store.hold():
        rows = store.con.execute(
            f"SELECT {_COLUMNS} FROM events WHERE user_id = ? AND kind = 'utterance' "
            "AND source IN (SELECT unnest(?)) ORDER BY seq",
            [user, wanted],
        ).fetchall()
    return {ev.source: ev for ev in _events(rows) if ev.source is not None}


def _events(rows: list[tuple[Any, ...]]) -> list[LoggedEvent]:
    loads = orjson.loads
    return [
        LoggedEvent(s, rec, ts, kind, u, src, loads(payload), h)
        for s, rec, ts, kind, u, src, payload, h in rows
    ]
