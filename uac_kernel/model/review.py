"""Model answers held for review, and the decisions a person makes on them.

An extraction answer that would retract or overwrite much of what is known — counted with what
the answers applied since the user's last review changed (``spent``) — or change records or
constraints its turns do not mention (``uac_kernel.state.mentions``; see ``ExtractionLimits``), is
not applied. A ``review`` event records
the hold — the call that gave the answer, why it is held, how many operations of each kind —
and its utterances are not sent to the model again. The answer itself stays where every answer
is, in the call record (``model_calls``), so it is never copied into the log twice.

A person then accepts it (all of it, or the operations they pick) or rejects it. Accepting
re-validates the operations against the state as it is now and appends them atomically with
the ``extraction`` marker and a ``review`` decision naming the operations taken; rejecting
appends only the decision. Either way the utterances are no longer pending.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from uac_kernel.core.display import plural
from uac_kernel.core.errors import ReviewError
from uac_kernel.core.limits import DEFAULT_LIMITS, Limits
from uac_kernel.core.records import field_values
from uac_kernel.core.schema import to_json_value
from uac_kernel.ingest.events import InputEvent
from uac_kernel.log.store import LoggedEvent, Store
from uac_kernel.model.extract import (
    Extraction,
    ExtractionLimits,
    Proposal,
    add_bindings,
    add_constraints,
    to_events,
)
from uac_kernel.state.fold import State
from uac_kernel.state.mentions import mentioned_constraints, said_by_user

__all__ = [
    "Budget",
    "Change",
    "HeldBatch",
    "accept_events",
    "held_batches",
    "hold",
    "parse_only",
    "reject_event",
    "spent",
]

_SHOWN_KEYS = 5  # records named in a hold's reason; the counts say how many in all


@dataclass(frozen=True)
class Change:
    """One operation of a held answer: the record before (``None``: it is new) and after
    (``None``: retracted), as the state is now."""

    number: int  # from 1, as ``accept(only=...)`` and ``--only`` name it
    op: str
    type: str
    key: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    reason: str = ""

    def lines(self) -> list[str]:
        """``3. ~ Trip 'lisbon': end 2025-03-16 → 2025-03-18`` and the like."""
        head = f"{self.number}. "
        record = f"{self.type} {self.key!r}"
        if self.op == "add":
            fields = ", ".join(f"{k}={_text(v)}" for k, v in (self.after or {}).items())
            return [f"{head}+ {record} (new): {fields}"]
        if self.op == "retract":
            why = f" (reason: {self.reason!r})" if self.reason else ""
            return [f"{head}- {record} RETRACTED{why}"]
        before, after = self.before or {}, self.after or {}
        changed = [k for k in after if before.get(k) != after[k]]
        lines = [f"{head}~ {record}: {plural(len(changed), 'field')} changed"]
        lines += [f"     {k}: {_text(before.get(k))} → {_text(after[k])}" for k in changed]
        return lines


@dataclass(frozen=True)
class HeldBatch:
    """An answer held for review: ``id`` is the model call that gave it."""

    id: int
    held_at: datetime
    reason: str
    utterances: list[str]
    changes: list[Change]

    def text(self) -> str:
        """The batch as a person reads it in a terminal: what holds it, then each operation."""
        span = (
            _plain(f"{self.utterances[0]}..{self.utterances[-1]}")
            if self.utterances
            else "no turns"
        )
        lines = [
            f"held batch {self.id} ({plural(len(self.changes), 'operation')} on {span}, "
            f"held {self.held_at:%Y-%m-%d %H:%M}): {self.reason}"
        ]
        for change in self.changes:
            lines += [f"  {line}" for line in change.lines()]
        return "\n".join(lines)


def _plain(text: str) -> str:
    """``text`` with control characters escaped, for a terminal."""
    return text if text.isprintable() else repr(text)[1:-1]


def _text(value: Any) -> str:
    # repr keeps control characters in a value from reaching the terminal as they are
    return "—" if value is None else repr(value) if isinstance(value, str) else str(value)


# -- holding --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Budget:
    """What the answers applied since a user's last review decision changed without review:
    ``used`` existing records (and constraints) retracted or overwritten, out of the ``records``
    there were when the first of them ran (``None``: none ran); ``forgotten``: a forget erased
    the marker of one, so what it spent is unknown; ``added``: the records every answer applied
    without review ever added, which no review made the user's."""

    used: int
    records: int | None
    forgotten: bool
    added: int


def spent(store: Store, user: str) -> Budget:
    """The budget ``user``'s unreviewed answers have spent, read from the log: each applied
    answer's ``extraction`` marker says what it changed and added (``hold``), and a ``review``
    decision, accepting or rejecting, renews it. A marker of an accepted batch comes before its
    decision, and says neither, so what a person accepted is never counted."""
    row = store.con.execute(
        """
        WITH last AS (
            SELECT coalesce(max(seq), 0) AS seq FROM events
            WHERE user_id = ? AND kind = 'review' AND salt <> ''
              AND json_extract_string(payload, '$.state') <> 'held')
        SELECT coalesce(sum(TRY_CAST(json_extract(payload, '$.changed') AS BIGINT))
                        FILTER (WHERE salt <> '' AND events.seq > last.seq), 0),
               arg_min(TRY_CAST(json_extract(payload, '$.records') AS BIGINT), events.seq)
                        FILTER (WHERE salt <> '' AND events.seq > last.seq),
               count(*) FILTER (WHERE salt = '' AND events.seq > last.seq),
               coalesce(sum(TRY_CAST(json_extract(payload, '$.added') AS BIGINT))
                        FILTER (WHERE salt <> ''), 0)
        FROM events, last
        WHERE user_id = ? AND kind = 'extraction'
        """,
        [user, user],
    ).fetchone()
    used, records, erased, added = row if row is not None else (0, None, 0, 0)
    return Budget(int(used), None if records is None else int(records), erased > 0, int(added))


def hold(
    store: Store,
    state: State,
    proposal: Proposal,
    limits: ExtractionLimits,
    utterances: list[LoggedEvent],
) -> InputEvent | None:
    """The ``review`` event that holds a valid answer, or ``None`` if it may be applied.

    ``proposal`` is the answer planned against ``state``, with the records its turns mention.
    The records it changes are counted with those the answers applied since the user's last
    review changed (``spent``), so many small answers, in one run or many, cannot do
    unreviewed what one may not. An answer that may be applied has its ``extraction`` marker
    say what it changed and how many records there were, for the answers after it to count.
    """
    ops = {"add": 0, "update": 0, "retract": 0}
    changed: dict[tuple[str, str], None] = {}  # existing records retracted or overwritten
    unmentioned: dict[tuple[str, str], None] = {}  # existing records changed, not mentioned
    added: dict[tuple[str, str], None] = {}  # records new in the state
    ignored: dict[str, None] = {}  # constraints in force changed, not mentioned
    said: set[str] | None = None  # the constraints the turns mention, read once one is changed
    for ev in proposal.planned:
        if ev.kind == "constraint" and ev.payload["op"] != "add":
            # replacing or ending a rule in force is a change like overwriting a record
            key = ev.payload["key"]
            changed[("constraint", key)] = None
            if said is None:
                said = mentioned_constraints(state, said_by_user(utterances))
            if key in state.constraints and key not in said:
                ignored[key] = None
        if ev.kind != "fact":
            continue
        p = ev.payload
        ops[p["op"]] += 1
        record = (p["type"], p["key"])
        rec = state.get(*record)
        if rec is None:  # new, or added earlier in this same answer
            if p["op"] != "retract":
                added[record] = None
            continue
        if p["op"] == "add":
            continue
        if record not in proposal.mentioned:
            unmentioned[record] = None
        now = field_values(rec)
        # setting a field the record did not hold changes it too ("lost": true)
        if p["op"] == "retract" or any(
            to_json_value(now.get(k)) != v for k, v in p["fields"].items()
        ):
            changed[record] = None
    records = sum(state.counts().values())
    budget = spent(store, state.user)
    # The budget is of the user's records: not those the model added unreviewed, ever (a
    # review of another answer does not make them the user's), and not adds since it began.
    own = max(records - budget.added, 0)
    base = own if budget.records is None else min(own, budget.records)
    allowed = limits.changes_allowed(base)
    # a forgotten marker's changes are unknown: the budget is spent until the next review
    used = allowed if budget.forgotten else budget.used
    reasons = []
    if used + len(changed) > allowed:
        before = (
            f", and answers applied since the last review already changed {used} without review:"
            if used
            else ","
        )
        reasons.append(
            f"it retracts or overwrites {len(changed)} of {plural(records, 'current record')}"
            f"{before} more than the budget of {allowed} unreviewed changes between reviews"
        )
    if unmentioned:
        names = [f"{t} {k!r}" for t, k in list(unmentioned)[:_SHOWN_KEYS]]
        more = len(unmentioned) - len(names)
        reasons.append(
            f"it changes {plural(len(unmentioned), 'record')} its turns do not mention: "
            f"{', '.join(names)}{f' and {more} more' if more else ''}"
        )
    if ignored:
        names = [repr(k) for k in list(ignored)[:_SHOWN_KEYS]]
        more = len(ignored) - len(names)
        reasons.append(
            f"it retracts or updates {plural(len(ignored), 'constraint')} its turns do not "
            f"mention: {', '.join(names)}{f' and {more} more' if more else ''}"
        )
    if not reasons:
        if proposal.events:
            proposal.events[-1].payload.update(changed=len(changed), records=own, added=len(added))
        return None
    last = utterances[-1]
    payload = {
        "state": "held",
        "call_id": proposal.call_id,
        "reason": "; ".join(reasons),
        "utterances": [u.source for u in utterances],
        "counts": {**ops, "changed": len(changed), "unmentioned": len(unmentioned) + len(ignored)},
    }
    return InputEvent("review", 1, last.ts, "review", f"review:{proposal.call_id}:held", payload)


# -- reading what is held ------------------------------------------------------------------------


def _holds(store: Store, user: str) -> dict[int, LoggedEvent]:
    """The holds of ``user`` no decision has answered yet, by id."""
    held: dict[int, LoggedEvent] = {}
    for ev in store.events(user, kinds=["review"]):
        if ev.payload.get("state") == "held":
            held[int(ev.payload["call_id"])] = ev
        else:
            held.pop(int(ev.payload["call_id"]), None)
    return held


def _answer(store: Store, user: str, call_id: int) -> Extraction:
    # A call id is unique within a user's calls, not across a store a fleet was imported into;
    # a call of another user is the answer only when it was replayed from their record.
    row = store.con.execute(
        "SELECT content FROM model_calls WHERE call_id = ? ORDER BY (user_id = ?) DESC LIMIT 1",
        [call_id, user],
    ).fetchone()
    try:
        return Extraction.model_validate_json(row[0] if row else "")
    except ValidationError:
        raise ReviewError(
            f"the answer of held batch {call_id} is not in the call record any more "
            f"(forgotten?); reject it with `uac review reject {call_id}`"
        ) from None


def _utterances(store: Store, user: str, sources: list[str]) -> list[LoggedEvent]:
    wanted = set(sources)
    found = {u.source: u for u in store.events(user, kinds=["utterance"]) if u.source in wanted}
    return [found[s] for s in sources if s in found]


def _change(state: State, number: int, op: Any) -> Change:
    rec = state.get(op.type, op.key)
    before = (
        None
        if rec is None
        else {k: to_json_value(v) for k, v in field_values(rec).items() if v is not None}
    )
    given = {f.name: f.value for f in op.fields}
    after = None if op.op == "retract" else given if op.op == "add" else {**(before or {}), **given}
    return Change(number, op.op, op.type, op.key, before, after, op.reason or "")


def held_batches(store: Store, state: State) -> list[HeldBatch]:
    """Every answer held for review and not decided yet, oldest first, each operation shown
    against the state as it is now."""
    found = []
    for call_id, ev in _holds(store, state.user).items():
        reason = str(ev.payload["reason"])
        try:
            ops = _answer(store, state.user, call_id).operations
        except ReviewError:  # its answer was forgotten: all that is left is to reject it
            ops, reason = (
                [],
                f"its answer was forgotten; reject it with `uac review reject {call_id}`",
            )
        found.append(
            HeldBatch(
                call_id,
                ev.recorded_at,
                reason,
                list(ev.payload["utterances"]),
                [_change(state, i, op) for i, op in enumerate(ops, 1)],
            )
        )
    return found


def _held(store: Store, user: str, batch: int) -> LoggedEvent:
    holds = _holds(store, user)
    if batch not in holds:
        listed = ", ".join(map(str, holds)) or "none"
        raise ReviewError(
            f"no batch {batch} is held for review of user {user!r} (held: {listed}); "
            "`uac review` lists them"
        )
    return holds[batch]


# -- deciding ----------------------------------------------------------------------------------


def accept_events(
    store: Store,
    state: State,
    batch: int,
    only: Collection[int] | None = None,
    bounds: Limits = DEFAULT_LIMITS,
) -> list[InputEvent]:
    """The events that apply held ``batch`` (the operations numbered ``only``, else all): its
    facts, the ``extraction`` marker and the ``review`` decision, to be appended together."""
    ev = _held(store, state.user, batch)
    answer = _answer(store, state.user, batch)
    n = len(answer.operations)
    numbers = set(range(1, n + 1)) if only is None else set(only)
    if not numbers:
        raise ReviewError(
            f"no operations chosen from held batch {batch}; to apply none, reject it "
            f"with `uac review reject {batch}`"
        )
    if outside := sorted(numbers - set(range(1, n + 1))):
        raise ReviewError(
            f"held batch {batch} has no operation {outside[0]} (it has 1 to {n}); "
            "`uac review` numbers them"
        )
    sources = list(ev.payload["utterances"])
    utterances = _utterances(store, state.user, sources)
    if len(utterances) != len(sources):
        raise ReviewError(
            f"the turns of held batch {batch} are not all in the log any more (forgotten?); "
            f"reject it with `uac review reject {batch}`"
        )
    origin = f"held batch {batch}"
    events = to_events(utterances, answer, origin, only=numbers, bounds=bounds)
    # the answer's constraints and bindings come with its facts; those no longer valid are
    # left out
    add_constraints(state, utterances, answer, events, origin, bounds)
    add_bindings(state, utterances, answer, events, origin, ExtractionLimits().max_bindings, bounds)
    events[-1].payload["call_id"] = batch
    decision = {
        "state": "accepted",
        "call_id": batch,
        "utterances": sources,
        "operations": sorted(numbers),
    }
    events.append(_decision(events[-1].ts, batch, decision))
    return events


def reject_event(store: Store, state: State, batch: int) -> InputEvent:
    """The ``review`` decision that rejects held ``batch``: nothing of it is applied, and its
    turns are not pending any more (the answer stays in the call record)."""
    ev = _held(store, state.user, batch)
    decision = {"state": "rejected", "call_id": batch, "utterances": ev.payload["utterances"]}
    return _decision(ev.ts, batch, decision)


def _decision(ts: datetime, batch: int, payload: dict[str, Any]) -> InputEvent:
    return InputEvent("review", 1, ts, "review", f"review:{batch}:decision", payload)


def parse_only(text: str) -> list[int]:
    """``"1,3"`` (as ``--only`` gives it) as the operation numbers [1, 3]."""
    numbers = []
    for part in text.split(","):
        part = part.strip()
        # ASCII digits only: '²'.isdigit() is True, yet int('²') fails.
        if not (part.isascii() and part.isdigit()) or int(part) < 1:
            raise ReviewError(
                f"--only takes operation numbers from 1 separated by commas, like 1,3; "
                f"not {text[:40]!r}"
            )
        numbers.append(int(part))
    return numbers
