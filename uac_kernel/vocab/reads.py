"""What a rule reads: the concepts and roles its code names, followed into the helpers it calls.

Read from the rule's compiled code, not declared by hand, so it cannot drift: the names a
function's code uses are looked up in its module; a ``Concept`` (or a tuple, set or dict of
them) is read, a role name passed as a string is read, and a function of uac's own code it calls
is followed. ``docs/rules.md`` lists, for each concept, the rules that read it from here, and
``uac vocab --unbound`` takes what no rule in force reads as what uac is blind to.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from types import CodeType, FunctionType
from typing import Any

from uac_kernel.vocab.catalogue import CONCEPTS, ROLES, Concept

__all__ = ["reads"]


def reads(func: Any) -> frozenset[str]:
    """The concepts (``trip.start``) and roles (``trip``) ``func`` and the uac functions it
    calls read; empty for a function whose code cannot be read."""
    fn = getattr(func, "func", func)  # a Rule holds its function
    if not isinstance(fn, FunctionType):
        return frozenset()
    return _reads(fn) | frozenset(getattr(func, "roles", ()))


@functools.cache
def _reads(fn: FunctionType) -> frozenset[str]:
    found: set[str] = set()
    seen: set[int] = set()
    _walk(fn, found, seen)
    return frozenset(found)


def _walk(fn: FunctionType, found: set[str], seen: set[int]) -> None:
    if id(fn) in seen:
        return
    seen.add(id(fn))
    if isinstance(inner := getattr(fn, "__wrapped__", None), FunctionType):
        _walk(inner, found, seen)  # a helper under a decorator (``per_record``) reads its own
    defaults = [*(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values()]
    for d in defaults:
        for x in d if isinstance(d, tuple) else (d,):
            if isinstance(x, str) and (x in ROLES or x in CONCEPTS):
                found.add(x)
    for code in _codes(fn.__code__):
        for const in code.co_consts:
            for x in const if isinstance(const, tuple) else (const,):
                if isinstance(x, str) and (x in ROLES or x in CONCEPTS):
                    found.add(x)
        for name in code.co_names:
            _value(fn.__globals__.get(name), found, seen)


def _codes(code: CodeType) -> Iterable[CodeType]:
    """``code`` and the code of the functions, lambdas and comprehensions inside it."""
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _codes(const)


def _value(v: Any, found: set[str], seen: set[int]) -> None:
    if isinstance(v, Concept):
        found.add(str(v))
    elif isinstance(v, (tuple, list, frozenset, set, dict)):
        found.update(str(x) for x in v if isinstance(x, Concept))
    elif isinstance(v, FunctionType) and v.__module__.startswith("uac_kernel."):
        _walk(v, found, seen)
    elif callable(v) and isinstance(getattr(v, "func", None), FunctionType):
        _walk(v.func, found, seen)  # a Rule or a functools.partial
