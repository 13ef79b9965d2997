"""Limits per period: contributions to tax-advantaged accounts against the statutory limit of
their tax year, spending against a stated monthly or yearly budget, and work against the hours
(or shifts) a permit or contract allows a week or a term.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from uac_kernel.core.display import plural
from uac_kernel.core.records import Record
from uac_kernel.core.words import first_term as _first_term
from uac_kernel.core.words import norm as _norm
from uac_kernel.core.words import terms as _terms
from uac_kernel.rules.engine import Finding, rule
from uac_kernel.rules.library._common import (
    _called_off,
    _first_day,
    _flag,
    _from_day,
    _get,
    _label,
    _money,
    _number,
    _text,
    _void,
    plays,
)
from uac_kernel.rules.library.money import (
    AMOUNT,
    PAID_ON,
    _match,
    _records,
    _types,
    _words,
)
from uac_kernel.state.query import UserView
from uac_kernel.vocab.catalogue import concept

__all__ = ["annual_contribution_limit", "budget_exceeded", "work_over_permit_cap"]


@dataclass(frozen=True, slots=True)
class AnnualLimit:
    """The most that may go into one kind of account in a tax year, by year (and for family
    coverage, where the law sets a second limit)."""

    name: str
    currency: str
    by_year: dict[int, float]
    source: str
    fix: str
    family: dict[int, float] | None = None
    uk_tax_year: bool = False  # 6 April to 5 April, named by the year it starts


_EXCESS_US = (
    "withdraw the excess (and its earnings) before the tax filing deadline, or it is taxed 6% a "
    "year (26 U.S.C. 4973)"
)
# Limits before catch-up contributions (50 or older: more is allowed; the message says so).
ANNUAL_LIMITS: dict[str, AnnualLimit] = {
    "ira": AnnualLimit(
        "IRA (traditional and Roth combined)",
        "USD",
        {2023: 6500, 2024: 7000, 2025: 7000, 2026: 7500},
        "26 U.S.C. 219(b)(5); IRS Notices 2022-55, 2023-75, 2024-80, 2025-67",
        _EXCESS_US,
    ),
    "401k": AnnualLimit(
        "401(k)/403(b) elective deferral",
        "USD",
        {2023: 22500, 2024: 23000, 2025: 23500, 2026: 24500},
        "26 U.S.C. 402(g); IRS Notices 2022-55, 2023-75, 2024-80, 2025-67",
        "ask the plan to return the excess deferral by April 15 of the next year, or it is "
        "taxed twice (IRS Publication 525)",
    ),
    "hsa": AnnualLimit(
        "HSA",
        "USD",
        {2023: 3850, 2024: 4150, 2025: 4300, 2026: 4400},
        "26 U.S.C. 223(b); Rev. Procs. 2022-24, 2023-23, 2024-25, 2025-19",
        _EXCESS_US,
        family={2023: 7750, 2024: 8300, 2025: 8550, 2026: 8750},
    ),
    "isa": AnnualLimit(
        "ISA subscription",
        "GBP",
        {2023: 20000, 2024: 20000, 2025: 20000, 2026: 20000},
        "HMRC, Individual Savings Accounts: the annual subscription limit (ISA Regulations "
        "1998, as amended)",
        "stop paying in and tell the ISA manager, who must remove the excess (HMRC)",
        uk_tax_year=True,
    ),
    "tfsa": AnnualLimit(
        "TFSA dollar limit",
        "CAD",
        {2023: 6500, 2024: 7000, 2025: 7000, 2026: 7000},
        "Income Tax Act (Canada) s. 207.01; CRA, 'TFSA dollar limit' by year",
        "unless unused room carried forward from earlier years covers it, withdraw the excess: "
        "it is taxed 1% a month (Income Tax Act s. 207.02)",
    ),
}
# The words that name each kind of account, most specific first.
ACCOUNT_KINDS = (
    ("hsa", _terms("hsa, health savings account, health savings")),
    ("tfsa", _terms("tfsa, tax free savings account")),
    ("isa", _terms("isa, stocks and shares isa, cash isa")),
    ("401k", _terms("401k, 401 k, 403b, 403 b, tsp, thrift savings plan")),
    ("ira", _terms("ira, roth ira, traditional ira, roth")),
)
KIND, PAID_IN = concept("contribution.account_kind"), concept("contribution.amount")
PAID_IN_ON, TAX_YEAR = concept("contribution.date"), concept("contribution.tax_year")
EXEMPT, COVERAGE = concept("contribution.exempt"), concept("contribution.coverage")
_FAMILY = _terms("family, self plus one, self and family")


def _kind(rec: Record) -> str | None:
    text = _norm(_text(rec, KIND))
    return next((k for k, terms in ACCOUNT_KINDS if _first_term(text, terms)), None)


def _tax_year(rec: Record, lim: AnnualLimit) -> int | None:
    y = _get(rec, TAX_YEAR)
    if isinstance(y, int) and not isinstance(y, bool) and 1900 < y < 9000:
        return y
    d = _first_day(rec, PAID_IN_ON)
    if d is None:
        return None
    return d.year - 1 if lim.uk_tax_year and d < date(d.year, 4, 6) else d.year


@rule(
    roles=["contribution"],
    severity="warning",
    category="financial_authorization_conflicts",
    source="IRA 26 U.S.C. 219(b)(5); 401(k) 26 U.S.C. 402(g); HSA 26 U.S.C. 223(b) (yearly "
    "amounts from IRS Notices 2022-55, 2023-75, 2024-80, 2025-67 and Rev. Procs. 2022-24 to "
    "2025-19); UK ISA £20,000 (HMRC); Canada TFSA dollar limit (CRA, Income Tax Act s. 207.01)",
)
def annual_contribution_limit(user: UserView) -> Iterator[Finding]:
    """Reads ``contribution`` records (``Contribution``, ``Deposit``): the account kind from
    ``contribution.account_kind`` (IRA or Roth, 401(k)/403(b)/TSP, HSA, ISA, TFSA),
    ``contribution.amount``, ``contribution.date`` or a whole-number ``contribution.tax_year``,
    an HSA's ``contribution.coverage`` (family or self); skips records called off and those with
    ``contribution.exempt`` (``employer``, ``rollover``) true: not subject to the limit.

    Sums each kind's contributions per tax year (calendar, or 6 April – 5 April for an ISA) for
    last year and this one, and flags a total over that year's statutory limit (warning), naming
    the contribution that crossed it, the total, the limit, its source and what to do. A year the
    table lacks uses the latest year it has, and says so. Limits are before catch-up
    contributions, which the message mentions.
    """
    today = user.today
    since = date(today.year - 1, 1, 1) if today is not None else None
    groups: dict[tuple[str, int], list[tuple[Record, float]]] = defaultdict(list)
    family: set[str] = set()
    for t in _types("contribution"):
        for rec in _from_day(user, t, since, PAID_IN_ON):
            amount = _number(_get(rec, PAID_IN))
            kind = _kind(rec)
            if amount is None or amount <= 0 or kind is None:
                continue
            if _flag(rec, EXEMPT) or _called_off(rec):
                continue
            year = _tax_year(rec, ANNUAL_LIMITS[kind])
            if year is None or (since is not None and year < since.year):
                continue
            groups[(kind, year)].append((rec, amount))
            if _first_term(_norm(_text(rec, COVERAGE)), _FAMILY):
                family.add(kind)
    for (kind, year), items in sorted(groups.items()):
        lim = ANNUAL_LIMITS[kind]
        table = lim.family if lim.family and kind in family else lim.by_year
        known = year if year in table else max(table)
        cap = table[known]
        items.sort(key=lambda x: _first_day(x[0], PAID_IN_ON) or date.min)
        total, crossed = 0.0, None
        for rec, amount in items:
            total += amount
            if crossed is None and total > cap:
                crossed = rec
        if crossed is None:
            continue
        label = f"{year}-{(year + 1) % 100:02d}" if lim.uk_tax_year else str(year)
        which = "family " if lim.family and kind in family else ""
        note = "" if known == year else f" (the {known} limit: {year}'s is not in the table)"
        yield Finding(
            f"{lim.name} contributions for tax year {label} total {lim.currency} {total:,.2f} "
            f"over {len(items)} record(s), {lim.currency} {total - cap:,.2f} over the "
            f"{which}limit of {lim.currency} {cap:,.2f}{note}; {_label(crossed)} crossed it. "
            f"Unless a catch-up allowance applies (age 50 or older, for US accounts), "
            f"{lim.fix}. Source: {lim.source}.",
            [crossed],
            about=f"{kind}:{year}",
        )


BUDGET_CAP, BUDGET_PERIOD = concept("budget.cap"), concept("budget.period")
BUDGET_CATEGORY, CATEGORY = concept("budget.category"), concept("payment.category")
REFUNDED = concept("payment.refunded")
_MONTH, _YEAR = _terms("month, monthly, mo"), _terms("year, yearly, annual, annually, yr")
_CATEGORY_STOP = frozenset({"the", "my", "on", "for", "and", "spending", "budget"})


@rule(
    roles=["budget", "charge"],
    clock=True,
    severity="warning",
    category="financial_authorization_conflicts",
    source="CFPB, 'Budgeting: how to create a budget and stick with it' (track spending against "
    "the limit you set, by category and month); the limit is the user's own",
)
def budget_exceeded(user: UserView) -> Iterator[Finding]:
    """Reads ``budget`` records (``Budget``, ``Limit``, ``SpendingLimit``) with ``budget.cap``
    and ``budget.period`` naming a month or a year, optional ``budget.category``; and ``charge``
    records (``Purchase``, ``Transaction``, ``Expense``, ``Charge``, ``Payment``:
    ``payment.amount``, ``payment.date``, ``payment.category``); skips those called off or with
    ``payment.refunded`` true.

    Sums the spending of the current month (or year) of the log clock whose category matches
    the budget's (a budget without a category covers all spending) and flags a total over the
    limit (warning), naming the spending that crossed it, the total and the excess. Reads only
    the spending dated in the period, through the index.
    """
    today = user.today
    if today is None:
        return
    budgets = []
    for b in _records(user, "budget"):
        cap = _number(_get(b, BUDGET_CAP))
        per = _norm(_text(b, BUDGET_PERIOD))
        monthly, yearly = _first_term(per, _MONTH), _first_term(per, _YEAR)
        if cap is None or cap <= 0 or not (monthly or yearly) or _called_off(b):
            continue
        first = date(today.year, today.month, 1) if monthly else date(today.year, 1, 1)
        cat = _words(_text(b, BUDGET_CATEGORY), _CATEGORY_STOP)
        budgets.append((b, cap, first, cat, "month" if monthly else "year"))
    if not budgets:
        return
    since = min(first for _, _, first, _, _ in budgets)
    spends = []
    for t in _types("charge"):
        for s in _from_day(user, t, since, PAID_ON):
            amount, when = _number(_get(s, AMOUNT)), _first_day(s, PAID_ON)
            if amount is None or amount <= 0 or when is None or when > today:
                continue
            if not (_flag(s, REFUNDED) or _called_off(s)):
                what = _words(_text(s, CATEGORY), _CATEGORY_STOP)
                spends.append((s, amount, when, what))
    spends.sort(key=lambda x: (x[2], x[0].key))
    for b, cap, first, cat, period in budgets:
        total, crossed, n = 0.0, None, 0
        for s, amount, when, what in spends:
            if when < first or (cat and not (cat <= what or _match(cat, what))):
                continue
            total, n = total + amount, n + 1
            if crossed is None and total > cap:
                crossed = s
        if crossed is None:
            continue
        scope = f" on {' '.join(sorted(cat))}" if cat else ""
        yield Finding(
            f"Spending{scope} this {period} (since {first}) is {_money(total, b)} over {n} "
            f"record(s), {_money(total - cap, b)} over the {_money(cap, b)} limit of "
            f"{_label(b)}; {_label(crossed)} crossed it. Hold further spending{scope} until "
            "the period ends, or revise the budget.",
            [b, crossed],
        )


# -- a cap on work per week or term in a permit or contract -----------------------------------
HOURS_CAP, COUNT_CAP = concept("permit.hours_cap"), concept("permit.count_cap")
CAP_PERIOD, TERM_ONLY = concept("permit.period"), concept("permit.term_only")
TERM_START, TERM_END = concept("permit.term_start"), concept("permit.term_end")
PERMIT_EMPLOYER = concept("permit.employer")
VALID_FROM, VALID_UNTIL = concept("document.valid_from"), concept("document.expiry")
TERM_FROM, TERM_UNTIL = concept("study_term.start"), concept("study_term.end")
SHIFT_HOURS, SHIFT_WHEN = concept("shift.hours"), concept("shift.when")
SHIFT_END, SHIFT_EMPLOYER = concept("shift.end"), concept("shift.employer")
_TERM, _WEEK = _terms("term, semester, session"), _terms("week, weekly, wk")
_EMPLOYER_STOP = frozenset({"the", "ltd", "inc", "llc", "plc", "co", "limited"})


@dataclass(frozen=True, slots=True)
class _Cap:
    """A permit's cap: ``limit`` hours (or shifts, ``count``) a week or a term."""

    permit: Record
    limit: float
    count: bool
    per_term: bool
    term_only: bool
    valid: tuple[date | None, date | None]
    employer: frozenset[str]

    def unit(self, n: float) -> str:
        return plural(int(n), "shift") if self.count else f"{n:g} hours"


def _caps(permit: Record) -> list[_Cap]:
    """The caps a permit states (hours, a count, or both), with what they apply to."""
    per = _norm(_text(permit, CAP_PERIOD))
    per_term = bool(_first_term(per, _TERM)) and not _first_term(per, _WEEK)
    term_only = _flag(permit, TERM_ONLY) or (bool(_first_term(per, _TERM)) and not per_term)
    valid = (_first_day(permit, VALID_FROM), _first_day(permit, VALID_UNTIL))
    employer = _words(_text(permit, PERMIT_EMPLOYER), _EMPLOYER_STOP)
    return [
        _Cap(permit, limit, concept_ is COUNT_CAP, per_term, term_only, valid, employer)
        for concept_ in (HOURS_CAP, COUNT_CAP)
        if (limit := _number(_get(permit, concept_))) is not None and limit >= 0
    ]


def _shift_hours(shift: Record) -> float | None:
    """A shift's stated hours, else its start to its end (date-times, at most a day apart)."""
    hours = _number(_get(shift, SHIFT_HOURS))
    if hours is not None:
        return hours if 0 <= hours <= 24 else None
    start, end = _get(shift, SHIFT_WHEN), _get(shift, SHIFT_END)
    if isinstance(start, datetime) and isinstance(end, datetime):
        span = (end - start).total_seconds() / 3600
        return span if 0 < span <= 24 else None
    return None


def _terms_of(user: UserView, permits: list[Record]) -> list[tuple[date, date, Record]]:
    """Terms as (first day, last day, record): ``term`` records and the term a permit states."""
    found = []
    for rec, first, last in [
        *((t, TERM_FROM, TERM_UNTIL) for t in _records(user, "study_term")),
        *((p, TERM_START, TERM_END) for p in permits),
    ]:
        a, b = _first_day(rec, first), _first_day(rec, last)
        if a is not None and b is not None and a <= b and not _called_off(rec):
            found.append((a, b, rec))
    return found


@rule(
    roles=["permit", "shift", "study_term"],
    clock=True,
    severity="critical",
    category="scheduling_conflicts",
    source="UK Home Office, 'Student visa: what you can and cannot do' (gov.uk: up to 20 hours "
    "a week in term time at degree level, 10 below) and UKVI's definition of a week as Monday to "
    "Sunday, hours never averaged; US 8 CFR 214.2(f)(9)(i) (F-1 on-campus work: at most 20 "
    "hours a week while school is in session); a contract's own cap",
)
def work_over_permit_cap(user: UserView) -> Iterator[Finding]:
    """Reads ``permit`` records (``Visa``, ``Permit``, ``WorkPermit``, ``StudentVisa``,
    ``Contract``) with ``permit.hours_cap`` (``max_hours``, ``hours_limit``...) or
    ``permit.count_cap`` (``max_shifts``...), ``permit.period`` (a week, the default; a term;
    "week in term time"), ``permit.term_only``, the permit's own ``permit.term_start``/
    ``permit.term_end``, ``permit.employer``, and its validity (``document.valid_from``,
    ``document.expiry``); ``term`` records (``Term``, ``Semester``...: ``term.start``,
    ``term.end``); and ``shift`` records (``Shift``, ``WorkShift``, ``Timesheet``, ``WorkLog``:
    ``shift.when``, ``shift.hours`` or its start to ``shift.end``, ``shift.employer``); skips
    permits and shifts called off or void.

    Sums the shifts of each week (Monday to Sunday, never averaged) — or each term, for a cap per
    term — within the permit's validity, only the weeks that touch a term when the cap holds in
    term time (every week when no term dates are known, said in the message), only the shifts
    for the permit's employer when it names one, and flags a week over the cap (a week at the
    cap is within it): critical, with the total, the excess and what to do. Evidence: the
    permit, the term record it rests on, and every shift summed.
    """
    today = user.today
    permits = [p for p in _records(user, "permit") if not (_called_off(p) or _void(p))]
    caps = [c for p in permits for c in _caps(p)]
    if not caps:
        return
    all_terms = _terms_of(user, permits)
    shifts: list[tuple[date, float | None, frozenset[str], Record]] = []
    for s in _records(user, "shift"):
        day = _first_day(s, SHIFT_WHEN)
        if day is not None and not _called_off(s):
            employer = _words(_text(s, SHIFT_EMPLOYER), _EMPLOYER_STOP)
            shifts.append((day, _shift_hours(s), employer, s))
    shifts.sort(key=lambda x: (x[0], x[3].key))
    for cap in caps:
        # The terms of ``term`` records, and the one this permit states (not another permit's).
        terms = [x for x in all_terms if x[2] is cap.permit or not plays(x[2], "permit")]
        start, end = cap.valid
        mine = [
            x
            for x in shifts
            if (start is None or x[0] >= start)
            and (end is None or x[0] <= end)
            and (not cap.employer or _match(cap.employer, x[2]))
        ]
        periods: list[tuple[date, date, Record | None]] = []
        if cap.per_term:
            periods.extend(terms)
        else:
            weeks = sorted({d - timedelta(days=d.weekday()) for d, _, _, _ in mine})
            for monday in weeks:
                sunday = monday + timedelta(days=6)
                touched = [rec for a, b, rec in terms if a <= sunday and b >= monday]
                if cap.term_only and terms and not touched:
                    continue  # a vacation week: the cap holds in term time only
                periods.append((monday, sunday, touched[0] if touched else None))
        for first, last, term in periods:
            worked = [x for x in mine if first <= x[0] <= last]
            total = float(len(worked)) if cap.count else sum(h or 0.0 for _, h, _, _ in worked)
            if total <= cap.limit:
                continue
            yield _over_cap(cap, first, last, term, worked, total, today, bool(terms))


def _over_cap(
    cap: _Cap,
    first: date,
    last: date,
    term: Record | None,
    worked: list[tuple[date, float | None, frozenset[str], Record]],
    total: float,
    today: date | None,
    terms_known: bool,
) -> Finding:
    recs = [s for _, _, _, s in worked]
    period = "term" if cap.per_term else "week"
    unknown = sum(1 for _, h, _, _ in worked if h is None)
    note = (
        f" ({unknown} shift(s) with no hours recorded count as 0)"
        if unknown and not cap.count
        else ""
    )
    if cap.term_only and not terms_known and not cap.per_term:
        note += "; no term dates are recorded: if this week was a vacation, the cap may not apply"
    fix = (
        "the week is over: record why, and speak to the sponsor or an adviser before it happens "
        "again"
        if today is not None and last < today
        else f"drop or move shifts before {last} to come within it"
    )
    evidence = [cap.permit, *([term] if term is not None and term is not cap.permit else []), *recs]
    return Finding(
        f"{len(recs)} shift(s) in the {period} {first} to {last} come to {cap.unit(total)}, "
        f"{cap.unit(total - cap.limit)} over the {cap.unit(cap.limit)} a {period} that "
        f"{_label(cap.permit)} allows{note}: work over a permit's cap breaches its conditions "
        f"(for a visa, grounds to cancel it); {fix}.",
        evidence,
        about=f"{'count' if cap.count else 'hours'}:{first}",
    )
