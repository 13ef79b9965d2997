"""Options several `uac` commands share: the output and time options of a SQL query (`uac sql`,
`uac fleet sql`) and the help of `--force`."""

from __future__ import annotations

import argparse

__all__ = ["FORCE_HELP", "seconds", "sql_options"]

FORCE_HELP = (
    "replace an existing file of another kind (a file of the kind written is replaced anyway; "
    "a store, its .wal or a fleet directory never)"
)


def sql_options(p: argparse.ArgumentParser) -> None:
    """The output and time options of a SQL command (`uac sql`, `uac fleet sql`)."""
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--out",
        default=None,
        metavar="FILE",
        help="write every row to FILE (TSV, or JSON with --json); the terminal gets 100 kB",
    )
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p.add_argument(
        "--timeout",
        type=seconds,
        default=None,
        metavar="S",
        help="stop the query after S seconds (default 30, env UAC_SQL_TIMEOUT)",
    )


def seconds(text: str) -> float:
    """An argparse type: a positive number of seconds, at most a day (sql.view.MAX_TIMEOUT)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    if value > 86_400:  # a timer cannot wait for 1e300 s (sql.view.MAX_TIMEOUT)
        raise argparse.ArgumentTypeError(f"expected at most 86400 seconds (a day), got {text!r}")
    return value
