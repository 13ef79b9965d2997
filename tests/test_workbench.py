"""The Workbench API end to end on real DuckDB files: ingest, checkpoints, queries, rules."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path

import pytest
from helpers.events import fact

from uac_kernel import Finding, Workbench, rule
from uac_kernel.checkpoints.codegen import parse_module, render_module
from uac_kernel.core.errors import CheckpointNotFound, EventError, QueryError
from uac_kernel.log.store import Store
from uac_kernel.state.query import UserView


def write(path: Path, events: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


TRIPS = [
    {
        "kind": "utterance",
        "ts": "2025-03-02T10:15:00",
        "speaker": "user",
        "text": "Back from Tokyo!",
        "source": "chat-42#3",
    },
    fact(
        "2025-03-02T10:15:00",
        "add",
        "Trip",
        "tokyo-2025",
        destination="Tokyo",
        country="Japan",
        start="2025-02-20",
        international=True,
    ),
    fact("2025-04-01T09:00:00", "update", "Trip", "tokyo-2025", end="2025-03-01"),
    fact(
        "2025-04-02T09:00:00",
        "add",
        "Trip",
        "york-2025",
        destination="York",
        country="UK",
        start="2025-04-10",
        international=False,
    ),
]


def test_reingesting_a_file_is_idempotent(tmp_path: Path) -> None:
    events = write(tmp_path / "e.jsonl", TRIPS)
    wb = Workbench(tmp_path / "u.duckdb", user="maya")
    first = wb.ingest(events)
    assert first.appended == 4 and first.skipped == 0 and first.schema_changes == 6
    # Where the batch's time went, step by step (the bench sums these per event).
    assert list(first.seconds) == ["parse", "validate", "write", "fold", "rules"]
    assert all(s >= 0 for s in first.seconds.values())
    again = wb.ingest(events)
    assert again.appended == 0 and again.skipped == 4
    assert list(again.seconds) == ["parse"]  # nothing new: nothing validated or written
    wb.close()
    reopened = Workbench(tmp_path / "u.duckdb", user="maya")
    assert reopened.ingest(events).appended == 0
    assert len(reopened.log(kinds=["fact"])) == 3


def test_a_failed_batch_leaves_log_and_state_as_they_were(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="maya")
    wb.ingest(write(tmp_path / "a.jsonl", TRIPS))
    before = [(e.seq, e.hash) for e in wb.store.events()]
    code_before = render_module(wb.state)
    bad = write(
        tmp_path / "b.jsonl",
        [
            fact("2025-05-01", "add", "Trip", "paris", destination="Paris"),
            fact("2025-05-01", "update", "Trip", "nowhere", destination="?"),
        ],
    )
    with pytest.raises(EventError, match=r"b\.jsonl:2: field 'key'"):
        wb.ingest(bad)
    assert [(e.seq, e.hash) for e in wb.store.events()] == before
    assert render_module(wb.state) == code_before
    assert wb.verify().ok


def test_incremental_checkpoint_matches_a_full_render(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    wb = Workbench(db, user="maya")
    wb.ingest([fact("2025-01-01", "add", "Meal", f"m{i}", kcal=300 + i) for i in range(1000)])
    cp1 = wb.checkpoint()
    wb.ingest(
        [
            fact("2025-01-02", "update", "Meal", "m7", kcal=1),
            fact("2025-01-02", "retract", "Meal", "m200"),
            fact("2025-01-02", "add", "Meal", "m5000", kcal=5, dish="soup"),
        ]
    )
    cp2 = wb.checkpoint()
    assert cp2.version == cp1.version + 1 and cp2.seq > cp1.seq
    # only the touched blocks were written: far fewer segments than the first time
    assert cp2.segments < cp1.segments / 2
    assert cp2.code == render_module(wb.state, wb.runner.rules.values())
    assert wb.code(1) == cp1.code and cp1.code != cp2.code
    wb.close()
    # a new session picks up where the last checkpoint left off
    wb = Workbench(db, user="maya")
    wb.ingest([fact("2025-01-03", "add", "Meal", "m1000", kcal=7)])
    cp3 = wb.checkpoint()
    assert cp3.code == render_module(wb.state, wb.runner.rules.values())


def test_the_gc_pauses_only_for_parse_to_fold_and_always_resumes(tmp_path: Path) -> None:
    seen: list[bool] = []

    @rule(watch=["Trip"])
    def notes_gc(user: UserView) -> Iterator[Finding]:
        seen.append(gc.isenabled())
        yield from ()

    wb = Workbench(tmp_path / "u.duckdb", user="maya", rules=[notes_gc])
    assert gc.isenabled()
    wb.ingest(write(tmp_path / "a.jsonl", TRIPS))
    assert seen and all(seen)  # rules are user code: they run with the GC on
    assert gc.isenabled()
    bad = write(tmp_path / "b.jsonl", [fact("2025-05-01", "update", "Trip", "nowhere", x=1)])
    with pytest.raises(EventError):
        wb.ingest(bad)
    assert gc.isenabled()
    # a caller who paused the GC finds it paused still
    gc.disable()
    try:
        wb.ingest([fact("2025-06-01", "add", "Trip", "rome", destination="Rome")])
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_checkpoint_code_reads_back_to_the_same_state(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="maya")
    wb.ingest(TRIPS)
    wb.ingest([fact("2025-05-01", "retract", "Trip", "york-2025", reason="cancelled")])
    state = parse_module(wb.checkpoint().code)
    assert [r.model_dump() for r in state.all("Trip")] == [
        r.model_dump() for r in wb.state.all("Trip")
    ]
    assert [r.model_dump() for r in state.history("Trip")] == [
        r.model_dump() for r in wb.state.history("Trip")
    ]


def test_same_log_same_code_across_stores_and_checkpoint_timing(tmp_path: Path) -> None:
    a = Workbench(tmp_path / "a.duckdb", user="maya")
    b = Workbench(tmp_path / "b.duckdb", user="maya")
    a.ingest(TRIPS)
    a.checkpoint()
    for ev in TRIPS:  # the same log, appended one event at a time, checkpointed each time
        b.ingest([ev])
        b.checkpoint()
    assert a.checkpoint().code == b.checkpoint().code


def test_diff_between_checkpoints(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="maya")
    wb.ingest(TRIPS[:2])
    wb.checkpoint()
    wb.ingest([*TRIPS[2:], fact("2025-05-01", "add", "Book", "dune", title="Dune")])
    wb.ingest([fact("2025-05-02", "retract", "Trip", "york-2025")])
    wb.checkpoint()
    d = wb.diff(1, 2)
    assert [(c.type, c.key) for c in d.added] == [("Book", "dune")]
    assert [(c.key, c.changed_fields) for c in d.changed] == [("tokyo-2025", ["end"])]
    assert d.retracted == [] and d.new_types == ["Book"] and d.new_fields == {"Trip": ["end"]}
    with pytest.raises(CheckpointNotFound, match="existing versions: 1, 2"):
        wb.diff(1, 3)


def test_as_of_gives_the_past(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="maya")
    wb.ingest(TRIPS)
    past = wb.as_of("2025-03-15")
    assert [t.key for t in past.all("Trip")] == ["tokyo-2025"]
    assert "end" not in past.schema.types["Trip"]  # the field was first seen later
    assert wb.state.get("Trip", "tokyo-2025").end == date(2025, 3, 1)  # type: ignore[union-attr]


def test_eval_over_typed_state(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="maya")
    wb.ingest(TRIPS)
    assert wb.eval("len([t for t in user.all(Trip) if t.international])") == 1
    assert wb.eval("sorted(t.destination for t in user.all('Trip'))") == ["Tokyo", "York"]
    assert wb.eval("user.get(Trip, 'tokyo-2025').end") == date(2025, 3, 1)
    assert wb.eval("[t.sources for t in user.history(Trip) if t.key == 'tokyo-2025']")[0] == [7]


def test_sql_tables_per_type_and_no_file_access(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="maya")
    wb.ingest(TRIPS)
    result = wb.sql("SELECT key, destination, start, international FROM trip ORDER BY key")
    assert result.rows == [
        ("tokyo-2025", "Tokyo", date(2025, 2, 20), True),
        ("york-2025", "York", date(2025, 4, 10), False),
    ]
    assert wb.sql("SELECT count(*) FROM Trip_history").rows == [(3,)]
    wb.ingest([fact("2025-06-01", "retract", "Trip", "york-2025")])
    assert wb.sql("SELECT count(*) FROM Trip").rows == [(1,)]  # refreshed after the change
    for attack in (
        "SELECT * FROM read_csv('/etc/passwd')",
        f"ATTACH '{tmp_path / 'u.duckdb'}' AS log",
        f"COPY Trip TO '{tmp_path / 'leak.csv'}'",
        "SET enable_external_access = true",
    ):
        with pytest.raises(QueryError, match=r"SQL failed|only one SELECT/WITH query"):
            wb.sql(attack)
    assert not (tmp_path / "leak.csv").exists()


def test_alerts_are_logged_when_raised_and_cleared(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="maya")
    wb.ingest(
        [fact("2024-02-09", "add", "Allergy", "pen", substance="penicillin", severity="severe")]
    )
    report = wb.ingest(
        [fact("2024-11-18", "add", "Medication", "amox", name="amoxicillin", active=True)]
    )
    (alert,) = report.raised
    assert alert.severity == "critical" and alert.category == "drug_interactions_health_safety"
    assert {(e.type, e.key) for e in alert.evidence} == {("Allergy", "pen"), ("Medication", "amox")}
    assert [a.id for a in wb.alerts()] == [alert.id]
    cleared = wb.ingest(
        [fact("2024-11-19", "retract", "Medication", "amox", reason="switched to azithromycin")]
    )
    assert [a.id for a in cleared.cleared] == [alert.id] and wb.alerts() == []
    history = [(e.payload["state"], e.payload["id"]) for e in wb.alert_history()]
    assert history == [("raised", alert.id), ("cleared", alert.id)]
    wb.close()
    # reopening recomputes the same standing alerts and logs nothing new
    wb = Workbench(tmp_path / "u.duckdb", user="maya")
    assert wb.alerts() == [] and len(wb.alert_history()) == 2


def test_a_cleared_alert_says_why(tmp_path: Path) -> None:
    """A clear names the record that changed (and how) or was retracted, or says the log's
    clock moved on while none of its records changed; the log keeps the reason."""
    wb = Workbench(tmp_path / "u.duckdb", user="maya")
    allergy = fact("2024-02-09", "add", "Allergy", "pen", substance="penicillin")
    wb.ingest([allergy, fact("2024-11-18", "add", "Medication", "amox", name="amoxicillin")])
    report = wb.ingest(
        [fact("2024-11-20", "update", "Medication", "amox", active=False, end="2024-11-20")]
    )
    (stopped,) = report.cleared
    assert stopped.reason == (
        "a record it was about changed: Medication 'amox' active unset → False, "
        "end unset → 2024-11-20"
    )
    assert wb.alert_history()[-1].payload["reason"] == stopped.reason

    wb.ingest([fact("2024-12-01", "add", "Medication", "amox2", name="amoxicillin")])
    report = wb.ingest([fact("2024-12-02", "retract", "Medication", "amox2")])
    assert [a.reason for a in report.cleared] == [
        "a record it was about was retracted: Medication 'amox2'"
    ]

    wb.ingest([fact("2025-03-01", "add", "Purchase", "lamp", item="lamp", return_by="2025-03-05")])
    report = wb.ingest([{"kind": "utterance", "ts": "2025-03-06", "speaker": "user", "text": "hi"}])
    assert [a.reason for a in report.cleared] == [
        "the log's clock moved on to 2025-03-06; none of its own records changed"
    ]
    wb.close()


def test_user_rules_run_on_every_change_and_broken_rules_become_alerts(tmp_path: Path) -> None:
    @rule(watch=["Trip"], severity="info", category="travel")
    def too_many_trips(user: UserView) -> Iterator[Finding]:
        trips = user.all("Trip")
        if len(trips) > 1:
            yield Finding(f"{len(trips)} trips planned", trips)

    @rule(watch=["Trip"])
    def broken(user: UserView) -> Iterator[Finding]:
        raise ZeroDivisionError("oops")
        yield

    wb = Workbench(tmp_path / "u.duckdb", user="maya", rules=[])
    wb.add_rule(too_many_trips)
    wb.add_rule(broken)
    wb.ingest(TRIPS)
    messages = sorted(a.message for a in wb.alerts())
    assert messages[0] == "2 trips planned"
    assert messages[1].startswith("rule broken failed: ZeroDivisionError: oops")
    code = wb.checkpoint().code  # the user's rules are in force, so their source is in the code
    assert "def too_many_trips(user: UserView)" in code and "    too_many_trips,\n" in code
    assert "from uac.rules import" not in code  # no shipped rule was in force here


def test_alerts_of_rules_not_in_force_stand_in_the_log_until_their_rule_runs(
    tmp_path: Path,
) -> None:
    def many_trips(limit: int):  # one rule name, two versions of its body
        @rule(watch=["Trip"], severity="info", category="travel")
        def many_trips(user: UserView) -> Iterator[Finding]:
            trips = user.all("Trip")
            if len(trips) > limit:
                yield Finding(f"{len(trips)} trips", trips)

        return many_trips

    def history(wb: Workbench) -> list[tuple[str, str]]:
        return [(e.payload["state"], e.payload["message"]) for e in wb.alert_history()]

    path = tmp_path / "u.duckdb"
    wb = Workbench(path, user="maya", rules=[])
    wb.add_rule(many_trips(1))
    wb.ingest(TRIPS)
    assert history(wb) == [("raised", "2 trips")]
    wb.close()

    # Reopened without the rule: its alert is not evaluated, so it is not cleared either.
    wb = Workbench(path, user="maya", rules=[])
    assert wb.alerts() == [] and history(wb) == [("raised", "2 trips")]
    # Put back, it finds the alert the log already holds: nothing new to log.
    change = wb.add_rule(many_trips(1))
    assert not (change.raised or change.updated or change.cleared)
    assert [a.message for a in wb.alerts()] == ["2 trips"]
    assert history(wb) == [("raised", "2 trips")]
    wb.close()

    # A changed body under the same name is reconciled with the log: the alert now clears.
    wb = Workbench(path, user="maya", rules=[])
    change = wb.add_rule(many_trips(5))
    assert [a.message for a in change.cleared] == ["2 trips"] and not change.raised
    assert history(wb) == [("raised", "2 trips"), ("cleared", "2 trips")]
    wb.close()
    # The shipped library opened on the same store leaves the notebook rule's history alone.
    wb = Workbench(path, user="maya")
    assert history(wb) == [("raised", "2 trips"), ("cleared", "2 trips")]
    wb.close()

    # Read-only, nothing is logged: add_rule reports what changed in this session.
    wb = Workbench(path, user="maya", rules=[], read_only=True)
    assert [a.message for a in wb.add_rule(many_trips(1)).raised] == ["2 trips"]
    again = wb.add_rule(many_trips(1))
    assert not (again.raised or again.updated or again.cleared)
    assert history(wb) == [("raised", "2 trips"), ("cleared", "2 trips")]


def test_users_are_separate(tmp_path: Path) -> None:
    db = tmp_path / "u.duckdb"
    a = Workbench(db, user="a")
    a.ingest(TRIPS)
    a.close()
    b = Workbench(db, user="b")
    assert b.state.counts() == {} and b.ingest(TRIPS).appended == 4  # sources are per user
    assert Store(db, read_only=True).users() == ["a", "b"] if b.close() is None else False


def test_log_pages(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="maya")
    wb.ingest(
        [
            {
                "kind": "utterance",
                "ts": f"2025-01-01T00:00:{i:02d}",
                "speaker": "user",
                "text": str(i),
            }
            for i in range(30)
        ]
    )
    page = wb.log(limit=10, after_seq=10)
    assert [e.seq for e in page] == list(range(11, 21))
    assert isinstance(page[0].ts, datetime)


def test_a_nearing_deadline_is_logged_when_its_severity_changes(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="maya")
    wb.ingest([fact("2025-06-01", "add", "Purchase", "bike", item="bike", return_by="2025-06-14")])
    for day in ("2025-06-02", "2025-06-03", "2025-06-09", "2025-06-13", "2025-06-15"):
        wb.ingest([{"kind": "utterance", "ts": day, "speaker": "user", "text": "hello"}])
    states = [
        (e.ts.date().isoformat(), e.payload["state"], e.payload["severity"])
        for e in wb.alert_history()
    ]
    assert states == [
        ("2025-06-01", "raised", "info"),
        ("2025-06-09", "updated", "warning"),
        ("2025-06-13", "updated", "critical"),
        ("2025-06-15", "cleared", "critical"),
    ]


def test_which_user_a_store_opens(tmp_path: Path) -> None:
    import uac
    from uac_kernel.core.errors import StoreError, UnknownUser

    db = tmp_path / "u.duckdb"
    with pytest.raises(StoreError, match="no store at"):
        uac.open(str(db), user="maya", create=False)
    assert not db.exists()
    with uac.open(str(db)) as wb:  # a new store: its first user is "me"
        assert wb.user == "me" and not wb.known
        wb.ingest(TRIPS)
        assert wb.known
    with uac.open(str(db), read_only=True) as wb:  # its only user, unnamed
        assert wb.user == "me" and wb.state.counts() == {"Trip": 2}
    for kwargs in ({"read_only": True}, {"create": False}):
        with pytest.raises(UnknownUser) as refused:
            uac.open(str(db), user="mee", **kwargs)
        assert str(refused.value) == f"user 'mee' has no events in {db}; users here: me"
        assert refused.value.users == ["me"]
    with uac.open(str(db), user="mee") as wb:  # read-write: ingesting would create the user
        with pytest.raises(UnknownUser, match="users here: me"):
            wb.require_known()
        wb.ingest(TRIPS[:2])
        wb.require_known()
    with pytest.raises(UnknownUser, match=r"holds 2 users \(me, mee\); name one with --user"):
        uac.open(str(db), read_only=True)
    store = Store(db, read_only=True)
    assert store.user_counts() == {u: len(list(store.events(u))) for u in ("me", "mee")}
    store.close()


def test_a_checkpoint_that_changes_nothing_is_not_stored(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="maya")
    wb.ingest(TRIPS)
    first = wb.checkpoint()
    assert first.new and first.summary().startswith("checkpoint 1: 2 records, covers the log")
    again = wb.checkpoint()
    assert (again.version, again.new) == (1, False)
    assert again.summary() == "no change since checkpoint 1 (2 records); no new version stored"
    assert [c.version for c in wb.checkpoints.all()] == [1]
    wb.close()
    with Workbench(tmp_path / "u.duckdb", user="maya") as wb:  # reopened: still nothing new
        assert not wb.checkpoint().new
        wb.ingest([fact("2025-05-01", "update", "Trip", "york-2025", end="2025-04-12")])
        assert (wb.checkpoint().version, wb.checkpoints.latest().new) == (2, True)  # type: ignore[union-attr]


def test_reads_name_what_exists(tmp_path: Path) -> None:
    with Workbench(tmp_path / "u.duckdb", user="maya") as wb:
        wb.ingest(TRIPS)
        with pytest.raises(QueryError, match=r"no event kind 'facts'\. Did you mean 'fact'\?"):
            wb.log(kinds=["facts"])
        assert [e.kind for e in wb.log(kinds=["rule"])] == []  # a kind with no events yet
        with pytest.raises(QueryError, match=r"no record type 'trip'\. Did you mean 'Trip'\?"):
            wb.versions("trip", "york-2025")
        with pytest.raises(QueryError, match=r"no Trip with key 'york'\. Did you mean 'york-2025'"):
            wb.versions("Trip", "york")
        assert len(wb.versions("Trip", "tokyo-2025")) == 2


def test_a_record_with_a_field_named_type_keeps_its_record_type_in_eval(tmp_path: Path) -> None:
    with Workbench(tmp_path / "t.duckdb", user="u") as wb:
        wb.ingest([fact("2025-01-01", "add", "Transaction", "tx-1", type="coffee", amount=3.5)])
        (plain,) = wb.eval("user.all(Transaction)")
        assert plain["_type"] == "Transaction" and plain["type"] == "coffee"


def test_date_times_with_an_offset_are_date_times_in_utc(tmp_path: Path) -> None:
    db = tmp_path / "tz.duckdb"
    with Workbench(db, user="u") as wb:
        wb.ingest([fact("2025-04-01", "add", "Flight", "f1", departs="2025-04-03T10:00:00Z")])
        wb.ingest([fact("2025-04-02", "update", "Flight", "f1", departs="2025-04-03T10:00+02:00")])
        assert wb.state.schema.types["Flight"]["departs"] == "datetime"
        assert wb.state.get("Flight", "f1").departs == datetime(2025, 4, 3, 8, 0)  # type: ignore[union-attr]
        history = [v.departs for v in wb.state.versions("Flight", "f1")]
    with Workbench(db, user="u", read_only=True) as wb:  # the log holds the UTC value
        assert [v.departs for v in wb.state.versions("Flight", "f1")] == history
