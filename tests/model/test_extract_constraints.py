"""A model proposes constraints beside facts, in the same structured answer.

Each case runs the real ``openai`` client against the local chat-completions server and a real
DuckDB file: the constraint a turn states is validated like a fact, compiled and in force; an
invalid one is shown to the model once, then dropped with its reason in the log, and nothing
else of the batch is lost.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from uac_kernel.model.client import ModelSettings
from uac_kernel.model.extract import ExtractionLimits
from uac_kernel.model.testing import ChatServer
from uac_kernel.workbench import Workbench

TURN = {
    "kind": "utterance",
    "ts": "2025-05-20T09:00:00",
    "speaker": "user",
    "text": "I must send the signed lease back to the landlord by June 1st.",
    "source": "chat-1#1",
}
LEASE = {
    "op": "add",
    "type": "Lease",
    "key": "lease-flat",
    "fields": [{"name": "landlord", "value": "the landlord"}],
    "utterances": ["chat-1#1"],
}
RETURN_LEASE = {
    "kind": "obligation",
    "title": "Send the signed lease back by June 1st",
    "subject": {"type": "Lease", "key": "lease-flat"},
    "due": {"date": "2025-06-01"},
    "done": ["signed_returned"],
}


def proposal(key: str, constraint: Any, op: str = "add") -> dict[str, Any]:
    text = constraint if isinstance(constraint, str) else json.dumps(constraint)
    return {"op": op, "key": key, "constraint": text, "utterances": ["chat-1#1"]}


def answer(facts: list[dict[str, Any]], constraints: list[dict[str, Any]]) -> str:
    return json.dumps({"operations": facts, "constraints": constraints})


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer() as srv:
        yield srv


@pytest.fixture
def wb(tmp_path: Path, server: ChatServer) -> Iterator[Workbench]:
    settings = ModelSettings(model="stand-in", base_url=server.base_url, max_retries=0)
    with Workbench(tmp_path / "u.duckdb", user="maya", model=settings) as wb:
        wb.ingest([TURN])
        yield wb


def constraint_events(wb: Workbench) -> list[Any]:
    return [e for e in wb.log() if e.kind == "constraint"]


def marker(wb: Workbench) -> dict[str, Any]:
    return next(e for e in reversed(wb.log()) if e.kind == "extraction").payload


def test_a_stated_obligation_becomes_a_constraint_in_force_with_its_alert(
    wb: Workbench, server: ChatServer
) -> None:
    server.enqueue(answer([LEASE], [proposal("return-lease", RETURN_LEASE)]))
    report = wb.extract(progress=False)
    assert (report.applied, report.operations, report.constraints) == (1, 1, 1)
    assert report.dropped == []
    (ev,) = constraint_events(wb)
    assert ev.payload["op"] == "add" and ev.payload["key"] == "return-lease"
    assert ev.payload["author"] == "extraction"
    assert ev.payload["derived_from"] == ["chat-1#1"]
    assert ev.payload["constraint"]["kind"] == "obligation"
    assert [c.key for c in wb.constraints()] == ["return-lease"]
    # due in 12 days: inside the default 14-day lead, so the compiled rule alerts at once
    alerts = [a for a in report.raised if a.rule.startswith("constraint_")]
    assert len(alerts) == 1 and "2025-06-01" in alerts[0].message
    assert marker(wb)["constraints"] == 1


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ({"kind": "obligation", "title": "no date"}, "due"),
        ({"kind": "run_code", "title": "x", "code": "import os"}, "kind"),
        ("not json at all", "JSON object"),
        ([1, 2], "constraint"),
        ({**RETURN_LEASE, "subject": {"type": "Record"}}, "subject.type"),
        ({**RETURN_LEASE, "title": "x" * 400}, "title"),
    ],
    ids=["missing-due", "unknown-kind", "not-json", "not-an-object", "bad-type-name", "long-title"],
)
def test_an_invalid_constraint_is_shown_once_then_dropped_and_the_facts_are_kept(
    wb: Workbench, server: ChatServer, bad: Any, why: str
) -> None:
    wrong = answer([LEASE], [proposal("return-lease", bad)])
    server.enqueue(wrong, wrong)
    report = wb.extract(progress=False)
    assert (report.applied, report.operations, report.constraints) == (1, 1, 0)
    assert len(report.dropped) == 1 and why in report.dropped[0]
    assert wb.state.get("Lease", "lease-flat") is not None
    assert constraint_events(wb) == []
    assert marker(wb)["dropped"] == report.dropped
    # the model saw its error once, in the second request
    second = server.requests[1]["messages"][-1]["content"]
    assert "rejected" in second and why in second
    assert len(server.requests) == 2


def test_a_constraint_corrected_on_the_retry_is_applied(wb: Workbench, server: ChatServer) -> None:
    server.enqueue(
        answer([LEASE], [proposal("return-lease", {"kind": "obligation", "title": "t"})]),
        answer([LEASE], [proposal("return-lease", RETURN_LEASE)]),
    )
    report = wb.extract(progress=False)
    assert (report.applied, report.constraints, report.dropped) == (1, 1, [])
    assert [c.key for c in wb.constraints()] == ["return-lease"]


def test_a_retry_that_breaks_the_facts_keeps_the_first_answer(
    wb: Workbench, server: ChatServer
) -> None:
    good_fact_bad_constraint = answer(
        [LEASE], [proposal("ok", RETURN_LEASE), proposal("bad", {"kind": "nope"})]
    )
    broken = answer([{**LEASE, "type": "Record"}], [proposal("ok", RETURN_LEASE)])
    server.enqueue(good_fact_bad_constraint, broken)
    report = wb.extract(progress=False)
    assert (report.applied, report.operations, report.constraints) == (1, 1, 1)
    assert len(report.dropped) == 1 and "'bad'" in report.dropped[0]
    assert [c.key for c in wb.constraints()] == ["ok"]


def test_a_constraint_that_clashes_with_the_log_is_dropped(
    wb: Workbench, server: ChatServer
) -> None:
    # an update of a constraint not in force, and an add of one key twice
    server.enqueue(
        answer(
            [LEASE],
            [
                proposal("ghost", RETURN_LEASE, op="update"),
                proposal("twice", RETURN_LEASE),
                proposal("twice", RETURN_LEASE),
            ],
        )
    )
    server.enqueue(answer([LEASE], [proposal("twice", RETURN_LEASE)]))
    report = wb.extract(progress=False)
    assert report.constraints == 1 and report.dropped == []
    assert [c.key for c in wb.constraints()] == ["twice"]


def test_too_many_constraints_make_the_answer_invalid(wb: Workbench, server: ChatServer) -> None:
    flood = answer([LEASE], [proposal(f"c{i}", RETURN_LEASE) for i in range(3)])
    server.enqueue(flood, flood)
    report = wb.extract(progress=False, limits=ExtractionLimits(max_constraints=2))
    assert (report.applied, report.pending) == (0, 1)
    assert "3 constraints" in report.errors[0]
    assert constraint_events(wb) == [] and wb.state.get("Lease", "lease-flat") is None


def test_retracting_a_constraint_in_force_counts_as_a_change_for_review(
    wb: Workbench, server: ChatServer
) -> None:
    server.enqueue(answer([LEASE], [proposal("return-lease", RETURN_LEASE)]))
    wb.extract(progress=False)
    wb.ingest([{**TURN, "source": "chat-1#2", "text": "Forget the lease deadline."}])
    retract = {"op": "retract", "key": "return-lease", "reason": "moot", "utterances": ["chat-1#2"]}
    server.enqueue(answer([], [retract]))
    report = wb.extract(progress=False, limits=ExtractionLimits(hold_floor=0, hold_share=0))
    assert report.held == 1
    assert [c.key for c in wb.constraints()] == ["return-lease"]


def _doc_examples() -> list[dict[str, Any]]:
    """The YAML example of each kind in docs/constraints.md, as a person would write it."""
    yaml = pytest.importorskip("yaml")
    text = (Path(__file__).parents[2] / "docs" / "constraints.md").read_text(encoding="utf-8")
    found: dict[str, dict[str, Any]] = {}
    for block in text.split("```yaml\n")[1:]:
        c = yaml.safe_load(block.split("```")[0])
        found.setdefault(c["kind"], c)
    return list(found.values())


def test_every_kind_can_be_proposed_by_the_model_and_is_in_force(
    wb: Workbench, server: ChatServer
) -> None:
    examples = _doc_examples()
    assert {c["kind"] for c in examples} == {
        "obligation",
        "valid_on",
        "window_limit",
        "projection",
        "no_overlap",
        "before",
        "not_while",
    }
    proposals = [proposal(f"example-{c['kind']}", c) for c in examples]
    server.enqueue(answer([LEASE], proposals))
    report = wb.extract(progress=False)
    assert (report.constraints, report.dropped) == (7, [])
    in_force = {c.key: c.constraint.kind for c in wb.constraints()}
    assert in_force == {f"example-{c['kind']}": c["kind"] for c in examples}
    # each compiled into a rule in force that names its constraint
    rules = {r: wb.constraint_of(r) for r in wb.runner.rules}
    assert sorted(cv.key for cv in rules.values() if cv is not None) == sorted(in_force)
