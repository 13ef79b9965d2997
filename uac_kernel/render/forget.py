"""A forget's plan as lines of text: what `uac forget` prints and `%uac forget` shows, the
content it erases (or would, in a dry run) shown to the person who asked."""

from __future__ import annotations

from typing import TYPE_CHECKING

from uac_kernel.core.display import printable

if TYPE_CHECKING:
    from uac_kernel.checkpoints.forget import ForgetPlan

__all__ = ["forget_lines"]


def forget_lines(plan: ForgetPlan, *, dry_run: bool) -> list[str]:
    """Nothing to forget; or what a dry run would erase, one line each, and how to erase it; or
    what was erased."""
    if plan.empty:
        return [printable(f"nothing of {plan.user} matches; nothing to forget")]
    if dry_run:
        return [
            printable(f"would forget: {plan.summary()}"),
            *(f"  {printable(line)}" for line in plan.lines()),
            "run again without --dry-run to forget them",
        ]
    return [printable(f"forgot: {plan.summary()}; the store file was rewritten without them")]
