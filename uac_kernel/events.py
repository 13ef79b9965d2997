"""The Event JSONL interchange format: parsing, and validating a batch against the state.

A batch is validated whole before anything is appended: the first problem raises an
``EventError`` naming the file, line and field, and the log stays exactly as it was.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import orjson

from uac_kernel._display import show
from uac_kernel.errors import EventError
from uac_kernel.fold import State
from uac_kernel.schema import check_field_name, check_type_name, coerce, infer, to_json_value
from uac_kernel.store import NewEvent, dump_payload

__all__ = ["InputEvent", "parse_jsonl", "parse_objects", "plan_batch"]

KINDS = ("utterance", "fact")
_EXACT_JSON: dict[str, type] = {"str": str, "int": int, "bool": bool}
OPS = ("add", "update", "retract")
_ALLOWED = {
    "utterance": {"kind", "ts", "source", "speaker", "text", "meta"},
    "fact": {
        "kind",
        "ts",
        "source",
        "op",
        "type",
        "key",
        "fields",
        "reason",
        "author",
        "derived_from",
    },
}


@dataclass(slots=True)
class InputEvent:
    """One parsed input event and where it came from."""

    origin: str
    line: int
    ts: datetime
    kind: str
    source: str | None
    payload: dict[str, Any]


def parse_jsonl(path: str | Path) -> Iterator[InputEvent]:
    """Parse an Event JSONL file; blank lines are skipped."""
    p = Path(path)
    try:
        handle = p.open(encoding="utf-8")
    except OSError as exc:
        raise EventError(
            f"cannot read the file: {exc.strerror}; check the path", origin=str(p)
        ) from exc
    with handle:
        for n, text in enumerate(handle, 1):
            if not text.strip():
                continue
            try:
                obj = orjson.loads(text)
            except orjson.JSONDecodeError as exc:
                raise EventError(
                    f"invalid JSON ({exc.msg} at column {exc.colno}); each line must be one JSON object",
                    origin=str(p),
                    line=n,
                ) from exc
            # orjson refuses lone surrogates while parsing, so the text needs no second check.
            yield parse_event(obj, str(p), n, check_unicode=False)


def parse_objects(
    objects: Iterable[dict[str, Any]], origin: str = "<events>"
) -> Iterator[InputEvent]:
    """Parse already-decoded event objects (line numbers count from 1)."""
    for n, obj in enumerate(objects, 1):
        yield parse_event(obj, origin, n)


def _dump(payload: dict[str, Any], fail: Any) -> str:
    try:
        return dump_payload(payload)
    except orjson.JSONEncodeError as exc:
        if "surrogates" in str(exc):
            raise fail(
                "a string holds an unpaired surrogate (\\ud800-\\udfff); send valid Unicode"
            ) from None
        raise fail(f"cannot be stored as JSON: {exc}") from None


def parse_event(obj: Any, origin: str, line: int, check_unicode: bool = True) -> InputEvent:
    def fail(message: str, field: str = "") -> EventError:
        return EventError(message, origin=origin, line=line, field=field)

    if not isinstance(obj, dict):
        raise fail('each line must be a JSON object like {"kind": "fact", ...}')
    kind = obj.get("kind")
    if kind not in KINDS:
        raise fail(f"unknown kind {kind!r}; use one of {', '.join(KINDS)}", "kind")
    if not obj.keys() <= _ALLOWED[kind]:
        unknown = sorted(set(obj) - _ALLOWED[kind])
        allowed = ", ".join(sorted(_ALLOWED[kind]))
        raise fail(f"unknown field for a {kind} event; allowed: {allowed}", unknown[0])
    ts = _parse_ts(obj.get("ts"), fail)
    source = obj.get("source")
    if source is not None and (not isinstance(source, str) or not source):
        raise fail("source must be a non-empty string", "source")
    payload = dict(obj)
    del payload["kind"], payload["ts"]
    payload.pop("source", None)
    if kind == "utterance":
        for name in ("speaker", "text"):
            if not isinstance(payload.get(name), str):
                raise fail(f"an utterance needs a string {name!r}", name)
        if "meta" in payload and not isinstance(payload["meta"], dict):
            raise fail("meta must be a JSON object", "meta")
    else:
        _check_fact_shape(payload, fail)
    if source is None:
        # A content hash stands in for a missing source, so re-ingesting a file is idempotent.
        text = f"{kind}|{ts.isoformat()}|{_dump(payload, fail)}"
        source = f"sha256:{hashlib.sha256(text.encode()).hexdigest()[:32]}"
    elif check_unicode:
        _dump(payload, fail)
    return InputEvent(origin, line, ts, kind, source, payload)


def _parse_ts(value: Any, fail: Any) -> datetime:
    if not isinstance(value, str):
        raise fail("ts is required: an ISO 8601 date or date-time like '2025-03-02T10:15:00'", "ts")
    try:
        ts = datetime.fromisoformat(value)
    except ValueError:
        try:
            d = date.fromisoformat(value)
        except ValueError:
            raise fail(f"{value!r} is not an ISO 8601 date or date-time", "ts") from None
        ts = datetime(d.year, d.month, d.day)
    if ts.tzinfo is not None:
        try:
            ts = ts.astimezone(UTC).replace(tzinfo=None)
        except OverflowError:
            raise fail(f"{value!r} in UTC falls outside years 1 to 9999", "ts") from None
    return ts


def _check_fact_shape(p: dict[str, Any], fail: Any) -> None:
    op = p.get("op")
    if op not in OPS:
        raise fail(f"unknown op {op!r}; use one of {', '.join(OPS)}", "op")
    if (why := check_type_name(p.get("type"))) is not None:
        raise fail(why, "type")
    key = p.get("key")
    if not isinstance(key, str) or not key or len(key) > 200:
        raise fail("key must be a non-empty string of at most 200 characters", "key")
    fields = p.get("fields")
    if op == "retract":
        if fields is not None:
            raise fail("a retract carries no fields; use update to change a record", "fields")
    else:
        if not isinstance(fields, dict) or (op == "update" and not fields):
            raise fail(f"an {op} needs a non-empty JSON object of fields", "fields")
        for name in fields:
            if (why := check_field_name(name)) is not None:
                raise fail(why, f"fields.{name}")
    for text_field in ("reason", "author"):
        if text_field in p and not isinstance(p[text_field], str):
            raise fail(f"{text_field} must be a string", text_field)
    if "derived_from" in p and not (
        isinstance(p["derived_from"], list) and all(isinstance(s, str) for s in p["derived_from"])
    ):
        raise fail("derived_from must be a list of source strings", "derived_from")


class _Overlay:
    """The state as the batch so far would leave it: enough to validate the next event."""

    def __init__(self, state: State):
        self.state = state
        self.fields: dict[str, dict[str, str]] = {}
        self.live: dict[tuple[str, str], datetime | None] = {}
        self.retracted: dict[tuple[str, str], datetime] = {}

    def field_type(self, type_name: str, name: str) -> str | None:
        added = self.fields.get(type_name, {})
        return added.get(name) or self.state.schema.field_type(type_name, name)

    def has_type(self, type_name: str) -> bool:
        return type_name in self.fields or type_name in self.state.schema.types

    def valid_from(self, type_name: str, key: str) -> tuple[bool, datetime | None]:
        """Whether the record is current, and since when."""
        if (type_name, key) in self.live:
            since = self.live[(type_name, key)]
            return since is not None, since
        rec = self.state.get(type_name, key)
        return rec is not None, rec.valid_from if rec else None

    def retracted_at(self, type_name: str, key: str) -> datetime | None:
        """When a record that is not current was retracted; ``None`` if it never existed."""
        if (type_name, key) in self.retracted:
            return self.retracted[(type_name, key)]
        versions = self.state.versions(type_name, key)  # only on the way to an error
        return versions[-1].valid_to if versions and versions[-1].retracted else None


def _fail(ev: InputEvent, message: str, field: str = "") -> EventError:
    return EventError(message, origin=ev.origin, line=ev.line, field=field)


def _not_current(name: str, key: str, op: str, retracted: datetime | None) -> str:
    """Why an update or retract of a record that is not current cannot be, and what to do."""
    record = f"{name} {key!r}"
    if retracted is not None:
        then = f"{record} was retracted at {show(retracted)}"
        if op == "retract":
            return f"{then}; nothing to retract"
        return f"{then}; add it again (op 'add') to bring it back"
    if op == "retract":
        return f"{record} does not exist; nothing to retract"
    return f"{record} does not exist; add it first (op 'add')"


def plan_batch(state: State, batch: Iterable[InputEvent]) -> list[NewEvent]:
    """Validate ``batch`` against ``state``; return the events to append, schema events included.

    Fact field values are stored in their canonical JSON form (e.g. dates as ISO strings).
    """
    overlay = _Overlay(state)
    out: list[NewEvent] = []
    user = state.user
    for ev in batch:
        if ev.kind != "fact":
            out.append(NewEvent(ev.ts, ev.kind, user, ev.payload, ev.source))
            continue
        p = ev.payload
        name, key, op = p["type"], p["key"], p["op"]
        fail = functools.partial(_fail, ev)

        if not overlay.has_type(name):
            overlay.fields[name] = {}
            out.append(NewEvent(ev.ts, "schema", user, {"type": name}, None))
        current, since = overlay.valid_from(name, key)
        if op == "add" and current:
            raise fail(f"{name} {key!r} already exists; use op 'update' to change it", "key")
        if op != "add":
            if not current:
                raise fail(_not_current(name, key, op, overlay.retracted_at(name, key)), "key")
            if since is not None and ev.ts < since:
                raise fail(
                    f"ts is before the current version of {name} {key!r} ({since.isoformat()}); "
                    "a change must be dated on or after the version it changes",
                    "ts",
                )
        canonical: dict[str, Any] = {}
        for fname, value in (p.get("fields") or {}).items():
            ftype = overlay.field_type(name, fname)
            if ftype is None:
                ftype = infer(value)
                if ftype is None:
                    raise fail(
                        "cannot infer a type for a new field from "
                        f"{json.dumps(value)[:40]}; give a bool, number, string, ISO date or "
                        "a non-empty list of one of those",
                        f"fields.{fname}",
                    )
                overlay.fields.setdefault(name, {})[fname] = ftype
                out.append(
                    NewEvent(
                        ev.ts, "schema", user, {"type": name, "field": fname, "ftype": ftype}, None
                    )
                )
            if type(value) is _EXACT_JSON.get(ftype):  # already canonical: the common case
                canonical[fname] = value
                continue
            try:
                canonical[fname] = to_json_value(coerce(ftype, value))
            except ValueError as exc:
                raise fail(f"{exc} (field type is {ftype})", f"fields.{fname}") from None
        payload = dict(p)
        if "fields" in p:
            payload["fields"] = canonical
        overlay.live[(name, key)] = None if op == "retract" else ev.ts
        if op == "retract":
            overlay.retracted[(name, key)] = ev.ts
        out.append(NewEvent(ev.ts, "fact", user, payload, ev.source))
    return out
