"""Checkpoint code: readable, byte-identical for the same log, and read back by literals only."""

from __future__ import annotations

import ast
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest
from helpers.events import fact
from helpers.store import append
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from uac_kernel.checkpoints.codegen import parse_module, render_module
from uac_kernel.core.errors import CodeError, EventError
from uac_kernel.ingest.events import parse_objects, plan_batch
from uac_kernel.log.store import Store
from uac_kernel.state.fold import State, fold

HOSTILE = [
    'It\'s "quoted"',
    "back\\slash \\n not a newline",
    "line one\nline two\r\n\ttab",
    "Zürich 東京 🚀 \u2028 \x00 \x1b[31m",
    "'); import os; os.system('rm -rf /') #",
    "\"\"\"triple\"\"\" '''quotes'''",
    "__import__('os').system('echo pwned')",
    "{0.__class__}",
]


def same_state(a: State, b: State) -> None:
    assert a.schema.types == b.schema.types
    for name in a.types:
        assert [r.model_dump() for r in a.all(name)] == [r.model_dump() for r in b.all(name)]
        assert [r.model_dump() for r in a.types[name].history] == [
            r.model_dump() for r in b.types[name].history
        ]
    assert a.seq == b.seq and a.now == b.now and a.user == b.user


def test_hostile_strings_are_literals_and_round_trip(db: Path) -> None:
    store, state = Store(db), State('o\'neil\n"x"')
    append(
        store,
        state,
        [
            fact("2025-01-01", "add", "Note", f"k{i}'\"\\", text=s, tags=[s, s[::-1]])
            for i, s in enumerate(HOSTILE)
        ],
    )
    append(store, state, [fact("2025-01-02", "update", "Note", "k0'\"\\", text=HOSTILE[4])])
    code = render_module(state)
    tree = ast.parse(code)  # valid Python
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    called = {n.func.id for n in calls if isinstance(n.func, ast.Name)}
    assert called <= {"Note", "date", "datetime"}  # no data became a call
    assert not any(isinstance(n, ast.Attribute) for n in ast.walk(tree))
    same_state(parse_module(code), state)


def test_a_state_read_back_from_code_folds_on_like_the_original(db: Path) -> None:
    store, state = Store(db), State("maya")
    append(store, state, [fact("2025-01-01", "add", "Trip", "a", city="Oslo", start="2025-02-01")])
    parsed = parse_module(render_module(state))
    more = [
        fact("2025-01-02", "add", "Trip", "b", start="2025-03-01", nights=3),
        fact("2025-01-03", "update", "Trip", "a", start="2025-02-02"),
    ]
    logged = store.append(plan_batch(state, parse_objects(more)))  # a new field among them
    state.apply_all(logged)
    parsed.apply_all(logged)
    same_state(parsed, state)
    assert parsed.get("Trip", "b").start == date(2025, 3, 1)  # read as a date, not a string


def test_same_log_gives_byte_identical_code(tmp_path: Path) -> None:
    events = [
        fact(f"2025-01-{d:02d}", "add", "Meal", f"m{d}", kcal=400 + d, dish=f"dish {d}")
        for d in range(1, 29)
    ]
    codes = []
    for name in ("a", "b"):
        store, state = Store(tmp_path / f"{name}.duckdb"), State("u")
        append(store, state, events[:10])
        append(store, state, events[10:])
        codes.append(render_module(state))
    assert codes[0] == codes[1]
    store = Store(tmp_path / "a.duckdb")
    assert render_module(fold("u", store.events("u"))) == codes[0]


def test_code_reads_like_hand_written_python(db: Path) -> None:
    store, state = Store(db), State("maya")
    append(
        store,
        state,
        [
            fact(
                "2025-03-02T10:15:00",
                "add",
                "Trip",
                "tokyo-2025",
                destination="Tokyo",
                start="2025-02-20",
                international=True,
            )
        ],
    )
    code = render_module(state)
    assert "class Trip(Record):\n    destination: str | None\n    start: date | None\n" in code
    # Longer than a line: one argument per line, as a person (or ruff format) would write it.
    assert (
        "records[Trip] = [\n    Trip(\n        key='tokyo-2025',\n        destination='Tokyo',\n"
        "        start=date(2025, 2, 20),\n        international=True,\n" in code
    )
    assert "user_id = 'maya'" in code


@pytest.mark.parametrize(
    "bad",
    [
        "records[Trip] = [Trip(key='a', destination=__import__('os').getcwd())]",
        "records[Trip] = [Trip(key='a', destination='x'.upper())]",
        "records[Trip] = [Trip(key='a', destination=open('/etc/passwd'))]",
        "records[Trip] = [Trip(key='a', start=date(2025, 2, 30))]",
        "records[Trip] = [Trip(key='a', **{'destination': 'x'})]",
        "records[Trip] = [Trip(key='a', destination=f'{1+1}')]",
        "records[Trip] = [print('hi')]",
    ],
)
def test_reading_back_refuses_anything_but_literals(bad: str) -> None:
    header = "class Trip(Record):\n    destination: str | None\n    start: date | None\n"
    with pytest.raises(CodeError, match="line"):
        parse_module(header + bad)


texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
values = st.one_of(
    texts,
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.dates().map(date.isoformat),
    st.datetimes(min_value=datetime(1900, 1, 1)).map(lambda d: d.isoformat()),
    st.lists(texts, min_size=1, max_size=4),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            texts.filter(bool),
            st.dictionaries(
                # names in any style too (names.py): written as identifiers, read back as written
                st.one_of(
                    st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True), st.text(max_size=8)
                ),
                values,
                min_size=1,
                max_size=4,
            ),
        ),
        min_size=1,
        max_size=8,
    )
)
def test_any_strings_and_values_survive_codegen_and_parse(
    records: list[tuple[str, dict[str, Any]]],
) -> None:
    store, state = Store(":memory:"), State("u")
    seen: set[str] = set()
    for key, fields in records:
        fields = {
            f: v
            for f, v in fields.items()
            if f not in {"key", "sources", "retracted"} and not f.startswith("model_")
        }
        if key in seen or not fields:
            continue
        seen.add(key)
        try:
            thing = {"kind": "fact", "ts": "2025-01-01", "op": "add", "type": "Thing", "key": key}
            append(store, state, [{**thing, "fields": fields}])
        except EventError as exc:  # a later value of another type for an existing field,
            # or a name that cannot be stored or is another's twin in case or style
            assert any(
                w in str(exc) for w in ("expected", "reserved", "character", "empty", "style")
            )
    code = render_module(state)
    same_state(parse_module(code), state)
