"""`uac whatif`, run for real (a subprocess, or ``main``) over real store files: the report
as text and JSON, a past what-if with its chart, and mistakes as one line — with the store file
(and its write-ahead log) byte for byte as it was, the what-if's validation failing or not.

The engine (``Workbench.whatif``) is tested in its own module; the notebook faces in
``test_whatif_magics.py``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import add, update
from test_cli import uac

from uac_kernel.cli import main
from uac_kernel.workbench import Workbench

RULE = "drug_allergy_cross_reactivity"

# Maya's store: a severe penicillin allergy and ibuprofen; no amoxicillin (yet).
STORE = [
    add("2024-02-09", "Allergy", "allergy-penicillin", substance="penicillin", severity="severe"),
    add("2024-03-01", "Medication", "med-ibuprofen", name="ibuprofen", dose_mg=200.0, active=True),
]
# What if the GP prescribes amoxicillin?
AMOXICILLIN = add(
    "2024-11-18",
    "Medication",
    "med-amoxicillin",
    name="amoxicillin",
    dose_mg=500.0,
    start="2024-11-18",
    end="2024-11-25",
    active=True,
)
AMOXICILLIN_YAML = """\
- kind: fact
  ts: "2024-11-18T09:00:00"
  op: add
  type: Medication
  key: med-amoxicillin
  fields: {name: amoxicillin, dose_mg: 500.0, start: "2024-11-18", end: "2024-11-25", active: true}
"""
MEDICATIONS = "len(user.all(Medication))"


def jsonl(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
    return path


def fingerprint(db: Path) -> dict[str, str]:
    """The SHA-256 of the store file and of its write-ahead log, if it has one."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in (db, db.with_name(db.name + ".wal"))
        if p.exists()
    }


def log_length(db: Path) -> int:
    with Workbench(db, user="maya", read_only=True) as wb:
        return len(wb.log())


@pytest.fixture
def store(tmp_path: Path) -> Path:
    db = tmp_path / "maya.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest(STORE)
    return db


@pytest.fixture
def whatif_file(tmp_path: Path) -> Path:
    return jsonl(tmp_path / "amoxicillin.jsonl", [AMOXICILLIN])


# -- the command line -------------------------------------------------------------------------


def test_cli_whatif_prints_the_report_and_writes_nothing(
    store: Path, whatif_file: Path, tmp_path: Path
) -> None:
    before, length = fingerprint(store), log_length(store)
    done = uac("whatif", str(whatif_file), "--db", str(store), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with Workbench(store, user="maya", read_only=True) as wb:
        expected = wb.whatif(str(whatif_file), expressions=[]).text()
    assert done.stdout.splitlines() == expected.splitlines()
    assert "amoxicillin" in done.stdout and "1 raised" in done.stdout
    assert fingerprint(store) == before
    assert log_length(store) == length


def test_cli_whatif_json_and_expressions(
    store: Path, whatif_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["whatif", str(whatif_file), "--db", str(store), "--json", "--expr", MEDICATIONS]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["user"] == "maya" and report["new"] == 1 and report["as_of"] is None
    assert [r["rule"] for r in report["raised"]] == [RULE]
    assert [(c["type"], c["key"], c["change"]) for c in report["records"]] == [
        ("Medication", "med-amoxicillin", "added")
    ]
    (answer,) = report["answers"]
    assert (answer["expression"], answer["before"], answer["after"]) == (MEDICATIONS, 1, 2)
    assert report["events"] == [AMOXICILLIN]


def test_cli_whatif_yaml_file(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "amoxicillin.yaml"
    path.write_text(AMOXICILLIN_YAML, encoding="utf-8")
    assert main(["whatif", str(path), "--db", str(store), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [r["rule"] for r in report["raised"]] == [RULE]


def test_cli_past_whatif_replays_the_later_log_and_draws_both_timelines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The real log: amoxicillin for a week in November, no allergy known. What if the allergy
    # had been recorded in March?
    db = tmp_path / "past.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest(
            [AMOXICILLIN, update("2024-11-25", "Medication", "med-amoxicillin", active=False)]
        )
    allergy = jsonl(tmp_path / "allergy.jsonl", [{**STORE[0], "ts": "2024-03-01T09:00:00"}])
    before = fingerprint(db)
    chart = tmp_path / "timeline.svg"
    argv = ["whatif", str(allergy), "--db", str(db), "--as-of", "2024-03-01", "--json"]
    assert main([*argv, "--chart", str(chart)]) == 0
    out = capsys.readouterr().out
    report = json.loads(out[: out.rindex("}") + 1])
    assert report["as_of"].startswith("2024-03-01")
    spans = [(s["run"], s["rule"]) for s in report["timeline"]]
    assert ("what-if", RULE) in spans and ("real", RULE) not in spans
    (span,) = [s for s in report["timeline"] if s["run"] == "what-if" and s["rule"] == RULE]
    assert span["start"].startswith("2024-11-18") and span["end"].startswith("2024-11-25")
    assert f"wrote {chart}" in out and chart.read_text().lstrip().startswith("<svg")
    assert fingerprint(db) == before


def test_cli_whatif_bad_file_is_one_line_and_the_store_is_unchanged(
    store: Path, tmp_path: Path
) -> None:
    bad = jsonl(
        tmp_path / "bad.jsonl",
        [AMOXICILLIN, add("2024-11-18", "Medication", "med-x", name="x", dose_mg="lots")],
    )
    before, length = fingerprint(store), log_length(store)
    done = uac("whatif", str(bad), "--db", str(store), cwd=tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"uac: error: {bad}:2: field 'fields.dose_mg': ")
    assert fingerprint(store) == before
    assert log_length(store) == length


def test_cli_whatif_argument_mistakes_are_one_line(
    store: Path, whatif_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = fingerprint(store)
    cases = {
        ("whatif", str(tmp_path / "missing.jsonl")): "missing.jsonl: cannot read the file",
        ("whatif", str(whatif_file), "--as-of", "March"): "expected an ISO date",
        ("whatif", str(whatif_file), "--chart", "t.pdf"): "name a .svg, .png or .html file",
    }
    for argv, message in cases.items():
        assert main([*argv, "--db", str(store)]) == 1, argv
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and message in err, err
    assert fingerprint(store) == before


def test_cli_whatif_needs_an_existing_store(whatif_file: Path, tmp_path: Path) -> None:
    done = uac("whatif", str(whatif_file), "--db", str(tmp_path / "none.duckdb"), cwd=tmp_path)
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1
    assert not (tmp_path / "none.duckdb").exists()
