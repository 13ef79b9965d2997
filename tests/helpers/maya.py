"""Maya's store for the what-if tests: a penicillin allergy, ibuprofen, and the amoxicillin to add."""

from __future__ import annotations

from helpers.events import add

RULE = "drug_allergy_cross_reactivity"

# Maya's store: a severe penicillin allergy and ibuprofen; no amoxicillin (yet).
STORE = [
    add("2024-02-09", "Allergy", "allergy-penicillin", substance="penicillin", severity="severe"),
    add("2024-03-01", "Medication", "med-ibuprofen", name="ibuprofen", dose_mg=200.0, active=True),
]
# What if the GP prescribes amoxicillin?
AMOXICILLIN = add(
    "2024-11-18",
    "Medication",
    "med-amoxicillin",
    name="amoxicillin",
    dose_mg=500.0,
    start="2024-11-18",
    end="2024-11-25",
    active=True,
)
AMOXICILLIN_YAML = """\
- kind: fact
  ts: "2024-11-18T09:00:00"
  op: add
  type: Medication
  key: med-amoxicillin
  fields: {name: amoxicillin, dose_mg: 500.0, start: "2024-11-18", end: "2024-11-25", active: true}
"""
MEDICATIONS = "len(user.all(Medication))"
