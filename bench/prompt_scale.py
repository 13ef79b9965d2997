"""Prompt tokens of ``ask`` against history size, next to full-context and top-k reader prompts.

``bench/scale.py`` uses this for every history size. The prompts are built by the functions the
product and ``uac bench aggregate`` build them with, so the tokens counted are those of the
prompts they send:

- ``ask`` (typed state + code): the system message ``uac_kernel.model.ask.SYSTEM`` and the user message
  of ``aggregate.ask_parts`` — today's date, ``schema_summary`` of the folded state and the
  question, exactly what ``Workbench.ask`` sends on its first attempt;
- ``full_context``: ``aggregate.READER_SYSTEM`` and ``aggregate.reader_parts`` with every line of
  the history;
- ``top_k``: the same reader prompt with the ``k`` lines that BM25 (``uac_kernel.core.search.LogSearch``,
  the workbench's own index) ranks first for the question, shown in time order.

The scale history holds typed fact events, not utterances, so each fact event is given to the
readers as one line (:func:`fact_line`): ``add Transaction transaction-0000003: amount=11.02,
category=shopping, ...``, an update with only its changed fields, a retraction with its reason.
Every event of the history is a line — corrections and retractions included, since a reader
needs them to compute an exact answer. A line costs ~40 tokens with its date, against ~30 for an
utterance of the aggregate bench (keys and field names cost more than words), but the lines hold
only the facts: a real conversation log of the same history would also hold everything said
around them.

Counting: tiktoken's ``cl100k_base`` (ranks from the ``bench`` extra, checked against tiktoken's
published SHA-256: ``uac_kernel.bench.tokens``), message contents only, no chat-format overhead — as the aggregate bench counts. Every prompt is encoded whole
except the full context's excerpts (hundreds of MB of token ids at 1M events), which are encoded
in ~1 MB pieces cut just after a newline that is followed by ``[`` (the start of the next dated
line). cl100k_base's pre-tokenizer always splits there, so the sum of the pieces is exactly the
count of the whole (``tests/bench/test_bench_smoke.py`` checks it against encoding the whole text);
the question part and the excerpts meet at such a split too (see ``aggregate.reader_parts``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from uac_kernel.bench.aggregate import (
    READER_SYSTEM,
    TokenCounter,
    ask_parts,
    excerpts,
    reader_parts,
)
from uac_kernel.core.errors import UacError
from uac_kernel.core.search import LogSearch
from uac_kernel.model.ask import SYSTEM as ASK_SYSTEM
from uac_kernel.workbench import Workbench

# Aggregate questions over the scale history's types (Transaction, Trip, SleepLog).
QUESTIONS = (
    "How much did I spend on groceries last year?",
    "How many international trips did I take last year?",
    "How many hours did I sleep on average over the last 30 days?",
)
KS = (10, 50)  # LogSearch returns at most 50 hits
SYSTEMS = ("ask", *(f"top_{k}" for k in KS), "full_context")
LABELS = {
    "ask": "ask: typed code (schema summary)",
    "top_10": "BM25 top-10 lines",
    "top_50": "BM25 top-50 lines",
    "full_context": "full context (every line)",
}
PIECE_CHARS = 1 << 20
SPEAKER = "user"

METHOD = (
    "tiktoken cl100k_base, message contents (system + user), no chat-format overhead; mean over "
    "the questions. ask: uac_kernel.model.ask.SYSTEM + aggregate.ask_parts (schema summary of the "
    "folded history + question). full_context / top_k: aggregate.READER_SYSTEM + "
    "aggregate.reader_parts with every fact event as one line, or the k lines BM25 (LogSearch) "
    "ranks first, in time order. Every prompt is encoded whole except the full context's "
    "excerpts, encoded in ~1 MB pieces cut where cl100k_base's pre-tokenizer always splits "
    "(after a newline, before '['), so the sum is exact."
)
RENDER = (
    "one line per fact event, dated by its ts: '{op} {type} {key}: field=value, ...' (updates "
    "with their changed fields only, retractions with their reason); adds, updates and "
    "retractions all included"
)


def fact_line(ev: Mapping[str, Any]) -> tuple[datetime, str]:
    """A fact event as a reader sees it: its date and one line of text."""
    head = f"{ev['op']} {ev['type']} {ev['key']}"
    if ev["op"] == "retract":
        text = f"{head}: {ev.get('reason') or 'retracted'}"
    else:
        text = f"{head}: " + ", ".join(f"{name}={value}" for name, value in ev["fields"].items())
    return datetime.fromisoformat(ev["ts"]), text


def read_lines(paths: Iterable[Path]) -> list[tuple[datetime, str]]:
    """Every fact event of Event JSONL files, as lines (:func:`fact_line`), in file order."""
    lines = []
    for path in paths:
        with path.open("rb") as f:
            lines += [fact_line(orjson.loads(raw)) for raw in f if raw.strip()]
    return lines


def ask_messages(wb: Workbench, questions: Sequence[str] = QUESTIONS) -> dict[str, str]:
    """The user message ``Workbench.ask`` sends for each question, from the state as it is now."""
    return {q: "".join(ask_parts(wb, q)) for q in questions}


def count_pieces(encoding: Any, text: str, piece_chars: int = PIECE_CHARS) -> int:
    """cl100k_base tokens of ``text``, encoded piece by piece (see the module docstring)."""
    total, pos = 0, 0
    while pos < len(text):
        cut = text.find("\n[", pos + piece_chars)
        end = len(text) if cut < 0 else cut + 1
        total += len(encoding.encode_ordinary(text[pos:end]))
        pos = end
    return total


def measure(
    asks: Mapping[str, str], lines: Sequence[tuple[datetime, str]], ks: Sequence[int] = KS
) -> dict[str, Any]:
    """Prompt tokens of every system for every question of ``asks`` (question -> ask message)."""
    t0 = time.perf_counter()
    tokens = TokenCounter()
    if not tokens.available:  # this measure is nothing but token counts
        raise UacError(tokens.why)
    index = LogSearch()
    for i, (ts, text) in enumerate(lines):
        index.add(i, ts, SPEAKER, text, None)
    t_index = time.perf_counter() - t0

    t0 = time.perf_counter()
    text = excerpts(lines)
    excerpt_tokens = count_pieces(tokens.encoding, text)
    excerpt_chars = len(text)
    del text  # ~110 MB at 1M events
    ask_system, reader_system = tokens.text(ASK_SYSTEM), tokens.text(READER_SYSTEM)
    per_question: dict[str, dict[str, int]] = {}
    examples: dict[str, list[str]] = {}
    full_chars: list[int] = []
    for q, ask_user in asks.items():
        question = reader_parts(q, [])[0]
        row = {
            "ask": ask_system + tokens.text(ask_user),
            "full_context": reader_system + tokens.text(question) + excerpt_tokens,
        }
        full_chars.append(len(READER_SYSTEM) + len(question) + excerpt_chars)
        hits = index.search(q, max(ks))
        for k in ks:
            shown = sorted(h.seq for h in hits[:k])  # in time order, as the aggregate bench
            parts = reader_parts(q, [lines[i] for i in shown])
            row[f"top_{k}"] = reader_system + tokens.text("".join(parts))
        examples[q] = [h.text for h in hits[:3]]
        per_question[q] = row
    return {
        "encoding": tokens.name,
        "method": METHOD,
        "lines": len(lines),
        "render": RENDER,
        "questions": list(asks),
        "ks": list(ks),
        "per_question": per_question,
        "full_context_chars": round(statistics.mean(full_chars)),
        "example_lines": [text for _, text in lines[:3]],
        "top_hit_examples": examples,  # the first three BM25 hits of each question
        "index_s": t_index,
        "count_s": time.perf_counter() - t0,
    }


def summary(prompts: Mapping[str, Any]) -> dict[str, int]:
    """Mean prompt tokens per question for each system: ``{"ask": ..., "top_10": ..., ...}``."""
    rows = list(prompts["per_question"].values())
    return {s: round(statistics.mean(r[s] for r in rows)) for s in rows[0]}
