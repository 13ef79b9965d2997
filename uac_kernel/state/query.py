"""The query namespace: the read-only view of a user's state that queries and rules see."""

from __future__ import annotations

from collections import Counter
from datetime import date, datetime, timedelta
from typing import Any

from uac_kernel.core.display import close_matches, did_you_mean, printable
from uac_kernel.core.errors import QueryError, UnknownField
from uac_kernel.core.names import class_name
from uac_kernel.core.records import Record
from uac_kernel.state.fold import State
from uac_kernel.vocab.binding import Vocabulary
from uac_kernel.vocab.catalogue import CONCEPTS, ROLES

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

    def __init__(self, state: State, *, strict: bool = False):
        self._state = state
        # ``strict`` (queries): a type name the user never had but close to one they have is
        # an error with that name, not an empty answer; rules, which may name a type before
        # it comes, are not strict.
        self._strict = strict
        # Whether ``now`` and ``today`` were read (the rule engine runs a rule that read only
        # ``today`` again when the day changes, not with every event).
        self._read_time = False
        self._read_day = False

    @property
    def now(self) -> datetime | None:
        """The time of the latest event in the log: the clock rules measure deadlines against."""
        self._read_time = True
        return self._state.now

    @property
    def today(self) -> date | None:
        self._read_day = True
        return self._state.now.date() if self._state.now else None

    def types(self) -> list[str]:
        return list(self._state.types)

    @property
    def vocab(self) -> Vocabulary:
        """Which of this user's types play each role and which fields carry each concept
        (``uac vocab``); the shipped rules read through it."""
        return self._state.vocab

    def role(self, name: str) -> list[Record]:
        """The current records of every type that plays role ``name`` (``user.role("trip")``:
        trips, whatever this user calls them), type by type in order of creation."""
        if name not in ROLES:
            hint = "".join(f"; did you mean {c!r}?" for c in close_matches(name, list(ROLES)))
            raise QueryError(f"no role {name!r}{hint}; `uac vocab roles` lists them")
        types = self._state.vocab.types(name) if not ROLES[name].any else list(self._state.types)
        return [r for t in types for r in self.all(t)] if types else []

    def value(self, rec: Record, concept: str) -> Any:
        """The value of ``concept`` on ``rec`` as the rules read it: the first of the fields this
        user's vocabulary binds to it that is set (``user.value(t, "trip.start")``)."""
        if concept not in CONCEPTS:
            hint = "".join(f"; did you mean {c!r}?" for c in close_matches(concept, list(CONCEPTS)))
            raise QueryError(f"no concept {concept!r}{hint}; `uac vocab concepts` lists them")
        return self._state.vocab.read(rec.__dict__, type(rec).__name__, concept)

    def all(self, T: type[Record] | str) -> list[Record]:
        """The current records of type ``T``, in order of creation."""
        return self._handed(self._state.all(self._name(T)))

    def history(self, T: type[Record] | str) -> list[Record]:
        """Every version of type ``T``: superseded and retracted ones, then the current ones."""
        return self._handed(self._state.history(self._name(T)))

    def fields(self, T: type[Record] | str) -> list[str]:
        """The field names of type ``T`` (without key, time bounds and sources)."""
        return list(self._state.schema.types.get(self._name(T), {}))

    def where(
        self,
        T: type[Record] | str,
        field: str,
        since: date | datetime | float | None = None,
        before: date | datetime | float | None = None,
    ) -> list[Record]:
        """Current records of type ``T`` whose date, date-time or number ``field`` is at least
        ``since`` and earlier than ``before`` (either may be left out), ordered by that field:
        ``user.where(Trip, "start", since=user.today)``. Records without the field are left out
        (see ``unset``). Cheap on a long history: it reads only the records it returns."""
        name = self._name(T)
        self._bounds(name, field, since, before)
        return self._handed(self._state.where(name, field, since, before))

    def _bounds(self, name: str, field: str, since: Any, before: Any) -> None:
        """Refuse bounds of ``where`` that cannot order ``name.field``."""
        kind = self._orderable(name, field)
        for bound, label in ((since, "since"), (before, "before")):
            if bound is None:
                continue
            numeric = isinstance(bound, (int, float)) and not isinstance(bound, bool)
            if numeric != (kind == "number") or not (numeric or isinstance(bound, date)):
                want = "a number" if kind == "number" else "a date or datetime"
                raise QueryError(f"{label}={bound!r}: {name}.{field} needs {want} here")

    def unset(self, T: type[Record] | str, field: str) -> list[Record]:
        """Current records of type ``T`` where ``field`` is not set: what ``where`` leaves out."""
        name = self._name(T)
        self._orderable(name, field)
        return self._handed(self._state.unset(name, field))

    def _handed(self, records: list[Record]) -> list[Record]:
        """Every record a query or rule is handed passes through here (a view that notes what an
        answer rests on overrides it; queries cannot call it: its name starts with ``_``)."""
        return records

    def _orderable(self, name: str, field: str) -> str:
        fields = self._state.schema.types.get(name, {})
        ftype = fields.get(field)
        if ftype is None:
            # The type name is as the expression (or a model) wrote it: escaped, it cannot
            # reach a terminal as control characters.
            raise UnknownField(printable(name), field, list(fields))
        if ftype in ("date", "datetime"):
            return "time"
        if ftype in ("int", "float"):
            return "number"
        raise QueryError(
            f"{name}.{field} holds {ftype}; where() orders by a date, datetime or number field"
        )

    def field_types(self, T: type[Record] | str) -> dict[str, str]:
        """The fields of type ``T`` and their types: ``{"start": "date", "cost": "float"}``."""
        return dict(self._state.schema.types.get(self._name(T), {}))

    def get(self, T: type[Record] | str, key: str) -> Record | None:
        """The current record of type ``T`` under ``key``, or None."""
        rec = self._state.get(self._name(T), key)
        if rec is not None:
            self._handed([rec])
        return rec

    def count(self, T: type[Record] | str) -> int:
        ts = self._state.types.get(self._name(T))
        return len(ts.current) if ts else 0

    def _name(self, T: type[Record] | str) -> str:
        name = T if isinstance(T, str) else getattr(T, "__name__", None)
        if not isinstance(name, str):
            raise QueryError(
                f"{T!r} is not a record type; pass a class like Trip or a name like 'Trip'"
            )
        if self._strict and name not in self._state.types:
            # A name close to a type the user has is a typo: an error with that name. One like
            # none of them is a type with no records yet (a what-if may add the first): none.
            types = sorted(self._state.types)
            if hint := did_you_mean(name, types):
                raise QueryError(
                    f"no record type {printable(name)!r}.{hint} Types: {', '.join(types)}"
                )
        return name

    def __repr__(self) -> str:
        counts = ", ".join(f"{t}: {n}" for t, n in self._state.counts().items())
        return f"<user {self._state.user!r} — {counts or 'no records'}>"


def namespace(state: State) -> dict[str, Any]:
    """The names a query sees: ``user``, every record class by name, and the safe helpers."""
    ns: dict[str, Any] = {"user": UserView(state, strict=True)}
    # by class name (names.class_name): a type written `list` or `flight_leg` is `List`,
    # `FlightLeg`; a name as written would shadow a helper
    ns.update({class_name(name): ts.cls for name, ts in state.types.items()})
    ns.update({"date": date, "datetime": datetime, "timedelta": timedelta, "Counter": Counter})
    return ns
