"""The Event JSONL interchange format: parsing, and validating a batch against the state.

A batch is validated whole before anything is appended: the first problem raises an
``EventError`` naming the file, line and field, and the log stays exactly as it was.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import math
from collections.abc import Callable, Collection, Iterable, Iterator, KeysView
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import orjson

from uac_kernel.core.display import show
from uac_kernel.core.errors import ConstraintError, EventError, VocabularyError
from uac_kernel.core.limits import DEFAULT_LIMITS, INT_MAX, INT_MIN, KEY_CHARS, Limits
from uac_kernel.core.names import field_clash, type_clash
from uac_kernel.core.schema import check_field_name, check_type_name, coerce, infer, to_json_value
from uac_kernel.log.store import NewEvent, dump_payload
from uac_kernel.sql.view import CONSTRAINTS_TABLE, INDEX_TABLE, VOCABULARY_TABLE, table_names
from uac_kernel.state.fold import State
from uac_kernel.vocab.binding import addable
from uac_kernel.vocab.log import binding_json, binding_of, check_binding, schema_problem
from uac_kernel.vocab.matcher import SAMPLE, propose

__all__ = [
    "InputEvent",
    "json_lines",
    "json_value",
    "parse_event",
    "parse_jsonl",
    "parse_objects",
    "plan_batch",
    "samplers",
]

KINDS = ("utterance", "fact", "constraint", "vocabulary")
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
    "constraint": {
        "kind",
        "ts",
        "source",
        "op",
        "key",
        "constraint",
        "reason",
        "author",
        "derived_from",
    },
    "vocabulary": {"kind", "ts", "source", "op", "binding"},
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


def parse_jsonl(path: str | Path, limits: Limits = DEFAULT_LIMITS) -> Iterator[InputEvent]:
    """Parse an Event JSONL file; blank lines are skipped."""
    origin = str(path)
    for n, obj in json_lines(path, limits):
        yield parse_event(obj, origin, n, check_unicode=False, limits=limits)


def json_lines(path: str | Path, limits: Limits = DEFAULT_LIMITS) -> Iterator[tuple[int, Any]]:
    """The JSON value of each non-blank line of a UTF-8 file, with its line number.

    A line is read at most ``limits.line_bytes`` (+1) bytes at a time, so a file without line
    breaks (``/dev/zero``, a binary file) fails at its first line instead of filling memory.
    A UTF-8 byte order mark is skipped; UTF-16, other encodings and NUL bytes are one-line
    errors that say where the first bad byte is and how to convert the file.
    """
    p = Path(path)
    origin = str(p)
    try:
        handle = p.open("rb")
    except OSError as exc:
        raise EventError(
            f"cannot read the file: {exc.strerror}; check the path", origin=origin
        ) from exc
    with handle:
        n = 0
        while True:
            try:
                raw = handle.readline(limits.line_bytes + 1)
            except OSError as exc:
                raise EventError(
                    f"cannot read the file: {exc.strerror}; check the path", origin=origin
                ) from exc
            if not raw:
                return
            n += 1
            if n == 1:
                if raw.startswith(codecs.BOM_UTF8):
                    raw = raw[len(codecs.BOM_UTF8) :]
                elif (wide := _wide_encoding(raw)) is not None:
                    raise EventError(
                        f"the file is {wide} (it starts with a {wide} byte order mark); Event "
                        f"JSONL is UTF-8: convert it, e.g. iconv -f {wide.lower()} -t utf-8",
                        origin=origin,
                        line=1,
                    )
            if (nul := raw.find(b"\x00")) >= 0:  # never in JSON text: UTF-16 or binary
                raise EventError(_nul_message(nul), origin=origin, line=n)
            if len(raw) > limits.line_bytes and not raw.endswith(b"\n"):  # cut short
                raise EventError(
                    f"the line is longer than {limits.line_bytes:,} bytes (the most one event may "
                    "take); split the event or leave the large text out",
                    origin=origin,
                    line=n,
                )
            if not raw.strip():
                continue
            try:
                obj = json_value(raw)
            except ValueError as exc:
                raise EventError(str(exc), origin=origin, line=n) from None
            yield n, obj


def _wide_encoding(raw: bytes) -> str | None:
    """UTF-32 or UTF-16 when ``raw`` starts with its byte order mark, else None. UTF-32 is
    tested first: its little-endian mark (FF FE 00 00) begins with UTF-16's (FF FE)."""
    if raw.startswith((codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE)):
        return "UTF-32"
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "UTF-16"
    return None


# A run of 19 digits: the shortest integer that can fall outside 64 bits. Found by mapping every
# ASCII digit (what ``\d`` matches in bytes) to "0" and the rest to " ": one pass in C, where a
# regex tries a match at every digit of the line.
_DIGITS = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_LONG_RUN = b"0" * 19


def _long_number(raw: bytes) -> bool:
    """Whether ``raw`` holds a run of 19 or more digits (in a number or a string)."""
    return _LONG_RUN in raw.translate(_DIGITS)


def json_value(raw: bytes) -> Any:
    """One line's JSON value, integers exact and a key given twice refused; a ValueError whose
    message says what is wrong with the line."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if (bad := _not_utf8(raw)) is not None:
            raise ValueError(bad) from None
        problem = (
            f"invalid JSON ({exc.msg} at column {exc.colno}); each line must be one JSON object"
        )
        if not _long_number(raw):
            raise ValueError(problem) from None
        obj = _exact_loads(raw, problem)  # e.g. 10**400, which orjson takes for a float
    else:
        if _long_number(raw):
            obj = _exact_loads(raw, "")
    # Every key in the text is a string closed by a quote before its colon, so when the parsed
    # keys are as many as such quote-colons there can be no duplicate (the usual line costs one
    # count). Otherwise a string held a quote-colon, or a key came twice: look precisely.
    if type(obj) in (dict, list) and _keys(obj) != _key_ends(raw):
        json.loads(raw, object_pairs_hook=_no_duplicate)
    return obj


# What ``\s`` matches in a bytes pattern: a key's closing quote, these, then its colon.
_SPACE = b" \t\n\r\x0b\x0c"


def _key_ends(raw: bytes) -> int:
    """How many quotes stand before a colon with only spaces between (the matches of
    ``rb'"\\s*:'``): with the spaces deleted, each is a quote-colon."""
    return raw.translate(None, _SPACE).count(b'":')


def _keys(value: Any) -> int:
    """The keys of every object in a JSON object or array (a call per object or array, not
    per scalar)."""
    n = len(value) if type(value) is dict else 0
    for v in value.values() if type(value) is dict else value:
        if type(v) is dict or type(v) is list:
            n += _keys(v)
    return n


def _no_duplicate(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            # JSON leaves a repeated name to the reader; one that keeps the last value would log
            # what a person reading the first one did not see
            raise ValueError(f"the key {_cut(key)!r} appears twice in one object; keep one of them")
        seen.add(key)
    return dict(pairs)


def _exact_loads(raw: bytes, problem: str) -> Any:
    """The line read again with exact integers: orjson reads an integer past 64 bits as a float,
    silently rounded, where the checks after parsing must see it to refuse it by its field."""
    try:
        return json.loads(raw.decode(), parse_constant=_no_constant)
    except ValueError:  # a syntax error orjson also found, or more digits than int() reads
        raise ValueError(problem or "invalid JSON (a number too long to read)") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_INT_FIX = (
    f"whole numbers must lie within {INT_MIN} and {INT_MAX}: send a larger one as a string "
    "(or as a float, if rounding it is fine)"
)


def _nul_message(column: int) -> str:
    return (
        f"a NUL byte at column {column + 1}: this is not a UTF-8 text file (UTF-16? binary?); "
        "Event JSONL is UTF-8 text: convert it, e.g. iconv -f utf-16 -t utf-8"
    )


def _not_utf8(raw: bytes) -> str | None:
    """Why ``raw`` is not UTF-8, with the column of its first bad byte; None if it is UTF-8."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return (
            f"byte 0x{raw[exc.start]:02x} at column {exc.start + 1} is not UTF-8; Event JSONL is "
            "UTF-8: convert the file, e.g. iconv -f latin1 -t utf-8 for a Latin-1 file"
        )
    return None


def _cut(text: str, most: int = 40) -> str:
    """``text`` shortened to ``most`` characters, for a one-line message."""
    return text if len(text) <= most else text[: most - 3] + "..."


def parse_objects(
    objects: Iterable[dict[str, Any]], origin: str = "<events>", limits: Limits = DEFAULT_LIMITS
) -> Iterator[InputEvent]:
    """Parse already-decoded event objects (line numbers count from 1)."""
    for n, obj in enumerate(objects, 1):
        yield parse_event(obj, origin, n, limits=limits)


def _dump(payload: dict[str, Any], fail: Any, limits: Limits) -> str:
    try:
        text = dump_payload(payload)
    except orjson.JSONEncodeError as exc:
        if "surrogates" in str(exc):
            raise fail(
                "a string holds an unpaired surrogate (\\ud800-\\udfff); send valid Unicode"
            ) from None
        if "ecursion" in str(exc):
            raise fail(
                "values nest too deep to store; field values are scalars or lists of scalars"
            ) from None
        raise fail(f"cannot be stored as JSON: {_cut(str(exc), 80)}") from None
    if len(text) > limits.line_bytes:
        raise fail(
            f"the event takes {len(text):,} bytes as JSON, more than the {limits.line_bytes:,} one "
            "event may take; split it or leave the large text out"
        )
    return text


def _show(value: Any) -> str:
    """``repr(value)``, shortened for a one-line message."""
    return _cut(repr(value))


def _name_problem(what: str, value: Any, most: int) -> str | None:
    """Why ``value`` cannot be a key, source, speaker or author (``what`` says which), or None.

    Any character goes, control characters included: these are data, escaped wherever they are
    shown (code, terminal), as values are.
    """
    if not isinstance(value, str) or not value:
        return f"{what} must be a non-empty string"
    if len(value) > most:
        return f"{what} has {len(value):,} characters; at most {most}"
    return None


def parse_event(
    obj: Any,
    origin: str,
    line: int,
    check_unicode: bool = True,
    limits: Limits = DEFAULT_LIMITS,
) -> InputEvent:
    def fail(message: str, field: str = "") -> EventError:
        return EventError(message, origin=origin, line=line, field=_cut(field, 80))

    if not isinstance(obj, dict):
        raise fail('each line must be a JSON object like {"kind": "fact", ...}')
    kind = obj.get("kind")
    if kind not in KINDS:
        raise fail(f"unknown kind {_show(kind)}; use one of {', '.join(KINDS)}", "kind")
    if not obj.keys() <= _ALLOWED[kind]:
        unknown = sorted(set(obj) - _ALLOWED[kind], key=str)
        allowed = ", ".join(sorted(_ALLOWED[kind]))
        raise fail(f"unknown field for a {kind} event; allowed: {allowed}", str(unknown[0]))
    ts = _parse_ts(obj.get("ts"), fail)
    source = obj.get("source")
    if source is not None and (why := _name_problem("source", source, SOURCE_CHARS)):
        raise fail(why, "source")
    payload = dict(obj)
    del payload["kind"], payload["ts"]
    payload.pop("source", None)
    if kind == "utterance":
        _check_utterance(payload, fail, limits)
    elif kind == "constraint":
        _check_constraint_shape(payload, fail, limits)
    elif kind == "vocabulary":
        _check_vocabulary_shape(payload, fail, limits)
    else:
        _check_fact_shape(payload, fail, limits)
    if source is None:
        # A content hash stands in for a missing source, so re-ingesting a file is idempotent.
        text = f"{kind}|{ts.isoformat()}|{_dump(payload, fail, limits)}"
        source = f"sha256:{hashlib.sha256(text.encode()).hexdigest()[:32]}"
    elif check_unicode:
        _dump(payload, fail, limits)
    return InputEvent(origin, line, ts, kind, source, payload)


# Longest source: it identifies an event, so it stays short (a key's bound is limits.KEY_CHARS).
SOURCE_CHARS = 1_000
# Longest speaker and author: a name, not a text.
NAME_CHARS = 200


def _check_utterance(p: dict[str, Any], fail: Any, limits: Limits) -> None:
    if (why := _name_problem("speaker", p.get("speaker"), NAME_CHARS)) is not None:
        raise fail(why, "speaker")
    text = p.get("text")
    if not isinstance(text, str):
        raise fail("an utterance needs a string 'text'", "text")
    if len(text) > limits.text_chars:
        raise fail(
            f"the text has {len(text):,} characters; at most {limits.text_chars:,}: split it "
            "into several utterances",
            "text",
        )
    if "meta" in p:
        if not isinstance(p["meta"], dict):
            raise fail("meta must be a JSON object", "meta")
        if (why := _meta_problem(p["meta"], limits.meta_depth, limits.meta_depth)) is not None:
            raise fail(why, "meta")


def _meta_problem(value: Any, depth: int, most: int) -> str | None:
    """Why an utterance's ``meta`` cannot be stored (too deep, a wide int), or None."""
    if isinstance(value, dict):
        children: Iterable[Any] = value.values()
    elif isinstance(value, list):
        children = value
    else:
        if type(value) is int and not INT_MIN <= value <= INT_MAX:
            return _wide_int(value)
        return None
    if depth == 0:
        return f"nests objects and lists more than {most} levels deep; flatten it"
    for child in children:
        if (why := _meta_problem(child, depth - 1, most)) is not None:
            return why
    return None


def _parse_ts(value: Any, fail: Any) -> datetime:
    if not isinstance(value, str):
        raise fail("ts is required: an ISO 8601 date or date-time like '2025-03-02T10:15:00'", "ts")
    try:
        ts = datetime.fromisoformat(value)
    except ValueError:
        try:
            d = date.fromisoformat(value)
        except ValueError:
            raise fail(f"{_show(value)} is not an ISO 8601 date or date-time", "ts") from None
        ts = datetime(d.year, d.month, d.day)
    if ts.tzinfo is not None:
        try:
            ts = ts.astimezone(UTC).replace(tzinfo=None)
        except OverflowError:
            raise fail(
                f"{_show(value)} in UTC falls outside years 1 to 9999; give a time within them",
                "ts",
            ) from None
    return ts


# The type and field names that passed their check: it depends on the name alone, and a batch
# names the same few on every event. Only plain strings within the checks' bound get in, and at
# most NAMES_KEPT of them, so hostile input cannot grow it.
_TYPES_OK: set[str] = set()
_FIELDS_OK: set[str] = set()
NAMES_KEPT = 4096


def _checked(ok: set[str], check: Callable[[object], str | None], name: object) -> str | None:
    """``check(name)``, remembered in ``ok`` when the name passes."""
    if type(name) is str and name in ok:
        return None
    why = check(name)
    if why is None and type(name) is str:
        if len(ok) >= NAMES_KEPT:
            ok.clear()
        ok.add(name)
    return why


def _check_fact_shape(p: dict[str, Any], fail: Any, limits: Limits) -> None:
    op = p.get("op")
    if op not in OPS:
        raise fail(f"unknown op {_show(op)}; use one of {', '.join(OPS)}", "op")
    if (why := _checked(_TYPES_OK, check_type_name, p.get("type"))) is not None:
        raise fail(why, "type")
    if (why := _name_problem("key", p.get("key"), KEY_CHARS)) is not None:
        raise fail(why, "key")
    fields = p.get("fields")
    if op == "retract":
        if fields is not None:
            raise fail("a retract carries no fields; use update to change a record", "fields")
    else:
        if not isinstance(fields, dict) or (op == "update" and not fields):
            raise fail(f"an {op} needs a non-empty JSON object of fields", "fields")
        if len(fields) > limits.fields_per_type:
            raise fail(
                f"{len(fields):,} fields in one event; a type holds at most "
                f"{limits.fields_per_type}: split the record into several types",
                "fields",
            )
        max_chars, max_items = limits.value_chars, limits.list_items
        for name, value in fields.items():
            if (type(name) is not str or name not in _FIELDS_OK) and (
                why := _checked(_FIELDS_OK, check_field_name, name)
            ) is not None:
                raise fail(why, f"fields.{name}")
            # Bounds on the value itself; its type is checked against the schema by plan_batch.
            kind = type(value)
            if kind is str:
                if len(value) > max_chars:
                    raise fail(_too_long(len(value), max_chars), f"fields.{name}")
            elif kind is int:
                if not INT_MIN <= value <= INT_MAX:
                    raise fail(_wide_int(value), f"fields.{name}")
            elif (kind is list or kind is dict) and (
                why := _compound_problem(value, max_chars, max_items)
            ) is not None:
                raise fail(why, f"fields.{name}")
    _check_provenance(p, fail, limits)


def _check_provenance(p: dict[str, Any], fail: Any, limits: Limits) -> None:
    """The reason, author and derived_from a fact or constraint event may carry."""
    if "reason" in p:
        if not isinstance(p["reason"], str):
            raise fail("reason must be a string", "reason")
        if len(p["reason"]) > limits.value_chars:
            raise fail(
                f"reason has {len(p['reason']):,} characters; at most {limits.value_chars:,}",
                "reason",
            )
    if "author" in p and (why := _name_problem("author", p["author"], NAME_CHARS)):
        raise fail(why, "author")
    if "derived_from" in p:
        cited = p["derived_from"]
        if not isinstance(cited, list) or len(cited) > limits.list_items:
            raise fail(
                f"derived_from must be a list of at most {limits.list_items:,} source strings",
                "derived_from",
            )
        for item in cited:
            if why := _name_problem("each source of derived_from", item, SOURCE_CHARS):
                raise fail(why, "derived_from")


def _check_constraint_shape(p: dict[str, Any], fail: Any, limits: Limits) -> None:
    """Op and key as a fact's; the constraint parsed by the constraint language and stored in
    its canonical JSON (``constraint_json``), so the log holds only what parses."""
    from uac_kernel.language.spec import constraint_json, parse_constraint

    op = p.get("op")
    if op not in OPS:
        raise fail(f"unknown op {_show(op)}; use one of {', '.join(OPS)}", "op")
    if (why := _name_problem("key", p.get("key"), KEY_CHARS)) is not None:
        raise fail(why, "key")
    if op == "retract":
        if "constraint" in p:
            raise fail(
                "a retract carries no constraint; use update to change a constraint", "constraint"
            )
    else:
        if "constraint" not in p:
            raise fail(f"an {op} needs the whole constraint: a JSON object", "constraint")
        try:
            c = parse_constraint(p["constraint"])
        except ConstraintError as exc:
            path = f"constraint.{exc.field}" if exc.field else "constraint"
            raise fail(exc.reason, path) from None
        p["constraint"] = constraint_json(c)
    _check_provenance(p, fail, limits)


def _check_vocabulary_shape(p: dict[str, Any], fail: Any, limits: Limits) -> None:
    """Op as a fact's; the binding checked against the catalogue and stored canonical (every
    part given), so the log holds only bindings the fold can read."""
    op = p.get("op")
    if op not in OPS:
        raise fail(f"unknown op {_show(op)}; use one of {', '.join(OPS)}", "op")
    if "binding" not in p:
        raise fail("a vocabulary event needs a binding: a JSON object", "binding")
    try:
        p["binding"] = check_binding(p["binding"], op, limits.value_chars)
    except VocabularyError as exc:
        raise fail(exc.reason, f"binding.{exc.field}" if exc.field else "binding") from None


class _Overlay:
    """The state as the batch so far would leave it: enough to validate the next event."""

    def __init__(self, state: State):
        self.state = state
        # Per type the batch touches, the fields it adds.
        self.fields: dict[str, dict[str, str]] = {}
        self.new_types = 0
        self.live: dict[tuple[str, str], datetime | None] = {}
        self.retracted: dict[tuple[str, str], datetime] = {}
        # Every type's name in lower case, for clashes SQL would see, and the SQL tables of the
        # types the view renamed (lower case: (table, type)); made at the first new type.
        self._folded: dict[str, str] | None = None
        self._renamed: dict[str, tuple[str, str]] = {}
        # Constraint keys the batch put in force (their ts) or retracted (None), and how many
        # constraints are in force after the batch so far.
        self.constraints: dict[str, datetime | None] = {}
        self.constraints_in_force = len(state.constraints)
        # The rule name of each constraint key the log and the batch so far have added; made
        # at the first add.
        self._rules: dict[str, str] | None = None
        # Vocabulary keys the batch bound (True) or retracted (False).
        self.bound: dict[tuple[str, str, str | None], bool] = {}
        # Per type the batch reads, its field types as the batch so far leaves them: one dict
        # per type and batch, not a look-up in the state and the batch per field and event.
        self._field_types: dict[str, dict[str, str]] = {}

    def rule_for(self, key: str) -> str:
        """The name of the rule constraint ``key`` becomes when added: the name it had before
        (put in force again), else ``free_rule_name``'s among the names other keys have had in
        the log and the batch, so the key added first keeps the plain one."""
        from uac_kernel.core.constraint_names import free_rule_name

        if self._rules is None:
            cvs = [*self.state.constraint_history, *self.state.constraints.values()]
            self._rules = {cv.key: cv.rule for cv in cvs if cv.rule}
        name = self._rules.get(key)
        if name is None:
            name = self._rules[key] = free_rule_name(key, set(self._rules.values()))
        return name

    def constraint_since(self, key: str) -> tuple[bool, datetime | None]:
        """Whether constraint ``key`` is in force, and since when."""
        if key in self.constraints:
            since = self.constraints[key]
            return since is not None, since
        cv = self.state.constraints.get(key)
        return cv is not None, cv.valid_from if cv else None

    def add_type(self, name: str) -> None:
        self.fields[name] = {}
        self.new_types += 1
        if self._folded is not None:
            self._folded[name.lower()] = name

    def new_type_problem(self, name: str, limits: Limits) -> str | None:
        """Why the batch cannot add type ``name``: too many types, or a name SQL would confuse."""
        known = len(self.state.schema.types) + self.new_types
        if known >= limits.types:
            return (
                f"a new type would make {known + 1} record types, more than the {limits.types} "
                "a user may have; use one of the existing types"
            )
        if self._folded is None:
            self._folded = {t.lower(): t for t in (*self.state.schema.types, *self.fields)}
            self._renamed = self._renamed_tables()
        folded = self._folded
        low = name.lower()
        if low in (INDEX_TABLE, CONSTRAINTS_TABLE, VOCABULARY_TABLE):
            return f"type name {name!r} is the SQL view's table {low}; choose another name"
        if (other := folded.get(low)) is not None:
            return (
                f"type {name!r} differs from the existing type {other!r} only in case, which SQL "
                f"does not tell apart; use {other!r} or another name"
            )
        if (why := type_clash(folded.values(), name)) is not None:
            return why
        if low.endswith("_history") and (other := folded.get(low[: -len("_history")])):
            return (
                f"type {name!r} has the name of the SQL table {other}_history, which holds the "
                f"history of the existing type {other!r}; choose another name"
            )
        if (other := folded.get(f"{low}_history")) is not None:
            return (
                f"type {name!r} would keep its history in the SQL table {name}_history, which is "
                f"the name of the existing type {other!r}; choose another name"
            )
        for own in (low, f"{low}_history"):
            if (hit := self._renamed.get(own)) is not None:
                table, other = hit
                return (
                    f"type {name!r} would need the SQL table {table}, which holds the existing "
                    f"type {other!r} (renamed there to stay distinct from a type named like it); "
                    "choose another name"
                )
        return None

    def _renamed_tables(self) -> dict[str, tuple[str, str]]:
        """The SQL tables (lower case) of the existing types the view gave a suffixed name, with
        the table and the type. Both namings the view may use count: over every type of the
        schema, and over those with records (the ones it shows)."""
        schema = list(self.state.schema.types)
        shown = [t for t in schema if t in self.state.types]
        out: dict[str, tuple[str, str]] = {}
        for order in (schema, shown):
            for t, tables in table_names(order).items():
                if tables[0] != t:
                    out.update((table.lower(), (table, t)) for table in tables)
        return out

    def new_field_problem(self, name: str, new_in_event: int, limits: Limits) -> str | None:
        """Why one more field cannot be added to type ``name`` by the event, or None."""
        if new_in_event > limits.new_fields_per_event:
            return (
                f"the event adds more than {limits.new_fields_per_event} new fields to {name}; "
                "a real record never needs that many at once: split it into several types"
            )
        count = len(self.state.schema.types.get(name, ())) + len(self.fields.get(name, ()))
        if count >= limits.fields_per_type:
            return (
                f"{name} would have {count + 1} fields, more than the {limits.fields_per_type} a "
                "type may have; reuse one of its fields or put these in a type of their own"
            )
        return None

    def field_types(self, type_name: str) -> dict[str, str]:
        """The type's field types (name: ftype), the batch's new fields included."""
        known = self._field_types.get(type_name)
        if known is None:
            known = self._field_types[type_name] = {
                **self.state.schema.types.get(type_name, {}),
                **self.fields.get(type_name, {}),
            }
        return known

    def add_field(self, type_name: str, name: str, ftype: str) -> None:
        self.fields.setdefault(type_name, {})[name] = ftype
        self.field_types(type_name)[name] = ftype

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


def plan_batch(
    state: State,
    batch: Iterable[InputEvent],
    limits: Limits = DEFAULT_LIMITS,
    *,
    propose_bindings: bool = True,
) -> list[NewEvent]:
    """Validate ``batch`` against ``state``; return the events to append, schema events included,
    and (``propose_bindings``) the matcher's vocabulary proposals for the types it changed.

    Fact field values are stored in their canonical JSON form (e.g. dates as ISO strings). The
    batch is held to ``limits`` (new fields, fields per type, types per user; ``parse_event``
    bounds each value) and may not name a type that SQL would confuse with an existing one.
    """
    overlay = _Overlay(state)
    out: list[NewEvent] = []
    user = state.user
    # The canonical form of each text value by field type, as coerce gave it: a batch repeats
    # its dates (one a day), each read once.
    texts: dict[tuple[str, str], Any] = {}
    for ev in batch:
        payload = ev.payload
        if ev.kind == "constraint":
            payload = _plan_constraint(overlay, ev, limits)
        elif ev.kind == "vocabulary":
            _plan_vocabulary(overlay, ev)
        if ev.kind != "fact":
            out.append(NewEvent(ev.ts, ev.kind, user, payload, ev.source))
            continue
        p = ev.payload
        name, key, op = p["type"], p["key"], p["op"]
        if not overlay.has_type(name):
            if (why := overlay.new_type_problem(name, limits)) is not None:
                raise _fail(ev, why, "type")
            overlay.add_type(name)
            out.append(NewEvent(ev.ts, "schema", user, {"type": name}, None))
        current, since = overlay.valid_from(name, key)
        if op == "add" and current:
            raise _fail(ev, f"{name} {key!r} already exists; use op 'update' to change it", "key")
        if op != "add":
            if not current:
                raise _fail(ev, _not_current(name, key, op, overlay.retracted_at(name, key)), "key")
            if since is not None and ev.ts < since:
                raise _fail(
                    ev,
                    f"ts is before the current version of {name} {key!r} ({since.isoformat()}); "
                    "a change must be dated on or after the version it changes",
                    "ts",
                )
        canonical: dict[str, Any] = {}
        new_fields = 0
        field_types = overlay.field_types(name)
        for fname, value in (p.get("fields") or {}).items():
            ftype = field_types.get(fname)
            if ftype is None:
                ftype = infer(value)
                if ftype is None:
                    raise _fail(
                        ev,
                        f"cannot infer a type for a new field from {_show(value)}; give a bool, "
                        "number, string, ISO date or a non-empty list of one of those",
                        f"fields.{fname}",
                    )
                new_fields += 1
                why = field_clash(name, field_types, fname) or overlay.new_field_problem(
                    name, new_fields, limits
                )
                if why is not None:
                    raise _fail(ev, why, f"fields.{fname}")
                overlay.add_field(name, fname, ftype)
                out.append(
                    NewEvent(
                        ev.ts, "schema", user, {"type": name, "field": fname, "ftype": ftype}, None
                    )
                )
            kind = type(value)
            # Already canonical, the common case: a str, int or bool, or a finite float.
            if kind is _EXACT_JSON.get(ftype) or (
                kind is float and ftype == "float" and math.isfinite(value)
            ):
                canonical[fname] = value
                continue
            if kind is str and (got := texts.get((ftype, value))) is not None:
                canonical[fname] = got  # a date (or other text) this batch has read already
                continue
            try:
                canonical[fname] = to_json_value(coerce(ftype, value))
            except ValueError as exc:
                raise _fail(ev, f"{exc} (field type is {ftype})", f"fields.{fname}") from None
            if kind is str:
                texts[(ftype, value)] = canonical[fname]
        payload = dict(p)
        if "fields" in p:
            payload["fields"] = canonical
        overlay.live[(name, key)] = None if op == "retract" else ev.ts
        if op == "retract":
            overlay.retracted[(name, key)] = ev.ts
        out.append(NewEvent(ev.ts, "fact", user, payload, ev.source))
    return out + _proposals(overlay, out) if propose_bindings else out


def _proposals(overlay: _Overlay, planned: list[NewEvent]) -> list[NewEvent]:
    """The bindings the matcher proposes for the types the batch gave new fields or made, as
    vocabulary events (author ``inferred``) at the end of the batch: computed when the schema
    changes, not per event, and appended with the facts or not at all."""
    changed = [t for t in overlay.fields if t in overlay.state.schema.types or overlay.fields[t]]
    if not changed:
        return []
    state = overlay.state
    schema = {t: overlay.field_types(t) for t in (*state.schema.types, *overlay.fields)}
    values, keys = samplers(state, planned)
    ts = max(ev.ts for ev in planned)
    return [
        NewEvent(ts, "vocabulary", state.user, {"op": "add", "binding": binding_json(b)}, None)
        for b in propose(schema, state.vocab, values=values, keys=keys, types=changed)
        if b.key not in overlay.bound
    ]


def samplers(
    state: State, planned: Iterable[NewEvent]
) -> tuple[Callable[[str, str], list[Any]], Callable[[str], Collection[str]]]:
    """How the matcher reads, over ``state`` and a batch's ``planned`` events, a sample of a
    field's values (the current records' first, then the batch's) and the keys of a type's
    records (the current ones and the batch's)."""
    batch: dict[str, list[dict[str, Any]]] = {}
    for ev in planned:
        if ev.kind == "fact":
            batch.setdefault(ev.payload["type"], []).append(ev.payload)

    def values(t: str, f: str) -> list[Any]:
        found = state.sample(t, f, SAMPLE)
        found += [v for p in batch.get(t, ()) if (v := (p.get("fields") or {}).get(f)) is not None]
        return found[:SAMPLE]

    def keys(t: str) -> Collection[str]:
        ts = state.types.get(t)
        own = {p["key"] for p in batch.get(t, ())}
        return own if ts is None else _Keys(ts.current.keys(), own)

    return values, keys


class _Keys(Collection[str]):
    """The keys of a type's records and of the batch's, without copying the type's."""

    def __init__(self, held: KeysView[str], more: set[str]):
        self.held, self.more = held, more

    def __contains__(self, key: object) -> bool:
        return key in self.held or key in self.more

    def __iter__(self) -> Iterator[str]:
        yield from self.held
        yield from (k for k in self.more if k not in self.held)

    def __len__(self) -> int:
        return len(self.held) + sum(1 for k in self.more if k not in self.held)


def _plan_constraint(overlay: _Overlay, ev: InputEvent, limits: Limits) -> dict[str, Any]:
    """Check a constraint event against the constraints in force (as the batch so far leaves
    them): an add of a key in force, an update or retract of one not in force, a change dated
    before the version it changes, or one constraint too many is an ``EventError``. Return the
    payload to log: an add's carries the name of the rule it becomes (``rule``, see
    ``overlay.rule_for``)."""
    key, op = ev.payload["key"], ev.payload["op"]
    current, since = overlay.constraint_since(key)
    if op == "add" and current:
        raise _fail(
            ev, f"constraint {key!r} is already in force; use op 'update' to change it", "key"
        )
    if op != "add":
        if not current:
            what = "nothing to retract" if op == "retract" else "add it first (op 'add')"
            raise _fail(ev, f"constraint {key!r} is not in force; {what}", "key")
        if since is not None and ev.ts < since:
            raise _fail(
                ev,
                f"ts is before the current version of constraint {key!r} ({since.isoformat()}); "
                "a change must be dated on or after the version it changes",
                "ts",
            )
    if op == "add":
        if overlay.constraints_in_force >= limits.constraints:
            raise _fail(
                ev,
                f"a new constraint would put {overlay.constraints_in_force + 1} in force, more "
                f"than the {limits.constraints} a user may have; retract ones that no longer apply",
                "key",
            )
        overlay.constraints_in_force += 1
    elif op == "retract":
        overlay.constraints_in_force -= 1
    overlay.constraints[key] = None if op == "retract" else ev.ts
    if op != "add":
        return ev.payload
    return {**ev.payload, "rule": overlay.rule_for(key)}


def _plan_vocabulary(overlay: _Overlay, ev: InputEvent) -> None:
    """Check a vocabulary event against the bindings and the schema as the batch so far leaves
    them: an add of a key bound by a model or a person (not one the matcher only proposed), an
    update or retract of an unbound one, or a used or held binding of a type or field the user
    lacks is an ``EventError``."""
    b = binding_of(ev.payload["binding"])
    op = ev.payload["op"]
    in_batch = overlay.bound.get(b.key)  # whether an earlier event of the batch left it bound
    held = None if in_batch is not None else overlay.state.bound(b.key)
    bound = in_batch if in_batch is not None else held is not None
    what = binding_json(b, key_only=True)
    if op == "add" and bound and (in_batch is not None or not addable(held)):
        raise _fail(ev, f"{what} is already bound; use op 'update' to change it", "binding")
    if op != "add" and not bound:
        todo = "nothing to retract" if op == "retract" else "add it first (op 'add')"
        raise _fail(ev, f"{what} is not bound; {todo}", "binding")
    if op != "retract":
        fields = overlay.field_types(b.type) if overlay.has_type(b.type) else {}
        types = (*overlay.state.schema.types, *overlay.fields)
        if (problem := schema_problem(b, types, fields)) is not None:
            raise _fail(ev, problem[0], f"binding.{problem[1]}")
    overlay.bound[b.key] = op != "retract"


def _too_long(chars: int, most: int) -> str:
    return (
        f"a string of {chars:,} characters; a value holds at most {most:,}: keep long text in "
        "an utterance and a short summary here"
    )


def _wide_int(value: int) -> str:
    # str() of an int past 4,300 digits raises ValueError, so a huge one is described instead.
    bits = value.bit_length()
    shown = _cut(str(value)) if bits <= 1_000 else f"of about {int(bits * 0.30103):,} digits"
    return f"the whole number {shown} does not fit in 64 bits; {_INT_FIX}"


def _compound_problem(
    value: list[Any] | dict[str, Any], max_chars: int, max_items: int
) -> str | None:
    """Why a list or object cannot be a field value, or None for a list within the bounds."""
    if isinstance(value, dict):
        return (
            "an object is not a field value; a value is a scalar or a list of scalars: make each "
            "of its entries a field of its own, or a record of another type"
        )
    if len(value) > max_items:
        return f"a list of {len(value):,} items; a value holds at most {max_items:,}"
    for i, item in enumerate(value):
        kind = type(item)
        if kind is list or kind is dict:
            return (
                f"item {i} is a {'list' if kind is list else 'object'}; lists hold scalars only "
                "(bool, number, string, date): flatten it or use several fields"
            )
        if kind is str and len(item) > max_chars:
            return f"item {i}: {_too_long(len(item), max_chars)}"
        if kind is int and not INT_MIN <= item <= INT_MAX:
            return f"item {i}: {_wide_int(item)}"
    return None
