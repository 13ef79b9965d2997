"""A model proposes bindings beside facts, in the same structured answer, and the prompt shows
the catalogue.

Each case runs the real ``openai`` client against the local chat-completions server and a real
DuckDB file: a binding becomes a vocabulary event of author ``model``, scored by the matcher —
used when it agrees, held when it does not — and one naming what the catalogue or the schema
lacks is dropped with a line in the report, the facts kept.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from uac_kernel.model.extract import BINDING_REASON_CHARS, SYSTEM, ExtractionLimits
from uac_kernel.model.testing import ChatServer
from uac_kernel.vocab.catalogue import CONCEPTS, ROLES
from uac_kernel.workbench import Workbench

TURN = {
    "kind": "utterance",
    "ts": "2025-05-20T09:00:00",
    "speaker": "user",
    "text": "The council form for the parking permit is due back on May 23rd.",
    "source": "chat-1#1",
}
FORM = {
    "op": "add",
    "type": "CouncilForm",
    "key": "form-parking-permit",
    "fields": [
        {"name": "title", "value": "parking permit form"},
        {"name": "due_back", "value": "2025-05-23"},
        {"name": "sent", "value": False},
        {"name": "posted", "value": "2025-05-19"},
    ],
    "utterances": ["chat-1#1"],
}
DUE = {"concept": "duty.due", "type": "CouncilForm", "field": "due_back", "reason": "due back"}


def answer(bindings: list[dict[str, Any]], facts: list[dict[str, Any]] | None = None) -> str:
    return json.dumps({"operations": [FORM] if facts is None else facts, "bindings": bindings})


@pytest.fixture
def server(chat_server: ChatServer) -> ChatServer:
    return chat_server


@pytest.fixture
def wb(model_wb: Workbench) -> Workbench:
    model_wb.ingest([TURN])
    return model_wb


def vocabulary(wb: Workbench, author: str = "model") -> list[dict[str, Any]]:
    return [
        e.payload["binding"]
        for e in wb.log(kinds=["vocabulary"])
        if e.payload["binding"]["author"] == author
    ]


def marker(wb: Workbench) -> dict[str, Any]:
    return wb.log(kinds=["extraction"])[-1].payload


def test_the_prompt_shows_the_catalogue_and_asks_for_names_as_the_user_says_them(
    wb: Workbench, server: ChatServer
) -> None:
    server.enqueue(answer([]))
    wb.extract(progress=False)
    system = server.requests[0]["messages"][0]["content"]
    assert system == SYSTEM
    lines = system[system.index("Catalogue — ") :].splitlines()
    for r in ROLES.values():
        assert any(line.startswith(f"{r.name} ") for line in lines), r.name
    trip = next(line for line in lines if line.startswith("trip "))
    assert trip.startswith("trip [Trip Vacation Travel] = ")
    assert ".start (the day a trip or stay begins): start" in trip
    for c in CONCEPTS.values():  # every concept, under its role's line
        role_line = next(line for line in lines if line.startswith(f"{c.role} "))
        assert f"; .{c.name.partition('.')[2]} (" in role_line, c.name
    # the old conventions are gone: names are the user's, in any style
    assert "CapitalisedCamel" not in system and "lower_snake_case" not in system
    assert '"bindings"' in system


def test_a_binding_the_matcher_agrees_with_is_used_and_the_rules_read_it(
    wb: Workbench, server: ChatServer
) -> None:
    server.enqueue(answer([DUE]))
    report = wb.extract(progress=False)
    assert (report.applied, report.bindings, report.held_bindings, report.dropped) == (1, 1, 0, [])
    (b,) = vocabulary(wb)
    assert (b["concept"], b["type"], b["field"], b["status"]) == (
        "duty.due",
        "CouncilForm",
        "due_back",
        "used",
    )
    assert b["reason"].startswith("due back; matcher: name 'due_back'") and b["score"] >= 0.5
    assert marker(wb)["bindings"] == 1
    # due in 3 days and not sent: the deadline rule reads the model's field, and says so
    (alert,) = [a for a in report.raised if "2025-05-23" in a.message]
    assert "CouncilForm.due_back as duty.due (model" in alert.message
    assert "2 bindings proposed" not in report.summary()
    assert "1 binding proposed" in report.summary()


def test_without_the_models_binding_the_matcher_alone_only_holds_that_field(
    wb: Workbench, server: ChatServer
) -> None:
    server.enqueue(answer([]))
    report = wb.extract(progress=False)
    (b,) = [x for x in vocabulary(wb, "inferred") if x.get("field") == "due_back"]
    assert b["status"] == "held"
    assert not [a for a in report.raised if "2025-05-23" in a.message]


@pytest.mark.parametrize(
    ("binding", "why"),
    [
        (
            {"concept": "duty.due", "type": "CouncilForm", "field": "posted"},
            "no word of duty.due",
        ),
        (
            {"concept": "record.settled", "type": "CouncilForm", "field": "sent"},
            "a flag that silences alerts is bound by a person",
        ),
        (
            {"concept": "trip.start", "type": "CouncilForm", "field": "due_back"},
            "CouncilForm does not play trip",
        ),
    ],
    ids=["scored-low", "silencing-flag", "role-not-played"],
)
def test_a_binding_the_matcher_disagrees_with_or_scores_low_is_held_and_not_read(
    wb: Workbench, server: ChatServer, binding: dict[str, Any], why: str
) -> None:
    server.enqueue(answer([binding]))
    report = wb.extract(progress=False)
    assert (report.applied, report.bindings, report.held_bindings) == (1, 1, 1)
    (b,) = vocabulary(wb)
    assert b["status"] == "held" and why in b["reason"], b
    held = [h for h in wb.vocab().held() if h.author == "model"]
    assert [(h.target, h.field) for h in held] == [(b["concept"], b["field"])]
    assert b["field"] not in wb.vocab().fields("CouncilForm", b["concept"])
    assert "(1 held for review: `uac vocab`)" in report.summary()


def test_a_binding_reading_a_field_as_another_concept_of_its_role_is_held(
    wb: Workbench, server: ChatServer
) -> None:
    trip = {
        "op": "add",
        "type": "Journey",
        "key": "journey-lisbon",
        "fields": [
            {"name": "leaves_on", "value": "2025-06-03"},
            {"name": "back_on", "value": "2025-06-10"},
        ],
        "utterances": ["chat-1#1"],
    }
    server.enqueue(
        answer(
            [
                {"role": "trip", "type": "Journey", "reason": "a trip"},
                {"concept": "trip.start", "type": "Journey", "field": "back_on"},
            ],
            [trip],
        )
    )
    report = wb.extract(progress=False)
    assert report.bindings == 2 and report.dropped == []
    role, start = vocabulary(wb)
    assert role["role"] == "trip" and role["status"] == "used"
    assert start["status"] == "held"
    assert "the matcher reads 'back_on' as trip.end" in start["reason"]
    assert "back_on" not in wb.vocab().fields("Journey", "trip.start")


HUGE = "x" * 50_000


@pytest.mark.parametrize(
    ("binding", "why"),
    [
        ({"concept": "duty.deadline", "type": "CouncilForm", "field": "due_back"}, "no concept"),
        ({"role": "homework", "type": "CouncilForm"}, "no role"),
        ({"concept": "duty.due", "type": "Form", "field": "due_back"}, "no type 'Form'"),
        ({"concept": "duty.due", "type": "CouncilForm", "field": "due_on"}, "no field 'due_on'"),
        ({"concept": "duty.due", "type": "CouncilForm", "field": "title"}, "holds str"),
        ({"concept": "duty.due", "role": "duty", "type": "CouncilForm"}, "not both"),
        ({"type": "CouncilForm", "field": "due_back"}, "not both or neither"),
        ({"role": "duty", "type": "CouncilForm", "field": "due_back"}, "a role binding"),
        ({"concept": HUGE, "type": "CouncilForm", "field": "due_back"}, "50,000 characters"),
        ({"concept": "duty.due", "type": HUGE, "field": "due_back"}, "50,000 characters"),
        (
            {"concept": "duty.due", "type": "CouncilForm\n__import__('os')", "field": "x"},
            "type",
        ),
    ],
    ids=[
        "unknown-concept",
        "unknown-role",
        "unknown-type",
        "unknown-field",
        "wrong-kind",
        "concept-and-role",
        "neither",
        "role-with-field",
        "huge-concept",
        "huge-type",
        "newline-in-type",
    ],
)
def test_a_binding_naming_what_is_not_there_is_dropped_with_a_note_and_the_facts_land(
    wb: Workbench, server: ChatServer, binding: dict[str, Any], why: str
) -> None:
    server.enqueue(answer([binding, DUE]))
    report = wb.extract(progress=False)
    assert (report.applied, report.operations, report.bindings) == (1, 1, 1)
    assert wb.state.get("CouncilForm", "form-parking-permit") is not None
    (note,) = report.dropped
    assert note.startswith("binding 1 ") and why in note, note
    assert "\n" not in note and len(note) < 1000
    assert marker(wb)["dropped"] == report.dropped
    assert "1 invalid proposal dropped: binding 1" in report.summary()
    # dropped at once: the model is not asked again
    assert len(server.requests) == 1
    assert [b["field"] for b in vocabulary(wb)] == ["due_back"]


def test_bindings_are_bounded_in_count_and_reason_and_their_text_is_data(
    wb: Workbench, server: ChatServer
) -> None:
    most = ExtractionLimits().max_bindings
    hostile = "__import__('os').system('rm -rf /') # " + "y" * 10_000
    flood = [{**DUE, "reason": hostile}] + [DUE] * (most + 4)
    server.enqueue(answer(flood))
    report = wb.extract(progress=False)
    assert report.applied == 1 and report.bindings == 1
    # the first is kept, the repeats of its key are dropped, and those past the cap in one line
    assert (
        report.dropped[0]
        == f"bindings {most + 1} to {most + 5}: more than the {most} one batch may propose"
    )
    assert len(report.dropped) == 1 + (most - 1)
    assert all("already bound" in n for n in report.dropped[1:])
    (b,) = vocabulary(wb)
    said = b["reason"].split("; matcher: ")[0]
    assert len(said) == BINDING_REASON_CHARS + 1 and said.startswith("__import__")
    # stored as data: the checkpoint module still imports and equals the state
    assert wb.verify().ok


def test_a_binding_the_catalogue_already_makes_needs_no_event_and_no_note(
    wb: Workbench, server: ChatServer
) -> None:
    form = {**FORM, "fields": [*FORM["fields"], {"name": "due", "value": "2025-05-23"}]}
    server.enqueue(
        answer(
            [
                {"concept": "duty.due", "type": "CouncilForm", "field": "due"},
                {"role": "duty", "type": "CouncilForm"},
            ],
            [form],
        )
    )
    report = wb.extract(progress=False)
    assert (report.applied, report.bindings, report.dropped) == (1, 0, [])
    assert vocabulary(wb) == []
