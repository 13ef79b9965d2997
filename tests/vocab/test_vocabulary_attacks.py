"""Outside attacks on issue 26 (vocabulary, names, typos): real DuckDB files, real uac
processes. Each case asserts the safe behaviour."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from uac_kernel.core.errors import EventError
from uac_kernel.core.names import quote_ident
from uac_kernel.workbench import Workbench

UAC = str(Path(sys.executable).with_name("uac"))


def ev(ts: str, type_: str, key_: str, **fields: Any) -> dict[str, Any]:
    return {"kind": "fact", "ts": ts, "op": "add", "type": type_, "key": key_, "fields": fields}


def voc(op: str, binding: dict[str, Any], ts: str = "2025-03-02") -> dict[str, Any]:
    return {"kind": "vocabulary", "ts": ts, "op": op, "binding": binding}


def log_bytes(wb: Workbench) -> list[tuple[Any, ...]]:
    return wb.store.con.execute("SELECT * FROM events ORDER BY 1").fetchall()


def run_uac(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "UAC_DB": str(db), "UAC_USER": "maya"}
    return subprocess.run(
        [UAC, "--db", str(db), "--user", "maya", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


HOSTILE_FIELDS = {
    "from": "2025-01-01",
    "class": "x",
    "list": 3,
    "__init__": "d",
    "Record": "r",
    "key": "k2",
    "fields": "f",
    "type": "t",
    "user": "u",
    "vocabulary": "v",
    "trip.start": "2025-02-01",
    "a" * 64: 1,
    "drugName": "x",
    "id": 9,
    "all": 1,
}


REFUSED_FIELDS = {"__init__", "key", "fields"}


@pytest.mark.parametrize("name", sorted(HOSTILE_FIELDS))
def test_hostile_field_name_is_kept_or_refused_in_one_line(tmp_path: Path, name: str) -> None:
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="maya") as wb:
        before = log_bytes(wb)
        try:
            wb.ingest([ev("2025-01-01T09:00:00", "Thing", "a", **{name: HOSTILE_FIELDS[name]})])
        except EventError as e:
            # only what would break uac is refused (docs/events.md "Names")
            assert name in REFUSED_FIELDS, e
            assert "\n" not in str(e)
            assert log_bytes(wb) == before
            return
        assert name not in REFUSED_FIELDS
        # kept as written: in the state, as an SQL column, and in code a clean interpreter runs
        (rec,) = wb.state.all("Thing")
        assert name in rec.fields()
        wb.sql(f'SELECT {quote_ident(name)} FROM "Thing"')
        wb.checkpoint()
        r = subprocess.run(
            [sys.executable, "-c", wb.code() + "\nprint('ok')"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stderr[-2000:]


@pytest.mark.parametrize("types", ["Record", "user", "vocabulary", "list", "events", "Trip"])
def test_type_name_colliding_with_namespace_or_table(tmp_path: Path, types: str) -> None:
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="maya") as wb:
        before = log_bytes(wb)
        try:
            wb.ingest([ev("2025-01-01T09:00:00", types, "a", note="n")])
        except EventError as e:
            assert "\n" not in str(e)
            assert log_bytes(wb) == before
            return
        wb.checkpoint()
        code = wb.code()
        r = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
        assert r.returncode == 0, r.stderr[-2000:]
        # the events table still reads as the log
        assert wb.store.con.execute("SELECT count(*) FROM events").fetchone()[0] >= 1


def test_typo_raises_with_did_you_mean_in_eval(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest(
            [
                ev("2025-01-01T09:00:00", "Trip", "a", international=True, to="Paris"),
                ev("2025-01-02T09:00:00", "Trip", "b", to="Rome"),
            ]
        )
        with pytest.raises(Exception) as caught:
            wb.eval("len([t for t in user.all(Trip) if t.internatonal])")
        assert "international" in str(caught.value)
        # a field the type has but this record never set reads None
        assert wb.eval("[t.international for t in user.all(Trip)]") in ([True, None], [None, True])
    r = run_uac(db, "eval", "[t.internatonal for t in user.all(Trip)]")
    assert r.returncode != 0 and "international" in (r.stdout + r.stderr)


@pytest.mark.parametrize(
    "binding",
    [
        {"concept": "trip.start", "type": "Trip", "field": "to"},  # text as a date
        {"concept": "trip.start", "type": "Trip", "field": "nope"},  # field it lacks
        {"concept": "trip.strat", "type": "Trip", "field": "leaves"},  # unknown concept
        {"role": "tripp", "type": "Trip"},  # unknown role
        {"concept": "trip.start", "type": "Trip", "field": "leaves", "reason": "x" * 2_000_000},
        {"concept": "trip.start", "type": "Trip", "field": "leaves", "score": float("nan")},
        {"concept": "trip.start", "type": "Trip", "field": "leaves", "score": True},
        {"concept": "trip.start", "type": "Trip", "field": "leaves", "author": "Person"},
        {"concept": "trip.start", "type": "Trip", "field": ["leaves"]},
        {"concept": "trip.start", "type": "Trip", "field": "leaves", "extra": "__import__('os')"},
    ],
)
def test_hostile_binding_refused_and_log_byte_identical(
    tmp_path: Path, binding: dict[str, Any]
) -> None:
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest([ev("2025-01-01T09:00:00", "Trip", "a", to="Paris", leaves="2025-06-01")])
        before = log_bytes(wb)
        vocab_before = [b for b in wb.vocab().bindings]
        with pytest.raises(EventError) as caught:
            wb.ingest([ev("2025-01-03T09:00:00", "Trip", "b", to="Rome"), voc("add", binding)])
        assert "\n" not in str(caught.value)
        assert len(str(caught.value)) < 2000
        assert log_bytes(wb) == before
        assert list(wb.vocab().bindings) == vocab_before


def test_retract_then_add_then_update_sequence_folds_same_on_reopen(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    b = {"concept": "trip.start", "type": "Trip", "field": "leaves"}
    with Workbench(db, user="maya") as wb:
        wb.ingest([ev("2025-01-01T09:00:00", "Trip", "a", to="Paris", leaves="2025-06-01")])
        wb.bind("Trip.leaves", "trip.start")
        wb.unbind("Trip.leaves", "trip.start")
        wb.bind("Trip.leaves", "trip.start")
        live = sorted(map(repr, wb.vocab().bindings))
        wb.checkpoint()
        code = wb.code()
    with Workbench(db, user="maya", read_only=True) as again:
        assert sorted(map(repr, again.vocab().bindings)) == live
        assert again.code() == code
    del b


def test_pet_passport_does_not_raise_critical_passport_alert(tmp_path: Path) -> None:
    """A dog's passport expiring before the owner's trip must not raise a passport alert."""
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest(
            [
                ev(
                    "2025-01-01T09:00:00",
                    "PetPassport",
                    "rex",
                    pet="Rex the dog",
                    expires="2025-03-01",
                    country="France",
                ),
                ev(
                    "2025-01-01T09:00:00",
                    "Trip",
                    "t",
                    destination="Japan",
                    country="Japan",
                    start="2025-04-01",
                    end="2025-04-10",
                    international=True,
                ),
                ev("2025-01-01T09:00:00", "Passport", "mine", expiry="2030-01-01", holder="me"),
            ]
        )
        bad = [
            a
            for a in wb.alerts()
            if a.severity == "critical" and any(e.type == "PetPassport" for e in a.evidence)
        ]
        assert not bad, [a.message for a in bad]


def test_client_medication_not_mine(tmp_path: Path) -> None:
    """A nurse's log of a client's medications must not raise a drug interaction for the user."""
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest(
            [
                ev(
                    "2025-01-01T09:00:00",
                    "ClientMedication",
                    "c1",
                    client="Mr Brown",
                    drug="sertraline 50mg",
                ),
                ev(
                    "2025-01-01T09:00:00",
                    "ClientMedication",
                    "c2",
                    client="Mrs Green",
                    drug="phenelzine",
                ),
            ]
        )
        bad = [a for a in wb.alerts() if a.rule == "drug_drug_interaction"]
        assert not bad, [a.message for a in bad]


def test_garden_zone_is_not_a_time_zone(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest(
            [
                ev(
                    "2025-01-01T09:00:00",
                    "Booking",
                    "a",
                    start="2025-05-01T10:00:00",
                    end="2025-05-01T11:00:00",
                    zone="shade bed",
                ),
                ev(
                    "2025-01-01T09:00:00",
                    "Booking",
                    "b",
                    start="2025-05-01T10:30:00",
                    end="2025-05-01T11:30:00",
                    zone="herb bed",
                ),
            ]
        )
        errs = [a for a in wb.alerts() if a.category == "rule_error"]
        assert not errs, [a.message for a in errs]


def test_two_date_fields_ambiguous_trip_start_is_held(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest(
            [
                ev(
                    "2025-01-01T09:00:00",
                    "Journey",
                    "a",
                    booked_on="2025-01-01",
                    departs_on="2025-06-01",
                    leaves_on="2025-06-02",
                    country="Japan",
                )
            ]
        )
        used = [
            b
            for b in wb.vocab().bindings
            if b.target == "trip.start" and b.type == "Journey" and b.status == "used"
        ]
        assert len(used) <= 1
        assert not any(b.field == "booked_on" for b in used)


def test_schema_blowup_bounded_proposals(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    events = []
    for t in range(200):
        fields = {f"due_date_{f}": "2025-01-01" for f in range(50)}
        events.append(ev("2025-01-01T09:00:00", f"T{t}", "k", **fields))
    with Workbench(db, user="maya") as wb:
        try:
            wb.ingest(events)
        except EventError as e:
            assert "\n" not in str(e)
            return
        n = wb.store.con.execute("SELECT count(*) FROM events WHERE kind='vocabulary'").fetchone()[
            0
        ]
        # at most a proposal or two a field, never quadratic
        assert n <= 2 * 200 * 51, n


def test_forget_text_in_binding_reason(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    secret = "Dr Quillfeather said so"
    with Workbench(db, user="maya") as wb:
        wb.ingest(
            [
                ev("2025-01-01T09:00:00", "Trip", "a", to="Paris", leaves="2025-06-01"),
                voc(
                    "add",
                    {"concept": "trip.start", "type": "Trip", "field": "leaves", "reason": secret},
                ),
            ]
        )
        wb.forget(text="Quillfeather")
        dump = json.dumps([list(map(str, r)) for r in log_bytes(wb)])
        assert "Quillfeather" not in dump
        wb.checkpoint()
        assert "Quillfeather" not in wb.code()


def test_cli_vocab_bind_hostile_args(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest([ev("2025-01-01T09:00:00", "Trip", "a", to="Paris", leaves="2025-06-01")])
        before = log_bytes(wb)
    for args in (
        ["Trip.leaves;DROP TABLE events", "trip.start"],
        ["Trip.", "trip.start"],
        [".leaves", "trip.start"],
        ["Trip.leaves", "trip."],
        ["Trip.leaves", "__import__('os').system('id')"],
        ["Trip.le\x1baves", "x"],
    ):
        r = run_uac(db, "vocab", "bind", *args)
        assert r.returncode != 0, args
        assert "Traceback" not in r.stderr, r.stderr[-1500:]
    with Workbench(db, user="maya") as wb:
        assert log_bytes(wb) == before


def test_keyword_field_eval_and_sql(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest([ev("2025-01-01T09:00:00", "MoneyMove", "a", **{"from": "acct1", "amount": 10})])
        assert wb.eval("[m.from_ for m in user.all(MoneyMove)]") == ["acct1"]
    r = run_uac(db, "sql", 'SELECT "from" FROM "MoneyMove"')
    assert r.returncode == 0 and "acct1" in r.stdout, r.stdout + r.stderr


def test_case_only_clash_named_in_one_line(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="maya") as wb:
        with pytest.raises(EventError) as caught:
            wb.ingest([ev("2025-01-01T09:00:00", "Med", "a", drugName="x", drug_name="y")])
        assert "\n" not in str(caught.value)
        assert "drugName" in str(caught.value) and "drug_name" in str(caught.value)


def test_control_chars_in_reason_never_reach_a_terminal_raw(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest(
            [
                ev("2025-01-01T09:00:00", "Trip", "a", to="Paris", leaves="2025-06-01"),
                voc(
                    "add",
                    {
                        "concept": "trip.start",
                        "type": "Trip",
                        "field": "leaves",
                        "reason": "a\x00b\x1b[31mRED\u202eevil",
                    },
                ),
            ]
        )
        wb.checkpoint()
        code = wb.code()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    out = run_uac(db, "vocab")
    assert out.returncode == 0
    assert "\x1b" not in out.stdout and "\x00" not in out.stdout and "\u202e" not in out.stdout


def test_cli_binds_a_field_literally_named_like_a_concept(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest(
            [
                ev(
                    "2025-01-01T09:00:00",
                    "Journey",
                    "a",
                    **{"trip.start": "2025-06-01", "whereto": "Japan"},
                )
            ]
        )
    r = run_uac(db, "vocab", "bind", "Journey.trip.start", "trip.start")
    assert r.returncode == 0, r.stderr
    with Workbench(db, user="maya", read_only=True) as wb:
        assert any(
            b.type == "Journey"
            and b.field == "trip.start"
            and b.target == "trip.start"
            and b.author == "person"
            for b in wb.vocab().bindings
        )
