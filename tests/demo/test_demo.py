"""The seeded demo user: determinism, format, a valid op sequence and the planted stories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest

from uac_kernel.demo.life import demo_events, write_demo_jsonl
from uac_kernel.demo.timeline import DEMO_USER

Event = dict[str, object]
EVENTS = demo_events()
FACTS = [e for e in EVENTS if e["kind"] == "fact"]
UTTERANCES = [e for e in EVENTS if e["kind"] == "utterance"]
COMMITMENTS = ("Appointment", "Meeting", "Flight")


def fields_of(event: Event) -> dict[str, object]:
    value = event.get("fields", {})
    assert isinstance(value, dict)
    return value


def fold(events: list[Event]) -> tuple[dict[tuple[str, str], dict[str, object]], list[str]]:
    """Current records by (type, key), and a list of problems with the op sequence."""
    live: dict[tuple[str, str], dict[str, object]] = {}
    seen: set[tuple[str, str]] = set()
    problems = []
    for n, event in enumerate(events):
        if event["kind"] != "fact":
            continue
        ident = (str(event["type"]), str(event["key"]))
        op = event["op"]
        if op == "add":
            if ident in seen:
                problems.append(f"#{n}: {ident} added again")
            seen.add(ident)
            live[ident] = dict(fields_of(event))
        elif ident not in live:
            problems.append(f"#{n}: {op} of {ident}, which is not current")
        elif op == "update":
            live[ident].update(fields_of(event))
        elif op == "retract":
            if not str(event.get("reason", "")).strip():
                problems.append(f"#{n}: retract of {ident} without a reason")
            del live[ident]
        else:
            problems.append(f"#{n}: unknown op {op!r}")
    return live, problems


def current(type_: str) -> dict[str, dict[str, object]]:
    state, _ = fold(EVENTS)
    return {key: fields for (t, key), fields in state.items() if t == type_}


def added(key: str) -> Event:
    return next(e for e in FACTS if e["key"] == key and e["op"] == "add")


def day(value: object) -> date:
    return date.fromisoformat(str(value))


def kind_of(value: object) -> str:
    """The field type the schema would infer from a JSON value."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, list):
        return "list[str]" if value and all(isinstance(v, str) for v in value) else "bad list"
    if isinstance(value, str):
        for parse, name in ((date.fromisoformat, "date"), (datetime.fromisoformat, "datetime")):
            try:
                parse(value)
            except ValueError:
                continue
            return name if len(value) in (10, 19) else "odd iso"
        return "str"
    return f"bad {type(value).__name__}"


def test_same_seed_same_events_and_other_seeds_differ() -> None:
    assert demo_events() == EVENTS
    assert demo_events(seed=7) == EVENTS
    assert demo_events(seed=8) != EVENTS


def test_same_events_in_another_process_with_another_hash_seed() -> None:
    code = "import json; from uac_kernel.demo.life import demo_events; print(json.dumps(demo_events()))"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout) == EVENTS


def test_size_and_variety() -> None:
    types = Counter(str(e["type"]) for e in FACTS if e["op"] == "add")
    assert len(EVENTS) >= 500
    assert len(types) >= 8
    assert {"Allergy", "Medication", "Trip", "Transaction", "Appointment", "Meeting"} <= set(types)
    assert 250 <= types["Transaction"] <= 400
    assert 10 <= types["Trip"] <= 20
    assert types["Workout"] >= 100 and types["Meal"] >= 40
    assert 80 <= len(UTTERANCES) <= 150
    ops = Counter(str(e["op"]) for e in FACTS)
    assert ops["update"] >= 10 and ops["retract"] >= 3


def test_trips_span_both_years_and_both_kinds() -> None:
    trips = current("Trip").values()
    years = {day(t["start"]).year for t in trips}
    assert years == {2024, 2025}
    assert sum(bool(t["international"]) for t in trips) >= 6
    assert sum(not t["international"] for t in trips) >= 3


def test_timestamps_ascending_and_inside_the_window() -> None:
    stamps = [datetime.fromisoformat(str(e["ts"])) for e in EVENTS]
    assert stamps == sorted(stamps)
    assert stamps[0] >= datetime(2024, 1, 1)
    assert stamps[-1] < datetime(2025, 12, 31)


def test_custom_start_and_days() -> None:
    events = demo_events(seed=3, start=date(2030, 6, 1), days=120)
    stamps = [datetime.fromisoformat(str(e["ts"])) for e in events]
    assert stamps == sorted(stamps)
    assert datetime(2030, 6, 1) <= stamps[0] and stamps[-1] < datetime(2030, 9, 29)
    assert fold(events)[1] == []
    with pytest.raises(ValueError, match="days"):
        demo_events(days=0)


def test_every_update_and_retract_targets_a_current_key() -> None:
    _, problems = fold(EVENTS)
    assert problems == []
    for seed in range(12):
        assert fold(demo_events(seed=seed))[1] == [], seed


def test_event_shapes() -> None:
    for e in UTTERANCES:
        assert set(e) == {"kind", "ts", "speaker", "text", "source"}
        assert e["speaker"] == "user" and str(e["source"]).startswith("chat-")
    for e in FACTS:
        extra = {"fields"} if e["op"] in ("add", "update") else {"reason"}
        assert set(e) == {"kind", "ts", "op", "type", "key", "source"} | extra
        assert e["key"] and str(e["key"]) == str(e["key"]).strip().lower()
    sources = [e["source"] for e in EVENTS]
    assert len(set(sources)) == len(sources)
    assert FACTS[0]["source"] == "demo-fact-0001"


def test_field_types_are_consistent_per_type_and_field() -> None:
    seen: dict[tuple[str, str], set[str]] = {}
    for e in FACTS:
        for name, value in fields_of(e).items():
            seen.setdefault((str(e["type"]), name), set()).add(kind_of(value))
    mixed = {field: kinds for field, kinds in seen.items() if len(kinds) != 1}
    assert mixed == {}
    assert all(not next(iter(k)).startswith(("bad", "odd")) for k in seen.values())
    assert seen[("Transaction", "amount")] == {"float"}
    assert seen[("Workout", "minutes")] == {"int"}
    assert seen[("Trip", "start")] == {"date"}
    assert seen[("Meeting", "start")] == {"datetime"}
    assert seen[("Trip", "companions")] == {"list[str]"}
    assert seen[("Medication", "active")] == {"bool"}


def test_json_serialisable_and_written_one_per_line(tmp_path: Path) -> None:
    path = tmp_path / "demo.jsonl"
    assert write_demo_jsonl(path) == len(EVENTS)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(EVENTS)
    assert [json.loads(line) for line in lines] == EVENTS


def test_hostile_strings_present() -> None:
    texts = [str(e["text"]) for e in UTTERANCES]
    blob = json.dumps(EVENTS, ensure_ascii=False)
    assert any('"' in t for t in texts)
    assert any("\\" in t for t in texts)
    assert any("\n" in t for t in texts)
    assert any("Zürich" in t for t in texts)
    assert any("東京" in t for t in texts)
    assert any("\"); import os; os.system('x') #" in t for t in texts)
    assert "東京奇譚集" in blob and "Sam O'Neill" in blob


# --------------------------------------------------------------------------- planted stories


def test_penicillin_allergy_precedes_amoxicillin_by_six_months() -> None:
    allergy = added("allergy-penicillin")
    medication = added("med-2024-11-amoxicillin")
    assert allergy["type"] == "Allergy" and medication["type"] == "Medication"
    assert fields_of(allergy)["substance"] == "penicillin"
    assert fields_of(medication)["name"] == "amoxicillin"
    gap = day(str(medication["ts"])[:10]) - day(str(allergy["ts"])[:10])
    assert gap >= timedelta(days=183)
    assert "allergy-penicillin" in current("Allergy")


def test_statin_and_grapefruit_are_both_current() -> None:
    statin = current("Medication")["med-atorvastatin"]
    assert statin["dose_mg"] == 20.0 and statin["active"] is True
    assert current("FoodHabit")["habit-grapefruit-juice"]["item"] == "grapefruit juice"


def test_exactly_one_current_residence_in_zurich() -> None:
    residences = current("Residence")
    assert list(residences) == ["residence-zurich"]
    history = [e for e in FACTS if e["key"] == "residence-manchester"]
    assert [e["op"] for e in history] == ["add", "update", "retract"]


def test_passport_expires_within_six_months_of_an_international_trip() -> None:
    expires = day(current("Passport")["passport-uk"]["expires"])
    tokyo = current("Trip")["trip-2025-10-tokyo"]
    assert tokyo["international"] is True and day(tokyo["end"]) == date(2025, 10, 14)
    assert timedelta(0) < expires - day(tokyo["end"]) < timedelta(days=183)
    assert "trip-2025-02-reykjavik" not in current("Trip")


def test_only_the_planted_commitments_overlap() -> None:
    spans = []
    for type_ in COMMITMENTS:
        for key, fields in current(type_).items():
            start = datetime.fromisoformat(str(fields["start"]))
            end = datetime.fromisoformat(str(fields["end"]))
            assert start < end, key
            spans.append((start, end, key))
    spans.sort()
    overlaps = [(a[2], b[2]) for i, a in enumerate(spans) for b in spans[i + 1 :] if b[0] < a[1]]
    assert overlaps == [("appt-2025-04-15-dentist", "mtg-2025-04-15-design-review")]


def test_return_window_closes_just_after_the_end() -> None:
    last_day = date(2025, 12, 30)
    closing = {
        key: day(fields["return_by"])
        for key, fields in current("Purchase").items()
        if day(fields["return_by"]) >= last_day - timedelta(days=7)
    }
    assert closing == {"purchase-2025-12-noise-cancelling-headphones": date(2026, 1, 2)}


def test_corrections_are_present() -> None:
    retracts = {str(e["key"]): str(e["reason"]) for e in FACTS if e["op"] == "retract"}
    assert "cancelled" in retracts["trip-2025-02-reykjavik"]
    assert any("entered twice" in r for k, r in retracts.items() if k.startswith("tx-"))
    netflix = current("Subscription")["sub-netflix"]
    assert (netflix["price"], netflix["currency"]) == (18.9, "CHF")
    assert current("Passport")["passport-uk"]["holder"] == DEMO_USER
