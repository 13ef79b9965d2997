"""The bulk ingest's fast paths give what the plain paths they stand in for give: the scans of a
line's text (long numbers, key ends), the batch's salts and chain links, the names already
checked and the dates already read, and the rule helpers (a flag notes every concept it reads,
a merchant's words are kept) — for ordinary input and for odd input (unicode, long digit runs,
spaces before a colon, lone surrogates, reserved and invisible names, dates in other forms and
zones)."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uac_kernel.core.chain import content_hash, event_hash, event_linker, new_salts
from uac_kernel.core.errors import EventError
from uac_kernel.core.records import new_record, record_class
from uac_kernel.core.schema import check_field_name, check_type_name, coerce, to_json_value
from uac_kernel.ingest import events
from uac_kernel.ingest.events import _key_ends, _long_number, parse_event, parse_objects, plan_batch
from uac_kernel.rules.library._common import SETTLED, STATUS, _flag
from uac_kernel.rules.library.money import _ACCOUNT_STOP, _MERCHANT_STOP, _split_words, _words
from uac_kernel.state.fold import State
from uac_kernel.vocab.binding import Binding, Vocabulary
from uac_kernel.vocab.resolve import noting, using

# The regexes the scans replace, as they were.
LONG_NUMBER = re.compile(rb"\d{19}")
KEY_END = re.compile(rb'"\s*:')

ODD_LINES = [
    b"",
    b'{"a":1}',
    b'{"a" :1, "b"\t:\n2, "c"\r\x0b\x0c: 3}',
    b'{"a":"\\":", "b": "x\\" : y"}',
    b'{"n": 1234567890123456789}',
    b'{"n": 123456789012345678}',
    b'{"s": "phone 00000000000000000000"}',
    b'{"x": 1.0000000000000000001e0000000000000000001}',
    '{"é": "٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣"}'.encode(),  # non-ASCII digits: not \d in bytes
    b'""":::"  "  :',
    bytes(range(256)),
]


def _old_content_hash(salt: str, *texts: str) -> str:
    h = hashlib.sha256(salt.encode())
    for text in texts:
        data = text.encode("utf-8", "surrogatepass")
        h.update(f"|{len(data)}:".encode())
        h.update(data)
    return h.hexdigest()


def test_line_scans_match_the_regexes_on_odd_lines() -> None:
    for raw in ODD_LINES:
        assert _long_number(raw) == bool(LONG_NUMBER.search(raw)), raw
        assert _key_ends(raw) == len(KEY_END.findall(raw)), raw


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.sampled_from([b'"', b":", b" ", b"\t", b"\n", b"\r", b"\x0b", b"\x0c", b"0", b"9"]),
            st.binary(max_size=4),
            st.integers(min_value=0, max_value=10**40).map(lambda n: str(n).encode()),
        ),
        max_size=40,
    )
)
def test_line_scans_match_the_regexes(chunks: list[bytes]) -> None:
    raw = b"".join(chunks)
    assert _long_number(raw) == bool(LONG_NUMBER.search(raw))
    assert _key_ends(raw) == len(KEY_END.findall(raw))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30), st.lists(st.text(max_size=50), max_size=4))
def test_content_hash_is_the_streamed_hash(salt: str, texts: list[str]) -> None:
    assert content_hash(salt, *texts) == _old_content_hash(salt, *texts)


def test_content_hash_of_lone_surrogates_and_no_text() -> None:
    for texts in ([], [""], ["\ud800x", "é"], ['{"a":1}' * 1000, "sha256:ab"]):
        assert content_hash("s", *texts) == _old_content_hash("s", *texts)


def test_linker_links_as_event_hash() -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, 6789)
    link = event_linker(now)
    for prev, n, ts, kind, user in [
        ("0" * 64, 1, datetime(2020, 1, 1), "fact", "me"),
        ("ab", 2, datetime(1, 1, 1, 0, 0, 0, 1), "schema", "me"),
        ("cd", 3, datetime(9999, 12, 31), "fact", "a|b:3"),
        ("ef", 4, datetime(2020, 1, 1), "fact", "é\ud800"),
        ("gh", 5, datetime(2020, 1, 1), "fact", "me"),  # a kind and user seen before
    ]:
        assert link(prev, n, ts, kind, user, "h") == event_hash(prev, n, now, ts, kind, user, "h")


def test_salts_are_many_distinct_hex_salts() -> None:
    salts = new_salts(1000)
    assert len(salts) == len(set(salts)) == 1000
    assert all(re.fullmatch(r"[0-9a-f]{32}", s) for s in salts)
    assert new_salts(0) == []


ODD_NAMES: list[Any] = [
    "start",
    "Start",
    "",
    " ",
    "_private",
    "model_dump",
    "model dump",
    "key",
    "KEY",
    "valid_from",
    "a\u200bb",
    "tab\there",
    "é",
    "日本",
    "\ud800",
    "x" * 300,
    "State",
    "Trip",
    "trip",
    1,
    None,
    ["Trip"],
]


def _outcome(obj: dict[str, Any]) -> Any:
    """What parse_event makes of ``obj``: the event's payload, or the error's text."""
    try:
        return parse_event(obj, "f.jsonl", 3).payload
    except EventError as exc:
        return str(exc)


def _fresh_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(events, "_TYPES_OK", set())
    monkeypatch.setattr(events, "_FIELDS_OK", set())


def test_names_checked_once_answer_as_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh_names(monkeypatch)
    for name in ODD_NAMES:
        field = {"kind": "fact", "ts": "2025-01-01", "op": "add", "type": "Trip", "key": "k"}
        typed = {**field, "type": name, "fields": {"start": "2025-01-02"}}
        cases = [typed]
        if isinstance(name, str):
            cases.append({**field, "fields": {name: 1}})
        for obj in cases:
            cold = _outcome(obj)
            assert _outcome(obj) == cold  # the second time the name is known to pass, or not
        if isinstance(name, str):
            assert (check_field_name(name) is None) == (name in events._FIELDS_OK)
        if isinstance(name, str):
            assert (check_type_name(name) is None) == (name in events._TYPES_OK)
        else:
            assert not any(type(n) is not str for n in events._TYPES_OK)


def test_names_kept_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    _fresh_names(monkeypatch)
    fields = {f"f{i}": 1 for i in range(events.NAMES_KEPT + 10)}
    for i in range(0, len(fields), 50):
        chunk = dict(list(fields.items())[i : i + 50])
        parse_event(
            {
                "kind": "fact",
                "ts": "2025-01-01",
                "op": "add",
                "type": "T",
                "key": "k",
                "fields": chunk,
            },
            "f",
            1,
        )
    assert 0 < len(events._FIELDS_OK) <= events.NAMES_KEPT


DATES = ["2025-03-01", "2025-03-01", "2025-3-1", "2025-03-01", "20250301", "2025-02-30"]
DATETIMES = [
    "2025-03-01T10:00:00+02:00",
    "2025-03-01T10:00:00+02:00",
    "2025-03-01",
    "2025-03-01T08:00:00",
    "2025-03-01T10:00:00+02:00",
    "2025-03-01 10:00",
    "0001-01-01T00:30:00+01:00",
]


def _event(i: int, fields: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "fact",
        "ts": "2025-01-01",
        "op": "add",
        "type": "E",
        "key": f"k{i}",
        "fields": fields,
    }


# The first event types the fields: ``day`` a date, ``at`` a date-time.
TYPING = _event(0, {"day": "2025-01-01", "at": "2025-01-01T00:00:00"})


def _facts(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    planned = plan_batch(State("me"), parse_objects(objs), propose_bindings=False)
    return [ev.payload["fields"] for ev in planned if ev.kind == "fact"][1:]


def test_dates_read_once_are_canonical_as_coerce_makes_them() -> None:
    values = [("day", d) for d in DATES] + [("at", d) for d in DATETIMES]
    good: list[dict[str, Any]] = []
    wanted: list[dict[str, Any]] = []
    for i, (field, value) in enumerate(values, 1):
        ftype = "date" if field == "day" else "datetime"
        try:
            want = {field: to_json_value(coerce(ftype, value))}
        except ValueError as exc:
            # Refused each time it comes, the first time in the batch or again.
            for repeats in (1, 2, 3):
                with pytest.raises(EventError) as caught:
                    _facts([TYPING, *[_event(j, {field: value}) for j in range(1, repeats + 1)]])
                said = f"<events>:2: field 'fields.{field}': {exc} (field type is {ftype})"
                assert str(caught.value) == said
            continue
        assert _facts([TYPING, _event(i, {field: value})]) == [want]  # alone in its batch
        good.append(_event(i, {field: value}))
        wanted.append(want)
    # Together in one batch, where each repeat is read from what the batch read first.
    assert _facts([TYPING, *good]) == wanted


def test_flag_notes_every_concept_it_reads_even_after_a_hit() -> None:
    cls = record_class("Chore", {"finished": "bool", "state": "str", "done": "bool"})
    rec = new_record(
        cls,
        {
            "key": "c",
            "valid_from": None,
            "valid_to": None,
            "sources": (1,),
            "retracted": False,
            "finished": True,
            "state": None,
            "done": None,
        },
    )
    vocab = Vocabulary(
        [Binding("record.settled", "Chore", "finished"), Binding("record.status", "Chore", "state")]
    )
    for names, hit in (((SETTLED, STATUS), True), ((STATUS, SETTLED), True), ((STATUS,), False)):
        with using(vocab), noting() as read:
            assert _flag(rec, *names) is hit
        # Each concept named is noted, the one after the hit too.
        assert {b.target for b in read} == {str(n) for n in names}


def test_words_kept_are_the_words() -> None:
    for text in (
        "",
        "The Whole Foods Inc",
        "Trader Joe's",
        "x " * 80,
        "Café ÉCLAIR  co",
        "日本 店",
    ):
        for stop in (_ACCOUNT_STOP, _MERCHANT_STOP):
            assert _words(text, stop) == _words(text, stop) == _split_words(text, stop)
