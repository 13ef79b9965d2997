"""The notebook widgets on a real workbench over a real DuckDB file: the state they sync to the
front end, kernel-side paging and filtering, and the shipped front-end modules."""

from __future__ import annotations

import re
import shutil
import subprocess
import zipfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers.events import fact
from helpers.frontend import rendered

from uac_kernel import Workbench
from uac_kernel.log.store import LoggedEvent, NewEvent
from uac_kernel.notebook import widget_base as wbase
from uac_kernel.notebook import widgets as w
from uac_kernel.notebook import widgets_act as wact
from uac_kernel.notebook.paging import LogFilter, LogPager

SCRIPT = "<script>alert('x')</script>"
INJECT = '"); import os #'
ROOT = Path(__file__).resolve().parents[2]
MODULES = [
    "log_browser.js",
    "alert_inspector.js",
    "state_explorer.js",
    "diff_view.js",
    "progress.js",
    "review_view.js",
    "whatif_view.js",
    "vocab_view.js",
]


def said(ts: str, text: str, source: str) -> dict[str, Any]:
    return {"kind": "utterance", "ts": ts, "speaker": "user", "text": text, "source": source}


def derived(ev: dict[str, Any], *sources: str) -> dict[str, Any]:
    return {**ev, "derived_from": list(sources)}


FIRST = [
    said("2025-01-05T09:00:00", f"I'm allergic to penicillin {SCRIPT}", "chat-1#1"),
    derived(
        fact(
            "2025-01-05T09:00:00",
            "add",
            "Allergy",
            "pen",
            substance="penicillin",
            severity="severe",
        ),
        "chat-1#1",
    ),
    fact("2025-01-10", "add", "Trip", "tokyo", destination="Tokyo", start="2025-02-20"),
    fact("2025-01-11", "add", "Trip", "york", destination="York", start="2025-04-10"),
    fact("2025-01-12", "add", "Note", INJECT, text=SCRIPT),
]
SECOND = [
    said("2025-03-01T08:00:00", "The doctor prescribed amoxicillin", "chat-2#1"),
    derived(
        fact("2025-03-01T08:00:00", "add", "Medication", "amox", name="Amoxicillin 500 mg"),
        "chat-2#1",
    ),
    fact("2025-03-02", "update", "Trip", "tokyo", end="2025-03-01", nights=9),
    fact("2025-03-03", "retract", "Note", INJECT, reason="typo"),
    fact("2025-03-04", "add", "Book", "dune", title="Dune"),
]


@pytest.fixture
def wb(tmp_path: Path) -> Iterator[Workbench]:
    bench = Workbench(tmp_path / "w.duckdb", user="maya")
    bench.ingest(FIRST)
    bench.checkpoint()
    bench.ingest(SECOND)
    bench.checkpoint()
    # Another user's event that matches every filter must never show.
    bench.store.append(
        [
            NewEvent(
                datetime(2025, 3, 1), "utterance", "sam", {"speaker": "user", "text": "amoxicillin"}
            )
        ]
    )
    yield bench
    bench.close()


def seqs(rows: list[dict[str, Any]]) -> list[int]:
    return [r["seq"] for r in rows]


def stored(ev: LoggedEvent) -> str:
    return orjson.dumps(ev.payload, option=orjson.OPT_SORT_KEYS).decode()


# -- LogBrowser ------------------------------------------------------------------------------


def test_log_browser_pages_in_the_kernel(wb: Workbench) -> None:
    log = wb.log()
    browser = w.LogBrowser(wb, page_size=4)
    assert browser.total == len(log) and browser.pages == -(-len(log) // 4)
    assert seqs(browser.rows) == [e.seq for e in log[:4]]
    first = browser.rows[0]
    assert first["kind"] == "utterance" and first["source"] == "chat-1#1"
    assert first["ts"] == "2025-01-05 09:00:00"
    assert first["summary"] == f"user: I'm allergic to penicillin {SCRIPT}"
    assert orjson.loads(first["payload"])["text"].endswith(SCRIPT)

    browser.next_page()
    assert browser.page == 1 and seqs(browser.rows) == [e.seq for e in log[4:8]]
    browser.query = {**browser.query, "page": 2}
    assert seqs(browser.rows) == [e.seq for e in log[8:12]]
    browser.prev_page()
    assert browser.page == 1 and seqs(browser.rows) == [e.seq for e in log[4:8]]
    browser.query = {"page": 999}  # past the end: the last page
    assert browser.page == browser.pages - 1
    assert seqs(browser.rows) == [e.seq for e in log[browser.page * 4 :]]
    assert {k["name"]: k["count"] for k in browser.kinds} == {
        "alert": 1,
        "fact": 8,
        "schema": 14,
        "utterance": 2,
    }
    assert browser.types == ["Allergy", "Book", "Medication", "Note", "Trip"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"kind": "fact"}, lambda e: e.kind == "fact"),
        (
            {"type": "Trip"},
            lambda e: e.kind in ("fact", "schema") and e.payload.get("type") == "Trip",
        ),
        (
            {"text": "AMOXICILLIN"},
            lambda e: "amoxicillin" in stored(e).lower(),
        ),
        # the utterance by its source, and the fact derived from it
        ({"text": "chat-2"}, lambda e: e.source == "chat-2#1" or "chat-2" in stored(e)),
        ({"text": INJECT}, lambda e: e.payload.get("key") == INJECT),
        ({"text": "<SCRIPT>"}, lambda e: "<script>" in stored(e)),
        (
            {"start": "2025-03-01", "end": "2025-03-02"},
            lambda e: datetime(2025, 3, 1) <= e.ts < datetime(2025, 3, 3),
        ),
        (
            {"kind": "fact", "text": "tokyo", "start": "2025-02-01T00:00"},
            lambda e: e.kind == "fact" and "tokyo" in stored(e) and e.ts >= datetime(2025, 2, 1),
        ),
    ],
)
def test_log_browser_filters(wb: Workbench, query: dict[str, Any], expected: Any) -> None:
    want = [e.seq for e in wb.log() if expected(e)]
    assert want, "the filter should match something"
    browser = w.LogBrowser(wb, page_size=3)
    browser.query = {**query, "page": 0}
    assert browser.error == ""
    assert browser.total == len(want)
    assert seqs(browser.rows) == want[:3]
    browser.next_page()
    assert seqs(browser.rows) == (want[3:6] or want[:3])


def test_log_browser_shows_bad_input_as_an_error_and_keeps_the_page(wb: Workbench) -> None:
    browser = w.LogBrowser(wb, kind="utterance")
    rows = browser.rows
    browser.query = {"kind": "utterance", "start": "yesterday"}
    assert "'yesterday' is not an ISO date" in browser.error
    assert browser.rows == rows
    browser.query = {"kind": "utterance"}
    assert browser.error == "" and browser.total == 2


@pytest.mark.parametrize(
    ("text", "end", "bound"),
    [
        ("", False, None),
        ("2025-03-02", False, datetime(2025, 3, 2)),
        ("2025-03-02", True, datetime(2025, 3, 3)),  # the whole day
        ("2025-03-02T10:15", True, datetime(2025, 3, 2, 10, 16)),  # the whole minute
        ("2025-03-02T10:15:30", True, datetime(2025, 3, 2, 10, 15, 31)),
        ("2025-03-02T10:15:00+01:00", False, datetime(2025, 3, 2, 9, 15)),  # as UTC, like the log
        ("2025-03-02T10:15+01:00", True, datetime(2025, 3, 2, 9, 16)),
    ],
)
def test_time_bounds_cover_what_they_name(text: str, end: bool, bound: datetime | None) -> None:
    assert wbase._bound(text, end) == bound


def test_log_browser_refresh_sees_new_events(wb: Workbench) -> None:
    browser = w.LogBrowser(wb, kind="utterance")
    wb.ingest([said("2025-04-01", "hello again", "chat-3#1")])
    assert browser.total == 2
    browser.refresh()
    assert browser.total == 3 and browser.rows[-1]["summary"] == "user: hello again"


def test_pager_reads_every_page_the_same_whichever_way_it_gets_there(wb: Workbench) -> None:
    for n in range(40):
        wb.store.append(
            [NewEvent(datetime(2025, 5, 1), "utterance", "maya", {"speaker": "u", "text": str(n)})]
        )
    log = [e.seq for e in wb.log()]
    size = 5
    pages = -(-len(log) // size)
    want = {n: log[n * size : (n + 1) * size] for n in range(pages)}
    orders = [
        list(range(pages)),  # forward: keyed by the previous page's last seq
        list(reversed(range(pages))),  # backward: the last page from the end, then seq <
        [3, 1, pages - 2, 2, 0, pages - 1],  # jumps: offsets from the start or the end
    ]
    for order in orders:
        pager = LogPager(wb.store, "maya", size)
        for n in order:
            got, events = pager.page(n)
            assert got == n and [e.seq for e in events] == want[n], (order, n)
    pager = LogPager(wb.store, "maya", size)
    pager.set_filter(LogFilter(kind="utterance", text="1"))
    hits = [e.seq for e in wb.log(kinds=["utterance"]) if "1" in stored(e) + (e.source or "")]
    assert pager.total() == len(hits)
    assert [e.seq for n in range(pager.pages()) for e in pager.page(n)[1]] == hits


def test_log_filter_keeps_user_text_out_of_the_sql() -> None:
    hostile = "x' OR 1=1 --"
    f = LogFilter(kind=hostile, type="Trip", text=INJECT, ts_from=datetime(2025, 1, 1))
    where, params = f.where("maya")
    assert hostile in params and INJECT in params
    assert hostile not in where and "import" not in where and "Trip" not in where
    assert where.count("?") == len(params)


# -- AlertInspector ---------------------------------------------------------------------------


def test_alert_inspector_shows_evidence_and_history(wb: Workbench) -> None:
    inspector = w.AlertInspector(wb)
    assert inspector.counts == {"critical": 1, "warning": 0, "info": 0}
    (alert,) = inspector.alerts
    assert alert["severity"] == "critical" and alert["rule"] == "drug_allergy_cross_reactivity"
    assert "Amoxicillin" in alert["message"]
    evidence = {(e["type"], e["key"]): e for e in alert["evidence"]}
    allergy = evidence[("Allergy", "pen")]
    assert allergy["status"] == "current"
    assert allergy["fields"] == {"substance": "penicillin", "severity": "severe"}
    (event,) = allergy["events"]
    assert event["kind"] == "fact" and event["summary"].startswith("add Allergy pen")
    assert event["derived_from"] == ["chat-1#1"]
    assert [u["text"] for u in event["utterances"]] == [f"I'm allergic to penicillin {SCRIPT}"]
    med = evidence[("Medication", "amox")]
    assert med["fields"] == {"name": "Amoxicillin 500 mg"}
    assert med["events"][0]["utterances"][0]["text"] == "The doctor prescribed amoxicillin"
    (raised,) = alert["history"]
    assert raised["state"] == "raised" and raised["ts"] == "2025-03-04 00:00:00"
    assert inspector.past == []

    wb.ingest([fact("2025-03-10", "retract", "Medication", "amox", reason="never filled")])
    inspector.refresh()
    assert inspector.alerts == [] and inspector.counts["critical"] == 0
    (gone,) = inspector.past
    assert gone["id"] == alert["id"] and not gone["not_in_force"]
    assert [h["state"] for h in gone["history"]] == ["raised", "cleared"]
    assert gone["history"][-1]["reason"] == "a record it was about was retracted: Medication 'amox'"


def test_alert_inspector_marks_an_alert_whose_rule_is_not_in_force(wb: Workbench) -> None:
    path, user = wb.store.path, wb.user
    wb.close()
    with Workbench(path, user=user, rules=[]) as later:
        inspector = w.AlertInspector(later)
        assert inspector.alerts == []
        (gone,) = inspector.past
        assert gone["rule"] == "drug_allergy_cross_reactivity" and gone["not_in_force"]
        assert [h["state"] for h in gone["history"]] == ["raised"]  # not cleared by the reopen


# -- StateExplorer ----------------------------------------------------------------------------


def test_state_explorer_types_records_versions_and_provenance(wb: Workbench) -> None:
    explorer = w.StateExplorer(wb, page_size=1)
    assert [(t["name"], t["count"]) for t in explorer.types] == [
        ("Allergy", 1),
        ("Book", 1),
        ("Medication", 1),
        ("Note", 0),
        ("Trip", 2),
    ]
    trip = next(t for t in explorer.types if t["name"] == "Trip")
    assert trip["versions"] == 3
    assert trip["fields"][0] == {"name": "destination", "ftype": "str"}
    assert explorer.query["type"] == "Allergy"  # the first type is open to begin with

    explorer.query = {"type": "Trip", "page": 0}
    assert explorer.columns == ["destination", "start", "end", "nights"]
    assert explorer.total == 2 and explorer.pages == 2
    assert [r["key"] for r in explorer.records] == ["tokyo"]
    explorer.query = {"type": "Trip", "page": 1}
    assert [r["key"] for r in explorer.records] == ["york"]
    explorer.query = {"type": "Trip", "text": "TOK"}
    assert explorer.total == 1 and explorer.records[0]["fields"] == {
        "destination": "Tokyo",
        "start": "2025-02-20",
        "end": "2025-03-01",
        "nights": 9,
    }

    explorer.query = {"type": "Trip", "key": "tokyo"}
    record = explorer.record
    assert record["current"] is True
    first, second = record["versions"]
    assert (first["valid_from"], first["valid_to"]) == (
        "2025-01-10 00:00:00",
        "2025-03-02 00:00:00",
    )
    assert first["fields"] == {"destination": "Tokyo", "start": "2025-02-20"}
    assert second["valid_to"] == "" and second["fields"]["nights"] == 9
    assert [e["summary"].split()[0] for e in record["events"]] == ["add", "update"]
    assert second["sources"] == [e["seq"] for e in record["events"]]

    explorer.query = {"type": "Allergy", "key": "pen"}
    (event,) = explorer.record["events"]
    assert event["utterances"][0]["source"] == "chat-1#1"


def test_widgets_show_values_as_a_person_reads_them(wb: Workbench) -> None:
    """Date-times read ``2025-03-05 09:30`` (not ISO ``T`` text); a summary too long for its
    line is cut after a whole word."""
    wb.ingest(
        [
            fact("2025-03-05", "add", "Flight", "lx", departs="2025-03-05T09:30:00"),
            said("2025-03-05T10:00:00", "supercalifragilistic " * 20, "chat-9#1"),
        ]
    )
    explorer = w.StateExplorer(wb, type="Flight")
    assert explorer.records[0]["fields"] == {"departs": "2025-03-05 09:30"}
    line = wbase.summarize(wb.log(kinds=["utterance"])[-1], width=60)
    assert line == "user: supercalifragilistic supercalifragilistic…"


def test_state_explorer_shows_retracted_records_on_request(wb: Workbench) -> None:
    explorer = w.StateExplorer(wb, type="Note")
    assert explorer.total == 0 and explorer.records == []
    explorer.query = {"type": "Note", "scope": "all"}
    (note,) = explorer.records
    assert note["key"] == INJECT and note["retracted"] is True
    assert note["fields"] == {"text": SCRIPT}
    explorer.query = {"type": "Note", "scope": "all", "key": INJECT}
    (version,) = explorer.record["versions"]
    assert version["retracted"] is True and explorer.record["current"] is False
    assert [e["summary"] for e in explorer.record["events"]][-1].endswith("(reason: typo)")
    explorer.query = {"type": "Nope"}
    assert "no record type 'Nope'" in explorer.error


# -- DiffView ---------------------------------------------------------------------------------


def test_diff_view_shows_the_checkpoint_diff(wb: Workbench) -> None:
    view = w.DiffView(wb, 1, 2)
    d = view.diff
    assert [v["version"] for v in view.versions] == [1, 2]
    assert d["totals"] == {"added": 2, "changed": 1, "retracted": 1}
    assert {(c["type"], c["key"]) for c in d["added"]} == {("Medication", "amox"), ("Book", "dune")}
    (changed,) = d["changed"]
    assert (changed["type"], changed["key"]) == ("Trip", "tokyo")
    assert changed["changes"] == [
        {"field": "end", "before": None, "after": "2025-03-01"},
        {"field": "nights", "before": None, "after": 9},
    ]
    (retracted,) = d["retracted"]
    assert retracted == {"type": "Note", "key": INJECT, "fields": {"text": SCRIPT}}
    assert sorted(d["new_types"]) == ["Book", "Medication"]
    assert d["new_fields"] == {"Trip": ["end", "nights"]}
    assert d["summary"] == wb.diff(1, 2).summary()

    view.a = 2
    assert view.diff["totals"] == {"added": 0, "changed": 0, "retracted": 0}
    view.b = 7
    assert "no checkpoint 7" in view.error


# -- Progress ---------------------------------------------------------------------------------


def test_progress_counts_and_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    with wbase.Progress(10, "ingest") as bar:
        for _ in range(10):
            bar.update()
    assert (bar.value, bar.total, bar.status, bar.description) == (10, 10, "done", "ingest")
    with pytest.raises(RuntimeError), wbase.Progress(None, "extract") as bar:
        bar.update(3)
        raise RuntimeError("boom")
    assert (bar.value, bar.total, bar.status) == (3, None, "failed")


def test_progress_helper_uses_tqdm_outside_a_notebook(capsys: pytest.CaptureFixture[str]) -> None:
    assert list(wbase.progress(range(5), desc="steps")) == [0, 1, 2, 3, 4]
    assert "steps" in capsys.readouterr().err


def test_progress_helper_shows_the_widget_in_a_notebook(monkeypatch: pytest.MonkeyPatch) -> None:
    shown: list[Any] = []
    monkeypatch.setattr(wbase, "in_notebook", lambda: True)
    monkeypatch.setattr("IPython.display.display", shown.append)
    assert list(wbase.progress(iter("abc"), total=3, desc="letters")) == ["a", "b", "c"]
    (bar,) = shown
    assert isinstance(bar, wbase.Progress)
    assert (bar.value, bar.total, bar.status, bar.description) == (3, 3, "done", "letters")
    for _ in wbase.progress(range(10), desc="stop early"):
        break
    assert shown[-1].status == "stopped" and shown[-1].value == 0


# -- WhatIfWidget -----------------------------------------------------------------------------

# "What if the GP prescribes amoxicillin?" — with a hostile name, a trip that grows longer and a
# note (under a key that is code) retracted.
WHATIF = [
    fact(
        "2025-03-05T09:00:00",
        "add",
        "Medication",
        "amox-2",
        name=f"Amoxicillin 250 mg {SCRIPT}",
        dose="250 mg",
    ),
    fact("2025-03-05T09:00:00", "update", "Trip", "york", nights=4),
]
QUESTIONS = {
    "medications": "sorted(m.name for m in user.all('Medication'))",
    "trips": "len(user.all(Trip))",
}


def kinds(events: list[LoggedEvent]) -> dict[str, int]:
    found: dict[str, int] = {}
    for e in events:
        found[e.kind] = found.get(e.kind, 0) + 1
    return found


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[Workbench]:
    """A user with a penicillin allergy and two trips, and nothing prescribed yet."""
    bench = Workbench(tmp_path / "whatif.duckdb", user="maya")
    bench.ingest(FIRST)
    yield bench
    bench.close()


def test_whatif_widget_syncs_the_report_as_plain_data(fresh: Workbench) -> None:
    before = fresh.log()
    what = fresh.whatif(WHATIF, expressions=QUESTIONS)
    view = wact.WhatIfWidget(fresh, what)
    assert view.error == "" and not view.applied and view.done == ""
    assert view.timeline_svg == ""  # over the current state: no timeline
    report = view.get_state()["report"]
    orjson.dumps(report)  # JSON as it is synced, nothing left to convert
    assert report["as_of"] == "" and report["summary"] == what.summary()
    assert report["new"] == 2 and report["skipped"] == 0
    assert report["totals"]["records"] == 2

    changes = {(c["type"], c["key"]): c for c in report["records"]}
    added = changes[("Medication", "amox-2")]
    assert added["change"] == "added"
    assert {f["field"]: (f["before"], f["after"]) for f in added["fields"]} == {
        "name": (None, f"Amoxicillin 250 mg {SCRIPT}"),
        "dose": (None, "250 mg"),
    }
    york = changes[("Trip", "york")]
    assert york["change"] == "changed"
    assert york["fields"] == [{"field": "nights", "before": None, "after": 4}]

    (alert,) = report["raised"]
    assert alert["rule"] == "drug_allergy_cross_reactivity" and alert["severity"] == "critical"
    assert SCRIPT in alert["message"]
    evidence = {(e["type"], e["key"]): e for e in alert["evidence"]}
    allergy = evidence[("Allergy", "pen")]
    assert allergy["status"] == "current" and allergy["fields"]["substance"] == "penicillin"
    assert allergy["events"][0]["utterances"][0]["text"].endswith(SCRIPT)
    med = evidence[("Medication", "amox-2")]
    assert med["status"] == "what-if: added" and med["fields"]["dose"] == "250 mg"
    assert med["events"] == []  # it exists only in the what-if
    assert report["cleared"] == [] and report["escalated"] == []

    answers = {a["label"]: a for a in report["answers"]}
    assert set(answers) == {"medications"}  # the trip count stays the same
    assert answers["medications"]["before"] == []
    assert answers["medications"]["after"] == [f"Amoxicillin 250 mg {SCRIPT}"]
    assert report["totals"]["answers"] == 2 and report["totals"]["answers_changed"] == 1
    assert any("Medication" in s for s in report["schema"])
    assert fresh.log() == before  # showing it wrote nothing


def test_whatif_widget_applies_through_its_message_handler(fresh: Workbench) -> None:
    what = fresh.whatif(WHATIF, expressions=[])
    view = wact.WhatIfWidget(fresh, what)
    before = fresh.log()

    view._on_msg(view, {"action": "apply"}, [])
    assert view.error == "" and view.applied
    report = view.done
    assert report.startswith("applied: 2 events appended"), report
    grown = fresh.log()[len(before) :]
    assert fresh.log()[: len(before)] == before
    facts = [e for e in grown if e.kind == "fact"]
    assert [{k: e.payload[k] for k in ("op", "type", "key")} for e in facts] == [
        {"op": "add", "type": "Medication", "key": "amox-2"},
        {"op": "update", "type": "Trip", "key": "york"},
    ]
    assert facts[0].payload["fields"]["name"] == f"Amoxicillin 250 mg {SCRIPT}"
    (logged,) = [e for e in grown if e.kind == "alert"]
    assert logged.payload["state"] == "raised"
    assert logged.payload["id"] == what.raised[0].id
    # and the matcher's reading of the new field (Medication.dose as medication.dose)
    assert set(kinds(grown)) == {"fact", "schema", "alert", "vocabulary"}
    assert [a.id for a in fresh.alerts()] == [what.raised[0].id]

    # Applied once: the button's second press (or a replayed message) appends nothing.
    served = view.served
    view._on_msg(view, {"action": "apply"}, [])
    assert view.served == served + 1 and "applied already" in view.error
    assert len(fresh.log()) == len(before) + len(grown)


def test_whatif_widget_text_says_what_was_appended_once_applied(fresh: Workbench) -> None:
    view = wact.WhatIfWidget(fresh, fresh.whatif(WHATIF, expressions=[]))
    data, _ = view._repr_mimebundle_()
    assert data["text/plain"] == view.text()
    assert view.text().splitlines()[0].endswith("; nothing was appended")
    view.apply()
    data, _ = view._repr_mimebundle_()
    assert data["text/plain"] == view.text() and "nothing was appended" not in view.text()
    lines = view.text().splitlines()
    assert lines[0] == view.heading and re.fullmatch(
        r"applied: 2 events appended to the log at seqs \d+–\d+.*", lines[0]
    )
    assert lines[1].startswith("predicted before it was applied: what-if: 2 events;")


def test_whatif_widget_shows_a_refusal_when_the_log_moved_on(fresh: Workbench) -> None:
    what = fresh.whatif(WHATIF, expressions=[])
    view = wact.WhatIfWidget(fresh, what)
    # Since the what-if ran, the York trip was retracted: its update no longer applies.
    fresh.ingest([fact("2025-03-04", "retract", "Trip", "york", reason="cancelled")])
    before = fresh.log()
    view._on_msg(view, {"action": "apply"}, [])
    assert view.error and "\n" not in view.error and not view.applied and view.done == ""
    assert fresh.log() == before


def test_whatif_widget_refuses_what_is_not_an_action(fresh: Workbench) -> None:
    view = wact.WhatIfWidget(fresh, fresh.whatif(WHATIF, expressions=[]))
    before = fresh.log()
    for content in [{"action": "drop"}, "apply", {"action": ["apply"]}]:
        view._on_msg(view, content, [])
        assert view.error.startswith("not a what-if action") and not view.applied
    assert fresh.log() == before


def test_whatif_widget_in_the_past_draws_the_timeline(fresh: Workbench) -> None:
    fresh.ingest(SECOND)  # amoxicillin prescribed on 2025-03-01: the alert stands since
    what = fresh.whatif(
        [fact("2025-01-20", "add", "Medication", "early", name=f"amoxicillin {SCRIPT}")],
        as_of="2025-01-20T00:00:00",
        expressions=[],
    )
    view = wact.WhatIfWidget(fresh, what)
    assert view.error == ""
    assert view.report["as_of"] == "2025-01-20 00:00"
    svg = view.timeline_svg
    assert svg.startswith("<svg") and "what-if inserted here" in svg
    assert "<script" not in svg and "&lt;script&gt;" in svg  # the message is text in the picture


# What the what-if widget shows: its heading, the line under it, the Apply button and the note
# beside it.
_WHATIF_SEEN = """
  const apply = el.findTag("BUTTON");
  const note = el.find("uac-whatif-readonly");
  return {
    heading: el.find("uac-whatif-heading").textContent,
    intro: el.find("uac-whatif-body").children[0]?.textContent ?? "",
    done: el.find("uac-whatif-done").textContent,
    button: apply.textContent,
    disabled: Boolean(apply.disabled),
    title: apply.title || apply.attributes.title || "",
    note: note.hidden ? "" : note.textContent,
  };
"""


def _synced(view: Any) -> dict[str, Any]:
    names = ["report", "timeline_svg", "applied", "done", "heading", "readonly", "error", "served"]
    return {k: v for k, v in view.get_state().items() if k in names}


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_whatif_module_heading_follows_apply(fresh: Workbench) -> None:
    view = wact.WhatIfWidget(fresh, fresh.whatif(WHATIF, expressions=[]))
    drawn = _synced(view)
    view._on_msg(view, {"action": "hello"}, [])  # what the module sends when it is drawn
    assert view.error == "" and view.served == drawn["served"] + 1
    before = _synced(view)
    view._on_msg(view, {"action": "apply"}, [])
    assert view.applied
    (waiting, shown, applied), sent = rendered(view, [drawn, before, _synced(view)], _WHATIF_SEEN)
    assert sent == [{"action": "hello"}]
    assert waiting["disabled"] and waiting["note"] == ""  # until the kernel answers
    assert shown["heading"].endswith("; nothing was appended") and not shown["disabled"]
    assert shown["intro"].endswith("nothing is written until you apply.")
    assert shown["button"] == "Apply for real" and shown["note"] == ""
    # after Apply nothing on the widget says nothing was appended
    assert applied["heading"] == view.heading and applied["heading"].startswith(
        "applied: 2 events appended to the log at seq"
    )
    assert "nothing" not in applied["heading"] + applied["intro"]
    assert applied["intro"].startswith("Below is what the what-if predicted before it was applied")
    assert applied["done"] == view.done and applied["button"] == "Applied" and applied["disabled"]


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_whatif_module_shows_why_apply_is_off(fresh: Workbench) -> None:
    why = "this is a static export: run `marimo edit tour.py` to apply a what-if"
    view = wact.WhatIfWidget(fresh, fresh.whatif(WHATIF, expressions=[]), readonly=why)
    drawn = _synced(view)
    view._on_msg(view, {"action": "hello"}, [])
    (_, shown), _ = rendered(view, [drawn, _synced(view)], _WHATIF_SEEN)
    assert shown["disabled"] and shown["note"] == why and shown["title"] == why


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_whatif_module_without_a_kernel_keeps_apply_off(fresh: Workbench) -> None:
    # a static copy of the widget (a notebook exported with its widget state): no kernel ever
    # answers the hello, so Apply stays off and, after a while, says why
    view = wact.WhatIfWidget(fresh, fresh.whatif(WHATIF, expressions=[]))
    (drawn, later), _ = rendered(view, [_synced(view)], _WHATIF_SEEN, wait=3200)
    assert drawn["disabled"] and drawn["note"] == ""
    assert later["disabled"] and later["note"].startswith("no kernel answers this view")


# -- controls that ask the kernel -------------------------------------------------------------

# What a widget shows of its kernel controls: whether their fieldset is off, which controls are
# in it, and the note in the controls' row.
_CONTROLS_SEEN = """
  const group = el.findTag("FIELDSET");
  const note = el.find("uac-controls").find("uac-readonly");
  return {
    disabled: Boolean(group.disabled),
    title: group.attributes.title || "",
    controls: ["INPUT", "SELECT", "BUTTON"].filter((tag) => group.findTag(tag)),
    note: note && !note.hidden ? note.textContent : "",
  };
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize(
    ("make", "controls"),
    [
        (lambda wb, why: w.LogBrowser(wb, readonly=why), ["INPUT", "SELECT", "BUTTON"]),
        (lambda wb, why: w.StateExplorer(wb, readonly=why), ["INPUT", "SELECT", "BUTTON"]),
        (lambda wb, why: w.DiffView(wb, 1, 2, readonly=why), ["SELECT"]),
    ],
    ids=["log_browser", "state_explorer", "diff_view"],
)
def test_kernel_controls_are_off_with_the_reason_beside_them(
    wb: Workbench, make: Any, controls: list[str]
) -> None:
    why = "this is a static export: run `marimo edit tour.py` to filter and page the log"
    view = make(wb, why)
    assert view.readonly == why and view.error == ""
    off = view.get_state()
    view.readonly = ""  # a kernel answers: the same controls, on
    (static, live), sent = rendered(view, [off, view.get_state()], _CONTROLS_SEEN)
    assert static == {"disabled": True, "title": why, "controls": controls, "note": why}
    assert live == {"disabled": False, "title": "", "controls": controls, "note": ""}
    assert sent == []


def test_kernel_controls_are_on_by_default(wb: Workbench) -> None:
    views = [w.LogBrowser(wb), w.StateExplorer(wb), w.DiffView(wb, 1, 2), w.AlertInspector(wb)]
    assert [v.readonly for v in views] == ["", "", "", ""]


# -- data stays data --------------------------------------------------------------------------


def test_hostile_strings_are_synced_as_plain_data(wb: Workbench) -> None:
    browser = w.LogBrowser(wb, text=INJECT)
    assert any(INJECT in r["summary"] for r in browser.rows)
    explorer = w.StateExplorer(wb, type="Note", scope="all")
    state = explorer.get_state()
    assert state["records"][0]["key"] == INJECT
    assert state["records"][0]["fields"]["text"] == SCRIPT


@pytest.mark.parametrize("name", ["_common.js", *MODULES])
def test_front_end_modules_never_parse_data_as_html(name: str) -> None:
    source = wbase.asset(name)
    assert not re.search(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(", source)
    assert not re.search(r"\bimport\b.*\bfrom\b|https?://", source), "no imports, no network"


# -- shipped front end ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("widget", "name"),
    [
        (w.LogBrowser, "log_browser.js"),
        (w.AlertInspector, "alert_inspector.js"),
        (w.StateExplorer, "state_explorer.js"),
        (w.DiffView, "diff_view.js"),
        (wbase.Progress, "progress.js"),
        (wact.ReviewView, "review_view.js"),
        (wact.WhatIfWidget, "whatif_view.js"),
        (wact.VocabView, "vocab_view.js"),
    ],
)
def test_each_widget_loads_its_module_and_the_css(widget: type, name: str) -> None:
    own = wbase.asset(name)
    assert "export default { render };" in own
    assert widget._esm.endswith(own) and "function h(" in widget._esm
    assert widget._css == wbase.asset("uac.css") and ".uac" in widget._css


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize(
    "widget",
    [
        w.LogBrowser,
        w.AlertInspector,
        w.StateExplorer,
        w.DiffView,
        wbase.Progress,
        wact.ReviewView,
        wact.WhatIfWidget,
        wact.VocabView,
    ],
)
def test_each_module_parses_as_an_es_module(widget: type) -> None:
    # `node --check file.js` does not parse a .js file as a module; stdin with a module type does.
    run = subprocess.run(
        ["node", "--input-type=module", "--check"],
        input=widget._esm,
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr


def test_assets_come_from_the_package_or_the_checkout() -> None:
    for name in ["_common.js", "uac.css", *MODULES]:
        assert wbase.asset(name) == (ROOT / "widgets" / name).read_text(encoding="utf-8")
    with pytest.raises(FileNotFoundError, match="reinstall"):
        wbase.asset("nope.js")


def test_the_wheel_ships_the_front_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The build backend is a dev dependency, so this runs under scripts/test rather than skip.
    # Built through the PEP 517 hook, the way pip builds it, from the project root.
    from hatchling.build import build_wheel

    monkeypatch.chdir(ROOT)
    wheel = tmp_path / build_wheel(str(tmp_path))
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ["_common.js", "uac.css", *MODULES]:
        assert f"uac_kernel/_widgets/{name}" in names
