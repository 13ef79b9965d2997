"""Cash flow: an account balance projected forward through planned payments and expected
income, crossing zero or a stated minimum.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, timedelta

from uac_kernel.query import UserView
from uac_kernel.records import Record
from uac_kernel.rules.engine import Finding, rule
from uac_kernel.rules.library._common import (
    _called_off,
    _first_day,
    _flag,
    _from_day,
    _get,
    _label,
    _money,
    _norm,
    _number,
    _settled,
    _text,
)
from uac_kernel.rules.library.money import _ACCOUNT_STOP, _match, _words

__all__ = ["balance_projection"]

OUTFLOW_TYPES = ("Payment", "Bill", "Transfer", "Donation", "Purchase")
INCOME_TYPES = ("Income", "Paycheck", "Salary")
OUT_DATES = ("date", "due", "on", "scheduled")
IN_DATES = ("next_date", "next", "date", "on")
HORIZON = timedelta(days=31)  # a month of bills ahead of the log clock, unless the account says
_EVERY = {"weekly": 7, "biweekly": 14, "fortnightly": 14, "monthly": 0}


def _recurring_dates(first: date, rec: Record, until: date) -> list[date]:
    """``first`` and its repeats up to ``until`` by ``frequency``/``every`` (weekly, biweekly,
    monthly); just ``first`` without one."""
    freq = _norm(_text(rec, ("frequency", "every", "recurrence"))).strip()
    step = _EVERY.get(freq.replace(" ", ""))
    if step is None:
        return [first] if first <= until else []
    out, d, i = [], first, 0
    while d <= until and i < 400:
        out.append(d)
        i += 1
        if step:
            d = first + timedelta(days=step * i)
        else:
            m = first.month - 1 + i
            y, mo = first.year + m // 12, m % 12 + 1
            d = date(y, mo, min(first.day, 28))
    return out


def _belongs(rec: Record, account: Record, only: bool) -> bool:
    """Whether ``rec`` draws on (or pays into) ``account``: its account names it, or it names
    none and ``account`` is the only one with a balance."""
    src = _text(rec, ("account", "from_account", "to_account", "source_account"))
    if not src.strip():
        return only
    if src == account.key:
        return True
    return _match(
        _words(src, _ACCOUNT_STOP),
        _words(_text(account, ("name", "bank", "institution")) or account.key, _ACCOUNT_STOP),
    )


@rule(
    watch=["Account", *OUTFLOW_TYPES, *INCOME_TYPES],
    clock=True,
    severity="warning",
    category="financial_authorization_conflicts",
    source="CFPB, 'Overdraft and nonsufficient fund fees' and Regulation E, 12 CFR 1005.17 (a "
    "payment the balance cannot cover is declined or overdrawn, at a fee); CFPB cash-flow "
    "budgeting guidance (list bills by due date against income by pay date)",
)
def balance_projection(user: UserView) -> Iterator[Finding]:
    """Reads ``Account`` records with a number ``balance``, its day (``balance_as_of``/
    ``as_of``, else when last stated), optional ``min_balance`` and ``horizon_days``; pending
    outflows (``Payment``/``Bill``/``Transfer``/``Donation``/``Purchase`` with ``amount``, a
    date ``date``/``due``/``on``/``scheduled``, ``account``/``from_account``; not settled,
    sent or cancelled) and income (``Income``/``Paycheck``/``Salary`` with ``amount``,
    ``next_date``/``next``/``date`` and an optional ``frequency`` weekly/biweekly/monthly). A
    record naming no account belongs to the only account with a balance.

    Projects the balance day by day from its day to the horizon (31 days after the log clock):
    flags the first day it falls below zero (critical) or below ``min_balance`` (warning), with
    the shortfall and the payments that cause it. When a payment with an amount is planned and
    unpaid bills due before the next income (or undated) have no amount, says so instead of
    guessing: the lowest known balance and the bills it must still cover (warning).
    """
    today = user.today
    if today is None:
        return
    accounts = [a for a in user.all("Account") if _number(_get(a, "balance")) is not None]
    accounts = [a for a in accounts if not _flag(a, "closed")]
    if not accounts:
        return
    only = len(accounts) == 1
    outs = [
        r
        for t in OUTFLOW_TYPES
        for r in _from_day(user, t, today, OUT_DATES)
        if not _settled(r) and not _flag(r, "sent", "executed")
    ]
    incomes = [
        r for t in INCOME_TYPES for r in user.all(t) if not (_flag(r, "ended") or _called_off(r))
    ]
    for acct in accounts:
        yield from _project(acct, only, outs, incomes, today)


def _project(
    acct: Record, only: bool, outs: list[Record], incomes: list[Record], today: date
) -> Iterator[Finding]:
    balance = _number(_get(acct, "balance")) or 0.0
    as_of = _first_day(acct, ("balance_as_of", "as_of"))
    if as_of is None and acct.valid_from is not None:
        as_of = acct.valid_from.date()
    days = _number(_get(acct, "horizon_days"))
    horizon = today + (timedelta(days=int(days)) if days and 0 < days <= 366 else HORIZON)
    floor = _number(_get(acct, "min_balance")) or 0.0
    moves: list[tuple[date, float, Record]] = []
    unknown: list[Record] = []
    planned = False
    for r in outs:
        if not _belongs(r, acct, only):
            continue
        when, amount = _first_day(r, OUT_DATES), _number(_get(r, "amount"))
        if amount is None:
            if type(r).__name__ == "Bill" and (when is None or when <= horizon):
                unknown.append(r)
            continue
        when = when or today  # a pending payment without a date can go out any day now
        if (as_of is None or when >= as_of) and when <= horizon and amount > 0:
            moves.append((when, -amount, r))
            planned = True
    next_in: tuple[date, Record] | None = None
    for r in incomes:
        first = _first_day(r, IN_DATES)
        if first is None or not _belongs(r, acct, only):
            continue
        if next_in is None or first < next_in[0]:
            next_in = (first, r)
        amount = _number(_get(r, "amount"))
        if amount is not None and amount > 0:
            moves.extend((d, amount, r) for d in _recurring_dates(first, r, horizon) if d >= today)
    moves.sort(key=lambda m: (m[0], m[1] > 0))  # money out before money in on the same day
    running, low, low_day, causes = balance, balance, as_of or today, []
    for when, delta, r in moves:
        running += delta
        if delta < 0:
            causes.append(r)
        if running < low:
            low, low_day = running, when
        if running < floor:
            under = "below zero" if running < 0 else f"below the minimum {_money(floor, acct)}"
            listed = ", ".join(
                f"{_label(c)} {_money(_number(_get(c, 'amount')) or 0, c)}" for c in causes[-3:]
            )
            yield Finding(
                f"{_label(acct)}: {_money(balance, acct)} on {as_of} falls to "
                f"{_money(running, acct)} on {when}, {under} by {_money(floor - running, acct)}, "
                f"after {listed}. Move money in, or delay or shrink a payment before {when}.",
                [acct, *causes],
                about="shortfall",
                severity="critical" if running < 0 else "warning",
            )
            return
    cutoff = next_in[0] if next_in else horizon
    due = [b for b in unknown if (d := _first_day(b, OUT_DATES)) is None or d <= cutoff]
    if planned and due:
        names = ", ".join(_label(b) for b in due[:5])
        until = f" before the next income on {next_in[0]} ({_label(next_in[1])})" if next_in else ""
        yield Finding(
            f"{_label(acct)}: {_money(balance, acct)} on {as_of} comes down to "
            f"{_money(low, acct)} on {low_day} after the planned payments, and {len(due)} unpaid "
            f"bill(s){until} have no amount recorded: {names}. Whether the balance covers them "
            "cannot be known; check their amounts before making the planned payments, or "
            "record them.",
            [acct, *due, *causes],
            about="unknown",
        )
