"""Phase two of the pipeline: utterances → typed fact operations, proposed by a model.

Utterances not yet extracted go to the model in bounded batches, with the schema summary and the
keys of existing records they may touch. The answer — fact operations — is validated exactly like
an ingested file; an invalid answer is shown to the model once with the error, and if it fails
again the batch stays pending (the failed call is in the call record). A valid batch is appended
atomically together with an ``extraction`` event naming the utterances it covered, and its facts
point back at those utterances (``derived_from``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from uac_kernel._display import plural
from uac_kernel.ask import schema_summary
from uac_kernel.errors import EventError, ModelOutputInvalid
from uac_kernel.events import InputEvent, parse_event, plan_batch
from uac_kernel.fold import State
from uac_kernel.model import ModelClient
from uac_kernel.records import field_values
from uac_kernel.search import tokenize
from uac_kernel.store import LoggedEvent, Store

__all__ = [
    "Extraction",
    "ExtractionReport",
    "FactOperation",
    "FieldValue",
    "pending_utterances",
    "propose_batch",
]

SYSTEM = """You keep a typed, long-term memory of a user. From the conversation turns given,
extract facts about the people in them as operations on typed records.

- op "add" creates a record; "update" changes fields of an existing record (use its exact type
  and key from the list of existing records); "retract" ends a record that turned out false or
  was cancelled (give a reason).
- type: CapitalisedCamel (Trip, Medication, Allergy, Passport, Transaction, Appointment, Meeting,
  Purchase, Residence, Person, ...). Reuse the existing types and fields when they fit.
- key: a short, stable, readable slug, e.g. "trip-2025-03-lisbon".
- fields: lower_snake_case names with JSON values: strings, numbers, true/false, ISO dates
  "2025-03-01" or date-times "2025-03-01T14:00:00", or lists of strings. Resolve relative dates
  ("last Tuesday", "in two weeks") against the turn's timestamp and write absolute dates.
- Conventions rules rely on: Allergy(substance, severity); Medication(name, dose_mg, start, end,
  active); Condition(name); Passport(holder, number, expires); Trip(destination, country, start,
  end, international); commitments have start and end date-times; deadlines are date fields
  named deadline, due, return_by, warranty_until, renews_on or expires.
- utterances: the sources of the turns each operation comes from.
- Extract only what the user's side states; assistant turns are context, not facts. Invent
  nothing; if nothing is worth remembering, return no operations."""


class FieldValue(BaseModel):
    name: str = Field(description="lower_snake_case field name")
    value: str | int | float | bool | list[str] | None


class FactOperation(BaseModel):
    op: Literal["add", "update", "retract"]
    type: str
    key: str
    fields: list[FieldValue] = Field(default_factory=list)
    reason: str | None = None
    utterances: list[str] = Field(description="sources of the turns this operation comes from")


class Extraction(BaseModel):
    """The model's answer for one batch of utterances."""

    operations: list[FactOperation]


@dataclass
class ExtractionReport:
    batches: int = 0
    applied: int = 0
    pending: int = 0
    operations: int = 0
    utterances: int = 0
    errors: list[str] = field(default_factory=list)
    # Alerts the applied batches raised, cleared (each with its reason) and moved in severity.
    raised: list[Any] = field(default_factory=list)
    cleared: list[Any] = field(default_factory=list)
    updated: list[Any] = field(default_factory=list)

    def summary(self) -> str:
        text = (
            f"{plural(self.utterances, 'utterance')} in {plural(self.batches, 'batch', 'batches')}: "
            f"{self.applied} applied ({plural(self.operations, 'fact operation')}), "
            f"{self.pending} left pending"
        )
        if self.errors:
            text += f"; {plural(len(self.errors), 'error')}, first: {self.errors[0]}"
        return text


def pending_utterances(store: Store, user: str) -> list[LoggedEvent]:
    """Utterances of ``user`` that no ``extraction`` event covers yet, in log order."""
    covered: set[str] = set()
    utterances: list[LoggedEvent] = []
    for ev in store.events(user, kinds=["utterance", "extraction"]):
        if ev.kind == "extraction":
            covered.update(ev.payload["utterances"])
        else:
            utterances.append(ev)
    return [u for u in utterances if u.source not in covered]


def batches(
    utterances: list[LoggedEvent], size: int, max_chars: int
) -> Iterator[list[LoggedEvent]]:
    batch: list[LoggedEvent] = []
    chars = 0
    for u in utterances:
        n = len(u.payload["text"])
        if batch and (len(batch) >= size or chars + n > max_chars):
            yield batch
            batch, chars = [], 0
        batch.append(u)
        chars += n
    if batch:
        yield batch


def candidate_keys(state: State, text: str, limit: int = 30) -> list[str]:
    """Existing records a batch may touch: those sharing the most words with it."""
    words = set(tokenize(text))
    scored: list[tuple[int, str, str]] = []
    for name, ts in state.types.items():
        for key, rec in ts.current.items():
            bag = {key, *(str(v) for v in field_values(rec).values() if isinstance(v, str))}
            overlap = len(words & set(tokenize(" ".join(bag))))
            if overlap:
                scored.append((-overlap, name, key))
    scored.sort()
    return [f"{name} {key!r}" for _, name, key in scored[:limit]]


def _turns(batch: list[LoggedEvent]) -> str:
    return "\n".join(
        f"[{u.source}] {u.ts.isoformat()} {u.payload['speaker']}: {u.payload['text']}"
        for u in batch
    )


def batch_messages(state: State, batch: list[LoggedEvent]) -> list[dict[str, Any]]:
    turns = _turns(batch)
    keys = candidate_keys(state, turns)
    prompt = (
        f"Current schema:\n{schema_summary(state)}\n\n"
        f"Existing records these turns may be about: {', '.join(keys) if keys else 'none'}\n\n"
        f"Turns:\n{turns}"
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]


def to_events(batch: list[LoggedEvent], extraction: Extraction, origin: str) -> list[InputEvent]:
    """The operations as validated fact events, plus the ``extraction`` marker."""
    by_source = {u.source: u for u in batch}
    digest = hashlib.sha256("|".join(str(u.source) for u in batch).encode()).hexdigest()[:16]
    events: list[InputEvent] = []
    for i, op in enumerate(extraction.operations, 1):
        unknown = [s for s in op.utterances if s not in by_source]
        if unknown or not op.utterances:
            raise EventError(
                f"utterances must name sources of this batch's turns; got {unknown or 'none'}",
                origin=origin,
                line=i,
                field="utterances",
            )
        ts: datetime = max(by_source[s].ts for s in op.utterances)
        obj: dict[str, Any] = {
            "kind": "fact",
            "ts": ts.isoformat(),
            "op": op.op,
            "type": op.type,
            "key": op.key,
            "source": f"extract:{digest}:{i}",
            "author": "extraction",
            "derived_from": list(op.utterances),
        }
        if op.op != "retract":
            obj["fields"] = {f.name: f.value for f in op.fields}
        if op.reason:
            obj["reason"] = op.reason
        events.append(parse_event(obj, origin, i))
    last = batch[-1]
    marker = {"utterances": [u.source for u in batch], "operations": len(events)}
    events.append(
        InputEvent(origin, len(events) + 1, last.ts, "extraction", f"extraction:{digest}", marker)
    )
    return events


def propose_batch(
    state: State, batch: list[LoggedEvent], client: ModelClient
) -> tuple[list[InputEvent] | None, str]:
    """Ask for the batch's operations; validate; retry once with the error. (events, error)."""
    messages = batch_messages(state, batch)
    origin = f"extraction of {batch[0].source}..{batch[-1].source}"
    error = ""
    for _attempt in (1, 2):
        try:
            reply = client.structured("extraction", messages, Extraction, user=state.user)
            events = to_events(batch, reply.value, origin)
            plan_batch(state, events)  # a dry run: the same validation as an ingested file
            events[-1].payload["call_id"] = reply.call_id
            return events, ""
        except ModelOutputInvalid as exc:
            error = exc.detail
            answer = "(not valid JSON for the schema)"
        except EventError as exc:
            error = str(exc)
            answer = reply.value.model_dump_json()
            client.reject(reply, error, user=state.user)
        messages = [
            *messages,
            {"role": "assistant", "content": answer},
            {
                "role": "user",
                "content": f"That answer was rejected: {error}\nReturn corrected operations.",
            },
        ]
    return None, error
