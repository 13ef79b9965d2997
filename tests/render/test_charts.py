"""Charts over a real Workbench on a DuckDB file: the specs' marks, encodings and exact data."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

import altair as alt
import pytest
from helpers.charts import late_books, tick_days
from helpers.events import fact

from uac_kernel import Finding, Workbench, rule
from uac_kernel.core.errors import QueryError
from uac_kernel.log.store import NewEvent
from uac_kernel.render.charts import (
    SEVERITY_COLORS,
    alerts_timeline,
    enable_offline,
    events_over_time,
    records_over_time,
    result_chart,
    save_chart,
    whatif_timeline,
)
from uac_kernel.rules.library import drug_allergy_cross_reactivity
from uac_kernel.state.query import UserView


def utterance(ts: str, text: str) -> dict[str, Any]:
    return {"kind": "utterance", "ts": ts, "speaker": "user", "text": text}


# Monday-based weeks: 03-03, 03-10, (03-17 empty), 03-24, 03-31, 04-07, 04-14, (...), 05-05.
EVENTS = [
    utterance("2025-03-03T09:00:00", "Off to Tokyo tomorrow"),
    fact("2025-03-04T08:00:00", "add", "Trip", "tokyo", destination="Tokyo", start="2025-03-04"),
    fact("2025-03-05T08:00:00", "add", "Trip", "paris", destination="Paris", start="2025-03-20"),
    fact("2025-03-11T08:00:00", "update", "Trip", "tokyo", end="2025-03-10"),
    utterance("2025-03-12T19:00:00", "Back home"),
    fact("2025-03-25T10:00:00", "add", "Book", "dune", title="Dune", late_days=3),
    fact("2025-03-26T10:00:00", "retract", "Trip", "paris", reason="cancelled"),
    fact("2025-04-02T10:00:00", "add", "Allergy", "pen", substance="penicillin"),
    fact("2025-04-09T10:00:00", "add", "Medication", "amox", name="amoxicillin"),
    fact("2025-04-15T10:00:00", "update", "Book", "dune", late_days=10),
    fact("2025-05-06T10:00:00", "retract", "Medication", "amox", reason="switched"),
]


@pytest.fixture(scope="module")
def wb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workbench]:
    path = tmp_path_factory.mktemp("charts") / "maya.duckdb"
    bench = Workbench(path, user="maya", rules=[drug_allergy_cross_reactivity, late_books])
    for ev in EVENTS:  # one batch each, so the rules run after every event
        bench.ingest([ev])
    # Another user in the same store, later: must not count, nor move maya's clock.
    bench.store.append(
        [NewEvent(datetime(2025, 6, 30), "utterance", "sam", {"speaker": "user", "text": "hi"})]
    )
    yield bench
    bench.close()


COUNT_AXIS = {"format": "d", "tickMinStep": 1}


def values(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows a chart embeds, wherever Altair put them."""
    data = spec.get("data") or spec["layer"][0]["data"]
    return spec["datasets"][data["name"]] if "name" in data else data["values"]


def encoding(spec: dict[str, Any], channel: str) -> dict[str, Any]:
    return spec["encoding"][channel]


# -- the log -----------------------------------------------------------------------------------


def test_events_over_time_counts_each_kind_per_week(wb: Workbench) -> None:
    spec = events_over_time(wb).to_dict()
    assert spec["mark"]["type"] == "bar"
    assert encoding(spec, "x")["field"] == "start"
    assert encoding(spec, "x")["type"] == "temporal"
    assert encoding(spec, "x2")["field"] == "end"
    assert encoding(spec, "y") == {
        "field": "bottom",
        "type": "quantitative",
        "title": "Events",
        "axis": COUNT_AXIS,
    }
    assert encoding(spec, "y2") == {"field": "top"}
    assert encoding(spec, "color")["field"] == "kind"
    assert {t["field"] for t in encoding(spec, "tooltip")} == {"start", "kind", "events"}
    counts = {(r["start"], r["kind"]): r["events"] for r in values(spec)}
    assert counts == {
        ("2025-03-03", "utterance"): 1,
        ("2025-03-03", "fact"): 2,
        ("2025-03-03", "schema"): 3,  # Trip, destination, start
        ("2025-03-10", "fact"): 1,
        ("2025-03-10", "schema"): 1,  # end
        ("2025-03-10", "utterance"): 1,
        ("2025-03-24", "fact"): 2,
        ("2025-03-24", "schema"): 3,  # Book, title, late_days
        ("2025-03-24", "alert"): 1,  # the late book raised
        ("2025-03-31", "fact"): 1,
        ("2025-03-31", "schema"): 2,
        ("2025-04-07", "fact"): 1,
        ("2025-04-07", "schema"): 2,
        ("2025-04-07", "alert"): 1,  # amoxicillin against the penicillin allergy
        ("2025-04-14", "fact"): 1,
        ("2025-04-14", "alert"): 1,  # the late book turned critical
        ("2025-05-05", "fact"): 1,
        ("2025-05-05", "alert"): 1,  # cleared by the retraction
    }
    assert sum(counts.values()) == len(wb.log())
    # Each bar spans its week and its kind's slice of the stack (kinds in alphabetical order).
    week = [
        (r["kind"], r["start"], r["end"], r["bottom"], r["top"])
        for r in values(spec)
        if r["start"] == "2025-03-24"
    ]
    assert week == [
        ("alert", "2025-03-24", "2025-03-31", 0, 1),
        ("fact", "2025-03-24", "2025-03-31", 1, 3),
        ("schema", "2025-03-24", "2025-03-31", 3, 6),
    ]


def test_events_over_time_by_month_and_kind_filter(wb: Workbench) -> None:
    spec = events_over_time(wb, freq="month", kinds=["fact", "utterance"]).to_dict()
    assert values(spec) == [
        {
            "start": "2025-03-01",
            "end": "2025-04-01",
            "kind": "fact",
            "events": 5,
            "bottom": 0,
            "top": 5,
        },
        {
            "start": "2025-03-01",
            "end": "2025-04-01",
            "kind": "utterance",
            "events": 2,
            "bottom": 5,
            "top": 7,
        },
        {
            "start": "2025-04-01",
            "end": "2025-05-01",
            "kind": "fact",
            "events": 3,
            "bottom": 0,
            "top": 3,
        },
        {
            "start": "2025-05-01",
            "end": "2025-06-01",
            "kind": "fact",
            "events": 1,
            "bottom": 0,
            "top": 1,
        },
    ]
    assert spec["title"]["text"] == "Events of maya per month"


def test_an_unknown_frequency_is_refused(wb: Workbench) -> None:
    with pytest.raises(QueryError, match="freq 'fortnight' is not one of day, week, month"):
        events_over_time(wb, freq="fortnight")
    with pytest.raises(QueryError, match="freq"):
        records_over_time(wb, freq="hour")


def test_records_over_time_counts_current_records_per_type(wb: Workbench) -> None:
    spec = records_over_time(wb).to_dict()
    assert spec["mark"]["type"] == "line" and spec["mark"]["interpolate"] == "step-after"
    assert spec["mark"]["point"]["filled"] is False  # hollow: two at one place both show
    assert encoding(spec, "x")["field"] == "period"
    assert encoding(spec, "x")["type"] == "temporal"
    assert encoding(spec, "y")["field"] == "records"
    assert encoding(spec, "y")["axis"] == COUNT_AXIS
    assert encoding(spec, "color")["field"] == "type"
    assert encoding(spec, "color")["scale"]["scheme"] == "tableau20"  # 20 distinct colours
    # One domain, in the rows' order, for colour, dash, width and shape: one legend.
    scales = [encoding(spec, c)["scale"]["domain"] for c in ("color", "strokeDash", "shape")]
    assert scales == [["Allergy", "Book", "Medication", "Trip"]] * 3
    # Each line runs on to the log's last month (May), where Medication drops to 0, and on to
    # May's close (an end, drawn without a point).
    assert [{**r, "end": r["end"] or None} for r in values(spec)] == [
        {"type": "Allergy", "period": "2025-04-01", "records": 1, "end": None},
        {"type": "Allergy", "period": "2025-05-01", "records": 1, "end": None},
        {"type": "Allergy", "period": "2025-06-01", "records": 1, "end": True},
        {"type": "Book", "period": "2025-03-01", "records": 1, "end": None},
        {"type": "Book", "period": "2025-05-01", "records": 1, "end": None},
        {"type": "Book", "period": "2025-06-01", "records": 1, "end": True},
        {"type": "Medication", "period": "2025-04-01", "records": 1, "end": None},
        {"type": "Medication", "period": "2025-05-01", "records": 0, "end": None},
        {"type": "Medication", "period": "2025-06-01", "records": 0, "end": True},
        {"type": "Trip", "period": "2025-03-01", "records": 1, "end": None},
        {"type": "Trip", "period": "2025-05-01", "records": 1, "end": None},
        {"type": "Trip", "period": "2025-06-01", "records": 1, "end": True},
    ]
    assert encoding(spec, "opacity") == {
        "condition": {"test": "datum.end", "value": 0},
        "value": 1,
    }
    # Each line's last value is what the fold says now.
    last = {r["type"]: r["records"] for r in values(spec)}
    assert last == {t: len(wb.state.all(t)) for t in ("Allergy", "Book", "Medication", "Trip")}


def test_records_over_time_by_week_for_one_type(wb: Workbench) -> None:
    spec = records_over_time(wb, freq="week", types=["Trip"]).to_dict()
    # Two trips added in the first week (the update adds none), Paris retracted in the fourth.
    assert values(spec) == [
        {"type": "Trip", "period": "2025-03-03", "records": 2, "end": False},
        {"type": "Trip", "period": "2025-03-24", "records": 1, "end": False},
        {"type": "Trip", "period": "2025-05-05", "records": 1, "end": False},
        {"type": "Trip", "period": "2025-05-12", "records": 1, "end": True},  # the week's close
    ]


def test_alerts_timeline_bars_from_raised_to_cleared(wb: Workbench) -> None:
    chart = alerts_timeline(wb)
    assert isinstance(chart, alt.LayerChart)
    spec = chart.to_dict()
    bars, ticks, points, arrows = spec["layer"]
    assert bars["mark"]["type"] == "bar"
    assert ticks["mark"]["type"] == "tick" and ticks["transform"] == [{"filter": "datum.instant"}]
    assert bars["encoding"]["x"]["field"] == "start"
    assert bars["encoding"]["x2"]["field"] == "edge"
    assert arrows["mark"]["shape"] == "triangle-right"
    assert arrows["transform"] == [{"filter": "datum.open"}]
    assert points["mark"]["type"] == "point"
    assert points["transform"] == [{"filter": "(datum.state === 'updated')"}]
    shared = spec.get("encoding") or bars["encoding"]
    assert shared["y"]["field"] == "label" and shared["y"]["axis"]["labelLimit"] == 200
    assert shared["color"]["field"] == "severity"
    # The legend names the severities drawn (no "info" here), each in its own colour.
    assert shared["color"]["scale"] == {
        "domain": ["critical", "warning"],
        "range": [SEVERITY_COLORS["critical"], SEVERITY_COLORS["warning"]],
    }
    assert {"message", "why_cleared"} <= {t["field"] for t in shared["tooltip"]}

    book = next(a.id for a in wb.alerts() if a.rule == "late_books")
    drug = next(e.payload["id"] for e in wb.alert_history() if e.payload["rule"].startswith("drug"))
    rows = [
        {k: r[k] for k in ("id", "state", "severity", "start", "end", "standing")}
        for r in values(spec)
    ]
    # Cleared bars end at their clear; the standing one runs past the clock to the right edge.
    assert [(r["edge"], r["until"]) for r in values(spec)] == [
        ("2025-04-15T10:00:00Z", "2025-04-15 10:00"),
        ("2025-05-06T10:00:00Z", "2025-05-06 10:00"),
        ("2025-05-08T12:24:00Z", "standing: not cleared"),
    ]
    assert bars["encoding"]["x"]["scale"]["domain"] == [
        "2025-03-25T10:00:00Z",
        "2025-05-08T12:24:00Z",
    ]
    assert rows == [
        # the late book: a warning until it turned critical, standing to the log's clock
        {
            "id": book,
            "state": "raised",
            "severity": "warning",
            "start": "2025-03-25T10:00:00Z",
            "end": "2025-04-15T10:00:00Z",
            "standing": False,
        },
        {
            "id": drug,
            "state": "raised",
            "severity": "critical",
            "start": "2025-04-09T10:00:00Z",
            "end": "2025-05-06T10:00:00Z",
            "standing": False,
        },
        {
            "id": book,
            "state": "updated",
            "severity": "critical",
            "start": "2025-04-15T10:00:00Z",
            "end": "2025-05-06T10:00:00Z",
            "standing": True,
        },
    ]
    # Rows are labelled by rule and records, not by the alert's internal id: whole in the
    # tooltip's "alert", cut in the middle on the axis when long (its records' end kept).
    labels = {r["id"]: r["alert"] for r in values(spec)}
    assert labels == {
        book: "late_books: Book dune",
        drug: "drug_allergy_cross_reactivity: Allergy pen, Medication amox",
    }
    shown = {r["id"]: r["label"] for r in values(spec)}
    assert shown[book] == "late_books: Book dune"
    assert shown[drug].startswith("drug_allergy") and shown[drug].endswith("Medication amox")
    why = {(r["id"], r["state"]): r["why_cleared"] for r in values(spec)}
    assert why[(drug, "raised")] == "a record it was about was retracted: Medication 'amox'"
    assert why[(book, "raised")] == "" and not any(r["instant"] for r in values(spec))
    messages = {r["id"]: r["message"] for r in values(spec)}
    assert "amoxicillin" in messages[drug] and "penicillin" in messages[drug]
    assert [r["message"] for r in values(spec) if r["id"] == book] == [
        "Dune is 3 days late",
        "Dune is 10 days late",
    ]


def test_an_alert_raised_at_the_last_moment_is_drawn(tmp_path: Path) -> None:
    """An alert raised by the log's last event and standing is a bar to the right edge with an
    arrowhead, not a 1-pixel sliver; two alerts of one rule about the same records get rows of
    their own."""

    @rule(watch=["Book"], severity="info", category="library")
    def book_notes(user: UserView) -> Iterator[Finding]:
        for b in user.all("Book"):
            yield Finding(f"{b.title}: read it", [b], about="read")
            yield Finding(f"{b.title}: lend it", [b], about="lend")

    with Workbench(tmp_path / "m.duckdb", user="maya", rules=[book_notes]) as later:
        later.ingest([fact("2025-03-25T10:00:00", "add", "Book", "dune", title="Dune")])
        rows = values(alerts_timeline(later).to_dict())
    assert sorted(r["label"] for r in rows) == [
        "book_notes: Book dune",
        "book_notes: Book dune (2)",
    ]
    assert all(r["start"] == r["end"] and r["standing"] and r["open"] for r in rows)
    assert not any(r["instant"] for r in rows)  # a bar, not a tick
    assert {(r["edge"], r["until"]) for r in rows} == {
        ("2025-03-25T10:01:00Z", "standing: not cleared")  # a minute on: a visible bar
    }


def test_count_axes_step_by_whole_numbers(wb: Workbench) -> None:
    assert encoding(result_chart([1, 2, 2, 3.5]).to_dict(), "y")["axis"] == COUNT_AXIS
    assert encoding(result_chart({"Japan": 2, "Peru": 1}).to_dict(), "x")["axis"] == COUNT_AXIS
    assert "axis" not in encoding(result_chart({"Japan": 2.5, "Peru": 1}).to_dict(), "x")
    by_year = result_chart({2024: {"run": 3}, 2025: {"run": 5}}).to_dict()
    assert encoding(by_year, "y")["axis"] == COUNT_AXIS


def test_more_types_than_colours_share_one_line(tmp_path: Path) -> None:
    """Past 20 types the types with the fewest records are one line, so no colour repeats."""
    many = [
        fact(f"2025-03-{1 + i:02d}T10:00:00", "add", f"Type{i:02d}", f"k{j}", n=j)
        for i in range(22)
        for j in range(22 - i)
    ]
    later = fact("2025-04-02T10:00:00", "add", "Type21", "k9", n=9)
    with Workbench(tmp_path / "m.duckdb", user="maya", rules=[]) as bench:
        bench.ingest([*many, later])
        rows = values(records_over_time(bench).to_dict())
    assert len({r["type"] for r in rows}) == 20
    # Types 19, 20, 21 hold 3, 2, 1 records in March; in April Type21 gains one.
    grouped = [
        (r["period"], r["records"]) for r in rows if r["type"] == "3 other types" and not r["end"]
    ]
    assert grouped == [("2025-03-01", 3 + 2 + 1), ("2025-04-01", 3 + 2 + 2)]
    assert not {"Type19", "Type20", "Type21"} & {r["type"] for r in rows}


def test_an_alert_of_a_rule_not_in_force_is_not_called_standing(tmp_path: Path) -> None:
    path = tmp_path / "m.duckdb"
    with Workbench(path, user="maya", rules=[late_books]) as first:
        first.ingest(EVENTS)  # the late book stands when this session ends
    with Workbench(path, user="maya", rules=[]) as later:
        (row,) = [
            {k: r[k] for k in ("state", "standing", "rule_in_force")}
            for r in values(alerts_timeline(later).to_dict())
        ]
    assert row == {"state": "raised", "standing": False, "rule_in_force": False}
    with Workbench(path, user="maya", rules=[late_books]) as again:
        (row,) = values(alerts_timeline(again).to_dict())
    assert row["standing"] and row["rule_in_force"]


def test_charts_of_an_empty_user(wb: Workbench, tmp_path: Path) -> None:
    with Workbench(tmp_path / "empty.duckdb", user="nobody") as empty:
        for chart in (events_over_time(empty), records_over_time(empty), alerts_timeline(empty)):
            assert values(chart.to_dict()) == []


# -- what-ifs -----------------------------------------------------------------------------------

SCRIPT = "<script>alert('x')</script>"


def layers(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A layered spec's layers by mark type."""
    return {layer["mark"]["type"]: layer for layer in spec["layer"]}


def test_whatif_timeline_draws_both_runs_and_the_insertion(wb: Workbench, tmp_path: Path) -> None:
    # Had amoxicillin been prescribed in mid-March, the allergy logged on 2 April would have
    # raised an alert about it then, which nothing in the log would ever clear.
    what = wb.whatif(
        [fact("2025-03-15T00:00:00", "add", "Medication", "early", name=f"amoxicillin {SCRIPT}")],
        as_of="2025-03-15T00:00:00",
        expressions=[],
    )
    chart = whatif_timeline(what)
    assert isinstance(chart, alt.LayerChart)
    spec = chart.to_dict()
    by_mark = layers(spec)
    assert set(by_mark) == {"bar", "tick", "rule", "text"}
    bars = by_mark["bar"]
    rows = values(spec)
    assert {r["run"] for r in rows} == {"real", "what-if"}
    shared = bars["encoding"]
    assert shared["x"]["field"] == "start" and shared["x2"]["field"] == "end"
    assert shared["color"]["field"] == "run" and shared["yOffset"]["field"] == "run"
    assert shared["color"]["scale"]["domain"] == ["real", "what-if"]
    assert shared["opacity"]["field"] == "severity"
    # The legend lists the severities drawn only (an unused one was drawn greyed).
    assert shared["opacity"]["scale"]["domain"] == ["critical", "warning"]
    assert {r["severity"] for r in rows} == {"critical", "warning"}
    assert shared["y"]["field"] == "label" and shared["y"]["axis"]["labelLimit"] == 200

    # The real run is the log as it happened; the what-if has all of it and one alert more.
    real = {(r["label"], r["start"], r["end"]) for r in rows if r["run"] == "real"}
    hypothetical = {(r["label"], r["start"], r["end"]) for r in rows if r["run"] == "what-if"}
    assert real and real < hypothetical
    (extra,) = [r for r in rows if r["run"] == "what-if" and SCRIPT in r["message"]]
    assert extra["rule"] == "drug_allergy_cross_reactivity" and extra["severity"] == "critical"
    assert extra["start"] == "2025-04-02T10:00:00Z"
    # Still standing at the end of the log: the bar runs on to the log's last moment.
    assert extra["standing"] and extra["end"] == max(r["end"] for r in rows)
    assert extra["end"] == "2025-05-06T10:00:00Z"
    assert extra["alert"] == "drug_allergy_cross_reactivity: Allergy pen, Medication early"
    # Given the log's clock (a widget passes wb.state.now), it runs on to that.
    later = values(whatif_timeline(what, until=datetime(2025, 6, 1)).to_dict())
    assert {r["end"] for r in later if r["standing"]} == {"2025-06-01T00:00:00Z"}

    rule = by_mark["rule"]
    (inserted,) = spec["datasets"][rule["data"]["name"]]
    assert inserted == {"as_of": "2025-03-15T00:00:00Z", "text": "what-if inserted here"}
    assert rule["encoding"]["x"]["field"] == "as_of"
    assert by_mark["text"]["encoding"]["text"]["field"] == "text"

    # Drawn offline, the hostile message is text in the picture, never markup.
    svg = save_chart(chart, tmp_path / "whatif.svg").read_text()
    assert svg.startswith("<svg") and "what-if inserted here" in svg
    assert "<script" not in svg


def test_whatif_timeline_labels_are_data(wb: Workbench) -> None:
    """Rule and message are values in the rows, never field names or expressions."""
    what = wb.whatif(
        [
            fact(
                "2025-03-15T00:00:00",
                "add",
                "Medication",
                'x"]; datum.y',
                name='amoxicillin {{datum.start}} "]\n',
            )
        ],
        as_of="2025-03-15",
        expressions=[],
    )
    spec = whatif_timeline(what).to_dict()
    text = str(spec["layer"])
    assert "datum.start}}" not in text and 'x"]' not in text  # only in the datasets
    rows = values(spec)
    assert any('x"]; datum.y' in r["alert"] for r in rows)
    assert any('{{datum.start}} "]' in r["message"] for r in rows)
    alt.LayerChart.from_dict(spec)  # still a valid Vega-Lite spec


def test_a_whatif_over_the_current_state_has_no_timeline(wb: Workbench) -> None:
    what = wb.whatif([fact("2025-05-07", "add", "Book", "emma", title="Emma")], expressions=[])
    with pytest.raises(QueryError, match=r"no alert timeline: give it a date"):
        whatif_timeline(what)


# -- query results ---------------------------------------------------------------------------


def test_a_dict_of_label_to_number_is_bars_in_the_given_order() -> None:
    spec = result_chart({"Japan": 3, "France": 1, "Peru": 2}, title="Trips").to_dict()
    assert spec["mark"]["type"] == "bar"
    assert spec["title"]["text"] == "Trips"
    assert encoding(spec, "y") | {"axis": None} == {
        "field": "label",
        "type": "nominal",
        "sort": None,
        "title": None,  # a dict's keys and numbers have no names: no "label", "value"
        "axis": None,
    }
    assert encoding(spec, "x")["field"] == "value" and encoding(spec, "x")["title"] is None
    assert values(spec) == [
        {"label": "Japan", "value": 3},
        {"label": "France", "value": 1},
        {"label": "Peru", "value": 2},
    ]


def test_pairs_and_counters_are_bars_most_common_first() -> None:
    pairs = Counter("abracadabra").most_common(3)
    assert values(result_chart(pairs).to_dict()) == [
        {"label": "a", "value": 5},
        {"label": "b", "value": 2},
        {"label": "r", "value": 2},
    ]
    counter = values(result_chart(Counter({"x": 1, "y": 4})).to_dict())
    assert counter == [{"label": "y", "value": 4}, {"label": "x", "value": 1}]
    tuples = values(result_chart({("Japan", "Tokyo"): 2.5}).to_dict())
    assert tuples == [{"label": "Japan / Tokyo", "value": 2.5}]


YEARS = ["2023-01-01", "2024-01-01", "2025-01-01"]
MONTHS = ["2024-12-01", "2025-01-01", "2025-02-01", "2025-03-01"]
# Three months of days: a tick every other Monday, each labelled with its date.
MONDAYS = ["2024-12-02", "2024-12-16", "2024-12-30", "2025-01-13", "2025-01-27", "2025-02-10"]
MONDAYS += ["2025-02-24"]


@pytest.mark.parametrize(
    ("value", "dates", "fmt", "ticks"),
    [
        ({2025: 3, 2023: 1, 2024: 2}, YEARS, "%Y", YEARS),
        ({"2025": 3, "2023": 1, "2024": 2}, YEARS, "%Y", YEARS),
        (
            {(2025, 3): 3, (2024, 12): 1, (2025, 1): 2},
            ["2024-12-01", "2025-01-01", "2025-03-01"],
            "%b %Y",
            MONTHS,
        ),
        (
            {"2025-03": 3, "2024-12": 1, "2025-01": 2},
            ["2024-12-01", "2025-01-01", "2025-03-01"],
            "%b %Y",
            MONTHS,
        ),
        (
            {date(2025, 3, 2): 3, date(2024, 12, 1): 1, date(2025, 1, 5): 2},
            ["2024-12-01", "2025-01-05", "2025-03-02"],
            "%-d %b %Y",
            MONDAYS,
        ),
        (  # times three months apart: dates, no times of day
            [
                (datetime(2025, 3, 2, 10), 3),
                (datetime(2024, 12, 1, 8, 30), 1),
                (datetime(2025, 1, 5), 2),
            ],
            ["2024-12-01T08:30:00Z", "2025-01-05T00:00:00Z", "2025-03-02T10:00:00Z"],
            "%-d %b %Y",
            MONDAYS,
        ),
    ],
)
def test_a_dict_of_times_is_a_sorted_line(
    value: Any, dates: list[str], fmt: str, ticks: list[str]
) -> None:
    spec = result_chart(value).to_dict()
    assert spec["mark"] == {"type": "line", "point": True}
    assert encoding(spec, "x")["type"] == "temporal"
    assert encoding(spec, "x")["axis"]["format"] == fmt
    assert tick_days(encoding(spec, "x")["axis"]) == ticks
    # Room at both ends, so the first and last points are drawn whole.
    assert encoding(spec, "x")["scale"]["padding"] > 0
    assert encoding(spec, "x")["title"] is None and encoding(spec, "y")["title"] is None
    assert values(spec) == [{"label": d, "value": v} for d, v in zip(dates, [1, 2, 3], strict=True)]


def test_a_list_of_numbers_is_a_histogram() -> None:
    spec = result_chart([1, 2, 2, 3.5, 10]).to_dict()
    assert spec["mark"]["type"] == "bar"
    assert encoding(spec, "x")["field"] == "value"
    assert encoding(spec, "x")["bin"] == {"maxbins": 30}
    assert encoding(spec, "y")["aggregate"] == "count"
    assert values(spec) == [{"value": v} for v in [1, 2, 2, 3.5, 10]]


def test_nested_dicts_are_grouped_bars_or_lines() -> None:
    bars = result_chart({"2024": {"Japan": 1, "Peru": 2}, "2025": {"Japan": 3}}).to_dict()
    assert bars["mark"]["type"] == "bar"
    assert encoding(bars, "x")["field"] == "x"
    assert encoding(bars, "xOffset")["field"] == "group"
    assert encoding(bars, "color")["field"] == "group"
    assert values(bars) == [
        {"group": "2024", "x": "Japan", "value": 1},
        {"group": "2024", "x": "Peru", "value": 2},
        {"group": "2025", "x": "Japan", "value": 3},
    ]
    # Keys and numbers have no names: no axis or legend titled "x", "value" or "group".
    assert [encoding(bars, c)["title"] for c in ("x", "y", "color")] == [None, None, None]
    lines = result_chart({"run": {"2025-02": 5, "2025-01": 4}, "swim": {"2025-01": 1}}).to_dict()
    assert lines["mark"]["type"] == "line"
    assert [encoding(lines, c)["title"] for c in ("x", "y", "color")] == [None, None, None]
    # Room before the first point and after the last: neither drawn half off the plot.
    assert encoding(lines, "x")["scale"] == {"type": "utc", "padding": 12}
    assert encoding(lines, "x")["axis"]["format"] == "%b %Y"
    assert encoding(lines, "x")["type"] == "temporal"
    assert encoding(lines, "color")["field"] == "group"
    assert values(lines) == [
        {"group": "run", "x": "2025-01-01", "value": 4},
        {"group": "run", "x": "2025-02-01", "value": 5},
        {"group": "swim", "x": "2025-01-01", "value": 1},
    ]


def test_results_from_eval_and_sql_chart(wb: Workbench) -> None:
    counted = wb.eval("Counter(t.destination for t in user.history(Trip))")
    # Counter order survives eval: Tokyo's two versions come first, then retracted Paris.
    assert values(result_chart(counted).to_dict()) == [
        {"label": "Tokyo", "value": 2},
        {"label": "Paris", "value": 1},
    ]
    spec = result_chart(wb.sql("SELECT title, late_days FROM Book")).to_dict()
    # The columns name the axes; the fields are always label and value (a column named
    # "a.b" would be read as a path).
    assert encoding(spec, "y")["field"] == "label" and encoding(spec, "y")["title"] == "title"
    assert encoding(spec, "x")["field"] == "value" and encoding(spec, "x")["title"] == "late_days"
    assert values(spec) == [{"label": "Dune", "value": 10}]
    # DuckDB answers DECIMAL for literals like 1.5; charts get plain floats.
    decimals = result_chart(wb.sql("SELECT title, late_days * 1.5 AS fine FROM Book"))
    assert values(decimals.to_dict()) == [{"label": "Dune", "value": 15.0}]
    assert values(result_chart(wb.sql("SELECT 1.25 AS x").rows[0]).to_dict()) == [{"value": 1.25}]


@pytest.mark.parametrize(
    ("value", "what"),
    [
        ("hello", "a str"),
        (42, "an int"),
        ([{"a": 1}], "a list"),
        ({"a": "x"}, "a dict"),
        ({"a": True}, "a dict"),
        ({}, "an empty value"),
        ([], "an empty value"),
        ({"g": {"a": 1}, "h": 2}, "a dict"),
    ],
)
def test_an_unchartable_value_is_refused_in_one_line(value: Any, what: str) -> None:
    with pytest.raises(QueryError) as err:
        result_chart(value)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"cannot chart {what}: chart a dict of label → number")
    assert "a list of numbers (a histogram)" in message
    assert "a dict of group → {x: number}" in message


def test_a_sql_result_of_three_columns_is_refused(wb: Workbench) -> None:
    with pytest.raises(QueryError, match=r"cannot chart a SQL result with columns \['key', "):
        result_chart(wb.sql("SELECT key, title, late_days FROM Book"))


# -- display and files -----------------------------------------------------------------------


def test_save_chart_writes_svg_png_and_offline_html(wb: Workbench, tmp_path: Path) -> None:
    chart = events_over_time(wb)
    svg = save_chart(chart, tmp_path / "events.svg")
    assert svg.read_text().startswith("<svg")
    png = save_chart(alerts_timeline(wb), tmp_path / "alerts.png")
    assert png.read_bytes().startswith(b"\x89PNG")
    html = save_chart(records_over_time(wb), tmp_path / "records.html").read_text()
    assert "cdn.jsdelivr" not in html
    assert not re.search(r"<script[^>]*\bsrc=", html)
    assert "vegaEmbed" in html
    with pytest.raises(
        QueryError, match=r"cannot save a chart as 'c.pdf': use .svg, .png or .html"
    ):
        save_chart(chart, tmp_path / "c.pdf")


def test_enable_offline_switches_to_the_bundled_jupyter_renderer() -> None:
    before = alt.renderers.active
    try:
        assert enable_offline() == before
        assert alt.renderers.active == "jupyter"
        assert alt.renderers.options == {"offline": True}
        assert enable_offline() == "jupyter"
    finally:
        alt.renderers.enable(before)
