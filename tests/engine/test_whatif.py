"""What-ifs (issue 16): hypothetical events folded onto a layer, never appended.

The two contracts: a what-if predicts exactly what ``ingest`` of the same events would do
(records, alerts), checked against a real ingest into a copy of the store; and it leaves the
workbench's state, its rules and the store file as they were — even when it fails.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers.events import add, clock, retract, update
from helpers.store import files
from helpers.whatif import RULES, USER, dump, store_with

from uac_kernel.core.errors import ConstraintError, EventError, QueryError
from uac_kernel.engine.whatif import events_from_text
from uac_kernel.rules.engine import Finding, rule
from uac_kernel.state.fold import State
from uac_kernel.state.query import UserView
from uac_kernel.workbench import Workbench


def history(rng: random.Random, n: int) -> list[dict[str, Any]]:
    """A seeded random history over types the library's rules read."""
    day = datetime(2025, 1, 1, 9)
    live: dict[str, set[str]] = {}
    events: list[dict[str, Any]] = []
    for _ in range(n):
        day += timedelta(hours=rng.choice([1, 5, 30]))
        events.append(change(rng, day, live))
    return events


def change(rng: random.Random, when: datetime, live: dict[str, set[str]]) -> dict[str, Any]:
    ts = when.isoformat()
    kind = rng.choice(["Allergy", "Medication", "Medication", "Trip", "Trip", "Passport"])
    keys = live.setdefault(kind, set())
    op = rng.choice(["add", "add", "update", "retract"]) if keys else "add"
    if op == "retract":
        key = rng.choice(sorted(keys))
        keys.discard(key)
        return retract(ts, kind, key)
    key = rng.choice(sorted(keys)) if op == "update" else f"{kind.lower()}-{rng.randrange(10**6)}"
    fields: dict[str, Any]
    if kind == "Allergy":
        fields = {"substance": rng.choice(["penicillin", "sulfa", "aspirin"])}
    elif kind == "Medication":
        fields = {"name": rng.choice(["amoxicillin", "ibuprofen", "warfarin", "bactrim"])}
        if rng.random() < 0.3:
            fields["dose"] = rng.choice(["500mg", "1g"])
    elif kind == "Trip":
        start = when.date() + timedelta(days=rng.randrange(-20, 90))
        fields = {"destination": rng.choice(["Tokyo", "Lyon", "Lima"]), "start": start.isoformat()}
        if rng.random() < 0.6:
            fields["end"] = (start + timedelta(days=rng.randrange(1, 20))).isoformat()
        fields["international"] = True
    else:
        expiry = when.date() + timedelta(days=rng.randrange(-30, 400))
        fields = {"expiry": expiry.isoformat(), "country": "France"}
    if op == "add":
        keys.add(key)
        return add(ts, kind, key, **fields)
    return update(ts, kind, key, **fields)


def later_batch(rng: random.Random, events: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """``n`` more events that fit after ``events`` (their keys, their times)."""
    live: dict[str, set[str]] = {}
    for ev in events:
        keys = live.setdefault(ev["type"], set())
        (keys.discard if ev["op"] == "retract" else keys.add)(ev["key"])
    when = datetime.fromisoformat(events[-1]["ts"])
    out = []
    for _ in range(n):
        when += timedelta(hours=rng.choice([0, 2, 48]))
        out.append(change(rng, when, live))
    return out


def predicted(w: Any) -> dict[str, Any]:
    return {
        "raised": sorted(a.id for a in w.raised),
        "cleared": sorted(a.id for a in w.cleared),
        "updated": sorted((a.id, a.severity) for a in w.updated),
        "records": sorted((r.type, r.key, r.change, repr(r.after)) for r in w.records),
    }


def actual(wb: Workbench, batch: list[dict[str, Any]]) -> dict[str, Any]:
    """What a real ingest of ``batch`` did, in the terms of a what-if's report."""
    from uac_kernel.engine.whatif import own_fields

    touched = {(e["type"], e["key"]) for e in batch}
    before = {t: own_fields(wb.state.get(*t)) for t in touched}
    report = wb.ingest(batch)
    records = []
    for t in touched:
        was, now = before[t], own_fields(wb.state.get(*t))
        if was is None and now is None:
            continue
        change = "added" if was is None else "retracted" if now is None else "changed"
        if change == "changed" and was == now:
            continue
        records.append((*t, change, repr(now)))
    return {
        "raised": sorted(a.id for a in report.raised),
        "cleared": sorted(a.id for a in report.cleared),
        "updated": sorted((a.id, a.severity) for a in report.updated),
        "records": sorted(records),
    }


# -- a what-if predicts ingest, and changes nothing -------------------------------------------


@pytest.mark.parametrize("seed", range(8))
def test_a_whatif_predicts_ingest_and_leaves_everything_as_it_was(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    events = history(rng, 120)
    db = store_with(tmp_path, events)
    twin = tmp_path / "b.duckdb"
    shutil.copyfile(db, twin)
    batch = later_batch(rng, events, rng.choice([1, 3, 12]))
    stored = files(db)

    with Workbench(twin, user=USER, rules=RULES, read_only=True) as fresh:
        untouched = dump(fresh)
    with Workbench(db, user=USER, rules=RULES) as wb:
        w = wb.whatif(batch, expressions=[])
        assert files(db) == stored
        # a second what-if over the same state sees the same state
        assert predicted(wb.whatif(batch, expressions=[])) == predicted(w)
        assert dump(wb) == untouched
    assert files(db) == stored

    with Workbench(twin, user=USER, rules=RULES) as real:
        assert predicted(w) == actual(real, batch)


def test_the_store_is_byte_for_byte_unchanged_after_any_whatif(tmp_path: Path) -> None:
    rng = random.Random(7)
    events = history(rng, 60)
    db = store_with(tmp_path, events)
    stored = files(db)
    with Workbench(db, user=USER, rules=RULES) as wb:
        wb.eval("len(user.all('Medication'))")
        wb.whatif(later_batch(rng, events, 5))
        wb.whatif([add("2025-02-01", "Medication", "early", name="x")], as_of=events[30]["ts"])
        with pytest.raises(EventError, match="field 'op'"):
            wb.whatif([{**later_batch(rng, events, 1)[0], "op": "merge"}])
        with pytest.raises(EventError):  # valid alone, but contradicts the log
            wb.whatif(
                [
                    add("2026-01-01", "Medication", "m", name="x"),
                    add("2026-01-01", "Medication", "m", name="y"),
                ]
            )
        with pytest.raises(EventError, match="'no-such-trip' does not exist"):
            wb.whatif([update("2026-01-01", "Trip", "no-such-trip", destination="Oslo")])
        with pytest.raises(EventError):
            wb.whatif(tmp_path / "missing.jsonl")
        cell = wb.edit_cell("Medication")
        plan, w = wb.preview_edit(
            cell.code.replace("'", "'", 1), version=cell.version, part="Medication"
        )
        assert w.new == len(plan.facts)
        assert files(db) == stored
    # closing writes nothing either (no event came, so no snapshot is due)
    assert files(db) == stored


def test_a_whatif_on_a_read_only_store(tmp_path: Path) -> None:
    db = store_with(tmp_path, [add("2025-03-01", "Allergy", "pen", substance="penicillin")])
    stored = files(db)
    with Workbench(db, user=USER, read_only=True) as wb:
        w = wb.whatif([add("2025-04-01", "Medication", "amox", name="amoxicillin")])
        assert [a.rule for a in w.raised] == ["drug_allergy_cross_reactivity"]
        assert w.raised[0].severity == "critical"
    assert files(db) == stored


# -- the report ---------------------------------------------------------------------------------


@pytest.fixture
def gp(tmp_path: Path) -> Iterator[Workbench]:
    db = store_with(
        tmp_path,
        [
            add("2025-03-01", "Allergy", "pen", substance="penicillin", reaction="hives"),
            add("2025-04-01", "Medication", "ibu", name="ibuprofen"),
            add("2025-05-01", "Trip", "tokyo", destination="Tokyo", start="2025-06-01"),
            add(
                "2025-05-01",
                "Trip",
                "lyon",
                destination="Lyon",
                start="2025-07-01",
                end="2025-07-03",
            ),
        ],
    )
    with Workbench(db, user=USER, rules=RULES) as wb:
        yield wb


def test_report_records_alerts_schema_and_answers(gp: Workbench) -> None:
    gp.eval("sorted(m.name for m in user.all('Medication'))")
    gp.eval("len(user.all('Trip'))")
    amox = add("2025-05-02", "Medication", "amox", name="amoxicillin", dose="500mg")
    w = gp.whatif([amox, update("2025-05-02", "Trip", "tokyo", end="2025-06-09")])
    assert w.new == 2 and w.skipped == 0
    assert w.schema == ["new field Medication.dose (str)"]
    assert [(r.type, r.key, r.change, r.fields) for r in w.records] == [
        ("Medication", "amox", "added", ("name", "dose")),
        ("Trip", "tokyo", "changed", ("end",)),
    ]
    assert w.records[1].before is not None and "end" not in w.records[1].before
    assert w.records[1].after is not None and w.records[1].after["end"] == date(2025, 6, 9)
    (raised,) = [a for a in w.raised if a.rule == "drug_allergy_cross_reactivity"]
    assert {(e.type, e.key) for e in raised.evidence} == {
        ("Allergy", "pen"),
        ("Medication", "amox"),
    }
    # the new event's log position is past the head: it is in no log
    assert w.first_seq == gp.state.seq + 1
    assert max(s for e in raised.evidence for s in e.sources) >= w.first_seq
    # the trip now has an end: the "no end" alert of the notebook rule would clear
    (cleared,) = w.cleared
    assert cleared.rule == "trips_ahead" and "tokyo" in cleared.message
    assert "changed: Trip 'tokyo'" in cleared.reason
    assert [(a.label, a.before, a.after, a.changed) for a in w.answers] == [
        (
            "sorted(m.name for m in user.all('Medication'))",
            ["ibuprofen"],
            ["amoxicillin", "ibuprofen"],
            True,
        ),
        ("len(user.all('Trip'))", 2, 2, False),
    ]
    text = w.text()
    assert "would raise [critical] drug_allergy_cross_reactivity" in text
    assert "nothing was appended" in w.summary()
    data = w.to_dict()
    assert data["records"][1]["after"]["end"] == "2025-06-09"
    assert data["answers"][0]["changed"] is True
    assert [e["key"] for e in data["events"]] == ["amox", "tokyo"]


def test_apply_appends_the_same_events_through_ingest(gp: Workbench) -> None:
    w = gp.whatif([add("2025-05-02", "Medication", "amox", name="amoxicillin")])
    n = len(gp.log())
    report = gp.apply_whatif(w)
    assert report.appended == 1
    assert [a.id for a in report.raised] == [a.id for a in w.raised]
    assert gp.state.get("Medication", "amox") is not None
    # the raised alert was logged: one fact, one alert event
    assert len(gp.log()) == n + 2
    assert gp.apply_whatif(w).appended == 0  # already in the log: skipped, as ingest does
    again = gp.whatif(w.events)
    assert (again.new, again.skipped, again.records) == (0, 1, [])


def test_apply_checks_the_events_against_the_log_as_it_is_now(gp: Workbench) -> None:
    w = gp.whatif([update("2025-05-03", "Medication", "ibu", name="naproxen")])
    gp.ingest([retract("2025-05-02", "Medication", "ibu")])
    with pytest.raises(EventError, match="'ibu' was retracted at 2025-05-02"):
        gp.apply_whatif(w)


def test_a_whatif_of_another_user_is_not_applied(gp: Workbench, tmp_path: Path) -> None:
    w = gp.whatif([add("2025-05-02", "Medication", "amox", name="amoxicillin")])
    with (
        Workbench(tmp_path / "other.duckdb", user="sam") as other,
        pytest.raises(QueryError, match="user 'maya'"),
    ):
        other.apply_whatif(w)


def test_a_constraint_in_a_whatif_runs_its_rule_on_the_trial_only(gp: Workbench) -> None:
    rules = sorted(gp.runner.rules)
    w = gp.whatif(
        [
            {
                "kind": "constraint",
                "ts": "2025-05-02T09:00:00",
                "op": "add",
                "key": "no-nsaids",
                "constraint": {
                    "kind": "not_while",
                    "title": "No ibuprofen with an allergy",
                    "active": {"type": "Allergy"},
                    "forbidden": {"type": "Medication", "mentions": ["ibuprofen"]},
                },
            }
        ]
    )
    assert sorted(gp.runner.rules) == rules and gp.constraints() == []
    assert [a.rule for a in w.raised] and all("no" in a.rule for a in w.raised), w.text()


def test_a_bad_constraint_is_refused_as_ingest_refuses_it(gp: Workbench) -> None:
    with pytest.raises((ConstraintError, EventError)):
        gp.whatif(
            [
                {
                    "kind": "constraint",
                    "ts": "2025-05-02",
                    "op": "add",
                    "key": "x",
                    "constraint": {"kind": "no-such-kind"},
                }
            ]
        )


def test_an_interrupted_whatif_leaves_the_state_as_it_was(tmp_path: Path) -> None:
    @rule(watch=["Medication"])
    def stops(user: UserView) -> Iterator[Finding]:
        if any(m.name == "stop" for m in user.all("Medication")):
            raise KeyboardInterrupt
        return iter(())

    db = store_with(tmp_path, [add("2025-03-01", "Medication", "ibu", name="ibuprofen")])
    stored = files(db)
    with Workbench(db, user=USER, rules=[*RULES, stops]) as wb:
        before = dump(wb)
        with pytest.raises(KeyboardInterrupt):
            wb.whatif(
                [
                    add("2025-04-01", "Medication", "s", name="stop"),
                    retract("2025-04-01", "Medication", "ibu"),
                ]
            )
        assert dump(wb) == before
        assert wb.eval("[m.key for m in user.all('Medication')]") == ["ibu"]
    assert files(db) == stored


def test_session_expressions_and_questions_are_rerun(gp: Workbench) -> None:
    gp.eval("len(user.all('Medication'))")
    gp.eval("len(user.all('Trip'))")
    gp.eval("len(user.all('Medication'))")  # asked again: once, as the latest
    assert [e for _, e in gp.expressions] == [
        "len(user.all('Trip'))",
        "len(user.all('Medication'))",
    ]
    w = gp.whatif([add("2025-05-02", "Medication", "amox", name="amoxicillin")])
    assert [(a.before, a.after) for a in w.answers] == [(2, 2), (1, 2)]
    assert gp.whatif(w.events, expressions=[]).answers == []
    named = gp.whatif(
        w.events, expressions={"meds": "len(user.all('Medication'))", "broken": "1/0"}
    )
    assert [(a.label, a.after) for a in named.answers] == [("meds", 2), ("broken", None)]
    assert "ZeroDivisionError" in named.answers[1].error_after
    assert not named.answers[1].changed


def test_an_answer_reads_a_field_the_trial_adds_and_names_a_misspelt_one(gp: Workbench) -> None:
    amox = add("2025-05-02", "Medication", "amox", name="amoxicillin", dose="500mg")
    w = gp.whatif(
        [amox],
        expressions={
            "doses": "[m.dose for m in user.all('Medication')]",
            "typo": "[m.nmae for m in user.all('Medication')]",
        },
    )
    doses, typo = w.answers
    # before, Medication has no field dose; in the trial it has, unset on ibuprofen
    assert doses.error_before.startswith("Medication has no field 'dose'. Its fields: name,")
    assert doses.after == [None, "500mg"] and doses.error_after == ""
    assert (
        typo.error_before
        == typo.error_after
        == ("Medication has no field 'nmae'. Did you mean 'name'?")
    )


# -- the past -------------------------------------------------------------------------------------


def test_a_past_whatif_replays_the_later_log_and_draws_both_timelines(tmp_path: Path) -> None:
    db = store_with(
        tmp_path,
        [
            add("2025-01-10", "Medication", "amox", name="amoxicillin"),
            clock("2025-02-01"),
            retract("2025-04-01", "Medication", "amox"),
            add("2025-06-01", "Allergy", "pen", substance="penicillin"),
            add("2025-07-01", "Medication", "pcn", name="penicillin v"),
        ],
    )
    stored = files(db)
    with Workbench(db, user=USER, rules=RULES) as wb:
        # had the allergy been known in January, the amoxicillin would have been flagged then
        w = wb.whatif(
            [add("2025-01-05", "Allergy", "pen-early", substance="penicillin")],
            as_of="2025-01-05T12:00:00",
            progress=False,
        )
    assert files(db) == stored
    assert w.as_of == datetime(2025, 1, 5, 12)
    spans = {
        (s.run, s.message.split(" ")[1], s.start.date(), s.end and s.end.date())
        for s in w.timeline
        if s.rule == "drug_allergy_cross_reactivity"
    }
    assert ("what-if", "'amox'", date(2025, 1, 10), date(2025, 4, 1)) in spans
    assert not any(run == "real" and key == "'amox'" for run, key, *_ in spans)
    # the real run raises the July one too, from the June allergy
    assert any(run == "real" and key == "'pcn'" for run, key, *_ in spans)
    assert [(r.type, r.key, r.change) for r in w.records] == [("Allergy", "pen-early", "added")]
    assert w.conflicts == []


def test_a_past_whatif_lists_later_events_that_no_longer_apply(tmp_path: Path) -> None:
    db = store_with(
        tmp_path,
        [
            add("2025-01-10", "Trip", "lyon", destination="Lyon", start="2025-02-01"),
            update("2025-03-01", "Trip", "lyon", end="2025-02-08"),
            # logged late, dated early: the log's order is not its times' order
            add("2025-01-20", "Passport", "fr", expiry="2030-01-01", country="France"),
        ],
    )
    with Workbench(db, user=USER, rules=RULES) as wb:
        head = wb.state.seq
        w = wb.whatif([retract("2025-02-15", "Trip", "lyon")], as_of="2025-02-15", progress=False)
    (conflict,) = w.conflicts
    assert "update Trip 'lyon'" in conflict and "not a current record" in conflict
    assert int(conflict.split()[2]) <= head  # named by its seq in the real log
    assert [(r.key, r.change) for r in w.records] == [("lyon", "retracted")]


def test_a_past_whatif_checks_its_events_against_the_state_at_that_moment(
    tmp_path: Path,
) -> None:
    db = store_with(tmp_path, [add("2025-06-01", "Medication", "ibu", name="ibuprofen")])
    with (
        Workbench(db, user=USER) as wb,
        pytest.raises(EventError, match="'ibu' does not exist"),
    ):
        wb.whatif([retract("2025-03-01", "Medication", "ibu")], as_of="2025-03-01")


# -- cell text ----------------------------------------------------------------------------------


def test_events_from_text_reads_jsonl_json_and_yaml() -> None:
    jsonl = (
        '{"kind": "fact", "ts": "2025-01-01", "op": "add", "type": "T", "key": "a", '
        '"fields": {"x": 1}}\n\n{"kind": "utterance", "ts": "2025-01-01", "speaker": "u", '
        '"text": "hi"}\n'
    )
    assert [e["kind"] for e in events_from_text(jsonl)] == ["fact", "utterance"]
    assert len(events_from_text("[" + jsonl.strip().replace("\n\n", ",") + "]")) == 2
    yaml_list = """
- kind: fact
  ts: 2025-01-01
  op: add
  type: Medication
  key: amox
  fields: {name: amoxicillin, active: true, country: NO, start: 2025-02-01}
"""
    (ev,) = events_from_text(yaml_list)
    # YAML dates come back as ISO text, and only true/false are booleans
    assert ev["ts"] == "2025-01-01" and ev["fields"]["start"] == "2025-02-01"
    assert ev["fields"]["active"] is True and ev["fields"]["country"] == "NO"
    stream = (
        "kind: utterance\nts: 2025-01-01\nspeaker: u\ntext: a\n---\nkind: utterance\n"
        "ts: 2025-01-02\nspeaker: u\ntext: b\n"
    )
    assert [e["text"] for e in events_from_text(stream)] == ["a", "b"]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "no events"),
        ('{"kind": "fact"}\n{"kind": ', r"<cell>:2: invalid JSON"),
        ("- &a {kind: fact}\n- *a\n", "alias"),
        ("kind: fact\nkind: utterance\n", "given twice"),
        ("[" * 100 + "]" * 100, "nest more than"),
        ("- " * 100 + "x", "nest more than"),
        ("kind: [unclosed\n", "invalid YAML"),
    ],
)
def test_events_from_text_refuses_bad_text_in_one_line(text: str, match: str) -> None:
    with pytest.raises(EventError, match=match) as err:
        events_from_text(text, "<cell>")
    assert "\n" not in str(err.value)


def test_a_trial_never_writes_its_base(gp: Workbench) -> None:
    from uac_kernel.engine.whatif import logged
    from uac_kernel.ingest.adapters import read_input
    from uac_kernel.state.trial import Trial

    base: State = gp.state
    before = dump(gp)
    trial = Trial(base)
    trial.apply_all(
        logged(
            gp._plan(
                base,
                list(
                    read_input(
                        [
                            add("2025-05-02", "Medication", "ibu2", name="x", brand="y"),
                            update("2025-05-02", "Medication", "ibu", name="naproxen"),
                            retract("2025-05-02", "Trip", "tokyo"),
                            add(
                                "2025-05-03",
                                "Trip",
                                "tokyo",
                                destination="Oslo",
                                start="2025-05-04",
                            ),
                            add("2025-05-03", "Visa", "v", country="Japan"),
                        ],
                        "<t>",
                        "jsonl",
                        None,
                        gp.limits,
                    )
                ),
            ),
            base.seq,
        )
    )
    view = UserView(trial)
    assert [t.destination for t in view.all("Trip")] == ["Lyon", "Oslo"]
    assert [m.key for m in view.all("Medication")] == ["ibu", "ibu2"]
    assert view.all("Medication")[0].name == "naproxen"
    assert len(view.history("Trip")) == 3 and len(trial.types["Trip"].order) == 3
    assert [t.key for t in view.where("Trip", "start", since=date(2025, 5, 1))] == [
        "tokyo",
        "lyon",
    ]
    assert [t.key for t in view.unset("Trip", "end")] == ["tokyo"]
    assert view.all("Medication")[1].brand == "y" and view.all("Medication")[0].brand is None
    assert "Visa" not in base.types and "brand" not in base.schema.types["Medication"]
    assert dump(gp) == before


def test_an_edited_cell_previews_as_a_whatif_before_it_is_applied(gp: Workbench) -> None:
    cell = gp.edit_cell("Medication")
    edited = cell.code.replace("'ibuprofen'", "'naproxen'")
    assert edited != cell.code
    n = len(gp.log())
    plan, w = gp.preview_edit(edited, version=cell.version, part="Medication")
    assert len(gp.log()) == n
    assert [(r.key, r.change, r.before, r.after) for r in w.records] == [
        ("ibu", "changed", {"name": "ibuprofen"}, {"name": "naproxen"})
    ]
    applied, report = gp.apply_edit(edited, version=cell.version, part="Medication")
    assert applied.facts == plan.facts and report.appended == w.new == len(plan.facts)
    assert gp.state.get("Medication", "ibu").name == "naproxen"
