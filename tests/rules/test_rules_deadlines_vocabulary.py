"""deadline_approaching and tax_filing_deadline under a user's own words: each deadline kind a
concept (duty.due, return.by, warranty.until, renewal.date + renewal.notice, term.ends,
promo.ends, document.expiry), bound to the user's fields, on states folded from a real DuckDB
event log; alert ids keep the user's field name."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from helpers.alerts import keys
from helpers.rules import add, bound, build, clock, fire, one

from uac_kernel.rules import library as lib
from uac_kernel.state.query import UserView
from uac_kernel.vocab.binding import Binding

RULE = lib.deadline_approaching


def alert_id(rule: str, about: str, *evidence: str) -> str:
    """The id the engine gives a finding about ``about`` on ``evidence`` (``Type/key``)."""
    ident = "|".join([about, *sorted(evidence)])
    return f"{rule}:{hashlib.sha256(ident.encode()).hexdigest()[:12]}"


def homework(path: Path, **more: Any) -> UserView:
    return build(
        path,
        [
            add("2026-01-05", "Homework", "essay", title="history essay", turn_in="2026-02-13",
                **more),
            clock("2026-02-10"),
        ],
    )  # fmt: skip


def test_a_due_date_in_other_words_is_an_obligation(tmp_path: Path) -> None:
    assert fire(RULE, homework(tmp_path / "raw")) == []
    alert = one(RULE, bound(homework(tmp_path / "bound"), ("duty.due", "Homework", "turn_in")))
    assert alert.severity == "warning" and "turn_in 2026-02-13 is in 3 days" in alert.message
    assert "[read Homework.turn_in as duty.due (person" in alert.message
    assert alert.id == alert_id("deadline_approaching", "turn_in", "Homework/essay")


def test_an_overdue_duty_in_other_words_escalates_under_the_same_id(tmp_path: Path) -> None:
    coming = one(RULE, bound(homework(tmp_path / "a"), ("duty.due", "Homework", "turn_in")))
    view = build(
        tmp_path / "b",
        [
            add("2026-01-05", "Homework", "essay", title="history essay", turn_in="2026-02-13"),
            clock("2026-02-16"),
        ],
    )
    late = one(RULE, bound(view, ("duty.due", "Homework", "turn_in")))
    assert late.id == coming.id and late.severity == "critical" and "overdue" in late.message


def test_a_duty_settled_in_other_words_is_quiet(tmp_path: Path) -> None:
    view = bound(
        homework(tmp_path, handed_in=True),
        ("duty.due", "Homework", "turn_in"),
        ("record.settled", "Homework", "handed_in"),
    )
    assert fire(RULE, view) == []


def test_default_names_keep_their_alert_ids(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2024-09-10", "Subscription", "gym", renews_on="2024-11-01", notice_days=30),
            add("2024-09-10", "Task", "t", deadline="2024-10-01"),
            clock("2024-09-28"),
        ],
    )
    assert {a.id for a in fire(RULE, view)} == {
        alert_id("deadline_approaching", "renews_on notice", "Subscription/gym"),
        alert_id("deadline_approaching", "deadline", "Task/t"),
    }


def lease(path: Path) -> UserView:
    return build(
        path,
        [
            add("2024-01-10", "Lease", "flat", renewsOn="2024-11-01", noticeDays=30),
            clock("2024-09-28"),
        ],
    )


def test_a_renewal_and_its_notice_in_camel_case(tmp_path: Path) -> None:
    assert fire(RULE, lease(tmp_path / "raw")) == []
    view = bound(
        lease(tmp_path / "bound"),
        ("renewal.date", "Lease", "renewsOn"),
        ("renewal.notice", "Lease", "noticeDays"),
    )
    alert = one(RULE, view)
    assert "the notice deadline 2024-10-02 (30 days before renewsOn 2024-11-01)" in alert.message
    assert "Give notice" in alert.message
    assert alert.id == alert_id("deadline_approaching", "renewsOn notice", "Lease/flat")


def test_a_field_bound_to_one_kind_is_not_read_as_the_default_kind_too(tmp_path: Path) -> None:
    view = build(
        tmp_path, [add("2024-01-10", "Lease", "flat", ends="2024-10-05"), clock("2024-10-01")]
    )
    assert "Decide what happens when it ends" in one(RULE, view).message  # term.ends by default
    bound(view, ("renewal.date", "Lease", "ends"))
    alert = one(RULE, view)  # one alert, read as the renewal it is bound to
    assert "Cancel or confirm the renewal" in alert.message


def test_a_warranty_in_other_words_gets_the_warranty_lead(tmp_path: Path) -> None:
    def state(path: Path) -> UserView:
        return build(
            path,
            [add("2024-01-10", "Gadget", "tv", covered_until="2024-10-20"), clock("2024-10-01")],
        )

    assert fire(RULE, state(tmp_path / "raw")) == []
    alert = one(
        RULE, bound(state(tmp_path / "bound"), ("warranty.until", "Gadget", "covered_until"))
    )
    assert "covered_until 2024-10-20 is in 19 days" in alert.message and alert.severity == "info"
    assert "File any warranty claim" in alert.message


def test_a_passport_in_other_words_is_left_to_passport_validity(tmp_path: Path) -> None:
    def state(path: Path) -> UserView:
        return build(
            path, [add("2024-01-10", "TravelDoc", "p", expires="2024-10-05"), clock("2024-10-01")]
        )

    assert keys(one(RULE, state(tmp_path / "raw"))) == {"TravelDoc/p"}  # any other expiry
    assert fire(RULE, bound(state(tmp_path / "bound"), ("passport", "TravelDoc"))) == []


def test_a_tax_return_in_other_words(tmp_path: Path) -> None:
    def state(path: Path) -> UserView:
        return build(
            path,
            [add("2024-01-10", "IncomeTax", "t", fiscal_year=2024), clock("2025-04-01")],
        )

    assert fire(lib.tax_filing_deadline, state(tmp_path / "raw")) == []
    view = bound(
        state(tmp_path / "bound"),
        ("tax_return", "IncomeTax"),
        ("tax_return.year", "IncomeTax", "fiscal_year"),
    )
    alert = one(lib.tax_filing_deadline, view)
    assert "the 2024 US federal return is due 2025-04-15, in 14 days" in alert.message
    assert lib.tax_filing_deadline.watches(view) >= {"IncomeTax", "TaxReturn"}


def _overdue_entry(path: Path, held: tuple[str, str]) -> UserView:
    """An overdue race entry whose field ``paidUp`` is true, and a binding of it held (not
    used) under concept ``held[0]`` by ``held[1]``: the matcher's proposal awaiting review."""
    view = build(
        path,
        [
            add("2026-03-01", "RaceEntry", "roma", deadline="2026-03-05", paidUp=True),
            clock("2026-03-10"),
        ],
    )
    concept, author = held
    view._state.bind(
        [Binding(concept, "RaceEntry", "paidUp", author=author, score=0.75, status="held")]  # type: ignore[arg-type]
    )
    return view


def test_an_alert_names_a_held_field_that_would_settle_it_and_how_to_bind_it(
    tmp_path: Path,
) -> None:
    alert = one(RULE, _overdue_entry(tmp_path, ("record.settled", "inferred")))
    assert "overdue" in alert.message
    assert alert.message.endswith(
        "(RaceEntry.paidUp may be record.settled (done): "
        "`uac vocab bind RaceEntry.paidUp record.settled` to let it settle alerts)"
    )


def test_a_held_field_under_a_concept_the_rule_does_not_read_is_not_named(
    tmp_path: Path,
) -> None:
    alert = one(RULE, _overdue_entry(tmp_path, ("trip.start", "inferred")))
    assert "paidUp" not in alert.message
