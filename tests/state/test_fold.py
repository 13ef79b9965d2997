"""Event JSONL validation and fold semantics, on a real DuckDB file."""

from __future__ import annotations

import json
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers.events import fact
from helpers.store import append
from hypothesis import given, settings
from hypothesis import strategies as st

from uac_kernel.core.errors import EventError, FoldError, QueryError
from uac_kernel.ingest.events import parse_jsonl, parse_objects, plan_batch
from uac_kernel.log.store import NewEvent, Store
from uac_kernel.state.fold import State, fold, order_value
from uac_kernel.state.query import UserView


def test_add_update_retract_keep_history(db: Path) -> None:
    store, st = Store(db), State("u")
    append(
        store,
        st,
        [
            fact(
                "2025-03-02T10:15:00",
                "add",
                "Trip",
                "tokyo",
                destination="Tokyo",
                start="2025-02-20",
                international=True,
            ),
            fact("2025-04-01T09:00:00", "update", "Trip", "tokyo", end="2025-03-01"),
        ],
    )
    (trip,) = st.all("Trip")
    assert (
        trip.destination == "Tokyo"
        and trip.end == date(2025, 3, 1)
        and trip.start == date(2025, 2, 20)
    )
    assert trip.valid_from == datetime(2025, 4, 1, 9) and trip.valid_to is None
    first, second = st.versions("Trip", "tokyo")
    assert first.valid_to == datetime(2025, 4, 1, 9) and first.end is None
    assert second.sources == (first.sources[0], second.sources[-1]) and len(second.sources) == 2
    append(
        store,
        st,
        [fact("2025-05-01T09:00:00", "retract", "Trip", "tokyo", reason="never happened")],
    )
    assert st.all("Trip") == []
    history = st.history("Trip")
    assert (
        len(history) == 2
        and history[-1].retracted
        and history[-1].valid_to == datetime(2025, 5, 1, 9)
    )


def test_schema_grows_and_is_logged(db: Path) -> None:
    store, st = Store(db), State("u")
    append(
        store,
        st,
        [
            fact(
                "2025-01-01",
                "add",
                "Book",
                "b1",
                title="Dune",
                pages=412,
                rating=4.5,
                finished="2025-01-05T21:00:00",
                tags=["sf"],
                owned=True,
            )
        ],
    )
    assert st.schema.types["Book"] == {
        "title": "str",
        "pages": "int",
        "rating": "float",
        "finished": "datetime",
        "tags": "list[str]",
        "owned": "bool",
    }
    # then the matcher's proposals for the types the batch changed
    kinds = [e.kind for e in store.events("u") if e.kind != "vocabulary"]
    assert kinds == ["schema"] * 7 + ["fact"]
    append(store, st, [fact("2025-02-01", "update", "Book", "b1", lent_to="Ann")])
    assert st.get("Book", "b1").lent_to == "Ann"  # type: ignore[union-attr]


def test_fold_is_deterministic_and_as_of_is_a_prefix(db: Path) -> None:
    store, st = Store(db), State("u")
    append(
        store,
        st,
        [fact(f"2025-01-{d:02d}", "add", "Meal", f"m{d}", kcal=500 + d) for d in range(1, 11)],
    )
    again = fold("u", store.events("u"))
    assert [r.model_dump() for r in again.all("Meal")] == [r.model_dump() for r in st.all("Meal")]
    past = fold("u", store.events("u", until_ts=datetime(2025, 1, 5)))
    assert [r.key for r in past.all("Meal")] == ["m1", "m2", "m3", "m4", "m5"]


BAD = [
    ("not json", "invalid JSON", None),
    (json.dumps({"kind": "gossip", "ts": "2025-01-01"}), "unknown kind", "kind"),
    (json.dumps(fact("2025-01-01", "upsert", "Trip", "t")), "unknown op", "op"),
    (
        json.dumps(fact("2025-01-01", "update", "Trip", "nope", a=1)),
        "Trip 'nope' does not exist; add it first",
        "key",
    ),
    (json.dumps(fact("2025-01-01", "add", "Tr\nip", "t", a=1)), "line-break", "type"),
    (
        json.dumps(fact("2025-01-01", "add", "Trip", "t", **{"__class__": 1})),
        "reserved",
        "fields.__class__",
    ),
    (
        json.dumps(fact("2025-01-01", "add", "Trip", "t", key2=1, sources=[1])),
        "reserved",
        "fields.sources",
    ),
    (json.dumps(fact("2025-01-01", "add", "Trip", "t2", start="yesterday")), "", None),
    (json.dumps({"kind": "fact", "op": "add", "type": "Trip", "key": "t"}), "ts is required", "ts"),
    (
        json.dumps(fact("2025-01-01", "add", "Trip", "t3", nothing=None)),
        "cannot infer",
        "fields.nothing",
    ),
    (json.dumps(fact("2025-01-01", "add", "Trip", "t4", price=float("nan"))), "invalid JSON", None),
]


@pytest.mark.parametrize(("line", "message", "field"), BAD)
def test_bad_input_names_file_line_field_and_appends_nothing(
    tmp_path: Path, line: str, message: str, field: str | None
) -> None:
    good = json.dumps(fact("2025-01-01", "add", "Trip", "t", start="2025-01-02", cost=10))
    path = tmp_path / "events.jsonl"
    path.write_text(good + "\n\n" + line + "\n")
    store, st = Store(tmp_path / "u.duckdb"), State("u")
    try:
        planned = plan_batch(st, list(parse_jsonl(path)))
    except EventError as exc:
        assert str(exc).startswith(f"{path}:3"), str(exc)
        assert message in str(exc)
        if field:
            assert f"field '{field}'" in str(exc)
    else:
        store.append(planned)  # the one bad line that is valid: a str field can hold 'yesterday'
        assert message == ""
        return
    assert list(store.events()) == []


RETRACTED = "Trip 't' was retracted at 2025-05-01 09:00"


@pytest.mark.parametrize(
    ("later", "message"),
    [
        ([fact("2025-06-01", "retract", "Trip", "t")], f"{RETRACTED}; nothing to retract"),
        (
            [fact("2025-06-01", "update", "Trip", "t", nights=2)],
            f"{RETRACTED}; add it again (op 'add') to bring it back",
        ),
        (
            [fact("2025-06-01", "retract", "Trip", "u")],
            "Trip 'u' does not exist; nothing to retract",
        ),
        (
            [fact("2025-06-01", "update", "Trip", "u", nights=2)],
            "Trip 'u' does not exist; add it first (op 'add')",
        ),
    ],
)
def test_a_change_to_a_record_that_is_not_current_says_why_and_what_to_do(
    db: Path, later: list[dict[str, Any]], message: str
) -> None:
    store, st = Store(db), State("u")
    added = fact("2025-01-01", "add", "Trip", "t", nights=3)
    retracted = fact("2025-05-01T09:00", "retract", "Trip", "t")
    # retracted in the log before, or earlier in the same file: the same message
    append(store, st, [added, retracted])
    with pytest.raises(EventError) as logged:
        plan_batch(st, parse_objects(later))
    assert str(logged.value) == f"<events>:1: field 'key': {message}"
    with pytest.raises(EventError) as in_batch:
        plan_batch(State("u"), parse_objects([added, retracted, *later]))
    assert str(in_batch.value) == f"<events>:3: field 'key': {message}"
    # a retracted record comes back by adding it again
    append(store, st, [fact("2025-06-01", "add", "Trip", "t", nights=4)])
    assert st.get("Trip", "t").nights == 4  # type: ignore[union-attr]


def test_value_contradicting_a_field_type_is_rejected_with_the_line(db: Path) -> None:
    store, st = Store(db), State("u")
    append(store, st, [fact("2025-01-01", "add", "Trip", "t", start="2025-01-02", nights=3)])
    with pytest.raises(
        EventError, match=r"<events>:2: field 'fields.nights': expected a whole number"
    ):
        plan_batch(
            st,
            parse_objects(
                [
                    fact("2025-01-02", "add", "Trip", "u", nights=1),
                    fact("2025-01-02", "add", "Trip", "v", nights=2.5),
                ]
            ),
        )
    with pytest.raises(EventError, match=r"field 'fields.start': expected an ISO date"):
        plan_batch(st, parse_objects([fact("2025-01-02", "update", "Trip", "t", start="soon")]))


def test_update_dated_before_the_current_version_is_rejected(db: Path) -> None:
    store, st = Store(db), State("u")
    append(store, st, [fact("2025-02-01", "add", "Trip", "t", nights=3)])
    with pytest.raises(EventError, match="before the current version"):
        plan_batch(st, parse_objects([fact("2025-01-01", "update", "Trip", "t", nights=4)]))


def test_batch_sees_its_own_earlier_events(db: Path) -> None:
    store, st = Store(db), State("u")
    append(
        store,
        st,
        [
            fact("2025-01-01", "add", "Trip", "t", nights=3),
            fact("2025-01-02", "update", "Trip", "t", nights=4),
            fact("2025-01-03", "retract", "Trip", "t"),
            fact("2025-01-04", "add", "Trip", "t", nights=5),
        ],
    )
    assert [r.nights for r in st.all("Trip")] == [5]  # type: ignore[attr-defined]
    with pytest.raises(EventError, match=r"<events>:3: field 'key'.*already exists"):
        plan_batch(
            st,
            parse_objects(
                [
                    fact("2025-02-01", "retract", "Trip", "t"),
                    fact("2025-02-01", "add", "Trip", "t", nights=1),
                    fact("2025-02-01", "add", "Trip", "t", nights=1),
                ]
            ),
        )


def test_unpaired_surrogate_is_rejected(db: Path) -> None:
    with pytest.raises(EventError, match="surrogate"):
        list(
            parse_objects(
                [{"kind": "utterance", "ts": "2025-01-01", "speaker": "u", "text": "\ud800"}]
            )
        )


def test_timezones_are_normalised_to_utc(db: Path) -> None:
    (ev,) = parse_objects(
        [{"kind": "utterance", "ts": "2025-01-01T10:00:00+02:00", "speaker": "u", "text": "hi"}]
    )
    assert ev.ts == datetime(2025, 1, 1, 8)


def _brute_where(state: State, field: str, lo: Any, hi: Any) -> list[tuple[Any, str]]:
    """What ``State.where`` must return, by scanning every current record."""
    found = []
    for rec in state.all("Task"):
        v = order_value(getattr(rec, field))
        if v is not None and (lo is None or v >= lo) and (hi is None or v < hi):
            found.append((v, rec.key))
    return sorted(found)


_task_ops = st.lists(
    st.tuples(
        st.sampled_from(["add", "update", "retract"]),
        st.integers(0, 6),  # which key
        st.one_of(st.none(), st.dates(date(2024, 1, 1), date(2024, 12, 31))),
        st.one_of(st.none(), st.floats(-5, 5, allow_nan=False)),
        st.booleans(),  # build the indexes before this event
    ),
    max_size=30,
)


@settings(max_examples=40, deadline=None)
@given(ops=_task_ops, lo=st.dates(date(2024, 1, 1), date(2024, 12, 31)), width=st.integers(0, 200))
def test_field_index_follows_adds_updates_and_retracts(
    ops: list[tuple[str, int, date | None, float | None, bool]], lo: date, width: int
) -> None:
    store, state = Store(":memory:"), State("u")
    append(
        store,
        state,
        [fact("2024-01-01T00:00:00", "add", "Task", "seed", due="2024-06-01", cost=1.5)],
    )
    live = {"seed"}
    clock = datetime(2024, 1, 2)
    for op, k, due, cost, build in ops:
        key = f"t{k}"
        if build:
            state.where("Task", "due")
            state.where("Task", "cost")
        fields = {"due": due.isoformat() if due else None, "cost": cost}
        if op == "add" and key not in live:
            ev, live = fact(clock.isoformat(), "add", "Task", key, **fields), live | {key}
        elif op == "update" and key in live:
            ev = fact(clock.isoformat(), "update", "Task", key, **fields)
        elif op == "retract" and key in live:
            ev, live = fact(clock.isoformat(), "retract", "Task", key), live - {key}
        else:
            continue
        append(store, state, [ev])
        clock += timedelta(hours=1)
    since, before = order_value(lo), order_value(lo + timedelta(days=width))
    got = state.where("Task", "due", lo, lo + timedelta(days=width))
    assert [(order_value(r.due), r.key) for r in got] == _brute_where(state, "due", since, before)
    assert [r.key for r in state.where("Task", "cost", -1.0)] == [
        k for _, k in _brute_where(state, "cost", -1.0, None)
    ]
    assert sorted(r.key for r in state.unset("Task", "due")) == sorted(
        r.key for r in state.all("Task") if r.due is None
    )


def test_where_orders_dates_and_datetimes_and_refuses_text_fields(db: Path) -> None:
    store, state = Store(db), State("u")
    append(
        store,
        state,
        [
            fact("2025-01-01T09:00:00", "add", "Event", "a", at="2025-03-01T10:00:00", title="x"),
            fact("2025-01-01T09:01:00", "add", "Event", "b", at="2025-02-01T10:00:00"),
            fact("2025-01-01T09:02:00", "add", "Event", "c", title="no time"),
        ],
    )
    user = UserView(state)
    assert [r.key for r in user.where("Event", "at", since=date(2025, 1, 1))] == ["b", "a"]
    assert [r.key for r in user.where("Event", "at", before=datetime(2025, 3, 1, 10))] == ["b"]
    assert [r.key for r in user.unset("Event", "at")] == ["c"]
    with pytest.raises(QueryError, match=r"where\(\) orders by a date, datetime or number"):
        user.where("Event", "title")
    with pytest.raises(QueryError, match="Event has no field 'when'"):
        user.where("Event", "when")
    with pytest.raises(QueryError, match="needs a date or datetime"):
        user.where("Event", "at", since=3)


def test_where_compares_large_integers_exactly(db: Path) -> None:
    store, state = Store(db), State("u")
    big = 2**53  # beyond it, floats skip integers: 2**53 + 1 == float(2**53)
    append(
        store,
        state,
        [
            fact("2025-01-01T09:00:00", "add", "Tally", "a", n=big),
            fact("2025-01-01T09:01:00", "add", "Tally", "b", n=big + 1),
        ],
    )
    assert [r.key for r in UserView(state).where("Tally", "n", since=big + 1)] == ["b"]


@pytest.mark.parametrize("op", ["add", "update"])
def test_a_log_that_skips_a_schema_event_is_refused_by_name(tmp_path: Path, op: str) -> None:
    # Store.append is public: a log written past plan_batch can lack a field's schema event.
    store, state, t = Store(tmp_path / "s.duckdb"), State("maya"), datetime(2025, 1, 1)
    start = [
        NewEvent(t, "schema", "maya", {"type": "Trip"}),
        NewEvent(t, "schema", "maya", {"type": "Trip", "field": "city", "ftype": "str"}),
        NewEvent(t, "fact", "maya", {"op": "add", "type": "Trip", "key": "a", "fields": {}}),
    ]
    state.apply_all(store.append(start))
    key = "b" if op == "add" else "a"
    bad = {"op": op, "type": "Trip", "key": key, "fields": {"city": "Oslo", "nights": 3}}
    logged = store.append([NewEvent(t, "fact", "maya", bad)])
    with pytest.raises(FoldError, match=r"Trip has no field 'nights'.*Workbench\.ingest"):
        state.apply_all(logged)
