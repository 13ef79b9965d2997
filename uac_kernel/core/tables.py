"""Cited knowledge tables the health rules, the constraint knowledge and the matcher all read:
drug classes and interacting pairs, teratogens, food allergens and food classes; and ``Severity``.
"""

from __future__ import annotations

from typing import Literal

from uac_kernel.core.words import terms as _terms

__all__ = [
    "DRUG_CLASSES",
    "DRUG_PAIRS",
    "FOOD_ALLERGENS",
    "FOOD_CLASSES",
    "FOOD_PAIRS",
    "SEVERITIES",
    "TERATOGENS",
    "Severity",
]

Severity = Literal["critical", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("critical", "warning", "info")

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
# foods and dishes that contain them (FDA, "Food Allergies: What You Need to Know"); "seafood"
# counts as both fish and shellfish. The one allergen table: the constraint knowledge table
# ``allergens`` is built from it.
FOOD_ALLERGENS: dict[str, tuple[str, ...]] = {
    "shellfish": _terms(
        "shellfish, shrimp, prawn, lobster, crab, crayfish, crawfish, langoustine, scampi,",
        "scallop, oyster, clam, mussel, seafood, paella, bisque, shrimp paste, ceviche, cioppino",
    ),
    "fish": _terms(
        "fish, salmon, tuna, cod, halibut, anchovy, anchovies, sardine, sushi, sashimi, seafood,",
        "fish sauce, trout, tilapia, mackerel, herring, bass, swordfish, worcestershire",
    ),
    "peanut": _terms("peanut, groundnut, satay, peanut butter, pad thai, kung pao"),
    "tree nut": _terms(
        "tree nut, nut, almond, walnut, cashew, pecan, pistachio, hazelnut, macadamia, praline,",
        "marzipan, brazil nut, pine nut, pesto, nutella, baklava, nougat",
    ),
    "milk": _terms(
        "milk, dairy, cheese, butter, cream, yogurt, ghee, paneer, ricotta, mozzarella, parmesan,",
        "custard, ice cream, whey, casein, buttermilk, alfredo, bechamel, latte, cappuccino,",
        "milkshake",
    ),
    "egg": _terms(
        "egg, omelet, omelette, mayonnaise, meringue, aioli, hollandaise, custard, frittata,",
        "quiche, carbonara, eggnog, souffle",
    ),
    "wheat": _terms(
        "wheat, gluten, bread, pasta, flour, couscous, noodle, ramen, udon, pizza, cake, cracker,",
        "seitan, tempura, dumpling, bulgur, semolina, spelt, croissant",
    ),
    "soy": _terms(
        "soy, soya, tofu, edamame, miso, tempeh, soybean, soy sauce, tamari, natto, soy milk"
    ),
    "sesame": _terms("sesame, tahini, hummus, halva, halvah, benne, gomasio, za'atar"),
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
