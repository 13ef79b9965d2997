"""Deadline rules: returns, warranties, renewals and other dated actions about to pass, and US
tax filing.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, timedelta

from uac_kernel.query import UserView
from uac_kernel.records import Record
from uac_kernel.rules.engine import Finding, rule
from uac_kernel.rules.library._common import (
    DEADLINE_ACTIONS,
    DEADLINE_EXCLUDED,
    DEADLINE_FIELDS,
    DEADLINE_LEAD_DAYS,
    NOTICE_FIELDS,
    OBLIGATION_FIELDS,
    _date_fields,
    _dated_from,
    _day,
    _days,
    _flag,
    _get,
    _label,
    _norm,
    _number,
    _settled,
    _terms,
    _text,
)

__all__ = ["deadline_approaching", "tax_filing_deadline"]


# -- deadlines -------------------------------------------------------------------------------
@rule(
    watch=None,
    clock=True,
    severity="warning",
    category="warranty_deadline_expiration",
    source="FTC, Businessperson's Guide to Federal Warranty Law (Magnuson-Moss Warranty Act, 15 "
    "U.S.C. 2301 ff.: a written warranty's duration bounds a claim); Restore Online Shoppers' "
    "Confidence Act (15 U.S.C. 8403) and FTC Negative Option Rule (16 CFR 425) on automatic "
    "renewals; Regulation Z, 12 CFR 1026.55 (promotional rates end on a stated date)",
)
def deadline_approaching(user: UserView) -> Iterator[Finding]:
    """Reads, on current records of any type, the date fields ``deadline``, ``due``, ``return_by``,
    ``warranty_until``, ``warranty_expires``, ``renews_on``, ``expires``, ``ends``, ``promo_ends``
    (not ``Passport.expires``), an optional int ``notice_days`` (notice needed before
    ``renews_on``/``expires``/``ends``), and what settles a record: the flags ``done``,
    ``resolved``, ``cancelled``, ``returned``, ``filed``, ``completed``, ``paid``, ``renewed``,
    ``submitted``, or a ``status`` naming one of them (or ``closed``).

    Flags a date (or notice deadline) within the next 14 days of the log clock — 30 days for a
    warranty's end, since a claim needs a diagnosis and a repair visit before that date — on an
    unsettled record: info 8 or more days ahead, warning 3–7, critical 0–2. An obligation
    (``deadline``, ``due``) whose date has passed undone stays an alert, critical and overdue,
    under the same id (an escalation, not a new alert) until the record is settled; a window
    (a return, a warranty, a renewal, a promotion, an expiry) closes on its date. Re-runs as the
    clock moves.
    """
    today = user.today
    if today is None:
        return
    for t in user.types():
        fields = [
            f for f in _date_fields(user, t, DEADLINE_FIELDS) if (t, f) not in DEADLINE_EXCLUDED
        ]
        if not fields:
            continue
        # A date before today is past, and a notice deadline lies before its date, so only
        # records with a deadline from today on can be due: the index reads just those, plus
        # the obligations dated before today (overdue unless settled).
        coming = _dated_from(user, t, fields, today)
        overdue = {
            r.key: r
            for f in fields
            if f in OBLIGATION_FIELDS
            for r in user.where(t, f, before=today)
        }
        for rec in coming + [r for k, r in overdue.items() if k not in {c.key for c in coming}]:
            if _settled(rec):
                continue
            yield from _deadline_findings(rec, fields, today)


def _deadline_findings(rec: Record, fields: list[str], today: date) -> Iterator[Finding]:
    notice = int(_number(_get(rec, "notice_days")) or 0)
    for f in fields:
        d = _day(_get(rec, f))
        if d is None:
            continue
        due = [(d, f, f"{f} {d}", DEADLINE_ACTIONS.get(f, "finish it"))]
        if f in NOTICE_FIELDS and 0 < notice <= 3660:
            by = d - timedelta(days=notice)
            what = f"the notice deadline {by} ({_days(notice)} before {f} {d})"
            due.append((by, f"{f} notice", what, "give notice"))
        for when, about, what, action in due:
            left = (when - today).days
            if left < 0 and about in OBLIGATION_FIELDS:
                yield Finding(
                    f"{_label(rec)}: {what} passed {_days(-left)} ago (today is {today}) and it "
                    f"is not marked done: it is overdue. {action[0].upper()}{action[1:]} now "
                    "(late is usually better than never), then mark it done.",
                    [rec],
                    about=about,
                    severity="critical",
                )
                continue
            if not 0 <= left <= DEADLINE_LEAD_DAYS.get(about, 14):
                continue
            in_ = "today" if left == 0 else "tomorrow" if left == 1 else f"in {left} days"
            yield Finding(
                f"{_label(rec)}: {what} is {in_} (today is {today}). "
                f"{action[0].upper()}{action[1:]} before then, then mark it done.",
                [rec],
                about=about,
                severity="critical" if left <= 2 else "warning" if left <= 7 else "info",
            )


TAX_TYPES = ("TaxReturn", "TaxFiling", "Taxes", "Tax")
US = _terms("us, usa, u s, united states, america, federal, irs")
TAX_LEAD_DAYS = 30  # a return takes time to prepare, and an extension must be filed by the date


def _us_filing_due(tax_year: int, extended: bool) -> date:
    """The US federal due date for individual returns of ``tax_year``: April 15 of the next year
    (October 15 with an extension), moved to the next business day past a weekend or the
    District of Columbia's Emancipation Day (April 16; observed on Friday the 15th or Monday the
    17th when it falls on a weekend)."""
    year = tax_year + 1
    emancipation = date(year, 4, 16)
    if emancipation.weekday() == 5:
        emancipation -= timedelta(days=1)
    elif emancipation.weekday() == 6:
        emancipation += timedelta(days=1)
    due = date(year, 10 if extended else 4, 15)
    while due.weekday() >= 5 or due == emancipation:
        due += timedelta(days=1)
    return due


@rule(
    watch=list(TAX_TYPES),
    clock=True,
    severity="warning",
    category="warranty_deadline_expiration",
    source="IRS, Instructions for Form 1040 and Publication 17 (individual returns are due April "
    "15 of the following year, or the next business day; Form 4868 extends filing to October "
    "15); Internal Revenue Code 6651(a)(1) (failure-to-file penalty, 5% a month up to 25%)",
)
def tax_filing_deadline(user: UserView) -> Iterator[Finding]:
    """Reads ``TaxReturn``/``TaxFiling``/``Taxes``/``Tax`` records with a whole-number
    ``tax_year`` (or ``year``); ``country``/``jurisdiction`` (US, or unset); ``extension``/
    ``extended`` true; and the settled flags (``filed``, ``submitted``, ``done``, ...). A record
    with its own ``due``/``deadline`` is left to ``deadline_approaching``.

    Flags an unfiled US federal return whose due date (April 15 after the tax year, or October 15
    with an extension, moved past weekends and Emancipation Day) is 0–30 days after the log
    clock: info 8 or more days ahead, warning 3–7, critical 0–2, as for other deadlines. Once the
    date has passed, an unfiled return stays a critical overdue alert under the same id until it
    is marked filed (a flag or a ``status``). Re-runs as the clock moves.
    """
    today = user.today
    if today is None:
        return
    for t in TAX_TYPES:
        for rec in user.all(t):
            year = _get(rec, "tax_year")
            year = year if year is not None else _get(rec, "year")
            year = int(year) if isinstance(year, str) and year.strip().isdigit() else year
            if not isinstance(year, int) or isinstance(year, bool) or not 1900 < year < 9000:
                continue
            where = _norm(_text(rec, ("country", "jurisdiction")))
            if _settled(rec) or (where.strip() and not any(u in where for u in US)):
                continue
            if _day(_get(rec, "due")) or _day(_get(rec, "deadline")):
                continue
            extended = _flag(rec, "extension", "extended")
            due = _us_filing_due(year, extended)
            left = (due - today).days
            if left < 0:
                yield Finding(
                    f"{_label(rec)}: the {year} US federal return was due {due}, "
                    f"{_days(-left)} ago (today is {today}), and it is not marked filed: it is "
                    "overdue. File it now: the failure-to-file penalty is 5% of the unpaid tax "
                    "for each month or part of a month late, up to 25%, and interest runs on "
                    "unpaid tax. Then mark it filed.",
                    [rec],
                    severity="critical",
                )
                continue
            if left > TAX_LEAD_DAYS:
                continue
            in_ = "today" if left == 0 else "tomorrow" if left == 1 else f"in {left} days"
            act = (
                "file by then"
                if extended
                else "file by then, or file for an automatic extension (Form 4868) by that day; "
                "an extension to file is not an extension to pay, so pay the estimated tax too"
            )
            yield Finding(
                f"{_label(rec)}: the {year} US federal return is due {due}, {in_} (today is "
                f"{today}), and it is not marked filed: {act}. Then mark it filed.",
                [rec],
                severity="critical" if left <= 2 else "warning" if left <= 7 else "info",
            )
