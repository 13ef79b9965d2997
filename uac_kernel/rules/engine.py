"""Rules over the typed state, and the alerts they raise.

A rule is an ordinary function of the ``user`` view that yields ``Finding``s. It declares the
record types it reads (``watch``) or the roles they play for the user (``roles``: a shipped
rule reads ``trip``, whatever the user calls trips), so after a state change only the rules that
read a changed type run again; ``clock=True`` rules also run when the log's clock moves (deadlines). An alert's
id is stable (rule name + what it is about), so the engine can tell a new alert from one that is
still standing, and log when each is raised and when it clears.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, overload

from pydantic import BaseModel, ConfigDict

from uac_kernel.core.errors import RuleError
from uac_kernel.core.records import Record
from uac_kernel.core.schema import MODULE_NAMES
from uac_kernel.core.tables import SEVERITIES, Severity
from uac_kernel.rules.cleared import Undone, changed_records, changes, label, what_became
from uac_kernel.rules.parts import EVERY, Partition, Parts, PartView, Wakes
from uac_kernel.state.query import UserView
from uac_kernel.vocab.binding import Binding, Rebinding, Vocabulary
from uac_kernel.vocab.catalogue import CONCEPTS, ROLES
from uac_kernel.vocab.matcher import SILENCING
from uac_kernel.vocab.reads import reads
from uac_kernel.vocab.resolve import noting, using

__all__ = [
    "EVERY",
    "Alert",
    "Cause",
    "ClearedAlert",
    "Evidence",
    "Finding",
    "Rule",
    "RuleRunner",
    "Severity",
    "as_cleared",
    "rule",
    "why_cleared",
]


class Evidence(BaseModel):
    """A record an alert rests on, and the log events behind it."""

    model_config = ConfigDict(frozen=True)

    type: str
    key: str
    sources: tuple[int, ...]


class Alert(BaseModel):
    """An alert raised by a rule."""

    model_config = ConfigDict(frozen=True)

    id: str
    rule: str
    severity: Severity
    category: str
    message: str
    evidence: tuple[Evidence, ...] = ()


class ClearedAlert(Alert):
    """An alert that no longer stands, and why (see ``why_cleared``); logged with its reason."""

    reason: str = ""


@dataclass(frozen=True)
class Finding:
    """What a rule yields: a message and the records it is about.

    ``about`` distinguishes two findings of one rule over the same records (rarely needed);
    ``severity`` overrides the rule's default.
    """

    message: str
    evidence: Sequence[Record] = ()
    severity: Severity | None = None
    about: str = ""


RuleFunc = Callable[[UserView], Iterable[Finding]]


@dataclass(frozen=True)
class Rule:
    """A named rule with the types it reads, its default severity, category and cited source."""

    name: str
    func: RuleFunc = field(compare=False)
    watch: frozenset[str] | None
    severity: Severity = "warning"
    category: str = ""
    source: str = ""
    clock: bool = False
    doc: str = ""
    roles: frozenset[str] = frozenset()
    partition: Partition | None = field(default=None, compare=False)
    wakes: Wakes | None = field(default=None, compare=False)

    def __call__(self, user: UserView) -> Iterable[Finding]:
        with using(user.vocab):
            return list(self.func(user))

    def watches(self, user: UserView) -> frozenset[str] | None:
        """The type names it reads for ``user``: its ``watch`` and the types that play its
        ``roles`` in the user's vocabulary; None for a rule that reads every type."""
        if self.watch is None:
            return None
        if not self.roles:
            return self.watch
        vocab = user.vocab
        return self.watch | {t for r in self.roles for t in vocab.types(r)}

    def alerts(self, user: UserView) -> dict[str, Alert]:
        found: dict[str, Alert] = {}
        vocab = user.vocab
        with using(vocab), noting() as read:
            findings = list(self.func(user))
        for f in findings:
            evidence = tuple(
                Evidence(type=type(r).__name__, key=r.key, sources=r.sources) for r in f.evidence
            )
            types = {e.type for e in evidence}
            message = f.message + _read_note(read, types) + _held_note(vocab, self, types)
            ident = "|".join([f.about, *sorted(f"{e.type}/{e.key}" for e in evidence)])
            alert_id = f"{self.name}:{hashlib.sha256(ident.encode()).hexdigest()[:12]}"
            found[alert_id] = Alert(
                id=alert_id,
                rule=self.name,
                severity=f.severity or self.severity,
                category=self.category,
                message=message,
                evidence=evidence,
            )
        return found


def _read_note(read: set[Binding], types: set[str]) -> str:
    """What an alert's message adds when it rests on bindings beyond the catalogue's: the
    ones its rule read on the types of its evidence (``read Journey.leaves_on as trip.start
    (inferred 0.86)``)."""
    mine = sorted((b for b in read if b.type in types), key=lambda b: (b.type, b.target))
    return f" [read {'; '.join(b.short() for b in mine)}; `uac vocab` says why]" if mine else ""


def _held_note(vocab: Vocabulary, r: Rule, types: set[str]) -> str:
    """What an alert's message adds when a field of its evidence's types is held for review
    under a concept its rule reads: the field may say what would change the alert, and how to
    bind it (``RaceEntry.entryPaid may be record.settled (done): `uac vocab bind ...```)."""
    held = [b for b in vocab.held() if b.field is not None and b.type in types]
    if not held:
        return ""
    read = reads(r)
    notes = []
    for b in sorted((b for b in held if b.target in read), key=lambda b: (b.type, b.field or "")):
        name = f"{b.type}.{b.field}"
        what = CONCEPTS[b.target].meaning.partition(":")[0] if b.target in CONCEPTS else ""
        does = "let it settle alerts" if b.target in SILENCING else "let the rule read it"
        notes.append(
            f"{name} may be {b.target}{f' ({what})' if what else ''}: "
            f"`uac vocab bind {shlex.quote(name)} {b.target}` to {does}"
        )
    return f" ({'; '.join(notes)})" if notes else ""


@overload
def rule(func: RuleFunc, /) -> Rule: ...
@overload
def rule(
    *,
    watch: Iterable[str] | None = None,
    roles: Iterable[str] = (),
    severity: Severity = "warning",
    category: str = "",
    source: str = "",
    clock: bool = False,
    name: str | None = None,
    partition: Partition | None = None,
    wakes: Wakes | None = None,
) -> Callable[[RuleFunc], Rule]: ...
def rule(
    func: RuleFunc | None = None,
    /,
    *,
    watch: Iterable[str] | None = None,
    roles: Iterable[str] = (),
    severity: Severity = "warning",
    category: str = "",
    source: str = "",
    clock: bool = False,
    name: str | None = None,
    partition: Partition | None = None,
    wakes: Wakes | None = None,
) -> Rule | Callable[[RuleFunc], Rule]:
    """Declare a rule: ``@rule`` or ``@rule(watch=["Medication", "Allergy"], severity="critical")``.

    ``roles=["trip", "document"]`` watches every type that plays those roles for the user
    (``uac vocab``), as the shipped rules do. Without ``watch`` or ``roles`` the rule runs after
    every change of any type.

    ``partition=`` (with ``watch`` or ``roles``) lets a change run the rule on the records it
    touched rather than on all of them: a function of one record of a watched type giving its
    part (what the rule's findings group by: ``lambda r: (r.merchant, r.amount)``), ``None``
    when the record can be in no finding, or ``EVERY`` when any finding may rest on it. What
    the rule finds about a part must depend only on that part's records and the ``EVERY`` ones,
    and each finding must rest on a record of its part (``uac_kernel.rules.parts``).

    ``wakes=`` (with ``partition``) lets the log's day moving run a rule that reads
    ``user.today`` on some parts only: a function of one record giving the days on which the
    clock passing may change what the rule finds about its part (a charge leaving a 90-day
    window: its date plus 91 days). Without it, a new day runs such a rule whole.
    """
    if severity not in SEVERITIES:
        raise RuleError(f"severity {severity!r} is not one of {', '.join(SEVERITIES)}")
    role_set = frozenset(roles)
    for r in role_set:
        if r not in ROLES:
            raise RuleError(f"role {r!r} is not in the catalogue; `uac vocab roles` lists them")
    if role_set and watch is None:
        watch = ()
    if partition is not None and watch is None:
        raise RuleError("partition= needs watch= or roles=: the types whose records it parts")
    if wakes is not None and partition is None:
        raise RuleError("wakes= needs partition=: the days it gives wake a record's part")

    def wrap(fn: RuleFunc) -> Rule:
        rule_name = name or fn.__name__
        if not rule_name.isidentifier() or rule_name.startswith("_"):
            raise RuleError(f"rule name {rule_name!r} must be a public Python identifier")
        for taken in {rule_name, getattr(fn, "__name__", rule_name)}:
            # Checkpoint code binds the rule's function by name beside the record classes
            # (capitalised) and its own names: a rule named like one would replace it on import.
            if taken[:1].isupper() or taken in MODULE_NAMES:
                raise RuleError(
                    f"rule name {taken!r} is taken: capitalised names are record types, and "
                    f"{', '.join(sorted(MODULE_NAMES))} are names of the checkpoint module; "
                    "rename the function"
                )
        return Rule(
            name=rule_name,
            func=fn,
            watch=None if watch is None else frozenset(watch),
            roles=role_set,
            severity=severity,
            category=category,
            source=source,
            clock=clock,
            doc=(fn.__doc__ or "").strip(),
            partition=partition,
            wakes=wakes,
        )

    return wrap(func) if func is not None else wrap


@dataclass
class AlertChange:
    """Alerts a change raised, cleared, or moved to another severity (e.g. a nearing deadline)."""

    raised: list[Alert] = field(default_factory=list)
    cleared: list[ClearedAlert] = field(default_factory=list)
    updated: list[Alert] = field(default_factory=list)


@dataclass(frozen=True)
class Cause:
    """What undoing a batch's change found about an alert it cleared (``rules.cleared``):
    ``named``, the records whose change alone brings it back when undone (or, ``together``,
    only all of them at once), with ``settled`` saying what became of them (``settled by
    PetVaccine 'rabies-2026', added (event 33)``); ``clock``, that it clears with every
    record's change undone and comes back with the log's clock put back too: the clock moving
    on cleared it."""

    settled: str = ""
    named: tuple[tuple[str, str], ...] = ()
    together: bool = False
    clock: bool = False


def as_cleared(alert: Alert, reason: str) -> ClearedAlert:
    """``alert`` as cleared, for ``reason``."""
    return ClearedAlert(**{**dict(alert), "reason": reason})


def why_cleared(
    alert: Alert,
    user: UserView,
    r: Rule | None = None,
    changed_types: set[str] | None = None,
    clock_moved: bool = False,
    vocab: Sequence[Rebinding] = (),
    *,
    replaced_by: Alert | None = None,
    cause: Cause | None = None,
) -> str:
    """Why ``alert`` no longer stands, told from the state it cleared in: what changed since
    it was raised, not a guess at which change mattered.

    A record it rests on that was retracted or changed (its ``sources`` differ from the
    evidence's) is named, with the fields that changed; a new alert of its rule about the same
    records (``replaced_by``: a bill that takes a month's total from near its limit to over
    it) replaces it; a change of the ``vocab`` is named (of the alert's own types first: what
    its rule now reads differently); ``cause`` says what undoing the change found
    (``rules.cleared``): the record whose change settled it, or the clock alone. Otherwise the
    log's clock moving on is said for rules that read it (``clock=True`` or ``watch=None``),
    and that other records the rule reads changed. ``changed_types=None`` (a full re-run) says
    only that the rule no longer finds it.
    """
    if alert.category == "rule_error":
        return "the rule runs without error again"
    the = "the record it was about" if len(alert.evidence) == 1 else "a record it was about"
    notes: list[str] = []
    for e in alert.evidence:
        named = label(e.type, e.key)
        now = user.get(e.type, e.key)
        if now is None:
            gone = any(v.retracted for v in user._state.versions(e.type, e.key))
            notes.append(f"{the} was {'retracted' if gone else 'removed'}: {named}")
        elif now.sources != e.sources:
            versions = user._state.versions(e.type, e.key)  # read by key: the history is long
            was = next((v for v in versions if v.sources == e.sources), None)
            what = changes(was, now) if was is not None else ""
            notes.append(f"{the} changed: {named}{' ' + what if what else ''}")
    reads_clock = r is None or r.clock or r.watch is None
    today = user.today
    clock = f"the log's clock moved on to {today}" if clock_moved and reads_clock else ""
    rebound = _rebound(alert, vocab, r)
    replaced = _replaced(alert, replaced_by) if replaced_by is not None else ""
    if replaced and not notes:
        return replaced
    if cause is not None and cause.settled:
        own = {(e.type, e.key) for e in alert.evidence}
        # Its own records' change told in full (what each field became) when they are all
        # that settled it; the clock and the vocabulary, which did not, are not named.
        return "; ".join(notes) if notes and set(cause.named) <= own else cause.settled
    if cause is not None and cause.clock and clock and today:
        # Its own records changed too, maybe, but undoing that would not bring it back.
        return clock if notes else f"{clock}; none of its own records changed"
    if notes:
        more = [x for x in (clock if today else "", rebound, replaced) if x]
        return "; ".join(notes) + "".join(f"; and {x}" for x in more)
    if replaced:
        return replaced
    if rebound:
        return f"{rebound}; none of its records changed"
    if changed_types is None:
        return "the rule no longer finds it in the current state; none of its records changed"
    watch = None if r is None else r.watches(user)
    watched = changed_types if watch is None else watch & changed_types
    others = ""
    if watched:
        kinds = "" if watch is None else " " + ", ".join(sorted(watched))
        others = f"other{kinds} records changed"
    what = " and ".join(x for x in (clock if today else "", others) if x)
    return f"{what or 'the rule no longer finds it'}; none of its own records changed"


def _replaced(alert: Alert, new: Alert) -> str:
    """``replaced by a new warning alert of its rule (this one was info): a total of 220 …,
    over the limit of 200``: what the new alert of the same rule says beyond what the two
    share, to the end of its first sentence or clause."""
    old, now = alert.message, new.message
    start = 0
    for i, (x, y) in enumerate(zip(old, now, strict=False)):
        if x != y:
            break
        if old.startswith(": ", i) or old.startswith(", ", i):
            start = i + 2
    said = now[start:] if now[start:].strip() else now
    # To the end of its first sentence or clause of some length (the records it lists are the
    # new alert's, raised beside this one).
    ends = [i for i in (said.find(". "), said.find(": ", 24)) if i > 0]
    said = said[: min(ends) if ends else None].rstrip(".")
    if len(said) > 160:
        said = said[:159].rstrip() + "…"
    was = "" if new.severity == alert.severity else f" (this one was {alert.severity})"
    return f"replaced by a new {new.severity} alert of its rule{was}: {said}"


def _rebound(alert: Alert, vocab: Sequence[Rebinding], r: Rule | None, shown: int = 3) -> str:
    """``the vocabulary changed: Script.drugName is no longer read as medication.name
    (rejected by a person)``: the changes of the alert's own types, then of what rule ``r``
    reads (a concept or role its code names, ``vocab.reads``); none of any other type."""
    read = reads(r) if r is not None else frozenset()
    types = {e.type for e in alert.evidence}
    mine = sorted(
        (c for c in vocab if c.key[1] in types or c.key[0] in read),
        key=lambda c: c.key[1] not in types,
    )
    if not mine:
        return ""
    more = f"; and {len(mine) - shown} more (`uac vocab`)" if len(mine) > shown else ""
    return "the vocabulary changed: " + "; ".join(c.describe() for c in mine[:shown]) + more


def _replacing(alert: Alert, raised: Sequence[Alert]) -> Alert | None:
    """The alert just raised by ``alert``'s rule about most of the records it was about (a
    7-day total over its limit, on the window one day on from the one near it), sharing the
    most; one that shares half or less (another trip needing the same old jab, another charge
    on the same account) is about something else."""
    mine = {(e.type, e.key) for e in alert.evidence}
    shared = [(len(mine & {(e.type, e.key) for e in a.evidence}), a) for a in raised]
    best = max(shared, key=lambda x: x[0], default=(0, None))
    return best[1] if best[0] * 2 > len(mine) else None


class _Why:
    """Finds what cleared the alerts one run of rule ``r`` cleared, by running it again with
    part of the change undone (``rules.cleared.Undone``); each undone view runs once."""

    def __init__(
        self,
        r: Rule,
        user: UserView,
        changed_types: set[str] | None,
        changed_keys: Mapping[str, Collection[str] | None] | None,
        clock_moved: bool,
        since: int | None,
        clock_before: datetime | None,
    ) -> None:
        self.r, self.user, self.since, self.clock_before = r, user, since, clock_before
        self.reads_clock = clock_moved and (r.clock or r.watch is None)
        self.rebound = changed_types is None  # the vocabulary changed (or all is run again)
        self.refs: list[tuple[str, str]] | None = None
        self.runs: dict[tuple[tuple[tuple[str, str], ...], bool], set[str] | None] = {}
        if since is None or (changed_types is None and changed_keys is None):
            return
        # A change of the vocabulary runs every rule (``changed_types`` None) and is kept
        # when records are undone: a record named beside it settled what it could not.
        changed = set(changed_keys or ()) if changed_types is None else changed_types
        watch = r.watches(user)
        types = changed if watch is None else watch & changed
        keys = changed_keys if changed_keys is not None else dict.fromkeys(types)
        self.refs = changed_records(user._state, types, keys, since)

    def _finds(self, refs: tuple[tuple[str, str], ...], clock: bool = False) -> set[str] | None:
        """The ids of the alerts the rule finds with the change of ``refs`` undone, and the
        log's clock put back with ``clock`` (None: it failed)."""
        if (refs, clock) not in self.runs:
            assert self.since is not None
            view = Undone(self.user, self.since, refs, clock, self.clock_before)
            try:
                self.runs[refs, clock] = set(self.r.alerts(view))
            except Exception:  # a rule that fails on the undone state tells nothing
                self.runs[refs, clock] = None
        return self.runs[refs, clock]

    def cause(self, alert: Alert) -> Cause | None:
        """What cleared ``alert``: the records whose change brings it back when undone, else
        the clock when putting it back too does; None when that cannot be told (too many
        records changed, or the rule failed on an undone state) or neither brings it back."""
        refs = self.refs
        if refs is None or self.since is None:
            return None
        if not refs and not self.rebound:
            # Nothing changed but the clock (no record the rule reads, no binding): no run
            # needed to tell.
            return Cause(clock=True) if self.reads_clock else None
        every = self._finds(tuple(refs)) if refs else set()
        if every is None:
            return None
        if alert.id not in every:
            # Not the records: the clock, if putting it back too brings the alert back.
            if self.reads_clock and alert.id in (self._finds(tuple(refs), clock=True) or ()):
                return Cause(clock=True)
            return None
        # One record changed: undoing it alone was the run above.
        named = (
            [ref for ref in refs if alert.id in (self._finds((ref,)) or ())]
            if len(refs) > 1
            else list(refs)
        )
        together = not named
        named = named or list(refs)
        state, shown = self.user._state, 3
        said = [what_became(state, t, key, self.since) for t, key in named[:shown]]
        more = f"; and {len(named) - shown} more" if len(named) > shown else ""
        head = "settled by these changes together: " if together else "settled by "
        return Cause(head + "; ".join(said) + more, tuple(named), together)


def _known(
    changed_keys: Mapping[str, Collection[str] | None] | None,
    fact_keys: Mapping[str, Collection[str] | None] | None,
) -> Mapping[str, Collection[str] | None] | None:
    """The records a change changed, by type: ``changed_keys``, with the keys its facts
    changed where a new field left a type's unknown."""
    if not fact_keys:
        return changed_keys
    known = dict(changed_keys or {})
    for t, keys in fact_keys.items():
        if known.get(t) is None and keys is not None:
            known[t] = keys
    return known


@dataclass
class _Kept:
    """What a runner keeps about one rule in force between its runs."""

    # Its last run read only the day (``user.today``), not the time (``user.now``): what it
    # found cannot change until the day does, so the log's clock moving within a day does not
    # run a clock rule again (a dense log moves it with every event).
    daily: bool = False
    # Its last run read neither: the clock moving changes nothing it found.
    timeless: bool = False
    # A partitioned rule's parts (``uac_kernel.rules.parts``), built by a whole run and kept
    # up to date by the changes after it.
    parts: Parts | None = None
    # Its partition failed on a record (raised, or gave a part that cannot be a key): it runs
    # whole until put in force again.
    unparted: bool = False
    # It ran whole once for a change: the next such run builds its parts (building costs more
    # than a whole run; a process that makes one change, as a `uac ingest` does, never pays
    # it, and an open never does).
    asked: bool = False

    def saw(self, user: UserView, whole: bool) -> None:
        """Note what of the clock the run just made read: a whole run says it for the rule; a
        run on parts only what it read (the other parts read what their last run did)."""
        if user._read_time:
            self.daily = False
        elif whole:
            self.daily = True
        if user._read_time or user._read_day:
            self.timeless = False
        elif whole:
            self.timeless = True


class RuleRunner:
    """Runs rules after state changes and keeps the set of standing alerts."""

    def __init__(self, rules: Iterable[Rule] = ()):
        self.rules: dict[str, Rule] = {}
        self.active: dict[str, dict[str, Alert]] = {}
        self.kept: dict[str, _Kept] = {}
        for r in rules:
            self.add(r)

    @property
    def parts(self) -> dict[str, Parts]:
        """Each partitioned rule's parts, for the rules that have them built."""
        return {n: k.parts for n, k in self.kept.items() if k.parts is not None}

    def add(self, r: Rule) -> None:
        """Put ``r`` in force, in place of a rule of the same name.

        Checkpoint code binds each rule by its function's name, so two rules in force may not
        share one (e.g. a notebook rule ``def passport_validity`` beside the shipped one).
        """
        binds = getattr(r.func, "__name__", r.name)
        for other in self.rules.values():
            if (
                binds.isidentifier()  # not a lambda's "<lambda>"
                and other.name != r.name
                and getattr(other.func, "__name__", other.name) == binds
            ):
                raise RuleError(
                    f"rule {r.name!r} is the function {binds!r}, as rule {other.name!r} in force "
                    "is; give each rule a function of its own name"
                )
        self.rules[r.name] = r
        self.active.setdefault(r.name, {})
        self.kept[r.name] = _Kept()

    def copy(self) -> RuleRunner:
        """The same rules, with standing alerts of their own (a what-if changes the copy's).
        A rule's alerts are replaced whole when it runs, never changed in place, so the copy
        shares them until then: it costs the rules, not the alerts."""
        other = RuleRunner()
        other.rules = dict(self.rules)
        other.active = dict(self.active)
        # without parts: its partitioned rules run whole (they are not copied)
        other.kept = {n: _Kept(daily=k.daily, timeless=k.timeless) for n, k in self.kept.items()}
        return other

    def remove(self, name: str) -> list[Alert]:
        """Take rule ``name`` out of force; return the alerts it had standing (now cleared)."""
        self.rules.pop(name, None)
        self.kept.pop(name, None)
        return list(self.active.pop(name, {}).values())

    def standing(self) -> list[Alert]:
        order = {s: i for i, s in enumerate(SEVERITIES)}
        alerts = [a for per_rule in self.active.values() for a in per_rule.values()]
        return sorted(alerts, key=lambda a: (order[a.severity], a.rule, a.id))

    def run(
        self,
        user: UserView,
        changed_types: set[str] | None,
        clock_moved: bool = False,
        only: Iterable[str] | None = None,
        vocab: Sequence[Rebinding] = (),
        day_moved: bool | None = None,
        changed_keys: Mapping[str, Collection[str] | None] | None = None,
        opening: bool = False,
        day_before: date | None = None,
        since: int | None = None,
        clock_before: datetime | None = None,
        fact_keys: Mapping[str, Collection[str] | None] | None = None,
    ) -> AlertChange:
        """Re-run the rules affected by a change (``changed_types=None``: all of them);
        ``clock_moved``: the log's clock moved (``day_moved``: to another day, the default being
        the same as ``clock_moved``); ``vocab``: how the vocabulary changed, named in the reasons
        of the alerts it clears; ``changed_keys``: the records changed, by type (None: not
        known), with which a partitioned rule runs on the parts they touched; ``opening``: the
        run of an open, which builds no parts; ``day_before``: the log's day before the change,
        from which a rule with ``wakes`` runs on the parts the days since woke; ``since``: the
        seq after which the change's events came, ``clock_before`` the log's clock then and
        ``fact_keys`` the records its facts changed (known where a new field leaves
        ``changed_keys`` None), with which an alert that clears is told what cleared it
        (``why_cleared``)."""
        change = AlertChange()
        if day_moved is None:
            day_moved = clock_moved
        selected = set(only) if only is not None else None
        for r in self.rules.values():
            if selected is not None and r.name not in selected:
                continue
            watch = r.watches(user)
            ticked = r.clock and clock_moved and (day_moved or not self.kept[r.name].daily)
            affected = changed_types is None or watch is None or bool(watch & changed_types)
            if not (affected or ticked):
                continue
            before = self.active[r.name]
            part = self._part(
                r, user, watch, changed_types, changed_keys, clock_moved, day_moved, day_before
            )
            if part is None:
                now = self._whole(r, user, watch, not opening)
            else:
                touched, was = part
                if not touched:
                    continue  # what changed is in no part: nothing it found can change
                now = self._on_parts(r, user, touched, was, before)
            raised = [a for i, a in now.items() if i not in before]
            change.raised.extend(raised)
            gone = [a for i, a in before.items() if i not in now]
            if gone:
                seen = user if part is None else self._seen(r, user, part[0])
                why = _Why(
                    r,
                    seen,
                    changed_types,
                    _known(changed_keys, fact_keys),
                    clock_moved,
                    since,
                    clock_before,
                )
                for a in gone:
                    new = _replacing(a, raised)
                    # Asked of an alert not replaced: its own record may have changed beside
                    # the change that cleared it (a finish time added on the day it passed).
                    ask = new is None
                    reason = why_cleared(
                        a,
                        user,
                        r,
                        changed_types,
                        clock_moved,
                        vocab,
                        replaced_by=new,
                        cause=why.cause(a) if ask else None,
                    )
                    change.cleared.append(as_cleared(a, reason))
            change.updated.extend(
                a for i, a in now.items() if i in before and before[i].severity != a.severity
            )
            self.active[r.name] = now
        return change

    def _seen(self, r: Rule, user: UserView, touched: set[Any]) -> UserView:
        """What a run of ``r`` on the ``touched`` parts read: those parts (the state whole,
        had the run fallen back to it)."""
        parts = self.kept[r.name].parts
        if parts is None:
            return user
        return PartView(user._state, parts.shown(touched), parts, touched)

    def _whole(
        self, r: Rule, user: UserView, watch: frozenset[str] | None, changed: bool
    ) -> dict[str, Alert]:
        """Run ``r`` on the whole state; a partitioned rule's parts are built on its second
        whole run for a ``changed`` state (see ``asked``)."""
        user._read_time = user._read_day = False
        now = self._evaluate(r, user)
        kept = self.kept[r.name]
        kept.saw(user, whole=True)
        if (
            changed
            and r.partition is not None
            and watch is not None
            and kept.parts is None
            and not kept.unparted
        ):
            if not kept.asked:
                kept.asked = True
                return now
            try:
                with using(user.vocab):
                    kept.parts = Parts.build(r.partition, watch, user._state, r.wakes)
            except Exception:  # a partition that fails on a record: the rule runs whole
                kept.unparted = True
        return now

    def _part(
        self,
        r: Rule,
        user: UserView,
        watch: frozenset[str] | None,
        changed_types: set[str] | None,
        changed_keys: Mapping[str, Collection[str] | None] | None,
        clock_moved: bool,
        day_moved: bool,
        day_before: date | None,
    ) -> tuple[set[Any], dict[tuple[str, str], Any]] | None:
        """Bring the parts of a partitioned rule up to date with the changed records and
        return the parts they touched and where each was before; None to run ``r`` whole (the
        clock moved it, the vocabulary or its types changed, records changed unknown or in a
        part every finding may rest on), its parts dropped if they can no longer be kept."""
        kept = self.kept[r.name]
        parts = kept.parts
        if parts is None:
            return None
        keys = changed_keys or {}
        known = (
            watch is not None
            and changed_types is not None
            and changed_keys is not None
            and watch == parts.types
            and all(keys.get(t, ()) is not None for t in changed_types & watch)
            # An alert resting on no record of a part (a rule's error) is the whole rule's.
            and all(any(e.type in watch for e in a.evidence) for a in self.active[r.name].values())
        )
        if not known:
            kept.parts = None
            return None
        assert watch is not None
        try:
            with using(user.vocab):
                touched, was = parts.update(
                    user._state, {t: k for t, k in keys.items() if t in watch and k is not None}
                )
        except Exception:  # a partition that fails on a record: the rule runs whole
            kept.parts, kept.unparted = None, True
            return None
        # What the rule found in the parts left alone holds only for the day (and, if it read
        # the time, the time) it last ran on: one that moved runs it whole, unless the rule
        # reads only the day and says on which days each record's part can change (``wakes``).
        now = user._state.now
        woken: set[Any] | None = None
        if day_moved and parts.wakes is not None and kept.daily:
            if day_before is not None and now is not None:
                woken = parts.woken_between(day_before, now.date())
            if woken is None:
                return None
        still = (
            not clock_moved or kept.timeless or (not day_moved and kept.daily) or woken is not None
        )
        if EVERY in touched or EVERY in (woken or ()) or not still:
            return None  # a record any finding may rest on changed, or woke
        return touched | (woken or set()), was

    def _on_parts(
        self,
        r: Rule,
        user: UserView,
        touched: set[Any],
        was: dict[tuple[str, str], Any],
        before: dict[str, Alert],
    ) -> dict[str, Alert]:
        """Run ``r`` on the ``touched`` parts: its standing alerts of other parts stay, those
        resting on a record of a touched part (``was``: where changed records were) give way to
        what it finds there now."""
        kept = self.kept[r.name]
        parts = kept.parts
        assert parts is not None

        def part_of(e: Evidence) -> Any:
            ref = (e.type, e.key)
            return was[ref] if ref in was else parts.of.get(ref)

        unchanged = {
            i: a for i, a in before.items() if not any(part_of(e) in touched for e in a.evidence)
        }
        view = PartView(user._state, parts.shown(touched), parts, touched)
        found = self._evaluate(r, view)
        if any(a.category == "rule_error" for a in found.values()):
            return self._whole(r, user, parts.types, True)  # the error is the whole rule's
        kept.saw(view, whole=False)
        return {**unchanged, **found}

    @staticmethod
    def _evaluate(r: Rule, user: UserView) -> dict[str, Alert]:
        try:
            return r.alerts(user)
        except Exception as exc:  # a broken rule must not stop ingest; it becomes an alert
            alert_id = f"{r.name}:error"
            message = f"rule {r.name} failed: {type(exc).__name__}: {exc}; fix the rule and re-run"
            return {
                alert_id: Alert(
                    id=alert_id,
                    rule=r.name,
                    severity="warning",
                    category="rule_error",
                    message=message,
                )
            }
