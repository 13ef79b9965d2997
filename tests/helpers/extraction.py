"""A stand-in model over a short chat: its turns, the operations it extracts from each, its answers."""

from __future__ import annotations

import json
from typing import Any

TURNS = [
    {
        "kind": "utterance",
        "ts": "2025-03-04T09:00:00",
        "speaker": "user",
        "text": "I'm allergic to penicillin, it gives me hives.",
        "source": "chat-1#1",
    },
    {
        "kind": "utterance",
        "ts": "2025-03-04T09:00:30",
        "speaker": "assistant",
        "text": "Noted.",
        "source": "chat-1#2",
    },
    {
        "kind": "utterance",
        "ts": "2025-03-11T18:00:00",
        "speaker": "user",
        "text": "Booked Lisbon for next Friday to Sunday!",
        "source": "chat-2#1",
    },
    {
        "kind": "utterance",
        "ts": "2025-11-18T10:00:00",
        "speaker": "user",
        "text": "The walk-in clinic gave me amoxicillin for my ear.",
        "source": "chat-3#1",
    },
]

OPS = {
    "chat-1#1": {
        "op": "add",
        "type": "Allergy",
        "key": "allergy-penicillin",
        "fields": [
            {"name": "substance", "value": "penicillin"},
            {"name": "reaction", "value": "hives"},
        ],
        "utterances": ["chat-1#1"],
    },
    "chat-2#1": {
        "op": "add",
        "type": "Trip",
        "key": "trip-2025-03-lisbon",
        "fields": [
            {"name": "destination", "value": "Lisbon"},
            {"name": "start", "value": "2025-03-14"},
            {"name": "end", "value": "2025-03-16"},
            {"name": "international", "value": True},
        ],
        "utterances": ["chat-2#1"],
    },
    "chat-3#1": {
        "op": "add",
        "type": "Medication",
        "key": "med-amoxicillin",
        "fields": [{"name": "name", "value": "amoxicillin"}, {"name": "active", "value": True}],
        "utterances": ["chat-3#1"],
    },
}


def fake_model(body: dict[str, Any]) -> str:
    """A stand-in model: extraction from a table of answers, questions by keyword."""
    schema = body["response_format"]["json_schema"]["name"]
    prompt = " ".join(m["content"] for m in body["messages"] if m["role"] == "user")
    if schema == "Extraction":
        ops = [op for source, op in OPS.items() if f"[{source}]" in prompt]
        return json.dumps({"operations": ops})
    if "how many trips" in prompt.lower():
        return json.dumps({"expression": "len(user.all(Trip))", "explanation": "counts the trips"})
    if "trips since march" in prompt.lower():
        return json.dumps(
            {
                "expression": "[t.destination for t in user.where(Trip, 'start', "
                "since=date(2025, 3, 1))]",
                "explanation": "reads the trips from their start-date index",
            }
        )
    return json.dumps(
        {"expression": "[h['text'] for h in search('ear clinic', 1)]", "explanation": "looks it up"}
    )
