"""What uac reads of a user's schema, and so what it is blind to (``uac vocab --unbound``).

A field is read when the vocabulary puts it under a concept some rule in force reads (found in
the rule's code by ``vocab.reads``) on a type that plays one of the concept's roles, or when a
constraint in force names it on a type it selects. ``matcher.unwatched`` takes the rest that
looks like a date, a deadline, an amount, a document or a substance.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from uac_kernel.language.spec import Select
from uac_kernel.rules.engine import Rule
from uac_kernel.vocab.binding import Vocabulary
from uac_kernel.vocab.catalogue import CONCEPTS
from uac_kernel.vocab.reads import reads

__all__ = ["read_fields"]


def read_fields(
    schema: Mapping[str, Mapping[str, str]],
    vocab: Vocabulary,
    rules: Iterable[Rule],
    constraints: Iterable[BaseModel],
) -> set[tuple[str, str]]:
    """The (type, field) pairs of ``schema`` that the ``rules`` and ``constraints`` in force
    read through ``vocab``."""
    concepts = {c for r in rules for c in reads(r) if c in CONCEPTS}
    out: set[tuple[str, str]] = set()
    for t, fields in schema.items():
        for c in concepts:
            if any(vocab.plays(t, role) for role in CONCEPTS[c].roles):
                out.update((t, f) for f in vocab.fields(t, c) if f in fields)
    for constraint in constraints:
        types: set[str] = set()
        names: set[str] = set()
        _walk(constraint, types, names)
        out.update((t, f) for t in types if t in schema for f in schema[t] if f in names)
    return out


def _walk(v: Any, types: set[str], names: set[str]) -> None:
    """The types a constraint selects and every string it holds (its field names among them:
    a name is only taken as a field of a type it selects that has a field so named)."""
    if isinstance(v, Select):
        types.update(v.types)
    if isinstance(v, BaseModel):
        for x in v.__dict__.values():
            _walk(x, types, names)
    elif isinstance(v, str):
        names.add(v)
    elif isinstance(v, dict):
        for k, x in v.items():
            _walk(k, types, names)
            _walk(x, types, names)
    elif isinstance(v, list | tuple):
        for x in v:
            _walk(x, types, names)
