"""Time axes that read as dates, whatever the span of the data.

Vega's own time ticks label each tick by the finest unit it changes in: a week of alerts read
"12 PM" under every tick, with no date, and weekly bars had ticks every 4 days. Here the ticks
are chosen from the data's span, in Python, on whole periods — minutes, hours, days, weeks
(on Mondays, as DuckDB's ``date_trunc`` starts them), months or years, a step of a few at a
time so their labels do not overlap — and every label shows the date (``5 Jan 2026``,
``Mar 2025``, ``2025``), with the time of day only when the ticks are hours or minutes apart.

A chart of periods (bars a week wide) gives its ``period``: its ticks then fall on whole
periods only (weeks on Mondays, quarters on January, April, July and October). Points that all
fall on a coarser regular period (month starts, Mondays) are ticked on that period: a line of
monthly dates has its ticks on the 1st of the month, on its points.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import altair as alt

__all__ = ["time_axis", "time_ticks"]

_YEARS = [("year", n) for n in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)]
_MONTHS = [("month", n) for n in (1, 2, 3, 6)]
_DAYS = [("day", n) for n in (1, 2, 3, 4)] + [("week", 1), ("week", 2)]
# A chart's ticks, finest first, by the period its marks stand for (None: moments): a chart of
# weeks has its ticks on Mondays, of quarters on every third month from January.
_LADDERS: dict[str | None, list[tuple[str, int]]] = {
    None: [("minute", n) for n in (1, 5, 15, 30)]
    + [("hour", n) for n in (1, 3, 6, 12)]
    + _DAYS
    + _MONTHS
    + _YEARS,
    "day": _DAYS + _MONTHS + _YEARS,
    "week": [("week", n) for n in (1, 2, 4, 8, 13, 26, 52)] + _YEARS[1:],
    "month": _MONTHS + _YEARS,
    "quarter": _MONTHS[2:] + _YEARS,
    "year": _YEARS,
}
_FORMATS = {
    "minute": "%-d %b %Y %H:%M",
    "hour": "%-d %b %Y %H:%M",
    "day": "%-d %b %Y",
    "week": "%-d %b %Y",
    "month": "%b %Y",
    "year": "%Y",
}
# px a tick takes: its label at Vega's 10 px font ("26 Sep 2026 12:00" ~ 90 px) and a gap.
_TICK_PX = {"minute": 110, "hour": 110, "day": 72, "week": 72, "month": 60, "year": 44}


def _as_datetime(when: datetime | str) -> datetime:
    """A naive UTC time: an ISO text (``Z`` or not), an aware time converted."""
    if isinstance(when, str):
        text = when
        try:
            when = datetime.fromisoformat(text.removesuffix("Z"))
        except ValueError:
            # The end of a period after 9999-12-31, as DuckDB writes it ('10000-01-03'): the
            # last time a datetime holds. Any other text is no time at all.
            if not text[:5].isdigit():
                raise
            return datetime.max
    if when.tzinfo is not None:
        when = when.astimezone(UTC).replace(tzinfo=None)
    return when


def _first(unit: str, step: int, t: datetime) -> datetime:
    """The first tick of ``unit``/``step`` at or after ``t``."""
    if unit == "minute":
        floor = t.replace(second=0, microsecond=0, minute=t.minute - t.minute % step)
        grain = timedelta(minutes=step)
    elif unit == "hour":
        floor = t.replace(minute=0, second=0, microsecond=0, hour=t.hour - t.hour % step)
        grain = timedelta(hours=step)
    elif unit in ("day", "week"):
        floor = t.replace(hour=0, minute=0, second=0, microsecond=0)
        if unit == "week":
            floor -= timedelta(days=floor.weekday())  # Monday
        grain = timedelta(days=1 if unit == "day" else 7)
    elif unit == "month":
        month = t.month - (t.month - 1) % step
        floor = datetime(t.year, month, 1)
        return floor if floor >= t else _next(unit, step, floor)
    else:
        floor = datetime(max(t.year - t.year % step, 1), 1, 1)
        return floor if floor >= t else _next(unit, step, floor)
    return floor if floor >= t else floor + grain


def _next(unit: str, step: int, t: datetime) -> datetime:
    """The tick after ``t``; ``datetime.max`` past the last a datetime can hold (9999-12-31 is
    a common "valid forever" date)."""
    try:
        return _step(unit, step, t)
    except (OverflowError, ValueError):
        return datetime.max


def _step(unit: str, step: int, t: datetime) -> datetime:
    if unit == "month":
        months = t.year * 12 + t.month - 1 + step
        return datetime(months // 12, months % 12 + 1, 1)
    if unit == "year":
        return datetime(t.year + step, 1, 1) if t.year + step <= 9999 else datetime.max
    span = {"minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}[unit]
    return t + timedelta(seconds=span * step)


def time_ticks(
    first: datetime, last: datetime, *, width: int, period: str | None = None
) -> tuple[list[datetime], str]:
    """The ticks between ``first`` and ``last`` (naive UTC) on a plot ``width`` px wide, and
    the format of their labels: the finest whole periods whose labels fit side by side."""
    first, last = min(first, last), max(first, last)
    ladder = _LADDERS.get(period, _LADDERS[None])
    fitting: tuple[list[datetime], str] | None = None
    for unit, step in ladder:
        room = max(width // _TICK_PX[unit], 2)
        ticks: list[datetime] = []
        try:
            t = _first(unit, step, first)
        except (OverflowError, ValueError):  # no whole period starts before datetime.max
            continue
        while t <= last and len(ticks) <= room and (not ticks or t > ticks[-1]):
            ticks.append(t)
            t = _next(unit, step, t)
        if 2 <= len(ticks) <= room:
            return ticks, _FORMATS[unit]
        if len(ticks) == 1 and fitting is None:
            fitting = ticks, _FORMATS[unit]
    # A span within one period (one instant; a day of a chart of days): one tick.
    return fitting or ([first], _FORMATS[ladder[0][0]])


# Periods, finest first: points that all fall on a coarser one than asked are ticked on it.
_COARSE: list[str | None] = [None, "day", "week", "month", "quarter", "year"]


def _period_of(moments: list[datetime]) -> str | None:
    """The coarsest regular period every one of ``moments`` starts (year starts, month starts,
    Mondays, midnights), so ticks fall on the points: monthly dates ticked on the 1st, not on
    the Mondays between them. None for moments at other times of day."""
    if any(m.time() != datetime.min.time() for m in moments):
        return None
    if all(m.month == 1 and m.day == 1 for m in moments):
        return "year"
    if all(m.day == 1 for m in moments):
        return "month"
    return "week" if all(m.weekday() == 0 for m in moments) else "day"


def _ms(t: datetime) -> int:
    return int(t.replace(tzinfo=UTC).timestamp() * 1000)


def time_axis(
    times: Iterable[datetime | str], *, width: int, period: str | None = None, **kw: Any
) -> alt.Axis:
    """A time axis over ``times`` (the data's, ISO texts as the rows hold them, naive UTC):
    ticks on whole periods chosen from their span (:func:`time_ticks`), labelled with dates;
    ``kw`` goes to ``alt.Axis``. For a scale of ``type="utc"``."""
    moments = [_as_datetime(t) for t in times if t is not None and t != ""]
    if not moments:
        return alt.Axis(format=_FORMATS["day"], **kw)
    period = max(period, _period_of(moments), key=_COARSE.index)
    ticks, fmt = time_ticks(min(moments), max(moments), width=width, period=period)
    return alt.Axis(format=fmt, values=[_ms(t) for t in ticks], **kw)
