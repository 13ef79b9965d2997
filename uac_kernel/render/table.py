"""A listing a command reports (named columns and rows) as text and HTML: a header and
tab-separated rows, what `uac` prints and a notebook's text/plain; an HTML table, what a notebook
shows. Every cell as a person reads it (``core/display.show``: 2026-02-19 10:00), escaped."""

from __future__ import annotations

import html as _html
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from uac_kernel.core.display import printable, shorten, show

__all__ = [
    "Bounds",
    "Listing",
    "iter_lines",
    "listing_html",
    "listing_lines",
    "listing_records",
    "listings_html",
    "listings_lines",
]


@dataclass(frozen=True)
class Listing:
    """Rows under named columns: ``caption`` titles the HTML table; ``empty`` is the text's one
    line when there are no rows (``""``: the header alone); ``note`` follows the rows (where the
    next page is, a hint spelled for its face: a terminal prints it on stderr)."""

    columns: Sequence[str]
    rows: Sequence[Sequence[Any]]
    caption: str = ""
    empty: str = ""
    note: str = ""


@dataclass(frozen=True)
class Bounds:
    """What of a listing is shown (a notebook's; a terminal shows it whole): its first ``rows``
    rows (0: all), ``columns`` columns (0: all), each cell cut at ``chars`` characters."""

    rows: int = 0
    columns: int = 0
    chars: int = 0

    def cut(self, listing: Listing) -> tuple[list[str], Iterator[Sequence[Any]]]:
        """The columns shown, and the rows shown (each cut to them), read as they are needed."""
        width = self.columns or None
        rows = listing.rows if not self.rows else listing.rows[: self.rows]
        return list(listing.columns[:width]), (r[:width] for r in rows)

    def cell(self, value: Any) -> str:
        text = show(value)
        if self.chars and len(text) > self.chars:
            text = shorten(text[: self.chars * 2], self.chars)
        return printable(text)


WHOLE = Bounds()


def iter_lines(listing: Listing, bounds: Bounds = WHOLE) -> Iterator[str]:
    """The header and one tab-separated line a row (a tab, a newline or any control character
    inside a cell escaped), or the ``empty`` line; one at a time (a terminal stops at its
    budget)."""
    if not listing.rows and listing.empty:
        yield printable(listing.empty)
        return
    columns, rows = bounds.cut(listing)
    yield "\t".join(bounds.cell(c) for c in columns)
    for row in rows:
        yield "\t".join(bounds.cell(v) for v in row)


def listing_lines(listing: Listing, bounds: Bounds = WHOLE) -> list[str]:
    """All of ``iter_lines``."""
    return list(iter_lines(listing, bounds))


def listings_lines(listings: Iterable[Listing], bounds: Bounds = WHOLE) -> list[str]:
    """Several listings' lines, a blank line between two."""
    out: list[str] = []
    for n, listing in enumerate(listings):
        out += [""] * bool(n) + listing_lines(listing, bounds)
    return out


def listing_records(listing: Listing, bounds: Bounds = WHOLE) -> list[dict[str, str]]:
    """The rows shown as records of their cells' text, by column (for a table widget)."""
    columns, rows = bounds.cut(listing)
    return [dict(zip(columns, map(bounds.cell, row), strict=True)) for row in rows]


# An ISO date or date-time in a cell: kept on one line in HTML (browsers break at its hyphens).
_ISO_TIME = re.compile(r"\d{4}-\d\d-\d\d(?: \d\d:\d\d(?::\d\d)?)?")

_TD = 'style="text-align: left; vertical-align: top"'


def _html_cell(bounds: Bounds, value: Any) -> str:
    return _ISO_TIME.sub(
        lambda m: f'<span style="white-space: nowrap">{m.group(0)}</span>',
        _html.escape(bounds.cell(value)),
    )


def listing_html(listing: Listing, bounds: Bounds = WHOLE, notes: Sequence[str] = ()) -> str:
    """An HTML table (every cell escaped) under its caption, or the ``empty`` line when there
    are no rows (as the text), then ``notes`` and the listing's note, each a paragraph."""
    more = [*notes, listing.note] if listing.note else list(notes)
    tail = "".join(f"<p><em>{_html.escape(printable(n))}</em></p>" for n in more)
    if not listing.rows and listing.empty:  # as the text: the listing's line, not bare headers
        return f"<p>{_html.escape(printable(listing.empty))}</p>{tail}"
    columns, rows = bounds.cut(listing)
    head = "".join(f"<th {_TD}>{_html_cell(bounds, c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td {_TD}>{_html_cell(bounds, v)}</td>" for v in row) + "</tr>"
        for row in rows
    )
    caption = f"<caption>{_html.escape(printable(listing.caption))}</caption>"
    return (
        f"<table>{caption if listing.caption else ''}<thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table>{tail}"
    )


def listings_html(listings: Iterable[Listing], bounds: Bounds = WHOLE) -> str:
    """Several listings' tables, one after the other."""
    return "".join(listing_html(listing, bounds) for listing in listings)
