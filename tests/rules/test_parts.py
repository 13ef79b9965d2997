"""Rules run on the parts a change touched, and clock rules that run when the day moves: after
every batch the alerts standing are the ones a whole run over the state would find."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from helpers.events import add, clock, retract, update
from helpers.rules import build, by_amount

from uac_kernel.core.errors import RuleError
from uac_kernel.rules import library as lib
from uac_kernel.rules.engine import EVERY, Finding, Rule, rule
from uac_kernel.rules.parts import Parts, PartView
from uac_kernel.state.query import UserView
from uac_kernel.workbench import Workbench

MERCHANTS = ("Corner Cafe", "Shoe Shop", "Gadget Store", "Hotel Nine")


def whole(wb: Workbench, r: Rule) -> dict[str, tuple[str, str]]:
    """What a whole run of ``r`` over the workbench's state finds, by alert id."""
    return {i: (a.severity, a.message) for i, a in r.alerts(UserView(wb.state)).items()}


def standing(wb: Workbench, name: str) -> dict[str, tuple[str, str]]:
    return {i: (a.severity, a.message) for i, a in wb.runner.active[name].items()}


def random_batches(seed: int, n: int, days: float = 0.25) -> Iterator[list[dict[str, Any]]]:
    """Batches of charges, refunds, freezes and payments: adds, updates that move a charge to
    another merchant or amount, retractions, a freeze lifted and set again, and clock ticks;
    ``days`` a batch."""
    rng = random.Random(seed)
    live: list[tuple[str, str]] = []
    made = 0
    for step in range(n):
        day = (date(2025, 3, 1) + timedelta(days=int(step * days))).isoformat()
        batch: list[dict[str, Any]] = []
        for _ in range(rng.randint(1, 4)):
            roll = rng.random()
            if roll < 0.5 or not live:
                made += 1
                t = rng.choice(("Transaction", "Transaction", "Refund", "Payment"))
                key = f"{t[0].lower()}{made}"
                fields: dict[str, Any] = {
                    "merchant": rng.choice(MERCHANTS),
                    "amount": rng.choice((12.0, 42.5, 80.0)),
                    "date": day,
                }
                if t == "Payment":
                    fields = {"account": "checking", "amount": 50.0, "date": "2025-06-01"}
                batch.append(add(day, t, key, **fields))
                live.append((t, key))
            elif roll < 0.8:
                t, key = rng.choice(live)
                change = {"amount": rng.choice((12.0, 42.5, 80.0))}
                if t != "Payment" and rng.random() < 0.5:
                    change = {"merchant": rng.choice(MERCHANTS)}
                batch.append(update(day, t, key, **change))
            else:
                t, key = live.pop(rng.randrange(len(live)))
                batch.append(retract(day, t, key))
        if step % 7 == 3:
            frozen = step % 14 == 3
            op = add if step == 3 else update
            batch.append(op(day, "Freeze", "f1", account="checking", lifted=not frozen))
        if step % 5 == 4:
            batch.append(clock(day))
        yield batch


@pytest.mark.parametrize(("seed", "days"), [(1, 0.25), (2, 0.25), (3, 0.25), (4, 9), (5, 23)])
def test_partitioned_rules_stand_as_a_whole_run_after_every_batch(
    tmp_path: Path, seed: int, days: float
) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="u")
    parted = [lib.duplicate_charge, lib.transfer_during_freeze]
    raised = 0
    for batch in random_batches(seed, 60, days):
        raised += len(wb.ingest(batch).raised)
        for r in parted:
            assert standing(wb, r.name) == whole(wb, r), batch
    # The parts were kept, not rebuilt: later changes ran on them.
    assert {r.name for r in parted} <= set(wb.runner.parts)
    assert raised  # the sequence raised something
    wb.close()


def counting(partition: Any, calls: list[int], **kw: Any) -> Rule:
    """A notebook rule over ``Charge`` records flagging two charges of one amount."""

    @rule(watch=["Charge", "Hold"], partition=partition, name="same_amount", **kw)
    def same_amount(user: UserView) -> Iterator[Finding]:
        calls.append(len(user.all("Charge")))
        if any(h.on for h in user.all("Hold")):
            return
        for amount, group in by_amount(user.all("Charge")).items():
            if len(group) > 1:
                yield Finding(f"{len(group)} charges of {amount}", group)

    return same_amount


def part(rec: Any) -> Any:
    if type(rec).__name__ == "Hold":
        return EVERY
    return rec.amount


def test_a_change_runs_a_partitioned_rule_on_its_part_only(tmp_path: Path) -> None:
    calls: list[int] = []
    wb = Workbench(tmp_path / "u.duckdb", user="u", rules=[counting(part, calls)])
    wb.ingest([add("2025-01-01", "Hold", "h", on=False)])
    wb.ingest([add("2025-01-01", "Charge", f"c{i}", amount=float(i % 5)) for i in range(50)])
    calls.clear()
    report = wb.ingest([add("2025-01-01", "Charge", "new", amount=7.0)])
    assert calls == [1] and report.raised == []  # the new part alone, not the 50 others
    report = wb.ingest([update("2025-01-01", "Charge", "new", amount=3.0)])
    assert calls == [1, 11]  # the part it left and the part it joined
    assert [a.message for a in report.raised] == ["11 charges of 3.0"]
    assert [a.message for a in report.cleared] == ["10 charges of 3.0"]
    assert len(wb.runner.active["same_amount"]) == 5
    # A record every finding may rest on runs it whole, and what it found goes with it.
    report = wb.ingest([update("2025-01-02", "Hold", "h", on=True)])
    assert calls[-1] == 51 and len(report.cleared) == 5
    assert wb.runner.active["same_amount"] == {}
    wb.close()


def test_a_record_in_no_part_does_not_run_the_rule(tmp_path: Path) -> None:
    calls: list[int] = []
    rules = [counting(lambda r: None if r.amount is None else r.amount, calls)]
    wb = Workbench(tmp_path / "u.duckdb", user="u", rules=rules)
    wb.ingest([add("2025-01-01", "Charge", "a", amount=1.0, note="x")])
    wb.ingest([add("2025-01-01", "Charge", "b", amount=2.0)])
    calls.clear()
    wb.ingest([add("2025-01-01", "Charge", "c", note="no amount")])
    assert calls == []
    wb.close()


def test_parts_are_built_by_the_second_change_never_by_an_open(tmp_path: Path) -> None:
    calls: list[int] = []
    path = tmp_path / "u.duckdb"
    wb = Workbench(path, user="u", rules=[counting(part, calls)])
    wb.ingest([add("2025-01-01", "Charge", f"c{i}", amount=float(i % 3)) for i in range(9)])
    wb.close()
    wb = Workbench(path, user="u", rules=[counting(part, calls)])
    assert wb.runner.parts == {}  # an open runs rules whole and builds nothing
    calls.clear()
    wb.ingest([add("2025-01-01", "Charge", "d", amount=0.0)])
    assert calls == [10] and wb.runner.parts == {}  # one change: a whole run, as `uac ingest`
    wb.ingest([add("2025-01-01", "Charge", "e", amount=1.0)])
    assert calls == [10, 11] and set(wb.runner.parts) == {"same_amount"}
    wb.ingest([add("2025-01-01", "Charge", "f", amount=2.0)])
    assert calls == [10, 11, 4]  # from the third on, the part it touched
    wb.close()


def test_a_new_field_or_a_rule_that_fails_runs_the_rule_whole(tmp_path: Path) -> None:
    calls: list[int] = []
    wb = Workbench(tmp_path / "u.duckdb", user="u", rules=[counting(part, calls)])
    wb.ingest([add("2025-01-01", "Charge", f"c{i}", amount=float(i % 2)) for i in range(6)])
    calls.clear()
    wb.ingest([add("2025-01-01", "Charge", "n", amount=1.0, vendor="new field")])
    assert calls == [7]  # a schema change may change every record of the type
    calls.clear()
    wb.ingest([add("2025-01-01", "Charge", "m", amount=0.0)])
    assert calls == [4]
    wb.close()


def test_an_error_on_a_part_is_the_whole_rules_error(tmp_path: Path) -> None:
    @rule(watch=["Charge"], partition=lambda r: r.key, name="fragile")
    def fragile(user: UserView) -> Iterator[Finding]:
        for c in user.all("Charge"):
            if c.amount < 0:
                raise ValueError("negative")
            yield Finding("seen", [c])

    wb = Workbench(tmp_path / "u.duckdb", user="u", rules=[fragile])
    wb.ingest(
        [add("2025-01-01", "Charge", "a", amount=1.0), add("2025-01-01", "Charge", "b", amount=2.0)]
    )
    assert len(wb.runner.active["fragile"]) == 2
    report = wb.ingest([add("2025-01-01", "Charge", "c", amount=-1.0)])
    assert [a.category for a in report.raised] == ["rule_error"]
    assert set(wb.runner.active["fragile"]) == {"fragile:error"}
    report = wb.ingest([update("2025-01-01", "Charge", "c", amount=3.0)])
    assert len(wb.runner.active["fragile"]) == 3 and len(report.cleared) == 1
    wb.close()


def test_partition_needs_the_types_it_parts() -> None:
    with pytest.raises(RuleError, match="partition= needs watch= or roles="):
        rule(partition=lambda r: r.key)(lambda user: iter(()))


def clocked(calls: list[str], reads_time: bool) -> Rule:
    @rule(watch=["Task"], clock=True, name="due_" + ("now" if reads_time else "today"))
    def due(user: UserView) -> Iterator[Finding]:
        calls.append("ran")
        when = user.now.date() if reads_time and user.now else user.today
        for t in user.all("Task"):
            if when is not None and t.due is not None and t.due <= when:
                yield Finding(f"{t.key} is due", [t])

    return due


@pytest.mark.parametrize("reads_time", [False, True])
def test_a_clock_rule_runs_when_the_day_moves_or_when_it_reads_the_time(
    tmp_path: Path, reads_time: bool
) -> None:
    calls: list[str] = []
    wb = Workbench(tmp_path / "u.duckdb", user="u", rules=[clocked(calls, reads_time)])
    wb.ingest([add("2025-01-01", "Task", "t", due="2025-01-02")])
    calls.clear()
    wb.ingest([{**clock("2025-01-01"), "ts": "2025-01-01T15:00:00"}])
    assert calls == (["ran"] if reads_time else [])  # the time moved, the day did not
    report = wb.ingest([clock("2025-01-02")])
    assert calls[-1:] == ["ran"] and [a.message for a in report.raised] == ["t is due"]
    wb.close()


def windowed(calls: list[int]) -> Rule:
    """Charges of one amount within the last 10 days, woken as each leaves the window."""

    def leaves(r: Any) -> list[date]:
        return [r.date + timedelta(days=11)] if r.date is not None else []

    @rule(watch=["Charge"], partition=part, wakes=leaves, clock=True, name="recent_same")
    def recent_same(user: UserView) -> Iterator[Finding]:
        today = user.today
        assert today is not None
        recent = [c for c in user.all("Charge") if c.date and c.date > today - timedelta(days=10)]
        calls.append(len(recent))
        for amount, group in by_amount(recent).items():
            if len(group) > 1:
                yield Finding(f"{len(group)} recent charges of {amount}", group)

    return recent_same


def test_a_new_day_runs_a_rule_with_wakes_on_the_parts_it_woke(tmp_path: Path) -> None:
    calls: list[int] = []
    wb = Workbench(tmp_path / "u.duckdb", user="u", rules=[windowed(calls)])
    wb.ingest([add("2025-01-01", "Charge", "a1", amount=1.0, date="2025-01-01")])
    wb.ingest([add("2025-01-01", "Charge", "a2", amount=1.0, date="2025-01-01")])
    wb.ingest([add("2025-01-05", "Charge", f"b{i}", amount=2.0, date="2025-01-05") for i in (1, 2)])
    assert len(wb.runner.active["recent_same"]) == 2 and "recent_same" in wb.runner.parts
    calls.clear()
    report = wb.ingest([clock("2025-01-09")])  # a new day, no charge woken: nothing runs
    assert calls == [] and report.cleared == []
    report = wb.ingest([clock("2025-01-12")])  # the 1 January charges leave the window
    assert calls == [0] and [a.message for a in report.cleared] == ["2 recent charges of 1.0"]
    assert list(wb.runner.active["recent_same"]) == list(whole(wb, windowed([])))
    report = wb.ingest([clock("2026-06-01")])  # more days than are looked through: whole
    assert calls == [0, 0] and len(report.cleared) == 1


def test_wakes_need_a_partition() -> None:
    with pytest.raises(RuleError, match="wakes= needs partition="):
        rule(watch=["Charge"], wakes=lambda r: [])(lambda user: iter(()))


def test_a_record_every_finding_may_rest_on_waking_runs_the_rule_whole(tmp_path: Path) -> None:
    """A window (``EVERY``) that ends wakes on the day after: every charge's finding may change,
    although no finding names the window."""

    def part_or_every(r: Any) -> Any:
        return EVERY if type(r).__name__ == "Window" else r.key

    def ends(r: Any) -> list[date]:
        return [r.until + timedelta(days=1)] if type(r).__name__ == "Window" else []

    @rule(
        watch=["Charge", "Window"],
        partition=part_or_every,
        wakes=ends,
        clock=True,
        name="charged_in_window",
    )
    def charged_in_window(user: UserView) -> Iterator[Finding]:
        today = user.today
        assert today is not None
        if any(w.until >= today for w in user.all("Window")):
            for c in user.all("Charge"):
                yield Finding(f"{c.key} charged in a window", [c])

    wb = Workbench(tmp_path / "u.duckdb", user="u", rules=[charged_in_window])
    wb.ingest([add("2025-01-01", "Window", "w", until="2025-01-10")])
    for k in ("a", "b", "c"):
        wb.ingest([add("2025-01-01", "Charge", k, amount=1.0)])
    assert (
        "charged_in_window" in wb.runner.parts and len(wb.runner.active["charged_in_window"]) == 3
    )
    report = wb.ingest([clock("2025-01-12")])  # the window ended: every finding goes
    assert len(report.cleared) == 3 and wb.runner.active["charged_in_window"] == {}


def test_a_part_view_hands_new_lists_of_the_records_it_gathered_once(tmp_path: Path) -> None:
    view = build(
        tmp_path,
        [
            add(f"2025-01-0{i}", "Charge", f"c{i}", amount=float(i), day=f"2025-01-0{i}")
            for i in range(1, 6)
        ]
        + [add("2025-01-06", "Charge", "c6", amount=6.0)],
    )
    st = view._state
    parts = Parts.build(lambda r: r.key if r.amount % 2 else None, frozenset({"Charge"}), st)
    pv = PartView(st, parts.shown({"c1", "c3", "c5"}), parts, {"c1", "c3", "c5"})
    first = pv.all("Charge")
    assert [r.key for r in first] == ["c1", "c3", "c5"]
    first.reverse()  # a rule may change what it is handed: the view's own list stays
    first.append(first[0])
    assert [r.key for r in pv.all("Charge")] == ["c1", "c3", "c5"]
    assert pv.count("Charge") == 3
    assert [r.key for r in pv.where("Charge", "day", since=date(2025, 1, 2))] == ["c3", "c5"]
    assert [r.key for r in pv.unset("Charge", "day")] == []
    assert pv.all("Charge") is not pv.all("Charge")
