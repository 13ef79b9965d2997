"""Results as plain data: what crosses from a sandboxed child back to the caller."""

from __future__ import annotations

import contextlib
from collections import Counter, deque
from collections.abc import Iterable, Iterator, Mapping, MappingView
from datetime import date, datetime, timedelta, timezone
from typing import Final, cast

from pydantic import BaseModel

_REPR_CHARS: Final = 200


def _truncated_repr(value: object) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= _REPR_CHARS else text[: _REPR_CHARS - 3] + "..."


def _plain_datetime(value: datetime) -> datetime:
    tz = value.tzinfo
    if type(value) is datetime and (tz is None or type(tz) is timezone):
        return value
    offset = value.utcoffset()
    return datetime(
        value.year,
        value.month,
        value.day,
        value.hour,
        value.minute,
        value.second,
        value.microsecond,
        tzinfo=None if offset is None else timezone(offset),
        fold=value.fold,
    )


def _plain_scalar(value: object) -> tuple[bool, object]:
    """(True, plain value) for None, bool, int, float, str and the date types; else (False, None).

    Subclasses become their exact base type so the parent can unpickle them without the class.
    """
    if value is None:
        return True, None
    if isinstance(value, bool):
        return True, value
    if isinstance(value, int):
        return True, int.__int__(value)
    if isinstance(value, float):
        return True, float.__float__(value)
    if isinstance(value, str):
        return True, str.__str__(value)
    if isinstance(value, datetime):
        return True, _plain_datetime(value)
    if isinstance(value, date):
        return True, value if type(value) is date else date(value.year, value.month, value.day)
    if isinstance(value, timedelta):
        if type(value) is timedelta:
            return True, value
        return True, timedelta(value.days, value.seconds, value.microseconds)
    return False, None


def _plain_key(key: object) -> object:
    done, plain = _plain_scalar(key)
    if done:
        return plain
    if isinstance(key, tuple):
        return tuple(_plain_key(k) for k in key)
    return _truncated_repr(key)


def _items(mapping: Mapping[object, object]) -> Iterable[tuple[object, object]]:
    """A mapping's items; a Counter's most common first, the order a chart of it promises (the
    plain dict that crosses back is no longer a Counter)."""
    if isinstance(mapping, Counter):
        with contextlib.suppress(TypeError):  # counts that do not compare
            return mapping.most_common()
    return mapping.items()


def _plain(value: object, active: set[int]) -> object:
    done, plain = _plain_scalar(value)
    if done:
        return plain
    if isinstance(value, BaseModel):
        if id(value) in active:
            return "[...]"
        active.add(id(value))
        try:
            fields = _plain(value.model_dump(), active)
        finally:
            active.discard(id(value))
        # `_type`: no field can start with "_", so a field named `type` cannot overwrite it
        return {"_type": type(value).__name__, **(fields if isinstance(fields, dict) else {})}
    containers = (Mapping, list, tuple, deque, set, frozenset, MappingView, Iterator, range)
    if not isinstance(value, containers):
        return _truncated_repr(value)
    if id(value) in active:
        return "[...]"
    active.add(id(value))
    try:
        if isinstance(value, Mapping):
            return {_plain_key(k): _plain(v, active) for k, v in _items(value)}
        items = [_plain(v, active) for v in cast(Iterable[object], value)]
        if isinstance(value, (set, frozenset)):
            with contextlib.suppress(TypeError):
                items.sort()
        return items
    finally:
        active.discard(id(value))


def to_plain(value: object) -> object:
    """``value`` as plain data: None, bool, int, float, str, date, datetime, timedelta, lists and
    dicts of them.

    Lists and tuples become lists; sets sorted lists (when their items compare); mappings
    dicts, whose tuple keys stay tuples (a Counter's in most-common order); pydantic models ``{"_type": class name,
    **fields}``; iterators, generators and ranges are consumed into lists; anything else becomes
    its ``repr`` cut to 200 characters. Inside :func:`evaluate` it runs in the child, under the
    same limits as the expression.
    """
    return _plain(value, set())
