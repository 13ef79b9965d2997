"""What one log event says, as a line of text: ``user: Back from Tokyo!``, ``add Trip tokyo
country=Japan``, ``raised critical drug_allergy: amoxicillin is a penicillin ...``.

The log browser's rows (clipped to their width) and the text view of ``%uac log`` (wrapped)
both show an event through ``summary``, so an alert reads as its message everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

__all__ = ["summary"]


def summary(kind: str, payload: Mapping[str, Any]) -> str:
    """The whole line for an event of ``kind`` with ``payload`` (never cut here)."""
    p = payload
    if kind == "utterance":
        text = f"{p.get('speaker', '?')}: {p.get('text', '')}"
    elif kind == "fact":
        text = f"{p.get('op', '?')} {p.get('type', '?')} {p.get('key', '?')}"
        fields = p.get("fields") or {}
        if isinstance(fields, dict) and fields:
            text += " " + ", ".join(f"{k}={_short(v)}" for k, v in fields.items())
        if p.get("reason"):
            text += f" (reason: {p['reason']})"
    elif kind == "schema":
        if "field" in p:
            text = f"{p.get('type', '?')}.{p['field']}: {p.get('ftype', '?')}"
        else:
            text = f"new type {p.get('type', '?')}"
    elif kind == "alert":
        text = (
            f"{p.get('state', '?')} {p.get('severity', '?')} {p.get('rule', '?')}: "
            f"{p.get('message', '')}"
        )
        if p.get("reason"):
            text += f" (why: {p['reason']})"
    else:
        text = orjson.dumps(dict(p), option=orjson.OPT_SORT_KEYS).decode()
    return text


def _short(v: Any) -> str:
    return v if isinstance(v, str) else orjson.dumps(v).decode()
