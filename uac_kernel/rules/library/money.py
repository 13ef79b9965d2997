"""Money rules: transfers during a freeze, charges after a cancellation, payments from a closed
account, spending limits, wash sales, investments against a stated risk tolerance, the same
charge twice and a promotional rate ending on a balance still owed.

Rules read concepts and roles (``data/concepts/money.toml``), never a type or field name.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Hashable, Iterator
from datetime import date, timedelta

from uac_kernel.core.records import Record
from uac_kernel.core.words import first_term as _first_term
from uac_kernel.core.words import norm as _norm
from uac_kernel.core.words import split as _split
from uac_kernel.core.words import terms as _terms
from uac_kernel.rules.engine import EVERY, Finding, rule
from uac_kernel.rules.library._common import (
    STATUS,
    _after,
    _at_least,
    _before,
    _called_off,
    _date_fields,
    _dated_from,
    _day,
    _days,
    _first_day,
    _flag,
    _from_day,
    _get,
    _label,
    _money,
    _named,
    _number,
    _settled,
    _text,
    plays,
)
from uac_kernel.state.query import UserView
from uac_kernel.vocab.catalogue import concept
from uac_kernel.vocab.resolve import fields_of, per_record, types_of

__all__ = [
    "charge_after_cancellation",
    "duplicate_charge",
    "investment_against_risk_tolerance",
    "payment_from_closed_account",
    "promotional_rate_ending",
    "transaction_over_limit",
    "transfer_during_freeze",
    "wash_sale",
]

# -- money -----------------------------------------------------------------------------------
# What the rules read (data/concepts/money.toml): defaults are the names the library has always
# read, in that order.
AMOUNT, PAID_ON = concept("payment.amount"), concept("payment.date")
SOURCE, MERCHANT = concept("payment.account"), concept("payment.merchant")
INSTRUMENT, SENT = concept("payment.instrument"), concept("payment.sent")
RECURRING, APPROVED = concept("payment.recurring"), concept("payment.approved")
FREEZE_ACTIVE, FREEZE_ACCOUNT = concept("freeze.active"), concept("freeze.account")
FREEZE_SINCE, FREEZE_UNTIL = concept("freeze.since"), concept("freeze.until")
FREEZE_LIFTED, ACTION = concept("freeze.lifted"), concept("instruction.action")
SUB_MERCHANT = concept("subscription.merchant")
CANCEL_EFFECTIVE = concept("subscription.cancel_effective")
ACCOUNT_NAME, ACCOUNT_CLOSES_ON = concept("account.name"), concept("account.closes_on")
ACCOUNT_CLOSED, ACCOUNT_CLOSING = concept("account.closed"), concept("account.closing")
LIMIT_CAP, LIMIT_PERIOD = concept("limit.cap"), concept("limit.period")
LIMIT_INSTRUMENT = concept("limit.instrument")
# Money going out of an account: every payment, and every bill (a bill is one to pay).
OUTFLOWS = ("payment", "bill")
_ACCOUNT_STOP = frozenset(_split("the my our a an account acct from to"))
_MERCHANT_STOP = frozenset(
    _split("the inc llc ltd co com subscription membership plan monthly annual")
)
OUTFLOW_WORDS = _terms("transfer, wire, send, pay, payment, withdraw, withdrawal")
FREEZE_WORDS = _terms("freeze, frozen, hold, block, no outflow, no money, forbid")


def _words(text: str, stop: frozenset[str]) -> frozenset[str]:
    # A short text (a merchant, an account) recurs on record after record: its words are kept,
    # as norm keeps its normal form.
    if len(text) <= _SHORT:
        return _short_words(text, stop)
    return _split_words(text, stop)


def _split_words(text: str, stop: frozenset[str]) -> frozenset[str]:
    return frozenset(w for w in _norm(text).split() if w not in stop)


_SHORT = 100  # characters, as norm's cache
_short_words = functools.lru_cache(maxsize=16_384)(_split_words)


def _match(a: frozenset[str], b: frozenset[str]) -> bool:
    return bool(a) and bool(b) and (a <= b or b <= a)


def _types(*roles: str) -> list[str]:
    """The types that play any of ``roles`` for this user, each once, in role order."""
    return list(dict.fromkeys(t for r in roles for t in types_of(r)))


def _records(user: UserView, *roles: str) -> Iterator[Record]:
    """Current records of every type that plays any of ``roles``."""
    for t in _types(*roles):
        yield from user.all(t)


def _pending(rec: Record, today: date | None, when: str = PAID_ON) -> bool:
    """Not done, sent or cancelled, and not dated in the past (recurring ones always pending)."""
    done, d, recurring = _payment_state(rec) if when == PAID_ON else _state_of(rec, when)
    return not done and (recurring or d is None or today is None or d >= today)


def _state_of(rec: Record, when: str) -> tuple[bool, date | None, bool]:
    """Whether ``rec`` is done, sent or cancelled; its date ``when``; whether it recurs (of a
    done one, neither is read)."""
    if _settled(rec) or _flag(rec, SENT):
        return True, None, False
    return False, _first_day(rec, when), _flag(rec, RECURRING)


@per_record
def _payment_state(rec: Record) -> tuple[bool, date | None, bool]:
    """``_state_of(rec, PAID_ON)``, worked out once per record: the rules that check pending
    outflows go through every payment and purchase whenever the day moves."""
    return _state_of(rec, PAID_ON)


@per_record
def _is_freeze(r: Record) -> bool:
    t = type(r).__name__
    return (
        plays(t, "freeze")
        or _flag(r, FREEZE_ACTIVE)
        or (plays(t, "instruction") and any(w in _norm(_text(r, ACTION)) for w in FREEZE_WORDS))
    )


def _freeze_part(r: Record) -> Hashable:
    """A freeze is checked against every outflow; an outflow only against the freezes."""
    return EVERY if _is_freeze(r) else (type(r).__name__, r.key)


def _outflow(
    found: dict[str, list[tuple[Record, frozenset[str], str]]],
    t: str,
    r: Record,
    today: date | None,
) -> None:
    """Add ``r`` (of type ``t``) to ``found`` when it is a pending outflow from an account."""
    if _pending(r, today) and (account := _words(src := _text(r, SOURCE), _ACCOUNT_STOP)):
        found.setdefault(t, []).append((r, account, src))


@rule(
    roles=["freeze", "instruction", *OUTFLOWS],
    partition=_freeze_part,
    severity="critical",
    category="financial_authorization_conflicts",
    source="FINRA Rule 2165 (temporary holds on disbursements) and Regulation E, 12 CFR 1005 "
    "(an account holder's authorization governs transfers): a stated hold outranks a later "
    "instruction until it is lifted",
)
def transfer_during_freeze(user: UserView) -> Iterator[Finding]:
    """Reads freezes (``Freeze``; any record with ``freeze.active`` — ``freeze``/
    ``no_outflows`` — true; an ``Instruction`` whose ``instruction.action`` says freeze/hold/
    block) with ``freeze.account``, ``freeze.since``, ``freeze.until``, ``freeze.lifted``; and
    pending outflows: records playing ``payment`` or ``bill`` (``Payment``, ``Bill``, ``Transfer``,
    ``Donation``, ``Purchase``, ``Autopay``, ``Wire``), or an ``Instruction`` whose action says
    transfer/wire/send/pay, with ``payment.account``, ``payment.amount``, ``payment.date``.

    Flags an outflow from an account that a current freeze covers (account names match as word
    sets) and whose date, if any, is not after the freeze's end: critical. Evidence: the freeze
    and the outflow.
    """
    today = user.today
    freezes: list[tuple[Record, frozenset[str], date | None, date | None]] = []
    found: dict[str, list[tuple[Record, frozenset[str], str]]] = {}  # outflows by type

    kinds = _types("freeze", "instruction", *OUTFLOWS)
    # Only a type playing freeze or instruction, or one with a field for ``freeze.active``,
    # can hold a freeze: the others' outflows are read only when a freeze is in force (a long
    # log holds many payments, and most users no freeze).
    holds = [
        t
        for t in kinds
        if plays(t, "freeze")
        or plays(t, "instruction")
        or not set(fields_of(t, FREEZE_ACTIVE)).isdisjoint(user.field_types(t))
    ]
    for t in holds:
        instruction = plays(t, "instruction")
        for r in user.all(t):
            if _is_freeze(r):
                until = _first_day(r, FREEZE_UNTIL)
                starts = _first_day(r, FREEZE_SINCE)
                if not (_flag(r, FREEZE_LIFTED) or _called_off(r)) and (
                    until is None or today is None or until >= today
                ):
                    account = _words(_text(r, FREEZE_ACCOUNT), _ACCOUNT_STOP)
                    if account:
                        freezes.append((r, account, starts, until))
            elif not instruction or any(w in _norm(_text(r, ACTION)) for w in OUTFLOW_WORDS):
                _outflow(found, t, r, today)
    if not freezes:
        return
    for t in kinds:
        if t not in holds:
            for r in user.all(t):
                _outflow(found, t, r, today)
    outflows = [o for t in kinds for o in found.get(t, ())]
    for out, account, src in outflows:
        when = _first_day(out, PAID_ON)
        amount = _number(_get(out, AMOUNT))
        for freeze, f_account, starts, until in freezes:
            outside = when is not None and ((until and when > until) or (starts and when < starts))
            if _match(account, f_account) and not outside:
                what = f"send {_money(amount, out)}" if amount is not None else "move money"
                yield Finding(
                    f"{_label(out)} would {what} from '{src}', but "
                    f"{_label(freeze)} forbids outflows from it"
                    + (f" until {until}" if until else "")
                    + ": do not execute it; confirm with whoever gave each instruction first.",
                    [freeze, out],
                )


def _when(rec: Record, when: str = PAID_ON) -> date | None:
    """A record's date, else the day it was recorded (a charge is dated when it was stated)."""
    return _first_day(rec, when) or (rec.valid_from.date() if rec.valid_from else None)


@rule(
    roles=["subscription", "charge"],
    severity="warning",
    category="financial_authorization_conflicts",
    source="FTC Negative Option Rule (16 CFR 425) and Restore Online Shoppers' Confidence Act "
    "(15 U.S.C. 8403): no charges after cancellation; Fair Credit Billing Act (15 U.S.C. 1666): "
    "dispute a billing error within 60 days",
)
def charge_after_cancellation(user: UserView) -> Iterator[Finding]:
    """Reads current ``subscription`` records called off (``subscription.merchant``; effective
    date from ``subscription.cancel_effective``, else when the cancellation was recorded) and
    ``charge`` records (``Transaction``, ``Payment``, ``Charge``, ``Purchase``, ``Expense``:
    ``payment.merchant``, ``payment.amount``, ``payment.date``).

    Flags a charge to a cancelled service dated after the cancellation took effect (merchant and
    service names match as word sets): warning. Evidence: the subscription and the charge. Reads
    only the charges dated after the earliest cancellation (and undated ones).
    """
    index: dict[str, list[tuple[Record, frozenset[str], date]]] = defaultdict(list)
    for s in _records(user, "subscription"):
        if not _called_off(s):
            continue
        words = _words(_text(s, SUB_MERCHANT), _MERCHANT_STOP)
        eff = _when(s, CANCEL_EFFECTIVE)
        if words and eff:
            for w in words:
                index[w].append((s, words, eff))
    if not index:
        return
    # Only charges after the earliest cancellation can be late: the index hands over those.
    first = _after(min(eff for subs in index.values() for _, _, eff in subs), timedelta(days=1))
    for t in _types("charge"):
        for c in _from_day(user, t, first, PAID_ON):
            amount = _number(_get(c, AMOUNT))
            if amount is not None and amount <= 0:
                continue
            words = _words(_text(c, MERCHANT), _MERCHANT_STOP)
            when = _when(c)
            if when is None:
                continue
            seen: set[str] = set()
            for w in words:
                for sub, s_words, eff in index.get(w, ()):
                    if sub.key in seen or when <= eff or not _match(words, s_words):
                        continue
                    seen.add(sub.key)
                    paid = f"{_money(amount, c)} " if amount is not None else ""
                    yield Finding(
                        f"{_label(c)}: a {paid}charge on {when}, {_days((when - eff).days)} after "
                        f"{_label(sub)} was cancelled (effective {eff}): the cancellation may not "
                        "have gone through; contact the merchant to confirm it and dispute the "
                        "charge.",
                        [sub, c],
                    )


@rule(
    roles=["account", *OUTFLOWS],
    severity="critical",
    category="financial_authorization_conflicts",
    source="Regulation E, 12 CFR 1005.10 (preauthorized transfers) and CFPB guidance: move "
    "automatic payments before an account closes, or they fail or bounce",
)
def payment_from_closed_account(user: UserView) -> Iterator[Finding]:
    """Reads ``account`` records with ``account.closed`` or ``account.closing`` true or an
    ``account.closes_on`` date (``account.name``) and pending ``payment`` and ``bill`` records
    (``Payment``, ``Bill``, ``Transfer``, ``Donation``, ``Purchase``, ``Autopay``, ``Wire``:
    ``payment.account``, ``payment.amount``, ``payment.date``, ``payment.recurring``).

    Flags a pending or recurring payment drawn on a closed or closing account (the account's key,
    or names matching as word sets), dated on or after the closing date if one is known: critical.
    Evidence: the account and the payment.
    """
    today = user.today
    closed = []
    for a in _records(user, "account"):
        on = _first_day(a, ACCOUNT_CLOSES_ON)
        if _flag(a, ACCOUNT_CLOSED, ACCOUNT_CLOSING) or on is not None:
            closed.append((a, _words(_text(a, ACCOUNT_NAME), _ACCOUNT_STOP), on))
    if not closed:
        return
    for p in _records(user, *OUTFLOWS):
        src = _text(p, SOURCE)
        if not src or not _pending(p, today):
            continue
        words = _words(src, _ACCOUNT_STOP)
        when = _first_day(p, PAID_ON)
        for acct, a_words, on in closed:
            if not (src == acct.key or _match(words, a_words)):
                continue
            if on is not None and when is not None and when < on and not _flag(p, RECURRING):
                continue
            amount = _number(_get(p, AMOUNT))
            what = f"{_money(amount, p)} " if amount is not None else ""
            status = "is closed" if on is None else f"closed on {on}"
            if on is not None and today is not None and on > today:
                status = f"closes on {on}"
            due = f"; the payment is due {when}" if when else ""
            yield Finding(
                f"{_label(p)} draws {what}from {_label(acct)}, which {status}{due}: it will "
                "fail. Move the payment to an open account before then.",
                [acct, p],
            )


def _amount_at_least(user: UserView, t: str, low: float) -> list[Record]:
    """Current records of ``t`` whose ``payment.amount`` may be ``low`` or more, read through
    the index of each number field bound to it; none when ``t`` has no amount field."""
    ftypes = user.field_types(t)
    found: dict[str, Record] = {}
    for f in fields_of(t, AMOUNT):
        if f in ftypes:
            for r in _at_least(user, t, f, low):
                found.setdefault(r.key, r)
    return list(found.values())


@rule(
    roles=["limit", "charge"],
    severity="warning",
    category="financial_authorization_conflicts",
    source="UCC Article 4A-202 (a payment order binds only as authorized) and card issuers' "
    "per-transaction limits: a charge above a stated limit needs the approval the limit names",
)
def transaction_over_limit(user: UserView) -> Iterator[Finding]:
    """Reads per-transaction ``limit`` records (``Limit``, ``Authorization``, ``SpendingLimit``:
    ``limit.cap``; ``limit.period`` absent or naming a transaction; optional
    ``limit.instrument``) and ``charge`` records (``payment.amount``, ``payment.instrument``,
    ``payment.date``; skips ``payment.approved`` true).

    Flags a transaction above a limit that covers its instrument (a limit naming no instrument
    covers all), dated on or after the day the limit was recorded: warning. Evidence: the limit
    and the transaction. Reads only the transactions above the lowest limit.
    """
    limits = []
    for lim in _records(user, "limit"):
        cap = _number(_get(lim, LIMIT_CAP))
        per = _text(lim, LIMIT_PERIOD)
        if cap is None or (
            per and not any(w in _norm(per) for w in _terms("transaction", "purchase", "charge"))
        ):
            continue
        since = lim.valid_from.date() if lim.valid_from else None
        limits.append((lim, cap, _words(_text(lim, LIMIT_INSTRUMENT), _ACCOUNT_STOP), since))
    if not limits:
        return
    lowest = min(cap for _, cap, _, _ in limits)
    for t in _types("charge"):
        # Only amounts above the lowest cap can break a limit: the index reads just those.
        for tx in _amount_at_least(user, t, lowest):
            amount = _number(_get(tx, AMOUNT))
            if amount is None or _flag(tx, APPROVED) or _called_off(tx):
                continue
            instrument = _words(_text(tx, INSTRUMENT), _ACCOUNT_STOP)
            when = _when(tx)
            for lim, cap, covers, since in limits:
                if amount <= cap or (covers and not _match(instrument, covers)):
                    continue
                if since is not None and when is not None and when < since:
                    continue
                yield Finding(
                    f"{_label(tx)} of {_money(amount, tx)} is {_money(amount - cap, tx)} over the "
                    f"{_money(cap, lim)} per-transaction limit of {_label(lim)}: get the approval "
                    "the limit requires first, or pay another way.",
                    [lim, tx],
                )


SIDE, SYMBOL, TRADED_ON = concept("trade.side"), concept("trade.symbol"), concept("trade.date")
PLANNED, LOSS, GAIN = concept("trade.planned"), concept("trade.loss"), concept("trade.gain")
PURPOSE, TRADE_ACCOUNT = concept("trade.purpose"), concept("trade.account")
_SELL_WORDS = _terms("sell, sold, sale")
_BUY_WORDS = _terms("buy, bought, purchase, purchased, reinvest, reinvested")
_HARVEST_WORDS = _terms("tax loss, loss harvest, loss harvesting, harvest loss, harvest")
WASH_WINDOW = 30  # days before and after the sale (IRS Publication 550, Wash Sales)


def _trade(rec: Record, today: date | None) -> tuple[str, str, date] | None:
    """(side, normalised symbol, date) of a trade that is not cancelled; a trade with no date is
    planned for the log clock's day, an executed one without a date is dated when recorded."""
    if _called_off(rec):
        return None
    # A type that only ever sells (``Sale``) or buys fixes the side; others say it in words.
    sells, buys = plays(rec, "trade_sell"), plays(rec, "trade_buy")
    action = _norm(_text(rec, SIDE))
    if sells or (not buys and _first_term(action, _SELL_WORDS)):
        side = "sell"
    elif buys or _first_term(action, _BUY_WORDS):
        side = "buy"
    else:
        return None
    symbol = _norm(_text(rec, SYMBOL)).strip()
    when = _first_day(rec, TRADED_ON)
    if when is None:
        recorded = rec.valid_from.date() if rec.valid_from else None
        when = today if _flag(rec, PLANNED) or _get(rec, STATUS) == "planned" else recorded
        when = when or today
    return (side, symbol, when) if symbol and when else None


def _at_a_loss(rec: Record) -> bool:
    loss, gain = _number(_get(rec, LOSS)), _number(_get(rec, GAIN))
    why = _norm(_text(rec, PURPOSE))
    return bool(
        (loss is not None and loss > 0)
        or (gain is not None and gain < 0)
        or _first_term(why, _HARVEST_WORDS)
    )


@rule(
    roles=["trade", "trade_sell", "trade_buy"],
    severity="warning",
    category="financial_authorization_conflicts",
    source="IRS Publication 550, Wash Sales (a loss is disallowed when substantially identical "
    "stock is bought within 30 days before or after the sale); Revenue Ruling 2008-5 (a purchase "
    "in the seller's IRA counts)",
)
def wash_sale(user: UserView) -> Iterator[Finding]:
    """Reads ``trade`` records (``Trade``, ``Order``, ``Sale``, ``Sell``, ``Buy``,
    ``StockPurchase``, ``StockSale``, ``Investment``): the side from the type (one playing
    ``trade_sell`` or ``trade_buy``) or ``trade.side`` in words (buy/bought/purchase vs
    sell/sold), ``trade.symbol``, ``trade.date`` (a planned trade without one: the log clock's
    day), ``trade.account``, and a loss (``trade.loss`` > 0, ``trade.gain`` < 0, or a
    ``trade.purpose`` of tax-loss harvesting); skips trades called off.

    Flags a sale at a loss with a purchase of the same symbol, in any account, 30 days or less
    before or after it: warning, naming the date from which a sale (or to which a purchase) would
    be clear, and noting that a purchase in an IRA loses the deduction for good. Evidence: the
    sale and the purchase. Linear in the trades, by symbol.
    """
    today = user.today
    buys: dict[str, list[tuple[Record, date]]] = defaultdict(list)
    sales: list[tuple[Record, str, date]] = []
    for rec in _records(user, "trade", "trade_sell", "trade_buy"):
        trade = _trade(rec, today)
        if trade is None:
            continue
        side, symbol, when = trade
        if side == "buy":
            buys[symbol].append((rec, when))
        elif _at_a_loss(rec):
            sales.append((rec, symbol, when))
    for sale, symbol, sold in sales:
        for buy, bought in buys.get(symbol, ()):
            gap = (sold - bought).days
            if abs(gap) > WASH_WINDOW:
                continue
            where = _text(buy, TRADE_ACCOUNT)
            ira = " ira " in _norm(where)
            timing = (
                f"{_days(gap)} after {_label(buy)} bought it"
                if gap >= 0
                else f"{_days(-gap)} before {_label(buy)} buys it"
            )
            fix = (
                f"sell on or after {_after(bought, timedelta(days=WASH_WINDOW + 1))}"
                if gap >= 0
                else f"buy no earlier than {_after(sold, timedelta(days=WASH_WINDOW + 1))}"
            )
            yield Finding(
                f"{_label(sale)} sells {symbol.upper()} at a loss on {sold}, {timing}"
                + (f" in '{where}'" if where else "")
                + f": a purchase within {WASH_WINDOW} days of a loss sale makes it a wash sale "
                "and the loss is disallowed"
                + (" for good, since the shares were bought in an IRA" if ira else "")
                + f". To keep the deduction, {fix}, or harvest a fund that is not substantially "
                "identical.",
                [sale, buy],
            )


# Most specific first: the first term found names the level in the message.
CAUTIOUS_WORDS = _terms(
    "very low, low risk, no risk, risk averse, capital preservation, conservative, cautious,",
    "minimal, low",
)
RISKY_WORDS = _terms("very high, high risk, speculative, aggressive, volatile, high")
RISK, TOLERANCE = concept("investment.risk"), concept("risk_profile.tolerance")
INVEST_AMOUNT, INVEST_ON = concept("investment.amount"), concept("investment.date")


@rule(
    watch=None,
    severity="warning",
    category="financial_authorization_conflicts",
    source="FINRA Rule 2111 (Suitability): a recommendation must fit the customer's investment "
    "profile, risk tolerance included",
)
def investment_against_risk_tolerance(user: UserView) -> Iterator[Finding]:
    """Reads ``risk_profile.tolerance`` (``risk_tolerance``) on current records of any type
    (conservative, cautious, low, ...) and ``investment.risk`` (``risk``/``risk_level``/
    ``volatility``) on current records of any other type (high, speculative, aggressive,
    volatile), with ``investment.amount`` and ``investment.date``; skips settled or cancelled
    records and those dated before today.

    Flags a pending high-risk investment while the user's stated risk tolerance is cautious:
    warning — the user's own rule, stated earlier, says no; confirm before acting. Evidence: the
    profile and the investment. Looks only at types that have those fields.
    """
    today = user.today
    tolerances: list[tuple[Record, str]] = []
    risky: list[tuple[Record, str]] = []
    for t in user.types():
        fields = user.field_types(t)
        if any(f in fields for f in fields_of(t, TOLERANCE)):
            for r in user.all(t):
                text = _norm(_text(r, TOLERANCE))
                if (hit := _first_term(text, CAUTIOUS_WORDS)) and not _called_off(r):
                    tolerances.append((r, hit))
        elif any(f in fields for f in fields_of(t, RISK)):
            for r in user.all(t):
                if not _pending(r, today, INVEST_ON):
                    continue
                if hit := _first_term(_norm(_text(r, RISK)), RISKY_WORDS):
                    risky.append((r, hit))
    for inv, level in risky:
        amount = _number(_get(inv, INVEST_AMOUNT))
        size = f" of {_money(amount, inv)}" if amount is not None else ""
        for pref, tolerance in tolerances:
            since = f" (since {pref.valid_from.date()})" if pref.valid_from else ""
            yield Finding(
                f"{_label(inv)}{size} is {level} risk, but {_label(pref)} records a {tolerance} "
                f"risk tolerance{since}: confirm the user has changed that stance before acting, "
                "or suggest a position that fits it.",
                [pref, inv],
            )


# -- the same charge twice -------------------------------------------------------------------
REFUNDED = concept("payment.refunded")
# A charge submitted twice (a retried checkout, a batch sent twice, an authorization posted again)
# posts within the card networks' settlement time, a few business days: equal charges to one
# merchant up to 3 days apart are likely one purchase charged twice, further apart two purchases.
DUPLICATE_WINDOW = 3
# Equal charges to one merchant on this many different days are a habit (a daily coffee, a
# weekly class): only those on the same day can be a double charge.
HABIT_DAYS = 3
# Regulation Z and E give 60 days after the statement that shows an error to dispute it; a
# statement comes up to a month after the charge: older pairs are no longer flagged.
DISPUTE_DAYS = 90


def _cents(amount: float) -> int:
    return round(amount * 100)


def _charge_part(r: Record) -> Hashable | None:
    """The merchant's words and the amount in cents: what a charge billed twice repeats, and
    a refund of it gives back."""
    amount = _number(_get(r, AMOUNT))
    words = _words(_text(r, MERCHANT), _MERCHANT_STOP)
    return (words, _cents(abs(amount))) if amount and words else None


_WAKE_AFTER = tuple(timedelta(days=DISPUTE_DAYS + k) for k in (0, 1, 2))


def _charge_wakes(r: Record) -> list[date]:
    """The days a charge leaves the rule's window (``DISPUTE_DAYS`` after each of its dates; a
    day either side, for a date-time read in another zone): its group runs again then."""
    values = r.__dict__
    days = [
        d
        for f in fields_of(type(r).__name__, PAID_ON)
        if (v := values.get(f)) is not None and (d := _day(v))
    ]
    return [d + after for d in days for after in _WAKE_AFTER]


@rule(
    roles=["charge", "refund"],
    partition=_charge_part,
    wakes=_charge_wakes,
    clock=True,
    severity="warning",
    category="financial_authorization_conflicts",
    source="Fair Credit Billing Act, 15 U.S.C. 1666, and Regulation Z, 12 CFR 1026.13 (a charge "
    "billed twice is a billing error: dispute it in writing within 60 days of the statement that "
    "shows it); Regulation E, 12 CFR 1005.11 (the same for debit cards and transfers); CFPB, "
    "'How do I dispute a charge on my credit card bill?'",
)
def duplicate_charge(user: UserView) -> Iterator[Finding]:
    """Reads ``charge`` records (``Transaction``, ``Payment``, ``Charge``, ``Purchase``,
    ``Expense``: ``payment.merchant``, ``payment.amount``, ``payment.date``,
    ``payment.instrument``, ``payment.recurring``, ``payment.refunded``) and ``refund`` records
    (``Refund``, ``Chargeback``, ``Reversal``: ``payment.merchant``, ``payment.amount``,
    ``payment.date``); a charge with a negative amount is a refund too.

    Flags two or more charges of the same amount to the same merchant (the same words) within
    3 days of each other: a charge submitted twice posts within the few business days of
    settlement. Quiet for charges called off, refunded or marked recurring, for a refund of that
    amount to that merchant dated from the first of them on, for charges on two different cards,
    and — when equal charges fall on 3 or more different days, a habit — for those on different
    days. Only charges dated in the last 90 days (60 days to dispute after a statement that comes
    up to a month later). Evidence: every charge of the group; warning, with how to dispute it.
    """
    today = user.today
    since = _before_day(today, DISPUTE_DAYS)
    charges: dict[tuple[frozenset[str], int], list[tuple[date, Record]]] = defaultdict(list)
    refunds: dict[tuple[frozenset[str], int], list[date | None]] = defaultdict(list)
    for t in _types("charge"):
        for c in _from_day(user, t, since, PAID_ON):
            amount, when = _number(_get(c, AMOUNT)), _first_day(c, PAID_ON)
            words = _words(_text(c, MERCHANT), _MERCHANT_STOP)
            if amount is None or amount == 0 or not words or _called_off(c):
                continue
            if amount < 0:
                refunds[(words, _cents(-amount))].append(when)
            elif when is not None and not _flag(c, REFUNDED, RECURRING):
                charges[(words, _cents(amount))].append((when, c))
    for r in _records(user, "refund"):
        amount = _number(_get(r, AMOUNT))
        words = _words(_text(r, MERCHANT), _MERCHANT_STOP)
        if amount is not None and amount != 0 and words and not _called_off(r):
            refunds[(words, _cents(abs(amount)))].append(_first_day(r, PAID_ON))
    for group, dated in charges.items():
        if len(dated) < 2:
            continue
        dated.sort(key=lambda x: (x[0], x[1].key))
        window = 0 if len({d for d, _ in dated}) >= HABIT_DAYS else DUPLICATE_WINDOW
        back = sorted(refunds.get(group, ()), key=lambda d: d or date.min)
        for run in _runs(dated, window):
            # A refund dated from the first charge on gives one of them back.
            first = run[0][0]
            given = [d for d in back if d is None or d >= first][: len(run) - 1]
            for d in given:
                back.remove(d)
            recs = [c for _, c in run]
            cards = {frozenset(_words(_text(c, INSTRUMENT), _ACCOUNT_STOP)) for c in recs}
            cards.discard(frozenset())
            if len(given) >= len(run) - 1 or len(cards) > 1:
                continue
            amount = _number(_get(recs[0], AMOUNT)) or 0.0
            days = sorted({d for d, _ in run})
            on = " and ".join(str(d) for d in days)
            yield Finding(
                f"{', '.join(_label(c) for c in recs)}: {len(recs)} charges of "
                f"{_money(amount, recs[0])} to {_text(recs[0], MERCHANT).strip()} on {on}: the same "
                "charge twice is usually one payment processed twice. Check the statement; ask "
                "the merchant to reverse the extra charge, or dispute it with the card issuer "
                "in writing within 60 days of the statement that shows it.",
                recs,
            )


def _before_day(today: date | None, days: int) -> date | None:
    return None if today is None else _before(today, timedelta(days=days))


def _runs(dated: list[tuple[date, Record]], window: int) -> Iterator[list[tuple[date, Record]]]:
    """Runs of two or more dated items, each within ``window`` days of the one before."""
    run = [dated[0]]
    for item in dated[1:]:
        if (item[0] - run[-1][0]).days <= window:
            run.append(item)
            continue
        if len(run) > 1:
            yield run
        run = [item]
    if len(run) > 1:
        yield run


# -- a promotional rate ending on a balance still owed ------------------------------------------
PROMO_ENDS, PROMO_BALANCE = concept("promo.ends"), concept("promo.balance")
PROMO_DEFERRED, PROMO_RATE = concept("promo.deferred"), concept("promo.regular_rate")
# One billing cycle: a payment must post, or a balance move, before the promotion ends, and the
# last statement before then is the last reminder a card sends (a disclosed promotional rate
# may end with no further notice, 12 CFR 1026.9(c)(2)(v)(B)).
PROMO_LEAD = 30


@rule(
    watch=None,
    clock=True,
    severity="warning",
    category="financial_authorization_conflicts",
    source="CFPB, 'What is a deferred interest promotion?' and 'What is a balance transfer?' "
    "(pay the promotional balance before the promotion ends, or interest applies — with deferred "
    "interest, all of it back to the purchase); Regulation Z, 12 CFR 1026.9(c)(2)(v)(B) (a "
    "disclosed promotional rate may end with no further notice) and 12 CFR 1026.53(b)(1) "
    "(payments go to a deferred-interest balance in the two billing cycles before it expires)",
)
def promotional_rate_ending(user: UserView) -> Iterator[Finding]:
    """Reads ``promo.ends`` (``promo_ends``) on current records of any type, with
    ``promo.balance`` (``promo_balance``/``balance``/``balance_owed``/``owed``/
    ``outstanding``), ``promo.deferred`` (``deferred_interest``) and ``promo.regular_rate``
    (``regular_apr``/``go_to_rate``/``apr``...); skips settled (``paid``...) or called-off
    records and balances of 0 or less.

    Flags a promotional rate (a 0% balance transfer, a deferred-interest purchase) ending within
    30 days — one billing cycle, the time a payment or a balance move needs — while a balance is
    still owed: warning, critical for deferred interest (all the interest since the purchase is
    charged if any balance is left). Evidence: the record. Re-runs as the clock moves; reads
    only the records whose promotion ends from today on, through the index.
    """
    today = user.today
    if today is None:
        return
    last = _after(today, timedelta(days=PROMO_LEAD))
    for t in user.types():
        dated = _date_fields(user, t, PROMO_ENDS)
        if not dated:
            continue
        for r in _dated_from(user, t, dated, today):
            ends = _first_day(r, PROMO_ENDS)
            balance = _number(_get(r, PROMO_BALANCE))
            if ends is None or not today <= ends <= last or balance is None or balance <= 0:
                continue
            if _settled(r):
                continue
            deferred = _flag(r, PROMO_DEFERRED)
            rate = _number(_get(r, PROMO_RATE))
            after = f" at {rate:g}% APR" if rate is not None else " at the regular rate"
            cost = (
                "it is deferred interest, so all the interest since the purchase is charged if "
                "any of it is left"
                if deferred
                else f"what is left then accrues interest{after}"
            )
            yield Finding(
                f"{_label(r)}: the promotional rate ends on {ends} ({_days((ends - today).days)} "
                f"from now) with {_money(balance, r)} still owed ({_named(r, PROMO_BALANCE)}); "
                f"{cost}. Pay it off so the payment posts before {ends}, or move the balance "
                "before then; check the card's last statement for the exact date.",
                [r],
                severity="critical" if deferred else None,
            )
