"""The travel, residence and contradiction rules read concepts and roles, not our spelling: under
a schema in someone else's words (``Journey.leaves_on``, ``Shot.valid_thru``, a lower-case
``passport``, camelCase fields), once bound, each fires the alert it fires under our names, stays
quiet on a trap, and runs when a type that plays its role through a binding changes. States are
folded from a real DuckDB event log, as in test_rules_library.py."""

from __future__ import annotations

import hashlib
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from helpers.alerts import keys
from helpers.rules import add, build, clock, fire, one
from hypothesis import given, settings
from hypothesis import strategies as st

from uac_kernel.rules import library as lib
from uac_kernel.rules.engine import RuleRunner
from uac_kernel.rules.library.residence import _presence
from uac_kernel.state.query import UserView
from uac_kernel.vocab.binding import Binding


def bind(view: UserView, *pairs: tuple[str, str] | tuple[str, str, str]) -> UserView:
    """Bind by hand, as a person would: ``("trip", "Journey")`` makes a type play a role,
    ``("trip.start", "Journey", "leaves_on")`` puts a field under a concept."""
    view._state.bind([Binding(*p, author="person", reason="test") for p in pairs])  # type: ignore[misc]
    return view


JOURNEY = (
    ("trip", "Journey"),
    ("trip.start", "Journey", "leaves_on"),
    ("trip.end", "Journey", "returns_on"),
    ("trip.country", "Journey", "destination_country"),
)


def journey(ts: str, key: str, country: Any, start: str, end: str | None = None, **more: Any):
    dates = {"leaves_on": start} | ({"returns_on": end} if end else {})
    return add(ts, "Journey", key, destination_country=country, **dates, **more)


def trip(ts: str, key: str, country: Any, start: str, end: str | None = None, **more: Any):
    dates = {"start": start} | ({"end": end} if end else {})
    return add(ts, "Trip", key, country=country, **dates, **more)


def at(tmp_path: Path, name: str) -> Path:
    """A directory of its own for each of a test's stores."""
    (tmp_path / name).mkdir()
    return tmp_path / name


def alert_id(rule: str, about: str, evidence: set[str]) -> str:
    """An alert's id as the engine computes it (the ids users have standing today)."""
    ident = "|".join([about, *sorted(evidence)])
    return f"{rule}:{hashlib.sha256(ident.encode()).hexdigest()[:12]}"


# -- passport_validity ------------------------------------------------------------------------


def test_passport_alert_under_a_lower_case_passport_and_a_journey(tmp_path: Path) -> None:
    ours = build(
        at(tmp_path, "ours"),
        [
            add("2024-10-15", "Passport", "p", expires="2025-03-05", blank_pages=1),
            trip("2025-01-10", "tokyo", "Japan", "2025-02-20", "2025-03-01"),
        ],
    )
    theirs = bind(
        build(
            at(tmp_path, "theirs"),
            [
                add("2024-10-15", "passport", "p", validThru="2025-03-05", blankPages=1),
                journey("2025-01-10", "tokyo", "Japan", "2025-02-20", "2025-03-01"),
            ],
        ),
        *JOURNEY,
        ("passport", "passport"),
        ("document.expiry", "passport", "validThru"),
        ("passport.blank_pages", "passport", "blankPages"),
    )
    a, b = fire(lib.passport_validity, ours), fire(lib.passport_validity, theirs)
    assert [x.severity for x in a] == [x.severity for x in b] == ["critical", "critical"]
    assert {frozenset(keys(x)) for x in a} == {frozenset({"Passport/p", "Trip/tokyo"})}
    assert {frozenset(keys(x)) for x in b} == {frozenset({"passport/p", "Journey/tokyo"})}
    pages = next(x for x in b if "blank page" in x.message)
    # The about string is the user's own field name; the message says which bindings it read.
    assert pages.id == alert_id("passport_validity", "blankPages", keys(pages))
    assert "passport.blankPages as passport.blank_pages (person" in pages.message


def test_passport_trap_a_trip_home_through_a_bound_residence(tmp_path: Path) -> None:
    events = [
        add("2024-10-15", "passport", "p", validThru="2025-02-25", issuedBy="GB"),
        add("2024-01-01", "Dwelling", "flat", nation="Japan"),
        journey("2025-01-10", "kyoto", "Japan", "2025-02-20", "2025-03-01"),
    ]
    common = (
        *JOURNEY,
        ("passport", "passport"),
        ("document.expiry", "passport", "validThru"),
        ("document.country", "passport", "issuedBy"),
    )
    # Without the home, a trip to Japan on a British passport expiring mid-trip is abroad...
    assert len(fire(lib.passport_validity, bind(build(at(tmp_path, "a"), events), *common))) == 1
    # ...but the user lives there: the trip is a trip home once the Dwelling is a residence.
    home = bind(
        build(at(tmp_path, "b"), events),
        *common,
        ("residence", "Dwelling"),
        ("residence.country", "Dwelling", "nation"),
    )
    assert fire(lib.passport_validity, home) == []


def test_passport_travellers_and_holder_in_other_words(tmp_path: Path) -> None:
    view = bind(
        build(
            tmp_path,
            [
                add(
                    "2024-08-10", "passport", "lily", nameOnDoc="Lily Chen", validThru="2025-04-01"
                ),
                add("2024-08-10", "passport", "sam", nameOnDoc="Sam Ito", validThru="2033-01-01"),
                add("2024-08-10", "passport", "zoe", nameOnDoc="Zoe Park", validThru="2025-03-01"),
                journey(
                    "2025-01-20", "mx", "Mexico", "2025-03-10", "2025-03-17", whoGoes=["Lily Chen"]
                ),
            ],
        ),
        *JOURNEY,
        ("passport", "passport"),
        ("document.expiry", "passport", "validThru"),
        ("document.holder", "passport", "nameOnDoc"),
        ("trip.travellers", "Journey", "whoGoes"),
    )
    # Only Lily travels: Zoe's expiring passport is not hers to worry about (a trap).
    alert = one(lib.passport_validity, view)
    assert keys(alert) == {"passport/lily", "Journey/mx"}


def test_companions_never_narrow_whose_passports_count(tmp_path: Path) -> None:
    """The docstring says so: only ``trip.travellers`` narrows; companions travel with the user."""
    view = build(
        tmp_path,
        [
            add("2024-08-10", "Passport", "me", expires="2025-03-12"),
            trip("2025-01-20", "mx", "Mexico", "2025-03-10", "2025-03-17", companions=["Sam"]),
        ],
    )
    assert keys(one(lib.passport_validity, view)) == {"Passport/me", "Trip/mx"}
    assert "companions" not in lib.passport_validity.doc.replace("Companions named", "")


def test_travel_rules_read_every_type_playing_trip(tmp_path: Path) -> None:
    """A ``Vacation`` is a trip by default, as the schedule rules always took it; the travel
    rules read only ``Trip`` before the role."""
    view = build(
        tmp_path,
        [
            add("2024-10-15", "Passport", "p", expires="2025-03-05"),
            add(
                "2025-01-10", "Vacation", "v", country="Japan", start="2025-02-20", end="2025-03-01"
            ),
        ],
    )
    assert keys(one(lib.passport_validity, view)) == {"Passport/p", "Vacation/v"}


# -- visa_validity ----------------------------------------------------------------------------

PERMIT = (
    ("visa", "entryPermit"),
    ("document.country", "entryPermit", "validIn"),
    ("document.valid_from", "entryPermit", "validFrom"),
    ("document.expiry", "entryPermit", "validUntil"),
    ("visa.single_entry", "entryPermit", "oneShot"),
    ("visa.used", "entryPermit", "alreadyUsed"),
)


def test_visa_alerts_under_an_entry_permit(tmp_path: Path) -> None:
    ours = build(
        at(tmp_path, "ours"),
        [
            add("2024-11-01", "Visa", "au", country="Australia", starts="2024-12-01"),
            add("2024-11-01", "Visa", "nz", country="New Zealand", single_entry=True, used=True),
            trip("2024-11-18", "syd", "Australia", "2024-11-25", "2024-12-10"),
            trip("2024-11-18", "akl", "New Zealand", "2025-01-10", "2025-01-20"),
        ],
    )
    theirs = bind(
        build(
            at(tmp_path, "theirs"),
            [
                add("2024-11-01", "entryPermit", "au", validIn="AU", validFrom="2024-12-01"),
                add(
                    "2024-11-01", "entryPermit", "nz", validIn="NZ", oneShot=True, alreadyUsed=True
                ),
                journey("2024-11-18", "syd", "Australia", "2024-11-25", "2024-12-10"),
                journey("2024-11-18", "akl", "New Zealand", "2025-01-10", "2025-01-20"),
            ],
        ),
        *JOURNEY,
        *PERMIT,
    )
    a, b = fire(lib.visa_validity, ours), fire(lib.visa_validity, theirs)
    assert {frozenset(keys(x)) for x in a} == {
        frozenset({"Visa/au", "Trip/syd"}),
        frozenset({"Visa/nz", "Trip/akl"}),
    }
    assert [x.severity for x in a] == [x.severity for x in b] == ["critical", "critical"]
    by_what = {("valid from" in x.message, "single-entry" in x.message): x for x in b}
    starts, used = by_what[(True, False)], by_what[(False, True)]
    assert keys(starts) == {"entryPermit/au", "Journey/syd"} and starts.severity == "critical"
    assert keys(used) == {"entryPermit/nz", "Journey/akl"} and used.severity == "critical"
    assert starts.id == alert_id("visa_validity", "validFrom", keys(starts))
    assert used.id == alert_id("visa_validity", "alreadyUsed", keys(used))
    # Under our names the ids are those users have standing today.
    assert {x.id for x in a} == {
        alert_id("visa_validity", "starts", {"Visa/au", "Trip/syd"}),
        alert_id("visa_validity", "used", {"Visa/nz", "Trip/akl"}),
    }


def test_visa_trap_a_permit_valid_for_the_whole_trip(tmp_path: Path) -> None:
    view = bind(
        build(
            tmp_path,
            [
                add(
                    "2024-11-01",
                    "entryPermit",
                    "au",
                    validIn="Australia",
                    validFrom="2024-11-01",
                    validUntil="2025-11-01",
                ),
                journey("2024-11-18", "syd", "Australia", "2024-11-25", "2024-12-10"),
            ],
        ),
        *JOURNEY,
        *PERMIT,
    )
    assert fire(lib.visa_validity, view) == []


# -- schengen_90_180 --------------------------------------------------------------------------


def schengen_journeys(**trap: Any) -> list[dict[str, Any]]:
    return [
        journey("2024-06-01", "t1", ["FR", "Italy", "Spain"], "2024-04-15", "2024-05-29"),
        journey("2024-07-20", "t2", ["Germany", "NL"], "2024-07-01", "2024-07-30"),
        journey("2024-08-25", "t3", ["Portugal"], "2024-09-05", "2024-09-25", **trap),
    ]


def test_schengen_count_under_journeys_names_the_stays_it_counted(tmp_path: Path) -> None:
    view = bind(build(tmp_path, schengen_journeys()), *JOURNEY)
    alert = one(lib.schengen_90_180, view)
    assert alert.severity == "critical"
    assert keys(alert) == {"Journey/t1", "Journey/t2", "Journey/t3"}
    assert "96 days" in alert.message and "75 days are already used" in alert.message


def test_schengen_open_ended_journey_names_the_stays_that_leave_it_few_days(
    tmp_path: Path,
) -> None:
    view = bind(
        build(
            tmp_path,
            [
                journey("2024-06-01", "t1", ["France"], "2024-04-15", "2024-05-29"),
                journey("2024-07-20", "t2", ["Germany"], "2024-07-01", "2024-07-30"),
                journey("2024-08-25", "t3", ["Spain"], "2024-09-05"),
                journey("2024-08-25", "far", ["Italy"], "2023-01-01", "2023-01-20"),
                clock("2024-08-25"),
            ],
        ),
        *JOURNEY,
    )
    alert = one(lib.schengen_90_180, view)
    # 45 + 30 days used in the window: leave by 2024-09-19; the 2023 stay counted for nothing.
    assert alert.severity == "warning" and "leave by 2024-09-19" in alert.message
    assert keys(alert) == {"Journey/t1", "Journey/t2", "Journey/t3"}


def test_schengen_trap_a_resident_in_their_own_words(tmp_path: Path) -> None:
    view = bind(
        build(tmp_path, schengen_journeys(hasResidencePermit=True)),
        *JOURNEY,
        ("trip.exempt", "Journey", "hasResidencePermit"),
    )
    assert fire(lib.schengen_90_180, view) == []


# -- document_expires_before_trip -------------------------------------------------------------


def test_documents_in_other_words_name_the_document_and_the_trip(tmp_path: Path) -> None:
    view = bind(
        build(
            tmp_path,
            [
                add("2024-01-01", "Shot", "yf", vaccine="yellow fever", valid_thru="2025-02-22"),
                add("2024-01-01", "travelDoc", "dl", validThru="2025-02-19"),
                journey("2025-01-10", "lima", "Peru", "2025-02-20", "2025-03-01"),
            ],
        ),
        *JOURNEY,
        ("document", "Shot"),
        ("health_certificate", "Shot"),
        ("document.expiry", "Shot", "valid_thru"),
        ("document", "travelDoc"),
        ("document.expiry", "travelDoc", "validThru"),
    )
    found = {
        next(iter(keys(a) - {"Journey/lima"})): a
        for a in fire(lib.document_expires_before_trip, view)
    }
    assert set(found) == {"Shot/yf", "travelDoc/dl"}
    # A health certificate only some destinations check warns; a document gone by departure is
    # critical. Each alert names the document and the trip it fails to cover.
    assert found["Shot/yf"].severity == "warning" and found["travelDoc/dl"].severity == "critical"
    assert all(keys(a) == {k, "Journey/lima"} for k, a in found.items())
    assert "No travelDoc in force covers Journey 'lima'" in found["travelDoc/dl"].message


def test_documents_trap_a_renewed_shot_and_a_policy_gap_in_other_words(tmp_path: Path) -> None:
    view = bind(
        build(
            tmp_path,
            [
                add("2024-01-01", "Shot", "yf", valid_thru="2025-02-22", boosted=True),
                add("2024-01-01", "coverPlan", "old", coverFrom="2024-01-01", coverTo="2025-01-31"),
                add("2024-01-01", "coverPlan", "new", coverFrom="2025-02-10", coverTo="2026-01-31"),
                journey("2025-01-10", "lima", "Peru", "2025-02-20", "2025-03-01"),
                clock("2025-01-10"),
            ],
        ),
        *JOURNEY,
        ("document", "Shot"),
        ("document.expiry", "Shot", "valid_thru"),
        ("document.renewed", "Shot", "boosted"),
        ("document", "coverPlan"),
        ("insurance_policy", "coverPlan"),
        ("document.valid_from", "coverPlan", "coverFrom"),
        ("document.expiry", "coverPlan", "coverTo"),
    )
    # The shot was renewed (quiet); the trip is covered by the new plan; the gap between the
    # two plans is the one alert, naming both.
    alert = one(lib.document_expires_before_trip, view)
    assert keys(alert) == {"coverPlan/old", "coverPlan/new"} and alert.severity == "warning"
    assert "2025-02-01 – 2025-02-09" in alert.message


# -- residence_day_limits ---------------------------------------------------------------------


def test_stated_day_cap_in_other_words_names_every_trip_it_counted(tmp_path: Path) -> None:
    view = bind(
        build(
            tmp_path,
            [
                add("2025-01-01", "dayCap", "th", nation="Thailand", maxDays=60, windowLen=180),
                journey("2026-01-05", "th1", "Thailand", "2026-01-10", "2026-02-08"),
                journey("2026-01-05", "th2", "Thailand", "2026-04-01", "2026-05-05"),
                journey("2026-01-05", "home", "Canada", "2026-06-01", "2026-06-10"),
                clock("2026-01-06"),
            ],
        ),
        *JOURNEY,
        ("stay_limit", "dayCap"),
        ("stay_limit.country", "dayCap", "nation"),
        ("stay_limit.days", "dayCap", "maxDays"),
        ("stay_limit.window", "dayCap", "windowLen"),
    )
    alert = one(lib.residence_day_limits, view)
    assert keys(alert) == {"Journey/th1", "Journey/th2", "dayCap/th"}
    assert alert.severity == "critical" and "65 days in the 180 days" in alert.message


def test_day_limits_trap_the_users_own_country_through_a_bound_home(tmp_path: Path) -> None:
    events = [
        add("2025-01-01", "Dwelling", "flat", nation="United Kingdom"),
        journey("2025-03-01", "uk", "UK", "2025-04-10", "2025-12-30"),
        clock("2025-03-01"),
    ]
    unbound_home = bind(build(at(tmp_path, "a"), events), *JOURNEY)
    assert len(fire(lib.residence_day_limits, unbound_home)) == 1
    home = bind(
        build(at(tmp_path, "b"), events),
        *JOURNEY,
        ("residence", "Dwelling"),
        ("residence.country", "Dwelling", "nation"),
    )
    assert fire(lib.residence_day_limits, home) == []


# -- conflicting_records ----------------------------------------------------------------------


def test_contradictions_in_other_words(tmp_path: Path) -> None:
    view = bind(
        build(
            tmp_path,
            [
                add("2020-01-01", "Dwelling", "boston", movedIn="2020-01-01"),
                add("2023-01-01", "Dwelling", "denver", movedIn="2023-01-01"),
                add("2019-01-01", "Dwelling", "old", movedIn="2010-01-01", movedOut="2019-01-01"),
                add("2024-01-01", "passport", "a", passportNo="X123", validThru="2030-01-01"),
                add("2024-02-01", "passport", "b", passportNo="x123", validThru="2031-01-01"),
                add("2024-01-01", "member", "m1", fullName="Ann Lee", dob="1990-01-01"),
                add("2024-01-01", "member", "m2", fullName="Ann Lee", dob="1990-01-01"),
                add("2024-01-01", "intolerance", "i1", allergen="peanut"),
                add("2024-03-01", "intolerance", "i2", allergen="Peanut", outgrown=True),
                clock("2024-06-01"),
            ],
        ),
        ("residence", "Dwelling"),
        ("residence.since", "Dwelling", "movedIn"),
        ("residence.until", "Dwelling", "movedOut"),
        ("passport", "passport"),
        ("passport.number", "passport", "passportNo"),
        ("document.expiry", "passport", "validThru"),
        ("person", "member"),
        ("person.name", "member", "fullName"),
        ("person.birthday", "member", "dob"),
        ("allergy", "intolerance"),
        ("allergy.allergen", "intolerance", "allergen"),
        ("allergy.resolved", "intolerance", "outgrown"),
    )
    found = {frozenset(keys(a)): a for a in fire(lib.conflicting_records, view)}
    # The Dwelling moved out of is no clash, nor two members who agree on a birthday (traps).
    assert set(found) == {
        frozenset({"Dwelling/boston", "Dwelling/denver"}),
        frozenset({"passport/a", "passport/b"}),
        frozenset({"intolerance/i1", "intolerance/i2"}),
    }
    homes = found[frozenset({"Dwelling/boston", "Dwelling/denver"})]
    assert "Set `movedOut`" in homes.message
    numbers = found[frozenset({"passport/a", "passport/b"})]
    assert "same passportNo 'x123' disagree on validThru" in numbers.message
    assert numbers.id == alert_id("conflicting_records", "validThru", keys(numbers))
    assert "as outgrown" in found[frozenset({"intolerance/i1", "intolerance/i2"})].message


def test_contradiction_ids_unchanged_under_our_names(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2024-01-01", "Passport", "a", number="X123", expires="2030-01-01"),
            add("2024-02-01", "Passport", "b", number="X123", expires="2031-01-01"),
            add("2024-01-01", "Person", "p1", name="Ann Lee", birthday="1990-01-01"),
            add("2024-01-01", "Contact", "p2", name="Ann Lee", birthday="1991-01-01"),
        ],
    )
    assert {a.id for a in fire(lib.conflicting_records, view)} == {
        alert_id("conflicting_records", "expires", {"Passport/a", "Passport/b"}),
        alert_id("conflicting_records", "birthday", {"Person/p1", "Contact/p2"}),
    }


# -- watching through roles -------------------------------------------------------------------


def test_a_type_bound_to_a_role_wakes_the_rule_when_it_changes(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2024-10-15", "Passport", "p", expires="2025-03-05"),
            journey("2025-01-10", "tokyo", "Japan", "2025-02-20", "2025-03-01"),
        ],
    )
    runner = RuleRunner([lib.passport_validity, lib.schengen_90_180, lib.conflicting_records])
    # Unbound, a Journey is no trip: its change wakes none of the travel rules.
    assert lib.passport_validity.watches(view) is not None
    assert "Journey" not in (lib.passport_validity.watches(view) or set())
    assert runner.run(view, {"Journey"}).raised == []
    bind(view, *JOURNEY)
    assert "Journey" in (lib.schengen_90_180.watches(view) or set())
    raised = runner.run(view, {"Journey"}).raised
    assert [(a.rule, keys(a)) for a in raised] == [
        ("passport_validity", {"Passport/p", "Journey/tokyo"})
    ]
    # A rule whose roles the Journey does not play stays asleep.
    assert "Journey" not in (lib.conflicting_records.watches(view) or set())


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 400), st.integers(0, 20)), max_size=40),
    st.booleans(),
)
def test_days_present_merge_the_stays_as_a_day_by_day_count_would(
    spans: list[tuple[int, int]], midnights: bool
) -> None:
    # residence._presence merges overlapping stays before it counts their days.
    base = date(2025, 1, 1)
    trips = [(None, base + timedelta(days=s), base + timedelta(days=s + n)) for s, n in spans]
    expected: set[date] = set()
    for _, s, e in trips:
        last = e - timedelta(days=1) if midnights and e > s else e
        expected.update(s + timedelta(days=i) for i in range((last - s).days + 1))
    assert _presence(trips, midnights) == expected  # type: ignore[arg-type]


def _bind(view: UserView) -> UserView:
    return bind(view, *JOURNEY, ("trip.length_days", "Journey", "stay_days"))


def test_a_called_off_trip_adds_no_binding_to_the_note_of_another_trips_residence_alert(
    tmp_path: Path,
) -> None:
    # Journey 'us' stays 95 days in the US (Visa Waiver Program alert); it has a return date, so
    # its count reads no stated length. Journey 'off' was cancelled: the rule skips it before its
    # end is worked out, so no alert rests on Journey.stay_days.
    view = _bind(
        build(
            tmp_path,
            [
                add(
                    "2026-06-01",
                    "Journey",
                    "us",
                    destination_country="United States",
                    leaves_on="2026-07-30",
                    returns_on="2026-11-01",
                    stay_days=95,
                ),
                add(
                    "2026-06-01",
                    "Journey",
                    "off",
                    destination_country="Japan",
                    leaves_on="2026-09-01",
                    stay_days=10,
                    status="cancelled",
                ),
                clock("2026-07-01"),
            ],
        )
    )
    (alert,) = fire(lib.residence_day_limits, view)
    assert "Journey.leaves_on as trip.start" in alert.message
    assert "stay_days" not in alert.message, alert.message


def test_a_called_off_trip_adds_no_binding_to_the_note_of_a_visa_alert(tmp_path: Path) -> None:
    # The Japan visa expires before Journey 'jp' ends. Journey 'off' (cancelled, a stated length
    # only) is skipped before its end is worked out: the alert does not rest on stay_days.
    view = _bind(
        build(
            tmp_path,
            [
                add("2026-06-01", "Visa", "v", country="Japan", expires="2026-07-05"),
                add(
                    "2026-06-01",
                    "Journey",
                    "jp",
                    destination_country="Japan",
                    leaves_on="2026-07-01",
                    returns_on="2026-07-10",
                ),
                add(
                    "2026-06-01",
                    "Journey",
                    "off",
                    destination_country="Japan",
                    leaves_on="2026-09-01",
                    stay_days=10,
                    status="cancelled",
                ),
                clock("2026-06-15"),
            ],
        )
    )
    (alert,) = fire(lib.visa_validity, view)
    assert "Journey.leaves_on as trip.start" in alert.message
    assert "stay_days" not in alert.message, alert.message


def test_residence_limits_at_the_last_day_of_the_log_clock_do_not_overflow(tmp_path: Path) -> None:
    # Two trips to Canada under way on 9999-12-31 (ends written as the "never" placeholder, which
    # _day reads as unknown, so each counts through today): merging their stays adds a day to
    # 9999-12-31.
    view = build(
        tmp_path,
        [
            add("2026-01-01", "Trip", "a", country="Canada", start="8990-01-01", end="9999-12-31"),
            add("2026-01-01", "Trip", "b", country="Canada", start="8991-01-01", end="9999-12-31"),
            clock("9999-12-31"),
        ],
    )
    fire(lib.residence_day_limits, view)
