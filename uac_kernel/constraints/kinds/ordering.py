"""``no_overlap`` and ``before``: commitments that collide, and one thing due before another.

No overlap: each record's span runs from its first set ``start`` field to its first set ``end``
field. A date covers its whole day (an end date, that day to its end); a date start with a
``time`` field ("19:00", "7 pm") is that time; a date-time without an end is an instant (it
collides with what spans it or starts with it; touching ends do not collide). A plain date start
with no end, in a type with an end field or in a field other than ``date`` (a trip with no end
date), is a stay whose end is unknown: it runs on from its start, never taken to end that day;
a collision after its first day is alerted one step lower, saying so. A record's ``tz`` (or ``timezone``) field, an offset (``+09:00``, ``UTC-5``,
``-0500``) or a zone name (``Asia/Tokyo``), places its times and dates in that zone; the log
stores a time written with its own offset in UTC already, so such a record needs no ``tz``, and
records without one are compared as given. Two spans collide when fewer than
``buffer_minutes`` separate them. A weekly commitment (the library's ``_weekly`` reading: a
weekday with ``start_time``/``end_time``, or a ``start`` that repeats weekly) collides with each
span of the other side that meets one of its occurrences (``_weekly_clash``), its times taken in
its own ``tz``; two weekly ones are not compared. Records called off (the library's one test:
a ``cancelled``, ``declined`` or ``void`` flag, or a ``status`` naming it, "Cancelled by the
venue") and records over before today are left out; the records are read through the date
indexes and swept in start order, so the cost follows the records ahead, not every pair. At most
``MAX_ALERTS`` collisions are alerted a run, the earliest in start order; one more alert counts
the rest and names the records they involve.

Before: each ``then`` record not yet past, dated T, needs a ``first`` record dated by T minus
``gap_days`` (an undated one counts: it exists, its date unknown). The alert opens
``lead_days`` before that deadline, while none is logged, and is critical once the deadline
has passed; when the only ones logged are dated after the deadline (too late), it opens at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo

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
    matches,
    read,
    select,
    types_text,
    watch,
)
from uac_kernel.core.display import plural
from uac_kernel.core.records import Record
from uac_kernel.language.spec import Before, NoOverlap, Select
from uac_kernel.rules.engine import Finding, Rule, RuleFunc
from uac_kernel.rules.library._common import (
    _after,
    _before,
    _date_fields,
    _dated_from,
    _day,
    _first_day,
    _get,
    _label,
    _not_past,
    _utc,
    _zone,
)
from uac_kernel.rules.library.schedule import (
    _clock_time,
    _may_repeat,
    _Weekly,
    _weekly,
    _weekly_clash,
)
from uac_kernel.rules.library.schedule import _Span as _DaySpan
from uac_kernel.state.query import UserView
from uac_kernel.vocab.catalogue import concept

__all__ = ["FIRST_DATE", "THEN_DATE", "compile"]

# What a constraint that leaves the date fields out reads (``no_overlap``'s ``start``: a span's
# start, else an event's day; its ``end``: ``END``): for ``before``, the first thing's day, else
# its start, else its due date; the later thing's start, else its day.
SPAN_START: Names = (*START, EVENT_DATE)
FIRST_DATE: Names = (EVENT_DATE, *START, concept("duty.due"))
THEN_DATE: Names = SPAN_START
# Collisions alerted one by one per run, in start order; past that, one alert counts the rest
# (300 records at one time are 44,850 pairs).
MAX_ALERTS = 50
SHOWN = 8  # records a summary names; the rest are counted


def compile(name: str, c: NoOverlap | Before) -> Rule:
    if isinstance(c, NoOverlap):
        return make_rule(name, c, _no_overlap(c), watch(c.a, c.b), clock=True)
    return make_rule(name, c, _before_check(c), watch(c.first, c.then), clock=True)


# -- no_overlap ---------------------------------------------------------------------------------


def _shown(v: date) -> str:
    if isinstance(v, datetime):
        return v.strftime("%Y-%m-%d %H:%M")
    return v.isoformat()


@dataclass(frozen=True, slots=True)
class _Span:
    rec: Record
    start: datetime  # UTC when the record says its zone, else as given
    end: datetime
    when: str  # as the record gives it, for messages
    zone: tuple[tzinfo, str] | None = None
    open: bool = False  # a stay with no end recorded: ``end`` is the last moment there is

    def assumed(self, at: datetime) -> bool:
        """Whether ``at`` falls in this span only by its unknown end: after its first day."""
        return self.open and at >= self.start + timedelta(days=1)

    def local(self, zone: tuple[tzinfo, str] | None) -> tuple[datetime, datetime]:
        """Start and end in ``zone`` (None: as the record gives them)."""
        if self.zone is None:
            return self.start, self.end
        to = (zone or self.zone)[0]

        def there(d: datetime) -> datetime:
            try:
                return d.replace(tzinfo=UTC).astimezone(to).replace(tzinfo=None)
            except OverflowError:
                return d

        return there(self.start), there(self.end)


def _span(rec: Record, c: NoOverlap, has_end: bool) -> _Span | None:
    """``rec``'s span; ``has_end``: its type has one of the ``end`` fields as a date. A plain
    date in an ``event.date`` field (``date``) is a one-day event; in any other, a span's start."""
    starts, ends = field_names(rec, fields(c.start, SPAN_START)), fields(c.end, END)
    field, s = next(((f, v) for f in starts if _day(v := _get(rec, f)) is not None), ("", None))
    if s is None:
        return None
    e = next((v for f in field_names(rec, ends) if _day(v := _get(rec, f)) is not None), None)
    zone = _zone(rec)
    if not isinstance(s, datetime) and (at := _clock_time(_get(rec, "time"))) is not None:
        s = datetime.combine(s, at)
    start = s if isinstance(s, datetime) else datetime.combine(s, time())
    event = field in field_names(rec, (EVENT_DATE,))
    if e is None and not isinstance(s, datetime) and (has_end or not event):
        # A stay with no end recorded (a trip under way or planned): never taken to end the
        # day it starts; it runs on from its start, its end unknown (as window_limit counts it).
        unset = " or ".join(field_names(rec, ends))
        when = f"from {_shown(s)}, its end unknown ({unset} not set)"
        if zone is not None:
            when += f" ({zone[1]})"
        return _Span(rec, _utc(start, zone), datetime.max, when, zone, open=True)
    if e is None:
        end = start if isinstance(s, datetime) else start + timedelta(days=1)
        when = f"at {_shown(s)}" if isinstance(s, datetime) else f"on {_shown(s)}"
    else:
        end = e if isinstance(e, datetime) else datetime.combine(e + timedelta(days=1), time())
        end = max(end, start)
        when = f"from {_shown(s)} to {_shown(e)}"
    if zone is not None:
        when += f" ({zone[1]})"
    return _Span(rec, _utc(start, zone), _utc(end, zone), when, zone)


def _weeklies(user: UserView, sel: Select) -> list[_Weekly]:
    """The weekly commitments ``sel`` names (a weekday with ``start_time``/``end_time``, or a
    ``start`` that repeats weekly: the library's reading), not cancelled, not ended before
    today; only types with a weekday or recurrence field are read."""
    today = user.today
    out = []
    for t in sel.types:
        if not _may_repeat(user, t):
            continue
        for rec in select(user, sel.model_copy(update={"type": t, "also": [], "role": None})):
            w = _weekly(rec)
            if (
                w is not None
                and not called_off(rec)
                and (w.last is None or today is None or w.last >= today)
            ):
                out.append(w)
    return out


def _spans(user: UserView, sel: Select, c: NoOverlap) -> list[_Span]:
    """Spans of the current records of ``sel`` not over before today (a day of slack for
    zones), read through the start and end indexes; weekly commitments are not spans."""
    today = user.today
    pool = None
    if today is not None:
        since = _before(today, timedelta(days=1))
        names = [*fields(c.start, SPAN_START), *fields(c.end, END)]
        pool = read(sel, lambda t: _dated_from(user, t, _date_fields(user, t, names), since))
        seen = {ident(r) for r in pool}
        pool += [r for r in read(sel, lambda t: _open(user, c, t, since)) if ident(r) not in seen]
    cutoff = datetime.combine(_before(today, timedelta(days=1)), time()) if today else None
    has_end = {t: bool(_date_fields(user, t, fields(c.end, END))) for t in sel.types}
    out = []
    for rec in select(user, sel, pool):
        if called_off(rec) or _weekly(rec) is not None:
            continue
        if (span := _span(rec, c, has_end.get(type(rec).__name__, False))) is None:
            continue
        if cutoff is None or span.end > cutoff:
            out.append(span)
    return out


def _open(user: UserView, c: NoOverlap, t: str, since: date) -> list[Record]:
    """Records of ``t`` with no end set, begun before ``since`` (a read from ``since`` leaves
    them out), that may run on: with an end field, those leaving it unset; without one, those
    started by a field other than an ``event.date`` one (an event's ``date`` is its one day)."""
    ends = _date_fields(user, t, fields(c.end, END))
    if ends:
        return [r for r in user.unset(t, ends[0]) if all(_get(r, f) is None for f in ends[1:])]
    events = _date_fields(user, t, EVENT_DATE)
    starts = [f for f in _date_fields(user, t, fields(c.start, SPAN_START)) if f not in events]
    return [r for f in starts for r in user.where(t, f, before=since)]


def _duration(td: timedelta) -> str:
    minutes = int(td.total_seconds() // 60)
    days, rest = divmod(minutes, 24 * 60)
    hours, mins = divmod(rest, 60)
    parts = [plural(n, unit) for n, unit in ((days, "day"), (hours, "hour"), (mins, "minute")) if n]
    return " ".join(parts) or "0 minutes"


def _no_overlap(c: NoOverlap) -> RuleFunc:
    buffer = timedelta(minutes=c.buffer_minutes)

    def check(user: UserView) -> Iterator[Finding]:
        a = _spans(user, c.a, c)
        b = a if c.b is None else _spans(user, c.b, c)
        side = {(type(s.rec).__name__, s.rec.key): 0 for s in a}
        if c.b is not None:
            for s in b:
                who = ident(s.rec)
                side[who] = 2 if who in side else 1  # 0: a only, 1: b only, 2: both
        spans = sorted(
            {(type(s.rec).__name__, s.rec.key): s for s in [*a, *b]}.values(),
            key=lambda s: (s.start, type(s.rec).__name__, s.rec.key),
        )
        shown = 0
        rest: dict[tuple[str, str], Record] = {}
        more = 0
        for i, x in enumerate(spans):
            for y in spans[i + 1 :]:
                if y.start > x.start and y.start >= _after(x.end, buffer):
                    break  # sorted by start: no later span comes closer
                if c.b is not None and not _across(side, x, y):
                    continue
                if shown < MAX_ALERTS:
                    shown += 1
                    yield _collision(c, x, y, buffer)
                else:  # counted, not built: the pairs can number n(n-1)/2
                    more += 1
                    rest.setdefault(ident(x.rec), x.rec)
                    rest.setdefault(ident(y.rec), y.rec)
        for f in _weekly_collisions(c, user, a, b, buffer):
            if shown < MAX_ALERTS:
                shown += 1
                yield f
            else:
                more += 1
                rest.update((ident(r), r) for r in f.evidence)
        if more:
            yield _flood(c, more, list(rest.values()))

    return check


def _flood(c: NoOverlap, more: int, recs: list[Record]) -> Finding:
    """The one alert standing for the collisions past ``MAX_ALERTS``: how many, and the records
    to look at (the first ``SHOWN`` in start order, then a count). Its id is the same however
    many there are, so it is updated, not raised anew, as they change."""
    named = ", ".join(_label(r) for r in recs[:SHOWN])
    others = f" and {plural(len(recs) - SHOWN, 'more record')}" if len(recs) > SHOWN else ""
    return Finding(
        message=(
            f"{c.title}: {plural(more, 'more collision')} beyond the {MAX_ALERTS} alerted, "
            f"among {plural(len(recs), 'record')}: {named}{others}; so many usually means "
            "duplicated or mis-dated records: correct those, or move or cancel the ones that clash"
        ),
        severity=c.severity,
        about="more collisions",
    )


def _weekly_collisions(
    c: NoOverlap, user: UserView, a: list[_Span], b: list[_Span], buffer: timedelta
) -> Iterator[Finding]:
    """Each span that falls on an occurrence of a weekly commitment of the other side (either
    side's, without ``b``), within ``buffer``; two weekly ones are not compared. The weekly
    times are in the weekly record's zone, if it names one; the span is placed in it."""
    wa = _weeklies(user, c.a)
    pairs = [(w, b) for w in wa]
    if c.b is not None:
        pairs += [(w, a) for w in _weeklies(user, c.b)]
    seen: set[tuple[tuple[str, str], tuple[str, str]]] = set()
    for w, spans in pairs:
        zone = _zone(w.rec)
        for sp in spans:
            pair = (ident(w.rec), ident(sp.rec))
            if pair[0] == pair[1] or pair in seen:
                continue
            seen.add(pair)
            lo, hi = sp.local(zone)
            day = _weekly_clash(w, _DaySpan(_before(lo, buffer), _after(hi, buffer), False, sp.rec))
            if day is not None:
                guess = sp.assumed(datetime.combine(day, time()))
                yield Finding(
                    message=(
                        f"{c.title}: {_label(sp.rec)} {sp.when} falls on {_label(w.rec)}, "
                        f"{w.when()} (the one on {day}"
                        + (f", with {_duration(buffer)} needed between them" if buffer else "")
                        + f"); move one of them, or add {day} to the weekly one's skip_dates if "
                        "it will be missed"
                        + (f", or set the end of {_label(sp.rec)}" if guess else "")
                    ),
                    evidence=(w.rec, sp.rec),
                    severity=lower(c.severity) if guess else None,
                )


def _across(side: dict[tuple[str, str], int], x: _Span, y: _Span) -> bool:
    """Whether one of ``x``, ``y`` is an ``a`` record and the other a ``b`` record."""
    sx = side[(type(x.rec).__name__, x.rec.key)]
    sy = side[(type(y.rec).__name__, y.rec.key)]
    return sx == 2 or sy == 2 or sx != sy


def _collision(c: NoOverlap, x: _Span, y: _Span, buffer: timedelta) -> Finding:
    """The alert that ``x`` and ``y`` (``y`` starting no earlier) collide; one step lower when
    only ``x``'s unknown end makes them (``y`` starts after ``x``'s first day)."""
    shared = min(x.end, y.end) - y.start
    if x.assumed(y.start):
        return Finding(
            message=(
                f"{c.title}: {_label(x.rec)} {x.when} and {_label(y.rec)} {y.when}: they "
                f"collide if {_label(x.rec)} lasts to {_shown(y.start)}; set its end date, or "
                "move or cancel one of them"
            ),
            evidence=(x.rec, y.rec),
            severity=lower(c.severity),
        )
    if x.open:
        how = f"{_label(y.rec)} starts on the first day of {_label(x.rec)}"
        if y.start == x.start:
            how = "they start on the same day"
    elif shared > timedelta(0):
        how = f"they overlap by {_duration(shared)}"
    elif x.start == y.start:
        how = "they start at the same time"
    elif y.start < x.end:  # y an instant inside x
        how = f"{_label(y.rec)} falls within {_label(x.rec)}"
    else:
        how = f"only {_duration(-shared)} apart, {_duration(buffer)} needed between them"
    return Finding(
        message=(
            f"{c.title}: {_label(x.rec)} {x.when} and {_label(y.rec)} {y.when}: {how}; "
            "move or cancel one of them"
        ),
        evidence=(x.rec, y.rec),
    )


# -- before ---------------------------------------------------------------------------------------


def _describe(s: Select) -> str:
    parts = [types_text(s) if s.key is None else f"{types_text(s)} '{s.key}'"]
    parts += [
        f"{k} {' or '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in s.where.items()
    ]
    if s.mentions:
        parts.append("mentioning " + " or ".join(s.mentions))
    return " ".join(parts)


# Days looked back from a deadline, widening, before the whole history is read: a ``first``
# record is most often dated shortly before the deadline, and then the slice read is small.
LOOKBACK = (31, 366, 3_660)


class _Firsts:
    """The (not cancelled) ``first`` records, asked about one deadline at a time."""

    def __init__(self, user: UserView, c: Before):
        self.user, self.c = user, c
        self.names = fields(c.first_date, FIRST_DATE)
        # each type's date fields: the index reads are made per type
        self.fields = {t: _date_fields(user, t, self.names) for t in c.first.types}
        self.all: list[Record] | None = None
        if c.first.key is not None or not all(self.fields.values()):
            self.all = [r for r in select(user, c.first) if not called_off(r)]

    def _indexes(self) -> list[tuple[str, str]]:
        return [(t, f) for t, fs in self.fields.items() for f in fs]

    def _ok(self, r: Record) -> bool:
        return matches(r, self.c.first) and not called_off(r)

    def undated(self) -> bool:
        """Whether one exists with no date (it counts: it exists, its date unknown)."""
        names = self.names
        if self.all is not None:
            return any(_first_day(r, names) is None for r in self.all)
        unset = [r for t, fs in self.fields.items() for r in self.user.unset(t, fs[0])]
        return any(self._ok(r) and _first_day(r, names) is None for r in unset)

    def by(self, deadline: date) -> bool:
        """Whether one is dated on or before ``deadline``: read in widening slices back from it."""
        names = self.names
        if self.all is not None:
            return any((d := _first_day(r, names)) is not None and d <= deadline for r in self.all)
        hi: date = _after(deadline, timedelta(days=1))
        for back in (*LOOKBACK, None):
            lo = None if back is None else _before(deadline, timedelta(days=back))
            for t, f in self._indexes():
                for r in self.user.where(t, f, since=lo, before=hi):
                    if self._ok(r) and (d := _first_day(r, names)) is not None and d <= deadline:
                        return True
            if lo is None:
                return False
            hi = lo
        return False

    def after(self, deadline: date) -> date | None:
        """The earliest date of one dated after ``deadline`` (too late), if any."""
        names = self.names
        if self.all is not None:
            late = [d for r in self.all if (d := _first_day(r, names)) and d > deadline]
            return min(late, default=None)
        since = _after(deadline, timedelta(days=1))
        found = [
            d
            for t, f in self._indexes()
            for r in self.user.where(t, f, since=since)
            if self._ok(r) and (d := _first_day(r, names)) is not None and d > deadline
        ]
        return min(found, default=None)


def _before_check(c: Before) -> RuleFunc:
    gap, lead = timedelta(days=c.gap_days), timedelta(days=c.lead_days)
    need = _describe(c.first)

    def check(user: UserView) -> Iterator[Finding]:
        today = user.today
        thens = []
        then_date = fields(c.then_date, THEN_DATE)
        pool = read(c.then, lambda t: _not_past(user, t, today, then_date))
        for rec in select(user, c.then, pool):
            if not called_off(rec) and (when := _first_day(rec, then_date)) is not None:
                thens.append((rec, when))
        if not thens:
            return
        firsts = _Firsts(user, c)
        if firsts.undated():
            return
        for rec, when in thens:
            deadline = _before(when, gap)
            early = today is not None and today < _before(deadline, lead)
            # One logged too late already breaks the order: no lead time to wait for. Before
            # the lead time only that can alert, so the few records dated after the deadline
            # are read first, and the past (by the deadline) only when one of them exists.
            if early:
                late = firsts.after(deadline)
                if late is None or firsts.by(deadline):
                    continue
            else:
                if firsts.by(deadline):
                    continue
                late = firsts.after(deadline)
            yield _missing(c, rec, when, deadline, today, need, late)

    return check


def _missing(
    c: Before,
    rec: Record,
    when: date,
    deadline: date,
    today: date | None,
    need: str,
    earliest: date | None,
) -> Finding:
    late = f" (the one logged, on {earliest}, is too late)" if earliest else ""
    by = f"a {need} dated by {deadline}" + (
        f", {plural(c.gap_days, 'day')} before it" if c.gap_days else ""
    )
    if today is not None and today > deadline:
        return Finding(
            message=(
                f"{c.title}: {_label(rec)} on {when} needed {by}; the deadline passed "
                f"{plural((today - deadline).days, 'day')} ago with none logged{late}; arrange "
                f"it now or move {_label(rec)}"
            ),
            evidence=(rec,),
            severity="critical",
        )
    left = f", {plural((deadline - today).days, 'day')} left" if today is not None else ""
    return Finding(
        message=(
            f"{c.title}: {_label(rec)} on {when} needs {by}; none is logged{late}{left}; "
            f"book or record it by {deadline}"
        ),
        evidence=(rec,),
    )
