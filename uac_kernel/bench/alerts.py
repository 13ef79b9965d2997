"""``uac bench alerts``: do the rules raise the expected alerts at the right moment?

Two sets of scenarios, each spreading facts over a few dated sessions and expecting one
unsolicited alert, of a given type and severity, at a trigger session:

- ``public``: the 40 scenarios of ``active_service_scenarios.json`` from "User as Code: Executable
  Memory for Personalized Agents" (arXiv 2606.16707), © 2026 Bojie Li (Pine AI), Apache License
  2.0 (``data/alert_fixtures.json``).
- ``holdout``: scenarios written for this project (Apache-2.0), harder (two domains at once,
  numbers that run out or add up past a limit, dates derived in several steps, ordering), with
  a few traps that should raise no critical alert (``data/alert_holdout.json``). They were written
  without reading the rule implementations and are kept out of rule development.

Each fixture holds, per session, the user turns and the typed facts a careful extractor would
take from them (assistant turns ignored), as Event JSONL fact objects following the record
conventions of ``docs/rules.md``; the constraints a careful person would write from the turns up
to that session (``constraints``: ``{"op", "key", "constraint"}``, the language of
``uac_kernel.language.spec``), written without looking at the expected alert; and the
scenario's expected alert type with the shipped rules that implement it (``expected.rules``;
for the public set, ``ALERT_TYPE_RULES``). An expected type ``none`` marks a trap.

Two lines are measured on each set, from one replay:

- **library**: the shipped rules alone (constraint alerts are ignored);
- **library + constraints**: the same, plus the alerts of the constraints. Offline the
  constraints are the fixture's scripted ones, logged as constraint events (``author``
  ``scripted-model``, ``derived_from`` the session's turns): a scripted stand-in for a model, so
  a ceiling, not a model's result. With ``model``, they are whatever the model's extraction
  proposes.

Replay: each scenario gets a fresh in-memory ``Workbench`` with the shipped rules. Each session
is one ingest of its user turns (as utterances, so the log clock reaches the session's date even
when nothing new is learned) and its facts, all dated at the session's timestamp; then, in a
batch of their own (so a refused constraint never costs the facts), its constraints. With a
``model``, the facts are not read from the fixture: the turns are ingested and the model
extracts after each session.

Scoring, per scenario and line. An alert **counts** for a scenario when its rule is one of the
expected rules, or (line b only) when its rule is a constraint's (named ``constraint_…``) and
its category equals the scenario's category.

- **caught**: at the trigger session an alert that counts is newly raised, or a standing one is
  escalated to a higher severity (a deadline that was ``info`` a week ago becomes ``warning``:
  the alert is pushed again, now). Otherwise the miss has a reason: ``no rule for <type>``,
  ``raised early`` (it stood before the trigger, unchanged), ``raised late``, ``wrong rule``
  (only alerts that do not count were raised at the trigger) or ``rule silent at trigger``.
- **early** / **late** firings: alerts that count raised (or escalated) at a session before /
  after the trigger, listed per scenario and counted per line, whether or not the scenario was
  caught; **on time**: caught with no early firing.
- **false critical**: a critical alert raised (or escalated to critical) that does not count,
  at any session. In a trap (``none``) every critical alert is false, and the trap **holds**
  when none is raised; traps are counted apart from the caught scenarios.
- **severity match**: the caught alert's severity against the scenario's (reported, not
  required).
"""

from __future__ import annotations

import json
import platform
import re
import textwrap
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator
from tqdm.auto import tqdm

from uac_kernel import __version__
from uac_kernel.core.errors import ConstraintError, UacError
from uac_kernel.core.outputs import JSON, TSV, Output, output_dir
from uac_kernel.language.spec import parse_constraint
from uac_kernel.model.client import ModelSettings
from uac_kernel.model.extract import ConstraintOperation, Extraction, FactOperation, FieldValue
from uac_kernel.rules.engine import Alert
from uac_kernel.workbench import Workbench

__all__ = [
    "ALERT_TYPE_RULES",
    "FIXTURES",
    "HOLDOUT",
    "SETS",
    "AlertBench",
    "AlertBenchResult",
    "Fixture",
    "ScenarioOutcome",
    "load_fixtures",
    "run",
    "run_all",
    "run_scenario",
    "scripted_extraction",
    "write_results",
]

FIXTURES = Path(__file__).parent / "data" / "alert_fixtures.json"
HOLDOUT = Path(__file__).parent / "data" / "alert_holdout.json"
SETS: dict[str, Path] = {"public": FIXTURES, "holdout": HOLDOUT}
CREDIT = (
    "Scenarios: active_service_scenarios.json, 'User as Code: Executable Memory for Personalized "
    "Agents' (arXiv 2606.16707), (c) 2026 Bojie Li / Pine AI, Apache-2.0"
)
HOLDOUT_CREDIT = "Held-out scenarios: written for uac, Apache-2.0"
LIBRARY_LINE = "library"
CONSTRAINTS_LINE = "library + constraints"
CEILING = "scripted stand-in for a model: a ceiling, not a model's result"
SCRIPTED_AUTHOR = "scripted-model"
TRAP = "none"  # the expected type of a scenario that should raise no critical alert
CONSTRAINT_RULE = "constraint_"  # the prefix of a compiled constraint's rule name

_OVERLAP = ("overlapping_commitments",)
_DEADLINE = ("deadline_approaching",)

# The public scenarios' alert types and the shipped rules that implement them. A type mapped to
# nothing has no rule: its scenario is reported as a miss with the reason "no rule for <type>".
ALERT_TYPE_RULES: dict[str, tuple[str, ...]] = {
    # travel_document_validity
    "passport_validity": ("passport_validity",),
    "name_mismatch": ("passport_validity",),
    "insufficient_passport_pages": ("passport_validity",),
    "visa_already_used": ("visa_validity",),
    "visa_not_yet_valid": ("visa_validity",),
    "schengen_overstay": ("schengen_90_180",),
    "health_certificate_expiry": ("document_expires_before_trip",),
    "transit_visa_required": (),
    # drug_interactions_health_safety
    "drug_interaction": ("drug_drug_interaction",),
    "supplement_drug_interaction": ("drug_drug_interaction",),
    "allergy_violation": ("drug_allergy_cross_reactivity",),
    "allergy_environment_risk": ("food_allergy_exposure",),
    "food_drug_interaction": ("food_drug_interaction",),
    "teratogenic_medication": ("pregnancy_teratogenic_medication",),
    "dosage_exceeds_weight_guideline": (),
    "activity_health_contraindication": ("activity_medical_clearance",),
    # financial_authorization_conflicts
    "conflicting_financial_instructions": ("transfer_during_freeze",),
    "authorization_limit_exceeded": ("transaction_over_limit",),
    "cancelled_service_charge": ("charge_after_cancellation",),
    "payment_from_closed_account": ("payment_from_closed_account",),
    "insurance_lapse_risk": ("document_expires_before_trip",),
    "risk_tolerance_contradiction": ("investment_against_risk_tolerance",),
    "wash_sale_violation": ("wash_sale",),
    "cash_flow_risk": ("balance_projection",),
    # scheduling_conflicts
    "scheduling_conflict": _OVERLAP,
    "double_booking": _OVERLAP,
    "family_commitment_conflict": _OVERLAP,
    "resource_unavailable": _OVERLAP,
    "logistics_timing_conflict": _OVERLAP,
    "absence_conflict": _OVERLAP,
    "commitment_conflict": _OVERLAP,
    "logistics_conflict": _OVERLAP,
    # warranty_deadline_expiration
    "warranty_expiring_unresolved_issue": _DEADLINE,
    "tax_filing_deadline": ("tax_filing_deadline", *_DEADLINE),
    "lease_renewal_deadline": _DEADLINE,
    "cancellation_deadline": _DEADLINE,
    "return_window_closing": _DEADLINE,
    "contingency_deadline": _DEADLINE,
    "promotional_rate_expiry": _DEADLINE,
    "license_expiration": ("document_expires_before_trip",),
}

_RANK: dict[str, int] = {"critical": 3, "warning": 2, "info": 1}


# -- the fixture file --------------------------------------------------------------------------
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Expected(_Strict):
    type: str  # ``none``: a trap, no critical alert expected
    severity: str
    rules: tuple[str, ...]


class ConstraintOp(_Strict):
    """A constraint a person (or a model) would add, change or drop after a session."""

    op: Literal["add", "update", "retract"]
    key: str
    constraint: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _parses(self) -> ConstraintOp:
        if self.op == "retract":
            if self.constraint is not None:
                raise ValueError(f"constraint {self.key}: a retract carries no constraint")
        elif self.constraint is None:
            raise ValueError(f"constraint {self.key}: an {self.op} needs the constraint")
        else:
            try:
                parse_constraint(self.constraint, f"constraint {self.key}")
            except ConstraintError as exc:  # as a validation error: the file's loader names where
                raise ValueError(str(exc)) from exc
        return self


class Session(_Strict):
    session_id: int
    timestamp: str
    user_turns: tuple[str, ...]
    facts: tuple[dict[str, Any], ...]
    constraints: tuple[ConstraintOp, ...] = ()


class Fixture(_Strict):
    """One scenario: its sessions (user turns, facts, constraints) and the alert it expects."""

    id: str
    category: str
    description: str
    trigger_session: int
    expected: Expected
    sessions: tuple[Session, ...]
    note: str = ""  # why a known miss is missed

    @property
    def trap(self) -> bool:
        return self.expected.type == TRAP


class _FixtureFile(_Strict):
    about: str
    credit: str
    license: str
    scenarios: tuple[Fixture, ...]


def load_fixtures(path: str | Path | None = None) -> list[Fixture]:
    """The scenarios of a fixture file (the bundled public set by default)."""
    text = Path(path or FIXTURES).read_text(encoding="utf-8")
    return list(_FixtureFile.model_validate_json(text).scenarios)


def _source(fx: Fixture, session: Session, n: int) -> str:
    return f"scenario:{fx.id}:{session.session_id}:{n}"


def _utterances(fx: Fixture, session: Session) -> list[dict[str, Any]]:
    return [
        {
            "kind": "utterance",
            "ts": session.timestamp,
            "speaker": "user",
            "text": text,
            "source": _source(fx, session, n),
        }
        for n, text in enumerate(session.user_turns, 1)
    ]


def constraint_events(fx: Fixture, session: Session) -> list[dict[str, Any]]:
    """The session's scripted constraints as constraint events, derived from its turns."""
    turns = [_source(fx, session, n) for n in range(1, len(session.user_turns) + 1)]
    return [
        {
            "kind": "constraint",
            "ts": session.timestamp,
            "op": c.op,
            "key": c.key,
            **({"constraint": c.constraint} if c.constraint is not None else {}),
            "author": SCRIPTED_AUTHOR,
            "derived_from": turns,
        }
        for c in session.constraints
    ]


_SOURCE = re.compile(r"\[(scenario:([^:\]\s]+):(\d+):\d+)\]")


def scripted_extraction(fixtures: Iterable[Fixture]) -> Callable[[dict[str, Any]], str]:
    """A chat-completions responder (for ``uac_kernel.model.testing.ChatServer``) that answers an
    extraction request with the fixture facts and scripted constraints of the sessions whose
    turns it names: a stand-in for a model that extracts exactly what the fixture says."""
    by_session = {(fx.id, s.session_id): s for fx in fixtures for s in fx.sessions}

    def respond(body: dict[str, Any]) -> str:
        prompt = str(body["messages"][-1]["content"])
        found = _SOURCE.findall(prompt)
        sources = list(dict.fromkeys(src for src, _, _ in found))
        sessions = list(dict.fromkeys((sid, int(n)) for _, sid, n in found))
        ops = [
            FactOperation(
                op=f["op"],
                type=f["type"],
                key=f["key"],
                fields=[FieldValue(name=k, value=v) for k, v in (f.get("fields") or {}).items()],
                reason=f.get("reason"),
                utterances=sources,
            )
            for key in sessions
            if key in by_session
            for f in by_session[key].facts
        ]
        proposed = [
            ConstraintOperation(
                op=c.op,
                key=c.key,
                constraint=None if c.constraint is None else json.dumps(c.constraint),
                utterances=sources,
            )
            for key in sessions
            if key in by_session
            for c in by_session[key].constraints
        ]
        return Extraction(operations=ops, constraints=proposed).model_dump_json()

    return respond


# -- outcomes ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class AlertSeen:
    """An alert as the bench saw it after a session."""

    rule: str
    severity: str
    message: str
    id: str
    category: str = ""
    escalated: bool = False  # standing before at a lower severity

    @classmethod
    def of(cls, a: Alert, escalated: bool = False) -> AlertSeen:
        return cls(a.rule, a.severity, a.message, a.id, a.category, escalated)

    @property
    def from_constraint(self) -> bool:
        return self.rule.startswith(CONSTRAINT_RULE)


@dataclass
class SessionResult:
    session_id: int
    timestamp: str
    raised: list[AlertSeen] = field(default_factory=list)  # new, or escalated, at this session
    standing: list[AlertSeen] = field(default_factory=list)  # after this session


@dataclass
class ScenarioOutcome:
    id: str
    category: str
    expected_type: str
    expected_severity: str
    expected_rules: tuple[str, ...]
    trigger_session: int
    note: str = ""
    caught: bool = False  # for a trap: it held (no critical alert)
    reason: str = ""  # why it was missed ("" when caught)
    severity: str | None = None  # of the alert that caught it
    escalated: bool = False  # caught by a standing alert raised to a higher severity
    early: list[tuple[int, str]] = field(default_factory=list)  # (session, rule) before trigger
    late: list[tuple[int, str]] = field(default_factory=list)  # (session, rule) after trigger
    false_critical: list[tuple[int, AlertSeen]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    sessions: list[SessionResult] = field(default_factory=list)

    @property
    def trap(self) -> bool:
        return self.expected_type == TRAP

    @property
    def severity_match(self) -> bool:
        return self.caught and not self.trap and self.severity == self.expected_severity

    @property
    def on_time(self) -> bool:
        return self.caught and not self.trap and not self.early


@dataclass
class AlertBenchResult:
    """One line (``library`` or ``library + constraints``) on one set: every scenario's outcome."""

    outcomes: list[ScenarioOutcome]
    mode: str
    line: str = LIBRARY_LINE
    set: str = "public"
    note: str = ""  # what the line is (the ceiling label) or why it was not run
    date: str = field(default_factory=lambda: date.today().isoformat())
    machine: str = field(default_factory=platform.platform)
    version: str = __version__

    @property
    def scenarios(self) -> list[ScenarioOutcome]:
        """The scenarios that expect an alert (traps apart)."""
        return [o for o in self.outcomes if not o.trap]

    @property
    def traps(self) -> list[ScenarioOutcome]:
        return [o for o in self.outcomes if o.trap]

    @property
    def total(self) -> int:
        return len(self.scenarios)

    @property
    def caught(self) -> int:
        return sum(o.caught for o in self.scenarios)

    @property
    def on_time(self) -> int:
        return sum(o.on_time for o in self.scenarios)

    @property
    def early(self) -> int:
        """Scenarios with an alert that counts raised before the trigger."""
        return sum(bool(o.early) for o in self.scenarios)

    @property
    def late(self) -> int:
        """Scenarios with an alert that counts raised after the trigger."""
        return sum(bool(o.late) for o in self.scenarios)

    @property
    def traps_held(self) -> int:
        return sum(o.caught for o in self.traps)

    @property
    def false_critical(self) -> int:
        """Scenarios (traps too) with at least one critical alert that does not count."""
        return sum(bool(o.false_critical) for o in self.outcomes)

    @property
    def misses(self) -> list[ScenarioOutcome]:
        return [o for o in self.scenarios if not o.caught]

    def by_category(self) -> dict[str, tuple[int, int, int, int, int]]:
        """Per category: (caught, total, early, late, scenarios with a false critical)."""
        out: dict[str, tuple[int, int, int, int, int]] = {}
        for o in self.scenarios:
            c, t, e, la, f = out.get(o.category, (0, 0, 0, 0, 0))
            out[o.category] = (
                c + o.caught,
                t + 1,
                e + bool(o.early),
                la + bool(o.late),
                f + bool(o.false_critical),
            )
        return out

    def summary_line(self) -> str:
        return (
            f"alerts: {self.caught}/{self.total} scenarios caught, "
            f"{self.false_critical} false critical"
        )

    def line_summary(self) -> str:
        """The summary with the set and line named, timing and traps: one line of the report."""
        traps = f", traps held {self.traps_held}/{len(self.traps)}" if self.traps else ""
        return (
            f"{self.set}, {self.line}: {self.caught}/{self.total} caught "
            f"({self.on_time} on time, {self.early} early, {self.late} late), "
            f"{self.false_critical} false critical{traps}"
        )

    def table(self) -> list[str]:
        """Per category: caught, early and late firings, false criticals."""
        head = f"{'category':<36}{'caught':>8}{'early':>7}{'late':>6}{'false critical':>16}"
        lines = [head]
        for cat, (c, t, e, la, f) in self.by_category().items():
            lines.append(f"{cat:<36}{f'{c}/{t}':>8}{e:>7}{la:>6}{f:>16}")
        all_ = f"{self.caught}/{self.total}"
        lines.append(
            f"{'all':<36}{all_:>8}{self.early:>7}{self.late:>6}"
            f"{sum(bool(o.false_critical) for o in self.scenarios):>16}"
        )
        if self.traps:
            quiet = f"{self.traps_held}/{len(self.traps)}"
            lines.append(f"{'traps (no critical expected): held':<36}{quiet:>8}")
        return lines

    def details(self) -> list[str]:
        """Every miss, early and late firing, false critical and error of this line."""
        lines = [f"misses ({len(self.misses)})"]
        for o in self.misses:
            lines.append(f"  {o.id}: {o.reason}")
            lines += [f"      {line}" for line in textwrap.wrap(o.note, 92)]
        if not self.misses:
            lines.append("  none")
        timing = [o for o in self.scenarios if o.early or o.late]
        lines.append(f"early and late firings ({len(timing)} scenarios)")
        for o in timing:
            parts = [f"early {_firings(o.early)}" if o.early else "", _late(o)]
            lines.append(
                f"  {o.id} (trigger {o.trigger_session}): {'; '.join(p for p in parts if p)}"
            )
        if not timing:
            lines.append("  none")
        wrong = [(o, s, a) for o in self.outcomes for s, a in o.false_critical]
        lines.append(f"false critical alerts ({len(wrong)})")
        lines += [f"  {o.id} session {s}: {a.rule}: {a.message}" for o, s, a in wrong] or ["  none"]
        errors = [(o, e) for o in self.outcomes for e in o.errors]
        if errors:
            lines += [f"errors ({len(errors)})", *(f"  {o.id}: {e}" for o, e in errors)]
        matched = sum(o.severity_match for o in self.outcomes)
        lines.append(f"severity as expected in {matched} of {self.caught} caught")
        return lines

    def report(self) -> str:
        """This line alone: the table, every scenario, the details, then the summary."""
        lines = [
            f"uac bench alerts: {self.date}, {self.mode}, uac {self.version}, {self.machine}",
            CREDIT if self.set == "public" else HOLDOUT_CREDIT,
            "",
            f"{self.set}, {self.line}" + (f" ({self.note})" if self.note else ""),
            *self.table(),
            "",
            f"{'scenario':<{_idw(self.outcomes)}}{'expected':<48}{'got':<10}outcome",
            *(_row(o, _idw(self.outcomes)) for o in self.outcomes),
            "",
            *self.details(),
            self.summary_line(),
        ]
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        return {
            "benchmark": "alerts",
            "date": self.date,
            "machine": self.machine,
            "uac_version": self.version,
            "mode": self.mode,
            "set": self.set,
            "line": self.line,
            "note": self.note,
            "credit": CREDIT if self.set == "public" else HOLDOUT_CREDIT,
            "caught": self.caught,
            "total": self.total,
            "on_time": self.on_time,
            "early": self.early,
            "late": self.late,
            "traps": len(self.traps),
            "traps_held": self.traps_held,
            "false_critical": self.false_critical,
            "severity_matched": sum(o.severity_match for o in self.outcomes),
            "by_category": {
                cat: {"caught": c, "total": t, "early": e, "late": la, "false_critical": f}
                for cat, (c, t, e, la, f) in self.by_category().items()
            },
            "scenarios": [
                {**asdict(o), "severity_match": o.severity_match, "on_time": o.on_time}
                for o in self.outcomes
            ],
            "summary": self.summary_line(),
        }

    def write(self, out_dir: str | Path) -> tuple[Path, Path]:
        """Write ``alerts-<date>.json`` and ``alerts-<date>.txt`` into ``out_dir``."""
        return write_results(out_dir, f"alerts-{self.date}", self.to_json(), self.report())


def _firings(fs: list[tuple[int, str]]) -> str:
    return ", ".join(f"{rule} at session {s}" for s, rule in fs)


def _late(o: ScenarioOutcome) -> str:
    return f"late {_firings(o.late)}" if o.late else ""


def _outcome(o: ScenarioOutcome) -> str:
    if o.trap:
        text = "held" if o.caught else "TRAP SPRUNG"
    else:
        text = "caught" if o.caught else f"MISS: {o.reason}"
        text += " (escalated: it stood before at a lower severity)" if o.escalated else ""
        text += f"; early x{len(o.early)}" if o.early else ""
        text += f"; late x{len(o.late)}" if o.late else ""
    return text + ("; FALSE CRITICAL" if o.false_critical else "")


def _idw(outcomes: list[ScenarioOutcome]) -> int:
    """The width of the scenario column: the longest id and two spaces."""
    return max((len(o.id) for o in outcomes), default=8) + 2


def _row(o: ScenarioOutcome, width: int) -> str:
    want = f"{o.expected_type} ({o.expected_severity})"
    return f"{o.id:<{width}}{want:<48}{o.severity or '-':<10}{_outcome(o)}"


def write_results(
    out_dir: str | Path, stem: str, data: dict[str, Any], text: str
) -> tuple[Path, Path]:
    """Write a bench's results as ``<stem>.json`` and its report as ``<stem>.txt``."""
    out = output_dir(out_dir, what="--out")
    js, txt = out / f"{stem}.json", out / f"{stem}.txt"
    Output(js, JSON).write_text([json.dumps(data, indent=1, ensure_ascii=False) + "\n"])
    Output(txt, TSV).write_text([text])
    return js, txt


# -- the run -----------------------------------------------------------------------------------
@dataclass
class _Replay:
    sessions: list[SessionResult]
    shipped: frozenset[str]  # the rules in force
    errors: list[str] = field(default_factory=list)
    constraint_errors: list[str] = field(default_factory=list)  # line b only


def _replay(fx: Fixture, wb: Workbench, model: ModelSettings | None, constraints: bool) -> _Replay:
    """Replay the sessions in order: what each raised (or escalated) and left standing.

    An extraction batch that stays invalid stays pending (nothing is half-applied); a constraint
    batch the log refuses is left out whole. Either error is recorded and the run carries on.
    """
    out = _Replay([], frozenset(wb.runner.rules))
    for s in sorted(fx.sessions, key=lambda s: (s.timestamp, s.session_id)):
        before = {a.id: a for a in wb.alerts()}
        origin = f"{fx.id} session {s.session_id}"
        if model is None:
            wb.ingest([*_utterances(fx, s), *s.facts], origin=origin)
            if constraints and s.constraints:
                try:
                    wb.ingest(constraint_events(fx, s), origin=f"{origin} constraints")
                except UacError as exc:
                    out.constraint_errors.append(f"session {s.session_id}: {exc}")
        else:
            wb.ingest(_utterances(fx, s), origin=origin)
            report = wb.extract(progress=False)
            out.errors += [f"session {s.session_id}: {e}" for e in report.errors]
        after = wb.alerts()
        raised = [
            AlertSeen.of(a, escalated=a.id in before)
            for a in after
            if a.id not in before or _RANK[a.severity] > _RANK[before[a.id].severity]
        ]
        out.sessions.append(
            SessionResult(s.session_id, s.timestamp, raised, [AlertSeen.of(a) for a in after])
        )
    return out


def _score(
    fx: Fixture,
    sessions: list[SessionResult],
    errors: list[str],
    *,
    constraints: bool = False,
    shipped: frozenset[str] | None = None,
) -> ScenarioOutcome:
    """Score one replay for one line (see the module docstring). ``shipped``: the rules in force
    (None: all expected rules are); ``constraints``: line b, where constraint alerts of the
    scenario's category count. On line a, constraint alerts are not seen at all."""
    expected = (
        fx.expected.rules if fx.expected.rules else ALERT_TYPE_RULES.get(fx.expected.type, ())
    )
    rules = tuple(r for r in expected if shipped is None or r in shipped)
    o = ScenarioOutcome(
        fx.id,
        fx.category,
        fx.expected.type,
        fx.expected.severity,
        rules,
        fx.trigger_session,
        note=fx.note,
        errors=list(errors),
    )

    def seen(a: AlertSeen) -> bool:
        return constraints or not a.from_constraint

    def counts(a: AlertSeen) -> bool:
        if fx.trap:
            return False
        return a.rule in rules or (constraints and a.from_constraint and a.category == fx.category)

    o.sessions = [
        SessionResult(
            s.session_id,
            s.timestamp,
            [a for a in s.raised if seen(a)],
            [a for a in s.standing if seen(a)],
        )
        for s in sessions
    ]
    for s in o.sessions:
        for a in s.raised:
            if a.severity == "critical" and not counts(a):
                o.false_critical.append((s.session_id, a))
            if a.id.endswith(":error"):  # a rule that raised: the engine's rule_error alert
                o.errors.append(f"session {s.session_id}: {a.message}")
    if fx.trap:
        o.caught = not o.false_critical
        if o.false_critical:
            sid, a = o.false_critical[0]
            o.reason = f"critical alert in a trap: {a.rule} at session {sid}"
        return o
    trigger = next(
        (i for i, s in enumerate(o.sessions) if s.session_id == fx.trigger_session), None
    )
    if trigger is None:
        o.reason = f"trigger session {fx.trigger_session} was not replayed"
        return o
    earlier = [(s.session_id, a) for s in o.sessions[:trigger] for a in s.raised if counts(a)]
    later = [(s.session_id, a) for s in o.sessions[trigger + 1 :] for a in s.raised if counts(a)]
    o.early = [(sid, a.rule) for sid, a in earlier]
    o.late = [(sid, a.rule) for sid, a in later]
    hits = [a for a in o.sessions[trigger].raised if counts(a)]
    if hits:
        o.caught = True
        o.severity = max((a.severity for a in hits), key=_RANK.__getitem__)
        o.escalated = all(a.escalated for a in hits)
        return o
    if not rules and not constraints:
        missing = [r for r in expected if r not in rules]
        o.reason = f"no rule for {fx.expected.type}" + (
            f" ({', '.join(missing)} not shipped)" if missing else ""
        )
        return o
    standing = {a.id for a in o.sessions[trigger].standing}
    early = [(sid, a) for sid, a in earlier if a.id in standing]
    others = sorted({a.rule for a in o.sessions[trigger].raised})
    wanted = ", ".join(rules) or f"a {fx.category} constraint"
    if early:
        sid, a = early[0]
        o.reason = f"raised early: {a.rule} at session {sid}, before the trigger"
    elif later:
        sid, a = later[0]
        o.reason = f"raised late: {a.rule} at session {sid}, after the trigger"
    elif others:
        o.reason = f"wrong rule: {', '.join(others)} raised at the trigger, not {wanted}"
    else:
        o.reason = f"rule silent at trigger: {wanted} raised nothing new"
    return o


def _replay_scenario(fx: Fixture, model: ModelSettings | None, constraints: bool) -> _Replay:
    with Workbench(":memory:", user=fx.id, model=model) as wb:
        return _replay(fx, wb, model, constraints)


def run_scenario(
    fx: Fixture, *, model: ModelSettings | None = None, line: str = LIBRARY_LINE
) -> ScenarioOutcome:
    """Replay one scenario in a fresh in-memory workbench and score it for ``line``."""
    b = line == CONSTRAINTS_LINE
    r = _replay_scenario(fx, model, constraints=b)
    errors = r.errors + (r.constraint_errors if b else [])
    return _score(fx, r.sessions, errors, constraints=b, shipped=r.shipped)


def _items(fixtures: str | Path | Iterable[Fixture] | None) -> list[Fixture]:
    if fixtures is None or isinstance(fixtures, (str, Path)):
        return load_fixtures(fixtures)
    return list(fixtures)


def _mode(model: ModelSettings | None) -> str:
    return "fixtures" if model is None else f"extraction by {model.model or 'a recorded model'}"


def run(
    fixtures: str | Path | Iterable[Fixture] | None = None,
    *,
    model: ModelSettings | None = None,
    progress: bool = True,
    out_dir: str | Path | None = None,
    line: str = LIBRARY_LINE,
    set_name: str = "public",
) -> AlertBenchResult:
    """Replay every scenario and score one ``line``; with ``out_dir``, write the results.

    ``fixtures``: a fixture file, loaded fixtures, or None for the bundled public set. ``model``:
    extract the facts from the user turns with this model instead of reading them from the
    fixtures.
    """
    if out_dir is not None:
        output_dir(out_dir, what="--out")  # refused before the replay, not after it
    outcomes = [
        run_scenario(fx, model=model, line=line)
        for fx in tqdm(_items(fixtures), desc="scenarios", unit="scenario", disable=not progress)
    ]
    result = AlertBenchResult(outcomes, mode=_mode(model), line=line, set=set_name)
    if out_dir is not None:
        result.write(out_dir)
    return result


def _constraints_note(model: ModelSettings | None) -> str:
    """Line b's label: the scripted ceiling offline, the model's own proposals with one."""
    return CEILING if model is None else "the constraints the model's extraction proposed"


@dataclass
class AlertBench:
    """Both lines on every set run: the report and the results files of ``uac bench alerts``."""

    results: list[AlertBenchResult]

    def final(self) -> AlertBenchResult:
        """The library alone on the public set (or on the first set run): the summary line."""
        lib = [r for r in self.results if r.line == LIBRARY_LINE]
        return next((r for r in lib if r.set == "public"), lib[0])

    def report(self) -> str:
        first = self.results[0]
        lines = [
            f"uac bench alerts: {first.date}, {first.mode}, uac {first.version}, {first.machine}"
        ]
        for name in dict.fromkeys(r.set for r in self.results):
            runs = [r for r in self.results if r.set == name]
            lines += ["", f"== {name} set", CREDIT if name == "public" else HOLDOUT_CREDIT]
            for r in runs:
                lines += ["", f"-- {r.line}" + (f" ({r.note})" if r.note else "")]
                if r.outcomes:
                    lines += r.table()
            ran = [r for r in runs if r.outcomes]
            rows = ran[0].outcomes if ran else []
            w = _idw(rows)
            head = f"{'scenario':<{w}}{'expected':<48}" + "".join(f"{r.line:<26}" for r in ran)
            lines += ["", head.rstrip()]
            for i, o in enumerate(rows):
                want = f"{o.expected_type} ({o.expected_severity})"
                cells = "".join(f"{_cell(r.outcomes[i]):<26}" for r in ran)
                lines.append(f"{o.id:<{w}}{want:<48}{cells}".rstrip())
            for r in ran:
                lines += ["", f"-- {name}, {r.line}: details", *r.details()]
        lines += ["", "summary"]
        lines += [
            f"  {r.line_summary()}" + (f" [{r.note}]" if r.note and r.outcomes else "")
            for r in self.results
            if r.outcomes
        ]
        lines += [f"  {r.set}, {r.line}: {r.note}" for r in self.results if not r.outcomes]
        lines.append(self.final().summary_line())
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        first = self.results[0]
        return {
            "benchmark": "alerts",
            "date": first.date,
            "machine": first.machine,
            "uac_version": first.version,
            "mode": first.mode,
            "runs": [r.to_json() for r in self.results],
            "summary": self.final().summary_line(),
        }

    def write(self, out_dir: str | Path) -> tuple[Path, Path]:
        """Write ``alerts-<date>.json`` and ``alerts-<date>.txt`` into ``out_dir``."""
        return write_results(
            out_dir, f"alerts-{self.results[0].date}", self.to_json(), self.report()
        )


def _cell(o: ScenarioOutcome) -> str:
    if o.trap:
        text = "held" if o.caught else "SPRUNG"
    else:
        text = f"caught ({o.severity})" if o.caught else "miss"
        text += f" early{len(o.early)}" if o.early else ""
        text += f" late{len(o.late)}" if o.late else ""
    return text + (" FC" if o.false_critical else "")


def run_all(
    sets: Iterable[str] = ("public", "holdout"),
    *,
    model: ModelSettings | None = None,
    progress: bool = True,
    out_dir: str | Path | None = None,
    paths: dict[str, Path] | None = None,
) -> AlertBench:
    """Both lines on each of ``sets`` (``public``, ``holdout``), one replay a scenario scored
    twice: constraint alerts are not seen on the library line, so it is the library alone."""
    if out_dir is not None:
        output_dir(out_dir, what="--out")  # refused before the replay, not after it
    files = {**SETS, **(paths or {})}
    note = _constraints_note(model)
    results: list[AlertBenchResult] = []
    for name in sets:
        items = load_fixtures(files[name])
        lib: list[ScenarioOutcome] = []
        plus: list[ScenarioOutcome] = []
        for fx in tqdm(items, desc=name, unit="scenario", disable=not progress):
            r = _replay_scenario(fx, model, constraints=True)
            lib.append(_score(fx, r.sessions, r.errors, shipped=r.shipped))
            errs = r.errors + r.constraint_errors
            plus.append(_score(fx, r.sessions, errs, constraints=True, shipped=r.shipped))
        results.append(AlertBenchResult(lib, mode=_mode(model), set=name))
        results.append(
            AlertBenchResult(plus, mode=_mode(model), line=CONSTRAINTS_LINE, set=name, note=note)
        )
    bench = AlertBench(results)
    if out_dir is not None:
        bench.write(out_dir)
    return bench
