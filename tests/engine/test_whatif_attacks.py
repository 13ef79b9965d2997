"""Attacks on what-ifs (issue 16), by an outside reviewer.

Every case that exposes a defect fails now (nothing is marked xfail); the others stay as
regression tests. Real DuckDB files in ``tmp_path``, real processes where processes matter.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers.events import add, clock, retract, update
from helpers.processes import suite_path
from helpers.store import files
from helpers.whatif import RULES, USER, dump, store_with

from uac_kernel.core.errors import EventError, UacError
from uac_kernel.engine.whatif import events_from_text, own_fields
from uac_kernel.log.store import Store
from uac_kernel.rules.engine import Finding, rule
from uac_kernel.state.query import UserView
from uac_kernel.workbench import Workbench

ROOT = Path(__file__).resolve().parents[2]


# -- helpers ------------------------------------------------------------------------------------


def alert_dump(alerts: Any) -> list[dict[str, Any]]:
    """Alerts in full (id, severity, message, evidence with sources, a cleared one's reason)."""
    return sorted((a.model_dump(mode="json") for a in alerts), key=lambda d: d["id"])


def twin(tmp_path: Path, db: Path) -> Path:
    copy = tmp_path / ("twin-" + db.name)
    shutil.copyfile(db, copy)
    return copy


def predict_and_ingest(
    tmp_path: Path,
    base: list[dict[str, Any]],
    batch: list[dict[str, Any]],
    rules: list[Any],
    *,
    checkpoint: bool = True,
    expressions: list[str] | None = None,
) -> tuple[Any, Any, dict[str, Any], list[Any], list[Any]]:
    """A what-if of ``batch`` over a store of ``base`` (opened lazily after a checkpoint), and
    a real ingest of it into a copy of that store. Returns (what-if, ingest report, the state
    dump before the what-if == after it is checked, answers before/after the real ingest)."""
    db = tmp_path / "a.duckdb"
    with Workbench(db, user=USER, rules=rules) as wb:
        if base:
            wb.ingest(base)
        if checkpoint:
            wb.checkpoint()
    copy = twin(tmp_path, db)
    stored = files(db)
    with Workbench(db, user=USER, rules=rules) as wb:
        before = dump(wb)
        w = wb.whatif(batch, expressions=expressions or [])
        assert files(db) == stored
        assert no_indexes(dump(wb)) == no_indexes(before)
    assert files(db) == stored
    with Workbench(copy, user=USER, rules=rules) as real:
        answers_before = [answer(real, e) for e in expressions or []]
        report = real.ingest(batch)
        answers_after = [answer(real, e) for e in expressions or []]
    return w, report, before, answers_before, answers_after


def answer(wb: Workbench, expression: str) -> tuple[Any, str]:
    """What ``uac eval`` gives for an expression: its value, or the one-line error it fails with."""
    try:
        return wb.eval(expression), ""
    except UacError as e:
        return None, str(e)


def no_indexes(d: dict[str, Any]) -> dict[str, Any]:
    """A state dump without its field indexes (a cache; its own test covers it)."""
    return {k: {**v, "indexes": None} if k.startswith("type ") else v for k, v in d.items()}


def same_alerts(w: Any, report: Any) -> None:
    assert alert_dump(w.raised) == alert_dump(report.raised)
    assert alert_dump(w.cleared) == alert_dump(report.cleared)
    assert alert_dump(w.updated) == alert_dump(report.updated)


# rules used by the attacks -----------------------------------------------------------------------


@rule(watch=["Medication"], severity="warning")
def undosed(user: UserView) -> Iterator[Finding]:
    """A medication without a dose (reads a field the type may not have yet)."""
    for m in user.all("Medication"):
        if m.fields().get("dose") is None:
            yield Finding(f"{m.key} has no dose", [m])


@rule(watch=["Medication"], severity="info")
def dosed_by_fields(user: UserView) -> Iterator[Finding]:
    """Reads a record's fields through ``fields()``, as generic rules do."""
    for m in user.all("Medication"):
        if m.fields().get("dose"):
            yield Finding(f"{m.key} has a dose", [m])


@rule(watch=["Trip"], severity="info")
def soon(user: UserView) -> Iterator[Finding]:
    """Field index on ``start`` (a range from the clock) and unset ``end``."""
    today = user.today or date(2025, 1, 1)
    for t in user.where("Trip", "start", since=today, before=today + timedelta(days=30)):
        yield Finding(f"{t.key} soon", [t])
    for t in user.unset("Trip", "end"):
        yield Finding(f"{t.key} open", [t], about="open")


@rule(watch=[], clock=True, severity="info")
def late_days(user: UserView) -> Iterator[Finding]:
    """A clock-driven rule: escalates with the clock."""
    today = user.today
    if today is None:
        return
    for p in user.all("Passport"):
        if p.expiry is not None and p.expiry < today:
            yield Finding(f"{p.key} expired", [p], severity="critical")
        elif p.expiry is not None and p.expiry < today + timedelta(days=60):
            yield Finding(f"{p.key} expires soon", [p])


NOT_WHILE = {
    "kind": "not_while",
    "title": "No ibuprofen with an allergy",
    "active": {"type": "Allergy"},
    "forbidden": {"type": "Medication", "mentions": ["ibuprofen"]},
}


def constraint(ts: str, op: str, key: str, c: dict[str, Any] | None = None) -> dict[str, Any]:
    ev: dict[str, Any] = {"kind": "constraint", "ts": ts, "op": op, "key": key}
    if c is not None:
        ev["constraint"] = c
    return ev


# -- a what-if predicts ingest ------------------------------------------------------------------


def test_new_field_of_existing_type_clearing_reason_matches_ingest(tmp_path: Path) -> None:
    """An alert cleared because a record gained a field its type did not have: ingest says
    which field changed (the class was rebuilt), the what-if must say the same."""
    w, report, *_ = predict_and_ingest(
        tmp_path,
        [add("2025-03-01", "Medication", "ibu", name="ibuprofen")],
        [update("2025-03-02", "Medication", "ibu", dose="200mg")],
        [*RULES, undosed],
    )
    assert [a.rule for a in report.cleared] == ["undosed"]
    assert "dose unset → 200mg" in report.cleared[0].reason
    same_alerts(w, report)


@rule(watch=["Medication"], severity="warning")
def undosed_by_name(user: UserView) -> Iterator[Finding]:
    """The same, reading ``m.dose``: an error while the type has no such field."""
    for m in user.all("Medication"):
        if m.dose is None:
            yield Finding(f"{m.key} has no dose", [m])


def test_rule_reading_a_field_its_type_lacks_errors_until_the_field_arrives(
    tmp_path: Path,
) -> None:
    """A rule that reads a name its type never had fails as a rule_error alert (a typo is not
    None); the batch that gives the type that field clears it, in the what-if as in ingest."""
    w, report, *_ = predict_and_ingest(
        tmp_path,
        [add("2025-03-01", "Medication", "ibu", name="ibuprofen")],
        [update("2025-03-02", "Medication", "ibu", dose="200mg")],
        [*RULES, undosed_by_name],
    )
    assert [(a.rule, a.category) for a in report.cleared] == [("undosed_by_name", "rule_error")]
    assert report.cleared[0].reason == "the rule runs without error again"
    same_alerts(w, report)


def test_new_field_read_through_fields_method_matches_ingest(tmp_path: Path) -> None:
    """A rule reading ``rec.fields()``: after ingest the new field is there; in the trial the
    record keeps its old class, whose fields() leaves the new field out."""
    w, report, *_ = predict_and_ingest(
        tmp_path,
        [add("2025-03-01", "Medication", "ibu", name="ibuprofen")],
        [update("2025-03-02", "Medication", "ibu", dose="200mg")],
        [*RULES, dosed_by_fields],
    )
    assert [a.rule for a in report.raised] == ["dosed_by_fields"]
    same_alerts(w, report)


def test_new_field_answers_match_ingest(tmp_path: Path) -> None:
    """Session answers that return records (model_dump in the sandbox) or their fields()."""
    exprs = [
        "[m.fields() for m in user.all('Medication')]",
        "user.all('Medication')",
        "[m.dose for m in user.all('Medication')]",
    ]
    w, _, _, before, after = predict_and_ingest(
        tmp_path,
        [
            add("2025-03-01", "Medication", "ibu", name="ibuprofen"),
            add("2025-03-01", "Medication", "para", name="paracetamol"),
        ],
        [update("2025-03-02", "Medication", "ibu", dose="200mg")],
        RULES,
        expressions=exprs,
    )
    assert [(a.before, a.error_before) for a in w.answers] == before
    assert [(a.after, a.error_after) for a in w.answers] == after
    assert "Medication has no field 'dose'" in w.answers[2].error_before
    assert w.answers[2].after == ["200mg", None]


def test_add_retract_add_of_one_key_within_a_batch(tmp_path: Path) -> None:
    w, report, *_ = predict_and_ingest(
        tmp_path,
        [
            add("2025-03-01", "Trip", "lyon", destination="Lyon", start="2025-03-10"),
            add("2025-03-01", "Trip", "oslo", destination="Oslo", start="2025-03-20"),
        ],
        [
            retract("2025-03-02", "Trip", "lyon"),
            add("2025-03-02", "Trip", "lyon", destination="Lyon", start="2025-03-05"),
            retract("2025-03-02T10:00:00", "Trip", "lyon"),
            add(
                "2025-03-03",
                "Trip",
                "lyon",
                destination="Lyon",
                start="2025-03-25",
                end="2025-03-26",
            ),
            add("2025-03-03", "Trip", "new", destination="Rome", start="2025-03-04"),
            retract("2025-03-03", "Trip", "new"),
            add("2025-03-03", "Trip", "new", destination="Rome", start="2025-03-06"),
        ],
        [*RULES, soon],
    )
    same_alerts(w, report)
    assert {(r.key, r.change) for r in w.records} == {("lyon", "changed"), ("new", "added")}


def test_updates_that_move_an_indexed_field(tmp_path: Path) -> None:
    """The base has the ``start`` index built (the rule ran at ingest); the what-if moves a
    trip in and another out of the rule's window and sets/unsets ``end``."""
    w, report, *_ = predict_and_ingest(
        tmp_path,
        [
            add("2025-03-01", "Trip", "a", destination="A", start="2025-03-05"),
            add("2025-03-01", "Trip", "b", destination="B", start="2025-06-05", end="2025-06-09"),
            add("2025-03-01", "Trip", "c", destination="C", start="2025-03-07", end="2025-03-08"),
        ],
        [
            update("2025-03-02", "Trip", "a", start="2025-07-01", end="2025-07-02"),
            update("2025-03-02", "Trip", "b", start="2025-03-09"),
            update("2025-03-02", "Trip", "c", start="2025-03-07"),
            add("2025-03-02", "Trip", "d", destination="D", start="2025-03-03"),
        ],
        [*RULES, soon],
    )
    same_alerts(w, report)


def test_indexed_field_that_is_new_in_the_batch(tmp_path: Path) -> None:
    @rule(watch=["Trip"], severity="info")
    def by_budget(user: UserView) -> Iterator[Finding]:
        if "budget" not in user.fields("Trip"):
            return
        for t in user.where("Trip", "budget", since=100):
            yield Finding(f"{t.key} dear", [t])
        for t in user.unset("Trip", "budget"):
            yield Finding(f"{t.key} no budget", [t], about="nb")

    w, report, *_ = predict_and_ingest(
        tmp_path,
        [
            add("2025-03-01", "Trip", "a", destination="A", start="2025-03-05"),
            add("2025-03-01", "Trip", "b", destination="B", start="2025-03-06"),
        ],
        [
            update("2025-03-02", "Trip", "a", budget=500),
            add("2025-03-02", "Trip", "c", destination="C", budget=50),
            retract("2025-03-02", "Trip", "b"),
        ],
        [*RULES, by_budget],
    )
    same_alerts(w, report)


def test_constraints_added_updated_retracted_in_one_batch(tmp_path: Path) -> None:
    other = {
        **NOT_WHILE,
        "title": "No naproxen",
        "forbidden": {"type": "Medication", "mentions": ["naproxen"]},
    }
    w, report, *_ = predict_and_ingest(
        tmp_path,
        [
            add("2025-03-01", "Allergy", "pen", substance="penicillin"),
            add("2025-03-01", "Medication", "ibu", name="ibuprofen"),
            add("2025-03-01", "Medication", "nap", name="naproxen"),
            constraint("2025-03-01T10:00:00", "add", "nsaid", NOT_WHILE),
            constraint("2025-03-01T10:00:00", "add", "gone", other),
        ],
        [
            constraint("2025-03-02T10:00:00", "update", "nsaid", other),
            constraint("2025-03-02T10:00:00", "retract", "gone"),
            constraint("2025-03-02T10:00:00", "add", "fresh", NOT_WHILE),
            constraint("2025-03-02T11:00:00", "retract", "fresh"),
            constraint("2025-03-02T12:00:00", "add", "fresh", NOT_WHILE),
        ],
        RULES,
    )
    same_alerts(w, report)


def test_clock_rule_escalation_and_events_dated_before_the_clock(tmp_path: Path) -> None:
    w, report, *_ = predict_and_ingest(
        tmp_path,
        [
            add("2025-03-01", "Passport", "fr", expiry="2025-05-01", country="France"),
            add("2025-03-01", "Passport", "uk", expiry="2025-04-01", country="UK"),
            clock("2025-03-05"),
        ],
        [
            # dated before the clock: the clock does not move back
            add("2025-02-01", "Passport", "de", expiry="2025-03-20", country="Germany"),
            clock("2025-04-15"),
            {
                "kind": "utterance",
                "ts": "2025-04-16T08:00:00",
                "speaker": "user",
                "text": "hi",
                "source": "chat#1",
            },
        ],
        [*RULES, late_days],
    )
    same_alerts(w, report)
    assert report.updated  # escalated to critical
    assert w.was


def test_whatif_on_an_empty_store_with_new_types(tmp_path: Path) -> None:
    w, report, *_ = predict_and_ingest(
        tmp_path,
        [clock("2025-01-01")],
        [
            add("2025-03-01", "Allergy", "pen", substance="penicillin"),
            add("2025-03-01", "Medication", "amox", name="amoxicillin", dose="1g"),
            add("2025-03-01", "Visa", "jp", country="Japan", issued="2025-01-01"),
        ],
        RULES,
        checkpoint=False,
    )
    same_alerts(w, report)
    assert report.raised


# -- a what-if changes nothing --------------------------------------------------------------------


def test_an_index_a_whatif_builds_on_the_base_is_a_correct_cache(tmp_path: Path) -> None:
    """A rule that starts indexing a field only when the what-if's records ask for it: the
    trial's index is built from the base's, which then holds (and maintains) it. That is a
    cache of what the log says (trial.py's doc): every other part of the state is as it was,
    the index equals one built from scratch, and a later ingest keeps it right."""

    @rule(watch=["Trip"], severity="info")
    def cheap(user: UserView) -> Iterator[Finding]:
        if user.get("Trip", "trigger") is not None:
            for t in user.where("Trip", "cost", since=100):
                yield Finding(f"{t.key}", [t])

    db = store_with(
        tmp_path, [add("2025-03-01", "Trip", "a", destination="A", start="2025-03-05", cost=500)]
    )
    with Workbench(db, user=USER, rules=[*RULES, cheap]) as wb:
        before = dump(wb)
        w = wb.whatif([add("2025-03-02", "Trip", "trigger", destination="T", start="2025-04-01")])
        assert [a.message for a in w.raised if a.rule == "cheap"] == ["a"]
        after = dump(wb)
        built = after["type Trip"].pop("indexes")
        had = before["type Trip"].pop("indexes")
        assert after == before
        assert "cost" not in had and built == {**had, "cost": ([(500, "a")], [])}
        wb.ingest([update("2025-03-03", "Trip", "a", cost=50)])
        trips = wb.state.types["Trip"]
        assert (trips.indexes["cost"].entries, trips.indexes["cost"].unset) == ([(50, "a")], set())


def test_records_a_rule_is_given_are_frozen(tmp_path: Path) -> None:
    """A rule cannot set a field of the records it reads, in a what-if as in ingest (it
    becomes a rule_error alert of the trial). Rules are code the user put in force: one that
    reaches past ``user`` into its private ``_state`` is not guarded against, here or in
    ingest (docs/whatif.md says so)."""

    @rule(watch=["Medication"])
    def vandal(user: UserView) -> Iterator[Finding]:
        for m in user.all("Medication"):
            m.name = "vandalised"  # type: ignore[misc]
        return iter(())

    db = store_with(tmp_path, [add("2025-03-01", "Medication", "ibu", name="ibuprofen")])
    with Workbench(db, user=USER, rules=[*RULES, vandal]) as wb:
        stored = files(db)  # after the open, which logged the rule's error
        before = dump(wb)
        (standing,) = [a for a in wb.alerts() if a.rule == "vandal"]
        assert standing.category == "rule_error" and "frozen" in standing.message
        w = wb.whatif([add("2025-03-02", "Medication", "trigger", name="t")])
        assert not [a for a in [*w.raised, *w.cleared] if a.rule == "vandal"]
        assert dump(wb) == before
        assert files(db) == stored


def test_a_rule_setting_frozen_attributes_becomes_a_rule_error_and_changes_nothing(
    tmp_path: Path,
) -> None:
    @rule(watch=["Medication"])
    def setter(user: UserView) -> Iterator[Finding]:
        for m in user.all("Medication"):
            m.name = "changed"  # frozen: pydantic refuses
        return iter(())

    db = store_with(tmp_path, [add("2025-03-01", "Medication", "ibu", name="ibuprofen")])
    stored = files(db)
    with Workbench(db, user=USER, rules=[*RULES]) as wb:
        before = dump(wb)
        wb.runner.add(setter)  # in force for the session only, no alert logged
        wb.runner.active["setter"] = {}
        w = wb.whatif([add("2025-03-02", "Medication", "m2", name="x")])
        assert any(a.category == "rule_error" for a in w.raised)
        wb.runner.remove("setter")
        assert dump(wb) == before
    assert files(db) == stored


def test_keyboard_interrupt_in_a_past_whatif_and_exceptions_leave_everything(
    tmp_path: Path,
) -> None:
    @rule(watch=["Medication"])
    def boom(user: UserView) -> Iterator[Finding]:
        names = {m.name for m in user.all("Medication")}
        if "interrupt" in names:
            raise KeyboardInterrupt
        if "explode" in names:
            raise RuntimeError("boom")
        return iter(())

    db = store_with(
        tmp_path,
        [
            add("2025-03-01", "Medication", "ibu", name="ibuprofen"),
            add("2025-05-01", "Medication", "nap", name="naproxen"),
        ],
    )
    stored = files(db)
    with Workbench(db, user=USER, rules=[*RULES, boom]) as wb:
        wb.eval("len(user.all('Medication'))")
        warm = wb._warm
        before = dump(wb)
        with pytest.raises(KeyboardInterrupt):
            wb.whatif(
                [add("2025-04-01", "Medication", "k", name="interrupt")],
                as_of="2025-04-01",
                progress=False,
            )
        w = wb.whatif([add("2025-04-01", "Medication", "e", name="explode")], progress=False)
        assert [a.category for a in w.raised] == ["rule_error"]
        assert dump(wb) == before
        assert wb._warm is warm
    assert files(db) == stored


def test_hostile_expressions_rerun_as_answers_change_nothing(tmp_path: Path) -> None:
    db = store_with(tmp_path, [add("2025-03-01", "Medication", "ibu", name="ibuprofen")])
    stored = files(db)
    hostile = {
        "loop": "sum(range(10**12))",
        "memory": "list(range(10**9))",
        "dunder": "user.__class__",
        "private": "user._state.types",
        "mutate": "[m.__dict__.update(name='x') for m in user.all('Medication')]",
        "open": "open('/etc/passwd').read()",
        "import": "__import__('os').system('true')",
        "huge": "'x' * (10**8)",
        "ok": "sorted(m.name for m in user.all('Medication'))",
    }
    with Workbench(db, user=USER, rules=RULES) as wb:
        before = dump(wb)
        w = wb.whatif([add("2025-03-02", "Medication", "m", name="amox")], expressions=hostile)
        assert dump(wb) == before
        answers = {a.label: a for a in w.answers}
        assert answers["ok"].after == ["amox", "ibuprofen"]
        for label in ("loop", "dunder", "private", "open", "import"):
            assert answers[label].error_after, label
        assert wb.eval("[m.name for m in user.all('Medication')]") == ["ibuprofen"]
    assert files(db) == stored


def test_a_whatif_on_a_lazily_opened_state_reads_only_what_it_touches(tmp_path: Path) -> None:
    """Cost: a what-if that touches one record of a type of n records reads a bounded number
    of them from the snapshot, whatever n (counts, not timings)."""
    from uac_kernel.checkpoints.snaptypes import SnapTypeState

    def records_read(n: int) -> tuple[int, set[str]]:
        path = tmp_path / f"n{n}"
        path.mkdir()
        events = [
            add("2025-03-01", "Note", f"k{i}", text=f"note {i}", day="2025-03-01") for i in range(n)
        ]
        db = store_with(path, events)
        with Workbench(db, user=USER, rules=RULES) as wb:
            ts = wb.state.types["Note"]
            assert isinstance(ts, SnapTypeState)
            wb.whatif(
                [
                    update("2025-03-02", "Note", "k1", text="changed"),
                    add("2025-03-02", "Note", "new", text="x"),
                ],
                expressions=[],
            )
            return len(ts._seen) + sum(1 for _ in ts._ops), set(ts._loaded)

    small, large = records_read(50), records_read(2000)
    assert small[1] == large[1] == set()
    assert small[0] == large[0] <= 3


def test_a_trial_copies_nothing_proportional_to_the_history(tmp_path: Path) -> None:
    """Trial(state) must not copy per-record or per-version structures (counts of the
    containers it builds, through the sizes they hold)."""
    from uac_kernel.state.trial import Trial

    sizes = {}
    for n in (20, 400):
        path = tmp_path / f"h{n}"
        path.mkdir()
        events = [add("2025-03-01", "Note", f"k{i}", text="t") for i in range(n)]
        events += [update("2025-03-02", "Note", f"k{i}", text="u") for i in range(n)]
        with Workbench(path / "a.duckdb", user=USER, rules=RULES) as wb:
            wb.ingest(events)
            t = Trial(wb.state)
            sizes[n] = sum(
                len(v) for v in vars(t).values() if isinstance(v, (dict, list, set))
            ) + len(t.schema.types)
    assert sizes[20] == sizes[400]


# -- the store, processes --------------------------------------------------------------------------


CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from uac_kernel.rules.engine import rule
    from uac_kernel.workbench import Workbench
    from helpers.whatif import RULES

    db, ready, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]

    @rule(watch=["Medication"])
    def slow(user):
        if user.get("Medication", "slow") is not None:
            ready.write_text("in the rule")
            time.sleep(60)
        return iter(())

    with Workbench(db, user="maya", rules=[*RULES, slow], read_only=mode == "ro") as wb:
        ev = {"kind": "fact", "ts": "2025-03-02T09:00:00", "op": "add", "type": "Medication",
              "key": "slow", "fields": {"name": "x", "brandnew": 1}}
        if mode == "past":
            wb.whatif([ev], as_of="2025-03-02T09:00:00", progress=False)
        else:
            wb.whatif([ev])
    """
)


@pytest.mark.parametrize("mode", ["rw", "ro", "past"])
def test_kill_9_in_the_middle_of_a_whatif(tmp_path: Path, mode: str) -> None:
    db = store_with(
        tmp_path,
        [add("2025-03-01", "Medication", "ibu", name="ibuprofen"), clock("2025-04-01")],
    )
    stored = files(db)
    ready = tmp_path / "ready"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "PYTHONPATH": suite_path()}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(db), str(ready), mode], env=env, cwd=ROOT
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert proc.poll() is None, "the child ended before its rule ran"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert files(db) == stored
    with Workbench(db, user=USER, rules=RULES) as wb:
        assert wb.verify().ok
        assert wb.state.get("Medication", "slow") is None
        assert "brandnew" not in wb.state.schema.types["Medication"]


def test_another_process_holding_the_store(tmp_path: Path) -> None:
    """Another process holds the store read-write: a what-if here either works or fails with
    our own one-line error (not a DuckDB traceback); it writes nothing either way."""
    db = store_with(tmp_path, [add("2025-03-01", "Medication", "ibu", name="ibuprofen")])
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from uac_kernel.workbench import Workbench\n"
            "wb = Workbench(sys.argv[1], user='maya'); print('held', flush=True); time.sleep(60)",
            str(db),
        ],
        env={**os.environ, "PYTHONPATH": suite_path()},
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        # The holder keeps its connection until asked, and its close on letting go writes
        # its log into the file: ask once first, so the bytes compared are the holder's last.
        Store(db).close()
        stored = files(db)
        for ro in (False, True):
            try:
                with Workbench(db, user=USER, rules=RULES, read_only=ro) as wb:
                    w = wb.whatif([add("2025-03-02", "Medication", "m", name="x")])
                    assert [(r.key, r.change) for r in w.records] == [("m", "added")]
            except UacError as exc:
                assert "\n" not in str(exc).strip()
            assert files(db) == stored
    finally:
        holder.kill()
        holder.wait()


def test_two_workbenches_of_one_process_whatif_sees_what_the_other_wrote(tmp_path: Path) -> None:
    db = store_with(tmp_path, [add("2025-03-01", "Allergy", "pen", substance="penicillin")])
    with Workbench(db, user=USER, rules=RULES) as a, Workbench(db, user=USER, rules=RULES) as b:
        b.ingest([add("2025-03-02", "Medication", "ibu", name="amoxicillin")])
        w = a.whatif([retract("2025-03-03", "Medication", "ibu")])
        assert [c.rule for c in w.cleared] == ["drug_allergy_cross_reactivity"]
        stored = files(db)
        a.whatif([add("2025-03-03", "Medication", "x", name="y")])
        assert files(db) == stored


# -- validation and bounds -------------------------------------------------------------------------

HOSTILE_VALUES: list[Any] = [
    "a\x00b",
    "\x1b[31mred\x1b[0m",
    "\u202eevil",
    "\ud800",
    "x" * 2_000_000,
    {"nested": {"deep": [1, 2]}},
    [1, "a"],
    [],
    float("nan"),
    float("inf"),
    10**400,
    True,
    None,
]


def _hostile_events() -> list[tuple[str, dict[str, Any]]]:
    base = add("2025-04-01", "Medication", "m", name="x")
    out: list[tuple[str, dict[str, Any]]] = []
    for i, v in enumerate(HOSTILE_VALUES):
        out.append((f"value{i}", {**base, "fields": {"name": v}}))
        out.append((f"newfield{i}", {**base, "fields": {"other": v}}))
        out.append((f"key{i}", {**base, "key": v}))
        out.append((f"type{i}", {**base, "type": v}))
        out.append((f"ts{i}", {**base, "ts": v}))
        out.append(
            (
                f"fieldname{i}",
                {**base, "fields": {str(v)[:300] if not isinstance(v, str) else v: 1}},
            )
        )
    out += [
        ("hugekey", {**base, "key": "k" * 100_000}),
        ("kind", {**base, "kind": "alert"}),
        ("schema", {"kind": "schema", "ts": "2025-04-01", "type": "X"}),
        ("forget", {"kind": "forget", "ts": "2025-04-01"}),
        ("op", {**base, "op": "delete"}),
        ("extra", {**base, "sneaky": 1}),
        ("notdict", "just text"),
        ("list", [base]),
        ("fields-list", {**base, "fields": [1, 2]}),
        (
            "utterance-nul",
            {"kind": "utterance", "ts": "2025-04-01", "speaker": "u", "text": "\x00"},
        ),
        (
            "utterance-huge",
            {"kind": "utterance", "ts": "2025-04-01", "speaker": "u", "text": "x" * 10_000_000},
        ),
        ("year1", {**base, "ts": "0001-01-01T00:00:00"}),
        ("year9999", {**base, "ts": "9999-12-31T23:59:59"}),
        ("tz", {**base, "ts": "2025-04-01T00:00:00+14:00"}),
        ("source-nul", {**base, "source": "a\x00"}),
        ("source-int", {**base, "source": 3}),
    ]
    return out


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hostile")
    return store_with(path, [add("2025-03-01", "Medication", "ibu", name="ibuprofen")])


@pytest.mark.parametrize(
    ("label", "event"), _hostile_events(), ids=lambda x: x if isinstance(x, str) else ""
)
def test_hostile_events_are_judged_as_ingest_judges_them(
    hostile_store: Path, tmp_path: Path, label: str, event: Any
) -> None:
    """The what-if refuses exactly what ingest refuses, with the same one-line error; what it
    accepts it accepts without writing."""
    db = hostile_store
    stored = files(db)
    copy = twin(tmp_path, db)
    with Workbench(db, user=USER, rules=RULES) as wb:
        try:
            wb.whatif([event], expressions=[], origin="<x>")
            refused = None
        except UacError as exc:
            refused = str(exc)
    assert files(db) == stored
    with Workbench(copy, user=USER, rules=RULES) as real:
        try:
            real.ingest([event], origin="<x>")
            ingest_refused = None
        except UacError as exc:
            ingest_refused = str(exc)
    assert refused == ingest_refused
    if refused is not None:
        assert "\n" not in refused


@pytest.mark.parametrize(
    ("text", "match"),
    [
        # a number longer than Python's int-string limit: ingest's reader takes it exactly
        (
            '{"kind": "fact", "ts": "2025-04-01", "op": "add", "type": "M", "key": "k", '
            '"fields": {"n": ' + "1" * 5000 + "}}",
            None,
        ),
        ("- kind: fact\n  n: " + "1" * 5000 + "\n", None),
        ("[" + "[" * 100_000 + "]" * 100_000 + "]", "nest more than|depth limit"),
        ("x: " + "[" * 100_000 + "]" * 100_000, "nest|invalid YAML"),
        ("- !!python/object/apply:os.system ['true']\n", "invalid YAML"),
        ("- !!python/name:os.system\n", "invalid YAML"),
        ("- !custom {a: 1}\n", "invalid YAML"),
        ("a: &a [1]\nb: [*a, *a]\n", "alias"),
        (
            "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
            "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n",
            "alias",
        ),
        ("x" * ((8 << 20) + 1), "at most"),
        ("\x00", None),
        ('{"kind": "utterance", "ts": "2025-04-01", "speaker": "u", "text": "\\ud800"}', None),
        ("? [a, b]\n: c\n", "invalid YAML"),
        ('\ufeff{"kind": "utterance"}', None),
        ('{"a": 1}\n[1]', None),
        ("---\n...\n---\n", None),
    ],
)
def test_events_from_text_raises_only_event_errors(text: str, match: str | None) -> None:
    """Whatever the text, events_from_text returns objects or raises a one-line EventError."""
    try:
        events_from_text(text, "<cell>")
    except EventError as exc:
        assert "\n" not in str(exc)
        if match is not None:
            import re

            assert re.search(match, str(exc)), str(exc)
    # any other exception type fails the test


def test_events_from_text_refuses_a_key_given_twice_in_json_as_ingest_does(tmp_path: Path) -> None:
    """Ingest's JSONL reader refuses {"kind": ..., "kind": ...}; so does the YAML branch of a
    cell. The JSON branch keeps the last value silently."""
    line = (
        '{"kind": "fact", "ts": "2025-04-01", "op": "add", "type": "Medication", "key": "k", '
        '"fields": {"name": "shown"}, "fields": {"name": "hidden"}}'
    )
    f = tmp_path / "e.jsonl"
    f.write_text(line + "\n")
    with (
        Workbench(tmp_path / "a.duckdb", user=USER) as wb,
        pytest.raises(EventError, match="twice"),
    ):
        wb.ingest(f)
    with pytest.raises(EventError, match="twice"):
        events_from_text(line)
    with pytest.raises(EventError, match="twice"):
        events_from_text("[" + line + "]")


def test_events_from_text_then_whatif_gives_one_line_errors(tmp_path: Path) -> None:
    db = store_with(tmp_path, [add("2025-03-01", "Medication", "ibu", name="ibuprofen")])
    texts = [
        "- !!binary aGVsbG8=\n",
        "kind: !!set {a, b}\n",
        "hello\n",
        "[1, 2]",
        "- kind: fact\n  ts: 2025-04-01 10:00:00+02:00\n  op: add\n  type: Medication\n  key: k\n"
        "  fields: {name: !!binary aGVsbG8=}\n",
        "- kind: fact\n  ts: 2025-04-01\n  op: add\n  type: Medication\n  key: k\n"
        "  fields: {name: .nan}\n",
        "- kind: fact\n  ts: 2025-04-01\n  op: add\n  type: Medication\n  key: k\n"
        "  fields: {1: x}\n",
        "- kind: fact\n  ts: 2025-04-01\n  op: add\n  type: Medication\n  key: 12\n  fields: {}\n",
    ]
    stored = files(db)
    with Workbench(db, user=USER, rules=RULES) as wb:
        for text in texts:
            try:
                wb.whatif(events_from_text(text), expressions=[])
            except EventError as exc:
                assert "\n" not in str(exc)
    assert files(db) == stored


# -- the past ---------------------------------------------------------------------------------------


@pytest.fixture
def past(tmp_path: Path) -> Iterator[Workbench]:
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
    with Workbench(db, user=USER, rules=RULES) as wb:
        yield wb


EARLY_ALLERGY = add("2025-01-05", "Allergy", "pen-early", substance="penicillin")


@pytest.mark.parametrize(
    "as_of",
    [
        "0001-01-01",
        "1970-01-01T00:00:00",
        "2024-12-31T23:59:59",
        "2025-01-05T12:00:00",
        "2025-01-05T12:00:00+05:00",
        "2025-01-05T12:00:00-11:00",
        datetime(2025, 1, 5, 12),
        "2030-01-01",
        "9999-12-31T23:59:59.999999",
    ],
    ids=str,
)
def test_past_whatif_at_any_moment_works(past: Workbench, as_of: Any) -> None:
    stored = files(Path(past.store.path))
    before = dump(past)
    w = past.whatif([EARLY_ALLERGY], as_of=as_of, progress=False)
    assert w.as_of is not None and w.as_of.tzinfo is None
    assert dump(past) == before
    assert files(Path(past.store.path)) == stored
    assert [(r.key, r.change) for r in w.records] == [("pen-early", "added")]


@pytest.mark.parametrize(
    "as_of", ["garbage", "2025-13-01", "", "2025-01-05T25:00", date(2025, 1, 5), 12345]
)
def test_past_whatif_with_a_bad_moment_is_a_one_line_uac_error(past: Workbench, as_of: Any) -> None:
    """A bad as_of (a typo from the CLI or the magic, a date object from a notebook) must be
    a UacError naming the moment, not a ValueError/AttributeError/TypeError traceback."""
    try:
        w = past.whatif([EARLY_ALLERGY], as_of=as_of, progress=False)
    except UacError as exc:
        assert "\n" not in str(exc)
    else:
        # a date is a fine moment too: midnight
        assert isinstance(as_of, date) and w.as_of == datetime(2025, 1, 5)


def test_past_whatif_over_a_log_whose_times_are_not_in_log_order(tmp_path: Path) -> None:
    """A record added in March, retracted in April, then added again dated January (ingest
    accepts it: an add has no version to be dated after). Splitting the log at a moment
    between replays the March add onto the January one: the *real* run must not crash, and a
    what-if there lists conflicts instead of raising."""
    db = store_with(
        tmp_path,
        [
            add("2025-03-01", "Trip", "k", destination="Lyon", start="2025-03-10"),
            retract("2025-04-01", "Trip", "k"),
            add("2025-01-15", "Trip", "k", destination="Oslo", start="2025-01-20"),
        ],
    )
    with Workbench(db, user=USER, rules=RULES) as wb:
        w = wb.whatif([clock("2025-02-02")], as_of="2025-02-01", progress=False)
        assert isinstance(w.conflicts, list)


def test_past_whatif_conflicting_later_events_are_listed(tmp_path: Path) -> None:
    db = store_with(
        tmp_path,
        [
            add("2025-01-10", "Medication", "ibu", name="ibuprofen"),
            add("2025-01-10", "Allergy", "pen", substance="penicillin"),
            update("2025-03-01", "Medication", "ibu", name="naproxen"),
            retract("2025-04-01", "Medication", "ibu"),
            add("2025-05-01", "Medication", "amox", name="amoxicillin"),
            constraint("2025-05-01T10:00:00", "add", "nsaid", NOT_WHILE),
            constraint("2025-06-01T10:00:00", "retract", "nsaid"),
        ],
    )
    stored = files(db)
    with Workbench(db, user=USER, rules=RULES) as wb:
        before = dump(wb)
        w = wb.whatif(
            [
                retract("2025-02-01", "Medication", "ibu"),
                add("2025-02-01", "Medication", "amox", name="amoxicillin"),
                constraint("2025-02-01T10:00:00", "add", "nsaid", NOT_WHILE),
                retract("2025-02-02", "Allergy", "pen"),
            ],
            as_of="2025-02-01",
            progress=False,
        )
        assert dump(wb) == before
    assert files(db) == stored
    text = "\n".join(w.conflicts)
    assert "update Medication 'ibu'" in text
    assert "retract Medication 'ibu'" in text
    assert "add Medication 'amox'" in text
    assert "nsaid" in text  # the later constraint add no longer applies
    w.text()
    w.to_dict()


def test_past_whatif_on_a_store_with_forgets(tmp_path: Path) -> None:
    db = tmp_path / "f.duckdb"
    with Workbench(db, user=USER, rules=RULES) as wb:
        wb.ingest(
            [
                {
                    "kind": "utterance",
                    "ts": "2025-01-01T09:00:00",
                    "speaker": "user",
                    "text": "I am allergic to penicillin",
                    "source": "chat#1",
                },
                add("2025-01-02", "Allergy", "pen", substance="penicillin"),
                add("2025-02-01", "Medication", "amox", name="amoxicillin"),
                add("2025-03-01", "Trip", "t", destination="Lyon", start="2025-04-01"),
            ]
        )
        wb.forget(type="Allergy", key="pen")
        wb.forget(source="chat#1")
        wb.checkpoint()
    stored = files(db)
    with Workbench(db, user=USER, rules=RULES) as wb:
        assert wb.verify().ok
        w = wb.whatif(
            [add("2025-01-20", "Medication", "ibu", name="ibuprofen")],
            as_of="2025-01-20",
            progress=False,
        )
        assert w.records
        w2 = wb.whatif([add("2025-05-01", "Medication", "ibu", name="ibuprofen")])
        assert w2.records
    assert files(db) == stored


# -- apply ------------------------------------------------------------------------------------------


def test_apply_is_idempotent_for_events_without_a_source(tmp_path: Path) -> None:
    """A what-if's events carry their source so that applying twice appends once; events
    written without one (the usual cell) are appended again on a second apply."""
    db = store_with(tmp_path, [add("2025-03-01", "Medication", "ibu", name="ibuprofen")])
    with Workbench(db, user=USER, rules=RULES) as wb:
        w = wb.whatif(
            [
                update("2025-03-02", "Medication", "ibu", dose="200mg"),
                {"kind": "utterance", "ts": "2025-03-02T10:00:00", "speaker": "user", "text": "hi"},
            ]
        )
        first = wb.apply_whatif(w)
        assert first.appended == 2
        n = len(wb.log())
        second = wb.apply_whatif(w)
        assert second.appended == 0
        assert len(wb.log()) == n


def test_apply_appends_exactly_the_events_and_predicted_alerts(tmp_path: Path) -> None:
    db = store_with(tmp_path, [add("2025-03-01", "Allergy", "pen", substance="penicillin")])
    with Workbench(db, user=USER, rules=RULES) as wb:
        batch = [
            {
                **add("2025-03-02", "Medication", "amox", name="amoxicillin", dose="1g"),
                "source": "s1",
            },
            {
                "kind": "utterance",
                "ts": "2025-03-02T10:00:00",
                "speaker": "user",
                "text": "hi",
                "source": "s2",
            },
        ]
        w = wb.whatif(batch)
        head = wb.state.seq
        report = wb.apply_whatif(w)
        assert alert_dump(report.raised) == alert_dump(w.raised)
        facts = [e for e in wb.log() if e.seq > head and e.kind in ("fact", "utterance")]
        assert [(e.kind, e.source) for e in facts] == [("fact", "s1"), ("utterance", "s2")]
        assert wb.apply_whatif(w).appended == 0
        assert wb.verify().ok


def test_apply_refuses_a_whatif_edited_to_another_user(tmp_path: Path) -> None:
    db = store_with(tmp_path, [add("2025-03-01", "Allergy", "pen", substance="penicillin")])
    with Workbench(db, user=USER, rules=RULES) as wb:
        w = wb.whatif([add("2025-03-02", "Medication", "amox", name="amoxicillin")])
    stored = files(db)
    with Workbench(db, user="sam") as other, pytest.raises(UacError, match="maya"):
        other.apply_whatif(w)
    assert files(db) == stored


def test_apply_revalidates_against_a_log_that_moved_in_another_process(tmp_path: Path) -> None:
    db = store_with(tmp_path, [add("2025-03-01", "Medication", "ibu", name="ibuprofen")])
    with Workbench(db, user=USER, rules=RULES) as wb:
        w = wb.whatif([update("2025-03-05", "Medication", "ibu", dose="1g")])
    subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from uac_kernel.workbench import Workbench\n"
            "with Workbench(sys.argv[1], user='maya') as wb:\n"
            "    wb.ingest([{'kind': 'fact', 'ts': '2025-03-06T00:00:00', 'op': 'retract',"
            " 'type': 'Medication', 'key': 'ibu'}])",
            str(db),
        ],
        env={**os.environ, "PYTHONPATH": suite_path()},
        cwd=ROOT,
        check=True,
    )
    with Workbench(db, user=USER, rules=RULES) as wb:
        with pytest.raises(EventError, match="retracted"):
            wb.apply_whatif(w)
        assert wb.verify().ok


def test_preview_edit_predicts_apply_edit(tmp_path: Path) -> None:
    db = store_with(
        tmp_path,
        [
            add("2025-03-01", "Allergy", "pen", substance="penicillin"),
            add("2025-03-01", "Medication", "ibu", name="ibuprofen"),
        ],
    )
    with Workbench(db, user=USER, rules=RULES) as wb:
        cell = wb.edit_cell("Medication")
        edited = cell.code.replace("'ibuprofen'", "'amoxicillin'")
        stored = files(db)
        before = dump(wb)
        _plan, w = wb.preview_edit(edited, version=cell.version, part="Medication")
        assert files(db) == stored and dump(wb) == before
        _, report = wb.apply_edit(edited, version=cell.version, part="Medication")
        assert alert_dump(report.raised) == alert_dump(w.raised)
        assert [own_fields(wb.state.get("Medication", "ibu"))] == [w.records[0].after]
