"""The text of what a change did to the alerts, the same in a terminal and a notebook: one line
an alert raised, moved to another severity or cleared (naming its rule, a clear with why), after
the summary of the ingest, extraction, constraint, binding or review that made it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from uac_kernel.core.display import printable

if TYPE_CHECKING:  # `uac --help` and the commands that need no fold load no pydantic
    from uac_kernel.ingest.report import IngestReport
    from uac_kernel.rules.engine import Alert, ClearedAlert

__all__ = [
    "AlertReport",
    "alert_line",
    "alert_lines",
    "bound_lines",
    "in_force_lines",
    "report_lines",
    "retracted_lines",
]


class AlertReport(Protocol):
    """What a change reports: a summary and the alerts it raised, updated and cleared
    (``IngestReport``, ``ExtractionReport``, ``AlertChange`` with a summary)."""

    raised: list[Alert]
    updated: list[Alert]
    cleared: list[ClearedAlert]

    def summary(self) -> str: ...


class AlertChanges(Protocol):
    raised: list[Alert]
    updated: list[Alert]
    cleared: list[ClearedAlert]


def alert_line(verb: str, alert: Alert) -> str:
    """``  raised [critical] rule: message``; a cleared alert with its reason on a second line."""
    line = f"  {verb} [{alert.severity}] {printable(alert.rule)}: {printable(alert.message)}"
    reason = getattr(alert, "reason", None)  # a ClearedAlert's
    if reason:
        line += f"\n      why: {printable(reason)}"
    return line


def alert_lines(change: AlertChanges) -> list[str]:
    """Every alert ``change`` raised, moved to another severity or cleared, one line each."""
    verbs: Sequence[tuple[str, Sequence[Alert]]] = (
        ("raised", change.raised),
        ("updated", change.updated),
        ("cleared", change.cleared),
    )
    return [alert_line(verb, a) for verb, alerts in verbs for a in alerts]


def report_lines(report: AlertReport, prefix: str = "") -> list[str]:
    """The report's summary (after ``prefix``), then its alert lines."""
    return [printable(prefix + report.summary()), *alert_lines(report)]


def in_force_lines(report: IngestReport) -> list[str]:
    """What putting constraints in force did: their keys, then the report's lines."""
    return report_lines(report, f"in force: {', '.join(report.constraints)}; ")


def retracted_lines(report: IngestReport) -> list[str]:
    """What retracting a constraint did, naming its key, and the alerts it cleared."""
    return report_lines(report, f"retracted: {', '.join(report.constraints)}; ")


def bound_lines(report: IngestReport) -> list[str]:
    """What binding names to concepts did (``already so`` when nothing was new to log)."""
    return report_lines(report, "" if report.appended else "already so; ")
