"""Maya's memory and two turns about her Lisbon flight: model answers on them, a batch held."""

from __future__ import annotations

import json
from typing import Any

from helpers.events import fact
from uac_kernel.model.testing import ChatServer
from uac_kernel.workbench import Workbench

HISTORY = [
    fact("2025-01-10", "add", "Trip", "trip-lisbon", destination="Lisbon", end="2025-03-16"),
    fact("2025-01-11", "add", "Trip", "trip-oslo", destination="Oslo"),
    fact("2025-01-12", "add", "Medication", "med-statin", name="atorvastatin", active=True),
    *[
        fact("2025-01-13", "add", "Book", f"book-{c}", title=f"volume {c}")
        for c in "abcdefghijklmnopqrst"
    ],
]


TURNS = [
    {
        "kind": "utterance",
        "ts": "2025-03-01T09:00:00",
        "speaker": "user",
        "text": "Our Lisbon flight moved, we now fly back on Tuesday the eighteenth.",
        "source": "chat-9#1",
    },
    {
        "kind": "utterance",
        "ts": "2025-03-01T09:00:30",
        "speaker": "assistant",
        "text": "Noted, I changed it.",
        "source": "chat-9#2",
    },
]


def op(op: str, type_: str, key: str, reason: str | None = None, **fields: Any) -> dict[str, Any]:
    """One operation of a model's extraction answer, drawn from the first turn."""
    return {
        "op": op,
        "type": type_,
        "key": key,
        "fields": [{"name": k, "value": v} for k, v in fields.items()],
        **({"reason": reason} if reason else {}),
        "utterances": ["chat-9#1"],
    }


def answer(*ops: dict[str, Any]) -> str:
    """A model's extraction answer (JSON) of ``ops``."""
    return json.dumps({"operations": list(ops)})


MOVE = op("update", "Trip", "trip-lisbon", end="2025-03-18")


def extract_one(wb: Workbench, server: ChatServer, reply: str, **kw: Any) -> Any:
    """``wb.extract`` with ``reply`` the model's one answer."""
    server.enqueue(reply)
    return wb.extract(progress=False, **kw)


def held_one(wb: Workbench, server: ChatServer) -> int:
    """Extract an answer of four operations (the Lisbon move and three more) that is held for
    review; the held batch's id."""
    reply = answer(
        MOVE,
        op("update", "Medication", "med-statin", active=False),
        op("add", "Flight", "fl-1", day="2025-03-18"),
        op("retract", "Trip", "trip-oslo", reason="cancelled"),
    )
    assert extract_one(wb, server, reply).held == 1
    (batch,) = wb.review()
    return batch.id
