"""How a value or a message is shown to a person: one place for tables, messages and reasons.

Tables in the notebook and the terminal, widget fields and alert reasons all show values
through ``show``, so a date reads ``2026-02-19`` everywhere (never ``datetime.date(2026, 2,
19)``) and a date-time ``2026-02-19 10:00``. Text that must fit a width goes through
``shorten``, which cuts between words, never inside one. A count goes through ``plural``:
``1 version``, ``2 versions``.

Whatever reaches a terminal or a text/plain output from the store passes through
``printable``, so a stored string cannot move the cursor, recolour, retitle or reorder the
screen. A result is measured as it will be printed: ``json_chunks`` writes it piece by piece
(``uac eval --out`` streams it whole to a file), ``clip_json`` stops after a budget and says
how much was left out, and ``clipped`` hands the notebook the whole value in a form that
prints only a bounded view.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

__all__ = [
    "TERMINAL_BUDGET",
    "clip_json",
    "clipped",
    "close_matches",
    "did_you_mean",
    "json_chunks",
    "json_size",
    "plural",
    "printable",
    "shorten",
    "show",
    "to_json",
]

TERMINAL_BUDGET = 100_000
"""Characters of one result printed to a terminal or a notebook before the rest is left out."""

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


def to_json(value: Any) -> str:
    """``value`` as one line of JSON: dates in ISO form, a duration in seconds, a set as a
    list, anything else as its ``str`` (the stored text unescaped: pass it to ``printable``)."""

    def default(v: Any) -> Any:
        if isinstance(v, (date, datetime)):
            return v.isoformat()
        if isinstance(v, timedelta):
            return v.total_seconds()
        if isinstance(v, (set, frozenset, tuple)):
            return list(v)
        return str(v)

    return json.dumps(value, ensure_ascii=False, default=default, indent=None)


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
    close = _closest(word, list(choices), n)
    if not close:
        lowered = {c.lower(): c for c in choices}
        close = [lowered[f] for f in _closest(word.lower(), list(lowered), n)]
    return close


def _closest(word: str, choices: list[str], n: int) -> list[str]:
    """difflib's closest ``n``, less any far behind the first: ``alert`` is ``alerts``, not
    ``alerts`` or ``fleet`` (a match only as close as the cutoff)."""
    close = difflib.get_close_matches(word, choices, n=n, cutoff=0.6)
    ratios = [difflib.SequenceMatcher(None, word, c).ratio() for c in close]
    return [c for c, r in zip(close, ratios, strict=True) if r >= ratios[0] - 0.1]


def did_you_mean(word: str, choices: Sequence[str]) -> str:
    """`` Did you mean 'x'?`` for the closest choice, else ``""``."""
    close = close_matches(word, choices)
    return f" Did you mean {close[0]!r}?" if close else ""


# C0 and C1 controls, DEL, and the invisible marks that reorder or hide text (bidi embeddings,
# overrides and isolates, zero-width characters, line and paragraph separators, BOM), and lone
# surrogates. Each is
# shown as an escape that is valid inside a JSON string too, so escaped JSON stays JSON.
_CONTROLS = [*range(0x20), *range(0x7F, 0xA0), 0x061C, 0x180E, *range(0x200B, 0x2010)]
_CONTROLS += [*range(0x2028, 0x202F), *range(0x2060, 0x2070), 0xFEFF, *range(0xFFF9, 0xFFFC)]
_CONTROLS += range(0xD800, 0xE000)  # lone surrogates: no terminal encoding can write them
_ESCAPES = {c: f"\\u{c:04x}" for c in _CONTROLS} | {9: "\\t", 10: "\\n", 13: "\\r"}


# What joins or styles emoji is kept between emoji: a zero-width joiner (🏃‍♀️ is 🏃, ZWJ, ♀,
# VS16), a variation selector after an emoji or a keycap base, and the tag run of a subdivision
# flag (🏴 tags… cancel tag). Elsewhere they could hide text, so they are escaped.
_ZWJ, _VS = "\u200d", "\ufe0e\ufe0f"
_ESCAPES_BUT_ZWJ = {c: e for c, e in _ESCAPES.items() if c != 0x200D}
_TAGS = re.compile("\U0001f3f4[\U000e0020-\U000e007e]+\U000e007f|[\U000e0000-\U000e007f]")
_JOINS = re.compile(f"[{_ZWJ}{_VS}]")
_TAG_CHAR = re.compile("[\U000e0000-\U000e007f]")


def _is_emoji(ch: str) -> bool:
    """Whether ``ch`` is a pictographic character (an emoji, or a symbol that can be one)."""
    c = ord(ch)
    return (
        0x1F000 <= c <= 0x1FAFF
        or 0x2190 <= c <= 0x2BFF
        or 0x2300 <= c <= 0x23FF
        or c in (0xA9, 0xAE, 0x203C, 0x2049, 0x2122, 0x2139, 0x3030, 0x303D, 0x3297, 0x3299)
    )


def _emoji_before(text: str, i: int) -> bool:
    """Whether an emoji ends just before ``text[i]``, its styling marks (VS16, a skin tone)
    skipped."""
    while i > 0 and (text[i - 1] in _VS or 0x1F3FB <= ord(text[i - 1]) <= 0x1F3FF):
        i -= 1
    return i > 0 and _is_emoji(text[i - 1])


def _join_or_escape(match: re.Match[str]) -> str:
    ch, text, i = match.group(), match.string, match.start()
    if ch == _ZWJ:
        after = text[i + 1 : i + 2]
        keep = _emoji_before(text, i) and after != "" and _is_emoji(after)
    else:  # a variation selector: after an emoji, or a keycap's digit, # or *
        keep = i > 0 and (_is_emoji(text[i - 1]) or text[i - 1] in "0123456789#*")
    return ch if keep else f"\\u{ord(ch):04x}"


def _flag_or_escape(match: re.Match[str]) -> str:
    """A flag's tag run kept; a lone tag character as its UTF-16 pair, valid in JSON."""
    if len(match.group()) > 1:
        return match.group()
    c = ord(match.group()) - 0x10000
    return f"\\u{0xD800 + (c >> 10):04x}\\u{0xDC00 + (c & 0x3FF):04x}"


def printable(text: str) -> str:
    """``text`` with every control and invisible formatting character escaped (``\\x1b`` is
    shown as ``\\u001b``, a newline as ``\\n``): safe to print on one line of a terminal.

    The marks that build an emoji are kept where they build one: a zero-width joiner between
    two emoji (the runner and the ♀ of 🏃‍♀️), a variation selector after one, a flag's tag run; a joiner
    between letters, a lone tag character, a bidi override or a zero-width space is escaped.
    """
    text = str(text).translate(_ESCAPES_BUT_ZWJ)
    if _ZWJ in text or any(c in text for c in _VS):
        text = _JOINS.sub(_join_or_escape, text)
    if _TAG_CHAR.search(text):
        text = _TAGS.sub(_flag_or_escape, text)
    return text


_PIECE = 1 << 16  # characters of a long string encoded at a time
# Python will not turn an int of more than 4300 digits into text (a quadratic conversion);
# such an int is written as a hex string, which is linear and exact.
_DECIMAL_BITS = 14_000


def _scalar_json(value: Any) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return json.dumps(value)
    if isinstance(value, int):
        if value.bit_length() > _DECIMAL_BITS:
            return json.dumps(hex(value))
        return str(int(value))
    if isinstance(value, (date, datetime)):
        return json.dumps(value.isoformat())
    if isinstance(value, timedelta):
        return json.dumps(value.total_seconds())
    return json.dumps(str(value), ensure_ascii=False)


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, (date, datetime)):
        return key.isoformat()
    if isinstance(key, (bool, float)) or key is None:
        return json.dumps(key)
    return _scalar_json(key).strip('"') if isinstance(key, int) else str(key)


def _string_chunks(text: str) -> Iterator[str]:
    yield '"'
    for i in range(0, len(text), _PIECE):
        yield json.dumps(text[i : i + _PIECE], ensure_ascii=False)[1:-1]
    yield '"'


def json_chunks(value: Any) -> Iterator[str]:
    """``value`` (plain data) as compact JSON, like ``json.dumps(value, ensure_ascii=False)``,
    in pieces of at most about 64 k characters: nothing of the whole text is built at once.

    Dates are ISO strings, durations seconds, sets and tuples lists, keys that JSON does not
    allow their text, ints too long for decimal text hex strings."""
    if isinstance(value, str):
        yield from _string_chunks(value)
    elif isinstance(value, Mapping):
        yield "{"
        for i, (k, v) in enumerate(value.items()):
            yield from (", " if i else "", *_string_chunks(_key_text(k)), ": ")
            yield from json_chunks(v)
        yield "}"
    elif isinstance(value, (list, tuple, set, frozenset)):
        yield "["
        for i, v in enumerate(value):
            if i:
                yield ", "
            yield from json_chunks(v)
        yield "]"
    else:
        yield _scalar_json(value)


def json_size(value: Any) -> int:
    """The length ``json_chunks(value)`` would have, measured without writing it: each distinct
    string is measured once, however often the value refers to it."""
    sizes: dict[int, int] = {}
    keep: list[Any] = []  # measured objects stay alive, so their ids stay theirs

    def size(v: Any) -> int:
        if isinstance(v, (str, list, tuple, dict, set, frozenset)):
            known = sizes.get(id(v))
            if known is not None:
                return known
            keep.append(v)
        if isinstance(v, str):
            n = sum(len(c) for c in _string_chunks(v))
        elif isinstance(v, Mapping):
            n = 2 + sum(
                len(json.dumps(_key_text(k), ensure_ascii=False)) + 2 + size(x)
                for k, x in v.items()
            )
            n += 2 * max(len(v) - 1, 0)
        elif isinstance(v, (list, tuple, set, frozenset)):
            n = 2 + sum(size(x) for x in v) + 2 * max(len(v) - 1, 0)
        else:
            n = len(_scalar_json(v))
        if isinstance(v, (str, list, tuple, dict, set, frozenset)):
            sizes[id(v)] = n
        return n

    return size(value)


def _size_text(n: int) -> str:
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return plural(n, "character")


def clip_json(value: Any, budget: int = TERMINAL_BUDGET) -> tuple[str, str]:
    """The JSON of ``value`` cut after ``budget`` characters (control characters escaped), and
    ``""`` or a note of how much was left out."""
    parts: list[str] = []
    used = 0
    for chunk in json_chunks(value):
        if used + len(chunk) > budget:
            parts.append(chunk[: budget - used])
            shown = budget
            total = json_size(value)
            note = f"… the result is {_size_text(total)} as JSON; only the first {_size_text(shown)} are shown"
            return printable("".join(parts)), note
        parts.append(chunk)
        used += len(chunk)
    return printable("".join(parts)), ""


class _Clipped:
    """Mixed into a result's own type: the same value, printed as a bounded view."""

    _budget = TERMINAL_BUDGET

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))

    def __repr__(self) -> str:
        text, note = clip_json(self, self._budget)
        return f"{text}\n{note}; the value itself is whole (e.g. x = %uac eval ...; x[:10])"

    def __reduce__(self) -> tuple[Any, ...]:  # pickles as its plain type
        base = type(self).__mro__[2]
        return (base, (base(self),))


class ClippedList(_Clipped, list):
    """A list result too large to print whole."""


class ClippedDict(_Clipped, dict):
    """A dict result too large to print whole."""


class ClippedStr(_Clipped, str):
    """A str result too large to print whole."""


class ClippedInt(_Clipped, int):
    """An int result too long to print in decimal (Python refuses past 4300 digits)."""

    def __repr__(self) -> str:
        digits = int(self.bit_length() * 0.30103) + 1
        text, note = clip_json(self, self._budget)
        return (
            f"an int of about {digits:,} digits, too long for decimal; in hex: {text.strip(chr(34))}"
            + (f"\n{note}" if note else "")
        )


_CLIPPED: dict[type, type] = {
    list: ClippedList,
    dict: ClippedDict,
    str: ClippedStr,
    int: ClippedInt,
}


def clipped(value: Any, budget: int = TERMINAL_BUDGET) -> Any:
    """``value`` itself when it prints within ``budget``; else the same value as a subclass of
    its type (list, dict, str, int) whose repr shows only a bounded view and says so."""
    kind = _CLIPPED.get(type(value))
    if kind is None:
        return value
    if kind is ClippedInt:
        return kind(value) if value.bit_length() > _DECIMAL_BITS else value
    if json_size(value) <= budget:
        return value
    return kind(value)
