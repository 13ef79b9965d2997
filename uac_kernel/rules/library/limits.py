"""Annual limits: contributions to tax-advantaged accounts against the statutory limit of their
tax year, and spending against a stated monthly or yearly budget.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date

from uac_kernel.query import UserView
from uac_kernel.records import Record
from uac_kernel.rules.engine import Finding, rule
from uac_kernel.rules.library._common import (
    _called_off,
    _first_day,
    _first_term,
    _flag,
    _from_day,
    _get,
    _label,
    _money,
    _norm,
    _number,
    _terms,
    _text,
)
from uac_kernel.rules.library.money import _match, _words

__all__ = ["annual_contribution_limit", "budget_exceeded"]


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
CONTRIBUTION_TYPES = ("Contribution", "Deposit")
_KIND_FIELDS = ("account_type", "account", "type", "kind", "plan")
_FAMILY = _terms("family, self plus one, self and family")


def _kind(rec: Record) -> str | None:
    text = _norm(_text(rec, _KIND_FIELDS))
    return next((k for k, terms in ACCOUNT_KINDS if _first_term(text, terms)), None)


def _tax_year(rec: Record, lim: AnnualLimit) -> int | None:
    y = _get(rec, "tax_year")
    if isinstance(y, int) and not isinstance(y, bool) and 1900 < y < 9000:
        return y
    d = _first_day(rec, ("date", "on", "paid_on"))
    if d is None:
        return None
    return d.year - 1 if lim.uk_tax_year and d < date(d.year, 4, 6) else d.year


@rule(
    watch=list(CONTRIBUTION_TYPES),
    severity="warning",
    category="financial_authorization_conflicts",
    source="IRA 26 U.S.C. 219(b)(5); 401(k) 26 U.S.C. 402(g); HSA 26 U.S.C. 223(b) (yearly "
    "amounts from IRS Notices 2022-55, 2023-75, 2024-80, 2025-67 and Rev. Procs. 2022-24 to "
    "2025-19); UK ISA £20,000 (HMRC); Canada TFSA dollar limit (CRA, Income Tax Act s. 207.01)",
)
def annual_contribution_limit(user: UserView) -> Iterator[Finding]:
    """Reads ``Contribution``/``Deposit`` records: the account kind from ``account_type``/
    ``account``/``type``/``kind``/``plan`` (IRA or Roth, 401(k)/403(b)/TSP, HSA, ISA, TFSA),
    ``amount``, ``date`` or a whole-number ``tax_year``, HSA ``coverage`` (family or self);
    skips ``cancelled``, ``employer`` and ``rollover`` true (not subject to the limit).

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
    for t in CONTRIBUTION_TYPES:
        for rec in _from_day(user, t, since, ("date",)):
            amount = _number(_get(rec, "amount"))
            kind = _kind(rec)
            if amount is None or amount <= 0 or kind is None:
                continue
            if _flag(rec, "employer", "rollover") or _called_off(rec):
                continue
            year = _tax_year(rec, ANNUAL_LIMITS[kind])
            if year is None or (since is not None and year < since.year):
                continue
            groups[(kind, year)].append((rec, amount))
            if _first_term(_norm(_text(rec, ("coverage",))), _FAMILY):
                family.add(kind)
    for (kind, year), items in sorted(groups.items()):
        lim = ANNUAL_LIMITS[kind]
        table = lim.family if lim.family and kind in family else lim.by_year
        known = year if year in table else max(table)
        cap = table[known]
        items.sort(key=lambda x: _first_day(x[0], ("date", "on", "paid_on")) or date.min)
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


BUDGET_TYPES = ("Budget", "Limit", "SpendingLimit")
SPEND_TYPES = ("Purchase", "Transaction", "Expense", "Charge", "Payment")
_MONTH, _YEAR = _terms("month, monthly, mo"), _terms("year, yearly, annual, annually, yr")
_CATEGORY_STOP = frozenset({"the", "my", "on", "for", "and", "spending", "budget"})


@rule(
    watch=[*BUDGET_TYPES, *SPEND_TYPES],
    clock=True,
    severity="warning",
    category="financial_authorization_conflicts",
    source="CFPB, 'Budgeting: how to create a budget and stick with it' (track spending against "
    "the limit you set, by category and month); the limit is the user's own",
)
def budget_exceeded(user: UserView) -> Iterator[Finding]:
    """Reads ``Budget``/``Limit``/``SpendingLimit`` records with ``limit`` (or ``amount``) and
    ``per``/``period`` naming a month or a year, optional ``category``; and ``Purchase``/
    ``Transaction``/``Expense``/``Charge``/``Payment`` records (``amount``, ``date``,
    ``category``/``merchant``/``name``); skips ``cancelled``/``refunded`` true.

    Sums the spending of the current month (or year) of the log clock whose category matches
    the budget's (a budget without a category covers all spending) and flags a total over the
    limit (warning), naming the spending that crossed it, the total and the excess. Reads only
    the spending dated in the period, through the index.
    """
    today = user.today
    if today is None:
        return
    budgets = []
    for t in BUDGET_TYPES:
        for b in user.all(t):
            cap = _number(_get(b, "limit"))
            cap = cap if cap is not None else _number(_get(b, "amount"))
            per = _norm(_text(b, ("per", "period")))
            monthly, yearly = _first_term(per, _MONTH), _first_term(per, _YEAR)
            if cap is None or cap <= 0 or not (monthly or yearly) or _called_off(b):
                continue
            first = date(today.year, today.month, 1) if monthly else date(today.year, 1, 1)
            cat = _words(_text(b, ("category",)), _CATEGORY_STOP)
            budgets.append((b, cap, first, cat, "month" if monthly else "year"))
    if not budgets:
        return
    since = min(first for _, _, first, _, _ in budgets)
    spends = []
    for t in SPEND_TYPES:
        for s in _from_day(user, t, since, ("date",)):
            amount, when = _number(_get(s, "amount")), _first_day(s, ("date",))
            if amount is None or amount <= 0 or when is None or when > today:
                continue
            if not (_flag(s, "refunded") or _called_off(s)):
                what = _words(_text(s, ("category", "merchant", "name", "item")), _CATEGORY_STOP)
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
