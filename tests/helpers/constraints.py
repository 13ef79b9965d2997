"""Constraints the tests put in force: the tax-return obligation, a rabies jab for pet trips."""

from __future__ import annotations

from typing import Any

from helpers.events import add

# Due on 2025-04-15, alerting from 30 days before, done by a TaxReturn record.
TAX = {
    "kind": "obligation",
    "title": "File the tax return",
    "due": {"date": "2025-04-15"},
    "lead_days": 30,
    "done_by": {"type": "TaxReturn"},
}

# Every day of a pet trip abroad covered by a rabies jab of the same pet.
RABIES = {
    "kind": "valid_on",
    "title": "Rabies jab valid for every day of a pet trip abroad",
    "severity": "critical",
    "document": {"type": "PetVaccine", "where": {"vaccineName": "rabies"}},
    "each": {"type": "PetTrip", "where": {"crossesBorder": True}},
    "match": {"petKey": "petKey"},
    "at": {"fields": ["leavesOn"]},
    "until": {"fields": ["returnsOn"]},
    "starts": ["givenOn"],
    "expires": ["validUntil"],
}


def jab(
    ts: str, key: str, given: str, valid: str, pet: str = "rex", name: str = "rabies"
) -> dict[str, Any]:
    return add(ts, "PetVaccine", key, petKey=pet, vaccineName=name, givenOn=given, validUntil=valid)
