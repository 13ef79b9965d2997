"""Deterministic scoring of an answer against the ground truth."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

# --- scoring -------------------------------------------------------------------------------------

REL_TOL = 1e-6
ABS_TOL = 0.01


def _plain(value: Any) -> Any:
    if isinstance(value, (date, datetime)):
        return value.isoformat()[:10] if type(value) is date else value.isoformat()
    return value


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _close(expected: Any, got: Any) -> bool:
    if expected is None or got is None:
        return expected is None and got is None
    if not (_is_number(expected) and _is_number(got)):
        return False
    return math.isfinite(got) and math.isclose(expected, got, rel_tol=REL_TOL, abs_tol=ABS_TOL)


def score(expected: Any, got: Any, kind: str) -> bool:
    """Deterministic scoring: exact ints and strings; floats within a relative 1e-6 or an
    absolute 0.01; sets unordered; ranked lists in order; mappings key by key."""
    if kind == "int":
        if expected is None or got is None:
            return expected is None and got is None
        return _is_number(got) and float(got).is_integer() and int(got) == expected
    if kind == "number":
        return _close(expected, got)
    if kind in ("set", "list"):
        if not isinstance(got, (list, tuple, set, frozenset)):
            return False
        exp, have = [_plain(x) for x in expected], [_plain(x) for x in got]
        if kind == "set":
            return len(set(have)) == len(have) and set(have) == set(exp)
        return have == exp
    if kind == "mapping":
        if not isinstance(got, Mapping):
            return False
        got_map = {str(_plain(k)): v for k, v in got.items()}
        exp_map = {str(_plain(k)): v for k, v in expected.items()}
        return got_map.keys() == exp_map.keys() and all(
            _close(exp_map[k], got_map[k]) for k in exp_map
        )
    if kind == "str":
        return isinstance(got, str) and got == expected
    raise ValueError(f"unknown answer kind {kind!r}")
