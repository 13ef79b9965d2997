"""Why a cleared alert no longer stands (``rules.engine.why_cleared``, ``rules.cleared``): a new
alert of its rule about the same records replaces it; a record whose change, undone, brings it
back settled it; the clock cleared it when undoing every record's change still leaves it
cleared. A record that merely changed beside the clear is never named."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from helpers.constraints import RABIES, jab
from helpers.events import add, clock, retract, update

from uac_kernel import Finding, Workbench, rule
from uac_kernel.rules.cleared import MANY_CHANGED, Undone, version_after
from uac_kernel.state.query import UserView

# A user's own camelCase types and fields, read as the constraints name them.
VET_BUDGET = {
    "kind": "window_limit",
    "title": "Vet bills under 200 a month",
    "subject": {"type": "VetBill"},
    "measure": "sum",
    "amount": "amountGbp",
    "date": ["billDate"],
    "period": "month",
    "limit": 200,
    "warn_at": 0.8,
}


def uncovered_trip() -> Workbench:
    """A pet trip in April whose only rabies jab ends in March: the constraint's alert stands."""
    wb = Workbench(rules=[])
    wb.ingest(
        [
            clock("2026-01-05"),
            jab("2026-01-05", "rex-2024", "2024-03-01", "2026-03-01"),
            add(
                "2026-01-06",
                "PetTrip",
                "rex-france",
                petKey="rex",
                leavesOn="2026-04-02",
                returnsOn="2026-04-12",
                crossesBorder=True,
            ),
        ]
    )
    wb.constrain(RABIES, key="rabies-for-pet-trips")
    (a,) = wb.alerts()
    assert "uncovered" in a.message
    return wb


def test_a_new_jab_that_covers_the_trip_settles_its_alert_by_name() -> None:
    wb = uncovered_trip()
    seq = wb.state.seq + 1  # the event that adds the jab
    report = wb.ingest([jab("2026-02-01", "rex-2026", "2026-02-01", "2029-02-01")])
    (cleared,) = report.cleared
    assert cleared.reason == f"settled by PetVaccine 'rex-2026', added (event {seq})"
    assert wb.alert_history()[-1].payload["reason"] == cleared.reason


def test_a_jab_that_brings_a_new_field_is_named_too() -> None:
    """A new field changes every record's class (the fold keeps no changed keys for the type):
    the records the batch changed are found by their events."""
    wb = uncovered_trip()
    new = jab("2026-02-01", "rex-2026", "2026-02-01", "2029-02-01")
    new["fields"]["batchNumber"] = "RB-1207"
    (cleared,) = wb.ingest([new]).cleared
    assert cleared.reason.startswith("settled by PetVaccine 'rex-2026', added (event ")


def test_only_the_record_whose_change_settled_it_is_named_not_one_changed_beside_it() -> None:
    wb = uncovered_trip()
    report = wb.ingest(
        [
            jab("2026-02-01", "tom-2026", "2026-02-01", "2029-02-01", pet="tom"),
            jab("2026-02-01", "rex-2026", "2026-02-01", "2029-02-01"),
        ]
    )
    (cleared,) = report.cleared
    assert cleared.reason.startswith("settled by PetVaccine 'rex-2026', added (event ")
    assert "tom-2026" not in cleared.reason


def test_a_jab_corrected_to_cover_the_trip_is_named_with_what_changed() -> None:
    wb = uncovered_trip()
    wb.ingest([jab("2026-01-20", "rex-2026", "2026-01-20", "2027-01-20", name="distemper")])
    seq = wb.state.seq + 1
    report = wb.ingest([update("2026-01-21", "PetVaccine", "rex-2026", vaccineName="rabies")])
    (cleared,) = report.cleared
    assert cleared.reason == (
        f"settled by PetVaccine 'rex-2026', changed (event {seq}): vaccineName distemper → rabies"
    )


def test_a_bill_that_breaks_the_limit_replaces_the_near_limit_alert_not_settles_it() -> None:
    wb = Workbench(rules=[])
    wb.ingest([add("2026-01-15", "VetBill", "b1", billDate="2026-01-15", amountGbp=180.0)])
    wb.constrain(VET_BUDGET, key="vet-budget")
    (near,) = wb.alerts()
    assert "near it" in near.message
    report = wb.ingest([add("2026-01-28", "VetBill", "b2", billDate="2026-01-28", amountGbp=40.0)])
    (over,) = report.raised
    (cleared,) = report.cleared
    assert cleared.id == near.id
    assert (near.severity, over.severity) == ("info", "warning")
    assert cleared.reason == (
        "replaced by a new warning alert of its rule (this one was info): a total amountGbp of "
        "220 in the month 2026-01, over the limit of 200"
    )
    assert "settled" not in cleared.reason


def test_a_return_window_passing_is_the_clock_and_names_no_record_that_came_with_it() -> None:
    wb = Workbench()  # the shipped rules: a return deadline is read on every type
    wb.ingest([add("2025-03-01", "Purchase", "lamp", item="lamp", return_by="2025-03-05")])
    assert any("return_by" in a.message for a in wb.alerts())
    report = wb.ingest(
        [add("2025-03-06", "Appointment", "dentist", title="dentist", date="2025-04-01")]
    )
    (cleared,) = [a for a in report.cleared if "lamp" in a.message]
    assert (
        cleared.reason == "the log's clock moved on to 2025-03-06; none of its own records changed"
    )
    assert "Appointment" not in cleared.reason


def held_charges() -> Workbench:
    @rule(watch=["Charge", "Hold"])
    def charge_while_held(user: UserView) -> Iterator[Finding]:
        if any(h.on for h in user.all("Hold")):
            yield from (Finding("charged while held", [c]) for c in user.all("Charge"))

    wb = Workbench(rules=[])
    wb.add_rule(charge_while_held)
    wb.ingest(
        [add("2025-01-01", "Hold", "h", on=True), add("2025-01-02", "Charge", "c", amount=5.0)]
    )
    assert len(wb.alerts()) == 1
    return wb


def test_a_retracted_record_beside_the_alert_is_named_as_retracted() -> None:
    wb = held_charges()
    seq = wb.state.seq + 1
    (cleared,) = wb.ingest([retract("2025-01-03", "Hold", "h")]).cleared
    assert cleared.reason == f"settled by Hold 'h', retracted (event {seq})"


def test_many_changed_records_are_not_undone_one_by_one() -> None:
    wb = held_charges()
    many = [add("2025-01-03", "Hold", f"x{i}", on=False) for i in range(MANY_CHANGED)]
    (cleared,) = wb.ingest([*many, update("2025-01-03", "Hold", "h", on=False)]).cleared
    assert "settled by" not in cleared.reason
    assert cleared.reason.endswith("other Hold records changed; none of its own records changed")


def test_the_undone_view_reads_each_record_as_it_was_after_the_given_event() -> None:
    wb = held_charges()
    since = wb.state.seq
    wb.ingest(
        [
            update("2025-01-04", "Charge", "c", amount=7.0),
            retract("2025-01-04", "Hold", "h"),
            add("2025-01-04", "Hold", "new", on=True),
        ]
    )
    state = wb.state
    assert version_after(state, "Charge", "c", since).amount == 5.0  # type: ignore[union-attr]
    held = version_after(state, "Hold", "h", since)
    assert held is not None and held.on and not held.retracted
    assert version_after(state, "Hold", "new", since) is None
    view = Undone(UserView(state), since, [("Hold", "h"), ("Hold", "new"), ("Charge", "c")])
    assert [h.key for h in view.all("Hold")] == ["h"]
    assert view.get("Hold", "new") is None and view.count("Hold") == 1
    assert [c.amount for c in view.where("Charge", "amount", since=6.0)] == []
    assert [c.amount for c in view.where("Charge", "amount", since=1.0)] == [5.0]


def test_a_new_alert_about_more_of_the_same_records_replaces_the_old_one() -> None:
    @rule(watch=["Charge"])
    def same_amount(user: UserView) -> Iterator[Finding]:
        charges = user.all("Charge")
        if len(charges) > 1:
            yield Finding(f"{len(charges)} charges of one amount", charges)

    wb = Workbench(rules=[])
    wb.add_rule(same_amount)
    wb.ingest([add("2025-01-01", "Charge", f"c{i}", amount=5.0) for i in range(2)])
    report = wb.ingest([add("2025-01-02", "Charge", "c2", amount=5.0)])
    (cleared,) = report.cleared
    assert cleared.reason == (
        "replaced by a new warning alert of its rule: 3 charges of one amount"
    )


def test_a_partitioned_rule_is_undone_on_the_parts_the_change_touched_only() -> None:
    seen: list[int] = []

    @rule(watch=["Charge", "Refund"], partition=lambda r: r.amount)
    def unrefunded_pair(user: UserView) -> Iterator[Finding]:
        seen.append(len(user.all("Charge")))
        refunded = {r.amount for r in user.all("Refund")}
        by: dict[float, list[Any]] = {}
        for c in user.all("Charge"):
            by.setdefault(c.amount, []).append(c)
        for amount, group in by.items():
            if len(group) > 1 and amount not in refunded:
                yield Finding(f"{len(group)} charges of {amount}", group)

    wb = Workbench(rules=[])
    wb.add_rule(unrefunded_pair)
    wb.ingest([add("2025-01-01", "Charge", f"c{i}", amount=float(i % 5)) for i in range(20)])
    wb.ingest([add("2025-01-01", "Refund", "r0", amount=7.0)])  # the second run builds parts
    assert "unrefunded_pair" in wb.runner.parts and len(wb.alerts()) == 5
    seen.clear()
    (cleared,) = wb.ingest([add("2025-01-02", "Refund", "r", amount=3.0)]).cleared
    refund = wb.state.get("Refund", "r")
    assert refund is not None
    assert cleared.reason == f"settled by Refund 'r', added (event {refund.sources[-1]})"
    assert seen == [4, 4]  # the part of 3.0, as changed and as undone: not all 20 charges


# Cases of a helper who attacked it: what the counterfactual runs cost, what a reason built
# from record fields can carry, what a replacement is, a store opened from its snapshot.


def test_a_batch_that_clears_one_alert_does_not_run_the_users_rule_ten_times() -> None:
    """A user's rule is a function of the whole history: each run costs what the history holds,
    and whatever the rule does besides yielding findings (a print, a counter, a call out) is
    done once per run. Telling why one alert cleared runs it again on an undone view once for
    all changed records and once per changed record (up to MANY_CHANGED): a batch of eight
    Hold records that clears one alert ran the rule 10 times where e1db8cf ran it once. On a
    50k-record history (/tmp bench: 8 payments clearing 8 alerts of a rule reading 50k Bills)
    the clearing ingest went from 16 ms (e1db8cf) to 124 ms (i29b), median of 5."""
    seen: list[list[str]] = []

    @rule(watch=["Charge", "Hold"])
    def charge_while_held(user: UserView) -> Iterator[Finding]:
        holds = user.all("Hold")
        seen.append([h.key for h in holds])  # a side effect: once per run of the rule
        if any(h.on for h in holds):
            yield from (Finding("charged while held", [c]) for c in user.all("Charge"))

    wb = Workbench(rules=[])
    wb.add_rule(charge_while_held)
    wb.ingest(
        [add("2025-01-01", "Hold", "h", on=True), add("2025-01-02", "Charge", "c", amount=5.0)]
    )
    seen.clear()
    report = wb.ingest(
        [update("2025-01-03", "Hold", "h", on=False)]
        + [add("2025-01-03", "Hold", f"x{i}", on=False) for i in range(7)]
    )
    assert len(report.cleared) == 1
    # one run on the real state; the counterfactual ones ran on states that never existed
    assert len(seen) <= 2, f"the rule ran {len(seen)} times for one batch: {seen}"


def test_a_settling_records_huge_field_does_not_make_a_megabyte_reason() -> None:
    """``settled by PetVaccine 'rex-2026', changed (event N): vaccineName distemper → rabies,
    note <900k chars> → <900k chars>``: the reason (stored in the alert event, shown by `uac
    log`, the alerts chart's 'why it cleared' and the widgets) was 1,800,101 characters, with
    the values' escape sequence, newline and carriage return raw in it."""
    wb = uncovered_trip()
    first = jab("2026-01-20", "rex-2026", "2026-01-20", "2027-01-20", name="distemper")
    first["fields"]["note"] = "\x1b[31m\n" + "a" * 900_000
    wb.ingest([first])
    fix = update(
        "2026-01-21", "PetVaccine", "rex-2026", vaccineName="rabies", note="\r" + "b" * 900_000
    )
    (cleared,) = wb.ingest([fix]).cleared
    reason = cleared.reason
    assert reason.startswith("settled by PetVaccine 'rex-2026', changed")
    assert len(reason) <= 1_000, f"a reason of {len(reason):,} characters"
    logged: Any = wb.alert_history()[-1].payload["reason"]
    assert len(logged) <= 1_000
    assert not any(c in reason for c in "\x1b\r\n")


def test_an_alert_settled_by_a_jab_is_not_replaced_by_a_new_trips_alert_sharing_the_old_jab() -> (
    None
):
    """The France trip's alert (evidence: PetTrip rex-france, PetVaccine rex-2024) is settled by
    the new jab rex-2026 that covers April. The same batch adds a Spain trip in March that
    neither jab covers: its new alert (evidence rex-spain, rex-2024, rex-2026) shares the old jab
    with the France alert, so ``_replacing`` took it for the France alert's replacement: the
    reason said 'replaced by a new critical alert of its rule: PetTrip 'rex-spain' …' — an
    alert about another trip."""
    wb = uncovered_trip()
    report = wb.ingest(
        [
            jab("2026-02-01", "rex-2026", "2026-03-20", "2027-05-01"),
            add(
                "2026-02-01",
                "PetTrip",
                "rex-spain",
                petKey="rex",
                leavesOn="2026-03-05",
                returnsOn="2026-03-10",
                crossesBorder=True,
            ),
        ]
    )
    (raised,) = report.raised
    assert "rex-spain" in raised.message
    (cleared,) = report.cleared
    assert "rex-france" in cleared.message
    assert "rex-spain" not in cleared.reason, cleared.reason
    assert cleared.reason.startswith("settled by PetVaccine 'rex-2026', added"), cleared.reason


def test_a_paid_charge_is_not_replaced_by_a_new_charge_on_the_same_account() -> None:
    """A user's rule whose findings all rest on the account and one charge: paying c1 while a
    new charge c3 comes in said c1's alert was 'replaced by a new warning alert of its rule:
    charge c3 of 7.0 on acct is unpaid'."""

    @rule(watch=["Account", "Charge", "Payment"])
    def unpaid(user: UserView) -> Iterator[Finding]:
        paid = {p.charge for p in user.all("Payment")}
        for a in user.all("Account"):
            for c in user.all("Charge"):
                if c.key not in paid:
                    yield Finding(f"charge {c.key} of {c.amount} on {a.key} is unpaid", [a, c])

    wb = Workbench(rules=[])
    wb.add_rule(unpaid)
    wb.ingest(
        [
            add("2025-01-01", "Account", "acct", name="main"),
            add("2025-01-02", "Charge", "c1", amount=5.0),
        ]
    )
    report = wb.ingest(
        [
            add("2025-01-03", "Payment", "p1", charge="c1"),
            add("2025-01-03", "Charge", "c3", amount=7.0),
        ]
    )
    (cleared,) = report.cleared
    assert "c3" not in cleared.reason, cleared.reason
    assert cleared.reason.startswith("settled by Payment 'p1', added"), cleared.reason


def test_a_snapshot_opened_store_names_the_jab_that_settled_the_alert_as_a_folded_one_does(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """The same log, the same batch (a correction of jab rex-2026 that also brings a new field):
    folded from the log the clear says 'settled by PetVaccine 'rex-2026', changed (event N):
    validUntil 2026-03-01 → 2029-03-01, …'; opened from a snapshot (PetVaccine read lazily,
    ``SnapTypeState``) ``changed_records`` gives up on the type and the clear logged 'the
    vocabulary changed: …; none of its records changed', though the batch's own events say which
    record it changed."""
    from uac_kernel import workbench

    monkeypatch.setattr(workbench, "CLOSE_AFTER", 1)
    path = tmp_path / "pets.duckdb"
    with Workbench(path, user="maya", rules=[]) as wb:
        fresh = uncovered_trip()
        wb.ingest(
            [
                e.payload | {"kind": e.kind, "ts": e.ts.isoformat()}
                for e in fresh.log()
                if e.kind in ("fact", "utterance")
            ]
        )
        wb.constrain(
            fresh.state.constraints["rabies-for-pet-trips"].constraint, key="rabies-for-pet-trips"
        )
        wb.ingest([jab("2026-02-01", "rex-2026", "2026-02-01", "2029-02-01")])
        wb.ingest([update("2026-02-02", "PetVaccine", "rex-2026", validUntil="2026-03-01")])
        assert len(wb.alerts()) == 1
    with Workbench(path, user="maya", rules=[]) as wb:
        assert wb._snap is not None  # opened from the snapshot
        fix = update("2026-02-03", "PetVaccine", "rex-2026", validUntil="2029-03-01", batch="x")
        (cleared,) = wb.ingest([fix]).cleared
    assert cleared.reason.startswith("settled by PetVaccine 'rex-2026', changed"), cleared.reason


# A newcomer's runner: their own words, cleared by a record and by a date passing.

ENTRY_PAID = {
    "kind": "obligation",
    "title": "Pay the race entry before the deadline",
    "subject": {"type": "RaceEntry"},
    "due": {"fields": ["entryDeadline"]},
    "done": ["entryPaid"],
}
CERT_ON_RACEDAY = {
    "kind": "valid_on",
    "title": "Sports medical certificate valid on race day",
    "document": {"type": "SportsCertificate"},
    "each": {"type": "RaceEntry"},
    "at": {"fields": ["raceDay"]},
    "expires": ["validUntil"],
    "starts": ["issuedOn"],
}


def race(wb: Workbench) -> None:
    wb.ingest(
        [
            clock("2026-01-05"),
            add(
                "2026-01-05",
                "SportsCertificate",
                "cert-2025",
                issuedOn="2025-01-10",
                validUntil="2026-01-10",
            ),
            add(
                "2026-01-05",
                "RaceEntry",
                "roma-half",
                raceDay="2026-03-22",
                entryDeadline="2026-01-20",
                entryPaid=False,
            ),
        ]
    )


def test_a_paid_entry_settles_its_overdue_obligation_and_the_clock_is_not_named() -> None:
    wb = Workbench(rules=[])
    race(wb)
    wb.constrain(ENTRY_PAID, key="race-entry")
    wb.ingest([clock("2026-01-25")])
    assert [a.rule for a in wb.alerts()] == ["constraint_race_entry"]
    (cleared,) = wb.ingest([update("2026-02-12", "RaceEntry", "roma-half", entryPaid=True)]).cleared
    assert cleared.reason == (
        "the record it was about changed: RaceEntry 'roma-half' entryPaid False → True"
    )


def test_a_race_day_passing_clears_by_the_clock_not_by_a_finish_time_added_that_day() -> None:
    wb = Workbench(rules=[])
    race(wb)
    wb.constrain(CERT_ON_RACEDAY, key="cert-on-raceday")
    (alert,) = wb.alerts()
    report = wb.ingest([update("2026-03-25", "RaceEntry", "roma-half", finishTime="01:43:58")])
    (cleared,) = [c for c in report.cleared if c.id == alert.id]
    assert cleared.reason.startswith("the log's clock moved on to 2026-03-25"), cleared.reason
    assert "finishTime" not in cleared.reason
    assert "vocabulary" not in cleared.reason


def test_a_near_limit_window_is_replaced_by_the_over_limit_window_a_day_on() -> None:
    """The 7-day total near its limit (2 – 8 February) clears when a run on the 9th takes the
    window one day on over it: the two share four of their five runs, so the new alert
    replaced the old, though the clock (the window moving on) is what undoing finds."""
    weekly = {
        "kind": "window_limit",
        "title": "At most 60 km in any 7 days",
        "subject": {"type": "TrainingRun"},
        "measure": "sum",
        "amount": "distanceKm",
        "date": ["runDate"],
        "window_days": 7,
        "limit": 60,
        "warn_at": 0.8,
    }
    wb = Workbench(rules=[])
    runs = zip((2, 3, 5, 7, 8), (9.0, 10.0, 12.0, 8.0, 11.0), strict=True)
    wb.ingest(
        [
            add(f"2026-02-{d:02d}", "TrainingRun", f"run-{d}", runDate=f"2026-02-{d:02d}",
                distanceKm=km)
            for d, km in runs
        ]
    )  # fmt: skip
    wb.constrain(weekly, key="weekly-km")
    (near,) = wb.alerts()
    assert near.severity == "info"
    report = wb.ingest(
        [add("2026-02-09", "TrainingRun", "run-9", runDate="2026-02-09", distanceKm=22.0)]
    )
    (cleared,) = report.cleared
    assert cleared.reason.startswith(
        "replaced by a new warning alert of its rule (this one was info): a total distanceKm of"
    ), cleared.reason
