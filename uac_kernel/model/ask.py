"""Questions answered by code: the model writes one expression, the sandbox runs it.

The model sees the schema summary (types, fields, counts, a few example values) and the
question — never the records — so the prompt stays the same size however long the history.
The answer comes with the code and a certificate: the records the expression was handed and
the utterances behind them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import BaseModel, Field

from uac_kernel.core.errors import SandboxFailed, SandboxLimit, SandboxRefused
from uac_kernel.core.names import class_name, field_identifier
from uac_kernel.core.records import Record
from uac_kernel.core.search import LogSearch
from uac_kernel.log.store import Store
from uac_kernel.sandbox import evaluate_traced
from uac_kernel.state.fold import State
from uac_kernel.state.query import UserView, namespace

if TYPE_CHECKING:
    from uac_kernel.model.client import (
        ModelClient,  # `uac eval` needs search_function, not the model
    )

__all__ = [
    "Answer",
    "Certificate",
    "CodeAnswer",
    "answer_question",
    "schema_summary",
    "search_function",
]

MAX_TYPES = 60
EXAMPLES = 3
TRACE_LIMIT = 200

SYSTEM = """You answer questions about one user by writing ONE Python expression over their typed records.

The expression runs in a sandbox that provides only:
- user.all(T): current records of type T (the class, e.g. Trip, or its name "Trip");
  user.history(T): every version, superseded and retracted ones too; user.get(T, key);
  user.count(T); user.today (a date) and user.now (a datetime) -- the time of the latest event.
  user.where(T, field, since=..., before=...): current records whose date, date-time or number
  field is >= since and < before (either may be left out), ordered by it -- an index, so prefer
  it to filtering user.all(T) by a range; user.unset(T, field): those where that (date,
  date-time or number) field is None.
- Each record has its fields as attributes (None when unknown) plus key, valid_from, valid_to,
  sources, retracted.
- search(text, k): the k utterances of the conversation log that best match text (BM25), as
  dicts with seq, ts, speaker, text, score -- for open questions the typed records do not cover.
- len sum min max sorted any all set list dict tuple range enumerate zip round abs str int float
  bool, date datetime timedelta Counter. Nothing else: no imports, no names starting with "_",
  no statements.

Compute the answer exactly (count, sum, filter, group) from the records; use search only when no
record type holds the information. If neither the records nor the conversation can say, answer
with the expression None rather than a guess. Return JSON with "expression" and a one-sentence
"explanation"."""


class CodeAnswer(BaseModel):
    """The model's answer to a question: code, not prose."""

    expression: str = Field(description="one Python expression over the query namespace")
    explanation: str = Field(description="one sentence saying what the expression computes")


@dataclass
class Certificate:
    """What an answer rests on: records handed to the expression and the utterances behind them.

    ``records`` lists up to ``TRACE_LIMIT`` of them, every type read represented;
    ``records_total`` counts all, including what an attempt that failed was handed (its error
    was shown to the model, and may carry the values the answer gives).
    """

    records: list[dict[str, Any]] = field(default_factory=list)
    records_total: int = 0
    utterances: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Answer:
    question: str
    value: Any = None
    expression: str = ""
    explanation: str = ""
    certificate: Certificate = field(default_factory=Certificate)
    ok: bool = False
    error: str = ""
    attempts: int = 0
    call_ids: list[int] = field(default_factory=list)
    prompt_chars: int = 0


def _example(value: Any) -> str:
    text = repr(value) if not hasattr(value, "isoformat") else value.isoformat()
    return text if len(text) <= 40 else text[:37] + "..."


def schema_summary(state: State) -> str:
    """Types, their fields with types, counts and a few example values — bounded in size."""
    lines = []
    types = sorted(state.types.values(), key=lambda ts: (-len(ts.current), ts.name))[:MAX_TYPES]
    for ts in types:
        versions = len(ts.current) + len(ts.history)
        cls = "" if class_name(ts.name) == ts.name else f"class {class_name(ts.name)}, "
        lines.append(f"{ts.name} ({cls}{len(ts.current)} current, {versions} versions):")
        sample = [r for _, r in zip(range(EXAMPLES), ts.current.values(), strict=False)]
        for fname, ftype in state.schema.types[ts.name].items():
            seen = []
            for r in sample:
                v = getattr(r, fname, None)
                if v is not None and _example(v) not in seen:
                    seen.append(_example(v))
            examples = f" e.g. {', '.join(seen)}" if seen else ""
            ident = field_identifier(fname)
            shown = fname if ident == fname else f"{fname} (attribute {ident})"
            lines.append(f"  {shown}: {ftype}{examples}")
    if len(state.types) > MAX_TYPES:
        lines.append(f"... and {len(state.types) - MAX_TYPES} more types with fewer records")
    return "\n".join(lines) or "(no typed records yet)"


class _Trace:
    """What the expression was handed: noted by trusted code, never handed to the expression.

    A record is noted as it is handed, by its type, key and sources at that moment (records
    are frozen and their sources a tuple, so nothing the expression does later can change the
    note). The expression reaches only the view's public methods; the trace sits behind a
    ``_`` attribute, which the static check refuses and no builtin can read by name.
    """

    __slots__ = ("by_type", "ids")

    def __init__(self) -> None:
        # Up to TRACE_LIMIT records of each type, in the order handed: reading many records of
        # one type first cannot push a record of another type out of the certificate.
        self.by_type: dict[str, list[dict[str, Any]]] = {}
        self.ids: set[tuple[str, str, tuple[int, ...]]] = set()

    def note(self, records: list[Record]) -> None:
        for r in records:
            ident = (type(r).__name__, r.key, tuple(r.sources))
            if ident not in self.ids:
                self.ids.add(ident)
                kept = self.by_type.setdefault(ident[0], [])
                if len(kept) < TRACE_LIMIT:
                    kept.append({"type": ident[0], "key": ident[1], "sources": list(ident[2])})

    def records(self) -> list[dict[str, Any]]:
        """At most TRACE_LIMIT records, taken from each type in turn (every type read shows)."""
        out: list[dict[str, Any]] = []
        for row in itertools.zip_longest(*self.by_type.values()):
            out.extend(r for r in row if r is not None)
        return out[:TRACE_LIMIT]


class _TracingView(UserView):
    """A ``user`` view that notes every record it hands to the expression (runs in the child)."""

    def __init__(self, state: State, trace: _Trace):
        super().__init__(state)
        self._trace = trace

    def _handed(self, records: list[Record]) -> list[Record]:
        self._trace.note(records)
        return records


def search_function(index: LogSearch, hits: list[int]) -> Any:
    """``search(text, k)`` for the query namespace; notes the seqs it returns in ``hits``."""

    def search(text: str, k: int = 5) -> list[dict[str, Any]]:
        found = index.search(str(text), int(k))
        hits.extend(h.seq for h in found)
        return [
            {"seq": h.seq, "ts": h.ts, "speaker": h.speaker, "text": h.text, "score": h.score}
            for h in found
        ]

    return search


def run_traced(state: State, index: LogSearch, expression: str) -> tuple[Any, dict[str, Any]]:
    """Evaluate ``expression`` in the sandbox; also return what it touched.

    The trace is read after the value has been made plain data (so a lazy value, such as a
    generator, has handed over every record it reads), from objects the expression cannot name.
    """
    trace = _Trace()
    hits: list[int] = []
    ns = namespace(state)
    ns["user"] = _TracingView(state, trace)
    ns["search"] = search_function(index, hits)

    def collect() -> dict[str, Any]:
        return {
            "records": trace.records(),
            "total": len(trace.ids),
            "hits": hits[:TRACE_LIMIT],
        }

    value, touched = evaluate_traced(expression, ns, collect)
    return value, touched  # type: ignore[return-value]


def merged(earlier: list[dict[str, Any]], last: dict[str, Any]) -> dict[str, Any]:
    """The trace of the attempt that answered, with what failed attempts before it read: their
    errors were shown to the model, and may carry the values it answers with."""
    records: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    hits: list[int] = []
    for t in [last, *earlier]:
        for r in t["records"]:
            if (r["type"], r["key"]) not in seen and len(records) < TRACE_LIMIT:
                seen.add((r["type"], r["key"]))
                records.append(r)
        hits.extend(h for h in t["hits"] if h not in hits)
    # A record handed to two attempts counts twice.
    total = sum(int(t["total"]) for t in [last, *earlier])
    return {"records": records, "total": total, "hits": hits[:TRACE_LIMIT]}


def certificate(store: Store, user: str, touched: dict[str, Any]) -> Certificate:
    """Resolve touched records to the utterances their fact events were extracted from."""
    records = touched["records"]
    fact_seqs = sorted({s for r in records for s in r["sources"]})
    derived: list[str] = []
    if fact_seqs:
        rows = store.con.execute(
            "SELECT payload FROM events WHERE seq IN (SELECT unnest(?)) ORDER BY seq", [fact_seqs]
        ).fetchall()
        for (payload,) in rows:
            derived.extend(orjson.loads(payload).get("derived_from", []))
    utterances: list[dict[str, Any]] = []
    seen: set[int] = set()
    if derived or touched["hits"]:
        rows = store.con.execute(
            "SELECT seq, ts, source, payload FROM events WHERE user_id = ? AND kind = 'utterance' "
            "AND (source IN (SELECT unnest(?)) OR seq IN (SELECT unnest(?))) ORDER BY seq LIMIT ?",
            [user, sorted(set(derived)), touched["hits"], TRACE_LIMIT],
        ).fetchall()
        for seq, ts, source, payload in rows:
            if seq in seen:
                continue
            seen.add(seq)
            p = orjson.loads(payload)
            utterances.append(
                {"seq": seq, "ts": ts, "source": source, "speaker": p["speaker"], "text": p["text"]}
            )
    return Certificate(records=records, records_total=touched["total"], utterances=utterances)


def answer_question(
    question: str, state: State, index: LogSearch, store: Store, client: ModelClient
) -> Answer:
    """Ask the model for code, run it; on failure show the model its error once, then report."""
    today = state.now.date().isoformat() if state.now else "unknown"
    prompt = (
        f"Typed records of this user (today is {today}):\n{schema_summary(state)}\n\n"
        f"Question: {question}"
    )
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": prompt},
    ]
    answer = Answer(question=question, prompt_chars=len(SYSTEM) + len(prompt))
    earlier: list[dict[str, Any]] = []  # what failed attempts read
    for attempt in (1, 2):
        reply = client.structured("questions", messages, CodeAnswer, user=state.user)
        answer.attempts = attempt
        answer.call_ids.append(reply.call_id)
        answer.expression, answer.explanation = reply.value.expression, reply.value.explanation
        try:
            value, touched = run_traced(state, index, reply.value.expression)
        except (SandboxRefused, SandboxFailed, SandboxLimit) as exc:
            if isinstance(exc, SandboxFailed) and isinstance(exc.trace, dict):
                earlier.append(exc.trace)
            answer.error = str(exc)
            client.reject(reply, answer.error, user=state.user)
            messages += [
                {"role": "assistant", "content": reply.value.model_dump_json()},
                {
                    "role": "user",
                    "content": f"That expression failed: {exc}\nReply with a corrected expression.",
                },
            ]
            continue
        answer.value, answer.ok, answer.error = value, True, ""
        answer.certificate = certificate(store, state.user, merged(earlier, touched))
        return answer
    return answer
