"""Editing the user model as code: a changed part becomes correction events, read by literals."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers.checkpoints import without_record
from helpers.events import fact

from uac_kernel.core.errors import (
    CodeError,
    EditConflict,
    QueryError,
    SandboxFailed,
    SandboxRefused,
)
from uac_kernel.workbench import Workbench


@pytest.fixture
def wb(tmp_path: Path) -> Workbench:
    wb = Workbench(tmp_path / "u.duckdb", user="maya")
    wb.ingest(
        [
            fact("2024-02-09", "add", "Allergy", "pen", substance="penicillin", severity="severe"),
            fact("2024-11-18", "add", "Medication", "amox", name="amoxicillin", active=True),
            fact("2024-11-18", "add", "Medication", "ibu", name="ibuprofen", dose_mg=200.0),
        ]
    )
    wb.checkpoint()
    return wb


def edit(code: str, old: str, new: str) -> str:
    assert old in code, old
    return code.replace(old, new)


def test_edited_record_clears_an_alert(wb: Workbench) -> None:
    assert [a.rule for a in wb.alerts()] == ["drug_allergy_cross_reactivity"]
    cell = wb.cell("Medication")
    assert cell.startswith("class Medication(Record):")
    plan, report = wb.apply_edit(
        edit(cell, "name='amoxicillin'", "name='azithromycin'"), version=1, part="Medication"
    )
    assert plan.updated == ["amox"] and not plan.merged
    assert [a.rule for a in report.cleared] == ["drug_allergy_cross_reactivity"]
    (ev,) = wb.log(kinds=["fact"])[-1:]
    assert ev.payload["author"] == "notebook" and ev.payload["fields"] == {"name": "azithromycin"}
    # running the same cell again appends nothing
    _, rerun = wb.apply_edit(
        edit(cell, "name='amoxicillin'", "name='azithromycin'"), version=1, part="Medication"
    )
    assert rerun.appended == 0


def test_deleted_and_new_records(wb: Workbench) -> None:
    lines = without_record(wb.cell("Medication"), "ibu").splitlines()
    lines.insert(-1, "    Medication(key='vitd', name='vitamin D', dose_mg=25.0, active=True),")
    plan, _ = wb.apply_edit("\n".join(lines), version=1, part="Medication")
    assert plan.added == ["vitd"] and plan.retracted == ["ibu"]
    assert sorted(m.key for m in wb.state.all("Medication")) == ["amox", "vitd"]
    assert wb.state.history("Medication")[0].retracted


def test_stale_edit_is_merged_and_conflict_refused(wb: Workbench) -> None:
    cell = wb.cell("Medication")
    wb.ingest([fact("2024-12-01", "update", "Medication", "ibu", dose_mg=400.0)])
    wb.checkpoint()
    plan, _ = wb.apply_edit(
        edit(cell, "name='amoxicillin'", "name='azithromycin'"), version=1, part="Medication"
    )
    assert plan.merged and plan.updated == ["amox"]
    assert wb.state.get("Medication", "ibu").dose_mg == 400.0  # type: ignore[union-attr]
    with pytest.raises(EditConflict, match=r"'ibu' field 'dose_mg' was changed to 400.0 since"):
        wb.apply_edit(edit(cell, "dose_mg=200.0", "dose_mg=300.0"), version=1, part="Medication")


def test_hostile_strings_stay_data(wb: Workbench, tmp_path: Path) -> None:
    canary = tmp_path / "pwned"
    hostile = f"'); open({str(canary)!r}, 'w').write('x') #"
    wb.ingest([fact("2024-12-02", "add", "Note", "n1", text=hostile)])
    wb.checkpoint()
    cell = wb.cell("Note")
    plan, _ = wb.apply_edit(
        edit(cell, "key='n1'", "key='n1', mood='\\u2603 \"quoted\" \\\\'"), version=2, part="Note"
    )
    assert plan.updated == ["n1"] and not canary.exists()
    assert wb.state.get("Note", "n1").mood == '\u2603 "quoted" \\'  # type: ignore[union-attr]
    with pytest.raises(CodeError, match="only literal values"):
        wb.apply_edit(
            edit(cell, "key='n1'", f"key='n1', text=open({str(canary)!r}).read()"),
            version=2,
            part="Note",
        )
    assert not canary.exists()


def test_a_new_field_or_type_in_the_schema_part_says_how_it_comes(wb: Workbench) -> None:
    """Fields and types come into the schema with values, so declaring one in the schema part
    is an error that says so, not a silent "no change"."""
    code = wb.cell("schema")
    added = edit(
        code, "class Medication(Record):\n", "class Medication(Record):\n    rating: int | None\n"
    )
    with pytest.raises(CodeError) as err:
        wb.apply_edit(added, version=1, part="schema")
    assert str(err.value) == (
        "Medication.rating is new: a field comes into the schema with its first value — "
        "give a record a value in `%uac edit Medication`"
    )
    with pytest.raises(CodeError, match=r"^Hotel is new: a type comes into the schema with its"):
        hotel = code + "\n\nclass Hotel(Record):\n    city: str | None\n"
        wb.apply_edit(hotel, version=1, part="schema")
    seq = wb.state.seq
    plan, report = wb.apply_edit(code, version=1, part="schema")  # as it was: nothing to do
    assert plan.summary() == "no change" and report.appended == 0 and wb.state.seq == seq
    # the field comes with a value in the type's own part
    cell = edit(wb.cell("Medication"), "name='ibuprofen'", "name='ibuprofen', rating=3")
    wb.apply_edit(cell, version=1, part="Medication")
    assert wb.state.schema.types["Medication"]["rating"] == "int"


def test_cell_rules_are_found_not_run(wb: Workbench) -> None:
    code = "@rule(watch=['Medication'])\ndef too_many(user):\n    raise SystemExit('ran!')\n"
    plan, _ = wb.apply_edit(code, version=1, part="rules")
    assert [r.name for r in plan.rules] == ["too_many"] and "raise SystemExit" in plan.rules[
        0
    ].source


def test_a_rule_source_starts_at_its_decorator(wb: Workbench) -> None:
    code = "@rule(watch=['Medication'])\ndef too_many(user):\n    return []\n"
    plan, _ = wb.apply_edit(code, version=1, part="rules")
    assert plan.rules[0].source == code


# -- a selection of a type's records ---------------------------------------------------------


@pytest.fixture
def trips(tmp_path: Path) -> Workbench:
    """Six trips, alternately to Japan and France, then t1 updated last; checkpoint 1."""
    wb = Workbench(tmp_path / "t.duckdb", user="maya")
    wb.ingest(
        [
            fact(f"2025-01-0{i + 1}", "add", "Trip", f"t{i}", country=("Japan", "France")[i % 2])
            for i in range(6)
        ]
    )
    wb.ingest([fact("2025-02-01", "update", "Trip", "t1", nights=3)])
    wb.checkpoint()
    return wb


def cell_keys(code: str) -> list[str]:
    return re.findall(r"key='([^']*)'", code)


def test_a_selection_narrows_the_cell(trips: Workbench) -> None:
    assert cell_keys(trips.cell("Trip", key="t3")) == ["t3"]
    # several keys, in module order, however given
    assert cell_keys(trips.cell("Trip", key=["t4", "t0", "t4"])) == ["t0", "t4"]
    assert cell_keys(trips.cell("Trip", where="r.country == 'Japan'")) == ["t0", "t2", "t4"]
    # the last changed: t1's update is the latest event, then t5's add
    assert cell_keys(trips.cell("Trip", last=2)) == ["t1", "t5"]
    # together they narrow each other
    made = trips.edit_cell("Trip", where="r.country == 'France'", last=1, key=["t1", "t3"])
    assert made.keys == ["t1"] and made.total == 6 and made.version == 1 and not made.large
    assert "# 1 of 6 Trip records, as selected; the others stay as they are.\n" in made.code
    # nothing selected is an empty list to add records to, not the whole type
    empty = trips.edit_cell("Trip", where="r.country == 'Peru'")
    assert empty.keys == [] and "records[Trip] = [\n]\n" in empty.code
    # no selection: the whole part, as before
    whole = trips.edit_cell("Trip")
    assert whole.keys is None and cell_keys(whole.code) == [f"t{i}" for i in range(6)]
    assert "as selected" not in whole.code


def test_a_partial_cell_answers_for_its_selection_only(trips: Workbench) -> None:
    code = trips.cell("Trip", where="r.country == 'Japan'")
    edited = without_record(code, "t2").replace(
        "records[Trip] = [\n", "records[Trip] = [\n    Trip(key='t9', country='Japan'),\n"
    )
    plan, _ = trips.apply_edit(edited, version=1, part="Trip", where="r.country == 'Japan'")
    # t2, selected and deleted, is retracted; t9 is added; the French trips, never in the
    # cell, stay as they are
    assert plan.retracted == ["t2"] and plan.added == ["t9"] and not plan.updated
    assert sorted(r.key for r in trips.state.all("Trip")) == ["t0", "t1", "t3", "t4", "t5", "t9"]
    # a cell of one key: only that record is answered for
    one = trips.cell("Trip", key="t3", version=1)
    plan, _ = trips.apply_edit(
        one.replace("country='France'", "country='Spain'"), version=1, part="Trip", key="t3"
    )
    assert plan.updated == ["t3"] and not plan.retracted and plan.merged
    assert trips.state.get("Trip", "t3").country == "Spain"  # type: ignore[union-attr]
    # The same code under another selection plans other facts, so the selection is part of
    # what makes their source ids: the second retraction is not skipped as already logged.
    for other in ("t4", "t0"):
        plan, report = trips.apply_edit(one, version=1, part="Trip", key=["t3", other])
        assert plan.retracted == [other] and report.appended == 1
        assert trips.state.get("Trip", other) is None


def test_a_stale_selection_is_picked_from_its_own_version(trips: Workbench) -> None:
    code = trips.cell("Trip", where="r.country == 'Japan'")
    # later: t1 moves to Japan, and t0 is changed
    trips.ingest([fact("2025-03-01", "update", "Trip", "t1", country="Japan")])
    trips.ingest([fact("2025-03-02", "update", "Trip", "t0", nights=2)])
    trips.checkpoint()
    # The cell came from checkpoint 1, where t1 was not in Japan: t1 is missing from the
    # cell but was never selected, so it is not retracted; the edit of t4 is merged.
    plan, _ = trips.apply_edit(
        code.replace("key='t4', country='Japan'", "key='t4', country='Japan', nights=5"),
        version=1,
        part="Trip",
        where="r.country == 'Japan'",
    )
    assert plan.merged and plan.updated == ["t4"] and not plan.retracted
    assert trips.state.get("Trip", "t1").country == "Japan"  # type: ignore[union-attr]
    # deleting t0, changed since, is refused; deleting t2 is not
    with pytest.raises(EditConflict, match="'t0' was changed since"):
        trips.apply_edit(
            without_record(code, "t0"), version=1, part="Trip", where="r.country == 'Japan'"
        )
    plan, _ = trips.apply_edit(
        without_record(code, "t2"), version=1, part="Trip", where="r.country == 'Japan'"
    )
    assert plan.retracted == ["t2"] and trips.state.get("Trip", "t1") is not None


def test_selection_errors_say_what_to_do(trips: Workbench) -> None:
    with pytest.raises(
        QueryError, match=r"no Trip with key 'T3' in checkpoint 1\. Did you mean 't3'"
    ):
        trips.cell("Trip", key=["t0", "T3"])
    trips.ingest([fact("2025-04-01", "retract", "Trip", "t5")])
    trips.checkpoint()
    with pytest.raises(QueryError, match=r"'t5' was retracted before it"):
        trips.cell("Trip", key="t5")
    with pytest.raises(SandboxRefused, match=r"^where 'r.country ==': not a Python expression"):
        trips.cell("Trip", where="r.country ==")
    with pytest.raises(SandboxRefused, match="attribute '__class__' is not allowed"):
        trips.cell("Trip", where="r.__class__")
    with pytest.raises(QueryError, match=r"Trip has no field 'countryy'\. Did you mean 'country'"):
        trips.cell("Trip", where="r.countryy == 'Japan'")
    with pytest.raises(SandboxFailed, match="ZeroDivisionError"):
        trips.cell("Trip", where="1 / 0")
    with pytest.raises(SandboxFailed, match="ZeroDivisionError"):  # on an older version too
        trips.cell("Trip", version=1, where="1 / 0")
    for bad in (0, -2):
        with pytest.raises(QueryError, match="last must be a positive number of records"):
            trips.cell("Trip", last=bad)
    with pytest.raises(QueryError, match="schema has no records to select from"):
        trips.cell("schema", key="t0")


def test_a_large_type_says_so(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "big.duckdb", user="maya")
    wb.ingest([fact("2025-01-01", "add", "Txn", f"x{i:03d}", amount=float(i)) for i in range(201)])
    wb.checkpoint()
    whole = wb.edit_cell("Txn")
    assert whole.large and whole.total == 201
    assert not wb.edit_cell("Txn", where="r.amount > 199").large


@pytest.mark.parametrize(
    "extra",
    [
        "vocabulary: list[dict] = []",
        "vocabulary[0]['status'] = 'rejected'",
        "vocabulary.append({'role': 'medication', 'type': 'Allergy'})",
        "del vocabulary[0]",
        "vocabulary, x = [], 1",
    ],
)
def test_a_cell_that_changes_the_vocabulary_block_is_refused_in_one_line(
    wb: Workbench, extra: str
) -> None:
    wb.unbind("Medication.name", "medication.name")  # the checkpoint renders a vocabulary block
    version = wb.checkpoint().version
    assert "vocabulary: list[dict] = [" in wb.code(version)
    before = wb.state.seq, wb.vocab().bindings
    cell = wb.cell("Medication", version) + extra + "\n"
    with pytest.raises(CodeError) as caught:
        wb.apply_edit(cell, version=version, part="Medication")
    assert str(caught.value) == (
        f"line {cell.count(chr(10))}: the vocabulary block is not edited in a cell; bind with "
        "`uac vocab bind TYPE.FIELD CONCEPT` (or a `%%uac vocab` cell), reject a binding with "
        "`uac vocab unbind TYPE.FIELD CONCEPT`"
    )
    assert (wb.state.seq, wb.vocab().bindings) == before
