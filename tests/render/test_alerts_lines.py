"""The standing alerts as lines of text (``render.alerts``): each evidence record with the log
events it rests on, "event" for one and "events" for more."""

from __future__ import annotations

from uac_kernel.render.alerts import alerts_lines, events_said
from uac_kernel.rules.engine import Alert, Evidence


def test_one_event_is_said_in_the_singular_and_more_in_the_plural() -> None:
    assert events_said([14]) == "event 14"
    assert events_said([3, 14]) == "events 3, 14"


def test_an_alert_lists_its_evidence_with_the_events_behind_each_record() -> None:
    alert = Alert(
        id="r:1",
        rule="r",
        severity="warning",
        category="",
        message="two records disagree",
        evidence=(
            Evidence(type="PetTrip", key="rex-france", sources=(22, 31)),
            Evidence(type="PetVaccine", key="rex-2024", sources=(14,)),
        ),
    )
    lines = alerts_lines([alert], lambda rule: None)
    assert lines == [
        "[warning] r: two records disagree",
        "    evidence: PetTrip rex-france (events 22, 31), PetVaccine rex-2024 (event 14)",
    ]
