"""The bulk ingest's fast paths give what the plain paths they stand in for give: the scans of a
line's text (long numbers, key ends), the batch's salts and chain links, and the concepts a rule
reads — for ordinary input and for odd input (unicode, long digit runs, spaces before a colon,
lone surrogates)."""

from __future__ import annotations

import hashlib
import re
from datetime import datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from uac_kernel.core.chain import content_hash, event_hash, event_linker, new_salts
from uac_kernel.ingest.events import _key_ends, _long_number

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
    "{\"é\": \"٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣٣\"}".encode(),  # non-ASCII digits: not \d in bytes
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
