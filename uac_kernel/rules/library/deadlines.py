"""Deadline rules: returns, warranties, renewals and other dated actions about to pass, and US
tax filing.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, timedelta

from uac_kernel.core.records import Record
from uac_kernel.core.words import norm as _norm
from uac_kernel.core.words import terms as _terms
from uac_kernel.rules.engine import Finding, rule
from uac_kernel.rules.library._common import (
    LABEL,
    _called_off,
    _date_fields,
    _dated_from,
    _day,
    _days,
    _first_day,
    _flag,
    _get,
    _label,
    _named,
    _names,
    _number,
    _settled,
    _status,
    _text,
    plays,
)
from uac_kernel.state.query import UserView
from uac_kernel.vocab.catalogue import Concept, concept
from uac_kernel.vocab.resolve import current, types_of

__all__ = ["deadline_approaching", "tax_filing_deadline", "warranty_ends_with_open_fault"]


# -- deadlines -------------------------------------------------------------------------------
# The field a date sits in says what kind of deadline it is, so each kind is a concept
# (data/concepts/deadlines.toml), read in this order on every type.
DUE = concept("duty.due")
RETURN_BY = concept("return.by")
WARRANTY_UNTIL = concept("warranty.until")
RENEWAL_DATE, NOTICE_DAYS = concept("renewal.date"), concept("renewal.notice")
EXPIRY = concept("document.expiry")
TERM_ENDS = concept("term.ends")
PROMO_ENDS = concept("promo.ends")
DEADLINES = (DUE, RETURN_BY, WARRANTY_UNTIL, RENEWAL_DATE, EXPIRY, TERM_ENDS, PROMO_ENDS)
# An obligation stays overdue once its date passes undone, an alert until the record is
# settled; the other kinds are windows (a return, a warranty, a promotion, a renewal) that
# simply close.
OBLIGATIONS = frozenset({DUE})
# Days ahead a deadline is flagged: 14, or 30 for a warranty's end (a claim needs a diagnosis and
# a repair visit, which take weeks to arrange: common sense).
LEAD_DAYS = {WARRANTY_UNTIL: 30}
NOTICE = frozenset({RENEWAL_DATE, EXPIRY, TERM_ENDS})  # with renewal.notice: act by date - notice
EXCLUDED = {
    EXPIRY: "passport"
}  # the kind on types of this role is another rule's: passport_validity
ACTIONS = {
    RETURN_BY: "start the return",
    WARRANTY_UNTIL: "file any warranty claim",
    RENEWAL_DATE: "cancel or confirm the renewal",
    PROMO_ENDS: "pay down the promotional balance or plan for the regular rate",
    EXPIRY: "renew or replace it",
    TERM_ENDS: "decide what happens when it ends",
}


def _deadline_fields(user: UserView, t: str) -> dict[str, Concept]:
    """The date fields of type ``t`` that hold a deadline, each with its kind. A field two
    kinds claim takes the one it is bound to over a catalogue default (a ``Lease.ends`` bound
    to ``renewal.date`` is a renewal, not a term's end), else the first in ``DEADLINES``."""
    vocab = current()
    found: dict[str, Concept] = {}
    for c in DEADLINES:
        if (r := EXCLUDED.get(c)) is not None and plays(t, r):
            continue
        for f in _date_fields(user, t, c):
            if f not in found or (
                vocab.binding(t, c, f) is not None and vocab.binding(t, found[f], f) is None
            ):
                found[f] = c
    return found


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
    """Reads, on current records of any type, the date fields of each deadline concept: a due
    date ``duty.due`` (``deadline``, ``due``), ``return.by`` (``return_by``), ``warranty.until``
    (``warranty_until``, ``warranty_expires``), ``renewal.date`` (``renews_on``),
    ``document.expiry`` (``expires``; not on a type playing ``passport``), ``term.ends``
    (``ends``), ``promo.ends`` (``promo_ends``), and an optional int ``renewal.notice``
    (``notice_days``: notice needed before a renewal, an expiry or an end), and what settles a
    record (``record.settled``: ``done``, ``resolved``, ``cancelled``, ``returned``, ``filed``,
    ``completed``, ``paid``, ``renewed``, ``submitted``, or a ``status`` naming one of them, or
    ``closed``). The names in brackets are the defaults; a user's vocabulary binds its own.

    Flags a date (or notice deadline) within the next 14 days of the log clock — 30 days for a
    warranty's end, since a claim needs a diagnosis and a repair visit before that date — on an
    unsettled record: info 8 or more days ahead, warning 3–7, critical 0–2. An obligation
    (``duty.due``) whose date has passed undone stays an alert, critical and overdue, under the
    same id (an escalation, not a new alert) until the record is settled; a window (a return, a
    warranty, a renewal, a promotion, an expiry) closes on its date. Messages and alert ids name
    the user's own field. Re-runs as the clock moves.
    """
    today = user.today
    if today is None:
        return
    for t in user.types():
        kinds = _deadline_fields(user, t)
        if not kinds:
            continue
        # A date before today is past, and a notice deadline lies before its date, so only
        # records with a deadline from today on can be due: the index reads just those, plus
        # the obligations dated before today (overdue unless settled).
        coming = _dated_from(user, t, list(kinds), today)
        overdue = {
            r.key: r
            for f, c in kinds.items()
            if c in OBLIGATIONS
            for r in user.where(t, f, before=today)
        }
        for rec in coming + [r for k, r in overdue.items() if k not in {c.key for c in coming}]:
            if _settled(rec):
                continue
            yield from _deadline_findings(rec, kinds, today)


def _deadline_findings(rec: Record, kinds: dict[str, Concept], today: date) -> Iterator[Finding]:
    notice = int(_number(_get(rec, NOTICE_DAYS)) or 0)
    for f, kind in kinds.items():
        d = _day(_get(rec, f))
        if d is None:
            continue
        # (when, about, what, action, obligation): ``about`` is the user's field name, so an
        # alert keeps its id whatever concept the field was read as.
        due = [(d, f, f"{f} {d}", ACTIONS.get(kind, "finish it"), kind in OBLIGATIONS)]
        if kind in NOTICE and 0 < notice <= 3660:
            by = d - timedelta(days=notice)
            what = f"the notice deadline {by} ({_days(notice)} before {f} {d})"
            due.append((by, f"{f} notice", what, "give notice", False))
        for when, about, what, action, obligation in due:
            left = (when - today).days
            if left < 0 and obligation:
                yield Finding(
                    f"{_label(rec)}: {what} passed {_days(-left)} ago (today is {today}) and it "
                    f"is not marked done: it is overdue. {action[0].upper()}{action[1:]} now "
                    "(late is usually better than never), then mark it done.",
                    [rec],
                    about=about,
                    severity="critical",
                )
                continue
            if not 0 <= left <= LEAD_DAYS.get(kind, 14):
                continue
            in_ = "today" if left == 0 else "tomorrow" if left == 1 else f"in {left} days"
            yield Finding(
                f"{_label(rec)}: {what} is {in_} (today is {today}). "
                f"{action[0].upper()}{action[1:]} before then, then mark it done.",
                [rec],
                about=about,
                severity="critical" if left <= 2 else "warning" if left <= 7 else "info",
            )


TAX_YEAR = concept("tax_return.year")
JURISDICTION = concept("tax_return.jurisdiction")
EXTENDED = concept("tax_return.extended")
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
    roles=["tax_return"],
    clock=True,
    severity="warning",
    category="warranty_deadline_expiration",
    source="IRS, Instructions for Form 1040 and Publication 17 (individual returns are due April "
    "15 of the following year, or the next business day; Form 4868 extends filing to October "
    "15); Internal Revenue Code 6651(a)(1) (failure-to-file penalty, 5% a month up to 25%)",
)
def tax_filing_deadline(user: UserView) -> Iterator[Finding]:
    """Reads records of the types playing ``tax_return`` (``TaxReturn``, ``TaxFiling``,
    ``Taxes``, ``Tax``) with a whole-number ``tax_return.year`` (``tax_year``, ``year``);
    ``tax_return.jurisdiction`` (``country``, ``jurisdiction``: US, or unset);
    ``tax_return.extended`` (``extension``, ``extended``) true; and the settled flags
    (``filed``, ``submitted``, ``done``, ...). A record with its own ``duty.due`` is left to
    ``deadline_approaching``.

    Flags an unfiled US federal return whose due date (April 15 after the tax year, or October 15
    with an extension, moved past weekends and Emancipation Day) is 0–30 days after the log
    clock: info 8 or more days ahead, warning 3–7, critical 0–2, as for other deadlines. Once the
    date has passed, an unfiled return stays a critical overdue alert under the same id until it
    is marked filed (a flag or a ``status``). Re-runs as the clock moves.
    """
    today = user.today
    if today is None:
        return
    for t in types_of("tax_return"):
        for rec in user.all(t):
            year = _get(rec, TAX_YEAR)
            year = int(year) if isinstance(year, str) and year.strip().isdigit() else year
            if not isinstance(year, int) or isinstance(year, bool) or not 1900 < year < 9000:
                continue
            where = _norm(_text(rec, JURISDICTION))
            if _settled(rec) or (where.strip() and not any(u in where for u in US)):
                continue
            if _first_day(rec, DUE) is not None:
                continue
            extended = _flag(rec, EXTENDED)
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


# -- a warranty ending while a fault on its item is open --------------------------------------
FAULT_ITEM, REPORTED = concept("fault.item"), concept("fault.reported")
FIXED = concept("fault.fixed")
COVERS = concept("warranty.covers")
FIXED_STATUS = _terms("fixed, repaired, replaced")
_ARTICLES = _terms("the, my, our, a, an")


def _refs(rec: Record, name: str) -> set[str]:
    """The things field or concept ``name`` of ``rec`` names (texts and list items),
    normalised, a leading article dropped: "the Dishwasher" and "dishwasher" are one."""
    values = rec.__dict__
    found = set()
    for f in _names(rec, name):
        v = values.get(f)
        for text in v if isinstance(v, list) else [v]:
            if isinstance(text, str) and (n := _norm(text)).strip():
                art = next((a for a in _ARTICLES if n.startswith(a) and len(n) > len(a)), "")
                found.add(" " + n[len(art) :] if art else n)
    return found


def _open_faults(user: UserView) -> list[tuple[Record, set[str]]]:
    """Current records of types playing ``fault`` that are not resolved (settled, called
    off, ``fault.fixed``, or a status saying fixed or repaired), with what they name as faulty."""
    found = []
    for t in types_of("fault"):
        for rec in user.all(t):
            if _settled(rec) or _flag(rec, FIXED) or _status(rec, FIXED_STATUS) is not None:
                continue
            if items := _refs(rec, FAULT_ITEM):
                found.append((rec, items))
    return found


def _reported(rec: Record) -> date | None:
    """When a fault was reported: its ``fault.reported`` date, else when it was recorded."""
    return _first_day(rec, REPORTED) or (rec.valid_from.date() if rec.valid_from else None)


@rule(
    watch=None,
    clock=True,
    severity="warning",
    category="warranty_deadline_expiration",
    source="FTC consumer guidance, Warranties (consumer.ftc.gov): a defect reported during the "
    "warranty period must be corrected even if the warranty expires before it is fixed; "
    "Magnuson-Moss Warranty Act, 15 U.S.C. 2304(a)(1) (remedy within a reasonable time); "
    "Directive (EU) 2019/771, Art. 10 and 17 (the seller's liability and commercial guarantees); "
    "UK Consumer Rights Act 2015, s. 30 (a guarantee is binding)",
)
def warranty_ends_with_open_fault(user: UserView) -> Iterator[Finding]:
    """Reads open faults: current records of the types playing ``fault`` (``Repair``,
    ``Fault``, ``Issue``, ``Ticket``, ``Defect``, ``RepairTicket``) that name an item in
    ``fault.item`` (``item``, ``product``, ``device``, ``appliance``, ``asset``, ``warranty``:
    the item's key, or its name), reported on ``fault.reported`` (``reported``,
    ``reported_on``, ``opened``, ``opened_on``, ``noticed``, ``date``; else when recorded), not
    settled, called off or ``fault.fixed`` (``fixed``, ``repaired``, ``resolved``, ``closed``, or
    a status saying so); and records of any type with a ``warranty.until`` date
    (``warranty_until``, ``warranty_expires``), linked to the fault by their key, their name
    (``record.label``) or the item their ``warranty.covers`` names (``item``, ``product``,
    ``device``, ``covers``).

    Flags a warranty that ends within 30 days of the log clock while a fault on its item is
    open (critical within 7 days: the claim must be made before the end), and one that has
    ended since the fault was reported (warning: a fault reported in time must still be put
    right, so press the claim with the date it was reported). A fault reported after the
    warranty ended, a resolved fault or a fault on another item is not flagged. The evidence
    is the warranty's record and the fault's. Re-runs as the clock moves.
    """
    today = user.today
    if today is None:
        return
    faults = _open_faults(user)
    if not faults:
        return
    reported = {f.key: _reported(f) for f, _ in faults}
    # A warranty that ended before every open fault was reported, or before today when none
    # says when, covers none of them: the index reads only those ending since.
    since = min([today, *(d for d in reported.values() if d is not None)])
    lead = LEAD_DAYS[WARRANTY_UNTIL]
    for t in user.types():
        fields = _date_fields(user, t, WARRANTY_UNTIL)
        if not fields:
            continue
        for w in _dated_from(user, t, fields, since):
            until = _first_day(w, fields)
            if until is None or _called_off(w):
                continue
            # Its own key and name (the first label set, not every label field: a merchant
            # "Apple" names no laptop), and the item it covers when it is a record of its own.
            names = {_norm(w.key), *_refs(w, _named(w, LABEL)), *_refs(w, COVERS)}
            field, left = _named(w, WARRANTY_UNTIL), (until - today).days
            for fault, items in faults:
                on = reported[fault.key]
                if fault is w or not items & names or (on is not None and on > until):
                    continue
                what = f"{_label(fault)}, reported {on}" if on else _label(fault)
                if 0 <= left <= lead:
                    in_ = "today" if left == 0 else "tomorrow" if left == 1 else f"in {left} days"
                    yield Finding(
                        f"{_label(w)}: its warranty ({field} {until}) ends {in_} (today is "
                        f"{today}) and {what}, is still open. Make the warranty claim for it "
                        "before then, in writing, and keep proof of the date.",
                        [w, fault],
                        about=field,
                        severity="critical" if left <= 7 else None,
                    )
                elif left < 0 and on is not None:
                    yield Finding(
                        f"{_label(w)}: its warranty ({field} {until}) ended {_days(-left)} ago "
                        f"(today is {today}) and {what} while it was covered, is still open. A "
                        "fault reported during the warranty must still be put right: press the "
                        "claim now, citing the date it was reported.",
                        [w, fault],
                        about=field,
                    )
