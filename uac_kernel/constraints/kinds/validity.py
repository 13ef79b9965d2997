"""``valid_on``: a document must be valid at a moment, or cover every day of a span, derived from
other records (a passport 6 months past a trip's end; travel insurance for every day of a trip).

For each current ``each`` record (one called off, ``cancelled`` true or a ``status`` saying so,
needs nothing):

- ``at`` unresolved (the record lacks the date): nothing can be checked; skipped.
- Without ``until``: checked while ``at`` is today or later (the log clock). Some current,
  not-lapsed ``document`` must be valid on ``at``.
- With ``until`` resolved: checked while ``until`` is today or later; every day from ``at`` (or
  today, once ``at`` is past: past days cannot be mended) to ``until`` must be covered by some
  document; consecutive documents may share the work, and each uncovered run of days is a gap.
  An ``until`` before ``at`` is bad data: ``at`` alone is checked, and the message says so.
- With ``until`` unresolved (a trip with no end date yet): the end is never taken to be the
  start. Checked while ``at`` is today or later: ``at`` itself must be covered (a gap there is
  alerted at the constraint's severity); when the documents' cover stops at some day, the alert,
  one step lower (it rests on the unknown end), says "covered only until X; if it ends after X,
  X+1 – ... is uncovered".

A document covers the days from its first set ``starts`` field (none: since ever) to its first
set ``expires`` field (none: for good), both inclusive. One with a ``lapsed`` field true, a
``status`` that is one of their names (or ``canceled``, ``expired``), or called off (the
library's ``_called_off``: a ``cancelled``/``void`` flag, or a ``status`` naming cancellation
in a sentence, "Cancelled by the insurer") covers nothing: cancelling a policy
can only make the alert appear or worsen, and the alert names it. A document that starts later
never masks an earlier gap: every day is checked, not only the latest expiry. No matching
document at all is an alert too.

The finding's evidence is the ``each`` record and the documents the message names (those either
side of each gap, the lapsed ones); its message gives each gap's first and last day.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from uac_kernel.constraints.kinds._base import (
    Names,
    called_off,
    field_names,
    fields,
    is_country,
    lower,
    make_rule,
    moment,
    moment_text,
    read,
    same,
    select,
    types_text,
    watch,
)
from uac_kernel.core.display import plural
from uac_kernel.core.records import Record
from uac_kernel.language.spec import Moment, ValidOn
from uac_kernel.rules.engine import Finding, Rule
from uac_kernel.rules.library._common import (
    DOCUMENT_VOID,
    STATUS,
    _before,
    _first_day,
    _from_day,
    _get,
    _label,
)
from uac_kernel.state.query import UserView
from uac_kernel.vocab.catalogue import concept

__all__ = ["EXPIRES", "LAPSED", "LAPSED_STATUSES", "STARTS", "compile"]

# What a constraint that leaves ``starts``/``expires``/``lapsed`` out reads: the document
# concepts the library's travel rules read, then the names valid_on read besides those before
# concepts (``document.expiry`` is ``expires`` alone: a policy's ``end`` is read here, not by
# the library). ``document.void`` holds every old ``lapsed`` name and ``suspended`` besides.
STARTS: Names = (concept("document.valid_from"), "valid_from", "issued")
EXPIRES: Names = (concept("document.expiry"), "valid_until", "expiry", "ends", "end")
LAPSED: Names = (DOCUMENT_VOID,)
LAPSED_STATUSES = frozenset({"canceled", "expired"})  # besides the names of the lapsed fields
DAY = timedelta(days=1)


@dataclass(frozen=True)
class _Doc:
    rec: Record
    start: date | None  # None: since ever
    end: date | None  # None: for good

    def covers(self, day: date) -> bool:
        return (self.start is None or self.start <= day) and (self.end is None or day <= self.end)

    def span(self) -> str:
        a = f"from {self.start}" if self.start else "since ever"
        return f"{a} to {self.end}" if self.end else f"{a}, no expiry"


def _lapsed(rec: Record, lapsed: Names) -> bool:
    """Whether ``rec`` covers nothing: a ``lapsed`` field true or its name as the status, or
    called off (a cancelled flag, or a status naming it in a sentence: "Cancelled by the
    insurer"), the library's one test of cancellation."""
    status = _get(rec, STATUS)
    said = status.strip().casefold() if isinstance(status, str) else ""
    names = field_names(rec, lapsed)
    return (
        any(_get(rec, n) is True for n in names)
        or said in LAPSED_STATUSES
        or said in names
        or called_off(rec)
    )


def _documents(user: UserView, c: ValidOn, today: date) -> tuple[list[_Doc], list[_Doc]]:
    """The documents ``c`` names that can cover a day checked (every one is today or later):
    those that cover days, and the lapsed ones (covering none). Read through the ``expires``
    indexes, so documents expired long ago are not read on each clock move."""
    valid: list[_Doc] = []
    lapsed: list[_Doc] = []
    starts, expires = fields(c.starts, STARTS), fields(c.expires, EXPIRES)
    pool = read(c.document, lambda t: _from_day(user, t, today, expires))
    for rec in select(user, c.document, pool):
        doc = _Doc(rec, _first_day(rec, starts), _first_day(rec, expires))
        if _lapsed(rec, fields(c.lapsed, LAPSED)):
            lapsed.append(doc)
        elif doc.start is None or doc.end is None or doc.start <= doc.end:
            valid.append(doc)  # one that ends before it starts covers no day
    return valid, lapsed


def _reach(m: Moment) -> int:
    """The most days ``m`` can move a date forward (months count 31 days, or 28 backwards)."""
    return m.days + (31 * m.months if m.months >= 0 else 28 * m.months)


def _candidates(user: UserView, c: ValidOn, today: date) -> list[Record]:
    """A superset of the ``each`` records still to check, read through the date indexes: those
    whose ``at`` or ``until`` can fall on today or later, and those without those dates."""
    moments = [c.at, *([c.until] if c.until else [])]
    if c.each.key is not None or any(not m.fields for m in moments):
        return select(user, c.each)
    since = min(_before(today, timedelta(days=_reach(m))) for m in moments)
    fields = [f for m in moments for f in m.fields]
    return select(user, c.each, among=read(c.each, lambda t: _from_day(user, t, since, fields)))


@dataclass
class _Gap:
    first: date
    last: date | None  # None: nothing covers any day after ``first``
    before: _Doc | None  # the document that ends just before it
    after: _Doc | None  # the document that starts when it ends


def _gaps(docs: list[_Doc], lo: date, hi: date | None) -> tuple[list[_Gap], date | None]:
    """The uncovered runs of days of [``lo``, ``hi``] (``hi`` None: from ``lo`` on, with no end),
    and the last covered day reached from ``lo`` (None: covered for good, or never)."""
    gaps: list[_Gap] = []
    day: date | None = lo
    last: date | None = None
    while day is not None and (hi is None or day <= hi):
        cur: date = day
        covering = [d for d in docs if d.covers(cur)]
        if covering:
            ends = [d.end for d in covering]
            if any(e is None for e in ends):
                return gaps, None
            last = max(e for e in ends if e is not None)
            day = last + DAY
            continue
        if hi is None and gaps:
            break  # with no end known, only the first gap after the cover is reported
        later = [(d.start, d) for d in docs if d.start is not None and d.start > cur]
        after = min(later, key=lambda x: x[0], default=None)
        ended = [(d.end, d) for d in docs if d.end is not None and d.end < cur]
        before = max(ended, key=lambda x: x[0], default=None)
        end = after[0] - DAY if after is not None else hi
        if hi is not None and end is not None:
            end = min(end, hi)
        gaps.append(_Gap(cur, end, before[1] if before else None, after[1] if after else None))
        day = after[0] if after is not None else None
    return gaps, last


def _days(first: date, last: date | None) -> str:
    if last is None:
        return f"from {first} on"
    if last == first:
        return f"{first}"
    return f"{first} – {last} ({plural((last - first).days + 1, 'day')})"


def _gap_text(g: _Gap, kind: str) -> str:
    sides = []
    if g.before is not None:
        sides.append(f"{_label(g.before.rec)} ends {g.before.end}")
    if g.after is not None:
        sides.append(f"{_label(g.after.rec)} starts {g.after.start}")
    what = f"{_days(g.first, g.last)} uncovered"
    return f"{', '.join(sides)}: {what}" if sides else f"no {kind} covers {_days(g.first, g.last)}"


Whose = tuple[tuple[str, Any], ...]  # (document field, value) pairs a document must have


def _whose(c: ValidOn, rec: Record) -> list[Whose]:
    """For whom ``rec`` needs a document: one tuple of (document field, value) per person or
    thing its ``match`` fields name, a list field giving one per member; ``[()]``, any
    document, without ``match`` or when ``rec`` leaves those fields unset."""
    out: list[Whose] = [()]
    for doc_field, each_field in c.match.items():
        have = _get(rec, each_field)
        values = [v for v in (have if isinstance(have, list) else [have]) if v not in (None, "")]
        unique = [v for i, v in enumerate(values) if v not in values[:i]]
        if unique:
            out = [(*w, (doc_field, v)) for w in out for v in unique]
    return out


def _theirs(doc: _Doc, whose: Whose) -> bool:
    """Whether ``doc`` is for ``whose``: each field has the value (a list field: a member)."""
    for field, want in whose:
        have = _get(doc.rec, field)
        haves = have if isinstance(have, list) else [have]
        if not any(same(h, want, is_country(doc.rec, field)) for h in haves):
            return False
    return True


def _finding(
    c: ValidOn,
    rec: Record,
    valid: list[_Doc],
    lapsed: list[_Doc],
    today: date,
    whose: Whose = (),
) -> Finding | None:
    """The alert about ``rec``'s need for a valid document (for ``whose``, when ``match`` names
    one), or None when it is met."""
    if whose:
        valid = [d for d in valid if _theirs(d, whose)]
        lapsed = [d for d in lapsed if _theirs(d, whose)]
    who = " for " + ", ".join(f"{f} {v}" for f, v in whose) if whose else ""
    at = moment(c.at, rec)
    if at is None:
        return None
    until = moment(c.until, rec) if c.until is not None else None
    kind = types_text(c.document)
    note = ""
    hi: date | None
    if c.until is None or (until is not None and until < at):
        if at < today:
            return None
        lo, hi = at, at
        need = f"a valid {kind} on {at} ({moment_text(c.at, rec)})"
        if until is not None and c.until is not None:
            note = (
                f" (its end, {moment_text(c.until, rec)}, lies before that: only {at} is checked)"
            )
    elif until is not None:
        if until < today:
            return None
        lo, hi = max(at, today), until
        need = f"a valid {kind} " + (
            f"every day from {at} to {until}" if until > at else f"on {at}"
        )
        if lo > at:
            note = f" (the days before today, {today}, are past and not checked)"
    else:
        if at < today:
            return None
        lo, hi = at, None
        unset = " or ".join(c.until.fields) if c.until is not None else ""
        need = f"a valid {kind} from {at}; its end is unknown ({unset} not set)"
    gaps, last = _gaps(valid, lo, hi)
    if not gaps:
        return None
    severity = c.severity
    found = "; ".join(_gap_text(g, kind) for g in gaps)
    if hi is None and gaps[0].first != lo:
        severity = lower(c.severity)
        found = f"covered only until {last}: if it lasts past {last}, {found}"
        act = f"Set its end date, or get a valid {kind} that covers it past {last}"
    else:
        act = f"Get a valid {kind} that covers {'it' if hi != lo else at}, or correct the dates if wrong"
    void = [
        d
        for d in lapsed
        if (d.end is None or d.end >= lo) and (hi is None or d.start is None or d.start <= hi)
    ]
    if void:
        found += "; " + "; ".join(
            f"{_label(d.rec)} ({d.span()}) is cancelled or lapsed and covers nothing" for d in void
        )
    named = [d.rec for g in gaps for d in (g.before, g.after) if d is not None]
    evidence = list(
        {(type(r).__name__, r.key): r for r in [rec, *named, *(d.rec for d in void)]}.values()
    )
    return Finding(
        f"{c.title}: {_label(rec)}{who} needs {need}{note}; {found}. {act}.",
        evidence,
        severity=severity,
        about=who.strip(),
    )


def compile(name: str, c: ValidOn) -> Rule:
    """The rule that checks ``c``: see the module docstring."""

    def check(user: UserView) -> Iterator[Finding]:
        today = user.today
        if today is None:
            return
        each = _candidates(user, c, today)
        if not each:
            return
        valid, lapsed = _documents(user, c, today)
        for rec in each:
            if called_off(rec):
                continue  # a cancelled trip needs no cover
            for whose in _whose(c, rec):
                if (f := _finding(c, rec, valid, lapsed, today, whose)) is not None:
                    yield f

    return make_rule(name, c, check, watch(c.document, c.each), clock=True)
