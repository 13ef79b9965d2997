"""The scheduling rule: commitments that overlap, one-off or weekly."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta
from typing import Any

from uac_kernel.core.records import Record
from uac_kernel.core.words import DAY_NAMES, WEEKDAYS
from uac_kernel.core.words import first_term as _first_term
from uac_kernel.core.words import norm as _norm
from uac_kernel.core.words import terms as _terms
from uac_kernel.rules.engine import Finding, rule
from uac_kernel.rules.library._common import (
    CALLED_OFF,
    MAX_ALL_DAY_COMMITMENT,
    TRIP_END,
    TRIP_START,
    _before,
    _called_off,
    _date_fields,
    _dated_from,
    _day,
    _first_day,
    _flag,
    _get,
    _label,
    _named,
    _names,
    _text,
    _trip_end,
    _utc,
    _zone,
    plays,
)
from uac_kernel.state.query import UserView
from uac_kernel.vocab.catalogue import concept
from uac_kernel.vocab.resolve import fields_of

__all__ = ["overlapping_commitments"]

START, END = concept("booking.start"), concept("booking.end")
# A trip's own start and end are read first on a trip (the travel rules read them too), then
# the booking's, so either binding places it.
TRIP_STARTS, TRIP_ENDS = (TRIP_START, START), (TRIP_END, END)
PLACE = concept("booking.place")
TRIP_PLACES = concept("trip.places")
IMPORTANT = concept("booking.important")

# -- scheduling ------------------------------------------------------------------------------
# A meal booked for a time, with no end given, still holds the table for a while: restaurants
# commonly seat a party for 90 minutes to two hours (common sense), so two dinner bookings half an
# hour apart conflict although neither names an end. Other instants stay instants.
MEAL_LENGTH = timedelta(minutes=90)


@dataclass(frozen=True, slots=True)
class _Span:
    start: datetime
    end: datetime
    all_day: bool
    rec: Record
    assumed_end: bool = False  # a meal without an end: MEAL_LENGTH assumed
    open_start: bool = False  # a date start (time unknown) with a timed end, e.g. a checkout
    open_end: bool = False  # a trip with no end or length recorded: only its first day is known
    given: str = ""  # times placed by a ``tz``: as the record gives them (start/end are UTC)

    @property
    def type(self) -> str:
        return type(self.rec).__name__

    def plays(self, role: str) -> bool:
        return plays(self.rec, role)

    def travels(self) -> bool:
        """Whether it is part of a journey: a leg or a stay."""
        return self.plays("travel_leg") or self.plays("stay")

    def when(self) -> str:
        if self.given:
            return self.given
        if self.all_day:
            last = (self.end - timedelta(days=1)).date()
            first = self.start.date()
            if self.open_end:
                return f"from {first} (end not recorded: only the first day is checked)"
            return str(first) if last == first else f"{first} – {last}"
        if self.open_start:
            return f"{self.start.date()} – {self.end.strftime('%Y-%m-%d %H:%M')}"
        s = self.start.strftime("%Y-%m-%d %H:%M")
        if self.end == self.start:
            return s
        if self.assumed_end:
            return f"{s} (about {int(MEAL_LENGTH.total_seconds() // 60)} min)"
        same = self.end.date() == self.start.date()
        return f"{s}–{self.end.strftime('%H:%M' if same else '%Y-%m-%d %H:%M')}"


def _span(rec: Record) -> _Span | None:
    """The record's span; timed ones in UTC when the record names its zone (``tz``), so times
    in two zones compare; whole days stay the dates given (a day is a day where it is spent)."""
    sp = _local_span(rec)
    if sp is None or sp.all_day or (zone := _zone(rec)) is None:
        return sp
    given = f"{sp.when()} ({zone[1]})"
    return replace(sp, start=_utc(sp.start, zone), end=_utc(sp.end, zone), given=given)


def _dated(rec: Record, names: tuple[str, ...]) -> Any:
    """The first of ``names`` on ``rec`` holding a date or date-time, as it is; None if none."""
    return next((v for n in names if _day(v := _get(rec, n)) is not None), None)


def _local_span(rec: Record) -> _Span | None:
    trip = plays(rec, "trip")
    s = _dated(rec, TRIP_STARTS if trip else (START,))
    e = _dated(rec, TRIP_ENDS if trip else (END,))
    if s is None:
        return None
    if isinstance(s, datetime):
        if isinstance(e, datetime):
            end = e
        elif isinstance(e, date):
            end = datetime.combine(e + timedelta(days=1), time())
        elif plays(rec, "meal"):
            return _Span(s, s + MEAL_LENGTH, False, rec, assumed_end=True)
        else:
            end = s  # no end: an instant
        return _Span(s, end, False, rec) if end >= s else None
    if isinstance(s, date):
        start = datetime.combine(s, time())
        long_ok = trip
        # A first day and a known end time (a checkout at noon). An end at midnight is taken as
        # a date: a date stored in a field that other records filled with date-times.
        if isinstance(e, datetime) and e.time() != time():
            if e <= start or (e - start > MAX_ALL_DAY_COMMITMENT and not long_ok):
                return None
            return _Span(start, e, False, rec, open_start=True)
        # A trip's end may come from its stated length; an unknown one is not its first day,
        # but that day is all that is known to be taken.
        last = _trip_end(rec) if long_ok else _day(e)
        end = datetime.combine((last or s) + timedelta(days=1), time())
        if end <= start or (end - start > MAX_ALL_DAY_COMMITMENT and not long_ok):
            return None
        return _Span(start, end, True, rec, open_end=long_ok and last is None)
    return None


def _part_of(a: _Span, b: _Span) -> bool:
    """Whether two spans overlap by design: a trip and its own travel or plans at its
    destination; a stay and whatever you do while staying there."""
    if a.plays("trip") and b.plays("trip"):
        return False
    if a.travels() and b.travels():
        if a.all_day or b.all_day:
            return True  # hotel nights vs a flight time: not comparable
        # A stay whose check-in time is unknown starts at midnight: travel on its first day is
        # the arrival, not a clash (travel after check-in and before checkout is one).
        return any(
            x.plays("stay")
            and not y.plays("stay")
            and x.open_start
            and y.start.date() == x.start.date()
            for x, y in ((a, b), (b, a))
        )
    if a.plays("stay") or b.plays("stay"):
        return True
    for trip, other in ((a, b), (b, a)):
        if trip.plays("trip"):
            if other.travels():
                return True
            places = [
                _norm(v)
                for n in _names(trip.rec, TRIP_PLACES)
                if isinstance(v := _get(trip.rec, n), str) and _norm(v).strip()
            ]
            there = _norm(_text(other.rec, PLACE))
            return any(p in there for p in places)
    return False


# Weekly commitments ("a board meeting every Tuesday, 2-4 PM"): the weekday(s) and clock times,
# or a dated first occurrence that repeats weekly.
WEEKDAYS_ON, RECURRENCE = concept("recurring.weekdays"), concept("recurring.rule")
START_TIME, END_TIME = concept("recurring.start_time"), concept("recurring.end_time")
FIRST, LAST = concept("recurring.first"), concept("recurring.last")
SKIP = concept("recurring.skip")
# Recurrences that are not weekly (every other week, monthly, ...) are not expanded.
NOT_WEEKLY = _terms(
    "other, second, third, fourth, alternate, biweekly, fortnight, fortnightly, two week,",
    "2 week, three week, 3 week, month, monthly, quarter, quarterly, year, yearly, annual, annually",
)
_CLOCK = re.compile(r"^\s*(\d{1,2})(?:[:.](\d{2}))?(?::\d{2})?\s*(?:([ap])\.?\s*m\.?)?\s*$", re.I)


def _clock_time(v: Any) -> time | None:
    """A time of day from "14:00", "14:00:00", "2 PM", "2:30pm" or "noon"; None otherwise."""
    if not isinstance(v, str):
        return None
    if v.strip().lower() in ("noon", "midday"):
        return time(12)
    m = _CLOCK.match(v)
    if not m:
        return None
    hour, minute = int(m.group(1)), int(m.group(2) or 0)
    if m.group(3):
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if m.group(3).lower() == "p" else 0)
    return time(hour, minute) if hour < 24 and minute < 60 else None


def _weekdays(text: str) -> frozenset[int]:
    words = _norm(text).split()
    days = {WEEKDAYS[w] for w in words if w in WEEKDAYS}
    if "weekday" in words:
        days |= set(range(5))
    if "weekend" in words:
        days |= {5, 6}
    return frozenset(days)


@dataclass(frozen=True, slots=True)
class _Weekly:
    rec: Record
    days: frozenset[int]
    start: time
    end: time  # == start: an instant
    first: date | None
    last: date | None
    skip: frozenset[date]

    def when(self) -> str:
        names = "/".join(DAY_NAMES[i] for i in sorted(self.days))
        times = self.start.strftime("%H:%M")
        if self.end != self.start:
            times += f"–{self.end.strftime('%H:%M')}"
        return f"every {names} {times}"

    def occurrence(self, day: date) -> tuple[datetime, datetime] | None:
        if day.weekday() not in self.days or day in self.skip:
            return None
        if (self.first and day < self.first) or (self.last and day > self.last):
            return None
        start = datetime.combine(day, self.start)
        end = datetime.combine(day + timedelta(days=1) if self.end < self.start else day, self.end)
        return start, end


def _may_repeat(user: UserView, t: str) -> bool:
    """Whether type ``t`` has a field that may make its records weekly (``recurring.weekdays``
    or ``recurring.rule``): only those types are read for weekly commitments."""
    have = user.field_types(t)
    return any(f in have for c in (WEEKDAYS_ON, RECURRENCE) for f in fields_of(t, c))


def _weekly(rec: Record) -> _Weekly | None:
    """A weekly (or daily) commitment: ``recurring.weekdays`` (``weekday``/``weekdays``/
    ``day_of_week``/``days``) with ``recurring.start_time`` (``start_time``, and
    ``recurring.end_time``), or a datetime ``booking.start`` whose ``recurring.rule``
    (``recurrence``/``frequency``/``repeats``/``every``) says weekly, daily or names weekdays;
    bounded by ``recurring.first``/``last`` (``since``/``start_date``, ``until``/``end_date``),
    minus the dates in ``recurring.skip`` (``skip_dates``). Every other week, monthly and the
    like are left out."""
    if _called_off(rec):
        return None
    rule_text = _norm(_text(rec, RECURRENCE))
    if _first_term(rule_text, NOT_WEEKLY):
        return None
    days = _weekdays(_text(rec, (WEEKDAYS_ON, RECURRENCE)))
    if " daily " in rule_text or " every day " in rule_text:
        days = frozenset(range(7))
    skip = frozenset(d for v in _listed(_get(rec, SKIP)) if (d := _as_day(v)) is not None)
    first, last = _first_day(rec, FIRST), _first_day(rec, LAST)
    s, e = _get(rec, START), _get(rec, END)
    if isinstance(s, datetime) and (days or _first_term(rule_text, _terms("week, weekly"))):
        end = e.time() if isinstance(e, datetime) and e.date() == s.date() else s.time()
        return _Weekly(rec, days or frozenset({s.weekday()}), s.time(), end, s.date(), last, skip)
    t1, t2 = _clock_time(_get(rec, START_TIME)), _clock_time(_get(rec, END_TIME))
    if days and t1 is not None:
        return _Weekly(rec, days, t1, t2 or t1, first, last, skip)
    return None


def _listed(v: Any) -> list[Any]:
    return v if isinstance(v, list) else [v]


def _as_day(v: Any) -> date | None:
    """A date, datetime or ISO date string as a date (see ``_day``)."""
    if isinstance(v, str):
        try:
            v = date.fromisoformat(v.strip()[:10])
        except ValueError:
            return None
    return _day(v)


def _meets(a0: datetime, a1: datetime, b0: datetime, b1: datetime) -> bool:
    """Whether two ranges overlap (an instant has start == end; touching ends do not)."""
    if a0 == a1 and b0 == b1:
        return a0 == b0
    if a0 == a1:
        return b0 <= a0 < b1
    if b0 == b1:
        return a0 <= b0 < a1
    return a0 < b1 and b0 < a1


def _weekly_clash(w: _Weekly, sp: _Span) -> date | None:
    """The first day an occurrence of ``w`` overlaps ``sp`` (a week of days covers every
    weekday, so 8 days are looked at, and a week more per skipped date)."""
    day = max(sp.start.date(), w.first) if w.first else sp.start.date()
    last = (sp.end - timedelta(microseconds=1)).date() if sp.end > sp.start else sp.end.date()
    for _ in range(8 + 7 * len(w.skip)):
        if day > last:
            break
        occ = w.occurrence(day)
        if occ is not None and _meets(occ[0], occ[1], sp.start, sp.end):
            return day
        day += timedelta(days=1)
    return None


def _maybe_running(
    user: UserView, t: str, now: datetime | None, names: tuple[str, ...]
) -> list[Record]:
    """Records of ``t`` whose span may not have ended at ``now``: a start or an end (``names``)
    from a day and a meal's length before it on (a date covers its whole day; a meal without
    an end holds its table for MEAL_LENGTH). A superset of the spans with ``end > now or
    start >= now``."""
    if now is None:
        return user.all(t)
    since = _before(now, timedelta(days=1) + MEAL_LENGTH)
    return _dated_from(user, t, _date_fields(user, t, names), since)


@rule(
    watch=None,
    severity="warning",
    category="scheduling_conflicts",
    source="RFC 5545 (iCalendar), 3.6.1 and 3.8.2.2: an event occupies [DTSTART, DTEND), so "
    "touching ends do not overlap; a one-day DATE event ends the next day",
)
def overlapping_commitments(user: UserView) -> Iterator[Finding]:
    """Reads ``start``/``end`` of current records of any type that has a ``start`` field, plus
    ``cancelled``/``declined``/``important``/``critical``/``mandatory`` and place fields (location,
    city, destination, country, address, venue, place); and weekly commitments: ``weekday``/
    ``weekdays``/``day_of_week``/``days`` with ``start_time``/``end_time`` ("14:00", "2 PM"), or
    a datetime ``start`` whose ``recurrence``/``frequency``/``repeats``/``every`` says weekly (or
    daily, or names weekdays), bounded by ``since``/``until`` and minus ``skip_dates``.

    A datetime ``start`` with a datetime ``end`` is a time range; without an end it is an instant,
    except a meal (Reservation, Dinner, Lunch, Breakfast, Brunch, Meal), which holds the table
    for about 90 minutes; a date ``start``/``end`` covers whole days (ranges over 31 days count
    only for Trip/Vacation/Travel); a date ``start`` with a datetime ``end`` (a checkout at noon)
    runs from that day's midnight to the end. A ``tz``/``timezone`` field (an offset or a zone
    name) places a record's times in that zone, so times in two zones compare in UTC. Skipped: state-like types (Medication,
    Subscription, Residence, ...), cancelled or declined records, ranges that ended before the
    log clock, a trip vs its own Flight/Hotel/Lodging or a record at the trip's destination, a
    Hotel/Lodging stay vs anything but another timed stay or travel, hotel nights (dates) vs
    flight times, travel on the first day of a stay whose check-in time is unknown (the
    arrival). Flags every other pair that overlaps (touching ends do not), found by a
    sort-and-sweep, and every timed commitment that falls on an occurrence of a weekly one
    (whole days only when the weekly one is marked important; two weekly ones are not compared):
    warning, critical when either record is marked ``important``, ``critical`` or ``mandatory``.
    """
    now = user.now
    spans: list[_Span] = []
    weekly: list[_Weekly] = []
    for t in user.types():
        if plays(t, "state_period"):
            continue
        if _may_repeat(user, t):
            weekly += [w for rec in user.all(t) if (w := _weekly(rec)) is not None]
        trip = plays(t, "trip")
        starts = TRIP_STARTS if trip else (START,)
        if not _date_fields(user, t, starts):
            continue  # no date start: no span (see _span)
        for rec in _maybe_running(user, t, now, (*starts, *(TRIP_ENDS if trip else (END,)))):
            if _called_off(rec):
                continue
            sp = _span(rec)
            if sp is not None and (now is None or sp.end > now or sp.start >= now):
                spans.append(sp)
    for w in weekly:
        w_important = _flag(w.rec, IMPORTANT)
        for sp in spans:
            # Whole days (a trip) are set against a weekly slot only when missing it matters.
            if sp.rec is w.rec or (sp.all_day and not w_important):
                continue
            day = _weekly_clash(w, sp)
            if day is not None:
                yield Finding(
                    f"{_label(sp.rec)} on {sp.when()} falls on {_label(w.rec)}, {w.when()} "
                    f"(the one on {day}): reschedule one of them, or add {day} to the weekly "
                    f"one's {_named(w.rec, SKIP)} if you will miss it.",
                    [w.rec, sp.rec],
                    severity="critical" if w_important or _flag(sp.rec, IMPORTANT) else None,
                )
    spans.sort(key=lambda s: (s.start, s.end, s.type, s.rec.key))
    active: list[_Span] = []
    for sp in spans:
        active = [a for a in active if a.end > sp.start or a.start == sp.start]
        for a in active:
            if _part_of(a, sp):
                continue
            overlap = _Span(
                max(a.start, sp.start), min(a.end, sp.end), a.all_day and sp.all_day, a.rec
            )
            shared = overlap.when()
            if (a.assumed_end and a.end <= sp.end) or (sp.assumed_end and sp.end <= a.end):
                shared = f"from {overlap.start.strftime('%Y-%m-%d %H:%M')}"  # the end is a guess
            if a.given or sp.given:
                shared += " UTC"
            important = _flag(a.rec, IMPORTANT) or _flag(sp.rec, IMPORTANT)
            off = " or ".join(dict.fromkeys(_named(r, CALLED_OFF) for r in (a.rec, sp.rec)))
            yield Finding(
                f"{_label(a.rec)} on {a.when()} overlaps {_label(sp.rec)} on {sp.when()} "
                f"(overlap: {shared}): reschedule one of them, or mark the one you will "
                f"skip as {off}.",
                [a.rec, sp.rec],
                severity="critical" if important else None,
            )
        active.append(sp)
