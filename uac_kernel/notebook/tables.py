"""How `%uac` shows a listing: its first ``displaylimit`` rows, as the renderer draws them
(``render/table.py``: tab-separated text, an HTML table), with a note of what is left out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from uac_kernel.core.display import plural
from uac_kernel.render.table import Bounds, Listing, listing_html, listing_lines

if TYPE_CHECKING:
    from IPython.lib.pretty import RepresentationPrinter


__all__ = ["Table"]


_CELL_CHARS = 2000  # a cell's text (or a column's name) shown

_COLUMNS = 40  # columns shown of a table; the result itself keeps them all


class Table:
    """A listing shown a page at a time: only the first ``limit`` rows (``limit <= 0``: all)
    and the first 40 columns, each cell cut at 2,000 characters; ``columns`` and ``rows`` hold
    everything."""

    def __init__(
        self,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        limit: int = 20,
        caption: str = "",
    ) -> None:
        self.listing = Listing(list(columns), [tuple(r) for r in rows], caption=caption)
        self.limit = limit

    @classmethod
    def of(cls, listing: Listing, limit: int) -> Table:
        """``listing`` (its caption, empty line and note kept), ``limit`` rows a page."""
        table = cls(listing.columns, listing.rows, limit)
        table.listing = listing
        return table

    @property
    def columns(self) -> list[str]:
        return list(self.listing.columns)

    @property
    def rows(self) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.listing.rows]

    @property
    def caption(self) -> str:
        return self.listing.caption

    def _bounds(self) -> Bounds:
        return Bounds(max(self.limit, 0), _COLUMNS, _CELL_CHARS)

    def _more(self) -> list[str]:
        notes = []
        hidden = len(self.listing.rows) - self.limit if self.limit > 0 else 0
        if hidden > 0:
            notes.append(
                f"… {plural(hidden, 'more row')} (showing {self.limit}; "
                "%config UacMagics.displaylimit)"
            )
        if len(self.listing.columns) > _COLUMNS:
            notes.append(
                f"… {plural(len(self.listing.columns) - _COLUMNS, 'more column')} (showing "
                f"{_COLUMNS}); select fewer columns, or keep the result (r = %uac sql ...) and "
                "read r.columns and r.rows, or r.records(), in Python"
            )
        return notes

    def text(self) -> str:
        """The renderer's lines of the rows shown, then what is left out and the note."""
        notes = [*self._more(), *([self.listing.note] if self.listing.note else [])]
        return "\n".join([*listing_lines(self.listing, self._bounds()), *notes])

    def _repr_html_(self) -> str:
        return listing_html(self.listing, self._bounds(), self._more())

    def _repr_pretty_(self, p: RepresentationPrinter, cycle: bool) -> None:
        p.text(self.text())

    def __repr__(self) -> str:
        return self.text()
