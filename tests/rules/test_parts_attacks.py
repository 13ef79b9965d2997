"""Attacks on rules read in parts (commit 3979cea): after any sequence of operations, the alerts
standing for each rule are the ones a whole run over the state finds."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.events import add, clock, retract, update
from helpers.rules import by_amount

from uac_kernel.rules import library as lib
from uac_kernel.rules.engine import Finding, Rule, rule
from uac_kernel.state.query import UserView
from uac_kernel.workbench import Workbench

PARTED = (lib.duplicate_charge, lib.transfer_during_freeze)


def whole(wb: Workbench, r: Rule) -> dict[str, tuple[str, str]]:
    return {i: (a.severity, a.message) for i, a in r.alerts(UserView(wb.state)).items()}


def standing(wb: Workbench, name: str) -> dict[str, tuple[str, str]]:
    return {i: (a.severity, a.message) for i, a in wb.runner.active[name].items()}


def check(wb: Workbench, *rules: Rule) -> None:
    for r in rules or PARTED:
        assert standing(wb, r.name) == whole(wb, r), r.name


def charge(ts: str, key: str, merchant: str, amount: float, **kw: Any) -> dict[str, Any]:
    return add(ts, "Transaction", key, merchant=merchant, amount=amount, date=ts[:10], **kw)


# -- transfer_during_freeze reads the day: an outflow's part is not all it depends on ----------


def test_freeze_alert_of_an_outflow_whose_date_passed_clears_when_another_outflow_comes(
    tmp_path: Path,
) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="u")
    wb.ingest(
        [
            add("2025-01-01", "Freeze", "f", account="checking"),
            add("2025-01-01", "Payment", "p1", account="checking", amount=5.0, date="2025-01-05"),
        ]
    )
    assert len(wb.runner.active["transfer_during_freeze"]) == 1
    # Days later, another outflow: p1's date is past, so it is no longer pending.
    wb.ingest(
        [add("2025-01-10", "Payment", "p2", account="checking", amount=7.0, date="2025-02-01")]
    )
    check(wb, lib.transfer_during_freeze)
    wb.close()


# -- a partition function that misbehaves ----------------------------------------------------


def charges_of_one_amount(partition: Any) -> Rule:
    @rule(watch=["Charge"], partition=partition, name="one_amount")
    def one_amount(user: UserView) -> Iterator[Finding]:
        for amount, group in by_amount(user.all("Charge")).items():
            if len(group) > 1:
                yield Finding(f"{len(group)} charges of {amount}", group)

    return one_amount


def fussy(rec: Any) -> Any:
    if rec.amount is not None and rec.amount > 100:
        raise ValueError("too big to part")
    return rec.amount


def test_a_partition_that_raises_does_not_stop_an_ingest(tmp_path: Path) -> None:
    r = charges_of_one_amount(fussy)
    wb = Workbench(tmp_path / "u.duckdb", user="u", rules=[r])
    wb.ingest([add("2025-01-01", "Charge", "a", amount=1.0)])
    wb.ingest([add("2025-01-01", "Charge", "b", amount=1.0)])
    assert len(wb.runner.active["one_amount"]) == 1
    # A broken rule must not stop ingest (RuleRunner._evaluate); a broken partition neither.
    wb.ingest([add("2025-01-01", "Charge", "c", amount=500.0)])
    wb.ingest([add("2025-01-01", "Charge", "d", amount=1.0)])
    assert wb.state.get("Charge", "d") is not None
    wb.close()


def test_a_partition_that_raises_does_not_stop_a_rule_being_added(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="u", rules=[])
    wb.ingest([add("2025-01-01", "Charge", "a", amount=500.0)])
    change = wb.add_rule(charges_of_one_amount(fussy))
    assert change is not None
    wb.ingest([add("2025-01-01", "Charge", "b", amount=2.0)])
    wb.close()


def test_an_unhashable_part_does_not_stop_an_ingest(tmp_path: Path) -> None:
    r = charges_of_one_amount(lambda rec: [rec.amount])
    wb = Workbench(tmp_path / "u.duckdb", user="u", rules=[r])
    wb.ingest([add("2025-01-01", "Charge", "a", amount=1.0)])
    wb.ingest([add("2025-01-01", "Charge", "b", amount=1.0)])
    wb.ingest([add("2025-01-01", "Charge", "c", amount=2.0)])
    assert wb.state.get("Charge", "c") is not None
    wb.close()


def test_a_notebook_rule_with_a_sound_partition_stands_as_a_whole_run(tmp_path: Path) -> None:
    r = charges_of_one_amount(lambda rec: rec.amount)
    wb = Workbench(tmp_path / "u.duckdb", user="u", rules=[])
    wb.ingest([add("2025-01-01", "Charge", f"c{i}", amount=float(i % 3)) for i in range(9)])
    wb.add_rule(r)
    check(wb, r)
    wb.ingest(
        [update("2025-01-01", "Charge", "c0", amount=1.0), retract("2025-01-01", "Charge", "c3")]
    )
    check(wb, r)
    wb.ingest([retract("2025-01-01", "Charge", "c1"), retract("2025-01-01", "Charge", "c4")])
    wb.ingest([add("2025-01-01", "Charge", "c1", amount=1.0)])  # the same key again
    check(wb, r)
    wb.close()


# -- the shipped rules' parts through the vocabulary ------------------------------------------


def spend(ts: str, key: str, vendor: str, cost: float) -> dict[str, Any]:
    return add(ts, "Spend", key, vendor=vendor, cost=cost, on=ts[:10])


def test_a_type_bound_to_play_charge_midway_is_parted_as_a_charge(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="u", propose_bindings=False)
    wb.ingest(
        [
            spend("2025-03-01", "s1", "Corner Cafe", 4.5),
            charge("2025-03-01", "t1", "Shoe Shop", 80.0),
        ]
    )
    wb.ingest([spend("2025-03-01", "s2", "Corner Cafe", 4.5)])
    check(wb)
    wb.bind("Spend", "charge")
    wb.bind("Spend.vendor", "payment.merchant")
    wb.bind("Spend.cost", "payment.amount")
    wb.bind("Spend.on", "payment.date")
    check(wb)
    assert wb.runner.active["duplicate_charge"]
    wb.ingest([spend("2025-03-02", "s3", "Shoe Shop", 80.0)])
    check(wb)
    wb.ingest([charge("2025-03-02", "t2", "Shoe Shop", 80.0)])
    check(wb)
    wb.ingest([update("2025-03-02", "Spend", "s3", cost=81.0)])
    check(wb)
    wb.unbind("Spend.cost", "payment.amount", reason="not money")
    check(wb)
    wb.ingest([spend("2025-03-02", "s4", "Corner Cafe", 4.5)])
    check(wb)
    wb.close()


def test_a_type_playing_charge_and_refund_is_one_part(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="u", propose_bindings=False)
    wb.ingest(
        [
            charge("2025-03-01", "t1", "Shoe Shop", 80.0),
            charge("2025-03-01", "t2", "Shoe Shop", 80.0),
        ]
    )
    assert wb.runner.active["duplicate_charge"]
    wb.bind("Transaction", "refund")
    check(wb)
    wb.ingest([charge("2025-03-02", "t3", "Shoe Shop", -80.0)])
    check(wb)
    wb.ingest(
        [charge("2025-03-02", "t4", "Shoe Shop", 80.0), retract("2025-03-02", "Transaction", "t3")]
    )
    check(wb)
    wb.close()


def test_a_type_playing_freeze_and_payment_runs_whole_and_stands_as_a_whole_run(
    tmp_path: Path,
) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="u", propose_bindings=False)
    wb.ingest(
        [
            add("2025-01-01", "Payment", "p1", account="checking", amount=5.0, date="2026-01-05"),
            add("2025-01-01", "Payment", "p2", account="savings", amount=5.0, date="2026-01-05"),
            add("2025-01-01", "Hold", "h1", account="checking", amount=3.0, date="2026-01-05"),
        ]
    )
    check(wb)
    wb.bind("Hold", "payment")
    check(wb)
    wb.bind("Hold", "freeze")
    check(wb)
    assert wb.runner.active["transfer_during_freeze"]
    wb.ingest([add("2025-01-02", "Hold", "h2", account="savings", amount=1.0, date="2026-01-05")])
    check(wb)
    wb.ingest([update("2025-01-02", "Payment", "p2", account="brokerage")])
    check(wb)
    wb.close()


def test_an_outflow_that_becomes_a_freeze_and_back_stands_as_a_whole_run(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="u")
    wb.ingest(
        [
            add("2025-01-01", "Payment", "p1", account="checking", amount=5.0, date="2026-01-05"),
            add("2025-01-01", "Payment", "p2", account="checking", amount=6.0, date="2026-01-05"),
            add("2025-01-01", "Instruction", "i1", action="wire money", account="checking"),
        ]
    )
    check(wb)
    wb.ingest([update("2025-01-02", "Payment", "p1", freeze=True)])
    check(wb)
    assert wb.runner.active["transfer_during_freeze"]
    wb.ingest([update("2025-01-02", "Instruction", "i1", action="freeze the account")])
    check(wb)
    wb.ingest([update("2025-01-03", "Payment", "p1", freeze=False)])
    check(wb)
    wb.ingest([update("2025-01-03", "Instruction", "i1", action="transfer it")])
    check(wb)
    wb.ingest(
        [
            retract("2025-01-03", "Payment", "p2"),
            add("2025-01-03", "Freeze", "f", account="checking"),
        ]
    )
    check(wb)
    wb.ingest([retract("2025-01-03", "Freeze", "f")])
    check(wb)
    wb.close()


def test_a_store_with_a_record_the_partition_cannot_part_still_opens(tmp_path: Path) -> None:
    path = tmp_path / "u.duckdb"
    wb = Workbench(path, user="u", rules=[])
    wb.ingest([add("2025-01-01", "Charge", "a", amount=500.0)])
    wb.close()
    wb = Workbench(path, user="u", rules=[charges_of_one_amount(fussy)])
    assert wb.state.get("Charge", "a") is not None
    wb.close()


def test_nan_and_infinite_amounts_are_refused_at_the_door(tmp_path: Path) -> None:
    from uac_kernel.core.errors import EventError

    wb = Workbench(tmp_path / "u.duckdb", user="u")
    wb.ingest([charge("2025-03-01", "t1", "Shoe Shop", 80.0)])
    for i, bad in enumerate((math.nan, math.inf)):
        with pytest.raises(EventError, match="finite"):
            wb.ingest([charge("2025-03-01", f"x{i}", "Shoe Shop", bad)])
    wb.ingest([charge("2025-03-01", "t2", "Shoe Shop", 80.0)])
    check(wb)
    wb.close()


def test_a_huge_finite_charge_does_not_stop_an_ingest(tmp_path: Path) -> None:
    # 1e308 is finite, so the log takes it; its amount in cents overflows (round(inf)).
    wb = Workbench(tmp_path / "u.duckdb", user="u")
    wb.ingest([charge("2025-03-01", "t1", "Shoe Shop", 80.0)])
    wb.ingest([charge("2025-03-01", "t2", "Shoe Shop", 1e308)])
    assert wb.state.get("Transaction", "t2") is not None
    wb.ingest([charge("2025-03-01", "t3", "Shoe Shop", 80.0)])
    assert [a.category for a in wb.runner.active["duplicate_charge"].values()] != []
    wb.close()


def test_a_store_holding_a_huge_finite_charge_opens_with_the_shipped_rules(tmp_path: Path) -> None:
    path = tmp_path / "u.duckdb"
    wb = Workbench(path, user="u", rules=[])
    wb.ingest([charge("2025-03-01", "t1", "Shoe Shop", 1e308)])
    wb.close()
    wb = Workbench(path, user="u")  # the library: duplicate_charge parts every charge on open
    assert wb.state.get("Transaction", "t1") is not None
    wb.close()


# -- long hostile sequences -------------------------------------------------------------------

HOSTILE = (
    "Corner Cafe",
    "corner CAFE",
    "The Corner Cafe Inc",
    "Café Ünïcode",
    "'; DROP TABLE events;--",
    "Shoe\nShop",
    "shoe shop",
    "",
    "   ",
    "the inc llc",
    "{merchant} %s %n",
    "🙂 emoji mart",
)
CHARGE_TYPES = ("Transaction", "Transaction", "Refund", "Payment", "Purchase", "Chargeback")


def hostile_batches(seed: int, n: int) -> Iterator[list[dict[str, Any]]]:
    import random

    rng = random.Random(seed)
    live: dict[tuple[str, str], None] = {}
    gone: list[tuple[str, str]] = []
    made = 0
    from datetime import datetime, timedelta

    at = datetime(2025, 3, 1, 9)

    def fields() -> dict[str, Any]:
        f: dict[str, Any] = {
            "merchant": rng.choice(HOSTILE),
            "amount": rng.choice((12.0, 12.004, 42.5, -42.5, 80.0, 0.0, 79.999)),
            "date": rng.choice(
                (at.date().isoformat(), (at - timedelta(days=2)).date().isoformat(), "2024-10-01")
            ),
        }
        if rng.random() < 0.2:
            f["instrument"] = rng.choice(("visa 1234", "amex 9", "my visa 1234"))
        if rng.random() < 0.1:
            f["recurring"] = True
        if rng.random() < 0.1:
            f["refunded"] = True
        if rng.random() < 0.1:
            f["status"] = rng.choice(("cancelled", "done", "pending"))
        return f

    for step in range(n):
        if rng.random() < 0.3:
            at = (at + timedelta(days=rng.randint(1, 3))).replace(hour=9)
        elif at.hour < 23:
            at += timedelta(hours=1)
        ts = at.isoformat()
        batch: list[dict[str, Any]] = []
        for _ in range(rng.randint(1, 5)):
            roll = rng.random()
            if roll < 0.4 or not live:
                made += 1
                t = rng.choice(CHARGE_TYPES)
                key = f"k{made}"
                batch.append(add(ts, t, key, **fields()))
                live[(t, key)] = None
            elif roll < 0.75:
                t, key = rng.choice(list(live))
                f = fields()
                change = dict(rng.sample(sorted(f.items()), rng.randint(1, len(f))))
                if rng.random() < 0.05:
                    change["memo"] = "a new field"  # a schema change mid-way
                batch.append(update(ts, t, key, **change))
            elif roll < 0.9:
                t, key = rng.choice(list(live))
                batch.append(retract(ts, t, key))
                del live[(t, key)]
                gone.append((t, key))
                if rng.random() < 0.5:  # retracted and added again in the same batch
                    batch.append(add(ts, t, key, **fields()))
                    live[(t, key)] = None
            elif gone:
                t, key = gone.pop(rng.randrange(len(gone)))
                if (t, key) not in live:
                    batch.append(add(ts, t, key, **fields()))
                    live[(t, key)] = None
        if rng.random() < 0.15:
            batch.append({**clock(ts[:10]), "ts": ts})
        # Each event its own source: the log skips an event whose source it holds.
        yield [{**e, "source": f"s{seed}:{step}:{i}"} for i, e in enumerate(batch)]


@pytest.mark.parametrize("seed", [11, 12, 13, 14])
def test_duplicate_charge_stands_as_a_whole_run_through_a_hostile_sequence(
    tmp_path: Path, seed: int
) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="u", rules=[lib.duplicate_charge])
    raised = 0
    for batch in hostile_batches(seed, 80):
        report = wb.ingest(batch)
        raised += len(report.raised)
        check(wb, lib.duplicate_charge)
    assert raised and "duplicate_charge" in wb.runner.parts
    wb.close()


def test_freeze_alerts_clear_when_a_new_outflow_comes_after_the_freeze_ended(
    tmp_path: Path,
) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="u")
    wb.ingest(
        [
            add("2025-01-01", "Freeze", "f", account="checking", until="2025-01-05"),
            add("2025-01-01", "Payment", "p1", account="checking", amount=5.0),
        ]
    )
    assert len(wb.runner.active["transfer_during_freeze"]) == 1
    wb.ingest([add("2025-01-10", "Payment", "p2", account="checking", amount=7.0)])
    check(wb, lib.transfer_during_freeze)  # the freeze ended on the 5th: nothing stands
    wb.close()


# -- what-ifs, two workbenches, reopening ------------------------------------------------------


def test_a_whatif_leaves_the_parts_and_alerts_as_they_were_and_tells_what_an_ingest_does(
    tmp_path: Path,
) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="u")
    wb.ingest([charge("2025-03-01", f"t{i}", "Shoe Shop", float(10 + i % 3)) for i in range(9)])
    wb.ingest([add("2025-03-01", "Freeze", "f", account="checking")])
    wb.ingest(
        [add("2025-03-01", "Payment", "p", account="checking", amount=3.0, date="2026-01-01")]
    )
    before = {r.name: standing(wb, r.name) for r in PARTED}
    events = [
        update("2025-03-02", "Transaction", "t0", amount=11.0),
        retract("2025-03-02", "Transaction", "t1"),
        add("2025-03-02", "Refund", "r", merchant="Shoe Shop", amount=12.0, date="2025-03-02"),
        update("2025-03-02", "Payment", "p", account="savings"),
    ]
    w = wb.whatif(events)
    past = wb.whatif(events, as_of="2025-03-01T12:00:00")
    assert {r.name: standing(wb, r.name) for r in PARTED} == before
    check(wb)
    report = wb.ingest(events)
    check(wb)
    assert sorted(a.id for a in w.raised) == sorted(a.id for a in report.raised)
    assert sorted(a.id for a in w.cleared) == sorted(a.id for a in report.cleared)
    assert past is not None
    wb.close()


def test_a_second_workbench_catching_up_stands_as_a_whole_run(tmp_path: Path) -> None:
    path = tmp_path / "u.duckdb"
    a = Workbench(path, user="u")
    b = Workbench(path, user="u")
    a.ingest([charge("2025-03-01", "t1", "Shoe Shop", 80.0)])
    b.refresh()
    check(b)
    a.ingest([charge("2025-03-01", "t2", "Shoe Shop", 80.0)])
    b.refresh()
    check(b)
    assert b.runner.active["duplicate_charge"]
    b.ingest([update("2025-03-01", "Transaction", "t2", amount=81.0)])
    a.ingest([charge("2025-03-01", "t3", "Shoe Shop", 81.0)])  # a catches up with b first
    check(a)
    b.refresh()
    check(b)
    a.ingest(
        [retract("2025-03-02", "Transaction", "t3"), charge("2025-03-02", "t3b", "Shoe Shop", 80.0)]
    )
    b.ingest([charge("2025-03-02", "t4", "Shoe Shop", 80.0)])
    a.refresh()
    check(a)
    check(b)
    assert standing(a, "duplicate_charge") == standing(b, "duplicate_charge")
    a.close()
    b.close()


def bulk(prefix: str, n: int, ts: str = "2025-03-01") -> list[dict[str, Any]]:
    return [
        {
            **charge(ts, f"{prefix}{i}", f"Store {i % 500}", float(1 + i % 7)),
            "source": f"{prefix}:{i}",
        }
        for i in range(n)
    ]


@pytest.mark.parametrize("n", [20_000, 20_001])
def test_a_batch_at_and_past_the_keys_kept_stands_as_a_whole_run_and_reopens(
    tmp_path: Path, n: int
) -> None:
    path = tmp_path / "u.duckdb"
    wb = Workbench(path, user="u", rules=[lib.duplicate_charge])
    wb.ingest([charge("2025-03-01", "seed", "Store 1", 2.0)])
    wb.ingest(bulk("b", n))
    check(wb, lib.duplicate_charge)
    wb.ingest(
        [
            update("2025-03-01", "Transaction", "b1", amount=3.0),
            retract("2025-03-01", "Transaction", "seed"),
        ]
    )
    check(wb, lib.duplicate_charge)
    wb.close()  # past CLOSE_AFTER events: a snapshot
    wb = Workbench(path, user="u", rules=[lib.duplicate_charge])
    check(wb, lib.duplicate_charge)
    wb.ingest([update("2025-03-01", "Transaction", "b2", merchant="Store 1", amount=2.0)])
    check(wb, lib.duplicate_charge)
    wb.ingest([retract("2025-03-01", "Transaction", "b501")])
    check(wb, lib.duplicate_charge)
    wb.close()


# -- the clock ---------------------------------------------------------------------------------


def due_today(calls: list[str]) -> Rule:
    @rule(watch=["Task"], clock=True, name="due_by_day")
    def due_by_day(user: UserView) -> Iterator[Finding]:
        calls.append("ran")
        today = user.today
        for t in user.all("Task"):
            if today is not None and t.due is not None and t.due <= today:
                yield Finding(f"{t.key} is due", [t])

    return due_by_day


def said(ts: str) -> dict[str, Any]:
    return {"kind": "utterance", "ts": ts, "speaker": "user", "text": "ok"}


def test_a_clock_rule_sees_the_day_move_when_the_clock_moves_across_time_zones(
    tmp_path: Path,
) -> None:
    calls: list[str] = []
    r = due_today(calls)
    wb = Workbench(tmp_path / "u.duckdb", user="u", rules=[r])
    wb.ingest([add("2025-01-01T20:00:00+00:00", "Task", "t", due="2025-01-02")])
    check(wb, r)
    for ts in (
        "2025-01-01T23:30:00+00:00",
        "2025-01-02T00:30:00+01:00",
        "2025-01-02T01:00:00+00:00",
    ):
        wb.ingest([said(ts)])
        check(wb, r)
    wb.close()


def test_a_clock_rule_that_reads_the_time_only_for_some_records_runs_when_the_time_moves(
    tmp_path: Path,
) -> None:
    @rule(watch=["Task"], clock=True, name="at_hour")
    def at_hour(user: UserView) -> Iterator[Finding]:
        today = user.today
        for t in user.all("Task"):
            if t.timed:
                now = user.now  # only a task with an hour needs the time
                if now is not None and now.hour >= t.hour:
                    yield Finding(f"{t.key} at {t.hour}", [t])
            elif today is not None and t.due is not None and t.due <= today:
                yield Finding(f"{t.key} is due", [t])

    wb = Workbench(tmp_path / "u.duckdb", user="u", rules=[at_hour])
    wb.ingest([add("2025-01-01T08:00:00", "Task", "a", due="2025-01-03", hour=0, timed=False)])
    wb.ingest([said("2025-01-01T09:00:00")])
    check(wb, at_hour)
    wb.ingest([add("2025-01-01T10:00:00", "Task", "b", due="2025-01-09", hour=15, timed=True)])
    wb.ingest([said("2025-01-01T16:00:00")])
    check(wb, at_hour)
    assert wb.runner.active["at_hour"]
    wb.ingest([retract("2025-01-01T17:00:00", "Task", "b")])
    wb.ingest([add("2025-01-01T17:30:00", "Task", "c", due="2025-01-09", hour=18, timed=True)])
    wb.ingest([said("2025-01-01T18:30:00")])
    check(wb, at_hour)
    wb.close()


def test_a_partitioned_clock_rule_that_reads_the_time_in_one_part_runs_when_the_time_moves(
    tmp_path: Path,
) -> None:
    @rule(watch=["Task"], clock=True, name="part_hour", partition=lambda t: t.key)
    def part_hour(user: UserView) -> Iterator[Finding]:
        for t in user.all("Task"):
            if t.timed:
                now = user.now
                if now is not None and now.hour >= t.hour:
                    yield Finding(f"{t.key} at {t.hour}", [t])
            elif user.today is not None and t.due is not None and t.due <= user.today:
                yield Finding(f"{t.key} is due", [t])

    wb = Workbench(tmp_path / "u.duckdb", user="u", rules=[part_hour])
    wb.ingest([add("2025-01-01T08:00:00", "Task", "a", due="2025-01-03", hour=0, timed=False)])
    wb.ingest(
        [add("2025-01-01T09:00:00", "Task", "b", due="2025-01-09", hour=15, timed=True)]
    )  # a part run
    wb.ingest(
        [add("2025-01-01T10:00:00", "Task", "c", due="2025-01-01", hour=0, timed=False)]
    )  # another
    wb.ingest([said("2025-01-01T16:00:00")])
    check(wb, part_hour)
    assert len(wb.runner.active["part_hour"]) == 2
    wb.close()


# -- constraints are rules too ------------------------------------------------------------------

PAY_BY = {
    "kind": "obligation", "title": "pay the charge", "subject": {"type": "Transaction"},
    "due": {"fields": ["date"]},
}  # fmt: skip


def test_constraints_put_in_force_and_retracted_between_batches_leave_parts_as_a_whole_run(
    tmp_path: Path,
) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="u")
    wb.ingest([charge("2025-03-01", "t1", "Shoe Shop", 80.0)])
    wb.constrain(PAY_BY, key="pay")
    wb.ingest([charge("2025-03-02", "t2", "Shoe Shop", 80.0)])
    check(wb)
    wb.constrain({**PAY_BY, "title": "pay it now"}, key="pay")
    wb.ingest(
        [
            update("2025-03-02", "Transaction", "t2", amount=81.0),
            charge("2025-03-02", "t3", "Shoe Shop", 81.0),
        ]
    )
    check(wb)
    for name, r in wb.runner.rules.items():
        assert standing(wb, name) == whole(wb, r), name
    wb.retract_constraint("pay", reason="done")
    wb.ingest([retract("2025-03-03", "Transaction", "t3")])
    check(wb)
    assert "duplicate_charge" in wb.runner.parts
    wb.close()


def logged_standing(wb: Workbench, name: str) -> dict[str, str]:
    """The alerts of rule ``name`` the log says stand, by id, with their severity."""
    out: dict[str, str] = {}
    for ev in wb.alert_history():
        p = ev.payload
        if p["rule"] != name:
            continue
        if p["state"] in ("raised", "updated"):
            out[p["id"]] = p["severity"]
        else:
            out.pop(p["id"], None)
    return out


@pytest.mark.parametrize("seed", [21, 22])
def test_the_alert_log_agrees_with_the_parts_and_a_reopen_logs_nothing_new(
    tmp_path: Path, seed: int
) -> None:
    path = tmp_path / "u.duckdb"
    wb = Workbench(path, user="u", rules=[lib.duplicate_charge])
    for batch in hostile_batches(seed, 60):
        wb.ingest(batch)
        got = {i: a.severity for i, a in wb.runner.active["duplicate_charge"].items()}
        assert logged_standing(wb, "duplicate_charge") == got
    n = len(wb.alert_history())
    wb.close()
    wb = Workbench(path, user="u", rules=[lib.duplicate_charge])
    check(wb, lib.duplicate_charge)
    assert len(wb.alert_history()) == n
    wb.close()


# -- what a part's history holds ------------------------------------------------------------


def test_a_parts_history_holds_its_retracted_records(tmp_path: Path) -> None:
    """docs/rules.md: the user handed to a partitioned rule shows ``history`` of the touched
    parts. A record retracted from a part is of that part's history: a rule reading it (a
    charge made again after one was taken back) finds on the parts what it finds whole."""

    @rule(watch=["Charge"], partition=lambda c: c.amount, name="charged_again")
    def charged_again(user: UserView) -> Iterator[Finding]:
        taken_back = {(v.amount, v.key) for v in user.history("Charge") if v.retracted}
        for c in user.all("Charge"):
            if any(a == c.amount and k != c.key for a, k in taken_back):
                yield Finding(f"{c.key} charged again", [c])

    wb = Workbench(tmp_path / "u.duckdb", user="u", rules=[charged_again])
    wb.ingest(
        [
            add("2025-01-01", "Charge", "c1", amount=5.0),
            add("2025-01-01", "Charge", "c2", amount=7.0),
        ]
    )
    wb.ingest([retract("2025-01-02", "Charge", "c1")])
    wb.ingest([add("2025-01-03", "Charge", "c3", amount=5.0)])
    check(wb, charged_again)
    wb.close()


def test_a_parts_history_holds_the_versions_a_record_had_in_it(tmp_path: Path) -> None:
    @rule(watch=["Charge"], partition=lambda c: c.amount, name="amount_reused")
    def amount_reused(user: UserView) -> Iterator[Finding]:
        old = {(v.amount, v.key) for v in user.history("Charge") if v.valid_to is not None}
        for c in user.all("Charge"):
            if any(a == c.amount and k != c.key for a, k in old):
                yield Finding(f"{c.key} has an amount another charge had", [c])

    wb = Workbench(tmp_path / "u.duckdb", user="u", rules=[amount_reused])
    wb.ingest(
        [
            add("2025-01-01", "Charge", "c1", amount=5.0),
            add("2025-01-01", "Charge", "c2", amount=7.0),
        ]
    )
    wb.ingest([update("2025-01-02", "Charge", "c1", amount=6.0)])  # c1 leaves part 5
    wb.ingest([add("2025-01-03", "Charge", "c3", amount=5.0)])
    check(wb, amount_reused)
    wb.close()


ACCOUNTS = (
    "checking",
    "my checking account",
    "the Checking",
    "savings",
    "",
    "acct",
    "Ünï savings 🙂",
)
ACTIONS = ("freeze the account", "wire $500", "put a hold on it", "note to self", "pay the bill")
OUTFLOW_TYPES = ("Payment", "Bill", "Transfer", "Wire", "Instruction", "Freeze")


def freeze_batches(seed: int, n: int) -> Iterator[list[dict[str, Any]]]:
    """Freezes, instructions and outflows, every date ahead of the log's clock (so what the
    rule finds does not move with the day)."""
    import random

    rng = random.Random(seed)
    live: list[tuple[str, str]] = []
    made = 0

    def fields(t: str) -> dict[str, Any]:
        f: dict[str, Any] = {
            "account": rng.choice(ACCOUNTS),
            "amount": rng.choice((5.0, 50.0)),
            "date": rng.choice(("2026-01-05", "2026-02-01")),
            "until": "2026-12-31",
            "since": rng.choice(("2025-01-01", "2026-01-10")),
            "lifted": rng.random() < 0.2,
            "freeze": rng.random() < 0.15,
            "sent": rng.random() < 0.1,
            "status": rng.choice(("pending", "pending", "cancelled")),
        }
        if t == "Instruction":
            f["action"] = rng.choice(ACTIONS)
        return f

    for step in range(n):
        ts = f"2025-02-{1 + step // 6:02d}T{9 + step % 6:02d}:00:00"
        batch: list[dict[str, Any]] = []
        for _ in range(rng.randint(1, 4)):
            roll = rng.random()
            if roll < 0.45 or not live:
                made += 1
                t = rng.choice(OUTFLOW_TYPES)
                batch.append(add(ts, t, f"k{made}", **fields(t)))
                live.append((t, f"k{made}"))
            elif roll < 0.85:
                t, key = rng.choice(live)
                f = fields(t)
                batch.append(
                    update(ts, t, key, **dict(rng.sample(sorted(f.items()), rng.randint(1, 3))))
                )
            else:
                t, key = live.pop(rng.randrange(len(live)))
                batch.append(retract(ts, t, key))
        yield [{**e, "source": f"f{seed}:{step}:{i}"} for i, e in enumerate(batch)]


@pytest.mark.parametrize("seed", [31, 32, 33])
def test_transfer_during_freeze_stands_as_a_whole_run_when_no_date_passes(
    tmp_path: Path, seed: int
) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="u", rules=[lib.transfer_during_freeze])
    raised = 0
    for batch in freeze_batches(seed, 60):
        raised += len(wb.ingest(batch).raised)
        check(wb, lib.transfer_during_freeze)
    assert raised
    wb.close()


# -- the order a part's records come in ---------------------------------------------------------


def listing() -> Rule:
    @rule(watch=["Charge"], partition=lambda c: c.amount, name="listing")
    def listing(user: UserView) -> Iterator[Finding]:
        for amount, group in by_amount(user.all("Charge")).items():
            if len(group) > 1:
                yield Finding(f"{amount}: {', '.join(c.key for c in group)}", group)

    return listing


def test_a_part_lists_its_records_in_the_order_a_whole_run_does_after_readds_and_a_reopen(
    tmp_path: Path,
) -> None:
    path = tmp_path / "u.duckdb"
    r = listing()
    wb = Workbench(path, user="u", rules=[r])
    wb.ingest([add("2025-01-01", "Charge", k, amount=1.0) for k in ("z", "a", "m", "b")])
    wb.ingest([retract("2025-01-02", "Charge", "a"), retract("2025-01-02", "Charge", "z")])
    wb.ingest(
        [add("2025-01-02", "Charge", "z", amount=1.0), add("2025-01-02", "Charge", "a", amount=1.0)]
    )
    check(wb, r)
    wb.ingest([add("2025-01-02", "Charge", "q", amount=1.0, memo="new field")])  # a settle
    check(wb, r)
    wb.ingest(
        [
            {**e, "source": f"n:{i}"}
            for i, e in enumerate(
                add("2025-01-03", "Note", f"n{i}", text="x") for i in range(10_001)
            )
        ]
    )
    wb.close()  # a snapshot
    wb = Workbench(path, user="u", rules=[r])
    assert wb._snap is not None  # opened from the snapshot
    check(wb, r)
    wb.ingest([update("2025-01-04", "Charge", "m", amount=2.0)])
    wb.ingest([update("2025-01-04", "Charge", "m", amount=1.0)])
    check(wb, r)
    wb.close()


def test_a_workbench_catching_up_with_another_process_stands_as_a_whole_run(
    tmp_path: Path,
) -> None:
    import json
    import subprocess
    import sys

    path = tmp_path / "u.duckdb"
    wb = Workbench(path, user="u")
    wb.ingest([charge("2025-03-01", "t1", "Shoe Shop", 80.0)])
    wb.ingest([charge("2025-03-01", "t2", "Cafe", 4.0)])  # the second change builds the parts
    assert "duplicate_charge" in wb.runner.parts

    def other(events: list[dict[str, Any]]) -> None:
        code = (
            "import json, sys\n"
            "from uac_kernel.workbench import Workbench\n"
            f"wb = Workbench({str(path)!r}, user='u')\n"
            "wb.ingest(json.loads(sys.argv[1]))\n"
            "wb.close()\n"
        )
        subprocess.run([sys.executable, "-c", code, json.dumps(events)], check=True, timeout=300)

    other([charge("2025-03-01", "t3", "Shoe Shop", 80.0)])
    wb.refresh()
    check(wb)
    assert wb.runner.active["duplicate_charge"]
    other(
        [
            update("2025-03-02", "Transaction", "t3", amount=4.0, merchant="Cafe"),
            retract("2025-03-02", "Transaction", "t2"),
        ]
    )
    other([charge("2025-03-02", "t4", "Cafe", 4.0)])
    wb.ingest([charge("2025-03-02", "t5", "Shoe Shop", 80.0)])  # catches up first
    check(wb)
    wb.close()


def test_a_charge_the_shipped_partition_cannot_part_leaves_no_other_rule_behind(
    tmp_path: Path,
) -> None:
    @rule(watch=["Transaction"], name="big_spend")
    def big_spend(user: UserView) -> Iterator[Finding]:
        for t in user.all("Transaction"):
            if t.amount is not None and t.amount > 1000:
                yield Finding(f"{t.key} is big", [t])

    wb = Workbench(tmp_path / "u.duckdb", user="u", rules=[lib.duplicate_charge, big_spend])
    wb.ingest([charge("2025-03-01", "t1", "Shoe Shop", 80.0)])
    wb.ingest([charge("2025-03-01", "t2", "Shoe Shop", 1e308)])
    wb.ingest([add("2025-03-02", "Note", "n", text="later")])
    check(wb, big_spend)  # the events were logged: every rule must have seen them
    wb.close()
