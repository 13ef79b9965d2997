"""``projection``: a quantity that runs out before a date, or a balance that planned flows take
below a threshold.

Runs out: the subject's ``quantity`` counted on its ``as_of`` date (unset: the day its current
version became valid, so a refill logged as an update restarts the count) falls by ``rate`` (or
the product of the ``rate_fields``) per day, week (/7) or month (/30.44, a mean Gregorian
month). The run-out date is the first day it is down to ``threshold``: ``as_of`` plus
ceil((quantity - threshold) / daily rate) days; the days before it are covered. The alert comes
when that day falls before ``until`` (a moment of the subject, or of each ``until_record`` not
yet past), with units left today and the shortfall; once the day has come, one critical alert
says it ran out. A zero rate never runs out. An ``until_record`` whose until moment cannot be
resolved (a trip with no end date) is never taken to end the day it starts, nor dropped: from
its start (its first set ``until.start`` field, default ``start``) the supply is checked as far
as can be: one running out before that start is short for sure; one running out on or after it
is alerted one step lower, saying the end is unknown and that it falls short if the record
lasts past the run-out day (one running out more than ten years past that start is enough) (as ``valid_on`` and ``window_limit`` treat an unknown end).

Balance: with ``flows``, the quantity at ``as_of`` takes each flow dated from ``as_of`` to
``until`` (``flow_amount``: positive out, negative in, or in when ``inflow`` is true), a day at
a time; the first day the balance ends below ``threshold`` is the alert, naming that day's
flows (critical once that day has come).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator
from datetime import date, timedelta

from uac_kernel.constraints.kinds._base import (
    EVENT_DATE,
    START,
    Names,
    add_months,
    fields,
    lower,
    make_rule,
    moment,
    read,
    select,
    stated_end,
    watch,
)
from uac_kernel.core.display import plural
from uac_kernel.core.records import Record
from uac_kernel.language.spec import Moment, Projection
from uac_kernel.rules.engine import Finding, Rule
from uac_kernel.rules.library._common import (
    _after,
    _before,
    _date_fields,
    _dated_from,
    _day,
    _first_day,
    _from_day,
    _get,
    _label,
    _money,
    _number,
)
from uac_kernel.state.query import UserView
from uac_kernel.vocab.catalogue import concept

__all__ = ["AS_OF", "FLOW_AMOUNT", "FLOW_DATE", "compile"]

# What a constraint that leaves them out reads: the day the quantity was counted; a flow's
# amount, and its day (a payment's date, else a bill's due date).
AS_OF: Names = (concept("record.as_of"),)
FLOW_AMOUNT = concept("payment.amount")
FLOW_DATE: Names = (EVENT_DATE, concept("duty.due"))

DAYS_PER = {"day": 1.0, "week": 7.0, "month": 365.2425 / 12}
MAX_DAYS = 999_999_999  # timedelta's limit: a supply that lasts longer lasts past year 9999
# Slack when reading until-records by index: add_months clamps a day to its month's length.
MONTH_SLACK = timedelta(days=3)
OPEN_START = START  # an until record's start, when its until moment is unresolved
OPEN_REACH = timedelta(days=3660)  # how long past its start such a record may last


BIG = 1e15  # beyond this a number is said in scientific notation, not 16+ digits


def _n(x: float) -> str:
    """``12.5``, ``1,200``; ``1e+308`` for a huge one rather than 309 digits."""
    if not math.isfinite(x) or abs(x) >= BIG:
        return f"{x:.4g}"
    return f"{x:,.2f}".rstrip("0").rstrip(".")


def _as_of(rec: Record, c: Projection) -> date | None:
    as_of = fields(c.as_of, AS_OF)
    return _first_day(rec, as_of) or (_day(rec.valid_from) if rec.valid_from else None)


def _daily(rec: Record, c: Projection) -> float | None:
    """The amount used a day, or None when the record lacks a rate field."""
    rate = c.rate
    if rate is None:
        rate = 1.0
        for f in c.rate_fields:
            v = _number(_get(rec, f))
            if v is None or v < 0:
                return None
            rate *= v
    return rate / DAYS_PER[c.per]


def _which(m: Moment, rec: Record | None) -> str:
    """How ``m`` was taken from ``rec``: ``Trip 'x' end``, ``the date``, with its shift."""
    used = next((f for f in m.fields if rec is not None and _day(_get(rec, f))), None)
    stated = stated_end(m, rec) if rec is not None and used is None else None
    src = used or (stated[1] if stated else None)
    base = f"{_label(rec)} {src}" if rec is not None and src else "the date set"
    shift = [
        f"{'plus' if n > 0 else 'minus'} {plural(abs(n), unit)}"
        for n, unit in ((m.months, "month"), (m.days, "day"))
        if n
    ]
    return " ".join([base, *shift])


def _untils(user: UserView, c: Projection, subject: Record) -> list[tuple[Record | None, date]]:
    """The ``until`` dates to check for ``subject``: of each ``until_record`` not yet past (read
    from the index, from about today back by the moment's shift), or of the subject itself."""
    today = user.today
    found: list[tuple[Record | None, date]] = []
    if c.until_record is None:
        if (d := moment(c.until, subject)) is not None:
            found.append((None, d))
    else:
        since = None
        if today is not None:
            back = _before(today, timedelta(days=c.until.days))
            since = _before(add_months(back, -c.until.months), MONTH_SLACK)
        sel = c.until_record
        pool = read(sel, lambda t: _from_day(user, t, since, c.until.fields))
        for r in select(user, sel, pool):
            if (d := moment(c.until, r)) is not None:
                found.append((r, d))
    return [(r, d) for r, d in found if today is None or d >= today]


def _open_untils(user: UserView, c: Projection) -> list[tuple[Record, date]]:
    """The ``until_record`` records whose until moment cannot be resolved (a trip with no end
    date), with the day each starts (its first set ``until.start`` field, default ``start``):
    their end is never taken to be their start, nor are they dropped."""
    sel = c.until_record
    if sel is None:
        return []
    starts = c.until.start or OPEN_START
    pool = read(sel, lambda t: _from_day(user, t, user.today, c.until.fields))
    return [
        (r, d)
        for r in select(user, sel, pool)
        if moment(c.until, r) is None and (d := _first_day(r, starts)) is not None
    ]


def compile(name: str, c: Projection) -> Rule:
    check = _balance if c.flows is not None else _runs_out

    def run(user: UserView) -> Iterator[Finding]:
        for subject in select(user, c.subject):
            yield from check(user, c, subject)

    return make_rule(name, c, run, watch(c.subject, c.until_record, c.flows), clock=True)


def _runs_out(user: UserView, c: Projection, s: Record) -> Iterator[Finding]:
    q, as_of, daily = _number(_get(s, c.quantity)), _as_of(s, c), _daily(s, c)
    if q is None or as_of is None or daily is None:
        return
    left = q - c.threshold
    if left <= 0:
        out: date | None = as_of
    elif daily == 0:
        out = None  # nothing is used: it never runs out
    else:
        # rounded first, so 0.3 / 0.1 is 3 days, not 4; a quotient past the largest float (a
        # huge supply, a tiny rate) is inf, which lasts past year 9999 like any over MAX_DAYS
        ratio = round(left / daily, 9)
        days = MAX_DAYS if not ratio < MAX_DAYS else math.ceil(ratio)
        out = _after(as_of, timedelta(days=days))
    what = f"{_n(q)} {c.quantity} on {as_of}, {_n(daily)} a day"
    limit = f"down to {_n(c.threshold)}" if c.threshold else "none left"
    today = user.today
    if out is not None and today is not None and out <= today:
        yield Finding(
            message=(
                f"{c.title}: {_label(s)} ran out on {out} ({limit}; {what}); "
                f"refill or replace it now, or update {c.quantity} and as_of if there is more"
            ),
            evidence=(s,),
            severity="critical",
            about="ran out",
        )
        return
    if out is None:
        return
    # One alert a subject: the first until it falls short of (refilling before the run-out
    # day mends the later ones too); the later ones are counted in the message.
    short_of = sorted(((d, u) for u, d in _untils(user, c, s) if out < d), key=lambda p: p[0])
    if not short_of:
        yield from _short_of_open(user, c, s, out, what, limit)
        return
    until, u = short_of[0]
    used = daily * max(0, (today - as_of).days) if today is not None else 0.0
    short = (until - out).days
    later = f" (and {plural(len(short_of) - 1, 'later date')})" if len(short_of) > 1 else ""
    yield Finding(
        message=(
            f"{c.title}: {_label(s)} runs out on {out} ({limit}; {what}, "
            f"{_n(max(q - used, 0))} left today), before {_which(c.until, u or s)} on "
            f"{until}{later}: {plural(short, 'day')} short, {_n(short * daily)} {c.quantity} "
            f"more needed; refill before {out}"
        ),
        evidence=(s,) if u is None else (s, u),
    )


def _short_of_open(
    user: UserView, c: Projection, s: Record, out: date, what: str, limit: str
) -> Iterator[Finding]:
    """The alert, one step lower (it rests on an unknown end), when ``s`` runs out on or after
    the start of an until record whose end is unknown: it falls short if that lasts past
    ``out``. One running out before such a start is short for sure, at full severity."""
    # Not assumed to last more than OPEN_REACH past its start (window_limit, too, looks at
    # most ten years ahead): a supply for longer is enough.
    opens = sorted(
        ((u, d) for u, d in _open_untils(user, c) if out <= _after(d, OPEN_REACH)),
        key=lambda p: (p[1], p[0].key),
    )
    if not opens:
        return
    u, start = opens[0]
    unset = " or ".join(c.until.fields)
    sure = out < start
    if sure:
        found = f"before {_label(u)} even starts on {start} (its end is unknown: {unset} not set)"
    else:
        found = (
            f"after {_label(u)} starts on {start}, and its end is unknown ({unset} not set): "
            f"if it lasts past {out}, there is not enough"
        )
    yield Finding(
        message=(
            f"{c.title}: {_label(s)} runs out on {out} ({limit}; {what}), {found}; set the end "
            f"of {_label(u)}, or refill before {out}"
        ),
        evidence=(s, u),
        severity=None if sure else lower(c.severity),
    )


def _balance(user: UserView, c: Projection, s: Record) -> Iterator[Finding]:
    flows_sel = c.flows
    if flows_sel is None:
        return
    q, as_of = _number(_get(s, c.quantity)), _as_of(s, c)
    if q is None or as_of is None:
        return
    untils = _untils(user, c, s)
    if not untils:
        return
    last = max(d for _, d in untils)
    flow_date, flow_amount = fields(c.flow_date, FLOW_DATE), c.flow_amount or FLOW_AMOUNT
    pool = read(flows_sel, lambda t: _dated_from(user, t, _date_fields(user, t, flow_date), as_of))
    by_day: dict[date, list[tuple[Record, float]]] = defaultdict(list)
    for f in select(user, flows_sel, pool):
        day, amount = _first_day(f, flow_date), _number(_get(f, flow_amount))
        if day is None or amount is None or not as_of <= day <= last:
            continue
        out = -abs(amount) if _get(f, "inflow") is True else amount
        by_day[day].append((f, out))
    yield from _first_drop(user, c, s, q, as_of, untils, by_day)


def _first_drop(
    user: UserView,
    c: Projection,
    s: Record,
    q: float,
    as_of: date,
    untils: list[tuple[Record | None, date]],
    by_day: dict[date, list[tuple[Record, float]]],
) -> Iterator[Finding]:
    """The first day the balance ends below the threshold by the last ``until``, checked
    against the first ``until`` on or after it; nothing if it stays above."""
    money = _money
    balance, before, count = q, 0.0, 0
    drop: tuple[date, list[tuple[Record, float]]] | None = (as_of, []) if q < c.threshold else None
    for day in sorted(by_day):
        if drop is not None:
            break
        flows = sorted(by_day[day], key=lambda p: (type(p[0]).__name__, p[0].key))
        balance -= sum(out for _, out in flows)
        if balance < c.threshold:
            drop = (day, flows)
        else:
            before += sum(out for _, out in flows)
            count += len(flows)
    if drop is None:
        return
    day, flows = drop
    ahead = [(u, d) for u, d in untils if d >= day]
    if not ahead:
        return  # the balance is counted from after every until date
    u, until = min(ahead, key=lambda p: p[1])
    today = user.today
    named = ", ".join(
        f"{_label(f)} {'-' if out >= 0 else '+'}{money(abs(out), s)}" for f, out in flows
    )
    earlier = (
        f"; {plural(count, 'earlier flow')} net {'-' if before >= 0 else '+'}{money(abs(before), s)}"
        if count
        else ""
    )
    cause = f"after {named}" if flows else "already at the start"
    by = _which(c.until, u or s)
    yield Finding(
        message=(
            f"{c.title}: {_label(s)} falls to {money(balance, s)} on {day}, below "
            f"{money(c.threshold, s)}, {cause} (from {money(q, s)} on {as_of}{earlier}; "
            f"checked up to {until}, {by}); move money in or move a payment before {day}"
        ),
        evidence=(s, *(() if u is None else (u,)), *(f for f, _ in flows)),
        severity="critical" if today is not None and day <= today else None,
    )
