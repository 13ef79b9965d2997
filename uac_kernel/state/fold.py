"""State = fold(log): deterministic application of schema and fact events to typed records,
of constraint events to the constraints in force, and of vocabulary events to the bindings.

The fold is incremental by construction: applying one event touches one record. It also notes
which parts of the generated code the event made stale (``dirty``) and which record types
changed (``changed_types``), so checkpoints and rules do work proportional to the new events.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time
from itertools import islice
from typing import TYPE_CHECKING, Any

from uac_kernel.core.errors import ConstraintError, FoldError
from uac_kernel.core.records import Record, new_record, record_class
from uac_kernel.core.schema import Schema, reader
from uac_kernel.log.store import LoggedEvent
from uac_kernel.vocab.binding import Binding, Rebinding, Vocabulary, addable
from uac_kernel.vocab.log import binding_of

if TYPE_CHECKING:
    from uac_kernel.language.spec import Constraint

__all__ = [
    "BLOCK",
    "ConstraintVersion",
    "FieldIndex",
    "State",
    "TypeState",
    "fold",
    "moved",
    "order_value",
]

# Records per block of generated code: a change re-renders one block, never the whole type.
BLOCK = 50
# Changed keys kept per type between two runs of the rules; past it, "every record of the type"
# (a rule that reads a part of them runs whole: cheaper than tracking a bulk load key by key).
KEYS_KEPT = 20_000


def order_value(v: Any) -> float | datetime | None:
    """A field value as a key that orders it against the others of its field: dates as midnight,
    aware date-times as naive UTC, numbers as they are (ints and floats compare exactly); None
    for anything else (unset, text, bool)."""
    if isinstance(v, datetime):
        return v.astimezone(UTC).replace(tzinfo=None) if v.tzinfo is not None else v
    if isinstance(v, date):
        return datetime.combine(v, time())
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v
    return None


@dataclass(slots=True)
class FieldIndex:
    """Current records of one type ordered by one field, kept up to date by the fold.

    Built on first use (``State.where``), so a rule that asks for "records dated from today"
    reads those records, not the type's whole history, on every later run.
    """

    entries: list[tuple[Any, str]] = field(default_factory=list)  # sorted (order value, key)
    unset: set[str] = field(default_factory=set)  # keys whose value has no order (mostly None)

    def add(self, key: str, value: Any) -> None:
        v = order_value(value)
        if v is None:
            self.unset.add(key)
        else:
            insort(self.entries, (v, key))

    def remove(self, key: str, value: Any) -> None:
        v = order_value(value)
        if v is None:
            self.unset.discard(key)
            return
        i = bisect_left(self.entries, (v, key))
        if i < len(self.entries) and self.entries[i] == (v, key):
            del self.entries[i]

    def between(self, lo: Any, hi: Any) -> list[str]:
        """Keys with ``lo <= value < hi`` (either bound may be None), in value order."""
        start = 0 if lo is None else bisect_left(self.entries, (lo, ""))
        stop = len(self.entries) if hi is None else bisect_left(self.entries, (hi, ""))
        return [key for _, key in self.entries[start:stop]]


@dataclass(slots=True)
class TypeState:
    """The records of one type: current versions, ended versions, and creation order."""

    name: str
    cls: type[Record]
    # Per field, the converter from stored JSON to Python values; its keys give field order.
    readers: dict[str, Callable[[Any], Any]] = field(default_factory=dict)
    # Every field set to None, in field order: the start of a new record's values.
    blank: dict[str, None] = field(default_factory=dict)
    current: dict[str, Record] = field(default_factory=dict)
    history: list[Record] = field(default_factory=list)
    # Keys in the order their records were (re)created; a key's current life sits at position[key].
    order: list[str] = field(default_factory=list)
    position: dict[str, int] = field(default_factory=dict)
    # Field indexes built so far (by ``State.where``), maintained on every change after that.
    indexes: dict[str, FieldIndex] = field(default_factory=dict)
    # Fields were added since ``cls`` was built: records may hold fields ``cls`` lacks until
    # ``settle`` builds the class once for all of them.
    stale: bool = False
    # How many record classes this type has had: one per ``settle`` that found it stale.
    builds: int = 1

    @classmethod
    def of(cls, name: str, fields: dict[str, str]) -> TypeState:
        """The empty state of a type with the given ``{field: ftype}``."""
        ts = cls(name, Record)
        ts.define(fields)
        return ts

    def define(self, fields: dict[str, str]) -> None:
        """Give a type that has no records yet its fields, and build its class of them."""
        for f, t in fields.items():
            self.add_field(f, t)
        self.cls = self.new_class(fields)
        self.stale = False

    def new_class(self, fields: dict[str, str]) -> type[Record]:
        """The record class of ``fields``. Its records know every field the type gains later
        (``blank`` grows with the schema), so a record read before such a field came reads it
        as unset, not as a name the type never had."""
        return record_class(self.name, fields, known=self.blank.keys())

    def add_field(self, name: str, ftype: str) -> None:
        """A new field, unset in every record; the class follows at the next ``settle``."""
        self.readers[name] = reader(ftype)
        self.blank[name] = None
        self.stale = True

    def settle(self, fields: dict[str, str]) -> None:
        """Build the record class of ``fields`` and move every record onto it, if fields came.

        Building a pydantic class costs time in its number of fields, so doing it per new field
        made opening a type of n fields cost n² (2,000 fields: 47 s, 6 GB); once per fold of a
        batch keeps it linear (bench/fields.py).
        """
        if not self.stale:
            return
        cls = self.cls = self.new_class(fields)
        self.builds += 1
        self.stale = False
        # Unset fields are not rendered, so no block of code becomes dirty.
        self.current = {k: moved(cls, r) for k, r in self.current.items()}
        self.history = [moved(cls, r) for r in self.history]

    def index(self, name: str) -> FieldIndex:
        idx = self.indexes.get(name)
        if idx is None:
            idx = self.indexes[name] = FieldIndex()
            unset = idx.unset
            entries = idx.entries
            for key, rec in self.current.items():
                v = order_value(rec.__dict__.get(name))
                if v is None:
                    unset.add(key)
                else:
                    entries.append((v, key))
            entries.sort()
        return idx

    def ended(self, key: str) -> list[Record]:
        """The ended versions of ``key`` (superseded or retracted), in the order they ended."""
        return [r for r in self.history if r.key == key]

    def reindex(self, key: str, old: Record | None, new: Record | None) -> None:
        for name, idx in self.indexes.items():
            before = old.__dict__.get(name) if old is not None else None
            after = new.__dict__.get(name) if new is not None else None
            if old is not None and new is not None and before == after:
                continue
            if old is not None:
                idx.remove(key, before)
            if new is not None:
                idx.add(key, after)


@dataclass(frozen=True, slots=True)
class ConstraintVersion:
    """One version of a constraint: in force from ``valid_from`` until ``valid_to`` (None: it
    still is), put there by the events ``sources`` (log seqs: the add, then each update).

    ``source`` is the log source of the latest of those events, ``author`` and
    ``derived_from`` who proposed it and the utterances it was derived from, ``reason`` why it
    was added or changed; an ended version says whether it was ``retracted`` and ``ended_because``.
    ``rule`` is the name of the rule it becomes, chosen when its key was added (see
    ``uac_kernel.core.constraint_names``).
    """

    key: str
    constraint: Constraint
    valid_from: datetime
    sources: tuple[int, ...]
    source: str | None = None
    author: str | None = None
    derived_from: tuple[str, ...] = ()
    reason: str | None = None
    valid_to: datetime | None = None
    retracted: bool = False
    ended_because: str | None = None
    rule: str = ""


class State:
    """The typed state of one user at one point of the log."""

    def __init__(self, user: str):
        self.user = user
        self.schema = Schema()
        self.types: dict[str, TypeState] = {}
        self.seq = 0
        self.now: datetime | None = None
        self.dirty: set[tuple[str, str, int]] = set()
        self.changed_types: set[str] = set()
        # The keys of the records each changed type had changed since ``take_changed_keys``;
        # None for every record of the type (a new field, or more than ``KEYS_KEPT``).
        self.changed_keys: dict[str, set[str] | None] = {}
        # The seq of the log when ``take_changed_keys`` was last called, and at the call before:
        # the changes it returned are those of the events after ``changes_after`` (a cleared
        # alert is told from them by undoing them, ``rules.cleared``).
        self.keys_taken_at = 0
        self.changes_after = 0
        # The keys facts changed, by type, since ``take_changed_keys`` (a new field leaves them
        # known: it changes every record's class, not what any record says), and those of the
        # change it last returned; None past ``KEYS_KEPT``.
        self.fact_keys: dict[str, set[str] | None] = {}
        self.changed_facts: dict[str, set[str] | None] = {}
        # The seq of the last event that changed each type (the SQL view refreshes by it).
        self.type_seq: dict[str, int] = {}
        # Types given new fields since the last settle (see ``TypeState.settle``).
        self._stale: set[str] = set()
        # Constraints in force by key (in the order they came into force), their ended
        # versions, and the keys changed since ``take_changed_constraints``.
        self.constraints: dict[str, ConstraintVersion] = {}
        self.constraint_history: list[ConstraintVersion] = []
        self.changed_constraints: set[str] = set()
        # The seq of the last constraint event (the SQL view refreshes its table by it).
        self.constraint_seq = 0
        # Vocabulary bindings the log holds, by key in the order each was first bound (a later
        # one of the same key replaces it), and the vocabulary they make, built when first read
        # after a change.
        self.vocab_bindings: dict[tuple[str, str, str | None], Binding] = {}
        self._vocab: Vocabulary | None = None
        # The seq of the last vocabulary event, and how the vocabulary changed since
        # ``take_changed_vocab`` (each key's binding before and after): every rule reads
        # through it, so all of them run again, and an alert it clears names the change.
        self.vocab_seq = 0
        self.vocab_changed: dict[tuple[str, str, str | None], Rebinding] = {}

    def _rebind(self, key: tuple[str, str, str | None], after: Binding | None) -> None:
        was = self.vocab_changed.get(key)
        before = was.before if was is not None else self.bound(key)
        self.vocab_changed[key] = Rebinding(key, before, after)
        self._vocab = None

    def bind(self, bindings: Iterable[Binding]) -> None:
        """Put ``bindings`` in the vocabulary (a later one of the same key replaces it)."""
        for b in bindings:
            self._rebind(b.key, b)
            self.vocab_bindings[b.key] = b

    def unbind(self, key: tuple[str, str, str | None]) -> None:
        """Take the binding of ``key`` (target, type, field) out of the vocabulary."""
        self._rebind(key, None)
        self.vocab_bindings.pop(key, None)

    def bound(self, key: tuple[str, str, str | None]) -> Binding | None:
        """The binding of ``key`` in force (used, held or rejected), or None."""
        return self.vocab_bindings.get(key)

    def take_changed_vocab(self) -> list[Rebinding]:
        """How the vocabulary changed since the last call (empty: it did not)."""
        changed, self.vocab_changed = self.vocab_changed, {}
        return [c for c in changed.values() if c.before != c.after]

    @property
    def vocab(self) -> Vocabulary:
        """The user's vocabulary: which types play each role, which fields carry each concept."""
        if self._vocab is None:
            self._vocab = Vocabulary(self.vocab_bindings.values())
        return self._vocab

    # -- reading -------------------------------------------------------------------------

    def sample(self, type_name: str, field_name: str, n: int) -> list[Any]:
        """The set values of ``field_name`` on the first ``n`` current records of
        ``type_name``: what the vocabulary matcher reads of a field's values."""
        ts = self.types.get(type_name)
        held = () if ts is None else islice(ts.current.values(), n)
        return [v for r in held if (v := r.__dict__.get(field_name)) is not None]

    def all(self, type_name: str) -> list[Record]:
        ts = self.types.get(type_name)
        return list(ts.current.values()) if ts else []

    def history(self, type_name: str) -> list[Record]:
        """Every version of every record of the type: ended versions, then current ones."""
        ts = self.types.get(type_name)
        return [*ts.history, *ts.current.values()] if ts else []

    def get(self, type_name: str, key: str) -> Record | None:
        ts = self.types.get(type_name)
        return ts.current.get(key) if ts else None

    def where(
        self, type_name: str, field_name: str, lo: Any = None, hi: Any = None
    ) -> list[Record]:
        """Current records of the type whose field lies in ``[lo, hi)``, in field order.

        Dates, date-times and numbers order the records (see ``order_value``); records where the
        field is unset are in ``unset``. The first call builds the index; later calls cost the
        records returned plus a binary search.
        """
        ts = self.types.get(type_name)
        if ts is None:
            return []
        keys = ts.index(field_name).between(order_value(lo), order_value(hi))
        current = ts.current
        return [current[k] for k in keys]

    def unset(self, type_name: str, field_name: str) -> list[Record]:
        """Current records of the type where the field is unset (or holds no orderable value)."""
        ts = self.types.get(type_name)
        if ts is None:
            return []
        # In creation order, so what a rule yields does not depend on set order.
        keys = sorted(ts.index(field_name).unset, key=ts.position.__getitem__)
        return [ts.current[k] for k in keys]

    def versions(self, type_name: str, key: str) -> list[Record]:
        """Every version of one record, oldest first."""
        ts = self.types.get(type_name)
        if ts is None or not isinstance(key, str):
            return []  # keys are text (a snapshot's query would read 5 as '5')
        now = ts.current.get(key)
        found = [*ts.ended(key), *([now] if now is not None else [])]
        return sorted(found, key=lambda r: (r.valid_from or datetime.min, r.sources))

    def counts(self) -> dict[str, int]:
        return {name: len(ts.current) for name, ts in self.types.items()}

    def record_class(self, type_name: str) -> type[Record]:
        return self.types[type_name].cls

    # -- folding -------------------------------------------------------------------------

    def apply(self, ev: LoggedEvent) -> None:
        """Apply one logged event. Events of other users or other kinds only advance time."""
        self._apply(ev)
        self._settle()

    def apply_all(self, events: Iterable[LoggedEvent]) -> None:
        for ev in events:
            self._apply(ev)
        self._settle()

    def _apply(self, ev: LoggedEvent) -> None:
        if ev.seq <= self.seq:
            raise FoldError(f"event {ev.seq} is not after {self.seq}; fold events in log order")
        self.seq = ev.seq
        if self.now is None or ev.ts > self.now:
            self.now = ev.ts
        if ev.user != self.user:
            return
        if ev.kind == "schema":
            self._apply_schema(ev.payload)
        elif ev.kind == "fact":
            self._apply_fact(ev)
        elif ev.kind == "constraint":
            self._apply_constraint(ev)
        elif ev.kind == "vocabulary":
            self._apply_vocabulary(ev)

    def _writable(self, name: str) -> TypeState | None:
        """The records of type ``name`` for the fold to change (a trial gives its own layer
        over them, see ``uac_kernel.state.trial``)."""
        return self.types.get(name)

    def _settle(self) -> None:
        for name in self._stale:
            self.types[name].settle(self.schema.types[name])
        self._stale.clear()

    def take_dirty(self) -> set[tuple[str, str, int]]:
        dirty, self.dirty = self.dirty, set()
        return dirty

    def take_changed_types(self) -> set[str]:
        changed, self.changed_types = self.changed_types, set()
        return changed

    def take_changed_keys(self) -> dict[str, set[str] | None]:
        """The keys of the records changed since the last call, by type (None: every record
        of the type may have changed)."""
        changed, self.changed_keys = self.changed_keys, {}
        self.changed_facts, self.fact_keys = self.fact_keys, {}
        self.changes_after, self.keys_taken_at = self.keys_taken_at, self.seq
        return changed

    def take_changed_constraints(self) -> set[str]:
        """The keys of the constraints added, updated or retracted since the last call."""
        changed, self.changed_constraints = self.changed_constraints, set()
        return changed

    def _apply_constraint(self, ev: LoggedEvent) -> None:
        # Imported here: the constraints package imports the rule engine, which imports this.
        from uac_kernel.core.constraint_names import legacy_rule_name
        from uac_kernel.language.spec import parse_constraint

        p = ev.payload
        key, op = p["key"], p["op"]
        old = self.constraints.get(key)
        if (op == "add") == (old is not None):
            state = "already in force" if old is not None else "not in force"
            raise FoldError(f"event {ev.seq}: constraint {key!r} is {state} for op {op!r}")
        if old is not None:
            ended = replace(
                old,
                valid_to=ev.ts,
                retracted=op == "retract",
                ended_because=p.get("reason") if op == "retract" else None,
            )
            self.constraint_history.append(ended)
        if op == "retract":
            del self.constraints[key]
        elif op in ("add", "update"):
            try:
                c = parse_constraint(p["constraint"], f"event {ev.seq}: constraint {key!r}")
            except ConstraintError as exc:
                raise FoldError(str(exc)) from None
            cited = p.get("derived_from")
            self.constraints[key] = ConstraintVersion(
                key=key,
                constraint=c,
                valid_from=ev.ts,
                sources=(*old.sources, ev.seq) if old is not None else (ev.seq,),
                source=ev.source,
                author=p.get("author", old.author if old is not None else None),
                derived_from=tuple(cited) if cited is not None else old.derived_from if old else (),
                reason=p.get("reason"),
                # An add logged before names were chosen has none: the name it had then.
                rule=old.rule if old is not None else p.get("rule") or legacy_rule_name(key),
            )
        else:
            raise FoldError(f"event {ev.seq}: unknown op {op!r}")
        self.changed_constraints.add(key)
        self.constraint_seq = ev.seq

    def _apply_vocabulary(self, ev: LoggedEvent) -> None:
        op = ev.payload["op"]
        b = binding_of(ev.payload["binding"])
        bound = self.bound(b.key)
        if (op == "add" and not addable(bound)) or (op != "add" and bound is None):
            state = "already bound" if op == "add" else "not bound"
            raise FoldError(f"event {ev.seq}: {b.describe()} is {state} for op {op!r}")
        if op == "retract":
            self.unbind(b.key)
        elif op in ("add", "update"):
            self.bind([b])
        else:
            raise FoldError(f"event {ev.seq}: unknown op {op!r}")
        self.vocab_seq = ev.seq

    def _apply_schema(self, payload: dict[str, Any]) -> None:
        name = payload["type"]
        self.schema.apply(payload)
        fields = self.schema.types[name]
        ts = self._writable(name)
        if ts is None:
            self.types[name] = TypeState.of(name, fields)
        elif payload.get("field"):
            # Records made until the fold settles carry the new field on the old class.
            ts.add_field(payload["field"], payload["ftype"])
            self._stale.add(name)
        self.dirty.add((name, "schema", 0))
        self.changed_types.add(name)
        self.changed_keys[name] = None
        self.type_seq[name] = self.seq

    def _apply_fact(self, ev: LoggedEvent) -> None:
        p = ev.payload
        name, key, op = p["type"], p["key"], p["op"]
        ts = self._writable(name)
        if ts is None:
            raise FoldError(f"event {ev.seq}: type {name!r} has no schema event before it")
        given = p.get("fields") or {}
        if op == "add":
            if key in ts.current:
                raise FoldError(f"event {ev.seq}: {name} {key!r} already exists")
            # Every field unset, in field order, then the given ones read over them.
            values: dict[str, Any] = {
                "key": key,
                "valid_from": ev.ts,
                "valid_to": None,
                "sources": (ev.seq,),
                "retracted": False,
                **ts.blank,
            }
            _read_given(ts, given, values, ev.seq)
            rec = ts.current[key] = new_record(ts.cls, values)
            if ts.indexes:
                ts.reindex(key, None, rec)
            ts.position[key] = len(ts.order)
            ts.order.append(key)
        else:
            old = ts.current.get(key)
            if old is None:
                raise FoldError(f"event {ev.seq}: {name} {key!r} is not a current record")
            ended = dict(old.__dict__, valid_to=ev.ts)
            if op == "update":
                values = dict(old.__dict__, valid_from=ev.ts, sources=(*old.sources, ev.seq))
                _read_given(ts, given, values, ev.seq)
                rec = ts.current[key] = new_record(ts.cls, values)
                if ts.indexes:
                    ts.reindex(key, old, rec)
            elif op == "retract":
                del ts.current[key]
                if ts.indexes:
                    ts.reindex(key, old, None)
                ended.update(retracted=True, sources=(*old.sources, ev.seq))
            else:
                raise FoldError(f"event {ev.seq}: unknown op {op!r}")
            self.dirty.add((name, "history", len(ts.history) // BLOCK))
            ts.history.append(new_record(ts.cls, ended))
        self.dirty.add((name, "current", ts.position[key] // BLOCK))
        self.changed_types.add(name)
        for kept in (self.changed_keys, self.fact_keys):
            keys = kept.setdefault(name, set())
            if keys is not None:
                keys.add(key)
                if len(keys) > KEYS_KEPT:
                    kept[name] = None
        self.type_seq[name] = ev.seq


def _read_given(ts: TypeState, given: dict[str, Any], values: dict[str, Any], seq: int) -> None:
    """Read a fact's given fields into ``values``; a field the schema lacks is a broken log."""
    readers = ts.readers
    try:
        for f, v in given.items():
            values[f] = readers[f](v)
    except KeyError as exc:
        raise FoldError(
            f"event {seq}: {ts.name} has no field {exc.args[0]!r} (no schema event adds it before "
            "this event); append facts through Workbench.ingest, which adds schema events"
        ) from None


def moved(cls: type[Record], rec: Record) -> Record:
    """``rec`` on a class with more fields (unset in it), as ``settle`` moves records."""
    return new_record(cls, {**dict.fromkeys(cls.model_fields), **rec.__dict__})


def fold(user: str, events: Iterable[LoggedEvent]) -> State:
    """The state of ``user`` after ``events`` (in log order)."""
    state = State(user)
    state.apply_all(events)
    return state
