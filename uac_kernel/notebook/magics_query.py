"""`%uac` subcommands that ask the state: eval, sql, alerts, chart, whatif, fleet."""

from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import parse_argstring
from IPython.display import display

from uac_kernel.core.display import clipped, did_you_mean, plural, printable, shorten
from uac_kernel.notebook.fleet_magic import first_word
from uac_kernel.notebook.imports import import_on_fresh_stack
from uac_kernel.notebook.session import Session
from uac_kernel.notebook.subcommands import subcommand
from uac_kernel.render.alerts import alerts_lines
from uac_kernel.sql.view import SqlResult

__all__ = ["CHART_MODULES", "QueryMagics"]

# What `%uac chart` imports; `%load_ext uac` starts importing it in the background.
CHART_MODULES = ("uac_kernel.render.charts",)


class QueryMagics(Session):
    """`%uac` subcommands that ask the state: eval, sql, alerts, chart, whatif, fleet."""

    @subcommand("eval")
    def cmd_eval(self, rest: str, cell: str | None) -> Any:
        """Evaluate a Python expression over the state in the sandbox and return its value:
        ``n = %uac eval len(user.all(Trip))``. ``%%uac eval`` takes the expression as the body.
        A value that would print past 100 kB comes back whole, as its own type (list, dict,
        str, int) that prints only its first 100 kB and says how much is left out."""
        expr = (cell if cell is not None else rest).strip()
        if not expr:
            raise UsageError(
                "usage: %uac eval EXPR — e.g. %uac eval len(user.all(Trip)) — or %%uac eval "
                "with the expression as the cell body"
            )
        value = self._wb(read=True).eval(
            expr, cpu_seconds=self.cpu_seconds, memory_mb=self.memory_mb
        )
        # Whole, but one that would print past the budget prints a bounded view of itself.
        return clipped(value)

    @subcommand("sql")
    def cmd_sql(self, rest: str, cell: str | None) -> SqlResult:
        """Run SQL over one table per record type (``Trip``, ``Trip_history``); returns the
        ``SqlResult``, shown as a table of ``displaylimit`` rows. ``%%uac sql`` takes the body."""
        timeout, rest = self._timeout_option(rest)
        query = (cell if cell is not None else rest).strip()
        if not query:
            raise UsageError("usage: %%uac sql with the query as the cell body, or %uac sql QUERY")
        return self._wb(read=True).sql(query, timeout=timeout)

    @subcommand("fleet")
    def cmd_fleet(self, rest: str, cell: str | None) -> Any:
        """Many users at once, over a fleet directory (``uac export``): ``%uac fleet DIR``
        shows its summary with charts of the standing alerts per rule and the events per user;
        ``%uac fleet sql [--timeout S] DIR SELECT ...`` runs one read-only query across its
        users (tables ``users``, ``alerts``, ``events`` and one per record type, ``user_id``
        first) and returns the ``SqlResult``; ``%%uac fleet sql DIR`` takes the query as the
        body. ``%uac fleet run [--engine local|ray] [--jobs N] [--users A,B | --limit N] DIR
        JOB [ARG ...]`` runs a job for every user (as ``uac fleet run``; ``eval``, ``ask`` and
        ``bench`` take the rest of the line as written) with a progress bar and returns the
        run's summary rows. A path with spaces goes in quotes."""
        word, tail = first_word(rest)
        if word == "sql":  # a directory named sql: %uac fleet ./sql
            return self._fleet_sql(tail, cell)
        if word == "run":
            return self._fleet_run(tail, cell)
        if not word:
            raise UsageError(
                "usage: %uac fleet DIR, %uac fleet sql DIR QUERY, or %uac fleet run DIR JOB ..."
            )
        if tail.strip() or cell is not None:
            raise UsageError(f"`%uac fleet DIR` takes only the directory; got {tail.strip()!r}")
        return self._fleet_summary(word)

    def _fleet_sql(self, rest: str, cell: str | None) -> SqlResult:
        from uac_kernel.fleet.sql import fleet_sql

        timeout, rest = self._timeout_option(rest)
        root, query = first_word(rest)
        query = (cell if cell is not None else query).strip()
        if not root or not query:
            raise UsageError(
                "usage: %uac fleet sql DIR QUERY, or %%uac fleet sql DIR with the query as the body"
            )
        return fleet_sql(root, query, timeout=timeout)

    def _fleet_run(self, rest: str, cell: str | None) -> SqlResult:
        from uac_kernel.fleet.run import SUMMARY_COLUMNS
        from uac_kernel.notebook.fleet_magic import run_with_progress

        if cell is not None:
            raise UsageError("`%%uac fleet run` takes no cell body; use the line magic")
        report = run_with_progress(rest, self._model_settings())
        print(printable(report.summary()))
        for line in report.refused:  # ingest files whose name is no user id
            print(f"  refused {printable(line)}")
        columns = [name for name, _ in SUMMARY_COLUMNS]
        table = SqlResult(columns, [tuple(r[c] for c in columns) for r in report.rows])
        failed = [r for r in report.rows if r["status"] != "ok"]
        if failed:
            display(table)
            raise UsageError(
                f"{plural(len(failed), 'user')} failed (the error column says why); fix it and "
                "run the same line again: the users done are skipped"
            )
        return table

    def _fleet_summary(self, root: str) -> Any:
        from uac_kernel.fleet.sql import fleet_summary
        from uac_kernel.render.fleet_face import summary_html, summary_lines

        summary = fleet_summary(root)
        display(
            {"text/plain": "\n".join(summary_lines(summary)), "text/html": summary_html(summary)},
            raw=True,
        )
        try:
            # %load_ext started it in the background (CHART_MODULES): this waits for the rest.
            import_on_fresh_stack(CHART_MODULES[0])
            from uac_kernel.render import charts
        except ImportError as exc:
            print(
                f"(charts need altair and vl-convert: {exc}; pip install altair vl-convert-python)"
            )
            return None
        if not self._charts_ready:
            charts.enable_offline()
            self._charts_ready = True
        return charts.fleet_charts(summary)

    @subcommand("alerts")
    def cmd_alerts(self, rest: str, cell: str | None) -> None:
        """The alerts standing now, most severe first, with their evidence (an inspector
        widget; the text where widgets are not shown)."""
        parse_argstring(self.cmd_alerts, rest)
        wb = self._wb(read=True)

        def make() -> Any:
            from uac_kernel.notebook.widgets import AlertInspector

            return AlertInspector(wb)

        self._show(make, "\n".join(alerts_lines(wb.alerts(), wb.constraint_of)))

    @subcommand("chart")
    def cmd_chart(self, rest: str, cell: str | None) -> Any:
        """An Altair chart: ``events`` or ``records`` over time, the ``alerts`` timeline, or a
        ``result``: ``%uac chart result Counter(t.country for t in user.all(Trip))``. Returns
        the chart; charts draw offline (the Vega JavaScript is bundled)."""
        kind, _, tail = rest.strip().partition(" ")
        if kind == "result":
            expr = tail.strip()  # verbatim: shell-style splitting would mangle Python quotes
            if not expr:
                raise UsageError("usage: %uac chart result EXPR")
        else:
            args = parse_argstring(self.cmd_chart, rest)
            if args.expr:
                raise UsageError(f"`%uac chart {kind}` takes no expression; `result` does")
            if args.freq and args.kind not in ("events", "records"):
                raise UsageError(f"--freq is for `events` and `records` charts, not `{args.kind}`")
        try:
            # The first import of Altair, deep in IPython's stack, can cost seconds more than
            # on a fresh one (CPython gh-142183); see uac_kernel.notebook.imports.
            # %load_ext started it in the background (CHART_MODULES): this waits for the rest.
            import_on_fresh_stack(CHART_MODULES[0])
            from uac_kernel.render import charts
        except ImportError as exc:
            raise UsageError(
                f"charts need altair and vl-convert ({exc}); pip install altair vl-convert-python"
            ) from None
        wb = self._wb(read=True)
        chart: Any
        if kind == "result":
            value = wb.eval(expr, cpu_seconds=self.cpu_seconds, memory_mb=self.memory_mb)
            chart = charts.result_chart(value, title=shorten(expr, 80))
        elif kind == "events":
            chart = charts.events_over_time(wb, **({"freq": args.freq} if args.freq else {}))
        elif kind == "records":
            chart = charts.records_over_time(wb, **({"freq": args.freq} if args.freq else {}))
        else:
            chart = charts.alerts_timeline(wb)
        if not self._charts_ready:
            charts.enable_offline()
            self._charts_ready = True
        return chart

    @subcommand("whatif")
    def cmd_whatif(self, rest: str, cell: str | None) -> None:
        """What would change if these events were true: ``%%uac whatif`` with the events in the
        cell (JSONL, a JSON array, or YAML: a list of mappings or ``---``-separated ones), or
        ``%uac whatif VAR`` with ``VAR`` a list of event dicts. They are folded onto a copy of
        the user's state: nothing is appended, nothing is written to the store, no model is
        called. Shows the records added, changed or retracted, the alerts that would be
        raised, escalated or cleared, and the answers (``--expr``, else the expressions and
        questions of this session) that would change. With ``--as-of DATE`` the events are
        inserted at DATE and the later log replayed on top, with today's rules: the alert
        timeline, real and what-if. A widget applies it for real (the same events, through
        the validated ingest); the text view where widgets are not shown. See docs/whatif.md.
        """
        from uac_kernel.notebook import cellargs as _cellargs

        args = _cellargs.parse(self.cmd_whatif, rest)
        if cell is not None:
            if args.var is not None:
                raise UsageError(
                    f"`%%uac whatif` takes its events from the cell, not also from {args.var!r}; "
                    f"use the line magic `%uac whatif {args.var}`"
                )
            if not cell.strip():
                raise UsageError(
                    "`%%uac whatif`: write the events in the cell, one JSON object a line or "
                    "YAML (- kind: fact ...)"
                )
            from uac_kernel.engine.whatif import events_from_text

            events = events_from_text(cell, "%%uac whatif")
            origin = "%%uac whatif"
        else:
            if args.var is None:
                raise UsageError(
                    "usage: %%uac whatif [--as-of DATE] [--expr EXPR] with the events in the "
                    "cell, or %uac whatif VAR with VAR a list of event dicts"
                )
            events = self._events_of(args.var)
            origin = args.var
        as_of = args.as_of  # a moment already (commands.types.moment)
        wb = self._wb(read=True)
        w = wb.whatif(events, as_of=as_of, expressions=args.expr, origin=origin)
        self._show_whatif(wb, w)

    def _events_of(self, name: str) -> list[Any]:
        """The list of event dicts bound to ``name`` in the user namespace: looked up, never
        evaluated."""
        if not name.isidentifier():
            raise UsageError(
                f"%uac whatif {name!r}: name a variable that holds a list of event dicts "
                "(e.g. %uac whatif events), or write the events in a %%uac whatif cell"
            )
        ns = self.shell.user_ns if self.shell is not None else {}
        if name not in ns:
            names = [k for k, v in ns.items() if isinstance(v, list) and not k.startswith("_")]
            raise UsageError(
                f"%uac whatif: no variable {name!r} in the namespace.{did_you_mean(name, names)}"
            )
        value = ns[name]
        if isinstance(value, dict):  # (isinstance does not call the value's own code)
            raise UsageError(
                f"%uac whatif {name}: {name} is one event; put it in a list ({name}s = [{name}])"
            )
        if not isinstance(value, (list, tuple)):
            raise UsageError(
                f"%uac whatif {name}: {name} is a {type(value).__name__}, not a list of event dicts"
            )
        # Copied into plain lists and dicts here: a subclass's own methods (its __iter__, its
        # get) run once, and an error of theirs is one line, not a traceback from the parser.
        try:
            items = list(value)
            wrong = next((i for i, v in enumerate(items) if not isinstance(v, dict)), None)
            if wrong is not None:
                raise UsageError(
                    f"%uac whatif {name}: {name}[{wrong}] is a {type(items[wrong]).__name__}, "
                    "not an event dict"
                )
            return [dict(v.items()) for v in items]
        except UsageError:
            raise
        except Exception as exc:
            raise UsageError(
                f"%uac whatif {name}: reading it failed ({type(exc).__name__}: "
                f"{printable(shorten(str(exc), 120))}); give a list of plain event dicts"
            ) from None
