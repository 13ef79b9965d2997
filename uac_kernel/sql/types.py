"""The DuckDB column type of a record field, which the SQL view, the SQL build and the snapshot's
typed tables all write: an int column is the narrowest of BIGINT, HUGEINT and VARCHAR that holds
its values."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["sql_type"]

_INT64 = (-(2**63), 2**63 - 1)
_INT128 = (-(2**127), 2**127 - 1)

_SQL_TYPES = {
    "bool": "BOOLEAN",
    "int": "BIGINT",
    "float": "DOUBLE",
    "str": "VARCHAR",
    "date": "DATE",
    "datetime": "TIMESTAMP",
}


def sql_type(ftype: str, values: Iterable[Any] = ()) -> str:
    """The column type of a field of type ``ftype`` holding ``values`` (for an int field, the
    narrowest of BIGINT, HUGEINT and VARCHAR that holds every one of them)."""
    inner = ftype[5:-1] if ftype.startswith("list[") else ftype
    column = _SQL_TYPES[inner]
    if inner == "int":
        column = _int_column(values, listed=inner != ftype)
    return column + "[]" if inner != ftype else column


def _int_column(values: Iterable[Any], *, listed: bool) -> str:
    low = high = 0
    for v in values:
        for n in (v or ()) if listed else (v,):
            if isinstance(n, int):
                low, high = min(low, n), max(high, n)
    if _INT64[0] <= low and high <= _INT64[1]:
        return "BIGINT"
    if _INT128[0] <= low and high <= _INT128[1]:
        return "HUGEINT"
    return "VARCHAR"
