"""What a rule reads: the concepts and roles its code names, followed into the helpers it calls.

Read from the rule's compiled code, not declared by hand, so it cannot drift: the names a
function's code uses are looked up in its module; a ``Concept`` (or a tuple, set or dict of
them) is read, a role name passed as a string is read, and a function of uac's own code it calls
is followed. ``docs/rules.md`` lists, for each concept, the rules that read it from here, and
``uac vocab --unbound`` takes what no rule in force reads as what uac is blind to.
"""

from __future__ import annotations

import dis
import functools
import inspect
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
        for const in _loaded(code):
            for x in const if isinstance(const, tuple) else (const,):
                if isinstance(x, str) and (x in ROLES or x in CONCEPTS):
                    found.add(x)
        for name in code.co_names:
            _value(fn.__globals__.get(name), found, seen)


def _codes(code: CodeType) -> Iterable[CodeType]:
    """``code`` and the code of the functions, lambdas and comprehensions inside it (not the
    code Python 3.14 makes of a function's annotations)."""
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType) and const.co_name != "__annotate__":
            yield from _codes(const)


def _loaded(code: CodeType) -> list[Any]:
    """The constants ``code`` loads, but for the signatures of the functions it defines.

    A nested ``def pick(trip: Record) -> bool`` loads ``'trip'`` and ``'return'`` (or the tuple
    of them, under ``from __future__ import annotations``) as its annotations' names, and
    keyword-only parameters' names for their defaults: names of parameters, no role the rule
    reads. They are told by their lines (the ``def`` up to its body) and their values (the
    function's parameter names and ``return``)."""
    signatures = [
        (range(c.co_firstlineno, _body_line(c)), _params(c))
        for c in code.co_consts
        if isinstance(c, CodeType)
    ]
    loaded = []
    for ins in dis.get_instructions(code):
        if ins.opname not in ("LOAD_CONST", "RETURN_CONST"):
            continue
        line = ins.positions.lineno if ins.positions else None
        if not any(line in lines and _names(ins.argval, p) for lines, p in signatures):
            loaded.append(ins.argval)
    return loaded


def _names(value: object, params: set[str]) -> bool:
    """Whether ``value`` is a parameter's name, or a tuple of names (annotated: each name
    followed by its annotation's text)."""
    if isinstance(value, str):
        return value in params
    if not isinstance(value, tuple) or not value or not all(isinstance(x, str) for x in value):
        return False
    return set(value) <= params or (len(value) % 2 == 0 and set(value[0::2]) <= params)


def _params(code: CodeType) -> set[str]:
    """The names of ``code``'s parameters, and ``return``."""
    n = code.co_argcount + code.co_kwonlyargcount
    n += bool(code.co_flags & inspect.CO_VARARGS) + bool(code.co_flags & inspect.CO_VARKEYWORDS)
    return {*code.co_varnames[:n], "return"}


def _body_line(code: CodeType) -> int:
    """The first line of ``code``'s body: where its signature ends."""
    lines = [line for _, _, line in code.co_lines() if line is not None]
    body = [line for line in lines if line > code.co_firstlineno]
    return min(body, default=code.co_firstlineno + 1)


def _value(v: Any, found: set[str], seen: set[int]) -> None:
    if isinstance(v, Concept):
        found.add(str(v))
    elif isinstance(v, (tuple, list, frozenset, set, dict)):
        found.update(str(x) for x in v if isinstance(x, Concept))
    elif isinstance(v, FunctionType) and v.__module__.startswith("uac_kernel."):
        _walk(v, found, seen)
    elif callable(v) and isinstance(getattr(v, "func", None), FunctionType):
        _walk(v.func, found, seen)  # a Rule or a functools.partial
