"""Three library rules: the same charge twice, a promotional rate ending on a balance still
owed, and work over the hours (or shifts) a permit or contract allows a week or a term."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.alerts import keys
from helpers.rules import add, build, clock, fire, one

from uac_kernel.rules import library as lib
from uac_kernel.vocab import Binding


def tx(day: str, key: str, amount: float = 42.5, merchant: str = "Corner Cafe", **more: Any):
    return add(day, "Transaction", key, merchant=merchant, amount=amount, date=day, **more)


# -- the same charge twice --------------------------------------------------------------------


def test_the_same_charge_twice_names_both_charges(tmp_path: Path) -> None:
    view = build(tmp_path, [tx("2025-03-01", "a"), tx("2025-03-03", "b"), clock("2025-03-05")])
    alert = one(lib.duplicate_charge, view)
    assert keys(alert) == {"Transaction/a", "Transaction/b"} and alert.severity == "warning"
    assert "2 charges of 42.50 to Corner Cafe on 2025-03-01 and 2025-03-03" in alert.message
    assert "within 60 days of the statement" in alert.message


def test_three_charges_at_once_are_one_alert_naming_all(tmp_path: Path) -> None:
    events = [tx("2025-03-01", k) for k in ("a", "b", "c")]
    alert = one(lib.duplicate_charge, build(tmp_path, [*events, clock("2025-03-02")]))
    assert keys(alert) == {"Transaction/a", "Transaction/b", "Transaction/c"}


def test_duplicate_charge_traps_stay_quiet(tmp_path: Path) -> None:
    events = [
        # refunded: a flag, a refund record, a negative charge
        tx("2025-03-01", "r1", merchant="Shoe Shop", amount=80.0),
        tx("2025-03-01", "r2", merchant="Shoe Shop", amount=80.0, refunded=True),
        tx("2025-03-02", "g1", merchant="Gadget Store", amount=300.0),
        tx("2025-03-02", "g2", merchant="Gadget Store", amount=300.0),
        add("2025-03-04", "Refund", "gr", merchant="Gadget Store", amount=300.0, date="2025-03-04"),
        tx("2025-03-02", "h1", merchant="Hotel Nine", amount=120.0),
        tx("2025-03-03", "h2", merchant="Hotel Nine", amount=120.0),
        tx("2025-03-05", "h3", merchant="Hotel Nine", amount=-120.0),
        # a recurring bill paid twice a month, and a monthly one
        add("2025-03-01", "Payment", "p1", payee="Gym", amount=30.0, date="2025-03-01"),
        add(
            "2025-03-02",
            "Payment",
            "p2",
            payee="Gym",
            amount=30.0,
            date="2025-03-02",
            recurring=True,
        ),
        tx("2025-02-01", "n1", merchant="Netflix", amount=15.99),
        tx("2025-03-01", "n2", merchant="Netflix", amount=15.99),
        # a daily habit on different days; two cards; two amounts; long ago
        *(tx(f"2025-03-0{d}", f"c{d}", merchant="Daily Coffee", amount=3.5) for d in (1, 2, 3, 4)),
        tx("2025-03-01", "k1", merchant="Cinema", amount=12.0, card="visa"),
        tx("2025-03-01", "k2", merchant="Cinema", amount=12.0, card="amex"),
        tx("2025-03-01", "d1", merchant="Deli", amount=9.0),
        tx("2025-03-01", "d2", merchant="Deli", amount=9.5),
        tx("2024-10-01", "o1", merchant="Old Shop", amount=50.0),
        tx("2024-10-01", "o2", merchant="Old Shop", amount=50.0),
        tx("2025-03-01", "x1", merchant="Ticket Desk", amount=60.0),
        tx("2025-03-01", "x2", merchant="Ticket Desk", amount=60.0, cancelled=True),
        clock("2025-03-06"),
    ]
    assert fire(lib.duplicate_charge, build(tmp_path, events)) == []


def test_a_habit_charged_twice_on_one_day_is_flagged(tmp_path: Path) -> None:
    events = [
        *(tx(f"2025-03-0{d}", f"c{d}", merchant="Daily Coffee", amount=3.5) for d in (1, 2, 3)),
        tx("2025-03-03", "again", merchant="Daily Coffee", amount=3.5),
        clock("2025-03-04"),
    ]
    alert = one(lib.duplicate_charge, build(tmp_path, events))
    assert keys(alert) == {"Transaction/c3", "Transaction/again"}


# -- a promotional rate ending on a balance still owed -------------------------------------------


def card(key: str, **fields: Any) -> dict[str, Any]:
    base = {"name": "Balance transfer card", "promo_ends": "2025-04-20", "balance": 2400.0}
    return add("2025-01-10", "CreditCard", key, **{**base, **fields})


def test_a_promotion_ending_within_30_days_on_a_balance(tmp_path: Path) -> None:
    view = build(tmp_path, [card("c", regular_apr=24.99), clock("2025-03-25")])
    alert = one(lib.promotional_rate_ending, view)
    assert keys(alert) == {"CreditCard/c"} and alert.severity == "warning"
    assert "ends on 2025-04-20 (26 days from now) with 2,400.00 still owed (balance)" in (
        alert.message
    )
    assert "24.99% APR" in alert.message and "posts before 2025-04-20" in alert.message


def test_deferred_interest_is_critical(tmp_path: Path) -> None:
    view = build(tmp_path, [card("c", deferred_interest=True), clock("2025-04-01")])
    alert = one(lib.promotional_rate_ending, view)
    assert alert.severity == "critical" and "all the interest since the purchase" in alert.message


def test_promotion_traps_stay_quiet(tmp_path: Path) -> None:
    events = [
        card("zero", balance=0.0),
        card("paid", paid=True),
        card("later", promo_ends="2025-05-20"),
        card("over", promo_ends="2025-03-24"),
        card("none", balance=None),
        clock("2025-03-25"),
    ]
    assert fire(lib.promotional_rate_ending, build(tmp_path, events)) == []


def test_the_lead_opens_as_the_clock_moves(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    early = build(tmp_path / "a", [card("c"), clock("2025-03-20")])  # 31 days before
    assert fire(lib.promotional_rate_ending, early) == []
    on_time = build(tmp_path / "b", [card("c"), clock("2025-03-21")])  # 30 days before
    assert keys(one(lib.promotional_rate_ending, on_time)) == {"CreditCard/c"}


def test_a_promotion_in_other_words(tmp_path: Path) -> None:
    events = [
        add("2025-01-10", "loan", "l", introEnds="2025-04-01", owing=900.0),
        clock("2025-03-25"),
    ]
    view = build(tmp_path, events)
    assert fire(lib.promotional_rate_ending, view) == []
    view._state.bind(
        [
            Binding("promo.ends", "loan", "introEnds", author="model", score=0.8),
            Binding("promo.balance", "loan", "owing", author="model", score=0.8),
        ]
    )
    alert = one(lib.promotional_rate_ending, view)
    assert "900.00 still owed (owing)" in alert.message
    assert "loan.introEnds as promo.ends (model 0.80)" in alert.message


# -- work over a permit's cap ----------------------------------------------------------------


def shift(day: str, key: str, hours: float | None = None, **more: Any) -> dict[str, Any]:
    fields = {"date": day, **({"hours": hours} if hours is not None else {}), **more}
    return add(day, "Shift", key, **fields)


STUDENT_VISA = add(
    "2025-01-01",
    "Visa",
    "sv",
    country="United Kingdom",
    max_hours=20,
    per="week in term time",
    starts="2025-01-01",
    expires="2026-01-31",
)
SPRING = add("2025-01-01", "Term", "spring", start="2025-01-13", end="2025-03-28")


def test_a_week_over_a_student_visas_hours_names_the_permit_term_and_shifts(tmp_path: Path) -> None:
    events = [
        STUDENT_VISA,
        SPRING,
        shift("2025-02-03", "mon", 8),  # the week of Monday 3 February
        add(
            "2025-02-05",
            "Shift",
            "wed",
            start="2025-02-05T09:00:00",
            end="2025-02-05T17:00:00",  # 8 hours from its times
        ),
        shift("2025-02-09", "sun", 6),  # Sunday still belongs to that week
        shift("2025-02-09", "off", 8, cancelled=True),
        shift("2025-02-10", "next", 8),  # next week: 20 hours, at the cap
        shift("2025-02-12", "next2", 8),
        shift("2025-02-16", "next3", 4),
        *(shift(f"2025-04-0{d}", f"vac{d}", 8) for d in (7, 8, 9, 3)),  # vacation weeks
        clock("2025-02-12"),
    ]
    alert = one(lib.work_over_permit_cap, build(tmp_path, events))
    assert keys(alert) == {"Visa/sv", "Term/spring", "Shift/mon", "Shift/wed", "Shift/sun"}
    assert alert.severity == "critical" and alert.category == "scheduling_conflicts"
    assert "week 2025-02-03 to 2025-02-09 come to 22 hours, 2 hours over the 20 hours" in (
        alert.message
    )
    assert "the week is over" in alert.message


def test_a_planned_week_over_the_cap_says_what_to_drop(tmp_path: Path) -> None:
    events = [
        STUDENT_VISA,
        *(shift(f"2025-02-1{d}", f"s{d}", 7) for d in (0, 1, 2)),
        clock("2025-02-01"),
    ]
    alert = one(lib.work_over_permit_cap, build(tmp_path, events))
    assert "21 hours" in alert.message and "drop or move shifts before 2025-02-16" in alert.message
    assert "no term dates are recorded" in alert.message


def test_a_contract_capping_shifts_per_term_for_its_employer(tmp_path: Path) -> None:
    events = [
        add(
            "2025-01-01",
            "Contract",
            "tutor",
            employer="Acme Tutors",
            max_shifts=3,
            per="term",
            term_start="2025-01-13",
            term_end="2025-03-28",
        ),
        *(shift(f"2025-02-0{d}", f"a{d}", 2, employer="Acme Tutors") for d in (3, 4, 5, 6)),
        *(shift(f"2025-02-0{d}", f"b{d}", 2, employer="Book Shop") for d in (3, 4)),
        shift("2025-04-02", "after", 2, employer="Acme Tutors"),
        clock("2025-02-07"),
    ]
    alert = one(lib.work_over_permit_cap, build(tmp_path, events))
    assert keys(alert) == {"Contract/tutor", *(f"Shift/a{d}" for d in (3, 4, 5, 6))}
    assert "come to 4 shifts, 1 shift over the 3 shifts a term" in alert.message


def test_permit_cap_traps_stay_quiet(tmp_path: Path) -> None:
    events = [
        STUDENT_VISA,
        SPRING,
        *(shift(f"2025-02-0{d}", f"at{d}", 5) for d in (3, 4, 5, 6)),  # exactly 20
        *(shift(f"2025-04-0{d}", f"vac{d}", 10) for d in (7, 8, 9)),  # vacation
        *(shift(f"2026-02-0{d}", f"late{d}", 10) for d in (2, 3, 4)),  # after it expired
        add("2025-01-01", "Visa", "tourist", country="France"),  # no cap
        add(
            "2025-01-01", "Visa", "gone", max_hours=5, cancelled=True, starts="2025-01-01"
        ),  # called off
        clock("2025-02-12"),
    ]
    assert fire(lib.work_over_permit_cap, build(tmp_path, events)) == []


def test_a_permit_cap_in_other_words(tmp_path: Path) -> None:
    events = [
        add("2025-01-01", "StudyPermit", "p", weeklyMax=10),
        add("2025-02-03", "gig_log", "g1", gigDay="2025-02-03", worked=6),
        add("2025-02-04", "gig_log", "g2", gigDay="2025-02-04", worked=6),
        clock("2025-02-05"),
    ]
    view = build(tmp_path, events)
    assert fire(lib.work_over_permit_cap, view) == []
    view._state.bind(
        [
            Binding("permit", "StudyPermit", author="person"),
            Binding("permit.hours_cap", "StudyPermit", "weeklyMax", author="person"),
            Binding("shift", "gig_log", author="person"),
            Binding("shift.when", "gig_log", "gigDay", author="person"),
            Binding("shift.hours", "gig_log", "worked", author="person"),
        ]
    )
    alert = one(lib.work_over_permit_cap, view)
    assert keys(alert) == {"StudyPermit/p", "gig_log/g1", "gig_log/g2"}
    assert "12 hours, 2 hours over the 10 hours a week" in alert.message
