"""The demo user's January 2026 conversations, and the bundled record that answers them offline.

The two demo years arrive as typed facts. These later chats arrive as plain conversation, so the
demo shows the whole pipeline: extraction turns them into fact operations, the rules fire on
what was learned (a Kyoto trip after the passport expires), and questions are answered by code.

No model can be called here, so the bundled record (``data/demo_calls.jsonl``) was produced by a
*scripted stand-in*: ``record_demo_calls`` runs the real pipeline — the real openai client, over
HTTP — against a local chat-completions server whose answers are the hand-written reference
operations and expressions below. Re-run it with a real endpoint (``uac demo --live`` with
``UAC_MODEL`` / ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``) to see what your model makes of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

from uac_kernel.core.outputs import JSONL, Output
from uac_kernel.log.store import Store

__all__ = [
    "CALLS_FILE",
    "DEMO_MODEL",
    "DEMO_QUESTIONS_ASKED",
    "conversations",
    "export_calls",
    "import_calls",
    "reference_model",
]

DEMO_MODEL = "uac-demo-reference"
CALLS_FILE = "demo_calls.jsonl"


def _turn(ts: str, n: int, text: str, speaker: str = "user") -> dict[str, Any]:
    day = ts[:10]
    return {
        "kind": "utterance",
        "ts": ts,
        "speaker": speaker,
        "text": text,
        "source": f"chat-{day}#{n}",
    }


TURNS: list[dict[str, Any]] = [
    _turn(
        "2026-01-03T18:05:00",
        1,
        "Good news: I returned the noise-cancelling headphones today and got the refund.",
    ),
    _turn("2026-01-03T18:05:30", 2, "Nice, that was close to the deadline.", "assistant"),
    _turn(
        "2026-01-05T20:10:00",
        1,
        "I've booked Kyoto for the cherry blossoms! Flying out 27 March, back on 6 April.",
    ),
    _turn("2026-01-05T20:11:00", 2, "Going with Ana Ferreira, she's never been to Japan."),
    _turn("2026-01-08T09:00:00", 1, "Cancelled Netflix this morning, I never watch it anymore."),
    _turn(
        "2026-01-10T12:30:00",
        1,
        "The dentist moved my check-up to 3 February at 10:00; it takes 45 minutes.",
    ),
    _turn(
        "2026-01-15T17:45:00",
        1,
        "The GP switched me from atorvastatin to rosuvastatin 10 mg, starting today.",
    ),
    _turn("2026-01-15T17:46:00", 2, "She said rosuvastatin doesn't mind my grapefruit juice."),
    _turn("2026-01-16T08:15:00", 1, "Slept badly, only five hours; the neighbours had a party."),
    _turn(
        "2026-01-20T19:00:00",
        1,
        "Applied to renew my passport online today; they say it takes about three weeks.",
    ),
]

# The reference extraction, one list of operations per turn source that states something.
_OPS: dict[str, list[dict[str, Any]]] = {
    "chat-2026-01-03#1": [
        {
            "op": "update",
            "type": "Purchase",
            "key": "purchase-2025-12-noise-cancelling-headphones",
            "fields": [{"name": "returned", "value": True}],
        },
    ],
    "chat-2026-01-05#1": [
        {
            "op": "add",
            "type": "Trip",
            "key": "trip-2026-03-kyoto",
            "fields": [
                {"name": "destination", "value": "Kyoto"},
                {"name": "country", "value": "Japan"},
                {"name": "start", "value": "2026-03-27"},
                {"name": "end", "value": "2026-04-06"},
                {"name": "international", "value": True},
                {"name": "purpose", "value": "holiday"},
            ],
        },
    ],
    "chat-2026-01-05#2": [
        {
            "op": "update",
            "type": "Trip",
            "key": "trip-2026-03-kyoto",
            "fields": [{"name": "companions", "value": ["Ana Ferreira"]}],
        },
    ],
    "chat-2026-01-08#1": [
        {
            "op": "update",
            "type": "Subscription",
            "key": "sub-netflix",
            "fields": [{"name": "cancelled", "value": True}],
        },
    ],
    "chat-2026-01-10#1": [
        {
            "op": "add",
            "type": "Appointment",
            "key": "appt-2026-02-03-dentist",
            "fields": [
                {"name": "title", "value": "Dentist check-up"},
                {"name": "start", "value": "2026-02-03T10:00:00"},
                {"name": "end", "value": "2026-02-03T10:45:00"},
            ],
        },
    ],
    "chat-2026-01-15#1": [
        {
            "op": "update",
            "type": "Medication",
            "key": "med-atorvastatin",
            "fields": [{"name": "active", "value": False}, {"name": "end", "value": "2026-01-15"}],
        },
        {
            "op": "add",
            "type": "Medication",
            "key": "med-rosuvastatin",
            "fields": [
                {"name": "name", "value": "rosuvastatin"},
                {"name": "dose_mg", "value": 10.0},
                {"name": "start", "value": "2026-01-15"},
                {"name": "active", "value": True},
                {"name": "prescribed_by", "value": "GP"},
            ],
        },
    ],
    "chat-2026-01-16#1": [
        {
            "op": "add",
            "type": "SleepLog",
            "key": "sleep-2026-01-15",
            "fields": [
                {"name": "date", "value": "2026-01-15"},
                {"name": "hours", "value": 5.0},
                {"name": "quality", "value": 1},
            ],
        },
    ],
    "chat-2026-01-20#1": [
        {
            "op": "add",
            "type": "PassportRenewal",
            "key": "passport-renewal-2026",
            "fields": [
                {"name": "title", "value": "Passport renewal"},
                {"name": "applied_on", "value": "2026-01-20"},
                {"name": "due_back", "value": "2026-02-10"},
                {"name": "arrived", "value": False},
            ],
        },
    ],
}

# The reference bindings, per turn source: where the user's own words named a new type's fields,
# which concept each carries. The matcher agrees with the first; the second is a flag that
# would silence an alert, which only a person binds: it is held for review.
_BINDINGS: dict[str, list[dict[str, Any]]] = {
    "chat-2026-01-20#1": [
        {
            "concept": "duty.due",
            "type": "PassportRenewal",
            "field": "due_back",
            "reason": "the day the new passport should be back",
        },
        {
            "concept": "record.settled",
            "type": "PassportRenewal",
            "field": "arrived",
            "reason": "the renewal is done when the passport arrives",
        },
    ],
}

# Questions the demo asks, each with the reference expression the stand-in returns.
DEMO_QUESTIONS_ASKED: list[tuple[str, str, str]] = [
    (
        "How many international trips have I taken since I moved to Zürich?",
        "len([t for t in user.all(Trip) if t.international and t.start >= user.get(Residence, "
        "'residence-zurich').since and t.start <= user.today])",
        "counts current international trips that started between the move and today",
    ),
    (
        "Which medications am I taking now?",
        "sorted(m.name for m in user.all(Medication) if m.active)",
        "lists the names of current medications marked active",
    ),
    (
        "How much did I spend on coffee in 2025, per currency?",
        "{c: round(sum(t.amount for t in user.all(Transaction) if t.category == 'coffee' and "
        "t.currency == c and t.date.year == 2025), 2) for c in sorted({t.currency for t in "
        "user.all(Transaction) if t.category == 'coffee' and t.date.year == 2025})}",
        "sums 2025 coffee transactions separately for each currency",
    ),
    (
        "What did I say about the cherry blossoms?",
        "[h['text'] for h in search('cherry blossoms Kyoto', 2)]",
        "no record type holds remarks, so it searches the conversation log",
    ),
]


def conversations() -> list[dict[str, Any]]:
    """The January 2026 chats as Event JSONL utterances."""
    return [dict(t) for t in TURNS]


def reference_model(body: dict[str, Any]) -> str:
    """The scripted stand-in model: the reference answers above, chosen by the request."""
    schema = body["response_format"]["json_schema"]["name"]
    prompt = " ".join(str(m.get("content", "")) for m in body["messages"] if m["role"] == "user")
    if schema == "Extraction":
        ops = [
            {**op, "utterances": [source]}
            for source, source_ops in _OPS.items()
            if f"[{source}]" in prompt
            for op in source_ops
        ]
        bindings = [b for source, bs in _BINDINGS.items() if f"[{source}]" in prompt for b in bs]
        return json.dumps({"operations": ops, "bindings": bindings})
    for question, expression, explanation in DEMO_QUESTIONS_ASKED:
        if question in prompt:
            return json.dumps({"expression": expression, "explanation": explanation})
    return json.dumps({"expression": "None", "explanation": "the reference model has no answer"})


_COLUMNS = (
    "purpose",
    "model",
    "base_url",
    "request_key",
    "request",
    "response",
    "content",
    "tokens_in",
    "tokens_out",
    "latency_ms",
    "outcome",
    "error",
)


def export_calls(store: Store, path: Path) -> int:
    """Write the store's model calls as JSONL, without the times that differ between runs."""
    rows = store.con.execute(
        f"SELECT {', '.join(_COLUMNS)} FROM model_calls ORDER BY call_id"
    ).fetchall()

    def lines() -> Iterator[str]:
        for row in rows:
            record = dict(zip(_COLUMNS, row, strict=True))
            record["base_url"], record["latency_ms"] = "", 0.0
            yield json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"

    Output(path, JSONL).write_text(lines())
    return len(rows)


def import_calls(store: Store, user: str, source: Callable[[], str] | None = None) -> int:
    """Append the bundled demo calls to ``store``'s call record (skipped if already there)."""
    text = (
        source()
        if source
        else resources.files("uac_kernel").joinpath("data", CALLS_FILE).read_text("utf-8")
    )
    records = [json.loads(line) for line in text.splitlines() if line.strip()]
    known = {r[0] for r in store.con.execute("SELECT request_key FROM model_calls").fetchall()}
    fresh = [r for r in records if r["request_key"] not in known]
    for r in fresh:
        store.record_call(user=user, **{c: r[c] for c in _COLUMNS})
    return len(fresh)
