"""Time axes (``render.chart_time``) at the ends of the calendar: a chart of values dated in
the year 9999 (``9999-12-31``, the usual 'valid forever' date) draws, as it did before the
axes chose their own ticks."""

from __future__ import annotations

from datetime import date, datetime

import pytest
from helpers.charts import size, svg

from uac_kernel.render.chart_fit import NOTEBOOK_WIDTH
from uac_kernel.render.chart_time import time_ticks
from uac_kernel.render.charts import result_chart


@pytest.mark.parametrize(
    "value",
    [
        {date(9999, 12, 31): 1},
        {"9999-12-31": 5},
        {date(9999, 12, 30): 1, date(9999, 12, 31): 2},
    ],
    ids=["one-date", "iso-text", "two-days"],
)
def test_a_result_dated_in_the_last_days_of_9999_draws(value: dict[object, int]) -> None:
    """``result_chart({date(9999, 12, 31): 1})`` raised 'OverflowError: date value out of range'
    (``_next`` steps a day past datetime.max); at e1db8cf it drew a 678 px chart."""
    width, _ = size(svg(result_chart(value, "valid until")))
    assert width <= NOTEBOOK_WIDTH


@pytest.mark.parametrize(
    ("first", "last"),
    [
        (datetime(9999, 12, 31, 22), datetime(9999, 12, 31, 23, 59)),
        (datetime(9999, 6, 1), datetime(9999, 12, 31)),
        (datetime(9998, 1, 1), datetime(9999, 12, 31)),
    ],
)
@pytest.mark.parametrize("period", [None, "day", "week", "month"])
def test_ticks_of_a_span_ending_in_9999_do_not_overflow(
    first: datetime, last: datetime, period: str | None
) -> None:
    """'ValueError: year 10000 is out of range' (``_next`` of a month) or 'OverflowError: date
    value out of range' (of a day or week)."""
    ticks, _ = time_ticks(first, last, width=640, period=period)
    assert ticks and all(first <= t <= last for t in ticks)


@pytest.mark.parametrize("chart", ["events_over_time", "records_over_time"])
def test_the_log_charts_of_a_log_dated_9999_12_31_draw(chart: str) -> None:
    """The log takes events dated 9999-12-31; at e1db8cf both charts drew (679 and 678 px).
    Now events_over_time raised "ValueError: Invalid isoformat string: '10000-01-03'" and
    records_over_time 'ValueError: year 10000 is out of range'."""
    from uac_kernel import Workbench
    from uac_kernel.render import charts

    wb = Workbench(rules=[])
    wb.ingest(
        [
            {"kind": "utterance", "ts": "9999-12-31T20:00:00", "speaker": "user", "text": "hi"},
            {"kind": "fact", "ts": "9999-12-31T21:00:00", "op": "add", "type": "Note",
             "key": "a", "fields": {"x": 1}},
        ]
    )  # fmt: skip
    width, _ = size(svg(getattr(charts, chart)(wb)))
    assert width <= NOTEBOOK_WIDTH
