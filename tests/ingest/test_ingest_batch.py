"""Ingest a batch at a time: sources are de-duplicated against the log by one query per batch,
and the rules run once per batch, after it, on the new state."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from helpers.events import add, update

from uac_kernel import Finding, Workbench, rule
from uac_kernel.log.integrity import verify
from uac_kernel.log.store import Store
from uac_kernel.state.query import UserView


def sourced(source: str, ev: dict[str, Any]) -> dict[str, Any]:
    return {**ev, "source": source}


def trip(n: int, source: str | None = None) -> dict[str, Any]:
    ev = add(f"2025-03-{n:02d}", "Trip", f"trip-{n}", destination=f"city {n}")
    return ev if source is None else sourced(source, ev)


def test_sources_already_logged_are_skipped_batch_by_batch(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="maya", rules=[]) as wb:
        first = wb.ingest([trip(1, "s1"), trip(2, "s2")])
        assert (first.appended, first.skipped) == (2, 0)
        # One logged event, and two new events from one source (a chat turn): both appended.
        again = wb.ingest([trip(1, "s1"), trip(3, "s3"), trip(4, "s3")])
        assert (again.appended, again.skipped, again.repeated) == (2, 1, 0)
        assert sorted(wb.state.types["Trip"].current) == [f"trip-{n}" for n in (1, 2, 3, 4)]
    # A workbench opened afterwards finds the log's sources by querying it, not from a cache.
    with Workbench(db, user="maya", rules=[]) as wb:
        report = wb.ingest([trip(2, "s2"), trip(5, "s5")])
        assert (report.appended, report.skipped) == (1, 1)
    # Another user's sources are theirs: the same source is new for this user.
    with Workbench(db, user="ada", rules=[]) as wb:
        assert wb.ingest([trip(1, "s1")]).appended == 1
    store = Store(db, read_only=True)
    assert store.logged_sources("maya", ["s1", "s2", "s3", "s5", "s9"]) == {
        "s1",
        "s2",
        "s3",
        "s5",
    }
    assert store.logged_sources("ada", ["s1", "s2"]) == {"s1"}
    assert store.logged_sources("maya", []) == set()
    store.close()


def test_a_source_another_workbench_logged_is_skipped(tmp_path: Path) -> None:
    """Two workbenches of one process on one file: what one logged, the other skips."""
    db = tmp_path / "u.duckdb"
    one = Workbench(db, user="maya", rules=[])
    other = Workbench(db, user="maya", rules=[])
    assert one.ingest([trip(1, "s1")]).appended == 1
    report = other.ingest([trip(1, "s1"), trip(2, "s2")])
    assert (report.appended, report.skipped) == (1, 1)
    other.close()
    one.close()
    assert verify(Store(db, read_only=True)).ok


def test_events_without_a_source_are_skipped_when_the_same_event_is_logged(
    tmp_path: Path,
) -> None:
    """A missing source is a hash of the event, so re-ingesting the same file appends nothing."""
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(trip(n)) + "\n" for n in (1, 2, 3)))
    with Workbench(tmp_path / "u.duckdb", user="maya", rules=[]) as wb:
        assert wb.ingest(path).appended == 3
        again = wb.ingest(path)
        assert (again.appended, again.skipped) == (0, 3)


def test_rules_run_once_per_batch_after_it_on_the_new_state(tmp_path: Path) -> None:
    seen: list[list[str]] = []  # what the rule saw, one entry per run

    @rule(watch=["Trip"], severity="info", category="travel")
    def trips_seen(user: UserView) -> Iterator[Finding]:
        trips = user.all("Trip")
        seen.append(sorted(t.key for t in trips))
        if trips:
            yield Finding(f"{len(trips)} trips", trips)

    path = tmp_path / "more.jsonl"
    path.write_text("".join(json.dumps(trip(n)) + "\n" for n in (4, 5, 6)))
    with Workbench(tmp_path / "u.duckdb", user="maya", rules=[]) as wb:
        wb.add_rule(trips_seen)
        seen.clear()
        report = wb.ingest([trip(1), trip(2), trip(3)])
        assert seen == [["trip-1", "trip-2", "trip-3"]]  # once, after the whole batch
        assert [a.message for a in report.raised] == ["3 trips"]
        wb.ingest(path)  # a file is one batch too
        assert seen[1:] == [[f"trip-{n}" for n in range(1, 7)]]
        report = wb.ingest([update("2025-03-07", "Trip", "trip-6", destination="Lisbon")])
        assert len(seen) == 3 and seen[2] == [f"trip-{n}" for n in range(1, 7)]
        assert wb.alerts()[0].message == "6 trips"
        # A batch that appends nothing changes no state: the rules do not run.
        assert wb.ingest(path).appended == 0
        assert len(seen) == 3


# The newcomer's file: an utterance and the fact and constraint extracted from it share the
# chat turn's source, as docs/constraints.md ("In the log") writes them.
SAME_SOURCE = [
    {
        "kind": "utterance",
        "ts": "2026-01-05T08:00:00",
        "speaker": "user",
        "text": "Entry for Roma paid by 10 Feb",
        "source": "chat-x#1",
    },
    {
        "kind": "fact",
        "ts": "2026-01-05T08:00:00",
        "op": "add",
        "type": "RaceEntry",
        "key": "roma",
        "fields": {"entryDeadline": "2026-02-10"},
        "source": "chat-x#1",
    },
    {
        "kind": "constraint",
        "ts": "2026-01-05T08:00:00",
        "op": "add",
        "key": "pay-roma",
        "constraint": {"kind": "obligation", "title": "Pay Roma", "due": {"date": "2026-02-10"}},
        "source": "chat-x#1",
        "derived_from": ["chat-x#1"],
    },
]


def jsonl(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def test_events_sharing_a_source_are_all_appended_on_a_fresh_store(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "same-source.jsonl", SAME_SOURCE)
    with Workbench(tmp_path / "u.duckdb", user="maya", rules=[]) as wb:
        report = wb.ingest(path)
        assert (report.appended, report.skipped, report.repeated) == (3, 0, 0)
        assert report.summary().startswith("3 events appended, 0 already in the log")
        assert list(wb.state.constraints) == ["pay-roma"]
        assert list(wb.state.types["RaceEntry"].current) == ["roma"]


def test_reingesting_a_file_of_one_source_skips_every_event(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "same-source.jsonl", SAME_SOURCE)
    db = tmp_path / "u.duckdb"
    with Workbench(db, user="maya", rules=[]) as wb:
        wb.ingest(path)
    # another workbench, so the logged events are read back from the store, normalised
    with Workbench(db, user="maya", rules=[]) as wb:
        again = wb.ingest(path)
        assert (again.appended, again.skipped, again.repeated) == (0, 3, 0)
        assert again.summary() == "0 events appended, 3 already in the log"


def test_a_logged_fact_given_in_another_dress_is_skipped(tmp_path: Path) -> None:
    """The log stores a fact's values canonically (a float field given 5 holds 5.0, a date-time
    with an offset is UTC): the same event given again is still the logged one."""
    first = sourced("s1", add("2025-03-01", "Run", "r1", km=5.5, at="2025-03-01T08:00:00+02:00"))
    again = sourced("s1", add("2025-03-01", "Run", "r1", km=5.5, at="2025-03-01T06:00:00Z"))
    with Workbench(tmp_path / "u.duckdb", user="maya", rules=[]) as wb:
        wb.ingest([first])
        report = wb.ingest([again])
        assert (report.appended, report.skipped) == (0, 1)


def test_an_edited_line_with_a_logged_source_is_appended(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "same-source.jsonl", SAME_SOURCE)
    with Workbench(tmp_path / "u.duckdb", user="maya", rules=[]) as wb:
        wb.ingest(path)
        edited = [*SAME_SOURCE[:1], {**SAME_SOURCE[1], "op": "update", "ts": "2026-01-06"}]
        edited[1]["fields"] = {"entryDeadline": "2026-02-12"}
        report = wb.ingest(jsonl(path, edited))
        assert (report.appended, report.skipped) == (1, 1)
        assert str(wb.state.types["RaceEntry"].current["roma"].entryDeadline) == "2026-02-12"


def test_an_event_repeated_in_one_file_is_appended_once(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "twice.jsonl", [SAME_SOURCE[1], SAME_SOURCE[1]])
    with Workbench(tmp_path / "u.duckdb", user="maya", rules=[]) as wb:
        report = wb.ingest(path)
        assert (report.appended, report.skipped, report.repeated) == (1, 0, 1)
        assert report.summary().startswith(
            "1 event appended, 0 already in the log, 1 repeated in the file"
        )
        assert [e.kind for e in wb.store.events("maya") if e.kind == "fact"] == ["fact"]
