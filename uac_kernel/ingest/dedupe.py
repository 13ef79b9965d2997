"""What "already in the log" means for an ingest: an event with the same ``source`` and the same
content (``event_content``) is logged. A source says where events came from (a chat turn), and
many events may come from one: an utterance and the facts and constraints extracted from it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import orjson

from uac_kernel.core.schema import coerce, to_json_value
from uac_kernel.ingest.events import InputEvent
from uac_kernel.log.store import Store, dump_payload

__all__ = ["event_content", "fresh_events"]


def event_content(
    kind: str, ts: datetime, payload: dict[str, Any], field_types: Callable[[str], dict[str, str]]
) -> str:
    """The canonical form of an event's content (kind, ts and payload), the same for an input
    event and for that event as logged: a fact's field values as the log stores them (read by
    ``field_types`` of the type), a constraint without the rule name an add is logged with.
    Two events from one ``source`` with the same content are one event (``Workbench._fresh``)."""
    if kind == "fact" and isinstance(fields := payload.get("fields"), dict):
        types = field_types(str(payload.get("type")))
        canonical: dict[str, Any] = {}
        for name, value in fields.items():
            ftype = types.get(name)
            if ftype is not None and value is not None:
                # a value that does not coerce differs from the logged one: planning says why
                with contextlib.suppress(ValueError, TypeError):
                    value = to_json_value(coerce(ftype, value))
            canonical[name] = value
        payload = {**payload, "fields": canonical}
    elif kind == "constraint" and "rule" in payload:
        payload = {k: v for k, v in payload.items() if k != "rule"}
    try:
        body = dump_payload(payload)
    except (TypeError, ValueError, orjson.JSONEncodeError):
        body = repr(payload)
    return f"{kind}|{ts.isoformat()}|{body}"


def fresh_events(
    store: Store, user: str, parsed: Sequence[InputEvent], schema: Mapping[str, dict[str, str]]
) -> tuple[list[InputEvent], int]:
    """The events of ``parsed`` not logged yet for ``user``, and how many repeat an earlier one
    of ``parsed`` (appended once); ``schema``: the user's field types by type.

    The content is compared only for the sources that repeat in ``parsed`` or are logged (one
    query finds those, ``Store.logged_sources``), so a batch of new sources costs a set of them.
    An event whose source ``forget`` erased an event of counts as logged: a forgotten fact stays
    gone when the original file is ingested again.
    """
    counts: dict[str, int] = {}
    for ev in parsed:
        if ev.source is not None:
            counts[ev.source] = counts.get(ev.source, 0) + 1
    already = store.logged_sources(user, counts)
    compare = already | {s for s, n in counts.items() if n > 1}
    if not compare:
        return list(parsed), 0

    def field_types(name: str) -> dict[str, str]:
        return schema.get(name, {})

    logged: set[str] = set()
    erased: set[str] = set()
    for source, kind, ts, payload in store.logged_of_sources(user, already):
        if payload is None:
            erased.add(source)
        else:
            logged.add(f"{source}|{event_content(kind, ts, payload, field_types)}")
    fresh: list[InputEvent] = []
    seen: set[str] = set()
    repeated = 0
    for ev in parsed:
        if ev.source is None or ev.source not in compare:
            fresh.append(ev)
            continue
        if ev.source in erased:
            continue
        content = f"{ev.source}|{event_content(ev.kind, ev.ts, ev.payload, field_types)}"
        if content in logged:
            continue
        if content in seen:
            repeated += 1
            continue
        seen.add(content)
        fresh.append(ev)
    return fresh, repeated
