"""Compiled ``projection``, ``no_overlap`` and ``before`` constraints, run by a real Workbench
over an in-memory DuckDB log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.alerts import alerts, keys
from helpers.events import add, clock, update

from uac_kernel.constraints import compile_constraint, parse_constraint
from uac_kernel.core.errors import ConstraintError
from uac_kernel.workbench import Workbench


def bench(constraint: dict[str, Any], *events: dict[str, Any]) -> Workbench:
    wb = Workbench(rules=[compile_constraint("c1", parse_constraint(constraint))])
    if events:
        wb.ingest(list(events))
    return wb


# -- projection: runs out -------------------------------------------------------------------

PILLS_FOR_TRIPS = {
    "kind": "projection",
    "title": "Enough pills for every trip",
    "subject": {"type": "Medication"},
    "quantity": "pills_left",
    "rate_fields": ["dose_count", "times_per_day"],
    "until": {"fields": ["end"]},
    "until_record": {"type": "Trip"},
}


def test_runs_out_before_a_trip_ends_names_dates_units_and_shortfall() -> None:
    wb = bench(
        PILLS_FOR_TRIPS,
        add(
            "2026-03-01T09:00:00",
            "Medication",
            "metformin",
            name="metformin",
            pills_left=40,
            dose_count=2,
            times_per_day=1,
        ),
        add(
            "2026-03-02T09:00:00",
            "Trip",
            "lisbon",
            destination="Lisbon",
            start="2026-03-15",
            end="2026-03-28",
        ),
        add(
            "2026-03-02T09:00:00",
            "Trip",
            "past",
            destination="Oslo",
            start="2026-01-05",
            end="2026-01-09",
        ),
    )
    (a,) = alerts(wb)
    assert a.severity == "warning" and keys(a) == {"Medication/metformin", "Trip/lisbon"}
    # 40 pills at 2 a day from Mar 1: covered through Mar 20, none left on Mar 21
    assert "runs out on 2026-03-21" in a.message
    assert "38 left today" in a.message and "Trip 'lisbon' (Lisbon) end on 2026-03-28" in a.message
    assert "7 days short, 14 pills_left more needed" in a.message
    assert "refill before 2026-03-21" in a.message


def test_a_refill_logged_as_an_update_restarts_the_count_and_clears() -> None:
    wb = bench(
        PILLS_FOR_TRIPS,
        add(
            "2026-03-01T09:00:00",
            "Medication",
            "m",
            name="sertraline",
            pills_left=10,
            dose_count=1,
            times_per_day=1,
        ),
        add(
            "2026-03-01T09:00:00",
            "Trip",
            "t",
            destination="Kyoto",
            start="2026-03-05",
            end="2026-03-20",
        ),
    )
    assert "runs out on 2026-03-11" in alerts(wb)[0].message
    wb.ingest([update("2026-03-04T09:00:00", "Medication", "m", pills_left=30)])
    assert alerts(wb) == []  # 30 from Mar 4 last until Apr 3
    wb.ingest([clock("2026-04-03T08:00:00")])
    (a,) = alerts(wb)
    assert a.severity == "critical" and "ran out on 2026-04-03" in a.message
    assert "30 pills_left on 2026-03-04" in a.message


def test_an_explicit_as_of_a_weekly_rate_and_the_subjects_own_refill_date() -> None:
    c = {
        "kind": "projection",
        "title": "Insulin lasts until the next refill",
        "subject": {"type": "Supply", "where": {"item": "insulin pens"}},
        "quantity": "count",
        "rate": 3.5,
        "per": "week",
        "until": {"fields": ["next_refill"]},
    }
    wb = bench(
        c,
        add(
            "2026-05-10T09:00:00",
            "Supply",
            "pens",
            item="Insulin pens",
            count=5,
            as_of="2026-05-01",
            next_refill="2026-05-20",
        ),
        add(
            "2026-05-10T09:00:00",
            "Supply",
            "strips",
            item="test strips",
            count=1,
            as_of="2026-05-01",
            next_refill="2026-05-20",
        ),
    )
    (a,) = alerts(wb)
    # 5 at half a day from May 1: 10 days, out on May 11, 9 days before the refill
    assert keys(a) == {"Supply/pens"}
    assert "runs out on 2026-05-11" in a.message and "0.5 a day" in a.message
    assert "(Insulin pens) next_refill on 2026-05-20: 9 days short, 4.5 count more" in a.message
    assert "0.5 left today" in a.message


def test_zero_rate_never_runs_out_and_missing_fields_are_skipped() -> None:
    wb = bench(
        PILLS_FOR_TRIPS,
        add(
            "2026-03-01T09:00:00",
            "Medication",
            "prn",
            name="as needed",
            pills_left=2,
            dose_count=0,
            times_per_day=1,
        ),
        add("2026-03-01T09:00:00", "Medication", "nodose", name="vitamin", pills_left=2),
        add(
            "2026-03-01T09:00:00", "Medication", "nocount", name="x", dose_count=1, times_per_day=1
        ),
        add(
            "2026-03-01T09:00:00",
            "Medication",
            "huge",
            name="y",
            pills_left=10**15,
            dose_count=1,
            times_per_day=1,
        ),
        add("2026-03-01T09:00:00", "Trip", "t", destination="Rome", start="2026-04-01"),
    )
    assert alerts(wb) == []
    wb.ingest([clock("2027-01-01T09:00:00")])
    assert alerts(wb) == []


def test_a_quantity_already_at_the_threshold_is_critical_at_once() -> None:
    c = {**PILLS_FOR_TRIPS, "threshold": 7}
    wb = bench(
        c,
        add(
            "2026-03-01T09:00:00",
            "Medication",
            "m",
            name="warfarin",
            pills_left=5,
            dose_count=1,
            times_per_day=1,
        ),
    )
    (a,) = alerts(wb)
    assert a.severity == "critical" and "ran out on 2026-03-01 (down to 7;" in a.message


def test_later_trips_are_counted_in_one_alert() -> None:
    wb = bench(
        PILLS_FOR_TRIPS,
        add(
            "2026-03-01T09:00:00",
            "Medication",
            "m",
            name="levothyroxine",
            pills_left=10,
            dose_count=1,
            times_per_day=1,
        ),
        add(
            "2026-03-01T09:00:00",
            "Trip",
            "a",
            destination="Paris",
            start="2026-03-08",
            end="2026-03-14",
        ),
        add(
            "2026-03-01T09:00:00",
            "Trip",
            "b",
            destination="Rome",
            start="2026-04-01",
            end="2026-04-09",
        ),
    )
    (a,) = alerts(wb)
    assert keys(a) == {"Medication/m", "Trip/a"} and "(and 1 later date)" in a.message


def test_projection_without_a_rate_is_refused_when_parsed() -> None:
    c = {k: v for k, v in PILLS_FOR_TRIPS.items() if k != "rate_fields"}
    with pytest.raises(ConstraintError, match=r"projection: .*needs rate or rate_fields"):
        parse_constraint(c)


# -- projection: balance ----------------------------------------------------------------------

BALANCE = {
    "kind": "projection",
    "title": "Checking stays above 500 through June",
    "subject": {"type": "Account", "key": "checking"},
    "quantity": "balance",
    "flows": {"type": "Payment"},
    "threshold": 500,
    "until": {"date": "2026-06-30"},
}


def test_balance_drops_below_on_the_first_day_naming_that_days_flows() -> None:
    wb = bench(
        BALANCE,
        add(
            "2026-06-01T09:00:00",
            "Account",
            "checking",
            balance=2000.0,
            currency="USD",
            as_of="2026-06-01",
        ),
        add(
            "2026-06-01T09:00:00", "Payment", "rent", name="rent", amount=1400.0, date="2026-06-05"
        ),
        add(
            "2026-06-01T09:00:00",
            "Payment",
            "salary",
            name="salary",
            amount=1000.0,
            inflow=True,
            date="2026-06-15",
        ),
        add(
            "2026-06-01T09:00:00",
            "Payment",
            "refund",
            name="refund",
            amount=-50.0,
            date="2026-06-03",
        ),
        add("2026-06-01T09:00:00", "Payment", "car", name="car", amount=200.0, date="2026-06-10"),
        add(
            "2026-06-01T09:00:00",
            "Payment",
            "july",
            name="july rent",
            amount=5000.0,
            date="2026-07-05",
        ),
        add("2026-06-01T09:00:00", "Payment", "old", name="old", amount=5000.0, date="2026-05-05"),
    )
    (a,) = alerts(wb)
    # 2000 + 50 (Jun 3) - 1400 (Jun 5) = 650; - 200 (Jun 10) = 450 < 500
    assert a.severity == "warning"
    assert keys(a) == {"Account/checking", "Payment/car"}
    assert "falls to USD 450.00 on 2026-06-10, below USD 500.00" in a.message
    assert "after Payment 'car' (car) -USD 200.00" in a.message
    assert "2 earlier flows net -USD 1,350.00" in a.message
    wb.ingest([clock("2026-06-11T09:00:00")])
    assert alerts(wb)[0].severity == "critical"


def test_balance_that_stays_above_and_one_already_below() -> None:
    wb = bench(
        BALANCE,
        add("2026-06-01T09:00:00", "Account", "checking", balance=900, as_of="2026-06-01"),
        add("2026-06-01T09:00:00", "Payment", "p", amount=300, date="2026-06-20"),
        add("2026-06-01T09:00:00", "Payment", "undated", amount=300),
    )
    assert alerts(wb) == []
    wb.ingest(
        [update("2026-06-02T09:00:00", "Account", "checking", balance=100, as_of="2026-06-02")]
    )
    (a,) = alerts(wb)
    assert a.severity == "critical" and "already at the start" in a.message


# -- no_overlap -------------------------------------------------------------------------------

NO_DOUBLE_BOOKING = {
    "kind": "no_overlap",
    "title": "No two appointments without an hour between",
    "a": {"type": "Appointment"},
    "buffer_minutes": 60,
    "severity": "critical",
}


def test_buffer_between_instants_and_a_cancelled_one_skipped() -> None:
    wb = bench(
        NO_DOUBLE_BOOKING,
        clock("2026-04-01T08:00:00"),
        add(
            "2026-04-01T08:00:00",
            "Appointment",
            "dentist",
            name="dentist",
            start="2026-04-02T10:00:00",
        ),
        add("2026-04-01T08:00:00", "Appointment", "bank", name="bank", start="2026-04-02T10:30:00"),
        add(
            "2026-04-01T08:00:00",
            "Appointment",
            "gym",
            name="gym",
            start="2026-04-02T12:00:00",
            end="2026-04-02T13:00:00",
        ),
    )
    (a,) = alerts(wb)
    assert a.severity == "critical" and keys(a) == {"Appointment/dentist", "Appointment/bank"}
    assert "only 30 minutes apart, 1 hour needed" in a.message
    first = a.id
    wb.ingest([add("2026-04-01T09:00:00", "Appointment", "far", start="2026-05-01T09:00:00")])
    assert [x.id for x in alerts(wb)] == [first]  # stable: evidence is the pair
    wb.ingest([update("2026-04-01T10:00:00", "Appointment", "bank", status="Cancelled")])
    assert alerts(wb) == []


def test_time_zones_place_naive_times_and_offsets_in_values_win() -> None:
    c = {"kind": "no_overlap", "title": "One call at a time", "a": {"type": "Call"}}
    wb = bench(
        c,
        clock("2026-04-01T08:00:00"),
        # 09:00 in Tokyo is 00:00 UTC
        add(
            "2026-04-01T08:00:00",
            "Call",
            "tokyo",
            start="2026-04-03T09:00:00",
            end="2026-04-03T10:00:00",
            tz="+09:00",
        ),
        # written with its own offset: 09:30+09:00 is 00:30 UTC, inside the Tokyo call
        add("2026-04-01T08:00:00", "Call", "offset", start="2026-04-03T09:30:00+09:00"),
        # 19:00 the day before in New York (UTC-5) is 00:00 UTC: overlaps Tokyo, and ends
        # as the 00:30 UTC call starts (touching is no collision)
        add(
            "2026-04-01T08:00:00",
            "Call",
            "nyc",
            start="2026-04-02T19:00:00",
            end="2026-04-02T19:30:00",
            tz="UTC-5",
        ),
        # 09:00 naive without a zone is 09:00 UTC: clear of both
        add(
            "2026-04-01T08:00:00",
            "Call",
            "local",
            start="2026-04-03T09:00:00",
            end="2026-04-03T09:45:00",
        ),
        add(
            "2026-04-01T08:00:00",
            "Call",
            "paris",
            start="2026-04-03T11:00:00",
            timezone="Europe/Paris",
        ),  # 09:00 UTC in summer time: inside "local"
    )
    pairs = sorted(sorted(keys(a)) for a in alerts(wb))
    assert pairs == [
        ["Call/local", "Call/paris"],
        ["Call/nyc", "Call/tokyo"],
        ["Call/offset", "Call/tokyo"],
    ]
    msg = next(a.message for a in alerts(wb) if keys(a) == {"Call/nyc", "Call/tokyo"})
    assert "from 2026-04-02 19:00 to 2026-04-02 19:30 (UTC-5)" in msg
    assert "overlap by 30 minutes" in msg


def test_a_hotel_stay_by_dates_against_dinners_by_time() -> None:
    c = {
        "kind": "no_overlap",
        "title": "No dinner bookings at home while away",
        "a": {"type": "Hotel"},
        "b": {"type": "Reservation", "where": {"city": "Boston"}},
        "end": ["check_out"],
        "start": ["check_in", "date"],
    }
    wb = bench(
        c,
        clock("2026-05-01T08:00:00"),
        add(
            "2026-05-01T08:00:00",
            "Hotel",
            "h",
            name="Harbor Inn",
            check_in="2026-05-10",
            check_out="2026-05-12",
        ),
        add(
            "2026-05-01T08:00:00",
            "Hotel",
            "h2",
            name="Annex",
            check_in="2026-05-11",
            check_out="2026-05-13",
        ),
        # the checkout day is covered whole: a date covers its day
        add(
            "2026-05-01T08:00:00",
            "Reservation",
            "d1",
            name="Oyster bar",
            city="Boston",
            date="2026-05-12",
            time="7:30 pm",
        ),
        add(
            "2026-05-01T08:00:00",
            "Reservation",
            "d2",
            name="Bistro",
            city="Boston",
            date="2026-05-14",
            time="19:00",
        ),
        add(
            "2026-05-01T08:00:00",
            "Reservation",
            "d3",
            name="Noodles",
            city="Denver",
            date="2026-05-11",
        ),
    )
    found = alerts(wb)
    # two hotels overlapping are not a and b; the Denver dinner is not selected
    assert sorted(sorted(keys(a)) for a in found) == [
        ["Hotel/h", "Reservation/d1"],
        ["Hotel/h2", "Reservation/d1"],
    ]
    msg = next(a.message for a in found if keys(a) == {"Hotel/h", "Reservation/d1"})
    assert "from 2026-05-10 to 2026-05-12" in msg and "at 2026-05-12 19:30" in msg
    assert "Reservation 'd1' (Oyster bar) falls within Hotel 'h' (Harbor Inn)" in msg


def test_past_pairs_are_not_compared_and_undated_records_are_skipped() -> None:
    c = {"kind": "no_overlap", "title": "No clashes", "a": {"type": "Event"}}
    wb = bench(
        c,
        add("2026-01-01T08:00:00", "Event", "x", date="2026-01-05"),
        add("2026-01-01T08:00:00", "Event", "y", start="2026-01-05T10:00:00"),
        add("2026-01-01T08:00:00", "Event", "undated", name="someday"),
    )
    assert len(alerts(wb)) == 1  # a date covers its day, so 10:00 is inside it
    wb.ingest([clock("2026-02-01T08:00:00")])
    assert alerts(wb) == []


# -- before -----------------------------------------------------------------------------------

VACCINE = {
    "kind": "before",
    "title": "Yellow fever shot 10 days before travel",
    "first": {"type": "Vaccination", "mentions": ["yellow fever"]},
    "then": {"type": "Trip", "where": {"country": "Ghana"}},
    "gap_days": 10,
    "lead_days": 14,
    "cites": "CDC Yellow Book: the certificate is valid 10 days after vaccination",
}


def test_before_opens_at_lead_escalates_after_the_deadline_and_clears() -> None:
    wb = bench(
        VACCINE,
        add(
            "2026-01-01T08:00:00",
            "Trip",
            "accra",
            destination="Accra",
            country="Ghana",
            start="2026-03-01",
        ),
        add(
            "2026-01-01T08:00:00",
            "Trip",
            "nyc",
            destination="NYC",
            country="USA",
            start="2026-03-01",
        ),
    )
    assert alerts(wb) == []  # deadline Feb 19; opens Feb 5
    wb.ingest([clock("2026-02-06T08:00:00")])
    (a,) = alerts(wb)
    assert a.severity == "warning" and keys(a) == {"Trip/accra"}
    assert "dated by 2026-02-19, 10 days before it; none is logged, 13 days left" in a.message
    wb.ingest(
        [add("2026-02-20T08:00:00", "Vaccination", "flu", name="flu shot", date="2026-02-10")]
    )
    (a,) = alerts(wb)
    assert a.severity == "critical" and "passed 1 day ago" in a.message
    wb.ingest(
        [add("2026-02-21T08:00:00", "Vaccination", "yf", name="Yellow fever", date="2026-02-25")]
    )
    (a,) = alerts(wb)
    assert "(the one logged, on 2026-02-25, is too late)" in a.message
    wb.ingest([update("2026-02-21T09:00:00", "Vaccination", "yf", date="2026-02-15")])
    assert alerts(wb) == []
    wb.ingest([update("2026-02-21T10:00:00", "Vaccination", "yf", status="cancelled")])
    assert len(alerts(wb)) == 1


def test_before_a_first_logged_too_late_alerts_before_the_lead_time() -> None:
    wb = bench(
        VACCINE,
        add("2026-01-01T08:00:00", "Trip", "accra", country="Ghana", start="2026-06-01"),
        add("2026-01-01T08:00:00", "Vaccination", "yf", name="Yellow fever", date="2026-05-28"),
    )
    (a,) = alerts(wb)  # deadline May 22, months away: the order is broken already
    assert a.severity == "warning" and keys(a) == {"Trip/accra"}
    assert "(the one logged, on 2026-05-28, is too late), 141 days left" in a.message
    wb.ingest([update("2026-01-02T08:00:00", "Vaccination", "yf", date="2026-05-20")])
    assert alerts(wb) == []


def test_before_counts_an_undated_first_and_ignores_past_then() -> None:
    wb = bench(
        VACCINE,
        add("2026-01-01T08:00:00", "Trip", "old", country="Ghana", start="2025-12-01"),
        add("2026-02-25T08:00:00", "Trip", "soon", country="Ghana", start="2026-03-01"),
    )
    (a,) = alerts(wb)
    assert keys(a) == {"Trip/soon"} and a.severity == "critical"
    wb.ingest([add("2026-02-25T09:00:00", "Vaccination", "yf", name="yellow fever, years ago")])
    assert alerts(wb) == []


def test_instants_collide_at_the_same_moment_and_touching_ends_do_not() -> None:
    c = {"kind": "no_overlap", "title": "One thing at a time", "a": {"type": "Slot"}}
    wb = bench(
        c,
        clock("2026-04-01T08:00:00"),
        add("2026-04-01T08:00:00", "Slot", "call", start="2026-04-02T09:00:00"),
        add("2026-04-01T08:00:00", "Slot", "pickup", start="2026-04-02T09:00:00"),
        add(
            "2026-04-01T08:00:00",
            "Slot",
            "class",
            start="2026-04-02T10:00:00",
            end="2026-04-02T11:00:00",
        ),
        add("2026-04-01T08:00:00", "Slot", "lunch", start="2026-04-02T11:00:00"),
    )
    (a,) = alerts(wb)
    assert keys(a) == {"Slot/call", "Slot/pickup"} and "start at the same time" in a.message


@pytest.mark.parametrize(
    "constraint",
    [
        PILLS_FOR_TRIPS,
        BALANCE,
        NO_DOUBLE_BOOKING,
        VACCINE,
        {**NO_DOUBLE_BOOKING, "b": {"type": "Trip", "key": "nope"}},
    ],
)
def test_missing_types_and_bare_records_raise_nothing(constraint: dict[str, Any]) -> None:
    wb = bench(constraint, clock("2026-04-01T08:00:00"))
    assert alerts(wb) == []
    for t in ("Medication", "Trip", "Account", "Payment", "Appointment", "Vaccination"):
        wb.ingest([add("2026-04-01T09:00:00", t, "bare", note="nothing else")])
    assert alerts(wb) == []


def test_the_yaml_examples_of_docs_constraints_parse_and_compile() -> None:
    yaml = pytest.importorskip("yaml")
    text = (Path(__file__).parents[2] / "docs" / "constraints.md").read_text()
    blocks = text.split("```yaml\n")[1:]
    kinds = set()
    for block in blocks:
        c = parse_constraint(yaml.safe_load(block.split("```")[0]))
        assert compile_constraint("doc", c).source.startswith(f"constraint ({c.kind})")
        kinds.add(c.kind)
    assert {"projection", "no_overlap", "before", "not_while"} <= kinds


# -- selects of several types ------------------------------------------------------------------


def test_balance_flows_and_before_firsts_span_several_types() -> None:
    c = {**BALANCE, "flows": {"type": "Payment", "also": ["Bill"]}}
    wb = bench(
        c,
        add("2026-06-01T09:00:00", "Account", "checking", balance=1000.0, as_of="2026-06-01"),
        add("2026-06-01T09:00:00", "Payment", "x", amount=300.0, date="2026-06-05"),
        add("2026-06-01T09:00:00", "Bill", "x", amount=300.0, date="2026-06-10"),
    )
    (a,) = alerts(wb)  # 1000 - 300 - 300 = 400 < 500: both types' flows count, same key or not
    assert (
        keys(a) == {"Account/checking", "Bill/x"} and "falls to 400.00 on 2026-06-10" in a.message
    )
    shot = {
        **VACCINE,
        "first": {"type": ["Vaccination", "Appointment"], "mentions": ["yellow fever"]},
    }
    wb = bench(
        shot,
        add("2026-01-01T08:00:00", "Trip", "accra", country="Ghana", start="2026-03-01"),
        clock("2026-02-10T08:00:00"),
    )
    (a,) = alerts(wb)
    assert (
        "needs a Vaccination or Appointment mentioning yellow fever dated by 2026-02-19"
        in a.message
    )
    wb.ingest(
        [add("2026-02-10T09:00:00", "Appointment", "yf", name="yellow fever", start="2026-02-12")]
    )
    assert alerts(wb) == []


def test_no_overlap_between_types_tells_records_of_one_key_apart() -> None:
    c = {
        "kind": "no_overlap",
        "title": "One thing at a time",
        "a": {"type": "Meeting", "also": ["Class"]},
    }
    wb = bench(
        c,
        clock("2026-04-01T08:00:00"),
        add(
            "2026-04-01T08:00:00",
            "Meeting",
            "x",
            start="2026-04-02T09:00:00",
            end="2026-04-02T10:00:00",
        ),
        add(
            "2026-04-01T08:00:00",
            "Class",
            "x",
            start="2026-04-02T09:30:00",
            end="2026-04-02T11:00:00",
        ),
    )
    (a,) = alerts(wb)
    assert keys(a) == {"Meeting/x", "Class/x"} and "overlap by 30 minutes" in a.message


def test_no_overlap_expands_weekly_commitments_with_buffer_skips_and_zones() -> None:
    c = {
        "kind": "no_overlap",
        "title": "Nothing on top of class",
        "a": {"type": "Class"},
        "b": {"type": "Event"},
        "buffer_minutes": 30,
    }
    wb = bench(
        c,
        clock("2026-09-08T09:00:00"),
        add(
            "2026-09-08T09:00:00",
            "Class",
            "c",
            weekday="Tuesday",
            start_time="18:00",
            end_time="19:30",
        ),
        add("2026-09-08T09:00:00", "Class", "yoga", weekday="Tuesday", start_time="18:00"),
        # Wednesday: no class; Tuesday 20:00 is within the 30-minute buffer of 19:30
        add(
            "2026-09-08T09:00:00",
            "Event",
            "wed",
            start="2026-09-16T18:30:00",
            end="2026-09-16T19:00:00",
        ),
        add(
            "2026-09-08T09:00:00",
            "Event",
            "late",
            start="2026-09-15T19:45:00",
            end="2026-09-15T21:00:00",
        ),
    )
    (a,) = alerts(wb)  # two weekly classes are not compared with each other
    assert keys(a) == {"Class/c", "Event/late"}
    assert a.message.startswith(
        "Nothing on top of class: Event 'late' from 2026-09-15 19:45 to 2026-09-15 21:00 falls on "
        "Class 'c', every Tuesday 18:00–19:30 (the one on 2026-09-15, with 30 minutes needed "
        "between them); move one of them, or add 2026-09-15 to the weekly one's skip_dates"
    )
    wb.ingest([update("2026-09-08T10:00:00", "Class", "c", skip_dates=["2026-09-15"])])
    assert alerts(wb) == []
    # a class in Tokyo at 09:00 on Wednesdays is Tuesday 20:00 in New York (EDT)
    wb.ingest(
        [
            add(
                "2026-09-08T11:00:00",
                "Class",
                "jp",
                weekday="Wednesday",
                start_time="09:00",
                end_time="10:00",
                tz="Asia/Tokyo",
            ),
            add(
                "2026-09-08T11:00:00",
                "Event",
                "ny",
                start="2026-09-22T20:15:00",
                tz="America/New_York",
            ),
        ]
    )
    (a,) = alerts(wb)
    assert keys(a) == {"Class/jp", "Event/ny"} and "(the one on 2026-09-23" in a.message
