"""Constraints the tests put in force: the tax-return obligation."""

from __future__ import annotations

# Due on 2025-04-15, alerting from 30 days before, done by a TaxReturn record.
TAX = {
    "kind": "obligation",
    "title": "File the tax return",
    "due": {"date": "2025-04-15"},
    "lead_days": 30,
    "done_by": {"type": "TaxReturn"},
}
