"""Model answers held for review, and the decision on one, as text: what `uac review` prints
and `%uac review` shows beside (or, where it cannot be drawn, instead of) its review widget."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from uac_kernel.render.reports import report_lines

if TYPE_CHECKING:
    from uac_kernel.ingest.report import IngestReport
    from uac_kernel.model.review import HeldBatch

__all__ = ["accepted_lines", "held_lines", "rejected_line"]


def held_lines(held: Sequence[HeldBatch]) -> list[str]:
    """Each held batch with every operation's record before and after, or that none is held."""
    return [b.text() for b in held] or ["no model answers are held for review"]


def accepted_lines(report: IngestReport, batch: int, only: str | None) -> list[str]:
    """What accepting ``batch`` (its operations ``only``, as typed: ``1,3``) appended, and the
    alerts it moved."""
    which = "all operations" if only is None else f"operations {only}"
    return report_lines(report, f"batch {batch}: accepted {which}; ")


def rejected_line(batch: int) -> str:
    return f"batch {batch} rejected; nothing of it was applied"
