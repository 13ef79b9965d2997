"""Conversations in, typed facts out, questions answered by code — against a local chat server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.extraction import TURNS, fake_model

from uac_kernel.core.errors import ModelError
from uac_kernel.model.client import ModelSettings, call_totals
from uac_kernel.model.testing import ChatServer, Reply
from uac_kernel.workbench import Workbench


@pytest.fixture
def server() -> ChatServer:
    with ChatServer(fake_model) as srv:
        yield srv  # type: ignore[misc]


def workbench(tmp_path: Path, server: ChatServer, **kw: Any) -> Workbench:
    settings = ModelSettings(
        model="stand-in",
        base_url=server.base_url,
        timeout=kw.pop("timeout", 5.0),
        max_retries=kw.pop("max_retries", 2),
    )
    wb = Workbench(tmp_path / "u.duckdb", user="maya", model=settings)
    wb.ingest(TURNS)
    return wb


def test_extract_checkpoint_ask_round_trip(tmp_path: Path, server: ChatServer) -> None:
    wb = workbench(tmp_path, server)
    report = wb.extract(batch_size=2, progress=False)
    assert (report.batches, report.applied, report.pending, report.operations) == (2, 2, 0, 3)
    # rules fired on what was just learned; the facts point back at their utterances
    assert [a.rule for a in report.raised] == ["drug_allergy_cross_reactivity"]
    med = wb.state.get("Medication", "med-amoxicillin")
    assert med is not None
    (fact,) = [e for e in wb.log(kinds=["fact"]) if e.seq in med.sources]
    assert (
        fact.payload["derived_from"] == ["chat-3#1"]
        and fact.ts.isoformat() == "2025-11-18T10:00:00"
    )
    assert wb.checkpoints.latest() is not None and "key='med-amoxicillin'," in wb.code()
    # nothing is pending any more: a second run calls nothing
    calls = len(server.requests)
    assert wb.extract(progress=False).batches == 0 and len(server.requests) == calls
    answer = wb.ask("How many trips did I book?")
    assert answer.ok and answer.value == 1 and answer.expression == "len(user.all(Trip))"
    assert [r["key"] for r in answer.certificate.records] == ["trip-2025-03-lisbon"]
    assert [u["source"] for u in answer.certificate.utterances] == ["chat-2#1"]
    # records reached through the index are in the certificate too
    ranged = wb.ask("Which trips since March?")
    assert ranged.ok and ranged.value == ["Lisbon"]
    assert [r["key"] for r in ranged.certificate.records] == ["trip-2025-03-lisbon"]
    open_q = wb.ask("What did the clinic prescribe?")
    assert open_q.ok and open_q.value == ["The walk-in clinic gave me amoxicillin for my ear."]
    assert open_q.certificate.utterances[0]["source"] == "chat-3#1"
    assert {p for p, *_ in call_totals(wb.store)} == {"extraction", "questions"}


def test_replay_offline_from_the_record(tmp_path: Path, server: ChatServer) -> None:
    wb = workbench(tmp_path, server)
    wb.extract(progress=False)
    first = wb.ask("How many trips did I book?")
    wb.close()
    offline = Workbench(
        tmp_path / "u.duckdb",
        user="maya",
        model=ModelSettings.resolve(model="stand-in", offline=True),
    )
    calls = len(server.requests)
    assert offline.ask("How many trips did I book?").value == first.value
    assert len(server.requests) == calls
    with pytest.raises(ModelError, match="offline, and no recorded answer"):
        offline.ask("Something never asked?")


def test_429_then_success(tmp_path: Path, server: ChatServer) -> None:
    wb = workbench(tmp_path, server)
    server.enqueue(Reply(status=429))
    assert wb.extract(batch_size=10, progress=False).applied == 1


def test_500s_until_retries_run_out_leave_the_batch_pending(
    tmp_path: Path, server: ChatServer
) -> None:
    wb = workbench(tmp_path, server)
    before = [(e.seq, e.hash) for e in wb.store.events()]
    server.enqueue(*[Reply(status=500)] * 3)
    with pytest.raises(ModelError, match="InternalServerError"):
        wb.extract(batch_size=10, progress=False)
    assert [(e.seq, e.hash) for e in wb.store.events()] == before  # log intact
    assert wb.extract(batch_size=10, progress=False).applied == 1  # still pending, then applied


def test_timeout_leaves_the_batch_pending(tmp_path: Path, server: ChatServer) -> None:
    wb = workbench(tmp_path, server, timeout=0.5, max_retries=0)
    server.enqueue(Reply(content="{}", delay=1.5))
    with pytest.raises(ModelError, match="APITimeoutError"):
        wb.extract(batch_size=10, progress=False)
    assert wb.log(kinds=["fact"]) == []
    assert wb.extract(batch_size=10, progress=False).applied == 1


@pytest.mark.parametrize(
    "bad",
    [
        "{not json",
        json.dumps(
            {
                "operations": [
                    {"op": "add", "type": "Tr\nip", "key": "x", "utterances": ["chat-1#1"]}
                ]
            }
        ),  # bad type name (a line break; a lower-case one is a name)
        json.dumps(
            {
                "operations": [
                    {
                        "op": "update",
                        "type": "Trip",
                        "key": "nope",
                        "fields": [{"name": "a", "value": 1}],
                        "utterances": ["chat-1#1"],
                    }
                ]
            }
        ),
        json.dumps(
            {
                "operations": [
                    {
                        "op": "add",
                        "type": "Trip",
                        "key": "x",
                        "fields": [],
                        "utterances": ["not-a-source"],
                    }
                ]
            }
        ),
        json.dumps({"operations": [{"kind": "fact"}]}),  # schema-invalid
    ],
)
def test_invalid_answer_is_retried_once_then_left_pending(
    tmp_path: Path, server: ChatServer, bad: str
) -> None:
    wb = workbench(tmp_path, server)
    before = [(e.seq, e.hash) for e in wb.store.events()]
    server.enqueue(bad, bad)
    report = wb.extract(batch_size=10, progress=False)
    assert (report.applied, report.pending) == (0, 1) and report.errors
    assert [(e.seq, e.hash) for e in wb.store.events()] == before
    # the retry showed the model its error
    retry = server.requests[-1]["messages"]
    assert retry[-1]["content"].startswith("That answer was rejected:")
    server.enqueue(bad)  # a valid answer after one more failure: the retry repairs it
    assert wb.extract(batch_size=10, progress=False).applied == 1
    assert len(wb.state.all("Allergy")) == 1


def test_a_failing_expression_is_shown_to_the_model_once(
    tmp_path: Path, server: ChatServer
) -> None:
    wb = workbench(tmp_path, server)
    wb.extract(progress=False)
    server.enqueue(
        json.dumps({"expression": "open('/etc/passwd')", "explanation": "x"}),
        json.dumps({"expression": "len(user.all(Trip))", "explanation": "y"}),
    )
    answer = wb.ask("anything")
    assert answer.ok and answer.attempts == 2 and answer.value == 1
    assert "open" in server.requests[-1]["messages"][-1]["content"]
    server.enqueue(*[json.dumps({"expression": "1/0", "explanation": "z"})] * 2)
    failed = wb.ask("something else")
    assert not failed.ok and failed.attempts == 2 and "ZeroDivisionError" in failed.error


def test_a_misspelt_field_in_a_model_answer_is_shown_to_it_by_name(
    tmp_path: Path, server: ChatServer
) -> None:
    wb = workbench(tmp_path, server)
    wb.extract(progress=False)
    typo = "len([t for t in user.all(Trip) if t.internatonal])"
    server.enqueue(
        json.dumps({"expression": typo, "explanation": "x"}),
        json.dumps(
            {"expression": typo.replace("internatonal", "international"), "explanation": "y"}
        ),
    )
    answer = wb.ask("How many trips abroad?")
    # the misspelt name was an error the model saw, not a believable 0
    assert answer.ok and answer.attempts == 2 and answer.value == 1
    told = server.requests[-1]["messages"][-1]["content"]
    assert "Trip has no field 'internatonal'. Did you mean 'international'?" in told


def test_ask_prompt_does_not_grow_with_the_history(tmp_path: Path, server: ChatServer) -> None:
    sizes = []
    for n in (100, 100_000):
        wb = Workbench(
            tmp_path / f"{n}.duckdb",
            user="u",
            rules=[],
            model=ModelSettings(model="stand-in", base_url=server.base_url),
        )
        wb.ingest(
            {
                "kind": "fact",
                "ts": "2025-01-01",
                "op": "add",
                "type": "Trip",
                "key": f"t{i}",
                "fields": {
                    "destination": f"City {i % 50}",
                    "start": "2025-02-01",
                    "international": i % 3 == 0,
                },
            }
            for i in range(n)
        )
        answer = wb.ask("How many trips did I book?")
        assert answer.value == n
        sizes.append(answer.prompt_chars)
        request = server.requests[-1]
        assert sum(len(m["content"]) for m in request["messages"]) == answer.prompt_chars
    assert abs(sizes[1] - sizes[0]) / sizes[0] < 0.03, sizes
