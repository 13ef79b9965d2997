"""The obligation, valid_on and window_limit compilers, run as rules of an in-memory Workbench
over fact events: alerts raised, escalated, kept and cleared as the log and its clock move."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.alerts import alerts, keys
from helpers.events import add, clock, retract, update

from uac_kernel import Workbench
from uac_kernel.constraints.compile import compile_constraint
from uac_kernel.core.errors import ConstraintError
from uac_kernel.ingest.report import IngestReport
from uac_kernel.language.spec import parse_constraint
from uac_kernel.rules.engine import Alert


def bench(**constraints: dict[str, Any]) -> Workbench:
    """A workbench whose only rules are ``constraints`` (key -> constraint object)."""
    return Workbench(
        rules=[compile_constraint(k, parse_constraint(c)) for k, c in constraints.items()]
    )


def one(wb: Workbench) -> Alert:
    found = alerts(wb)
    assert len(found) == 1, [a.message for a in found]
    return found[0]


# -- obligation ----------------------------------------------------------------------------------

RENEW = {
    "kind": "obligation",
    "title": "Renew the car registration a month before it expires",
    "subject": {"type": "Car"},
    "due": {"fields": ["registration_expires"], "months": -1},
}


def test_obligation_escalates_then_stays_overdue_under_one_id() -> None:
    wb = bench(renew=RENEW)
    wb.ingest([add("2025-04-01", "Car", "golf", name="Golf", registration_expires="2025-06-30")])
    assert alerts(wb) == []  # due 2025-05-30: 59 days out, lead 14
    seen: list[tuple[str, str]] = []
    reports: list[IngestReport] = []
    for day in ("2025-05-16", "2025-05-20", "2025-05-27", "2025-05-30", "2025-06-02", "2026-01-01"):
        reports.append(wb.ingest([clock(day)]))
        a = one(wb)
        seen.append((a.severity, a.id))
    assert [s for s, _ in seen] == ["info", "info", "warning", "critical", "critical", "critical"]
    assert len({i for _, i in seen}) == 1  # one alert climbing the ladder, never a new one
    assert len(reports[0].raised) == 1
    assert [len(r.raised) + len(r.cleared) for r in reports[1:]] == [0] * 5
    assert [a.severity for a in reports[2].updated] == ["warning"]
    a = one(wb)
    assert "due 2025-05-30 (registration_expires 2025-06-30, -1 month)" in a.message
    assert "overdue by 216 days (today is 2026-01-01)" in a.message
    assert "Car 'golf' (Golf)" in a.message and keys(a) == {"Car/golf"}
    # only the record saying it is done clears it
    report = wb.ingest([update("2026-01-02", "Car", "golf", renewed=True)])
    assert alerts(wb) == [] and len(report.cleared) == 1


def test_obligation_of_severity_info_never_goes_above_warning() -> None:
    wb = bench(renew={**RENEW, "severity": "info"})
    wb.ingest([add("2025-05-29", "Car", "golf", registration_expires="2025-06-30")])
    assert one(wb).severity == "warning"  # 1 day left
    wb.ingest([clock("2025-09-01")])
    a = one(wb)
    assert a.severity == "warning" and "overdue by 94 days" in a.message


@pytest.mark.parametrize(
    ("fields", "done"),
    [
        ({"paid": True}, True),
        ({"status": " Closed "}, True),
        ({"status": "filed"}, True),
        ({"done": False}, False),
        ({"status": "pending"}, False),
        ({"renewed": "yes"}, False),  # a string is not a flag
    ],
)
def test_obligation_done_by_a_flag_or_a_status(fields: dict[str, Any], done: bool) -> None:
    wb = bench(renew=RENEW)
    wb.ingest([add("2025-06-10", "Car", "golf", registration_expires="2025-06-30", **fields)])
    assert (alerts(wb) == []) is done


def test_obligation_with_its_own_done_fields() -> None:
    wb = bench(renew={**RENEW, "done": ["sticker_on"]})
    wb.ingest([add("2025-06-10", "Car", "a", registration_expires="2025-06-30", paid=True)])
    wb.ingest([add("2025-06-10", "Car", "b", registration_expires="2025-06-30", sticker_on=True)])
    wb.ingest(
        [add("2025-06-10", "Car", "c", registration_expires="2025-06-30", status="sticker_on")]
    )
    assert [keys(a) for a in alerts(wb)] == [{"Car/a"}]
    assert "set sticker_on true" in one(wb).message


def test_obligation_done_by_a_keyed_record_and_undone_by_its_retraction() -> None:
    c = {**RENEW, "done_by": {"type": "Payment", "key": "rego-2025"}}
    wb = bench(renew=c)
    wb.ingest([add("2025-06-10", "Car", "golf", registration_expires="2025-06-30")])
    assert "log the Payment record that shows it was done" in one(wb).message
    wb.ingest([add("2025-06-11", "Payment", "rego-2025", amount=80.0, date="2024-01-01")])
    assert alerts(wb) == []  # a keyed record settles it, whatever its date
    wb.ingest([retract("2025-06-12", "Payment", "rego-2025")])
    assert "overdue by 13 days" in one(wb).message


def test_obligation_done_by_counts_only_records_of_this_cycle() -> None:
    c = {**RENEW, "done_by": {"type": "Payment", "mentions": ["registration"]}}
    wb = bench(renew=c)
    wb.ingest(
        [
            add("2024-05-20", "Car", "golf", registration_expires="2024-06-30"),
            add("2024-05-25", "Payment", "p24", what="registration", date="2024-05-25"),
        ]
    )
    assert alerts(wb) == []
    # a year on, the registration has a new expiry: last year's payment is not this year's
    wb.ingest([update("2025-05-20", "Car", "golf", registration_expires="2025-06-30")])
    assert one(wb).severity == "info"
    wb.ingest([add("2025-05-21", "Payment", "p25", what="registration fee", date="2025-05-21")])
    assert alerts(wb) == []
    # an unrelated change of the car afterwards does not make the payment older than the cycle
    wb.ingest([update("2025-05-22", "Car", "golf", colour="red")])
    assert alerts(wb) == []
    # a payment for something else does not count
    wb.ingest([retract("2025-05-23", "Payment", "p25")])
    wb.ingest([add("2025-05-24", "Payment", "p26", what="parking", date="2025-05-24")])
    assert len(alerts(wb)) == 1


def test_obligation_done_by_an_undated_record_counts() -> None:
    c = {**RENEW, "done_by": {"type": "Receipt"}}
    wb = bench(renew=c)
    wb.ingest([add("2025-06-10", "Car", "golf", registration_expires="2025-06-30")])
    wb.ingest([add("2025-06-11", "Receipt", "r", what="registration")])
    assert alerts(wb) == []


def test_obligation_without_subject_has_a_fixed_date() -> None:
    c = {
        "kind": "obligation",
        "title": "File the state return",
        "severity": "critical",
        "lead_days": 10,
        "due": {"date": "2025-04-15"},
        "done_by": {"type": "Filing"},
    }
    wb = bench(file=c)
    wb.ingest([clock("2025-04-01")])
    assert alerts(wb) == []
    wb.ingest([clock("2025-04-05")])
    a = one(wb)
    assert a.severity == "info" and a.evidence == ()
    assert "File the state return: it is due 2025-04-15, in 10 days (today is 2025-04-05)" in (
        a.message
    )
    # a filing more than a year before the due date is an earlier year's
    wb.ingest([add("2025-04-06", "Filing", "old", date="2024-04-10")])
    assert len(alerts(wb)) == 1
    wb.ingest([clock("2025-04-20")])
    assert "overdue by 5 days" in one(wb).message and one(wb).id == a.id
    wb.ingest([add("2025-04-21", "Filing", "new", date="2025-04-21")])
    assert alerts(wb) == []


def test_obligation_without_subject_or_date_says_it_checks_nothing() -> None:
    c = {"kind": "obligation", "title": "Pay it", "due": {"fields": ["due"]}}
    wb = bench(pay=c)
    wb.ingest([clock("2025-04-01")])
    a = one(wb)
    assert a.severity == "warning" and "nothing can be checked" in a.message


def test_obligation_dates_shifts_and_missing_fields() -> None:
    c = {
        "kind": "obligation",
        "title": "Give notice before the lease ends",
        "subject": {"type": "Lease"},
        "due": {"fields": ["ends", "end"], "months": -2, "days": -1},
        "lead_days": 0,
    }
    wb = bench(notice=c)
    wb.ingest(
        [
            # month ends: Apr 30 - 2 months = Feb 28, - 1 day = Feb 27 (2025 is not a leap year)
            add("2025-01-01", "Lease", "flat", ends="2025-04-30T12:00:00"),
            # a leap day: 2024-04-30 - 2 months = 2024-02-29, -1 day = 2024-02-28 (past: overdue)
            add("2025-01-01", "Lease", "old", end="2024-04-30"),
            add("2025-01-01", "Lease", "undated", name="garage"),
        ]
    )
    assert [keys(a) for a in alerts(wb)] == [{"Lease/old"}]
    assert "due 2024-02-28" in one(wb).message
    wb.ingest([clock("2025-02-27")])
    due = [a for a in alerts(wb) if keys(a) == {"Lease/flat"}]
    assert len(due) == 1 and due[0].severity == "critical" and "today (today is" in due[0].message
    assert "(ends 2025-04-30, -2 months -1 day)" in due[0].message


def test_several_obligations_and_subjects_at_once() -> None:
    bill = {
        "kind": "obligation",
        "title": "Pay bills on time",
        "subject": {"type": "Bill", "where": {"autopay": False}},
        "due": {"fields": ["due"]},
    }
    wb = bench(renew=RENEW, bills=bill)
    wb.ingest(
        [
            add("2025-06-01", "Bill", "power", due="2025-06-03", autopay=False),
            add("2025-06-01", "Bill", "water", due="2025-06-07", autopay=False),
            add("2025-06-01", "Bill", "phone", due="2025-06-03", autopay=True),
            add("2025-06-01", "Car", "golf", registration_expires="2025-07-01"),
        ]
    )
    found = {next(iter(keys(a))): a for a in alerts(wb)}
    assert set(found) == {"Bill/power", "Bill/water", "Car/golf"}
    assert found["Bill/power"].severity == "critical" and found["Bill/water"].severity == "warning"
    assert len({a.rule for a in found.values()}) == 2
    wb.ingest([retract("2025-06-02", "Bill", "power")])
    assert {next(iter(keys(a))) for a in alerts(wb)} == {"Bill/water", "Car/golf"}


# -- valid_on ------------------------------------------------------------------------------------

COVER = {
    "kind": "valid_on",
    "title": "Travel insurance for every day abroad",
    "document": {"type": "Insurance"},
    "each": {"type": "Trip"},
    "at": {"fields": ["start"]},
    "until": {"fields": ["end"]},
}
PASSPORT = {
    "kind": "valid_on",
    "title": "Passport valid six months past the return",
    "severity": "critical",
    "document": {"type": "Passport"},
    "each": {"type": "Trip"},
    "at": {"fields": ["end"], "months": 6},
}


def test_valid_on_reports_the_gap_between_consecutive_policies() -> None:
    wb = bench(cover=COVER)
    wb.ingest(
        [
            add("2025-01-10", "Insurance", "a", starts="2025-01-01", expires="2025-03-31"),
            add("2025-01-10", "Insurance", "b", starts="2025-04-15", expires="2025-12-31"),
            add(
                "2025-01-10",
                "Trip",
                "peru",
                destination="Peru",
                start="2025-03-20",
                end="2025-04-20",
            ),
        ]
    )
    a = one(wb)
    assert a.severity == "warning" and keys(a) == {"Trip/peru", "Insurance/a", "Insurance/b"}
    assert (
        "Insurance 'a' ends 2025-03-31, Insurance 'b' starts 2025-04-15: "
        "2025-04-01 – 2025-04-14 (14 days) uncovered"
    ) in a.message
    wb.ingest([add("2025-01-11", "Insurance", "bridge", starts="2025-04-01", expires="2025-04-14")])
    assert alerts(wb) == []


@pytest.mark.parametrize("void", [{"cancelled": True}, {"status": "Cancelled"}, {"lapsed": True}])
def test_valid_on_a_cancelled_policy_makes_the_alert_not_silences_it(void: dict[str, Any]) -> None:
    wb = bench(cover=COVER)
    wb.ingest(
        [
            add("2025-01-10", "Insurance", "a", starts="2025-01-01", expires="2025-12-31"),
            add("2025-01-10", "Trip", "peru", start="2025-03-20", end="2025-04-20"),
        ]
    )
    assert alerts(wb) == []
    report = wb.ingest([update("2025-01-11", "Insurance", "a", **void)])
    assert len(report.raised) == 1
    a = one(wb)
    assert "no Insurance covers 2025-03-20 – 2025-04-20 (32 days)" in a.message
    assert "Insurance 'a' (from 2025-01-01 to 2025-12-31) is cancelled or lapsed" in a.message
    assert keys(a) == {"Trip/peru", "Insurance/a"}


def test_valid_on_a_later_policy_does_not_mask_an_earlier_gap() -> None:
    wb = bench(cover=COVER)
    wb.ingest(
        [
            add("2025-01-10", "Insurance", "old", starts="2024-01-01", expires="2025-03-25"),
            add("2025-01-10", "Insurance", "new", starts="2025-04-01", expires="2026-03-31"),
            add("2025-01-10", "Trip", "t", start="2025-03-20", end="2025-04-20"),
        ]
    )
    assert "2025-03-26 – 2025-03-31 (6 days) uncovered" in one(wb).message


def test_valid_on_with_no_document_at_all() -> None:
    wb = bench(cover=COVER)
    wb.ingest([add("2025-01-10", "Trip", "t", start="2025-03-20", end="2025-03-20")])
    a = one(wb)
    assert a.message.startswith(
        "Travel insurance for every day abroad: Trip 't' needs a valid Insurance on 2025-03-20; "
        "no Insurance covers 2025-03-20. Get a valid Insurance"
    )
    assert keys(a) == {"Trip/t"}


def test_valid_on_an_unknown_end_is_not_the_start() -> None:
    wb = bench(cover=COVER)
    wb.ingest(
        [
            add("2025-01-10", "Insurance", "a", starts="2025-01-01", expires="2025-06-30"),
            add("2025-01-10", "Trip", "open", start="2025-06-20"),
        ]
    )
    a = one(wb)
    assert a.severity == "info"  # rests on the unknown end: one step below warning
    assert "its end is unknown (end not set)" in a.message
    assert "covered only until 2025-06-30: if it lasts past 2025-06-30" in a.message
    assert "from 2025-07-01 on uncovered" in a.message
    # starting uncovered is certain, whatever the end
    wb.ingest([update("2025-01-11", "Trip", "open", start="2025-07-02")])
    a = one(wb)
    assert a.severity == "warning" and "from 2025-07-02 on" in a.message
    # a policy with no expiry covers for good
    wb.ingest([add("2025-01-12", "Insurance", "annual", starts="2025-07-01")])
    assert alerts(wb) == []


def test_valid_on_a_moment_months_later_at_a_month_end() -> None:
    wb = bench(passport=PASSPORT)
    wb.ingest(
        [
            add("2025-01-10", "Passport", "p", expires="2026-02-28"),
            # 2025-08-31 + 6 months = 2026-02-28: valid on its last day
            add("2025-01-10", "Trip", "t", end="2025-08-31T18:30:00"),
        ]
    )
    assert alerts(wb) == []
    wb.ingest([update("2025-01-11", "Passport", "p", expires="2026-02-27")])
    a = one(wb)
    assert a.severity == "critical"
    assert "needs a valid Passport on 2026-02-28 (end 2025-08-31, +6 months)" in a.message
    assert "Passport 'p' ends 2026-02-27: 2026-02-28 uncovered" in a.message


def test_valid_on_a_trip_end_from_its_start_and_stated_length() -> None:
    c = {**PASSPORT, "at": {"fields": ["end"], "start": ["start"], "months": 6}}
    wb = bench(passport=c)
    wb.ingest(
        [
            add("2025-01-10", "Passport", "p", expires="2026-02-10"),
            # 10 nights from 2025-08-01: home 2025-08-11, + 6 months = 2026-02-11
            add("2025-01-10", "Trip", "t", start="2025-08-01", nights=10),
        ]
    )
    a = one(wb)
    assert "needs a valid Passport on 2026-02-11 (start 2025-08-01 + 10 nights, +6 months)" in (
        a.message
    )
    # 10 days count both ends: the last day is 2025-08-10, + 6 months = 2026-02-10, covered
    wb.ingest([update("2025-01-11", "Trip", "t", nights=None, days=10)])
    assert alerts(wb) == []
    # a set end wins over the stated length
    wb.ingest([update("2025-01-12", "Trip", "t", end="2025-08-20")])
    assert "needs a valid Passport on 2026-02-20 (end 2025-08-20, +6 months)" in one(wb).message


def test_moment_needs_fields_start_or_a_date() -> None:
    assert parse_constraint({**PASSPORT, "at": {"start": ["start"], "nights": ["stay"]}})
    with pytest.raises(ConstraintError, match="at: Value error, a moment needs fields"):
        parse_constraint({**PASSPORT, "at": {"length": ["days"], "months": 6}})


def test_valid_on_match_needs_a_document_for_each_traveller() -> None:
    c = {**PASSPORT, "match": {"holder": "travellers"}}
    wb = bench(passport=c)
    wb.ingest(
        [
            add("2025-01-10", "Trip", "t", end="2025-03-01", travellers=["Sam", "Lena", "sam"]),
            add("2025-01-10", "Passport", "s", holder="sam", expires="2031-05-01"),
            add("2025-01-10", "Passport", "l", holder="Lena", expires="2025-06-01"),
        ]
    )
    a = one(wb)  # Sam's passport does not cover Lena
    assert a.message.startswith(
        "Passport valid six months past the return: Trip 't' for holder Lena needs a valid "
        "Passport on 2025-09-01"
    )
    assert keys(a) == {"Trip/t", "Passport/l"}
    wb.ingest([update("2025-01-11", "Passport", "l", expires="2030-01-01")])
    assert alerts(wb) == []
    # a trip naming no travellers asks for any valid passport
    wb.ingest([add("2025-01-12", "Trip", "solo", end="2025-04-01")])
    assert alerts(wb) == []


def test_valid_on_match_compares_countries_by_country() -> None:
    c = {
        **PASSPORT,
        "document": {"type": "Visa"},
        "at": {"fields": ["start"]},
        "match": {"country": "country"},
    }
    wb = bench(visa=c)
    wb.ingest(
        [
            add("2025-01-10", "Trip", "t", start="2025-03-01", country="UK"),
            add("2025-01-10", "Visa", "v", country="Ghana", expires="2026-01-01"),
        ]
    )
    assert "Trip 't' for country UK needs a valid Visa on 2025-03-01" in one(wb).message
    wb.ingest([add("2025-01-11", "Visa", "gb", country="United Kingdom", expires="2026-01-01")])
    assert alerts(wb) == []


def test_valid_on_clears_once_the_moment_is_past() -> None:
    c = {**PASSPORT, "at": {"fields": ["start"]}, "title": "Visa on arrival day"}
    wb = bench(visa=c)
    wb.ingest(
        [
            add("2025-01-10", "Passport", "p", expires="2025-03-01"),
            add("2025-01-10", "Trip", "t", start="2025-03-05"),
        ]
    )
    assert len(alerts(wb)) == 1
    wb.ingest([clock("2025-03-05")])  # the moment is today: still checked
    assert len(alerts(wb)) == 1
    report = wb.ingest([clock("2025-03-06")])
    assert alerts(wb) == [] and len(report.cleared) == 1


def test_valid_on_a_trip_under_way_checks_the_days_still_to_come() -> None:
    wb = bench(cover=COVER)
    wb.ingest(
        [
            add("2025-01-10", "Insurance", "a", starts="2025-03-01", expires="2025-03-10"),
            add("2025-01-10", "Insurance", "b", starts="2025-03-15", expires="2025-03-31"),
            add("2025-01-10", "Trip", "t", start="2025-03-05", end="2025-03-20"),
        ]
    )
    wb.ingest([clock("2025-03-12")])
    a = one(wb)
    assert "2025-03-12 – 2025-03-14 (3 days) uncovered" in a.message
    assert "the days before today, 2025-03-12, are past" in a.message
    wb.ingest([clock("2025-03-15")])  # the gap is behind: nothing left to mend
    assert alerts(wb) == []


def test_valid_on_edge_records() -> None:
    wb = bench(cover=COVER)
    wb.ingest(
        [
            add("2025-01-10", "Insurance", "forever", expires="2025-12-31"),  # since ever
            add("2025-01-10", "Trip", "undated", destination="someday"),  # nothing to check
            add("2025-01-10", "Trip", "backwards", start="2026-02-10", end="2026-02-01"),
        ]
    )
    a = one(wb)
    assert keys(a) >= {"Trip/backwards"}
    assert "its end, end 2026-02-01, lies before that: only 2026-02-10 is checked" in a.message


# -- window_limit --------------------------------------------------------------------------------

STAYS = {
    "kind": "window_limit",
    "title": "At most 90 days in any 180 in the area",
    "severity": "critical",
    "subject": {"type": "Stay", "where": {"area": "Schengen"}},
    "measure": "days",
    "window_days": 180,
    "limit": 90,
    "warn_at": 0.8,
}


def test_window_rolling_days_with_a_planned_stay() -> None:
    wb = bench(stays=STAYS)
    wb.ingest(
        [
            add("2025-03-01", "Stay", "s1", area="Schengen", start="2025-01-10", end="2025-02-28"),
            add("2025-03-01", "Stay", "elsewhere", area="UK", start="2025-03-01", end="2025-06-30"),
        ]
    )
    assert alerts(wb) == []  # 50 days, in the past: nothing ahead can break the limit
    wb.ingest(
        [add("2025-03-02", "Stay", "s2", area="Schengen", start="2025-04-01", end="2025-05-15")]
    )
    a = one(wb)
    assert a.severity == "critical" and keys(a) == {"Stay/s1", "Stay/s2"}
    assert (
        "91 days in the 180-day window 2024-11-13 – 2025-05-11, over the limit of 90" in a.message
    )
    assert "it peaks at 95 in 2024-11-17 – 2025-05-15" in a.message
    assert "Stay 's1' 2025-01-10 – 2025-02-28; Stay 's2' 2025-04-01 – 2025-05-15" in a.message
    # the clock moving on within the run keeps the alert as it is
    report = wb.ingest([clock("2025-04-10")])
    assert not report.raised and not report.cleared and one(wb).id == a.id
    # shorten the stay to 30 days: 80 at most, over the warning level (72) from April 22
    wb.ingest([update("2025-04-11", "Stay", "s2", end="2025-04-30")])
    a = one(wb)
    assert a.severity == "warning"
    assert (
        "72 days in the 180-day window 2024-10-25 – 2025-04-22, 80% of the limit of 90, near it "
        "(alerts from 72, 80% of the limit); it peaks at 80 in 2024-11-02 – 2025-04-30"
    ) in a.message
    # a step below the constraint's critical: the words say what over the limit would be
    assert "over the limit this alert would be critical" in a.message
    assert "warning from" not in a.message


def test_window_an_ongoing_breach_keeps_its_id_as_the_clock_moves_through_it() -> None:
    wb = bench(stays=STAYS)
    wb.ingest(
        [
            add("2025-03-01", "Stay", "s1", area="Schengen", start="2025-01-10", end="2025-02-28"),
            add("2025-03-01", "Stay", "s2", area="Schengen", start="2025-04-01", end="2025-05-15"),
        ]
    )
    a = one(wb)
    for day in ("2025-05-11", "2025-05-13", "2025-05-15"):
        report = wb.ingest([clock(day)])
        assert not report.raised and not report.cleared
        assert one(wb).id == a.id
    assert (
        "95 days in the 180-day window 2024-11-17 – 2025-05-15, over the limit" in one(wb).message
    )
    report = wb.ingest([clock("2025-05-16")])  # the breach is behind: it can no longer change
    assert alerts(wb) == [] and len(report.cleared) == 1


def test_window_days_overlapping_stays_count_once_and_past_breaches_are_not_alerted() -> None:
    c = {**STAYS, "subject": {"type": "Stay"}, "limit": 10, "warn_at": None}
    wb = bench(stays=c)
    wb.ingest(
        [
            add("2025-01-01", "Stay", "a", start="2025-02-01", end="2025-02-08"),
            add("2025-01-01", "Stay", "b", start="2025-02-05", end="2025-02-10"),
        ]
    )
    assert "10 days" not in "".join(a.message for a in alerts(wb)) and alerts(wb) == []
    wb.ingest([add("2025-01-02", "Stay", "c", start="2025-02-10", end="2025-02-11")])
    assert "11 days in the 180-day window" in one(wb).message
    wb.ingest([clock("2025-12-01")])  # every window with those days lies in the past
    assert alerts(wb) == []


def test_window_an_open_stay_counts_to_today_at_a_lower_severity() -> None:
    c = {**STAYS, "subject": {"type": "Stay"}, "warn_at": None}
    wb = bench(stays=c)
    wb.ingest(
        [
            add("2025-01-01", "Stay", "closed", start="2024-12-01", end="2024-12-05"),
            add("2025-01-01", "Stay", "open", start="2025-01-01"),
            clock("2025-04-15"),
        ]
    )
    a = one(wb)
    # 5 + 105 days (Jan 1 to Apr 15), counted through today because the end is unknown
    assert a.severity == "warning" and "110 days" in a.message
    assert "only with the days assumed for stays with no end (6 without them)" in a.message
    assert "Stay 'open' 2025-01-01 – 2025-04-15 (no end: counted through today" in a.message
    # with its end set the count is certain: full severity
    wb.ingest([update("2025-04-16", "Stay", "open", end="2025-04-30")])
    assert one(wb).severity == "critical"


def test_window_an_open_stay_counts_to_today_in_a_type_with_no_end_field() -> None:
    c = {**STAYS, "subject": {"type": "Stay"}, "warn_at": None, "limit": 30}
    wb = bench(stays=c)
    # no Stay has ever had an end: the one placed by its start still runs on to today
    wb.ingest([add("2025-01-01", "Stay", "open", start="2025-01-02"), clock("2025-03-01")])
    a = one(wb)
    assert a.severity == "warning" and "59 days" in a.message
    assert "Stay 'open' 2025-01-02 – 2025-03-01 (no end: counted through today" in a.message
    # a date-time start is a moment (an appointment), not a stay: one day, long past
    wb = bench(visits={**c, "subject": {"type": "Appointment"}, "limit": 1})
    wb.ingest(
        [
            add("2025-01-01", "Appointment", "a", start="2025-01-02T10:00:00"),
            add("2025-01-01", "Appointment", "b", start="2025-01-05T10:00:00"),
            clock("2025-03-01"),
        ]
    )
    assert alerts(wb) == []


def test_window_where_takes_any_of_a_list_list_fields_and_country_names() -> None:
    c = {**STAYS, "subject": {"type": "Stay", "where": {"country": ["UK", "Ireland"]}}}
    c = {**c, "limit": 10, "warn_at": None}
    wb = bench(stays=c)
    wb.ingest(
        [
            add(
                "2025-01-01",
                "Stay",
                "gb",
                country="Great Britain",
                start="2025-02-01",
                end="2025-02-05",
            ),
            add(
                "2025-01-01", "Stay", "ie", country="ireland", start="2025-02-06", end="2025-02-08"
            ),
            add("2025-01-01", "Stay", "fr", country="France", start="2025-02-09", end="2025-02-20"),
        ]
    )
    assert alerts(wb) == []  # 8 days in the UK or Ireland; France is not selected
    wb.ingest(
        [
            add(
                "2025-01-02",
                "Stay",
                "uk",
                country="United Kingdom",
                start="2025-03-01",
                end="2025-03-03",
            )
        ]
    )
    a = one(wb)
    assert "11 days" in a.message and keys(a) == {"Stay/gb", "Stay/ie", "Stay/uk"}
    # a list field matches by any member; other fields compare as text, not as countries
    tagged = {**c, "subject": {"type": "Stay", "where": {"tags": "work", "city": "GB"}}}
    wb = bench(stays=tagged)
    wb.ingest(
        [
            add(
                "2025-01-01",
                "Stay",
                "a",
                tags=["Work", "family"],
                city="gb",
                start="2025-02-01",
                end="2025-02-11",
            ),
            add(
                "2025-01-01",
                "Stay",
                "b",
                tags=["work"],
                city="London",
                start="2025-03-01",
                end="2025-03-11",
            ),
        ]
    )
    assert keys(one(wb)) == {"Stay/a"}


def test_window_and_valid_on_read_every_type_of_a_select() -> None:
    spend = {
        "kind": "window_limit",
        "title": "Dining under 400 a month",
        "subject": {"type": ["Expense", "Transaction"], "where": {"category": "dining"}},
        "measure": "count",
        "period": "month",
        "limit": 1,
    }
    assert parse_constraint(spend).subject.also == ["Transaction"]  # type: ignore[union-attr]
    wb = bench(spend=spend)
    wb.ingest(
        [
            add("2025-03-01", "Expense", "a", category="dining", date="2025-03-05"),
            add("2025-03-01", "Transaction", "a", category="Dining", date="2025-03-20"),
            add("2025-03-01", "Transaction", "b", category="rent", date="2025-03-01"),
        ]
    )
    a = one(wb)
    assert "2 Expense or Transaction records in the month 2025-03" in a.message
    assert keys(a) == {"Expense/a", "Transaction/a"}
    cover = {**PASSPORT, "document": {"type": "Passport", "also": ["IdCard"]}}
    wb = bench(passport=cover)
    wb.ingest(
        [
            add("2025-01-10", "Trip", "t", end="2025-03-01"),
            add("2025-01-10", "Passport", "p", expires="2025-05-01"),
        ]
    )
    assert "needs a valid Passport or IdCard on 2025-09-01" in one(wb).message
    wb.ingest([add("2025-01-11", "IdCard", "id", expires="2030-01-01")])
    assert alerts(wb) == []


def test_window_a_dated_event_type_without_end_counts_one_day() -> None:
    c = {**STAYS, "subject": {"type": "Visit"}, "measure": "days", "limit": 2, "warn_at": None}
    wb = bench(visits=c)
    wb.ingest([add("2025-01-01", "Visit", f"v{n}", date=f"2025-01-0{n}T10:00:00") for n in (2, 3)])
    assert alerts(wb) == []
    wb.ingest([add("2025-01-01", "Visit", "v4", date="2025-01-04T10:00:00")])
    assert "3 days in the 180-day window 2024-07-09 – 2025-01-04" in one(wb).message


def test_window_count_with_a_limit_of_zero() -> None:
    c = {
        "kind": "window_limit",
        "title": "No more overdraft fees this month",
        "subject": {"type": "Fee"},
        "measure": "count",
        "period": "month",
        "limit": 0,
        "warn_at": 0.5,
    }
    wb = bench(fees=c)
    wb.ingest([add("2025-03-01", "Fee", "old", date="2025-02-27")])
    assert alerts(wb) == []  # February is past
    wb.ingest([add("2025-03-02", "Fee", "f", date="2025-03-02")])
    a = one(wb)
    assert a.severity == "warning" and "1 Fee record in the month 2025-03, over the limit of 0" in (
        a.message
    )
    wb.ingest([retract("2025-03-03", "Fee", "f")])
    assert alerts(wb) == []


def test_window_monthly_sum_warns_then_breaks_under_a_period_id() -> None:
    c = {
        "kind": "window_limit",
        "title": "Eating out under 300 a month",
        "severity": "warning",
        "subject": {"type": "Expense", "where": {"category": "restaurant"}},
        "measure": "sum",
        "period": "month",
        "limit": 300,
        "warn_at": 0.8,
    }
    wb = bench(eat=c)
    wb.ingest(
        [
            add(
                "2025-03-01",
                "Expense",
                "e1",
                category="Restaurant",
                amount=150.0,
                date="2025-03-01",
            ),
            add(
                "2025-03-01",
                "Expense",
                "e2",
                category="restaurant",
                amount=100.5,
                date="2025-03-31",
            ),
            add(
                "2025-03-01", "Expense", "e3", category="restaurant", date="2025-03-05"
            ),  # no amount
            add("2025-03-01", "Expense", "e4", category="groceries", amount=900, date="2025-03-05"),
            add(
                "2025-03-01", "Expense", "e5", category="restaurant", amount=280, date="2025-04-01"
            ),
        ]
    )
    found = alerts(wb)
    assert [a.severity for a in found] == ["info", "info"]
    march = next(a for a in found if "2025-03" in a.message)
    assert "a total amount of 250.50 in the month 2025-03, 84% of the limit of 300" in march.message
    # info, one step below the constraint's warning: where alerts start, not "warning from"
    assert "84% of the limit of 300, near it (alerts from 240, 80% of the limit)" in march.message
    assert "over the limit this alert would be a warning" in march.message
    assert keys(march) == {"Expense/e1", "Expense/e2"}
    wb.ingest(
        [add("2025-03-10", "Expense", "e6", category="restaurant", amount=60, date="2025-03-10")]
    )
    march = next(a for a in alerts(wb) if "2025-03" in a.message)
    assert march.severity == "warning" and "310.50" in march.message


def test_window_tax_year_from_a_month_day() -> None:
    c = {
        "kind": "window_limit",
        "title": "Annual allowance",
        "subject": {"type": "Contribution"},
        "measure": "sum",
        "year_from": "04-06",
        "limit": 20000,
    }
    wb = bench(isa=c)
    wb.ingest(
        [
            add("2025-03-01", "Contribution", "c1", amount=15000, date="2025-04-05"),
            add("2025-03-01", "Contribution", "c2", amount=15000, date="2025-04-06"),
            add("2025-03-01", "Contribution", "c3", amount=6000, date="2026-04-05"),
            add("2025-03-01", "Contribution", "c4", amount=6000, date="2026-04-06"),
        ]
    )
    a = one(wb)
    assert "a total amount of 21,000 in the year 2025-04-06 – 2026-04-05" in a.message
    assert keys(a) == {"Contribution/c2", "Contribution/c3"}


def test_window_leap_day_year_start_and_bad_year_from() -> None:
    c = {
        "kind": "window_limit",
        "title": "Yearly cap",
        "subject": {"type": "Gift"},
        "measure": "count",
        "year_from": "02-29",
        "limit": 1,
    }
    with pytest.raises(ConstraintError, match="'02-30' is not a day of the year"):
        parse_constraint({**c, "year_from": "02-30"})
    wb = bench(cap=c)
    wb.ingest(
        [
            add("2025-01-01", "Gift", "a", date="2025-02-28"),  # 2025's year starts on Feb 28
            add("2025-01-01", "Gift", "b", date="2026-02-27"),
        ]
    )
    found = {a.rule: a for a in alerts(wb)}
    assert "the year 2025-02-28 – 2026-02-27" in found["constraint_cap"].message


def test_window_needs_a_window() -> None:
    c = {
        "kind": "window_limit",
        "title": "Not too many",
        "subject": {"type": "Fee"},
        "measure": "count",
        "limit": 3,
    }
    with pytest.raises(
        ConstraintError, match=r"window_limit: .*a limit needs a window to count in"
    ):
        parse_constraint(c)


def test_window_rolling_and_calendar_together() -> None:
    c = {
        "kind": "window_limit",
        "title": "Withdrawals",
        "subject": {"type": "Withdrawal"},
        "measure": "count",
        "window_days": 7,
        "period": "month",
        "limit": 2,
    }
    wb = bench(w=c)
    wb.ingest(
        [add("2025-03-01", "Withdrawal", f"w{d}", date=f"2025-03-{d:02d}") for d in (1, 9, 20)]
    )
    assert [a.message.split(",")[0] for a in alerts(wb)] == [
        "Withdrawals: 3 Withdrawal records in the month 2025-03"
    ]
    wb.ingest([add("2025-03-02", "Withdrawal", "w3", date="2025-03-03")])
    wb.ingest([add("2025-03-02", "Withdrawal", "w5", date="2025-03-05")])
    messages = sorted(a.message for a in alerts(wb))
    assert len(messages) == 3  # two separate 7-day breaches (a window of 2 between them)
    assert "3 Withdrawal records in the 7-day window 2025-02-27 – 2025-03-05" in messages[0]
    assert "3 Withdrawal records in the 7-day window 2025-03-03 – 2025-03-09" in messages[1]
    assert "5 Withdrawal records in the month 2025-03" in messages[2]


# -- docs/constraints.md -------------------------------------------------------------------------

DOC_STATES = {
    "obligation": [
        add("2025-05-01", "Car", "golf", name="Golf", registration_expires="2025-06-30"),
        clock("2025-06-05"),
    ],
    "valid_on": [
        add("2025-01-10", "Insurance", "a", starts="2025-01-01", expires="2025-03-31"),
        add("2025-01-10", "Insurance", "b", starts="2025-04-15", expires="2025-12-31"),
        add("2025-01-10", "Trip", "peru", destination="Peru", start="2025-03-20", end="2025-04-20"),
    ],
    "window_limit": [
        add("2025-03-01", "Stay", "s1", area="Schengen", start="2025-01-10", end="2025-02-28"),
        add("2025-03-01", "Stay", "s2", area="Schengen", start="2025-04-01", end="2025-05-15"),
    ],
}


@pytest.mark.parametrize("kind", sorted(DOC_STATES))
def test_docs_examples_give_the_alerts_they_show(kind: str) -> None:
    yaml = pytest.importorskip("yaml")
    text = (Path(__file__).parents[2] / "docs" / "constraints.md").read_text()
    section = text.split(f"\n## {kind}\n", 1)[1].split("\n## ", 1)[0]
    example = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    shown = section.split("\nAlert (", 1)[1]
    severity, message = shown.split("): `", 1)
    wb = bench(doc=yaml.safe_load(example))
    wb.ingest(DOC_STATES[kind])
    a = one(wb)
    assert (a.severity, a.message) == (severity, " ".join(message.split("`", 1)[0].split()))


# -- together ------------------------------------------------------------------------------------


def test_kinds_together_and_called_off_records() -> None:
    wb = bench(renew=RENEW, cover=COVER, stays={**STAYS, "subject": {"type": "Trip"}})
    wb.ingest(
        [
            add("2025-03-01", "Car", "golf", registration_expires="2025-03-20"),
            add("2025-03-01", "Insurance", "a", starts="2025-01-01", expires="2026-12-31"),
            add("2025-03-01", "Trip", "long", start="2025-04-01", end="2025-07-31"),
            add("2025-03-01", "Trip", "short", start="2026-03-01", end="2026-03-03"),
        ]
    )
    rules = {a.rule: a for a in alerts(wb)}
    assert set(rules) == {"constraint_renew", "constraint_stays"}
    assert rules["constraint_renew"].severity == "critical"  # due 2025-02-20: overdue
    assert "it peaks at 122 in 2025-02-02 – 2025-07-31" in rules["constraint_stays"].message
    # a cancelled trip needs no cover and spends no days; the bridging policy's retraction and
    # the trip's cancellation are both seen
    wb.ingest([update("2025-03-02", "Trip", "long", status="Cancelled")])
    wb.ingest([retract("2025-03-03", "Insurance", "a")])
    found = alerts(wb)
    assert {a.rule for a in found} == {"constraint_renew", "constraint_cover"}
    cover = next(a for a in found if a.rule == "constraint_cover")
    assert keys(cover) == {"Trip/short"} and "no Insurance covers 2026-03-01 – 2026-03-03" in (
        cover.message
    )
