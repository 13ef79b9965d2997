"""The argument types commands share, checked before a store opens: whole numbers, seconds, a
what-if's moment, a rate; and the fleet's job names."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from datetime import datetime

__all__ = ["COUNT", "FLEET_JOBS", "FORCE_HELP", "POSITIVE", "moment", "per_second", "seconds"]

FORCE_HELP = (
    "replace an existing file of another kind (a file of the kind written is replaced anyway; "
    "a store, its .wal or a fleet directory never)"
)

# `uac fleet run`'s jobs (uac_kernel.fleet.run.JOBS, named here so `uac --help` loads no engine)
FLEET_JOBS = ("ingest", "extract", "checkpoint", "alerts", "eval", "ask", "bench", "call")


def _whole(low: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``low`` (0: none negative; 1: positive)."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if n < low:
            raise argparse.ArgumentTypeError(
                f"must be {'positive' if low == 1 else f'{low} or more'}, got {n}"
            )
        return n

    parse.__name__ = "count" if low == 0 else "positive"
    return parse


COUNT = _whole(0)  # a limit or a seq: 0 or more
POSITIVE = _whole(1)  # a version, a batch size, a size: 1 or more


def moment(text: str) -> datetime:
    """An argparse type: a what-if's moment (``engine.whatif.moment``)."""
    from uac_kernel.core.errors import QueryError
    from uac_kernel.engine.whatif import moment as parse

    try:
        return parse(text)
    except QueryError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("as of ")) from None


def per_second(text: str) -> float:
    """An argparse type: a positive, finite number (of calls per second)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number per second, got {text!r}")
    return value


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
