"""What the chart tests share: a rule whose alerts change severity, and a chart drawn to SVG
and read back (its size, its strings, its ticks)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from html import unescape
from typing import Any

import altair as alt
import vl_convert as vlc

from uac_kernel import Finding, rule
from uac_kernel.state.query import UserView


@rule(watch=["Book"], severity="warning", category="library")
def late_books(user: UserView) -> Iterator[Finding]:
    """A late book: a warning, critical after a week."""
    for b in user.all("Book"):
        if b.late_days:
            yield Finding(
                f"{b.title} is {b.late_days} days late",
                [b],
                severity="critical" if b.late_days > 7 else "warning",
            )


def svg(chart: alt.TopLevelMixin) -> str:
    """The chart as vl-convert draws it (real fonts, Vega's own cuts)."""
    return str(vlc.vegalite_to_svg(chart.to_json()))


def size(text: str) -> tuple[float, float]:
    """An SVG's width and height."""
    m = re.match(r'<svg[^>]*\bwidth="([\d.]+)"[^>]*\bheight="([\d.]+)"', text)
    assert m, text[:200]
    return float(m[1]), float(m[2])


def texts(text: str) -> list[str]:
    """Every string drawn: the <text> elements' content, entities read back."""
    return [
        unescape(re.sub(r"<[^>]+>", "", t))
        for t in re.findall(r"<text[^>]*>(.*?)</text>", text, re.S)
    ]


def tick_days(axis: dict[str, Any]) -> list[str]:
    """An axis's tick values (UTC milliseconds) as ISO dates, or date-times off midnight."""
    out = []
    for ms in axis["values"]:
        t = datetime.fromtimestamp(ms / 1000, UTC).replace(tzinfo=None)
        out.append(t.date().isoformat() if t == datetime(t.year, t.month, t.day) else t.isoformat())
    return out
