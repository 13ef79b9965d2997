"""What the hash chains say, as text: a verification (`uac verify`, `%uac verify`) and the
chain heads to keep elsewhere (`uac head`, `%uac head`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from uac_kernel.core.display import printable

if TYPE_CHECKING:
    from uac_kernel.log.integrity import Head, VerifyReport

__all__ = ["heads_lines", "verify_line"]


def verify_line(report: VerifyReport, where: str) -> str:
    """The verification of the store at ``where``: what was checked, or the first problem."""
    return printable(report.summary(where))


def heads_lines(heads: Mapping[str, Head | str], user: str | None) -> list[str]:
    """``user``'s head alone (what ``verify --head`` reads back), else each user's head and
    name, a tab between."""
    if user is not None:
        return [str(heads[user])]
    return [f"{head}\t{json.dumps(name)}" for name, head in heads.items()]
