"""Compiled ``not_while`` constraints and the knowledge tables, run by a real Workbench over an
in-memory DuckDB log."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.alerts import alerts, keys
from helpers.events import add, clock, fact, update

from uac_kernel.constraints import compile_constraint, parse_constraint
from uac_kernel.core.errors import ConstraintError
from uac_kernel.language.knowledge import TABLES, group_names, terms
from uac_kernel.workbench import Workbench


def bench(constraint: dict[str, Any], *events: dict[str, Any]) -> Workbench:
    wb = Workbench(rules=[compile_constraint("c2", parse_constraint(constraint))])
    if events:
        wb.ingest(list(events))
    return wb


GRAPEFRUIT_ON_STATINS = {
    "kind": "not_while",
    "title": "No grapefruit on a statin",
    "active": {"type": "Medication"},
    "active_groups": ["statins"],
    "forbidden": {"type": "Meal"},
    "table": "grapefruit",
    "cites": "FDA: Grapefruit Juice and Some Drugs Don't Mix",
}


def test_grapefruit_while_a_statin_is_taken() -> None:
    wb = bench(
        GRAPEFRUIT_ON_STATINS,
        clock("2026-03-01T08:00:00"),
        add("2026-03-01T08:00:00", "Medication", "chol", name="Lipitor 20 mg", start="2026-02-01"),
        add("2026-03-01T08:00:00", "Medication", "bp", name="lisinopril", start="2026-02-01"),
        add(
            "2026-03-01T08:00:00",
            "Meal",
            "brunch",
            name="brunch",
            items=["eggs", "Grapefruit juice"],
            date="2026-03-03",
        ),
        add(
            "2026-03-01T08:00:00",
            "Meal",
            "eaten",
            name="breakfast",
            items=["grapefruit"],
            date="2026-02-20",
        ),
        add(
            "2026-03-01T08:00:00",
            "Meal",
            "lunch",
            name="lunch",
            items=["orange juice"],
            date="2026-03-03",
        ),
    )
    (a,) = alerts(wb)
    assert a.severity == "warning" and keys(a) == {"Medication/chol", "Meal/brunch"}
    assert "mentions 'grapefruit' (grapefruit table, group grapefruit)" in a.message
    assert "on 2026-03-03" in a.message and "(it names 'lipitor')" in a.message
    assert "since 2026-02-01, with no end date" in a.message


@pytest.mark.parametrize(
    "change",
    [{"end": "2026-02-28"}, {"stopped": True}, {"active": False}, {"discontinued": True}],
)
def test_a_medication_that_ended_or_stopped_forbids_nothing(change: dict[str, Any]) -> None:
    wb = bench(
        GRAPEFRUIT_ON_STATINS,
        add("2026-02-01T08:00:00", "Medication", "m", name="simvastatin", start="2026-01-01"),
        add("2026-02-01T08:00:00", "Meal", "x", name="grapefruit salad", date="2026-03-05"),
    )
    assert len(alerts(wb)) == 1
    wb.ingest([update("2026-03-01T08:00:00", "Medication", "m", **change)])
    assert alerts(wb) == []


def test_a_meal_outside_the_course_and_an_undated_habit() -> None:
    wb = bench(
        GRAPEFRUIT_ON_STATINS,
        clock("2026-03-01T08:00:00"),
        add(
            "2026-03-01T08:00:00",
            "Medication",
            "m",
            name="atorvastatin",
            start="2026-03-10",
            end="2026-03-20",
        ),
        add("2026-03-01T08:00:00", "Meal", "before", name="pomelo", date="2026-03-05"),
        add("2026-03-01T08:00:00", "Meal", "after", name="pomelo", date="2026-03-25"),
        add("2026-03-01T08:00:00", "Meal", "during", name="pomelo", date="2026-03-15"),
        add("2026-03-01T08:00:00", "Meal", "habit", name="grapefruit every morning"),
    )
    found = {frozenset(keys(a)) for a in alerts(wb)}
    assert found == {
        frozenset({"Medication/m", "Meal/during"}),
        frozenset({"Medication/m", "Meal/habit"}),
    }
    habit = next(a for a in alerts(wb) if "Meal/habit" in keys(a))
    assert "undated, so always" in habit.message
    assert "since 2026-03-10, until 2026-03-20" in habit.message


def test_allergen_in_a_planned_meal_from_the_table_and_own_mentions() -> None:
    c = {
        "kind": "not_while",
        "title": "Nothing with shellfish or tree nuts: allergy",
        "severity": "critical",
        "active": {"type": "Allergy", "mentions": ["shellfish"]},
        "forbidden": {"type": "Reservation", "mentions": ["raw bar"]},
        "table": "allergens",
        "groups": ["Shellfish", "tree nut"],
    }
    wb = bench(
        c,
        clock("2026-04-01T08:00:00"),
        add("2026-04-01T08:00:00", "Allergy", "a", substance="Shellfish", reaction="hives"),
        add("2026-04-01T08:00:00", "Allergy", "b", substance="penicillin"),
        add(
            "2026-04-01T08:00:00",
            "Reservation",
            "paella",
            name="Casa",
            dish="seafood paella",
            date="2026-04-05",
        ),
        add("2026-04-01T08:00:00", "Reservation", "bar", name="The raw bar", date="2026-04-06"),
        add(
            "2026-04-01T08:00:00",
            "Reservation",
            "pesto",
            name="Trattoria",
            notes="famous pesto",
            date="2026-04-07",
        ),
        add("2026-04-01T08:00:00", "Reservation", "steak", name="Steakhouse", date="2026-04-07"),
    )
    found = {next(iter(keys(a) - {"Allergy/a"})): a for a in alerts(wb)}
    assert set(found) == {"Reservation/paella", "Reservation/bar", "Reservation/pesto"}
    assert all(a.severity == "critical" for a in found.values())
    assert (
        "mentions 'seafood' (allergens table, group shellfish)"
        in found["Reservation/paella"].message
    )
    assert "mentions 'raw bar'," in found["Reservation/bar"].message
    assert "group tree nuts" in found["Reservation/pesto"].message
    wb.ingest([fact("2026-04-02T08:00:00", "retract", "Allergy", "a", reason="outgrown")])
    assert alerts(wb) == []


def test_alcohol_while_on_metronidazole_with_groups_from_two_tables() -> None:
    c = {
        "kind": "not_while",
        "title": "No alcohol on metronidazole",
        "active": {"type": "Medication"},
        "active_groups": ["nitroimidazoles"],
        "forbidden": {"type": "Event"},
        "table": "alcohol",
    }
    wb = bench(
        c,
        clock("2026-06-01T08:00:00"),
        add(
            "2026-06-01T08:00:00",
            "Medication",
            "flagyl",
            name="Flagyl 500mg",
            start="2026-06-01",
            end="2026-06-07",
        ),
        add("2026-06-01T08:00:00", "Event", "party", name="wine tasting", date="2026-06-05"),
        add("2026-06-01T08:00:00", "Event", "run", name="5k run", date="2026-06-05"),
    )
    (a,) = alerts(wb)
    assert keys(a) == {"Medication/flagyl", "Event/party"} and "'wine'" in a.message


def test_no_words_means_every_forbidden_record_counts() -> None:
    c = {
        "kind": "not_while",
        "title": "No flights while pregnant past 36 weeks",
        "active": {"type": "Condition", "where": {"name": "late pregnancy"}},
        "forbidden": {"type": "Flight"},
    }
    wb = bench(
        c,
        clock("2026-07-01T08:00:00"),
        add("2026-07-01T08:00:00", "Condition", "p", name="Late pregnancy", start="2026-07-01"),
        add("2026-07-01T08:00:00", "Flight", "f", date="2026-07-10"),
    )
    (a,) = alerts(wb)
    assert "Flight 'f' is a Flight, on 2026-07-10" in a.message


def test_unknown_tables_and_groups_are_refused_when_parsed() -> None:
    base = {k: v for k, v in GRAPEFRUIT_ON_STATINS.items() if k != "active_groups"}
    with pytest.raises(
        ConstraintError, match=r"table: .*no knowledge table 'drugs'; the tables are"
    ):
        parse_constraint({**base, "table": "drugs"})
    with pytest.raises(
        ConstraintError, match=r"groups: .*no group 'lobster' in table 'allergens'.*shellfish"
    ):
        parse_constraint({**base, "table": "allergens", "groups": ["lobster"]})
    with pytest.raises(
        ConstraintError, match=r"active_groups: .*no group 'beta blockers' in any knowledge table"
    ):
        parse_constraint({**base, "table": None, "active_groups": ["beta blockers"]})


# -- knowledge tables ------------------------------------------------------------------------


def test_tables_are_cited_data_with_the_groups_promised() -> None:
    for name, table in TABLES.items():
        assert table.name == name and table.source and table.maps and table.groups
        assert all(words and all(w == w.lower() for w in words) for words in table.groups.values())
    assert group_names("allergens") == [
        "milk",
        "egg",
        "fish",
        "shellfish",
        "tree nuts",
        "peanuts",
        "wheat",
        "soy",
        "sesame",
    ]
    drugs = set(group_names("drug_classes"))
    assert {
        "penicillins",
        "cephalosporins",
        "sulfonamide antibiotics",
        "ssris",
        "snris",
        "maois",
        "statins",
        "nsaids",
        "anticoagulants",
        "ace inhibitors",
        "opioids",
        "benzodiazepines",
    } <= drugs
    assert {"grapefruit", "tyramine_rich", "vitamin_k_rich", "alcohol"} <= set(TABLES)
    with pytest.raises(ConstraintError, match="the tables are allergens, drug_classes"):
        group_names("nope")


def test_group_names_match_loosely_and_an_empty_list_is_the_whole_table() -> None:
    assert terms("drug_classes", ["SSRI"]) == terms("drug_classes", ["ssris"])
    assert "sertraline" in terms("drug_classes", ["SSRIs"])["drug_classes/ssris"]
    assert "lipitor" in terms("grapefruit", ["statin"])["drug_classes/statins"]
    assert len(terms("allergens", [])) == 9
