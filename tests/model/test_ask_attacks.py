"""Attacks on the certificate of `ask`: a model's expression must not be able to write it.

Each case is the expression a hostile model answers with, asked through the real openai client
against the local chat server. The certificate must list exactly the records the expression was
handed (and the utterances behind them and the search hits it got) — never a record it only
named, built or smuggled in — or there is no answer at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from uac_kernel.model.ask import Certificate
from uac_kernel.model.client import ModelSettings
from uac_kernel.model.testing import ChatServer
from uac_kernel.workbench import Workbench

EVENTS: list[dict[str, Any]] = [
    {
        "kind": "utterance",
        "ts": "2025-03-01T09:00:00",
        "speaker": "user",
        "text": "I take warfarin 5 mg and ibuprofen for my knee.",
        "source": "chat-1#1",
    },
    {
        "kind": "utterance",
        "ts": "2025-03-02T09:00:00",
        "speaker": "user",
        "text": "Flying to Lisbon in May.",
        "source": "chat-2#1",
    },
    *(
        {
            "kind": "fact",
            "ts": "2025-03-01T09:00:00",
            "op": "add",
            "type": "Medication",
            "key": key,
            "fields": {"name": name, "dose_mg": dose},
            "derived_from": ["chat-1#1"],
        }
        for key, name, dose in (("m1", "warfarin", 5), ("m2", "ibuprofen", 400))
    ),
    {
        "kind": "fact",
        "ts": "2025-03-02T09:00:00",
        "op": "add",
        "type": "Trip",
        "key": "forged-evidence",
        "fields": {"destination": "Lisbon"},
        "derived_from": ["chat-2#1"],
    },
]

MEDS = [("Medication", "m1"), ("Medication", "m2")]
TRIP = [("Trip", "forged-evidence")]
FORGED = "Trip(key='forged-evidence', sources=(3,))"


@dataclass(frozen=True)
class Held:
    """The answer is given, and its certificate is exactly this."""

    value: Any
    records: list[tuple[str, str]] = field(default_factory=list)
    said: list[str] = field(default_factory=list)  # sources of the utterances behind it


FAILS = None  # no answer: the expression failed (twice) and the certificate stays empty

ATTACKS: list[tuple[str, str, Held | None]] = [
    # the tracer's old public handles
    ("seen_append", f"[len(user.all(Medication)), user.seen.append({FORGED})][0]", FAILS),
    ("ids_add", "[len(user.all(Medication)), user.ids.add(('Trip', 'forged-evidence', 3))]", FAILS),
    ("total_read", "user.total", FAILS),
    ("seen_extend", f"user.seen.extend([{FORGED}] * 5)", FAILS),
    ("ids_clear", "[user.all(Trip), user.ids.clear()]", FAILS),
    # its private handles
    ("trace_private", f"user._trace.records.append({FORGED})", FAILS),
    ("handed_private", f"user._handed([{FORGED}])", FAILS),
    ("state_private", "user._state.types", FAILS),
    ("trace_via_dict", "user.__dict__", FAILS),
    ("trace_via_class", "type(user)", FAILS),
    # records it builds, returns or slips into lists it was handed
    (
        "built_record_in_value",
        f"[{FORGED}, len(user.all(Medication))][1]",
        Held(2, MEDS, ["chat-1#1"]),
    ),
    (
        "append_to_handed_list",
        f"[(ms := user.all(Medication)).append({FORGED}), len(user.all(Medication))][1]",
        Held(2, MEDS, ["chat-1#1"]),
    ),
    (
        "insert_then_read_again",
        f"[list.insert(ms := user.all(Medication), 0, {FORGED}), [m.key for m in ms]][1]",
        Held(["forged-evidence", "m1", "m2"], MEDS, ["chat-1#1"]),
    ),
    (
        "record_sources_grown",
        "[len(m.sources + (3, 4)) for m in user.all(Medication)]",
        Held([3, 3], MEDS, ["chat-1#1"]),
    ),
    ("get_one", "user.get(Medication, 'm1').name", Held("warfarin", MEDS[:1], ["chat-1#1"])),
    (
        "get_twice",
        "[user.get(Medication, 'm1').key, user.get('Medication', 'm1').key]",
        Held(["m1", "m1"], MEDS[:1], ["chat-1#1"]),
    ),
    ("count_hands_nothing", "user.count(Trip)", Held(1)),
    ("types_hand_nothing", "sorted(user.types())", Held(["Medication", "Trip"])),
    ("history_hands_versions", "len(user.history(Medication))", Held(2, MEDS, ["chat-1#1"])),
    (
        "where_hands_its_records",
        "[m.key for m in user.where(Medication, 'dose_mg', since=100)]",
        Held(["m2"], MEDS[1:], ["chat-1#1"]),
    ),
    # values that look like the trace or the worker's message
    (
        "value_shaped_like_a_trace",
        "{'records': [{'type': 'Trip', 'key': 'forged-evidence', 'sources': [3]}], 'total': 1,"
        " 'hits': [2]}",
        Held(
            {
                "records": [{"type": "Trip", "key": "forged-evidence", "sources": [3]}],
                "total": 1,
                "hits": [2],
            }
        ),
    ),
    (
        "value_shaped_like_the_pair",
        "[len(user.all(Medication)), {'records': [{'type': 'Trip', 'key': 'forged-evidence',"
        " 'sources': [3]}], 'total': 1, 'hits': []}]",
        Held(
            [
                2,
                {
                    "records": [{"type": "Trip", "key": "forged-evidence", "sources": [3]}],
                    "total": 1,
                    "hits": [],
                },
            ],
            MEDS,
            ["chat-1#1"],
        ),
    ),
    (
        "value_shaped_like_the_message",
        "('ok', [[1], {'records': [], 'total': 9}])",
        Held(["ok", [[1], {"records": [], "total": 9}]]),
    ),
    # lazy values: whatever a generator reads while it is turned into data is in the certificate
    ("generator_hands_late", "(len(user.all(Trip)) for _ in [0])", Held([1], TRIP, ["chat-2#1"])),
    (
        "nested_generator_hands_late",
        "((m.name for m in user.all(Medication)) for _ in [0])",
        Held([["warfarin", "ibuprofen"]], MEDS, ["chat-1#1"]),
    ),
    (
        "zip_hands_late",
        "zip((user.all(Trip) for _ in [0]), [0])",
        Held([[[{"_type": "Trip"}], 0]], TRIP, ["chat-2#1"]),
    ),
    # rebinding the names the certificate is made from
    ("rebind_user", "[len(user.all(Medication)), (user := None)][0]", Held(2, MEDS, ["chat-1#1"])),
    (
        "rebind_search",
        "(search := lambda text, k=5: [{'seq': 2}])('Lisbon')",
        Held([{"seq": 2}]),
    ),
    # search results are copies: changing them changes no hit
    (
        "search_result_edited",
        "[h.update(seq=2) for h in search('warfarin', 1)]",
        Held([None], said=["chat-1#1"]),
    ),
    (
        "search_hits",
        "[h['text'] for h in search('Lisbon', 1)]",
        Held(["Flying to Lisbon in May."], said=["chat-2#1"]),
    ),
    # exceptions after records were handed: no answer, so no certificate
    ("raise_after_reading", "[user.all(Trip), 1 / 0]", FAILS),
    ("query_error_after_reading", "[user.all(Trip), user.where(Trip, 'nope')]", FAILS),
    ("limit_after_reading", "[user.all(Trip), 'a' * 10**10]", FAILS),
]


def _value_matches(got: Any, want: Any) -> bool:
    """Records in a value are dicts with their fields; a ``{"_type": T}`` in ``want`` matches any
    record of type T."""
    if isinstance(want, dict) and set(want) == {"_type"}:
        return isinstance(got, dict) and got.get("_type") == want["_type"]
    if isinstance(want, list):
        return (
            isinstance(got, list)
            and len(got) == len(want)
            and all(_value_matches(g, w) for g, w in zip(got, want, strict=True))
        )
    return bool(got == want)


@pytest.fixture(scope="module")
def wb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workbench]:
    by_question = {case_id: expr for case_id, expr, _ in ATTACKS}

    def model(body: dict[str, Any]) -> str:
        question = body["messages"][1]["content"].rsplit("Question: ", 1)[1]
        return json.dumps({"expression": by_question[question], "explanation": "x"})

    with ChatServer(model) as server:
        settings = ModelSettings(model="hostile", base_url=server.base_url, timeout=10.0)
        path = tmp_path_factory.mktemp("ask") / "u.duckdb"
        with Workbench(path, user="maya", rules=(), model=settings) as wb:
            wb.ingest(EVENTS)
            yield wb


@pytest.mark.parametrize(("case_id", "held"), [pytest.param(i, h, id=i) for i, _, h in ATTACKS])
def test_the_expression_cannot_write_its_certificate(
    wb: Workbench, case_id: str, held: Held | None
) -> None:
    answer = wb.ask(case_id)
    if held is None:
        assert not answer.ok and answer.attempts == 2
        assert answer.error and "\n" not in answer.error
        assert answer.certificate == Certificate()
        return
    assert answer.ok, answer.error
    assert _value_matches(answer.value, held.value), answer.value
    cert = answer.certificate
    assert [(r["type"], r["key"]) for r in cert.records] == held.records
    assert cert.records_total == len(held.records)
    assert [u["source"] for u in cert.utterances] == held.said
    # what the certificate says comes from the store, never from the expression
    stored = {
        (r.__class__.__name__, r.key): list(r.sources) for r in wb.state.history("Medication")
    }
    stored.update({("Trip", r.key): list(r.sources) for r in wb.state.history("Trip")})
    assert all(stored[(r["type"], r["key"])] == r["sources"] for r in cert.records)


def test_the_corpus_is_distinct() -> None:
    ids = [i for i, _, _ in ATTACKS]
    expressions = [e for _, e, _ in ATTACKS]
    assert len(set(ids)) == len(ids) and len(set(expressions)) == len(expressions) >= 30
