"""The shipped rule library: health safety, travel documents, scheduling, deadlines, money.

Design material: the 40 scenarios of ``active_service_scenarios.json`` (Apache-2.0, © 2026 the
"User as Code" authors, Bojie Li / Pine AI), from the paper "User as Code: Executable Memory for
Personalized Agents". Its five categories are the categories here (plus ``contradiction``). No
rule names or is tuned to a scenario: rules key on record shapes and on concepts (a trip's
start, a document's expiry: ``docs/rules.md`` "Concepts"), never on a user's type or field names,
and each cites the regulation, label or official guidance it applies.

Every rule reads the types that play the roles it names (``roles=``; ``watch=None`` for one that
reads any type carrying what it needs), reads concepts with ``_get(rec, CONCEPT)`` through the
user's vocabulary, skips a record that lacks what it needs, measures time with ``user.today`` (the log clock) and never with
the wall clock. The drug and food tables (in ``core.tables``) are short lists written for it from the
public sources named beside them; nothing is copied from a label or a database.

One module a category: ``health``, ``supply`` (medication supply), ``travel``, ``residence``
(days present against residence limits), ``schedule``, ``deadlines``, ``contradictions``,
``money``, ``limits`` (annual contributions, budgets, caps on work), ``cashflow`` (balances
projected); ``_common`` holds what they share. ``LIBRARY`` is every shipped rule, in force by
default.
"""

from __future__ import annotations

from uac_kernel.rules.engine import Rule
from uac_kernel.rules.library.cashflow import balance_projection
from uac_kernel.rules.library.contradictions import conflicting_records
from uac_kernel.rules.library.deadlines import (
    deadline_approaching,
    tax_filing_deadline,
    warranty_ends_with_open_fault,
)
from uac_kernel.rules.library.health import (
    activity_medical_clearance,
    drug_allergy_cross_reactivity,
    drug_drug_interaction,
    food_allergy_exposure,
    food_drug_interaction,
    pregnancy_teratogenic_medication,
)
from uac_kernel.rules.library.limits import (
    annual_contribution_limit,
    budget_exceeded,
    work_over_permit_cap,
)
from uac_kernel.rules.library.money import (
    charge_after_cancellation,
    duplicate_charge,
    investment_against_risk_tolerance,
    payment_from_closed_account,
    promotional_rate_ending,
    transaction_over_limit,
    transfer_during_freeze,
    wash_sale,
)
from uac_kernel.rules.library.residence import residence_day_limits
from uac_kernel.rules.library.schedule import overlapping_commitments
from uac_kernel.rules.library.supply import medication_supply
from uac_kernel.rules.library.travel import (
    document_expires_before_trip,
    passport_validity,
    schengen_90_180,
    visa_validity,
)

__all__ = [
    "LIBRARY",
    "activity_medical_clearance",
    "annual_contribution_limit",
    "balance_projection",
    "budget_exceeded",
    "charge_after_cancellation",
    "conflicting_records",
    "deadline_approaching",
    "document_expires_before_trip",
    "drug_allergy_cross_reactivity",
    "drug_drug_interaction",
    "duplicate_charge",
    "food_allergy_exposure",
    "food_drug_interaction",
    "investment_against_risk_tolerance",
    "medication_supply",
    "overlapping_commitments",
    "passport_validity",
    "payment_from_closed_account",
    "pregnancy_teratogenic_medication",
    "promotional_rate_ending",
    "residence_day_limits",
    "schengen_90_180",
    "tax_filing_deadline",
    "transaction_over_limit",
    "transfer_during_freeze",
    "visa_validity",
    "warranty_ends_with_open_fault",
    "wash_sale",
    "work_over_permit_cap",
]

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
    work_over_permit_cap,
    deadline_approaching,
    warranty_ends_with_open_fault,
    conflicting_records,
    transfer_during_freeze,
    charge_after_cancellation,
    payment_from_closed_account,
    transaction_over_limit,
    duplicate_charge,
    promotional_rate_ending,
    activity_medical_clearance,
    tax_filing_deadline,
    wash_sale,
    investment_against_risk_tolerance,
    medication_supply,
    residence_day_limits,
    annual_contribution_limit,
    budget_exceeded,
    balance_projection,
)
