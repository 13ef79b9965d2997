"""Adapters from conversation histories to utterance events: LoCoMo, LongMemEval, chat logs.

``read_events(path, fmt)`` turns a file into ``InputEvent``s of kind ``utterance`` (``ts``,
``speaker``, ``text``, ``source``, ``meta``), each built by ``events.parse_event`` so the event
rules live in one place. Formats (``FORMATS``):

- ``jsonl``: the Event JSONL interchange format, read by ``events.parse_jsonl``.
- ``locomo``: a LoCoMo file, a JSON list of samples, each one conversation (one user). Sessions
  are read in numeric order; turn ``i`` of a session is dated ``session_N_date_time + i*30 s``;
  a shared image adds `` [shares an image: <blip_caption>]`` to the text. Source
  ``locomo:<sample_id>:<dia_id>``.
- ``longmemeval``: a LongMemEval file, a JSON list of question records, each one user's haystack
  of sessions. Turn ``i`` is dated ``haystack_date + i*30 s``; source
  ``longmemeval:<question_id>:<session_id>:<i>``. A session id that repeats inside one record
  (it happens in LongMemEval-S) gets ``#2``, ``#3``... after the id, so no turn is dropped.
- ``chat``: OpenAI-style messages, as a JSON list of messages, a JSON object ``{"messages": [...]}``
  (or a list of those), JSONL with one message a line, or JSONL with one conversation object a
  line. Only ``user`` and ``assistant`` messages are kept; ``system``, ``developer``, ``tool``
  and ``function`` messages are skipped, as are messages whose ``content`` is null (tool calls
  only); any other role is an error. A message's time is its own ``ts`` / ``timestamp`` /
  ``created_at`` / ``created`` / ``create_time`` (ISO 8601 or unix seconds), else its
  conversation's; without either it is an error (uac never invents a time). Messages sharing a
  time are spread by +1 s each to keep their order. Source
  ``chat:<file stem>:<conversation id or index>:<message index>``.

``detect_format`` reads the extension and the first 256 KiB: a file whose first line is a JSON
object by itself (or named ``.jsonl`` / ``.ndjson``) is chat when that line is a message or a
conversation, else Event JSONL; a JSON document is told by its keys.

A file of several users (LoCoMo, LongMemEval) yields every user with ``user=None``, each event's
``meta`` naming it (``sample_id`` / ``question_id``); ``user=`` picks one, and
``read_histories`` groups a whole file by user in a single read. Every problem is one
``EventError`` naming the file, the position in it and the field.
"""

from __future__ import annotations

import codecs
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from uac_kernel.core.errors import EventError
from uac_kernel.core.limits import DEFAULT_LIMITS, Limits

if TYPE_CHECKING:
    from uac_kernel.ingest.events import InputEvent

__all__ = [
    "FORMATS",
    "detect_format",
    "locomo_questions",
    "locomo_samples",
    "longmemeval_questions",
    "read_events",
    "read_histories",
    "read_input",
]

FORMATS = ("jsonl", "locomo", "longmemeval", "chat")

TURN_STEP = timedelta(seconds=30)
"""The spacing of turns within a LoCoMo or LongMemEval session, which only dates the session."""

_JSONL_SUFFIXES = (".jsonl", ".ndjson")
CHAT_LINE_EVENTS = 16
"""A line of a chat JSONL file may take this many times ``Limits.line_bytes``: it may be a whole
conversation."""
_PEEK_BYTES = 256 * 1024
_KEY = re.compile(r'(?<!\\)"([A-Za-z_][A-Za-z0-9_]*)"\s*:')
_SESSION_KEY = re.compile(r"session_(\d+)")
_MONTHS = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip
_LOCOMO_DATE = re.compile(
    r"(\d{1,2}):(\d{2})\s*([ap])\.?\s*m\.?\s+on\s+(\d{1,2})\s+([a-z]+)\.?,?\s+(\d{4})", re.I
)
_LME_DATE = re.compile(r"(\d{4})/(\d{1,2})/(\d{1,2})\s*(?:\([A-Za-z]+\))?\s*(\d{1,2}):(\d{2})")
_CHAT_ROLES = ("user", "assistant")
_SKIPPED_ROLES = ("system", "developer", "tool", "function")
_TEXT_PARTS = ("text", "input_text", "output_text")
_TS_KEYS = ("ts", "timestamp", "created_at", "created", "create_time")

Raw = Iterator[tuple[str, dict[str, Any]]]
"""What a format reader yields: where an utterance comes from, and the event object."""


def _fail(where: str, message: str, field: str = "") -> EventError:
    """An error at ``where`` (the file, then the position in it, e.g. ``f.json: session_2``)."""
    return EventError(message, origin=where, field=field)


# -- detection and dispatch ----------------------------------------------------------------


def detect_format(path: str | Path) -> str:
    """Tell a file's format from its extension and a peek at its first bytes."""
    p = Path(path)
    head = _peek(p)
    line = _first_line_object(head)
    if line is not None or p.suffix.lower() in _JSONL_SUFFIXES:
        first_line = next((text for text in head.splitlines() if text.strip()), "")
        line_keys = set(line) if line is not None else set(_KEY.findall(first_line))
        if line_keys & {"role", "messages"} and "kind" not in line_keys:
            return "chat"
        if "kind" in line_keys or p.suffix.lower() in _JSONL_SUFFIXES:
            # A .jsonl file that is not chat is Event JSONL, whose reader names any bad line.
            return "jsonl"
    elif head.lstrip()[:1] in ("[", "{"):
        keys = set(_KEY.findall(head))
        if keys & {"haystack_sessions", "haystack_session_ids", "haystack_dates"}:
            return "longmemeval"
        if keys & {"sample_id", "speaker_a", "session_1"} or {"qa", "evidence"} <= keys:
            return "locomo"
        if keys & {"role", "messages"}:
            return "chat"
    raise _fail(
        str(p),
        "cannot tell the format from the name and first bytes; name it: one of "
        + ", ".join(FORMATS),
    )


def _peek(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            head = handle.read(_PEEK_BYTES)
    except OSError as exc:
        raise _fail(str(path), f"cannot read the file: {exc.strerror}; check the path") from exc
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) or b"\x00" in head:
        # Never text uac reads (UTF-16, binary, /dev/zero): say so rather than "unknown format".
        from uac_kernel.ingest.events import json_lines

        next(json_lines(path), None)
    return head.decode("utf-8", errors="replace").lstrip("\ufeff")


def _first_line_object(head: str) -> dict[str, Any] | None:
    """The first non-blank line of a file, when it is a whole JSON object by itself (JSONL)."""
    text = head.lstrip()
    end = text.find("\n")
    if not text.startswith("{") or (end < 0 and len(head) >= _PEEK_BYTES):
        return None
    try:
        obj = orjson.loads(text if end < 0 else text[:end])
    except orjson.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def read_events(
    path: str | Path,
    fmt: str | None = None,
    *,
    user: str | None = None,
    limits: Limits | None = None,
) -> Iterator[InputEvent]:
    """The utterances of ``path`` (format ``fmt``, detected when None), in file order.

    ``user`` picks one history of a LoCoMo file (a ``sample_id``) or a LongMemEval file (a
    ``question_id``); None yields all of them. Chat and JSONL files are one history each.
    Events are numbered from 1 in ``InputEvent.line``; their origin is the path.
    """
    p = Path(path)
    fmt = detect_format(p) if fmt is None else fmt
    if fmt not in FORMATS:
        raise _fail(str(p), f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if user is not None and fmt in ("jsonl", "chat"):
        raise _fail(
            str(p),
            f"a {fmt} file is one history, so user= does not apply; it picks a sample_id in a "
            "LoCoMo file or a question_id in a LongMemEval file",
        )
    if fmt == "jsonl":
        from uac_kernel.ingest.events import parse_jsonl

        return parse_jsonl(p, limits or DEFAULT_LIMITS)
    if fmt == "chat":
        return _parse(_chat(p, limits or DEFAULT_LIMITS), str(p), limits)
    reader = _locomo if fmt == "locomo" else _longmemeval
    return _parse(reader(p, user, limits or DEFAULT_LIMITS), str(p), limits)


def _parse(raw: Raw, origin: str, limits: Limits | None) -> Iterator[InputEvent]:
    # The events module (and with it pydantic and DuckDB) is imported when a file is read, so the
    # CLI can offer FORMATS in `uac --help` without loading the engine.
    from uac_kernel.ingest.events import parse_event

    for n, (where, obj) in enumerate(raw, 1):
        try:
            # Checked whole (Unicode, and its size as JSON against Limits.line_bytes): unlike an
            # Event JSONL line, an utterance built from a file's turn has no size bound of its own.
            yield parse_event(obj, origin, n, limits=limits or DEFAULT_LIMITS)
        except EventError as exc:
            raise _fail(where, exc.reason, exc.field) from exc


def read_histories(
    path: str | Path, fmt: str | None = None
) -> Iterator[tuple[str | None, list[InputEvent]]]:
    """Each history of a file with its utterances, reading the file once.

    The key is the ``sample_id`` (LoCoMo) or ``question_id`` (LongMemEval); a chat or JSONL file
    is one history keyed None. Each list can go to a ``Workbench`` of that user as one batch.
    """
    p = Path(path)
    fmt = detect_format(p) if fmt is None else fmt
    meta_key = {"locomo": "sample_id", "longmemeval": "question_id"}.get(fmt)
    key: str | None = None
    batch: list[InputEvent] = []
    for ev in read_events(p, fmt):
        ev_key = ev.payload["meta"][meta_key] if meta_key else None
        if batch and ev_key != key:
            yield key, batch
            batch = []
        key = ev_key
        batch.append(ev)
    if batch:
        yield key, batch


def _load_json(path: Path, limits: Limits) -> Any:
    """The JSON document ``path`` holds, read whole: refused unread above ``limits.json_bytes``
    (its size on disk; a pipe, which has none, is read at most that far)."""
    most = limits.json_bytes

    def too_big(size: int | None) -> EventError:
        has = "it holds more than" if size is None else f"the file has {size:,} bytes, more than"
        return _fail(
            str(path),
            f"{has} the {most:,} bytes a JSON document may take (Limits.json_bytes); split it, "
            "or give chat as JSONL, a message or conversation a line",
        )

    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > most:
                raise too_big(size)
            data = handle.read(most + 1)
    except OSError as exc:
        raise _fail(str(path), f"cannot read the file: {exc.strerror}; check the path") from exc
    except MemoryError:
        raise _fail(str(path), _NO_MEMORY) from None
    if len(data) > most:
        raise too_big(None)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise EventError(
            f"invalid JSON ({exc.msg} at column {exc.colno})", origin=str(path), line=exc.lineno
        ) from exc
    except MemoryError:
        raise _fail(str(path), _NO_MEMORY) from None


_NO_MEMORY = (
    "the file does not fit in memory as one JSON document; split it, or lower Limits.json_bytes "
    "to refuse such files before reading them"
)


def _json_list(path: Path, what: str, limits: Limits) -> list[Any]:
    data = _load_json(path, limits)
    if not isinstance(data, list):
        raise _fail(str(path), f"expected a JSON list of {what}, got a {type(data).__name__}")
    return data


def _text(obj: dict[str, Any], name: str, where: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str) or not value:
        raise _fail(where, "must be a non-empty string", name)
    return value


def _missing_user(path: Path, user: str, ids: list[str], what: str) -> EventError:
    shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
    return _fail(str(path), f"no {what} {user!r} in this file; it holds {shown or 'none'}")


# -- LoCoMo --------------------------------------------------------------------------------


def _locomo_iter(
    path: Path, limits: Limits = DEFAULT_LIMITS
) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(position, sample_id, sample) for each sample of a LoCoMo file."""
    seen: set[str] = set()
    for k, sample in enumerate(_json_list(path, "LoCoMo samples", limits), 1):
        where = f"{path}: conversation {k}"
        if not isinstance(sample, dict):
            raise _fail(where, "must be a JSON object with sample_id and conversation")
        sid = _text(sample, "sample_id", where)
        if sid in seen:
            raise _fail(where, f"sample_id {sid!r} appears twice in the file", "sample_id")
        seen.add(sid)
        yield f"{where} (sample_id {sid!r})", sid, sample


def locomo_samples(path: str | Path) -> list[str]:
    """The sample ids of a LoCoMo file, in file order: one per conversation (user)."""
    return [sid for _, sid, _ in _locomo_iter(Path(path))]


def locomo_questions(path: str | Path) -> list[dict[str, Any]]:
    """Every QA item of a LoCoMo file, in file order, tagged with its ``sample_id``.

    Each item: ``sample_id``, ``index`` (within the sample), ``question``, ``answer`` (a string,
    None when absent: category-5 adversarial questions have ``adversarial_answer`` instead),
    ``adversarial_answer`` (or None), ``category`` (int) and ``evidence`` (the dia_ids as given).
    """
    out: list[dict[str, Any]] = []
    for where, sid, sample in _locomo_iter(Path(path)):
        qa = sample.get("qa", [])
        if not isinstance(qa, list):
            raise _fail(where, "must be a list of question objects", "qa")
        for i, item in enumerate(qa):
            qwhere = f"{where}: qa {i + 1}"
            if not isinstance(item, dict):
                raise _fail(qwhere, "must be a JSON object with question, answer, category")
            category = item.get("category")
            if type(category) is not int:
                raise _fail(qwhere, "must be a whole number", "category")
            evidence = item.get("evidence", [])
            if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
                raise _fail(qwhere, "must be a list of dia_id strings", "evidence")
            answers = {
                name: _answer(item, name, qwhere) for name in ("answer", "adversarial_answer")
            }
            if answers["answer"] is None and answers["adversarial_answer"] is None:
                raise _fail(qwhere, "a question needs an answer or an adversarial_answer", "answer")
            out.append(
                {
                    "sample_id": sid,
                    "index": i,
                    "question": _text(item, "question", qwhere),
                    **answers,
                    "category": category,
                    "evidence": evidence,
                }
            )
    return out


def _answer(item: dict[str, Any], name: str, where: str) -> str | None:
    value = item.get(name)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)  # LoCoMo has a few bare years, like 2022
    raise _fail(where, "must be a string or a number", name)


def _locomo(path: Path, user: str | None, limits: Limits) -> Raw:
    ids: list[str] = []
    for where, sid, sample in _locomo_iter(path, limits):
        ids.append(sid)
        if user is None or sid == user:
            yield from _locomo_sample(where, sid, sample)
            if user is not None:
                return
    if user is not None:
        raise _missing_user(path, user, ids, "sample_id")


def _locomo_sample(where: str, sid: str, sample: dict[str, Any]) -> Raw:
    conv = sample.get("conversation")
    if not isinstance(conv, dict):
        raise _fail(where, "must be a JSON object of speakers and sessions", "conversation")
    sessions = sorted(int(m[1]) for key in conv if (m := _SESSION_KEY.fullmatch(key)))
    dia_ids: dict[str, str] = {}
    for n in sessions:
        swhere = f"{where}: session_{n}"
        turns = conv[f"session_{n}"]
        if not isinstance(turns, list):
            raise _fail(swhere, "must be a list of turns", f"session_{n}")
        raw_date = conv.get(f"session_{n}_date_time")
        start = _locomo_datetime(raw_date, swhere, f"session_{n}_date_time")
        for i, turn in enumerate(turns):
            twhere = f"{swhere}: turn {i + 1}"
            if not isinstance(turn, dict):
                raise _fail(twhere, "must be a JSON object with speaker, dia_id and text")
            speaker, dia_id = _text(turn, "speaker", twhere), _text(turn, "dia_id", twhere)
            text = turn.get("text")
            if not isinstance(text, str):
                raise _fail(twhere, "must be a string", "text")
            if dia_id in dia_ids:
                raise _fail(twhere, f"repeats a dia_id of {dia_ids[dia_id]}", "dia_id")
            dia_ids[dia_id] = f"session_{n} turn {i + 1}"
            meta: dict[str, Any] = {
                "sample_id": sid,
                "session": n,
                "dia_id": dia_id,
                "session_date_time": raw_date,
            }
            caption = turn.get("blip_caption")
            if caption is not None:
                if not isinstance(caption, str):
                    raise _fail(twhere, "must be a string", "blip_caption")
                text += f" [shares an image: {caption}]"
            elif "img_url" in turn:
                text += " [shares an image]"
            if "img_url" in turn:
                meta["img_url"] = turn["img_url"]
            ts = _later(
                start, i * TURN_STEP, "turns are 30 s apart", twhere, f"session_{n}_date_time"
            )
            yield twhere, _utterance(ts, speaker, text, f"locomo:{sid}:{dia_id}", meta)


def _locomo_datetime(value: Any, where: str, field: str) -> datetime:
    """'1:56 pm on 8 May, 2023' (also '10:04 am on 16 November, 2022', 'Sept', 'a.m.')."""
    m = _LOCOMO_DATE.fullmatch(value.strip()) if isinstance(value, str) else None
    if m is not None:
        hour, minute, half, day, month_name, year = m.groups()
        month = next(
            (k for k, name in enumerate(_MONTHS, 1) if _month_matches(month_name, name)), 0
        )
        h = int(hour)
        if month and 1 <= h <= 12:
            try:
                return datetime(
                    int(year),
                    month,
                    int(day),
                    h % 12 + (12 if half.lower() == "p" else 0),
                    int(minute),
                )
            except ValueError:
                pass
    raise _fail(
        where, f"cannot read {value!r} as a date and time like '1:56 pm on 8 May, 2023'", field
    )


def _month_matches(given: str, name: str) -> bool:
    given = given.lower()
    return given == name or (len(given) >= 3 and name.startswith(given))


# -- LongMemEval ---------------------------------------------------------------------------


def _lme_iter(
    path: Path, limits: Limits = DEFAULT_LIMITS
) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(position, question_id, record) for each question record of a LongMemEval file."""
    seen: set[str] = set()
    for k, rec in enumerate(_json_list(path, "LongMemEval question records", limits), 1):
        where = f"{path}: record {k}"
        if not isinstance(rec, dict):
            raise _fail(where, "must be a JSON object with question_id and haystack_sessions")
        qid = _text(rec, "question_id", where)
        if qid in seen:
            raise _fail(where, f"question_id {qid!r} appears twice in the file", "question_id")
        seen.add(qid)
        yield f"{where} (question_id {qid!r})", qid, rec


def longmemeval_questions(path: str | Path) -> list[dict[str, Any]]:
    """Every question of a LongMemEval file, in file order.

    Each item: ``question_id``, ``question_type``, ``question``, ``answer`` (a string; a few
    answers are numbers), ``question_date`` (as given), ``ts`` (it as an ISO date-time),
    ``answer_session_ids`` and ``abstention`` (the id ends in ``_abs``).
    """
    out: list[dict[str, Any]] = []
    for where, qid, rec in _lme_iter(Path(path)):
        answer = _answer(rec, "answer", where)
        if answer is None:
            raise _fail(where, "must be a string or a number", "answer")
        answer_ids = rec.get("answer_session_ids", [])
        if not isinstance(answer_ids, list) or not all(isinstance(s, str) for s in answer_ids):
            raise _fail(where, "must be a list of session id strings", "answer_session_ids")
        question_date = _text(rec, "question_date", where)
        out.append(
            {
                "question_id": qid,
                "question_type": _text(rec, "question_type", where),
                "question": _text(rec, "question", where),
                "answer": answer,
                "question_date": question_date,
                "ts": _lme_datetime(question_date, where, "question_date").isoformat(),
                "answer_session_ids": answer_ids,
                "abstention": qid.endswith("_abs"),
            }
        )
    return out


def _longmemeval(path: Path, user: str | None, limits: Limits) -> Raw:
    ids: list[str] = []
    for where, qid, rec in _lme_iter(path, limits):
        ids.append(qid)
        if user is None or qid == user:
            yield from _lme_record(where, qid, rec)
            if user is not None:
                return
    if user is not None:
        raise _missing_user(path, user, ids, "question_id")


def _lme_record(where: str, qid: str, rec: dict[str, Any]) -> Raw:
    columns = ("haystack_session_ids", "haystack_dates", "haystack_sessions")
    for name in columns:
        if not isinstance(rec.get(name), list):
            raise _fail(where, "must be a list", name)
    ids, dates, sessions = (rec[name] for name in columns)
    if not len(ids) == len(dates) == len(sessions):
        raise _fail(
            where,
            f"haystack_session_ids, haystack_dates and haystack_sessions must be equally long "
            f"(got {len(ids)}, {len(dates)}, {len(sessions)})",
            "haystack_sessions",
        )
    occurrences: dict[str, int] = {}
    for k, (sid, raw_date, turns) in enumerate(zip(ids, dates, sessions, strict=True)):
        if not isinstance(sid, str) or not sid:
            raise _fail(where, "must be a non-empty string", f"haystack_session_ids[{k}]")
        swhere = f"{where}: session {k + 1} (id {sid!r})"
        start = _lme_datetime(raw_date, swhere, f"haystack_dates[{k}]")
        if not isinstance(turns, list):
            raise _fail(swhere, "must be a list of turns", f"haystack_sessions[{k}]")
        occurrence = occurrences[sid] = occurrences.get(sid, 0) + 1
        session_key = sid if occurrence == 1 else f"{sid}#{occurrence}"
        for i, turn in enumerate(turns):
            twhere = f"{swhere}: turn {i + 1}"
            if not isinstance(turn, dict):
                raise _fail(twhere, "must be a JSON object with role and content")
            role = turn.get("role")
            if role not in _CHAT_ROLES:
                raise _fail(twhere, f"must be 'user' or 'assistant', got {role!r}", "role")
            content = turn.get("content")
            if not isinstance(content, str):
                raise _fail(twhere, "must be a string", "content")
            meta: dict[str, Any] = {"question_id": qid, "session_id": sid, "session": k, "turn": i}
            if occurrence > 1:
                meta["occurrence"] = occurrence
            if "has_answer" in turn:
                if not isinstance(turn["has_answer"], bool):
                    raise _fail(twhere, "must be true or false", "has_answer")
                meta["has_answer"] = turn["has_answer"]
            source = f"longmemeval:{qid}:{session_key}:{i}"
            ts = _later(
                start, i * TURN_STEP, "turns are 30 s apart", twhere, f"haystack_dates[{k}]"
            )
            yield twhere, _utterance(ts, role, content, source, meta)


def _lme_datetime(value: Any, where: str, field: str) -> datetime:
    """'2023/05/20 (Sat) 02:21'; an ISO 8601 date-time is accepted too."""
    if isinstance(value, str):
        m = _LME_DATE.fullmatch(value.strip())
        try:
            if m is not None:
                year, month, day, hour, minute = (int(g) for g in m.groups())
                return datetime(year, month, day, hour, minute)
            return _naive_utc(datetime.fromisoformat(value), value, where, field)
        except ValueError:
            pass
    raise _fail(where, f"cannot read {value!r} as a date like '2023/05/20 (Sat) 02:21'", field)


# -- chat ----------------------------------------------------------------------------------


def _chat(path: Path, limits: Limits) -> Raw:
    stem = path.stem
    if path.suffix.lower() in _JSONL_SUFFIXES or _first_line_object(_peek(path)) is not None:
        yield from _chat_lines(path, stem, limits)
        return
    data = _load_json(path, limits)
    if isinstance(data, dict):
        yield from _chat_conversation(str(path), stem, 0, data, set())
    elif isinstance(data, list):
        if data and isinstance(data[0], dict) and "messages" in data[0]:
            seen: set[str] = set()
            for k, conv in enumerate(data):
                yield from _chat_conversation(f"{path}: conversation {k + 1}", stem, k, conv, seen)
        else:
            messages = ((f"{path}: message {j + 1}", m) for j, m in enumerate(data))
            yield from _chat_messages(stem, "0", None, messages)
    else:
        raise _fail(str(path), 'expected a JSON list of messages or a {"messages": [...]} object')


def _chat_lines(path: Path, stem: str, limits: Limits) -> Raw:
    from uac_kernel.ingest.events import json_lines

    # A line may be a whole conversation, so it may take as much as many events.
    lines = json_lines(path, replace(limits, line_bytes=limits.line_bytes * CHAT_LINE_EVENTS))
    first = next(lines, None)
    if first is None:
        return
    if isinstance(first[1], dict) and "messages" in first[1]:
        seen: set[str] = set()
        for k, (n, conv) in enumerate(chain([first], lines)):
            yield from _chat_conversation(f"{path}:{n}", stem, k, conv, seen)
    else:
        yield from _chat_messages(stem, "0", None, _single_messages(path, chain([first], lines)))


def _single_messages(path: Path, lines: Iterable[tuple[int, Any]]) -> Iterator[tuple[str, Any]]:
    for n, obj in lines:
        if isinstance(obj, dict) and "messages" in obj:
            raise _fail(
                f"{path}:{n}",
                "a conversation object in a file of single messages; keep one shape a file",
            )
        yield f"{path}:{n}", obj


def _chat_conversation(where: str, stem: str, index: int, conv: Any, seen: set[str]) -> Raw:
    if not isinstance(conv, dict):
        raise _fail(where, 'must be a conversation object like {"messages": [...]}')
    raw_id = conv.get("id")
    if raw_id is not None and (type(raw_id) not in (str, int) or raw_id == ""):
        raise _fail(where, "must be a non-empty string or a whole number", "id")
    # Without an id, the conversation's index stands in; either must be unique in the file.
    key = str(index if raw_id is None else raw_id)
    if key in seen:
        raise _fail(where, f"conversation id {key!r} appears twice in the file", "id")
    seen.add(key)
    if raw_id is not None:
        where = f"{where} (id {key!r})"
    messages = conv.get("messages")
    if not isinstance(messages, list):
        raise _fail(where, "must be a list of message objects", "messages")
    conv_ts = _chat_ts(conv, where)
    items = ((f"{where}: message {j + 1}", m) for j, m in enumerate(messages))
    yield from _chat_messages(stem, key, conv_ts, items)


def _chat_messages(
    stem: str, conv_key: str, conv_ts: datetime | None, messages: Iterable[tuple[str, Any]]
) -> Raw:
    previous: datetime | None = None
    spread = 0
    for i, (where, msg) in enumerate(messages):
        if not isinstance(msg, dict):
            raise _fail(where, 'must be a message object like {"role": "user", "content": "..."}')
        role = msg.get("role")
        if not isinstance(role, str):
            raise _fail(where, "must be a string such as 'user' or 'assistant'", "role")
        if role in _SKIPPED_ROLES:
            continue
        if role not in _CHAT_ROLES:
            raise _fail(
                where,
                f"unknown role {role!r}; use 'user' or 'assistant' "
                f"({', '.join(_SKIPPED_ROLES)} messages are skipped)",
                "role",
            )
        text = _chat_text(msg.get("content"), where)
        if text is None:
            continue
        base = _chat_ts(msg, where) or conv_ts
        if base is None:
            raise _fail(
                where,
                "no time: give the message (or its conversation) a 'ts', ISO 8601 or unix "
                "seconds; uac does not invent times",
                "ts",
            )
        spread = spread + 1 if base == previous else 0
        previous = base
        meta: dict[str, Any] = {"conversation": conv_key, "message": i, "role": role}
        if isinstance(msg.get("name"), str):
            meta["name"] = msg["name"]
        source = f"chat:{stem}:{conv_key}:{i}"
        field = next((k for k in _TS_KEYS if msg.get(k) is not None), "ts")
        ts = _later(
            base, timedelta(seconds=spread), "messages of one second are 1 s apart", where, field
        )
        yield where, _utterance(ts, role, text, source, meta)


def _chat_text(content: Any, where: str) -> str | None:
    """A message's text: a string, or text parts joined by newlines with [image] for images."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise _fail(where, "must be a string or a list of content parts", "content")
    pieces: list[str] = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(kind, str):
            raise _fail(where, 'must be a part object like {"type": "text", ...}', f"content[{j}]")
        if kind in _TEXT_PARTS:
            if not isinstance(part.get("text"), str):
                raise _fail(where, "must be a string", f"content[{j}].text")
            pieces.append(part["text"])
        else:
            pieces.append("[image]" if "image" in kind else f"[{kind}]")
    return "\n".join(pieces)


def _chat_ts(obj: dict[str, Any], where: str) -> datetime | None:
    name = next((k for k in _TS_KEYS if obj.get(k) is not None), None)
    if name is None:
        return None
    value = obj[name]
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value, UTC).replace(tzinfo=None)
        except (OverflowError, OSError, ValueError):
            raise _fail(
                where,
                f"{value} is out of range for unix seconds (milliseconds? divide by 1000)",
                name,
            ) from None
    if isinstance(value, str):
        try:
            return _naive_utc(datetime.fromisoformat(value), value, where, name)
        except ValueError:
            pass
    raise _fail(where, f"{value!r} is neither an ISO 8601 date-time nor unix seconds", name)


# -- shared --------------------------------------------------------------------------------


def _naive_utc(ts: datetime, given: str, where: str, field: str) -> datetime:
    """``ts`` in UTC without an offset; an error naming ``field`` when UTC leaves years 1-9999."""
    if ts.tzinfo is None:
        return ts
    try:
        return ts.astimezone(UTC).replace(tzinfo=None)
    except OverflowError:
        raise _fail(
            where, f"{given!r} in UTC falls outside years 1 to 9999; give a time within them", field
        ) from None


def _later(start: datetime, step: timedelta, why: str, where: str, field: str) -> datetime:
    """``start + step``, or an error naming the field that dates it when that passes the last
    time there is (``why`` says where the step comes from)."""
    try:
        return start + step
    except OverflowError:
        raise _fail(
            where,
            f"{start.isoformat()} + {int(step.total_seconds())} s ({why}) falls after "
            "9999-12-31T23:59:59; give an earlier time",
            field,
        ) from None


def _utterance(
    ts: datetime, speaker: str, text: str, source: str, meta: dict[str, Any]
) -> dict[str, Any]:
    return {
        "kind": "utterance",
        "ts": ts.isoformat(),
        "speaker": speaker,
        "text": text,
        "source": source,
        "meta": meta,
    }


def read_input(
    events: str | Path | Iterable[dict[str, Any]],
    origin: str,
    format: str,
    history: str | None,
    limits: Limits,
) -> Iterable[InputEvent]:
    """What an ingest or a what-if is given, as input events: a file (Event JSONL streamed, or
    read as ``format``, ``auto`` to detect it; ``history`` one conversation of a LoCoMo or
    LongMemEval file) or event objects (``origin`` names them in errors)."""
    from uac_kernel.ingest.events import parse_jsonl, parse_objects

    if isinstance(events, (str, Path)):
        if format == "jsonl" and history is None:
            return parse_jsonl(events, limits)
        return read_events(
            events, None if format == "auto" else format, user=history, limits=limits
        )
    return parse_objects(events, origin, limits)
