"""Reading a concept from a record: the vocabulary a rule runs under, and what it read.

The rule runner sets the user's vocabulary around each rule call (``using``); the record helpers
of the rule library (``_get``, ``_flag``, ``_text``, ``_first_day``) ask ``fields_of`` which of a
record's fields carry a concept. Called outside a run, the catalogue's defaults answer. When
bindings beyond the defaults are in force, each one read is noted, so an alert can say which
binding it rests on.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from uac_kernel.vocab.binding import Binding, Vocabulary
from uac_kernel.vocab.catalogue import Concept

__all__ = [
    "DEFAULT",
    "current",
    "fields_of",
    "note",
    "noting",
    "per_record",
    "read",
    "types_of",
    "using",
]

DEFAULT = Vocabulary()
_CURRENT: ContextVar[Vocabulary] = ContextVar("uac_vocabulary", default=DEFAULT)
_NOTED: ContextVar[set[Binding] | None] = ContextVar("uac_vocabulary_reads", default=None)


def current() -> Vocabulary:
    return _CURRENT.get()


@contextmanager
def using(vocab: Vocabulary) -> Iterator[Vocabulary]:
    token = _CURRENT.set(vocab)
    try:
        yield vocab
    finally:
        _CURRENT.reset(token)


@contextmanager
def noting() -> Iterator[set[Binding]]:
    """The non-default bindings read inside the block."""
    seen: set[Binding] = set()
    token = _NOTED.set(seen)
    try:
        yield seen
    finally:
        _NOTED.reset(token)


def note(bindings: Iterable[Binding]) -> None:
    """Note ``bindings`` as read, in the ``noting`` block around (if any): for a caller that
    asked of more bindings than what it read rests on (``noting`` around the asking keeps
    those out)."""
    if (seen := _NOTED.get()) is not None:
        seen.update(bindings)


T = TypeVar("T")


def per_record(fn: Callable[[Any], T]) -> Callable[[Any], T]:
    """``fn`` of one record, worked out once per record and vocabulary: a rule that goes through
    every trip of three years on each run reads each trip's fields once, not on every run.

    A record is frozen and a vocabulary immutable, so the value holds while both live; it is
    forgotten when the record is, and holds neither alive (weak references; records hash their
    values, so they are not keys). The bindings ``fn`` read are noted again on every call, as
    if it had read them. The value is shared: a caller must not change it (return tuples and
    frozensets).
    """
    memo: dict[int, tuple[weakref.ref[Any], weakref.ref[Any], T, frozenset[Binding]]] = {}

    def forget(key: int) -> Callable[[weakref.ref[Any]], None]:
        def gone(_: weakref.ref[Any]) -> None:
            memo.pop(key, None)

        return gone

    @functools.wraps(fn)
    def remembered(rec: Any) -> T:
        vocab, key = _CURRENT.get(), id(rec)
        hit = memo.get(key)
        if hit is None or hit[1]() is not vocab or hit[0]() is not rec:
            with noting() as seen:
                value = fn(rec)
            hit = (weakref.ref(rec, forget(key)), weakref.ref(vocab), value, frozenset(seen))
            memo[key] = hit
        if hit[3] and (outer := _NOTED.get()) is not None:
            outer.update(hit[3])
        return hit[2]

    return remembered


def fields_of(type_name: str, name: str) -> tuple[str, ...]:
    """The fields to read for ``name`` on a record of ``type_name``: a ``Concept``'s bound
    fields, or ``name`` itself (a field name as written)."""
    if type(name) is not Concept:
        return (name,)
    # A vocabulary of the catalogue's defaults alone has no bindings to note (``read_by`` is
    # empty), as has a concept read through none beyond them.
    vocab = _CURRENT.get()
    fields, reads = vocab.resolved.get((type_name, name)) or vocab.resolve(type_name, name)
    if reads and (seen := _NOTED.get()) is not None:
        seen.update(reads)
    return fields


def read(values: Mapping[str, Any], type_name: str, name: str) -> Any:
    """The value of field or concept ``name`` in a ``type_name`` record's ``values``: for a
    concept, the first of its fields that is set; None when none is."""
    if type(name) is not Concept:
        return values.get(name)
    for f in fields_of(type_name, name):  # fields_of notes the bindings read
        if (v := values.get(f)) is not None:
            return v
    return None


def types_of(role: str) -> tuple[str, ...]:
    """The types that play ``role`` for the current user."""
    vocab = _CURRENT.get()
    if vocab.inferred and (seen := _NOTED.get()) is not None:
        seen.update(vocab.read_by(None, role))
    return vocab.types(role)
