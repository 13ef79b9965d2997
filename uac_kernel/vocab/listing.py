"""The vocabulary and the catalogue as rows, for every face that lists them (``uac vocab``,
``%uac vocab``): the same columns in the same order everywhere."""

from __future__ import annotations

import shlex
from collections.abc import Iterable

from uac_kernel.core.errors import VocabularyError
from uac_kernel.vocab.binding import Binding, Vocabulary
from uac_kernel.vocab.catalogue import CONCEPTS, ROLES
from uac_kernel.vocab.matcher import Unwatched

__all__ = [
    "BINDING_COLUMNS",
    "CONCEPT_COLUMNS",
    "ROLE_COLUMNS",
    "UNWATCHED_COLUMNS",
    "binding_rows",
    "catalogue_rows",
    "listing_only",
    "unwatched_rows",
    "vocab_command",
    "vocab_lines",
]

VERBS = ("bind", "unbind")
USAGE = "bind TYPE.FIELD CONCEPT, bind TYPE ROLE, unbind TYPE.FIELD CONCEPT or unbind TYPE ROLE"

BINDING_COLUMNS = ["type.field", "concept", "author", "score", "status", "reason"]
CONCEPT_COLUMNS = ["concept", "value", "meaning", "default fields"]
ROLE_COLUMNS = ["role", "meaning", "default types"]
UNWATCHED_COLUMNS = ["type.field", "looks like", "why", "bind with"]
# Bindings rules read first, then a person's rejections, then the proposals held for review.
_ORDER = {"used": 0, "rejected": 1, "idle": 2, "held": 3}


def _row(b: Binding, idle: bool) -> tuple[str, ...]:
    what = b.type if b.field is None else f"{b.type}.{b.field}"
    target = f"role {b.target}" if b.field is None else b.target
    if idle:  # derived from a binding no longer read: shown, not read
        return (
            what,
            target,
            b.author,
            f"{b.score:.2f}",
            "idle",
            f"{b.via} is not read; {b.reason}",
        )
    return (what, target, b.author, f"{b.score:.2f}", b.status, b.reason)


def binding_rows(vocab: Vocabulary) -> list[tuple[str, ...]]:
    """One row per binding, in ``BINDING_COLUMNS``: those in force, rejected, idle (derived
    from one no longer read), then held."""
    idle = {b.key for b in vocab.idle()}
    ordered = sorted(vocab.bindings, key=lambda b: _ORDER["idle" if b.key in idle else b.status])
    return [_row(b, b.key in idle) for b in ordered]


def unwatched_rows(found: Iterable[Unwatched]) -> list[tuple[str, ...]]:
    """One row per type or field no rule reads (``Workbench.unwatched``), in
    ``UNWATCHED_COLUMNS``."""
    return [
        (u.type if u.field is None else f"{u.type}.{u.field}", u.looks, u.why, u.command)
        for u in found
    ]


def catalogue_rows(roles: bool) -> list[tuple[str, ...]]:
    """The catalogue's roles (``ROLE_COLUMNS``) or concepts (``CONCEPT_COLUMNS``), by name."""
    if roles:
        return [
            (r.name, r.meaning, "every type" if r.any else ", ".join(r.types))
            for r in sorted(ROLES.values(), key=lambda r: r.name)
        ]
    return [
        (c.name, c.value, c.meaning, ", ".join(c.fields))
        for c in sorted(CONCEPTS.values(), key=lambda c: c.name)
    ]


def vocab_command(words: list[str]) -> tuple[str, str, str]:
    """``(target, name, status)`` of ``bind|unbind TARGET NAME``, as ``uac vocab`` and a
    ``%%uac vocab`` line write it: ``unbind`` is a person's rejection."""
    if len(words) != 3 or words[0] not in VERBS:
        raise VocabularyError(f"expected {USAGE}; got {' '.join(words)!r}")
    return words[1], words[2], "rejected" if words[0] == "unbind" else "used"


def listing_only(words: list[str]) -> None:
    """``--unbound`` lists; it takes no action words (every face refuses them alike)."""
    if words:
        raise VocabularyError(
            f"--unbound lists what no rule reads; it takes no {' '.join(words)!r}: run the "
            "bind on its own line"
        )


def vocab_lines(text: str) -> list[tuple[str, str, str]]:
    """The commands of a ``%%uac vocab`` cell, one a line (blank lines and ``#`` comments
    skipped; a name with spaces in quotes)."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        try:
            words = shlex.split(line, comments=True)
        except ValueError as exc:
            raise VocabularyError(f"line {n}: {exc}; close the quotes") from None
        if words:
            try:
                out.append(vocab_command(words))
            except VocabularyError as exc:
                raise VocabularyError(f"line {n}: {exc}") from None
    return out
