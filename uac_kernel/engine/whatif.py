"""What-ifs: hypothetical events folded onto a layer over the state, never appended.

``Workbench.whatif(events)`` validates events as ``ingest`` does (same parsers, limits and
checks against the state), folds them onto a ``Trial`` of the state, runs the rules they
affect on it, and reports what would change: records, alerts, and the answers to the
expressions and questions of the session. Nothing is written to the store and no model is
called; ``Workbench.apply_whatif`` appends the same events through ``ingest``.

With ``as_of`` the events go in at that moment of the past: the log is folded up to it (every
schema event with it, so types and fields are known), the events are inserted, and the later
log is replayed on top, the rules running after each day of it; the same replay without them is
the real run. Both runs use the rules in force now, so the two timelines differ only by the
what-if. A later event that no longer applies on top of the what-if (it adds a record the
what-if already added, changes one it retracted) is skipped and listed in ``conflicts``.
A past what-if's ``raised``, ``cleared`` and ``updated`` compare the alerts standing at the end
of the two runs; its ``records`` are what the events changed at the moment they went in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any, Literal

import yaml

from uac_kernel.core.display import plural, printable, show
from uac_kernel.core.errors import ConstraintError, EventError, FoldError, QueryError, UacError
from uac_kernel.core.records import Record
from uac_kernel.core.timing import Stopwatch, no_gc
from uac_kernel.engine.after import after_events, put_all_in_force
from uac_kernel.ingest.events import InputEvent, json_value
from uac_kernel.log.store import LoggedEvent, NewEvent
from uac_kernel.rules.engine import (
    SEVERITIES,
    Alert,
    AlertChange,
    ClearedAlert,
    Rule,
    RuleRunner,
    as_cleared,
)
from uac_kernel.sandbox import WarmSandbox
from uac_kernel.state.fold import State
from uac_kernel.state.query import UserView
from uac_kernel.state.trial import Trial

__all__ = [
    "AlertSpan",
    "AnswerChange",
    "RecordChange",
    "WhatIf",
    "answer_changes",
    "event_dict",
    "events_from_text",
    "moment",
    "whatif_now",
    "whatif_past",
]

# The bounds of a cell's text: what a file of events may hold per line, times a few lines.
MAX_TEXT_CHARS = 8 << 20
MAX_DEPTH = 64
_RECORD_FIELDS = frozenset(Record.model_fields)


@dataclass(frozen=True)
class RecordChange:
    """One record a what-if adds, changes or retracts, with its own fields before and after
    (unset ones left out) and the names of those that differ."""

    type: str
    key: str
    change: Literal["added", "changed", "retracted"]
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    fields: tuple[str, ...]


@dataclass(frozen=True)
class AnswerChange:
    """An expression of the session (or a question's code) run before and after the what-if."""

    label: str
    expression: str
    before: Any
    after: Any
    error_before: str = ""
    error_after: str = ""

    @property
    def changed(self) -> bool:
        return (self.before, self.error_before) != (self.after, self.error_after)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able data (dates as ISO text)."""
        return {
            "label": self.label,
            "expression": self.expression,
            "before": _plain(self.before),
            "after": _plain(self.after),
            "error_before": self.error_before,
            "error_after": self.error_after,
            "changed": self.changed,
        }


@dataclass(frozen=True)
class AlertSpan:
    """A stretch of time an alert stood in one run of a past what-if (end None: it still does)."""

    run: Literal["real", "what-if"]
    id: str
    rule: str
    severity: str
    message: str
    start: datetime
    end: datetime | None
    # ``Type key`` of each record the alert rests on: what a chart labels its row by.
    about: tuple[str, ...] = ()


@dataclass
class WhatIf:
    """What folding ``events`` would change; see the module doc."""

    user: str
    events: list[dict[str, Any]]
    as_of: datetime | None = None
    new: int = 0
    skipped: int = 0
    # Events identical to an earlier one of the what-if (same source and content).
    repeated: int = 0
    # The log positions the what-if's events take (past the log's head: none is in the log).
    first_seq: int | None = None
    schema: list[str] = field(default_factory=list)
    # The bindings the events would make or change (``Binding.describe``), and those they
    # would take out, as "unbound ...".
    vocabulary: list[str] = field(default_factory=list)
    records: list[RecordChange] = field(default_factory=list)
    raised: list[Alert] = field(default_factory=list)
    cleared: list[ClearedAlert] = field(default_factory=list)
    updated: list[Alert] = field(default_factory=list)
    # The severity each updated alert had before, by alert id.
    was: dict[str, str] = field(default_factory=dict)
    answers: list[AnswerChange] = field(default_factory=list)
    timeline: list[AlertSpan] = field(default_factory=list)
    # A past what-if: the log's clock at the end of the replay (where standing spans end).
    log_end: datetime | None = None
    conflicts: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    def escalated(self) -> list[tuple[str, str, Alert]]:
        """(severity before, severity after, alert) of each alert that would change severity."""
        return [(self.was.get(a.id, "?"), a.severity, a) for a in self.updated]

    @property
    def changed_answers(self) -> list[AnswerChange]:
        return [a for a in self.answers if a.changed]

    def summary(self) -> str:
        counts = {c: sum(r.change == c for r in self.records) for c in ("added", "changed")}
        counts["retracted"] = sum(r.change == "retracted" for r in self.records)
        records = ", ".join(f"{n} {c}" for c, n in counts.items() if n) or "no record changes"
        when = f" as of {self.as_of.isoformat(sep=' ')}" if self.as_of is not None else ""
        text = f"what-if{when}: {plural(self.new, 'event')}; {records}"
        held = [f"{self.skipped} already in the log"] if self.skipped else []
        if self.repeated:
            held.append(f"{self.repeated} repeated in the file")
        if held:
            text += f" ({', '.join(held)})"
        text += f"; alerts: {len(self.raised)} raised, {len(self.cleared)} cleared"
        if self.updated:
            text += f", {len(self.updated)} changed severity"
        if self.answers:
            text += f"; {len(self.changed_answers)} of {plural(len(self.answers), 'answer')} change"
        return text + "; nothing was appended"

    def text(self) -> str:
        """The report as plain text, one item a line (strings from the log shown printable)."""
        lines = [self.summary()]
        lines += [f"  schema: {printable(s)}" for s in self.schema]
        lines += [f"  vocabulary: {printable(v)}" for v in self.vocabulary]
        for r in self.records:
            lines.append(f"  {r.change} {printable(r.type)} {printable(repr(r.key))}")
            for name in r.fields:
                before = show((r.before or {}).get(name), "unset")
                after = show((r.after or {}).get(name), "unset")
                if r.change == "added":
                    lines.append(f"      {printable(name)} = {printable(after)}")
                elif r.change == "retracted":
                    lines.append(f"      was {printable(name)} = {printable(before)}")
                else:
                    lines.append(
                        f"      {printable(name)}: {printable(before)} → {printable(after)}"
                    )
        for verb, alerts in (("would raise", self.raised), ("would clear", self.cleared)):
            for a in alerts:
                lines.append(f"  {verb} [{a.severity}] {printable(a.rule)}: {printable(a.message)}")
                if isinstance(a, ClearedAlert) and a.reason:
                    lines.append(f"      because {printable(a.reason)}")
                lines += [
                    f"      evidence: {printable(e.type)} {printable(repr(e.key))}"
                    for e in a.evidence
                ]
        for was, now, a in self.escalated():
            lines.append(f"  would go {was} → {now}: {printable(a.rule)}: {printable(a.message)}")
        for ans in self.answers:
            mark = "changes" if ans.changed else "same"
            lines.append(
                f"  answer ({mark}) {printable(ans.label)}: "
                f"{printable(_shown(ans.before, ans.error_before))} → "
                f"{printable(_shown(ans.after, ans.error_after))}"
            )
        for c in self.conflicts:
            lines.append(f"  conflict: {printable(c)}")
        if self.timeline:
            lines.append("  timeline (real | what-if):")
            for s in self.timeline:
                end = s.end.isoformat(sep=" ") if s.end is not None else "still standing"
                lines.append(
                    f"    {s.run:<8} [{s.severity}] {printable(s.rule)}: "
                    f"{s.start.isoformat(sep=' ')} → {end}"
                )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-able data (dates and date-times as ISO text)."""
        return {
            "user": self.user,
            "as_of": _plain(self.as_of),
            "events": self.events,
            "new": self.new,
            "skipped": self.skipped,
            "repeated": self.repeated,
            "first_seq": self.first_seq,
            "schema": list(self.schema),
            "records": [
                {
                    "type": r.type,
                    "key": r.key,
                    "change": r.change,
                    "before": _plain(r.before),
                    "after": _plain(r.after),
                    "fields": list(r.fields),
                }
                for r in self.records
            ],
            "raised": [a.model_dump(mode="json") for a in self.raised],
            "cleared": [a.model_dump(mode="json") for a in self.cleared],
            "updated": [
                {**a.model_dump(mode="json"), "was": self.was.get(a.id)} for a in self.updated
            ],
            "answers": [a.to_dict() for a in self.answers],
            "timeline": [
                {
                    "run": s.run,
                    "id": s.id,
                    "rule": s.rule,
                    "severity": s.severity,
                    "message": s.message,
                    "start": _plain(s.start),
                    "end": _plain(s.end),
                }
                for s in self.timeline
            ],
            "log_end": _plain(self.log_end),
            "conflicts": list(self.conflicts),
            "summary": self.summary(),
        }

    def __repr__(self) -> str:
        return f"<WhatIf {self.summary()}>"


def _shown(value: Any, error: str, most: int = 200) -> str:
    if error:
        return f"error: {error}"
    text = repr(value)
    return text if len(text) <= most else text[: most - 3] + "..."


def _plain(value: Any) -> Any:
    """JSON-able data: dates as ISO text, tuples and sets as lists, other objects as text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    return str(value)


# -- events in and out -------------------------------------------------------------------------


def event_dict(ev: InputEvent) -> dict[str, Any]:
    """A parsed event as the JSON object that parses back to it (its source included, so
    appending it later is skipped if it was appended since)."""
    return {"kind": ev.kind, "ts": ev.ts.isoformat(), "source": ev.source, **ev.payload}


def events_from_text(text: str, origin: str = "<cell>") -> list[dict[str, Any]]:
    """Event objects from a cell's text: JSON Lines, a JSON array, or YAML (a list of mappings,
    or mappings separated by ``---``). Each object is then checked as ``ingest`` checks it."""
    if len(text) > MAX_TEXT_CHARS:
        raise EventError(
            f"{len(text):,} characters; a what-if cell holds at most {MAX_TEXT_CHARS:,}: put the "
            "events in a file and pass its path",
            origin=origin,
        )
    stripped = text.strip()
    if not stripped:
        raise EventError(
            'no events: write one JSON object a line, like {"kind": "fact", ...}, or YAML',
            origin=origin,
        )
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    if stripped.startswith("{") and all(line.lstrip().startswith("{") for _, line in lines):
        out = []
        for n, line in lines:
            obj = _json(line, origin, n)
            out.append(obj)
        return out
    if stripped.startswith("["):
        data = _json(stripped, origin, None)
        if not isinstance(data, list):
            raise EventError("a JSON array of event objects was expected", origin=origin)
        return data
    return _yaml(text, origin)


def _json(text: str, origin: str, line: int | None) -> Any:
    """As a line of an events file is read (``events.json_value``): exact integers, a key
    given twice refused."""
    try:
        data = json_value(text.encode("utf-8", "surrogatepass"))
    except RecursionError:
        raise EventError(_too_deep(), origin=origin, line=line) from None
    except ValueError as exc:
        raise EventError(str(exc), origin=origin, line=line) from None
    _check_depth(data, origin, line)
    return data


def _too_deep() -> str:
    return f"lists and objects nest more than {MAX_DEPTH} levels deep; an event nests a few"


def _check_depth(data: Any, origin: str, line: int | None) -> None:
    todo = [(data, 1)]
    while todo:
        value, depth = todo.pop()
        if isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                raise EventError(_too_deep(), origin=origin, line=line)
            todo.extend(
                (v, depth + 1) for v in (value.values() if isinstance(value, dict) else value)
            )


def _yaml(text: str, origin: str) -> list[dict[str, Any]]:
    from uac_kernel.constraints.files import StrictLoader

    out: list[Any] = []
    try:
        for doc in yaml.load_all(text, Loader=StrictLoader):
            if doc is None:
                continue
            out.extend(doc if isinstance(doc, list) else [doc])
    except RecursionError:
        raise EventError(_too_deep(), origin=origin) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "not YAML"
        raise EventError(
            f"invalid YAML ({problem}); write one JSON object a line, or YAML mappings",
            origin=origin,
            line=mark.line + 1 if mark is not None else None,
        ) from None
    except ConstraintError as exc:  # the loader's own refusals (an alias, a key given twice)
        raise EventError(str(exc), origin=origin) from None
    except ValueError as exc:  # a value the constructor cannot read (an int of 5,000 digits)
        raise EventError(
            f"a value YAML cannot read ({exc}); write it as text", origin=origin
        ) from None
    _check_depth(out, origin, None)
    # YAML reads dates as dates: the event format takes ISO text, as JSON gives it.
    return [_iso(obj) for obj in out]


def _iso(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _iso(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_iso(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return value


def moment(value: Any) -> datetime:
    """A past what-if's moment: a date-time, a date (its midnight) or ISO 8601 text of either;
    an aware one as naive UTC, as event times are kept."""
    when: Any = value
    if isinstance(value, str):
        try:
            when = datetime.fromisoformat(value.strip())
        except ValueError:
            raise QueryError(
                f"as of {printable(repr(value[:40]))}: not an ISO 8601 date or date-time; give "
                "one like 2025-03-01 or 2025-03-01T09:00"
            ) from None
    elif isinstance(value, date) and not isinstance(value, datetime):
        when = datetime.combine(value, datetime.min.time())
    if not isinstance(when, datetime):
        raise QueryError(
            f"as of {printable(repr(value))[:40]}: give a date, a date-time or ISO 8601 text"
        )
    if when.tzinfo is not None:
        try:
            when = when.astimezone(UTC).replace(tzinfo=None)
        except OverflowError:
            raise QueryError(
                f"as of {when.isoformat()}: in UTC it falls outside years 1 to 9999"
            ) from None
    return when


# -- the report ------------------------------------------------------------------------------


def own_fields(rec: Record | None) -> dict[str, Any] | None:
    """A record's own set fields (a trial's record may hold a field its class does not have
    yet, see ``uac_kernel.state.trial``)."""
    if rec is None:
        return None
    return {k: v for k, v in rec.__dict__.items() if k not in _RECORD_FIELDS and v is not None}


def record_changes(trial: Trial) -> list[RecordChange]:
    """What the trial did to each record it touched (a record added and retracted within it
    is left out, as is one whose fields did not change)."""
    out = []
    for name, key, was, now in trial.touched():
        before, after = own_fields(was), own_fields(now)
        if before is None and after is None:
            continue
        if before is None:
            assert after is not None
            out.append(RecordChange(name, key, "added", None, after, tuple(after)))
        elif after is None:
            out.append(RecordChange(name, key, "retracted", before, None, tuple(before)))
        else:
            differ = tuple(
                n for n in dict.fromkeys([*before, *after]) if before.get(n) != after.get(n)
            )
            if differ:
                out.append(RecordChange(name, key, "changed", before, after, differ))
    return out


def schema_growth(base: State, trial: State) -> list[str]:
    """The types and fields the trial adds to the schema."""
    out = []
    for name, fields in trial.schema.types.items():
        had = base.schema.types.get(name)
        if had is None:
            out.append(f"new type {name}")
            had = {}
        out += [f"new field {name}.{f} ({t})" for f, t in fields.items() if f not in had]
    return out


def vocab_growth(base: State, trial: State) -> list[str]:
    """The bindings the trial makes or changes, then those it takes out."""
    had = set(base.vocab.bindings)
    now = trial.vocab.bindings
    out = [b.describe() for b in now if b not in had]
    keys = {b.key for b in now}
    return out + [f"unbound {b.describe()}" for b in base.vocab.bindings if b.key not in keys]


def logged(planned: Sequence[NewEvent], after: int) -> list[LoggedEvent]:
    """The planned events as the log would hold them, numbered past ``after``."""
    now = datetime.now()
    return [
        LoggedEvent(after + i, now, e.ts, e.kind, e.user, e.source, e.payload, "")
        for i, e in enumerate(planned, 1)
    ]


def severities(runner: RuleRunner, alerts: Iterable[Alert]) -> dict[str, str]:
    """The severity each of ``alerts`` stands at in ``runner`` (before a change)."""
    out: dict[str, str] = {}
    for a in alerts:
        was = runner.active.get(a.rule, {}).get(a.id)
        if was is not None:
            out[a.id] = was.severity
    return out


# -- the past --------------------------------------------------------------------------------

# What the replay needs of the workbench: the plan of the what-if's events against a state, and
# the answers of the session's expressions over the what-if's state (in the sandbox).
Plan = Callable[[State], list[NewEvent]]
Answers = Callable[[State], list["AnswerChange"]]


@dataclass
class Run:
    """One run of the replay: its state, rules, the alerts' open spans and the closed ones."""

    name: Literal["real", "what-if"]
    state: State
    runner: RuleRunner
    rules_of: dict[str, str]
    open: dict[str, tuple[Alert, datetime]] = field(default_factory=dict)
    spans: list[AlertSpan] = field(default_factory=list)

    def start(self, when: datetime) -> None:
        for a in self.runner.standing():
            self.open[a.id] = (a, when)

    def note(self, change: AlertChange | None, when: datetime) -> None:
        if change is None:
            return
        for a in [*change.cleared, *change.updated]:
            opened = self.open.pop(a.id, None)
            if opened is not None:
                self._close(opened, when)
        for a in [*change.raised, *change.updated]:
            self.open[a.id] = (a, when)

    def _close(self, opened: tuple[Alert, datetime], end: datetime | None) -> None:
        a, start = opened
        about = tuple(f"{e.type} {e.key}" for e in a.evidence)
        self.spans.append(
            AlertSpan(self.name, a.id, a.rule, a.severity, a.message, start, end, about)
        )

    def finish(self) -> list[AlertSpan]:
        for opened in self.open.values():
            self._close(opened, None)
        self.open = {}
        order: dict[str, int] = {s: i for i, s in enumerate(SEVERITIES)}
        return sorted(self.spans, key=lambda s: (s.start, order.get(s.severity, 9), s.rule, s.id))


def days(events: Sequence[LoggedEvent]) -> Iterator[list[LoggedEvent]]:
    """The events in log order, cut where the day of their time changes."""
    group: list[LoggedEvent] = []
    for ev in events:
        if group and ev.ts.date() != group[-1].ts.date():
            yield group
            group = []
        group.append(ev)
    if group:
        yield group


def fold_over(
    state: State, events: Iterable[LoggedEvent], conflicts: list[str], real_seq: dict[int, int]
) -> None:
    """Fold ``events`` into ``state``, skipping each that does not apply there and saying why
    in ``conflicts`` (a log is folded here in the order of its times, not of its writing: a
    record retracted, then added again dated earlier, meets itself)."""
    for ev in events:
        try:
            state._apply(ev)
        except FoldError as exc:
            p = ev.payload
            what = " ".join(str(p.get(f, "")) for f in ("op", "type")).strip()
            key = p.get("key")
            what += f" {key!r}" if key is not None else ""
            reason = str(exc).split(": ", 1)[-1]
            conflicts.append(
                f"log event {real_seq.get(ev.seq, ev.seq)} ({what.strip() or ev.kind}) would "
                f"not apply: {reason}"
            )
    state._settle()


def replay_step(
    run: Run,
    events: Sequence[LoggedEvent],
    conflicts: list[str],
    real_seq: dict[int, int],
    at: datetime | None = None,
) -> None:
    """Fold one day of the later log into a run (what no longer applies is skipped and said
    in ``conflicts``), run the rules it affects and note the alerts' spans."""
    state = run.state
    before = state.now
    fold_over(state, events, conflicts, real_seq)
    change = after_events(state, run.runner, run.rules_of, before)
    run.note(change, at or state.now or events[-1].ts)


def renumbered(alert: Alert, real_seq: dict[int, int]) -> Alert:
    """``alert`` with the replay's event numbers of its evidence turned back into the log's."""
    evidence = tuple(
        e.model_copy(update={"sources": tuple(real_seq.get(s, s) for s in e.sources)})
        for e in alert.evidence
    )
    return alert.model_copy(update={"evidence": evidence})


# -- the what-ifs ------------------------------------------------------------------------------


def whatif_now(
    report: WhatIf,
    state: State,
    runner: RuleRunner,
    rules_of: dict[str, str],
    plan: Plan,
    answers: Answers | None,
    clock: Stopwatch,
) -> None:
    """Fill ``report`` with what appending the planned events to ``state`` now would change:
    folded into a layer over it (``Trial``), the rules run on a copy of ``runner``."""
    planned = plan(state)
    clock.lap("validate")
    trial = Trial(state)
    events = logged(planned, state.seq)
    report.first_seq = events[0].seq if events else None
    with no_gc():
        trial.apply_all(events)
    clock.lap("fold")
    change = after_events(trial, runner.copy(), dict(rules_of), state.now)
    if change is not None:
        report.raised, report.cleared, report.updated = (
            change.raised,
            change.cleared,
            change.updated,
        )
        report.was = severities(runner, change.updated)
    report.records = record_changes(trial)
    report.schema = schema_growth(state, trial)
    report.vocabulary = vocab_growth(state, trial)
    clock.lap("rules")
    if answers is not None:
        report.answers = answers(trial)
        clock.lap("answers")


def whatif_past(
    report: WhatIf,
    history: Sequence[LoggedEvent],
    head: int,
    user: str,
    rules: Iterable[Rule],
    plan: Plan,
    answers: Answers | None,
    clock: Stopwatch,
    progress: bool | None,
) -> None:
    """Fill ``report`` with what the planned events would have changed at ``report.as_of``:
    the log (``history``, up to seq ``head``) replayed day by day twice from that moment, with
    them and without, the alerts' spans of both runs kept (``rules``: those in force that are
    not a constraint's; the constraints come from the log)."""
    from tqdm.auto import tqdm

    assert report.as_of is not None
    when = report.as_of
    # Log order, renumbered: a log's times need not follow its order, so the events
    # dated up to the moment and those after it interleave in it.
    # Every schema event goes first, so the types and fields of the log are known to the
    # what-if's events; one dated later is dated at the moment, not to move the clock.
    early = [
        e if e.ts <= when else e._replace(ts=when)
        for e in history
        if e.ts <= when or e.kind == "schema"
    ]
    late = [e for e in history if not (e.ts <= when or e.kind == "schema")]
    real_seq: dict[int, int] = {}

    def numbered(events: Iterable[LoggedEvent], start: int) -> list[LoggedEvent]:
        out = []
        for i, e in enumerate(events, start):
            real_seq[i] = e.seq
            out.append(e._replace(seq=i))
        return out

    early = numbered(early, 1)
    state = State(user)
    real_conflicts: list[str] = []
    with no_gc():
        fold_over(state, early, real_conflicts, real_seq)
    state.take_changed_types()
    state.take_changed_keys()
    state.take_changed_vocab()
    runner = RuleRunner(rules)
    rules_of: dict[str, str] = {}
    put_all_in_force(state, runner, rules_of)
    runner.run(UserView(state), None)
    planned = plan(state)
    clock.lap("validate")
    inserted = logged(planned, len(early))
    for i, e in enumerate(inserted, 1):
        real_seq[e.seq] = head + i
    report.first_seq = head + 1 if inserted else None
    late = numbered(late, len(early) + len(inserted) + 1)
    groups = list(days(late))
    bar = tqdm(
        total=2 * len(groups) + 1,
        desc="replaying",
        unit="day",
        disable=None if progress is None else not progress,
    )
    with bar:
        trial = Trial(state)
        what = Run("what-if", trial, runner.copy(), dict(rules_of))
        what.start(when)
        replay_step(what, inserted, report.conflicts, real_seq, at=when)
        report.records = record_changes(trial)
        report.schema = schema_growth(state, trial)
        bar.update()
        for group in groups:
            replay_step(what, group, report.conflicts, real_seq)
            bar.update()
        clock.lap("what-if run")
        if answers is not None:
            report.answers = answers(trial)
            clock.lap("answers")
        ended = {a.id: a for a in what.runner.standing()}
        report.timeline = what.finish()
        # The layer reads through to the state, which the real run now changes.
        del trial, what
        real = Run("real", state, runner, rules_of)
        real.start(when)
        for group in groups:
            replay_step(real, group, real_conflicts, real_seq)
            bar.update()
        standing = {a.id: a for a in real.runner.standing()}
        report.log_end = state.now
        report.timeline += real.finish()
        # What does not apply in both runs is the log's own order, not the what-if's doing.
        report.conflicts = [c for c in report.conflicts if c not in real_conflicts]
        report.conflicts += [f"in the real run too: {c}" for c in real_conflicts]
        clock.lap("real run")
    report.raised = [renumbered(a, real_seq) for i, a in ended.items() if i not in standing]
    report.cleared = [
        as_cleared(renumbered(a, real_seq), "it does not stand at the end of the what-if's run")
        for i, a in standing.items()
        if i not in ended
    ]
    report.updated = [
        renumbered(a, real_seq)
        for i, a in ended.items()
        if i in standing and standing[i].severity != a.severity
    ]
    report.was = {a.id: standing[a.id].severity for a in report.updated}


def answer_changes(
    asked: list[tuple[str, str]], now: WarmSandbox, trial: dict[str, Any]
) -> list[AnswerChange]:
    """Each (label, expression) of ``asked`` run in the sandbox ``now`` of the state and in one
    over the what-if's query namespace ``trial``: the answers before and after."""

    def run(box: WarmSandbox, expr: str) -> tuple[Any, str]:
        try:
            return box.evaluate(expr), ""
        except UacError as exc:
            return None, str(exc)

    before = [run(now, expr) for _, expr in asked]
    with WarmSandbox(trial, idle_seconds=None) as box:
        after = [run(box, expr) for _, expr in asked]
    return [
        AnswerChange(label, expr, b, a, eb, ea)
        for (label, expr), (b, eb), (a, ea) in zip(asked, before, after, strict=True)
    ]
