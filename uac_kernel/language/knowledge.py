"""Knowledge tables: what a ``not_while`` constraint looks for, kept as data with cited sources.

A table maps named groups to the words that stand for them: the allergen ``shellfish`` to
shrimp, crab, lobster…; the drug class ``statins`` to atorvastatin, Lipitor, simvastatin….
A constraint names a table and some of its groups; trusted code turns them into whole-word
terms (``terms``). Group names are matched loosely (case, spaces, ``_``/``-`` and a plural
``s`` aside), so ``SSRIs``, ``ssri`` and ``SSRI`` are one group.

The short drug and food lists of the shipped health rules are reused as they are
(``uac_kernel.core.tables``: ``DRUG_CLASSES``, ``FOOD_ALLERGENS``, ``FOOD_CLASSES``),
with groups and words added here from the sources each table cites. Nothing is copied from a
label or a database: these are short lists of common names, not a clinical reference.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from uac_kernel.core.errors import ConstraintError
from uac_kernel.core.tables import DRUG_CLASSES, FOOD_ALLERGENS, FOOD_CLASSES
from uac_kernel.core.words import norm as _norm
from uac_kernel.core.words import singular as _singular

__all__ = ["TABLES", "Table", "group_names", "problem", "resolve", "terms"]


@dataclass(frozen=True)
class Table:
    """One knowledge table: its ``name``, what it ``maps``, the public ``source`` it follows, and
    its ``groups``, each a tuple of words (lowercase; matched as whole words, plurals folded)."""

    name: str
    maps: str
    source: str
    groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


def _words(*lists: Iterable[str] | str) -> tuple[str, ...]:
    """Words from comma-separated strings and the normalised tuples of the health tables."""
    out: list[str] = []
    for part in lists:
        items = part.split(",") if isinstance(part, str) else part
        out.extend(w for item in items if (w := _norm(item).strip()))
    return tuple(dict.fromkeys(out))


# The nine major food allergens of US law, from the health rules' table (one list for both):
# FALCPA 2004 (milk, egg, fish, crustacean shellfish, tree nuts, peanuts, wheat, soybeans) and
# the FASTER Act 2021 (sesame), with common foods and dishes made with them.
_ALLERGENS = Table(
    name="allergens",
    maps="major food allergen -> foods and dishes that contain it",
    source="FDA: Food Allergen Labeling and Consumer Protection Act of 2004 (FALCPA) and FASTER "
    "Act of 2021; FDA consumer page 'Food Allergies: What You Need to Know'",
    groups={
        "milk": _words(FOOD_ALLERGENS["milk"]),
        "egg": _words(FOOD_ALLERGENS["egg"]),
        "fish": _words(FOOD_ALLERGENS["fish"]),
        "shellfish": _words(FOOD_ALLERGENS["shellfish"]),
        "tree nuts": _words(FOOD_ALLERGENS["tree nut"]),
        "peanuts": _words(FOOD_ALLERGENS["peanut"]),
        "wheat": _words(FOOD_ALLERGENS["wheat"]),
        "soy": _words(FOOD_ALLERGENS["soy"]),
        "sesame": _words(FOOD_ALLERGENS["sesame"]),
    },
)

# Drug classes: generic and common US brand names from the FDA prescribing information of the
# drugs named (the health rules' classes, and the classes below).
_DRUGS = Table(
    name="drug_classes",
    maps="drug class -> generic and brand names of drugs in it",
    source="FDA prescribing information (DailyMed) of the drugs named; classes as in the "
    "WHO ATC classification",
    groups={
        "penicillins": _words(DRUG_CLASSES["penicillin"]),
        "cephalosporins": _words(DRUG_CLASSES["cephalosporin"]),
        "sulfonamide antibiotics": _words(DRUG_CLASSES["sulfonamide antibiotic"]),
        "ssris": _words(DRUG_CLASSES["SSRI"]),
        "snris": _words(DRUG_CLASSES["SNRI"]),
        "maois": _words(DRUG_CLASSES["MAOI"]),
        "statins": _words(
            DRUG_CLASSES["simvastatin/lovastatin"],
            DRUG_CLASSES["atorvastatin"],
            "statin, rosuvastatin, crestor, pravastatin, pravachol, fluvastatin, lescol, "
            "pitavastatin, livalo",
        ),
        "nsaids": _words(DRUG_CLASSES["NSAID"]),
        "anticoagulants": _words(
            DRUG_CLASSES["warfarin"],
            "anticoagulant, blood thinner, apixaban, eliquis, rivaroxaban, xarelto, dabigatran, "
            "pradaxa, edoxaban, savaysa, heparin, enoxaparin, lovenox",
        ),
        "ace inhibitors": _words(
            "ace inhibitor, lisinopril, zestril, prinivil, enalapril, vasotec, ramipril, altace, "
            "benazepril, lotensin, captopril, quinapril, accupril, fosinopril, perindopril"
        ),
        "opioids": _words(
            "opioid, oxycodone, oxycontin, percocet, hydrocodone, vicodin, norco, morphine, "
            "codeine, tramadol, ultram, fentanyl, hydromorphone, dilaudid, methadone, "
            "meperidine, demerol, tapentadol, buprenorphine"
        ),
        "benzodiazepines": _words(
            "benzodiazepine, alprazolam, xanax, lorazepam, ativan, diazepam, valium, clonazepam, "
            "klonopin, temazepam, restoril, chlordiazepoxide, librium, midazolam, triazolam"
        ),
        "strong cyp3a4 inhibitors": _words(DRUG_CLASSES["strong CYP3A4 inhibitor"]),
        "maoi contraindicated": _words(DRUG_CLASSES["MAOI-contraindicated drug"]),
        "nitroimidazoles": _words("metronidazole, flagyl, tinidazole, tindamax"),
    },
)

# Foods the labels name. Grapefruit: FDA consumer update "Grapefruit Juice and Some Drugs Don't
# Mix" (grapefruit, pomelo, Seville orange). Tyramine: phenelzine (Nardil) prescribing
# information. Vitamin K: warfarin (Coumadin) prescribing information and NIH Office of Dietary
# Supplements, Vitamin K fact sheet. Alcohol: NIAAA "Harmful Interactions: Mixing Alcohol with
# Medicines" and the metronidazole (Flagyl) label (no alcohol during and 3 days after).
_GRAPEFRUIT = Table(
    name="grapefruit",
    maps="grapefruit and the citrus that acts like it -> their names",
    source="FDA consumer update 'Grapefruit Juice and Some Drugs Don't Mix' (2021)",
    groups={"grapefruit": _words(FOOD_CLASSES["grapefruit"], "grapefruit juice, pomelo juice")},
)
_TYRAMINE = Table(
    name="tyramine_rich",
    maps="tyramine-rich food -> aged, cured, fermented foods and tap beer",
    source="Phenelzine (Nardil) FDA prescribing information, dietary restrictions",
    groups={"tyramine rich": _words(FOOD_CLASSES["tyramine-rich food"])},
)
_VITAMIN_K = Table(
    name="vitamin_k_rich",
    maps="vitamin K-rich food -> leafy greens and other foods high in vitamin K",
    source="Warfarin (Coumadin) FDA prescribing information; NIH Office of Dietary "
    "Supplements, Vitamin K fact sheet for health professionals",
    groups={"vitamin k rich": _words(FOOD_CLASSES["vitamin K-rich food"], "broccoli, cabbage")},
)
_ALCOHOL = Table(
    name="alcohol",
    maps="alcoholic drink -> its common names",
    source="NIAAA 'Harmful Interactions: Mixing Alcohol with Medicines'; metronidazole "
    "(Flagyl) FDA prescribing information",
    groups={
        "alcohol": _words(
            "alcohol, alcoholic, beer, ale, lager, wine, champagne, prosecco, cider, sake, "
            "vodka, whisky, whiskey, bourbon, gin, rum, tequila, brandy, cognac, liquor, "
            "spirit, cocktail, margarita, mojito, martini, sangria, mimosa, happy hour"
        )
    },
)

TABLES: dict[str, Table] = {
    t.name: t for t in (_ALLERGENS, _DRUGS, _GRAPEFRUIT, _TYRAMINE, _VITAMIN_K, _ALCOHOL)
}


def _key(group: str) -> str:
    """A group name as compared: lowercase words, plurals folded, joined by ``_``."""
    return "_".join(_singular(w) for w in re.findall(r"[a-z0-9]+", group.lower()))


def group_names(table: str) -> list[str]:
    """The group names of ``table``, in the table's order; ConstraintError if there is none."""
    if table not in TABLES:
        raise ConstraintError(_unknown_table(table))
    return list(TABLES[table].groups)


def _unknown_table(table: str) -> str:
    return f"no knowledge table {table!r}; the tables are {', '.join(TABLES)}"


def resolve(table: str | None, group: str) -> tuple[str, str] | str:
    """``(table, group)`` that ``group`` names: a group of ``table`` first, else the one group
    of that name in any table (so ``active_groups: [statins]`` works beside ``table:
    grapefruit``); otherwise a one-line message saying what is known."""
    want = _key(group)
    if table is not None:
        if table not in TABLES:
            return _unknown_table(table)
        for name in TABLES[table].groups:
            if _key(name) == want:
                return table, name
    found = [(t.name, g) for t in TABLES.values() for g in t.groups if _key(g) == want]
    if len(found) == 1:
        return found[0]
    if table is None:
        return (
            f"no group {group!r} in any knowledge table ({', '.join(TABLES)}); name one of theirs"
        )
    return f"no group {group!r} in table {table!r}; its groups: {', '.join(group_names(table))}"


def problem(table: str | None, groups: Iterable[str]) -> str | None:
    """What is wrong with ``table`` and ``groups`` (an unknown name), or None."""
    if table is not None and table not in TABLES:
        return _unknown_table(table)
    for g in groups:
        if isinstance(found := resolve(table, g), str):
            return found
    return None


def terms(table: str | None, groups: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """The words of each named group (``table/group`` -> words); every group of ``table`` when
    ``groups`` is empty. ConstraintError naming the known names for an unknown one."""
    names = list(groups)
    if table is not None and not names:
        names = group_names(table)
    out: dict[str, tuple[str, ...]] = {}
    for g in names:
        found = resolve(table, g)
        if isinstance(found, str):
            raise ConstraintError(found)
        t, name = found
        out[f"{t}/{name}"] = TABLES[t].groups[name]
    return out
