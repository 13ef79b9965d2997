"""Records read their fields by name: a field the type has reads None when unset; a name the
type never had is an error naming the closest field, on a state folded from a real log."""

from __future__ import annotations

import copy
import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.events import add, clock

from uac_kernel.core.errors import QueryError, UnknownField
from uac_kernel.core.records import Record, new_record, record_class
from uac_kernel.rules.engine import Finding, RuleRunner, rule
from uac_kernel.state.query import UserView
from uac_kernel.workbench import Workbench

TRIPS = [
    add("2025-03-01", "Trip", "tokyo", destination="Tokyo", international=True),
    add("2025-03-02", "Trip", "lyon", destination="Lyon", international=True),
    add("2025-03-03", "Trip", "leeds", destination="Leeds"),
    add("2025-03-04", "Bill", "gas", amount=40.0),
    add("2025-03-05", "Bill", "water"),
]


class Visit(Record):
    """A record class defined in a module, as a checkpoint's code defines one (picklable)."""

    place: str | None = None


@pytest.fixture
def wb(tmp_path: Path) -> Iterator[Workbench]:
    with Workbench(tmp_path / "u.duckdb", user="u", rules=[]) as wb:
        wb.ingest(TRIPS)
        yield wb


def test_a_misspelt_field_names_the_type_and_the_closest_field(wb: Workbench) -> None:
    trips = wb.state.all("Trip")
    # the cases: a filter that dropped every record, a sum that failed without a name
    with pytest.raises(UnknownField, match=r"^Trip has no field 'internatonal'\. Did you mean "):
        [t for t in trips if t.internatonal]
    with pytest.raises(UnknownField) as caught:
        sum(b.amont for b in wb.state.all("Bill"))
    assert str(caught.value) == "Bill has no field 'amont'. Did you mean 'amount'?"
    assert isinstance(caught.value, QueryError) and caught.value.name == "amont"
    with pytest.raises(UnknownField) as caught:
        trips[0].zzz  # noqa: B018
    assert str(caught.value) == (
        "Trip has no field 'zzz'. Its fields: destination, international, key, valid_from, "
        "valid_to, sources, retracted."
    )
    # a field the type has that this record never set reads None, as before
    assert [t.international for t in trips] == [True, True, None]
    assert [b.amount for b in wb.state.all("Bill")] == [40.0, None]


def test_getattr_with_a_default_and_hasattr_still_answer(wb: Workbench) -> None:
    leeds = wb.state.get("Trip", "leeds")
    assert leeds is not None
    assert getattr(leeds, "internatonal", "no such field") == "no such field"
    assert not hasattr(leeds, "internatonal")
    assert hasattr(leeds, "international") and getattr(leeds, "international", 1) is None


def test_an_expression_reads_a_field_a_type_may_lack_through_fields(wb: Workbench) -> None:
    # the sandbox has no getattr: what docs/queries.md offers instead
    assert wb.eval("[t.fields().get('nights') for t in user.all(Trip)]") == [None] * 3
    assert wb.eval("[t.fields().get('destination') for t in user.all(Trip)]") == [
        "Tokyo",
        "Lyon",
        "Leeds",
    ]


def test_private_dunder_and_model_names_stay_pydantics(wb: Workbench) -> None:
    tokyo = wb.state.get("Trip", "tokyo")
    assert tokyo is not None
    for name in ("_x", "__foo__", "model_nope"):
        with pytest.raises(AttributeError) as caught:
            getattr(tokyo, name)
        assert not isinstance(caught.value, UnknownField), name
    assert tokyo.model_dump()["destination"] == "Tokyo"
    assert tokyo.fields() == {"destination": "Tokyo", "international": True}


def test_copies_and_pickles_read_as_the_record_does(wb: Workbench) -> None:
    leeds = wb.state.get("Trip", "leeds")
    assert leeds is not None
    for twin in (copy.copy(leeds), copy.deepcopy(leeds), leeds.model_copy()):
        assert twin == leeds and twin.international is None
        with pytest.raises(UnknownField, match="Did you mean 'international'"):
            twin.internatonal  # noqa: B018
    visit = pickle.loads(pickle.dumps(Visit(key="v", place="Kyoto")))
    assert visit.place == "Kyoto"
    with pytest.raises(UnknownField, match=r"^Visit has no field 'plce'\. Did you mean 'place'\?$"):
        visit.plce  # noqa: B018


class CountedFields(dict[str, str]):
    """A type's fields that count how often they are walked (a search for a suggestion)."""

    walks = 0

    def __iter__(self) -> Iterator[str]:
        CountedFields.walks += 1
        return super().__iter__()


def test_a_miss_under_getattr_with_a_default_searches_no_fields() -> None:
    # hasattr and getattr(rec, name, default) run in rules over every record: the suggestion is
    # found only when the message is read, not on each miss (2,000 fields: ~1 ms a search)
    known = CountedFields({f"field_{i}": "str" for i in range(2000)})
    cls = record_class("Wide", dict(known), known=known)
    rec = new_record(cls, {**dict.fromkeys(cls.model_fields), "key": "w", "sources": ()})
    CountedFields.walks = 0
    assert [getattr(rec, "zzz", None) for _ in range(1000)] == [None] * 1000
    assert not any(hasattr(rec, "zzz") for _ in range(1000))
    assert CountedFields.walks == 0
    with pytest.raises(UnknownField) as caught:
        rec.field_12x  # noqa: B018
    assert str(caught.value) == "Wide has no field 'field_12x'. Did you mean 'field_12'?"
    # the error pickles with its names (the fold gives it a live view of them, which cannot)
    again = pickle.loads(pickle.dumps(caught.value))
    assert str(again) == str(caught.value) and again.name == "field_12x"


def test_a_record_read_before_its_type_gained_a_field_reads_that_field_as_unset(
    wb: Workbench,
) -> None:
    lyon = wb.state.get("Trip", "lyon")
    assert lyon is not None
    with pytest.raises(UnknownField):
        lyon.nights  # noqa: B018
    wb.ingest([add("2025-03-06", "Trip", "oslo", destination="Oslo", nights=3)])
    # the fold moved the type's records onto a class with ``nights``; the one held from before
    # is still of the old class, which learns the type's fields as the schema grows
    assert "nights" not in type(lyon).model_fields
    assert lyon.nights is None
    assert [t.nights for t in wb.state.all("Trip")] == [None, None, None, 3]
    with pytest.raises(UnknownField, match="Did you mean 'nights'"):
        lyon.night  # noqa: B018


def test_a_reopened_store_reads_fields_as_the_fold_did(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="u", rules=[]) as wb:
        wb.ingest(TRIPS)
        wb.checkpoint()
    with Workbench(db, user="u", rules=[]) as wb:
        leeds = wb.state.get("Trip", "leeds")
        assert leeds is not None and leeds.international is None
        with pytest.raises(UnknownField, match="Did you mean 'international'"):
            leeds.internatonal  # noqa: B018
        wb.ingest([add("2025-03-06", "Trip", "oslo", destination="Oslo", nights=3)])
        assert leeds.nights is None


def test_a_rule_reading_a_misspelt_field_is_a_rule_error_naming_it(wb: Workbench) -> None:
    @rule(watch=["Trip"])
    def abroad(user: UserView) -> Iterator[Finding]:
        for t in user.all("Trip"):
            if t.internatonal:
                yield Finding(f"{t.key} is abroad", [t])

    runner = RuleRunner([abroad])
    wb.ingest([clock("2025-03-07")])
    runner.run(UserView(wb.state), None)
    (alert,) = runner.standing()
    assert alert.category == "rule_error"
    assert "Trip has no field 'internatonal'. Did you mean 'international'?" in alert.message
