"""Typed records: the pydantic base class and the record classes a schema describes."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import date, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, create_model

from uac_kernel.core.errors import UnknownField
from uac_kernel.core.names import field_identifier

__all__ = ["Record", "field_values", "new_record", "python_type", "record_class"]


class Record(BaseModel):
    """One version of a typed record. Every record type of a user's schema subclasses it.

    ``key`` names the record; ``valid_from``/``valid_to`` bound this version in time (``ts`` of the
    events that made and ended it); ``sources`` are the log seqs behind it; ``retracted`` marks
    the final version of a retracted record.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    sources: tuple[int, ...] = ()
    retracted: bool = False

    def fields(self) -> dict[str, Any]:
        """The record's own fields (not key, time bounds or sources), unset ones as None."""
        return field_values(self)

    @classmethod
    def own_fields(cls) -> tuple[str, ...]:
        return _own_fields(cls)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        # Checkpoint code declares fields without `= None`: in a class body a default binds the
        # field's name, so a field named `date` would shadow the type `date` for every later
        # annotation. The default is given here instead, once the class exists.
        # A field named like an attribute of Record (a store from before such names were
        # reserved) would take that attribute as its default: None there too.
        own = [f for n, f in cls.model_fields.items() if n not in Record.model_fields]
        unset = [f for f in own if f.is_required() or f.default is not None]
        for info in unset:
            info.default = None
        if unset:
            cls.model_rebuild(force=True)

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails. Private, dunder and ``model_`` names belong to
        # pydantic and Python's protocols: pydantic's own lookup answers them.
        if name.startswith(("_", "model_")):
            return super().__getattr__(name)  # type: ignore[misc]
        cls = type(self)
        known = cls.__dict__.get("__uac_known__", ())
        if name in cls.model_fields or name in known or _identifies(cls, name, known):
            return None  # a field of the type that this record never set
        # A name the type never had reads as an error, never as None: a misspelt field that
        # read None made a believable wrong answer (``sum(...)`` of nothing, a filter that
        # drops every record).
        raise UnknownField(cls.__name__, name, known, _own_fields(cls), Record.model_fields)


_SCALAR_TYPES: dict[str, type] = {
    "bool": bool,
    "int": int,
    "float": float,
    "str": str,
    "date": date,
    "datetime": datetime,
}


def python_type(ftype: str) -> Any:
    """The Python annotation of a field type name, e.g. ``list[date]`` → ``list[date]``."""
    if ftype.startswith("list["):
        return list[_SCALAR_TYPES[ftype[5:-1]]]  # type: ignore[misc]
    return _SCALAR_TYPES[ftype]


def record_class(name: str, fields: dict[str, str], known: Collection[str] = ()) -> type[Record]:
    """A pydantic class for record type ``name`` with the given ``{field: ftype}``, all optional.

    ``known`` holds every field the type has, and may grow after the class is built (the fold
    gives a type new fields before it builds the type's next class): its records read a field
    added there as unset (None), not as a name the type never had.
    """
    spec: dict[str, Any] = {f: (python_type(t) | None, None) for f, t in fields.items()}
    cls: type[Record] = create_model(name, __base__=Record, __module__="uac.user", **spec)
    type.__setattr__(cls, "__uac_known__", known)
    _add_identifiers(cls, fields)
    return cls


def _add_identifiers(cls: type[Record], fields: Iterable[str]) -> None:
    """Each field whose name is not an identifier also reads as the identifier code writes it
    as (names.field_identifier): ``r.from_`` is ``getattr(r, "from")``, ``r.drug_name`` is
    ``getattr(r, "drug name")``."""
    for name in fields:
        if (ident := field_identifier(name)) != name:
            type.__setattr__(cls, ident, _field_property(name))


def _field_property(name: str) -> property:
    def read(rec: Record) -> Any:
        return rec.__dict__.get(name)

    return property(read)


def _identifies(cls: type[Record], name: str, known: Collection[str]) -> bool:
    """Whether ``name`` is the identifier of a field added to ``known`` after ``cls`` was built.
    The class's own fields' identifiers are properties, found before ``__getattr__``, so a
    class with no later field walks nothing (a miss under ``hasattr`` stays cheap)."""
    if len(known) <= len(_own_fields(cls)):
        return False
    return any(field_identifier(f) == name for f in known)


# Per class, once: codegen asks for every record it renders, the fold for every record it makes.
# A class never changes its fields (a new field makes a new class), so what is kept cannot go
# stale. It is kept on the class itself, not in a module-level cache: such a cache held every
# class a type ever had alive, n classes of up to n fields, which made opening a type of 2,000
# fields take 6 GB (5,000 fields: past 11 GB after 5 minutes, and growing).
def _own_fields(cls: type[Record]) -> tuple[str, ...]:
    own = cls.__dict__.get("__uac_own_fields__")
    if own is None:
        own = tuple(n for n in cls.model_fields if n not in Record.model_fields)
        type.__setattr__(cls, "__uac_own_fields__", own)
    return own


_set = object.__setattr__


def _fields_set(cls: type[Record]) -> frozenset[str]:
    names = cls.__dict__.get("__uac_fields_set__")
    if names is None:
        names = frozenset(cls.model_fields)
        type.__setattr__(cls, "__uac_fields_set__", names)
    return names


def field_values(rec: Record) -> dict[str, Any]:
    """``rec.fields()``, also for a record with a field named ``fields`` or ``own_fields``: an
    older uac let such names in, and on those records the field hides the method."""
    values = rec.__dict__
    return {name: values.get(name) for name in _own_fields(type(rec))}


def new_record(cls: type[Record], values: dict[str, Any]) -> Record:
    """A record from values already validated by the log, without re-validating them.

    Does what ``model_construct`` does for our plain models, at a fraction of its cost (the fold
    builds one record per fact event, so this is its hot path). ``values`` must hold every field.
    """
    rec = cls.__new__(cls)
    _set(rec, "__dict__", values)
    # One shared, immutable fields-set per class instead of a new set per record: a set of ten
    # names costs ~700 bytes, which is a third of a record at a million records.
    _set(rec, "__pydantic_fields_set__", _fields_set(cls))
    _set(rec, "__pydantic_extra__", None)
    _set(rec, "__pydantic_private__", None)
    return rec
