"""``uac bench alerts``: the fixture of the 40 scenarios, the replay and its score, the results
written, and the extraction path against a local chat-completions stand-in.

The scenarios are those of active_service_scenarios.json ("User as Code", arXiv 2606.16707,
© 2026 Bojie Li / Pine AI, Apache-2.0).
"""

from __future__ import annotations

import json
import platform
import re
from pathlib import Path
from typing import Any

import pytest

from uac_kernel import __version__
from uac_kernel.bench.alerts import (
    ALERT_TYPE_RULES,
    AlertBenchResult,
    Fixture,
    load_fixtures,
    run,
    scripted_extraction,
)
from uac_kernel.events import parse_objects, plan_batch
from uac_kernel.fold import State
from uac_kernel.model import ModelSettings
from uac_kernel.rules.library import LIBRARY
from uac_kernel.store import Store
from uac_kernel.testing import ChatServer

SOURCE = Path("/work/shared/data/uac-paper/active_service_scenarios.json")
CATEGORIES = {
    "travel_document_validity",
    "drug_interactions_health_safety",
    "financial_authorization_conflicts",
    "scheduling_conflicts",
    "warranty_deadline_expiration",
}
# The numbers of the offline run: a change in a rule or the fixture that moves them shows here.
CAUGHT, SEVERITY_MATCHED = 36, 28
MISSES = {
    "travel_02": "no rule for transit_visa_required",
    "health_05": "no rule for dosage_exceeds_weight_guideline",
    "finance_08": "no rule for cash_flow_risk",
    "deadline_08": "rule silent at trigger: deadline_approaching",
}
SUMMARY = re.compile(r"^alerts: (\d+)/(\d+) scenarios caught, (\d+) false critical$")


@pytest.fixture(scope="module")
def fixtures() -> list[Fixture]:
    return load_fixtures()


@pytest.fixture(scope="module")
def result(fixtures: list[Fixture]) -> AlertBenchResult:
    return run(fixtures, progress=False)


# -- the fixture ---------------------------------------------------------------------------------


def test_fixture_covers_the_40_scenarios(fixtures: list[Fixture]) -> None:
    ids = [f.id for f in fixtures]
    assert len(ids) == len(set(ids)) == 40
    for cat in CATEGORIES:
        assert sum(f.category == cat for f in fixtures) == 8, cat
    for f in fixtures:
        sessions = [s.session_id for s in f.sessions]
        assert f.trigger_session in sessions and sessions == sorted(sessions), f.id
        assert all(s.user_turns for s in f.sessions), f.id
    if not SOURCE.exists():
        pytest.skip(f"{SOURCE} is not on this machine; the ids were checked above")
    source = {s["id"]: s for s in json.loads(SOURCE.read_text())["scenarios"]}
    assert set(source) == set(ids)
    for f in fixtures:
        s = source[f.id]
        assert f.trigger_session == s["trigger_session"]["session_id"], f.id
        assert (f.expected.type, f.expected.severity) == (
            s["expected_alert"]["type"],
            s["expected_alert"]["severity"],
        )
        for mine, theirs in zip(f.sessions, s["sessions"], strict=True):
            assert mine.timestamp == theirs["timestamp"], f.id
            for turn in mine.user_turns:
                assert f"User: {turn}" in theirs["conversation"], f.id


def test_every_fact_is_a_valid_event_of_its_session(fixtures: list[Fixture]) -> None:
    store = Store(":memory:")  # one store, one user per scenario: as the bench replays them
    for f in fixtures:
        state = State(f.id)
        for s in f.sessions:
            for fact in s.facts:
                assert fact["kind"] == "fact" and fact["ts"] == s.timestamp, (f.id, fact)
                assert fact["op"] in ("add", "update") and fact["fields"], (f.id, fact)
            state.apply_all(store.append(plan_batch(state, parse_objects(s.facts, f.id))))
        assert state.types, f.id
    store.close()
    assert sum(len(s.facts) for f in fixtures for s in f.sessions) >= 80


def test_expected_rules_follow_the_mapping(fixtures: list[Fixture]) -> None:
    shipped = {r.name for r in LIBRARY}
    assert {n for rules in ALERT_TYPE_RULES.values() for n in rules} <= shipped
    assert {f.expected.type for f in fixtures} == set(ALERT_TYPE_RULES)
    for f in fixtures:
        assert f.expected.rules == ALERT_TYPE_RULES[f.expected.type], f.id


# -- the offline run -----------------------------------------------------------------------------


def test_offline_run_catches_what_it_reports(result: AlertBenchResult) -> None:
    assert result.mode == "fixtures" and result.total == 40
    assert (result.caught, result.false_critical) == (CAUGHT, 0)
    assert sum(o.severity_match for o in result.outcomes) == SEVERITY_MATCHED
    misses = {o.id: o for o in result.misses}
    assert set(misses) == set(MISSES)
    for i, o in misses.items():
        assert o.reason.startswith(MISSES[i]) and o.note, i  # every known miss is explained
    assert not [e for o in result.outcomes for e in o.errors]
    by_cat = result.by_category()
    assert set(by_cat) == CATEGORIES and sum(t for _, t, _ in by_cat.values()) == 40
    assert by_cat["scheduling_conflicts"] == (8, 8, 0)


def test_caught_at_the_trigger_and_not_before(result: AlertBenchResult) -> None:
    for o in result.outcomes:
        if not o.caught:
            continue
        trigger = next(s for s in o.sessions if s.session_id == o.trigger_session)
        assert any(a.rule in o.expected_rules for a in trigger.raised), o.id
        assert o.severity in ("critical", "warning", "info")
    # deadline_07: info ten days ahead, escalated to warning at the trigger (three days ahead)
    d7 = next(o for o in result.outcomes if o.id == "deadline_07")
    raised = [(s.session_id, a.severity, a.escalated) for s in d7.sessions for a in s.raised]
    assert raised == [(5, "info", False), (6, "warning", True)]
    assert [o.id for o in result.outcomes if o.escalated] == ["deadline_07"]


def test_summary_line_and_report(result: AlertBenchResult) -> None:
    line = result.summary_line()
    assert line == f"alerts: {CAUGHT}/40 scenarios caught, 0 false critical"
    assert SUMMARY.match(line)
    report = result.report()
    assert report.rstrip("\n").splitlines()[-1] == line
    assert "travel_document_validity" in report and f"misses ({len(MISSES)})" in report
    for i, why in MISSES.items():
        assert f"  {i}: {why}" in report


def test_results_are_written(result: AlertBenchResult, tmp_path: Path) -> None:
    js, txt = result.write(tmp_path / "results")
    assert js.name == f"alerts-{result.date}.json" and txt.name == f"alerts-{result.date}.txt"
    data = json.loads(js.read_text())
    assert data["machine"] == platform.platform() and data["uac_version"] == __version__
    assert data["date"] == result.date and data["summary"] == result.summary_line()
    assert (data["caught"], data["total"], data["false_critical"]) == (CAUGHT, 40, 0)
    assert "Bojie Li" in data["credit"]
    first = data["scenarios"][0]
    assert {"id", "caught", "reason", "severity", "severity_match", "sessions"} <= set(first)
    assert txt.read_text().splitlines()[-1] == result.summary_line()


# -- scoring -------------------------------------------------------------------------------------


def scenario(
    type_: str, trigger: int, *sessions: tuple[str, list[tuple[str, str, dict[str, Any]]]]
) -> Fixture:
    """A small fixture: sessions numbered from 1, each (timestamp, [(type, key, fields)])."""
    return Fixture.model_validate(
        {
            "id": "t",
            "category": "test",
            "description": "test",
            "trigger_session": trigger,
            "expected": {"type": type_, "severity": "critical", "rules": []},
            "sessions": [
                {
                    "session_id": n,
                    "timestamp": ts,
                    "user_turns": ["..."],
                    "facts": [
                        {"kind": "fact", "ts": ts, "op": "add", "type": t, "key": k, "fields": f}
                        for t, k, f in facts
                    ],
                }
                for n, (ts, facts) in enumerate(sessions, 1)
            ],
        }
    )


PENICILLIN = ("Allergy", "pen", {"substance": "penicillin"})
AMOXICILLIN = ("Medication", "amox", {"name": "amoxicillin"})


def test_scoring_reasons() -> None:
    early = scenario(
        "allergy_violation", 2, ("2025-01-01", [PENICILLIN, AMOXICILLIN]), ("2025-01-02", [])
    )
    wrong = scenario(
        "allergy_violation",
        2,
        ("2025-01-01", [("Passport", "p", {"expires": "2025-02-01"})]),
        ("2025-01-02", [("Trip", "t", {"start": "2025-03-01", "international": True})]),
    )
    silent = scenario("allergy_violation", 2, ("2025-01-01", [PENICILLIN]), ("2025-01-02", []))
    unknown = scenario("made_up_type", 1, ("2025-01-01", [PENICILLIN, AMOXICILLIN]))
    caught = scenario(
        "allergy_violation", 2, ("2025-01-01", [PENICILLIN]), ("2025-01-02", [AMOXICILLIN])
    )
    res = run([early, wrong, silent, unknown, caught], progress=False)
    reasons = [o.reason for o in res.outcomes]
    assert reasons[0] == (
        "raised early: drug_allergy_cross_reactivity at session 1, before the trigger"
    )
    assert reasons[1].startswith("wrong rule: passport_validity raised at the trigger")
    assert res.outcomes[1].false_critical and res.outcomes[1].false_critical[0][0] == 2
    assert reasons[2].startswith("rule silent at trigger")
    assert reasons[3] == "no rule for made_up_type"
    assert res.outcomes[3].false_critical  # any critical alert is unexpected there
    assert res.outcomes[4].caught and res.outcomes[4].severity_match and reasons[4] == ""
    assert res.summary_line() == "alerts: 1/5 scenarios caught, 2 false critical"


# -- the extraction path -------------------------------------------------------------------------


def test_extraction_path_with_a_chat_server_stand_in(fixtures: list[Fixture]) -> None:
    fx = next(f for f in fixtures if f.id == "schedule_01")
    with ChatServer(scripted_extraction(fixtures)) as server:
        settings = ModelSettings(model="scripted-extractor", base_url=server.base_url)
        res = run([fx], model=settings, progress=False)
    (o,) = res.outcomes
    assert o.caught and o.severity == "critical" and not o.errors, o.reason
    assert res.mode == "extraction by scripted-extractor"
    assert res.summary_line() == "alerts: 1/1 scenarios caught, 0 false critical"
    # one extraction call per session, each with that session's user turn and its source
    assert len(server.requests) == len(fx.sessions) == 2
    for request, session in zip(server.requests, fx.sessions, strict=True):
        prompt = request["messages"][-1]["content"]
        assert f"[scenario:schedule_01:{session.session_id}:1]" in prompt
        assert session.user_turns[0] in prompt


def test_extraction_path_depends_on_what_the_model_extracts(fixtures: list[Fixture]) -> None:
    fx = next(f for f in fixtures if f.id == "schedule_01")
    with ChatServer(lambda body: '{"operations": []}') as server:
        settings = ModelSettings(model="extracts-nothing", base_url=server.base_url)
        res = run([fx], model=settings, progress=False)
    (o,) = res.outcomes
    assert not o.caught and o.reason.startswith("rule silent at trigger")
