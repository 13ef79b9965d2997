"""What one log event says, as a line of text: ``user: Back from Tokyo!``, ``add Trip tokyo
country=Japan``, ``raised critical drug_allergy: amoxicillin is a penicillin ...``, ``add tax
(obligation, warning): File the tax return; on Trip``.

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
    elif kind == "constraint":
        text = _constraint(p)
    else:
        text = orjson.dumps(dict(p), option=orjson.OPT_SORT_KEYS).decode()
    return text


def _constraint(p: Mapping[str, Any]) -> str:
    """``add tax (obligation, warning): File the tax return; on Trip``: what a constraint event
    did to which key, the constraint's kind, severity and title, and the records it reads (its
    JSON whole is ``uac log --json``'s)."""
    text = f"{p.get('op', '?')} {p.get('key', '?')}"
    body = p.get("constraint")
    if isinstance(body, Mapping):
        severity = f", {body['severity']}" if body.get("severity") else ""
        text += f" ({body.get('kind', '?')}{severity}): {body.get('title', '')}"
        reads = _selects(body)
        if reads:
            text += f"; on {', '.join(reads)}"
    for name in ("reason", "author"):
        if p.get(name):
            text += f" ({name}: {p[name]})"
    return text


def _selects(body: Mapping[str, Any]) -> list[str]:
    """The types (or roles) the selections of a constraint name, in its order, each once."""
    found: dict[str, None] = {}
    todo: list[Any] = [body]
    while todo:  # breadth first: the constraint's own selections before nested ones
        value = todo.pop(0)
        if isinstance(value, Mapping):
            named = value.get("type") or value.get("role")
            if isinstance(named, str) and value is not body:
                found.setdefault(named if value.get("type") else f"role {named}")
            todo.extend(value.values())
        elif isinstance(value, list):
            todo.extend(value)
    return list(found)


def _short(v: Any) -> str:
    return v if isinstance(v, str) else orjson.dumps(v).decode()
