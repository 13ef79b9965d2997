"""Money rules: transfers during a freeze, charges after a cancellation, payments from a closed
account, spending limits, wash sales and investments against a stated risk tolerance.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator
from datetime import date, timedelta

from uac_kernel.query import UserView
from uac_kernel.records import Record
from uac_kernel.rules.engine import Finding, rule
from uac_kernel.rules.library._common import (
    _after,
    _at_least,
    _called_off,
    _days,
    _first_day,
    _first_term,
    _flag,
    _from_day,
    _get,
    _label,
    _money,
    _norm,
    _number,
    _settled,
    _split,
    _terms,
    _text,
)

__all__ = [
    "charge_after_cancellation",
    "investment_against_risk_tolerance",
    "payment_from_closed_account",
    "transaction_over_limit",
    "transfer_during_freeze",
    "wash_sale",
]

# -- money -----------------------------------------------------------------------------------
_ACCOUNT_STOP = frozenset(_split("the my our a an account acct from to"))
_MERCHANT_STOP = frozenset(
    _split("the inc llc ltd co com subscription membership plan monthly annual")
)
OUTFLOW_WORDS = _terms("transfer, wire, send, pay, payment, withdraw, withdrawal")
FREEZE_WORDS = _terms("freeze, frozen, hold, block, no outflow, no money, forbid")


def _words(text: str, stop: frozenset[str]) -> frozenset[str]:
    return frozenset(w for w in _norm(text).split() if w not in stop)


def _match(a: frozenset[str], b: frozenset[str]) -> bool:
    return bool(a) and bool(b) and (a <= b or b <= a)


def _pending(
    rec: Record, today: date | None, fields: Iterable[str] = ("date", "scheduled", "on", "due")
) -> bool:
    """Not done, sent or cancelled, and not dated in the past (recurring ones always pending)."""
    if _settled(rec) or _flag(rec, "sent", "executed"):
        return False
    d = _first_day(rec, fields)
    return _flag(rec, "recurring") or d is None or today is None or d >= today


@rule(
    watch=["Instruction", "Transfer", "Wire", "Payment", "Freeze"],
    severity="critical",
    category="financial_authorization_conflicts",
    source="FINRA Rule 2165 (temporary holds on disbursements) and Regulation E, 12 CFR 1005 "
    "(an account holder's authorization governs transfers): a stated hold outranks a later "
    "instruction until it is lifted",
)
def transfer_during_freeze(user: UserView) -> Iterator[Finding]:
    """Reads ``Freeze`` records and ``Instruction`` records that forbid outflows (``freeze``/
    ``no_outflows`` true, or an ``action`` saying freeze/hold/block), with ``account``, ``until``;
    and pending outflows: ``Transfer``/``Wire``/``Payment``, or ``Instruction`` whose ``action``
    says transfer/wire/send/pay, with ``account``/``from_account``, ``amount``, ``date``.

    Flags an outflow from an account that a current freeze covers (account names match as word
    sets) and whose date, if any, is not after the freeze's ``until``: critical.
    """
    today = user.today
    freezes: list[tuple[Record, frozenset[str], date | None, date | None]] = []
    outflows: list[tuple[Record, frozenset[str], str]] = []
    for t in ("Freeze", "Instruction", "Transfer", "Wire", "Payment"):
        for r in user.all(t):
            action = _norm(_text(r, ("action", "kind", "instruction", "name")))
            if (
                t == "Freeze"
                or _flag(r, "freeze", "no_outflows")
                or (t == "Instruction" and any(w in action for w in FREEZE_WORDS))
            ):
                until = _first_day(r, ("until", "ends", "end"))
                starts = _first_day(r, ("starts", "since"))
                if not (_flag(r, "lifted") or _called_off(r)) and (
                    until is None or today is None or until >= today
                ):
                    account = _words(_text(r, ("account",)), _ACCOUNT_STOP)
                    if account:
                        freezes.append((r, account, starts, until))
            elif (t != "Instruction" or any(w in action for w in OUTFLOW_WORDS)) and _pending(
                r, today
            ):
                src = _text(r, ("from_account", "account", "source_account"))
                if account := _words(src, _ACCOUNT_STOP):
                    outflows.append((r, account, src))
    for out, account, src in outflows:
        when = _first_day(out, ("date", "scheduled", "on", "due"))
        amount = _number(_get(out, "amount"))
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


CHARGE_TYPES = ("Transaction", "Payment", "Charge", "Purchase")


@rule(
    watch=["Subscription", *CHARGE_TYPES],
    severity="warning",
    category="financial_authorization_conflicts",
    source="FTC Negative Option Rule (16 CFR 425) and Restore Online Shoppers' Confidence Act "
    "(15 U.S.C. 8403): no charges after cancellation; Fair Credit Billing Act (15 U.S.C. 1666): "
    "dispute a billing error within 60 days",
)
def charge_after_cancellation(user: UserView) -> Iterator[Finding]:
    """Reads current ``Subscription`` records with ``cancelled`` true (``name``/``service``/
    ``merchant``/``provider``; effective date from ``cancel_effective``/``effective``/
    ``cancelled_on``/``ends``/``end``, else when the cancellation was recorded) and
    ``Transaction``/``Payment``/``Charge``/``Purchase`` records (``merchant``/``payee``/
    ``service``/``vendor``/``name``, ``amount``, ``date``/``charged_on``/``paid_on``).

    Flags a charge to a cancelled service dated after the cancellation took effect (merchant and
    service names match as word sets): warning. Reads only the charges dated after the earliest
    cancellation (and undated ones).
    """
    index: dict[str, list[tuple[Record, frozenset[str], date]]] = defaultdict(list)
    for s in user.all("Subscription"):
        if not _called_off(s):
            continue
        words = _words(_text(s, ("name", "service", "merchant", "provider")), _MERCHANT_STOP)
        eff = _first_day(s, ("cancel_effective", "effective", "cancelled_on", "ends", "end"))
        eff = eff or (s.valid_from.date() if s.valid_from else None)
        if words and eff:
            for w in words:
                index[w].append((s, words, eff))
    if not index:
        return
    # Only charges after the earliest cancellation can be late: the index hands over those.
    first = _after(min(eff for subs in index.values() for _, _, eff in subs), timedelta(days=1))
    for t in CHARGE_TYPES:
        for c in _from_day(user, t, first, ("date", "charged_on", "paid_on")):
            amount = _number(_get(c, "amount"))
            if amount is not None and amount <= 0:
                continue
            words = _words(
                _text(c, ("merchant", "payee", "service", "vendor", "name")), _MERCHANT_STOP
            )
            when = _first_day(c, ("date", "charged_on", "paid_on")) or (
                c.valid_from.date() if c.valid_from else None
            )
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
    watch=["Account", "Payment", "Autopay", "Transfer", "Bill"],
    severity="critical",
    category="financial_authorization_conflicts",
    source="Regulation E, 12 CFR 1005.10 (preauthorized transfers) and CFPB guidance: move "
    "automatic payments before an account closes, or they fail or bounce",
)
def payment_from_closed_account(user: UserView) -> Iterator[Finding]:
    """Reads ``Account`` records with ``closed`` or ``closing`` true or a ``closes_on``/
    ``closed_on`` date (``name``/``bank``/``institution``) and pending ``Payment``/``Autopay``/
    ``Transfer``/``Bill`` records (``account``/``from_account``/``source``, ``amount``,
    ``date``/``due``, ``recurring``).

    Flags a pending or recurring payment drawn on a closed or closing account (the account's key,
    or names matching as word sets), dated on or after the closing date if one is known: critical.
    """
    today = user.today
    closed = []
    for a in user.all("Account"):
        on = _first_day(a, ("closes_on", "closed_on", "close_date"))
        if _flag(a, "closed", "closing") or on is not None:
            closed.append((a, _words(_text(a, ("name", "bank", "institution")), _ACCOUNT_STOP), on))
    if not closed:
        return
    for t in ("Payment", "Autopay", "Transfer", "Bill"):
        for p in user.all(t):
            src = _text(p, ("account", "from_account", "source", "source_account"))
            if not src or not _pending(p, today, ("date", "due", "next", "on")):
                continue
            words = _words(src, _ACCOUNT_STOP)
            when = _first_day(p, ("date", "due", "next", "on"))
            for acct, a_words, on in closed:
                if not (src == acct.key or _match(words, a_words)):
                    continue
                if on is not None and when is not None and when < on and not _flag(p, "recurring"):
                    continue
                amount = _number(_get(p, "amount"))
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


LIMIT_TYPES = ("Limit", "Authorization", "SpendingLimit")
_INSTRUMENT = ("card", "account", "payment_method", "instrument")


@rule(
    watch=[*LIMIT_TYPES, *CHARGE_TYPES],
    severity="warning",
    category="financial_authorization_conflicts",
    source="UCC Article 4A-202 (a payment order binds only as authorized) and card issuers' "
    "per-transaction limits: a charge above a stated limit needs the approval the limit names",
)
def transaction_over_limit(user: UserView) -> Iterator[Finding]:
    """Reads per-transaction ``Limit``/``Authorization``/``SpendingLimit`` records (``amount`` or
    ``limit``; ``per``/``period`` absent or naming a transaction; optional ``card``/``account``/
    ``payment_method``/``instrument``) and ``Transaction``/``Payment``/``Charge``/``Purchase``
    records (``amount``, the same instrument fields, ``date``; skips ``approved``/``authorized``
    true).

    Flags a transaction above a limit that covers its instrument (a limit naming no instrument
    covers all), dated on or after the day the limit was recorded: warning. Reads only the
    transactions above the lowest limit.
    """
    limits = []
    for t in LIMIT_TYPES:
        for lim in user.all(t):
            cap = _number(_get(lim, "amount"))
            cap = cap if cap is not None else _number(_get(lim, "limit"))
            per = _text(lim, ("per", "period"))
            if cap is None or (
                per
                and not any(w in _norm(per) for w in _terms("transaction", "purchase", "charge"))
            ):
                continue
            since = lim.valid_from.date() if lim.valid_from else None
            limits.append((lim, cap, _words(_text(lim, _INSTRUMENT), _ACCOUNT_STOP), since))
    if not limits:
        return
    lowest = min(cap for _, cap, _, _ in limits)
    for t in CHARGE_TYPES:
        # Only amounts above the lowest cap can break a limit: the index reads just those.
        for tx in _at_least(user, t, "amount", lowest):
            amount = _number(_get(tx, "amount"))
            if amount is None or _flag(tx, "approved", "authorized") or _called_off(tx):
                continue
            instrument = _words(_text(tx, _INSTRUMENT), _ACCOUNT_STOP)
            when = _first_day(tx, ("date", "charged_on", "paid_on")) or (
                tx.valid_from.date() if tx.valid_from else None
            )
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


TRADE_TYPES = ("Trade", "Order", "Sale", "Sell", "Buy", "StockPurchase", "StockSale", "Investment")
_SELL_TYPES = frozenset({"Sale", "Sell", "StockSale"})
_BUY_TYPES = frozenset({"Buy", "StockPurchase"})
_SELL_WORDS = _terms("sell, sold, sale")
_BUY_WORDS = _terms("buy, bought, purchase, purchased, reinvest, reinvested")
_HARVEST_WORDS = _terms("tax loss, loss harvest, loss harvesting, harvest loss, harvest")
WASH_WINDOW = 30  # days before and after the sale (IRS Publication 550, Wash Sales)


def _trade(rec: Record, today: date | None) -> tuple[str, str, date] | None:
    """(side, normalised symbol, date) of a trade that is not cancelled; a trade with no date is
    planned for the log clock's day, an executed one without a date is dated when recorded."""
    if _called_off(rec):
        return None
    t = type(rec).__name__
    action = _norm(_text(rec, ("action", "side", "kind", "type")))
    if t in _SELL_TYPES or (t not in _BUY_TYPES and _first_term(action, _SELL_WORDS)):
        side = "sell"
    elif t in _BUY_TYPES or _first_term(action, _BUY_WORDS):
        side = "buy"
    else:
        return None
    symbol = _norm(_text(rec, ("symbol", "ticker", "security", "fund", "stock"))).strip()
    when = _first_day(rec, ("date", "trade_date", "executed_on", "on"))
    if when is None:
        recorded = rec.valid_from.date() if rec.valid_from else None
        when = today if _flag(rec, "planned") or _get(rec, "status") == "planned" else recorded
        when = when or today
    return (side, symbol, when) if symbol and when else None


def _at_a_loss(rec: Record) -> bool:
    loss, gain = _number(_get(rec, "loss")), _number(_get(rec, "gain"))
    why = _norm(_text(rec, ("purpose", "reason", "strategy", "note")))
    return bool(
        (loss is not None and loss > 0)
        or (gain is not None and gain < 0)
        or _first_term(why, _HARVEST_WORDS)
    )


@rule(
    watch=list(TRADE_TYPES),
    severity="warning",
    category="financial_authorization_conflicts",
    source="IRS Publication 550, Wash Sales (a loss is disallowed when substantially identical "
    "stock is bought within 30 days before or after the sale); Revenue Ruling 2008-5 (a purchase "
    "in the seller's IRA counts)",
)
def wash_sale(user: UserView) -> Iterator[Finding]:
    """Reads ``Trade``/``Order``/``Sale``/``Sell``/``Buy``/``StockPurchase``/``StockSale``/
    ``Investment`` records: side from the type or ``action``/``side``/``kind`` (buy/bought/
    purchase vs sell/sold), ``symbol``/``ticker``/``security``/``fund``/``stock``, ``date``/
    ``trade_date`` (a planned trade without one: the log clock's day), ``account``, and a loss
    (``loss`` > 0, ``gain`` < 0, or a ``purpose``/``reason``/``strategy``/``note`` of tax-loss
    harvesting); skips ``cancelled`` true.

    Flags a sale at a loss with a purchase of the same symbol, in any account, 30 days or less
    before or after it: warning, naming the date from which a sale (or to which a purchase) would
    be clear, and noting that a purchase in an IRA loses the deduction for good. Linear in the
    trades, by symbol.
    """
    today = user.today
    buys: dict[str, list[tuple[Record, date]]] = defaultdict(list)
    sales: list[tuple[Record, str, date]] = []
    for t in TRADE_TYPES:
        for rec in user.all(t):
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
            ira = " ira " in _norm(_text(buy, ("account",)))
            where = _text(buy, ("account",))
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
RISK_FIELDS = ("risk", "risk_level", "volatility")


@rule(
    watch=None,
    severity="warning",
    category="financial_authorization_conflicts",
    source="FINRA Rule 2111 (Suitability): a recommendation must fit the customer's investment "
    "profile, risk tolerance included",
)
def investment_against_risk_tolerance(user: UserView) -> Iterator[Finding]:
    """Reads ``risk_tolerance`` on current records of any type (conservative, cautious, low, ...)
    and ``risk``/``risk_level``/``volatility`` on current records of any other type (high,
    speculative, aggressive, volatile), with ``amount`` and ``date``; skips settled or cancelled
    records and those dated before today.

    Flags a pending high-risk investment while the user's stated risk tolerance is cautious:
    warning — the user's own rule, stated earlier, says no; confirm before acting. Looks only at
    types that have those fields.
    """
    today = user.today
    tolerances: list[tuple[Record, str]] = []
    risky: list[tuple[Record, str]] = []
    for t in user.types():
        fields = user.field_types(t)
        if "risk_tolerance" in fields:
            for r in user.all(t):
                text = _norm(_text(r, ("risk_tolerance",)))
                if (hit := _first_term(text, CAUTIOUS_WORDS)) and not _called_off(r):
                    tolerances.append((r, hit))
        elif any(f in fields for f in RISK_FIELDS):
            for r in user.all(t):
                if not _pending(r, today, ("date", "on")):
                    continue
                if hit := _first_term(_norm(_text(r, RISK_FIELDS)), RISKY_WORDS):
                    risky.append((r, hit))
    for inv, level in risky:
        amount = _number(_get(inv, "amount"))
        size = f" of {_money(amount, inv)}" if amount is not None else ""
        for pref, tolerance in tolerances:
            since = f" (since {pref.valid_from.date()})" if pref.valid_from else ""
            yield Finding(
                f"{_label(inv)}{size} is {level} risk, but {_label(pref)} records a {tolerance} "
                f"risk tolerance{since}: confirm the user has changed that stance before acting, "
                "or suggest a position that fits it.",
                [pref, inv],
            )
