"""Phase two of the pipeline: utterances → typed fact operations, proposed by a model.

Utterances not yet extracted go to the model in bounded batches, with the schema summary and the
keys of existing records they may touch. The answer — fact operations — is validated exactly like
an ingested file; an invalid answer is shown to the model once with the error, and if it fails
again the batch stays pending (the failed call is in the call record). An answer over one of the
``ExtractionLimits`` caps is invalid the same way. A valid batch is appended atomically together
with an ``extraction`` event naming the utterances it covered, and its facts point back at those
utterances (``derived_from``) — unless it would change much of what is known, which
``uac_kernel.model.review`` holds for a person to decide.

The same answer may propose constraints (``uac_kernel.constraints``): typed data, validated like
facts, that trusted code compiles into rules. An invalid one is shown to the model once, then
dropped with the reason written into the batch's ``extraction`` event; the rest of the batch is
kept.

And bindings (``uac_kernel.vocab``): the prompt shows the catalogue of roles and concepts, so a
new type or field takes the catalogue's name when it fits; a field or type of the model's own
naming that carries a concept or plays a role comes with a binding, appended as a vocabulary
event of author ``model`` that the matcher scored (``used`` when it agrees, else ``held`` for a
person's review). A binding that names what the catalogue or the schema lacks is dropped with a
line in the marker, never sent back and never failing the facts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

import orjson
from pydantic import BaseModel, Field

from uac_kernel.core.display import plural
from uac_kernel.core.errors import EventError, ModelOutputInvalid
from uac_kernel.core.limits import DEFAULT_LIMITS, Limits
from uac_kernel.ingest.events import NAME_CHARS, InputEvent, parse_event, plan_batch, samplers
from uac_kernel.log.store import LoggedEvent, NewEvent, Store
from uac_kernel.model.ask import schema_summary
from uac_kernel.model.client import ModelClient
from uac_kernel.rules.describe import catalogue_prompt
from uac_kernel.state.fold import State
from uac_kernel.state.mentions import mentioned_records, said_by_user
from uac_kernel.vocab.binding import Binding
from uac_kernel.vocab.catalogue import CONCEPTS, ROLES
from uac_kernel.vocab.log import binding_json, binding_of
from uac_kernel.vocab.matcher import judge

__all__ = [
    "BindingProposal",
    "ConstraintOperation",
    "Extraction",
    "ExtractionLimits",
    "ExtractionReport",
    "FactOperation",
    "FieldValue",
    "Proposal",
    "add_bindings",
    "add_constraints",
    "pending_utterances",
    "propose_batch",
]

_RULES = """You keep a typed, long-term memory of a user. From the conversation turns given,
extract facts about the people in them as operations on typed records.

- op "add" creates a record; "update" changes fields of an existing record (use its exact type
  and key from the list of existing records); "retract" ends a record that turned out false or
  was cancelled (give a reason).
- type and field names: as the user would say them, in any style. Reuse the existing types and
  fields when they fit. For a new type or field, take the catalogue's name when it fits what was
  said: a role's default type (Trip, Medication, Passport) and a concept's default field (start,
  end, expires); rules read those with no more said.
- key: a short, stable, readable slug, e.g. "trip-2025-03-lisbon".
- field values are JSON: strings, numbers, true/false, ISO dates "2025-03-01" or date-times
  "2025-03-01T14:00:00", or lists of strings. Resolve relative dates ("last Tuesday", "in two
  weeks") against the turn's timestamp and write absolute dates.
- utterances: the sources of the turns each operation comes from.
- Extract only what the user's side states; assistant turns are context, not facts. Invent
  nothing; if nothing is worth remembering, return no operations.

Bindings: when a field of your own name carries a concept of the catalogue, or a type of your own
plays one of its roles, say so in "bindings": {"concept": "trip.start", "type": "Journey",
"field": "leaves_on", "reason": "the day they fly out"} or {"role": "trip", "type": "Journey",
"reason": "..."}. Only names the catalogue lists; a catalogue name needs no binding.

Constraints: when a turn states something that must be checked from now on — a deadline, a
document or policy that must be valid at a time, a limit on a count, sum or days, a supply that
runs out, things that must not collide or must come one before another, something to avoid
while something else holds — also propose a constraint: {"op": "add", "key": a slug,
"utterances": [...], "constraint": a JSON object as a string}. The object has "kind", "title"
(the rule in the user's words), optional "severity" (critical for health, legal or money at
risk; else warning), "lead_days", "category", and its kind's fields. Records are selected by
{"type": "Passport"}, {"type": "Passport", "key": "..."}, "also": [more types read as one,
e.g. "Transaction" beside "Expense"], "where": {"field": value or [any of
values]} and
"mentions": [words]; dates are moments {"fields": ["end"], "months": 6} (a record's date field,
shifted; add "start": ["start"] to fall back on start plus a stated "days"/"nights" length) or
{"date": "2025-06-15", "days": -14}. Kinds:
- obligation: subject (select), due (moment of the subject, or a date), done (flag fields)
- valid_on: document (select), each (select: e.g. every Trip), at (moment of each), until,
  match ({"holder": "travellers"}: each traveller needs their own document)
- window_limit: subject, measure "count"|"sum"|"days", amount (field to sum), date, end,
  window_days or period "month"|"year" (year_from "04-06" for a tax year), limit, warn_at
- projection: subject, quantity (field), rate or rate_fields (per "day"|"week"|"month"),
  as_of, threshold, until (moment), until_record (select); for a balance: flows (select of
  payments), flow_amount, flow_date
- no_overlap: a, b (selects), buffer_minutes; before: first, then (selects), gap_days
- not_while: active (select), forbidden (select), table ("allergens", "drug_classes", ...),
  groups (of the table), active_groups
"update" replaces a constraint of that key with a new object; "retract" ends it (give a
reason). Propose constraints only for what the user said must hold; none is fine."""

SYSTEM = f"{_RULES}\n\n{catalogue_prompt()}"


# Characters of a rejected answer shown back to the model with its error (a 100-operation
# answer is about 30,000).
MAX_ANSWER_SHOWN = 60_000


class FieldValue(BaseModel):
    name: str = Field(description="the field's name, as the user would say it")
    value: str | int | float | bool | list[str] | None


class FactOperation(BaseModel):
    op: Literal["add", "update", "retract"]
    type: str
    key: str
    fields: list[FieldValue] = Field(default_factory=list)
    reason: str | None = None
    utterances: list[str] = Field(description="sources of the turns this operation comes from")


class ConstraintOperation(BaseModel):
    op: Literal["add", "update", "retract"]
    key: str
    constraint: str | None = Field(
        default=None, description="add/update: the constraint as a JSON object (text)"
    )
    reason: str | None = None
    utterances: list[str] = Field(description="sources of the turns this constraint comes from")


class BindingProposal(BaseModel):
    """A field of the model's own naming carries a catalogue concept, or a type plays a role."""

    concept: str | None = Field(default=None, description="a concept of the catalogue, with field")
    role: str | None = Field(default=None, description="a role of the catalogue, without field")
    type: str
    field: str | None = None
    reason: str = ""


class Extraction(BaseModel):
    """The model's answer for one batch of utterances."""

    operations: list[FactOperation]
    constraints: list[ConstraintOperation] = Field(default_factory=list)
    bindings: list[BindingProposal] = Field(default_factory=list)


@dataclass(frozen=True)
class ExtractionLimits:
    """Bounds on the model's answer for one batch, and when an answer is held for review.

    A batch is at most 10 turns (``extract``'s default); a dense turn ("we moved to Porto, I
    start at the clinic in May, and Ana's passport expires in June") gives about five
    operations, so a real batch stays well under 50: ``max_operations`` is twice that. Each
    new kind of thing a batch names is a new type, rarely more than two or three in ten turns;
    a new type comes with four to six fields, so ``max_new_types`` × 6 = ``max_new_fields``.
    An answer over a cap is invalid (the model is told why and may try once more), except for
    ``max_bindings``: a binding for each new field of two or three new types, with room to
    spare; those past it are dropped, the facts kept.

    The budget of unreviewed change: once the answers applied since the user's last review
    decision (read from the log, so every run and process counts against the same budget)
    would together have retracted, or overwritten field values of, more than
    ``max(hold_floor, hold_share × records)`` existing records — ``records`` as there were
    when the first of them ran — the answer is held for review: a conversation corrects or
    cancels a fact or two at a time, so more than three between reviews (or a tenth of a large
    memory) is worth a person's look, and a review renews the budget. So is any change to an
    existing record the batch's turns do not mention: say no distinctive word of its key or
    text values (``uac_kernel.state.mentions``). The first ``candidates`` of the records they do
    mention are listed for the model in the prompt.
    """

    max_operations: int = 100
    max_constraints: int = 20
    max_bindings: int = 20
    max_new_types: int = 10
    max_new_fields: int = 60
    hold_floor: int = 3
    hold_share: float = 0.10
    candidates: int = 30

    def changes_allowed(self, records: int) -> int:
        """How many existing records may be retracted or overwritten between reviews."""
        return max(self.hold_floor, int(records * self.hold_share))


@dataclass
class ExtractionReport:
    batches: int = 0
    applied: int = 0
    pending: int = 0
    held: int = 0  # batches held for review (``Workbench.review``)
    operations: int = 0
    constraints: int = 0  # constraint operations applied
    bindings: int = 0  # bindings the model proposed, appended (used or held)
    held_bindings: int = 0  # of those, held for review
    dropped: list[str] = field(default_factory=list)  # invalid proposals dropped, and why
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
        if self.constraints:
            text += f", {plural(self.constraints, 'constraint operation')}"
        if self.bindings:
            text += f", {plural(self.bindings, 'binding')} proposed"
            if self.held_bindings:
                text += f" ({self.held_bindings} held for review: `uac vocab`)"
        if self.dropped:
            text += f"; {plural(len(self.dropped), 'invalid proposal')} dropped: {self.dropped[0]}"
        if self.held:
            text += f"; {self.held} held for review (see `uac review`)"
        if self.errors:
            text += f"; {plural(len(self.errors), 'error')}, first: {self.errors[0]}"
        return text


def pending_utterances(store: Store, user: str) -> list[LoggedEvent]:
    """Utterances of ``user`` that no ``extraction`` or ``review`` event covers yet, in log
    order: a batch held for review is not sent again, nor one whose answer was rejected."""
    covered: set[str] = set()
    utterances: list[LoggedEvent] = []
    for ev in store.events(user, kinds=["utterance", "extraction", "review"]):
        if ev.kind != "utterance":
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


def _turns(batch: list[LoggedEvent]) -> str:
    return "\n".join(
        f"[{u.source}] {u.ts.isoformat()} {u.payload['speaker']}: {u.payload['text']}"
        for u in batch
    )


def batch_messages(
    state: State, batch: list[LoggedEvent], candidates: list[tuple[str, str]]
) -> list[dict[str, Any]]:
    turns = _turns(batch)
    keys = [f"{name} {key!r}" for name, key in candidates]
    prompt = (
        f"Current schema:\n{schema_summary(state)}\n\n"
        f"Existing records these turns may be about: {', '.join(keys) if keys else 'none'}\n\n"
        f"Turns:\n{turns}"
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]


def _digest(batch: list[LoggedEvent]) -> str:
    return hashlib.sha256("|".join(str(u.source) for u in batch).encode()).hexdigest()[:16]


def _said_at(
    cited: list[str], by_source: dict[str | None, LoggedEvent], origin: str, line: int
) -> datetime:
    """When the last of the ``cited`` turns was said; an ``EventError`` unless they are all
    turns of this batch."""
    unknown = [s for s in cited if s not in by_source]
    if unknown or not cited:
        raise EventError(
            f"utterances must name sources of this batch's turns; got {unknown or 'none'}",
            origin=origin,
            line=line,
            field="utterances",
        )
    return max(by_source[s].ts for s in cited)


def to_events(
    batch: list[LoggedEvent],
    extraction: Extraction,
    origin: str,
    only: Collection[int] | None = None,
    bounds: Limits = DEFAULT_LIMITS,
) -> list[InputEvent]:
    """The operations as validated fact events, plus the ``extraction`` marker; ``only`` keeps
    the operations of those numbers (from 1), each keeping its number in its source.
    Constraints are not among them: ``add_constraints`` plans them one by one."""
    by_source: dict[str | None, LoggedEvent] = {u.source: u for u in batch}
    digest = _digest(batch)
    events: list[InputEvent] = []
    for i, op in enumerate(extraction.operations, 1):
        if only is not None and i not in only:
            continue
        ts = _said_at(op.utterances, by_source, origin, i)
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
        events.append(parse_event(obj, origin, i, limits=bounds))
    last = batch[-1]
    marker = {"utterances": [u.source for u in batch], "operations": len(events)}
    events.append(
        InputEvent(origin, len(events) + 1, last.ts, "extraction", f"extraction:{digest}", marker)
    )
    return events


def add_constraints(
    state: State,
    batch: list[LoggedEvent],
    extraction: Extraction,
    events: list[InputEvent],
    origin: str,
    bounds: Limits = DEFAULT_LIMITS,
) -> list[str]:
    """Put the answer's valid constraint operations into ``events`` (the answer's fact events
    and marker, from ``to_events``), before the marker, each planned after the facts and the
    constraints kept before it; return why each other one was dropped (one line each), also
    written into the marker, so the log says what the model proposed and was not kept."""
    by_source: dict[str | None, LoggedEvent] = {u.source: u for u in batch}
    digest = _digest(batch)
    facts, marker = events[:-1], events[-1]
    kept: list[InputEvent] = []
    dropped: list[str] = []
    for i, op in enumerate(extraction.constraints, 1):
        try:
            ts = _said_at(op.utterances, by_source, origin, i)
            obj: dict[str, Any] = {
                "kind": "constraint",
                "ts": ts.isoformat(),
                "op": op.op,
                "key": op.key,
                "source": f"extract:{digest}:c{i}",
                "author": "extraction",
                "derived_from": list(op.utterances),
            }
            if op.op != "retract":
                obj["constraint"] = _constraint_object(op.constraint, origin, i)
            if op.reason:
                obj["reason"] = op.reason
            ev = parse_event(obj, origin, i, limits=bounds)
            plan_batch(state, [*facts, *kept, ev], bounds)
        except EventError as exc:
            dropped.append(f"constraint {i} {_cut(op.key)}: {exc}")
            continue
        kept.append(ev)
    if extraction.constraints:
        marker.payload["constraints"] = len(kept)
    if dropped:
        marker.payload["dropped"] = dropped
    events[-1:] = [*kept, marker]
    return dropped


# Longest reason a model may give for a binding (more is cut): a clause, not a text.
BINDING_REASON_CHARS = 200


def add_bindings(
    state: State,
    batch: list[LoggedEvent],
    extraction: Extraction,
    events: list[InputEvent],
    origin: str,
    most: int,
    bounds: Limits = DEFAULT_LIMITS,
) -> list[str]:
    """Put the answer's first ``most`` bindings into ``events`` (facts, constraints and the
    marker) before the marker, as vocabulary events of author ``model`` that the matcher scored
    (``matcher.judge``: ``used`` when it agrees, else ``held`` for review); return a line for
    each one dropped — unknown to the catalogue or the schema, malformed, already bound, over
    the count — also written into the marker. A binding never fails the facts. One the
    catalogue's defaults already make needs no event and is passed over."""
    if not extraction.bindings:
        return []
    digest = _digest(batch)
    body, marker = events[:-1], events[-1]
    planned = plan_batch(state, body, bounds)
    schema = state.schema.copy()
    for new in planned:
        if new.kind == "schema":
            schema.apply(new.payload)
    values, keys = samplers(state, planned)
    # What the rules would read after the batch: the matcher's own proposals for it included.
    vocab = state.vocab.with_bindings(
        binding_of(new.payload["binding"]) for new in planned if new.kind == "vocabulary"
    )
    proposals = list(enumerate(extraction.bindings, 1))
    dropped = []
    if len(proposals) > most:
        dropped.append(
            f"bindings {most + 1} to {len(proposals)}: more than the {most} one batch may propose"
        )
    # Roles first: a field's concept is judged knowing the types this answer made play a role.
    chosen = sorted(proposals[:most], key=lambda ip: ip[1].role is None)
    kept: list[InputEvent] = []
    for i, p in chosen:
        named = ".".join(x for x in (p.type, p.field) if x is not None)
        longest = max(len(x) for x in (p.concept, p.role, p.type, p.field) if x is not None)
        if longest > NAME_CHARS:  # a name, not a text: and the note quotes it
            dropped.append(
                f"binding {i} {_cut(named)}: a name of {longest:,} characters; at most {NAME_CHARS}"
            )
            continue
        binding: dict[str, Any] = {
            k: v for k, v in (("concept", p.concept), ("role", p.role)) if v is not None
        }
        binding.update(type=p.type, author="model", status="held")
        if p.field is not None:
            binding["field"] = p.field
        obj = {
            "kind": "vocabulary",
            "ts": batch[-1].ts.isoformat(),
            "op": "add",
            "source": f"extract:{digest}:b{i}",
            "binding": binding,
        }
        try:
            ev = parse_event(obj, origin, i, limits=bounds)
            b = binding_of(ev.payload["binding"])
            if _by_default(b):
                continue
            plan_batch(state, [*body, *kept, ev], bounds)
        except EventError as exc:
            dropped.append(f"binding {i} {_cut(named)}: {exc}")
            continue
        judged = judge(b, schema.types, vocab, values=values, keys=keys)
        said = p.reason.replace("\n", " ").strip()
        if len(said) > BINDING_REASON_CHARS:
            said = said[:BINDING_REASON_CHARS] + "…"
        reason = f"{said}; matcher: {judged.reason}" if said else f"matcher: {judged.reason}"
        ev.payload["binding"] = binding_json(replace(judged, reason=reason))
        kept.append(ev)
        if judged.is_role and judged.status == "used":
            vocab = vocab.with_bindings([judged])
    kept.sort(key=lambda ev: ev.line)
    marker.payload["bindings"] = len(kept)
    if dropped:
        marker.payload["dropped"] = [*marker.payload.get("dropped", []), *dropped]
    events[-1:] = [*kept, marker]
    return dropped


def _by_default(b: Binding) -> bool:
    """Whether the catalogue's defaults already make ``b`` (``Trip`` plays trip)."""
    if b.field is None:
        return ROLES[b.target].any or b.type in ROLES[b.target].types
    return b.field in CONCEPTS[b.target].fields


def _cut(text: str, most: int = 60) -> str:
    return repr(text if len(text) <= most else text[:most] + "…")


def _constraint_object(text: str | None, origin: str, line: int) -> Any:
    try:
        return orjson.loads(text or "")
    except orjson.JSONDecodeError:
        raise EventError(
            "constraint must be a JSON object (as text) with a kind and a title",
            origin=origin,
            line=line,
            field="constraint",
        ) from None


def check_limits(
    state: State, extraction: Extraction, limits: ExtractionLimits, origin: str
) -> None:
    """An ``EventError`` if the answer is over a cap of ``limits`` (before it is validated)."""
    ops = extraction.operations
    if len(ops) > limits.max_operations:
        raise EventError(
            f"the answer has {len(ops)} operations, more than the {limits.max_operations} one "
            "batch may have; return only the facts the turns state",
            origin=origin,
            field="operations",
        )
    if len(extraction.constraints) > limits.max_constraints:
        raise EventError(
            f"the answer has {len(extraction.constraints)} constraints, more than the "
            f"{limits.max_constraints} one batch may have; propose only what the turns say must hold",
            origin=origin,
            field="constraints",
        )
    known = state.schema
    new_types = {op.type for op in ops if op.type not in known.types}
    if len(new_types) > limits.max_new_types:
        raise EventError(
            f"the answer makes {len(new_types)} new record types, more than the "
            f"{limits.max_new_types} one batch may make; reuse the existing types",
            origin=origin,
            field="type",
        )
    new_fields = {
        (op.type, f.name)
        for op in ops
        for f in op.fields
        if known.field_type(op.type, f.name) is None
    }
    if len(new_fields) > limits.max_new_fields:
        raise EventError(
            f"the answer makes {len(new_fields)} new fields, more than the "
            f"{limits.max_new_fields} one batch may make; reuse the existing fields",
            origin=origin,
            field="fields",
        )


@dataclass
class Proposal:
    """A batch's answer: the events to append (``None`` if it stayed invalid, with ``error``),
    what they plan to (schema events included), the records the turns mention, and the
    constraints and bindings it proposed that were dropped as invalid."""

    events: list[InputEvent] | None
    error: str = ""
    planned: list[NewEvent] = field(default_factory=list)
    mentioned: set[tuple[str, str]] = field(default_factory=set)
    call_id: int = 0
    dropped: list[str] = field(default_factory=list)  # invalid proposals left out, and why


def propose_batch(
    state: State,
    batch: list[LoggedEvent],
    client: ModelClient,
    limits: ExtractionLimits | None = None,
    bounds: Limits = DEFAULT_LIMITS,
) -> Proposal:
    """Ask for the batch's operations; check the caps and validate (with the input ``bounds``
    the store's workbench applies); retry once with the error.

    Invalid facts make the whole answer invalid. Invalid constraints do not: they are shown to
    the model once; what is still invalid then is dropped (the marker event says why), and the
    rest of the answer is kept — the first answer's, if the retry broke its facts. Invalid
    bindings are dropped at once (``add_bindings``).
    """
    limits = limits or ExtractionLimits()
    # The model is shown the records its turns, as the prompt writes them, may be about; a
    # change is held unless the words the user said mention the record (a turn's source,
    # time and speaker name no record, and an assistant turn is a model's words).
    shown, mentioned = mentioned_records(state, _turns(batch), said_by_user(batch))
    messages = batch_messages(state, batch, shown[: limits.candidates])
    origin = f"extraction of {batch[0].source}..{batch[-1].source}"
    error = ""
    kept: Proposal | None = None  # a first answer whose facts were valid
    for attempt in (1, 2):
        try:
            reply = client.structured("extraction", messages, Extraction, user=state.user)
            check_limits(state, reply.value, limits, origin)
            events = to_events(batch, reply.value, origin, bounds=bounds)
            # a dry run: the validation of an ingested file
            plan_batch(state, events, bounds)
            dropped = add_constraints(state, batch, reply.value, events, origin, bounds)
            notes = add_bindings(
                state, batch, reply.value, events, origin, limits.max_bindings, bounds
            )
            planned = plan_batch(state, events, bounds)
            events[-1].payload["call_id"] = reply.call_id
            proposal = Proposal(
                events, "", planned, set(mentioned), reply.call_id, [*dropped, *notes]
            )
            if not dropped or attempt == 2:
                return proposal
            kept = proposal
            error = "; ".join(dropped)
            client.reject(reply, error, user=state.user)
            answer = reply.value.model_dump_json()
        except ModelOutputInvalid as exc:
            error = exc.detail
            answer = "(not valid JSON for the schema)"
        except EventError as exc:
            error = str(exc)
            answer = reply.value.model_dump_json()
            client.reject(reply, error, user=state.user)
        if len(answer) > MAX_ANSWER_SHOWN:  # a flood is not sent back whole
            answer = f"(an answer of {len(reply.value.operations)} operations, not repeated)"
        messages = [
            *messages,
            {"role": "assistant", "content": answer},
            {
                "role": "user",
                "content": f"That answer was rejected: {error}\nReturn corrected operations.",
            },
        ]
    return kept or Proposal(None, error)
