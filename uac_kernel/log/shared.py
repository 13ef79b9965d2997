"""A store shared by processes: every public method of a workbench is an operation that holds the
store's connection.

DuckDB lets one process write a file, or several read it, never both. Each public operation of
a ``Workbench`` holds the store's connection (``Store.hold``); between operations the process
keeps it, and hands the file over when another process asks for it (``log.handover``), so a
notebook's cells do not pay for connecting and a terminal beside it waits a moment at most.
Nested operations count as one, ending at the end of the outermost. That operation first
catches up with what other processes appended (``Workbench._sync``), so it never answers from
a stale state; when the file's fingerprint shows no commit since, without a query.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["operations"]

T = TypeVar("T", bound=type)

# Operations that must not fold first: closing, and the catch-up itself.
_NO_SYNC = frozenset({"__init__", "close", "refresh"})


def operations(cls: T) -> T:
    """Make every public method of ``cls`` (and ``__init__``) an operation on its store."""
    for name, fn in list(vars(cls).items()):
        if (name == "__init__" or not name.startswith("_")) and inspect.isfunction(fn):
            setattr(cls, name, _operation(fn, sync=name not in _NO_SYNC))
    return cls


def _operation(fn: Callable[..., Any], *, sync: bool) -> Callable[..., Any]:
    @functools.wraps(fn)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        store = self.__dict__.get("store")
        if store is None:  # __init__ opens the store: release it once the state is loaded
            try:
                return fn(self, *args, **kwargs)
            finally:
                made = self.__dict__.get("store")
                if made is not None:
                    made.release(keep=True)
        with store.hold() as outermost:
            if outermost and sync:
                self._sync()
            return fn(self, *args, **kwargs)

    return run
