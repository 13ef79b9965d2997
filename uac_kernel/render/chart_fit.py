"""What keeps a uac chart inside a notebook's output area: its sizes, label limits and legend.

JupyterLab's output area is about 760 px wide at its default window size; a chart wider than
that is cut at the right edge, which is where a legend stands by default (issue 29: "Severit",
"critica"). So every chart uac draws is sized for :data:`NOTEBOOK_WIDTH` in all, labels and
legend included:

- a category axis shows at most :data:`LABEL_PX` of a label, ending in Vega's ``…``; the whole
  text is in the tooltip;
- legends stand below the plot, in columns, each label at most :data:`LEGEND_LABEL_PX`
  (room for real words: "critical", "Severity", "typed state + full context");
- titles are cut at the chart's width;
- lines that may coincide (two series at the same values) differ in dash, width and point
  shape, the first drawn widest, so one never hides another.

Text from the log goes into a chart through :func:`chart_text`: control and invisible
characters escaped (vl-convert aborts the process on a control character, and an SVG may not
hold one).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from typing import Any

import altair as alt

from uac_kernel.core.display import ELLIPSIS, printable

__all__ = [
    "CATEGORY_WIDTH",
    "LABEL_PX",
    "LEGEND_LABEL_PX",
    "LINE_POINTS",
    "NOTEBOOK_WIDTH",
    "PLOT_WIDTH",
    "chart_text",
    "label_axis",
    "legend",
    "row_labels",
    "series_channels",
    "text_px",
    "title",
]

NOTEBOOK_WIDTH = 760  # px: a whole chart, axes, labels and legend included
LABEL_PX = 200  # px of a category label on an axis
LEGEND_LABEL_PX = 150  # px of a legend label
LEGEND_COLUMNS = 3
# The plot's own width: beside a numeric axis (~60 px of ticks and title) …
PLOT_WIDTH = 640
# … or beside category labels of up to LABEL_PX.
CATEGORY_WIDTH = NOTEBOOK_WIDTH - LABEL_PX - 60
# Dash patterns and point shapes, one per series, in the legend's order.
_DASHES = [[1, 0], [6, 3], [2, 2], [8, 3, 2, 3], [4, 4], [1, 3]]
# The first series drawn widest: a later one over it leaves its edges showing.
_WIDTHS = [6, 3.5, 2, 1.5, 1.5, 1.5]
# Points hollow, so two at the same place both show.
LINE_POINTS = alt.OverlayMarkDef(filled=False, size=50, strokeWidth=1.5)
_SHAPES = ["circle", "square", "triangle-up", "diamond", "cross", "triangle-down"]


def chart_text(
    text: object, px: int | None = None, *, middle: bool = False, font_px: float = 10
) -> str:
    """Text from the log as a chart shows it: control and invisible characters escaped; with
    ``px``, at most about that wide at ``font_px``.

    Vega cuts a label at its limit itself, at the end and by the real width of its glyphs, so
    most text is left whole for it. Two kinds are cut here, between whole characters, to a
    width :func:`text_px` says surely fits, so that Vega needs no cut:

    - text with a character outside Unicode's first plane (an emoji): Vega measures and cuts in
      UTF-16 code units, and a slice through a surrogate pair makes vl-convert fail (``unexpected
      end of hex escape``: no SVG or PNG at all);
    - with ``middle``, text cut in the middle (``deadline_approaching: Purc…(standing desk)``):
      rows whose labels share a long start stay distinct by their ends."""
    text = printable(str(text))
    astral = any(ord(c) > 0xFFFF for c in text)
    if px is None or not (middle or astral):
        return text
    # Text Vega must not cut is measured at its widest; other text as it usually is (Vega
    # cuts its end if that was too little).
    em = _char_em if astral else _usual_em
    widths = [em(c) * font_px for c in text]
    if sum(widths) <= px:
        return text
    room = px - _char_em(ELLIPSIS) * font_px
    if not middle:
        # Cut where it surely fits; or, if that is before its first emoji, just before that
        # emoji: Vega may cut the rest, now of the first plane only, at its real width.
        fits = _whole(text, _fitting(widths, room))
        first = next(i for i, c in enumerate(text) if ord(c) > 0xFFFF)
        return text[: max(fits, first)] + ELLIPSIS
    head = _whole(text, _fitting(widths, room * _HEAD))
    tail = _fitting(widths[head:][::-1], room - sum(widths[:head]))
    start = _whole(text, len(text) - tail, forward=True)
    return text[:head].rstrip() + ELLIPSIS + text[start:].lstrip()


def _whole(text: str, i: int, *, forward: bool = False) -> int:
    """``i``, or the nearest place before it (after it, ``forward``) that does not cut through
    an emoji sequence: 🏃‍♀️ is cut before or after, never between 🏃 and its ZWJ, ♀ or VS16."""
    while 0 < i < len(text) and _binds(text, i):
        i += 1 if forward else -1
    return i


def _binds(text: str, i: int) -> bool:
    """Whether ``text[i - 1]`` and ``text[i]`` are in one grapheme cluster (the marks that build
    emoji, and combining marks)."""
    mark, before = ord(text[i]), text[i - 1]
    return (
        before == "\u200d"
        or mark in (0x200D, 0xFE0E, 0xFE0F, 0x20E3)
        or 0x1F3FB <= mark <= 0x1F3FF
        or 0xE0020 <= mark <= 0xE007F
        or unicodedata.combining(text[i]) != 0
    )


_HEAD = 0.45  # of a label cut in the middle, the share of its start


def row_labels(wholes: Sequence[str], px: int, *, font_px: float = 10) -> dict[str, str]:
    """Each distinct text of ``wholes`` as a row label at most ``px`` wide, cut in the middle
    (:func:`chart_text`); texts whose cuts would read the same (``rule: PetTrip biscuit-a,
    PetVaccine v`` and ``rule: PetTrip biscuit-b, PetVaccine v``) are cut around where they
    differ instead (``rule: Pet…biscuit-a, PetVacc…``)."""
    shown = {w: chart_text(w, px, middle=True, font_px=font_px) for w in dict.fromkeys(wholes)}
    alike: dict[str, list[str]] = {}
    for whole, label in shown.items():
        alike.setdefault(label, []).append(whole)
    for same in alike.values():
        if len(same) < 2:
            continue
        texts = [printable(w) for w in same]
        for whole, text in zip(same, texts, strict=True):
            at = max(_common_start(text, other) for other in texts if other != text)
            shown[whole] = _around(text, at, px, font_px)
    return shown


def _common_start(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _around(text: str, at: int, px: int, font_px: float) -> str:
    """``text``'s start, ``…``, and as much as fits from a little before ``at`` (where it
    differs from texts alike), measured as :func:`chart_text` measures text Vega must not cut."""
    widths = [_char_em(c) * font_px for c in text]
    if sum(widths) <= px:
        return text
    room = px - 2 * _char_em(ELLIPSIS) * font_px
    head = _whole(text, _fitting(widths, room * _AROUND_HEAD))
    start = _whole(text, max(head, at - _AROUND_BEFORE), forward=True)
    end = _whole(text, start + _fitting(widths[start:], room - sum(widths[:head])))
    return (
        text[:head].rstrip()
        + (ELLIPSIS if start > head else "")
        + text[start:end]
        + (ELLIPSIS if end < len(text) else "")
    )


_AROUND_HEAD = 0.3  # of a label cut around a difference, the share of its start
_AROUND_BEFORE = 6  # characters kept before the difference, for context


def _fitting(widths: list[float], room: float) -> int:
    """How many of ``widths``, from the first, fit in ``room``."""
    used = 0.0
    for n, w in enumerate(widths):
        used += w
        if used > room:
            return n
    return len(widths)


def _char_em(c: str) -> float:
    """At least the width of ``c`` in ems in the chart's sans-serif font (vl-convert measures
    "a" 0.56, "W" 0.95, "—" 1.0, CJK and emoji 0.75)."""
    if c in _WIDE or not c.isascii():
        return 1.05
    if c in _NARROW:
        return 0.4
    return 0.8 if c.isupper() or c == "&" else 0.62


def _usual_em(c: str) -> float:
    """About the width of ``c`` in ems, as vl-convert measures it."""
    if c in _WIDE:
        return 0.9
    if not c.isascii():
        return 0.78
    if c in _NARROW:
        return 0.3
    return 0.7 if c.isupper() or c == "&" else 0.56


_WIDE = "MWmw@%"
_NARROW = " iljtfrI.,:;'|!()[]`/\\\"*{}"


def text_px(text: str, font_px: float = 10) -> float:
    """At least the width ``text`` takes at ``font_px`` (see :func:`chart_text`)."""
    return sum(_char_em(c) for c in text) * font_px


def title(text: str, subtitle: str = "", *, width: int = NOTEBOOK_WIDTH) -> alt.TitleParams:
    """A title (and subtitle: Vega cuts both at its ``limit``) cut with ``…`` at ``width`` px."""
    # From the left edge of the whole chart (labels included), so at most ``width`` wide.
    limit = width - 24  # the padding on both sides, and the title offset
    place: dict[str, Any] = {"anchor": "start", "frame": "bounds", "limit": limit}
    if subtitle:
        return alt.TitleParams(
            chart_text(text, limit, font_px=_TITLE_PX),
            subtitle=chart_text(subtitle, limit),
            **place,
        )
    return alt.TitleParams(chart_text(text, limit, font_px=_TITLE_PX), **place)


_TITLE_PX = 13 * 1.1  # Vega's titles: 13 px, bold


def legend(columns: int = LEGEND_COLUMNS, label_px: int = LEGEND_LABEL_PX, **kw: Any) -> alt.Legend:
    """A legend below the plot, in ``columns``, labels cut at ``label_px``; ``columns`` times
    ``label_px`` (and ~40 px of symbol and gap a column) must fit the chart's width."""
    return alt.Legend(
        orient="bottom",
        direction="horizontal",
        columns=columns,
        labelLimit=label_px,
        titleLimit=NOTEBOOK_WIDTH,
        symbolLimit=60,
        **kw,
    )


def label_axis(limit: int = LABEL_PX, **kw: Any) -> alt.Axis:
    """A category axis whose labels are cut with ``…`` at ``limit`` px."""
    return alt.Axis(labelLimit=limit, titleLimit=limit, **kw)


def series_channels(
    field: str,
    domain: list[str] | None = None,
    *,
    columns: int = LEGEND_COLUMNS,
    label_px: int = LEGEND_LABEL_PX,
    **color: Any,
) -> dict[str, Any]:
    """Colour, dash, width and point shape by ``field``, one legend: lines that coincide stay
    visible (the first drawn widest, each in its own dash, its points in their own shape).

    ``domain`` fixes the series' order (else Vega's sorted order; lines are drawn in the order
    of their rows, so give the rows' order); ``color`` goes to ``alt.Color`` (a ``scale``,
    ``sort``, ``title``); ``columns`` and ``label_px`` to the legend."""
    key = legend(columns, label_px)
    scale = alt.Scale(domain=domain) if domain is not None else alt.Undefined
    colors = color.pop("scale", alt.Scale())
    if domain is not None:  # one domain for all four channels, or Vega-Lite draws 2 legends
        colors = alt.Scale(domain=domain, scheme=colors.scheme)
    name = color.pop("title", field)
    kw = {"title": name, "sort": color.pop("sort", alt.Undefined)}
    return {
        "color": alt.Color(f"{field}:N", legend=key, scale=colors, **kw, **color),
        "strokeDash": alt.StrokeDash(f"{field}:N", legend=key, scale=_ranged(scale, _DASHES), **kw),
        "strokeWidth": alt.StrokeWidth(
            f"{field}:N", legend=None, scale=_ranged(scale, _WIDTHS), **kw
        ),
        "shape": alt.Shape(f"{field}:N", legend=key, scale=_ranged(scale, _SHAPES), **kw),
    }


def _ranged(scale: Any, values: list[Any]) -> alt.Scale:
    if scale is alt.Undefined:
        return alt.Scale(range=values)
    return alt.Scale(domain=scale.domain, range=values)
