"""`uac whatif`, run for real (a subprocess, or ``main``) over real store files: the report
as text and JSON, a past what-if with its chart, and mistakes as one line — with the store file
(and its write-ahead log) byte for byte as it was, the what-if's validation failing or not.

The engine (``Workbench.whatif``) is tested in its own module; the notebook faces in
``test_whatif_magics.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import uac_here as uac
from helpers.events import add, jsonl, update
from helpers.maya import AMOXICILLIN, AMOXICILLIN_YAML, MEDICATIONS, RULE, STORE
from helpers.store import fingerprint

from uac_kernel.cli.main import main
from uac_kernel.workbench import Workbench


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
    # the events apply would append: as given, with the source that makes a re-append a no-op
    (event,) = report["events"]
    assert {k: v for k, v in event.items() if k != "source"} == AMOXICILLIN
    assert event["source"]


def test_cli_whatif_yaml_file(
    store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "amoxicillin.yaml"
    path.write_text(AMOXICILLIN_YAML, encoding="utf-8")
    assert main(["whatif", str(path), "--db", str(store), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [r["rule"] for r in report["raised"]] == [RULE]


@pytest.fixture
def past(tmp_path: Path) -> tuple[Path, Path]:
    """A store whose real log has amoxicillin for a week of November and no allergy, and a
    what-if file: the penicillin allergy, had it been recorded in March."""
    db = tmp_path / "past.duckdb"
    with Workbench(db, user="maya") as wb:
        stopped = update("2024-11-25", "Medication", "med-amoxicillin", active=False)
        wb.ingest([AMOXICILLIN, stopped])
    allergy = jsonl(tmp_path / "allergy.jsonl", [{**STORE[0], "ts": "2024-03-01T09:00:00"}])
    return db, allergy


def test_cli_past_whatif_replays_the_later_log(past: tuple[Path, Path], tmp_path: Path) -> None:
    db, allergy = past
    before = fingerprint(db)
    # a process of its own: in one that has started an IPython kernel (the magics' tests),
    # tqdm.auto draws the replay's progress as a notebook bar, on stdout
    done = uac(
        "whatif", str(allergy), "--db", str(db), "--as-of", "2024-03-01", "--json", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["as_of"].startswith("2024-03-01")
    spans = [(s["run"], s["rule"]) for s in report["timeline"]]
    assert ("what-if", RULE) in spans and ("real", RULE) not in spans
    (span,) = [s for s in report["timeline"] if s["run"] == "what-if" and s["rule"] == RULE]
    assert span["start"].startswith("2024-11-18") and span["end"].startswith("2024-11-25")
    assert report["raised"] == []  # the alert no longer stands at the end of the log
    done = uac("whatif", str(allergy), "--db", str(db), "--as-of", "2024-03-01", cwd=tmp_path)
    text = done.stdout
    assert "as of 2024-03-01" in text and "timeline" in text and RULE in text
    assert fingerprint(db) == before


def test_cli_past_whatif_chart(
    past: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, allergy = past
    before = fingerprint(db)
    for name in ("timeline.svg", "timeline.html"):
        chart = tmp_path / name
        argv = ["whatif", str(allergy), "--db", str(db), "--as-of", "2024-03-01"]
        assert main([*argv, "--chart", str(chart)]) == 0
        assert f"wrote {chart}" in capsys.readouterr().out
        text = chart.read_text(encoding="utf-8")
        assert text.lstrip().startswith("<svg") if name.endswith(".svg") else "<html" in text
        if name.endswith(".html"):
            assert "cdn.jsdelivr.net" not in text  # Vega inlined: it opens offline
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
        ("whatif", str(whatif_file), "--as-of", "March"): "not an ISO 8601 date or date-time",
        ("whatif", str(whatif_file), "--chart", "t.svg"): "give --as-of DATE too",
        ("whatif", str(whatif_file), "--as-of", "2024-03-01", "--chart", "t.pdf"): "name a .svg",
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
