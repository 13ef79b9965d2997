"""How a value or a message is shown to a person: one place for tables, messages and reasons.

Tables in the notebook and the terminal, widget fields and alert reasons all show values
through ``show``, so a date reads ``2026-02-19`` everywhere (never ``datetime.date(2026, 2,
19)``) and a date-time ``2026-02-19 10:00``. Text that must fit a width goes through
``shorten``, which cuts between words, never inside one. A count goes through ``plural``:
``1 version``, ``2 versions``.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

__all__ = ["close_matches", "did_you_mean", "plural", "shorten", "show"]

ELLIPSIS = "…"


def show(value: Any, none: str = "") -> str:
    """``value`` as a person reads it; ``none`` stands for None (``""`` in a table cell)."""
    if value is None:
        return none
    if isinstance(value, datetime):
        fmt = "%Y-%m-%d %H:%M:%S" if value.second or value.microsecond else "%Y-%m-%d %H:%M"
        text = value.strftime(fmt)
        offset = value.strftime("%z") if value.tzinfo is not None else ""
        return f"{text}{offset[:3]}:{offset[3:]}" if offset else text
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, time):
        return value.strftime("%H:%M:%S" if value.second or value.microsecond else "%H:%M")
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, Mapping):
        return ", ".join(f"{k}={show(v, 'None')}" for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return ", ".join(show(v, "None") for v in items)
    return str(value)


def shorten(text: str, width: int) -> str:
    """``text`` on one line and at most ``width`` characters: cut after the last whole word
    that fits, marked ``…``. Only a single word longer than half the width is cut inside."""
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    cut = text[: max(width - 1, 0)]
    space = cut.rfind(" ")
    if text[len(cut)] != " " and space >= width // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:–-") + ELLIPSIS


def plural(n: int, noun: str, nouns: str | None = None, *, fmt: str = "") -> str:
    """``n`` and the noun that agrees with it: ``1 version``, ``0 versions``, ``-1 day``.

    ``nouns`` is the plural when it is not ``noun + "s"`` (``1 entry``, ``2 entries``); ``fmt``
    formats the number (``","``: ``1,023 events``).
    """
    word = noun if abs(n) == 1 else nouns or f"{noun}s"
    return f"{n:{fmt}} {word}"


def close_matches(word: str, choices: Sequence[str], n: int = 1) -> list[str]:
    """The choices closest to ``word``: one equal but for case first, then difflib's closest,
    then difflib's closest ignoring case."""
    for c in choices:
        if c.lower() == word.lower():
            return [c]
    close = difflib.get_close_matches(word, list(choices), n=n, cutoff=0.6)
    if not close:
        lowered = {c.lower(): c for c in choices}
        found = difflib.get_close_matches(word.lower(), list(lowered), n=n, cutoff=0.6)
        close = [lowered[f] for f in found]
    return close


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """`` Did you mean 'x'?`` for the closest choice, else ``""``."""
    close = close_matches(word, choices)
    return f" Did you mean {close[0]!r}?" if close else ""
