"""A fleet summary as text and HTML: what `uac fleet summary` prints and `%uac fleet DIR`
and `uac.marimo.fleet` show beside their charts."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from uac_kernel.core.display import printable

if TYPE_CHECKING:
    from uac_kernel.fleet.sql import FleetSummary

__all__ = ["summary_html", "summary_lines"]


def _rows(summary: FleetSummary) -> list[tuple[str, str]]:
    return [
        ("users", f"{summary.users:,}"),
        ("events", f"{summary.events:,}"),
        ("facts", f"{summary.facts:,}"),
        (
            "calls",
            f"{summary.calls:,} (tokens in {summary.tokens_in:,}, out {summary.tokens_out:,})",
        ),
        ("alerts", f"{summary.alerts:,}"),
    ]


def summary_lines(summary: FleetSummary) -> list[str]:
    """The summary as lines of text (control characters in rule names escaped)."""
    lines = [printable(f"fleet {summary.root}")]
    lines += [f"{name}\t{value}" for name, value in _rows(summary)]
    lines += [f"  {printable(rule)}\t{n:,}" for rule, n in summary.alerts_by_rule.items()]
    return lines


def summary_html(summary: FleetSummary) -> str:
    """The summary as an HTML table, the standing alerts per rule under it."""
    esc = html.escape
    cells = "".join(
        f"<tr><th style='text-align:left'>{name}</th><td>{esc(value)}</td></tr>"
        for name, value in _rows(summary)
    )
    rules = "".join(
        f"<tr><td style='text-align:left'>{esc(rule)}</td><td>{n:,}</td></tr>"
        for rule, n in summary.alerts_by_rule.items()
    )
    by_rule = (
        f"<table><tr><th style='text-align:left'>rule</th><th>standing alerts</th></tr>"
        f"{rules}</table>"
        if rules
        else "<p>no standing alerts</p>"
    )
    return (
        f"<div class='uac-fleet'><p><b>fleet</b> <code>{esc(summary.root)}</code></p>"
        f"<table>{cells}</table>{by_rule}</div>"
    )
