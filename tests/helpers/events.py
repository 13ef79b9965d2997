"""Events as the log takes them, written short: facts, a clock tick, runs of notes, a JSONL file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def fact(ts: str, op: str, type_: str, key: str, **fields: Any) -> dict[str, Any]:
    ev: dict[str, Any] = {"kind": "fact", "ts": ts, "op": op, "type": type_, "key": key}
    if op != "retract":
        ev["fields"] = fields
    elif fields:
        ev.update(fields)
    return ev


def _at(ts: str) -> str:
    """A date (``2025-01-01``) as that day at 09:00; a date-time as it is."""
    return f"{ts}T09:00:00" if len(ts) == 10 else ts


def add(ts: str, type_: str, key: str, **fields: Any) -> dict[str, Any]:
    return fact(_at(ts), "add", type_, key, **fields)


def update(ts: str, type_: str, key: str, **fields: Any) -> dict[str, Any]:
    return fact(_at(ts), "update", type_, key, **fields)


def retract(ts: str, type_: str, key: str) -> dict[str, Any]:
    return fact(_at(ts), "retract", type_, key)


def clock(ts: str) -> dict[str, Any]:
    """An utterance that only moves the log clock (``user.today``) to ``ts``."""
    return {"kind": "utterance", "ts": _at(ts), "speaker": "user", "text": "ok"}


def notes(prefix: str, n: int) -> list[dict[str, Any]]:
    """``n`` Note facts, one a minute from 2025-01-01 00:00, each with a source of its own."""
    return [
        {
            "kind": "fact",
            "ts": f"2025-01-01T{i // 60 % 24:02d}:{i % 60:02d}:00",
            "op": "add",
            "type": "Note",
            "key": f"{prefix}{i}",
            "fields": {"text": f"note {prefix}{i}", "n": i},
            "source": f"{prefix}:{i}",
        }
        for i in range(n)
    ]


def jsonl(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path
