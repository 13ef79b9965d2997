"""The alerts a workbench or a rule raised, read for the asserts of rule and constraint tests."""

from __future__ import annotations

from typing import Any

from uac_kernel.rules.engine import Alert


def alerts(wb: Any) -> list[Any]:
    """The standing alerts; a rule that raised (a ``rule_error`` alert) fails the test."""
    found = wb.alerts()
    assert not [a.message for a in found if a.category == "rule_error"]
    return found


def keys(alert: Alert) -> set[str]:
    """``Type/key`` of each record an alert rests on."""
    return {f"{e.type}/{e.key}" for e in alert.evidence}
