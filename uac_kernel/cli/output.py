"""How `uac` prints: JSON, a listing's lines (``render.table``: tab-separated, stored text
escaped; its note on stderr), an ingest report, a SQL result, and the checked --out file."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from uac_kernel.core.display import plural, printable, to_json
from uac_kernel.render.listings import sql_listing
from uac_kernel.render.reports import report_lines
from uac_kernel.render.table import iter_lines, listings_lines

if TYPE_CHECKING:
    from uac_kernel.core.outputs import Kind, Output
    from uac_kernel.ingest.report import IngestReport
    from uac_kernel.model.extract import ExtractionReport
    from uac_kernel.render.table import Listing
    from uac_kernel.sql.view import SqlResult

__all__ = ["print_result", "sql_output", "to_json"]


def _print_listing(*listings: Listing) -> None:
    """Listings as their renderer draws them (a blank line between two); a listing's note (where
    the next page is) on stderr, so the rows stay rows for a pipe."""
    for line in listings_lines(listings):
        print(line)
    for listing in listings:
        if listing.note:
            print(printable(listing.note), file=sys.stderr)


def _print_listing_json(listing: Listing) -> None:
    """A listing's rows as JSON objects, by column."""
    rows = [dict(zip(listing.columns, r, strict=True)) for r in listing.rows]
    print(printable(to_json(rows)))


def _print_report(report: IngestReport | ExtractionReport, prefix: str = "") -> None:
    """The summary, then every alert raised, moved to another severity or cleared, in full;
    a cleared one with why it cleared (``render.reports``)."""
    for line in report_lines(report, prefix):
        print(line)


def _output(args: argparse.Namespace, option: str, kind: Kind) -> Output | None:
    """The file of ``--option`` (None if not given), checked now, before any work: never the
    store the command reads (``--db``), a file of another kind only with ``--force``."""
    from uac_kernel.core.outputs import Output

    path = getattr(args, option)
    if path is None:
        return None
    target = Output(path, kind, force=args.force, protect=(args.db,), what=f"--{option}")
    target.check()
    return target


def _print_json(value: Any, out: Output | None) -> None:
    """The result as JSON: whole into ``out``, else cut at the terminal budget with a note on
    stderr that says how to get the rest."""
    from uac_kernel.core.display import clip_json, json_chunks

    if out is not None:
        written = out.write_text(json_chunks(value))
        print(out.wrote(f"{written:,} characters of JSON"))
        return
    text, note = clip_json(value)
    print(text)
    if note:
        print(f"{note}; write it whole with --out FILE", file=sys.stderr)


def _tsv(result: SqlResult) -> Iterator[str]:
    """A query's lines as its renderer draws them (``render.listings.sql_listing``), one at a
    time: a header, then a tab-separated line a row, as the notebook shows values."""
    for line in iter_lines(sql_listing(result)):
        yield line + "\n"


def sql_output(args: argparse.Namespace) -> Output | None:
    """The checked ``--out`` of a SQL command (see sql_options): JSON with ``--json``, else TSV."""
    from uac_kernel.core.outputs import JSON, TSV

    return _output(args, "out", JSON if args.json else TSV)


def print_result(result: SqlResult, args: argparse.Namespace, out: Output | None) -> None:
    """A query's rows as `uac sql` prints them: TSV cut at the terminal budget, or whole into
    ``out``; JSON with ``args.json``."""
    from uac_kernel.core.display import TERMINAL_BUDGET

    if args.json:
        _print_json(result.records(), out)
        return
    if out is not None:
        out.write_text(_tsv(result))
        print(out.wrote(plural(len(result.rows), "row", fmt=",")))
        return
    used = 0
    for n, line in enumerate(_tsv(result)):
        if used + len(line) > TERMINAL_BUDGET:
            # The header counts too: column names can be as long as the query allows.
            cut = "" if n else "the header line is cut, and "
            if not n:
                sys.stdout.write(line[:TERMINAL_BUDGET] + "…\n")
            left = len(result.rows) - max(n - 1, 0)
            print(
                f"… {cut}{plural(left, 'more row', fmt=',')} not shown (the output stops at "
                f"{TERMINAL_BUDGET // 1000} kB); write them all with --out FILE",
                file=sys.stderr,
            )
            return
        sys.stdout.write(line)
        used += len(line)
