"""Hostile input: every file or object is refused with one line naming file, line and field, and
the log stays exactly as it was. Also: stores an older uac let over-bound input into still open,
and opening costs one record class per folded batch, not one per field."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import weakref
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from helpers.events import fact

from uac_kernel import Workbench
from uac_kernel.core.errors import EventError
from uac_kernel.core.limits import INT_MAX, INT_MIN, Limits
from uac_kernel.core.records import field_values
from uac_kernel.ingest.events import parse_jsonl
from uac_kernel.log.store import NewEvent, Store

TS = "2025-02-01T09:00:00"
MiB = 1 << 20


def add(type_: str = "Trip", key: str = "k", **fields: Any) -> dict[str, Any]:
    return fact(TS, "add", type_, key, **fields)


def utter(**over: Any) -> dict[str, Any]:
    return {"kind": "utterance", "ts": TS, "speaker": "user", "text": "hi", **over}


def line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode() + b"\n"


@pytest.fixture
def wb(tmp_path: Path) -> Workbench:
    """A user with a Trip (str, int, float, date, list[str], list[int] fields) and an utterance."""
    wb = Workbench(tmp_path / "u.duckdb", user="u")
    wb.ingest(
        [
            utter(source="chat#1"),
            fact(
                "2025-01-01",
                "add",
                "Trip",
                "tokyo",
                destination="Tokyo",
                nights=9,
                price=1200.5,
                start="2025-01-10",
                tags=["work"],
                counts=[1, 2],
            ),
        ]
    )
    return wb


def log_of(wb: Workbench) -> list[tuple[int, str, str]]:
    return [(e.seq, e.kind, e.hash) for e in wb.store.events()]


def refused(
    wb: Workbench, given: Path | list[dict[str, Any]], at: int, field: str, says: str
) -> None:
    """``given`` is refused by one ``EventError`` line at ``at``, naming ``field`` and saying
    ``says``; the log and the state are as they were."""
    before, seq = log_of(wb), wb.state.seq
    with pytest.raises(EventError) as caught:
        wb.ingest(given, origin="<objects>")
    message = str(caught.value)
    origin = str(given) if isinstance(given, Path) else "<objects>"
    where = f"{origin}:{at}: " + (f"field {field!r}: " if field else "")
    assert message.startswith(where), message
    assert says in message, message
    assert "\n" not in message and len(message) < 400 + len(origin), message
    assert log_of(wb) == before and wb.state.seq == seq


# -- hostile files: (id, the file's bytes, line, field, what the error says) ------------------

GOOD = line(add(key="fine", nights=1))
LATIN1 = b'{"kind":"fact","ts":"2025-02-01","op":"add","type":"Trip","key":"caf\xe9","fields":{"nights":1}}\n'
UTF16_TEXT = GOOD.decode()

FILES = [
    ("latin1", LATIN1, 1, "", "byte 0xe9 at column 69 is not UTF-8"),
    ("latin1_on_line_3", GOOD + b"\n" + LATIN1, 3, "", "iconv -f latin1 -t utf-8"),
    ("utf16_bom", UTF16_TEXT.encode("utf-16"), 1, "", "the file is UTF-16"),
    ("utf16_be_bom", b"\xfe\xff" + UTF16_TEXT.encode("utf-16-be"), 1, "", "UTF-16"),
    ("utf16_no_bom", UTF16_TEXT.encode("utf-16-le"), 1, "", "a NUL byte at column 2"),
    ("binary", bytes(range(256)) * 4, 1, "", "a NUL byte at column 1"),
    ("png_header", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", 1, "", "not UTF-8"),
    ("gzip", b"\x1f\x8b\x08\x00\x00\x00\x00\x00", 1, "", "NUL byte"),
    ("nul_inside_a_line", GOOD[:-2] + b"\x00}\n", 1, "", "NUL byte"),
    ("line_over_1mib", b'{"kind": "' + b"a" * (MiB + 10), 1, "", "longer than 1,048,576 bytes"),
    ("long_second_line", GOOD + b" " * (2 * MiB) + b"\n", 2, "", "longer than 1,048,576"),
    ("bad_continuation", GOOD[:40] + b"\xc3\x28" + GOOD[40:], 1, "", "byte 0xc3 at column 41"),
    ("overlong_slash", GOOD[:40] + b"\xc0\xaf" + GOOD[40:], 1, "", "byte 0xc0"),
    ("utf8_surrogate", GOOD[:40] + b"\xed\xa0\x80" + GOOD[40:], 1, "", "byte 0xed"),
    ("truncated_utf8", GOOD[:-3] + b"\xe2\x82\n", 1, "", "byte 0xe2"),
    ("nan_literal", b'{"kind":"fact","ts":"2025-02-01","op":"add","type":"Trip","key":"n","fields":{"price":NaN}}\n', 1, "", "invalid JSON"),
    ("float_overflow", line(add(key="f", nights=1))[:-3] + b', "price": 1e400}}\n', 1, "", "invalid JSON"),
    ("int_2_63", line(add(key="i", nights=2**63)), 1, "fields.nights", "does not fit in 64 bits"),
    ("int_2_64", line(add(key="i", nights=2**64)), 1, "fields.nights", "does not fit in 64 bits"),
    ("int_below_min", line(add(key="i", nights=-(2**63) - 1)), 1, "fields.nights", "64 bits"),
    ("int_10_400", line(add(key="i", nights=10**400)), 1, "fields.nights", "64 bits"),
    ("wide_int_new_field", line(add(key="i", steps=2**64)), 1, "fields.steps", "64 bits"),
    ("wide_int_for_float", line(add(key="i", price=2**64)), 1, "fields.price", "64 bits"),
    ("wide_int_in_list", line(add(key="i", counts=[1, 2**63])), 1, "fields.counts", "item 1"),
    ("wide_int_in_meta", line(utter(meta={"n": [2**64]})), 1, "meta", "64 bits"),
    ("ts_before_year_1", line(fact("0001-01-01T00:00:00+01:00", "add", "Trip", "t", nights=1)), 1, "ts", "outside years 1 to 9999"),
    ("ts_after_9999", line(fact("9999-12-31T23:59:59-01:00", "add", "Trip", "t", nights=1)), 1, "ts", "outside years 1 to 9999"),
    ("ts_of_10k_chars", line(fact("2" * 10_000, "add", "Trip", "t", nights=1)), 1, "ts", "is not an ISO 8601"),
    ("empty_key", line(add(key="", nights=1)), 1, "key", "non-empty string"),
    ("key_of_201_chars", line(add(key="k" * 201, nights=1)), 1, "key", "at most 200"),
    ("field_named_fields", line(add(fields="x")), 1, "fields.fields", "is reserved"),
    ("field_named_own_fields", line(add(own_fields="x")), 1, "fields.own_fields", "is reserved"),
    ("field_named_model_config", line(add(model_config="x")), 1, "fields.model_config", "reserved"),
    ("field_named_sources", line(add(sources="x")), 1, "fields.sources", "is reserved"),
    ("empty_field_name", line(add(**{"": 1})), 1, "fields.", "field name is empty"),
    ("field_name_10k", line(add(**{"f" * 10_000: 1})), 1, "fields." + "f" * 70 + "...", "at most 64"),
    ("type_name_10k", line(add("T" * 10_000, nights=1)), 1, "type", "at most 64"),
    ("type_differs_in_case", line(add("TRIP", nights=1)), 1, "type", "only in case, which SQL does not tell apart; use 'Trip'"),
    ("type_lower_case_clash", line(add("TriP", nights=1)), 1, "type", "existing type 'Trip'"),
    ("type_is_history_table", line(add("Trip_history", n=1)), 1, "type", "history of the existing type 'Trip'"),
    ("type_is_history_any_case", line(add("TRIP_HISTORY", n=1)), 1, "type", "'Trip'"),
    ("history_then_its_type", line(add("Stay_history", n=1)) + line(add("Stay", n=1)), 2, "type", "the existing type 'Stay_history'"),
    ("type_then_history_in_batch", line(add("Visit", n=1)) + line(add("Visit_history", n=1)), 2, "type", "'Visit'"),
    ("type_is_index_table", line(add("Uac_tables", n=1)), 1, "type", "uac_tables"),
    ("list_too_long", line(add(tags=["t"] * 1_001)), 1, "fields.tags", "1,001 items"),
    ("nested_list", line(add(tags=[["a"]])), 1, "fields.tags", "item 0 is a list"),
    ("list_of_objects", line(add(notes=[{"a": 1}])), 1, "fields.notes", "lists hold scalars only"),
    ("object_value", line(add(place={"city": "Kyoto"})), 1, "fields.place", "an object is not a field value"),
    ("object_for_str_field", line(add(destination={"a": 1})), 1, "fields.destination", "an object"),
    ("fields_5000", line(add("Wide", **{f"f{i}": i for i in range(5000)})), 1, "fields", "5,000 fields in one event"),
    ("new_fields_101", line(add("Wide", **{f"f{i}": i for i in range(101)})), 1, "fields.f100", "more than 100 new fields"),
    ("fields_301_over_events", b"".join(line(add("Wide", f"w{j}", **{f"f{j}_{i}": i for i in range(100)})) for j in range(3)) + line(add("Wide", "w3", one_more=1)), 4, "fields.one_more", "301 fields"),
    ("derived_from_not_strings", line({**add(nights=1), "derived_from": [1, 2]}), 1, "derived_from", "non-empty string"),
    ("derived_from_too_long", line({**add(nights=1), "derived_from": ["s"] * 1_001}), 1, "derived_from", "at most 1,000"),
    ("meta_9_levels", line(utter(meta={"a": [[[[[[[[1]]]]]]]]})), 1, "meta", "more than 8 levels"),
    ("unknown_kind_10k", line({"kind": "k" * 10_000, "ts": TS}), 1, "kind", "unknown kind 'kkkk"),
    ("op_is_a_list", line({**add(nights=1), "op": ["add"]}), 1, "op", "unknown op"),
    ("type_is_a_number", line({**add(nights=1), "type": 5}), 1, "type", "type name must be a string"),
    ("duplicate_field", line(add(nights=1)) + line(add(key="t2", nights=1)).replace(b'"nights": 1', b'"nights": 1, "nights": 9'), 2, "", "the key 'nights' appears twice"),
    ("duplicate_top_key", line(add(nights=1)).replace(b'"op": "add"', b'"op": "add", "op": "retract"'), 1, "", "the key 'op' appears twice"),
    ("quote_colon_in_a_string_is_no_key", line(utter(text='she wrote "a": b')) + line(add(key="t3", **{"": 1})), 2, "fields.", "field name is empty"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("content", "at", "field", "says"), [c[1:] for c in FILES], ids=[c[0] for c in FILES]
)
def test_hostile_file_is_refused_in_one_line(
    wb: Workbench, tmp_path: Path, content: bytes, at: int, field: str, says: str
) -> None:
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(content)
    refused(wb, path, at, field, says)


def test_dev_zero_fails_at_line_1_without_reading_it_all(wb: Workbench) -> None:
    refused(wb, Path("/dev/zero"), 1, "", "a NUL byte at column 1")


def test_a_64_mib_line_is_refused_at_its_line(wb: Workbench, tmp_path: Path) -> None:
    """A 64 MiB line is refused at its line, as a 1 MiB + 1 byte one is."""
    path = tmp_path / "huge.jsonl"
    with path.open("wb") as f:
        f.write(b'{"kind": "utterance", "text": "')
        for _ in range(64):
            f.write(b"a" * MiB)
    refused(wb, path, 1, "", "longer than 1,048,576 bytes")


# -- hostile objects (the notebook and Python path) -------------------------------------------

DEEP: list[Any] = []
for _ in range(100_000):  # a list nested 100,000 deep: refused without a RecursionError
    DEEP = [DEEP]

OBJECTS = [
    ("nan_new_field", [add(ratio=float("nan"))], 1, "fields.ratio", "finite number"),
    ("inf_float_field", [add(price=float("inf"))], 1, "fields.price", "finite number"),
    ("minus_inf_float_field", [add(price=float("-inf"))], 1, "fields.price", "finite"),
    ("int_2_63", [add(nights=2**63)], 1, "fields.nights", "does not fit in 64 bits"),
    ("int_2_64_second", [add("Trip", "ok", nights=1), add(nights=2**64)], 2, "fields.nights", "64 bits"),
    ("int_min_minus_1", [add(nights=INT_MIN - 1)], 1, "fields.nights", "64 bits"),
    ("int_of_5000_digits", [add(nights=10**5000)], 1, "fields.nights", "of about 5,000 digits"),
    ("key_of_1mb", [add(key="k" * MiB, nights=1)], 1, "key", "1,048,576 characters; at most 200"),
    ("field_name_of_1mb", [add(**{"f" * MiB: 1})], 1, "fields." + "f" * 70 + "...", "at most 64"),
    ("unknown_top_key_1mb", [{**add(nights=1), "x" * MiB: 1}], 1, "x" * 77 + "...", "unknown field"),
    ("key_not_a_string", [{**add(nights=1), "key": 7}], 1, "key", "non-empty string"),
    ("lone_surrogate", [add(destination="\ud800")], 1, "", "unpaired surrogate"),
    ("deep_nesting", [add(tags=DEEP)], 1, "fields.tags", "item 0 is a list"),
    ("deep_nesting_new_field", [{**add(deep=DEEP), "source": "s"}], 1, "fields.deep", "item 0"),
    ("deep_meta", [utter(meta={"m": DEEP})], 1, "meta", "more than 8 levels deep"),
    ("meta_deep", [utter(meta={"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": 1}}}}}}}}})], 1, "meta", "8 levels"),
    ("meta_wide_int", [utter(meta={"n": 2**64})], 1, "meta", "64 bits"),
    ("event_over_1mib", [utter(meta={"blob": "x" * (2 * MiB)})], 1, "", "more than the 1,048,576"),
    ("meta_not_object", [utter(meta=[1])], 1, "meta", "must be a JSON object"),
    ("type_clash_case", [add("TRip", nights=1)], 1, "type", "only in case"),
    ("fields_not_object", [{**add(), "fields": [1]}], 1, "fields", "non-empty JSON object"),
    ("new_field_as_null", [add(later=None)], 1, "fields.later", "cannot infer a type"),
    ("bool_for_int", [add(nights=True)], 1, "fields.nights", "expected a whole number"),
    ("string_value_too_long", [add(destination="x" * 1_000_001)], 1, "fields.destination", "1,000,001 characters"),
    ("list_item_too_long", [add(tags=["t", "x" * 1_000_001])], 1, "fields.tags", "item 1"),
    ("reason_too_long", [fact(TS, "retract", "Trip", "tokyo", reason="r" * 1_000_001)], 1, "reason", "1,000,001 characters"),
    ("utterance_text_too_long", [utter(text="x" * 1_000_001)], 1, "text", "split it into several utterances"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("objects", "at", "field", "says"), [c[1:] for c in OBJECTS], ids=[c[0] for c in OBJECTS]
)
def test_hostile_objects_are_refused_in_one_line(
    wb: Workbench, objects: list[dict[str, Any]], at: int, field: str, says: str
) -> None:
    refused(wb, objects, at, field, says)


def test_too_many_types_is_refused_at_the_first_one_over(wb: Workbench) -> None:
    """The fixture has one type; the 300th new one in a batch makes 301."""
    batch = [add(f"T{i}", nights=1) for i in range(300)]
    refused(wb, batch, 300, "type", "301 record types, more than the 300")


def test_limits_are_configurable(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="u", limits=Limits(types=1, value_chars=3))
    wb.ingest([add("Trip", "a", name="abc")])
    refused(wb, [add("Trip", "b", name="abcd")], 1, "fields.name", "at most 3")
    refused(wb, [add("Meal", "m", n=1)], 1, "type", "more than the 1 a user may have")


# -- what is accepted --------------------------------------------------------------------------


def test_int64_bounds_are_accepted_and_sql_reads_them(wb: Workbench, tmp_path: Path) -> None:
    path = tmp_path / "bounds.jsonl"
    path.write_bytes(line(add(key="lo", nights=INT_MIN)) + line(add(key="hi", nights=INT_MAX)))
    wb.ingest(path)
    assert wb.sql("SELECT key, nights FROM Trip WHERE key <> 'tokyo' ORDER BY key").rows == [
        ("hi", INT_MAX),
        ("lo", INT_MIN),
    ]


def test_utf8_bom_and_long_digit_strings_are_read(tmp_path: Path) -> None:
    """A UTF-8 byte order mark is skipped; 20 digits in a string stay a string, exactly."""
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + line(add(ref="12345678901234567890123", n=2**62)))
    (ev,) = parse_jsonl(path)
    assert ev.payload["fields"] == {"ref": "12345678901234567890123", "n": 2**62}


CONTROLS = [
    "a\u0000b",
    "\u001b[2J\u001b[31mpwned",
    "a\nb\r\n",
    "a\u009bb",
    "del\u007f",
    "\u202eevil",
]


@pytest.mark.parametrize(
    "text", CONTROLS, ids=["nul", "terminal_escape", "newlines", "c1_csi", "del", "bidi"]
)
def test_control_characters_are_data_in_keys_sources_speakers_and_values(
    wb: Workbench, tmp_path: Path, text: str
) -> None:
    """Keys, sources, speakers, authors and values may hold any character but a lone surrogate:
    they are data, stored exactly and escaped wherever shown (codegen and display escape them)."""
    path = tmp_path / "controls.jsonl"
    path.write_bytes(
        line({**add(key=text, destination=text, tags=[text]), "source": text, "author": text})
        + line(utter(speaker=text, text=text, source=text + "#2"))
    )
    wb.ingest(path)
    rec = wb.state.get("Trip", text)
    assert (rec.destination, rec.tags) == (text, [text])
    assert {e.source for e in wb.store.events(kinds=["fact", "utterance"])} >= {text, text + "#2"}


# -- the command line ------------------------------------------------------------------------


CLI_CASES = [
    ("latin1", LATIN1, "byte 0xe9 at column 69 is not UTF-8"),
    ("utf16", UTF16_TEXT.encode("utf-16"), "the file is UTF-16"),
    ("int_2_64", line(add(key="i", nights=2**64)), "does not fit in 64 bits"),
    ("ts_overflow", line(fact("0001-01-01T00:00:00+01:00", "add", "Trip", "t", nights=1)), "outside years 1 to 9999"),
    ("type_case_clash", line(add("TRIP", nights=1)), "differs from the existing type 'Trip' only in case"),
    ("fields_5000", line(add("Wide", **{f"f{i}": i for i in range(5000)})), "5,000 fields in one event"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("content", "says"), [c[1:] for c in CLI_CASES], ids=[c[0] for c in CLI_CASES]
)
def test_uac_ingest_fails_in_one_line_and_leaves_the_file_alone(
    tmp_path: Path, content: bytes, says: str
) -> None:
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="u") as first:
        first.ingest([add(nights=1)])
    before = db.read_bytes()
    path = tmp_path / "hostile.jsonl"
    path.write_bytes(content)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "uac_kernel.cli.main",
            "--db",
            str(db),
            "--user",
            "u",
            "ingest",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(f"uac: error: {path}:1: ") and done.stderr.count("\n") == 1
    assert says in done.stderr and "Traceback" not in done.stderr
    assert db.read_bytes() == before


def test_uac_ingest_of_dev_zero(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "uac_kernel.cli.main",
            "--db",
            str(tmp_path / "u.duckdb"),
            "ingest",
            "/dev/zero",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr == (
        "uac: error: /dev/zero:1: a NUL byte at column 1: this is not a UTF-8 text file (UTF-16? "
        "binary?); Event JSONL is UTF-8 text: convert it, e.g. iconv -f utf-16 -t utf-8\n"
    )


# -- stores an older uac let over-bound input into ---------------------------------------------


def old_store(path: Path, fields: int, names: list[str] | None = None) -> None:
    """One add bringing ``fields`` new fields, appended past today's checks (as before them)."""
    names = names or [f"f{i}" for i in range(fields)]
    ts = datetime.fromisoformat(TS)
    events = [NewEvent(ts, "schema", "u", {"type": "Wide"})]
    events += [
        NewEvent(ts, "schema", "u", {"type": "Wide", "field": f, "ftype": "int"}) for f in names
    ]
    fields_of = {f: i for i, f in enumerate(names)}
    events.append(
        NewEvent(
            ts, "fact", "u", {"op": "add", "type": "Wide", "key": "w", "fields": fields_of}, "old"
        )
    )
    store = Store(str(path))
    store.append(events)
    store.close()


def test_a_store_with_5000_fields_in_one_add_opens_verifies_and_checkpoints(tmp_path: Path) -> None:
    db = tmp_path / "old.duckdb"
    old_store(db, 5000)
    done = subprocess.run(
        [sys.executable, "-m", "uac_kernel.cli.main", "--db", str(db), "verify"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        done.returncode == 0
        and "5002 events, 0 model calls, 0 checkpoints of 1 user(s) verified, hash chains intact"
        in done.stdout
    ), done.stderr
    with Workbench(db, user="u") as wb:
        ts = wb.state.types["Wide"]
        # One class when the type came, one when the fold settled its 5,000 new fields.
        assert ts.builds == 2
        assert wb.state.get("Wide", "w").f4999 == 4999
        assert wb.eval("user.all(Wide)[0].f1234") == 1234
        assert wb.checkpoint().version == 1


def test_a_batch_of_new_fields_builds_one_class_and_frees_the_old(wb: Workbench) -> None:
    old = weakref.ref(wb.state.record_class("Trip"))
    builds = wb.state.types["Trip"].builds
    wb.ingest([add(key=f"k{i}", **{f"extra_{i}_{j}": j for j in range(20)}) for i in range(10)])
    assert wb.state.types["Trip"].builds == builds + 1
    cls = wb.state.record_class("Trip")
    assert all(type(r) is cls for r in wb.state.history("Trip"))
    gc.collect()
    assert old() is None


@pytest.mark.filterwarnings("ignore:Field name .* shadows an attribute:UserWarning")
def test_an_old_store_with_a_field_named_fields_checkpoints_and_diffs(tmp_path: Path) -> None:
    """An older uac let a field named `fields` in; the record still renders, diffs and reads."""
    db = tmp_path / "old.duckdb"
    old_store(db, 2, names=["fields", "own_fields"])
    with Workbench(db, user="u") as wb:
        first = wb.checkpoint()
        wb.ingest([fact(TS, "update", "Wide", "w", f=1)])
        second = wb.checkpoint()
        assert "1 changed" in wb.diff(first.version, second.version).summary()
        # On such a record the field hides the method; field_values reads them all.
        assert field_values(wb.state.get("Wide", "w")) == {"fields": 0, "own_fields": 1, "f": 1}


def test_a_line_of_exactly_the_limit_is_read(tmp_path: Path) -> None:
    """The limit counts the line without its line break: 1 MiB of JSON then a newline is read."""
    head = b'{"kind": "utterance", "ts": "2025-02-01", "speaker": "u", "text": "'
    body = head + b"a" * (MiB - len(head) - 2) + b'"}'
    assert len(body) == MiB
    path = tmp_path / "edge.jsonl"
    path.write_bytes(body + b"\n" + body + b"a\n")
    events = parse_jsonl(path, Limits(text_chars=MiB))
    assert len(next(events).payload["text"]) == MiB - len(head) - 2
    with pytest.raises(EventError, match=r"edge.jsonl:2: the line is longer than 1,048,576 bytes"):
        next(events)
