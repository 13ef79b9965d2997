"""``uac bench alerts``: the fixtures of the 40 public and the held-out scenarios, their scripted
constraints, the replay and its score on both lines (timing, traps, false criticals), the report
and results written, and the extraction path against a local chat-completions stand-in.

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
    CEILING,
    CONSTRAINTS_LINE,
    HOLDOUT,
    SCRIPTED_AUTHOR,
    AlertBench,
    AlertBenchResult,
    AlertSeen,
    Fixture,
    SessionResult,
    _score,
    constraint_events,
    load_fixtures,
    run,
    run_all,
    scripted_extraction,
)
from uac_kernel.ingest.events import parse_objects, plan_batch
from uac_kernel.language.spec import parse_constraint
from uac_kernel.log.store import Store
from uac_kernel.model.client import ModelSettings
from uac_kernel.model.testing import ChatServer
from uac_kernel.rules.library import LIBRARY
from uac_kernel.state.fold import State
from uac_kernel.workbench import Workbench

SOURCE = Path("/work/shared/data/uac-paper/active_service_scenarios.json")
CATEGORIES = {
    "travel_document_validity",
    "drug_interactions_health_safety",
    "financial_authorization_conflicts",
    "scheduling_conflicts",
    "warranty_deadline_expiration",
}
# The numbers of the offline run: a change in a rule or the fixture that moves them shows here.
CAUGHT, SEVERITY_MATCHED = 37, 29
MISSES = {
    "travel_02": "no rule for transit_visa_required",
    "health_05": "no rule for dosage_exceeds_weight_guideline",
    "deadline_08": "rule silent at trigger: deadline_approaching",
}
SUMMARY = re.compile(r"^alerts: (\d+)/(\d+) scenarios caught, (\d+) false critical$")


@pytest.fixture(scope="module")
def fixtures() -> list[Fixture]:
    return load_fixtures()


@pytest.fixture(scope="module")
def holdout() -> list[Fixture]:
    return load_fixtures(HOLDOUT)


@pytest.fixture(scope="module")
def bench() -> AlertBench:
    return run_all(progress=False)


@pytest.fixture(scope="module")
def result(bench: AlertBench) -> AlertBenchResult:
    return bench.final()


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


@pytest.mark.parametrize("which", ["public", "holdout"])
def test_every_fact_is_a_valid_event_of_its_session(
    which: str, fixtures: list[Fixture], holdout: list[Fixture]
) -> None:
    store = Store(":memory:")  # one store, one user per scenario: as the bench replays them
    for f in fixtures if which == "public" else holdout:
        state = State(f.id)
        for s in f.sessions:
            for fact in s.facts:
                assert fact["kind"] == "fact" and fact["ts"] == s.timestamp, (f.id, fact)
                assert fact["op"] in ("add", "update") and fact["fields"], (f.id, fact)
            state.apply_all(store.append(plan_batch(state, parse_objects(s.facts, f.id))))
        assert state.types, f.id
    store.close()
    assert sum(len(s.facts) for f in fixtures for s in f.sessions) >= 80
    assert sum(len(s.facts) for f in holdout for s in f.sessions) >= 60


def test_expected_rules_follow_the_mapping(fixtures: list[Fixture]) -> None:
    shipped = {r.name for r in LIBRARY}
    assert {n for rules in ALERT_TYPE_RULES.values() for n in rules} <= shipped
    assert {f.expected.type for f in fixtures} == set(ALERT_TYPE_RULES)
    for f in fixtures:
        assert f.expected.rules == ALERT_TYPE_RULES[f.expected.type], f.id


def test_holdout_set_is_ours_harder_and_has_traps(
    fixtures: list[Fixture], holdout: list[Fixture]
) -> None:
    ids = [f.id for f in holdout]
    assert len(ids) == len(set(ids)) >= 20 and not set(ids) & {f.id for f in fixtures}
    assert {f.category for f in holdout} == CATEGORIES
    public_turns = {t for f in fixtures for s in f.sessions for t in s.user_turns}
    shipped = {r.name for r in LIBRARY}
    for f in holdout:
        sessions = [s.session_id for s in f.sessions]
        assert 2 <= len(sessions) <= 6 and sessions == sorted(sessions), f.id
        assert f.trigger_session in sessions and all(s.user_turns for s in f.sessions), f.id
        assert not public_turns & {t for s in f.sessions for t in s.user_turns}, f.id
        if f.trap:  # a trap expects no alert at all, so names no rule
            assert (f.expected.severity, f.expected.rules) == ("none", ()), f.id
        else:
            assert f.expected.severity in ("critical", "warning", "info"), f.id
            assert f.expected.rules or f.note, f.id  # a type no rule names is explained
    traps = [f for f in holdout if f.trap]
    assert len(traps) >= 3 and len(holdout) - len(traps) >= 20
    # rules named: the shipped ones, or the general rules announced for the library
    announced = {"medication_supply", "residence_day_limit", "contribution_limit"}
    named = {r for f in holdout for r in f.expected.rules}
    assert named <= shipped | announced | {"balance_projection"}


@pytest.mark.parametrize("which", ["public", "holdout"])
def test_scripted_constraints_parse_and_are_logged_as_the_scripted_model(
    which: str, fixtures: list[Fixture], holdout: list[Fixture]
) -> None:
    items = fixtures if which == "public" else holdout
    ops = [(f, s, c) for f in items for s in f.sessions for c in s.constraints]
    assert len(ops) >= (30 if which == "public" else 20)
    for f, _s, c in ops:
        assert c.op == "add" and c.constraint is not None, (f.id, c.key)
        parsed = parse_constraint(c.constraint, f"{f.id} {c.key}")
        assert parsed.category in CATEGORIES, (f.id, c.key)  # a family, so line b can count it
    f, s, c = ops[0]
    (event,) = [e for e in constraint_events(f, s) if e["key"] == c.key]
    assert event["kind"] == "constraint" and event["ts"] == s.timestamp
    assert event["author"] == SCRIPTED_AUTHOR and event["constraint"] == c.constraint
    assert event["derived_from"] == [
        f"scenario:{f.id}:{s.session_id}:{n}" for n in range(1, len(s.user_turns) + 1)
    ]
    with Workbench(":memory:", user=f.id) as wb:
        wb.ingest(constraint_events(f, s))
        (version,) = [v for v in wb.constraints() if v.key == c.key]
        assert version.author == SCRIPTED_AUTHOR
        assert list(version.derived_from) == event["derived_from"]


def test_a_fixture_refuses_a_constraint_that_does_not_parse(fixtures: list[Fixture]) -> None:
    data = fixtures[0].model_dump(mode="json")
    data["sessions"][0]["constraints"] = [
        {"op": "add", "key": "k", "constraint": {"kind": "obligation", "title": "x"}}
    ]
    with pytest.raises(ValueError, match="due"):
        Fixture.model_validate(data)


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
    assert set(by_cat) == CATEGORIES and sum(v[1] for v in by_cat.values()) == 40
    assert by_cat["scheduling_conflicts"] == (8, 8, 0, 0, 0)


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


def test_results_are_written(bench: AlertBench, result: AlertBenchResult, tmp_path: Path) -> None:
    js, txt = bench.write(tmp_path / "results")
    assert js.name == f"alerts-{result.date}.json" and txt.name == f"alerts-{result.date}.txt"
    data = json.loads(js.read_text())
    assert data["machine"] == platform.platform() and data["uac_version"] == __version__
    assert data["date"] == result.date and data["summary"] == result.summary_line()
    runs = {(r["set"], r["line"]): r for r in data["runs"]}
    assert list(runs) == [
        ("public", "library"),
        ("public", CONSTRAINTS_LINE),
        ("holdout", "library"),
        ("holdout", CONSTRAINTS_LINE),
    ]
    public = runs["public", "library"]
    assert (public["caught"], public["total"], public["false_critical"]) == (CAUGHT, 40, 0)
    assert "Bojie Li" in public["credit"] and "Bojie Li" not in runs["holdout", "library"]["credit"]
    assert runs["public", CONSTRAINTS_LINE]["note"] == CEILING
    assert runs["holdout", "library"]["traps"] >= 3
    first = public["scenarios"][0]
    assert {"id", "caught", "reason", "severity", "early", "late", "on_time", "sessions"} <= set(
        first
    )
    assert txt.read_text().splitlines()[-1] == result.summary_line()


def test_report_shows_both_lines_on_both_sets_and_ends_with_the_library_on_the_40(
    bench: AlertBench, result: AlertBenchResult
) -> None:
    report = bench.report()
    lines = report.rstrip("\n").splitlines()
    assert (
        lines[-1]
        == result.summary_line()
        == f"alerts: {CAUGHT}/40 scenarios caught, 0 false critical"
    )
    assert SUMMARY.match(lines[-1])
    assert "== public set" in report and "== holdout set" in report
    assert report.count(f"-- library + constraints ({CEILING})") == 2
    assert [(r.set, r.line) for r in bench.results] == [
        ("public", "library"),
        ("public", CONSTRAINTS_LINE),
        ("holdout", "library"),
        ("holdout", CONSTRAINTS_LINE),
    ]
    summary = lines[lines.index("summary") + 1 : -1]
    assert [line.strip().split(":")[0] for line in summary] == [
        f"{r.set}, {r.line}" for r in bench.results
    ]
    for r in bench.results:  # every line reports its timing and false criticals
        assert f"({r.on_time} on time, {r.early} early, {r.late} late)" in r.line_summary()
    plus = bench.results[1]
    assert plus.caught >= result.caught  # constraints only add alerts to the library's


def test_cli_runs_one_set_and_writes_the_results(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from uac_kernel.cli.main import main

    assert main(["bench", "alerts", "--set", "holdout", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "== holdout set" in out and "== public set" not in out
    last = out.rstrip("\n").splitlines()[-1]
    assert SUMMARY.match(last)
    (js,) = tmp_path.glob("alerts-*.json")
    data = json.loads(js.read_text())
    assert data["summary"] == last and {r["set"] for r in data["runs"]} == {"holdout"}


# -- scoring -------------------------------------------------------------------------------------


def scenario(
    type_: str,
    trigger: int,
    *sessions: tuple[str, list[tuple[str, str, dict[str, Any]]]],
    category: str = "test",
    constraints: dict[int, list[dict[str, Any]]] | None = None,
) -> Fixture:
    """A small fixture: sessions numbered from 1, each (timestamp, [(type, key, fields)]);
    ``constraints``: per session number, its scripted constraint operations."""
    return Fixture.model_validate(
        {
            "id": "t",
            "category": category,
            "description": "test",
            "trigger_session": trigger,
            "expected": {
                "type": type_,
                "severity": "none" if type_ == "none" else "critical",
                "rules": [],
            },
            "sessions": [
                {
                    "session_id": n,
                    "timestamp": ts,
                    "user_turns": ["..."],
                    "facts": [
                        {"kind": "fact", "ts": ts, "op": "add", "type": t, "key": k, "fields": f}
                        for t, k, f in facts
                    ],
                    "constraints": (constraints or {}).get(n, []),
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


def test_early_and_late_firings_are_counted_apart_from_caught() -> None:
    early = scenario(
        "allergy_violation", 2, ("2025-01-01", [PENICILLIN, AMOXICILLIN]), ("2025-01-02", [])
    )
    late = scenario(
        "allergy_violation",
        2,
        ("2025-01-01", [PENICILLIN]),
        ("2025-01-02", []),
        ("2025-01-03", [AMOXICILLIN]),
    )
    augmentin = ("Medication", "aug", {"name": "Augmentin"})
    early_and_caught = scenario(
        "allergy_violation",
        2,
        ("2025-01-01", [PENICILLIN, AMOXICILLIN]),
        ("2025-01-02", [augmentin]),
    )
    res = run([early, late, early_and_caught], progress=False)
    o_early, o_late, o_both = res.outcomes
    rule = "drug_allergy_cross_reactivity"
    assert (o_early.caught, o_early.early, o_early.late) == (False, [(1, rule)], [])
    assert (o_late.caught, o_late.early, o_late.late) == (False, [], [(3, rule)])
    assert o_late.reason == f"raised late: {rule} at session 3, after the trigger"
    assert (o_both.caught, o_both.early, o_both.on_time) == (True, [(1, rule)], False)
    assert (res.caught, res.on_time, res.early, res.late) == (1, 0, 2, 1)
    assert res.by_category() == {"test": (1, 3, 2, 1, 0)}
    assert "(0 on time, 2 early, 1 late)" in res.line_summary()
    report = res.report()
    assert "  t (trigger 2): late drug_allergy_cross_reactivity at session 3" in report


def test_a_trap_holds_unless_a_critical_alert_is_raised() -> None:
    quiet = scenario("none", 2, ("2025-01-01", [PENICILLIN]), ("2025-01-02", []))
    sprung = scenario("none", 2, ("2025-01-01", [PENICILLIN]), ("2025-01-02", [AMOXICILLIN]))
    caught = scenario(
        "allergy_violation", 2, ("2025-01-01", [PENICILLIN]), ("2025-01-02", [AMOXICILLIN])
    )
    res = run([quiet, sprung, caught], progress=False)
    o_quiet, o_sprung, _ = res.outcomes
    assert o_quiet.caught and not o_quiet.false_critical and o_quiet.reason == ""
    assert not o_sprung.caught and o_sprung.false_critical[0][0] == 2
    assert o_sprung.reason == (
        "critical alert in a trap: drug_allergy_cross_reactivity at session 2"
    )
    # traps are counted apart: the caught count is over the scenarios that expect an alert
    assert (res.caught, res.total, res.traps_held, len(res.traps)) == (1, 1, 1, 2)
    assert res.summary_line() == "alerts: 1/1 scenarios caught, 1 false critical"
    assert res.line_summary().endswith("1 false critical, traps held 1/2")


def renewal(category: str) -> dict[str, Any]:
    """A scripted constraint: renew the registration by its ``kx`` date (a name no concept's
    words hold, so the library cannot read it as a deadline and only the constraint alerts)."""
    return {
        "op": "add",
        "key": "renew-registration",
        "constraint": {
            "kind": "obligation",
            "title": "Renew the car registration",
            "category": category,
            "subject": {"type": "Registration"},
            "due": {"fields": ["kx"]},
            "done": ["renewed"],
        },
    }


REGISTRATION = ("Registration", "car", {"kx": "2025-03-31"})


def test_line_b_counts_constraint_alerts_of_the_scenario_category_only() -> None:
    cat = "warranty_deadline_expiration"
    ours = scenario(
        "registration_renewal",
        2,
        ("2025-03-01", [REGISTRATION]),
        ("2025-03-30", []),
        category=cat,
        constraints={1: [renewal(cat)]},
    )
    other = scenario(
        "registration_renewal",
        2,
        ("2025-03-01", [REGISTRATION]),
        ("2025-03-30", []),
        category=cat,
        constraints={1: [renewal("scheduling_conflicts")]},
    )
    lib = run([ours, other], progress=False)
    plus = run([ours, other], progress=False, line=CONSTRAINTS_LINE)
    # the library alone does not see constraint alerts at all
    for o in lib.outcomes:
        assert not o.caught and o.reason == "no rule for registration_renewal"
        assert not o.false_critical and not any(s.raised for s in o.sessions)
    o_ours, o_other = plus.outcomes
    assert o_ours.caught and o_ours.severity == "critical" and not o_ours.errors, o_ours.reason
    (hit,) = next(s for s in o_ours.sessions if s.session_id == 2).raised
    assert hit.rule.startswith("constraint_renew_registration") and hit.category == cat
    # another category's constraint alert does not count: critical, it is a false critical
    assert not o_other.caught and o_other.reason.startswith("wrong rule: constraint_")
    assert o_other.false_critical and o_other.false_critical[0][0] == 2
    assert plus.summary_line() == "alerts: 1/2 scenarios caught, 1 false critical"


def test_a_refused_constraint_batch_costs_the_line_b_run_no_fact() -> None:
    bad = renewal("warranty_deadline_expiration")
    bad["constraint"]["subject"] = {"type": "not\na type"}  # a line break: no name holds one
    fx = scenario(
        "allergy_violation",
        2,
        ("2025-01-01", [PENICILLIN]),
        ("2025-01-02", [AMOXICILLIN]),
    )
    data = fx.model_dump(mode="json")
    data["sessions"][0]["constraints"] = [bad]
    with pytest.raises(ValueError, match=r"subject\.type"):
        Fixture.model_validate(data)  # the fixture file refuses it first
    # a constraint the log refuses (here: an update of one never added) is left out whole
    data["sessions"][0]["constraints"] = [{**renewal("test"), "op": "update"}]
    o = run([Fixture.model_validate(data)], progress=False, line=CONSTRAINTS_LINE).outcomes[0]
    assert o.caught and len(o.errors) == 1 and o.errors[0].startswith("session 1: "), o.errors


def test_score_is_a_function_of_what_each_session_raised() -> None:
    fx = scenario("allergy_violation", 2, ("2025-01-01", []), ("2025-01-02", []))
    info = AlertSeen("drug_allergy_cross_reactivity", "info", "m", "a1", "x")
    up = AlertSeen("drug_allergy_cross_reactivity", "warning", "m", "a1", "x", escalated=True)
    sessions = [
        SessionResult(1, "2025-01-01", [info], [info]),
        SessionResult(2, "2025-01-02", [up], [up]),
    ]
    o = _score(fx, sessions, [])
    assert o.caught and o.escalated and o.severity == "warning" and o.early == [(1, info.rule)]


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


def test_with_a_model_line_b_counts_only_what_the_extraction_proposes(
    fixtures: list[Fixture], tmp_path: Path
) -> None:
    # no shipped rule for a transit visa; the scripted constraint of its turns catches it
    fx = next(f for f in fixtures if f.id == "travel_02")
    path = tmp_path / "one.json"
    path.write_text(
        json.dumps(
            {
                "about": "one scenario",
                "credit": "test",
                "license": "Apache-2.0",
                "scenarios": [fx.model_dump(mode="json")],
            }
        )
    )
    with ChatServer(scripted_extraction(fixtures)) as server:
        settings = ModelSettings(model="scripted-extractor", base_url=server.base_url)
        bench = run_all(["public"], model=settings, progress=False, paths={"public": path})
    lib, plus = bench.results
    assert lib.caught == 0 and lib.mode == "extraction by scripted-extractor"
    # line b is what the model's own extraction proposed (here the scripted stand-in's
    # constraints, through the real extraction path), labelled as the model's, not the ceiling
    assert plus.note == "the constraints the model's extraction proposed"
    (o,) = plus.outcomes
    assert o.caught and o.errors == []
    (trigger,) = [s for s in o.sessions if s.session_id == fx.trigger_session]
    assert any(a.from_constraint for a in trigger.raised)
    assert bench.report().rstrip("\n").splitlines()[-1] == lib.summary_line()
