"""The health and supply rules read concepts and roles: under a schema in someone else's words
(``Intolerance.trigger``, lower-case ``medication`` with ``drugName``, ``Booking.dishes``,
``Script.repeats_remaining``) they raise what they raise under our names once the names are
bound, stay quiet on traps, and run when a type newly bound to their role changes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers.alerts import keys
from helpers.rules import add, build, clock, fire, one

from uac_kernel.rules import library as lib
from uac_kernel.rules.engine import Alert, Rule, RuleRunner
from uac_kernel.state.query import UserView
from uac_kernel.vocab import Binding


def bound(view: UserView, *pairs: tuple[str, str] | tuple[str, str, str]) -> UserView:
    """``view`` with a person's bindings: ``(role, type)`` or ``(concept, type, field)``."""
    view._state.bind(
        [Binding(p[0], p[1], p[2] if len(p) == 3 else None, author="person") for p in pairs]
    )
    return view


@dataclass(frozen=True)
class Case:
    """One rule, one scenario in our names and the same in someone else's, and the bindings
    that say what their names mean."""

    rule: Rule
    ours: list[dict[str, Any]]
    theirs: list[dict[str, Any]]
    bindings: list[tuple[str, str] | tuple[str, str, str]]
    evidence: set[str]  # in their names
    says: str  # a phrase both messages hold
    severity: str = "critical"
    renamed: dict[str, str] = field(default_factory=dict)  # our type -> theirs


# 20 tablets counted on 03-02 at 1 a day, refill due 03-29: in our names and in a pharmacy's.
LEVO = {"name": "levothyroxine", "pills_left": 20, "times_per_day": 1, "as_of": "2026-03-02"}
LEVO["next_refill"] = "2026-03-29"
SCRIPT_LEVO = {
    "medicine": "levothyroxine",
    "tablets": 20,
    "dailyDoses": 1,
    "dispensed": "2026-03-02",
}
SCRIPT_LEVO["repeat_due"] = "2026-03-29"

CASES = {
    "drug_allergy": Case(
        lib.drug_allergy_cross_reactivity,
        [
            add("2024-05-20", "Allergy", "pen", substance="penicillin", reaction="hives"),
            add("2025-01-08", "Medication", "amox", name="Amoxicillin 500 mg"),
        ],
        [
            add("2024-05-20", "Intolerance", "pen", trigger="penicillin", effect="hives"),
            add("2025-01-08", "medication", "amox", drugName="Amoxicillin 500 mg"),
        ],
        [
            ("allergy", "Intolerance"),
            ("allergy.allergen", "Intolerance", "trigger"),
            ("allergy.severity", "Intolerance", "effect"),
            ("medication", "medication"),
            ("medication.name", "medication", "drugName"),
        ],
        {"Intolerance/pen", "medication/amox"},
        "is in the penicillin class",
        renamed={"Allergy": "Intolerance", "Medication": "medication"},
    ),
    "food_allergy": Case(
        lib.food_allergy_exposure,
        [
            add("2024-05-20", "Allergy", "sf", substance="shellfish", severity="anaphylaxis"),
            add("2025-01-08", "Reservation", "r", dishes=["garlic prawns"], start="2025-02-01"),
        ],
        [
            add("2024-05-20", "Intolerance", "sf", trigger="shellfish", how_bad="anaphylaxis"),
            add("2025-01-08", "Booking", "r", dishes=["garlic prawns"], on="2025-02-01"),
        ],
        [
            ("allergy", "Intolerance"),
            ("allergy.allergen", "Intolerance", "trigger"),
            ("allergy.severity", "Intolerance", "how_bad"),
            ("food_exposure", "Booking"),
            ("food.dishes", "Booking", "dishes"),
        ],
        {"Intolerance/sf", "Booking/r"},
        "mentions prawn, and",
        renamed={"Allergy": "Intolerance", "Reservation": "Booking"},
    ),
    "drug_drug": Case(
        lib.drug_drug_interaction,
        [
            add("2025-01-01", "Medication", "nardil", name="phenelzine"),
            add("2025-01-02", "Medication", "zoloft", name="sertraline"),
        ],
        [
            add("2025-01-01", "medication", "nardil", drugName="phenelzine"),
            add("2025-01-02", "medication", "zoloft", drugName="sertraline"),
        ],
        [("medication", "medication"), ("medication.name", "medication", "drugName")],
        {"medication/nardil", "medication/zoloft"},
        "[MAOI] together with",
        renamed={"Medication": "medication"},
    ),
    "food_drug": Case(
        lib.food_drug_interaction,
        [
            add("2025-01-01", "Medication", "simva", name="simvastatin"),
            add("2025-01-02", "FoodHabit", "gj", item="grapefruit juice every morning"),
        ],
        [
            add("2025-01-01", "medication", "simva", drugName="simvastatin"),
            add("2025-01-02", "Diet", "gj", foods="grapefruit juice every morning"),
        ],
        [
            ("medication", "medication"),
            ("medication.name", "medication", "drugName"),
            ("food", "Diet"),
            ("food.dishes", "Diet", "foods"),
        ],
        {"medication/simva", "Diet/gj"},
        "includes grapefruit, which interacts with",
        severity="warning",
        renamed={"Medication": "medication", "FoodHabit": "Diet"},
    ),
    "pregnancy": Case(
        lib.pregnancy_teratogenic_medication,
        [
            add("2024-06-15", "Medication", "acc", name="Accutane", start="2024-06-15"),
            add("2024-09-20", "Pregnancy", "p", due="2025-04-01"),
        ],
        [
            add("2024-06-15", "medication", "acc", drugName="Accutane", began="2024-06-15"),
            add("2024-09-20", "Gestation", "p", due="2025-04-01"),
        ],
        [
            ("medication", "medication"),
            ("medication.name", "medication", "drugName"),
            ("medication.start", "medication", "began"),
            ("pregnancy", "Gestation"),
        ],
        {"Gestation/p", "medication/acc"},
        "(started 2024-06-15) is contraindicated in pregnancy",
        renamed={"Medication": "medication", "Pregnancy": "Gestation"},
    ),
    "activity": Case(
        lib.activity_medical_clearance,
        [
            add("2024-08-20", "Condition", "asthma", name="asthma"),
            add("2025-01-05", "Course", "padi", name="PADI open water", start="2025-03-01"),
        ],
        [
            add("2024-08-20", "Diagnosis", "asthma", dx="asthma"),
            add("2025-01-05", "Outing", "padi", what="PADI open water", when="2025-03-01"),
        ],
        [
            ("condition", "Diagnosis"),
            ("condition.name", "Diagnosis", "dx"),
            ("planned_activity", "Outing"),
            ("activity.text", "Outing", "what"),
            ("activity.when", "Outing", "when"),
        ],
        {"Diagnosis/asthma", "Outing/padi"},
        "is scuba diving, and",
        renamed={"Condition": "Diagnosis", "Course": "Outing"},
    ),
    "supply": Case(
        lib.medication_supply,
        [add("2026-03-02", "Medication", "levo", **LEVO), clock("2026-03-05")],
        [add("2026-03-02", "Script", "levo", **SCRIPT_LEVO), clock("2026-03-05")],
        [
            ("medication", "Script"),
            ("medication.name", "Script", "medicine"),
            ("medication.supply", "Script", "tablets"),
            ("medication.rate", "Script", "dailyDoses"),
            ("medication.supply_as_of", "Script", "dispensed"),
            ("medication.refill_date", "Script", "repeat_due"),
        ],
        {"Script/levo"},
        "runs out on 2026-03-22 (20 on 2026-03-02 at 1 a day), 7 days before its next refill",
        severity="warning",
        renamed={"Medication": "Script"},
    ),
}


def _ours_as_theirs(alert: Alert, renamed: dict[str, str]) -> set[str]:
    return {f"{renamed.get(e.type, e.type)}/{e.key}" for e in alert.evidence}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_rule_raises_in_their_words_what_it_raises_in_ours(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    (tmp_path / "ours").mkdir()
    ours = one(case.rule, build(tmp_path / "ours", case.ours))
    view = build(tmp_path, case.theirs)
    # Unbound, their names mean nothing to the rule; bound, it raises the same alert.
    assert fire(case.rule, view) == []
    theirs = one(case.rule, bound(view, *case.bindings))
    assert theirs.severity == ours.severity == case.severity
    assert keys(theirs) == case.evidence == _ours_as_theirs(ours, case.renamed)
    assert case.says in ours.message and case.says in theirs.message
    # It says which of the person's bindings it read, in their names.
    assert "[read " in theirs.message and "(person 1.00)" in theirs.message
    assert "[read " not in ours.message


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_rule_runs_when_a_type_newly_bound_to_its_role_changes(tmp_path: Path, name: str) -> None:
    case = CASES[name]
    view = build(tmp_path, case.theirs)
    changed = {k.split("/")[0] for k in case.evidence}
    runner = RuleRunner([case.rule])
    assert runner.run(view, changed_types=changed).raised == []
    assert not changed & (case.rule.watches(view) or set())
    bound(view, *case.bindings)
    assert changed <= (case.rule.watches(view) or set())
    raised = runner.run(view, changed_types=changed).raised
    assert [keys(a) for a in raised] == [case.evidence]


# -- traps: what the bound fields say keeps each rule quiet ----------------------------------


def test_bound_resolved_allergy_and_unrelated_allergen_stay_quiet(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2024-05-20", "Intolerance", "pen", trigger="penicillin", outgrown=True),
            add("2024-05-20", "Intolerance", "lac", trigger="lactose"),
            add("2025-01-08", "medication", "amox", drugName="amoxicillin"),
            add("2025-01-08", "Booking", "r", dishes=["grilled cheese"], on="2025-02-01"),
        ],
    )
    bound(
        view,
        *CASES["drug_allergy"].bindings,
        ("allergy.resolved", "Intolerance", "outgrown"),
        ("food_exposure", "Booking"),
        ("food.dishes", "Booking", "dishes"),
    )
    assert fire(lib.drug_allergy_cross_reactivity, view) == []
    assert fire(lib.food_allergy_exposure, view) == []


def test_bound_meal_eaten_or_skipped_exposes_nothing(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2024-05-20", "Intolerance", "sf", trigger="shellfish"),
            add("2025-01-08", "Booking", "past", dishes=["prawns"], on="2025-01-02"),
            add("2025-01-08", "Booking", "skip", dishes=["prawns"], on="2025-03-01", skip=True),
        ],
    )
    bound(
        view,
        *CASES["food_allergy"].bindings,
        ("meal", "Booking"),
        ("meal.when", "Booking", "on"),
        ("food.avoided", "Booking", "skip"),
    )
    assert fire(lib.food_allergy_exposure, view) == []


def test_bound_stopped_drug_and_avoided_food_interact_with_nothing(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2025-01-01", "medication", "nardil", drugName="phenelzine", quit=True),
            add("2025-01-02", "medication", "zoloft", drugName="sertraline"),
            add("2025-01-02", "medication", "simva", drugName="simvastatin"),
            add("2025-01-02", "Diet", "gj", foods="grapefruit", never=True),
        ],
    )
    bound(
        view,
        *CASES["food_drug"].bindings,
        ("medication.stopped", "medication", "quit"),
        ("food.avoided", "Diet", "never"),
    )
    assert fire(lib.drug_drug_interaction, view) == []
    assert fire(lib.food_drug_interaction, view) == []


def test_a_bound_pregnancy_ended_or_a_condition_in_their_words(tmp_path: Path) -> None:
    events = [
        add("2024-06-15", "medication", "mtx", drugName="methotrexate"),
        add("2024-09-20", "Gestation", "p", over=True),
    ]
    view = build(tmp_path, events)
    bindings = [*CASES["pregnancy"].bindings, ("pregnancy.ended", "Gestation", "over")]
    assert fire(lib.pregnancy_teratogenic_medication, bound(view, *bindings)) == []
    # A diagnosis in their words that says pregnant counts, as a Condition named so does.
    (tmp_path / "b").mkdir()
    view = build(tmp_path / "b", [*events, add("2024-10-01", "Diagnosis", "d", dx="Pregnant")])
    bound(view, *bindings, *CASES["activity"].bindings[:2])
    alert = one(lib.pregnancy_teratogenic_medication, view)
    assert keys(alert) == {"Diagnosis/d", "medication/mtx"}


def test_bound_activity_past_or_cleared_needs_no_clearance(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add("2024-08-20", "Diagnosis", "asthma", dx="asthma"),
            add("2025-01-05", "Outing", "old", what="scuba trip", when="2024-12-01"),
            add("2025-01-05", "Outing", "ok", what="scuba", when="2025-03-01", doctorOk=True),
        ],
    )
    bound(view, *CASES["activity"].bindings, ("activity.cleared", "Outing", "doctorOk"))
    assert fire(lib.activity_medical_clearance, view) == []


# -- refills left: medication.refills changes the advice ---------------------------------------


def _script(**fields: Any) -> list[dict[str, Any]]:
    return [add("2026-03-02", "Script", "levo", **(SCRIPT_LEVO | fields)), clock("2026-03-05")]


SCRIPT = [*CASES["supply"].bindings, ("medication.refills", "Script", "repeats_remaining")]


def test_no_repeats_left_sends_the_user_to_the_prescriber(tmp_path: Path) -> None:
    view = bound(build(tmp_path, _script(repeats_remaining=0)), *SCRIPT)
    alert = one(lib.medication_supply, view)
    assert alert.severity == "warning" and keys(alert) == {"Script/levo"}
    assert "7 days before its next refill on 2026-03-29, and no refills are left " in alert.message
    assert "(repeats_remaining 0): ask the prescriber for a new prescription" in alert.message
    # With a repeat left, the advice is today's: an early refill.
    (tmp_path / "b").mkdir()
    view = bound(build(tmp_path / "b", _script(repeats_remaining=2)), *SCRIPT)
    alert = one(lib.medication_supply, view)
    assert "ask for an early refill or a bridge supply" in alert.message
    assert "prescriber" not in alert.message


def test_a_refill_date_with_no_refills_left_renews_nothing(tmp_path: Path) -> None:
    # 5 tablets from 03-02 run out on 03-07: a refill on 03-06 covers that while one is left.
    (tmp_path / "one").mkdir()
    one_left = _script(tablets=5, repeat_due="2026-03-06", repeats_remaining=1)
    assert fire(lib.medication_supply, bound(build(tmp_path / "one", one_left), *SCRIPT)) == []
    none_left = _script(tablets=5, repeat_due="2026-03-06", repeats_remaining=0)
    alert = one(lib.medication_supply, bound(build(tmp_path, none_left), *SCRIPT))
    assert alert.severity == "critical"  # 2 days left
    assert (
        "in 2 days, and no refills are left (repeats_remaining 0): ask the prescriber for a "
        "new prescription now." in alert.message
    )


def test_no_refills_left_before_a_trip_is_flagged_though_a_refill_date_comes_first(
    tmp_path: Path,
) -> None:
    trip = add(
        "2026-03-03", "Trip", "t", destination="Nairobi", start="2026-03-25", end="2026-04-20"
    )
    for left, expect in ((1, []), (0, [{"Medication/m", "Trip/t"}])):
        (tmp_path / str(left)).mkdir()
        med = add(
            "2026-03-02",
            "Medication",
            "m",
            name="metformin",
            quantity=40,
            times_per_day=1,
            as_of="2026-03-02",
            next_refill="2026-03-20",
            refills=left,
        )
        alerts = fire(
            lib.medication_supply, build(tmp_path / str(left), [med, trip, clock("2026-03-05")])
        )
        assert [keys(a) for a in alerts] == expect
    assert (
        "and no refills are left (refills 0): ask the prescriber for a new prescription, then "
        "refill before you go" in alerts[0].message
    )


# -- alert ids stay what they were for users on today's names ---------------------------------

# Computed on the library before it read concepts: the same about and evidence, so the same id.
IDS = {
    "activity": "activity_medical_clearance:0fe37df3efca",
    "drug_allergy": "drug_allergy_cross_reactivity:23e9f2a383d4",
    "drug_drug": "drug_drug_interaction:4956a36c4200",
    "food_allergy": "food_allergy_exposure:0cc7fd6c944b",
    "food_drug": "food_drug_interaction:3db2f7df44b8",
    "pregnancy": "pregnancy_teratogenic_medication:561eb43a7a17",
    "supply": "medication_supply:175f85e62937",
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_alert_ids_are_unchanged_on_todays_names(tmp_path: Path, name: str) -> None:
    assert one(CASES[name].rule, build(tmp_path, CASES[name].ours)).id == IDS[name]
