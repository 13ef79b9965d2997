"""The LoCoMo harness, offline: a local chat server plays extraction, questions and the judge.

The conversations are written here, in LoCoMo's shape (no text of the real, CC BY-NC data set);
``tests/fixtures/locomo_mini.json`` belongs to the adapter tests, whose assertions pin its content.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from uac_kernel.bench.locomo import (
    NO_INFORMATION,
    f1_score,
    is_refusal,
    locomo_f1,
    multi_hop_f1,
    normalize_answer,
    render_value,
    resolve_settings,
    run,
)
from uac_kernel.core.errors import ModelError, UacError
from uac_kernel.log.store import Store
from uac_kernel.model.client import ModelSettings, call_totals
from uac_kernel.model.testing import ChatServer, Reply

# -- the fixture: two conversations, questions of every category ----------------------------

LOCOMO: list[dict[str, Any]] = [
    {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Nora",
            "speaker_b": "Theo",
            "session_1_date_time": "4:10 pm on 7 May, 2023",
            "session_1": [
                {
                    "speaker": "Nora",
                    "dia_id": "D1:1",
                    "text": "We adopted a puppy today! We named her Pepper, after the spice jar.",
                },
                {"speaker": "Theo", "dia_id": "D1:2", "text": "Congrats! What breed is she?"},
                {
                    "speaker": "Nora",
                    "dia_id": "D1:3",
                    "text": "A beagle mix from the shelter on Elm Street.",
                },
            ],
            "session_2_date_time": "9:30 am on 2 July, 2023",
            "session_2": [
                {
                    "speaker": "Theo",
                    "dia_id": "D2:1",
                    "text": "I moved to Porto last month, after two years in Lisbon.",
                },
                {"speaker": "Nora", "dia_id": "D2:2", "text": "I lived in Madrid once, loved it."},
                {
                    "speaker": "Theo",
                    "dia_id": "D2:3",
                    "text": "I also started a pottery class on Thursdays.",
                },
            ],
        },
        "qa": [
            {
                "question": "Which cities has Theo lived in?",
                "answer": "Lisbon, Porto",
                "evidence": ["D2:1"],
                "category": 1,
            },
            {
                "question": "When did Nora adopt Pepper?",
                "answer": "7 May 2023",
                "evidence": ["D1:1"],
                "category": 2,
            },
            {
                "question": "Would Theo enjoy a ceramics workshop?",
                "answer": "Likely yes; he takes a pottery class",
                "evidence": ["D2:3"],
                "category": 3,
            },
            {
                "question": "What did Nora name her puppy?",
                "answer": "Pepper",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "What class did Theo start?",
                "answer": "pottery class",
                "evidence": ["D2:3"],
                "category": 4,
            },
            {
                "question": "What breed is Pepper?",
                "answer": "beagle mix",
                "evidence": ["D1:3"],
                "category": 4,
            },
            {
                "question": "What did Theo name his puppy?",
                "adversarial_answer": "Pepper",
                "evidence": ["D1:1"],
                "category": 5,
            },
            {
                "question": "Where did Nora take pottery classes?",
                "adversarial_answer": "on Thursdays",
                "evidence": ["D2:3"],
                "category": 5,
            },
        ],
    },
    {
        "sample_id": "conv-y",
        "conversation": {
            "speaker_a": "Iris",
            "speaker_b": "Omar",
            "session_1_date_time": "8:00 pm on 24 September, 2023",
            "session_1": [
                {"speaker": "Iris", "dia_id": "D1:1", "text": "I ran my first marathon in Berlin!"},
                {"speaker": "Omar", "dia_id": "D1:2", "text": "Amazing, how long did it take?"},
                {"speaker": "Iris", "dia_id": "D1:3", "text": "Four hours and ten minutes."},
            ],
        },
        "qa": [
            {
                "question": "Where did Iris run her first marathon?",
                "answer": "Berlin",
                "evidence": ["D1:1"],
                "category": 4,
            },
            {
                "question": "How long did Iris's marathon take?",
                "answer": "4 hours 10 minutes",
                "evidence": ["D1:3"],
                "category": 2,
            },
            {
                "question": "What was Omar's marathon time?",
                "adversarial_answer": "Four hours",
                "evidence": ["D1:3"],
                "category": 5,
            },
        ],
    },
]


def field_values(**fields: Any) -> list[dict[str, Any]]:
    return [{"name": k, "value": v} for k, v in fields.items()]


OPS: dict[str, list[dict[str, Any]]] = {
    "locomo:conv-x:D1:1": [
        {
            "op": "add",
            "type": "Pet",
            "key": "pepper",
            "fields": field_values(name="Pepper", owner="Nora", adopted="2023-05-07"),
            "utterances": ["locomo:conv-x:D1:1"],
        }
    ],
    "locomo:conv-x:D2:1": [
        {
            "op": "add",
            "type": "Residence",
            "key": "theo-porto",
            "fields": field_values(person="Theo", city="Porto"),
            "utterances": ["locomo:conv-x:D2:1"],
        }
    ],
    "locomo:conv-x:D2:2": [
        {
            "op": "add",
            "type": "Residence",
            "key": "nora-madrid",
            "fields": field_values(person="Nora", city="Madrid"),
            "utterances": ["locomo:conv-x:D2:2"],
        }
    ],
    "locomo:conv-y:D1:1": [
        {
            "op": "add",
            "type": "Race",
            "key": "berlin-marathon",
            "fields": field_values(city="Berlin", minutes=250),
            "utterances": ["locomo:conv-y:D1:1", "locomo:conv-y:D1:3"],
        }
    ],
}

EXPRESSIONS = {
    "Which cities has Theo lived in?": "sorted(r.city for r in user.all(Residence))",
    "When did Nora adopt Pepper?": "user.get(Pet, 'pepper').adopted",
    "Would Theo enjoy a ceramics workshop?": "'yes'",
    "What did Nora name her puppy?": "[h['text'] for h in search('puppy', 1)]",
    "What class did Theo start?": "'a pottery class'",
    "What breed is Pepper?": "1 / 0",  # fails twice: no answer
    "What did Theo name his puppy?": "[p.name for p in user.all(Pet) if p.owner == 'Theo']",
    "Where did Nora take pottery classes?": "'at the Elm Street studio'",
    "Where did Iris run her first marathon?": "[r.city for r in user.all(Race)]",
    "How long did Iris's marathon take?": "user.get(Race, 'berlin-marathon').minutes * 1.0",
    "What was Omar's marathon time?": "'Not mentioned in the conversation.'",
}

# (sample, index) -> (category, prediction, F1, judge says correct, refused); worked out by hand.
EXPECTED: dict[tuple[str, int], tuple[int, str, float | None, bool | None, bool | None]] = {
    # gold parts lisbon | porto; best over madrid | porto: 0 and 1 -> 0.5
    ("conv-x", 0): (1, "Madrid, Porto", 0.5, False, None),
    ("conv-x", 1): (2, "7 May 2023", 1.0, True, None),
    # category 3 scores against "Likely yes": [yes] vs [likely, yes]: P 1, R 1/2 -> 2/3
    ("conv-x", 2): (3, "yes", 2 / 3, False, None),
    # 11 tokens once "a" and "the" go (we adopted puppy today we named her pepper after spice
    # jar), 1 shared with [pepper]: P 1/11, R 1 -> 2/12
    (
        "conv-x",
        3,
    ): (
        4,
        "We adopted a puppy today! We named her Pepper, after the spice jar.",
        1 / 6,
        True,
        None,
    ),
    ("conv-x", 4): (4, "a pottery class", 1.0, True, None),  # the article does not count
    ("conv-x", 5): (4, "", 0.0, False, None),  # the expression failed twice
    ("conv-x", 6): (5, NO_INFORMATION, None, None, True),  # an empty list
    ("conv-x", 7): (5, "at the Elm Street studio", None, None, False),
    ("conv-y", 0): (4, "Berlin", 1.0, True, None),
    ("conv-y", 1): (2, "250", 0.0, False, None),
    ("conv-y", 2): (5, "Not mentioned in the conversation.", None, None, True),
}

# requests a full run sends: per conversation one extraction batch; per question an ask (two
# for the failing one) and, for categories 1-4 with an answer, a judge call
FULL_RUN_REQUESTS = (1 + 3 * 2 + 2 + 2 + 2 + 1 + 1) + (1 + 2 + 2 + 1)


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9 ]", " ", text.lower()).split())


def stand_in(body: dict[str, Any]) -> str:
    """Extraction from OPS, questions from EXPRESSIONS, the judge by comparing strings."""
    schema = body["response_format"]["json_schema"]["name"]
    prompt = "\n".join(m["content"] for m in body["messages"] if m["role"] == "user")
    if schema == "Extraction":
        ops = [op for source, ops in OPS.items() if f"[{source}]" in prompt for op in ops]
        return json.dumps({"operations": ops})
    if schema == "CodeAnswer":
        question = re.search(r"^Question: (.*)$", prompt, re.M)
        assert question is not None
        expr = EXPRESSIONS[question.group(1)]
        return json.dumps({"expression": expr, "explanation": "looks it up"})
    if schema == "Judgement":
        gold = re.search(r"^Gold answer: (.*)$", prompt, re.M)
        pred = re.search(r"^Generated answer: (.*)$", prompt, re.M)
        assert gold is not None and pred is not None
        correct = _norm(gold.group(1)) in _norm(pred.group(1))
        return json.dumps({"reason": "compared as strings", "correct": correct})
    raise AssertionError(f"unexpected request {schema}")


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "locomo-bench.json"
    path.write_text(json.dumps(LOCOMO))
    return path


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with ChatServer(stand_in) as srv:
        yield srv


def settings(server: ChatServer, **kw: Any) -> ModelSettings:
    return ModelSettings(
        model=kw.pop("model", "stand-in"),
        base_url=server.base_url,
        timeout=5.0,
        max_retries=kw.pop("max_retries", 1),
        **kw,
    )


def recorded_totals(db: Path) -> list[tuple[str, int, int, int, int]]:
    store = Store(db, read_only=True)
    try:
        return call_totals(store)
    finally:
        store.close()


def outcome(records: list[dict[str, Any]]) -> dict[tuple[str, int], tuple[Any, ...]]:
    return {
        (r["sample_id"], r["index"]): (
            r["category"],
            r["prediction"],
            r["f1"],
            None if r["judge"] is None else r["judge"]["correct"],
            r["refused"],
        )
        for r in records
    }


def assert_expected(records: list[dict[str, Any]]) -> None:
    got = outcome(records)
    assert list(got) == list(EXPECTED)
    for key, (category, prediction, f1, correct, refused) in EXPECTED.items():
        g_category, g_prediction, g_f1, g_correct, g_refused = got[key]
        assert (g_category, g_prediction, g_correct, g_refused) == (
            category,
            prediction,
            correct,
            refused,
        ), key
        assert g_f1 == (None if f1 is None else pytest.approx(f1)), key


# -- the full run --------------------------------------------------------------------------


def test_full_run_scores_every_category(tmp_path: Path, dataset: Path, server: ChatServer) -> None:
    db = tmp_path / "bench.duckdb"
    result = run(dataset, model=settings(server), db=db, progress=False)
    assert len(server.requests) == FULL_RUN_REQUESTS
    assert_expected(result.records)

    s = result.scores
    assert [(k, s[k]["n"]) for k in s] == [
        ("1", 1),
        ("2", 2),
        ("3", 1),
        ("4", 4),
        ("5", 3),
        ("overall", 8),
        ("all", 11),
    ]
    assert s["1"]["f1"] == pytest.approx(0.5) and s["1"]["judge"] == 0.0
    assert s["2"]["f1"] == pytest.approx(0.5) and s["2"]["judge"] == 0.5
    assert s["3"]["f1"] == pytest.approx(2 / 3) and s["3"]["judge"] == 0.0
    assert s["4"]["f1"] == pytest.approx((1 / 6 + 1 + 0 + 1) / 4) and s["4"]["judge"] == 0.75
    assert s["4"]["failed"] == 1
    assert s["5"]["f1"] is None and s["5"]["judge"] is None
    assert s["5"]["refusal"] == pytest.approx(2 / 3)
    assert s["overall"]["f1"] == pytest.approx(13 / 24) and s["overall"]["judge"] == 0.5
    assert s["overall"]["refusal"] is None
    # LoCoMo's own mean: F1 for 1-4, refusal as 1/0 for 5: (13/3 + 2) / 11
    assert s["all"]["score"] == pytest.approx(19 / 33)

    # tokens per question come from the call record and add up to its totals per purpose
    totals = {p: (n, tin, tout) for p, n, _, tin, tout in recorded_totals(db)}
    assert set(totals) == {"extraction", "judge", "questions"}
    for purpose in ("questions", "judge"):
        tin = sum(r["tokens"][purpose]["in"] for r in result.records if purpose in r["tokens"])
        tout = sum(r["tokens"][purpose]["out"] for r in result.records if purpose in r["tokens"])
        assert (tin, tout) == totals[purpose][1:] and tin > 0
    assert totals["judge"][0] == 7 and totals["questions"][0] == 12
    assert result.calls["judge"] == {
        "calls": 7,
        "failed": 0,
        "tokens_in": totals["judge"][1],
        "tokens_out": totals["judge"][2],
    }
    assert all(r["latency_s"]["ask"] > 0 for r in result.records)
    failed = result.records[5]
    assert (failed["ok"], failed["attempts"], failed["judge"]["called"]) == (False, 2, False)
    assert "ZeroDivisionError" in failed["error"]
    assert result.records[1]["value"] == "2023-05-07"  # the raw value, as JSON

    # the results file: scores, provenance and every question
    data = json.loads(result.json_path.read_text())  # type: ignore[union-attr]
    assert result.json_path == tmp_path / "bench.locomo-results.json"
    assert data["benchmark"] == "locomo" and data["model"] == "stand-in"
    assert data["base_url_host"] == server.base_url.split("/")[2]
    assert data["judge_model"] == "stand-in" and data["uac_version"] == "0.1.0"
    assert {"host", "system", "python", "cpus"} <= set(data["machine"])
    assert data["date"].startswith("20") and len(data["dataset_sha256"]) == 64
    assert "CC BY-NC" in data["license_note"]
    assert data["scores"]["overall"]["judge"] == 0.5 and len(data["questions"]) == 11
    assert [s["sample_id"] for s in data["samples"]] == ["conv-x", "conv-y"]
    assert data["samples"][0]["extraction"]["operations"] == 3

    table = result.table()
    assert "model stand-in @ 127.0.0.1" in table
    lines = table.splitlines()
    assert lines[1].split() == ["category", "n", "F1", "judge", "refusal", "failed", "s/q"]
    assert lines[2].split()[:6] == ["1", "multi-hop", "1", "50.0", "0.0", "-"]
    assert lines[6].split()[:7] == ["5", "adversarial", "3", "-", "-", "66.7", "0"]
    assert lines[7].split()[:6] == ["overall", "1-4", "8", "54.2", "50.0", "-"]
    assert "LoCoMo score over all 11 questions: 57.6" in table
    assert any(line.startswith("judge: 7 calls (0 failed)") for line in lines)


# -- resuming ------------------------------------------------------------------------------


def test_an_interrupted_run_resumes_without_redoing_anything(
    tmp_path: Path, dataset: Path, server: ChatServer
) -> None:
    db = tmp_path / "bench.duckdb"
    first = run(dataset, model=settings(server), db=db, limit=3, progress=False)
    # the first conversation's extraction, and ask + judge for its first three questions
    assert len(server.requests) == 1 + 3 * 2
    assert [(r["sample_id"], r["index"]) for r in first.records] == [
        ("conv-x", i) for i in range(3)
    ]
    assert first.scores["overall"]["n"] == 3 and [s["sample_id"] for s in first.samples] == [
        "conv-x"
    ]

    # the interruption also cut a line short
    progress_path = tmp_path / "bench.locomo-progress.jsonl"
    with progress_path.open("a") as f:
        f.write('{"kind": "question", "sample_id": "conv-x", "ind')

    second = run(dataset, model=settings(server), db=db, progress=False)
    assert len(server.requests) == FULL_RUN_REQUESTS  # the rest, and nothing twice
    assert_expected(second.records)
    lines = progress_path.read_text().splitlines()
    assert lines[5] == '{"kind": "question", "sample_id": "conv-x", "ind'
    progress = [json.loads(line) for i, line in enumerate(lines) if i != 5]
    assert [p["kind"] for p in progress].count("run") == 1
    assert [p["sample_id"] for p in progress if p["kind"] == "sample"] == ["conv-x", "conv-y"]
    keys = [(p["sample_id"], p["index"]) for p in progress if p["kind"] == "question"]
    assert keys == list(EXPECTED)  # each question once

    third = run(dataset, model=settings(server), db=db, progress=False)
    assert len(server.requests) == FULL_RUN_REQUESTS
    assert outcome(third.records) == outcome(second.records)
    # resumed or not, a run costs what one uninterrupted run costs
    assert {p: n for p, n, *_ in recorded_totals(db)} == {
        "extraction": 2,
        "judge": 7,
        "questions": 12,
    }


def test_a_crash_mid_question_resumes_from_the_call_record(tmp_path: Path, dataset: Path) -> None:
    """The endpoint fails on one judge call: the run stops; the re-run asks only for that."""
    broken = {"on": True}

    def flaky(body: dict[str, Any]) -> Reply | str:
        judging = body["response_format"]["json_schema"]["name"] == "Judgement"
        if broken["on"] and judging and "name her puppy" in json.dumps(body["messages"]):
            return Reply(status=500)
        return stand_in(body)

    db = tmp_path / "bench.duckdb"
    with ChatServer(flaky) as srv:
        with pytest.raises(ModelError, match="judge call to stand-in"):
            run(dataset, model=settings(srv, max_retries=0), db=db, progress=False)
        progress = (tmp_path / "bench.locomo-progress.jsonl").read_text().splitlines()
        answered = [json.loads(line) for line in progress if '"kind":"question"' in line]
        assert [a["index"] for a in answered] == [0, 1, 2]  # question 3's judge failed
        before = len(srv.requests)
        broken["on"] = False
        result = run(dataset, model=settings(srv, max_retries=0), db=db, progress=False)
        resumed = srv.requests[before:]
    # question 3's answer was recorded, so only its judge call is made again
    schemas = [r["response_format"]["json_schema"]["name"] for r in resumed]
    assert schemas[:2] == ["Judgement", "CodeAnswer"]
    assert "name her puppy" in json.dumps(resumed[0]["messages"])
    assert result.records[3]["tokens"]["questions"]["replayed"] is True
    assert_expected(result.records)


def test_a_recorded_run_replays_offline(tmp_path: Path, dataset: Path, server: ChatServer) -> None:
    db = tmp_path / "bench.duckdb"
    online = run(dataset, model=settings(server), db=db, progress=False)
    calls = len(server.requests)
    replay = run(
        dataset,
        model=ModelSettings(model="stand-in", base_url=server.base_url, offline=True),
        db=db,
        out=tmp_path / "replay",
        progress=False,
    )
    assert len(server.requests) == calls
    assert outcome(replay.records) == outcome(online.records)
    assert all(r["tokens"]["questions"]["replayed"] for r in replay.records if r["ok"])
    assert (tmp_path / "replay" / "bench.locomo-results.json").exists()


def test_a_progress_file_of_another_model_is_refused(
    tmp_path: Path, dataset: Path, server: ChatServer
) -> None:
    db = tmp_path / "bench.duckdb"
    run(dataset, model=settings(server), db=db, limit=1, progress=False)
    with pytest.raises(
        UacError, match=r"belongs to another run \(model 'stand-in', this run 'other'\)"
    ):
        run(dataset, model=settings(server, model="other"), db=db, progress=False)


def test_samples_pick_conversations(tmp_path: Path, dataset: Path, server: ChatServer) -> None:
    db = tmp_path / "bench.duckdb"
    result = run(dataset, model=settings(server), db=db, samples=["conv-y"], progress=False)
    assert [(r["sample_id"], r["index"]) for r in result.records] == [
        ("conv-y", i) for i in range(3)
    ]
    assert len(server.requests) == 1 + 2 + 2 + 1
    with pytest.raises(
        UacError, match="no sample_id 'conv-z' in this file; it holds conv-x, conv-y"
    ):
        run(dataset, model=settings(server), db=db, samples=["conv-z"], progress=False)


# -- no model, no run ----------------------------------------------------------------------


def test_without_a_model_the_error_says_how_to_configure_one(
    tmp_path: Path, dataset: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("UAC_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "UAC_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    db = tmp_path / "bench.duckdb"
    for attempt in (
        lambda: run(dataset, model=None, db=db),
        lambda: run(dataset, model=ModelSettings(model=""), db=db),
        lambda: resolve_settings(),
    ):
        with pytest.raises(ModelError) as info:
            attempt()
        message = str(info.value)
        assert message.startswith("uac bench locomo needs a model endpoint")
        assert all(v in message for v in ("UAC_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY"))
    assert list(tmp_path.iterdir()) == [dataset]  # nothing was written
    monkeypatch.setenv("UAC_MODEL", "m")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:8000/v1")
    assert resolve_settings().base_url == "http://localhost:8000/v1"


# -- scoring units ---------------------------------------------------------------------------


def test_normalisation_follows_locomo() -> None:
    assert normalize_answer("The Cat, and a Hat!") == "cat hat"
    assert normalize_answer("  An apple\tPIE.  ") == "apple pie"
    assert normalize_answer("Theo's 2nd-hand bike") == "theos 2ndhand bike"  # ASCII punctuation
    assert normalize_answer("another band") == "another band"  # whole words only
    assert normalize_answer("“quoted”") == "“quoted”"  # as LoCoMo: only ASCII punctuation


def test_token_f1() -> None:
    assert f1_score("a pottery class", "Pottery class.") == 1.0
    assert f1_score("May 2023", "7 May 2023") == pytest.approx(0.8)  # P 1, R 2/3
    assert f1_score("in Berlin, Germany", "Berlin") == pytest.approx(0.5)  # P 1/3, R 1
    assert f1_score("cats", "cat") == 0.0  # no stemming
    assert f1_score("", "anything") == 0.0 and f1_score("the", "the") == 0.0
    assert f1_score("dog dog", "dog") == pytest.approx(2 / 3)  # multisets: P 1/2, R 1
    # multi-hop: mean over gold parts of the best prediction part
    assert multi_hop_f1("Porto, Madrid", "Lisbon, Porto") == 0.5
    assert multi_hop_f1("hiking and swimming", "hiking, swimming") == pytest.approx(2 / 3)
    assert locomo_f1(1, "Porto, Lisbon", "Lisbon, Porto") == 1.0
    assert locomo_f1(3, "likely yes", "Likely yes; because she said so") == 1.0
    assert locomo_f1(4, "likely yes", "Likely yes; because") == pytest.approx(0.8)


def test_refusals() -> None:
    for text in (
        None,
        "",
        NO_INFORMATION,
        "No information available.",
        "Not mentioned in the conversation",
        "unknown",
        "None",
        "N/A",
        "The conversation does not say.",
        "That is not stated anywhere",
    ):
        assert is_refusal(text), text
    for text in ("Pepper", "no", "0", "nothing else matters to her", "unknowns"):
        assert not is_refusal(text), text
    assert is_refusal("an unknown band played")  # a phrase counts wherever it stands


def test_rendering_values() -> None:
    from datetime import date, datetime, timedelta

    assert render_value(None) == render_value("  ") == render_value([]) == NO_INFORMATION
    assert render_value([None, ""]) == NO_INFORMATION
    assert render_value(["Porto", "Lisbon"]) == "Porto, Lisbon"
    assert render_value({"b", "a"}) == "a, b"
    assert render_value([["x", 1], 2.5]) == "x, 1, 2.5"
    assert render_value(3.0) == "3" and render_value(7) == "7" and render_value(0.1) == "0.1"
    assert render_value(True) == "yes" and render_value(False) == "no"
    assert render_value(date(2023, 5, 7)) == "7 May 2023"
    assert render_value(datetime(2023, 5, 7)) == "7 May 2023"
    assert render_value(datetime(2023, 5, 7, 13, 56)) == "7 May 2023 13:56"
    assert render_value(timedelta(days=3)) == "3 days"
    hit = {"seq": 4, "ts": datetime(2023, 5, 7), "speaker": "Nora", "text": "Hi!", "score": 1.2}
    assert render_value([hit]) == "Hi!"
    record = {"_type": "Pet", "key": "pepper", "sources": [3], "name": "Pepper", "owner": None}
    assert render_value(record) == "name: Pepper"
    assert render_value({"now": ["Porto"], "before": "Lisbon"}) == "now: Porto, before: Lisbon"
