"""``uac bench alerts``: do the shipped rules raise the expected alerts at the right moment?

The design material is the 40 scenarios of ``active_service_scenarios.json`` from "User as Code:
Executable Memory for Personalized Agents" (arXiv 2606.16707), © 2026 Bojie Li (Pine AI), Apache
License 2.0. Each scenario spreads facts over a few dated sessions and expects one unsolicited
alert, of a given type and severity, at a trigger session.

The bundled fixture (``data/alert_fixtures.json``) holds, per session, the user turns and the
typed facts a careful extractor would take from them (assistant turns ignored), as Event JSONL
fact objects following the record conventions of ``docs/rules.md``; and the scenario's expected
alert type, mapped to the shipped rules that implement it (``ALERT_TYPE_RULES``).

Replay: each scenario gets a fresh in-memory ``Workbench`` with the shipped rules. Each session
is one ingest of its user turns (as utterances, so the log clock reaches the session's date even
when nothing new is learned) and its facts, all dated at the session's timestamp. With a
``model``, the facts are not read from the fixture: the turns are ingested and the model extracts
the facts (``Workbench.extract``) after each session.

Scoring, per scenario:

- **caught**: at the trigger session an alert of an expected rule is newly raised, or a standing
  one is escalated to a higher severity (a deadline that was ``info`` a week ago becomes
  ``warning``: the alert is pushed again, now). Otherwise the miss has a reason: ``no rule for
  <type>`` (no shipped rule implements the alert type), ``raised early`` (it stood before the
  trigger, unchanged), ``raised late``, ``wrong rule`` (only other rules raised alerts at the
  trigger) or ``rule silent at trigger``.
- **false critical**: a critical alert raised (or escalated to critical) by a rule outside the
  expected set, at any session.
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
from typing import Any

from pydantic import BaseModel, ConfigDict
from tqdm.auto import tqdm

from uac_kernel import __version__
from uac_kernel.extract import Extraction, FactOperation, FieldValue
from uac_kernel.model import ModelSettings
from uac_kernel.rules.engine import Alert
from uac_kernel.workbench import Workbench

__all__ = [
    "ALERT_TYPE_RULES",
    "FIXTURES",
    "AlertBenchResult",
    "Fixture",
    "ScenarioOutcome",
    "load_fixtures",
    "run",
    "run_scenario",
    "scripted_extraction",
]

FIXTURES = Path(__file__).parent / "data" / "alert_fixtures.json"
CREDIT = (
    "Scenarios: active_service_scenarios.json, 'User as Code: Executable Memory for Personalized "
    "Agents' (arXiv 2606.16707), (c) 2026 Bojie Li / Pine AI, Apache-2.0"
)

_OVERLAP = ("overlapping_commitments",)
_DEADLINE = ("deadline_approaching",)

# The scenarios' alert types and the shipped rules that implement them. A type mapped to nothing
# has no rule: its scenario is reported as a miss with the reason "no rule for <type>".
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
    "cash_flow_risk": (),
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
    type: str
    severity: str
    rules: tuple[str, ...]


class Session(_Strict):
    session_id: int
    timestamp: str
    user_turns: tuple[str, ...]
    facts: tuple[dict[str, Any], ...]


class Fixture(_Strict):
    """One scenario: its sessions (user turns and facts) and the alert it expects."""

    id: str
    category: str
    description: str
    trigger_session: int
    expected: Expected
    sessions: tuple[Session, ...]
    note: str = ""  # why a known miss is missed


class _FixtureFile(_Strict):
    about: str
    credit: str
    license: str
    scenarios: tuple[Fixture, ...]


def load_fixtures(path: str | Path | None = None) -> list[Fixture]:
    """The scenarios of a fixture file (the bundled one by default)."""
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


_SOURCE = re.compile(r"\[(scenario:([^:\]\s]+):(\d+):\d+)\]")


def scripted_extraction(fixtures: Iterable[Fixture]) -> Callable[[dict[str, Any]], str]:
    """A chat-completions responder (for ``uac_kernel.testing.ChatServer``) that answers an
    extraction request with the fixture facts of the sessions whose turns it names: a stand-in
    for a model that extracts exactly what the fixture says."""
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
        return Extraction(operations=ops).model_dump_json()

    return respond


# -- outcomes ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class AlertSeen:
    """An alert as the bench saw it after a session."""

    rule: str
    severity: str
    message: str
    id: str
    escalated: bool = False  # standing before at a lower severity

    @classmethod
    def of(cls, a: Alert, escalated: bool = False) -> AlertSeen:
        return cls(a.rule, a.severity, a.message, a.id, escalated)


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
    caught: bool = False
    reason: str = ""  # why it was missed ("" when caught)
    severity: str | None = None  # of the alert that caught it
    escalated: bool = False  # caught by a standing alert raised to a higher severity
    false_critical: list[tuple[int, AlertSeen]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    sessions: list[SessionResult] = field(default_factory=list)

    @property
    def severity_match(self) -> bool:
        return self.caught and self.severity == self.expected_severity


@dataclass
class AlertBenchResult:
    """The outcome of every scenario, and how the run was made."""

    outcomes: list[ScenarioOutcome]
    mode: str
    date: str = field(default_factory=lambda: date.today().isoformat())
    machine: str = field(default_factory=platform.platform)
    version: str = __version__

    @property
    def total(self) -> int:
        return len(self.outcomes)

    @property
    def caught(self) -> int:
        return sum(o.caught for o in self.outcomes)

    @property
    def false_critical(self) -> int:
        """Scenarios with at least one critical alert from a rule not expected there."""
        return sum(bool(o.false_critical) for o in self.outcomes)

    @property
    def misses(self) -> list[ScenarioOutcome]:
        return [o for o in self.outcomes if not o.caught]

    def by_category(self) -> dict[str, tuple[int, int, int]]:
        """Per category: (caught, total, scenarios with a false critical)."""
        out: dict[str, tuple[int, int, int]] = {}
        for o in self.outcomes:
            c, t, f = out.get(o.category, (0, 0, 0))
            out[o.category] = (c + o.caught, t + 1, f + bool(o.false_critical))
        return out

    def summary_line(self) -> str:
        return (
            f"alerts: {self.caught}/{self.total} scenarios caught, "
            f"{self.false_critical} false critical"
        )

    def report(self) -> str:
        """The text table: per category, then every miss and false critical, then the summary."""
        lines = [
            f"uac bench alerts: {self.date}, {self.mode}, uac {self.version}, {self.machine}",
            CREDIT,
            "",
            f"{'category':<36}{'caught':>8}{'false critical':>16}",
        ]
        for cat, (c, t, f) in self.by_category().items():
            lines.append(f"{cat:<36}{f'{c}/{t}':>8}{f:>16}")
        lines.append(f"{'all':<36}{f'{self.caught}/{self.total}':>8}{self.false_critical:>16}")
        lines += ["", f"{'scenario':<13}{'expected':<48}{'got':<10}outcome"]
        for o in self.outcomes:
            want = f"{o.expected_type} ({o.expected_severity})"
            outcome = "caught" if o.caught else f"MISS: {o.reason}"
            outcome += " (escalated: it stood before at a lower severity)" if o.escalated else ""
            if o.false_critical:
                outcome += "; FALSE CRITICAL"
            lines.append(f"{o.id:<13}{want:<48}{o.severity or '-':<10}{outcome}")
        misses = self.misses
        lines += ["", f"misses ({len(misses)})"]
        for o in misses:
            lines.append(f"  {o.id}: {o.reason}")
            lines += [f"      {line}" for line in textwrap.wrap(o.note, 92)]
        if not misses:
            lines.append("  none")
        wrong = [(o, s, a) for o in self.outcomes for s, a in o.false_critical]
        lines += ["", f"false critical alerts ({len(wrong)})"]
        lines += [f"  {o.id} session {s}: {a.rule}: {a.message}" for o, s, a in wrong] or ["  none"]
        errors = [(o, e) for o in self.outcomes for e in o.errors]
        if errors:
            lines += ["", f"errors ({len(errors)})", *(f"  {o.id}: {e}" for o, e in errors)]
        matched = sum(o.severity_match for o in self.outcomes)
        lines += [
            "",
            f"severity as expected in {matched} of {self.caught} caught",
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
            "credit": CREDIT,
            "caught": self.caught,
            "total": self.total,
            "false_critical": self.false_critical,
            "severity_matched": sum(o.severity_match for o in self.outcomes),
            "by_category": {
                cat: {"caught": c, "total": t, "false_critical": f}
                for cat, (c, t, f) in self.by_category().items()
            },
            "scenarios": [{**asdict(o), "severity_match": o.severity_match} for o in self.outcomes],
            "summary": self.summary_line(),
        }

    def write(self, out_dir: str | Path) -> tuple[Path, Path]:
        """Write ``alerts-<date>.json`` and ``alerts-<date>.txt`` into ``out_dir``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        js, txt = out / f"alerts-{self.date}.json", out / f"alerts-{self.date}.txt"
        js.write_text(json.dumps(self.to_json(), indent=1, ensure_ascii=False) + "\n")
        txt.write_text(self.report(), encoding="utf-8")
        return js, txt


# -- the run -----------------------------------------------------------------------------------
def _replay(
    fx: Fixture, wb: Workbench, model: ModelSettings | None, errors: list[str]
) -> list[SessionResult]:
    """Replay the sessions in order: what each raised (or escalated) and left standing.

    An extraction batch that stays invalid stays pending (nothing is half-applied); its error is
    recorded and the run carries on with the next session.
    """
    results = []
    for s in sorted(fx.sessions, key=lambda s: (s.timestamp, s.session_id)):
        before = {a.id: a for a in wb.alerts()}
        origin = f"{fx.id} session {s.session_id}"
        if model is None:
            wb.ingest([*_utterances(fx, s), *s.facts], origin=origin)
        else:
            wb.ingest(_utterances(fx, s), origin=origin)
            report = wb.extract(progress=False)
            errors += [f"session {s.session_id}: {e}" for e in report.errors]
        after = wb.alerts()
        raised = [
            AlertSeen.of(a, escalated=a.id in before)
            for a in after
            if a.id not in before or _RANK[a.severity] > _RANK[before[a.id].severity]
        ]
        results.append(
            SessionResult(s.session_id, s.timestamp, raised, [AlertSeen.of(a) for a in after])
        )
    return results


def _score(fx: Fixture, sessions: list[SessionResult], errors: list[str]) -> ScenarioOutcome:
    rules = tuple(ALERT_TYPE_RULES.get(fx.expected.type, ()))
    o = ScenarioOutcome(
        fx.id,
        fx.category,
        fx.expected.type,
        fx.expected.severity,
        rules,
        fx.trigger_session,
        note=fx.note,
        errors=list(errors),
        sessions=sessions,
    )
    trigger = next((i for i, s in enumerate(sessions) if s.session_id == fx.trigger_session), None)
    for s in sessions:
        for a in s.raised:
            if a.severity == "critical" and a.rule not in rules:
                o.false_critical.append((s.session_id, a))
            if a.id.endswith(":error"):  # a rule that raised: the engine's rule_error alert
                o.errors.append(f"session {s.session_id}: {a.message}")
    if not rules:
        o.reason = f"no rule for {fx.expected.type}"
        return o
    if trigger is None:
        o.reason = f"trigger session {fx.trigger_session} was not replayed"
        return o
    hits = [a for a in sessions[trigger].raised if a.rule in rules]
    if hits:
        o.caught = True
        o.severity = max((a.severity for a in hits), key=_RANK.__getitem__)
        o.escalated = all(a.escalated for a in hits)
        return o
    earlier = [(s.session_id, a) for s in sessions[:trigger] for a in s.raised if a.rule in rules]
    standing = {a.id for a in sessions[trigger].standing}
    early = [(sid, a) for sid, a in earlier if a.id in standing]
    later = [
        (s.session_id, a) for s in sessions[trigger + 1 :] for a in s.raised if a.rule in rules
    ]
    others = sorted({a.rule for a in sessions[trigger].raised})
    if early:
        sid, a = early[0]
        o.reason = f"raised early: {a.rule} at session {sid}, before the trigger"
    elif later:
        sid, a = later[0]
        o.reason = f"raised late: {a.rule} at session {sid}, after the trigger"
    elif others:
        o.reason = f"wrong rule: {', '.join(others)} raised at the trigger, not {', '.join(rules)}"
    else:
        o.reason = f"rule silent at trigger: {', '.join(rules)} raised nothing new"
    return o


def run_scenario(fx: Fixture, *, model: ModelSettings | None = None) -> ScenarioOutcome:
    """Replay one scenario in a fresh in-memory workbench and score it."""
    errors: list[str] = []
    with Workbench(":memory:", user=fx.id, model=model) as wb:
        sessions = _replay(fx, wb, model, errors)
    return _score(fx, sessions, errors)


def run(
    fixtures: str | Path | Iterable[Fixture] | None = None,
    *,
    model: ModelSettings | None = None,
    progress: bool = True,
    out_dir: str | Path | None = None,
) -> AlertBenchResult:
    """Replay every scenario and score it; with ``out_dir``, write the JSON and text results.

    ``fixtures``: a fixture file, loaded fixtures, or None for the bundled file. ``model``: extract
    the facts from the user turns with this model instead of reading them from the fixtures.
    """
    items = (
        load_fixtures(fixtures)
        if fixtures is None or isinstance(fixtures, (str, Path))
        else list(fixtures)
    )
    outcomes = [
        run_scenario(fx, model=model)
        for fx in tqdm(items, desc="scenarios", unit="scenario", disable=not progress)
    ]
    mode = "fixtures" if model is None else f"extraction by {model.model or 'a recorded model'}"
    result = AlertBenchResult(outcomes, mode=mode)
    if out_dir is not None:
        result.write(out_dir)
    return result
