"""warranty_ends_with_open_fault: a warranty ending (or ended since the fault was reported)
while a fault on its item is open, on states folded from a real DuckDB event log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.alerts import keys
from helpers.rules import add, bound, build, clock, fire, one

from uac_kernel.rules import library as lib
from uac_kernel.rules.engine import RuleRunner
from uac_kernel.state.query import UserView

RULE = lib.warranty_ends_with_open_fault
LAPTOP = add("2024-01-10", "Laptop", "laptop-1", name="MacBook", warranty_until="2024-10-20")


def repair(**fields: Any) -> dict[str, Any]:
    return add("2024-09-20", "Repair", "r1", **{"reported": "2024-09-20", **fields})


def test_a_warranty_ending_while_a_fault_on_its_item_is_open(tmp_path: Path) -> None:
    view = build(tmp_path, [LAPTOP, repair(item="laptop-1", title="screen flickers"),
                            clock("2024-10-01")])  # fmt: skip
    alert = one(RULE, view)
    assert keys(alert) == {"Laptop/laptop-1", "Repair/r1"} and alert.severity == "warning"
    assert alert.category == "warranty_deadline_expiration"
    assert (
        "Laptop 'laptop-1' (MacBook): its warranty (warranty_until 2024-10-20) ends in 19 days"
        in alert.message
    )
    assert "Repair 'r1' (screen flickers), reported 2024-09-20, is still open" in alert.message


def test_a_fault_naming_the_item_and_a_warranty_record_covering_it(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            LAPTOP,
            add("2024-01-10", "Warranty", "w", item="Dishwasher", warranty_until="2024-10-05"),
            add("2024-09-25", "Fault", "f1", appliance="the dishwasher", reported="2024-09-25"),
            add("2024-09-25", "Issue", "f2", device="MacBook", reported="2024-09-26"),
            clock("2024-10-01"),
        ],
    )
    by = {frozenset(keys(a)): a for a in fire(RULE, view)}
    assert set(by) == {
        frozenset({"Warranty/w", "Fault/f1"}),
        frozenset({"Laptop/laptop-1", "Issue/f2"}),
    }
    assert by[frozenset({"Warranty/w", "Fault/f1"})].severity == "critical"  # 4 days left


def test_a_warranty_ended_since_the_fault_was_reported_stays_flagged(tmp_path: Path) -> None:
    view = build(tmp_path, [LAPTOP, repair(item="laptop-1"), clock("2024-11-05")])
    alert = one(RULE, view)
    assert (
        "ended 16 days ago" in alert.message and "citing the date it was reported" in alert.message
    )
    # the same finding as before the end, so the same alert (an update, not a new one)
    before = one(
        RULE, build(tmp_path / "b", [LAPTOP, repair(item="laptop-1"), clock("2024-10-01")])
    )
    assert before.id == alert.id


def test_traps_stay_quiet(tmp_path: Path) -> None:
    cases = {
        "resolved": [LAPTOP, repair(item="laptop-1", resolved=True)],
        "status fixed": [LAPTOP, repair(item="laptop-1", status="Fixed under warranty")],
        "another item": [LAPTOP, repair(item="tv-1")],
        "far off": [
            add("2024-01-10", "Laptop", "laptop-1", warranty_until="2025-06-01"),
            repair(item="laptop-1"),
        ],
        "reported after the end": [LAPTOP, repair(item="laptop-1", reported="2024-10-25")],
        "no item named": [LAPTOP, repair(title="laptop-1")],
    }
    for name, events in cases.items():
        view = build(
            tmp_path / name.replace(" ", "_"),
            [*events, clock("2024-11-05" if "after" in name else "2024-10-01")],
        )
        assert fire(RULE, view) == [], name


def test_a_fault_in_other_words_once_bound(tmp_path: Path) -> None:
    def state(path: Path) -> UserView:
        return build(
            path,
            [
                add("2024-01-10", "Phone", "p1", covered_until="2024-10-10"),
                add("2024-09-20", "Breakdown", "b1", gadget="p1", logged="2024-09-20"),
                clock("2024-10-01"),
            ],
        )

    assert fire(RULE, state(tmp_path / "raw")) == []
    view = bound(
        state(tmp_path / "bound"),
        ("fault", "Breakdown"),
        ("fault.item", "Breakdown", "gadget"),
        ("fault.reported", "Breakdown", "logged"),
        ("warranty.until", "Phone", "covered_until"),
    )
    alert = one(RULE, view)
    assert "its warranty (covered_until 2024-10-10) ends in 9 days" in alert.message
    assert "reported 2024-09-20" in alert.message


def test_the_library_run_raises_it_beside_the_deadline(tmp_path: Path) -> None:
    view = build(tmp_path, [LAPTOP, repair(item="laptop-1"), clock("2024-10-01")])
    raised = RuleRunner(lib.LIBRARY).run(view, None).raised
    assert sorted(a.rule for a in raised) == [
        "deadline_approaching",
        "warranty_ends_with_open_fault",
    ]
