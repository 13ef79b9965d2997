"""How `%uac` shows rows: a paged text and HTML table."""

from __future__ import annotations

import html
import re
import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from uac_kernel.core.display import plural, printable, shorten, show

if TYPE_CHECKING:
    from IPython.lib.pretty import RepresentationPrinter


__all__ = ["Table"]


_CELL_WIDTH = 60  # characters of one table cell in the text view


_WRAP_LINES = 8  # lines' worth of text a wrapped cell holds (see Table._wrap)


# An ISO date or date-time in a cell: kept on one line in HTML (browsers break at its hyphens).
_ISO_TIME = re.compile(r"\d{4}-\d\d-\d\d(?: \d\d:\d\d(?::\d\d)?)?")


_TD = 'style="text-align: left; vertical-align: top"'


_HTML_CELL_CHARS = 2000  # a cell's text (or a column's name) in the HTML table


_COLUMNS = 40  # columns shown of a table; the result itself keeps them all


def _html_cell(value: Any) -> str:
    text = printable(show(value))
    if len(text) > _HTML_CELL_CHARS:
        text = shorten(text[: _HTML_CELL_CHARS * 2], _HTML_CELL_CHARS)
    return _ISO_TIME.sub(
        lambda m: f'<span style="white-space: nowrap">{m.group(0)}</span>',
        html.escape(text),
    )


class Table:
    """Rows shown as an HTML table (every cell escaped) with an aligned text/plain fallback.

    Only the first ``limit`` rows (``limit <= 0``: all) and the first 40 columns are shown;
    ``columns`` and ``rows`` hold everything. In the text, a cell longer than its width is cut between words, except in the
    ``wrap`` columns — those that are the point of the table — where it runs on over lines.
    """

    def __init__(
        self,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        limit: int = 20,
        caption: str = "",
        wrap: Sequence[str] = (),
    ):
        self.columns = list(columns)
        self.rows = [tuple(r) for r in rows]
        self.limit = limit
        self.caption = caption
        self.wrap = [c in wrap for c in self.columns]

    def _shown(self) -> list[tuple[Any, ...]]:
        rows = self.rows if self.limit <= 0 else self.rows[: self.limit]
        return [r[:_COLUMNS] for r in rows]

    def _more(self) -> str:
        notes = []
        hidden = len(self.rows) - len(self._shown())
        if hidden:
            notes.append(
                f"… {plural(hidden, 'more row')} (showing {self.limit}; "
                "%config UacMagics.displaylimit)"
            )
        if len(self.columns) > _COLUMNS:
            notes.append(
                f"… {plural(len(self.columns) - _COLUMNS, 'more column')} (showing {_COLUMNS}); "
                "select fewer columns, or keep the result (r = %uac sql ...) and read r.columns "
                "and r.rows, or r.records(), in Python"
            )
        return "\n".join(notes)

    def text(self) -> str:
        shown = [
            [
                self._wrap(show(v)) if wrap else [self._clip(show(v))]
                for v, wrap in zip(row, self.wrap[:_COLUMNS], strict=True)
            ]
            for row in self._shown()
        ]
        header = [self._clip(c) for c in self.columns[:_COLUMNS]]
        widths = [len(h) for h in header]
        for row in shown:
            widths = [max(w, *map(len, v)) for w, v in zip(widths, row, strict=True)]

        def line(cells: Sequence[str]) -> str:
            return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

        out = [self.caption] if self.caption else []
        out += [line(header), line(["-" * w for w in widths])]
        for row in shown:
            height = max(map(len, row))
            out += [line([c[i] if i < len(c) else "" for c in row]) for i in range(height)]
        if not self.rows:
            out.append("(no rows)")
        if more := self._more():
            out.append(more)
        return "\n".join(out)

    @staticmethod
    def _escape(text: str) -> str:
        return printable(text)

    @classmethod
    def _clip(cls, text: str) -> str:
        text = cls._escape(text[: _CELL_WIDTH * 4])
        return text if len(text) <= _CELL_WIDTH else shorten(text, _CELL_WIDTH)

    @classmethod
    def _wrap(cls, text: str) -> list[str]:
        """``text`` in lines of at most ``_CELL_WIDTH``, broken between words; what goes past
        ``_WRAP_LINES`` lines' worth is cut like ``_clip`` cuts."""
        text = shorten(
            cls._escape(text[: _CELL_WIDTH * _WRAP_LINES * 2]), _CELL_WIDTH * _WRAP_LINES
        )
        lines = textwrap.wrap(text, _CELL_WIDTH, break_on_hyphens=False)
        return lines or [""]

    def _repr_html_(self) -> str:
        esc = html.escape
        head = "".join(f"<th {_TD}>{_html_cell(c)}</th>" for c in self.columns[:_COLUMNS])
        body = "".join(
            "<tr>" + "".join(f"<td {_TD}>{_html_cell(v)}</td>" for v in row) + "</tr>"
            for row in self._shown()
        )
        caption = f"<caption>{esc(self.caption)}</caption>" if self.caption else ""
        more = "".join(f"<p><em>{esc(note)}</em></p>" for note in self._more().splitlines())
        return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"

    def _repr_pretty_(self, p: RepresentationPrinter, cycle: bool) -> None:
        p.text(self.text())

    def __repr__(self) -> str:
        return self.text()
