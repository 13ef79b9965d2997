"""Why a cleared alert no longer stands (``rules.engine.why_cleared``): the record whose arrival
or change settled it, by type, key and event, even when it is not among the alert's own records;
the log's clock only when nothing the rule reads changed."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from typing import Any

from helpers.events import add, clock, update

from uac_kernel import Finding, Workbench, rule
from uac_kernel.rules.engine import MANY_CHANGED
from uac_kernel.state.query import UserView

RABIES = {
    "kind": "valid_on",
    "title": "Rabies shot valid for every pet trip",
    "document": {"type": "Vaccination", "where": {"disease": "rabies"}},
    "each": {"type": "Trip", "where": {"pet": True}},
    "at": {"fields": ["start"]},
    "until": {"fields": ["end"]},
}


def shot(ts: str, key: str, disease: str = "rabies", **fields: Any) -> dict[str, Any]:
    return add(ts, "Vaccination", key, disease=disease, issued="2024-10-01", **fields)


def pet_trip(*first: dict[str, Any]) -> Workbench:
    """A pet trip in February with no rabies shot: the constraint's alert stands."""
    wb = Workbench(rules=[])
    wb.ingest([clock("2025-01-01"), *first])
    wb.constrain(RABIES, key="rabies-for-pet-trips")
    wb.ingest([add("2025-01-02", "Trip", "france", pet=True, start="2025-02-01", end="2025-02-10")])
    (a,) = wb.alerts()
    assert a.rule == "constraint_rabies_for_pet_trips" and "no Vaccination covers" in a.message
    return wb


def test_a_new_record_that_covers_the_trip_is_named_not_the_clock() -> None:
    wb = pet_trip(shot("2025-01-01", "flu", disease="flu", expiry="2025-10-01"))
    seq = wb.state.seq + 1  # the event that adds the shot
    report = wb.ingest([shot("2025-01-05", "rabies-2025", expiry="2026-01-04")])
    (cleared,) = report.cleared
    assert cleared.reason == (
        f"settled by Vaccination 'rabies-2025', added (event {seq}); "
        "none of its own records changed"
    )
    assert "clock" not in cleared.reason
    assert wb.alert_history()[-1].payload["reason"] == cleared.reason


def test_a_changed_record_that_is_not_its_evidence_is_named_with_what_changed() -> None:
    wb = pet_trip(shot("2025-01-01", "flu", disease="flu", expiry="2025-10-01"))
    seq = wb.state.seq + 1
    report = wb.ingest([update("2025-01-07", "Vaccination", "flu", disease="rabies")])
    (cleared,) = report.cleared
    assert cleared.reason == (
        f"settled by Vaccination 'flu', changed (event {seq}): disease flu → rabies; "
        "none of its own records changed"
    )


def test_the_first_record_of_a_new_type_is_named_beside_the_vocabulary_it_brought() -> None:
    wb = pet_trip()
    report = wb.ingest([shot("2025-01-05", "rabies-2025", expiry="2026-01-04")])
    (cleared,) = report.cleared
    assert cleared.reason.startswith("settled by Vaccination 'rabies-2025', added (event ")
    assert "; and the vocabulary changed: " in cleared.reason


def test_a_bulk_change_names_no_one_record() -> None:
    wb = pet_trip(shot("2025-01-01", "flu", disease="flu", expiry="2025-10-01"))
    many = [
        shot("2025-01-05", f"v{i}", disease="rabies" if i == 0 else "flu", expiry="2026-01-04")
        for i in range(MANY_CHANGED + 1)
    ]
    (cleared,) = wb.ingest(many).cleared
    assert "settled by" not in cleared.reason
    assert cleared.reason.endswith(
        "other Vaccination records changed; none of its own records changed"
    )


def test_the_clock_is_named_only_when_nothing_the_rule_reads_changed() -> None:
    @rule(watch=["Task"], clock=True)
    def task_due_soon(user: UserView) -> Iterator[Finding]:
        if user.today is not None and user.today < date(2025, 3, 5):
            yield from (Finding("due soon", [t]) for t in user.all("Task"))

    wb = Workbench(rules=[])
    wb.add_rule(task_due_soon)
    wb.ingest([add("2025-03-01", "Task", "t")])
    (cleared,) = wb.ingest([clock("2025-03-06")]).cleared
    assert cleared.reason == (
        "the log's clock moved on to 2025-03-06; none of its own records changed"
    )
