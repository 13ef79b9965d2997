"""A user's vocabulary: which of their types play each role and which fields carry each concept.

Built from the catalogue's defaults (author ``default``) and the bindings the log holds (author
``inferred`` from the matcher, ``model`` from extraction, ``person`` by hand). A binding is
``used`` (rules read it), ``held`` (proposed, waiting for review: never read) or ``rejected``
(a person said no: also hides a default). Only a binding's author and score order what is read:
a person's over a model's over an inferred one, then the catalogue's defaults.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from uac_kernel.vocab.catalogue import CONCEPTS, ROLES

__all__ = [
    "AUTHORS",
    "Author",
    "Binding",
    "Rebinding",
    "Status",
    "Vocabulary",
    "addable",
    "first_set",
]

Author = Literal["default", "inferred", "model", "person"]
Status = Literal["used", "held", "rejected"]
AUTHORS: tuple[Author, ...] = ("person", "model", "inferred", "default")
_RANK = {a: i for i, a in enumerate(AUTHORS)}


@dataclass(frozen=True)
class Binding:
    """``type`` plays role ``target`` (``field`` None), or ``type.field`` carries concept
    ``target``, said by ``author`` with a ``score`` in [0, 1] and the ``reason`` it matched.
    ``via``: the role (of the same type) or concept (of the same field) it was derived from; it
    is read only while that one is."""

    target: str
    type: str
    field: str | None = None
    author: Author = "inferred"
    score: float = 1.0
    reason: str = ""
    status: Status = "used"
    via: str | None = None

    @property
    def is_role(self) -> bool:
        return self.field is None

    @property
    def key(self) -> tuple[str, str, str | None]:
        """What a binding is about; a later binding of the same key replaces it."""
        return (self.target, self.type, self.field)

    def short(self) -> str:
        """``Journey.leaves_on as trip.start (inferred 0.86)``: what an alert says it read."""
        what = self.type if self.field is None else f"{self.type}.{self.field}"
        how = "plays" if self.field is None else "as"
        return f"{what} {how} {self.target} ({self.author} {self.score:.2f})"

    def describe(self) -> str:
        """``Journey.leaves_on as trip.start (inferred 0.86: synonym 'leave'; date field)``."""
        what = self.type if self.field is None else f"{self.type}.{self.field}"
        how = "plays" if self.field is None else "as"
        why = f": {self.reason}" if self.reason else ""
        return f"{what} {how} {self.target} ({self.author} {self.score:.2f}{why})"


@dataclass(frozen=True)
class Rebinding:
    """How a change of the vocabulary left one key (target, type, field): its binding before
    and after (None: not bound)."""

    key: tuple[str, str, str | None]
    before: Binding | None
    after: Binding | None

    def describe(self) -> str:
        """``Journey.leaves_on is no longer read as trip.start (rejected by a person)``."""
        target, type_name, field = self.key
        was, now = (b is not None and b.status == "used" for b in (self.before, self.after))
        if was == now:  # still read (or still not), by another author, score or status
            what = type_name if field is None else f"{type_name}.{field}"
            how = "plays" if field is None else "as"
            return f"{what} {how} {target}: {_side(self.before)} → {_side(self.after)}"
        when = "now" if now else "no longer"
        said = (
            f"{type_name} {when} plays {target}"
            if field is None
            else f"{type_name}.{field} is {when} read as {target}"
        )
        by = (
            "unbound" if self.after is None else f"{self.after.status} by {_WHO[self.after.author]}"
        )
        return f"{said} ({by})"


_WHO = {"person": "a person", "model": "the model", "inferred": "the matcher", "default": "default"}


def _side(b: Binding | None) -> str:
    return "unbound" if b is None else f"{b.status} ({b.author} {b.score:.2f})"


def first_set(values: Mapping[str, Any], fields: Iterable[str]) -> Any:
    """The first of ``fields`` set (not None) in a record's ``values``, or None."""
    for f in fields:
        if (v := values.get(f)) is not None:
            return v
    return None


def addable(bound: Binding | None) -> bool:
    """Whether an ``add`` may bind a key now bound as ``bound``: one not bound, or bound only
    by the matcher's proposal (a model or a person adds over it without knowing it was there).
    The planner and the fold ask the same question, so what one lets in the other folds."""
    return bound is None or bound.author == "inferred"


class Vocabulary:
    """The bindings in force for one user, and what rules read through them. Immutable: a new
    schema or a new binding makes a new vocabulary (``State.vocab``)."""

    def __init__(self, bindings: Iterable[Binding] = ()):
        latest: dict[tuple[str, str, str | None], Binding] = {}
        for b in bindings:
            latest[b.key] = b
        self.bindings: tuple[Binding, ...] = tuple(latest.values())
        self._rejected = {b.key for b in self.bindings if b.status == "rejected"}
        used = sorted(
            (b for b in self.bindings if b.status == "used" and self._stands(b, latest)),
            key=lambda b: (_RANK[b.author], -b.score),
        )
        self._fields: dict[tuple[str, str], list[str]] = {}
        self._types: dict[str, list[str]] = {}
        self._read: dict[tuple[str, str, str | None], Binding] = {}
        self._idle = {
            b.key for b in self.bindings if b.status == "used" and not self._stands(b, latest)
        }
        for b in used:
            if b.field is None:
                self._types.setdefault(b.target, []).append(b.type)
            else:
                self._fields.setdefault((b.type, b.target), []).append(b.field)
            if b.author != "default":
                self._read[b.key] = b
        self._cache: dict[tuple[str, str], tuple[str, ...]] = {}
        self._reads: dict[tuple[str | None, str], tuple[Binding, ...]] = {}
        self._role_cache: dict[str, tuple[str, ...]] = {}
        # Per (type, concept), its fields and the bindings a read of it rests on, in one
        # look-up (``resolve`` fills it): rules resolve concepts on every record they read.
        self.resolved: dict[tuple[str, str], tuple[tuple[str, ...], tuple[Binding, ...]]] = {}
        # Whether any binding beyond the catalogue's is in force: only then do rule calls note
        # which bindings they read (the evidence of an alert that rests on one).
        self.inferred = bool(self._read)

    def _stands(
        self, b: Binding, latest: dict[tuple[str, str, str | None], Binding], depth: int = 0
    ) -> bool:
        """Whether ``b``'s source is in force: a binding derived ``via`` a role or concept a
        person since rejected (or that was never used) is not read."""
        if b.via is None:
            return True
        source = latest.get((b.via, b.type, b.field))
        if source is not None:
            return source.status == "used" and depth < 4 and self._stands(source, latest, depth + 1)
        if (b.via, b.type, b.field) in self._rejected:
            return False
        if b.field is None:
            return b.via in ROLES and b.type in ROLES[b.via].types
        return b.via in CONCEPTS and b.field in CONCEPTS[b.via].fields

    def fields(self, type_name: str, concept: str) -> tuple[str, ...]:
        """The fields of ``type_name`` that carry ``concept``, in the order they are read: its
        bindings, then the catalogue's default names (whether or not the type has them: a
        record lacks a field it never had, and reads None there)."""
        key = (type_name, concept)
        got = self._cache.get(key)
        if got is None:
            bound = self._fields.get(key, [])
            defaults = CONCEPTS[concept].fields
            got = tuple(
                dict.fromkeys(
                    [
                        *bound,
                        *(f for f in defaults if (concept, type_name, f) not in self._rejected),
                    ]
                )
            )
            self._cache[key] = got
        return got

    def resolve(self, type_name: str, concept: str) -> tuple[tuple[str, ...], tuple[Binding, ...]]:
        """``fields(type_name, concept)`` and ``read_by(type_name, concept)``, kept together."""
        got = self.resolved.get((type_name, concept))
        if got is None:
            got = (self.fields(type_name, concept), self.read_by(type_name, concept))
            self.resolved[(type_name, concept)] = got
        return got

    def types(self, role: str) -> tuple[str, ...]:
        """The type names that play ``role``: bound ones, then the catalogue's defaults, less
        those a person rejected. A role every type plays (``record``) has none listed."""
        got = self._role_cache.get(role)
        if got is None:
            r = ROLES[role]
            got = tuple(
                dict.fromkeys(
                    [
                        *self._types.get(role, []),
                        *(t for t in r.types if (role, t, None) not in self._rejected),
                    ]
                )
            )
            self._role_cache[role] = got
        return got

    def plays(self, type_name: str, role: str) -> bool:
        return ROLES[role].any or type_name in self.types(role)

    def read(self, values: Mapping[str, Any], type_name: str, concept: str) -> Any:
        """The value of ``concept`` in a ``type_name`` record's ``values``: the first of the
        fields it is read from that is set, or None."""
        return first_set(values, self.fields(type_name, concept))

    def binding(self, type_name: str, concept: str, field: str | None) -> Binding | None:
        """The non-default binding that put ``type_name.field`` under ``concept`` (``field``
        None: the type under role ``concept``), or None when only the catalogue did."""
        return self._read.get((concept, type_name, field))

    def read_by(self, type_name: str | None, target: str) -> tuple[Binding, ...]:
        """The non-default bindings a read of concept ``target`` on ``type_name`` rests on
        (``type_name`` None: of role ``target``, the types that play it). Kept per pair: rules
        ask for it on every record they read."""
        key = (type_name, target)
        got = self._reads.get(key)
        if got is None:
            if type_name is None:
                found = [self._read.get((target, t, None)) for t in self.types(target)]
            else:
                found = [
                    self._read.get((target, type_name, f)) for f in self.fields(type_name, target)
                ]
            got = self._reads[key] = tuple(b for b in found if b is not None)
        return got

    def held(self) -> list[Binding]:
        """Proposals waiting for review: listed, never read."""
        return [b for b in self.bindings if b.status == "held"]

    def used(self) -> list[Binding]:
        """The bindings rules read (a derived one only while its source is read)."""
        return [b for b in self.bindings if b.status == "used" and b.key not in self._idle]

    def idle(self) -> list[Binding]:
        """Used bindings derived ``via`` one no longer read (a person rejected the source):
        listed, never read, read again if the source is."""
        return [b for b in self.bindings if b.key in self._idle]

    def with_bindings(self, more: Iterable[Binding]) -> Vocabulary:
        return Vocabulary([*self.bindings, *more])

    def __repr__(self) -> str:
        used = sum(1 for b in self.bindings if b.status == "used")
        return f"<Vocabulary: {used} bindings in force, {len(self.held())} held>"
