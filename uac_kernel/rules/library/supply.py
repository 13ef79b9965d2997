"""Medication supply: a prescription that runs out before its refill or before a trip ends."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import date, timedelta

from uac_kernel.core.records import Record
from uac_kernel.rules.engine import Finding, rule
from uac_kernel.rules.library._common import (
    _current_meds,
    _days,
    _first_day,
    _flag,
    _label,
    _named,
    _names,
    _number,
)
from uac_kernel.rules.library.travel import _span_text, _trip_where, _upcoming_trips
from uac_kernel.state.query import UserView
from uac_kernel.vocab.catalogue import concept

__all__ = ["medication_supply"]

SUPPLY, AS_OF = concept("medication.supply"), concept("medication.supply_as_of")
RATE = concept("medication.rate")  # doses a day
PER_DOSE = concept("medication.per_dose")  # units a dose
REFILL_DATE, REFILLS = concept("medication.refill_date"), concept("medication.refills")
AS_NEEDED = concept("medication.as_needed")
NEW_SCRIPT = "ask the prescriber for a new prescription"
# Days ahead a run-out is flagged when no refill date or trip is known: a pharmacy refill, and
# an insurer's "refill too soon" rule, usually allow a refill in the last week of a supply.
SUPPLY_LEAD_DAYS = 7
TRIP_LEAD_DAYS = 30  # trips starting within a month are checked: time to arrange a refill


def _first_number(rec: Record, name: str) -> float | None:
    """The first number among the fields ``name`` (a concept) stands for on ``rec``."""
    values = rec.__dict__
    return next((x for f in _names(rec, name) if (x := _number(values.get(f))) is not None), None)


def _runs_out(med: Record) -> tuple[date, float, float, date] | None:
    """(first day without a full day's dose, supply, units a day, as-of day), or None when the
    record lacks a supply, a rate or a date to count from."""
    supply, rate = _first_number(med, SUPPLY), _first_number(med, RATE)
    per_dose = _first_number(med, PER_DOSE) or 1.0
    if supply is None or rate is None or supply < 0 or not 0 < rate * per_dose <= 1000:
        return None
    as_of = _first_day(med, AS_OF)
    if as_of is None and med.valid_from is not None:
        as_of = med.valid_from.date()
    if as_of is None or supply / (rate * per_dose) > 3660:
        return None
    daily = rate * per_dose
    return as_of + timedelta(days=math.floor(supply / daily)), supply, daily, as_of


def _no_refills(med: Record) -> str | None:
    """How ``med`` says its prescription has no refills left (``refills 0``, in the user's own
    field name), or None when some are left or the count is not recorded."""
    n = _first_number(med, REFILLS)
    return f"{_named(med, REFILLS)} {n:g}" if n is not None and n <= 0 else None


@rule(
    roles=["medication", "trip"],
    clock=True,
    severity="warning",
    category="drug_interactions_health_safety",
    source="CDC Yellow Book 2024, 'Travelers with Chronic Illnesses' (carry enough medication "
    "for the whole trip plus extra for delays; prescriptions may not be filled abroad); FDA, "
    "'Don't Stop Taking Your Medicine Suddenly' guidance on running out of prescriptions",
)
def medication_supply(user: UserView) -> Iterator[Finding]:
    """Reads current medications with a ``medication.supply`` (by default ``quantity``/
    ``pills_left``/``supply``/``count``), a ``medication.rate`` (``times_per_day``/
    ``daily_dose``/``per_day``, times ``medication.per_dose``: ``pills_per_dose``/
    ``units_per_dose``, when given), the day the supply was counted (``medication.supply_as_of``:
    ``as_of``/``counted_on``/``filled_on``, else when the record was last stated), a
    ``medication.refill_date`` (``next_refill``/``refill_due``/``refill_on``) and the
    ``medication.refills`` left (``refills``/``refills_left``); skips ``medication.as_needed``
    (``as_needed``/``prn``) true. Reads coming trips (``trip.start``, ``trip.end`` or a stated
    length).

    The supply lasts ``supply / units a day`` whole days from the day it was counted. Flags a
    supply that has run out (critical), that runs out before the next refill (warning; critical
    within 2 days), that runs out before the end of a trip starting within 30 days with no refill
    due before it (warning: refills are hard away from home; a trip with no end recorded is
    checked against its start), or, with neither, that runs out within 7 days. With no refills
    left a refill date renews nothing: the advice is a new prescription from the prescriber, and
    a run-out within 7 days is flagged whatever refill date is recorded. Re-runs as the clock
    moves.
    """
    today = user.today
    if today is None:
        return
    meds = []
    for med, _ in _current_meds(user, today):
        if _flag(med, AS_NEEDED):
            continue
        if (counted := _runs_out(med)) is not None:
            meds.append((med, *counted))
    if not meds:
        return
    trips = list(_upcoming_trips(user))
    for med, out, supply, daily, as_of in meds:
        have = f"{supply:g} on {as_of} at {daily:g} a day"
        left = (out - today).days
        # No refills left: a pharmacy fills nothing on the refill date without a new
        # prescription, so the date renews no supply and the advice goes to the prescriber.
        spent = _no_refills(med)
        none_left = f"no refills are left ({spent}): {NEW_SCRIPT}" if spent else ""
        if left <= 0:
            yield Finding(
                f"{_label(med)} ran out on {out} ({have}), {_days(-left)} ago by that count"
                + (f", and {none_left} now" if spent else ": refill it now")
                + ", or update the count if it was refilled.",
                [med],
                severity="critical",
            )
            continue
        refill = _first_day(med, REFILL_DATE)
        if refill is not None and refill > out:
            yield Finding(
                f"{_label(med)} runs out on {out} ({have}), {_days((refill - out).days)} "
                f"before its next refill on {refill}"
                + (
                    f", and {none_left} and a bridge supply before then."
                    if spent
                    else ": ask for an early refill or a bridge supply before then."
                ),
                [med],
                about="refill",
                severity="critical" if left <= 2 else "warning",
            )
        for trip, start, end in trips:
            last = end or start
            # A refill due before departure renews the count; a trip more than a month off is
            # checked as it nears (the rule re-runs as the clock moves).
            if out > last or (refill is not None and refill <= start and not spent):
                continue
            if (start - today).days > TRIP_LEAD_DAYS:
                continue
            during = "before you leave" if out <= start else "while you are away"
            yield Finding(
                f"{_label(med)} runs out on {out} ({have}), {during} on {_label(trip)} to "
                f"{_trip_where(trip) or 'your destination'} ({_span_text(start, end)})"
                + (f", and {none_left}, then refill" if spent else ": refill")
                + " before you go and carry enough for the whole trip plus a few days, since "
                "prescriptions are hard to fill away from home.",
                [med, trip],
                about="trip",
            )
        # A refill date after the run-out was flagged above; one before it renews the supply
        # only while the prescription has refills left.
        refill_handled = refill is not None and (refill > out or not spent)
        if not refill_handled and not trips and left <= SUPPLY_LEAD_DAYS:
            yield Finding(
                f"{_label(med)} runs out on {out} ({have}), in {_days(left)}, and "
                + (
                    f"{none_left} now."
                    if spent
                    else "no refill date is recorded: request the refill now."
                ),
                [med],
                about="refill",
                severity="critical" if left <= 2 else "warning",
            )
