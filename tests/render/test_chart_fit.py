"""Every chart uac draws fits a notebook's output area, whatever its labels say.

Each chart kind is drawn to SVG by vl-convert (which measures text with real fonts) with long
and hostile labels. Vega's autosize grows the SVG to hold every mark, label, title and legend,
so "the SVG is at most NOTEBOOK_WIDTH wide" is what JupyterLab needs to show it uncut (before
issue 29 the alerts timeline was 953 px and the what-if timeline 1005 px, their legends cut at
the right edge). Labels are cut with "…" and whole in the data, for the tooltip; the legends'
real words ("critical", "Severity", "typed state + code") are drawn whole.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from html import unescape
from pathlib import Path
from typing import Any

import altair as alt
import pytest
from helpers.charts import late_books, size, svg, texts
from helpers.events import fact

from uac_kernel import Workbench
from uac_kernel.bench.aggregate._questions import Question
from uac_kernel.bench.aggregate._results import AggregateResult
from uac_kernel.fleet.sql import FleetSummary
from uac_kernel.render import charts
from uac_kernel.render.chart_fit import LABEL_PX, NOTEBOOK_WIDTH, chart_text, label_axis, row_labels
from uac_kernel.rules.library import drug_allergy_cross_reactivity

HOSTILE = [
    "a label far longer than any axis could show whole, " * 3,
    "quotes \" and ' and </text><script>alert(1)</script> & &amp;",
    "עברית מימין לשמאל \u202eRTL override\u202c mixed with English words and more words",
    "new\nline\r\nand\ttab and \x1b[31mescape\x00 nul",
    "emoji 🚀🔥👩‍👩‍👧 and unicode Ωмир漢字 " * 3,
    "{{datum.x}} ${x} %s {0} \\u0041 datum['label']",
]


EVENTS = [
    {"kind": "utterance", "ts": "2025-03-03T09:00:00", "speaker": "user", "text": "Off"},
    fact("2025-03-04T08:00:00", "add", "Trip", "tokyo", destination="Tokyo", start="2025-03-04"),
    fact("2025-03-25T10:00:00", "add", "Book", "dune", title="Dune", late_days=3),
    fact("2025-04-02T10:00:00", "add", "Allergy", "pen", substance="penicillin"),
    fact("2025-04-09T10:00:00", "add", "Medication", "amox", name="amoxicillin"),
    fact("2025-04-15T10:00:00", "update", "Book", "dune", late_days=10),
    fact("2025-04-20T10:00:00", "update", "Book", "dune", late_days=0),
]


def assert_fits(chart: alt.TopLevelMixin) -> list[str]:
    drawn = svg(chart)
    width, _ = size(drawn)
    assert width <= NOTEBOOK_WIDTH, f"{width} px wide, more than a notebook's {NOTEBOOK_WIDTH}"
    assert "<script" not in drawn  # text in the picture, never markup
    # No control character anywhere (text, aria labels): an SVG may not hold one, and
    # vl-convert's PNG fails on it.
    assert not re.search(r"[\x00-\x08\x0b\x0c\x0e-\x1f]", unescape(drawn))
    shown = texts(drawn)
    return shown


@pytest.fixture(scope="module")
def wb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workbench]:
    bench = Workbench(
        tmp_path_factory.mktemp("fit") / "maya.duckdb",
        user="maya",
        rules=[drug_allergy_cross_reactivity, late_books],
    )
    for ev in EVENTS:
        bench.ingest([ev])
    for i, label in enumerate(HOSTILE):  # each a late book: an alert labelled by its key
        bench.ingest(
            [fact(f"2025-05-1{i}T10:00:00", "add", "Book", label, title=label, late_days=9)]
        )
    yield bench
    bench.close()


def test_the_log_charts_fit(wb: Workbench) -> None:
    for freq in ("day", "week", "month"):
        assert_fits(charts.events_over_time(wb, freq))
        assert_fits(charts.records_over_time(wb, freq))


def test_the_alerts_timeline_fits_and_its_legend_is_whole(wb: Workbench) -> None:
    chart = charts.alerts_timeline(wb)
    shown = assert_fits(chart)
    # The legend names the severities drawn, whole; none drawn ("info") is not listed.
    assert {"Severity", "critical", "warning"} <= set(shown) and "info" not in shown
    # The long labels are cut with "…" in the middle in the picture (start and end kept), and
    # whole in the tooltip's data.
    cut = [t for t in shown if t.startswith("late_books: B") and "…" in t]
    assert len(cut) == 6 and any(t.endswith("could show whole,") for t in cut)
    (rows,) = chart.to_dict()["datasets"].values()
    assert any(r["alert"] == f"late_books: Book {HOSTILE[0]}" for r in rows)


def test_the_whatif_timeline_fits(wb: Workbench) -> None:
    for label in HOSTILE:
        what = wb.whatif(
            [
                fact(
                    "2025-03-15T00:00:00", "add", "Medication", "early", name=f"amoxicillin {label}"
                )
            ],
            as_of="2025-03-15T00:00:00",
            expressions=[],
        )
        shown = assert_fits(charts.whatif_timeline(what, until=datetime(2025, 6, 1)))
        assert {"Run", "real", "what-if", "Severity", "critical"} <= set(shown)


@pytest.mark.parametrize("label", HOSTILE)
def test_result_charts_fit(label: str) -> None:
    # bars, a line by time, a histogram, grouped bars and grouped lines; the label as a key,
    # a group and the title
    assert_fits(charts.result_chart({label: 3, "short": 4, label[::-1]: 1}, title=label))
    assert_fits(charts.result_chart({"2025-01": 3, "2025-02": 4}, title=label))
    assert_fits(charts.result_chart([1, 2, 2, 3, 3, 3, 10.5], title=label))
    assert_fits(charts.result_chart({label: {label: 1, "b": 2}, "g": {label: 2, "b": 1}}))
    shown = assert_fits(
        charts.result_chart(
            {g: {"2025-01": 1, "2025-02": 2} for g in (label, "same", "also the same")}
        )
    )
    assert {"same", "also the same"} <= set(shown)  # legend labels that fit are whole


def test_a_sql_result_with_hostile_column_names_fits(wb: Workbench) -> None:
    result = wb.sql(f'SELECT title AS "{HOSTILE[5]}", late_days AS "a.b:N" FROM Book')
    chart = charts.result_chart(result)
    assert_fits(chart)
    # The columns are only titles: a name such as "a.b" would be read as a path.
    enc = chart.to_dict()["encoding"]
    assert (enc["y"]["field"], enc["x"]["field"], enc["x"]["title"]) == ("label", "value", "a.b:N")


def test_the_fleet_charts_fit() -> None:
    summary = FleetSummary(
        root="fleet",
        users=len(HOSTILE) + 2,
        events=120,
        facts=80,
        calls=0,
        tokens_in=0,
        tokens_out=0,
        alerts=9,
        alerts_by_rule={**{label: i + 1 for i, label in enumerate(HOSTILE)}, "late_books": 3},
        events_per_user=[(label, 10 * i) for i, label in enumerate(HOSTILE)],
    )
    assert_fits(charts.fleet_charts(summary))
    assert_fits(charts.fleet_alerts_chart(summary))
    assert_fits(charts.fleet_events_chart(summary))


def aggregate(reader: str, *, tokens: bool = True) -> AggregateResult:
    """A small aggregate result: typed state and full context both right at every size (their
    lines coincide at 100%), retrieval falling off."""
    sizes = (50, 200, 1000)
    questions = [
        Question(f"q{s}", f"h{s}", s, "clean", "Trip", "count", "?", "", "int", {}, "", 1)
        for s in sizes
    ]
    systems = [("typed", None), ("bm25", 10), ("embedding", 10), ("full", None)]
    rows: list[dict[str, Any]] = []
    for q in questions:
        for system, k in systems:
            correct = system in ("typed", "full") or q.size < (200 if system == "bm25" else 1000)
            n = 900 if system == "typed" else 30 * q.size if system == "full" else 400
            row = dict(question=q.id, size=q.size, variant="clean", type="Trip", pattern="count")
            row |= dict(system=system, k=k, correct=correct, prompt_tokens=n if tokens else None)
            rows.append(row)
    meta = dict(reader=reader, settings={"k": 10}, tokenizer="cl100k_base", tokens_counted=tokens)
    return AggregateResult(meta=meta, questions=questions, rows=rows)


@pytest.mark.parametrize("tokens", [True, False])
def test_the_aggregate_chart_fits_and_its_legend_is_whole(tokens: bool) -> None:
    chart = aggregate(f"reference reader (offline ceiling) {HOSTILE[0]}", tokens=tokens).chart()
    shown = assert_fits(chart)
    assert {"typed state + code", "full context", "BM25 top-10"} <= set(shown)
    assert "embedding top-10 (all-MiniLM-L6-v2)" in shown
    # The coinciding lines differ in dash and width, the first drawn (typed) widest.
    enc = chart.to_dict()["hconcat"][0]["encoding"]
    assert enc["strokeDash"]["field"] == enc["strokeWidth"]["field"] == "system"
    widths = enc["strokeWidth"]["scale"]["range"]
    assert enc["strokeWidth"]["scale"]["domain"][0] == "typed state + code"
    assert widths[0] > widths[3]


def test_save_chart_draws_a_fitting_png(wb: Workbench, tmp_path: Path) -> None:
    png = charts.save_chart(charts.alerts_timeline(wb), tmp_path / "alerts.png").read_bytes()
    width = int.from_bytes(png[16:20], "big")  # the IHDR chunk's width
    assert png.startswith(b"\x89PNG") and width <= NOTEBOOK_WIDTH


# The newcomer's pets: keys with emoji, markup, Arabic and a long common start.
TRIP = "biscuit-<script>alert(1)</script>-très-long-voyage-en-Bretagne-🐶🐾-avec-grand-mère-2026"
BILL = "vet-🐱-<b>bold</b>-2026-01-26"


def test_an_emoji_cuts_a_label_only_where_vega_could_not() -> None:
    shown = chart_text(TRIP, 120)
    # Cut before the first emoji that might not fit, not to 120 // 16 characters ("biscui…").
    assert shown == TRIP[: TRIP.index("🐶")] + "…"
    assert chart_text(BILL, 200) == BILL  # an emoji that fits stays
    assert chart_text("🐶 " * 40, 100).startswith("🐶 🐶 🐶 ")
    # With room for all of it, nothing is cut.
    assert chart_text(TRIP, 2000) == TRIP


@pytest.mark.parametrize("at", range(0, 60, 4))
def test_no_cut_splits_an_emoji_wherever_it_stands(at: int) -> None:
    # vl-convert fails on half a surrogate pair ("unexpected end of hex escape"); Vega slices
    # labels in UTF-16 units while it measures them, so it must never cut one with an emoji.
    label = "x" * at + "🐶🐾" + "y" * 60
    shown = assert_fits(charts.result_chart({label: 3, f"b{label}": 2, BILL: 1}, title=label))
    drawn = [t for t in shown if t.startswith(("x", "b", "vet", "🐶"))]
    assert len(drawn) >= 3 and all(len(t) > 10 for t in drawn)


RUNNER = "🏃\u200d♀\ufe0f"


@pytest.mark.parametrize("middle", [False, True])
@pytest.mark.parametrize("at", range(0, 24, 3))
def test_no_cut_splits_a_zwj_sequence(at: int, middle: bool) -> None:
    text = "x" * at + RUNNER * 12
    shown = chart_text(text, 100, middle=middle)
    for part in shown.split("…"):
        rest = part.lstrip("x")
        assert rest.replace(RUNNER, "") == "", part  # whole runners only


def test_a_zwj_emoji_label_is_drawn_whole(tmp_path: Path) -> None:
    chart = charts.result_chart({f"easy {RUNNER}": 3, "tempo 🚴": 2}, title=f"notes {RUNNER}")
    shown = assert_fits(chart)
    assert f"easy {RUNNER}" in shown and not any("\\u200d" in t for t in shown)
    png = charts.save_chart(chart, tmp_path / "runner.png").read_bytes()
    assert png.startswith(b"\x89PNG")


def test_labels_of_a_long_common_start_stay_distinct(tmp_path: Path) -> None:
    start = "purchase-2025-return-window-for-the-household-order-number-"
    items = ["espresso-machine", "standing-desk", "hiking-boots", "winter-coat"]
    bench = Workbench(tmp_path / "u.duckdb", user="me", rules=[late_books])
    try:
        bench.ingest(
            [
                fact(f"2025-05-0{i + 1}T10:00:00", "add", "Book", start + item, title=start + item,
                     late_days=3)
                for i, item in enumerate(items)
            ]
        )  # fmt: skip
        alerts = charts.alerts_timeline(bench)
        what = bench.whatif(
            [fact("2025-05-02T12:00:00", "add", "Book", "emma", title="Emma", late_days=1)],
            as_of="2025-05-02T12:00:00",
            expressions=[],
        )
        for chart in (alerts, charts.whatif_timeline(what, until=datetime(2025, 5, 10))):
            rows = next(r for r in chart.to_dict()["datasets"].values() if "alert" in r[0])
            labels = {r["label"] for r in rows if start in r["alert"]}
            # Cut in the middle: the start, "…", and the end that tells them apart.
            assert len(labels) == len(items), labels
            for r in (r for r in rows if start in r["alert"]):
                head, _, tail = r["label"].partition("…")
                assert head and tail and r["alert"].startswith(head) and r["alert"].endswith(tail)
            drawn = set(assert_fits(chart))
            assert labels <= drawn  # drawn as they are: Vega cut none of them further
            assert all(r["alert"].startswith("late_books: ") for r in rows)  # whole in the tooltip
    finally:
        bench.close()


def test_rows_alike_at_both_ends_are_cut_where_they_differ() -> None:
    # The newcomer's rabies constraint: one trip each, the same vaccine at the end.
    rule = "constraint_rabies_for_pet_trips: PetTrip "
    vaccine = ", PetVaccine biscuit-rabies-2024"
    trips = ["biscuit-brittany-2026", TRIP, 'biscuit-رحلة-إلى-المغرب-"quoted"-&amp;-ünïcödé']
    wholes = [rule + t + vaccine for t in trips]
    shown = row_labels(wholes, LABEL_PX - 24)
    assert len(set(shown.values())) == len(trips), shown
    assert "brittany" in shown[wholes[0]]
    rows = [{"label": label, "n": 1} for label in shown.values()]
    chart = (
        alt.Chart({"values": rows})
        .mark_bar()
        .encode(y=alt.Y("label:N", axis=label_axis()), x="n:Q")
    )
    assert set(shown.values()) <= set(assert_fits(chart))  # drawn whole: Vega cut none
