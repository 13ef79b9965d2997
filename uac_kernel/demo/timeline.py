"""The demo's timeline: the events it collects in ts order, and the small formats (dates, money,
slugs) its stories write in."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta

__all__ = ["DEMO_USER"]


DEMO_USER = "Maya Okafor"


_FieldValue = bool | int | float | str | date | datetime | list[str]


_Event = dict[str, object]


_DEFAULT_START = date(2024, 1, 1)


_MONTHS = (
    "January", "February", "March", "April", "May", "June",
    "July", "August", "September", "October", "November", "December",
)  # fmt: skip


_SYMBOLS = {"GBP": "£", "EUR": "€", "JPY": "¥", "NGN": "₦"}


_HOSTILE_CODE = "\"); import os; os.system('x') #"


_TAX_PATH = "C:\\Users\\maya\\Documents\\tax\\2024"


@dataclass
class _Tx:
    """A transaction waiting for its key (keys are numbered in date order at the end)."""

    when: datetime
    fields: dict[str, _FieldValue]
    said: str | None
    duplicate_of: _Tx | None = None
    key: str = ""


class _Timeline:
    """Collects events out of order, then sorts, numbers and checks them."""

    def __init__(self, seed: int, start: date, days: int) -> None:
        self.rng = random.Random(seed)
        self.start = start
        self.days = days
        self.last_day = start + timedelta(days=days - 1)
        self.shift = start - _DEFAULT_START
        self.move = self.day("2025-06-01")
        self._items: list[tuple[datetime, int, _Event]] = []
        self._busy: list[tuple[datetime, datetime]] = []
        self._txs: list[_Tx] = []

    # dates of the default calendar, shifted to the requested start
    def day(self, iso: str) -> date:
        return date.fromisoformat(iso) + self.shift

    def at(self, iso: str) -> datetime:
        return datetime.fromisoformat(iso) + self.shift

    def home(self, d: date) -> tuple[str, str, str]:
        """(city, country, currency) of where Maya lives on `d`."""
        if d < self.move:
            return "Manchester", "United Kingdom", "GBP"
        return "Zürich", "Switzerland", "CHF"

    def _push(self, ts: datetime, event: _Event) -> None:
        self._items.append((ts, len(self._items), event))

    def say(self, ts: datetime, text: str) -> None:
        self._push(ts, {"kind": "utterance", "speaker": "user", "text": text})

    def add(
        self, ts: datetime, type_: str, key: str, fields: dict[str, _FieldValue], said: str = ""
    ) -> None:
        if said:
            self.say(ts, said)
        body = {k: _encode(v) for k, v in fields.items()}
        self._push(ts, {"kind": "fact", "op": "add", "type": type_, "key": key, "fields": body})

    def update(
        self, ts: datetime, type_: str, key: str, fields: dict[str, _FieldValue], said: str = ""
    ) -> None:
        if said:
            self.say(ts, said)
        body = {k: _encode(v) for k, v in fields.items()}
        self._push(ts, {"kind": "fact", "op": "update", "type": type_, "key": key, "fields": body})

    def retract(self, ts: datetime, type_: str, key: str, reason: str, said: str = "") -> None:
        if said:
            self.say(ts, said)
        self._push(
            ts, {"kind": "fact", "op": "retract", "type": type_, "key": key, "reason": reason}
        )

    def free(self, start: datetime, end: datetime) -> bool:
        return not any(s < end and start < e for s, e in self._busy)

    def reserve(self, start: datetime, end: datetime, *, may_overlap: bool = False) -> bool:
        """Take the slot unless it is taken (or overlapping is the point)."""
        if not may_overlap and not self.free(start, end):
            return False
        self._busy.append((start, end))
        return True

    def release(self, start: datetime, end: datetime) -> None:
        """Free a commitment's slot (it was cancelled or moved)."""
        self._busy.remove((start, end))

    def not_before_start(self, ts: datetime) -> datetime:
        """`ts`, or the first morning of the history if `ts` is earlier."""
        return max(ts, datetime.combine(self.start, time(8, 0)))

    def commit(
        self,
        ts: datetime,
        type_: str,
        key: str,
        start: datetime,
        end: datetime,
        fields: dict[str, _FieldValue],
        said: str = "",
        *,
        may_overlap: bool = False,
    ) -> bool:
        """Add a commitment (a record with `start`/`end` datetimes) unless its slot is taken."""
        if not self.reserve(start, end, may_overlap=may_overlap):
            return False
        self.add(ts, type_, key, {"start": start, "end": end, **fields}, said)
        return True

    def spend(
        self,
        when: datetime,
        amount: float,
        currency: str,
        category: str,
        merchant: str,
        said: str = "",
    ) -> _Tx:
        fields: dict[str, _FieldValue] = {
            "amount": round(float(amount), 0 if currency == "JPY" else 2),
            "currency": currency,
            "category": category,
            "merchant": merchant,
            "date": when.date(),
        }
        tx = _Tx(when, fields, said or None)
        self._txs.append(tx)
        return tx

    def events(self) -> list[_Event]:
        self._flush_transactions()
        lo = datetime.combine(self.start, time())
        hi = lo + timedelta(days=self.days)
        kept = sorted((item for item in self._items if lo <= item[0] < hi), key=lambda i: i[:2])
        out: list[_Event] = []
        facts = 0
        chats: dict[date, int] = {}
        for ts, _, body in kept:
            if body["kind"] == "fact":
                facts += 1
                source = f"demo-fact-{facts:04d}"
            else:
                chats[ts.date()] = chats.get(ts.date(), 0) + 1
                source = f"chat-{ts.date().isoformat()}#{chats[ts.date()]}"
            rest = {k: v for k, v in body.items() if k != "kind"}
            out.append({"kind": body["kind"], "ts": _encode(ts), **rest, "source": source})
        _check_ops(out)
        return out

    def _flush_transactions(self) -> None:
        ordered = sorted(enumerate(self._txs), key=lambda pair: (pair[1].when, pair[0]))
        for number, (_, tx) in enumerate(ordered, start=1):
            tx.key = f"tx-{number:04d}"
            self.add(tx.when, "Transaction", tx.key, tx.fields, tx.said or "")
        for tx in self._txs:
            if tx.duplicate_of is not None:
                when = datetime.combine(tx.when.date() + timedelta(days=1), time(9, 12))
                self.retract(
                    when,
                    "Transaction",
                    tx.key,
                    f"entered twice (duplicate of {tx.duplicate_of.key})",
                    said="Oops, I logged yesterday's grocery shop twice; ignore the second one.",
                )


def _encode(value: _FieldValue) -> object:
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, list):
        return list(value)
    return value


def _check_ops(events: list[_Event]) -> None:
    """Every update/retract targets a key added earlier and still current; keys are unique."""
    live: dict[str, object] = {}
    used: set[str] = set()
    for event in events:
        if event["kind"] != "fact":
            continue
        key = str(event["key"])
        if event["op"] == "add":
            if key in used:
                raise RuntimeError(f"demo generator bug: key {key!r} added twice")
            used.add(key)
            live[key] = event["type"]
        elif live.get(key) != event["type"]:
            raise RuntimeError(f"demo generator bug: {event['op']} of {key!r}, which is not live")
        elif event["op"] == "retract":
            del live[key]


def _fmt(d: date, *, year: bool = False) -> str:
    text = f"{d.day} {_MONTHS[d.month - 1]}"
    return f"{text} {d.year}" if year else text


def _years_later(d: date, years: int) -> date:
    try:
        return d.replace(year=d.year + years)
    except ValueError:  # 29 February
        return d.replace(year=d.year + years, day=28)


def _money(amount: float, currency: str) -> str:
    if currency == "JPY":
        return f"¥{amount:,.0f}"
    if currency in _SYMBOLS:
        return f"{_SYMBOLS[currency]}{amount:,.2f}"
    return f"{currency} {amount:,.2f}"


def _slug(text: str) -> str:
    kept = "".join(c if c.isascii() and c.isalnum() else "-" for c in text.lower())
    return "-".join(part for part in kept.split("-") if part)
