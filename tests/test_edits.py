"""Editing the user model as code: a changed part becomes correction events, read by literals."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import fact, without_record

from uac_kernel.errors import CodeError, EditConflict
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
