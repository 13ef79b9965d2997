"""Any type or field name in: kept as written in the log, state, SQL and reports; written as an
identifier (with the name kept beside it) in code; a case/style twin is one clash."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from helpers.checkpoints import (
    described_state,
    import_here,
    import_in_clean_interpreter,
    rule_names,
)
from helpers.cli import one_line_error
from helpers.cli import uac_here as uac
from helpers.magics import edit_cell, run, run_out, usage_error

from uac_kernel.checkpoints.codegen import parse_module
from uac_kernel.core.errors import CodeError, EventError
from uac_kernel.core.names import class_name, field_identifier, style_key
from uac_kernel.workbench import Workbench

HOSTILE = 'q"uote\'s \\ x """'
FIELDS: dict[str, Any] = {
    "drugName": "ibuprofen",
    "from": "2025-01-01",
    "class": "nsaid",
    "dose mg": 200,
    "list": "x",
    "café": "oui",
    "1st": True,
    "Dosis-Größe": "klein",
    HOSTILE: "hostile",
}


def fact(type_: str, key: str, ts: str = "2025-01-02", op: str = "add", **fields: Any) -> dict:
    return {"kind": "fact", "ts": ts, "op": op, "type": type_, "key": key, "fields": fields}


@pytest.mark.parametrize(
    ("written", "ident"),
    [
        ("drugName", "drugName"),
        ("from", "from_"),
        ("class", "class_"),
        ("dose mg", "dose_mg"),
        ("Dosis-Größe", "Dosis_Größe"),
        ("1st", "f_1st"),
        ("list", "list"),
        ("ﬁle", "file"),  # Python reads the ligature in source as 'file'
        (HOSTILE, "q_uote_s_x"),
    ],
)
def test_a_field_name_becomes_a_valid_identifier(written: str, ident: str) -> None:
    assert field_identifier(written) == ident and ident.isidentifier()


@pytest.mark.parametrize(
    ("written", "cls"),
    [("Trip", "Trip"), ("medication", "Medication"), ("flight_leg", "FlightLeg"), ("bank account", "BankAccount"), ("2fa", "T2fa")],
)  # fmt: skip
def test_a_type_name_becomes_a_class_name(written: str, cls: str) -> None:
    assert class_name(written) == cls


def test_names_differing_in_case_or_style_have_one_key() -> None:
    keys = {style_key(n) for n in ("drugName", "drug_name", "DrugName", "drug-name", "DRUG NAME")}
    assert keys == {"drug_name"}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    lines = [
        fact("medication", "m1", "2025-01-01", **FIELDS),
        fact("flight_leg", "f1", **{"with": "Ana", "from": "LHR", "to": "JFK"}),
        fact("medication", "m1", "2025-01-03", "update", drugName="naproxen"),
    ]
    path = tmp_path / "names.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in lines), encoding="utf-8")
    done = uac("ingest", str(path), "--user", "ana", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return tmp_path


def test_names_are_kept_as_written_in_the_log_and_the_sql_view(store: Path) -> None:
    log = uac("log", "--json", cwd=store)
    assert log.returncode == 0 and '"dose mg": 200' in log.stdout and '"from"' in log.stdout
    assert "dose mg=200" in uac("log", cwd=store).stdout  # the line of what the event says
    sql = uac("sql", "SELECT * FROM medication", cwd=store)
    assert sql.returncode == 0, sql.stderr
    assert sql.stdout.splitlines()[0].split("\t")[1:10] == list(FIELDS)
    quoted = uac("sql", 'SELECT "from", "dose mg" FROM medication WHERE "dose mg" > 100', cwd=store)
    assert quoted.stdout.splitlines() == ["from\tdose mg", "2025-01-01\t200"], quoted.stderr


def test_eval_reads_a_field_by_its_identifier_or_as_written(store: Path) -> None:
    query = (
        "[(m.from_, m.drugName, m.dose_mg, m.fields()['dose mg'], m.class_, m.f_1st) "
        "for m in user.all(Medication)] + [f.with_ for f in user.all('flight_leg')]"
    )
    done = uac("eval", query, cwd=store)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [["2025-01-01", "naproxen", 200, 200, "nsaid", True], "Ana"]


def test_the_module_imports_in_a_clean_interpreter_with_the_names_as_written(store: Path) -> None:
    assert uac("checkpoint", cwd=store).returncode == 0
    out = store / "ana_model.py"
    assert uac("code", "--out", str(out), cwd=store).returncode == 0
    code = out.read_text(encoding="utf-8")
    assert "class Medication(Record):" in code and "from_: Annotated[date | None" in code
    assert "title='flight_leg'" in code
    # imported with no path to the store: names as written (aliases, titles) and values equal
    # the state's, and the module reads back to the same state by its literals
    with Workbench(store / "uac.duckdb", user="ana") as wb:
        truth = described_state(wb.state, rule_names(wb))
    assert import_in_clean_interpreter(out, store) == truth
    assert described_state(parse_module(code), truth["rules"]) == truth
    assert set(truth["types"]["medication"]["fields"]) == set(FIELDS)


def test_a_case_or_style_twin_is_one_clash_in_one_line(store: Path) -> None:
    path = store / "twin.jsonl"
    path.write_text(json.dumps(fact("medication", "m2", drug_name="x")) + "\n", encoding="utf-8")
    err = one_line_error(uac("ingest", str(path), cwd=store))
    assert "'drug_name'" in err and "'drugName'" in err and "twin.jsonl:1:" in err
    path.write_text(json.dumps(fact("FlightLeg", "f2", to="x")) + "\n", encoding="utf-8")
    err = one_line_error(uac("ingest", str(path), cwd=store))
    assert "'FlightLeg'" in err and "'flight_leg'" in err
    # within one event too
    path.write_text(json.dumps(fact("Call", "c", **{"from": "a", "from_": "b"})) + "\n")
    err = one_line_error(uac("ingest", str(path), cwd=store))
    assert "'from_'" in err and "'from'" in err


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("a\nb", "line-break character"),
        ("Bi\u202ell", "invisible"),
        ("x\u200b", "invisible"),
        ("tab\there", "control"),
        ("", "is empty"),
        ("x" * 65, "at most 64"),
        ("_private", "reserved"),
        ("model_dump", "reserved"),
        ("model dump", "reserved"),
        ("Key", "reserved"),
        ("VALID_FROM", "reserved"),
        ("valid-from", "reserved"),
    ],
)
def test_only_what_cannot_be_stored_or_breaks_uac_is_refused(
    tmp_path: Path, name: str, says: str
) -> None:
    with Workbench(tmp_path / "u.duckdb", user="u") as wb:
        with pytest.raises(EventError) as err:
            wb.ingest([fact("Note", "n", text="ok"), fact("Note", "m", **{name: 1})])
        message = str(err.value)
        assert says in message and message.startswith("<events>:2: ") and "\n" not in message
        assert wb.state.types == {}  # the whole batch was refused, nothing half-written


def test_a_hostile_name_stays_data_in_the_module(tmp_path: Path) -> None:
    names = ['x""" + __import__("os").system("touch CANARY") + """', "a\\", "');--", "ü" * 64]
    with Workbench(tmp_path / "u.duckdb", user="u") as wb:
        wb.ingest([fact("Note", "n", **{n: i for i, n in enumerate(names)})])
        code = wb.checkpoint().code
        back = parse_module(code)
        assert list(back.schema.types["Note"]) == names
        assert wb.sql("SELECT * FROM Note").columns[1:5] == names
    module = import_here(code, tmp_path)
    assert not (tmp_path / "CANARY").exists()
    (rec,) = module.records[module.Note]
    assert rec.model_dump(by_alias=True)[names[0]] == 0


def test_an_edit_of_the_rendered_code_round_trips_to_the_names_as_written(
    tmp_path: Path,
) -> None:
    with Workbench(tmp_path / "u.duckdb", user="u") as wb:
        wb.ingest([fact("medication", "m1", **{"from": "2025-01-01", "drugName": "ibu"})])
        wb.checkpoint()
        cell = wb.cell("medication")
        assert cell.startswith("class Medication(Record):") and "from_=date(2025, 1, 1)" in cell
        edited = cell.replace("from_=date(2025, 1, 1)", "from_=date(2025, 2, 1), dose_mg=5")
        plan, _ = wb.apply_edit(edited, version=1, part="medication")
        assert plan.updated == ["m1"]
        (ev,) = wb.log(kinds=["fact"])[-1:]
        assert ev.payload["fields"] == {"from": "2025-02-01", "dose_mg": 5}
        picked = wb.cell("medication", where="r.from_ == date(2025, 1, 1)")
        assert "key='m1'" in picked
        twin = cell.replace("drugName='ibu'", "drugName='ibu', drug_name='x'")
        with pytest.raises(
            CodeError, match="'drug_name' of medication differs from its field 'drugName'"
        ):
            wb.apply_edit(twin, version=1, part="medication")


def test_forget_and_a_fleet_round_trip_keep_the_names(store: Path) -> None:
    assert uac("export", "uac.duckdb", "fleet", cwd=store).returncode == 0
    fleet = uac("fleet", "sql", "fleet", 'SELECT "dose mg", "from" FROM medication', cwd=store)
    assert fleet.returncode == 0, fleet.stderr
    assert fleet.stdout.splitlines() == ["dose mg\tfrom", "200\t2025-01-01"]
    assert uac("import", "fleet", "b.duckdb", cwd=store).returncode == 0
    back = uac("--db", "b.duckdb", "sql", 'SELECT "Dosis-Größe" FROM medication', cwd=store)
    assert back.stdout.splitlines() == ["Dosis-Größe", "klein"]
    gone = uac("forget", "--record", "flight_leg", "f1", cwd=store)
    assert gone.returncode == 0, gone.stderr
    count = uac("sql", "SELECT count(*) FROM flight_leg", cwd=store)
    assert count.stdout.splitlines()[-1] == "0"
    assert uac("verify", cwd=store).returncode == 0


def test_a_notebook_edit_round_trips_to_the_names_as_written(ip: Any, tmp_path: Path) -> None:
    rows = [fact("medication", "m1", **{"from": "2025-01-01", "drugName": "ibu", "dose mg": 5})]
    (tmp_path / "names.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run(ip, "%uac open")
    run(ip, "%uac ingest names.jsonl")
    run(ip, "%uac checkpoint")
    text = edit_cell(ip, "%uac edit medication")
    assert text.startswith("%%uac cell --version 1 --part medication\nclass Medication(Record):")
    assert "dose_mg: Annotated[int | None, Field(alias='dose mg')]" in text
    edited = text.replace("from_=date(2025, 1, 1)", "from_=date(2025, 2, 1)")
    assert "medication, edited from checkpoint 1: changed m1" in run_out(ip, edited)
    wb = ip.user_ns["wb"]
    (ev,) = wb.log(kinds=["fact"])[-1:]
    assert ev.payload["type"] == "medication" and ev.payload["fields"] == {"from": "2025-02-01"}
    query = "%uac eval [(m.from_, m.dose_mg, m.fields()['dose mg']) for m in user.all(Medication)]"
    assert run(ip, query) == [[date(2025, 2, 1), 5, 5]]
    assert getattr(wb.state.get("medication", "m1"), "from") == date(2025, 2, 1)
    twin = edited.replace("drugName='ibu'", "drugName='ibu', drug_name='x'")
    message = usage_error(ip, twin)
    assert "'drug_name' of medication differs from its field 'drugName'" in message
