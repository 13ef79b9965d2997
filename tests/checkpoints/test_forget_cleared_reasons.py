"""`forget` of a record erases alerts whose evidence named it (docs/integrity.md); a cleared
alert's reason now names the record that settled it, which is not in its evidence."""

from __future__ import annotations

from pathlib import Path

from helpers.constraints import RABIES, jab
from helpers.events import add, clock, update

from uac_kernel import Workbench


def test_forgetting_the_record_that_settled_an_alert_erases_its_values_from_the_reason(
    tmp_path: Path,
) -> None:
    """The clear's reason, 'settled by PetVaccine 'clinic-secret', changed (event 33):
    vaccineName distemper → rabies, clinic Dr Secretname → Dr Othername', stayed in the log's
    alert event after `forget(type="PetVaccine", key="clinic-secret")`: the alert's evidence
    (rex-france, rex-2024) does not name the forgotten record, so the event was kept whole."""
    with Workbench(tmp_path / "f.duckdb", user="maya", rules=[]) as wb:
        wb.ingest(
            [
                clock("2026-01-05"),
                jab("2026-01-05", "rex-2024", "2024-03-01", "2026-03-01"),
                add("2026-01-06", "PetTrip", "rex-france", petKey="rex", leavesOn="2026-04-02",
                    returnsOn="2026-04-12", crossesBorder=True),
            ]
        )  # fmt: skip
        wb.constrain(RABIES, key="rabies")
        secret = jab("2026-01-20", "clinic-secret", "2026-01-20", "2027-01-20", name="distemper")
        secret["fields"]["clinic"] = "Dr Secretname"
        wb.ingest([secret])
        fix = update(
            "2026-01-21", "PetVaccine", "clinic-secret", vaccineName="rabies", clinic="Dr Othername"
        )
        fix_seq = wb.state.seq + 1
        (cleared,) = wb.ingest([fix]).cleared
        assert "Dr Secretname" in cleared.reason  # the reason quotes the record's values
        wb.forget(type="PetVaccine", key="clinic-secret")
        left = [
            (e.seq, e.kind)
            for e in wb.log()
            if "Secretname" in str(e.payload) or "clinic-secret" in str(e.payload)
        ]
        # The alert went whole, its raise with its clear; the trip is uncovered again, so the
        # rules raised it anew.
        kept = [e for e in wb.log() if e.kind == "alert" and e.payload.get("id") == cleared.id]
        assert [a.id for a in wb.alerts()] == [cleared.id]
        assert len(kept) == 1 and kept[0].seq > fix_seq, [e.payload for e in kept]
    assert left == [], f"events still holding the forgotten record: {left}"
