"""The catalogue of concepts rules read and roles types play: data in ``data/concepts/*.toml``.

A **role** is what a type plays (``trip``, ``document``, ``medication``); one type may play
several. A **concept** is a meaning a rule reads from a record, named ``role.name``
(``trip.start``, ``document.expiry``): its value kind, its meaning, its default field names (the
first one set wins) and the words the matcher looks for in a user's own names. Rules never name a
user's type or field; they name concepts and roles, and a vocabulary (``vocab.binding``) says
which of each user's types and fields carry them.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from importlib import resources

__all__ = [
    "CONCEPTS",
    "KINDS",
    "ROLES",
    "Concept",
    "ConceptDef",
    "Role",
    "concept",
    "concepts",
    "role",
]

# The value kinds a concept may have; the matcher takes a field for a concept only when its
# schema type fits (docs/rules.md "Concepts" says what each holds).
KINDS: dict[str, frozenset[str]] = {
    "date": frozenset({"date", "datetime"}),
    "when": frozenset({"date", "datetime"}),
    "datetime": frozenset({"datetime", "date"}),
    "number": frozenset({"int", "float"}),
    "int": frozenset({"int", "float"}),
    "days": frozenset({"int", "float"}),
    "money": frozenset({"int", "float"}),
    "bool": frozenset({"bool"}),
    "flags": frozenset({"bool"}),
    "text": frozenset({"str"}),
    "texts": frozenset({"str", "list[str]"}),
    "country": frozenset({"str", "list[str]"}),
    "tz": frozenset({"str"}),
    "clock": frozenset({"str"}),
    "link": frozenset({"str", "list[str]"}),
    "dates": frozenset({"list[date]", "date"}),
    "int_or_text": frozenset({"int", "float", "str"}),
}


class Concept(str):
    """A concept's name, as rules pass it to the record helpers: ``_get(rec, TRIP_START)``
    reads the fields bound to ``trip.start`` on ``rec``'s type. A plain ``str`` there is a
    field name as written (a field may be called ``trip.start`` too)."""

    __slots__ = ()


@dataclass(frozen=True)
class Role:
    name: str
    meaning: str
    types: tuple[str, ...] = ()  # the type names that play it unless a binding says otherwise
    any: bool = False  # every type plays it (a record, a booking, a duty)
    words: tuple[str, ...] = ()
    domain: str = ""


@dataclass(frozen=True)
class ConceptDef:
    name: str
    value: str
    meaning: str
    fields: tuple[str, ...] = ()  # default field names, read in this order
    words: tuple[str, ...] = ()
    domain: str = ""
    also: tuple[str, ...] = ()  # other roles whose types carry it (a passport's expiry)

    @property
    def role(self) -> str:
        return self.name.partition(".")[0]

    @property
    def roles(self) -> tuple[str, ...]:
        """The roles whose types may carry it: its own, then ``also``."""
        return (self.role, *self.also)


@functools.cache
def _load() -> tuple[dict[str, Role], dict[str, ConceptDef]]:
    roles: dict[str, Role] = {}
    defs: dict[str, ConceptDef] = {}
    folder = resources.files("uac_kernel") / "data" / "concepts"
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".toml"):
            continue
        domain = entry.name.removesuffix(".toml")
        data = tomllib.loads(entry.read_text(encoding="utf-8"))
        for name, r in data.get("roles", {}).items():
            if name in roles:
                raise ValueError(f"{entry.name}: role {name!r} is already in {roles[name].domain}")
            roles[name] = Role(
                name=name,
                meaning=r["meaning"],
                types=tuple(r.get("types", ())),
                any=bool(r.get("any", False)),
                words=tuple(r.get("words", ())),
                domain=domain,
            )
        for name, c in data.get("concepts", {}).items():
            if name in defs:
                raise ValueError(
                    f"{entry.name}: concept {name!r} is already in {defs[name].domain}"
                )
            if c["value"] not in KINDS:
                raise ValueError(f"{entry.name}: concept {name!r} has unknown value {c['value']!r}")
            defs[name] = ConceptDef(
                name=name,
                value=c["value"],
                meaning=c["meaning"],
                fields=tuple(c.get("fields", ())),
                words=tuple(c.get("words", ())),
                domain=domain,
                also=tuple(c.get("also", ())),
            )
    for c in defs.values():
        for r in c.roles:
            if r not in roles:
                raise ValueError(f"concept {c.name!r} names role {r!r}, which no file defines")
    return roles, defs


ROLES, CONCEPTS = _load()


def concept(name: str) -> Concept:
    """The concept ``name`` as rules pass it; a name the catalogue lacks is an error at import
    of the rule that names it, not a field read as None."""
    if name not in CONCEPTS:
        raise KeyError(f"no concept {name!r} in the catalogue (uac_kernel/data/concepts)")
    return Concept(name)


def concepts(*names: str) -> tuple[Concept, ...]:
    return tuple(concept(n) for n in names)


def role(name: str) -> str:
    """The role ``name``, checked against the catalogue."""
    if name not in ROLES:
        raise KeyError(f"no role {name!r} in the catalogue (uac_kernel/data/concepts)")
    return name
