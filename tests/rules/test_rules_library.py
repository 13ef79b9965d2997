"""The shipped rule library, on states folded from a real DuckDB event log."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers.alerts import keys
from helpers.events import fact
from helpers.rules import add, build, clock, fire, one

from uac_kernel.ingest.events import parse_objects, plan_batch
from uac_kernel.log.store import Store
from uac_kernel.rules import library as lib
from uac_kernel.rules.engine import Alert, Rule, RuleRunner
from uac_kernel.rules.library.deadlines import _us_filing_due
from uac_kernel.rules.library.schedule import _clock_time
from uac_kernel.state.fold import State
from uac_kernel.state.query import UserView

CATEGORIES = {
    "travel_document_validity",
    "drug_interactions_health_safety",
    "financial_authorization_conflicts",
    "scheduling_conflicts",
    "warranty_deadline_expiration",
    "contradiction",
}


# -- the library as a whole -------------------------------------------------------------------

# Histories in which a rule must raise nothing (near misses), declared beside the tests of their
# rule and run by ``test_a_near_miss_raises_nothing`` at the end.
NEAR_MISSES: dict[str, tuple[Rule, list[dict[str, Any]]]] = {}


def near_miss(case: str, rule: Rule, events: list[dict[str, Any]]) -> None:
    assert case not in NEAR_MISSES, case
    NEAR_MISSES[case] = (rule, events)


def test_library_is_complete_and_cited() -> None:
    names = [r.name for r in lib.LIBRARY]
    assert len(set(names)) == len(names) >= 16
    assert sorted([*names, "LIBRARY"]) == sorted(lib.__all__)
    for r in lib.LIBRARY:
        assert r.category in CATEGORIES, r.name
        assert r.source and r.doc.startswith("Reads"), r.name
        assert getattr(lib, r.name) is r
    assert lib.deadline_approaching.clock and lib.overlapping_commitments.watch is None


def test_empty_state_raises_nothing(tmp_path: Path) -> None:
    view = UserView(State("u"))
    runner = RuleRunner(lib.LIBRARY)
    change = runner.run(view, None)
    assert change.raised == [] and runner.standing() == []
    view = build(tmp_path, [clock("2025-01-01")])
    assert runner.run(view, None, clock_moved=True).raised == []


def test_missing_and_mistyped_fields_raise_nothing(tmp_path: Path) -> None:
    types = sorted({t for r in lib.LIBRARY if r.watch for t in r.watch} | {"Event", "Appointment"})
    # Every field a rule compares or computes with: as strings, then as extreme values.
    names = ["start", "end", "expires", "starts", "until", "since", "deadline", "date"]
    names += ["notice_days", "amount"]
    texts = ["name", "substance", "country", "international", "holder", "account"]
    junk = dict.fromkeys([*names, *texts], "??")
    far = {
        **dict.fromkeys(names, "9999-12-31"),
        "notice_days": 10**9,
        "amount": 1e308,
        "renews_on": "2025-01-05",
    }
    for n, fields in enumerate((junk, far)):
        events: list[dict[str, Any]] = [clock("2025-01-01")]
        for t in types:
            events += [add("2025-01-01", t, "empty"), add("2025-01-01", t, "odd", **fields)]
        (tmp_path / str(n)).mkdir()
        view = build(tmp_path / str(n), events)
        for r in lib.LIBRARY:
            fire(r, view)  # raises on a broken rule
        runner = RuleRunner(lib.LIBRARY)
        runner.run(view, None)
        assert not [a for a in runner.standing() if a.category == "rule_error"]


def test_types_lacking_every_field_a_rule_reads_raise_nothing(tmp_path: Path) -> None:
    # A type the library watches that has none of the fields its rules read: a name the type
    # never had is an error when read as an attribute, so rules read fields through ``_get``.
    types = sorted({t for r in lib.LIBRARY if r.watch for t in r.watch} | {"Event", "Appointment"})
    events = [clock("2025-01-01"), *(add("2025-01-01", t, "bare", note="x") for t in types)]
    view = build(tmp_path, events)
    for r in lib.LIBRARY:
        assert fire(r, view) == [], r.name  # raises on a rule that reads a missing field
    runner = RuleRunner(lib.LIBRARY)
    runner.run(view, None, clock_moved=True)
    assert runner.standing() == []


# -- health -----------------------------------------------------------------------------------


def test_penicillin_allergy_flags_amoxicillin(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2024-05-20", "Allergy", "pen", substance="penicillin", reaction="hives"),
            add("2025-01-08", "Medication", "amox", name="Amoxicillin 500 mg", start="2025-01-08"),
            add("2025-01-08", "Medication", "azi", name="azithromycin (Z-Pak)"),
        ],
    )
    alert = one(lib.drug_allergy_cross_reactivity, view)
    assert alert.severity == "critical" and keys(alert) == {"Allergy/pen", "Medication/amox"}
    assert "Amoxicillin" in alert.message and "penicillin class" in alert.message


@pytest.mark.parametrize(
    ("allergy", "drug"),
    [("Penicillins", "Augmentin"), ("sulfa drugs", "Bactrim DS"), ("ibuprofen", "Ibuprofen 200mg")],
)
def test_drug_allergy_classes_brands_and_same_substance(
    tmp_path: Path, allergy: str, drug: str
) -> None:
    view = build(
        tmp_path,
        [
            add("2025-01-01", "Allergy", "a", substance=allergy),
            add("2025-01-02", "Medication", "m", name=drug),
        ],
    )
    assert one(lib.drug_allergy_cross_reactivity, view).severity == "critical"


near_miss(
    "drug_allergy_near_misses",
    lib.drug_allergy_cross_reactivity,
    [
        add("2024-01-01", "Allergy", "pen", substance="penicillin", severity="mild"),
        add("2024-01-01", "Allergy", "old", substance="sulfa", resolved=True),
        add("2024-01-02", "Medication", "azi", name="azithromycin"),
        add("2024-01-02", "Medication", "amox", name="amoxicillin"),
        fact("2024-01-03", "retract", "Medication", "amox", reason="never filled"),
        add("2024-01-02", "Medication", "ampi", name="ampicillin", end="2024-01-10"),
        add("2024-01-02", "Medication", "bac", name="Bactrim"),
        add("2024-01-02", "Medication", "kef", name="cephalexin"),
        clock("2024-02-01"),
    ],
)


def test_cephalosporin_with_severe_penicillin_allergy_is_a_warning(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2025-01-01", "Allergy", "pen", substance="penicillin", severity="anaphylaxis"),
            add("2025-01-02", "Medication", "kef", name="Keflex"),
        ],
    )
    alert = one(lib.drug_allergy_cross_reactivity, view)
    assert alert.severity == "warning" and "cephalosporin" in alert.message


def test_severe_shellfish_allergy_flags_crab_restaurant(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2024-06-05",
                "Allergy",
                "shellfish",
                substance="shellfish",
                severity="severe (anaphylaxis)",
            ),
            add(
                "2024-10-22",
                "Reservation",
                "crab",
                name="The Crab Shack",
                cuisine="seafood",
                start="2024-10-29T19:00:00",
            ),
            add(
                "2024-10-22",
                "Reservation",
                "chez",
                name="Chez Laurent",
                cuisine="French",
                start="2024-11-15T19:00:00",
            ),
            add(
                "2024-10-01", "Reservation", "past", name="Red Lobster", start="2024-10-05T19:00:00"
            ),
        ],
    )
    alert = one(lib.food_allergy_exposure, view)
    assert alert.severity == "critical" and keys(alert) == {"Allergy/shellfish", "Reservation/crab"}
    assert "crab" in alert.message and "shellfish" in alert.message


def test_mild_food_allergy_is_a_warning_and_avoided_food_is_silent(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2024-06-05", "Allergy", "peanut", substance="peanuts", severity="mild"),
            add("2024-06-06", "Meal", "m1", items=["chicken satay", "rice"], date="2024-06-07"),
            add("2024-06-06", "FoodHabit", "f1", item="peanut butter", avoid=True),
        ],
    )
    alert = one(lib.food_allergy_exposure, view)
    assert alert.severity == "warning" and keys(alert) == {"Allergy/peanut", "Meal/m1"}


def test_food_allergy_rule_and_the_allergens_table_know_the_same_foods(tmp_path: Path) -> None:
    from uac_kernel.core.tables import FOOD_ALLERGENS
    from uac_kernel.language.knowledge import TABLES

    rule_words = {w.strip() for terms in FOOD_ALLERGENS.values() for w in terms}
    assert {w for ws in TABLES["allergens"].groups.values() for w in ws} == rule_words
    view = build(
        tmp_path,
        [
            add("2026-02-12", "Allergy", "n", substance="tree nuts", severity="anaphylaxis"),
            add(
                "2026-02-12",
                "Meal",
                "m",
                name="dessert",
                items=["pistachio baklava"],
                date="2026-02-14",
            ),
            add(
                "2026-02-12",
                "Reservation",
                "r",
                name="Trattoria",
                dish="pasta al pesto",
                start="2026-02-15T19:00",
            ),
        ],
    )
    found = fire(lib.food_allergy_exposure, view)
    assert len(found) == 2 and {a.severity for a in found} == {"critical"}
    assert {k for a in found for k in keys(a)} == {"Allergy/n", "Meal/m", "Reservation/r"}


def test_ssri_with_maoi_is_critical(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2024-08-15", "Medication", "nardil", name="phenelzine"),
            add("2025-02-10", "Medication", "zoloft", name="sertraline (Zoloft)"),
            add("2025-02-10", "Medication", "ibu", name="ibuprofen"),
        ],
    )
    alert = one(lib.drug_drug_interaction, view)
    assert alert.severity == "critical" and keys(alert) == {
        "Medication/nardil",
        "Medication/zoloft",
    }
    assert "serotonin syndrome" in alert.message and "14 days" in alert.message


def test_warfarin_pairs(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2024-07-30", "Medication", "w", name="Warfarin 5mg"),
            add("2024-11-12", "Medication", "ibu", name="Advil"),
            add("2024-11-12", "Supplement", "k2", name="Vitamin K2 (200mcg)"),
            add("2024-11-12", "Supplement", "d3", name="vitamin D3"),
        ],
    )
    alerts = {a.severity: a for a in fire(lib.drug_drug_interaction, view)}
    assert set(alerts) == {"critical", "warning"}
    assert keys(alerts["critical"]) == {"Medication/w", "Supplement/k2"}
    assert keys(alerts["warning"]) == {"Medication/w", "Medication/ibu"}
    assert "bleeding" in alerts["warning"].message and "INR" in alerts["critical"].message


def test_statin_with_cyp3a4_inhibitor(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2025-01-01", "Medication", "simva", name="simvastatin 40mg"),
            add("2025-01-01", "Medication", "atorva", name="Lipitor"),
            add("2025-01-02", "Medication", "clari", name="clarithromycin"),
        ],
    )
    by_key = {frozenset(keys(a)): a.severity for a in fire(lib.drug_drug_interaction, view)}
    assert by_key == {
        frozenset({"Medication/simva", "Medication/clari"}): "critical",
        frozenset({"Medication/atorva", "Medication/clari"}): "warning",
    }


near_miss(
    "drug_pairs_near_misses",
    lib.drug_drug_interaction,
    [
        add("2024-01-01", "Medication", "nardil", name="phenelzine", active=False),
        add("2024-01-01", "Medication", "zoloft", name="sertraline"),
        add("2024-01-01", "Medication", "ibu", name="ibuprofen"),
        add("2024-01-01", "Medication", "rosu", name="rosuvastatin"),
        add("2024-01-01", "Medication", "azi", name="azithromycin"),
    ],
)


def test_grapefruit_with_simvastatin(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2024-07-12", "Medication", "simva", name="simvastatin", dose_mg=40.0),
            add("2025-03-01", "FoodHabit", "gj", item="fresh grapefruit juice every morning"),
            add("2025-03-01", "FoodHabit", "oj", item="orange juice"),
        ],
    )
    alert = one(lib.food_drug_interaction, view)
    assert alert.severity == "warning" and keys(alert) == {"Medication/simva", "FoodHabit/gj"}
    assert "grapefruit" in alert.message and "simvastatin" in alert.message


def test_tyramine_and_vitamin_k_foods(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2025-01-01", "Medication", "parnate", name="tranylcypromine"),
            add("2025-01-01", "Medication", "w", name="warfarin"),
            add(
                "2025-01-02",
                "Meal",
                "board",
                name="charcuterie board",
                items=["aged cheddar", "salami"],
            ),
            add("2025-01-02", "FoodHabit", "kale", item="kale smoothies"),
        ],
    )
    sev = {frozenset(keys(a)): a.severity for a in fire(lib.food_drug_interaction, view)}
    assert sev == {
        frozenset({"Medication/parnate", "Meal/board"}): "warning",
        frozenset({"Medication/w", "FoodHabit/kale"}): "info",
    }


near_miss(
    "grapefruit_near_miss",
    lib.food_drug_interaction,
    [
        add("2025-01-01", "Medication", "rosu", name="rosuvastatin (Crestor)"),
        add("2025-01-01", "Medication", "simva", name="simvastatin", end="2025-01-15"),
        add("2025-03-01", "FoodHabit", "gj", item="grapefruit"),
    ],
)


def test_pregnancy_with_isotretinoin(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2024-06-15",
                "Medication",
                "acc",
                name="isotretinoin (Accutane)",
                dose_mg=40.0,
                start="2024-06-15",
                end="2024-11-15",
            ),
            add("2024-06-15", "Medication", "lip", name="atorvastatin"),
            add("2024-06-15", "Medication", "amox", name="amoxicillin"),
            add("2024-09-20", "Condition", "preg", name="Pregnant"),
        ],
    )
    alerts = {a.severity: a for a in fire(lib.pregnancy_teratogenic_medication, view)}
    assert set(alerts) == {"critical", "warning"}
    crit = alerts["critical"]
    assert keys(crit) == {"Condition/preg", "Medication/acc"} and "2024-06-15" in crit.message
    assert keys(alerts["warning"]) == {"Condition/preg", "Medication/lip"}


near_miss(
    "pregnancy_near_misses",
    lib.pregnancy_teratogenic_medication,
    [
        add("2023-01-01", "Condition", "preg", name="pregnancy", resolved=True),
        add("2023-01-01", "Condition", "asthma", name="asthma"),
        add("2024-06-15", "Medication", "mtx", name="methotrexate"),
    ],
)


# -- travel -----------------------------------------------------------------------------------


def test_passport_expiring_within_six_months_of_return(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2024-10-15", "Passport", "p", expires="2025-03-05"),
            add(
                "2025-01-10",
                "Trip",
                "tokyo",
                destination="Tokyo",
                country="Japan",
                start="2025-02-20",
                end="2025-03-01",
                international=True,
            ),
        ],
    )
    alert = one(lib.passport_validity, view)
    assert alert.severity == "critical" and keys(alert) == {"Passport/p", "Trip/tokyo"}
    for needle in ("2025-03-05", "4 days after", "13 days after departure", "2025-08-31", "Japan"):
        assert needle in alert.message


def test_passport_warning_and_before_departure(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2025-01-01", "Passport", "p", expires="2025-07-01"),
            add(
                "2025-01-02",
                "Trip",
                "rome",
                destination="Rome",
                country="Italy",
                start="2025-02-20",
                end="2025-03-01",
            ),
            add(
                "2025-01-02",
                "Trip",
                "oslo",
                destination="Oslo",
                country="Norway",
                start="2025-08-01",
                end="2025-08-05",
            ),
        ],
    )
    by_trip = {
        next(k for k in keys(a) if k.startswith("Trip")): a
        for a in fire(lib.passport_validity, view)
    }
    assert (
        by_trip["Trip/rome"].severity == "warning"
        and "122 days after" in by_trip["Trip/rome"].message
    )
    assert (
        by_trip["Trip/oslo"].severity == "critical"
        and "31 days before you leave" in by_trip["Trip/oslo"].message
    )


near_miss(
    "passport_near_misses",
    lib.passport_validity,
    [
        add("2024-01-01", "Residence", "home", city="Boston", country="USA"),
        add("2024-01-01", "Passport", "old", holder="Ann Lee", expires="2025-03-05"),
        add("2024-06-01", "Passport", "new", holder="Ann Lee", expires="2034-06-01"),
        add("2024-01-01", "Passport", "p2", holder="Bo Lee", expires="2025-04-01"),
        # Ann's renewed passport is the one checked; Bo is not travelling
        add(
            "2025-01-10",
            "Trip",
            "tokyo",
            country="Japan",
            start="2025-02-20",
            end="2025-03-01",
            travellers=["Ann Lee"],
        ),
        add(
            "2025-01-10",
            "Trip",
            "ny",
            destination="New York",
            country="USA",
            start="2025-02-01",
        ),
        add(
            "2025-01-10",
            "Trip",
            "cabo",
            country="Mexico",
            international=False,
            start="2025-02-01",
        ),
        add("2024-05-01", "Trip", "past", country="France", start="2024-05-01", end="2024-05-10"),
    ],
)


near_miss(
    "passport_seven_months_after_return_is_fine",
    lib.passport_validity,
    [
        add("2024-10-15", "Passport", "p", expires="2025-10-01"),
        add("2025-01-10", "Trip", "tokyo", country="Japan", start="2025-02-20", end="2025-03-01"),
    ],
)


def test_passport_own_country_needs_no_validity_margin(tmp_path: Path) -> None:
    """A trip to the passport's country (named by code, name or demonym) is not held to the
    six-month rule or to blank pages; it still needs a passport valid for the journey."""

    def trip(key: str, country: str, start: str, end: str) -> dict[str, Any]:
        return add(
            "2025-10-26", "Trip", key, country=country, start=start, end=end, international=True
        )

    view = build(
        tmp_path,
        [
            add("2025-06-01", "Residence", "zh", city="Zürich", country="Switzerland"),
            add("2025-06-01", "Passport", "p", country="UK", expires="2026-02-19", blank_pages=1),
            trip("birmingham", "United Kingdom", "2025-12-20", "2025-12-28"),
            trip("milan", "Italy", "2025-11-21", "2025-11-23"),
            trip("london", "Great Britain", "2026-03-01", "2026-03-05"),
        ],
    )
    by_trip: dict[str, list[Alert]] = {}
    for a in fire(lib.passport_validity, view):
        by_trip.setdefault(next(k for k in keys(a) if k.startswith("Trip")), []).append(a)
    assert "Trip/birmingham" not in by_trip
    assert len(by_trip["Trip/milan"]) == 2  # 88 days of validity left, 1 blank page
    (london,) = by_trip["Trip/london"]  # expired by departure: no pages, no margin asked
    assert london.severity == "critical" and "before you leave" in london.message


near_miss(
    "passport_domestic_trip_is_not_checked",
    lib.passport_validity,
    [
        add("2024-01-01", "Residence", "home", city="Leeds", country="GB"),
        add("2024-01-01", "Passport", "p", nationality="British", expires="2025-01-01"),
        add(
            "2025-01-10",
            "Trip",
            "edinburgh",
            country="Scotland",
            start="2025-03-01",
            end="2025-03-03",
            international=True,
        ),
    ],
)


def test_trip_alerts_clear_once_the_trip_is_over(tmp_path: Path) -> None:
    """Trip rules re-run as the clock moves: a trip's alerts stand until it ends, not for
    months after, though no record changed."""
    from uac_kernel.workbench import Workbench

    wb = Workbench(tmp_path / "u.duckdb", user="u")
    wb.ingest(
        [
            add("2025-10-30", "Passport", "p", expires="2026-02-19"),
            add("2025-10-30", "DriverLicense", "dl", expires="2025-11-22"),
            add(
                "2025-10-30", "Trip", "milan", country="Italy", start="2025-11-21", end="2025-11-23"
            ),
        ]
    )
    rules = {"passport_validity", "document_expires_before_trip"}
    assert {a.rule for a in wb.alerts()} == rules
    assert {a.rule for a in wb.ingest([clock("2025-11-23T20:00")]).cleared} == set()
    report = wb.ingest([clock("2025-11-24T08:00")])
    assert {a.rule for a in report.cleared} == rules and wb.alerts() == []
    wb.close()


def test_passport_of_named_traveller(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2024-08-10", "Passport", "lily", holder="Lily Chen", expires="2025-04-01"),
            add("2024-08-10", "Passport", "sarah", holder="Sarah Anderson", expires="2033-01-01"),
            add(
                "2025-01-20",
                "Trip",
                "mx",
                country="Mexico",
                start="2025-03-10",
                end="2025-03-17",
                travellers=["Sarah Anderson", "Lily Chen"],
            ),
        ],
    )
    alert = one(lib.passport_validity, view)
    assert keys(alert) == {"Passport/lily", "Trip/mx"} and "Lily Chen" in alert.message


def test_visa_not_yet_valid_on_arrival(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2024-10-30",
                "Visa",
                "au",
                country="Australia",
                starts="2024-12-01",
                expires="2025-05-31",
            ),
            add("2024-10-30", "Passport", "p", expires="2030-01-01"),
            add(
                "2024-11-18",
                "Trip",
                "syd",
                destination="Sydney",
                country="Australia",
                start="2024-11-25",
                end="2024-12-10",
                international=True,
            ),
            add(
                "2024-11-18",
                "Trip",
                "mel",
                destination="Melbourne",
                country="Australia",
                start="2025-01-10",
                end="2025-01-20",
                international=True,
            ),
        ],
    )
    alert = one(lib.visa_validity, view)
    assert alert.severity == "critical" and keys(alert) == {"Visa/au", "Trip/syd"}
    assert "2024-12-01" in alert.message and "6 days after" in alert.message


def test_single_entry_schengen_visa_already_used(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2024-09-20",
                "Visa",
                "sch",
                country="Schengen",
                entries="single",
                starts="2024-10-01",
                expires="2024-12-31",
            ),
            add(
                "2024-11-05",
                "Trip",
                "paris",
                destination="Paris",
                country="France",
                start="2024-10-29",
                end="2024-11-05",
            ),
            add(
                "2024-12-01",
                "Trip",
                "berlin",
                destination="Berlin",
                country="Germany",
                start="2024-12-28",
                end="2025-01-02",
            ),
        ],
    )
    found = {a.message.split(":")[0]: a for a in fire(lib.visa_validity, view)}
    used = next(a for m, a in found.items() if "already used" in m)
    assert used.severity == "critical" and keys(used) == {"Visa/sch", "Trip/berlin", "Trip/paris"}
    expired = next(a for m, a in found.items() if "expires" in m)
    assert "2024-12-31" in expired.message and "2 days before" in expired.message
    assert len(found) == 2


near_miss(
    "visa_near_misses",
    lib.visa_validity,
    [
        add(
            "2024-09-20",
            "Visa",
            "in",
            country="India",
            entries="multiple",
            starts="2024-10-01",
            expires="2025-10-01",
        ),
        add("2024-10-05", "Trip", "delhi", country="India", start="2024-10-05", end="2024-10-12"),
        add("2024-10-05", "Trip", "goa", country="India", start="2024-12-05", end="2024-12-12"),
        add("2024-10-05", "Trip", "rome", country="Italy", start="2024-12-05", end="2024-12-12"),
    ],
)


def test_schengen_90_in_180_days(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2024-06-01",
                "Trip",
                "t1",
                countries=["France", "Italy", "Spain"],
                start="2024-04-15",
                end="2024-05-29",
            ),
            add(
                "2024-07-20",
                "Trip",
                "t2",
                countries=["Germany", "Netherlands"],
                start="2024-07-01",
                end="2024-07-30",
            ),
            add(
                "2024-08-25", "Trip", "t3", country="Portugal", start="2024-09-05", end="2024-09-25"
            ),
            add(
                "2024-08-25",
                "Trip",
                "uk",
                country="United Kingdom",
                start="2024-10-01",
                end="2024-10-30",
            ),
        ],
    )
    alert = one(lib.schengen_90_180, view)
    # The alert names the earlier stays whose days it counted, not only the trip it flags.
    assert alert.severity == "critical" and keys(alert) == {"Trip/t1", "Trip/t2", "Trip/t3"}
    # 45 + 30 days already used, 21 planned
    for needle in ("96 days", "75 days are already used", "at most 15 days remain", "21 days"):
        assert needle in alert.message


near_miss(
    "schengen_near_miss",
    lib.schengen_90_180,
    [
        add("2024-01-01", "Trip", "t1", country="France", start="2024-01-01", end="2024-02-29"),
        add("2024-08-25", "Trip", "t2", country="Spain", start="2024-09-05", end="2024-09-25"),
    ],
)


def test_passport_blank_pages_and_name_mismatch(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2024-07-22",
                "Passport",
                "mine",
                holder="Sarah Anderson",
                expires="2030-01-01",
                blank_pages=1,
            ),
            add("2024-08-10", "Passport", "lily", holder="Lily Chen", expires="2030-01-01"),
            add(
                "2025-01-20",
                "Trip",
                "mx",
                country="Mexico",
                start="2025-03-10",
                end="2025-03-17",
                travellers=["Sarah Anderson", "Tom Anderson", "Lily Anderson"],
            ),
        ],
    )
    alerts = fire(lib.passport_validity, view)
    assert {a.severity for a in alerts} == {"critical"} and len(alerts) == 2
    pages = next(a for a in alerts if "blank page" in a.message)
    assert keys(pages) == {"Passport/mine", "Trip/mx"} and "1 blank page left" in pages.message
    name = next(a for a in alerts if "name" in a.message)
    assert keys(name) == {"Passport/lily", "Trip/mx"}
    assert "'Lily Anderson'" in name.message and "'Lily Chen'" in name.message


def test_document_expiring_before_trip(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2024-07-18", "DriverLicense", "dl", expires="2024-12-15"),
            add("2024-07-18", "Insurance", "ins", name="health insurance", expires="2025-12-31"),
            add(
                "2024-12-01",
                "Trip",
                "vegas",
                destination="Las Vegas",
                start="2024-12-20",
                end="2024-12-22",
            ),
        ],
    )
    alert = one(lib.document_expires_before_trip, view)
    assert alert.severity == "critical" and keys(alert) == {"DriverLicense/dl", "Trip/vegas"}
    assert "2024-12-15" in alert.message and "5 days before" in alert.message


def test_replaced_document_and_certificate(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2024-06-10",
                "HealthCertificate",
                "covid",
                name="EU Digital COVID Certificate",
                expires="2025-03-07",
            ),
            add("2020-01-01", "DriverLicense", "old", expires="2024-12-15"),
            add("2024-12-10", "DriverLicense", "new", expires="2032-12-15"),
            add(
                "2025-02-28",
                "Trip",
                "t",
                destination="Vienna",
                start="2025-03-15",
                end="2025-03-20",
            ),
        ],
    )
    alert = one(lib.document_expires_before_trip, view)
    assert alert.severity == "warning" and keys(alert) == {"HealthCertificate/covid", "Trip/t"}
    assert "8 days before" in alert.message


# -- scheduling -------------------------------------------------------------------------------


def test_double_booked_dinners(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2024-10-28",
                "Reservation",
                "chez",
                name="Chez Laurent",
                start="2024-11-15T19:00:00",
                end="2024-11-15T21:00:00",
            ),
            add(
                "2024-11-10",
                "Reservation",
                "steak",
                name="Steakhouse 55",
                start="2024-11-15T19:30:00",
                end="2024-11-15T21:30:00",
            ),
        ],
    )
    alert = one(lib.overlapping_commitments, view)
    assert alert.severity == "warning" and keys(alert) == {"Reservation/chez", "Reservation/steak"}
    assert "2024-11-15 19:30–21:00" in alert.message


@pytest.mark.parametrize(
    "called_off",
    [
        {"cancelled": True},
        {"canceled": True},
        {"declined": True},
        {"status": "Cancelled"},
        {"status": "canceled by the venue"},
        {"status": "declined"},
        {"status": "void"},
        {"status": "called off"},
    ],
)
def test_a_booking_called_off_by_flag_or_status_collides_with_nothing(
    tmp_path: Path, called_off: dict[str, Any]
) -> None:
    dinner = {"start": "2024-11-15T19:00:00", "end": "2024-11-15T21:00:00"}
    view = build(
        tmp_path,
        [
            add("2024-10-28", "Reservation", "a", name="Chez Laurent", **dinner),
            add("2024-10-28", "Reservation", "b", name="Steakhouse 55", **dinner, **called_off),
        ],
    )
    assert fire(lib.overlapping_commitments, view) == []


@pytest.mark.parametrize("status", ["confirmed", "tentative", "rescheduled", "pending"])
def test_a_status_that_calls_nothing_off_keeps_the_record(tmp_path: Path, status: str) -> None:
    dinner = {"start": "2024-11-15T19:00:00", "end": "2024-11-15T21:00:00"}
    view = build(
        tmp_path,
        [
            add("2024-10-28", "Reservation", "a", name="Chez Laurent", **dinner),
            add("2024-10-28", "Reservation", "b", name="Steakhouse 55", status=status, **dinner),
        ],
    )
    assert len(fire(lib.overlapping_commitments, view)) == 1


near_miss(
    "a_medication_called_off_by_status_interacts_with_nothing",
    lib.drug_drug_interaction,
    [
        add("2024-10-28", "Medication", "w", name="warfarin"),
        add("2024-10-28", "Medication", "i", name="ibuprofen", status="Cancelled"),
    ],
)


def test_overlap_places_times_in_the_zone_a_record_names(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            # 09:00-10:00 in Tokyo (UTC+9) is 00:00-01:00 UTC
            add(
                "2026-03-25",
                "Meeting",
                "tokyo",
                start="2026-04-03T09:00",
                end="2026-04-03T10:00",
                tz="Asia/Tokyo",
            ),
            # 20:30-21:30 EDT (UTC-4) is 00:30-01:30 UTC
            add(
                "2026-03-25",
                "Call",
                "ny",
                start="2026-04-02T20:30",
                end="2026-04-02T21:30",
                timezone="UTC-4",
            ),
            # the same wall clock as the Tokyo meeting, in London (BST, UTC+1): 08:00 UTC
            add(
                "2026-03-25",
                "Meeting",
                "london",
                start="2026-04-03T09:00",
                end="2026-04-03T10:00",
                tz="Europe/London",
            ),
        ],
    )
    alert = one(lib.overlapping_commitments, view)
    assert keys(alert) == {"Meeting/tokyo", "Call/ny"}
    assert "2026-04-03 09:00–10:00 (Asia/Tokyo)" in alert.message
    assert "2026-04-02 20:30–21:30 (UTC-4)" in alert.message
    assert "overlap: 2026-04-03 00:30–01:00 UTC" in alert.message


def test_an_unreadable_zone_leaves_times_as_given(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2026-03-25",
                "Meeting",
                "a",
                start="2026-04-03T09:00",
                end="2026-04-03T10:00",
                tz="../../etc/passwd",
            ),
            add(
                "2026-03-25",
                "Meeting",
                "b",
                start="2026-04-03T09:30",
                end="2026-04-03T10:30",
                tz="UTC+99",
            ),
        ],
    )
    assert "(overlap: 2026-04-03 09:30–10:00)" in one(lib.overlapping_commitments, view).message


def test_trip_over_an_important_event_is_critical(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2024-09-15",
                "Event",
                "play",
                title="Emma's school play",
                start="2024-12-12T18:00:00",
                important=True,
            ),
            add(
                "2024-11-25",
                "Trip",
                "ny",
                destination="New York",
                start="2024-12-11",
                end="2024-12-13",
            ),
            add(
                "2024-11-25",
                "Flight",
                "out",
                start="2024-12-11T08:00:00",
                end="2024-12-11T11:00:00",
            ),
            add(
                "2024-11-25",
                "Hotel",
                "h",
                name="Midtown hotel",
                start="2024-12-11",
                end="2024-12-13",
            ),
            add(
                "2024-11-25",
                "Meeting",
                "client",
                title="client meeting",
                location="New York",
                start="2024-12-12T10:00:00",
                end="2024-12-12T12:00:00",
            ),
        ],
    )
    alert = one(lib.overlapping_commitments, view)
    assert alert.severity == "critical" and keys(alert) == {"Event/play", "Trip/ny"}
    assert "2024-12-12 18:00" in alert.message and "2024-12-11 – 2024-12-13" in alert.message


def test_contractor_visit_during_vacation_and_flight_during_meeting(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2024-10-10",
                "Trip",
                "cr",
                destination="Costa Rica",
                start="2024-12-20",
                end="2025-01-03",
            ),
            add(
                "2024-11-28",
                "Appointment",
                "plumber",
                title="plumber",
                location="home",
                start="2024-12-27T10:00:00",
                end="2024-12-27T14:00:00",
            ),
            add(
                "2024-11-28",
                "Meeting",
                "board",
                title="board meeting",
                start="2025-01-21T14:00:00",
                end="2025-01-21T16:00:00",
            ),
            add("2024-11-28", "Flight", "chi", name="to Chicago", start="2025-01-21T14:30:00"),
        ],
    )
    pairs = {frozenset(keys(a)) for a in fire(lib.overlapping_commitments, view)}
    assert pairs == {
        frozenset({"Trip/cr", "Appointment/plumber"}),
        frozenset({"Meeting/board", "Flight/chi"}),
    }


near_miss(
    "overlap_near_misses",
    lib.overlapping_commitments,
    [
        add("2025-01-01", "Meeting", "a", start="2025-02-01T09:00:00", end="2025-02-01T10:00:00"),
        add("2025-01-01", "Meeting", "b", start="2025-02-01T10:00:00", end="2025-02-01T11:00:00"),
        add(
            "2025-01-01",
            "Meeting",
            "c",
            start="2025-02-01T10:30:00",
            end="2025-02-01T11:30:00",
            cancelled=True,
        ),
        add(
            "2025-01-01",
            "Meeting",
            "old1",
            start="2024-12-01T09:00:00",
            end="2024-12-01T10:00:00",
        ),
        add(
            "2025-01-01",
            "Meeting",
            "old2",
            start="2024-12-01T09:30:00",
            end="2024-12-01T10:30:00",
        ),
        add(
            "2025-01-01",
            "Medication",
            "m",
            name="amoxicillin",
            start="2025-02-01",
            end="2025-02-10",
        ),
        add("2025-01-01", "Subscription", "s", name="gym", start="2025-01-01", end="2025-12-31"),
        add("2025-01-01", "Lease", "l", start="2025-01-01", end="2025-12-31"),
        add("2025-01-01", "Project", "p", name="thesis", start="2025-01-01", end="2025-06-30"),
    ],
)


def test_overlap_sweep_is_fast(tmp_path: Path) -> None:
    events = [clock("2025-01-01")]
    for i in range(3000):
        day, hour = divmod(i, 8)
        s = datetime(2025, 1, 1, 9 + hour) + timedelta(days=day)
        e = s + timedelta(hours=1)
        events.append(add("2025-01-01", "Meeting", f"m{i}", start=s.isoformat(), end=e.isoformat()))
    events.append(
        add(
            "2025-01-01", "Meeting", "clash", start="2025-01-02T09:30:00", end="2025-01-02T09:45:00"
        )
    )
    view = build(tmp_path, events)
    alert = one(lib.overlapping_commitments, view)
    assert keys(alert) == {"Meeting/m8", "Meeting/clash"}


# -- deadlines --------------------------------------------------------------------------------


def test_deadline_severity_by_days_left(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2024-06-15",
                "Warranty",
                "fridge",
                name="LG refrigerator",
                warranty_until="2025-01-10",
            ),
            add(
                "2024-06-15",
                "Purchase",
                "espresso",
                name="espresso machine",
                return_by="2025-01-06",
            ),
            add("2024-06-15", "Task", "taxes", title="file taxes", deadline="2025-01-02"),
            add("2024-06-15", "Task", "far", title="far away", deadline="2025-01-16"),
            add("2024-06-15", "Task", "done", title="done", deadline="2025-01-02", done=True),
            add("2024-06-15", "Task", "past", title="missed", deadline="2024-12-30"),
            add("2024-06-15", "Passport", "p", expires="2025-01-05"),
            clock("2025-01-01"),
        ],
    )
    alerts = {next(iter(keys(a))): a for a in fire(lib.deadline_approaching, view)}
    assert set(alerts) == {"Warranty/fridge", "Purchase/espresso", "Task/taxes", "Task/past"}
    assert alerts["Task/past"].severity == "critical"
    assert "passed 2 days ago" in alerts["Task/past"].message
    assert (
        alerts["Warranty/fridge"].severity == "info"
        and "in 9 days" in alerts["Warranty/fridge"].message
    )
    assert (
        alerts["Purchase/espresso"].severity == "warning"
        and "in 5 days" in alerts["Purchase/espresso"].message
    )
    assert (
        alerts["Task/taxes"].severity == "critical" and "tomorrow" in alerts["Task/taxes"].message
    )
    assert all(a.category == "warranty_deadline_expiration" for a in alerts.values())


def test_notice_deadline_before_renewal(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2024-09-10",
                "Subscription",
                "gym",
                name="gym membership",
                renews_on="2024-11-01",
                notice_days=30,
                price=600.0,
            ),
            clock("2024-09-28"),
        ],
    )
    alert = one(lib.deadline_approaching, view)
    assert (
        alert.severity == "warning"
        and "2024-10-02" in alert.message
        and "in 4 days" in alert.message
    )


def test_deadline_rule_reruns_when_the_clock_moves(tmp_path: Path) -> None:
    store, st = Store(tmp_path / "u.duckdb"), State("u")

    def append(events: list[dict[str, Any]]) -> None:
        st.apply_all(store.append(plan_batch(st, parse_objects(events))))

    append([add("2024-10-08", "Purchase", "esp", name="espresso machine", return_by="2024-11-01")])
    view, runner = UserView(st), RuleRunner(lib.LIBRARY)
    assert runner.run(view, None).raised == []  # 24 days left
    append([clock("2024-10-29")])
    raised = runner.run(view, set(), clock_moved=True).raised
    assert [(a.rule, a.severity) for a in raised] == [("deadline_approaching", "warning")]
    assert "in 3 days" in raised[0].message


# -- contradictions ---------------------------------------------------------------------------


def test_two_current_residences(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2020-01-01", "Residence", "boston", city="Boston", since="2020-01-01"),
            add("2024-05-01", "Residence", "denver", city="Denver", since="2024-05-01"),
        ],
    )
    alert = one(lib.conflicting_records, view)
    assert alert.severity == "warning" and keys(alert) == {"Residence/boston", "Residence/denver"}
    assert "2 current Residence" in alert.message and "until" in alert.message


near_miss(
    "moved_residence_with_until_is_not_a_contradiction",
    lib.conflicting_records,
    [
        add("2020-01-01", "Residence", "boston", city="Boston", since="2020-01-01"),
        add("2024-05-01", "Residence", "denver", city="Denver", since="2024-05-01"),
        fact("2024-05-01", "update", "Residence", "boston", until="2024-04-30"),
        add("2024-05-01", "Residence", "next", city="Austin", since="2025-06-01"),
    ],
)


def test_same_identity_different_values(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2024-01-01", "Passport", "p1", number="X123", expires="2030-01-01"),
            add("2024-02-01", "Passport", "p2", number="x123", expires="2031-01-01"),
            add("2024-01-01", "Person", "mom", name="Ana Silva", birthday="1960-04-02"),
            add("2024-01-01", "Contact", "ana", name="ana silva", birthday="1960-02-04"),
            add("2024-01-01", "Person", "dad", name="Rui Silva", birthday="1958-01-01"),
            add("2024-01-01", "Contact", "rui", name="Rui Silva", birthday="1958-01-01"),
            add("2024-01-01", "Allergy", "a1", substance="Latex"),
            add("2024-01-01", "Allergy", "a2", substance="latex", resolved=True),
        ],
    )
    found = {frozenset(keys(a)) for a in fire(lib.conflicting_records, view)}
    assert found == {
        frozenset({"Passport/p1", "Passport/p2"}),
        frozenset({"Person/mom", "Contact/ana"}),
        frozenset({"Allergy/a1", "Allergy/a2"}),
    }


# -- money ------------------------------------------------------------------------------------


def test_transfer_while_account_is_frozen(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2024-09-05",
                "Instruction",
                "mom",
                action="wire",
                account="family trust account",
                amount=5000,
                to="contractor, Chase account ending 4477",
            ),
            add(
                "2024-09-06",
                "Instruction",
                "dad",
                action="freeze all outflows",
                account="family trust",
                until="2024-09-30",
            ),
        ],
    )
    alert = one(lib.transfer_during_freeze, view)
    assert alert.severity == "critical" and keys(alert) == {"Instruction/mom", "Instruction/dad"}
    assert "5,000.00" in alert.message and "2024-09-30" in alert.message


near_miss(
    "transfer_freeze_near_misses",
    lib.transfer_during_freeze,
    [
        add("2024-09-05", "Transfer", "t1", account="joint checking", amount=100.0),
        add(
            "2024-09-05",
            "Transfer",
            "t2",
            account="family trust",
            amount=100.0,
            date="2024-10-15",
        ),
        add("2024-09-05", "Transfer", "t3", account="family trust", amount=100.0, done=True),
        add("2024-09-06", "Freeze", "f", account="family trust", until="2024-09-30"),
        add("2024-08-01", "Freeze", "old", account="joint checking", until="2024-08-31"),
    ],
)


def test_charge_after_cancelled_subscription(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2024-08-22",
                "Subscription",
                "adobe",
                name="Adobe Creative Cloud",
                cancelled=True,
                cancel_effective="2024-09-15",
            ),
            add("2024-08-22", "Subscription", "netflix", name="Netflix"),
            add(
                "2025-01-20", "Transaction", "t1", merchant="Adobe", amount=59.99, date="2025-01-15"
            ),
            add(
                "2025-01-20", "Transaction", "t2", merchant="Adobe", amount=59.99, date="2024-09-01"
            ),
            add(
                "2025-01-20",
                "Transaction",
                "t3",
                merchant="Netflix",
                amount=15.49,
                date="2025-01-03",
            ),
            add(
                "2025-01-20", "Transaction", "t4", merchant="Apple", amount=0.99, date="2025-01-03"
            ),
        ],
    )
    alert = one(lib.charge_after_cancellation, view)
    assert alert.severity == "warning" and keys(alert) == {"Subscription/adobe", "Transaction/t1"}
    assert (
        "59.99" in alert.message
        and "122 days after" in alert.message
        and "2024-09-15" in alert.message
    )


def test_payment_from_closed_account(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2024-09-18",
                "Account",
                "wf",
                name="Wells Fargo checking",
                closing=True,
                closes_on="2024-09-25",
            ),
            add("2024-09-18", "Account", "schwab", name="Schwab checking"),
            add(
                "2024-10-02",
                "Payment",
                "rent",
                name="rent",
                amount=1500,
                account="Wells Fargo",
                recurring=True,
                due="2024-11-01",
            ),
            add("2024-10-02", "Payment", "phone", name="phone bill", amount=80, account="Schwab"),
        ],
    )
    alert = one(lib.payment_from_closed_account, view)
    assert alert.severity == "critical" and keys(alert) == {"Account/wf", "Payment/rent"}
    assert "1,500.00" in alert.message and "closed on 2024-09-25" in alert.message


def test_transaction_over_limit(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2024-07-10",
                "Limit",
                "corp",
                name="corporate card limit",
                card="corporate card",
                amount=3000,
                per="transaction",
            ),
            add("2024-07-10", "Limit", "monthly", card="corporate card", amount=1000, per="month"),
            add(
                "2025-01-15",
                "Transaction",
                "venue",
                name="team offsite venue",
                amount=4200,
                card="corporate card",
            ),
            add(
                "2025-01-15",
                "Transaction",
                "small",
                name="lunch",
                amount=2500,
                card="corporate card",
            ),
            add(
                "2025-01-15",
                "Transaction",
                "personal",
                name="tv",
                amount=4200,
                card="personal Visa",
            ),
            add(
                "2025-01-15",
                "Transaction",
                "ok",
                name="hotel",
                amount=5200,
                card="corporate card",
                approved=True,
            ),
            add(
                "2024-07-01",
                "Transaction",
                "before",
                name="old",
                amount=5200,
                card="corporate card",
                date="2024-07-01",
            ),
        ],
    )
    alert = one(lib.transaction_over_limit, view)
    assert alert.severity == "warning" and keys(alert) == {"Limit/corp", "Transaction/venue"}
    assert "4,200.00" in alert.message and "1,200.00 over" in alert.message


# -- behaviour added for the alert bench (uac bench alerts) ------------------------------------


def test_meal_bookings_without_an_end_hold_the_table(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2024-10-28",
                "Reservation",
                "chez",
                name="Chez Laurent",
                start="2024-11-15T19:00:00",
            ),
            add(
                "2024-11-10",
                "Reservation",
                "steak",
                name="Steakhouse 55",
                start="2024-11-15T19:30:00",
            ),
        ],
    )
    alert = one(lib.overlapping_commitments, view)
    assert keys(alert) == {"Reservation/chez", "Reservation/steak"}
    assert (
        "19:00 (about 90 min)" in alert.message
        and "overlap: from 2024-11-15 19:30" in alert.message
    )


near_miss(
    "meal_and_instant_near_misses",
    lib.overlapping_commitments,
    [
        # two hours apart: the first dinner is over
        add("2024-10-28", "Reservation", "early", name="bistro", start="2024-11-15T18:00:00"),
        add("2024-10-28", "Reservation", "late", name="bar", start="2024-11-15T20:00:00"),
        # instants of other types stay instants
        add("2024-10-28", "Meeting", "a", title="call", start="2024-11-16T09:00:00"),
        add("2024-10-28", "Meeting", "b", title="call", start="2024-11-16T09:30:00"),
    ],
)


def test_flight_before_hotel_checkout(tmp_path: Path) -> None:
    events = [
        add("2024-11-01", "Flight", "home", origin="Miami", start="2025-03-15T07:00:00"),
        add(
            "2024-12-15",
            "Hotel",
            "h",
            name="Fontainebleau",
            start="2025-03-12",
            end="2025-03-15T12:00:00",
        ),
    ]
    alert = one(lib.overlapping_commitments, build(tmp_path, events))
    assert keys(alert) == {"Flight/home", "Hotel/h"} and alert.severity == "warning"
    assert "2025-03-12 – 2025-03-15 12:00" in alert.message


def test_hotel_checkout_near_misses_and_a_double_stay(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2024-12-15",
                "Hotel",
                "h",
                name="Fontainebleau",
                start="2025-03-12",
                end="2025-03-15T12:00:00",
            ),
            # arriving on the first day of the stay, leaving after the checkout
            add("2024-12-15", "Flight", "in", destination="Miami", start="2025-03-12T10:00:00"),
            add("2024-12-15", "Flight", "out", origin="Miami", start="2025-03-15T15:00:00"),
            # a second stay from the same first day is a double booking, not an arrival
            add(
                "2024-12-15",
                "Hotel",
                "h3",
                name="Motel",
                start="2025-03-12",
                end="2025-03-13T10:00:00",
            ),
            # hotel nights as dates (no checkout time) are not compared with flight times
            add("2024-12-15", "Hotel", "h2", name="Inn", start="2025-04-01", end="2025-04-03"),
            add("2024-12-15", "Flight", "mid", start="2025-04-02T08:00:00"),
        ],
    )
    alert = one(lib.overlapping_commitments, view)
    assert keys(alert) == {"Hotel/h", "Hotel/h3"}


def test_flight_during_a_weekly_meeting(tmp_path: Path) -> None:
    board = add(
        "2024-09-10",
        "Meeting",
        "board",
        title="board meeting",
        weekday="Tuesday",
        start_time="2 PM",
        end_time="16:00",
        mandatory=True,
    )
    flight = add("2025-01-14", "Flight", "chi", destination="Chicago", start="2025-01-21T14:30:00")
    alert = one(lib.overlapping_commitments, build(tmp_path, [board, flight]))
    assert alert.severity == "critical" and keys(alert) == {"Meeting/board", "Flight/chi"}
    assert "every Tuesday 14:00–16:00" in alert.message and "2025-01-21" in alert.message


def test_weekly_from_a_dated_first_occurrence(tmp_path: Path) -> None:
    yoga = add(
        "2025-01-01",
        "Class",
        "yoga",
        title="yoga",
        start="2025-01-06T18:00:00",
        end="2025-01-06T19:00:00",
        recurrence="weekly",
    )
    dentist = add("2025-01-01", "Appointment", "d", title="dentist", start="2025-02-03T18:30:00")
    alert = one(lib.overlapping_commitments, build(tmp_path, [yoga, dentist]))
    assert alert.severity == "warning" and "(the one on 2025-02-03)" in alert.message


def test_weekly_near_misses(tmp_path: Path) -> None:
    def meeting(key: str, **fields: Any) -> dict[str, Any]:
        base = {"title": key, "weekday": "Tuesday", "start_time": "14:00", "end_time": "16:00"}
        return add("2024-09-10", "Meeting", key, **{**base, **fields})

    view = build(
        tmp_path,
        [
            meeting("board", skip_dates=["2025-01-21"]),
            meeting("later", since="2025-02-01"),
            meeting("monthly", recurrence="monthly"),
            meeting("fortnightly", recurrence="every other week"),
            add("2025-01-14", "Flight", "chi", start="2025-01-21T14:30:00"),  # skipped that day
            add("2025-01-14", "Flight", "wed", start="2025-01-22T14:30:00"),  # a Wednesday
            add("2025-01-14", "Flight", "eve", start="2025-01-28T16:00:00"),  # as it ends
            # a trip over a Tuesday is not set against a weekly meeting that is not important
            add(
                "2025-01-14",
                "Trip",
                "t",
                destination="Lisbon",
                start="2025-02-10",
                end="2025-02-14",
            ),
        ],
    )
    assert fire(lib.overlapping_commitments, view) == []
    (tmp_path / "important").mkdir()
    view = build(
        tmp_path / "important",
        [
            meeting("board", important=True),
            add("2025-01-14", "Trip", "t", start="2025-02-10", end="2025-02-14"),
        ],
    )
    alert = one(lib.overlapping_commitments, view)
    assert alert.severity == "critical" and "(the one on 2025-02-11)" in alert.message


def test_clock_times() -> None:
    t = time
    for text, want in [("14:00", t(14)), ("2 PM", t(14)), ("2:30pm", t(14, 30)), ("12 a.m.", t(0))]:
        assert _clock_time(text) == want
    assert _clock_time("noon") == t(12) and _clock_time("9:05:00") == t(9, 5)
    for bad in ("25:00", "13 PM", "soon", "", 14):
        assert _clock_time(bad) is None


def test_warranty_end_is_flagged_a_month_ahead(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2024-06-15",
                "Purchase",
                "fridge",
                item="LG refrigerator",
                warranty_until="2025-01-10",
            ),
            add("2024-06-15", "Purchase", "tv", item="TV", warranty_until="2025-01-20"),  # 31 days
            add("2024-06-15", "Purchase", "lamp", item="lamp", return_by="2025-01-10"),  # 21 days
            clock("2024-12-20"),
        ],
    )
    alert = one(lib.deadline_approaching, view)
    assert keys(alert) == {"Purchase/fridge"} and alert.severity == "info"
    assert "in 21 days" in alert.message


def test_us_tax_return_due_date() -> None:
    assert _us_filing_due(2024, False) == date(2025, 4, 15)
    assert _us_filing_due(2022, False) == date(2023, 4, 18)  # weekend, then Emancipation Day
    assert _us_filing_due(2021, False) == date(2022, 4, 18)  # Emancipation Day on Friday
    assert _us_filing_due(2024, True) == date(2025, 10, 15)
    assert _us_filing_due(2025, True) == date(2026, 10, 15)


def test_unfiled_tax_return_before_the_deadline(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2024-11-05", "TaxReturn", "t2024", tax_year=2024, income=["W-2 job", "freelancing"]
            ),
            clock("2025-04-01"),
        ],
    )
    alert = one(lib.tax_filing_deadline, view)
    assert alert.severity == "info" and "due 2025-04-15, in 14 days" in alert.message
    assert "Form 4868" in alert.message and alert.category == "warranty_deadline_expiration"


def test_tax_return_near_misses(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2024-11-05", "TaxReturn", "filed", tax_year=2024, filed=True),
            add("2024-11-05", "TaxReturn", "ca", tax_year=2024, country="Canada"),
            add("2024-11-05", "TaxReturn", "own", tax_year=2024, due="2025-04-30"),
            add("2024-11-05", "TaxReturn", "ext", tax_year=2024, extension=True),
            add("2024-11-05", "TaxReturn", "odd", tax_year=10**9, year="2024"),
            clock("2025-04-01"),
        ],
    )
    assert fire(lib.tax_filing_deadline, view) == []
    (tmp_path / "early").mkdir()
    early = build(
        tmp_path / "early",
        [add("2024-11-05", "TaxReturn", "t", tax_year=2024), clock("2025-03-15")],
    )
    assert fire(lib.tax_filing_deadline, early) == []  # 31 days ahead


def test_scuba_course_with_asthma(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2024-08-20", "Condition", "asthma", name="asthma", status="acting up"),
            add(
                "2025-01-05",
                "Course",
                "padi",
                name="PADI scuba diving certification course",
                location="Cozumel",
            ),
        ],
    )
    alert = one(lib.activity_medical_clearance, view)
    assert alert.severity == "critical" and keys(alert) == {"Condition/asthma", "Course/padi"}
    assert "physician's written approval" in alert.message


def test_activity_clearance_near_misses(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2024-08-20", "Condition", "asthma", name="asthma", resolved=True),
            add("2024-08-20", "Condition", "knee", name="sore knee"),
            add("2025-01-05", "Course", "padi", name="PADI open water diver course"),
            add("2025-01-05", "Activity", "hike", name="hiking", start="2025-02-01"),
        ],
    )
    assert fire(lib.activity_medical_clearance, view) == []
    (tmp_path / "b").mkdir()
    view = build(
        tmp_path / "b",
        [
            add("2024-08-20", "Condition", "asthma", name="asthma"),
            add("2025-01-05", "Course", "cleared", name="scuba course", cleared=True),
            add(
                "2025-01-05",
                "Trip",
                "past",
                activity="scuba diving",
                start="2024-12-01",
                end="2024-12-05",
            ),
            add("2025-01-05", "Activity", "sky", name="skydiving"),
        ],
    )
    assert fire(lib.activity_medical_clearance, view) == []


def test_wash_sale_across_accounts(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2024-11-20",
                "Trade",
                "buy",
                action="buy",
                symbol="VTI",
                shares=100,
                account="Roth IRA",
                date="2024-11-20",
            ),
            add(
                "2024-12-10",
                "Trade",
                "sell",
                action="sell",
                symbol="VTI",
                account="taxable",
                purpose="tax-loss harvesting",
                status="planned",
            ),
        ],
    )
    alert = one(lib.wash_sale, view)
    assert keys(alert) == {"Trade/buy", "Trade/sell"} and alert.severity == "warning"
    assert "20 days after" in alert.message and "for good" in alert.message
    assert "sell on or after 2024-12-21" in alert.message


def test_wash_sale_buy_after_the_sale(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2024-12-01", "Sale", "s", ticker="ABC", loss=1200.0, date="2024-12-01"),
            add("2024-12-01", "Buy", "b", ticker="abc", date="2024-12-20"),
        ],
    )
    alert = one(lib.wash_sale, view)
    assert "19 days before" in alert.message and "buy no earlier than 2025-01-01" in alert.message
    assert "for good" not in alert.message


near_miss(
    "wash_sale_near_misses",
    lib.wash_sale,
    [
        add("2024-10-01", "Trade", "old", action="buy", symbol="VTI", date="2024-10-01"),
        add(
            "2024-12-10",
            "Trade",
            "sell",
            action="sell",
            symbol="VTI",
            loss=3000,
            date="2024-12-10",
        ),  # 70 days on
        add("2024-12-01", "Trade", "b2", action="buy", symbol="VXUS", date="2024-12-01"),
        add(
            "2024-12-05",
            "Trade",
            "gain",
            action="sell",
            symbol="VXUS",
            gain=500,
            date="2024-12-05",
        ),
        add(
            "2024-12-01",
            "Trade",
            "b3",
            action="buy",
            symbol="BND",
            date="2024-12-01",
            cancelled=True,
        ),
        add(
            "2024-12-05",
            "Trade",
            "s3",
            action="sell",
            symbol="BND",
            loss=100,
            date="2024-12-05",
        ),
    ],
)


def test_speculative_buy_against_conservative_stance(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2024-08-10", "InvestmentPreference", "p", risk_tolerance="conservative"),
            add(
                "2024-11-05",
                "Trade",
                "biotech",
                action="buy",
                security="small-cap biotech",
                amount=15000,
                volatility="very high",
            ),
        ],
    )
    alert = one(lib.investment_against_risk_tolerance, view)
    assert (
        keys(alert) == {"InvestmentPreference/p", "Trade/biotech"} and alert.severity == "warning"
    )
    assert "15,000.00 is very high risk" in alert.message and "conservative" in alert.message


def test_risk_tolerance_near_misses(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2024-08-10", "InvestmentPreference", "p", risk_tolerance="conservative"),
            add("2024-11-05", "Trade", "bond", action="buy", security="treasury fund", risk="low"),
            add(
                "2024-11-05",
                "Trade",
                "done",
                action="buy",
                security="crypto",
                risk="high",
                executed=True,
            ),
            add(
                "2024-11-05",
                "Trade",
                "past",
                action="buy",
                security="options",
                risk="high",
                date="2024-10-01",
            ),
        ],
    )
    assert fire(lib.investment_against_risk_tolerance, view) == []
    (tmp_path / "b").mkdir()
    bold = build(
        tmp_path / "b",
        [
            add("2024-08-10", "Profile", "p", risk_tolerance="aggressive"),
            add("2024-11-05", "Trade", "x", action="buy", risk="high"),
        ],
    )
    assert fire(lib.investment_against_risk_tolerance, bold) == []


def test_new_rules_survive_odd_values(tmp_path: Path) -> None:
    odd: dict[str, Any] = {
        "weekday": "Tuesday",
        "start_time": "25:99",
        "end_time": "??",
        "skip_dates": ["not a date"],
        "recurrence": "weekly",
        "tax_year": True,
        "year": 10**12,
        "symbol": "",
        "action": "sell",
        "loss": "??",
        "risk_tolerance": "??",
        "volatility": "??",
        "name": "scuba",
    }
    types = ["Meeting", "TaxReturn", "Trade", "Course", "Profile", "Condition"]
    view = build(
        tmp_path, [clock("2025-01-01"), *(add("2025-01-01", t, "odd", **odd) for t in types)]
    )
    runner = RuleRunner(lib.LIBRARY)
    runner.run(view, None)
    assert not [a for a in runner.standing() if a.category == "rule_error"]


def test_tax_year_written_as_text(tmp_path: Path) -> None:
    view = build(tmp_path, [add("2024-11-05", "Taxes", "t", tax_year="2024"), clock("2025-04-13")])
    assert one(lib.tax_filing_deadline, view).severity == "critical"  # in 2 days


def test_indexed_rules_follow_updates_retracts_and_reopening(tmp_path: Path) -> None:
    """Rules that read through the fold's field indexes see every later change of a record."""
    from uac_kernel.workbench import Workbench

    def upd(ts: str, type_: str, key: str, **fields: Any) -> dict[str, Any]:
        return fact(ts, "update", type_, key, **fields)

    def rules_of(wb: Workbench) -> list[str]:
        return sorted(a.rule for a in wb.alerts())

    path = tmp_path / "u.duckdb"
    wb = Workbench(path, user="u")
    wb.ingest(
        [
            add("2025-03-01T09:00", "Purchase", "lamp", item="lamp", return_by="2025-02-20"),
            add("2025-03-01T09:01", "Limit", "card", amount=100.0, card="visa"),
            add(
                "2025-03-01T09:02", "Transaction", "t1", amount=50.0, card="visa", date="2025-03-01"
            ),
            add("2025-03-01T09:03", "Medication", "simva", name="simvastatin"),
            add("2025-03-01T09:04", "Meal", "m1", item="grapefruit juice", date="2025-02-28"),
        ]
    )
    assert rules_of(wb) == []  # a closed return window, a small charge, a meal already eaten
    report = wb.ingest([upd("2025-03-02T09:00", "Purchase", "lamp", return_by="2025-03-06")])
    assert [a.rule for a in report.raised] == ["deadline_approaching"]
    wb.ingest(
        [add("2025-03-02T09:01", "Transaction", "t2", amount=150.0, card="visa", date="2025-03-02")]
    )
    wb.ingest([add("2025-03-02T09:02", "Meal", "m2", item="grapefruit", date="2025-03-02")])
    assert rules_of(wb) == [
        "deadline_approaching",
        "food_drug_interaction",
        "transaction_over_limit",
    ]
    wb.close()
    wb = Workbench(path, user="u")  # indexes rebuilt from the log give the same alerts
    assert rules_of(wb) == [
        "deadline_approaching",
        "food_drug_interaction",
        "transaction_over_limit",
    ]
    report = wb.ingest(
        [
            upd("2025-03-03T09:00", "Purchase", "lamp", returned=True),
            upd("2025-03-03T09:01", "Transaction", "t2", amount=80.0),
            fact("2025-03-03T09:02", "retract", "Meal", "m2"),
        ]
    )
    assert sorted(a.rule for a in report.cleared) == [
        "deadline_approaching",
        "food_drug_interaction",
        "transaction_over_limit",
    ]
    assert rules_of(wb) == []
    wb.close()


# -- overdue, cancelled, gaps and unknown ends ------------------------------------------------


def upd(ts: str, type_: str, key: str, **fields: Any) -> dict[str, Any]:
    return fact(ts, "update", type_, key, **fields)


def test_overdue_obligation_escalates_under_one_id_until_done(tmp_path: Path) -> None:
    store, st = Store(tmp_path / "u.duckdb"), State("u")

    def append(events: list[dict[str, Any]]) -> None:
        st.apply_all(store.append(plan_batch(st, parse_objects(events))))

    append([add("2026-02-01", "Task", "permit", title="renew parking permit", due="2026-03-10")])
    view, runner = UserView(st), RuleRunner([lib.deadline_approaching])
    append([clock("2026-03-05")])
    (warn,) = runner.run(view, None).raised
    assert warn.severity == "warning" and "in 5 days" in warn.message
    append([clock("2026-03-13")])
    change = runner.run(view, set(), clock_moved=True)
    (late,) = change.raised or change.updated
    assert late.id == warn.id and late.severity == "critical" and change.cleared == []
    assert "passed 3 days ago" in late.message and "overdue" in late.message
    append([upd("2026-03-14", "Task", "permit", status="Done")])
    assert fire(lib.deadline_approaching, view) == []


near_miss(
    "a_closed_window_is_not_overdue",
    lib.deadline_approaching,
    [
        add("2026-01-04", "Purchase", "lamp", name="floor lamp", return_by="2026-02-03"),
        add("2026-01-04", "Bill", "water", name="water bill", due="2026-02-01", paid=True),
        clock("2026-02-09"),
    ],
)


def test_overdue_tax_return_until_filed(tmp_path: Path) -> None:
    events = [add("2022-09-01", "TaxReturn", "t22", tax_year=2022), clock("2023-05-02")]
    alert = one(lib.tax_filing_deadline, build(tmp_path, events))
    # 2023-04-15 is a Saturday and Emancipation Day is observed on Monday the 17th.
    assert alert.severity == "critical" and "was due 2023-04-18, 14 days ago" in alert.message
    assert "5% of the unpaid tax" in alert.message
    (tmp_path / "filed").mkdir()
    filed = [*events, upd("2023-05-03", "TaxReturn", "t22", status="filed")]
    assert fire(lib.tax_filing_deadline, build(tmp_path / "filed", filed)) == []


def test_cancelled_policy_covers_nothing(tmp_path: Path) -> None:
    trip = add(
        "2026-05-02", "Trip", "lisbon", destination="Lisbon", start="2026-06-11", end="2026-06-18"
    )
    for i, void in enumerate(({"status": "Cancelled"}, {"lapsed": True}, {"terminated": True})):
        (tmp_path / str(i)).mkdir()
        view = build(
            tmp_path / str(i),
            [
                add(
                    "2026-01-15", "TravelInsurance", "ti", provider="Allianz", expires="2027-01-14"
                ),
                trip,
                upd("2026-05-20", "TravelInsurance", "ti", **void),
            ],
        )
        alert = one(lib.document_expires_before_trip, view)
        assert alert.severity == "critical", void
        assert (
            "covers nothing" in alert.message
            and "on 8 days: 2026-06-11 – 2026-06-18" in alert.message
        )


def test_a_later_policy_does_not_mask_a_gap(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2025-08-01", "HealthInsurance", "old", provider="Aetna", expires="2026-07-31"),
            add(
                "2026-06-20",
                "HealthInsurance",
                "new",
                provider="Cigna",
                effective="2026-08-20",
                expires="2027-08-19",
            ),
            add(
                "2026-07-01",
                "Trip",
                "oslo",
                destination="Oslo",
                start="2026-07-25",
                end="2026-08-22",
            ),
            clock("2026-07-02"),
        ],
    )
    alerts = fire(lib.document_expires_before_trip, view)
    gap = [a for a in alerts if "Trip/oslo" in keys(a)]
    between = [a for a in alerts if "Trip/oslo" not in keys(a)]
    assert len(gap) == 1 and gap[0].severity == "warning"
    assert "on 19 days: 2026-08-01 – 2026-08-19" in gap[0].message
    assert len(between) == 1 and keys(between[0]) == {"HealthInsurance/old", "HealthInsurance/new"}
    assert "2026-08-01 – 2026-08-19 (19 days)" in between[0].message
    (tmp_path / "dep").mkdir()
    later = build(
        tmp_path / "dep",
        [
            add("2025-08-01", "HealthInsurance", "old", expires="2026-07-31"),
            add("2026-06-20", "HealthInsurance", "new", starts="2026-08-20", expires="2027-08-19"),
            add(
                "2026-07-01", "Trip", "t", destination="Quito", start="2026-08-10", end="2026-08-25"
            ),
        ],
    )
    (alert,) = [a for a in fire(lib.document_expires_before_trip, later) if "Trip/t" in keys(a)]
    assert alert.severity == "critical" and "on 10 days: 2026-08-10 – 2026-08-19" in alert.message


near_miss(
    "continuous_policies_and_open_ended_documents_are_silent",
    lib.document_expires_before_trip,
    [
        add("2025-08-01", "HealthInsurance", "a", expires="2026-07-31"),
        add(
            "2026-06-20",
            "HealthInsurance",
            "b",
            effective_from="2026-08-01",
            expires="2027-07-31",
        ),
        add("2025-03-01", "DriverLicense", "dl", number="D123"),
        add("2026-07-01", "Trip", "t", destination="Perth", start="2026-07-25", end="2026-08-12"),
    ],
)


def test_trip_without_an_end_is_not_a_one_day_trip(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2019-03-01", "Passport", "p", holder="me", expires="2026-11-20", country="USA"),
            add(
                "2026-08-01",
                "Trip",
                "peru",
                destination="Cusco",
                country="Peru",
                start="2026-09-01",
            ),
        ],
    )
    alert = one(lib.passport_validity, view)
    assert alert.severity == "critical" and "return date is not recorded" in alert.message
    assert "at most 80 days after you come back" in alert.message
    (tmp_path / "days").mkdir()
    stated = build(
        tmp_path / "days",
        [
            add("2019-03-01", "Passport", "p", expires="2026-09-10", country="USA"),
            add(
                "2026-08-01",
                "Trip",
                "t",
                destination="Lima",
                country="Peru",
                start="2026-09-01",
                days=14,
            ),
        ],
    )
    assert "during your trip" in one(lib.passport_validity, stated).message  # ends 09-14


def test_visa_and_documents_with_an_unknown_return(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2026-05-01", "Visa", "v", country="India", expires="2026-10-30"),
            add("2026-05-01", "DriverLicense", "dl", expires="2026-09-20"),
            add("2026-08-01", "Trip", "t", destination="Pune", country="India", start="2026-09-01"),
        ],
    )
    visa = one(lib.visa_validity, view)
    assert visa.severity == "warning" and "no return date recorded" in visa.message
    assert fire(lib.document_expires_before_trip, view) == []  # the first day is covered


def test_schengen_with_an_unknown_return_and_a_stated_length(tmp_path: Path) -> None:
    past = add("2026-03-01", "Trip", "it", country="Italy", start="2026-02-01", end="2026-03-31")
    view = build(
        tmp_path,
        [
            past,
            add("2026-04-20", "Trip", "fr", country="France", start="2026-05-10"),
            clock("2026-04-20"),
        ],
    )
    alert = one(lib.schengen_90_180, view)
    # 59 days used from Feb 1 to Mar 31; from May 10, 31 more keep the count at 90.
    assert alert.severity == "warning" and "leave by 2026-06-09 (31 days at most)" in alert.message
    (tmp_path / "stated").mkdir()
    longer = add(
        "2026-03-05", "Trip", "it", country="Italy", start="2026-02-05", end="2026-03-04", days=40
    )
    plan = add("2026-04-20", "Trip", "es", country="Spain", start="2026-06-01", end="2026-07-31")
    alert = one(
        lib.schengen_90_180, build(tmp_path / "stated", [longer, plan, clock("2026-04-20")])
    )
    # By dates 28 + 61 = 89 days; the stated 40 days make it 101.
    assert alert.severity == "critical" and "to 101 days" in alert.message
    assert "states 40 days, 12 days more" in alert.message and keys(alert) == {"Trip/it", "Trip/es"}


def test_overlap_with_a_trip_of_unknown_end_checks_its_first_day(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2026-04-01", "Trip", "t", destination="Denver", start="2026-05-04"),
            add("2026-04-01", "Appointment", "later", title="dentist", start="2026-05-06T09:00:00"),
            add("2026-04-01", "Appointment", "same", title="physio", start="2026-05-04T15:00:00"),
        ],
    )
    alert = one(lib.overlapping_commitments, view)
    assert keys(alert) == {"Trip/t", "Appointment/same"} and "end not recorded" in alert.message


# -- medication supply ------------------------------------------------------------------------


def test_supply_runs_out_before_refill_and_trip(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2026-03-02",
                "Medication",
                "levo",
                name="levothyroxine",
                pills_left=20,
                times_per_day=1,
                as_of="2026-03-02",
                next_refill="2026-03-29",
            ),
            add(
                "2026-03-02",
                "Medication",
                "metformin",
                name="metformin",
                quantity=84,
                times_per_day=2,
                pills_per_dose=1,
            ),
            add(
                "2026-03-03",
                "Trip",
                "t",
                destination="Nairobi",
                start="2026-03-25",
                end="2026-04-20",
            ),
            clock("2026-03-05"),
        ],
    )
    alerts = fire(lib.medication_supply, view)
    by = {
        (next(k for k in keys(a) if k.startswith("Medication")), "Trip/t" in keys(a)): a
        for a in alerts
    }
    refill = by[("Medication/levo", False)]
    # 20 tablets from 2026-03-02 at 1 a day last through 03-21: 7 days short of the refill.
    assert refill.severity == "warning" and "runs out on 2026-03-22" in refill.message
    assert "7 days before its next refill on 2026-03-29" in refill.message
    # metformin 84 at 2 a day from 03-02 (when stated) lasts 42 days: out 04-13, mid-trip.
    trip = by[("Medication/metformin", True)]
    assert "runs out on 2026-04-13" in trip.message and "while you are away" in trip.message
    # The refill is due after departure, so levothyroxine runs short for the trip too.
    assert "before you leave" in by[("Medication/levo", True)].message
    assert len(alerts) == 3


def test_supply_ran_out_and_near_misses(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2026-01-10",
                "Medication",
                "ran",
                name="sertraline",
                count=30,
                per_day=1,
                as_of="2026-01-10",
            ),
            add(
                "2026-01-10",
                "Medication",
                "prn",
                name="albuterol",
                count=2,
                per_day=4,
                as_needed=True,
            ),
            add(
                "2026-01-10",
                "Medication",
                "stop",
                name="lisinopril",
                count=5,
                per_day=1,
                active=False,
            ),
            add("2026-01-10", "Medication", "plenty", name="atorvastatin", count=90, per_day=1),
            add("2026-01-10", "Medication", "norate", name="aspirin", count=3),
            clock("2026-02-15"),
        ],
    )
    alert = one(lib.medication_supply, view)
    assert keys(alert) == {"Medication/ran"} and alert.severity == "critical"
    assert "ran out on 2026-02-09" in alert.message and "6 days ago" in alert.message


# -- residence-day limits ---------------------------------------------------------------------


def test_uk_statutory_residence_test(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2024-01-01", "Residence", "home", city="Toronto", country="Canada"),
            add(
                "2026-04-01",
                "Trip",
                "a",
                destination="London",
                country="UK",
                start="2026-04-10",
                end="2026-07-31",
            ),
            add(
                "2026-04-01",
                "Trip",
                "b",
                destination="Edinburgh",
                country="United Kingdom",
                start="2026-10-01",
                end="2027-01-15",
            ),
            clock("2026-08-15"),
        ],
    )
    alert = one(lib.residence_day_limits, view)
    # Midnights: 112 (Apr 10 - Jul 30) + 106 (Oct 1 - Jan 14) = 218 in the tax year from 6 April.
    # Both trips' days were counted: the alert names them both.
    assert keys(alert) == {"Trip/a", "Trip/b"} and alert.severity == "warning"
    assert "218 days in the UK tax year 2026-04-06 – 2027-04-05" in alert.message
    assert "HMRC RDR3" in alert.message


def test_us_substantial_presence_and_visa_waiver(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2020-01-01", "Passport", "p", country="Germany", expires="2031-01-01"),
            add("2024-05-01", "Trip", "y1", country="USA", start="2024-05-01", end="2024-10-31"),
            add(
                "2025-05-01",
                "Trip",
                "y2",
                country="United States",
                start="2025-03-01",
                end="2025-06-30",
            ),
            add("2026-01-05", "Trip", "y3", country="US", start="2026-02-01", end="2026-05-25"),
            clock("2026-01-20"),
        ],
    )
    alerts = {
        a.message.split("against ")[1].split(" (")[0]: a
        for a in fire(lib.residence_day_limits, view)
    }
    spt = alerts["the US substantial presence test"]
    # 114 days in 2026 + 122/3 + 184/6 = 185.3 weighted days: 183 or more.
    assert "114 days in 2026, 122 in 2025 and 184 in 2024" in spt.message
    assert "185.3 weighted days" in spt.message and spt.severity == "warning"
    vwp = alerts["the US Visa Waiver Program"]
    assert "114 days in one visit" in vwp.message and len(alerts) == 2


def test_stated_stay_limit_and_home_country(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2025-01-01", "Residence", "home", country="Canada"),
            add("2025-01-01", "StayLimit", "th", country="Thailand", days=60, window_days=180),
            add(
                "2026-01-05",
                "Trip",
                "th1",
                country="Thailand",
                start="2026-01-10",
                end="2026-02-08",
            ),
            add(
                "2026-01-05",
                "Trip",
                "th2",
                country="Thailand",
                start="2026-04-01",
                end="2026-05-05",
            ),
            add("2026-01-05", "Trip", "ca", country="Canada", start="2026-06-01", end="2026-12-31"),
            clock("2026-01-06"),
        ],
    )
    alert = one(lib.residence_day_limits, view)
    # th1's days count in th2's window: the alert names it beside the trip and the limit.
    assert keys(alert) == {"Trip/th1", "Trip/th2", "StayLimit/th"} and alert.severity == "critical"
    assert "65 days in the 180 days 2025-11-07 – 2026-05-05" in alert.message


@pytest.mark.parametrize(("today", "alerts"), [("2026-03-20", 0), ("2026-04-15", 1)])
def test_an_open_ended_stay_under_way_counts_through_today(
    tmp_path: Path, today: str, alerts: int
) -> None:
    view = build(
        tmp_path,
        [
            add("2025-01-01", "StayLimit", "th", country="Thailand", days=60, window_days=180),
            add(
                "2026-01-05",
                "Trip",
                "th1",
                country="Thailand",
                start="2026-01-10",
                end="2026-02-08",
            ),
            add("2026-02-20", "Trip", "th2", country="Thailand", start="2026-03-01"),
            clock(today),
        ],
    )
    found = fire(lib.residence_day_limits, view)
    assert len(found) == alerts
    if found:
        (alert,) = found
        # 30 days of th1 and 46 of th2 (Mar 1 - Apr 15) in the 180 days to today; 30 + 30 fit.
        assert keys(alert) == {"Trip/th1", "Trip/th2", "StayLimit/th"}
        assert alert.severity == "critical"
        assert "76 days in the 180 days 2025-10-18 – 2026-04-15" in alert.message
        assert "counted through today (2026-04-15)" in alert.message
        assert "you had to leave by 2026-03-30" in alert.message


# -- contributions and budgets ----------------------------------------------------------------


def test_ira_and_hsa_contributions_over_the_limit(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2025-02-01",
                "Contribution",
                "r1",
                account_type="Roth IRA",
                amount=4000.0,
                date="2025-02-01",
            ),
            add(
                "2025-06-01",
                "Contribution",
                "r2",
                account_type="traditional IRA",
                amount=3500.0,
                date="2025-06-01",
            ),
            add(
                "2025-03-01",
                "Deposit",
                "h1",
                account="HSA",
                amount=4000.0,
                date="2025-03-01",
                coverage="family",
            ),
            add("2025-09-01", "Deposit", "h2", account="HSA", amount=4000.0, date="2025-09-01"),
            add(
                "2025-04-01",
                "Contribution",
                "k",
                account_type="401(k)",
                amount=1200.0,
                date="2025-04-01",
                employer=True,
            ),
            clock("2025-09-02"),
        ],
    )
    alert = one(lib.annual_contribution_limit, view)
    assert keys(alert) == {"Contribution/r2"}
    assert "USD 7,500.00" in alert.message and "USD 500.00 over" in alert.message
    assert "USD 7,000.00" in alert.message and "4973" in alert.message


def test_isa_tax_year_and_a_year_missing_from_the_table(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2029-04-01",
                "Contribution",
                "old",
                account_type="ISA",
                amount=15000.0,
                date="2029-04-01",
            ),
            add(
                "2029-04-10",
                "Contribution",
                "a",
                account_type="Stocks and Shares ISA",
                amount=15000.0,
                date="2029-04-10",
            ),
            add(
                "2029-12-10",
                "Contribution",
                "b",
                account_type="cash ISA",
                amount=6000.0,
                date="2029-12-10",
            ),
            clock("2029-12-11"),
        ],
    )
    alert = one(lib.annual_contribution_limit, view)
    assert keys(alert) == {"Contribution/b"} and "tax year 2029-30" in alert.message
    assert "GBP 21,000.00" in alert.message and "the 2026 limit" in alert.message


def test_monthly_budget_exceeded(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2026-02-01", "Budget", "food", category="dining", limit=300.0, per="month"),
            add("2026-02-20", "Expense", "e0", category="dining", amount=280.0, date="2026-02-20"),
            add("2026-03-02", "Expense", "e1", category="dining", amount=180.0, date="2026-03-02"),
            add("2026-03-09", "Expense", "e2", category="dining", amount=150.0, date="2026-03-09"),
            add(
                "2026-03-10", "Expense", "g", category="groceries", amount=400.0, date="2026-03-10"
            ),
            clock("2026-03-12"),
        ],
    )
    alert = one(lib.budget_exceeded, view)
    assert keys(alert) == {"Budget/food", "Expense/e2"}
    assert "330.00" in alert.message and "30.00 over the 300.00 limit" in alert.message


# -- balances projected -----------------------------------------------------------------------


def test_balance_falls_below_zero_and_minimum(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(
                "2026-05-01",
                "Account",
                "chk",
                name="joint checking",
                balance=3200.0,
                balance_as_of="2026-05-01",
                min_balance=500.0,
            ),
            add("2026-05-01", "Bill", "rent", name="rent", amount=2100.0, due="2026-05-05"),
            add("2026-05-01", "Payment", "car", name="car repair", amount=900.0, date="2026-05-08"),
            add(
                "2026-05-01",
                "Income",
                "pay",
                name="salary",
                amount=2600.0,
                next_date="2026-05-15",
                frequency="monthly",
            ),
            add(
                "2026-05-01",
                "Payment",
                "done",
                name="old",
                amount=5000.0,
                date="2026-05-03",
                paid=True,
            ),
            clock("2026-05-02"),
        ],
    )
    alert = one(lib.balance_projection, view)
    # 3,200 - 2,100 = 1,100 on 05-05 (above 500); - 900 = 200 on 05-08: 300 below the minimum.
    assert alert.severity == "warning" and "falls to 200.00 on 2026-05-08" in alert.message
    assert "below the minimum 500.00 by 300.00" in alert.message
    assert keys(alert) == {"Account/chk", "Bill/rent", "Payment/car"}
    (tmp_path / "neg").mkdir()
    neg = build(
        tmp_path / "neg",
        [
            add("2026-05-01", "Account", "chk", balance=800.0),
            add("2026-05-01", "Transfer", "t", amount=1000.0, date="2026-05-20", account="chk"),
            clock("2026-05-02"),
        ],
    )
    alert = one(lib.balance_projection, neg)
    assert alert.severity == "critical" and "below zero by 200.00" in alert.message


def test_unknown_bill_amounts_are_said_not_guessed(tmp_path: Path) -> None:
    events = [
        add("2026-09-03", "Account", "sav", name="savings", balance=1800.0),
        add("2026-09-03", "Income", "pay", name="stipend", next_date="2026-09-30"),
        add("2026-09-03", "Bill", "power", name="electricity", paid=False),
    ]
    assert fire(lib.balance_projection, build(tmp_path, events)) == []  # nothing planned
    (tmp_path / "gift").mkdir()
    plan = add("2026-09-10", "Purchase", "bike", item="e-bike", amount=1400.0, date="2026-09-12")
    alert = one(lib.balance_projection, build(tmp_path / "gift", [*events, plan]))
    assert alert.severity == "warning" and "comes down to 400.00 on 2026-09-12" in alert.message
    assert "1 unpaid bill(s) before the next income on 2026-09-30" in alert.message
    assert "cannot be known" in alert.message


@pytest.mark.parametrize(
    "value", ["??", 0, -1, 10**12, 1e308, True, "9999-12-31", "0001-01-01", "1000-01-02"]
)
def test_supply_stay_limit_and_money_rules_survive_odd_values(tmp_path: Path, value: Any) -> None:
    fields = [
        "quantity",
        "times_per_day",
        "pills_per_dose",
        "as_of",
        "next_refill",
        "days",
        "nights",
        "window_days",
        "balance",
        "balance_as_of",
        "min_balance",
        "horizon_days",
        "amount",
        "limit",
        "tax_year",
        "next_date",
        "due",
        "date",
        "start",
        "end",
    ]
    text = {"country": "UK", "account_type": "IRA", "per": "month", "frequency": "monthly"}
    types = ["Medication", "Trip", "StayLimit", "Contribution", "Budget", "Account", "Income"]
    types += ["Bill", "Expense", "TravelInsurance"]
    events = [clock("2026-01-01")]
    events += [add("2026-01-01", t, "odd", **dict.fromkeys(fields, value), **text) for t in types]
    view = build(tmp_path, events)
    runner = RuleRunner(lib.LIBRARY)
    runner.run(view, None)
    assert not [a for a in runner.standing() if a.category == "rule_error"]


@pytest.mark.parametrize("case", list(NEAR_MISSES))
def test_a_near_miss_raises_nothing(tmp_path: Path, case: str) -> None:
    rule, events = NEAR_MISSES[case]
    assert fire(rule, build(tmp_path, events)) == []
