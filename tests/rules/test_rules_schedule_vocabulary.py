"""overlapping_commitments under a user's own words: roles (trip, travel_leg, stay, meal,
state_period) and the booking.*/recurring.* concepts bound to their types and fields, on states
folded from a real DuckDB event log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.alerts import keys
from helpers.rules import add, bound, build, fire, one

from uac_kernel.rules import library as lib
from uac_kernel.state.query import UserView

RULE = lib.overlapping_commitments


# -- booking.timezone ---------------------------------------------------------------------------


def calls(tmp_path: Path, field: str) -> UserView:
    """10:00 in New York and 10:00 in London, the zone in ``field``: five hours apart."""
    return build(
        tmp_path,
        [
            add("2026-03-01", "Booking", "ny", title="call", start="2026-03-10T10:00:00",
                end="2026-03-10T11:00:00", **{field: "America/New_York"}),
            add("2026-03-01", "Booking", "ldn", title="call", start="2026-03-10T10:00:00",
                end="2026-03-10T11:00:00", **{field: "Europe/London"}),
        ],
    )  # fmt: skip


def test_a_zone_field_once_bound_places_times_so_two_zones_do_not_clash(tmp_path: Path) -> None:
    assert len(fire(RULE, calls(tmp_path / "raw", "zone"))) == 1  # the false alert
    view = bound(calls(tmp_path / "bound", "zone"), ("booking.timezone", "Booking", "zone"))
    assert fire(RULE, view) == []
    assert fire(RULE, calls(tmp_path / "ours", "tz")) == []  # our name, no binding needed


def test_a_bound_zone_still_finds_a_real_clash_and_says_the_zone(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2026-03-01", "Booking", "ny", start="2026-03-10T10:00:00",
                end="2026-03-10T11:00:00", zone="America/New_York"),
            add("2026-03-01", "Booking", "ldn", start="2026-03-10T14:30:00",
                end="2026-03-10T15:30:00", zone="Europe/London"),
        ],
    )  # fmt: skip
    alert = one(RULE, bound(view, ("booking.timezone", "Booking", "zone")))
    assert "(America/New_York)" in alert.message and "14:30–15:00 UTC" in alert.message
    assert "[read Booking.zone as booking.timezone (person" in alert.message


# -- trips, legs, stays, meals, periods ----------------------------------------------------------


def journey(tmp_path: Path) -> UserView:
    return build(
        tmp_path,
        [
            add("2026-04-01", "Journey", "rome", destination="Rome", leaves_on="2026-05-01",
                back_on="2026-05-08"),
            add("2026-04-01", "Hop", "out", start="2026-05-01T09:00:00",
                end="2026-05-01T12:00:00"),
            add("2026-04-01", "Visit", "museum", start="2026-05-03T10:00:00", place="Rome"),
            add("2026-04-01", "Visit", "dentist", start="2026-05-04T10:00:00", place="Leeds"),
        ],
    )  # fmt: skip


TRIP = (
    ("trip", "Journey"),
    ("trip.start", "Journey", "leaves_on"),
    ("trip.end", "Journey", "back_on"),
)


def test_a_trip_in_other_words_clashes_with_a_plan_elsewhere_only(tmp_path: Path) -> None:
    assert fire(RULE, journey(tmp_path / "raw")) == []  # no start: not read at all
    view = bound(journey(tmp_path / "bound"), *TRIP, ("travel_leg", "Hop"))
    alert = one(RULE, view)
    assert keys(alert) == {"Journey/rome", "Visit/dentist"}  # the museum is in Rome: part of it
    assert "2026-05-01 – 2026-05-08" in alert.message


def test_a_leg_is_part_of_its_trip_only_once_it_plays_travel_leg(tmp_path: Path) -> None:
    view = bound(journey(tmp_path), *TRIP)
    pairs = {frozenset(keys(a)) for a in fire(RULE, view)}
    assert pairs == {
        frozenset({"Journey/rome", "Hop/out"}),
        frozenset({"Journey/rome", "Visit/dentist"}),
    }


def test_a_stay_in_other_words_overlaps_what_you_do_there(tmp_path: Path) -> None:
    def state(path: Path) -> UserView:
        return build(
            path,
            [
                add("2026-04-01", "Inn", "b", start="2026-05-01", end="2026-05-04"),
                add("2026-04-01", "Visit", "talk", start="2026-05-02T10:00:00"),
            ],
        )

    assert len(fire(RULE, state(tmp_path / "raw"))) == 1
    assert fire(RULE, bound(state(tmp_path / "bound"), ("stay", "Inn"))) == []


def test_a_meal_in_other_words_holds_the_table(tmp_path: Path) -> None:
    def state(path: Path) -> UserView:
        return build(
            path,
            [
                add("2026-04-01", "Supper", "a", venue="Chez A", start="2026-05-01T19:00:00"),
                add("2026-04-01", "Supper", "b", venue="Chez B", start="2026-05-01T19:30:00"),
            ],
        )

    assert fire(RULE, state(tmp_path / "raw")) == []  # two instants half an hour apart
    alert = one(RULE, bound(state(tmp_path / "bound"), ("meal", "Supper")))
    assert "19:00 (about 90 min)" in alert.message


def test_a_state_period_in_other_words_is_no_commitment(tmp_path: Path) -> None:
    def state(path: Path) -> UserView:
        return build(
            path,
            [
                add("2026-04-01", "Script", "s", name="amoxicillin", start="2026-05-01",
                    end="2026-05-10"),
                add("2026-04-01", "Visit", "talk", start="2026-05-02T10:00:00"),
            ],
        )  # fmt: skip

    assert len(fire(RULE, state(tmp_path / "raw"))) == 1
    assert fire(RULE, bound(state(tmp_path / "bound"), ("state_period", "Script"))) == []


def test_booking_start_and_end_in_other_words(tmp_path: Path) -> None:
    def state(path: Path) -> UserView:
        return build(
            path,
            [
                add("2026-04-01", "Slot", "a", begins_at="2026-05-01T10:00:00",
                    finishes_at="2026-05-01T11:00:00", must_attend=True),
                add("2026-04-01", "Slot", "b", begins_at="2026-05-01T10:30:00",
                    finishes_at="2026-05-01T12:00:00", scrapped=False),
            ],
        )  # fmt: skip

    assert fire(RULE, state(tmp_path / "raw")) == []
    view = bound(
        state(tmp_path / "bound"),
        ("booking.start", "Slot", "begins_at"),
        ("booking.end", "Slot", "finishes_at"),
        ("booking.important", "Slot", "must_attend"),
        ("record.called_off", "Slot", "scrapped"),
    )
    alert = one(RULE, view)
    assert alert.severity == "critical" and "(overlap: 2026-05-01 10:30–11:00)" in alert.message
    assert alert.message.count("as scrapped.") == 1  # the user's own flag, not ours


# -- weekly commitments (recurring.*) ------------------------------------------------------------


def weekly(tmp_path: Path, **more: Any) -> UserView:
    return build(
        tmp_path,
        [
            add("2026-04-01", "Class", "yoga", name="yoga", on_days="Tuesdays",
                from_time="18:00", to_time="19:30", **more),
            add("2026-04-01", "Visit", "dentist", start="2026-05-05T18:30:00"),  # a Tuesday
        ],
    )  # fmt: skip


WEEKLY = (
    ("recurring.weekdays", "Class", "on_days"),
    ("recurring.start_time", "Class", "from_time"),
    ("recurring.end_time", "Class", "to_time"),
    ("recurring.skip", "Class", "except_on"),
)


def test_a_weekly_slot_in_other_words_and_its_skip_field_in_the_advice(tmp_path: Path) -> None:
    assert fire(RULE, weekly(tmp_path / "raw")) == []
    alert = one(RULE, bound(weekly(tmp_path / "bound"), *WEEKLY))
    assert keys(alert) == {"Class/yoga", "Visit/dentist"}
    assert "every Tuesday 18:00–19:30" in alert.message
    assert "add 2026-05-05 to the weekly one's except_on" in alert.message


def test_a_skipped_date_in_the_users_field_is_no_clash(tmp_path: Path) -> None:
    view = bound(weekly(tmp_path, except_on=["2026-05-05"]), *WEEKLY)
    assert fire(RULE, view) == []


def test_a_weekly_rule_in_other_words_repeats_a_dated_start(tmp_path: Path) -> None:
    def state(path: Path) -> UserView:
        return build(
            path,
            [
                add("2026-04-01", "Standup", "s", start="2026-04-07T09:00:00",
                    end="2026-04-07T09:30:00", cadence="weekly"),
                add("2026-04-01", "Visit", "v", start="2026-04-21T09:15:00"),
            ],
        )  # fmt: skip

    assert fire(RULE, state(tmp_path / "raw")) == []
    view = bound(state(tmp_path / "bound"), ("recurring.rule", "Standup", "cadence"))
    assert keys(one(RULE, view)) == {"Standup/s", "Visit/v"}
