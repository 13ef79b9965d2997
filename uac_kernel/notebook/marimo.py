"""marimo helpers: the workbench's widgets and charts as marimo UI elements, without magics,
each tied to its command's declaration.

marimo rejects IPython's ``%`` magics, so a marimo notebook calls the same things the magics
show, as functions of an open ``Workbench``:

=================================  ==================================================
``%uac log``                       ``log_browser(wb)``
``%uac alerts``                    ``alert_inspector(wb)``
``%uac state``                     ``state_explorer(wb)``
``%uac diff A B``                  ``diff_view(wb, a, b)``
``%uac chart KIND [EXPR]``         ``chart(wb, kind, expr)``
``%uac eval EXPR``                 ``evaluate(wb, expr)`` (value and view; or ``wb.eval``)
``%uac sql``                       ``wb.sql(query)`` (a plain engine call)
``%%uac constraint [--key K]``     ``constrain(wb, text, key=K)`` (keys and view)
``%uac constrain FILE [--key K]``  ``constrain(wb, "", key=K, file=FILE)``
``%uac constraint --retract K``    ``constrain(wb, "", retract=K)``
``%uac constraints``               ``constraints_table(wb)``
``%uac fleet DIR``                 ``fleet(dir)`` (summary and charts of many users)
``%uac fleet sql DIR QUERY``       ``fleetsql.fleet_sql(dir, query)`` (an engine call)
``%%uac whatif``                   ``whatif(wb, events)`` (the report, Apply button)
=================================  ==================================================

In a static HTML export the page runs no Python, so a button or an input box there does
nothing: ``static_note(what)`` says so when the notebook runs to be exported by
``python -m uac_kernel.notebook.marimo_export`` (which passes ``-- --uac-static-export=PATH``,
read with marimo's ``mo.cli_args()``: marimo runs an export in edit mode, so
``mo.app_meta().mode`` cannot tell): ``whatif`` turns its Apply button off with that note,
and ``log_browser``, ``state_explorer`` and ``diff_view`` their filters, pagers and selects
(the widgets' shared ``readonly``).

Widgets come back wrapped in ``mo.ui.anywidget`` and charts in ``mo.ui.altair_chart``, so the
last expression of a cell draws them; nothing is fetched from the network. This face needs the
``marimo`` extra: without marimo, importing it raises :class:`~uac_kernel.core.errors.MissingExtra`,
whose one line is the install command.

>>> import uac, uac.marimo as um                                        # doctest: +SKIP
>>> wb = uac.open("memory.duckdb", user="maya")                         # doctest: +SKIP
>>> um.alert_inspector(wb)                                              # doctest: +SKIP
>>> um.chart(wb, "result", "Counter(t.country for t in user.all(Trip))")  # doctest: +SKIP
"""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from uac_kernel.commands.catalogue import COMMANDS
from uac_kernel.core.errors import QueryError, UacError
from uac_kernel.core.extras import require

if TYPE_CHECKING:
    from datetime import datetime

    import altair as alt

    from uac_kernel.workbench import Workbench

__all__ = [
    "CHART_KINDS",
    "alert_inspector",
    "chart",
    "constrain",
    "constraints_table",
    "diff_view",
    "evaluate",
    "fleet",
    "log_browser",
    "state_explorer",
    "static_note",
    "whatif",
]

STATIC_EXPORT_ARG = "uac-static-export"
"""The notebook argument (``mo.cli_args()``) that says it runs to be exported as static HTML;
its value is the notebook's path as the exporter was given it."""

CHART_KINDS = ("events", "records", "alerts", "result")
"""What :func:`chart` draws, as ``%uac chart KIND`` does."""

ChartKind = Literal["events", "records", "alerts", "result"]


_F = TypeVar("_F", bound=Callable[..., Any])


def _helper(name: str) -> Callable[[_F], _F]:
    """Tie a helper to the declaration of ``%uac name`` (``commands/catalogue.py``, whose
    ``marimo`` names it): the declared help ends its docstring, and ``tests/commands`` checks
    its keywords against the declared arguments."""
    command = COMMANDS[name]

    def tie(fn: _F) -> _F:
        fn.__doc__ = f"{(fn.__doc__ or '').rstrip()}\n\n    ``%uac {name}``: {command.help}.\n"
        fn.uac_command = command  # type: ignore[attr-defined]
        return fn

    return tie


def _marimo() -> Any:
    """marimo itself, or :class:`MissingExtra` naming the install command."""
    return require("marimo", extra="marimo", feature="uac.marimo")


_marimo()  # importing the face without its extra fails here, in one line


def static_note(what: str) -> str:
    """Why a control does nothing here, or "": in a static export (the notebook run with
    ``--uac-static-export=PATH``, as ``marimo_export`` runs it) "this is a static export: run
    `marimo edit PATH` to {what}"; in a live notebook, an app or a script, ""."""
    mo = _marimo()
    try:
        path = mo.cli_args().get(STATIC_EXPORT_ARG)
    except Exception:  # no marimo context: plain Python, where nothing is exported
        return ""
    if path is None or path is False:
        return ""
    name = str(path) if path not in ("", True) else "the notebook"
    return f"this is a static export: run `marimo edit {name}` to {what}"


@_helper("log")
def log_browser(
    wb: Workbench, *, page_size: int = 50, kind: str | None = None, **query: Any
) -> Any:
    """The log browser (``%uac log``) as ``mo.ui.anywidget``: the user's events, a page at a
    time, of one ``kind`` if given (a ``QueryError`` names the kinds if no event can be of it),
    filtered by ``query`` (``text="tokyo"``, ...); in a static export the filters and pager
    are off, with ``static_note`` beside them."""
    from uac_kernel.log.users import check_kind
    from uac_kernel.notebook.widgets import LogBrowser

    mo = _marimo()
    if kind:  # as `uac log --kind` and `%uac log --kind`: an unknown kind names the kinds
        check_kind(wb.store, kind)
    kinds = {"kind": kind} if kind is not None else {}
    off = static_note("filter and page the log")
    return mo.ui.anywidget(LogBrowser(wb, page_size=page_size, readonly=off, **kinds, **query))


@_helper("alerts")
def alert_inspector(wb: Workbench) -> Any:
    """The alert inspector (``%uac alerts``) as ``mo.ui.anywidget``: the standing alerts, most
    severe first, each with its evidence and the log events behind it."""
    from uac_kernel.notebook.widgets import AlertInspector

    mo = _marimo()
    return mo.ui.anywidget(AlertInspector(wb))


@_helper("state")
def state_explorer(wb: Workbench, *, page_size: int = 50, **query: Any) -> Any:
    """The state explorer (``%uac state``) as ``mo.ui.anywidget``: record types, their
    records, every version of one and its sources; in a static export its choices are off,
    with ``static_note`` beside them."""
    from uac_kernel.notebook.widgets import StateExplorer

    mo = _marimo()
    off = static_note("browse and filter the records")
    return mo.ui.anywidget(StateExplorer(wb, page_size=page_size, readonly=off, **query))


@_helper("diff")
def diff_view(wb: Workbench, a: int, b: int) -> Any:
    """What changed from checkpoint ``a`` to ``b`` (``%uac diff A B``) as ``mo.ui.anywidget``."""
    from uac_kernel.notebook.widgets import DiffView

    mo = _marimo()
    return mo.ui.anywidget(DiffView(wb, a, b, readonly=static_note("compare other checkpoints")))


@_helper("eval")
def evaluate(wb: Workbench, expr: str) -> tuple[Any, Any]:
    """Evaluate ``expr`` with ``wb.eval`` and return ``(value, view)`` for an input box.

    The view shows the expression and its value; when the expression fails (a typo, a name
    that is not there, a refused construct) it shows the one-line error in a red callout and
    ``value`` is ``None``, so a mistake says what is wrong instead of the output vanishing.
    """
    mo = _marimo()
    text = expr.strip()
    if not text:
        hint = "Type an expression over <code>user</code>, e.g. <code>len(user.all(Trip))</code>"
        return None, mo.callout(mo.Html(hint), kind="info")
    code = f"<code>{html.escape(text)}</code>"
    try:
        value = wb.eval(text)
    except UacError as exc:
        return None, mo.callout(mo.Html(f"{code}: {html.escape(str(exc))}"), kind="danger")
    return value, mo.Html(f"{code} → <strong>{html.escape(str(value))}</strong>")


@_helper("constrain")
def constrain(
    wb: Workbench,
    text: str,
    key: str | None = None,
    *,
    file: str | None = None,
    retract: str | None = None,
    reason: str | None = None,
) -> tuple[list[str], Any]:
    """Put the constraints of a YAML or JSON ``text`` (from ``mo.ui.code_editor`` or a text
    area) in force, as ``%%uac constraint`` does, or those of ``file`` (``text`` empty), as
    ``%uac constrain FILE`` does, or ``retract`` the constraint of that key (``text`` empty);
    return ``(keys, view)``. The view shows what `%uac constrain` prints (``render.reports``:
    the keys in force and the alerts raised), or the one-line error in a red callout (and
    ``keys`` is empty): nothing is appended then."""
    from uac_kernel.constraints.files import constraints_of_file, read_constraints
    from uac_kernel.render.reports import in_force_lines, retracted_lines

    mo = _marimo()
    given = [
        name for name, v in (("text", text.strip()), ("file=", file), ("retract=", retract)) if v
    ]
    if len(given) > 1:
        problem = (
            f"give the constraints' text, a file= or a retract= key: one, not {' and '.join(given)}"
        )
        return [], mo.callout(mo.Html(html.escape(problem)), kind="danger")
    if not given:
        hint = "Write a constraint as YAML or JSON: <code>kind: obligation</code>, a title, ..."
        return [], mo.callout(mo.Html(hint), kind="info")
    try:
        if retract is not None:
            report = wb.retract_constraint(retract, reason)
            lines, keys = retracted_lines(report), []
        else:
            found = (
                constraints_of_file(file, key)
                if file
                else read_constraints(text, "constraint", key)
            )
            report = wb.constrain(found, reason=reason, origin=file or "constraint")
            lines, keys = [*report.warnings, *in_force_lines(report)], report.constraints
    except UacError as exc:
        return [], mo.callout(mo.Html(html.escape(str(exc))), kind="danger")
    return keys, mo.Html(f"<pre>{html.escape(chr(10).join(lines))}</pre>")


@_helper("constraints")
def constraints_table(wb: Workbench, *, history: bool = False) -> Any:
    """The constraints in force (``history``: every version) as ``mo.ui.table``, in the
    columns `%uac constraints` shows (``render.listings``)."""
    from uac_kernel.render.listings import constraints_listing
    from uac_kernel.render.table import listing_records

    mo = _marimo()
    listing = constraints_listing(wb.constraints(history=history), history)
    return mo.ui.table(listing_records(listing), selection=None)


@_helper("chart")
def chart(
    wb: Workbench, kind: ChartKind, expr: str | None = None, *, freq: str | None = None
) -> Any:
    """An Altair chart (``%uac chart KIND``) as ``mo.ui.altair_chart``.

    ``kind`` is ``events`` or ``records`` over time (``freq``: ``day`` … ``year``), the
    ``alerts`` timeline, or ``result``: the value of ``expr``, evaluated in the sandbox by
    ``wb.eval`` and drawn by its shape (``Counter``/dict: bars; numbers: a histogram; ...).
    """
    from uac_kernel.core.display import shorten
    from uac_kernel.render import charts

    if kind not in CHART_KINDS:
        raise QueryError(f"chart kind {kind!r} is not one of {', '.join(CHART_KINDS)}")
    if kind == "result":
        if not expr or not expr.strip():
            raise QueryError(
                "chart(wb, 'result', EXPR) needs an expression, e.g. "
                "'Counter(t.country for t in user.all(Trip))'"
            )
    elif expr is not None:
        raise QueryError(f"chart(wb, {kind!r}) takes no expression; only 'result' does")
    if freq is not None and kind not in ("events", "records"):
        raise QueryError(f"freq applies to 'events' and 'records' charts, not {kind!r}")
    mo = _marimo()
    periods = {"freq": freq} if freq is not None else {}
    drawn: alt.TopLevelMixin
    if kind == "result":
        text = (expr or "").strip()
        drawn = charts.result_chart(wb.eval(text), title=shorten(text, 80))
    elif kind == "events":
        drawn = charts.events_over_time(wb, **periods)
    elif kind == "records":
        drawn = charts.records_over_time(wb, **periods)
    else:
        drawn = charts.alerts_timeline(wb)
    return mo.ui.altair_chart(drawn)


@_helper("fleet")
def fleet(root: str | Path) -> Any:
    """A fleet directory (``%uac fleet DIR``): its summary (users, events, facts, model calls,
    standing alerts per rule) above ``mo.ui.altair_chart`` charts of the alerts per rule and
    the events per user, in one ``mo.vstack``."""
    from uac_kernel.fleet.sql import fleet_summary
    from uac_kernel.render import charts
    from uac_kernel.render.fleet_face import summary_html

    mo = _marimo()
    summary = fleet_summary(root)
    return mo.vstack(
        [
            mo.Html(summary_html(summary)),
            mo.hstack(
                [
                    mo.ui.altair_chart(charts.fleet_alerts_chart(summary)),
                    mo.ui.altair_chart(charts.fleet_events_chart(summary)),
                ]
            ),
        ]
    )


@_helper("whatif")
def whatif(
    wb: Workbench,
    events: str | Path | Iterable[dict[str, Any]],
    *,
    as_of: str | datetime | None = None,
    expressions: Sequence[str] | dict[str, str] | None = None,
) -> Any:
    """What would change if ``events`` were true (``%%uac whatif``), folded onto a copy of the
    user's state by ``wb.whatif``: nothing is appended, nothing is written, no model is called.

    ``events`` is a list of event dicts, the text of events as a ``%%uac whatif`` cell holds
    them (JSONL, a JSON array or YAML — e.g. the value of ``mo.ui.code_editor``), or a
    ``Path`` to an Event JSONL file. ``as_of`` inserts them at that moment and replays the
    later log on top (a past what-if); ``expressions`` are re-run before and after (default:
    those this session evaluated or asked).

    Returns the what-if widget (the report and an Apply button that appends the same events
    through the validated ingest; off, with ``static_note`` beside it, in a static export) as
    ``mo.ui.anywidget``. A mistake in the events (or an empty text) shows as a
    callout with the one-line error instead; nothing is appended then either.
    """
    from uac_kernel.engine.whatif import events_from_text
    from uac_kernel.notebook.widgets_act import WhatIfWidget

    mo = _marimo()
    problem = _whatif_arguments(events, expressions)
    if problem is not None:
        return mo.callout(mo.Html(html.escape(problem)), kind="danger")
    try:
        given: str | Path | Iterable[dict[str, Any]] = events
        if isinstance(events, str):
            if not events.strip():
                hint = (
                    "Write the events, one JSON object a line or YAML: <code>- kind: fact</code> …"
                )
                return mo.callout(mo.Html(hint), kind="info")
            given = events_from_text(events, "what-if")
        w = wb.whatif(given, as_of=as_of, expressions=expressions)
    except UacError as exc:
        return mo.callout(mo.Html(html.escape(str(exc))), kind="danger")
    return mo.ui.anywidget(WhatIfWidget(wb, w, readonly=static_note("apply a what-if")))


def _whatif_arguments(events: Any, expressions: Any) -> str | None:
    """Why ``whatif``'s arguments cannot be what-if events and expressions, or None."""
    if isinstance(events, str):
        line = events.strip()
        if "\n" not in line and line[:1] not in "{[-" and Path(line).suffix and Path(line).exists():
            return (
                f"{line!r} looks like the path of a file: pass Path({line!r}) for a file; a str "
                "is read as the events' text (JSONL, a JSON array or YAML)"
            )
        return None
    if not isinstance(events, (Path, list, tuple)):
        return (
            f"events is a {type(events).__name__}: give a list of event dicts, their text "
            "(JSONL, a JSON array or YAML) or the Path of an Event JSONL file"
        )
    if expressions is not None and not isinstance(expressions, (list, tuple, dict)):
        return (
            f"expressions is a {type(expressions).__name__}: give a list of expressions, or a "
            "dict of label → expression"
        )
    return None
