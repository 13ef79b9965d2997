"""Time axes read as dates: ticks on whole periods chosen from the data's span, every label a
date (with the time of day only when ticks are hours apart), for every chart over time."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest
from helpers.charts import late_books, svg, texts, tick_days
from helpers.events import fact

from uac_kernel import Workbench
from uac_kernel.render import charts
from uac_kernel.render.chart_time import time_axis, time_ticks

DAY = re.compile(r"\d{1,2} [A-Z][a-z]{2} \d{4}")  # 20 Jan 2026
DAY_TIME = re.compile(r"\d{1,2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}")  # 20 Jan 2026 09:00


@pytest.mark.parametrize(
    ("first", "last", "period", "fmt", "ticks"),
    [
        (  # a few hours: the time of day, with its date
            datetime(2026, 1, 20, 8, 27),
            datetime(2026, 1, 20, 14, 5),
            None,
            "%-d %b %Y %H:%M",
            ["2026-01-20T09:00:00", "2026-01-20T12:00:00"],
        ),
        (  # twelve days: dates, no times
            datetime(2026, 1, 20, 9),
            datetime(2026, 2, 1, 12),
            None,
            "%-d %b %Y",
            ["2026-01-21", "2026-01-23", "2026-01-25", "2026-01-27", "2026-01-29", "2026-01-31"],
        ),
        (  # weekly bars: every tick a Monday, where DuckDB starts a week
            datetime(2026, 1, 5),
            datetime(2026, 2, 2),
            "week",
            "%-d %b %Y",
            ["2026-01-05", "2026-01-12", "2026-01-19", "2026-01-26", "2026-02-02"],
        ),
        (  # two years: months, every third one
            datetime(2024, 1, 1),
            datetime(2025, 12, 31),
            None,
            "%b %Y",
            [f"{y}-{m:02d}-01" for y in (2024, 2025) for m in (1, 4, 7, 10)],
        ),
        (  # years
            datetime(2000, 1, 1),
            datetime(2025, 1, 1),
            "year",
            "%Y",
            ["2000-01-01", "2005-01-01", "2010-01-01", "2015-01-01", "2020-01-01", "2025-01-01"],
        ),
        (  # one instant: that moment, to the minute
            datetime(2024, 1, 1, 8, 27),
            datetime(2024, 1, 1, 8, 27),
            None,
            "%-d %b %Y %H:%M",
            ["2024-01-01T08:27:00"],
        ),
    ],
)
def test_ticks_fall_on_whole_periods_chosen_from_the_span(
    first: datetime, last: datetime, period: str | None, fmt: str, ticks: list[str]
) -> None:
    found, found_fmt = time_ticks(first, last, width=500, period=period)
    assert found_fmt == fmt
    assert [t.isoformat() if t.time() != datetime.min.time() else str(t.date()) for t in found] == (
        ticks
    )


def test_weekly_ticks_over_two_years_stay_on_mondays_and_fit() -> None:
    found, fmt = time_ticks(datetime(2024, 1, 1), datetime(2026, 1, 5), width=640, period="week")
    assert fmt == "%-d %b %Y" and 2 <= len(found) <= 640 // 72
    assert all(t.weekday() == 0 and t.time() == datetime.min.time() for t in found)


def test_an_axis_of_no_data_has_a_date_format_and_no_ticks() -> None:
    axis = time_axis([], width=500).to_dict()
    assert axis == {"format": "%-d %b %Y"}


@pytest.fixture(scope="module")
def week_of_alerts(tmp_path_factory: pytest.TempPathFactory) -> Workbench:
    """A week of a late book's alert, told day by day: raised, made critical, cleared."""
    bench = Workbench(tmp_path_factory.mktemp("week") / "u.duckdb", user="me", rules=[late_books])
    bench.ingest([fact("2026-01-20T09:00:00", "add", "Book", "dune", title="Dune", late_days=3)])
    bench.ingest([fact("2026-01-23T09:00:00", "update", "Book", "dune", late_days=9)])
    bench.ingest([fact("2026-01-25T09:00:00", "add", "Book", "emma", title="Emma", late_days=2)])
    bench.ingest([fact("2026-01-27T09:00:00", "update", "Book", "dune", late_days=0)])
    return bench


def test_a_week_of_alerts_is_ticked_by_dates(week_of_alerts: Workbench) -> None:
    chart = charts.alerts_timeline(week_of_alerts)
    axis = chart.to_dict()["layer"][0]["encoding"]["x"]["axis"]
    assert axis["format"] == "%-d %b %Y"
    drawn = texts(svg(chart))
    days = [t for t in drawn if DAY.fullmatch(t)]
    # Vega's own ticks read "12 PM" under every tick, with no date.
    assert days == ["21 Jan 2026", "23 Jan 2026", "25 Jan 2026", "27 Jan 2026"]
    assert not any(re.search(r"\b[AP]M\b", t) for t in drawn)


def test_every_chart_over_time_labels_its_ticks_with_dates(
    week_of_alerts: Workbench, tmp_path: Path
) -> None:
    for chart in (
        charts.events_over_time(week_of_alerts, "day"),
        charts.records_over_time(week_of_alerts, "day"),
        charts.result_chart({date(2026, 1, 20) + timedelta(days=i): i for i in range(8)}),
    ):
        drawn = texts(svg(chart))
        assert [t for t in drawn if DAY.fullmatch(t)], drawn
        assert not any(re.search(r"\b[AP]M\b|^(Mon|Tue|Wed|Thu|Fri|Sat|Sun) \d", t) for t in drawn)
    what = week_of_alerts.whatif(
        [fact("2026-01-21T00:00:00", "add", "Book", "emma", title="Emma", late_days=12)],
        as_of="2026-01-21",
        expressions=[],
    )
    drawn = texts(svg(charts.whatif_timeline(what)))
    assert [t for t in drawn if DAY.fullmatch(t)], drawn


def test_weekly_events_are_ticked_on_their_mondays(week_of_alerts: Workbench) -> None:
    spec = charts.events_over_time(week_of_alerts, "week").to_dict()
    ticks = tick_days(spec["encoding"]["x"]["axis"])
    # The bars are the weeks from Monday 19 and 26 January: a tick at each start and the end,
    # not Vega's every 4 days.
    assert ticks == ["2026-01-19", "2026-01-26", "2026-02-02"]


def test_hours_of_results_show_the_time_of_day_with_its_date() -> None:
    value = {datetime(2026, 1, 20, 8) + timedelta(hours=h): h for h in range(6)}
    drawn = texts(svg(charts.result_chart(value)))
    assert [t for t in drawn if DAY_TIME.fullmatch(t)], drawn


def test_a_grouped_result_of_monthly_dates_is_ticked_on_its_points() -> None:
    # The newcomer's {group: {date(2026, m, 1): v}}: weekly ticks on Mondays (5 Jan, 12 Jan …)
    # missed every point and left 1 Mar unlabelled.
    value = {g: {date(2026, m, 1): m * (i + 1) for m in (1, 2, 3)} for i, g in enumerate("ab")}
    chart = charts.result_chart(value)
    assert tick_days(chart.to_dict()["encoding"]["x"]["axis"]) == [
        "2026-01-01",
        "2026-02-01",
        "2026-03-01",
    ]
    assert {"Jan 2026", "Feb 2026", "Mar 2026"} <= set(texts(svg(chart)))


@pytest.mark.parametrize(
    ("points", "ticks"),
    [
        ([date(2026, 1, 5), date(2026, 1, 19), date(2026, 2, 2)], ["2026-01-05", "2026-01-12"]),
        ([date(2020, 1, 1), date(2022, 1, 1), date(2023, 1, 1)], ["2020-01-01", "2021-01-01"]),
    ],
)
def test_points_on_mondays_or_year_starts_are_ticked_on_that_period(
    points: list[date], ticks: list[str]
) -> None:
    axis = time_axis([d.isoformat() for d in points], width=640)
    assert tick_days(axis.to_dict())[:2] == ticks
