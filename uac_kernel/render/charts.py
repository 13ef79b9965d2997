"""Altair charts of a user's log, state and alerts, and of aggregate query results.

A thin face: every chart's data comes from the engine — SQL over the store's event log,
aggregated in DuckDB so a chart of a million events embeds a few hundred rows — or from a value
a query returned. Functions return ``altair`` charts and never display them.

Offline display (nothing here reaches a CDN):

- JupyterLab / Notebook: call :func:`enable_offline` once; it switches Altair to the ``jupyter``
  renderer with the Vega JavaScript bundled by vl-convert. (Altair's default renderer loads Vega
  from a CDN, and the ``mimetype`` renderer emits Vega-Lite 6, which JupyterLab 4.6 cannot draw.)
- marimo: wrap a chart as ``mo.ui.altair_chart(chart)``; no renderer is needed.
- Files: :func:`save_chart` writes ``.svg``/``.png`` through vl-convert and ``.html`` with the
  JavaScript inlined; atomically, and never over a store (``uac_kernel.core.outputs``).

>>> wb = uac.open("memory.duckdb", user="maya")          # doctest: +SKIP
>>> events_over_time(wb, freq="month")                  # doctest: +SKIP
>>> result_chart(wb.eval("Counter(t.country for t in user.all(Trip))"))  # doctest: +SKIP
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import altair as alt

from uac_kernel.core.display import shorten, show
from uac_kernel.core.errors import QueryError
from uac_kernel.core.outputs import CHART_KINDS, Output
from uac_kernel.render.chart_fit import (
    CATEGORY_WIDTH,
    LABEL_PX,
    LEGEND_LABEL_PX,
    LINE_POINTS,
    PLOT_WIDTH,
    chart_text,
    label_axis,
    legend,
    row_labels,
    series_channels,
)
from uac_kernel.render.chart_fit import title as _title
from uac_kernel.render.chart_time import time_axis
from uac_kernel.sql.view import SqlResult

if TYPE_CHECKING:
    from uac_kernel.engine.whatif import WhatIf
    from uac_kernel.fleet.sql import FleetSummary
    from uac_kernel.workbench import Workbench

__all__ = [
    "FREQUENCIES",
    "SEVERITY_COLORS",
    "alerts_timeline",
    "enable_offline",
    "events_over_time",
    "fleet_alerts_chart",
    "fleet_charts",
    "fleet_events_chart",
    "records_over_time",
    "result_chart",
    "save_chart",
    "whatif_timeline",
]

# freq -> the interval one period spans (DuckDB's date_trunc names the period).
FREQUENCIES: dict[str, str] = {
    "day": "1 day",
    "week": "7 days",
    "month": "1 month",
    "quarter": "3 months",
    "year": "1 year",
}
SEVERITY_COLORS: dict[str, str] = {"critical": "#d62728", "warning": "#ff7f0e", "info": "#1f77b4"}

# Sized to fit a notebook's output area, labels and legend included (render/chart_fit.py).
_WIDTH = PLOT_WIDTH
_HEIGHT = 300
# The log's timestamps are naive UTC; a UTC scale keeps axes from shifting by the viewer's zone.
_UTC = alt.Scale(type="utc")
_SHAPES = (
    "a dict of label → number (bars), a list of (label, number) pairs such as "
    "Counter.most_common() (bars), a dict of date/year/month → number (a line), "
    "a list of numbers (a histogram), a dict of group → {x: number} (grouped bars or lines), "
    "or a two-column SQL result"
)


def _data(rows: list[dict[str, Any]]) -> dict[str, Any]:
    # A plain dict, not ``alt.Data``: Altair validates ``alt.Data`` row by row against the JSON
    # schema (seconds for a few thousand rows); a dict goes to the spec's top-level ``datasets``.
    return {"values": rows}


def _present(scale: Mapping[str, Any], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The part of a severity's ``scale`` the rows use: a legend names only severities drawn
    (an unused one was drawn greyed), each keeping its own colour or opacity."""
    used = {r["severity"] for r in rows}
    return {k: v for k, v in scale.items() if k in used} or dict(scale)


def _severity_scale(rows: list[dict[str, Any]]) -> alt.Scale:
    present = _present(SEVERITY_COLORS, rows)
    return alt.Scale(domain=list(present), range=list(present.values()))


def _period(freq: str) -> str:
    if freq not in FREQUENCIES:
        raise QueryError(f"freq {freq!r} is not one of {', '.join(FREQUENCIES)}")
    return freq


def _rows(wb: Workbench, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    with wb.store.hold():  # a chart drawn from a widget holds the store only while it reads
        cur = wb.store.con.cursor()
        try:
            cur.execute(sql, params)
            names = [d[0] for d in cur.description or ()]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        finally:
            cur.close()


# A count's axis: whole-number ticks ("d"), at least 1 apart, never 0.1 steps for a few events.
_COUNT_AXIS = alt.Axis(format="d", tickMinStep=1)


# -- the log ---------------------------------------------------------------------------------


def events_over_time(
    wb: Workbench, freq: str = "week", *, kinds: Sequence[str] | None = None
) -> alt.Chart:
    """Stacked bars: the user's events per period (``day`` … ``year``), one colour per kind.

    Counted and stacked in DuckDB, so the chart holds one row per (period, kind): each bar
    spans its period (``start`` to ``end``; weeks start on Monday) and its kind's slice of the
    stack (``bottom`` to ``top``; kinds stacked alphabetically). ``kinds`` keeps only those
    kinds (``utterance``, ``fact``, ``schema``, ``alert``, ...).
    """
    part = _period(freq)
    where = "user_id = ?"
    params: list[Any] = [part, wb.user]
    if kinds is not None:
        where += " AND kind IN (SELECT unnest(?))"
        params.append(list(kinds))
    rows = _rows(
        wb,
        f"""
        SELECT strftime(period, '%Y-%m-%d') AS start,
               strftime(period + CAST(? AS INTERVAL), '%Y-%m-%d') AS "end",
               kind, events,
               CAST(sum(events) OVER (PARTITION BY period ORDER BY kind) - events AS BIGINT)
                   AS bottom,
               CAST(sum(events) OVER (PARTITION BY period ORDER BY kind) AS BIGINT) AS top
        FROM (
            SELECT date_trunc(?, ts) AS period, kind, count(*) AS events
            FROM events WHERE {where}
            GROUP BY ALL
        )
        ORDER BY period, kind
        """,
        [FREQUENCIES[part], *params],
    )
    # Ticks on whole periods (weeks on Mondays, as DuckDB starts them), labelled with dates.
    period_axis = time_axis(
        [r["start"] for r in rows] + [r["end"] for r in rows], width=_WIDTH, period=part
    )
    return (
        alt.Chart(_data(rows), title=_title(f"Events of {wb.user} per {part}"))
        .mark_bar(stroke="white", strokeWidth=0.5)
        .encode(
            # Ranged in both directions: a period wide, its kind's slice high, gaps kept.
            x=alt.X("start:T", title=part.capitalize(), scale=_UTC, axis=period_axis),
            x2="end:T",
            y=alt.Y("bottom:Q", title="Events", axis=_COUNT_AXIS),
            y2="top:Q",
            color=alt.Color("kind:N", title="Kind", legend=legend(columns=6)),
            tooltip=[
                alt.Tooltip("start:T", title=f"{part} from", formatType="utc"),
                alt.Tooltip("kind:N", title="kind"),
                alt.Tooltip("events:Q", title="events"),
            ],
        )
        .properties(width=_WIDTH, height=_HEIGHT)
    )


# 20 distinct colours: a line per type up to 20 types; past that the types with the fewest
# records share one line ("N other types"), so no two lines share a colour.
_TYPE_SCHEME: Literal["tableau20"] = "tableau20"
_TYPE_COLOURS = 20


def _group_types(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` (type, period, records) with, past ``_TYPE_COLOURS`` types, the types of the
    smallest peaks summed into one line, each carried forward from its last change."""
    peak: dict[str, int] = {}
    for r in rows:
        peak[r["type"]] = max(peak.get(r["type"], 0), r["records"])
    if len(peak) <= _TYPE_COLOURS:
        return rows
    ranked = sorted(peak, key=lambda t: (-peak[t], t))
    kept, others = set(ranked[: _TYPE_COLOURS - 1]), set(ranked[_TYPE_COLOURS - 1 :])
    label = f"{len(others)} other types"
    changes: dict[str, dict[str, int]] = {}
    for r in rows:
        if r["type"] in others:
            changes.setdefault(r["period"], {})[r["type"]] = r["records"]
    now: dict[str, int] = {}
    grouped = []
    for period in sorted(changes):
        now.update(changes[period])
        grouped.append({"type": label, "period": period, "records": sum(now.values())})
    return [r for r in rows if r["type"] in kept] + grouped


def _printable_types(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for r in rows:
        r["type"] = chart_text(r["type"], LEGEND_LABEL_PX)
    return rows


def records_over_time(
    wb: Workbench, freq: str = "month", *, types: Sequence[str] | None = None
) -> alt.Chart:
    """Lines: current records of each type at the end of each period.

    Derived from the fact events in DuckDB (``add`` +1, ``retract`` −1, summed per period and
    accumulated per type), so it never folds the log. A line holds its value until the type
    next changes and runs on to the log's last period. ``types`` keeps only those types.
    """
    part = _period(freq)
    only, chosen = (
        ("type IN (SELECT unnest(?))", [list(types)]) if types is not None else ("true", [])
    )
    rows = _rows(
        wb,
        f"""
        WITH deltas AS (
            SELECT type, period, sum(CASE op WHEN 'add' THEN 1 ELSE -1 END) AS delta
            FROM (
                -- one JSON parse per event for both paths
                SELECT date_trunc(?, ts) AS period, payload ->> ['$.type', '$.op'] AS j,
                       j[1] AS type, j[2] AS op
                FROM events WHERE user_id = ? AND kind = 'fact'
            )
            WHERE op IN ('add', 'retract') AND {only}
            GROUP BY ALL
        ),
        counts AS MATERIALIZED (
            SELECT type, period, sum(delta) OVER (PARTITION BY type ORDER BY period) AS records
            FROM deltas
        ),
        clock AS (SELECT date_trunc(?, max(ts)) AS period FROM events WHERE user_id = ?),
        tails AS (
            SELECT c.type, clock.period, arg_max(c.records, c.period) AS records
            FROM counts c, clock
            GROUP BY c.type, clock.period
            HAVING max(c.period) < clock.period
        )
        SELECT type, strftime(period, '%Y-%m-%d') AS period, CAST(records AS BIGINT) AS records
        FROM (SELECT * FROM counts UNION ALL SELECT * FROM tails)
        ORDER BY type, period
        """,
        [part, wb.user, *chosen, part, wb.user],
    )
    rows = _ends(_group_types(_printable_types(rows)), part)
    # Lines are drawn in the order of their rows, the first widest: the domain in that order.
    types = list(dict.fromkeys(r["type"] for r in rows))
    return (
        alt.Chart(_data(rows), title=_title(f"Current records of {wb.user} by type"))
        .mark_line(interpolate="step-after", point=LINE_POINTS)
        .encode(
            x=alt.X(
                "period:T",
                title=part.capitalize(),
                scale=_UTC,
                axis=time_axis([r["period"] for r in rows], width=_WIDTH, period=part),
            ),
            y=alt.Y("records:Q", title="Current records", axis=_COUNT_AXIS),
            # Two types of the same counts draw one line over the other: each its own dash,
            # width and point shape, so both stay visible.
            **series_channels("type", types, title="Type", scale=alt.Scale(scheme=_TYPE_SCHEME)),
            # A line's end (the last period's close) is no count of its own: no point there.
            opacity=alt.condition(alt.datum.end, alt.value(0), alt.value(1)),
            tooltip=[
                alt.Tooltip("type:N", title="type"),
                alt.Tooltip("period:T", title=f"{part} from", formatType="utc"),
                alt.Tooltip("records:Q", title="records"),
            ],
        )
        .properties(width=_WIDTH, height=_HEIGHT)
    )


def _ends(rows: list[dict[str, Any]], part: str) -> list[dict[str, Any]]:
    """``rows`` (by type, then period) with each type's line carried to the close of the last
    period, so that its last value is a step as wide as the others, not only a rise at the
    right edge; the added rows are ``end``."""
    if not rows:
        return rows
    last = max(date.fromisoformat(r["period"]) for r in rows)
    try:
        if part in ("month", "quarter", "year"):
            months = {"month": 1, "quarter": 3, "year": 12}[part] + last.year * 12 + last.month
            close = date((months - 1) // 12, (months - 1) % 12 + 1, 1)
        else:
            close = last + timedelta(days={"week": 7}.get(part, 1))
    except (OverflowError, ValueError):  # the last period closes after 9999-12-31
        close = date.max
    out: list[dict[str, Any]] = []
    for i, r in enumerate(rows):
        out.append({**r, "end": False})
        if i + 1 == len(rows) or rows[i + 1]["type"] != r["type"]:
            out.append({**r, "period": close.isoformat(), "end": True})
    return out


def _alert_labels(rows: list[dict[str, Any]]) -> None:
    """Label each alert's row by its rule and the records it is about (``deadline_approaching:
    Purchase lamp``), cut to fit so that labels stay distinct (:func:`row_labels`); two alerts
    alike get ``(2)``, ``(3)``, ... The whole label is ``alert``, for the tooltip."""
    wholes: dict[str, str] = {}
    for r in rows:
        if r["id"] not in wholes:
            evidence = json.loads(r["evidence"] or "[]")
            about = ", ".join(f"{e.get('type', '?')} {e.get('key', '?')}" for e in evidence)
            wholes[r["id"]] = f"{r['rule']}: {about}" if about else str(r["rule"])
    labels = _numbered(wholes)
    for r in rows:
        r["label"], r["alert"] = labels[r["id"]]
        r.pop("evidence", None)


def _numbered(wholes: dict[str, str]) -> dict[str, tuple[str, str]]:
    """Each id's row label and whole text (escaped); a label already taken gets ``(2)``,
    ``(3)``, ..."""
    shown = row_labels(list(wholes.values()), _LABEL_ROOM)
    taken: dict[str, int] = {}
    labels = {}
    for key, whole in wholes.items():
        text = shown[whole]
        taken[text] = taken.get(text, 0) + 1
        label = f"{text} ({taken[text]})" if taken[text] > 1 else text
        labels[key] = label, chart_text(whole)
    return labels


_LABEL_ROOM = LABEL_PX - 24  # px of a row label before its " (2)"


def alerts_timeline(wb: Workbench) -> alt.LayerChart:
    """A row per alert, labelled by its rule and the records it is about: a bar from raised to
    cleared (or to the log's clock while it stands), coloured by severity, with a point where its
    severity was updated; the tooltip has the message and why it cleared.

    One bar segment per ``raised`` or ``updated`` event of the alert log, ending at the alert's
    next event, so a severity change shows as a change of colour along the bar. A segment of no
    length (raised at the log's last moment, or cleared the moment it was raised) is drawn as a
    tick, which a bar of no width would not show.
    """
    clock = wb.state.now
    rows = _rows(
        wb,
        """
        WITH a AS (
            SELECT seq, ts, payload ->> '$.id' AS id, payload ->> '$.state' AS state,
                   payload ->> '$.rule' AS rule, payload ->> '$.severity' AS severity,
                   payload ->> '$.category' AS category, payload ->> '$.message' AS message,
                   payload ->> '$.reason' AS reason, CAST(payload -> '$.evidence' AS VARCHAR)
                   AS evidence, payload ->> '$.rule' IN (SELECT unnest(?)) AS rule_in_force
            FROM events WHERE user_id = ? AND kind = 'alert'
        ),
        -- An alert of a rule this session does not run is not evaluated: its bar runs on to
        -- the clock (the log never cleared it), but it is not called standing.
        spans AS (
            SELECT *, lead(ts) OVER (PARTITION BY id ORDER BY seq) AS until,
                   lead(reason) OVER (PARTITION BY id ORDER BY seq) AS why_cleared
            FROM a
        )
        SELECT id, rule, severity, category, message, state, evidence,
               coalesce(why_cleared, '') AS why_cleared,
               strftime(ts, '%Y-%m-%dT%H:%M:%SZ') AS start,
               strftime(coalesce(until, greatest(?, ts)), '%Y-%m-%dT%H:%M:%SZ') AS "end",
               until IS NOT NULL AND until = ts AS instant, until IS NULL AS open,
               coalesce(strftime(until, '%Y-%m-%d %H:%M'), '') AS cleared,
               until IS NULL AND rule_in_force AS standing, rule_in_force
        FROM spans
        WHERE state IN ('raised', 'updated')
        ORDER BY seq
        """,
        [list(wb.runner.rules), wb.user, clock],
    )
    _alert_labels(rows)
    right = _open_ends(rows)
    for r in rows:  # drawn in tooltips, and in the SVG's aria labels: no control characters
        for k in ("rule", "category", "message", "why_cleared"):
            r[k] = chart_text(r[k]) if r[k] is not None else None
    base = alt.Chart(
        _data(rows),
        title=_title(
            f"Alerts of {wb.user}",
            "bars: raised → cleared, or to the edge with an arrowhead while not cleared",
        ),
    ).encode(
        # No axis title; labels cut at LABEL_PX with "…", whole in the tooltip.
        y=alt.Y("label:N", title=None, sort=None, axis=label_axis()),
        color=alt.Color(
            "severity:N", title="Severity", scale=_severity_scale(rows), legend=legend(columns=3)
        ),
        tooltip=[
            alt.Tooltip("alert:N", title="alert"),
            alt.Tooltip("message:N", title="message"),
            alt.Tooltip("rule:N", title="rule"),
            alt.Tooltip("severity:N", title="severity"),
            alt.Tooltip("state:N", title="since"),
            alt.Tooltip("start:T", title="from", format="%Y-%m-%d %H:%M", formatType="utc"),
            alt.Tooltip("until:N", title="until"),
            alt.Tooltip("why_cleared:N", title="why it cleared"),
            alt.Tooltip("standing:N", title="standing"),
            alt.Tooltip("rule_in_force:N", title="rule in force"),
        ],
    )
    axis = time_axis([r["start"] for r in rows] + [r["end"] for r in rows], width=CATEGORY_WIDTH)
    # Open bars end at the right edge of the plot: the scale stops there, not at a nicer date.
    scale = alt.Scale(type="utc", nice=False, domain=right) if right else _UTC
    bars = base.mark_bar(height={"band": 0.6}).encode(
        x=alt.X("start:T", title="Time", scale=scale, axis=axis), x2="edge:T"
    )
    instants = (
        base.mark_tick(thickness=3, bandSize=0.6)
        .encode(x=alt.X("start:T", scale=scale))
        .transform_filter(alt.datum.instant)
    )
    updates = (
        base.mark_point(filled=True, size=70, shape="diamond", stroke="black", strokeWidth=0.5)
        .encode(x=alt.X("start:T", scale=scale))
        .transform_filter(alt.datum.state == "updated")
    )
    # An open bar ends in an arrowhead at the right edge: it runs on, it was never cleared.
    arrows = (
        base.mark_point(filled=True, size=80, shape="triangle-right", opacity=1, xOffset=-5)
        .encode(x=alt.X("edge:T", scale=scale), color=alt.value("#222"))
        .transform_filter(alt.datum.open)
    )
    return alt.LayerChart(
        layer=[bars, instants, updates, arrows], width=CATEGORY_WIDTH, height=alt.Step(22)
    )


# Past the log's clock, an open alert's bar runs on this share of the time drawn (at least a
# minute): a visible stretch to the right edge even for one raised by the newest event.
_OPEN_RUN = 0.05


def _open_ends(rows: list[dict[str, Any]]) -> list[str]:
    """Set each row's drawn end, ``edge``: its clear, or for an open alert the plot's right
    edge, a little past the clock; and ``until``, the tooltip's words for its end. The time
    domain ``[first, right edge]`` (empty without rows)."""
    if not rows:
        return []
    first = min(datetime.fromisoformat(r["start"]) for r in rows)
    last = max(datetime.fromisoformat(r["end"]) for r in rows)
    edge = last + max((last - first) * _OPEN_RUN, timedelta(minutes=1))
    right = edge.strftime("%Y-%m-%dT%H:%M:%SZ")
    for r in rows:
        open_ = r.pop("open")
        r["edge"] = right if open_ else r["end"]
        cleared = r.pop("cleared")
        if not open_:
            r["until"] = cleared
        elif r["standing"]:
            r["until"] = "standing: not cleared"
        else:
            r["until"] = "not cleared (its rule is not in force)"
        r["open"] = bool(open_)
    return [first.strftime("%Y-%m-%dT%H:%M:%SZ"), right]


# -- what-ifs --------------------------------------------------------------------------------

RUNS = ("real", "what-if")
_RUN_COLORS = ("#7f7f7f", "#9467bd")  # the log as it is in grey, the what-if in purple
# Severity as opacity (colour is the run's): the more severe, the more solid the bar.
_SEVERITY_OPACITY = {"critical": 1.0, "warning": 0.7, "info": 0.4}
_INSERTED = "what-if inserted here"
# Room on both sides, so the insertion's rule is not drawn on the axis when it comes first.
_PADDED = alt.Scale(type="utc", padding=16)


def _utc_text(when: datetime) -> str:
    """ISO text Vega parses as UTC: an aware time converted, a naive one taken as UTC (as the
    log stores times)."""
    if when.tzinfo is not None:
        when = when.astimezone(UTC).replace(tzinfo=None)
    return when.isoformat(timespec="seconds") + "Z"


def _naive(when: datetime) -> datetime:
    return when if when.tzinfo is None else when.astimezone(UTC).replace(tzinfo=None)


def whatif_timeline(w: WhatIf, *, until: datetime | None = None) -> alt.LayerChart:
    """The alerts of a past what-if against the real ones: a row per alert (its rule and the
    records it is about), a bar from raised to cleared for each run side by side (the real run in grey, the
    what-if in purple; the more severe, the more solid), and a rule where the hypothetical
    events were inserted.

    "real" is the log replayed with the rules in force now. A span still standing at the end of
    the log runs on to the log's last moment (the latest start or end of any span, or the
    insertion, or ``until`` if later: by default the log's clock where the replay ended); one of no length
    is drawn as a tick. A what-if over the current state has no timeline: ``QueryError`` says
    to give it a date.
    """
    if w.as_of is None:
        raise QueryError(
            "a what-if over the current state has no alert timeline: give it a date "
            "(as_of=..., --as-of DATE) to insert its events in the past"
        )
    as_of = _naive(w.as_of)
    until = until or w.log_end
    moments = [as_of] if until is None else [as_of, _naive(until)]
    for s in w.timeline:
        moments.append(_naive(s.start))
        if s.end is not None:
            moments.append(_naive(s.end))
    last = max(moments)
    labels = _span_labels(w)
    # Rows in the order their alerts first stood, by a number: the labels (data) stay out of
    # the spec's encodings. At most _WHATIF_ROWS of them: a chart of thousands is unreadable
    # and takes vl-convert tens of seconds (the title says how many are left out).
    order = {label: i for i, (label, _) in enumerate(dict.fromkeys(labels.values()))}
    drawn = [s for s in w.timeline if order[labels[s.id][0]] < _WHATIF_ROWS]
    rows = []
    shown = [as_of]
    for s in drawn:
        start = _naive(s.start)
        end = last if s.end is None else _naive(s.end)
        shown += [start, end]
        rows.append(
            {
                "label": labels[s.id][0],
                "alert": labels[s.id][1],
                "row": order[labels[s.id][0]],
                "run": s.run,
                "rule": chart_text(s.rule),
                "severity": s.severity,
                "message": chart_text(s.message),
                "start": _utc_text(start),
                "end": _utc_text(end),
                "instant": end <= start,
                "standing": s.end is None,
            }
        )
    left = len(order) - _WHATIF_ROWS
    title = _title(
        f"Alerts of {chart_text(w.user)}: real and what-if",
        f"what-if inserted at {show(as_of)} UTC; bars: raised → cleared"
        + (f"; the first {_WHATIF_ROWS} alerts of {len(order)} shown" if left > 0 else ""),
    )
    y = alt.Y(
        "label:N",
        title=None,
        sort=alt.EncodingSortField("row", op="min"),
        axis=label_axis(),
    )
    opacity = _present(_SEVERITY_OPACITY, rows)
    base = alt.Chart(_data(rows)).encode(
        y=y,
        yOffset=alt.YOffset("run:N", sort=list(RUNS), scale=alt.Scale(domain=list(RUNS))),
        color=alt.Color(
            "run:N",
            title="Run",
            scale=alt.Scale(domain=list(RUNS), range=list(_RUN_COLORS)),
            legend=legend(columns=2),
        ),
        opacity=alt.Opacity(
            "severity:N",
            title="Severity",
            scale=alt.Scale(domain=list(opacity), range=list(opacity.values())),
            legend=legend(columns=3),
        ),
        tooltip=[
            alt.Tooltip("alert:N", title="alert"),
            alt.Tooltip("run:N", title="run"),
            alt.Tooltip("message:N", title="message"),
            alt.Tooltip("rule:N", title="rule"),
            alt.Tooltip("severity:N", title="severity"),
            alt.Tooltip("start:T", title="from", format="%Y-%m-%d %H:%M", formatType="utc"),
            alt.Tooltip("end:T", title="until", format="%Y-%m-%d %H:%M", formatType="utc"),
            alt.Tooltip("standing:N", title="standing at the end"),
        ],
    )
    # Ticks over what is drawn: the insertion and the rows' spans.
    axis = time_axis(shown, width=CATEGORY_WIDTH)
    x = alt.X("start:T", title="Time", scale=_PADDED, axis=axis)
    bars = base.mark_bar(stroke="black", strokeWidth=0.5).encode(x=x, x2="end:T")
    instants = (
        base.mark_tick(thickness=3)
        .encode(x=alt.X("start:T", scale=_PADDED))
        .transform_filter(alt.datum.instant)
    )
    inserted = alt.Chart(_data([{"as_of": _utc_text(as_of), "text": _INSERTED}]))
    rule = inserted.mark_rule(color="black", strokeDash=[4, 3], strokeWidth=1.5).encode(
        x=alt.X("as_of:T", scale=_PADDED)
    )
    note = inserted.mark_text(align="left", baseline="bottom", dx=4, dy=-4, fontSize=11).encode(
        x=alt.X("as_of:T", scale=_PADDED), y=alt.value(0), text="text:N"
    )
    return alt.LayerChart(
        layer=[bars, instants, rule, note], title=title, width=CATEGORY_WIDTH, height=alt.Step(16)
    )


def _first_seen(span: Any) -> tuple[datetime, int]:
    return _naive(span.start), RUNS.index(span.run) if span.run in RUNS else len(RUNS)


def _span_labels(w: WhatIf) -> dict[str, tuple[str, str]]:
    """A row label per alert and its whole text, as the alerts chart labels its rows: ``rule:
    Type key, ...`` of the records it rests on (of its first span, real run first), or ``rule:
    message`` if it rests on none; cut in the middle to fit; two alerts alike get ``(2)``,
    ``(3)``, ..."""
    wholes: dict[str, str] = {}
    for s in sorted(w.timeline, key=_first_seen):
        if s.id not in wholes:
            wholes[s.id] = shorten(f"{s.rule}: {', '.join(s.about) or s.message}", _WHATIF_LABEL)
    return _numbered(wholes)


_WHATIF_LABEL = 300  # characters of a row label's whole text (the tooltip's)
_WHATIF_ROWS = 200  # alerts a timeline draws at the most


# -- query results ---------------------------------------------------------------------------

_ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ][\d:.]+Z?)?")
_ISO_MONTH = re.compile(r"\d{4}-\d{2}")
_ISO_YEAR = re.compile(r"\d{4}")


def _is_number(v: object) -> bool:
    # Decimal: DuckDB's type for literals such as 1.5 and for sums of them.
    return isinstance(v, (int, float, Decimal)) and not isinstance(v, bool)


def _plain_number(v: Any) -> Any:
    return float(v) if isinstance(v, Decimal) else v


def _as_time(key: object) -> tuple[str, str] | None:
    """(ISO text Vega parses as UTC, finest unit) for a date-like key; None if it is not one."""
    if isinstance(key, datetime):
        return key.replace(tzinfo=None).isoformat() + "Z", "time"
    if isinstance(key, date):
        return key.isoformat(), "date"
    if isinstance(key, int) and not isinstance(key, bool) and 1000 <= key <= 9999:
        return f"{key:04d}-01-01", "year"
    if isinstance(key, tuple) and 2 <= len(key) <= 3 and all(_is_number(k) for k in key):
        try:
            when = date(*(int(k) for k in key), *((1,) if len(key) == 2 else ()))
        except ValueError:
            return None
        return when.isoformat(), "month" if len(key) == 2 else "date"
    if isinstance(key, str):
        if _ISO_YEAR.fullmatch(key):
            return f"{key}-01-01", "year"
        if _ISO_MONTH.fullmatch(key) and 1 <= int(key[5:]) <= 12:
            return f"{key}-01", "month"
        if _ISO_DAY.fullmatch(key):
            try:
                when = datetime.fromisoformat(key.removesuffix("Z"))
            except ValueError:
                return None
            return (when.date().isoformat(), "date") if len(key) == 10 else _as_time(when)
    return None


def _label(key: object) -> str:
    if isinstance(key, tuple):
        return " / ".join(_label(k) for k in key)
    return chart_text(key, _X_LABEL_PX)  # the least room a key gets: a grouped chart's x


_X_LABEL_PX = 120  # px of a grouped bar chart's x labels, drawn at an angle

_TIME_FORMAT = {"year": "%Y", "month": "%b %Y", "date": "%Y-%m-%d", "time": "%Y-%m-%d %H:%M"}
# The period a key of each unit stands for: its ticks fall on whole ones (a time: any).
_KEY_PERIOD = {"year": "year", "month": "month", "date": "day", "time": None}
# Room before a line's first point and after its last, so neither is drawn half off the plot.
_EDGE_PX = 12


def _time_x(field: str, texts: list[str], unit: str, title: str | None = None) -> alt.X:
    axis = time_axis(texts, width=_WIDTH, period=_KEY_PERIOD[unit])
    return alt.X(
        f"{field}:T", title=title, scale=alt.Scale(type="utc", padding=_EDGE_PX), axis=axis
    )


def _time_axis(keys: Sequence[object]) -> tuple[list[str], str] | None:
    """ISO texts for keys that are all date-like, and their finest unit; else None."""
    found = [_as_time(k) for k in keys]
    if not found or any(f is None for f in found):
        return None
    units = {f[1] for f in found if f is not None}
    finest = next(u for u in ("time", "date", "month", "year") if u in units)
    return [f[0] for f in found if f is not None], finest


def _pairs(value: object) -> list[tuple[object, float]] | None:
    """``value`` as (label, number) pairs in display order, or None if it is not that shape."""
    if isinstance(value, Counter):
        value = value.most_common()
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, (list, tuple)) and all(
        isinstance(p, (list, tuple)) and len(p) == 2 for p in value
    ):
        items = [(p[0], p[1]) for p in value]
    else:
        return None
    if not items or not all(_is_number(v) for _, v in items):
        return None
    return [(k, _plain_number(v)) for k, v in items]


def _value_axis(values: Sequence[object]) -> Any:
    """Whole-number ticks when every value is a whole number (counts), else Altair's own."""
    whole = all(isinstance(v, int) and not isinstance(v, bool) for v in values)
    return _COUNT_AXIS if values and whole else alt.Undefined


def _chart(rows: list[dict[str, Any]], title: str) -> alt.Chart:
    return alt.Chart(_data(rows), title=_title(title) if title else alt.Undefined)


def _series_chart(
    items: list[tuple[object, float]], title: str, label: str = "", value: str = ""
) -> alt.Chart:
    """Bars, or a line of time keys; axes titled by a SQL result's columns, untitled for a
    value's keys and numbers (which have no names)."""
    # The fields are always "label" and "value"; a SQL result's column names are only titles
    # (a name such as "a.b" or "x:N" would be read as a path or a type).
    label, value = (shorten(chart_text(t, LABEL_PX), 40) for t in (label, value))
    x_title, y_title = label or None, value or None
    label, value = label or "key", value or "value"  # the tooltip's names
    time = _time_axis([k for k, _ in items])
    if time is not None:
        texts, unit = time
        fmt = _TIME_FORMAT[unit]
        rows = sorted(
            ({"label": t, "value": v} for t, (_, v) in zip(texts, items, strict=True)),
            key=lambda r: str(r["label"]),
        )
        return (
            _chart(rows, title)
            .mark_line(point=True)
            .encode(
                x=_time_x("label", texts, unit, x_title),
                y=alt.Y(
                    "value:Q",
                    title=y_title,
                    axis=_value_axis([v for _, v in items]),
                ),
                tooltip=[
                    alt.Tooltip("label:T", title=label, format=fmt, formatType="utc"),
                    alt.Tooltip("value:Q", title=value),
                ],
            )
            .properties(width=_WIDTH, height=_HEIGHT)
        )
    rows = [{"label": _label(k), "value": v} for k, v in items]
    return (
        _chart(rows, title)
        .mark_bar()
        .encode(
            y=alt.Y("label:N", title=x_title, sort=None, axis=label_axis()),
            x=alt.X("value:Q", title=y_title, axis=_value_axis([v for _, v in items])),
            tooltip=[alt.Tooltip("label:N", title=label), alt.Tooltip("value:Q", title=value)],
        )
        .properties(width=CATEGORY_WIDTH, height=alt.Step(20))
    )


def _histogram(numbers: Sequence[float], title: str) -> alt.Chart:
    rows = [{"value": _plain_number(v)} for v in numbers]
    return (
        _chart(rows, title)
        .mark_bar()
        .encode(
            x=alt.X("value:Q", bin=alt.Bin(maxbins=30), title=None),
            y=alt.Y("count():Q", title="count", axis=_COUNT_AXIS),
            tooltip=[
                alt.Tooltip("value:Q", bin=alt.Bin(maxbins=30), title="value"),
                alt.Tooltip("count():Q", title="count"),
            ],
        )
        .properties(width=_WIDTH, height=_HEIGHT)
    )


def _grouped_chart(groups: dict[object, list[tuple[object, float]]], title: str) -> alt.Chart:
    inner = [k for items in groups.values() for k, _ in items]
    time = _time_axis(inner)
    if time is not None:
        texts, unit = time
        fmt = _TIME_FORMAT[unit]
        it = iter(texts)
        # Lines are drawn in the order of their rows, the first widest: rows in the given order.
        domain = list(dict.fromkeys(_label(g) for g in groups))
        rank = {g: i for i, g in enumerate(domain)}
        rows = sorted(
            (
                {"group": _label(g), "x": next(it), "value": v}
                for g, items in groups.items()
                for _, v in items
            ),
            key=lambda r: (rank[str(r["group"])], r["x"]),
        )
        return (
            _chart(rows, title)
            .mark_line(point=LINE_POINTS)
            .encode(
                x=_time_x("x", texts, unit),
                y=alt.Y(
                    "value:Q",
                    title=None,
                    axis=_value_axis([r["value"] for r in rows]),
                ),
                # Groups of equal values draw one line over another: each its own dash, width
                # and point shape, so all stay visible.
                **series_channels("group", domain, title=None),
                tooltip=[
                    alt.Tooltip("group:N", title="group"),
                    alt.Tooltip("x:T", title="key", format=fmt, formatType="utc"),
                    alt.Tooltip("value:Q", title="value"),
                ],
            )
            .properties(width=_WIDTH, height=_HEIGHT)
        )
    rows = [
        {"group": _label(g), "x": _label(k), "value": v}
        for g, items in groups.items()
        for k, v in items
    ]
    return (
        _chart(rows, title)
        .mark_bar()
        .encode(
            # No axis or legend titles: a value's keys and numbers have no names.
            x=alt.X("x:N", title=None, sort=None, axis=label_axis(_X_LABEL_PX, labelAngle=-45)),
            xOffset=alt.XOffset("group:N", sort=None),
            y=alt.Y("value:Q", title=None, axis=_value_axis([r["value"] for r in rows])),
            color=alt.Color("group:N", title=None, sort=None, legend=legend()),
            tooltip=[
                alt.Tooltip("group:N", title="group"),
                alt.Tooltip("x:N", title="key"),
                alt.Tooltip("value:Q", title="value"),
            ],
        )
        .properties(width=_WIDTH, height=_HEIGHT)
    )


def result_chart(value: object, title: str = "") -> alt.Chart:
    """Draw an aggregate result, as ``wb.eval`` or ``wb.sql`` returned it.

    - dict of label → number, or (label, number) pairs (``Counter.most_common()``): bars, in
      the given order (a ``Counter`` most common first);
    - the same with date, datetime, year (``2025``, ``"2025"``), month (``"2025-03"``,
      ``(2025, 3)``) or day keys: a line, sorted by time;
    - list of numbers: a histogram;
    - dict of group → {x: number}: grouped bars, or one line per group when x is a time;
    - a ``SqlResult`` of two columns (label, number): as the pairs above, axes named by the
      columns.

    Anything else raises ``QueryError`` naming the shapes that can be charted.
    """
    if isinstance(value, SqlResult):
        if len(value.columns) == 2:
            items = _pairs(value.rows)
            if items is not None:
                return _series_chart(items, title, *value.columns)
        raise QueryError(f"cannot chart a SQL result with columns {value.columns}: chart {_SHAPES}")
    items = _pairs(value)
    if items is not None:
        return _series_chart(items, title)
    if isinstance(value, (list, tuple)) and value and all(_is_number(v) for v in value):
        return _histogram(list(value), title)
    if isinstance(value, Mapping) and value and all(isinstance(v, Mapping) for v in value.values()):
        groups = {g: _pairs(inner) for g, inner in value.items()}
        if all(items is not None for items in groups.values()):
            return _grouped_chart({g: i for g, i in groups.items() if i is not None}, title)
    name = type(value).__name__
    what = (
        "an empty value"
        if isinstance(value, (Mapping, list, tuple)) and not value
        else f"{'an' if name[0] in 'aeiou' else 'a'} {name}"
    )
    raise QueryError(f"cannot chart {what}: chart {_SHAPES}")


# -- a fleet ---------------------------------------------------------------------------------

# Two charts side by side in a notebook's width: each about half of it, axes included.
_FLEET_WIDTH = 340
_FLEET_LABEL_PX = 130


def fleet_alerts_chart(summary: FleetSummary) -> alt.Chart:
    """A fleet directory's standing alerts per rule (bars), from ``fleet.sql.fleet_summary``."""
    rules = [
        {"rule": chart_text(r, _FLEET_LABEL_PX), "alerts": n}
        for r, n in summary.alerts_by_rule.items()
    ]
    return (
        alt.Chart(_data(rules), title=_title("Standing alerts per rule", width=_FLEET_WIDTH))
        .mark_bar()
        .encode(
            x=alt.X("alerts:Q", title="alerts", axis=_COUNT_AXIS),
            y=alt.Y("rule:N", sort="-x", title=None, axis=label_axis(_FLEET_LABEL_PX)),
            tooltip=["rule:N", "alerts:Q"],
        )
        .properties(width=_FLEET_WIDTH - _FLEET_LABEL_PX, height=_HEIGHT)
    )


def fleet_events_chart(summary: FleetSummary) -> alt.Chart:
    """How many events a fleet directory's users have (a histogram of users)."""
    users = [{"user_id": chart_text(u), "events": n} for u, n in summary.events_per_user]
    return (
        alt.Chart(
            _data(users),
            title=_title("Events per user", f"{summary.users:,} users", width=_FLEET_WIDTH),
        )
        .mark_bar()
        .encode(
            x=alt.X("events:Q", bin=alt.Bin(maxbins=30), title="events"),
            y=alt.Y("count():Q", title="users", axis=_COUNT_AXIS),
            tooltip=[
                alt.Tooltip("events:Q", bin=alt.Bin(maxbins=30), title="events"),
                alt.Tooltip("count():Q", title="users"),
            ],
        )
        .properties(width=_FLEET_WIDTH - 60, height=_HEIGHT)
    )


def fleet_charts(summary: FleetSummary) -> alt.HConcatChart:
    """The fleet's alerts per rule beside its events per user."""
    return alt.hconcat(fleet_alerts_chart(summary), fleet_events_chart(summary))


# -- display and files -----------------------------------------------------------------------


def enable_offline() -> str:
    """Draw Altair charts in Jupyter without network access; returns the previous renderer name.

    Switches to the ``jupyter`` renderer with the Vega JavaScript bundled by vl-convert (the
    default renderer fetches Vega from a CDN). Restore with ``alt.renderers.enable(previous)``.
    In marimo, call nothing: wrap a chart as ``mo.ui.altair_chart(chart)``.

    The bundle is built once and kept in the user's cache directory (``$UAC_CACHE_DIR``), so a
    new kernel's first chart does not rebuild it; see ``uac_kernel.render.vega_bundle``.
    """
    from uac_kernel.render.vega_bundle import load_offline_bundle

    previous = alt.renderers.active
    load_offline_bundle()
    alt.renderers.enable("jupyter", offline=True)
    return previous


class _ScriptSafeJSON(json.JSONEncoder):
    """JSON that may stand inside an HTML <script>: ``<``, ``>`` and ``&`` as \\u escapes
    (they occur only inside strings, where the escape reads back the same)."""

    def encode(self, o: Any) -> str:
        text = super().encode(o)
        return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def save_chart(chart: alt.TopLevelMixin, path: str | Path | Output, *, force: bool = False) -> Path:
    """Write ``chart`` to ``.svg``/``.png`` (rendered by vl-convert, no browser) or ``.html``
    (Vega's JavaScript inlined, so the file opens offline); returns the path.

    The file is replaced atomically, and only if it is a chart of that kind or ``force`` is
    true; never a store (``uac_kernel.core.outputs``). A face passes its own checked ``Output``."""
    out = path if isinstance(path, Output) else None
    target = Path(path.path if isinstance(path, Output) else path)
    suffix = target.suffix.lower()
    if suffix not in CHART_KINDS:
        raise QueryError(f"cannot save a chart as {target.name!r}: use .svg, .png or .html")
    if out is None:
        out = Output(target, CHART_KINDS[suffix], force=force, flag="force=True")
    with out.replacing() as tmp:
        if suffix == ".html":
            # The spec is embedded in a <script>: "</script>" in a label would end it there.
            chart.save(str(tmp), format="html", inline=True, json_kwds={"cls": _ScriptSafeJSON})
        else:
            chart.save(str(tmp), format="svg" if suffix == ".svg" else "png")
    return target
