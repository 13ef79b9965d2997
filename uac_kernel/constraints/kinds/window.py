"""``window_limit``: a count, a sum or days present of the selected records in a window, against a
limit (days in a country in any 180-day window, spend per month, contributions per tax year).

What each current ``subject`` record adds (placed by its first set ``date`` field; one with none,
one called off (``cancelled`` true or a ``status`` saying so), or for ``sum`` one without a
number in ``amount`` (default ``amount``), adds nothing):

- ``count``: 1 on its date; ``sum``: its amount on its date;
- ``days``: every day from its date to its first set ``end`` field, both inclusive; a day covered
  by several records counts once. A record with no end set counts one day when it is a dated
  event: in a type with no end field at all, placed by its ``date`` field or by a date-time (a
  visit, an appointment). Otherwise (a type with an end field this record leaves unset, or a
  plain date in another field, such as ``start``) it is a stay whose end is not known yet:
  begun on or before today, it counts every day through today (the log clock: that much
  presence the log does not contradict), and a breach that holds only with those assumed days
  is reported one severity step lower, saying so; planned later, it counts its first day. An end before the date counts the date alone.

Windows: ``window_days`` rolling (every window of that many days that ends on a day some record
covers, from today on: a window wholly in the past can no longer change, so its breach is not
alerted), or a calendar ``period`` (``month``, ``year``; ``year_from`` ``MM-DD`` makes it a year
starting on that day, e.g. ``04-06`` for the UK tax year; a 29 February start falls on 28
February in other years), each period that ends today or later. Both may be given: both are
checked. At most ten years ahead are looked at. Planned (future) records count.

Alerts: over ``limit``, the constraint's severity; at ``warn_at`` x ``limit`` or more (a positive
limit only), one step lower. A rolling alert is about a run of windows over the line (see
``_rolling``): its first breaking day and the records of its windows, so it keeps its id while
the clock moves through the run, and a new run after a quiet spell is a new alert. A calendar
alert is about its period and the period's records. The message gives the window's dates, the
total, the limit and the records.
"""

from __future__ import annotations

import calendar
import math
import sys
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from itertools import accumulate

from uac_kernel.constraints.kinds._base import (
    END,
    EVENT_DATE,
    START,
    Names,
    called_off,
    field_names,
    fields,
    ident,
    lower,
    make_rule,
    read,
    select,
    types_text,
    watch,
)
from uac_kernel.core.records import Record
from uac_kernel.language.spec import WindowLimit
from uac_kernel.rules.engine import Finding, Rule
from uac_kernel.rules.library._common import (
    _after,
    _before,
    _date_fields,
    _day,
    _first_day,
    _from_day,
    _get,
    _label,
    _number,
)
from uac_kernel.state.query import UserView
from uac_kernel.vocab.catalogue import concept

__all__ = ["AMOUNT", "DATE", "HORIZON", "compile"]

# What a constraint that leaves ``date``/``amount`` out reads (``end``: ``END``): the day of an
# event, else the start of a span; the amount of a payment.
DATE: Names = (EVENT_DATE, *START)
AMOUNT = concept("payment.amount")

HORIZON = timedelta(days=3660)  # how far ahead windows are looked at
DAY = timedelta(days=1)
SHOWN = 8  # records named in a message; the rest are counted


@dataclass(frozen=True)
class _Item:
    """What one record adds: ``value`` on each day of [``first``, ``last``] (one day for count
    and sum); ``sure`` is the last day its own dates vouch for (``last`` may run on to today for a
    stay with no end)."""

    rec: Record
    first: date
    last: date
    sure: date
    value: float


@dataclass(frozen=True)
class _Total:
    value: float
    sure: float  # without the days assumed for stays with no end
    items: list[_Item]


def _items(user: UserView, c: WindowLimit, recs: list[Record], today: date) -> list[_Item]:
    amount = c.amount or AMOUNT
    dates, ends = fields(c.date, DATE), fields(c.end, END)
    has_end = {t: bool(_date_fields(user, t, ends)) for t in c.subject.types}
    out: list[_Item] = []
    for rec in recs:
        first = _first_day(rec, dates)
        if first is None or called_off(rec):
            continue
        if c.measure != "days":
            value = 1.0 if c.measure == "count" else _number(_get(rec, amount))
            if value is not None:
                out.append(_Item(rec, first, first, first, value))
            continue
        end = _first_day(rec, ends)
        if end is not None:
            out.append(_Item(rec, first, max(first, end), max(first, end), 1.0))
        elif (has_end[type(rec).__name__] or _begins_a_stay(rec, dates)) and first <= today:
            out.append(_Item(rec, first, today, first, 1.0))
        else:
            out.append(_Item(rec, first, first, first, 1.0))
    return out


def _begins_a_stay(rec: Record, names: Names) -> bool:
    """Whether ``rec``'s first set date field of ``names`` begins a stay: a plain date in a field
    other than an ``event.date`` one (a ``start`` day, not a visit's ``date``); a date-time is a
    moment (an appointment)."""
    field = next((f for f in field_names(rec, names) if _day(_get(rec, f)) is not None), None)
    return (
        field is not None
        and field not in field_names(rec, (EVENT_DATE,))
        and not isinstance(_get(rec, field), datetime)
    )


def _open(user: UserView, c: WindowLimit, t: str, since: date) -> list[Record]:
    """Records of type ``t`` with no end set that a read from ``since`` leaves out (begun before
    it): with an end field, those leaving it unset; without one, those placed by a field other
    than an ``event.date`` one (an event's ``date`` counts one day, so is never open)."""
    ends = _date_fields(user, t, fields(c.end, END))
    if ends:
        return [r for r in user.unset(t, ends[0]) if all(_get(r, f) is None for f in ends[1:])]
    events = _date_fields(user, t, EVENT_DATE)
    starts = [f for f in _date_fields(user, t, fields(c.date, DATE)) if f not in events]
    return [r for f in starts for r in user.where(t, f, before=since)]


def _total(c: WindowLimit, items: list[_Item], lo: date, hi: date) -> _Total:
    """The total of [``lo``, ``hi``]: days counted once however many records cover them."""
    inside = [i for i in items if i.first <= hi and i.last >= lo]
    if c.measure != "days":
        value = sum(i.value for i in inside)
        return _Total(value, value, inside)
    days: set[date] = set()
    sure: set[date] = set()
    for i in inside:
        a, b = max(i.first, lo), min(i.last, hi)
        days.update(a + timedelta(days=n) for n in range((b - a).days + 1))
        if i.sure >= a:
            s = min(i.sure, b)
            sure.update(a + timedelta(days=n) for n in range((s - a).days + 1))
    return _Total(float(len(days)), float(len(sure)), inside)


BIG = 1e15  # beyond this a number is said in scientific notation, not 16+ digits


def _num(x: float) -> str:
    """``1,250``, ``1,250.50``; ``2e+308`` for a huge one; a sum past the largest float (amounts
    near 1e308 added up) says so rather than failing on ``int(inf)``."""
    if math.isnan(x):
        return "an amount that cannot be computed"
    if math.isinf(x):
        return f"more than {sys.float_info.max:.4g} (too large to compute)"
    if abs(x) >= BIG:
        return f"{x:.4g}"
    return f"{int(x):,}" if x == int(x) else f"{x:,.2f}"


def _amount(c: WindowLimit, total: float) -> str:
    """``91 days``, ``4 Payment records``, ``a total amount of 1,250.50``."""
    if c.measure == "days":
        return f"{_num(total)} days"
    if c.measure == "count":
        return f"{_num(total)} {types_text(c.subject)} record{'' if total == 1 else 's'}"
    return f"a total {c.amount or 'amount'} of {_num(total)}"


def _listing(c: WindowLimit, items: list[_Item], today: date) -> str:
    def one(i: _Item) -> str:
        if c.measure == "days":
            span = f"{i.first}" if i.first == i.last else f"{i.first} – {i.last}"
            if i.last > i.sure:
                span += f" (no end: counted through today, {today})"
            return f"{_label(i.rec)} {span}"
        if c.measure == "sum":
            return f"{_label(i.rec)} {i.first}: {_num(i.value)}"
        return f"{_label(i.rec)} {i.first}"

    ordered = sorted(items, key=lambda i: (i.first, *ident(i.rec)))
    shown = "; ".join(one(i) for i in ordered[:SHOWN])
    more = len(ordered) - SHOWN
    return shown + (f"; and {more} more" if more > 0 else "")


def _a(severity: str) -> str:
    """``a warning``, ``critical``: a severity after "would be"."""
    return "a warning" if severity == "warning" else severity


def _finding(
    c: WindowLimit, where: str, total: _Total, today: date, about: str, peak: str = ""
) -> Finding | None:
    over = total.value > c.limit
    warn_level = c.warn_at * c.limit if c.warn_at is not None and c.limit > 0 else None
    if not over and (warn_level is None or total.value < warn_level):
        return None
    if over:
        severity = c.severity if total.sure > c.limit else lower(c.severity)
        state = f"over the limit of {_num(c.limit)}"
        if total.sure <= c.limit:
            state += (
                f" only with the days assumed for stays with no end ({_num(total.sure)} without "
                "them): set their end dates"
            )
        act = "Move, shorten or drop what is planned in it, or correct the records if wrong"
    else:
        # Near the limit (at or past ``warn_at`` of it), one step below the constraint's
        # severity: the words say where alerts start, not a severity they do not have.
        severity = lower(c.severity)
        share = round(100 * total.value / c.limit)
        start = f"{_num(warn_level or 0)}, {100 * (c.warn_at or 0):g}% of the limit"
        state = f"{share}% of the limit of {_num(c.limit)}, near it (alerts from {start})"
        act = "Plan what is still to come in it with the limit in mind"
        if severity != c.severity:
            act += f"; over the limit this alert would be {_a(c.severity)}"
    return Finding(
        f"{c.title}: {_amount(c, total.value)} in {where}, {state}{peak}: "
        f"{_listing(c, total.items, today)}. {act}.",
        [i.rec for i in total.items],
        severity=severity,
        about=about,
    )


def _rolling(c: WindowLimit, w: int, items: list[_Item], today: date) -> Iterator[Finding]:
    """One finding a run of window ends over the line (the limit, or the warning level), among
    the days records cover from ``w`` days back, for each run that reaches today or later.

    A run is told apart from the next by a window under the line between them (between two
    covered days no day enters a window, so the last window before the next covered day is the
    lowest). Its identity, the first end where the limit breaks and the records of its windows,
    stays put while the clock moves through it; the message names its first window from today
    on that breaks (else that nears the limit) and the peak."""
    span = timedelta(days=w - 1)
    scan = _before(today, span)
    lo, hi = _before(scan, span), _after(today, HORIZON)

    Tally = tuple[list[date], list[float], list[float]]  # days, their values, prefix sums

    def tally(sure: bool) -> Tally:
        by_day: dict[date, float] = {}
        for i in items:
            if c.measure != "days":
                if lo <= i.first <= hi:
                    by_day[i.first] = by_day.get(i.first, 0.0) + i.value
                continue
            a, b = max(i.first, lo), min(i.sure if sure else i.last, hi)
            by_day.update((a + timedelta(days=n), 1.0) for n in range((b - a).days + 1))
        days = sorted(by_day)
        values = [by_day[d] for d in days]
        return days, values, [0.0, *accumulate(values)]

    def level(tallied: Tally, e: date) -> float:
        days, values, sums = tallied
        a, b = bisect_left(days, e - span), bisect_right(days, e)
        got = sums[b] - sums[a]
        # Prefix sums past the largest float turn into inf - inf: add the window's own values.
        return got if math.isfinite(got) else sum(values[a:b])

    counted, sure = tally(False), tally(True)
    warn_level = c.warn_at * c.limit if c.warn_at is not None and c.limit > 0 else None

    def hot(v: float) -> bool:
        return v > c.limit or (warn_level is not None and v >= warn_level)

    runs: list[list[tuple[date, float]]] = [[]]  # (window end, total)
    prev: date | None = None
    for e in counted[0][bisect_left(counted[0], scan) :]:
        if prev is not None and e - prev > DAY and not hot(level(counted, e - DAY)) and runs[-1]:
            runs.append([])
        if hot(v := level(counted, e)):
            runs[-1].append((e, v))
        elif runs[-1]:
            runs.append([])
        prev = e
    for run in runs:
        if not run or run[-1][0] < today:
            continue  # a run wholly in the past can no longer change
        breaking = [e for e, v in run if v > c.limit]
        ahead = [(e, v) for e, v in run if e >= today]
        named, value = next(((e, v) for e, v in ahead if v > c.limit), ahead[0])
        peak_end, peak = max(run, key=lambda x: x[1])
        shown = (
            ""
            if peak_end == named
            else f"; it peaks at {_num(peak)} in {peak_end - span} – {peak_end}"
        )
        first, last = run[0][0] - span, run[-1][0]
        inside = [i for i in items if i.first <= last and i.last >= first]
        surest = max(level(sure, e) for e, _ in run)
        about = f"breaks {breaking[0]}" if breaking else f"nears the limit {run[0][0]}"
        where = f"the {w}-day window {named - span} – {named}"
        f = _finding(c, where, _Total(value, surest, inside), today, about, shown)
        if f is not None:
            yield f


def _year_start(year: int, month: int, day: int) -> date:
    return date(year, month, min(day, calendar.monthrange(year, month)[1]))


def _period(c: WindowLimit, d: date, anchor: tuple[int, int] | None) -> tuple[date, date, str]:
    """The calendar period holding ``d``: its first and last day and its label."""
    if anchor is not None:
        m, dd = anchor
        start = _year_start(d.year, m, dd)
        if d < start:
            start = _year_start(d.year - 1, m, dd)
        end = _year_start(start.year + 1, m, dd) - DAY
        return start, end, f"the year {start} – {end}"
    if c.period == "month":
        last = calendar.monthrange(d.year, d.month)[1]
        return d.replace(day=1), d.replace(day=last), f"the month {d:%Y-%m}"
    return date(d.year, 1, 1), date(d.year, 12, 31), f"the year {d.year}"


def _anchor(c: WindowLimit) -> tuple[int, int] | None:
    """``year_from`` as (month, day) (the spec checked it is a day of the year); None when
    there is none."""
    if c.year_from is None:
        return None
    m, dd = (int(x) for x in c.year_from.split("-"))
    return m, dd


def _calendar(
    c: WindowLimit, anchor: tuple[int, int] | None, items: list[_Item], today: date
) -> Iterator[Finding]:
    """One finding a period ending today or later whose total is over the limit or at the
    warning level."""
    horizon = _after(today, HORIZON)
    periods: dict[date, tuple[date, str]] = {}
    for i in items:
        d = max(i.first, _period(c, today, anchor)[0])
        while d <= min(i.last, horizon):
            start, end, label = _period(c, d, anchor)
            periods[start] = (end, label)
            d = end + DAY
    for start, (end, label) in sorted(periods.items()):
        f = _finding(c, label, _total(c, items, start, end), today, f"period {start}")
        if f is not None:
            yield f


def compile(name: str, c: WindowLimit) -> Rule:
    """The rule that checks ``c``: see the module docstring."""

    def check(user: UserView) -> Iterator[Finding]:
        today = user.today
        if today is None:
            return
        anchor = _anchor(c)
        calendar_too = c.period is not None or anchor is not None
        # Only records that reach into a window not yet past matter: read those through the
        # date indexes (plus, for days, stays with no end, which run on to today).
        since = today
        if c.window_days is not None:
            since = _before(today, timedelta(days=c.window_days - 1))
        if calendar_too:
            since = min(since, _period(c, today, anchor)[0])
        dates = fields(c.date, DATE)
        read_by = [*dates, *fields(c.end, END)] if c.measure == "days" else dates
        among = read(c.subject, lambda t: _from_day(user, t, since, read_by))
        if c.measure == "days":
            seen = {ident(r) for r in among}
            for r in read(c.subject, lambda t: _open(user, c, t, since)):
                if ident(r) not in seen:
                    seen.add(ident(r))
                    among.append(r)
        items = _items(user, c, select(user, c.subject, among=among), today)
        if c.window_days is not None:
            yield from _rolling(c, c.window_days, items, today)
        if calendar_too:
            yield from _calendar(c, anchor, items, today)

    return make_rule(name, c, check, watch(c.subject), clock=True)
