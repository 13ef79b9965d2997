"""A what-if's report as escaped lines and HTML (what `uac whatif` prints and `%%uac whatif` and
`uac.marimo.whatif` show where the what-if widget is not), the widget where there is one, and
the check of an ``--as-of`` date the faces share."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from uac_kernel._display import printable
from uac_kernel.errors import QueryError

if TYPE_CHECKING:
    from uac_kernel.whatif import WhatIf
    from uac_kernel.workbench import Workbench

__all__ = ["MOMENT", "moment", "report_html", "report_lines", "widget_class"]


MOMENT = "an ISO date or date-time (2025-03-01 or 2025-03-01T09:00)"


def moment(text: str, spelled: str = "--as-of") -> str:
    """``text`` if it is an ISO date or date-time, else a ``QueryError`` naming ``spelled``:
    checked by the face, so a mistyped date is one line, not a ``ValueError``."""
    try:
        datetime.fromisoformat(text)
    except ValueError:
        raise QueryError(f"{spelled} {text!r}: expected {MOMENT}") from None
    return text


def report_lines(w: WhatIf) -> list[str]:
    """The report's lines, each with its control characters escaped: the events, records and
    alert messages are the user's text, and may hold anything."""
    return [printable(line) for line in w.text().splitlines()]


def report_html(w: WhatIf, head: Sequence[str] = ()) -> str:
    """The report as HTML: ``head`` lines, the summary in bold, then the report's lines."""
    esc = html.escape
    lines = w.text().splitlines()
    if lines and lines[0].strip() == w.summary().strip():
        lines = lines[1:]  # the summary is the bold line above
    top = "".join(f"<p>{esc(h)}</p>" for h in head)
    return (
        f"<div>{top}<p><strong>What if: {esc(w.summary())}</strong></p>"
        f"<pre>{esc(chr(10).join(lines))}</pre><p><em>Nothing was appended.</em></p></div>"
    )


def widget_class() -> Callable[[Workbench, WhatIf], Any] | None:
    """``uac_kernel.widgets.WhatIfWidget`` (the report and an Apply button), or None where
    there is none (anywidget not installed): the faces then show the text and HTML."""
    try:
        from uac_kernel import widgets
    except ImportError:
        return None
    return getattr(widgets, "WhatIfWidget", None)
