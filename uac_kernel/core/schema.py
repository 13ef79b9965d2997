"""Field types of typed records: inference from JSON values, coercion, and the growing schema.

A type or field seen for the first time extends the schema; the extension is itself an event
(kind ``schema``), so the schema is as much a function of the log as the records are.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from uac_kernel.core.names import RESERVED_FIELDS, RESERVED_TYPES, name_problem

__all__ = [
    "FIELD_TYPES",
    "MODULE_NAMES",
    "RESERVED_FIELDS",
    "RESERVED_TYPES",
    "Schema",
    "check_field_name",
    "check_type_name",
    "coerce",
    "infer",
    "reader",
    "to_json_value",
]

SCALARS = ("bool", "int", "float", "str", "date", "datetime")
FIELD_TYPES = SCALARS + tuple(f"list[{s}]" for s in SCALARS)

# Names the checkpoint module binds at its top level besides the record classes (codegen). Type
# names are written as class names (names.class_name), which start with a capital letter, and the
# capitalised ones here are reserved types, so the two never collide; rule functions must not take
# them either.
MODULE_NAMES = frozenset(
    {
        "date",
        "datetime",
        "timedelta",
        "Record",
        "Finding",
        "rule",
        "user_id",
        "seq",
        "clock",
        "records",
        "history",
        "rules",
        "constraints",
        "vocabulary",
    }
)

_DATE = re.compile(r"\d{4}-\d{2}-\d{2}\Z")
# An offset (`Z`, `+02:00`) is allowed and the value converted to UTC, as an event's `ts` is.
_DATETIME = re.compile(
    r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}(:?\d{2})?)?\Z"
)


def check_type_name(name: object) -> str | None:
    """Why ``name`` cannot be a record type name, or None when it can (names.name_problem)."""
    return name_problem("type", name)


def check_field_name(name: object) -> str | None:
    """Why ``name`` cannot be a field name, or None when it can (names.name_problem)."""
    return name_problem("field", name)


def _scalar_type(value: Any) -> str | None:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        if _DATE.match(value) and _parse_date(value) is not None:
            return "date"
        if _DATETIME.match(value):
            try:
                if _parse_datetime(value) is not None:
                    return "datetime"
            except ValueError:
                # A date-time past year 9999 (or before 1) in UTC: typed as one, so that coerce
                # refuses it by its field, as `ts` is refused, rather than typing it as text.
                return "datetime"
        return "str"
    return None


def infer(value: Any) -> str | None:
    """The field type a first value implies, or None if it implies none (null, empty list, object)."""
    if isinstance(value, list):
        inner = {_scalar_type(v) for v in value}
        if len(inner) == 1 and None not in inner:
            return f"list[{inner.pop()}]"
        if inner == {"int", "float"}:
            return "list[float]"
        if inner and inner <= {"str", "date", "datetime"}:
            return "list[str]"
        return None
    return _scalar_type(value)


def _parse_date(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def _parse_datetime(text: str) -> datetime | None:
    """``text`` as a naive UTC date-time; None if it is none; ValueError saying so if it is one
    whose UTC form falls outside years 1 to 9999."""
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is not None:
        try:
            parsed = parsed.astimezone(UTC).replace(tzinfo=None)
        except OverflowError:
            raise ValueError(
                f"{_short(text)} in UTC falls outside years 1 to 9999; give a time within them"
            ) from None
    return parsed


_EXACT: dict[str, type] = {"str": str, "int": int, "bool": bool, "float": float}


def coerce(ftype: str, value: Any) -> Any:
    """The JSON ``value`` as a Python value of ``ftype``; raises ValueError saying what is wrong.

    ``None`` clears a field and is valid for every type.
    """
    if value is None:
        return None
    if type(value) is _EXACT.get(ftype):  # the common case: nothing to convert
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("expected a finite number, got NaN or infinity")
        return value
    if ftype.startswith("list["):
        if not isinstance(value, list):
            raise ValueError(f"expected a list ({ftype}), got {_json_kind(value)}")
        inner = ftype[5:-1]
        return [coerce(inner, v) for v in value]
    if ftype == "bool":
        if isinstance(value, bool):
            return value
    elif ftype == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif ftype == "float":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if not math.isfinite(value):
                raise ValueError("expected a finite number, got NaN or infinity")
            as_float = float(value)
            if as_float != value:  # Python compares an int and a float exactly
                raise ValueError(
                    f"the whole number {value} has no exact float (it would be rounded to "
                    f"{as_float!r}); send it as a float if rounding is fine, or keep such "
                    "numbers in an int field"
                )
            return as_float
    elif ftype == "str":
        if isinstance(value, str):
            return value
    elif ftype == "date":
        if isinstance(value, str) and _DATE.match(value):
            parsed = _parse_date(value)
            if parsed is not None:
                return parsed
    elif ftype == "datetime":
        if isinstance(value, str):
            if _DATE.match(value) and (d := _parse_date(value)) is not None:
                return datetime(d.year, d.month, d.day)
            if _DATETIME.match(value) and (dt := _parse_datetime(value)) is not None:
                return dt
    else:
        raise ValueError(f"unknown field type {ftype!r}")
    raise ValueError(f"expected {_describe(ftype)}, got {_json_kind(value)} {_short(value)}")


def _identity(value: Any) -> Any:
    return value


def _float(value: Any) -> Any:
    return None if value is None else float(value)


# Dates repeat across records (one per day of a history); sharing the immutable objects saves
# memory and parsing in a large fold.
@functools.lru_cache(maxsize=1 << 16)
def _date(value: Any) -> Any:
    return None if value is None else date.fromisoformat(value)


@functools.lru_cache(maxsize=1 << 16)
def _datetime(value: Any) -> Any:
    return None if value is None else datetime.fromisoformat(value)


_READERS: dict[str, Callable[[Any], Any]] = {"float": _float, "date": _date, "datetime": _datetime}


def reader(ftype: str) -> Callable[[Any], Any]:
    """A converter from the canonical JSON value the log stores to the Python value.

    The log holds only values ``coerce`` accepted, so this trusts them (the fold's hot path).
    """
    if ftype.startswith("list["):
        inner = _READERS.get(ftype[5:-1])
        if inner is None:
            return _identity
        return lambda v: None if v is None else [inner(x) for x in v]
    return _READERS.get(ftype, _identity)


def to_json_value(value: Any) -> Any:
    """A Python field value back as its JSON form (dates as ISO strings)."""
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    if isinstance(value, list):
        return [to_json_value(v) for v in value]
    return value


def _describe(ftype: str) -> str:
    return {
        "date": "an ISO date like '2025-03-01' (date)",
        "datetime": "an ISO date-time like '2025-03-01T09:30:00' (datetime)",
        "bool": "true or false (bool)",
        "int": "a whole number (int)",
        "float": "a number (float)",
        "str": "a string (str)",
    }.get(ftype, ftype)


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass
class Schema:
    """Record types and their typed fields, in the order they first appeared in the log."""

    types: dict[str, dict[str, str]] = field(default_factory=dict)

    def copy(self) -> Schema:
        return Schema({t: dict(f) for t, f in self.types.items()})

    def field_type(self, type_name: str, field_name: str) -> str | None:
        return self.types.get(type_name, {}).get(field_name)

    def apply(self, payload: dict[str, Any]) -> None:
        """Apply a ``schema`` event's payload: a new type, or a new field of a type."""
        fields = self.types.setdefault(payload["type"], {})
        if payload.get("field"):
            fields[payload["field"]] = payload["ftype"]
