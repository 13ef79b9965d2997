"""``Workbench``: one user of one store — the engine's public API that every face calls."""

from __future__ import annotations

import dataclasses
import gc
import hashlib
from collections.abc import Collection, Iterable, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from uac_kernel.checkpoints.checkpoint import Checkpoint, CheckpointDiff, Checkpoints, diff_states
from uac_kernel.checkpoints.codegen import rules_code
from uac_kernel.checkpoints.snapshot import (
    CLOSE_AFTER,
    Restored,
    fingerprint,
    load_snapshot,
    reads_records,
    snapshot_gen,
    stored_for,
    write_snapshot,
)
from uac_kernel.checkpoints.snaptypes import Mark, materialise
from uac_kernel.core.display import did_you_mean
from uac_kernel.core.errors import (
    ConstraintError,
    EventError,
    QueryError,
    StoreError,
    UnknownUser,
    VocabularyError,
)
from uac_kernel.core.limits import DEFAULT_LIMITS, Limits
from uac_kernel.core.records import Record
from uac_kernel.core.search import LogSearch
from uac_kernel.core.timing import Stopwatch, no_gc
from uac_kernel.engine.after import after_events, constraint_key, put_all_in_force
from uac_kernel.engine.alerts import log_alerts, reconcile
from uac_kernel.engine.plan import plan_events
from uac_kernel.ingest.adapters import read_input
from uac_kernel.ingest.dedupe import fresh_events
from uac_kernel.ingest.events import InputEvent
from uac_kernel.ingest.report import IngestReport
from uac_kernel.log.shared import operations
from uac_kernel.log.store import LoggedEvent, NewEvent, Store
from uac_kernel.log.users import DEFAULT_USER, check_kind, resolve_user, unknown_user_message
from uac_kernel.model.ask import Answer, answer_question, search_function
from uac_kernel.rules.engine import (
    Alert,
    AlertChange,
    Rule,
    RuleRunner,
)
from uac_kernel.rules.library import LIBRARY
from uac_kernel.rules.watched import read_fields
from uac_kernel.sandbox import WarmSandbox
from uac_kernel.sql.view import SqlResult, SqlView, table_names
from uac_kernel.state.fold import ConstraintVersion, State, fold
from uac_kernel.state.query import UserView, namespace
from uac_kernel.vocab.binding import Vocabulary
from uac_kernel.vocab.log import (
    binding_events,
    split_target,
)
from uac_kernel.vocab.matcher import SAMPLE, Unwatched, unwatched

if TYPE_CHECKING:
    # Only extraction, notebook edits and calls to the model use these; they (and tqdm) are
    # imported when used, so `uac eval` does not load them (bench/startup.py).
    from uac_kernel.checkpoints.edits import Cell, EditPlan, Selection
    from uac_kernel.checkpoints.forget import ForgetPlan
    from uac_kernel.engine.whatif import AnswerChange, WhatIf
    from uac_kernel.log.integrity import VerifyReport
    from uac_kernel.model.client import ModelClient, ModelSettings
    from uac_kernel.model.extract import ExtractionLimits, ExtractionReport
    from uac_kernel.model.review import HeldBatch

# resolve_user and DEFAULT_USER live in users.py, where the commands that need no fold use them
# without importing this module; they stay importable from here, where they were first.
__all__ = ["DEFAULT_USER", "IngestReport", "Workbench", "resolve_user"]

# What a what-if re-runs by default: the latest expressions and questions of the session.
ASKED_MOST = 20


_Written = tuple[IngestReport, datetime | None]  # a batch written, and the clock before it


@operations  # each public method holds the store's connection while it runs, see log/shared.py
class Workbench:
    """The event log, typed state, checkpoints, rules and queries of one user.

    >>> wb = Workbench("memory.duckdb", user="maya")   # doctest: +SKIP
    >>> wb.ingest("events.jsonl"); wb.checkpoint(); wb.eval("len(user.all(Trip))")  # doctest: +SKIP
    """

    # The warm sandbox of ``eval`` and the state version it was made for (see ``_sandbox``).
    _warm: WarmSandbox | None = None
    _warm_version: tuple[State, int] | None = None
    # The store file's fingerprint when this workbench last caught up with it (``_sync``).
    _synced_at: tuple[int, ...] | None = None
    # The snapshot in the store as this workbench last read or wrote it (None: none it knows).
    _snap: Mark | None = None
    _closed = False

    def __init__(
        self,
        path: str | Path = ":memory:",
        user: str | None = None,
        *,
        read_only: bool = False,
        create: bool | None = None,
        rules: Iterable[Rule] = LIBRARY,
        model: ModelSettings | None = None,
        limits: Limits = DEFAULT_LIMITS,
        snapshots: bool = True,
        propose_bindings: bool = True,
    ):
        """Open ``user`` of the store at ``path`` (see ``resolve_user`` for ``user=None``).

        ``create`` (default: not ``read_only``) allows a new store file and a user with no
        events yet; without it both are errors, as a read of them would find nothing.
        ``limits`` bound every batch appended (``uac_kernel.core.limits``). ``propose_bindings=False``
        appends no matcher proposals after a batch that changes the schema (bindings then come
        only from a model or a person: ``uac vocab``). ``snapshots=False``
        never writes a snapshot (for a store thrown away after use, as a fleet task's).
        """
        self.limits = limits
        self.propose_bindings = propose_bindings
        self._snapshots = snapshots
        if create is None:
            create = not read_only
        self.store = Store(path, read_only=read_only, create=create)
        try:
            self.user = resolve_user(self.store, user, create=create)
        except BaseException:
            self.store.close()
            raise
        self.checkpoints = Checkpoints(self.store, self.user)
        self.runner = RuleRunner(rules)
        # The rule in force for each constraint in force, by constraint key.
        self._constraint_rules: dict[str, str] = {}
        # notebook rule name → the user_seq of the ``rule`` event that logged the definition
        # in force (``define_rule``): a forget in any process takes it out only if that went
        self._defined: dict[str, int] = {}
        self._sql: SqlView | None = None
        self._search: LogSearch | None = None
        self._model_settings = model
        self._model: ModelClient | None = None
        # expression → label (the question it answered, or itself), oldest first
        self._asked: dict[str, str] = {}
        self._load()

    def _load(self) -> None:
        """Fold the user's log into a fresh state and reconcile the standing alerts with it."""
        user = self.user
        self._erasures = self.store.erasures
        gc.unfreeze()  # what an earlier load froze (see below) can be collected again
        own = set(self._constraint_rules.values()) | self._forgotten_rules()
        self.runner = RuleRunner(r for r in self.runner.rules.values() if r.name not in own)
        self._constraint_rules = {}
        latest = self.checkpoints.latest()
        restored = load_snapshot(self.store, user, latest)
        if restored is not None:
            self._load_snapshot(restored)
            return
        self._snap = None
        self.state = State(user)
        with no_gc():
            if latest is not None:
                # Only what changed after the last checkpoint needs re-rendering at the next one.
                self.state.apply_all(self.store.events(user, upto_seq=latest.seq))
                self.state.take_dirty()
                self.state.apply_all(self.store.events(user, after_seq=latest.seq))
            else:
                self.state.apply_all(self.store.events(user))
            # The state lives as long as the workbench: frozen, it is left out of the GC's
            # later walks, in the rules run below (which stays collected: user code) and in
            # every command after. At 300k events that walk was a fifth of an open
            # (bench/nofold.py). close() unfreezes, so no cycle stays uncollected past it.
            gc.freeze()
        put_all_in_force(self.state, self.runner, self._constraint_rules)
        after_events(self.state, self.runner, self._constraint_rules, self.state.now, kept=())
        self._reconcile_alerts(self.runner.rules.keys())

    def _forgotten_rules(self) -> set[str]:
        """The rules in force that a forget logged since this state erased (``forget.forgotten``)."""
        state: State | None = getattr(self, "state", None)
        if state is None or not self.runner.rules:
            return set()
        from uac_kernel.checkpoints.forget import forgotten

        gone = forgotten(
            self.store, self.user, state.seq, self.runner.rules.values(), self._defined
        )
        for name in gone:
            self._defined.pop(name, None)
        return gone

    def _load_snapshot(self, snap: Restored) -> None:
        """Fold the events after a snapshot into the state it restored, and run only the rules
        they (or the clock) affect over the alerts it kept, as an ingest of them would."""
        self.state = state = snap.state
        self._snap = snap.mark
        with no_gc():
            events = list(self.store.events(self.user, after_seq=state.seq))
            snap.prefetch(events)
            if snap.checkpoint_seq is not None:
                # A checkpoint came after the snapshot: only what came after it is dirty.
                state.apply_all(e for e in events if e.seq <= snap.checkpoint_seq)
                state.take_dirty()
                state.apply_all(e for e in events if e.seq > snap.checkpoint_seq)
            else:
                state.apply_all(events)
            gc.freeze()  # as after a full fold (see _load)
        put_all_in_force(state, self.runner, self._constraint_rules)
        # A rule's kept alerts stand for it only if it is the rule that left them.
        kept = [
            name
            for name, r in self.runner.rules.items()
            if snap.rules.get(name, "") == fingerprint(r)
        ]
        for name in kept:
            self.runner.active[name] = dict(snap.alerts.get(name, {}))
        after_events(state, self.runner, self._constraint_rules, snap.now, kept=kept)
        self._reconcile_alerts(self.runner.rules.keys())

    def _write_snapshot(self) -> None:
        """Write this state's snapshot (under the writer lock, see ``uac_kernel.checkpoints.snapshot``)."""
        if not self._snapshots:
            return
        self._snap = write_snapshot(
            self.store,
            self.state,
            self.runner.active,
            self.runner.rules,
            self.checkpoints.latest(),
            self._snap,
        )

    def _snapshot_due(self) -> bool:
        since = self._snap.seq if self._snap is not None else 0
        try:
            row = self.store.con.execute(
                "SELECT count(*) FROM events WHERE user_id = ? AND seq > ?", [self.user, since]
            ).fetchone()
        except duckdb.ConnectionException:
            return False  # the store was closed under the workbench: it cannot be written
        return bool(row and row[0] >= CLOSE_AFTER)

    # -- life cycle ------------------------------------------------------------------------

    def _sync(self, *, write: bool = False) -> None:
        """Catch up if another workbench, of this process or another, has since written this
        user's log, or erased from the store (a forget): this one's state would be stale, and
        a write checked against it could contradict the log. One query when nothing moved;
        for a read, none when the file's fingerprint is as it was at the last catch-up."""
        if not write and self.store.erasures == self._erasures:
            seen = self.store.fingerprint()
            if seen is not None and seen == self._synced_at:
                return
        with self.store.exclusive():  # no compact of another thread closes the file meanwhile
            self._sync_locked()

    def _sync_locked(self) -> None:
        # the file is held: no other process can change it until this operation ends
        self._synced_at = self.store.fingerprint()
        if self._snap is not None and snapshot_gen(self.store.con, self.user) != self._snap.gen:
            # Another workbench or process rewrote the snapshot this state reads its records
            # from: open again from the new one (it covers what this state had, and more).
            self._drop_sandbox()
            self._sql, self._search = None, None
            self._load()
            return
        if self.store.erasures == self._erasures:
            if self.store.user_last_seq(self.user, self.state.seq) <= self.state.seq:
                return
            new = list(self.store.events(self.user, after_seq=self.state.seq))
            if not any(ev.kind == "forget" for ev in new):
                self._fold_new(new)
                return
        self._drop_sandbox()
        self._sql, self._search = None, None
        self._load()

    def _fold_new(self, new: list[LoggedEvent]) -> None:
        """Fold events another writer appended, then bring the rules and standing alerts up to
        date. That writer logged the alerts its rules raised: this one logs only what its own
        rules (a notebook's) see differently, as an open does."""
        before = self._fold(new)
        after_events(self.state, self.runner, self._constraint_rules, before)
        self._reconcile_alerts(self.runner.rules.keys())

    def refresh(self) -> None:
        """Catch up with what other workbenches and processes wrote to this user's log since
        (every other operation does it first; the notebook faces call it before reading
        ``state`` directly)."""
        self._sync()

    def close(self, *, snapshot: bool = False) -> None:
        """Close the store, first writing a snapshot if many events came since the last one
        (with ``snapshot``, if any came: a store whose snapshot is kept elsewhere)."""
        self._drop_sandbox()
        if self._closed:
            return
        self._closed = True
        try:
            if not self.store.read_only and self._snapshots and (snapshot or self._snapshot_due()):
                with self.store.writing():
                    self._sync(write=True)
                    self._write_snapshot()
        finally:
            self.store.close()
            gc.unfreeze()  # frozen by _load

    def __enter__(self) -> Workbench:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def view(self) -> UserView:
        return UserView(self.state)

    @property
    def known(self) -> bool:
        """Whether this user has events in the store (a user is made by its first ingest)."""
        return self.state.seq > 0

    def require_known(self) -> None:
        """An ``UnknownUser`` naming the store's users unless this user has events: the faces
        call it before a read, where a user with none is a typo, not an empty history."""
        if not self.known:
            users = self.store.users()
            raise UnknownUser(unknown_user_message(self.store.path, self.user, users), users=users)

    # -- writing ---------------------------------------------------------------------------

    def ingest(
        self,
        events: str | Path | Iterable[dict[str, Any]],
        *,
        origin: str = "<events>",
        format: str = "jsonl",
        history: str | None = None,
    ) -> IngestReport:
        """Append a file or event objects, atomically; then re-run the rules.

        A file is Event JSONL unless ``format`` says otherwise (``auto``, ``locomo``,
        ``longmemeval``, ``chat``); ``history`` picks one conversation of a LoCoMo or
        LongMemEval file (its sample or question id). An event already logged for this user
        (the same ``source`` and content) is skipped, so re-ingesting a file appends nothing;
        other events from a logged source are appended. Any invalid event
        rejects the whole batch with an ``EventError``.
        """
        parsed = read_input(events, origin, format, history, self.limits)
        clock = Stopwatch()
        with no_gc():
            batch = list(parsed)
            clock.lap("parse")
            report, before = self._write(batch, clock)
            del batch  # freed now, or the GC walks the whole parsed batch when it resumes
        return self._run_rules(report, before, clock)

    def _fresh(self, parsed: Sequence[InputEvent]) -> tuple[list[InputEvent], int]:
        """The events of ``parsed`` not logged yet (the same source and content), and how many
        repeat an earlier one of it (``ingest.dedupe``)."""
        return fresh_events(self.store, self.user, parsed, self.state.schema.types)

    def append_parsed(self, parsed: Sequence[InputEvent]) -> IngestReport:
        """Append events already parsed (by an adapter or the extractor), like ``ingest``."""
        clock = Stopwatch()
        with no_gc():
            report, before = self._write(parsed, clock)
        return self._run_rules(report, before, clock)

    def _write(self, parsed: Sequence[InputEvent], clock: Stopwatch) -> _Written:
        """Validate, log and fold the events not logged yet; return the state's clock before
        them. Under the store's writer lock, after catching up with what another workbench of
        this process wrote: a batch is checked against the log as it is, not as this workbench
        last saw it."""
        if self.store.read_only:
            return self._write_locked(parsed, clock)  # an append will say it cannot write
        with self.store.writing():
            self._sync(write=True)
            return self._write_locked(parsed, clock)

    def _write_locked(self, parsed: Sequence[InputEvent], clock: Stopwatch) -> _Written:
        fresh, repeated = self._fresh(parsed)
        report = IngestReport(skipped=len(parsed) - len(fresh) - repeated, repeated=repeated)
        if not fresh:
            return report, self.state.now
        planned = self._plan(self.state, fresh)
        clock.lap("validate")
        logged = self.store.append(planned)
        clock.lap("write")
        report.appended = len(fresh)
        report.schema_changes = sum(1 for e in logged if e.kind == "schema")
        report.first_seq, report.last_seq = logged[0].seq, logged[-1].seq
        before = self._fold(logged)
        clock.lap("fold")
        return report, before

    def _fold(self, events: Sequence[LoggedEvent]) -> datetime | None:
        """Fold logged events into the state (and the search index, if built); the state's
        clock before them."""
        self._drop_sandbox()  # its worker holds copies of pages of the state now changing
        before = self.state.now
        self.state.apply_all(events)
        if self._search is not None:
            for e in events:
                if e.kind == "utterance":
                    self._search.add(e.seq, e.ts, e.payload["speaker"], e.payload["text"], e.source)
        return before

    def _run_rules(
        self, report: IngestReport, was: datetime | None, clock: Stopwatch
    ) -> IngestReport:
        change = after_events(self.state, self.runner, self._constraint_rules, was)
        if change is not None:
            log_alerts(self.store, self.state, change)
            report.raised, report.cleared, report.updated = (
                change.raised,
                change.cleared,
                change.updated,
            )
            clock.lap("rules")
        report.seconds = clock.laps
        return report

    # -- constraints ----------------------------------------------------------------------

    def constrain(
        self,
        c: Any,
        key: str | None = None,
        *,
        source: str | None = None,
        derived_from: Sequence[str] = (),
        reason: str | None = None,
        author: str | None = None,
        origin: str = "constraint",
    ) -> IngestReport:
        """Put constraint ``c`` (a model such as ``uac.Obligation(...)``, its JSON as a dict,
        a list of them, or a mapping of key → constraint) in force under ``key``, as
        ``constraint`` events appended in one batch; its rule runs at once and after every
        later ingest.

        A ``key`` in force is updated to ``c``; without one the key is a slug of the title,
        made unique. A constraint already in force as given appends nothing. The report's
        ``constraints`` lists the keys. A constraint that does not parse or compile is a
        ``ConstraintError`` and nothing is appended. A type or field it names that the records
        do not have (yet) is a line of the report's ``warnings`` (named by ``origin``, the file
        it came from), not an error: a constraint may be written before its first record.
        """
        from uac_kernel.constraints.inforce import as_constraints, constraint_events, name_warnings

        parsed = as_constraints(c)
        if key is not None:
            if len(parsed) > 1:
                raise ConstraintError(
                    f"one key ({key!r}) for {len(parsed)} constraints; leave the key out (each "
                    "gets one from its title) or put them in force one at a time"
                )
            parsed = [(key, parsed[0][1])]
        self._sync()
        taken = {*self.state.constraints, *(v.key for v in self.state.constraint_history)}
        events, keys = constraint_events(
            parsed,
            self.state.constraints,
            taken,
            self.state.now or datetime(1970, 1, 1),
            seq=self.state.seq,
            source=source,
            author=author,
            derived_from=derived_from,
            reason=reason,
        )
        warnings = name_warnings(parsed, self.state.schema.types, origin)
        report = self.ingest(events, origin="constrain") if events else IngestReport()
        report.constraints = keys
        report.warnings = warnings
        return report

    def retract_constraint(self, key: str, reason: str | None = None) -> IngestReport:
        """Take constraint ``key`` out of force: its rule stops and its standing alerts clear,
        saying it was retracted (and ``reason``). The constraint stays in the history."""
        from uac_kernel.constraints.inforce import retract_event

        self._sync()
        report = self.ingest([retract_event(self.state, key, reason)], origin="retract")
        report.constraints = [key]
        return report

    def constraints(self, *, history: bool = False) -> list[ConstraintVersion]:
        """The constraints in force, in the order they came into force; with ``history`` every
        version, superseded and retracted ones too, oldest first."""
        self._sync()
        current = list(self.state.constraints.values())
        if not history:
            return current
        return sorted([*self.state.constraint_history, *current], key=lambda v: v.sources)

    def constraint_of(self, rule: str) -> ConstraintVersion | None:
        """The constraint in force whose rule is ``rule`` (an alert's ``rule``), or None."""
        key = constraint_key(self._constraint_rules, rule)
        return self.state.constraints.get(key) if key is not None else None

    # -- vocabulary -----------------------------------------------------------------------

    def vocab(self) -> Vocabulary:
        """The user's vocabulary: every binding with who made it, its score and reason
        (``.bindings``); ``.held()`` the proposals waiting for review, which no rule reads."""
        self._sync()
        return self.state.vocab

    def unwatched(self) -> list[Unwatched]:
        """The types and fields that look like dates, deadlines, amounts, documents or
        substances and that no rule or constraint in force reads: what uac is blind to for
        this user, each with why it looks like one and the ``uac vocab bind`` that would
        change that."""
        self._sync()
        state = self.state
        schema = state.schema.types
        constraints = [cv.constraint for cv in state.constraints.values()]
        read = read_fields(schema, state.vocab, self.runner.rules.values(), constraints)
        return unwatched(schema, state.vocab, read, values=lambda t, f: state.sample(t, f, SAMPLE))

    def bind(
        self,
        target: str,
        name: str,
        *,
        author: str = "person",
        score: float = 1.0,
        reason: str = "",
        status: str = "used",
    ) -> IngestReport:
        """Bind ``"Type.field"`` to concept ``name`` (``"Journey.leaves_on"``, ``"trip.start"``)
        or ``"Type"`` to role ``name`` (``"Journey"``, ``"trip"``); every rule runs again.
        A ``VocabularyError`` names an unknown concept, role, type or field, and nothing is
        appended."""
        return self.bind_all(
            [self.binding(target, name, author=author, score=score, reason=reason, status=status)]
        )

    def binding(self, target: str, name: str, **parts: Any) -> dict[str, Any]:
        """The ``binding`` object of ``bind(target, name, **parts)``, for ``bind_all``."""
        self._sync()
        type_name, field_name = split_target(target, self.state.schema.types)
        b: dict[str, Any] = {"role" if field_name is None else "concept": name, "type": type_name}
        if field_name is not None:
            b["field"] = field_name
        return {**b, **parts}

    def unbind(self, target: str, name: str, *, reason: str = "") -> IngestReport:
        """A person's ``rejected`` binding: ``"Type.field"`` does not carry concept ``name``
        (or ``"Type"`` does not play role ``name``), also where the catalogue's defaults say
        it does."""
        return self.bind(target, name, reason=reason, status="rejected")

    def bind_all(self, bindings: Iterable[dict[str, Any]]) -> IngestReport:
        """Append one vocabulary event per binding (a ``binding`` object of the event format)
        in one batch: an ``add``, or an ``update`` of a key already bound; one bound exactly so
        is left out. The faces, and proposals (a matcher's, a model's), come through here."""
        self._sync()
        events, asked = binding_events(bindings, self.state, self.limits.value_chars)
        if not events:
            return IngestReport()
        try:
            return self.ingest(events, origin="vocab")
        except EventError as exc:
            said = asked[exc.line - 1] if exc.line else "the vocabulary"
            raise VocabularyError(f"{said}: {exc.reason}") from None

    def _code_rules(self) -> list[Rule]:
        """The rules checkpoint code lists: constraints are rendered as data, not as rules."""
        own = set(self._constraint_rules.values())
        return [r for r in self.runner.rules.values() if r.name not in own]

    def add_rule(self, r: Rule) -> AlertChange:
        """Put a rule in force and run it on the current state.

        The change returned (and logged) is against what the log says the rule's alerts are, so
        putting back a rule that was in force before logs only what differs since.
        """
        self._defined.pop(r.name, None)  # this definition was not logged (``define_rule``)
        self.runner.add(r)
        change = self.runner.run(self.view, None, only=[r.name])
        if self.store.read_only:  # nothing can be logged, so the log is no reference
            return change
        return self._reconcile_alerts({r.name})

    def _reconcile_alerts(self, rules: Collection[str]) -> AlertChange:
        return reconcile(self.store, self.state, self.runner, rules)

    # -- checkpoints ------------------------------------------------------------------------

    def checkpoint(self) -> Checkpoint:
        """Store the state as a new version of typed code; only changed segments are rendered.

        When the code would be the same as the latest version's, nothing is stored and that
        version comes back with ``new`` False (its ``summary()`` says "no change since N").
        """
        with self.store.writing():
            self._sync(write=True)
            cp = self.checkpoints.take(self.state, self.state.take_dirty(), self._code_rules())
            self._write_snapshot()
            return cp

    def code(self, version: int | None = None) -> str:
        return self.checkpoints.get(version).code

    def diff(self, a: int, b: int) -> CheckpointDiff:
        """Records added, changed and retracted, and schema growth, from checkpoint a to b."""
        old, new = self.checkpoints.get(a), self.checkpoints.get(b)
        return diff_states(self.state_at_seq(old.seq), self.state_at_seq(new.seq), a, b)

    # -- the model as editable code ----------------------------------------------------------

    def parts(self, version: int | None = None) -> list[str]:
        """The parts a checkpoint is shown in: ``schema``, one per record type, ``rules``."""
        from uac_kernel.checkpoints.edits import part_names

        return part_names(self.state_at_seq(self.checkpoints.get(version).seq))

    def cell(
        self,
        part: str,
        version: int | None = None,
        *,
        key: str | Iterable[str] | None = None,
        where: str | None = None,
        last: int | None = None,
    ) -> str:
        """The code of one part of a checkpoint, to edit and hand back to ``apply_edit``.

        Of a record type, ``key`` (one or several), ``where`` (an expression over a record
        ``r``, run in the sandbox: ``"r.country == 'Japan'"``) and ``last`` (the N most
        recently changed) narrow it to some records; see ``edits.Selection``. Hand the same
        selection to ``apply_edit``.
        """
        return self.edit_cell(part, version, key=key, where=where, last=last).code

    def edit_cell(
        self,
        part: str,
        version: int | None = None,
        *,
        key: str | Iterable[str] | None = None,
        where: str | None = None,
        last: int | None = None,
    ) -> Cell:
        """Like ``cell``, with what the cell holds: the version, the selected keys, the
        type's record count. An unknown key is a ``QueryError`` suggesting close ones; a bad
        ``where`` the sandbox's error."""
        from uac_kernel.checkpoints.edits import Cell, Selection, render_part

        cp = self.checkpoints.get(version)
        state = self.state_at_seq(cp.seq)
        sel = Selection.of(key, where, last)
        keys = self._select(state, part, sel, cp.version)
        code = render_part(state, part, rules_code(self._code_rules()), keys)
        ts = state.types.get(part)
        return Cell(part, cp.version, code, sel, keys, len(ts.current) if ts else 0)

    def _select(self, state: State, part: str, sel: Selection, version: int) -> list[str] | None:
        """The keys ``sel`` picks among the records of ``part`` in ``state`` (None: all)."""
        from uac_kernel.checkpoints.edits import select_keys
        from uac_kernel.sandbox import evaluate

        if not sel:
            return None
        if sel.where is None:  # keys and last need no query: no sandbox, no search index
            return select_keys(state, part, sel, lambda q: None, (), version)
        ns = namespace(state)
        run = self._sandbox().evaluate if state is self.state else (lambda q: evaluate(q, ns))
        return select_keys(state, part, sel, run, ns.keys(), version)

    def apply_edit(
        self,
        code: str,
        *,
        version: int,
        part: str,
        key: str | Iterable[str] | None = None,
        where: str | None = None,
        last: int | None = None,
    ) -> tuple[EditPlan, IngestReport]:
        """Append what an edited part changes, as correction facts authored by the notebook.

        The cell is read by literals only. Edits against an older version are merged when they
        do not overlap later changes, refused with ``EditConflict`` when they do. Rules the cell
        defines are returned in the plan, not run: the caller decides to trust them.

        ``key``, ``where`` and ``last`` are the selection the cell was made with (``cell``):
        it is picked again from checkpoint ``version``, and only a selected record missing
        from the cell is retracted; records outside it stay as they are.
        """
        plan = self._plan_edit(code, version, part, key, where, last)
        report = self.ingest(plan.facts, origin=f"cell {part} (checkpoint {version})")
        return plan, report

    def _plan_edit(
        self,
        code: str,
        version: int,
        part: str,
        key: str | Iterable[str] | None,
        where: str | None,
        last: int | None,
    ) -> EditPlan:
        from uac_kernel.checkpoints.edits import Selection, plan_edit

        self._sync()
        cp = self.checkpoints.get(version)
        base = self.state_at_seq(cp.seq)
        sel = Selection.of(key, where, last)
        selected = self._select(base, part, sel, cp.version)
        # The selection is part of what the cell says: the same code under another selection
        # plans other facts, so its correction events must not share their source ids.
        scope = f"|{sel!r}" if sel else ""
        digest_of = f"{self.user}|{version}|{part}{scope}|{code}"
        return plan_edit(base, self.state, code, part, digest_of, selected)

    def define_rule(self, r: Rule, source: str) -> AlertChange:
        """Put a rule written in a notebook in force, and log its source as a ``rule`` event."""
        digest = hashlib.sha256(source.encode()).hexdigest()[:16]
        event = InputEvent(
            "notebook",
            1,
            self.state.now or datetime(1970, 1, 1),
            "rule",
            f"rule:{r.name}:{digest}",
            {"name": r.name, "source": source},
        )
        # a rule's source names its code: one logged before (at another ts) is not appended again
        if not self.store.logged_sources(self.user, [f"rule:{r.name}:{digest}"]):
            self.append_parsed([event])
        # the event as logged
        row = self.store.con.execute(
            "SELECT max(user_seq) FROM events WHERE user_id = ? AND kind = 'rule' AND source = ?",
            [self.user, event.source],
        ).fetchone()
        change = self.add_rule(r)
        if row and row[0] is not None:
            self._defined[r.name] = int(row[0])
        else:
            self._defined.pop(r.name, None)
        return change

    def stored_rules(self) -> list[dict[str, Any]]:
        """Rules defined in notebooks, as logged (name and source). They are not run on open:
        their code is shown so you can re-run the cell that defines them if you trust it."""
        latest: dict[str, dict[str, Any]] = {}
        for ev in self.store.events(self.user, kinds=["rule"]):
            latest[ev.payload["name"]] = ev.payload
        return list(latest.values())

    # -- what-ifs ---------------------------------------------------------------------------

    @property
    def expressions(self) -> list[tuple[str, str]]:
        """(label, expression) of what this session asked, oldest first: each ``eval``
        expression, and the code that answered each ``ask`` question (labelled by it). A
        what-if re-runs them (see ``whatif``)."""
        return [(label, expr) for expr, label in self._asked.items()]

    def _remember(self, label: str, expr: str) -> None:
        self._asked.pop(expr, None)
        self._asked[expr] = label
        while len(self._asked) > ASKED_MOST:
            del self._asked[next(iter(self._asked))]

    def whatif(
        self,
        events: str | Path | Iterable[dict[str, Any]],
        *,
        as_of: datetime | date | str | None = None,
        expressions: Sequence[str] | dict[str, str] | None = None,
        format: str = "jsonl",
        origin: str = "<what-if>",
        progress: bool | None = None,
    ) -> WhatIf:
        """What appending ``events`` (a file, or event objects) would change, without
        appending them: records added, changed and retracted, alerts raised, cleared or
        changing severity, and the answers of ``expressions`` (default: ``expressions``, this
        session's) before → after. Nothing is written and no model is called; the events are
        checked as ``ingest`` checks them (an ``EventError`` names the bad one).

        With ``as_of`` (a date-time or ISO text) they go in at that moment of the past and the
        later log is replayed on top; the report's ``timeline`` holds when each alert would
        have stood, beside the real run's (see ``uac_kernel.engine.whatif``). Its cost grows with
        the log; a what-if of the present costs the events and the rules they touch.
        """
        from uac_kernel.engine.whatif import WhatIf, event_dict, moment, whatif_now, whatif_past

        clock = Stopwatch()
        with no_gc():
            batch = list(read_input(events, origin, format, None, self.limits))
        clock.lap("parse")
        self._sync()
        fresh, repeated = self._fresh(batch)
        report = WhatIf(
            user=self.user,
            events=[event_dict(ev) for ev in batch],
            new=len(fresh),
            skipped=len(batch) - len(fresh) - repeated,
            repeated=repeated,
        )
        asked = self._expressions(expressions)
        answers = (lambda trial: self._answers(trial, asked)) if asked else None

        def plan(state: State) -> list[NewEvent]:
            return self._plan(state, fresh)

        if as_of is None:
            rules_of = self._constraint_rules
            whatif_now(report, self.state, self.runner, rules_of, plan, answers, clock)
        else:
            report.as_of = moment(as_of)
            own = set(self._constraint_rules.values())
            rules = [r for r in self.runner.rules.values() if r.name not in own]
            history = list(self.store.events(self.user))
            head = self.state.seq
            whatif_past(report, history, head, self.user, rules, plan, answers, clock, progress)
        report.seconds = clock.laps
        return report

    def apply_whatif(self, whatif: WhatIf) -> IngestReport:
        """Append the events of ``whatif`` for real, through ``ingest``: checked again against
        the log as it is now (it may have moved since), in one batch, then the rules run and
        their alerts are logged. Events appended since the what-if are skipped as usual."""
        if whatif.user != self.user:
            raise QueryError(
                f"this what-if is of user {whatif.user!r}, not {self.user!r}; apply it with a "
                "workbench of that user"
            )
        when = f" as of {whatif.as_of.isoformat()}" if whatif.as_of is not None else ""
        return self.ingest(whatif.events, origin=f"what-if{when}")

    def preview_edit(
        self,
        code: str,
        *,
        version: int,
        part: str,
        key: str | Iterable[str] | None = None,
        where: str | None = None,
        last: int | None = None,
        expressions: Sequence[str] | dict[str, str] | None = None,
    ) -> tuple[EditPlan, WhatIf]:
        """What ``apply_edit`` with the same arguments would do, as a what-if: the plan of
        correction facts and the report of what they would change. Nothing is appended; the
        plan's facts are what ``apply_edit`` (or ``ingest``) would append."""
        plan = self._plan_edit(code, version, part, key, where, last)
        origin = f"cell {part} (checkpoint {version})"
        return plan, self.whatif(plan.facts, expressions=expressions, origin=origin)

    def _expressions(self, given: Sequence[str] | dict[str, str] | None) -> list[tuple[str, str]]:
        if given is None:
            return self.expressions
        if isinstance(given, dict):
            return [(str(label), expr) for label, expr in given.items()]
        if isinstance(given, str):
            return [(given, given)]
        return [(expr, expr) for expr in given]

    def _plan(self, state: State, fresh: Sequence[InputEvent]) -> list[NewEvent]:
        """The events to append for ``fresh``, checked against ``state`` (``engine.plan``)."""
        own = set(self._constraint_rules.values())
        taken = [n for n in self.runner.rules if n not in own]
        return plan_events(
            state, fresh, self.limits, propose_bindings=self.propose_bindings, taken=taken
        )

    def _answers(self, trial: State, asked: list[tuple[str, str]]) -> list[AnswerChange]:
        """Each expression run over the state and over the what-if's ``trial``, in the sandbox."""
        from uac_kernel.engine.whatif import answer_changes

        materialise(self.state)  # the sandboxes fork: they cannot read the store
        ns = namespace(trial)
        ns["search"] = search_function(self.search_index, [])
        return answer_changes(asked, self._sandbox(), ns)

    # -- reading ----------------------------------------------------------------------------

    def state_at_seq(self, seq: int) -> State:
        if seq == self.state.seq:
            return self.state
        return fold(self.user, self.store.events(self.user, upto_seq=seq))

    def versions(self, type_name: str, key: str) -> list[Record]:
        """Every version of one record, oldest first; an unknown type or key is a
        ``QueryError`` that suggests the closest name."""
        if type_name not in self.state.types:
            types = sorted(self.state.types)
            raise QueryError(
                f"no record type {type_name!r}.{did_you_mean(type_name, types)} "
                f"Types: {', '.join(types) or 'none yet'}"
            )
        if not (found := self.state.versions(type_name, key)):
            keys = sorted({r.key for r in self.state.history(type_name)})
            raise QueryError(f"no {type_name} with key {key!r}.{did_you_mean(key, keys)}")
        return found

    def as_of(self, ts: datetime | str) -> State:
        """The state as it was at ``ts``: the fold of every event dated at or before it."""
        when = datetime.fromisoformat(ts) if isinstance(ts, str) else ts
        return fold(self.user, self.store.events(self.user, until_ts=when))

    def eval(self, expr: str, *, cpu_seconds: float = 5.0, memory_mb: int = 1024) -> Any:
        """Evaluate a Python expression over the state in the sandbox; returns plain data.

        Queries over an unchanged state share one warm, jailed worker process (forked at the
        first of them), so only the first pays for the fork; see ``sandbox.WarmSandbox``.
        """
        self._sync()
        sandbox = self._sandbox(records=reads_records(expr))
        value = sandbox.evaluate(expr, cpu_seconds=cpu_seconds, memory_mb=memory_mb)
        self._remember(expr, expr)
        return value

    def _sandbox(self, records: bool = True) -> WarmSandbox:
        """The warm sandbox for the current state version; a new one (and worker) once the state
        has changed. Every change of the state or of the search index advances ``state.seq``.
        With ``records`` the worker holds every record (one opened from a snapshot reads them
        first); without, it may hold only those read so far."""
        if records and materialise(self.state):
            self._drop_sandbox()
        if self._warm is not None and self._warm_version == (self.state, self.state.seq):
            return self._warm
        self._drop_sandbox()
        ns = namespace(self.state)
        ns["search"] = search_function(self.search_index, [])
        self._warm = WarmSandbox(ns)
        self._warm_version = (self.state, self.state.seq)
        return self._warm

    def _drop_sandbox(self) -> None:
        if self._warm is not None:
            self._warm.close()
        self._warm = self._warm_version = None

    @property
    def search_index(self) -> LogSearch:
        """BM25 over this user's utterances; built on first use, then grown by each ingest."""
        if self._search is None:
            index = LogSearch()
            for ev in self.store.events(self.user, kinds=["utterance"]):
                index.add(ev.seq, ev.ts, ev.payload["speaker"], ev.payload["text"], ev.source)
            self._search = index
        return self._search

    # -- the model ------------------------------------------------------------------------

    @property
    def model(self) -> ModelClient:
        """The model client (settings from the constructor, else the environment)."""
        from uac_kernel.model.client import ModelClient, ModelSettings

        if self._model is None:
            settings = self._model_settings or ModelSettings.resolve()
            if settings.offline and not settings.model:
                # Offline replay with no model named: the store remembers the model of its
                # recorded calls; the most recent one's (this user's first) is replayed.
                from uac_kernel.model.client import recorded_model

                remembered = recorded_model(self.store, self.user)
                if remembered:
                    settings = dataclasses.replace(settings, model=remembered)
            self._model = ModelClient(self.store, settings)
        return self._model

    def extract(
        self,
        *,
        batch_size: int = 10,
        max_chars: int = 6000,
        progress: bool | None = None,
        limits: ExtractionLimits | None = None,
    ) -> ExtractionReport:
        """Turn pending utterances into typed facts with the model, then checkpoint.

        A batch whose answer stays invalid after one retry (an answer over a cap of ``limits``
        is invalid) stays pending; one that would change much of what is known is held for
        review (``review``, ``accept``, ``reject``). Nothing is lost: the call record keeps
        every answer.
        """
        from uac_kernel.model.pipeline import extract_pending

        report = extract_pending(
            self.store,
            lambda: self.state,
            lambda: self.model,
            self.append_parsed,
            batch_size=batch_size,
            max_chars=max_chars,
            progress=progress,
            limits=limits,
            input_limits=self.limits,
        )
        if report.applied:
            self.checkpoint()
        return report

    def ask(self, question: str) -> Answer:
        """Answer a question by code the model writes over the schema; runs in the sandbox."""
        self._sync()
        materialise(self.state)  # its code runs in a forked sandbox, which cannot read the store
        answer = answer_question(question, self.state, self.search_index, self.store, self.model)
        if answer.ok and answer.expression:
            self._remember(question, answer.expression)
        return answer

    def sql(self, query: str, *, timeout: float | None = None) -> SqlResult:
        """Run SQL over one table per record type (``Trip``, ``Trip_history``), stopped after
        ``timeout`` seconds (default 30, env UAC_SQL_TIMEOUT; see ``sql.view`` for the limits)."""
        self._sync()
        if self._sql is None:  # a current table alone may come from this state's snapshot
            self._sql = SqlView(
                store=self.store, stored=stored_for(lambda: (self.state, self._snap))
            )
        return self._sql.query(self.state, query, timeout=timeout)

    def sql_tables(self) -> dict[str, tuple[str, str]]:
        """Each record type's (current, history) table in ``sql``: its own name unless that would
        clash, ignoring case, with an earlier type's table; then ``Trip_2``. SQL table
        ``uac_tables`` lists the same."""
        return table_names(t for t in self.state.schema.types if t in self.state.types)

    def alerts(self) -> list[Alert]:
        """The alerts standing now, most severe first."""
        self._sync()
        return self.runner.standing()

    def alert_history(self) -> list[LoggedEvent]:
        """Every time an alert was raised or cleared, in log order."""
        return list(self.store.events(self.user, kinds=["alert"]))

    def log(
        self,
        *,
        kinds: Sequence[str] | None = None,
        after_seq: int = 0,
        limit: int | None = None,
        last: int | None = None,
    ) -> list[LoggedEvent]:
        """Events of this user in log order: the first ``limit``, or the newest ``last`` (not
        both); a kind no event can have is a ``QueryError``."""
        check_kind(self.store, *(kinds or ()))
        got = self.store.events(self.user, after_seq=after_seq, kinds=kinds, limit=limit, last=last)
        return list(got)

    def verify(self, *, head: str | None = None, all_users: bool = False) -> VerifyReport:
        """Check this user's chains of events, model calls and checkpoints (every user's with
        ``all_users``), and with ``head`` (from ``head()`` or `uac head`) that they still pass
        through it."""
        from uac_kernel.log.integrity import read_heads, verify

        kept = read_heads(head, self.user) if head is not None else None
        return verify(self.store, None if all_users else self.user, kept)

    def forget(
        self,
        *,
        type: str | None = None,
        key: str | None = None,
        source: str | None = None,
        text: str | None = None,
        dry_run: bool = False,
    ) -> ForgetPlan:
        """Erase a record (``type`` and ``key``), the events of a ``source``, or everything that
        holds a ``text``, from the log, model calls, checkpoints, search and the store file; see
        ``uac_kernel.checkpoints.forget``. With ``dry_run`` nothing changes: the plan says what would go."""
        from uac_kernel.checkpoints.forget import forget, plan_forget

        if type is not None and key is None:
            raise QueryError(f"say which {type} record to forget: pass its key too")
        if self.store.read_only and not dry_run:
            raise StoreError(
                f"{self.store.path} is open read-only; open it without read_only to forget "
                "(a dry run works read-only)"
            )
        from uac_kernel.checkpoints.codegen import own_rule_sources

        in_force = own_rule_sources(self.runner.rules.values())
        plan = plan_forget(
            self.store, self.user, type=type, key=key, source=source, text=text, in_force=in_force
        )
        if dry_run:
            return plan
        if plan.empty:
            # Nothing left to erase; a forget cut short after its erasure committed may have
            # left bytes in the file's free blocks, so rewrite it all the same.
            self.store.compact()
            return plan
        forget(self.store, plan)
        # the rules in force whose own source holds the text go now; the reload takes out
        # those whose logged definition the forget erased (``_forgotten_rules``)
        self.runner = RuleRunner(
            r for r in self.runner.rules.values() if r.name not in plan.holding
        )
        for name in plan.holding:
            self._defined.pop(name, None)
        self._drop_sandbox()
        self._sql, self._search = None, None
        self._load()
        return plan

    def head(self) -> str:
        """This user's chain head, to keep elsewhere and check with ``verify(head=...)``."""
        from uac_kernel.log.integrity import heads

        found = heads(self.store, self.user)
        return str(found[self.user]) if self.user in found else ""

    # -- review of held model answers -------------------------------------------------------

    def review(self) -> list[HeldBatch]:
        """The model answers held for review, oldest first, each operation shown as the record
        before and after it (see ``uac_kernel.model.review``)."""
        self._sync()
        from uac_kernel.model.review import held_batches

        return held_batches(self.store, self.state)

    def accept(self, batch: int, only: Collection[int] | None = None) -> IngestReport:
        """Apply held ``batch`` — the operations numbered ``only`` (from 1), else all — after
        validating them against the state now; logs the decision with them, runs the rules and
        checkpoints. An operation that no longer fits is an ``EventError`` and nothing is
        appended."""
        from uac_kernel.model.review import accept_events

        report = self.append_parsed(accept_events(self.store, self.state, batch, only, self.limits))
        self.checkpoint()
        return report

    def reject(self, batch: int) -> None:
        """Reject held ``batch``: nothing of it is applied, the decision is logged, and its
        turns are no longer pending (the answer stays in the call record)."""
        from uac_kernel.model.review import reject_event

        self.append_parsed([reject_event(self.store, self.state, batch)])
