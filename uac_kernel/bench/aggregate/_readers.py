"""Utterances parsed back into records: what a reader of retrieved text can reconstruct."""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from uac_kernel.bench.aggregate._kinds import (
    CAT_FIXES,
    KINDS,
    NUM_FIXES,
    RETRACTIONS,
    Kind,
)

# --- parsing utterances back into records (the readers of retrieved text) ------------------------


@dataclass(frozen=True)
class Op:
    """What one utterance says: a record added, changed or retracted, named by its handle."""

    op: str
    type: str
    handle: tuple[Any, ...]
    fields: Mapping[str, Any]


def _resolve_handle(text: str) -> tuple[Kind, dict[str, Any]] | None:
    for kind in KINDS.values():
        values = kind.handle_template.match(text)
        if values is not None:
            return kind, values
    return None


@functools.lru_cache(maxsize=65536)
def parse_utterance(text: str) -> Op | None:
    """Read one generated sentence back into what it says; None for a sentence it cannot read."""
    for kind in KINDS.values():
        for template in kind.add_templates:
            values = template.match(text)
            if values is not None:
                return Op("add", kind.name, kind.handle_of(values), values)
    for templates, what in ((NUM_FIXES, "num"), (CAT_FIXES, "cat"), (RETRACTIONS, "retract")):
        for template in templates:
            slots = template.match(text)
            if slots is None:
                continue
            resolved = _resolve_handle(slots["handle"])
            if resolved is None:
                continue
            kind, handle_fields = resolved
            handle = kind.handle_of(handle_fields)
            if what == "retract":
                return Op("retract", kind.name, handle, {})
            if what == "cat":
                return Op("update", kind.name, handle, {kind.cat_field: slots["value"]})
            value = kind.value_template.match(slots["value"])
            if value is not None:
                return Op("update", kind.name, handle, value)
    return None


def reconstruct(ops: Iterable[Op | None]) -> dict[str, list[dict[str, Any]]]:
    """The records a reader can rebuild from what it was shown (in time order).

    A correction whose original was not shown still tells of a record: the reader keeps what it
    knows of it (the fields its handle names and the corrected one). A retraction removes it.
    """
    recs: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = defaultdict(dict)
    gone: set[tuple[str, tuple[Any, ...]]] = set()
    for op in ops:
        if op is None:
            continue
        mine = recs[op.type]
        if op.op == "add":
            mine[op.handle] = dict(op.fields)
        elif op.op == "update":
            if op.handle in mine:
                mine[op.handle].update(op.fields)
            elif (op.type, op.handle) not in gone:
                kind = KINDS[op.type]
                named = dict(zip(kind.handle_template.kinds, op.handle, strict=True))
                mine[op.handle] = {**named, **op.fields}
        else:
            mine.pop(op.handle, None)
            gone.add((op.type, op.handle))
    return {t: list(r.values()) for t, r in recs.items()}
