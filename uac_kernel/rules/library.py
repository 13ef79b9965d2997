"""The shipped rule library: health safety, travel documents, scheduling, deadlines, money.

Design material: the 40 scenarios of ``active_service_scenarios.json`` (Apache-2.0, © 2026 the
"User as Code" authors, Bojie Li / Pine AI), from the paper "User as Code: Executable Memory for
Personalized Agents". Its five categories are the categories here (plus ``contradiction``), and
each rule is written to fire on the typed facts those stories produce, not on their wording.

Every rule reads only the record types in its ``watch`` list (or, with ``watch=None``, only the
types that carry the fields it needs), reads fields with ``_get(rec, field)``, skips a
record that lacks what it needs, measures time with ``user.today`` (the log clock) and never with
the wall clock. The drug and food tables below are short lists written for this module from the
public sources named beside them; nothing is copied from a label or a database.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from uac_kernel.query import UserView
from uac_kernel.records import Record
from uac_kernel.rules.engine import Finding, Rule, Severity, rule

__all__ = [
    "LIBRARY",
    "activity_medical_clearance",
    "charge_after_cancellation",
    "conflicting_records",
    "deadline_approaching",
    "document_expires_before_trip",
    "drug_allergy_cross_reactivity",
    "drug_drug_interaction",
    "food_allergy_exposure",
    "food_drug_interaction",
    "investment_against_risk_tolerance",
    "overlapping_commitments",
    "passport_validity",
    "payment_from_closed_account",
    "pregnancy_teratogenic_medication",
    "schengen_90_180",
    "tax_filing_deadline",
    "transaction_over_limit",
    "transfer_during_freeze",
    "visa_validity",
    "wash_sale",
]

SCENARIOS = (
    "UaC active-service scenarios (active_service_scenarios.json, Apache-2.0, Bojie Li / Pine AI)"
)

# -- text matching ---------------------------------------------------------------------------
# Text is compared as lowercase word tokens, naively singularised, padded with spaces, so a term
# matches whole words only: "amoxicillin-clavulanate" mentions "amoxicillin"; "K2" is not "K".

_WORD = re.compile(r"[a-z0-9]+")


def _singular(w: str) -> str:
    return w[:-1] if len(w) > 3 and w[-1] == "s" and w[-2] != "s" else w


def _norm(text: str) -> str:
    return " " + " ".join(_singular(w) for w in _WORD.findall(text.lower())) + " "


def _terms(*lists: str) -> tuple[str, ...]:
    """Normalised terms from comma-separated lists: ``_terms("penicillin, pen vk")``."""
    return tuple(_norm(t) for text in lists for t in text.split(",") if t.strip())


def _split(names: str) -> tuple[str, ...]:
    return tuple(names.split())


def _first_term(text: str, terms: Iterable[str]) -> str | None:
    """The first of ``terms`` that normalised ``text`` mentions, or None."""
    return next((t.strip() for t in terms if t in text), None)


def _classes(text: str, table: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """The classes of ``table`` that normalised ``text`` mentions, each with the word it matched."""
    return {cls: hit for cls, terms in table.items() if (hit := _first_term(text, terms))}


# -- drug classes: generic and well-known US brand names; a drug may sit in several classes ----
DRUG_CLASSES: dict[str, tuple[str, ...]] = {
    # FDA prescribing information of amoxicillin, ampicillin, piperacillin/tazobactam.
    "penicillin": _terms(
        "penicillin, penicillin v, penicillin g, pen vk, bicillin, amoxicillin, amoxil,",
        "augmentin, ampicillin, unasyn, piperacillin, zosyn, nafcillin, oxacillin, dicloxacillin,",
        "cloxacillin,flucloxacillin, ticarcillin, beta lactam",
    ),
    # FDA prescribing information of cephalexin (Keflex) and ceftriaxone (Rocephin).
    "cephalosporin": _terms(
        "cephalosporin, cephalexin, keflex, cefadroxil, cefazolin, cefuroxime, ceftin, cefdinir,",
        "cefpodoxime, cefprozil, cefaclor, cefixime, ceftriaxone, rocephin, ceftazidime, cefepime,",
        "beta lactam",
    ),
    # FDA prescribing information of sulfamethoxazole/trimethoprim (Bactrim).
    "sulfonamide antibiotic": _terms(
        "sulfa, sulfonamide, sulfamethoxazole, bactrim, septra, co-trimoxazole, cotrimoxazole,",
        "sulfadiazine, sulfisoxazole, sulfasalazine",
    ),
    # FDA prescribing information of sertraline (Zoloft) and venlafaxine (Effexor).
    "SSRI": _terms(
        "ssri, sertraline, zoloft, fluoxetine, prozac, paroxetine, paxil, citalopram, celexa,",
        "escitalopram, lexapro, fluvoxamine, luvox, vortioxetine, trintellix",
    ),
    "SNRI": _terms(
        "snri, venlafaxine, effexor, desvenlafaxine, pristiq, duloxetine, cymbalta,",
        "levomilnacipran, fetzima, milnacipran, savella",
    ),
    # FDA prescribing information of phenelzine (Nardil), tranylcypromine (Parnate), selegiline
    # (Emsam), linezolid (Zyvox, a reversible MAOI).
    "MAOI": _terms(
        "maoi, phenelzine, nardil, tranylcypromine, parnate, isocarboxazid, marplan, selegiline,",
        "emsam, rasagiline, azilect, linezolid, zyvox",
    ),
    # Drugs the phenelzine and tranylcypromine labels contraindicate alongside an MAOI.
    "MAOI-contraindicated drug": _terms(
        "meperidine, demerol, tramadol, ultram, dextromethorphan, bupropion, wellbutrin,",
        "pseudoephedrine, sudafed",
    ),
    # FDA prescribing information of warfarin (Coumadin), Drug Interactions (aspirin included).
    "NSAID": _terms(
        "nsaid, ibuprofen, advil, motrin, naproxen, aleve, naprosyn, aspirin, diclofenac,",
        "voltaren,"
        "celecoxib, celebrex, meloxicam, mobic, indomethacin, ketorolac, ketoprofen, piroxicam,",
        "etodolac, nabumetone",
    ),
    "warfarin": _terms("warfarin, coumadin, jantoven"),
    "vitamin K": _terms(
        "vitamin k, vitamin k1, vitamin k2, phytonadione, phylloquinone, menaquinone, mk-7"
    ),
    "St John's wort": _terms("st john's wort, st johns wort, saint john's wort, hypericum"),
    # Simvastatin and lovastatin labels contraindicate strong CYP3A4 inhibitors; atorvastatin's
    # label limits its dose with them (FDA prescribing information, Drug Interactions).
    "simvastatin/lovastatin": _terms("simvastatin, zocor, lovastatin, mevacor, altoprev"),
    "atorvastatin": _terms("atorvastatin, lipitor"),
    "strong CYP3A4 inhibitor": _terms(
        "clarithromycin, biaxin, erythromycin, itraconazole, sporanox, ketoconazole, posaconazole,",
        "noxafil, voriconazole, vfend, ritonavir, norvir, paxlovid, nefazodone",
    ),
}

_WASHOUT = "the labels require at least 14 days between stopping an MAOI and starting"

# fmt: off
# (class, class, severity, what can happen, what to do), among current Medications/Supplements.
DRUG_PAIRS: tuple[tuple[str, str, Severity, str, str], ...] = (
    ("MAOI", "SSRI", "critical", "serotonin syndrome, which can be fatal",
     f"never take them together; call the prescriber before the next dose ({_WASHOUT} an SSRI, "
     "5 weeks after fluoxetine)"),
    ("MAOI", "SNRI", "critical", "serotonin syndrome, which can be fatal",
     f"never take them together; call the prescriber before the next dose ({_WASHOUT} an SNRI)"),
    ("MAOI", "MAOI-contraindicated drug", "critical", "serotonin syndrome or a hypertensive crisis",
     "do not take it while on the MAOI; ask the prescriber or pharmacist for an alternative"),
    ("warfarin", "NSAID", "warning", "a higher risk of serious bleeding",
     "ask the prescriber or anticoagulation clinic whether the pair is intended before taking it"),
    ("warfarin", "vitamin K", "critical", "vitamin K undoes warfarin: INR drops and clot risk rises",
     "do not start it without the anticoagulation clinic; a vitamin K change needs INR checks"),
    ("warfarin", "St John's wort", "warning", "a weaker warfarin effect and a higher clot risk",
     "stop the herbal product and ask the anticoagulation clinic to check INR"),
    ("SSRI", "St John's wort", "warning", "serotonin syndrome",
     "stop the herbal product and ask the prescriber"),
    ("SNRI", "St John's wort", "warning", "serotonin syndrome",
     "stop the herbal product and ask the prescriber"),
    ("simvastatin/lovastatin", "strong CYP3A4 inhibitor", "critical",
     "very high statin levels and muscle damage (rhabdomyolysis)",
     "the labels contraindicate this pair; ask the prescriber to pause the statin or switch"),
    ("atorvastatin", "strong CYP3A4 inhibitor", "warning",
     "higher statin levels and muscle damage (rhabdomyolysis)",
     "ask the prescriber whether the atorvastatin dose needs limiting during the course"),
)

# Teratogens: severity, names, why. FDA prescribing information, Contraindications / Boxed
# Warning of each drug; statins per the FDA Drug Safety Communication of July 2021, which removed
# the pregnancy contraindication but still advises most pregnant patients to stop them.
_BIRTH_DEFECTS = "contraindicated in pregnancy (severe birth defects)"
TERATOGENS: dict[str, tuple[Severity, tuple[str, ...], str]] = {
    "isotretinoin": ("critical", _terms("isotretinoin, accutane, absorica, claravis, amnesteem, "
                                        "zenatane, myorisan"), _BIRTH_DEFECTS),
    "acitretin": ("critical", _terms("acitretin, soriatane"), _BIRTH_DEFECTS),
    "thalidomide class": ("critical", _terms("thalidomide, thalomid, lenalidomide, revlimid, "
                                             "pomalidomide"), _BIRTH_DEFECTS),
    "methotrexate": ("critical", _terms("methotrexate, trexall, otrexup, rasuvo"),
                     "contraindicated in pregnancy (embryo-fetal death, birth defects)"),
    "misoprostol": ("critical", _terms("misoprostol, cytotec, arthrotec"),
                    "contraindicated in pregnancy (miscarriage, birth defects)"),
    "warfarin": ("critical", _terms("warfarin, coumadin, jantoven"),
                 "contraindicated in pregnancy bar some mechanical heart valves (fetal harm)"),
    "valproate": ("critical", _terms("valproate, valproic acid, divalproex, depakote, depakene"),
                  "under a boxed warning for major birth defects and lower IQ"),
    "ACE inhibitor / ARB": ("critical", _terms(
        "lisinopril, zestril, prinivil, enalapril, vasotec, ramipril, altace, benazepril, ",
        "captopril, losartan, cozaar, valsartan, diovan, irbesartan, olmesartan, candesartan, ",
        "telmisartan"), "an ACE inhibitor or ARB, under a boxed warning for fetal toxicity"),
    "statin": ("warning", _terms("atorvastatin, lipitor, simvastatin, zocor, lovastatin, "
                                 "rosuvastatin, crestor, pravastatin"),
               "a statin, which the FDA advises most pregnant patients to stop"),
}
# fmt: on

# -- foods -----------------------------------------------------------------------------------
# The nine major food allergens of US law (FDA, FALCPA 2004 and FASTER Act 2021) with common
# foods and dishes that contain them; "seafood" counts as both fish and shellfish.
FOOD_ALLERGENS: dict[str, tuple[str, ...]] = {
    "shellfish": _terms(
        "shellfish, shrimp, prawn, lobster, crab, crayfish, crawfish, langoustine, scampi,",
        "scallop, oyster, clam, mussel, seafood",
    ),
    "fish": _terms(
        "fish, salmon, tuna, cod, halibut, anchovy, anchovies, sardine, sushi, sashimi, seafood"
    ),
    "peanut": _terms("peanut, groundnut, satay"),
    "tree nut": _terms(
        "tree nut, nut, almond, walnut, cashew, pecan, pistachio, hazelnut, macadamia, praline,",
        "marzipan",
    ),
    "milk": _terms("milk, dairy, cheese, butter, cream, yogurt"),
    "egg": _terms("egg, omelet, omelette, mayonnaise, meringue"),
    "wheat": _terms("wheat, gluten, bread, pasta, flour, couscous"),
    "soy": _terms("soy, soya, tofu, edamame, miso, tempeh"),
    "sesame": _terms("sesame, tahini, hummus"),
}

# Foods that interact with drugs: FDA consumer update "Grapefruit Juice and Some Drugs Don't Mix"
# (grapefruit, pomelo, Seville orange); phenelzine (Nardil) prescribing information (tyramine);
# warfarin (Coumadin) prescribing information (keep vitamin K intake steady).
FOOD_CLASSES: dict[str, tuple[str, ...]] = {
    "grapefruit": _terms("grapefruit, pomelo, seville orange"),
    "tyramine-rich food": _terms(
        "aged cheese, cheddar, parmesan, blue cheese, gorgonzola, stilton, camembert, salami,",
        "pepperoni, prosciutto, cured meat, sauerkraut, kimchi, soy sauce, tap beer, draft beer,",
        "fava bean, broad bean, marmite, yeast extract",
    ),
    "vitamin K-rich food": _terms(
        "kale, spinach, collard, swiss chard, turnip green, mustard green, natto,",
        "brussels sprouts, leafy green",
    ),
}

# fmt: off
FOOD_PAIRS: tuple[tuple[tuple[str, ...], str, Severity, str, str], ...] = (
    (("simvastatin/lovastatin", "atorvastatin"), "grapefruit", "warning",
     "grapefruit blocks CYP3A4 and raises statin levels, risking muscle damage (rhabdomyolysis)",
     "avoid grapefruit and its juice on this statin, or ask about a statin it does not affect"),
    (("MAOI",), "tyramine-rich food", "warning", "tyramine can cause a hypertensive crisis",
     "avoid aged cheese, cured meat, fermented food and tap beer on the MAOI and 2 weeks after"),
    (("warfarin",), "vitamin K-rich food", "info", "changes in vitamin K intake shift INR",
     "keep the amount steady week to week and tell the anticoagulation clinic about diet changes"),
)
# fmt: on

# -- field conventions -------------------------------------------------------------------------
SETTLED = _split("done resolved cancelled returned filed completed paid renewed submitted")
DEADLINE_FIELDS = _split(
    "deadline due return_by warranty_until warranty_expires renews_on expires ends promo_ends"
)
# Days ahead a deadline is flagged: 14, or 30 for a warranty's end (a claim needs a diagnosis and a
# repair visit, which take weeks to arrange: common sense).
DEADLINE_LEAD_DAYS = {"warranty_until": 30, "warranty_expires": 30}
NOTICE_FIELDS = ("renews_on", "expires", "ends")  # with ``notice_days``: act by date minus notice
DEADLINE_EXCLUDED = {("Passport", "expires")}  # passport_validity covers passports
DEADLINE_ACTIONS = {
    "return_by": "start the return",
    "warranty_until": "file any warranty claim",
    "warranty_expires": "file any warranty claim",
    "renews_on": "cancel or confirm the renewal",
    "promo_ends": "pay down the promotional balance or plan for the regular rate",
    "expires": "renew or replace it",
    "ends": "decide what happens when it ends",
}
TRIP_TYPES = frozenset({"Trip", "Vacation", "Travel"})
STAYS = frozenset({"Hotel", "Lodging", "Accommodation"})
TRAVEL_PARTS = STAYS | {"Flight", "Train", "CarRental"}
# Types with start/end that are states or periods, not commitments of the user's time.
NOT_COMMITMENTS = frozenset(
    _split(
        "Medication Supplement Condition Allergy Residence Home Employment Subscription Lease "
        "Membership Insurance HealthInsurance Policy Visa Passport Warranty Account"
    )
)
MAX_ALL_DAY_COMMITMENT = timedelta(days=31)  # longer all-day ranges are periods (except trips)
SINGULAR_TYPES = ("Residence", "Home")  # one current at a time; not Employer (two jobs happen)
TRAVEL_DOCUMENTS = _split(
    "DriverLicense License IDCard Insurance HealthInsurance TravelInsurance HealthCertificate "
    "Certificate Vaccination"
)
CERTIFICATES = frozenset({"HealthCertificate", "Certificate", "Vaccination"})
PASSPORT_MONTHS = timedelta(days=183)
MIN_BLANK_PAGES = 2  # a visa sticker takes a full page, entry and exit stamps another


# -- record helpers --------------------------------------------------------------------------
def _get(rec: Record, name: str) -> Any:
    # A record's __dict__ holds every field of its type; a miss (a field the type lacks) through
    # getattr goes down pydantic's slow path, ~40x slower, and rules probe many absent fields.
    return rec.__dict__.get(name)


def _flag(rec: Record, *names: str) -> bool:
    values = rec.__dict__
    return any(values.get(n) is True for n in names)


def _text(rec: Record, names: Iterable[str]) -> str:
    parts: list[str] = []
    values = rec.__dict__
    for n in names:
        v = values.get(n)
        if isinstance(v, str):
            parts.append(v)
        elif isinstance(v, list):
            parts.extend(x for x in v if isinstance(x, str))
    return " ; ".join(parts)


DATE_TYPES = frozenset({"date", "datetime"})


def _date_fields(user: UserView, t: str, names: Iterable[str]) -> list[str]:
    """Those of ``names`` that type ``t`` has as date or date-time fields, in ``names`` order."""
    ftypes = user.field_types(t)
    return [n for n in names if ftypes.get(n) in DATE_TYPES]


def _dated_from(
    user: UserView, t: str, fields: Sequence[str], since: date | datetime
) -> list[Record]:
    """Current records of ``t`` with a value from ``since`` on in any of the date ``fields``.

    Read through the fold's field indexes, so a rule about what lies ahead reads the records
    ahead, not the type's whole past (a superset of what ``_first_day(rec, fields) >= since``
    keeps; the rule applies its own test)."""
    found: dict[str, Record] = {}
    for f in fields:
        for rec in user.where(t, f, since=since):
            found.setdefault(rec.key, rec)
    return list(found.values())


def _from_day(user: UserView, t: str, since: date | None, fields: Sequence[str]) -> list[Record]:
    """Current records of ``t`` with a date from ``since`` on in any of ``fields``, and those
    with none of them set (the rule decides about those); every record when ``since`` is None
    or ``t`` has none of the fields as dates. A superset of ``_first_day(rec, fields) >= since``
    read through the field indexes, so its cost follows the records returned."""
    dated = _date_fields(user, t, fields)
    if since is None or not dated:
        return user.all(t)
    undated = [r for r in user.unset(t, dated[0]) if all(_get(r, f) is None for f in dated[1:])]
    return _dated_from(user, t, dated, since) + undated


def _not_past(user: UserView, t: str, today: date | None, fields: Sequence[str]) -> list[Record]:
    """Current records of ``t`` not dated before ``today`` by their first date ``fields``, and
    those with none of the fields set; every record when there is no clock or no date field."""
    recs = _from_day(user, t, today, fields)
    if today is None:
        return recs
    return [r for r in recs if (d := _first_day(r, fields)) is None or d >= today]


def _uneaten(user: UserView, t: str, today: date | None) -> list[Record]:
    """Current records of food type ``t``; of meals and reservations, only those not dated
    before today (those were eaten). A habit or a restaurant has no such date."""
    return _not_past(user, t, today, ("start", "date")) if t in MEAL_TYPES else user.all(t)


def _at_least(user: UserView, t: str, field: str, low: float) -> list[Record]:
    """Current records of ``t`` whose number ``field`` is ``low`` or more, through its index;
    every record when the field is not a number field (the rule checks each value)."""
    if user.field_types(t).get(field) not in ("int", "float"):
        return user.all(t)
    return user.where(t, field, since=low)


def _day(v: Any) -> date | None:
    """A date or datetime field as a date; None for other values and for placeholder dates
    outside the years 1000–9000 (9999-12-31 often means "never"), so arithmetic cannot overflow."""
    d = v.date() if isinstance(v, datetime) else v if isinstance(v, date) else None
    return d if d is not None and 1000 < d.year < 9000 else None


def _first_day(rec: Record, names: Iterable[str]) -> date | None:
    values = rec.__dict__
    for n in names:
        if (d := _day(values.get(n))) is not None:
            return d
    return None


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _money(x: float, rec: Record) -> str:
    cur = _get(rec, "currency")
    return f"{cur} {x:,.2f}" if isinstance(cur, str) and cur else f"{x:,.2f}"


_NAME_FIELDS = _split("name title item substance destination merchant service holder city")


def _label(rec: Record) -> str:
    name = next((v for n in _NAME_FIELDS if isinstance(v := _get(rec, n), str) and v.strip()), None)
    base = f"{type(rec).__name__} '{rec.key}'"
    return f"{base} ({name.strip()})" if name else base


def _days(n: int) -> str:
    return f"{n} day" if abs(n) == 1 else f"{n} days"


def _current_meds(
    user: UserView, today: date | None, types: Sequence[str] = ("Medication",)
) -> list[tuple[Record, str]]:
    """Current medication-like records and their normalised names (stopped, ended ones left out)."""
    out = []
    for t in types:
        for m in user.all(t):
            if _get(m, "active") is False or _flag(m, "stopped", "discontinued", "cancelled"):
                continue
            end = _day(_get(m, "end"))
            if end is not None and today is not None and end < today:
                continue
            text = _norm(_text(m, ("name", "item", "generic", "brand", "drug")))
            if text.strip():
                out.append((m, text))
    return out


# -- health ----------------------------------------------------------------------------------
SEVERE_WORDS = _terms("severe, anaphylaxis, anaphylactic, life threatening, epipen")


def _allergies(user: UserView) -> list[tuple[Record, str, bool]]:
    """Current, not resolved allergies: (record, normalised substance, severe?)."""
    out = []
    for a in user.all("Allergy"):
        if _flag(a, "absent", "resolved") or _get(a, "active") is False:
            continue
        substance = _get(a, "substance")
        if isinstance(substance, str) and _norm(substance).strip():
            sev = _norm(_text(a, ("severity", "reaction")))
            severe = any(w in sev for w in SEVERE_WORDS)
            out.append((a, _norm(substance), severe))
    return out


@rule(
    watch=["Allergy", "Medication"],
    severity="critical",
    category="drug_interactions_health_safety",
    source="FDA prescribing information, Contraindications: amoxicillin, cephalexin (Keflex), "
    "sulfamethoxazole/trimethoprim (Bactrim); AAAAI/ACAAI drug allergy practice parameter "
    f"(2022) on penicillin-cephalosporin cross-reactivity; {SCENARIOS}: health_02",
)
def drug_allergy_cross_reactivity(user: UserView) -> Iterator[Finding]:
    """Reads ``Allergy.substance``/``severity``/``reaction`` (skips ``absent``/``resolved`` true)
    and current ``Medication.name``/``generic``/``brand`` (skips ``active`` false, ``end`` past).

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


FOOD_TYPES = ("Reservation", "Meal", "FoodHabit", "Restaurant")
FOOD_TEXT = _split("name title item items dish dishes cuisine venue restaurant description")


@rule(
    watch=["Allergy", *FOOD_TYPES],
    severity="warning",
    category="drug_interactions_health_safety",
    source="FDA, Food Allergies: the nine major food allergens (FALCPA 2004, FASTER Act 2021); "
    f"{SCENARIOS}: health_04",
)
def food_allergy_exposure(user: UserView) -> Iterator[Finding]:
    """Reads ``Allergy.substance``/``severity``/``reaction`` and the text fields (name, title, item,
    items, dish, dishes, cuisine, venue, restaurant, description) of current ``Reservation``,
    ``Meal``, ``FoodHabit`` and ``Restaurant`` records (skips ``cancelled``/``avoid`` true and
    reservations or meals whose ``start``/``date`` is past: those were eaten).

    Flags a record whose text names a food of the allergen's group (shellfish allergy ↔ "The Crab
    Shack", seafood) or the allergen itself: critical when the allergy is severe/anaphylactic,
    else warning.
    """
    allergies = [(a, s, severe, _classes(s, FOOD_ALLERGENS)) for a, s, severe in _allergies(user)]
    if not allergies:
        return
    today = user.today
    for t in FOOD_TYPES:
        for rec in _uneaten(user, t, today):
            if _flag(rec, "cancelled", "avoid", "avoids"):
                continue
            text = _norm(_text(rec, FOOD_TEXT))
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
    watch=["Medication", "Supplement"],
    severity="critical",
    category="drug_interactions_health_safety",
    source="FDA prescribing information: phenelzine (Nardil) and sertraline (Zoloft), "
    "Contraindications; warfarin (Coumadin), Drug Interactions; simvastatin (Zocor), "
    "lovastatin and atorvastatin "
    f"(Lipitor), Contraindications / Drug Interactions; {SCENARIOS}: health_01, health_07",
)
def drug_drug_interaction(user: UserView) -> Iterator[Finding]:
    """Reads current ``Medication`` and ``Supplement`` names (``name``/``item``/``generic``/
    ``brand``; skips ``active`` false, ``stopped`` true or ``end`` past).

    Flags dangerous pairs of ``DRUG_PAIRS``: SSRI/SNRI + MAOI (serotonin syndrome), warfarin +
    NSAID (bleeding, warning), warfarin + vitamin K supplement, simvastatin/lovastatin + a strong
    CYP3A4 inhibitor, atorvastatin + one (warning), St John's wort with SSRIs/SNRIs/warfarin.
    """
    by_class: dict[str, list[Record]] = defaultdict(list)
    for rec, text in _current_meds(user, user.today, ("Medication", "Supplement")):
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
    watch=["Medication", "FoodHabit", "Meal", "Supplement"],
    severity="warning",
    category="drug_interactions_health_safety",
    source="FDA consumer update 'Grapefruit Juice and Some Drugs Don't Mix'; FDA prescribing "
    "information: simvastatin (Zocor), phenelzine (Nardil, tyramine), warfarin (Coumadin, "
    f"vitamin K); {SCENARIOS}: health_03",
)
def food_drug_interaction(user: UserView) -> Iterator[Finding]:
    """Reads current ``Medication`` names and the ``item``/``name``/``items``/``dish`` of current
    ``FoodHabit``, ``Meal`` and ``Supplement`` records (skips ``avoid`` true, and meals dated
    before today: a meal already eaten is no standing interaction, a habit is).

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
    for t in ("FoodHabit", "Meal", "Supplement"):
        for food in _uneaten(user, t, today):
            if _flag(food, "avoid", "avoids", "stopped", "cancelled"):
                continue
            found = _classes(_norm(_text(food, ("item", "name", "items", "dish"))), FOOD_CLASSES)
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
    watch=["Condition", "Pregnancy", "Medication"],
    severity="critical",
    category="drug_interactions_health_safety",
    source="FDA prescribing information, Contraindications / Boxed Warning: isotretinoin "
    "(iPLEDGE), thalidomide, methotrexate, misoprostol, warfarin, valproate, ACE inhibitors "
    "and ARBs; "
    f"FDA Drug Safety Communication on statins in pregnancy (2021); {SCENARIOS}: health_08",
)
def pregnancy_teratogenic_medication(user: UserView) -> Iterator[Finding]:
    """Reads current ``Condition.name`` (containing "pregnan"; skips ``resolved`` true, ``active``
    false or ``end`` past), any current ``Pregnancy`` record, and current ``Medication`` names.

    Flags a medication known to harm a pregnancy: critical for isotretinoin, acitretin,
    thalidomide-class drugs, methotrexate, misoprostol, warfarin, valproate, ACE inhibitors and
    ARBs; warning for statins.
    """
    today = user.today
    pregnancies = [c for c in user.all("Pregnancy") if not _flag(c, "resolved", "ended")]
    for c in user.all("Condition"):
        end = _day(_get(c, "end"))
        if (
            "pregnan" in str(_get(c, "name") or "").lower()
            and not _flag(c, "resolved", "absent")
            and _get(c, "active") is not False
            and not (end is not None and today is not None and end < today)
        ):
            pregnancies.append(c)
    if not pregnancies:
        return
    preg = pregnancies[0]
    for med, text in _current_meds(user, today):
        for group, (severity, terms, why) in TERATOGENS.items():
            if any(term in text for term in terms):
                started = _day(_get(med, "start"))
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
ACTIVITY_TYPES = _split(
    "Activity Course Class Lesson Event Trip Vacation Booking Reservation Excursion Tour Hobby Plan"
)
ACTIVITY_TEXT = _split("name title activity activities description kind course purpose")


def _current_conditions(user: UserView) -> list[tuple[Record, str]]:
    """Current ``Condition`` records (not resolved/absent, ``active`` not false, ``end`` not
    past) and their normalised names."""
    today, out = user.today, []
    for c in user.all("Condition"):
        end = _day(_get(c, "end"))
        if (
            _flag(c, "resolved", "absent")
            or _get(c, "active") is False
            or (end is not None and today is not None and end < today)
        ):
            continue
        if (name := _norm(_text(c, ("name", "condition", "diagnosis")))).strip():
            out.append((c, name))
    return out


@rule(
    watch=["Condition", *ACTIVITY_TYPES],
    severity="critical",
    category="drug_interactions_health_safety",
    source="WRSTC/UHMS Diver Medical | Participant Questionnaire (2020): conditions that need a "
    f"physician's written approval before diving; {SCENARIOS}: health_06",
)
def activity_medical_clearance(user: UserView) -> Iterator[Finding]:
    """Reads current ``Condition.name`` (skips ``resolved``/``absent`` true, ``active`` false or
    ``end`` past) and the text (name, title, activity, activities, description, kind, course,
    purpose) of current ``Activity``, ``Course``, ``Class``, ``Lesson``, ``Event``, ``Trip``,
    ``Vacation``, ``Booking``, ``Reservation``, ``Excursion``, ``Tour``, ``Hobby`` and ``Plan``
    records (skips ``cancelled`` true, ``cleared``/``medical_clearance`` true, and those whose
    ``end``/``start``/``date`` is past).

    Flags a planned activity of ``ACTIVITY_CLEARANCE`` (scuba diving) with a condition the diver
    medical questionnaire lists (asthma, chronic lung disease, pneumothorax, seizures, heart
    disease, diabetes): critical — no diving without a physician's written approval.
    """
    conditions = _current_conditions(user)
    if not conditions:
        return
    today = user.today
    for t in ACTIVITY_TYPES:
        for rec in _not_past(user, t, today, ("end", "start", "date")):
            if _flag(rec, "cancelled", "cleared", "medical_clearance"):
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


# -- travel ----------------------------------------------------------------------------------
def _upcoming_trips(user: UserView) -> Iterator[tuple[Record, date, date]]:
    """Current, not cancelled trips that have not ended: (trip, start, end or start)."""
    today = user.today
    # A trip that has not ended starts or ends from today on: the index reads just those.
    for trip in _from_day(user, "Trip", today, ("start", "end")):
        start = _day(_get(trip, "start"))
        if start is None or _flag(trip, "cancelled"):
            continue
        end = max(_day(_get(trip, "end")) or start, start)
        if today is None or end >= today:
            yield trip, start, end


def _trip_where(trip: Record) -> str:
    return ", ".join(
        v for n in ("destination", "country") if isinstance(v := _get(trip, n), str) and v
    )


def _names(v: Any) -> list[str]:
    items = v if isinstance(v, list) else [v]
    return [_norm(x) for x in items if isinstance(x, str) and _norm(x).strip()]


def _same_person(a: str, b: str) -> bool:
    sa, sb = set(a.split()), set(b.split())
    return bool(sa) and bool(sb) and (sa <= sb or sb <= sa)


def _travellers(trip: Record) -> list[str]:
    # Companions travel *with* the user, so naming them never narrows whose passport counts;
    # only an explicit traveller field does.
    fields = ("traveller", "travellers", "traveler", "travelers")
    return [n for f in fields for n in _names(_get(trip, f))]


def _passports_for(trip: Record, best: dict[str, Record]) -> list[Record]:
    """The passports of the trip's named travellers, plus those of no (or a 'me') holder."""
    names = _travellers(trip)
    if not names or all(h == "" for h in best):
        return list(best.values())
    me = {"", "me", "self", "user"}
    return [p for h, p in best.items() if h.strip() in me or any(_same_person(h, n) for n in names)]


def _passport_findings(
    p: Record, trip: Record, where: str, start: date, end: date
) -> Iterator[Finding]:
    exp = _day(_get(p, "expires")) or date.max
    if exp < start:
        yield Finding(
            f"{_label(p)} expires {exp}, {_days((start - exp).days)} before you leave for {where} "
            f"on {start} ({_label(trip)}): you cannot travel on it. Renew it now.",
            [p, trip],
        )
    elif exp <= end:
        yield Finding(
            f"{_label(p)} expires {exp}, during your trip to {where} ({start} – {end}, "
            f"{_label(trip)}): renew it before you leave.",
            [p, trip],
        )
    elif exp != date.max and exp < end + PASSPORT_MONTHS:
        after = (exp - end).days
        yield Finding(
            f"{_label(p)} expires {exp}, only {_days(after)} after you return from {where} on "
            f"{end} ({_days((exp - start).days)} after departure on {start}; {_label(trip)}). "
            "Many countries require six months' validity beyond the stay: you need a passport "
            f"valid until at least {end + PASSPORT_MONTHS}. Check the entry rules on "
            "travel.state.gov and renew before you go.",
            [p, trip],
            severity="critical" if after < 90 else "warning",
        )
    pages = _get(p, "blank_pages")
    if isinstance(pages, int) and not isinstance(pages, bool) and 0 <= pages < MIN_BLANK_PAGES:
        yield Finding(
            f"{_label(p)} has {pages} blank page{'' if pages == 1 else 's'} left and "
            f"{_label(trip)} goes to {where} on {start}: many countries require "
            f"{MIN_BLANK_PAGES} (a visa takes a full page, entry and exit stamps another). Renew "
            "the passport before applying for any visa.",
            [p, trip],
            about="blank_pages",
        )


@rule(
    watch=["Trip", "Passport", "Residence"],
    severity="critical",
    category="travel_document_validity",
    source="U.S. Department of State, travel.state.gov country information (passport validity "
    f"and blank pages; many countries require six months' validity); {SCENARIOS}: "
    "travel_01, travel_04, travel_05",
)
def passport_validity(user: UserView) -> Iterator[Finding]:
    """Reads current ``Trip`` (``start``, ``end``, ``country``, ``destination``, ``international``,
    traveller names in ``traveller(s)``/``companions``; skips ``cancelled`` and ended trips),
    ``Passport`` (``holder``, ``expires``, ``blank_pages``, ``country``/``nationality``) and
    ``Residence.country``.

    A trip is international if ``international`` is true, or if it is not false and names a
    ``country`` other than the home countries (residence and passport countries). For each
    traveller the passport with the latest ``expires`` is checked: critical if it expires before
    the trip ends; critical if less than 90 days, warning if less than 183 days (six months) after
    the return; critical if it has fewer than 2 ``blank_pages``. A named traveller with no
    passport in that name but one with the same first name and another surname: critical.
    """
    home = {
        _norm(v)
        for t in ("Residence", "Passport")
        for r in user.all(t)
        for n in ("country", "nationality")
        if isinstance(v := _get(r, n), str)
    }
    best: dict[str, Record] = {}
    for p in user.all("Passport"):
        if _flag(p, "cancelled", "lost", "replaced"):
            continue
        holder = _norm(str(_get(p, "holder") or "")).strip()
        exp = _day(_get(p, "expires")) or date.min
        if holder not in best or exp > (_day(_get(best[holder], "expires")) or date.min):
            best[holder] = p
    for trip, start, end in _upcoming_trips(user):
        country = _get(trip, "country")
        country_n = _norm(country) if isinstance(country, str) else ""
        intl = _get(trip, "international")
        if intl is True or (intl is None and country_n.strip() and country_n not in home):
            where = _trip_where(trip) or "your destination"
            passports = _passports_for(trip, best)
            for p in passports:
                yield from _passport_findings(p, trip, where, start, end)
            yield from _name_mismatches(trip, best, passports)


def _name_mismatches(
    trip: Record, best: dict[str, Record], found: list[Record]
) -> Iterator[Finding]:
    """A named traveller with no passport of that name, but one whose holder has the same
    first name and another surname (a ticket must match the passport exactly)."""
    matched = {id(p) for p in found}
    for name in _travellers(trip):
        if any(_same_person(h, name) for h in best):
            continue
        for holder, p in best.items():
            first = holder.split()[:1]
            if id(p) not in matched and first and first == name.split()[:1]:
                yield Finding(
                    f"{_label(trip)} is booked for '{name.strip().title()}', but {_label(p)} is in "
                    f"the name '{holder.title()}': airlines require the ticket name to match the "
                    "passport exactly; correct the booking or reissue the passport before you go.",
                    [p, trip],
                    about=f"name:{name.strip()}",
                )


# Schengen area members (European Commission, "Schengen Area", 29 countries since 2025).
SCHENGEN = frozenset(
    _terms(
        "Austria, Belgium, Bulgaria, Croatia, Czechia, Czech Republic, Denmark, Estonia, Finland,",
        "France, Germany, Greece, Hungary, Iceland, Italy, Latvia, Liechtenstein, Lithuania,",
        "Luxembourg, Malta, Netherlands, Norway, Poland, Portugal, Romania, Slovakia, Slovenia,",
        "Spain, Sweden, Switzerland",
    )
)
_SCHENGEN_AREA = _norm("Schengen")


def _areas(trip: Record) -> set[str]:
    """The normalised countries of a trip (``country``, ``countries``), plus Schengen if any is."""
    out = set(_names(_get(trip, "country")) + _names(_get(trip, "countries")))
    return out | {_SCHENGEN_AREA} if out & SCHENGEN else out


@rule(
    watch=["Trip", "Visa"],
    severity="critical",
    category="travel_document_validity",
    source="U.S. Department of State, travel.state.gov country information (visas); "
    f"{SCENARIOS}: travel_03, travel_07",
)
def visa_validity(user: UserView) -> Iterator[Finding]:
    """Reads current ``Visa`` records (``country``, ``starts``, ``expires``, ``entries``/
    ``single_entry``, ``used``; skips ``cancelled``) and ``Trip`` records (``country``/
    ``countries``, ``start``, ``end``). A visa for "Schengen" covers the Schengen countries.

    For each coming trip to a visa's country flags (critical): the visa ``starts`` after the trip
    starts; it ``expires`` before the trip ends; it is single-entry and already ``used``, or an
    earlier trip to the same country began within its validity.
    """
    visas: dict[str, list[Record]] = defaultdict(list)
    for v in user.all("Visa"):
        if not _flag(v, "cancelled"):
            for area in _names(_get(v, "country")):
                visas[area].append(v)
    if not visas:
        return
    trips = [(t, s, _areas(t)) for t in user.all("Trip") if (s := _day(_get(t, "start")))]
    for trip, start, end in _upcoming_trips(user):
        where = _trip_where(trip) or "your destination"
        for v in {id(v): v for a in sorted(_areas(trip)) for v in visas.get(a, ())}.values():
            starts, expires = _day(_get(v, "starts")), _day(_get(v, "expires"))
            if starts is not None and starts > start:
                yield Finding(
                    f"{_label(v)} is valid from {starts}, {_days((starts - start).days)} after you "
                    f"arrive in {where} on {start} ({_label(trip)}): you would be refused entry; "
                    f"move the trip to on or after {starts} or get the visa's start changed.",
                    [v, trip],
                    about="starts",
                )
            if expires is not None and expires < end:
                yield Finding(
                    f"{_label(v)} expires {expires}, {_days((end - expires).days)} before your "
                    f"trip to {where} ends on {end} ({_label(trip)}): shorten the stay or extend "
                    "the visa.",
                    [v, trip],
                    about="expires",
                )
            entries = _get(v, "entries")
            single = _flag(v, "single_entry") or entries == 1 or "single" in str(entries).lower()
            if not single:
                continue
            v_areas = set(_names(_get(v, "country")))
            used = [
                t
                for t, s, areas in trips
                if t is not trip
                and s < start
                and areas & v_areas
                and (starts is None or s >= starts)
                and (expires is None or s <= expires)
            ]
            if used or _flag(v, "used"):
                how = f" for {_label(used[0])}" if used else ""
                yield Finding(
                    f"{_label(v)} is single-entry and was already used{how}: it cannot be used "
                    f"again for {_label(trip)} on {start}; apply for a new visa before you go.",
                    [v, trip, *used[:1]],
                    about="used",
                )


@rule(
    watch=["Trip"],
    severity="critical",
    category="travel_document_validity",
    source="Schengen Borders Code (Regulation (EU) 2016/399), Article 6: at most 90 days in any "
    f"180-day period; {SCENARIOS}: travel_08",
)
def schengen_90_180(user: UserView) -> Iterator[Finding]:
    """Reads ``Trip`` records (``country``/``countries``, ``start``, ``end``; skips ``cancelled``
    and, for the trip checked, ``resident``/``visa_exempt_long_stay`` true).

    For each coming trip to a Schengen country, counts the distinct days spent in the Schengen
    area (entry and exit days included) in the 180 days ending on the trip's last day, the trip
    itself included; flags more than 90 (critical) with the days used, planned and allowed.
    """
    stays = []
    # Only stays that end inside some coming trip's 180-day window count: none ended before
    # 180 days ago (the index hands over the trips from then on).
    since = user.today - timedelta(days=180) if user.today else None
    for t in _from_day(user, "Trip", since, ("start", "end")):
        s = _day(_get(t, "start"))
        if s is not None and not _flag(t, "cancelled") and _SCHENGEN_AREA in _areas(t):
            stays.append((t, s, max(_day(_get(t, "end")) or s, s)))
    coming = [
        (trip, start, end)
        for trip, start, end in _upcoming_trips(user)
        if _SCHENGEN_AREA in _areas(trip) and not _flag(trip, "resident", "visa_exempt_long_stay")
    ]
    if not stays or not coming:
        return
    # Each day in the area, once, with the stays that cover it (bounded to the windows asked).
    first = min(end for _, _, end in coming) - timedelta(days=179)
    last = max(end for _, _, end in coming)
    covered: dict[date, list[Record]] = defaultdict(list)
    for t, s, e in stays:
        lo, hi = max(s, first), min(e, last)
        for i in range(max((hi - lo).days + 1, 0)):
            covered[lo + timedelta(days=i)].append(t)
    for trip, start, end in coming:
        window = end - timedelta(days=179)
        days = [window + timedelta(days=i) for i in range(180)]
        days = [d for d in days if d in covered]
        before = [d for d in days if d < start and any(t is not trip for t in covered[d])]
        if len(days) > 90:
            planned = (end - start).days + 1
            yield Finding(
                f"{_label(trip)} ({start} – {end}, {planned} days) would bring your time in the "
                f"Schengen area to {len(days)} days in the 180 days up to {end}, over the 90-day "
                f"limit: {len(before)} days are already used since {window}, so at most "
                f"{max(90 - len(before), 0)} days remain. Shorten or move the trip.",
                [trip],
            )


@rule(
    watch=["Trip", *TRAVEL_DOCUMENTS],
    severity="critical",
    category="travel_document_validity",
    source=f"{SCENARIOS}: deadline_06, travel_06, finance_04",
)
def document_expires_before_trip(user: UserView) -> Iterator[Finding]:
    """Reads ``expires`` of current ``DriverLicense``, ``License``, ``IDCard``, ``Insurance``,
    ``HealthInsurance``, ``TravelInsurance``, ``HealthCertificate``, ``Certificate`` and
    ``Vaccination`` records (skips ``renewed``/``replaced``/``cancelled`` true) and current trips
    (``start``, ``end``).

    Of each type only the document with the latest ``expires`` counts (an old one that was
    replaced is not flagged). Flags it if it expires on or before a coming trip's end: critical if
    it has expired by departure (warning for certificates and vaccinations, which only some
    destinations check), warning if it expires during the trip.
    """
    docs: dict[str, tuple[Record, date]] = {}
    for t in TRAVEL_DOCUMENTS:
        for d in user.all(t):
            exp = _day(_get(d, "expires"))
            settled = _flag(d, "renewed", "replaced", "cancelled")
            if exp and not settled and (t not in docs or exp > docs[t][1]):
                docs[t] = (d, exp)
    if not docs:
        return
    for trip, start, end in _upcoming_trips(user):
        for t, (doc, exp) in docs.items():
            if exp < start:
                yield Finding(
                    f"{_label(doc)} expires {exp}, {_days((start - exp).days)} before "
                    f"{_label(trip)} starts on {start}: renew it before you go, or confirm you "
                    "won't need it.",
                    [doc, trip],
                    severity="warning" if t in CERTIFICATES else None,
                )
            elif exp <= end:
                yield Finding(
                    f"{_label(doc)} expires {exp}, during {_label(trip)} ({start} – {end}): "
                    "renew it before you leave.",
                    [doc, trip],
                    severity="warning",
                )


# -- scheduling ------------------------------------------------------------------------------
# A meal booked for a time, with no end given, still holds the table for a while: restaurants
# commonly seat a party for 90 minutes to two hours (common sense), so two dinner bookings half an
# hour apart conflict although neither names an end. Other instants stay instants.
MEAL_TYPES = frozenset(_split("Reservation Dinner Lunch Breakfast Brunch Meal"))
MEAL_LENGTH = timedelta(minutes=90)


@dataclass(frozen=True, slots=True)
class _Span:
    start: datetime
    end: datetime
    all_day: bool
    rec: Record
    assumed_end: bool = False  # a meal without an end: MEAL_LENGTH assumed
    open_start: bool = False  # a date start (time unknown) with a timed end, e.g. a checkout

    @property
    def type(self) -> str:
        return type(self.rec).__name__

    def when(self) -> str:
        if self.all_day:
            last = (self.end - timedelta(days=1)).date()
            first = self.start.date()
            return str(first) if last == first else f"{first} – {last}"
        if self.open_start:
            return f"{self.start.date()} – {self.end.strftime('%Y-%m-%d %H:%M')}"
        s = self.start.strftime("%Y-%m-%d %H:%M")
        if self.end == self.start:
            return s
        if self.assumed_end:
            return f"{s} (about {int(MEAL_LENGTH.total_seconds() // 60)} min)"
        same = self.end.date() == self.start.date()
        return f"{s}–{self.end.strftime('%H:%M' if same else '%Y-%m-%d %H:%M')}"


def _span(rec: Record) -> _Span | None:
    s, e = _get(rec, "start"), _get(rec, "end")
    if _day(s) is None:
        return None
    e = e if _day(e) is not None else None
    if isinstance(s, datetime):
        if isinstance(e, datetime):
            end = e
        elif isinstance(e, date):
            end = datetime.combine(e + timedelta(days=1), time())
        elif type(rec).__name__ in MEAL_TYPES:
            return _Span(s, s + MEAL_LENGTH, False, rec, assumed_end=True)
        else:
            end = s  # no end: an instant
        return _Span(s, end, False, rec) if end >= s else None
    if isinstance(s, date):
        start = datetime.combine(s, time())
        long_ok = type(rec).__name__ in TRIP_TYPES
        # A first day and a known end time (a checkout at noon). An end at midnight is taken as
        # a date: a date stored in a field that other records filled with date-times.
        if isinstance(e, datetime) and e.time() != time():
            if e <= start or (e - start > MAX_ALL_DAY_COMMITMENT and not long_ok):
                return None
            return _Span(start, e, False, rec, open_start=True)
        last = _day(e) or s
        end = datetime.combine(last + timedelta(days=1), time())
        if end <= start or (end - start > MAX_ALL_DAY_COMMITMENT and not long_ok):
            return None
        return _Span(start, end, True, rec)
    return None


_PLACE = ("location", "city", "destination", "country", "address", "venue", "place")


def _part_of(a: _Span, b: _Span) -> bool:
    """Whether two spans overlap by design: a trip and its own travel or plans at its
    destination; a stay and whatever you do while staying there."""
    if a.type in TRIP_TYPES and b.type in TRIP_TYPES:
        return False
    if a.type in TRAVEL_PARTS and b.type in TRAVEL_PARTS:
        if a.all_day or b.all_day:
            return True  # hotel nights vs a flight time: not comparable
        # A stay whose check-in time is unknown starts at midnight: travel on its first day is
        # the arrival, not a clash (travel after check-in and before checkout is one).
        return any(
            x.type in STAYS
            and y.type not in STAYS
            and x.open_start
            and y.start.date() == x.start.date()
            for x, y in ((a, b), (b, a))
        )
    if a.type in STAYS or b.type in STAYS:
        return True
    for trip, other in ((a, b), (b, a)):
        if trip.type in TRIP_TYPES:
            if other.type in TRAVEL_PARTS:
                return True
            places = [
                _norm(v)
                for n in ("destination", "city", "country")
                if isinstance(v := _get(trip.rec, n), str) and _norm(v).strip()
            ]
            there = _norm(_text(other.rec, _PLACE))
            return any(p in there for p in places)
    return False


# Weekly commitments ("a board meeting every Tuesday, 2-4 PM"): the weekday(s) and clock times,
# or a dated first occurrence that repeats weekly.
DAY_NAMES = _split("Monday Tuesday Wednesday Thursday Friday Saturday Sunday")
WEEKDAYS = {
    **{d.lower(): i for i, d in enumerate(DAY_NAMES)},
    **{d.lower()[:3]: i for i, d in enumerate(DAY_NAMES)},
    "tues": 1,
    "thur": 3,
    "thurs": 3,
}
WEEKDAY_FIELDS = ("weekday", "weekdays", "day_of_week", "days")
RECURRENCE_FIELDS = ("recurrence", "frequency", "repeats", "every")
IMPORTANT = ("important", "critical", "mandatory")
# Recurrences that are not weekly (every other week, monthly, ...) are not expanded.
NOT_WEEKLY = _terms(
    "other, second, third, fourth, alternate, biweekly, fortnight, fortnightly, two week,",
    "2 week, three week, 3 week, month, monthly, quarter, quarterly, year, yearly, annual, annually",
)
_CLOCK = re.compile(r"^\s*(\d{1,2})(?:[:.](\d{2}))?(?::\d{2})?\s*(?:([ap])\.?\s*m\.?)?\s*$", re.I)


def _clock_time(v: Any) -> time | None:
    """A time of day from "14:00", "14:00:00", "2 PM", "2:30pm" or "noon"; None otherwise."""
    if not isinstance(v, str):
        return None
    if v.strip().lower() in ("noon", "midday"):
        return time(12)
    m = _CLOCK.match(v)
    if not m:
        return None
    hour, minute = int(m.group(1)), int(m.group(2) or 0)
    if m.group(3):
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if m.group(3).lower() == "p" else 0)
    return time(hour, minute) if hour < 24 and minute < 60 else None


def _weekdays(text: str) -> frozenset[int]:
    words = _norm(text).split()
    days = {WEEKDAYS[w] for w in words if w in WEEKDAYS}
    if "weekday" in words:
        days |= set(range(5))
    if "weekend" in words:
        days |= {5, 6}
    return frozenset(days)


@dataclass(frozen=True, slots=True)
class _Weekly:
    rec: Record
    days: frozenset[int]
    start: time
    end: time  # == start: an instant
    first: date | None
    last: date | None
    skip: frozenset[date]

    def when(self) -> str:
        names = "/".join(DAY_NAMES[i] for i in sorted(self.days))
        times = self.start.strftime("%H:%M")
        if self.end != self.start:
            times += f"–{self.end.strftime('%H:%M')}"
        return f"every {names} {times}"

    def occurrence(self, day: date) -> tuple[datetime, datetime] | None:
        if day.weekday() not in self.days or day in self.skip:
            return None
        if (self.first and day < self.first) or (self.last and day > self.last):
            return None
        start = datetime.combine(day, self.start)
        end = datetime.combine(day + timedelta(days=1) if self.end < self.start else day, self.end)
        return start, end


def _weekly(rec: Record) -> _Weekly | None:
    """A weekly (or daily) commitment: ``weekday``/``weekdays``/``day_of_week``/``days`` with
    ``start_time`` (and ``end_time``), or a datetime ``start`` whose ``recurrence``/``frequency``/
    ``repeats``/``every`` says weekly, daily or names weekdays; bounded by ``since``/``until``,
    minus the dates in ``skip_dates``. Every other week, monthly and the like are left out."""
    if _flag(rec, "cancelled", "declined"):
        return None
    rule_text = _norm(_text(rec, RECURRENCE_FIELDS))
    if _first_term(rule_text, NOT_WEEKLY):
        return None
    days = _weekdays(_text(rec, (*WEEKDAY_FIELDS, *RECURRENCE_FIELDS)))
    if " daily " in rule_text or " every day " in rule_text:
        days = frozenset(range(7))
    skip = frozenset(d for v in _listed(_get(rec, "skip_dates")) if (d := _as_day(v)) is not None)
    first, last = _first_day(rec, ("since", "start_date")), _first_day(rec, ("until", "end_date"))
    s, e = _get(rec, "start"), _get(rec, "end")
    if isinstance(s, datetime) and (days or _first_term(rule_text, _terms("week, weekly"))):
        end = e.time() if isinstance(e, datetime) and e.date() == s.date() else s.time()
        return _Weekly(rec, days or frozenset({s.weekday()}), s.time(), end, s.date(), last, skip)
    t1, t2 = _clock_time(_get(rec, "start_time")), _clock_time(_get(rec, "end_time"))
    if days and t1 is not None:
        return _Weekly(rec, days, t1, t2 or t1, first, last, skip)
    return None


def _listed(v: Any) -> list[Any]:
    return v if isinstance(v, list) else [v]


def _as_day(v: Any) -> date | None:
    """A date, datetime or ISO date string as a date (see ``_day``)."""
    if isinstance(v, str):
        try:
            v = date.fromisoformat(v.strip()[:10])
        except ValueError:
            return None
    return _day(v)


def _meets(a0: datetime, a1: datetime, b0: datetime, b1: datetime) -> bool:
    """Whether two ranges overlap (an instant has start == end; touching ends do not)."""
    if a0 == a1 and b0 == b1:
        return a0 == b0
    if a0 == a1:
        return b0 <= a0 < b1
    if b0 == b1:
        return a0 <= b0 < a1
    return a0 < b1 and b0 < a1


def _weekly_clash(w: _Weekly, sp: _Span) -> date | None:
    """The first day an occurrence of ``w`` overlaps ``sp`` (a week of days covers every
    weekday, so 8 days are looked at, and a week more per skipped date)."""
    day = max(sp.start.date(), w.first) if w.first else sp.start.date()
    last = (sp.end - timedelta(microseconds=1)).date() if sp.end > sp.start else sp.end.date()
    for _ in range(8 + 7 * len(w.skip)):
        if day > last:
            break
        occ = w.occurrence(day)
        if occ is not None and _meets(occ[0], occ[1], sp.start, sp.end):
            return day
        day += timedelta(days=1)
    return None


def _maybe_running(user: UserView, t: str, now: datetime | None) -> list[Record]:
    """Records of ``t`` whose span may not have ended at ``now``: a start or an end from a day
    and a meal's length before it on (a date covers its whole day; a meal without an end holds
    its table for MEAL_LENGTH). A superset of the spans with ``end > now or start >= now``."""
    if now is None:
        return user.all(t)
    return _dated_from(
        user, t, _date_fields(user, t, ("start", "end")), now - timedelta(days=1) - MEAL_LENGTH
    )


@rule(
    watch=None,
    severity="warning",
    category="scheduling_conflicts",
    source=f"{SCENARIOS}: schedule_01 – schedule_08",
)
def overlapping_commitments(user: UserView) -> Iterator[Finding]:
    """Reads ``start``/``end`` of current records of any type that has a ``start`` field, plus
    ``cancelled``/``declined``/``important``/``critical``/``mandatory`` and place fields (location,
    city, destination, country, address, venue, place); and weekly commitments: ``weekday``/
    ``weekdays``/``day_of_week``/``days`` with ``start_time``/``end_time`` ("14:00", "2 PM"), or
    a datetime ``start`` whose ``recurrence``/``frequency``/``repeats``/``every`` says weekly (or
    daily, or names weekdays), bounded by ``since``/``until`` and minus ``skip_dates``.

    A datetime ``start`` with a datetime ``end`` is a time range; without an end it is an instant,
    except a meal (Reservation, Dinner, Lunch, Breakfast, Brunch, Meal), which holds the table
    for about 90 minutes; a date ``start``/``end`` covers whole days (ranges over 31 days count
    only for Trip/Vacation/Travel); a date ``start`` with a datetime ``end`` (a checkout at noon)
    runs from that day's midnight to the end. Skipped: state-like types (Medication,
    Subscription, Residence, ...), cancelled or declined records, ranges that ended before the
    log clock, a trip vs its own Flight/Hotel/Lodging or a record at the trip's destination, a
    Hotel/Lodging stay vs anything but another timed stay or travel, hotel nights (dates) vs
    flight times, travel on the first day of a stay whose check-in time is unknown (the
    arrival). Flags every other pair that overlaps (touching ends do not), found by a
    sort-and-sweep, and every timed commitment that falls on an occurrence of a weekly one
    (whole days only when the weekly one is marked important; two weekly ones are not compared):
    warning, critical when either record is marked ``important``, ``critical`` or ``mandatory``.
    """
    now = user.now
    spans: list[_Span] = []
    weekly: list[_Weekly] = []
    for t in user.types():
        if t in NOT_COMMITMENTS:
            continue
        fields = user.field_types(t)
        if any(f in fields for f in (*WEEKDAY_FIELDS, *RECURRENCE_FIELDS)):
            weekly += [w for rec in user.all(t) if (w := _weekly(rec)) is not None]
        if fields.get("start") not in DATE_TYPES:
            continue  # no date start: no span (see _span)
        for rec in _maybe_running(user, t, now):
            if _flag(rec, "cancelled", "declined"):
                continue
            sp = _span(rec)
            if sp is not None and (now is None or sp.end > now or sp.start >= now):
                spans.append(sp)
    for w in weekly:
        w_important = _flag(w.rec, *IMPORTANT)
        for sp in spans:
            # Whole days (a trip) are set against a weekly slot only when missing it matters.
            if sp.rec is w.rec or (sp.all_day and not w_important):
                continue
            day = _weekly_clash(w, sp)
            if day is not None:
                yield Finding(
                    f"{_label(sp.rec)} on {sp.when()} falls on {_label(w.rec)}, {w.when()} "
                    f"(the one on {day}): reschedule one of them, or add {day} to the weekly "
                    "one's skip_dates if you will miss it.",
                    [w.rec, sp.rec],
                    severity="critical" if w_important or _flag(sp.rec, *IMPORTANT) else None,
                )
    spans.sort(key=lambda s: (s.start, s.end, s.type, s.rec.key))
    active: list[_Span] = []
    for sp in spans:
        active = [a for a in active if a.end > sp.start or a.start == sp.start]
        for a in active:
            if _part_of(a, sp):
                continue
            overlap = _Span(
                max(a.start, sp.start), min(a.end, sp.end), a.all_day and sp.all_day, a.rec
            )
            shared = overlap.when()
            if (a.assumed_end and a.end <= sp.end) or (sp.assumed_end and sp.end <= a.end):
                shared = f"from {overlap.start.strftime('%Y-%m-%d %H:%M')}"  # the end is a guess
            important = _flag(a.rec, *IMPORTANT) or _flag(sp.rec, *IMPORTANT)
            yield Finding(
                f"{_label(a.rec)} on {a.when()} overlaps {_label(sp.rec)} on {sp.when()} "
                f"(overlap: {shared}): reschedule one of them, or mark the one you will "
                "skip as cancelled.",
                [a.rec, sp.rec],
                severity="critical" if important else None,
            )
        active.append(sp)


# -- deadlines -------------------------------------------------------------------------------
@rule(
    watch=None,
    clock=True,
    severity="warning",
    category="warranty_deadline_expiration",
    source=f"{SCENARIOS}: deadline_01 – deadline_05, deadline_07, deadline_08",
)
def deadline_approaching(user: UserView) -> Iterator[Finding]:
    """Reads, on current records of any type, the date fields ``deadline``, ``due``, ``return_by``,
    ``warranty_until``, ``warranty_expires``, ``renews_on``, ``expires``, ``ends``, ``promo_ends``
    (not ``Passport.expires``), an optional int ``notice_days`` (notice needed before
    ``renews_on``/``expires``/``ends``), and the flags ``done``, ``resolved``, ``cancelled``,
    ``returned``, ``filed``, ``completed``, ``paid``, ``renewed``, ``submitted``.

    Flags a date (or notice deadline) within the next 14 days of the log clock — 30 days for a
    warranty's end, since a claim needs a diagnosis and a repair visit before that date — on a
    record with none of those flags true: info 8 or more days ahead, warning 3–7, critical 0–2.
    Re-runs as the clock moves.
    """
    today = user.today
    if today is None:
        return
    for t in user.types():
        fields = [
            f for f in _date_fields(user, t, DEADLINE_FIELDS) if (t, f) not in DEADLINE_EXCLUDED
        ]
        if not fields:
            continue
        # A date before today is past, and a notice deadline lies before its date, so only
        # records with a deadline from today on can be due: the index reads just those.
        for rec in _dated_from(user, t, fields, today):
            if _flag(rec, *SETTLED):
                continue
            notice = int(_number(_get(rec, "notice_days")) or 0)
            for f in fields:
                d = _day(_get(rec, f))
                if d is None:
                    continue
                due = [(d, f, f"{f} {d}", DEADLINE_ACTIONS.get(f, "finish it"))]
                if f in NOTICE_FIELDS and 0 < notice <= 3660:
                    by = d - timedelta(days=notice)
                    what = f"the notice deadline {by} ({_days(notice)} before {f} {d})"
                    due.append((by, f"{f} notice", what, "give notice"))
                for when, about, what, action in due:
                    left = (when - today).days
                    if not 0 <= left <= DEADLINE_LEAD_DAYS.get(about, 14):
                        continue
                    in_ = "today" if left == 0 else "tomorrow" if left == 1 else f"in {left} days"
                    yield Finding(
                        f"{_label(rec)}: {what} is {in_} (today is {today}). "
                        f"{action[0].upper()}{action[1:]} before then, then mark it done.",
                        [rec],
                        about=about,
                        severity="critical" if left <= 2 else "warning" if left <= 7 else "info",
                    )


TAX_TYPES = ("TaxReturn", "TaxFiling", "Taxes", "Tax")
US = _terms("us, usa, u s, united states, america, federal, irs")
TAX_LEAD_DAYS = 30  # a return takes time to prepare, and an extension must be filed by the date


def _us_filing_due(tax_year: int, extended: bool) -> date:
    """The US federal due date for individual returns of ``tax_year``: April 15 of the next year
    (October 15 with an extension), moved to the next business day past a weekend or the
    District of Columbia's Emancipation Day (April 16; observed on Friday the 15th or Monday the
    17th when it falls on a weekend)."""
    year = tax_year + 1
    emancipation = date(year, 4, 16)
    if emancipation.weekday() == 5:
        emancipation -= timedelta(days=1)
    elif emancipation.weekday() == 6:
        emancipation += timedelta(days=1)
    due = date(year, 10 if extended else 4, 15)
    while due.weekday() >= 5 or due == emancipation:
        due += timedelta(days=1)
    return due


@rule(
    watch=list(TAX_TYPES),
    clock=True,
    severity="warning",
    category="warranty_deadline_expiration",
    source="IRS, Instructions for Form 1040 and Publication 17 (individual returns are due April "
    "15 of the following year, or the next business day; Form 4868 extends filing to October "
    f"15); {SCENARIOS}: deadline_02",
)
def tax_filing_deadline(user: UserView) -> Iterator[Finding]:
    """Reads ``TaxReturn``/``TaxFiling``/``Taxes``/``Tax`` records with a whole-number
    ``tax_year`` (or ``year``); ``country``/``jurisdiction`` (US, or unset); ``extension``/
    ``extended`` true; and the settled flags (``filed``, ``submitted``, ``done``, ...). A record
    with its own ``due``/``deadline`` is left to ``deadline_approaching``.

    Flags an unfiled US federal return whose due date (April 15 after the tax year, or October 15
    with an extension, moved past weekends and Emancipation Day) is 0–30 days after the log
    clock: info 8 or more days ahead, warning 3–7, critical 0–2, as for other deadlines.
    Re-runs as the clock moves.
    """
    today = user.today
    if today is None:
        return
    for t in TAX_TYPES:
        for rec in user.all(t):
            year = _get(rec, "tax_year")
            year = year if year is not None else _get(rec, "year")
            year = int(year) if isinstance(year, str) and year.strip().isdigit() else year
            if not isinstance(year, int) or isinstance(year, bool) or not 1900 < year < 9000:
                continue
            where = _norm(_text(rec, ("country", "jurisdiction")))
            if _flag(rec, *SETTLED) or (where.strip() and not any(u in where for u in US)):
                continue
            if _day(_get(rec, "due")) or _day(_get(rec, "deadline")):
                continue
            extended = _flag(rec, "extension", "extended")
            due = _us_filing_due(year, extended)
            left = (due - today).days
            if not 0 <= left <= TAX_LEAD_DAYS:
                continue
            in_ = "today" if left == 0 else "tomorrow" if left == 1 else f"in {left} days"
            act = (
                "file by then"
                if extended
                else "file by then, or file for an automatic extension (Form 4868) by that day; "
                "an extension to file is not an extension to pay, so pay the estimated tax too"
            )
            yield Finding(
                f"{_label(rec)}: the {year} US federal return is due {due}, {in_} (today is "
                f"{today}), and it is not marked filed: {act}. Then mark it filed.",
                [rec],
                severity="critical" if left <= 2 else "warning" if left <= 7 else "info",
            )


# -- contradictions --------------------------------------------------------------------------
IDENTITY_CHECKS: tuple[tuple[tuple[str, ...], str, tuple[str, ...]], ...] = (
    (("Passport",), "number", ("expires",)),
    (("Person", "Contact"), "name", ("birthday",)),
)


@rule(
    watch=[*SINGULAR_TYPES, "Passport", "Person", "Contact", "Allergy"],
    severity="warning",
    category="contradiction",
    source="User as Code (arXiv 2606.16707): state stays consistent; a correction is an update",
)
def conflicting_records(user: UserView) -> Iterator[Finding]:
    """Reads ``Residence``/``Home`` (``since``, ``until``/``end``/``moved_out``), ``Passport``
    (``number``, ``expires``), ``Person``/``Contact`` (``name``, ``birthday``) and ``Allergy``
    (``substance``, ``absent``/``resolved``).

    Flags current records that cannot all be true: two or more current homes (a home is current
    from ``since`` until ``until``/``end``/``moved_out``); the same passport number with different
    ``expires``; the same person's name with different ``birthday``; an allergy recorded both as
    present and as ``absent``/``resolved``.
    """
    today = user.today
    for t in SINGULAR_TYPES:
        homes = []
        for r in user.all(t):
            since = _day(_get(r, "since"))
            until = _first_day(r, ("until", "end", "moved_out"))
            if not (
                (since and today and since > today) or (until and (today is None or until <= today))
            ):
                homes.append(r)
        if len(homes) > 1:
            names = ", ".join(_label(r) for r in homes)
            yield Finding(
                f"{len(homes)} current {t} records: {names}. Set `until` on the ones you "
                f"have left (or retract the wrong one).",
                homes,
            )
    for types, ident, values in IDENTITY_CHECKS:
        groups: dict[str, list[Record]] = defaultdict(list)
        for t in types:
            for r in user.all(t):
                if isinstance(v := _get(r, ident), str) and _norm(v).strip():
                    groups[_norm(v)].append(r)
        for key, recs in groups.items():
            for f in values:
                seen = {str(v): r for r in recs if (v := _get(r, f)) is not None}
                if len(seen) > 1:
                    parts = "; ".join(f"{_label(r)} says {v}" for v, r in sorted(seen.items()))
                    yield Finding(
                        f"Records with the same {ident} '{key.strip()}' disagree on {f}: "
                        f"{parts}. Correct the wrong one.",
                        list(seen.values()),
                        about=f,
                    )
    allergies: dict[str, list[Record]] = defaultdict(list)
    for a in user.all("Allergy"):
        if isinstance(s := _get(a, "substance"), str) and _norm(s).strip():
            allergies[_norm(s)].append(a)
    for substance, recs in allergies.items():
        gone = [a for a in recs if _flag(a, "absent", "resolved")]
        present = [a for a in recs if not _flag(a, "absent", "resolved")]
        if gone and present:
            yield Finding(
                f"The allergy to {substance.strip()} is recorded as present "
                f"({_label(present[0])}) and as absent/resolved ({_label(gone[0])}): confirm "
                "with the user or their doctor and retract the wrong record.",
                [present[0], gone[0]],
                about="allergy",
            )


# -- money -----------------------------------------------------------------------------------
_ACCOUNT_STOP = frozenset(_split("the my our a an account acct from to"))
_MERCHANT_STOP = frozenset(
    _split("the inc llc ltd co com subscription membership plan monthly annual")
)
OUTFLOW_WORDS = _terms("transfer, wire, send, pay, payment, withdraw, withdrawal")
FREEZE_WORDS = _terms("freeze, frozen, hold, block, no outflow, no money, forbid")


def _words(text: str, stop: frozenset[str]) -> frozenset[str]:
    return frozenset(w for w in _norm(text).split() if w not in stop)


def _match(a: frozenset[str], b: frozenset[str]) -> bool:
    return bool(a) and bool(b) and (a <= b or b <= a)


def _pending(
    rec: Record, today: date | None, fields: Iterable[str] = ("date", "scheduled", "on", "due")
) -> bool:
    """Not done, sent or cancelled, and not dated in the past (recurring ones always pending)."""
    if _flag(rec, *SETTLED, "sent", "executed"):
        return False
    d = _first_day(rec, fields)
    return _flag(rec, "recurring") or d is None or today is None or d >= today


@rule(
    watch=["Instruction", "Transfer", "Wire", "Payment", "Freeze"],
    severity="critical",
    category="financial_authorization_conflicts",
    source=f"{SCENARIOS}: finance_01",
)
def transfer_during_freeze(user: UserView) -> Iterator[Finding]:
    """Reads ``Freeze`` records and ``Instruction`` records that forbid outflows (``freeze``/
    ``no_outflows`` true, or an ``action`` saying freeze/hold/block), with ``account``, ``until``;
    and pending outflows: ``Transfer``/``Wire``/``Payment``, or ``Instruction`` whose ``action``
    says transfer/wire/send/pay, with ``account``/``from_account``, ``amount``, ``date``.

    Flags an outflow from an account that a current freeze covers (account names match as word
    sets) and whose date, if any, is not after the freeze's ``until``: critical.
    """
    today = user.today
    freezes: list[tuple[Record, frozenset[str], date | None, date | None]] = []
    outflows: list[tuple[Record, frozenset[str], str]] = []
    for t in ("Freeze", "Instruction", "Transfer", "Wire", "Payment"):
        for r in user.all(t):
            action = _norm(_text(r, ("action", "kind", "instruction", "name")))
            if (
                t == "Freeze"
                or _flag(r, "freeze", "no_outflows")
                or (t == "Instruction" and any(w in action for w in FREEZE_WORDS))
            ):
                until = _first_day(r, ("until", "ends", "end"))
                starts = _first_day(r, ("starts", "since"))
                if not _flag(r, "cancelled", "lifted") and (
                    until is None or today is None or until >= today
                ):
                    account = _words(_text(r, ("account",)), _ACCOUNT_STOP)
                    if account:
                        freezes.append((r, account, starts, until))
            elif (t != "Instruction" or any(w in action for w in OUTFLOW_WORDS)) and _pending(
                r, today
            ):
                src = _text(r, ("from_account", "account", "source_account"))
                if account := _words(src, _ACCOUNT_STOP):
                    outflows.append((r, account, src))
    for out, account, src in outflows:
        when = _first_day(out, ("date", "scheduled", "on", "due"))
        amount = _number(_get(out, "amount"))
        for freeze, f_account, starts, until in freezes:
            outside = when is not None and ((until and when > until) or (starts and when < starts))
            if _match(account, f_account) and not outside:
                what = f"send {_money(amount, out)}" if amount is not None else "move money"
                yield Finding(
                    f"{_label(out)} would {what} from '{src}', but "
                    f"{_label(freeze)} forbids outflows from it"
                    + (f" until {until}" if until else "")
                    + ": do not execute it; confirm with whoever gave each instruction first.",
                    [freeze, out],
                )


CHARGE_TYPES = ("Transaction", "Payment", "Charge", "Purchase")


@rule(
    watch=["Subscription", *CHARGE_TYPES],
    severity="warning",
    category="financial_authorization_conflicts",
    source=f"{SCENARIOS}: finance_03",
)
def charge_after_cancellation(user: UserView) -> Iterator[Finding]:
    """Reads current ``Subscription`` records with ``cancelled`` true (``name``/``service``/
    ``merchant``/``provider``; effective date from ``cancel_effective``/``effective``/
    ``cancelled_on``/``ends``/``end``, else when the cancellation was recorded) and
    ``Transaction``/``Payment``/``Charge``/``Purchase`` records (``merchant``/``payee``/
    ``service``/``vendor``/``name``, ``amount``, ``date``/``charged_on``/``paid_on``).

    Flags a charge to a cancelled service dated after the cancellation took effect (merchant and
    service names match as word sets): warning. Reads only the charges dated after the earliest
    cancellation (and undated ones).
    """
    index: dict[str, list[tuple[Record, frozenset[str], date]]] = defaultdict(list)
    for s in user.all("Subscription"):
        if _get(s, "cancelled") is not True:
            continue
        words = _words(_text(s, ("name", "service", "merchant", "provider")), _MERCHANT_STOP)
        eff = _first_day(s, ("cancel_effective", "effective", "cancelled_on", "ends", "end"))
        eff = eff or (s.valid_from.date() if s.valid_from else None)
        if words and eff:
            for w in words:
                index[w].append((s, words, eff))
    if not index:
        return
    # Only charges after the earliest cancellation can be late: the index hands over those.
    first = min(eff for subs in index.values() for _, _, eff in subs) + timedelta(days=1)
    for t in CHARGE_TYPES:
        for c in _from_day(user, t, first, ("date", "charged_on", "paid_on")):
            amount = _number(_get(c, "amount"))
            if amount is not None and amount <= 0:
                continue
            words = _words(
                _text(c, ("merchant", "payee", "service", "vendor", "name")), _MERCHANT_STOP
            )
            when = _first_day(c, ("date", "charged_on", "paid_on")) or (
                c.valid_from.date() if c.valid_from else None
            )
            if when is None:
                continue
            seen: set[str] = set()
            for w in words:
                for sub, s_words, eff in index.get(w, ()):
                    if sub.key in seen or when <= eff or not _match(words, s_words):
                        continue
                    seen.add(sub.key)
                    paid = f"{_money(amount, c)} " if amount is not None else ""
                    yield Finding(
                        f"{_label(c)}: a {paid}charge on {when}, {_days((when - eff).days)} after "
                        f"{_label(sub)} was cancelled (effective {eff}): the cancellation may not "
                        "have gone through; contact the merchant to confirm it and dispute the "
                        "charge.",
                        [sub, c],
                    )


@rule(
    watch=["Account", "Payment", "Autopay", "Transfer", "Bill"],
    severity="critical",
    category="financial_authorization_conflicts",
    source=f"{SCENARIOS}: finance_05",
)
def payment_from_closed_account(user: UserView) -> Iterator[Finding]:
    """Reads ``Account`` records with ``closed`` or ``closing`` true or a ``closes_on``/
    ``closed_on`` date (``name``/``bank``/``institution``) and pending ``Payment``/``Autopay``/
    ``Transfer``/``Bill`` records (``account``/``from_account``/``source``, ``amount``,
    ``date``/``due``, ``recurring``).

    Flags a pending or recurring payment drawn on a closed or closing account (the account's key,
    or names matching as word sets), dated on or after the closing date if one is known: critical.
    """
    today = user.today
    closed = []
    for a in user.all("Account"):
        on = _first_day(a, ("closes_on", "closed_on", "close_date"))
        if _flag(a, "closed", "closing") or on is not None:
            closed.append((a, _words(_text(a, ("name", "bank", "institution")), _ACCOUNT_STOP), on))
    if not closed:
        return
    for t in ("Payment", "Autopay", "Transfer", "Bill"):
        for p in user.all(t):
            src = _text(p, ("account", "from_account", "source", "source_account"))
            if not src or not _pending(p, today, ("date", "due", "next", "on")):
                continue
            words = _words(src, _ACCOUNT_STOP)
            when = _first_day(p, ("date", "due", "next", "on"))
            for acct, a_words, on in closed:
                if not (src == acct.key or _match(words, a_words)):
                    continue
                if on is not None and when is not None and when < on and not _flag(p, "recurring"):
                    continue
                amount = _number(_get(p, "amount"))
                what = f"{_money(amount, p)} " if amount is not None else ""
                status = "is closed" if on is None else f"closed on {on}"
                if on is not None and today is not None and on > today:
                    status = f"closes on {on}"
                due = f"; the payment is due {when}" if when else ""
                yield Finding(
                    f"{_label(p)} draws {what}from {_label(acct)}, which {status}{due}: it will "
                    "fail. Move the payment to an open account before then.",
                    [acct, p],
                )


LIMIT_TYPES = ("Limit", "Authorization", "SpendingLimit")
_INSTRUMENT = ("card", "account", "payment_method", "instrument")


@rule(
    watch=[*LIMIT_TYPES, *CHARGE_TYPES],
    severity="warning",
    category="financial_authorization_conflicts",
    source=f"{SCENARIOS}: finance_02",
)
def transaction_over_limit(user: UserView) -> Iterator[Finding]:
    """Reads per-transaction ``Limit``/``Authorization``/``SpendingLimit`` records (``amount`` or
    ``limit``; ``per``/``period`` absent or naming a transaction; optional ``card``/``account``/
    ``payment_method``/``instrument``) and ``Transaction``/``Payment``/``Charge``/``Purchase``
    records (``amount``, the same instrument fields, ``date``; skips ``approved``/``authorized``
    true).

    Flags a transaction above a limit that covers its instrument (a limit naming no instrument
    covers all), dated on or after the day the limit was recorded: warning. Reads only the
    transactions above the lowest limit.
    """
    limits = []
    for t in LIMIT_TYPES:
        for lim in user.all(t):
            cap = _number(_get(lim, "amount"))
            cap = cap if cap is not None else _number(_get(lim, "limit"))
            per = _text(lim, ("per", "period"))
            if cap is None or (
                per
                and not any(w in _norm(per) for w in _terms("transaction", "purchase", "charge"))
            ):
                continue
            since = lim.valid_from.date() if lim.valid_from else None
            limits.append((lim, cap, _words(_text(lim, _INSTRUMENT), _ACCOUNT_STOP), since))
    if not limits:
        return
    lowest = min(cap for _, cap, _, _ in limits)
    for t in CHARGE_TYPES:
        # Only amounts above the lowest cap can break a limit: the index reads just those.
        for tx in _at_least(user, t, "amount", lowest):
            amount = _number(_get(tx, "amount"))
            if amount is None or _flag(tx, "approved", "authorized", "cancelled"):
                continue
            instrument = _words(_text(tx, _INSTRUMENT), _ACCOUNT_STOP)
            when = _first_day(tx, ("date", "charged_on", "paid_on")) or (
                tx.valid_from.date() if tx.valid_from else None
            )
            for lim, cap, covers, since in limits:
                if amount <= cap or (covers and not _match(instrument, covers)):
                    continue
                if since is not None and when is not None and when < since:
                    continue
                yield Finding(
                    f"{_label(tx)} of {_money(amount, tx)} is {_money(amount - cap, tx)} over the "
                    f"{_money(cap, lim)} per-transaction limit of {_label(lim)}: get the approval "
                    "the limit requires first, or pay another way.",
                    [lim, tx],
                )


TRADE_TYPES = ("Trade", "Order", "Sale", "Sell", "Buy", "StockPurchase", "StockSale", "Investment")
_SELL_TYPES = frozenset({"Sale", "Sell", "StockSale"})
_BUY_TYPES = frozenset({"Buy", "StockPurchase"})
_SELL_WORDS = _terms("sell, sold, sale")
_BUY_WORDS = _terms("buy, bought, purchase, purchased, reinvest, reinvested")
_HARVEST_WORDS = _terms("tax loss, loss harvest, loss harvesting, harvest loss, harvest")
WASH_WINDOW = 30  # days before and after the sale (IRS Publication 550, Wash Sales)


def _trade(rec: Record, today: date | None) -> tuple[str, str, date] | None:
    """(side, normalised symbol, date) of a trade that is not cancelled; a trade with no date is
    planned for the log clock's day, an executed one without a date is dated when recorded."""
    if _flag(rec, "cancelled"):
        return None
    t = type(rec).__name__
    action = _norm(_text(rec, ("action", "side", "kind", "type")))
    if t in _SELL_TYPES or (t not in _BUY_TYPES and _first_term(action, _SELL_WORDS)):
        side = "sell"
    elif t in _BUY_TYPES or _first_term(action, _BUY_WORDS):
        side = "buy"
    else:
        return None
    symbol = _norm(_text(rec, ("symbol", "ticker", "security", "fund", "stock"))).strip()
    when = _first_day(rec, ("date", "trade_date", "executed_on", "on"))
    if when is None:
        recorded = rec.valid_from.date() if rec.valid_from else None
        when = today if _flag(rec, "planned") or _get(rec, "status") == "planned" else recorded
        when = when or today
    return (side, symbol, when) if symbol and when else None


def _at_a_loss(rec: Record) -> bool:
    loss, gain = _number(_get(rec, "loss")), _number(_get(rec, "gain"))
    why = _norm(_text(rec, ("purpose", "reason", "strategy", "note")))
    return bool(
        (loss is not None and loss > 0)
        or (gain is not None and gain < 0)
        or _first_term(why, _HARVEST_WORDS)
    )


@rule(
    watch=list(TRADE_TYPES),
    severity="warning",
    category="financial_authorization_conflicts",
    source="IRS Publication 550, Wash Sales (a loss is disallowed when substantially identical "
    "stock is bought within 30 days before or after the sale); Revenue Ruling 2008-5 (a purchase "
    f"in the seller's IRA counts); {SCENARIOS}: finance_07",
)
def wash_sale(user: UserView) -> Iterator[Finding]:
    """Reads ``Trade``/``Order``/``Sale``/``Sell``/``Buy``/``StockPurchase``/``StockSale``/
    ``Investment`` records: side from the type or ``action``/``side``/``kind`` (buy/bought/
    purchase vs sell/sold), ``symbol``/``ticker``/``security``/``fund``/``stock``, ``date``/
    ``trade_date`` (a planned trade without one: the log clock's day), ``account``, and a loss
    (``loss`` > 0, ``gain`` < 0, or a ``purpose``/``reason``/``strategy``/``note`` of tax-loss
    harvesting); skips ``cancelled`` true.

    Flags a sale at a loss with a purchase of the same symbol, in any account, 30 days or less
    before or after it: warning, naming the date from which a sale (or to which a purchase) would
    be clear, and noting that a purchase in an IRA loses the deduction for good. Linear in the
    trades, by symbol.
    """
    today = user.today
    buys: dict[str, list[tuple[Record, date]]] = defaultdict(list)
    sales: list[tuple[Record, str, date]] = []
    for t in TRADE_TYPES:
        for rec in user.all(t):
            trade = _trade(rec, today)
            if trade is None:
                continue
            side, symbol, when = trade
            if side == "buy":
                buys[symbol].append((rec, when))
            elif _at_a_loss(rec):
                sales.append((rec, symbol, when))
    for sale, symbol, sold in sales:
        for buy, bought in buys.get(symbol, ()):
            gap = (sold - bought).days
            if abs(gap) > WASH_WINDOW:
                continue
            ira = " ira " in _norm(_text(buy, ("account",)))
            where = _text(buy, ("account",))
            timing = (
                f"{_days(gap)} after {_label(buy)} bought it"
                if gap >= 0
                else f"{_days(-gap)} before {_label(buy)} buys it"
            )
            fix = (
                f"sell on or after {bought + timedelta(days=WASH_WINDOW + 1)}"
                if gap >= 0
                else f"buy no earlier than {sold + timedelta(days=WASH_WINDOW + 1)}"
            )
            yield Finding(
                f"{_label(sale)} sells {symbol.upper()} at a loss on {sold}, {timing}"
                + (f" in '{where}'" if where else "")
                + f": a purchase within {WASH_WINDOW} days of a loss sale makes it a wash sale "
                "and the loss is disallowed"
                + (" for good, since the shares were bought in an IRA" if ira else "")
                + f". To keep the deduction, {fix}, or harvest a fund that is not substantially "
                "identical.",
                [sale, buy],
            )


# Most specific first: the first term found names the level in the message.
CAUTIOUS_WORDS = _terms(
    "very low, low risk, no risk, risk averse, capital preservation, conservative, cautious,",
    "minimal, low",
)
RISKY_WORDS = _terms("very high, high risk, speculative, aggressive, volatile, high")
RISK_FIELDS = ("risk", "risk_level", "volatility")


@rule(
    watch=None,
    severity="warning",
    category="financial_authorization_conflicts",
    source="FINRA Rule 2111 (Suitability): a recommendation must fit the customer's investment "
    f"profile, risk tolerance included; {SCENARIOS}: finance_06",
)
def investment_against_risk_tolerance(user: UserView) -> Iterator[Finding]:
    """Reads ``risk_tolerance`` on current records of any type (conservative, cautious, low, ...)
    and ``risk``/``risk_level``/``volatility`` on current records of any other type (high,
    speculative, aggressive, volatile), with ``amount`` and ``date``; skips settled or cancelled
    records and those dated before today.

    Flags a pending high-risk investment while the user's stated risk tolerance is cautious:
    warning — the user's own rule, stated earlier, says no; confirm before acting. Looks only at
    types that have those fields.
    """
    today = user.today
    tolerances: list[tuple[Record, str]] = []
    risky: list[tuple[Record, str]] = []
    for t in user.types():
        fields = user.field_types(t)
        if "risk_tolerance" in fields:
            for r in user.all(t):
                text = _norm(_text(r, ("risk_tolerance",)))
                if (hit := _first_term(text, CAUTIOUS_WORDS)) and not _flag(r, "cancelled"):
                    tolerances.append((r, hit))
        elif any(f in fields for f in RISK_FIELDS):
            for r in user.all(t):
                if not _pending(r, today, ("date", "on")):
                    continue
                if hit := _first_term(_norm(_text(r, RISK_FIELDS)), RISKY_WORDS):
                    risky.append((r, hit))
    for inv, level in risky:
        amount = _number(_get(inv, "amount"))
        size = f" of {_money(amount, inv)}" if amount is not None else ""
        for pref, tolerance in tolerances:
            since = f" (since {pref.valid_from.date()})" if pref.valid_from else ""
            yield Finding(
                f"{_label(inv)}{size} is {level} risk, but {_label(pref)} records a {tolerance} "
                f"risk tolerance{since}: confirm the user has changed that stance before acting, "
                "or suggest a position that fits it.",
                [pref, inv],
            )


LIBRARY: tuple[Rule, ...] = (
    drug_allergy_cross_reactivity,
    food_allergy_exposure,
    drug_drug_interaction,
    food_drug_interaction,
    pregnancy_teratogenic_medication,
    passport_validity,
    visa_validity,
    schengen_90_180,
    document_expires_before_trip,
    overlapping_commitments,
    deadline_approaching,
    conflicting_records,
    transfer_during_freeze,
    charge_after_cancellation,
    payment_from_closed_account,
    transaction_over_limit,
    activity_medical_clearance,
    tax_filing_deadline,
    wash_sale,
    investment_against_risk_tolerance,
)
