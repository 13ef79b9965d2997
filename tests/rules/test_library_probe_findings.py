"""Findings of an outside probe of the rule library and the constraint language on fresh
histories: each test is the smallest general reproduction of a failure, marked xfail(strict)
until the product handles it. (a): a library or compiler bug; (b): a gap the constraint
language cannot express."""

from __future__ import annotations

from typing import Any

import pytest

from uac_kernel.workbench import Workbench


def add(type_: str, key: str, **fields: Any) -> dict[str, Any]:
    return {"op": "add", "type": type_, "key": key, "fields": fields}


def alerts(
    sessions: list[tuple[str, list[dict[str, Any]]]], constraint: dict[str, Any] | None = None
) -> list[Any]:
    """The alerts standing after the last session; ``constraint`` is put in force first."""
    wb = Workbench(":memory:", user="u")
    try:
        for i, (ts, facts) in enumerate(sessions):
            events: list[dict[str, Any]] = [
                {"kind": "utterance", "ts": ts, "speaker": "user", "text": "-", "source": f"s{i}"}
            ]
            events += [
                {"kind": "fact", "ts": ts, "source": f"s{i}#{j}", **f} for j, f in enumerate(facts)
            ]
            wb.ingest(events)
            if i == 0 and constraint is not None:
                wb.constrain(constraint, key="c")
        return wb.alerts()
    finally:
        wb.close()


def rules(found: list[Any]) -> set[str]:
    return {a.rule for a in found}


# -- (a) library and compiler ----------------------------------------------------------------

TRIP = {"country": "Spain", "start": "2026-09-01", "end": "2026-09-10", "destination": "Madrid"}


@pytest.mark.parametrize(
    ("rule", "other"),
    [
        ("passport_validity", add("Passport", "p", expires="2026-10-01", country="US")),
        ("visa_validity", add("Visa", "v", country="Spain", expires="2026-09-05")),
        (
            "overlapping_commitments",
            add(
                "Meeting", "m", start="2026-09-03T10:00", end="2026-09-03T11:00", location="Boston"
            ),
        ),
        ("document_expires_before_trip", add("TravelInsurance", "i", expires="2026-09-05")),
    ],
)
def test_a_trip_with_status_cancelled_needs_nothing(rule: str, other: dict[str, Any]) -> None:
    found = alerts([("2026-05-01T09:00", [other, add("Trip", "t", status="cancelled", **TRIP)])])
    assert rule not in rules(found), [a.message for a in found]


def test_a_cancelled_trip_does_not_use_a_single_entry_visa() -> None:
    found = alerts(
        [
            (
                "2026-05-01T09:00",
                [
                    add(
                        "Visa",
                        "v",
                        country="Vietnam",
                        starts="2026-06-01",
                        expires="2026-06-30",
                        entries="single",
                    ),
                    add(
                        "Trip",
                        "a",
                        country="Vietnam",
                        start="2026-06-05",
                        end="2026-06-08",
                        cancelled=True,
                    ),
                    add("Trip", "b", country="Vietnam", start="2026-06-10", end="2026-06-20"),
                ],
            )
        ]
    )
    assert "visa_validity" not in rules(found), [a.message for a in found]


def test_overlap_reads_a_tz_zone_name() -> None:
    found = alerts(
        [
            (
                "2026-03-25T09:00",
                [
                    add(
                        "Meeting",
                        "a",
                        start="2026-04-03T09:00",
                        end="2026-04-03T10:00",
                        tz="Asia/Tokyo",
                    ),
                    # 20:30-21:30 New York (EDT) is 09:30-10:30 in Tokyo the next day
                    add(
                        "Meeting",
                        "b",
                        start="2026-04-02T20:30",
                        end="2026-04-02T21:30",
                        tz="America/New_York",
                    ),
                ],
            )
        ]
    )
    assert "overlapping_commitments" in rules(found)


def test_food_allergy_rule_knows_the_shipped_allergen_table() -> None:
    found = alerts(
        [
            (
                "2026-02-12T09:00",
                [
                    add("Allergy", "n", substance="tree nuts", severity="anaphylaxis"),
                    add("Meal", "m", name="lunch", items=["baklava"], date="2026-02-14"),
                ],
            )
        ]
    )
    assert "food_allergy_exposure" in rules(found)


def test_open_ended_stay_under_way_past_a_stated_limit() -> None:
    found = alerts(
        [
            (
                "2026-01-05T09:00",
                [
                    add("StayLimit", "l", country="Thailand", max_days=60),
                    add("Trip", "t", country="Thailand", start="2026-01-10"),
                ],
            ),
            ("2026-03-20T09:00", []),  # 70 days in, no end recorded
        ]
    )
    assert "residence_day_limits" in rules(found)


def test_window_days_open_stay_counts_through_today_in_a_fresh_log() -> None:
    c = {
        "kind": "window_limit",
        "title": "At most 30 days in 180",
        "subject": {"type": "Stay"},
        "measure": "days",
        "window_days": 180,
        "limit": 30,
    }
    found = alerts(
        [("2026-01-01T09:00", [add("Stay", "s", start="2026-01-02")]), ("2026-03-01T09:00", [])], c
    )
    assert "constraint_c" in rules(found)


def test_before_alerts_a_first_record_known_too_late_at_once() -> None:
    c = {
        "kind": "before",
        "title": "Shot 10 days before the trip",
        "first": {"type": "Appointment"},
        "then": {"type": "Trip"},
        "gap_days": 10,
    }
    found = alerts(
        [
            (
                "2026-06-01T09:00",
                [
                    add("Trip", "t", start="2026-08-01", end="2026-08-10"),
                    add("Appointment", "a", start="2026-07-28T10:00"),
                ],
            )
        ],
        c,
    )
    assert "constraint_c" in rules(found)


# -- (b) the constraint language -------------------------------------------------------------


def test_moment_end_of_a_trip_given_as_nights() -> None:
    c = {
        "kind": "valid_on",
        "title": "Passport valid 6 months past the trip",
        "document": {"type": "Passport"},
        "each": {"type": "Trip"},
        "at": {"fields": ["end"], "start": ["start"], "months": 6},
    }
    found = alerts(
        [
            (
                "2026-06-01T09:00",
                [
                    add("Passport", "p", expires="2027-02-05"),
                    add("Trip", "t", start="2026-10-20", nights=21),
                ],
            )
        ],
        c,
    )
    assert "constraint_c" in rules(found)


def test_select_spans_two_record_types() -> None:
    c = {
        "kind": "window_limit",
        "title": "Dining under 400 a month",
        "subject": {"type": ["Expense", "Transaction"], "where": {"category": "dining"}},
        "measure": "sum",
        "period": "month",
        "limit": 400,
    }
    found = alerts(
        [
            (
                "2026-03-20T09:00",
                [
                    add("Expense", "a", amount=300, category="dining", date="2026-03-05"),
                    add("Transaction", "b", amount=150, category="dining", date="2026-03-20"),
                ],
            )
        ],
        c,
    )
    assert "constraint_c" in rules(found)


def test_where_matches_a_country_by_any_of_its_names() -> None:
    c = {
        "kind": "window_limit",
        "title": "Under 183 days in the UK per tax year",
        "subject": {"type": "Trip", "where": {"country": "UK"}},
        "measure": "days",
        "year_from": "04-06",
        "limit": 182,
    }
    found = alerts(
        [
            (
                "2026-03-20T09:00",
                [
                    add(
                        "Trip", "a", country="United Kingdom", start="2026-04-10", end="2026-07-31"
                    ),
                    add("Trip", "b", country="UK", start="2026-09-01", end="2026-11-15"),
                ],
            )
        ],
        c,
    )
    assert "constraint_c" in rules(found)


def test_valid_on_each_traveller_needs_their_own_document() -> None:
    c = {
        "kind": "valid_on",
        "title": "Every passport valid 6 months past the trip",
        "document": {"type": "Passport"},
        "each": {"type": "Trip"},
        "at": {"fields": ["end"], "months": 6},
        "match": {"holder": "travellers"},
    }
    found = alerts(
        [
            (
                "2026-09-01T09:00",
                [
                    add(
                        "Trip",
                        "t",
                        start="2026-12-20",
                        end="2027-01-04",
                        travellers=["Sam", "Lena"],
                    ),
                    add("Passport", "s", holder="Sam", expires="2031-05-01"),
                    add("Passport", "l", holder="Lena", expires="2027-03-01"),
                ],
            )
        ],
        c,
    )
    assert "constraint_c" in rules(found)


def test_no_overlap_with_a_weekly_commitment() -> None:
    c = {
        "kind": "no_overlap",
        "title": "Nothing on top of class",
        "a": {"type": "Class"},
        "b": {"type": "Event"},
    }
    found = alerts(
        [
            (
                "2026-09-08T09:00",
                [
                    add("Class", "c", weekday="Tuesday", start_time="18:00", end_time="19:30"),
                    add(
                        "Event", "e", start="2026-09-15T18:30", end="2026-09-15T19:00"
                    ),  # a Tuesday
                ],
            )
        ],
        c,
    )
    assert "constraint_c" in rules(found)
