"""The alerts standing now as lines of text, most severe first, each with its evidence and the
constraint whose rule raised it: what `uac alerts` prints and `%uac alerts` shows beside (or,
where it cannot be drawn, instead of) its inspector widget."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from uac_kernel.core.display import printable

if TYPE_CHECKING:
    from uac_kernel.rules.engine import Alert
    from uac_kernel.state.fold import ConstraintVersion

__all__ = ["alerts_lines", "events_said"]


def alerts_lines(
    alerts: Sequence[Alert], constraint_of: Callable[[str], ConstraintVersion | None]
) -> list[str]:
    """The alerts (``no alerts`` when none stands); ``constraint_of``
    (``Workbench.constraint_of``) names the constraint of an alert its rule raised."""
    if not alerts:
        return ["no alerts"]
    lines = []
    for a in alerts:
        lines.append(f"[{a.severity}] {printable(a.rule)}: {printable(a.message)}")
        evidence = ", ".join(f"{e.type} {e.key} ({events_said(e.sources)})" for e in a.evidence)
        if evidence:
            lines.append(f"    evidence: {printable(evidence)}")
        if (cv := constraint_of(a.rule)) is not None:
            c = cv.constraint
            lines.append(f"    constraint: {printable(f'{cv.key} ({c.kind}): {c.title}')}")
    return lines


def events_said(seqs: Sequence[int]) -> str:
    """``event 14``, ``events 3, 14``: the log events a record rests on."""
    return f"{'event' if len(seqs) == 1 else 'events'} {', '.join(map(str, seqs))}"
