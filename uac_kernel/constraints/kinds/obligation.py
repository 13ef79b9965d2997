"""``obligation``: something to do by a date, that stays an alert until a record says it is done.

The ladder, by days left until the due date (``today`` is the log clock):

- more than ``lead_days`` left: nothing;
- 8 or more left: info; 3–7: warning; 0–2: critical;
- past the due date and not done: critical, "overdue by N days", for as long as it stays undone
  (the clock never clears it; only a record saying it is done does).

A constraint of severity ``info`` is capped at warning on every rung (overdue too): the person
who wrote it said it is not pressing. The finding's ``about`` is the due date and its evidence the
subject record, so the alert keeps one id as it climbs the ladder: the engine reports an
escalation as an update, not as a new alert.

Done, for a subject record: one of the ``done`` fields (default ``DONE``: the concept
``record.settled`` the library's deadline rules read) is true; or its ``status``
(``record.status``) says so (``DONE_STATUSES``, or a ``done`` field's name); or a current record matching
``done_by`` exists. Without a ``key``, ``done_by`` names a kind of record (a payment, a filing)
that may be one of many over the years, so only one dated on or after the obligation's start
counts: for a subject, the day the subject got the due date it has now (last year's payment does
not settle this year's renewal); without a subject, the year before the due date. A ``done_by``
record is dated by ``record.done_on`` (``DONE_DATES``); one with no date counts: nothing places
it in an earlier cycle.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime

from uac_kernel.constraints.kinds._base import (
    Names,
    add_months,
    field_names,
    make_rule,
    moment,
    moment_text,
    select,
    types_text,
    watch,
)
from uac_kernel.core.display import plural
from uac_kernel.core.records import Record
from uac_kernel.language.spec import Obligation
from uac_kernel.rules.engine import Finding, Rule, Severity
from uac_kernel.rules.library._common import SETTLED, STATUS, _first_day, _get, _label
from uac_kernel.state.query import UserView
from uac_kernel.vocab.catalogue import concept

__all__ = ["DONE", "DONE_DATES", "DONE_STATUSES", "compile"]

# The flags that settle a subject when ``done`` is left out (the same names the obligation
# read before concepts); a status word, not a field name, is value vocabulary.
DONE: Names = (SETTLED,)
DONE_STATUSES = frozenset(
    {"done", "complete", "completed", "filed", "paid", "submitted", "closed", "resolved"}
)
# The date of a ``done_by`` record: when the thing was done.
DONE_DATES = concept("record.done_on")


def _rung(left: int, cap: Severity) -> Severity:
    """The severity ``left`` days before the due date (negative: overdue), capped for an info
    constraint."""
    sev: Severity = "critical" if left <= 2 else "warning" if left <= 7 else "info"
    return "warning" if cap == "info" and sev == "critical" else sev


def _is_done(rec: Record, done: Names) -> bool:
    """Whether one of ``done`` is true on ``rec``, or its ``status`` says it is done."""
    names = field_names(rec, done)
    if any(_get(rec, f) is True for f in names):
        return True
    status = _get(rec, STATUS)
    return isinstance(status, str) and (
        (said := status.strip().casefold()) in DONE_STATUSES or said in names
    )


def _since_due(user: UserView, rec: Record, c: Obligation, due: date) -> date | None:
    """The day ``rec`` got the due date it has now: the start of the oldest version of the
    unbroken run of its versions that resolve to ``due``."""
    versions = sorted(
        (v for v in user.history(type(rec).__name__) if v.key == rec.key),
        key=lambda v: v.valid_from or datetime.min,
    )
    start = rec.valid_from
    for v in reversed(versions):
        if v.retracted or moment(c.due, v) != due:
            break
        start = v.valid_from
    return start.date() if start is not None else None


def _done_by(
    user: UserView, c: Obligation, rec: Record | None, due: date, found: list[Record]
) -> Record | None:
    """The first ``done_by`` record of ``found`` that settles this obligation, or None."""
    if c.done_by is None or not found:
        return None
    if c.done_by.key is not None:
        return found[0]
    dated: list[tuple[date, Record]] = []
    for d in found:
        when = _first_day(d, DONE_DATES)
        if when is None:
            return d
        dated.append((when, d))
    if rec is None:
        since = add_months(due, -12)
    else:
        # Cheap first: on or after the current version's start is surely in this cycle; the
        # history is read only when every candidate is older than that.
        since = rec.valid_from.date() if rec.valid_from is not None else date.min
        if not any(when >= since for when, _ in dated):
            since = _since_due(user, rec, c, due) or since
    return next((d for when, d in dated if when >= since), None)


def _finding(c: Obligation, rec: Record | None, due: date, today: date) -> Finding | None:
    left = (due - today).days
    if left > c.lead_days:
        return None
    what = _label(rec) if rec is not None else "it"
    src = moment_text(c.due, rec) if rec is not None else ""
    head = f"{c.title}: {what} is due {due}{f' ({src})' if src else ''}"
    if left < 0:
        state = f" and is overdue by {plural(-left, 'day')} (today is {today}); it is not done"
        act = "Do it now and"
    else:
        when = "today" if left == 0 else "tomorrow" if left == 1 else f"in {left} days"
        state = f", {when} (today is {today}), and it is not done yet"
        act = "Do it before then and"
    log = f"log the {types_text(c.done_by)} record that shows it was done" if c.done_by else ""
    if rec is not None:
        flag = field_names(rec, c.done or DONE)[0]
        then = f"mark {what} done (set {flag} true, or its status to done)"
        then += f", or {log}" if log else ""
    else:
        then = log or "retract this constraint"
    return Finding(
        f"{head}{state}. {act} {then}.",
        [rec] if rec is not None else [],
        severity=_rung(left, c.severity),
        about=f"due {due}",
    )


def compile(name: str, c: Obligation) -> Rule:
    """The rule that checks obligation ``c``: see the module docstring for the ladder."""
    done: Names = tuple(c.done) or DONE

    def check(user: UserView) -> Iterator[Finding]:
        today = user.today
        if today is None:
            return
        read_done: list[Record] | None = None

        def found() -> list[Record]:
            # Read once, and only for a subject inside its lead time: a clock move far from
            # every due date reads no done_by record.
            nonlocal read_done
            if read_done is None:
                read_done = select(user, c.done_by) if c.done_by is not None else []
            return read_done

        if c.subject is None:
            due = moment(c.due)
            if due is None:
                yield Finding(
                    f"{c.title}: this obligation names no subject record and no fixed due date, "
                    "so nothing can be checked; give due.date, or a subject with due.fields.",
                    severity="warning",
                    about="unchecked",
                )
                return
            f = _finding(c, None, due, today)
            if f is not None and _done_by(user, c, None, due, found()) is None:
                yield f
            return
        for rec in select(user, c.subject):
            # A subject without a due date cannot be placed on the ladder: skipped.
            due = moment(c.due, rec)
            if due is None or _is_done(rec, done):
                continue
            f = _finding(c, rec, due, today)
            if f is not None and _done_by(user, c, rec, due, found()) is None:
                yield f

    return make_rule(name, c, check, watch(c.subject, c.done_by), clock=True)
