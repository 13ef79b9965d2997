"""The query namespace: the read-only view of a user's state that queries and rules see."""

from __future__ import annotations

from collections import Counter
from datetime import date, datetime, timedelta
from typing import Any

from uac_kernel.errors import QueryError
from uac_kernel.fold import State
from uac_kernel.records import Record

__all__ = ["UserView", "namespace"]

SAFE_BUILTIN_NAMES = [
    "len",
    "sum",
    "min",
    "max",
    "sorted",
    "any",
    "all",
    "set",
    "list",
    "dict",
    "tuple",
    "range",
    "enumerate",
    "zip",
    "round",
    "abs",
    "str",
    "int",
    "float",
    "bool",
]


class UserView:
    """``user`` in queries and rules: current records, history, and the log's clock.

    ``T`` may be a record class or its name: ``user.all(Trip)`` or ``user.all("Trip")``.
    """

    def __init__(self, state: State):
        self._state = state

    @property
    def now(self) -> datetime | None:
        """The time of the latest event in the log: the clock rules measure deadlines against."""
        return self._state.now

    @property
    def today(self) -> date | None:
        return self._state.now.date() if self._state.now else None

    def types(self) -> list[str]:
        return list(self._state.types)

    def all(self, T: type[Record] | str) -> list[Record]:
        """The current records of type ``T``, in order of creation."""
        return self._state.all(self._name(T))

    def history(self, T: type[Record] | str) -> list[Record]:
        """Every version of type ``T``: superseded and retracted ones, then the current ones."""
        return self._state.history(self._name(T))

    def fields(self, T: type[Record] | str) -> list[str]:
        """The field names of type ``T`` (without key, time bounds and sources)."""
        return list(self._state.schema.types.get(self._name(T), {}))

    def get(self, T: type[Record] | str, key: str) -> Record | None:
        """The current record of type ``T`` under ``key``, or None."""
        return self._state.get(self._name(T), key)

    def count(self, T: type[Record] | str) -> int:
        ts = self._state.types.get(self._name(T))
        return len(ts.current) if ts else 0

    def _name(self, T: type[Record] | str) -> str:
        name = T if isinstance(T, str) else getattr(T, "__name__", None)
        if not isinstance(name, str):
            raise QueryError(
                f"{T!r} is not a record type; pass a class like Trip or a name like 'Trip'"
            )
        return name

    def __repr__(self) -> str:
        counts = ", ".join(f"{t}: {n}" for t, n in self._state.counts().items())
        return f"<user {self._state.user!r} — {counts or 'no records'}>"


def namespace(state: State) -> dict[str, Any]:
    """The names a query sees: ``user``, every record class by name, and the safe helpers."""
    ns: dict[str, Any] = {"user": UserView(state)}
    ns.update({name: ts.cls for name, ts in state.types.items()})
    ns.update({"date": date, "datetime": datetime, "timedelta": timedelta, "Counter": Counter})
    return ns
