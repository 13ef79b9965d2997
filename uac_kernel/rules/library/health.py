"""Health rules: drug–allergy cross-reactivity, food allergies, drug–drug and food–drug
interactions, teratogenic medication in pregnancy, and activities that need medical clearance.

The drug and food tables are short lists written for this module from the public sources
named beside them; nothing is copied from a label or a database.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from uac_kernel.core.records import Record
from uac_kernel.core.tables import (
    DRUG_CLASSES,
    DRUG_PAIRS,
    FOOD_ALLERGENS,
    FOOD_CLASSES,
    FOOD_PAIRS,
    TERATOGENS,
)
from uac_kernel.core.words import classes as _classes
from uac_kernel.core.words import first_term as _first_term
from uac_kernel.core.words import norm as _norm
from uac_kernel.core.words import terms as _terms
from uac_kernel.rules.engine import Finding, rule
from uac_kernel.rules.library._common import (
    ACTIVE,
    MED_STOPPED,
    _called_off,
    _current_meds,
    _first_day,
    _flag,
    _get,
    _label,
    _names,
    _not_past,
    _text,
    _uneaten,
)
from uac_kernel.state.query import UserView
from uac_kernel.vocab.catalogue import concept
from uac_kernel.vocab.resolve import types_of

__all__ = [
    "activity_medical_clearance",
    "drug_allergy_cross_reactivity",
    "drug_drug_interaction",
    "food_allergy_exposure",
    "food_drug_interaction",
    "pregnancy_teratogenic_medication",
]

# -- concepts the health rules read (data/concepts/health.toml) ------------------------------
ALLERGEN, ALLERGY_SEVERITY = concept("allergy.allergen"), concept("allergy.severity")
ALLERGY_RESOLVED = concept("allergy.resolved")
CONDITION_NAME, CONDITION_END = concept("condition.name"), concept("condition.end")
CONDITION_RESOLVED = concept("condition.resolved")
PREGNANCY_ENDED = concept("pregnancy.ended")
MED_START = concept("medication.start")
FOOD_DISHES, FOOD_TEXT = concept("food.dishes"), concept("food.text")
FOOD_AVOIDED = concept("food.avoided")
ACTIVITY_TEXT, ACTIVITY_WHEN = concept("activity.text"), concept("activity.when")
ACTIVITY_CLEARED = concept("activity.cleared")


# -- health ----------------------------------------------------------------------------------
def _playing(user: UserView, role: str) -> list[Record]:
    """The current records of the types playing ``role``, read through ``types_of`` so an
    alert notes a type bound to the role by someone (``user.role`` reads the same records)."""
    return [r for t in types_of(role) for r in user.all(t)]


SEVERE_WORDS = _terms("severe, anaphylaxis, anaphylactic, life threatening, epipen")


def _allergies(user: UserView) -> list[tuple[Record, str, bool]]:
    """Current, not resolved allergies: (record, normalised substance, severe?)."""
    out = []
    for a in _playing(user, "allergy"):
        if _flag(a, ALLERGY_RESOLVED) or _get(a, ACTIVE) is False:
            continue
        substance = _get(a, ALLERGEN)
        if isinstance(substance, str) and _norm(substance).strip():
            sev = _norm(_text(a, ALLERGY_SEVERITY))
            severe = any(w in sev for w in SEVERE_WORDS)
            out.append((a, _norm(substance), severe))
    return out


@rule(
    roles=["allergy", "medication"],
    severity="critical",
    category="drug_interactions_health_safety",
    source="FDA prescribing information, Contraindications: amoxicillin, cephalexin (Keflex), "
    "sulfamethoxazole/trimethoprim (Bactrim); AAAAI/ACAAI drug allergy practice parameter "
    "(2022) on penicillin-cephalosporin cross-reactivity",
)
def drug_allergy_cross_reactivity(user: UserView) -> Iterator[Finding]:
    """Reads each allergy's ``allergy.allergen`` and ``allergy.severity`` (skips
    ``allergy.resolved`` true, ``record.active`` false) and each current medication's
    ``medication.name`` (skips ``medication.stopped`` true, ``record.active`` false,
    ``medication.end`` past); by default ``Allergy.substance``/``severity``/``reaction`` and
    ``Medication.name``/``item``/``generic``/``brand``/``drug``.

    Flags a medication in the same drug class as the allergen (penicillin ↔ amoxicillin, sulfa ↔
    Bactrim, ...) or naming the allergen itself: critical. A cephalosporin with a severe
    penicillin allergy: warning.
    """
    meds = [(m, text, _classes(text, DRUG_CLASSES)) for m, text in _current_meds(user, user.today)]
    for allergy, substance, severe in _allergies(user):
        allergen_classes = _classes(substance, DRUG_CLASSES)
        for med, text, med_classes in meds:
            shared = sorted(set(allergen_classes) & set(med_classes))
            what = substance.strip()
            if shared or substance in text:
                group = shared[0] if shared else what
                kind = f"in the {group} class" if shared else f"{what} itself"
                yield Finding(
                    f"{_label(med)} is {kind}, and {_label(allergy)} records an allergy to {what}: "
                    f"do not take it; call the prescriber or pharmacist today for an alternative "
                    f"outside the {group} class.",
                    [allergy, med],
                )
            elif severe and "penicillin" in allergen_classes and "cephalosporin" in med_classes:
                yield Finding(
                    f"{_label(med)} is a cephalosporin and {_label(allergy)} records a severe "
                    "penicillin allergy: cross-reactivity is uncommon but possible; confirm with "
                    "the prescriber before the first dose.",
                    [allergy, med],
                    severity="warning",
                )


def _food_text(rec: Record) -> str:
    """Every text on ``rec`` that may name a food (``food.text``, and ``food.dishes`` where a
    user bound their dishes), normalised; each field read once."""
    return _norm(_text(rec, dict.fromkeys(_names(rec, (FOOD_TEXT, FOOD_DISHES)))))


@rule(
    roles=["allergy", "food_exposure"],
    severity="warning",
    category="drug_interactions_health_safety",
    source="FDA, Food Allergies: the nine major food allergens (FALCPA 2004, FASTER Act 2021)",
)
def food_allergy_exposure(user: UserView) -> Iterator[Finding]:
    """Reads each allergy's ``allergy.allergen``/``allergy.severity`` and the ``food.text`` and
    ``food.dishes`` of current records playing ``food_exposure`` (by default ``Reservation``,
    ``Meal``, ``FoodHabit`` and ``Restaurant``: name, title, item, items, dish, dishes, cuisine,
    venue, restaurant, description); skips those called off or ``food.avoided``, and meals whose
    ``meal.when`` is past: those were eaten.

    Flags a record whose text names a food of the allergen's group (shellfish allergy ↔ "The Crab
    Shack", seafood) or the allergen itself: critical when the allergy is severe/anaphylactic,
    else warning.
    """
    allergies = [(a, s, severe, _classes(s, FOOD_ALLERGENS)) for a, s, severe in _allergies(user)]
    if not allergies:
        return
    today = user.today
    for t in types_of("food_exposure"):
        for rec in _uneaten(user, t, today):
            if _flag(rec, FOOD_AVOIDED) or _called_off(rec):
                continue
            text = _food_text(rec)
            for allergy, substance, severe, groups in allergies:
                hits = [w for g in groups if (w := _first_term(text, FOOD_ALLERGENS[g]))]
                if not hits and substance in text:
                    hits = [substance.strip()]
                if hits:
                    level = "a severe" if severe else "an"
                    yield Finding(
                        f"{_label(rec)} mentions {hits[0]}, and {_label(allergy)} records {level} "
                        f"allergy to {substance.strip()}: cross-contact is likely; choose another "
                        f"place or dish, or call ahead about the allergy"
                        + (" and carry epinephrine." if severe else "."),
                        [allergy, rec],
                        severity="critical" if severe else "warning",
                    )


@rule(
    roles=["medication", "supplement"],
    severity="critical",
    category="drug_interactions_health_safety",
    source="FDA prescribing information: phenelzine (Nardil) and sertraline (Zoloft), "
    "Contraindications; warfarin (Coumadin), Drug Interactions; simvastatin (Zocor), "
    "lovastatin and atorvastatin "
    "(Lipitor), Contraindications / Drug Interactions",
)
def drug_drug_interaction(user: UserView) -> Iterator[Finding]:
    """Reads the ``medication.name`` of current records playing ``medication`` or
    ``supplement`` (by default ``Medication``/``Supplement`` ``name``/``item``/``generic``/
    ``brand``/``drug``; skips ``record.active`` false, ``medication.stopped`` true or
    ``medication.end`` past).

    Flags dangerous pairs of ``DRUG_PAIRS``: SSRI/SNRI + MAOI (serotonin syndrome), warfarin +
    NSAID (bleeding, warning), warfarin + vitamin K supplement, simvastatin/lovastatin + a strong
    CYP3A4 inhibitor, atorvastatin + one (warning), St John's wort with SSRIs/SNRIs/warfarin.
    """
    by_class: dict[str, list[Record]] = defaultdict(list)
    for rec, text in _current_meds(user, user.today, ("medication", "supplement")):
        for cls in _classes(text, DRUG_CLASSES):
            by_class[cls].append(rec)
    for a_cls, b_cls, severity, risk, advice in DRUG_PAIRS:
        for a in by_class.get(a_cls, ()):
            for b in by_class.get(b_cls, ()):
                if a is b:
                    continue
                yield Finding(
                    f"{_label(a)} [{a_cls}] together with {_label(b)} [{b_cls}] risks {risk}: "
                    f"{advice}.",
                    [a, b],
                    severity=severity,
                    about=f"{a_cls}+{b_cls}",
                )


@rule(
    roles=["medication", "food", "supplement"],
    severity="warning",
    category="drug_interactions_health_safety",
    source="FDA consumer update 'Grapefruit Juice and Some Drugs Don't Mix'; FDA prescribing "
    "information: simvastatin (Zocor), phenelzine (Nardil, tyramine), warfarin (Coumadin, "
    "vitamin K)",
)
def food_drug_interaction(user: UserView) -> Iterator[Finding]:
    """Reads current medications' ``medication.name`` and the ``food.dishes`` of current records
    playing ``food`` or ``supplement`` (by default the ``item``/``name``/``items``/``dish`` of
    ``FoodHabit``, ``Meal`` and ``Supplement``); skips those ``food.avoided`` or
    ``medication.stopped``, and meals whose ``meal.when`` is before today: a meal already eaten
    is no standing interaction, a habit is.

    Flags statin + grapefruit (warning), MAOI + tyramine-rich food such as aged cheese or cured
    meat (warning), warfarin + vitamin K-rich food such as kale or spinach (info: keep it steady).
    """
    by_class: dict[str, list[Record]] = defaultdict(list)
    for rec, text in _current_meds(user, user.today):
        for cls in _classes(text, DRUG_CLASSES):
            by_class[cls].append(rec)
    if not by_class:
        return
    today = user.today
    for t in dict.fromkeys((*types_of("food"), *types_of("supplement"))):
        for food in _uneaten(user, t, today):
            if _flag(food, FOOD_AVOIDED, MED_STOPPED) or _called_off(food):
                continue
            found = _classes(_norm(_text(food, FOOD_DISHES)), FOOD_CLASSES)
            for drug_classes, food_cls, severity, risk, advice in FOOD_PAIRS:
                if food_cls not in found:
                    continue
                for cls in drug_classes:
                    for med in by_class.get(cls, ()):
                        yield Finding(
                            f"{_label(food)} includes {found[food_cls]}, which interacts with "
                            f"{_label(med)}: {risk}; {advice}.",
                            [med, food],
                            severity=severity,
                        )


@rule(
    roles=["condition", "pregnancy", "medication"],
    severity="critical",
    category="drug_interactions_health_safety",
    source="FDA prescribing information, Contraindications / Boxed Warning: isotretinoin "
    "(iPLEDGE), thalidomide, methotrexate, misoprostol, warfarin, valproate, ACE inhibitors "
    "and ARBs; "
    "FDA Drug Safety Communication on statins in pregnancy (2021)",
)
def pregnancy_teratogenic_medication(user: UserView) -> Iterator[Finding]:
    """Reads current records playing ``pregnancy`` (skips ``pregnancy.ended`` true; by default
    ``Pregnancy`` with ``resolved``/``ended``), current conditions whose ``condition.name``
    contains "pregnan" (see ``activity_medical_clearance`` for which are current), and current
    medications' ``medication.name`` and ``medication.start``.

    Flags a medication known to harm a pregnancy: critical for isotretinoin, acitretin,
    thalidomide-class drugs, methotrexate, misoprostol, warfarin, valproate, ACE inhibitors and
    ARBs; warning for statins.
    """
    today = user.today
    pregnancies = [p for p in _playing(user, "pregnancy") if not _flag(p, PREGNANCY_ENDED)]
    pregnancies += [c for c, name in _current_conditions(user) if " pregnan" in name]
    if not pregnancies:
        return
    preg = pregnancies[0]
    for med, text in _current_meds(user, today):
        for group, (severity, terms, why) in TERATOGENS.items():
            if any(term in text for term in terms):
                started = _first_day(med, MED_START)
                since = f" (started {started.isoformat()})" if started else ""
                act = (
                    "call the prescriber and obstetrician today about stopping or switching it"
                    if severity == "critical"
                    else "ask the prescriber whether to stop it"
                )
                yield Finding(
                    f"{_label(preg)} records a pregnancy, and {_label(med)}{since} is {why}: "
                    f"{act}.",
                    [preg, med],
                    severity=severity,
                    about=group,
                )
                break


# Activities that need a physician's clearance with some conditions: (activity terms, condition
# terms, what can happen). Scuba: the WRSTC/UHMS "Diver Medical | Participant Questionnaire"
# (2020), which dive schools use, requires a physician's written evaluation before diving for
# asthma or wheezing, chronic lung disease, a past pneumothorax, seizures, heart disease and
# diabetes, among others.
ACTIVITY_CLEARANCE: dict[str, tuple[tuple[str, ...], tuple[str, ...], str]] = {
    "scuba diving": (
        _terms(
            "scuba, padi, naui, open water diver, dive course, diving course, dive certification,",
            "diving certification, freediving, free diving",
        ),
        _terms(
            "asthma, wheezing, copd, emphysema, chronic lung disease, pneumothorax, collapsed lung,",
            "epilepsy, seizure, heart disease, heart failure, arrhythmia, diabetes",
        ),
        "breathing compressed gas under changing pressure risks lung barotrauma, and losing "
        "consciousness or breath underwater can be fatal",
    ),
}


def _current_conditions(user: UserView) -> list[tuple[Record, str]]:
    """Current conditions (not ``condition.resolved``, ``record.active`` not false,
    ``condition.end`` not past) and their normalised ``condition.name``."""
    today, out = user.today, []
    for c in _playing(user, "condition"):
        end = _first_day(c, CONDITION_END)
        if (
            _flag(c, CONDITION_RESOLVED)
            or _get(c, ACTIVE) is False
            or (end is not None and today is not None and end < today)
        ):
            continue
        if (name := _norm(_text(c, CONDITION_NAME))).strip():
            out.append((c, name))
    return out


@rule(
    roles=["condition", "planned_activity"],
    clock=True,
    severity="critical",
    category="drug_interactions_health_safety",
    source="WRSTC/UHMS Diver Medical | Participant Questionnaire (2020): conditions that need a "
    "physician's written approval before diving",
)
def activity_medical_clearance(user: UserView) -> Iterator[Finding]:
    """Reads current conditions' ``condition.name`` (by default ``Condition.name``/
    ``condition``/``diagnosis``; skips ``condition.resolved`` true, ``record.active`` false or
    ``condition.end`` past) and the ``activity.text`` of current records playing
    ``planned_activity`` (by default ``Activity``, ``Course``, ``Class``, ``Lesson``, ``Event``,
    ``Trip``, ``Vacation``, ``Booking``, ``Reservation``, ``Excursion``, ``Tour``, ``Hobby`` and
    ``Plan``: name, title, activity, activities, description, kind, course, purpose); skips those
    called off or ``activity.cleared``, and those whose ``activity.when`` (end, start, date) is
    past.

    Flags a planned activity of ``ACTIVITY_CLEARANCE`` (scuba diving) with a condition the diver
    medical questionnaire lists (asthma, chronic lung disease, pneumothorax, seizures, heart
    disease, diabetes): critical — no diving without a physician's written approval. Re-runs as
    the log's clock moves, so an activity's alert clears once it is past.
    """
    conditions = _current_conditions(user)
    if not conditions:
        return
    today = user.today
    for t in types_of("planned_activity"):
        for rec in _not_past(user, t, today, ACTIVITY_WHEN):
            if _flag(rec, ACTIVITY_CLEARED) or _called_off(rec):
                continue
            text = _norm(_text(rec, ACTIVITY_TEXT))
            for activity, (terms, risky, why) in ACTIVITY_CLEARANCE.items():
                if _first_term(text, terms) is None:
                    continue
                for cond, name in conditions:
                    if (hit := _first_term(name, risky)) is not None:
                        yield Finding(
                            f"{_label(rec)} is {activity}, and {_label(cond)} records {hit}: "
                            f"{why}. Dive schools require a physician's written approval for "
                            f"{hit} (diver medical questionnaire): see a doctor, ideally one "
                            "trained in dive medicine, before committing; do not dive without "
                            "the clearance.",
                            [cond, rec],
                            about=activity,
                        )
