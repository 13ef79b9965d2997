"""A constraint naming a type or field the user's records do not have is put in force (it may be
written before its first record) with a one-line warning and the closest name: from
``Workbench.constrain`` (the report's ``warnings``), ``uac constrain`` (stderr) and
``%uac constrain`` (printed). The files are the newcomer's of the runner notebook."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from uac_kernel.cli.main import main
from uac_kernel.constraints.files import constraints_of_file
from uac_kernel.workbench import Workbench

TYPO_TYPE = """kind: window_limit
title: x
subject: {type: TrainingRuns}
measure: count
limit: 3
window_days: 7
"""
TYPO_FIELD = """kind: window_limit
title: At most 60 km in any 7 days (shin!)
subject: {type: TrainingRun}
measure: sum
amount: distanceKM
date: [runDate]
window_days: 7
limit: 10
warn_at: 0.8
"""
RUN: dict[str, Any] = {
    "kind": "fact",
    "ts": "2026-01-05",
    "op": "add",
    "type": "TrainingRun",
    "key": "r1",
    "fields": {"runDate": "2026-01-05", "distanceKm": 8.5},
}


@pytest.fixture
def runner(tmp_path: Path) -> Path:
    (tmp_path / "typo-type.yaml").write_text(TYPO_TYPE)
    (tmp_path / "typo-field.yaml").write_text(TYPO_FIELD)
    db = tmp_path / "u.duckdb"
    with Workbench(db, rules=[]) as wb:
        wb.ingest([RUN])
    return db


def test_an_unknown_type_warns_with_the_closest_type_and_is_put_in_force(
    runner: Path,
) -> None:
    path = str(runner.parent / "typo-type.yaml")
    with Workbench(runner, rules=[]) as wb:
        report = wb.constrain(constraints_of_file(path), origin="typo-type.yaml")
        assert report.warnings == [
            "warning: typo-type.yaml: subject.type: no records of type TrainingRuns yet "
            "(did you mean TrainingRun?)"
        ]
        assert report.constraints == ["x"] and list(wb.state.constraints) == ["x"]


def test_an_unknown_field_warns_with_the_closest_field_of_the_type(runner: Path) -> None:
    path = str(runner.parent / "typo-field.yaml")
    with Workbench(runner, rules=[]) as wb:
        report = wb.constrain(constraints_of_file(path), origin="typo-field.yaml")
        assert report.warnings == [
            "warning: typo-field.yaml: amount: TrainingRun has no field distanceKM "
            "(did you mean distanceKm?)"
        ]
        assert len(wb.state.constraints) == 1


def test_a_constraint_naming_known_names_has_no_warning(runner: Path) -> None:
    fixed = TYPO_FIELD.replace("distanceKM", "distanceKm")
    with Workbench(runner, rules=[]) as wb:
        assert wb.constrain(_parsed(fixed)).warnings == []


def _parsed(text: str) -> Any:
    from uac_kernel.constraints.files import read_constraints

    return read_constraints(text, "c.yaml")


def test_uac_constrain_prints_the_warning_on_stderr(
    runner: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(runner.parent / "typo-field.yaml")
    capsys.readouterr()
    assert main(["constrain", "--db", str(runner), path]) == 0
    got = capsys.readouterr()
    assert got.err == (
        f"warning: {path}: amount: TrainingRun has no field distanceKM (did you mean distanceKm?)\n"
    )
    assert got.out.startswith("in force: at-most-60-km-in-any-7-days-shin")


def test_a_multi_constraint_file_names_the_key_of_each_warning(runner: Path) -> None:
    text = "a:\n" + _indent(TYPO_TYPE) + "b:\n" + _indent(TYPO_FIELD)
    with Workbench(runner, rules=[]) as wb:
        report = wb.constrain(_parsed(text), origin="both.yaml")
    assert [w.split(": ")[:3] for w in report.warnings] == [
        ["warning", "both.yaml", "key 'a'"],
        ["warning", "both.yaml", "key 'b'"],
    ]


def _indent(text: str) -> str:
    return "".join(f"  {line}\n" for line in text.splitlines())
