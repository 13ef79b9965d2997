"""The money rules read concepts: in a user's own words (types and fields renamed, camelCase, a
Python keyword, a lower-case type) once bound, they raise the alert they raise under the
library's names, and their traps stay quiet."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.alerts import keys
from helpers.rules import add, build, clock, fire, one

from uac_kernel.rules import library as lib
from uac_kernel.state.query import UserView
from uac_kernel.vocab import Binding


def bound(view: UserView, *pairs: tuple[str, ...], author: Any = "person") -> UserView:
    """``view`` with ``(role, Type)`` and ``(concept, Type, field)`` bindings by ``author``."""
    view._state.bind(
        Binding(p[0], p[1], p[2] if len(p) > 2 else None, author=author, score=0.9, reason="test")
        for p in pairs
    )
    return view


def test_freeze_and_a_transfer_in_other_words(tmp_path: Path) -> None:
    events = [
        add("2024-09-01", "AccountHold", "h", acct="family trust", hold_until="2024-09-30"),
        add("2024-09-02", "MoneyMove", "m", **{"from": "family trust"}, priceGBP=900.0),
        add("2024-09-02", "MoneyMove", "late", **{"from": "family trust"}, send_on="2024-10-05"),
        add("2024-09-02", "MoneyMove", "other", **{"from": "joint checking"}, priceGBP=5.0),
        clock("2024-09-03"),
    ]
    view = build(tmp_path, events)
    assert fire(lib.transfer_during_freeze, view) == []  # unbound: not known as money at all
    bound(
        view,
        ("freeze", "AccountHold"),
        ("freeze.account", "AccountHold", "acct"),
        ("freeze.until", "AccountHold", "hold_until"),
        ("payment", "MoneyMove"),
        ("payment.account", "MoneyMove", "from"),
        ("payment.amount", "MoneyMove", "priceGBP"),
        ("payment.date", "MoneyMove", "send_on"),
        author="inferred",
    )
    alert = one(lib.transfer_during_freeze, view)  # 'late' goes after the hold; 'other' elsewhere
    assert keys(alert) == {"AccountHold/h", "MoneyMove/m"} and alert.severity == "critical"
    assert (
        "send 900.00 from 'family trust'" in alert.message and "until 2024-09-30" in alert.message
    )
    assert "[read " in alert.message and "MoneyMove.from as payment.account" in alert.message
    assert lib.transfer_during_freeze.watches(view) >= {"AccountHold", "MoneyMove"}


def test_charge_after_cancellation_and_over_limit_in_other_words(tmp_path: Path) -> None:
    events = [
        add(
            "2024-08-01",
            "Streaming",
            "s",
            provider_name="Adobe",
            cancelled=True,
            cancelEffective="2024-08-15",
        ),
        add("2024-07-01", "CardCap", "cap", maxAmount=500.0),
        add("2024-09-01", "CardTxn", "t1", payeeName="Adobe", amt=54.99, posted="2024-09-01"),
        add("2024-08-10", "CardTxn", "t0", payeeName="Adobe", amt=54.99, posted="2024-08-10"),
        add("2024-09-02", "CardTxn", "big", payeeName="Venue", amt=800.0, posted="2024-09-02"),
        add("2024-09-02", "CardTxn", "ok", payeeName="Venue", amt=800.0, signedOff=True),
        clock("2024-09-03"),
    ]
    view = bound(
        build(tmp_path, events),
        ("subscription", "Streaming"),
        ("subscription.merchant", "Streaming", "provider_name"),
        ("subscription.cancel_effective", "Streaming", "cancelEffective"),
        ("charge", "CardTxn"),
        ("payment.merchant", "CardTxn", "payeeName"),
        ("payment.amount", "CardTxn", "amt"),
        ("payment.date", "CardTxn", "posted"),
        ("payment.approved", "CardTxn", "signedOff"),
        ("limit", "CardCap"),
        ("limit.cap", "CardCap", "maxAmount"),
    )
    late = one(lib.charge_after_cancellation, view)  # t0 was before the cancellation
    assert (
        keys(late) == {"Streaming/s", "CardTxn/t1"} and "54.99 charge on 2024-09-01" in late.message
    )
    over = one(lib.transaction_over_limit, view)  # 'ok' was approved
    assert keys(over) == {"CardCap/cap", "CardTxn/big"} and "300.00 over the 500.00" in over.message


def test_payment_from_a_closed_account_lower_case_type(tmp_path: Path) -> None:
    events = [
        add("2024-09-01", "bank_account", "wf", bank_name="Wells Fargo", shut_on="2024-09-25"),
        add("2024-09-02", "DirectDebit", "rent", acct="wf", amt=1500.0, due_day="2024-10-01"),
        add("2024-09-02", "DirectDebit", "early", acct="wf", amt=20.0, due_day="2024-09-10"),
        clock("2024-09-03"),
    ]
    view = bound(
        build(tmp_path, events),
        ("account", "bank_account"),
        ("account.name", "bank_account", "bank_name"),
        ("account.closes_on", "bank_account", "shut_on"),
        ("payment", "DirectDebit"),
        ("payment.account", "DirectDebit", "acct"),
        ("payment.amount", "DirectDebit", "amt"),
        ("payment.date", "DirectDebit", "due_day"),
    )
    alert = one(lib.payment_from_closed_account, view)  # 'early' goes out before it closes
    assert keys(alert) == {"bank_account/wf", "DirectDebit/rent"}
    assert "1,500.00" in alert.message and "closes on 2024-09-25" in alert.message


def test_wash_sale_with_side_types_in_other_words(tmp_path: Path) -> None:
    events = [
        add("2024-09-01", "Acquisition", "b", tickerSym="VTI", tradeDay="2024-09-01"),
        add(
            "2024-09-10", "Disposal", "s", tickerSym="VTI", tradeDay="2024-09-10", realisedLoss=300
        ),
        add("2024-09-10", "Disposal", "gain", tickerSym="VTI", tradeDay="2024-09-10"),
        add("2024-06-01", "Acquisition", "old", tickerSym="VTI", tradeDay="2024-06-01"),
    ]
    view = bound(
        build(tmp_path, events),
        ("trade_sell", "Disposal"),
        ("trade_buy", "Acquisition"),
        ("trade.symbol", "Disposal", "tickerSym"),
        ("trade.symbol", "Acquisition", "tickerSym"),
        ("trade.date", "Disposal", "tradeDay"),
        ("trade.date", "Acquisition", "tradeDay"),
        ("trade.loss", "Disposal", "realisedLoss"),
    )
    alert = one(lib.wash_sale, view)  # the other sale has no loss; 'old' is 101 days before
    assert keys(alert) == {"Disposal/s", "Acquisition/b"} and "VTI at a loss" in alert.message


def test_risk_tolerance_in_other_words(tmp_path: Path) -> None:
    events = [
        add("2024-08-10", "Prefs", "p", appetite="conservative"),
        add("2024-09-01", "Idea", "crypto", riskiness="speculative", amt=5000.0),
        add("2024-09-01", "Idea", "bonds", riskiness="low"),
        clock("2024-09-02"),
    ]
    view = bound(
        build(tmp_path, events),
        ("risk_profile.tolerance", "Prefs", "appetite"),
        ("investment.risk", "Idea", "riskiness"),
        ("investment.amount", "Idea", "amt"),
    )
    alert = one(lib.investment_against_risk_tolerance, view)
    assert keys(alert) == {"Prefs/p", "Idea/crypto"} and "5,000.00 is speculative" in alert.message


def test_balance_projection_in_other_words(tmp_path: Path) -> None:
    events = [
        add("2026-05-01", "Wallet", "w", funds=1000.0, fundsOn="2026-05-01"),
        add("2026-05-01", "Outgoing", "car", amt=700.0, when="2026-05-10"),
        add("2026-05-01", "Outgoing", "rent", amt=600.0, when="2026-05-12"),
        add("2026-05-01", "Pay", "job", net=250.0, payday="2026-05-11"),
        clock("2026-05-02"),
    ]
    view = bound(
        build(tmp_path, events),
        ("account", "Wallet"),
        ("account.balance", "Wallet", "funds"),
        ("account.balance_as_of", "Wallet", "fundsOn"),
        ("payment", "Outgoing"),
        ("payment.amount", "Outgoing", "amt"),
        ("payment.date", "Outgoing", "when"),
        ("income", "Pay"),
        ("income.amount", "Pay", "net"),
        ("income.date", "Pay", "payday"),
    )
    alert = one(lib.balance_projection, view)
    assert keys(alert) == {"Wallet/w", "Outgoing/car", "Outgoing/rent"}
    assert "falls to -50.00 on 2026-05-12" in alert.message and alert.severity == "critical"


def test_contributions_and_budget_in_other_words(tmp_path: Path) -> None:
    events = [
        add("2025-02-01", "PayIn", "a", wrapper="Roth IRA", amt=4000.0, paidDay="2025-02-01"),
        add("2025-06-01", "PayIn", "b", wrapper="Roth IRA", amt=3500.0, paidDay="2025-06-01"),
        add("2025-06-01", "PayIn", "m", wrapper="401k", amt=9000.0, isMatch=True),
        add("2025-09-01", "Allowance", "food", cap=300.0, every="monthly", bucket="dining"),
        add("2025-09-02", "Spend", "s1", amt=200.0, day="2025-09-02", what="dining"),
        add("2025-09-05", "Spend", "s2", amt=150.0, day="2025-09-05", what="dining"),
        add("2025-09-05", "Spend", "back", amt=150.0, day="2025-09-05", what="dining", back=True),
        clock("2025-09-06"),
    ]
    view = bound(
        build(tmp_path, events),
        ("contribution", "PayIn"),
        ("contribution.account_kind", "PayIn", "wrapper"),
        ("contribution.amount", "PayIn", "amt"),
        ("contribution.date", "PayIn", "paidDay"),
        ("contribution.exempt", "PayIn", "isMatch"),
        ("budget", "Allowance"),
        ("budget.cap", "Allowance", "cap"),
        ("budget.period", "Allowance", "every"),
        ("budget.category", "Allowance", "bucket"),
        ("charge", "Spend"),
        ("payment.amount", "Spend", "amt"),
        ("payment.date", "Spend", "day"),
        ("payment.category", "Spend", "what"),
        ("payment.refunded", "Spend", "back"),
    )
    ira = one(lib.annual_contribution_limit, view)  # the employer's match is not counted
    assert keys(ira) == {"PayIn/b"} and "USD 7,500.00" in ira.message
    food = one(lib.budget_exceeded, view)  # the refunded one is not spending
    assert keys(food) == {"Allowance/food", "Spend/s2"} and "350.00" in food.message


def test_a_rejected_default_hides_a_type(tmp_path: Path) -> None:
    """A person who says their ``Freeze`` type is not a hold on money silences the rule."""
    events = [
        add("2024-09-01", "Freeze", "f", account="family trust"),
        add("2024-09-02", "Transfer", "t", account="family trust", amount=10.0),
        clock("2024-09-03"),
    ]
    view = build(tmp_path, events)
    assert keys(one(lib.transfer_during_freeze, view)) == {"Freeze/f", "Transfer/t"}
    view._state.bind([Binding("freeze", "Freeze", author="person", status="rejected")])
    assert fire(lib.transfer_during_freeze, view) == []
