"""Cash flow: an account balance projected forward through planned payments and expected
income, crossing zero or a stated minimum.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, timedelta

from uac_kernel.core.records import Record
from uac_kernel.core.words import norm as _norm
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
    _settled,
    _text,
    plays,
)
from uac_kernel.rules.library.money import (
    _ACCOUNT_STOP,
    ACCOUNT_CLOSED,
    ACCOUNT_NAME,
    AMOUNT,
    OUTFLOWS,
    PAID_ON,
    SENT,
    SOURCE,
    _match,
    _records,
    _types,
    _words,
)
from uac_kernel.state.query import UserView
from uac_kernel.vocab.catalogue import concept

__all__ = ["balance_projection"]

BALANCE, BALANCE_AS_OF = concept("account.balance"), concept("account.balance_as_of")
MIN_BALANCE, HORIZON_DAYS = concept("account.min_balance"), concept("account.horizon_days")
INCOME_AMOUNT, INCOME_ON = concept("income.amount"), concept("income.date")
FREQUENCY, INCOME_ACCOUNT = concept("income.frequency"), concept("income.account")
INCOME_ENDED = concept("income.ended")
HORIZON = timedelta(days=31)  # a month of bills ahead of the log clock, unless the account says
_EVERY = {"weekly": 7, "biweekly": 14, "fortnightly": 14, "monthly": 0}


def _recurring_dates(first: date, rec: Record, until: date) -> list[date]:
    """``first`` and its repeats up to ``until`` by ``income.frequency`` (weekly, biweekly,
    monthly); just ``first`` without one."""
    freq = _norm(_text(rec, FREQUENCY)).strip()
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


def _belongs(rec: Record, account: Record, only: bool, link: str) -> bool:
    """Whether ``rec`` draws on (or pays into) ``account``: its ``link`` (``payment.account``
    or ``income.account``) names it, or it names none and ``account`` is the only one with a
    balance."""
    src = _text(rec, link)
    if not src.strip():
        return only
    if src == account.key:
        return True
    return _match(
        _words(src, _ACCOUNT_STOP),
        _words(_text(account, ACCOUNT_NAME) or account.key, _ACCOUNT_STOP),
    )


@rule(
    roles=["account", *OUTFLOWS, "income"],
    clock=True,
    severity="warning",
    category="financial_authorization_conflicts",
    source="CFPB, 'Overdraft and nonsufficient fund fees' and Regulation E, 12 CFR 1005.17 (a "
    "payment the balance cannot cover is declined or overdrawn, at a fee); CFPB cash-flow "
    "budgeting guidance (list bills by due date against income by pay date)",
)
def balance_projection(user: UserView) -> Iterator[Finding]:
    """Reads ``account`` records with a number ``account.balance``, its day
    (``account.balance_as_of``, else when last stated), optional ``account.min_balance`` and
    ``account.horizon_days``; pending outflows (``payment`` and ``bill`` records: ``Payment``, ``Bill``,
    ``Transfer``, ``Donation``, ``Purchase``, ``Autopay``, ``Wire``, with ``payment.amount``,
    ``payment.date``, ``payment.account``; not settled, sent or cancelled) and ``income``
    (``Income``, ``Paycheck``, ``Salary``: ``income.amount``, ``income.date``, an optional
    ``income.frequency`` weekly/biweekly/monthly, ``income.account``). A record naming no
    account belongs to the only account with a balance.

    Projects the balance day by day from its day to the horizon (31 days after the log clock):
    flags the first day it falls below zero (critical) or below ``min_balance`` (warning), with
    the shortfall and the payments that cause it (evidence: the account and those payments).
    When a payment with an amount is planned and unpaid bills (``bill`` records) due before the
    next income (or undated) have no amount, says so instead of guessing: the lowest known
    balance and the bills it must still cover (warning; evidence: the account, the bills and the
    planned payments).
    """
    today = user.today
    if today is None:
        return
    accounts = [a for a in _records(user, "account") if _number(_get(a, BALANCE)) is not None]
    accounts = [a for a in accounts if not _flag(a, ACCOUNT_CLOSED)]
    if not accounts:
        return
    only = len(accounts) == 1
    outs = [
        r
        for t in _types(*OUTFLOWS)
        for r in _from_day(user, t, today, PAID_ON)
        if not _settled(r) and not _flag(r, SENT)
    ]
    incomes = [
        r for r in _records(user, "income") if not (_flag(r, INCOME_ENDED) or _called_off(r))
    ]
    for acct in accounts:
        yield from _project(acct, only, outs, incomes, today)


def _project(
    acct: Record, only: bool, outs: list[Record], incomes: list[Record], today: date
) -> Iterator[Finding]:
    balance = _number(_get(acct, BALANCE)) or 0.0
    as_of = _first_day(acct, BALANCE_AS_OF)
    if as_of is None and acct.valid_from is not None:
        as_of = acct.valid_from.date()
    days = _number(_get(acct, HORIZON_DAYS))
    horizon = today + (timedelta(days=int(days)) if days and 0 < days <= 366 else HORIZON)
    floor = _number(_get(acct, MIN_BALANCE)) or 0.0
    moves: list[tuple[date, float, Record]] = []
    unknown: list[Record] = []
    planned = False
    for r in outs:
        if not _belongs(r, acct, only, SOURCE):
            continue
        when, amount = _first_day(r, PAID_ON), _number(_get(r, AMOUNT))
        if amount is None:
            if plays(r, "bill") and (when is None or when <= horizon):
                unknown.append(r)
            continue
        when = when or today  # a pending payment without a date can go out any day now
        if (as_of is None or when >= as_of) and when <= horizon and amount > 0:
            moves.append((when, -amount, r))
            planned = True
    next_in: tuple[date, Record] | None = None
    for r in incomes:
        first = _first_day(r, INCOME_ON)
        if first is None or not _belongs(r, acct, only, INCOME_ACCOUNT):
            continue
        if next_in is None or first < next_in[0]:
            next_in = (first, r)
        amount = _number(_get(r, INCOME_AMOUNT))
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
                f"{_label(c)} {_money(_number(_get(c, AMOUNT)) or 0, c)}" for c in causes[-3:]
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
    due = [b for b in unknown if (d := _first_day(b, PAID_ON)) is None or d <= cutoff]
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
