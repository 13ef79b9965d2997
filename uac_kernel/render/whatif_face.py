"""A what-if's report as escaped lines and HTML: what `uac whatif` prints, and the text and HTML
a notebook shows beside (or, where it cannot be drawn, instead of) the what-if widget."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

from uac_kernel.core.display import printable

if TYPE_CHECKING:
    from uac_kernel.engine.whatif import WhatIf

__all__ = ["report_html", "report_lines"]


# How a what-if's summary ends (``WhatIf.summary``): true until its events are applied.
_NOTHING_APPENDED = "; nothing was appended"


def report_lines(w: WhatIf, applied: str = "") -> list[str]:
    """The report's lines, each with its control characters escaped: the events, records and
    alert messages are the user's text, and may hold anything.

    ``applied`` is what the ingest did once the what-if was applied (``applied_heading``: "applied:
    2 events appended to the log at seqs 41–42", as the widget's heading says it): it comes
    first, and the summary under it no longer says nothing was appended."""
    lines = w.text().splitlines()
    if applied:
        predicted = w.summary().removesuffix(_NOTHING_APPENDED)
        lines = [applied, f"predicted before it was applied: {predicted}", *lines[1:]]
    return [printable(line) for line in lines]


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
