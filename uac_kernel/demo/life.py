"""The seeded synthetic demo user: two years in the life of Maya Okafor, as Event JSONL.

Maya is a UX researcher, born 1991, British with Nigerian parents (Grace and Emeka, in
Birmingham; brother Chidi). For the first seventeen months she lives in Manchester and works
at Northwind Health; in spring 2025 she takes a job at Alpenlicht AG and moves to Zürich.
She travels (16 trips booked, 15 taken, 9 of them abroad), runs, swims and later
climbs, reads, cooks, has mild asthma and, from mid-2024, high cholesterol. Money is in GBP
before the move and CHF after it, and in the local currency abroad. A `Transaction.amount`
is money spent (positive); the one refund is negative.

Most of the history is benign routine (groceries, rent, coffee, meetings, workouts, sleep,
meals). A few stories are planted for rules and demos. Dates below are for the default
`start=date(2024, 1, 1)`; another `start` shifts every date by the same number of days. A
shorter `days` cuts the history off and a longer one extends the routine; the closing return
window (story 5) always sits at the end, whatever `days` is.

Planted stories (type, key, when):

1. Allergy vs. prescription. `Allergy` `allergy-penicillin` (severe) is recorded on
   2024-02-09, after a GP check-up. On 2024-11-18, about nine months later, a walk-in centre
   prescribes `Medication` `med-2024-11-amoxicillin` (a penicillin, 500 mg three times a day,
   2024-11-18 to 2024-11-25, `active` true; updated to `active` false on 2024-11-25).
2. Statin and grapefruit. `Medication` `med-atorvastatin` starts 2024-09-02 at 10 mg after
   `Condition` `cond-high-cholesterol` (2024-08-20); on 2025-03-10 an `update` raises
   `dose_mg` to 20.0. On 2025-01-06 `FoodHabit` `habit-grapefruit-juice` ("grapefruit
   juice", most mornings) is added; both stay current to the end.
3. Passport validity. `Passport` `passport-uk` (recorded 2024-01-03) expires 2026-02-19.
   `Trip` `trip-2025-10-tokyo` (Japan, international) runs 2025-10-02 to 2025-10-12, and an
   `update` on 2025-10-09 corrects its `end` to 2025-10-14 (the return `Flight`
   `flight-2025-10-12-hnd-zrh` keeps its key and gets the new times). The expiry is about
   four months after the trip; `trip-2025-12-birmingham` (2025-12-20 to 2025-12-28) also
   ends within six months of it.
4. Double booking. On Tuesday 2025-04-15 `Appointment` `appt-2025-04-15-dentist`
   (14:00-14:45) overlaps `Meeting` `mtg-2025-04-15-design-review` (14:30-15:30). It is the
   only overlapping pair of commitments (Appointment, Meeting, Flight) in the history.
5. Closing return window. `Purchase` `purchase-2025-12-noise-cancelling-headphones` is
   bought 27 days before the last day of the history (2025-12-03) with `return_by` 30 days
   later (2026-01-02, three days after the last day, 2025-12-30). No other deadline falls
   that close to the end.
6. The move. `Residence` `residence-manchester` (since 2021-09-01) gets an `update` with
   `until` 2025-05-31 and is then retracted ("moved to Zürich") on 2025-06-01, when
   `residence-zurich` is added: exactly one current Residence at the end. `Job`
   `job-northwind` ends the same way on 2025-05-23; `job-alpenlicht` is added 2025-03-18.
7. Corrections. `trip-2025-02-reykjavik` (booked 2024-12-05) and its two flights are
   retracted on 2025-01-20 ("cancelled: the airline dropped the route"), with a refund
   transaction. The groceries of Saturday 2024-06-15 are entered twice; the second
   transaction is retracted the next day ("entered twice"). `Subscription` `sub-netflix`
   goes from 10.99 to 12.99 GBP on 2024-09-25 and becomes 18.9 CHF after the move;
   `sub-gym-manchester` is updated to `cancelled` true on 2025-05-20.

Utterances (`kind` "utterance", `speaker` "user") state what the facts beside them state and
include awkward strings on purpose: double quotes, a Windows path with backslashes, a
newline, "Zürich", "東京" and a code-like `"); import os; os.system('x') #`.

Keys are readable slugs. Those of the planted records above (trips, medications, tasks, ...)
are fixed; keys that name a day (transactions aside: flights, appointments, meetings, meals,
workouts, sleep logs, purchases) use the actual, shifted date.

Fact events carry stable sources "demo-fact-0001", ...; utterances carry "chat-<date>#<n>".
The same arguments always give the same events (nothing reads the clock).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from pathlib import Path

from uac_kernel.core.outputs import JSONL, Output

__all__ = ["DEMO_USER", "demo_events", "demo_jsonl", "write_demo_jsonl"]

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


def demo_events(
    seed: int = 7, start: date = _DEFAULT_START, days: int = 730
) -> list[dict[str, object]]:
    """The demo user's history as Event JSONL objects (DESIGN.md format), in ts order.

    `seed` varies the routine (amounts, workouts, meals, which turns are chatted about);
    the planted stories of the module docstring do not depend on it. Every `ts` lies in
    `[start, start + days)`.
    """
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}; the default is 730 (two years)")
    tl = _Timeline(seed, start, days)
    away = _trips(tl)
    _onboarding(tl)
    _health(tl)
    _home_and_work(tl)
    _subscriptions(tl)
    _purchases(tl)
    _books(tl)
    _fixed_appointments(tl)
    _routine(tl, away)
    return tl.events()


def demo_jsonl(seed: int = 7) -> list[str]:
    """demo_events() as the lines of its JSONL file."""
    return [json.dumps(event, ensure_ascii=False) + "\n" for event in demo_events(seed)]


def write_demo_jsonl(path: Path, seed: int = 7) -> int:
    """Write demo_events() one JSON object per line; return the number of lines."""
    lines = demo_jsonl(seed)
    Output(path, JSONL).write_text(lines)
    return len(lines)


# --------------------------------------------------------------------------- the timeline


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


# --------------------------------------------------------------------------- travel


@dataclass(frozen=True)
class _Trip:
    key: str
    destination: str
    country: str
    start: str
    end: str
    purpose: str
    booked: str
    said: str
    companions: tuple[str, ...] = ()
    flight: tuple[str, str, str, str, str, str, int] | None = None  # out, back, from, to, deps, min
    booking: tuple[str, float] = ("Trainline", 90.0)
    local: tuple[str, float, tuple[str, ...]] | None = None  # currency, daily spend, merchants


_TRIPS = (
    _Trip(
        "trip-2024-02-edinburgh", "Edinburgh", "United Kingdom", "2024-02-23", "2024-02-25",
        "weekend away", "2024-02-01T20:30",
        "Booked a weekend in Edinburgh with Tom, {start} to {end}.",
        ("Tom Haworth",), booking=("LNER", 112.4),
    ),
    _Trip(
        "trip-2024-03-lisbon", "Lisbon", "Portugal", "2024-03-14", "2024-03-18", "holiday",
        "2024-02-12T21:05", "Lisbon is booked! Flying out {start}, back {end}, staying with Ana.",
        ("Ana Ferreira",), ("TP1331", "TP1330", "MAN", "LIS", "07:10", "19:05", 170),
        ("TAP Air Portugal", 214.0), ("EUR", 45.0, ("Time Out Market", "Pastéis de Belém")),
    ),
    _Trip(
        "trip-2024-05-london", "London", "United Kingdom", "2024-05-21", "2024-05-23",
        "conference", "2024-04-30T12:15",
        "Priya and I are going to the UX London conference, {start} to {end}.",
        ("Priya Shah",), booking=("Avanti West Coast", 96.5),
    ),
    _Trip(
        "trip-2024-07-lagos", "Lagos", "Nigeria", "2024-07-05", "2024-07-19", "family visit",
        "2024-05-10T19:40",
        "Going home to Lagos with Mum and Chidi from {start} to {end}, first time in five years!",
        ("Grace Okafor", "Chidi Okafor"), ("VS411", "VS412", "MAN", "LOS", "10:20", "22:50", 390),
        ("Virgin Atlantic", 868.0), ("NGN", 42000.0, ("Shoprite Lekki", "Terra Kulture")),
    ),
    _Trip(
        "trip-2024-08-lake-district", "Keswick", "United Kingdom", "2024-08-16", "2024-08-18",
        "hiking", "2024-07-28T18:20",
        "Hiking weekend in the Lake District with Tom and Sam, {start} to {end}.",
        ("Tom Haworth", "Sam O'Neill"), booking=("Keswick YHA", 138.0),
    ),
    _Trip(
        "trip-2024-10-copenhagen", "Copenhagen", "Denmark", "2024-10-08", "2024-10-11", "work",
        "2024-09-16T11:00", "Work trip: Copenhagen with Priya from {start} to {end}.",
        ("Priya Shah",), ("SK2548", "SK2547", "MAN", "CPH", "07:00", "18:40", 115),
        ("SAS", 246.0), ("DKK", 380.0, ("Torvehallerne", "Paludan Bogcafé")),
    ),
    _Trip(
        "trip-2024-12-birmingham", "Birmingham", "United Kingdom", "2024-12-23", "2024-12-27",
        "Christmas with family", "2024-11-30T10:30",
        "Christmas at Mum and Dad's in Birmingham, {start} to {end}.",
        booking=("Trainline", 48.2),
    ),
    _Trip(
        "trip-2025-02-reykjavik", "Reykjavik", "Iceland", "2025-02-14", "2025-02-18", "holiday",
        "2024-12-05T20:45", "Tom and I booked Reykjavik for {start} to {end}: northern lights!",
        ("Tom Haworth",), ("FI441", "FI440", "MAN", "KEF", "11:30", "07:40", 165),
        ("Icelandair", 412.0),
    ),
    _Trip(
        "trip-2025-03-zurich", "Zürich", "Switzerland", "2025-03-04", "2025-03-06",
        "job interview", "2025-02-20T19:10",
        "Flying to Zürich {start} to {end} for the final interview at Alpenlicht.",
        flight=("LX391", "LX390", "MAN", "ZRH", "06:50", "17:35", 110),
        booking=("SWISS", 289.0), local=("CHF", 70.0, ("Sprüngli", "Hiltl")),
    ),
    _Trip(
        "trip-2025-04-berlin", "Berlin", "Germany", "2025-04-25", "2025-04-28",
        "friend's wedding", "2025-03-02T16:40",
        "Ana's getting married in Berlin! I'm there {start} to {end}.",
        ("Ana Ferreira",), ("U21873", "U21874", "MAN", "BER", "08:15", "20:05", 120),
        ("easyJet", 158.0), ("EUR", 55.0, ("Markthalle Neun", "Mustafa's Gemüse Kebap")),
    ),
    _Trip(
        "trip-2025-07-lucerne", "Lucerne", "Switzerland", "2025-07-19", "2025-07-20",
        "weekend away", "2025-07-06T18:00",
        "Jonas and I are doing Lucerne and Mount Pilatus, {start} to {end}.",
        ("Jonas Müller",), booking=("SBB", 64.0),
    ),
    _Trip(
        "trip-2025-08-manchester", "Manchester", "United Kingdom", "2025-08-22", "2025-08-26",
        "visiting friends", "2025-07-14T21:30",
        "Back to Manchester {start} to {end} to see Tom and Sam.",
        flight=("LX390", "LX391", "ZRH", "MAN", "09:40", "18:30", 115),
        booking=("SWISS", 312.0), local=("GBP", 40.0, ("Rudy's Pizza", "Mackie Mayor")),
    ),
    _Trip(
        "trip-2025-09-lugano", "Lugano", "Switzerland", "2025-09-13", "2025-09-14",
        "weekend away", "2025-08-31T17:25",
        "Solo weekend in Lugano, {start} to {end}. Lake and gelato.",
        booking=("SBB", 88.0),
    ),
    _Trip(
        "trip-2025-10-tokyo", "Tokyo", "Japan", "2025-10-02", "2025-10-12", "holiday",
        "2025-07-01T20:00", "東京 here we come: Jonas and I fly out {start} and back {end}!",
        ("Jonas Müller",), ("LX160", "LX161", "ZRH", "HND", "13:05", "10:55", 815),
        ("SWISS", 1340.0), ("JPY", 9000.0, ("Ichiran Shibuya", "Tsutaya Daikanyama")),
    ),
    _Trip(
        "trip-2025-11-milan", "Milan", "Italy", "2025-11-21", "2025-11-23", "weekend away",
        "2025-10-30T19:50", "Meeting Ana in Milan {start} to {end}, going by train.",
        ("Ana Ferreira",), booking=("SBB", 96.0),
        local=("EUR", 50.0, ("Luini", "Pasticceria Marchesi")),
    ),
    _Trip(
        "trip-2025-12-birmingham", "Birmingham", "United Kingdom", "2025-12-20", "2025-12-28",
        "Christmas with family", "2025-10-26T11:45",
        "Flights home for Christmas: Birmingham {start} to {end}.",
        flight=("LX450", "LX451", "ZRH", "BHX", "12:10", "14:20", 105),
        booking=("SWISS", 365.0),
        local=("GBP", 35.0, ("Selfridges Birmingham", "Digbeth Dining Club")),
    ),
)  # fmt: skip

_CANCELLED = "trip-2025-02-reykjavik"
_TOKYO = "trip-2025-10-tokyo"


def _trips(tl: _Timeline) -> set[date]:
    """Book every trip (with flights, booking and local spending); return the days away."""
    away: set[date] = set()
    for trip in _TRIPS:
        first, last = tl.day(trip.start), tl.day(trip.end)
        if trip.key == _TOKYO:
            last = tl.day("2025-10-14")
        booked = tl.at(trip.booked)
        home_country = tl.home(first)[1]
        currency = tl.home(booked.date())[2]
        fields: dict[str, _FieldValue] = {
            "destination": trip.destination,
            "country": trip.country,
            "start": first,
            "end": tl.day(trip.end),
            "international": trip.country != home_country,
            "purpose": trip.purpose,
        }
        if trip.companions:
            fields["companions"] = list(trip.companions)
        said = trip.said.format(start=_fmt(first), end=_fmt(tl.day(trip.end)))
        tl.add(booked, "Trip", trip.key, fields, said)
        merchant, price = trip.booking
        tl.spend(booked + timedelta(minutes=4), price, currency, "travel", merchant)
        flights = _flights(tl, trip, booked + timedelta(minutes=2))
        if trip.key == _CANCELLED:
            when = tl.at("2025-01-20T12:10")
            reason = "cancelled: the airline dropped the route"
            tl.retract(
                when,
                "Trip",
                trip.key,
                reason,
                said="Bad news: Icelandair dropped our route, so Reykjavik is off. Refund coming.",
            )
            for key, start, end in flights:
                tl.retract(when + timedelta(minutes=1), "Flight", key, reason)
                tl.release(start, end)
            tl.spend(when + timedelta(days=6), -price, currency, "refund", merchant)
            continue
        away.update(first + timedelta(days=i) for i in range((last - first).days + 1))
        if trip.local:
            local_currency, daily, merchants = trip.local
            for i in range((last - first).days + 1):
                if tl.rng.random() < 0.6:
                    when = datetime.combine(first + timedelta(days=i), time(13 + i % 6, 5 * i % 60))
                    amount = daily * tl.rng.uniform(0.5, 1.6)
                    category = tl.rng.choice(("eating out", "travel", "shopping"))
                    tl.spend(when, amount, local_currency, category, tl.rng.choice(merchants))
    _tokyo_correction(tl)
    return away


def _flights(tl: _Timeline, trip: _Trip, ts: datetime) -> list[tuple[str, datetime, datetime]]:
    if trip.flight is None:
        return []
    out_no, back_no, origin, dest, dep_out, dep_back, minutes = trip.flight
    booked = []
    legs = (
        (out_no, origin, dest, trip.start, dep_out),
        (back_no, dest, origin, trip.end, dep_back),
    )
    for number, frm, to, iso_day, dep in legs:
        start = tl.at(f"{iso_day}T{dep}")
        key = f"flight-{start.date().isoformat()}-{frm.lower()}-{to.lower()}"
        fields: dict[str, _FieldValue] = {
            "title": f"{frm} → {to}",
            "flight_no": number,
            "from_airport": frm,
            "to_airport": to,
        }
        end = start + timedelta(minutes=minutes)
        if tl.commit(ts, "Flight", key, start, end, fields):
            booked.append((key, start, end))
    return booked


def _tokyo_correction(tl: _Timeline) -> None:
    ts = tl.at("2025-10-09T21:00")
    new_end = tl.day("2025-10-14")
    tl.update(
        ts,
        "Trip",
        _TOKYO,
        {"end": new_end},
        said=f"Loving 東京 so much that I've moved my flight home to {_fmt(new_end)}.",
    )
    old, new = tl.at("2025-10-12T10:55"), tl.at("2025-10-14T10:55")
    flight = timedelta(minutes=815)
    tl.release(old, old + flight)
    if not tl.reserve(new, new + flight):
        raise RuntimeError("demo generator bug: the moved Tokyo flight overlaps something")
    # the flight keeps the key of its original date; only its times change
    tl.update(
        ts + timedelta(minutes=1),
        "Flight",
        f"flight-{old.date().isoformat()}-hnd-zrh",
        {"start": new, "end": new + flight},
    )


# --------------------------------------------------------------------------- people and health


_PEOPLE = (
    ("Grace Okafor", "mother", "1963-04-22", "Birmingham"),
    ("Emeka Okafor", "father", "1960-11-03", "Birmingham"),
    ("Chidi Okafor", "brother", "1994-08-09", "Leeds"),
    ("Ana Ferreira", "friend", "1990-12-01", "Lisbon"),
    ("Tom Haworth", "friend", "1989-07-17", "Manchester"),
    ("Sam O'Neill", "friend", "1991-02-28", "Manchester"),
    ("Priya Shah", "manager", "1985-05-30", "Manchester"),
)


def _onboarding(tl: _Timeline) -> None:
    """The first week: who Maya is, the people around her, her habits."""
    expires = tl.day("2026-02-19")
    tl.add(
        tl.at("2024-01-03T19:30"),
        "Passport",
        "passport-uk",
        {
            "holder": DEMO_USER,
            "number": "548213097",
            "country": "United Kingdom",
            "expires": expires,
            "blank_pages": 5,
        },
        f"My passport number is 548213097; it expires on {_fmt(expires, year=True)}.",
    )
    ts = tl.at("2024-01-04T20:00")
    for i, (name, relation, birthday, city) in enumerate(_PEOPLE):
        fields: dict[str, _FieldValue] = {
            "name": name,
            "relation": relation,
            "birthday": date.fromisoformat(birthday),
            "city": city,
        }
        said = ""
        if name == "Sam O'Neill":
            said = f"Sam O'Neill's new band is literally called \"{_HOSTILE_CODE}\". He loves it."
        elif relation in ("mother", "brother"):
            born = _fmt(date.fromisoformat(birthday))
            said = f"My {relation} {name.split()[0]} lives in {city}; birthday {born}."
        tl.add(ts + timedelta(minutes=3 * i), "Person", f"person-{_slug(name)}", fields, said)
    tl.add(
        tl.at("2024-01-05T08:10"),
        "FoodHabit",
        "habit-oat-flat-white",
        {"item": "oat flat white", "frequency": "daily", "since": tl.day("2022-06-01")},
        "I can't start the day without an oat flat white.",
    )
    tl.add(
        tl.at("2024-01-05T08:12"),
        "FoodHabit",
        "habit-weekday-vegetarian",
        {"item": "vegetarian on weekdays", "frequency": "weekdays", "since": tl.day("2023-01-01")},
        "I eat vegetarian Monday to Friday.",
    )
    tl.update(
        tl.at("2025-01-12T17:00"),
        "Person",
        "person-chidi-okafor",
        {"city": "London"},
        "Chidi has moved to London for his new job.",
    )
    tl.add(
        tl.at("2025-03-18T18:05"),
        "Person",
        "person-lena-brunner",
        {
            "name": "Lena Brunner",
            "relation": "manager",
            "birthday": date(1986, 9, 12),
            "city": "Zürich",
        },
    )
    tl.add(
        tl.at("2025-06-20T18:40"),
        "Person",
        "person-noemi-keller",
        {
            "name": "Noemi Keller",
            "relation": "colleague",
            "birthday": date(1993, 3, 7),
            "city": "Zürich",
        },
        "Noemi from the research team showed me the best Älplermagronen in town.",
    )
    tl.add(
        tl.at("2025-06-28T21:10"),
        "Person",
        "person-jonas-muller",
        {
            "name": "Jonas Müller",
            "relation": "friend",
            "birthday": date(1992, 1, 15),
            "city": "Zürich",
        },
        "Met Jonas Müller at the climbing gym; he's promised to teach me to lead climb.",
    )


def _health(tl: _Timeline) -> None:
    med = "Medication"
    tl.add(
        tl.at("2024-01-04T19:40"),
        "Condition",
        "cond-asthma",
        {"name": "asthma", "since": tl.day("1998-06-01"), "severity": "mild"},
        "I have mild asthma, since I was a kid.",
    )
    tl.add(
        tl.at("2024-01-04T19:42"),
        med,
        "med-salbutamol",
        {
            "name": "salbutamol inhaler",
            "dose_mg": 0.1,
            "start": tl.day("2015-03-01"),
            "active": True,
            "times_per_day": 2,
            "prescribed_by": "Dr Helen Marsh",
        },
        "I use a salbutamol inhaler, 100 micrograms, up to twice a day.",
    )
    # story 1: penicillin allergy, then amoxicillin nine months later
    tl.add(
        tl.at("2024-02-09T20:15"),
        "Allergy",
        "allergy-penicillin",
        {
            "substance": "penicillin",
            "severity": "severe",
            "reaction": "hives and lip swelling",
            "noted": tl.day("2024-02-09"),
        },
        "The GP asked about allergies: I'm allergic to penicillin. As a kid I came out in "
        "hives and my lips swelled up.",
    )
    for year in ("2024", "2025"):
        key = f"med-{year}-cetirizine"
        tl.add(
            tl.at(f"{year}-03-28T09:00"),
            med,
            key,
            {
                "name": "cetirizine",
                "dose_mg": 10.0,
                "start": tl.day(f"{year}-03-28"),
                "active": True,
                "times_per_day": 1,
                "prescribed_by": "pharmacy",
            },
            "Hay fever season again. Back on cetirizine, 10 mg a day.",
        )
        tl.update(
            tl.at(f"{year}-08-01T09:00"),
            med,
            key,
            {"active": False, "end": tl.day(f"{year}-07-31")},
        )
    tl.add(
        tl.at("2024-03-28T09:02"),
        "Allergy",
        "allergy-birch-pollen",
        {
            "substance": "birch pollen",
            "severity": "mild",
            "reaction": "hay fever",
            "noted": tl.day("2024-03-28"),
        },
    )
    # story 2: high cholesterol, atorvastatin, later grapefruit juice
    tl.add(
        tl.at("2024-08-20T12:30"),
        "Condition",
        "cond-high-cholesterol",
        {"name": "high cholesterol", "since": tl.day("2024-08-20"), "severity": "moderate"},
        "Blood test results: my LDL cholesterol is high. The GP says it runs in the family.",
    )
    tl.add(
        tl.at("2024-09-02T08:30"),
        med,
        "med-atorvastatin",
        {
            "name": "atorvastatin",
            "dose_mg": 10.0,
            "start": tl.day("2024-09-02"),
            "active": True,
            "times_per_day": 1,
            "prescribed_by": "Dr Helen Marsh",
        },
        "Started atorvastatin today, 10 mg every evening.",
    )
    tl.add(
        tl.at("2025-01-06T07:45"),
        "FoodHabit",
        "habit-grapefruit-juice",
        {"item": "grapefruit juice", "frequency": "most mornings", "since": tl.day("2025-01-06")},
        "New year, new me: a big glass of grapefruit juice with breakfast most mornings.",
    )
    tl.update(
        tl.at("2025-03-10T12:00"),
        med,
        "med-atorvastatin",
        {"dose_mg": 20.0},
        "The GP doubled my atorvastatin to 20 mg; the cholesterol hasn't come down enough.",
    )
    tl.add(
        tl.at("2024-11-18T19:00"),
        "Condition",
        "cond-chest-infection",
        {"name": "chest infection", "since": tl.day("2024-11-15"), "severity": "moderate"},
    )
    tl.add(
        tl.at("2024-11-18T19:05"),
        med,
        "med-2024-11-amoxicillin",
        {
            "name": "amoxicillin",
            "dose_mg": 500.0,
            "start": tl.day("2024-11-18"),
            "end": tl.day("2024-11-25"),
            "active": True,
            "times_per_day": 3,
            "prescribed_by": "walk-in centre",
        },
        "The walk-in centre gave me amoxicillin for my chest infection: 500 mg three times a "
        "day for a week.",
    )
    tl.update(
        tl.at("2024-11-25T21:00"),
        med,
        "med-2024-11-amoxicillin",
        {"active": False},
        "Finished the antibiotics today.",
    )
    tl.update(
        tl.at("2024-11-29T18:30"),
        "Condition",
        "cond-chest-infection",
        {"resolved": True},
        "Chest feels clear again, the infection is gone.",
    )


def _home_and_work(tl: _Timeline) -> None:
    tl.add(
        tl.at("2024-01-02T20:10"),
        "Residence",
        "residence-manchester",
        {"city": "Manchester", "country": "United Kingdom", "since": tl.day("2021-09-01")},
        f"Hi! I'm Maya Okafor. I've lived in Manchester, in Ancoats, since "
        f"{_fmt(tl.day('2021-09-01'), year=True)}.",
    )
    tl.add(
        tl.at("2024-01-02T20:12"),
        "Job",
        "job-northwind",
        {"employer": "Northwind Health", "role": "UX researcher", "since": tl.day("2021-10-04")},
        "I work as a UX researcher at Northwind Health.",
    )
    tl.update(
        tl.at("2024-09-02T18:00"),
        "Job",
        "job-northwind",
        {"role": "senior UX researcher"},
        "Promoted to senior UX researcher today!",
    )
    tl.add(
        tl.at("2025-03-18T18:00"),
        "Job",
        "job-alpenlicht",
        {"employer": "Alpenlicht AG", "role": "lead UX researcher", "since": tl.day("2025-06-16")},
        f"I said yes! Lead UX researcher at Alpenlicht AG in Zürich, starting "
        f"{_fmt(tl.day('2025-06-16'))}. My manager will be Lena Brunner.",
    )
    tl.update(
        tl.at("2025-05-23T18:00"),
        "Job",
        "job-northwind",
        {"until": tl.day("2025-05-23")},
        "Last day at Northwind today. Cake, speeches, tears.",
    )
    tl.retract(
        tl.at("2025-05-23T18:01"), "Job", "job-northwind", "left Northwind for a job in Zürich"
    )
    tl.spend(tl.at("2025-05-28T10:00"), 2380.0, "GBP", "moving", "Britannia Movers")
    moved = tl.at("2025-06-01T10:00")
    tl.update(
        moved,
        "Residence",
        "residence-manchester",
        {"until": tl.day("2025-05-31")},
        f"Officially moved: I live in Zürich now, since {_fmt(tl.move)}. Goodbye Manchester!",
    )
    tl.retract(moved + timedelta(minutes=1), "Residence", "residence-manchester", "moved to Zürich")
    tl.add(
        moved + timedelta(minutes=2),
        "Residence",
        "residence-zurich",
        {"city": "Zürich", "country": "Switzerland", "since": tl.day("2025-06-01")},
    )
    tl.add(
        tl.at("2024-12-02T19:00"),
        "Task",
        "task-2024-tax-return",
        {
            "title": "File self-assessment tax return",
            "due": tl.day("2025-01-31"),
            "done": False,
            "notes": f"receipts in {_TAX_PATH}",
        },
        f"Reminder to self: tax return due {_fmt(tl.day('2025-01-31'))}. Receipts are in "
        f"{_TAX_PATH}.",
    )
    tl.update(
        tl.at("2025-01-26T16:20"),
        "Task",
        "task-2024-tax-return",
        {"done": True},
        "Tax return filed. Never leaving it this late again.",
    )
    tl.add(
        tl.at("2025-06-02T08:30"),
        "Task",
        "task-zurich-registration",
        {"title": "Register at the Kreisbüro", "due": tl.day("2025-06-14"), "done": False},
        "I have to register at the Kreisbüro within 14 days of moving.",
    )
    tl.update(tl.at("2025-06-03T11:00"), "Task", "task-zurich-registration", {"done": True})
    # the passport fills up
    tl.update(tl.at("2024-07-20T12:00"), "Passport", "passport-uk", {"blank_pages": 4})
    tl.update(
        tl.at("2025-10-15T19:00"),
        "Passport",
        "passport-uk",
        {"blank_pages": 3},
        "Two more stamps from Japan. Only 3 blank pages left in my passport.",
    )
    # a meal worth remembering
    tl.add(
        tl.at("2024-12-25T21:00"),
        "Meal",
        f"meal-{tl.day('2024-12-25').isoformat()}-dinner",
        {
            "name": 'Mum\'s "famous" jollof',
            "date": tl.day("2024-12-25"),
            "meal": "dinner",
            "home_cooked": True,
            "with_people": ["Grace Okafor", "Emeka Okafor", "Chidi Okafor"],
        },
        'Mum made her "famous" jollof for Christmas dinner. Still the best.',
    )


# --------------------------------------------------------------------------- money


def _subscriptions(tl: _Timeline) -> None:
    sub = "Subscription"
    tl.add(
        tl.at("2024-01-05T21:00"),
        sub,
        "sub-netflix",
        {
            "name": "Netflix",
            "price": 10.99,
            "currency": "GBP",
            "period": "monthly",
            "billing_day": 14,
        },
        "I pay £10.99 a month for Netflix.",
    )
    tl.add(
        tl.at("2024-01-05T21:02"),
        sub,
        "sub-gym-manchester",
        {
            "name": "PureGym Manchester",
            "price": 34.0,
            "currency": "GBP",
            "period": "monthly",
            "billing_day": 1,
        },
    )
    tl.add(
        tl.at("2024-01-05T21:04"),
        sub,
        "sub-cloud-storage",
        {
            "name": "Cloud storage 2 TB",
            "price": 89.99,
            "currency": "GBP",
            "period": "yearly",
            "renews_on": tl.day("2024-04-12"),
        },
        f"Cloud storage is £89.99 a year; it renews on {_fmt(tl.day('2024-04-12'))}.",
    )
    tl.update(
        tl.at("2024-09-25T20:00"),
        sub,
        "sub-netflix",
        {"price": 12.99},
        "Netflix is going up to £12.99 a month. Grr.",
    )
    for renewed, next_time in (("2024-04-12", "2025-04-12"), ("2025-04-12", "2026-04-12")):
        when = tl.at(f"{renewed}T08:00")
        tl.update(when, sub, "sub-cloud-storage", {"renews_on": tl.day(next_time)})
    tl.add(
        tl.at("2025-03-20T20:30"),
        sub,
        "sub-duolingo",
        {
            "name": "Duolingo Super",
            "price": 59.99,
            "currency": "GBP",
            "period": "yearly",
            "renews_on": tl.day("2026-03-20"),
        },
        "Paid for a year of Duolingo, time to learn German properly.",
    )
    tl.update(
        tl.at("2025-05-20T19:00"),
        sub,
        "sub-gym-manchester",
        {"cancelled": True},
        f"Cancelled my PureGym membership; the last payment was on {_fmt(tl.day('2025-05-01'))}.",
    )
    tl.update(
        tl.at("2025-06-05T20:00"),
        sub,
        "sub-netflix",
        {"price": 18.9, "currency": "CHF"},
        "Netflix switched me to Swiss pricing: CHF 18.90 a month.",
    )
    tl.add(
        tl.at("2025-06-10T19:00"),
        sub,
        "sub-climbing-zurich",
        {
            "name": "Kletterhalle Limmat",
            "price": 89.0,
            "currency": "CHF",
            "period": "monthly",
            "billing_day": 10,
        },
        "Joined the Kletterhalle Limmat climbing gym, CHF 89 a month.",
    )


_PURCHASES = (
    ("2024-01-13", "running shoes", "Runners Need", 120.0, 30, 0),
    ("2024-03-02", "e-reader", "Currys", 149.99, 30, 2),
    ("2024-09-14", "standing desk", "IKEA", 289.0, 365, 5),
    ("2025-06-14", "commuter bike", "Velo Zürich", 1150.0, 14, 2),
    ("2025-07-05", "espresso machine", "Galaxus", 399.0, 14, 2),
    ("2025-09-06", "hiking boots", "Transa", 229.0, 30, 0),
    ("2025-10-25", "winter coat", "Manor", 239.0, 30, 0),
)


def _purchases(tl: _Timeline) -> None:
    def buy(bought: date, item: str, merchant: str, price: float, ret: int, warranty: int) -> None:
        currency = tl.home(bought)[2]
        fields: dict[str, _FieldValue] = {
            "item": item,
            "merchant": merchant,
            "price": price,
            "currency": currency,
            "bought": bought,
            "return_by": bought + timedelta(days=ret),
        }
        if warranty:
            fields["warranty_until"] = _years_later(bought, warranty)
        when = datetime.combine(bought, time(16, 40))
        key = f"purchase-{bought.isoformat()[:7]}-{_slug(item)}"
        said = f"Bought {item} at {merchant} for {_money(price, currency)}."
        if ret <= 30 and bought >= tl.last_day - timedelta(days=ret):
            said += f" {ret} days to return them if they're not great."
        tl.add(when, "Purchase", key, fields, said)
        tl.spend(when + timedelta(minutes=1), price, currency, "shopping", merchant)

    for iso, item, merchant, price, ret, warranty in _PURCHASES:
        buy(tl.day(iso), item, merchant, price, ret, warranty)
    # story 5: the return window closes three days after the last day of the history
    bought = tl.last_day - timedelta(days=27)
    if bought >= tl.start:
        buy(bought, "noise-cancelling headphones", "Digitec", 279.0, 30, 2)


_BOOKS = (
    ("2024-01-28", "The Design of Everyday Things", "Don Norman"),
    ("2024-03-10", "Small Things Like These", "Claire Keegan"),
    ("2024-04-21", "Americanah", "Chimamanda Ngozi Adichie"),
    ("2024-06-09", "Things Fall Apart", "Chinua Achebe"),
    ("2024-08-04", "Surely You're Joking, Mr. Feynman!", "Richard P. Feynman"),
    ("2024-09-29", "The Overstory", "Richard Powers"),
    ("2024-11-24", "Just Enough Research", "Erika Hall"),
    ("2025-01-19", "Klara and the Sun", "Kazuo Ishiguro"),
    ("2025-03-30", "Thinking, Fast and Slow", "Daniel Kahneman"),
    ("2025-05-11", "Heidi", "Johanna Spyri"),
    ("2025-07-13", "Der Richter und sein Henker", "Friedrich Dürrenmatt"),
    ("2025-09-21", "東京奇譚集", "村上春樹 (Haruki Murakami)"),
    ("2025-11-09", "Tomorrow, and Tomorrow, and Tomorrow", "Gabrielle Zevin"),
    ("2025-12-14", "The Remains of the Day", "Kazuo Ishiguro"),
)


def _books(tl: _Timeline) -> None:
    for iso, title, author in _BOOKS:
        finished = tl.day(iso)
        rating = tl.rng.choice((3, 4, 4, 4, 5, 5))
        if title == "The Overstory":
            rating = 4  # raised to 5 by the update below
        key = f"book-{_slug(title) or finished.isoformat()}"
        said = f'Finished "{title}" by {author}. {rating} out of 5.'
        fields: dict[str, _FieldValue] = {
            "title": title,
            "author": author,
            "finished": finished,
            "rating": rating,
        }
        tl.add(datetime.combine(finished, time(22, 15)), "Book", key, fields, said)
    tl.update(
        tl.at("2024-10-20T10:00"),
        "Book",
        "book-the-overstory",
        {"rating": 5},
        "Still thinking about The Overstory weeks later. Make that a 5.",
    )


# --------------------------------------------------------------------------- scheduling


def _fixed_appointments(tl: _Timeline) -> None:
    def book(slug: str, title: str, ts: str, start: str, minutes: int, where: str) -> datetime:
        begin = tl.at(start)
        key = f"appt-{begin.date().isoformat()}-{slug}"
        fields: dict[str, _FieldValue] = {"title": title, "location": where}
        tl.commit(tl.at(ts), "Appointment", key, begin, begin + timedelta(minutes=minutes), fields)
        return begin

    def said(ts: str, text: str) -> None:
        tl.say(tl.at(ts), text)

    gp, dentist = "Ancoats Medical Practice", "Deansgate Dental"
    book("gp", "GP check-up", "2024-02-02T09:00", "2024-02-09T10:00", 20, gp)
    book("dentist", "Dentist check-up", "2024-04-02T12:00", "2024-04-16T09:00", 45, dentist)
    said("2024-07-30T09:10", f"Booked a blood test for {_fmt(tl.day('2024-08-06'))}, 8:30.")
    book("blood-test", "Blood test", "2024-07-30T09:10", "2024-08-06T08:30", 15, gp)
    book("gp", "GP: blood test results", "2024-08-07T10:00", "2024-08-20T11:00", 15, gp)
    book("dentist", "Dentist check-up", "2024-10-01T12:30", "2024-10-15T09:00", 45, dentist)
    said("2024-11-18T16:00", "Can't shake this cough, going to the walk-in centre tonight.")
    book(
        "walk-in",
        "Walk-in centre",
        "2024-11-18T16:00",
        "2024-11-18T17:30",
        45,
        "Manchester Walk-in Centre",
    )
    book("gp", "GP: cholesterol review", "2025-02-24T09:00", "2025-03-10T10:30", 20, gp)
    # story 4: the dentist at 14:00 and the design review at 14:30 on the same day
    said("2025-03-25T13:00", f"Dentist check-up booked for {_fmt(tl.day('2025-04-15'))} at 2pm.")
    book("dentist", "Dentist check-up", "2025-03-25T13:00", "2025-04-15T14:00", 45, dentist)
    review = tl.at("2025-04-15T14:30")
    tl.commit(
        tl.at("2025-04-11T16:45"),
        "Meeting",
        f"mtg-{review.date().isoformat()}-design-review",
        review,
        review + timedelta(hours=1),
        {
            "title": "Design review: onboarding flow",
            "attendees": ["Priya Shah", "Design team"],
            "remote": False,
        },
        f"Priya moved the design review to {_fmt(review.date())}, 14:30 to 15:30.",
        may_overlap=True,
    )
    said("2025-05-30T10:00", f"Kreisbüro registration on {_fmt(tl.day('2025-06-03'))}, 9:30.")
    book(
        "kreisbuero",
        "Kreisbüro registration",
        "2025-05-30T10:00",
        "2025-06-03T09:30",
        30,
        "Kreisbüro 7",
    )
    book(
        "gp",
        "Hausarzt: first visit",
        "2025-06-12T14:00",
        "2025-06-24T08:15",
        30,
        "Praxis Hottingen",
    )
    book(
        "dentist",
        "Dentist check-up",
        "2025-10-20T10:00",
        "2025-10-21T08:30",
        45,
        "Zahnarztpraxis Kreis 7",
    )


def _routine(tl: _Timeline, away: set[date]) -> None:
    """Day-by-day life: money, workouts, meals, sleep, meetings, haircuts."""
    rng = tl.rng
    job_ends, job_starts = tl.day("2025-05-23"), tl.day("2025-06-16")
    gym_cancelled, climbing_from = tl.day("2025-05-01"), tl.day("2025-06-10")
    netflix_rise, duplicate_day = tl.day("2024-10-14"), tl.day("2024-06-15")
    last_haircut = tl.start - timedelta(days=42)
    for i in range(tl.days):
        d = tl.start + timedelta(days=i)
        city, _country, cur = tl.home(d)
        zurich = city == "Zürich"
        here = d not in away
        at = datetime.combine

        # fixed monthly money
        if d.day == 1:
            rent = 2450.0 if zurich else 1150.0
            tl.spend(
                at(d, time(7, 0)),
                rent,
                cur,
                "rent",
                "Immobilien Seefeld AG" if zurich else "Northern Lettings",
            )
            if not zurich and d <= gym_cancelled:
                tl.spend(at(d, time(7, 5)), 34.0, cur, "subscriptions", "PureGym Manchester")
        if d.day == 20:
            bill = rng.uniform(70, 120) if zurich else rng.uniform(55, 110)
            utility = "ewz" if zurich else "Octopus Energy"
            tl.spend(at(d, time(7, 0)), bill, cur, "utilities", utility)
        if d.day == 14:
            price = 18.9 if d >= tl.move else (12.99 if d >= netflix_rise else 10.99)
            tl.spend(
                at(d, time(6, 30)),
                price,
                "CHF" if d >= tl.move else "GBP",
                "subscriptions",
                "Netflix",
            )
        if d.day == 10 and d >= climbing_from:
            tl.spend(at(d, time(6, 45)), 89.0, "CHF", "subscriptions", "Kletterhalle Limmat")
        if d in (tl.day("2024-04-12"), tl.day("2025-04-12")):
            tl.spend(at(d, time(8, 1)), 89.99, "GBP", "subscriptions", "Cloud storage 2 TB")
        if d == tl.day("2025-03-20"):
            tl.spend(at(d, time(20, 31)), 59.99, "GBP", "subscriptions", "Duolingo Super")

        if here:
            _groceries(tl, d, cur, zurich, duplicate_day)
            _little_spends(tl, d, cur, zurich)
            _workout(tl, d, zurich, second_year=i >= 365)
            _meal(tl, d, cur, zurich)
            if d.weekday() == 5 and (d - last_haircut).days >= 49:
                begin = at(d, time(11, 0))
                salon = "Coiffeur Enge" if zurich else "Hair by Nneka"
                booked = tl.not_before_start(at(d - timedelta(days=8), time(12, 30)))
                if tl.commit(
                    booked,
                    "Appointment",
                    f"appt-{d.isoformat()}-haircut",
                    begin,
                    begin + timedelta(hours=1),
                    {"title": "Haircut", "location": salon},
                ):
                    last_haircut = d
            employed = d <= job_ends or d >= job_starts
            if employed and d.weekday() < 5:
                _meetings(tl, d, zurich)
        if d.weekday() == 6:
            _sleep(tl, d)


def _groceries(tl: _Timeline, d: date, cur: str, zurich: bool, duplicate_day: date) -> None:
    if d.weekday() != 5:
        return
    rng = tl.rng
    shops = ("Migros", "Coop", "Denner") if zurich else ("Tesco", "Co-op", "Sainsbury's")
    amount = rng.uniform(85, 160) if zurich else rng.uniform(38, 78)
    when = datetime.combine(d, time(10, rng.randrange(0, 60)))
    merchant = rng.choice(shops)
    said = ""
    if d == tl.day("2024-03-09"):
        said = "Shopping list for today:\noat milk, eggs, plantain, scotch bonnets"
    elif rng.random() < 0.06:
        said = f"Weekly shop at {merchant}: {_money(round(amount, 2), cur)}."
    tx = tl.spend(when, amount, cur, "groceries", merchant, said)
    if d == duplicate_day:
        twin = tl.spend(when + timedelta(minutes=2), amount, cur, "groceries", merchant)
        twin.duplicate_of = tx


def _little_spends(tl: _Timeline, d: date, cur: str, zurich: bool) -> None:
    rng = tl.rng
    if rng.random() < 0.07:
        cafes = (
            ("Café Henrici", "Sprüngli", "Café Schöne Aussicht")
            if zurich
            else ("Ancoats Coffee Co.", "Pot Kettle Black", "Foundation Coffee House")
        )
        amount = rng.uniform(5.2, 7.8) if zurich else rng.uniform(3.1, 4.9)
        merchant = rng.choice(cafes)
        treat = f"Treated myself to a coffee at {merchant}, {_money(round(amount, 2), cur)}."
        said = treat if rng.random() < 0.1 else ""
        tl.spend(
            datetime.combine(d, time(8, rng.randrange(0, 60))),
            amount,
            cur,
            "coffee",
            merchant,
            said,
        )
    if rng.random() < 0.035:
        amount = rng.uniform(4.4, 32.0) if zurich else rng.uniform(2.0, 24.0)
        merchant = rng.choice(("SBB", "ZVV")) if zurich else rng.choice(("Bee Network", "Northern"))
        tl.spend(
            datetime.combine(d, time(17, rng.randrange(0, 60))), amount, cur, "transport", merchant
        )


_KINDS_MANCHESTER = (("run", 45), ("yoga", 25), ("swim", 15), ("cycle", 15))
_KINDS_ZURICH = (("run", 35), ("climbing", 30), ("swim", 15), ("cycle", 10), ("hike", 10))
_KM_PER_MINUTE = {
    "run": (1 / 6.6, 1 / 5.1),
    "swim": (0.025, 0.04),
    "cycle": (0.28, 0.38),
    "hike": (0.05, 0.07),
}


def _workout(tl: _Timeline, d: date, zurich: bool, *, second_year: bool) -> None:
    rng = tl.rng
    if rng.random() >= (0.3 if second_year else 0.2):
        return
    table = _KINDS_ZURICH if zurich else _KINDS_MANCHESTER
    kind = rng.choices([k for k, _ in table], weights=[w for _, w in table])[0]
    if kind == "hike" and d.weekday() < 5:
        kind = "run"
    minutes = {
        "run": rng.randint(25, 65),
        "yoga": rng.randint(30, 75),
        "swim": rng.randint(30, 55),
        "cycle": rng.randint(40, 120),
        "climbing": rng.randint(60, 150),
        "hike": rng.randint(150, 330),
    }[kind]
    fields: dict[str, _FieldValue] = {"kind": kind, "minutes": minutes, "date": d}
    said = ""
    if kind in _KM_PER_MINUTE:
        lo, hi = _KM_PER_MINUTE[kind]
        km = round(minutes * rng.uniform(lo, hi), 1)
        fields["distance_km"] = km
        if rng.random() < 0.08:
            said = rng.choice(
                (
                    f"{kind.capitalize()}: {km} km in {minutes} minutes.",
                    f"Did a {km} km {kind} this evening, {minutes} min.",
                )
            )
    elif rng.random() < 0.08:
        said = f"{minutes} minutes of {kind} tonight. Feeling great."
    ts = datetime.combine(d, time(19, rng.randrange(0, 60)))
    tl.add(ts, "Workout", f"workout-{d.isoformat()}", fields, said)


_COOKED = (
    "jollof rice",
    "egusi soup",
    "shakshuka",
    "dal and rice",
    "veggie chilli",
    "mushroom risotto",
    "pasta al pomodoro",
    "plantain and beans",
)
_OUT_MANCHESTER = (
    ("ramen", "Ancoats Noodle Bar"),
    ("pizza", "Rudy's Pizza"),
    ("Sunday roast", "The Marble Arch"),
    ("dim sum", "Glamorous"),
    ("street food", "Mackie Mayor"),
)
_OUT_ZURICH = (
    ("Zürcher Geschnetzeltes", "Zeughauskeller"),
    ("fondue", "Le Dézaley"),
    ("rösti", "Bauschänzli"),
    ("vegetarian buffet", "Hiltl"),
    ("Älplermagronen", "Alpenrose"),
)


_ZURICH_FRIENDS = (("Noemi Keller", "2025-06-20"), ("Jonas Müller", "2025-06-28"))


def _meal(tl: _Timeline, d: date, cur: str, zurich: bool) -> None:
    rng = tl.rng
    if rng.random() >= 0.1:
        return
    friends: tuple[str, ...] = ("Tom Haworth", "Sam O'Neill")
    if zurich:
        friends = tuple(name for name, met in _ZURICH_FRIENDS if d >= tl.day(met))
    fields: dict[str, _FieldValue] = {"date": d, "meal": "dinner"}
    with_people = [f for f in friends if rng.random() < 0.3]
    ts = datetime.combine(d, time(21, rng.randrange(0, 60)))
    if rng.random() < 0.55:
        name = rng.choice(_COOKED)
        fields.update(name=name, home_cooked=True)
        said = f"Cooked {name} tonight."
    else:
        name, place = rng.choice(_OUT_ZURICH if zurich else _OUT_MANCHESTER)
        fields.update(name=name, home_cooked=False, place=place)
        said = f"Dinner out: {name} at {place}."
        amount = rng.uniform(28, 70) if zurich else rng.uniform(14, 38)
        tl.spend(
            ts - timedelta(minutes=40),
            amount * (1 + len(with_people) * 0.2),
            cur,
            "eating out",
            place,
        )
    if with_people:
        fields["with_people"] = with_people
        said = said[:-1] + " with " + " and ".join(p.split()[0] for p in with_people) + "."
    tl.add(ts, "Meal", f"meal-{d.isoformat()}-dinner", fields, said if rng.random() < 0.15 else "")


def _sleep(tl: _Timeline, d: date) -> None:
    rng = tl.rng
    moving = tl.day("2025-05-15") <= d <= tl.day("2025-06-15")
    hours = round(min(9.5, max(4.5, rng.gauss(6.2 if moving else 7.2, 0.6))), 1)
    quality = max(1, min(5, round((hours - 4.0) * 1.2 + rng.uniform(-0.8, 0.8))))
    said = ""
    if moving and hours < 6.5 and rng.random() < 0.7:
        said = f"Barely sleeping with the move: {hours} hours last night."
    elif rng.random() < 0.05:
        said = f"Slept {hours} hours, {'great' if quality >= 4 else 'meh'}."
    fields: dict[str, _FieldValue] = {"date": d, "hours": hours, "quality": quality}
    tl.add(datetime.combine(d, time(8, 30)), "SleepLog", f"sleep-{d.isoformat()}", fields, said)


def _meetings(tl: _Timeline, d: date, zurich: bool) -> None:
    manager = "Lena Brunner" if zurich else "Priya Shah"
    team = "Research guild" if zurich else "Product team"
    week = (d - _monday(tl.start)).days // 7
    plans: list[tuple[str, str, time, int, list[str], bool]] = []
    if d.weekday() == 1 and week % 3 == 0:
        plans.append(("1on1", f"1:1 with {manager.split()[0]}", time(10, 0), 30, [manager], False))
    if d.weekday() == 3 and d.day <= 7:
        plans.append(("readout", "Research readout", time(15, 0), 60, [manager, team], True))
    for slug, title, begins, minutes, attendees, remote in plans:
        start = datetime.combine(d, begins)
        ts = tl.not_before_start(start - timedelta(days=6, hours=1))
        fields: dict[str, _FieldValue] = {"title": title, "attendees": attendees, "remote": remote}
        tl.commit(
            ts,
            "Meeting",
            f"mtg-{d.isoformat()}-{slug}",
            start,
            start + timedelta(minutes=minutes),
            fields,
        )


def _monday(d: date) -> date:
    return d - timedelta(days=d.weekday())
