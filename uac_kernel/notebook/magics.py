"""The IPython face of uac: ``%load_ext uac``, then ``%uac SUBCOMMAND ...`` and ``%%uac``.

Parsing, display and error translation only: every action is one ``Workbench`` call. Settings
are traitlets of ``UacMagics`` (``%config UacMagics.db = "maya.duckdb"``); every ``UacError`` and
every argument error reaches the notebook as a one-line ``UsageError``.

The model as editable cells: ``%uac edit Medication`` turns its own cell into the ``Medication``
part of the latest checkpoint, headed by ``%%uac cell --version N --part Medication``. Edit the
records (or write ``@rule`` functions in the ``rules`` part) and run the cell: the body is read
by literals, never run, and becomes correction events; only the ``@rule`` functions you wrote
are compiled and run, to define the rules.
"""

from __future__ import annotations

import ast
import hashlib
import html
import linecache
import os
import re
import sys
import textwrap
from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class, no_var_expand
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring
from IPython.display import display
from traitlets import Bool, Float, Int, Unicode, default, observe

from uac_kernel.core import settings
from uac_kernel.core.display import (
    clip_json,
    clipped,
    did_you_mean,
    plural,
    printable,
    shorten,
    show,
)
from uac_kernel.core.errors import ModelError, UacError
from uac_kernel.core.records import field_values
from uac_kernel.model.ask import Answer
from uac_kernel.notebook.askline import ask_line
from uac_kernel.notebook.fleet_magic import first_word
from uac_kernel.notebook.imports import import_on_fresh_stack
from uac_kernel.render.summary import summary
from uac_kernel.rules.engine import Alert, ClearedAlert, Finding, Rule, rule
from uac_kernel.sql.view import SqlResult

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.lib.pretty import RepresentationPrinter

    from uac_kernel.engine.whatif import WhatIf
    from uac_kernel.model.client import ModelSettings
    from uac_kernel.state.fold import ConstraintVersion
    from uac_kernel.workbench import IngestReport, Workbench

__all__ = ["Table", "UacMagics", "load_ipython_extension", "unload_ipython_extension"]

# What a @rule function written in a cell can use besides the user namespace.
RULE_HELPERS: dict[str, Any] = {
    "rule": rule,
    "Finding": Finding,
    "date": date,
    "datetime": datetime,
    "timedelta": timedelta,
}

_CELL_WIDTH = 60  # characters of one table cell in the text view
_WRAP_LINES = 8  # lines' worth of text a wrapped cell holds (see Table._wrap)


# -- display helpers ----------------------------------------------------------------------------


def _one_line(text: str) -> str:
    """An error message as a notebook shows it: one line, control characters escaped (it may
    quote input, stored text or model code, and a notebook renders ANSI escapes)."""
    return printable(re.sub(r"\s*\n\s*", " ", str(text)).strip())


def _doc(fn: Callable[..., Any]) -> str:
    """A subcommand's help: usage line first (magic_arguments wrote it into the docstring)."""
    return (fn.__doc__ or "").removeprefix("::").strip("\n")


def _usage(fn: Callable[..., Any], width: int = 86) -> list[str]:
    """A subcommand's whole usage from its parser, wrapped between its arguments at ``width``:
    ``%uac edit [--version VERSION] ... [part]``, continued under the first argument."""
    parser = fn.parser  # type: ignore[attr-defined]  # set by magic_arguments
    prog = f"%{parser.prog}"
    flat = " ".join(parser.format_usage().split()).removeprefix("::").strip()
    args, depth, start = [], 0, 0
    rest = flat.removeprefix(prog) + " "
    for i, ch in enumerate(rest):
        depth += (ch in "[{(<") - (ch in "]})>")
        if ch == " " and depth == 0:
            if rest[start:i].strip():
                args.append(rest[start:i].strip())
            start = i + 1
    lines = [prog]
    for arg in args:
        if len(lines[-1]) + 1 + len(arg) > width and lines[-1].strip() != prog:
            lines.append(" " * len(prog))
        lines[-1] += " " + arg
    return lines


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


# An ISO date or date-time in a cell: kept on one line in HTML (browsers break at its hyphens).
_ISO_TIME = re.compile(r"\d{4}-\d\d-\d\d(?: \d\d:\d\d(?::\d\d)?)?")
_TD = 'style="text-align: left; vertical-align: top"'


_HTML_CELL_CHARS = 2000  # a cell's text (or a column's name) in the HTML table
_COLUMNS = 40  # columns shown of a table; the result itself keeps them all


def _html_cell(value: Any) -> str:
    text = printable(show(value))
    if len(text) > _HTML_CELL_CHARS:
        text = shorten(text[: _HTML_CELL_CHARS * 2], _HTML_CELL_CHARS)
    return _ISO_TIME.sub(
        lambda m: f'<span style="white-space: nowrap">{m.group(0)}</span>',
        html.escape(text),
    )


class Table:
    """Rows shown as an HTML table (every cell escaped) with an aligned text/plain fallback.

    Only the first ``limit`` rows (``limit <= 0``: all) and the first 40 columns are shown;
    ``columns`` and ``rows`` hold everything. In the text, a cell longer than its width is cut between words, except in the
    ``wrap`` columns — those that are the point of the table — where it runs on over lines.
    """

    def __init__(
        self,
        columns: Sequence[str],
        rows: Sequence[Sequence[Any]],
        limit: int = 20,
        caption: str = "",
        wrap: Sequence[str] = (),
    ):
        self.columns = list(columns)
        self.rows = [tuple(r) for r in rows]
        self.limit = limit
        self.caption = caption
        self.wrap = [c in wrap for c in self.columns]

    def _shown(self) -> list[tuple[Any, ...]]:
        rows = self.rows if self.limit <= 0 else self.rows[: self.limit]
        return [r[:_COLUMNS] for r in rows]

    def _more(self) -> str:
        notes = []
        hidden = len(self.rows) - len(self._shown())
        if hidden:
            notes.append(
                f"… {plural(hidden, 'more row')} (showing {self.limit}; "
                "%config UacMagics.displaylimit)"
            )
        if len(self.columns) > _COLUMNS:
            notes.append(
                f"… {plural(len(self.columns) - _COLUMNS, 'more column')} (showing {_COLUMNS}); "
                "select fewer columns, or keep the result (r = %uac sql ...) and read r.columns "
                "and r.rows, or r.records(), in Python"
            )
        return "\n".join(notes)

    def text(self) -> str:
        shown = [
            [
                self._wrap(show(v)) if wrap else [self._clip(show(v))]
                for v, wrap in zip(row, self.wrap[:_COLUMNS], strict=True)
            ]
            for row in self._shown()
        ]
        header = [self._clip(c) for c in self.columns[:_COLUMNS]]
        widths = [len(h) for h in header]
        for row in shown:
            widths = [max(w, *map(len, v)) for w, v in zip(widths, row, strict=True)]

        def line(cells: Sequence[str]) -> str:
            return "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

        out = [self.caption] if self.caption else []
        out += [line(header), line(["-" * w for w in widths])]
        for row in shown:
            height = max(map(len, row))
            out += [line([c[i] if i < len(c) else "" for c in row]) for i in range(height)]
        if not self.rows:
            out.append("(no rows)")
        if more := self._more():
            out.append(more)
        return "\n".join(out)

    @staticmethod
    def _escape(text: str) -> str:
        return printable(text)

    @classmethod
    def _clip(cls, text: str) -> str:
        text = cls._escape(text[: _CELL_WIDTH * 4])
        return text if len(text) <= _CELL_WIDTH else shorten(text, _CELL_WIDTH)

    @classmethod
    def _wrap(cls, text: str) -> list[str]:
        """``text`` in lines of at most ``_CELL_WIDTH``, broken between words; what goes past
        ``_WRAP_LINES`` lines' worth is cut like ``_clip`` cuts."""
        text = shorten(
            cls._escape(text[: _CELL_WIDTH * _WRAP_LINES * 2]), _CELL_WIDTH * _WRAP_LINES
        )
        lines = textwrap.wrap(text, _CELL_WIDTH, break_on_hyphens=False)
        return lines or [""]

    def _repr_html_(self) -> str:
        esc = html.escape
        head = "".join(f"<th {_TD}>{_html_cell(c)}</th>" for c in self.columns[:_COLUMNS])
        body = "".join(
            "<tr>" + "".join(f"<td {_TD}>{_html_cell(v)}</td>" for v in row) + "</tr>"
            for row in self._shown()
        )
        caption = f"<caption>{esc(self.caption)}</caption>" if self.caption else ""
        more = "".join(f"<p><em>{esc(note)}</em></p>" for note in self._more().splitlines())
        return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"

    def _repr_pretty_(self, p: RepresentationPrinter, cycle: bool) -> None:
        p.text(self.text())

    def __repr__(self) -> str:
        return self.text()


def answer_text(answer: Answer) -> str:
    """An answer, the code that computed it, and what it rests on."""
    value, _ = clip_json(answer.value)
    # The model wrote the code and the explanation: escaped like everything from outside.
    lines = [
        value,
        f"  code: {printable(answer.expression)}",
        f"  why:  {printable(answer.explanation)}",
    ]
    cert = answer.certificate
    keys = ", ".join(f"{r['type']} {r['key']}" for r in cert.records[:8])
    more = f" and {cert.records_total - 8} more" if cert.records_total > 8 else ""
    lines.append(f"  records ({cert.records_total}): {printable(keys)}{more}")
    for u in cert.utterances[:5]:
        said = f"[{u['source']}] {u['speaker']}: {u['text']}"
        lines.append(f"  said {show(u['ts'])[:10]} {printable(said)}")
    return "\n".join(lines)


def _answer_html(answer: Answer) -> str:
    esc = html.escape
    value, _ = clip_json(answer.value)
    cert = answer.certificate
    records = "".join(f"<li>{esc(r['type'])} {esc(str(r['key']))}</li>" for r in cert.records[:8])
    if cert.records_total > 8:
        records += f"<li>… and {cert.records_total - 8} more</li>"
    said = "".join(
        f"<li>{esc(show(u['ts'])[:10])} [{esc(str(u['source']))}] "
        f"{esc(str(u['speaker']))}: {esc(str(u['text']))}</li>"
        for u in cert.utterances[:5]
    )
    said_too = f" and {plural(len(cert.utterances), 'utterance')}" if cert.utterances else ""
    return (
        f"<div><p><strong>{esc(value)}</strong></p>"
        f"<pre><code>{esc(answer.expression)}</code></pre><p>{esc(answer.explanation)}</p>"
        f"<details><summary>rests on {plural(cert.records_total, 'record')}{said_too}</summary>"
        f"<ul>{records}</ul><ul>{said}</ul></details></div>"
    )


def _alert_line(verb: str, alert: Alert) -> str:
    line = f"  {verb} [{alert.severity}] {printable(alert.rule)}: {printable(alert.message)}"
    if isinstance(alert, ClearedAlert) and alert.reason:
        line += f"\n      why: {printable(alert.reason)}"
    return line


def alerts_text(
    alerts: Sequence[Alert], constraint_of: Callable[[str], ConstraintVersion | None] | None = None
) -> str:
    """The alerts as text; with ``constraint_of`` (``Workbench.constraint_of``) an alert of a
    constraint's rule names the constraint."""
    if not alerts:
        return "no alerts"
    lines = []
    for a in alerts:
        lines.append(f"[{a.severity}] {printable(a.rule)}: {printable(a.message)}")
        evidence = ", ".join(
            f"{e.type} {e.key} (events {', '.join(map(str, e.sources))})" for e in a.evidence
        )
        if evidence:
            lines.append(f"    evidence: {printable(evidence)}")
        if constraint_of is not None and (cv := constraint_of(a.rule)) is not None:
            c = cv.constraint
            lines.append(f"    constraint: {printable(f'{cv.key} ({c.kind}): {c.title}')}")
    return "\n".join(lines)


# -- the magics ---------------------------------------------------------------------------------

_SUBCOMMAND = "_uac_subcommand"


def subcommand(name: str, *, cell: bool = False) -> Callable[[Any], Any]:
    """Mark a method as ``%uac NAME`` (``cell=True``: it also takes a ``%%uac NAME`` body)."""

    def mark(fn: Any) -> Any:
        setattr(fn, _SUBCOMMAND, (name, cell))
        return fn

    return mark


@magics_class
class UacMagics(Magics):
    """``%uac SUBCOMMAND ...`` and ``%%uac SUBCOMMAND``: the workbench in a notebook.

    Settings: ``%config UacMagics`` lists them; ``%uac help`` lists the subcommands.
    """

    db = Unicode(help="the store opened by `%uac open` without a path (env UAC_DB)").tag(
        config=True
    )
    user = Unicode(
        help="the user opened by `%uac open` without --user (env UAC_USER; '': the store's "
        "only user, or 'me' in a new store)"
    ).tag(config=True)
    variable = Unicode(
        "wb", help="the name the open Workbench is bound to in the user namespace ('' for none)"
    ).tag(config=True)
    displaylimit = Int(20, help="rows shown of a SQL result, a history or the log (0: all)").tag(
        config=True
    )
    sql_timeout = Float(
        None,
        allow_none=True,
        help="seconds a `sql` query may run (None: env UAC_SQL_TIMEOUT, else 30; "
        "`%uac sql --timeout S ...` for one query)",
    ).tag(config=True)
    cpu_seconds = Float(5.0, help="CPU seconds an `eval` expression may use").tag(config=True)
    memory_mb = Int(1024, help="memory (MB) an `eval` expression may use").tag(config=True)
    model = Unicode("", help="model for extract/ask ('' : env UAC_MODEL)").tag(config=True)
    base_url = Unicode("", help="OpenAI-compatible endpoint ('' : env OPENAI_BASE_URL)").tag(
        config=True
    )
    offline = Bool(
        False, help="answer model calls only from the store's record (else env UAC_OFFLINE)"
    ).tag(config=True)

    @default("db")
    def _default_db(self) -> str:
        return settings.DB.get() or "uac.duckdb"

    @default("user")
    def _default_user(self) -> str:
        return settings.USER.get() or ""

    def __init__(self, shell: InteractiveShell | None = None, **kwargs: Any):
        self.workbench: Workbench | None = None  # before the config observers can run
        self._charts_ready = False
        super().__init__(shell, **kwargs)
        self.commands: dict[str, tuple[Callable[[str, str | None], Any], bool]] = {}
        for attr in dir(type(self)):
            mark = getattr(getattr(type(self), attr), _SUBCOMMAND, None)
            if mark is not None:
                name, takes_cell = mark
                self.commands[name] = (getattr(self, attr), takes_cell)

    @observe("db", "user", "model", "base_url", "offline")
    def _settings_changed(self, change: dict[str, Any]) -> None:
        if self.workbench is not None:
            print(f"uac: {change['name']} applies from the next `%uac open`")

    # -- dispatch ---------------------------------------------------------------------------

    @no_var_expand
    @line_cell_magic
    def uac(self, line: str, cell: str | None = None) -> Any:
        """``%uac SUBCOMMAND [ARGS]``; ``%uac help`` lists the subcommands, ``%uac help SUB``
        (or ``%uac SUB --help``) explains one. Lines are taken verbatim: no ``{var}`` or
        ``$var`` expansion, so Python sets, dicts and strings in expressions stay intact."""
        name, rest = [*line.strip().split(None, 1), "", ""][:2]
        if not name or name in ("help", "-h", "--help"):
            self._help(rest.strip())
            return None
        found = self.commands.get(name)
        if found is None:
            raise UsageError(
                f"%uac has no subcommand {name!r}.{did_you_mean(name, list(self.commands))} "
                f"Subcommands: {', '.join(sorted(self.commands))}"
            )
        fn, takes_cell = found
        if rest.strip() in ("-h", "--help"):
            print(_doc(fn))
            return None
        if cell is not None and not takes_cell:
            raise UsageError(f"`%%uac {name}` takes no cell body; use the line magic `%uac {name}`")
        try:
            return fn(rest, cell)
        except UacError as exc:
            raise UsageError(_one_line(str(exc))) from None
        except Exception as exc:
            # A damaged store is found when a query reaches the bad block: one line too.
            duckdb = sys.modules.get("duckdb")
            if duckdb is None or not isinstance(exc, duckdb.Error):
                raise
            from uac_kernel.log.store import damaged

            path = self.workbench.store.path if self.workbench is not None else self.db
            raise UsageError(_one_line(str(damaged(path, exc)))) from None

    def _help(self, name: str) -> None:
        if name:
            found = self.commands.get(name)
            if found is None:
                raise UsageError(
                    f"%uac has no subcommand {name!r}.{did_you_mean(name, list(self.commands))}"
                )
            print(_doc(found[0]))
            return
        print("%uac SUBCOMMAND [ARGS] — the User as Code workbench (settings: %config UacMagics)")
        for _name, (fn, _) in sorted(self.commands.items()):
            for line in _usage(fn):
                print(f"  {line}")
        print("%uac help SUBCOMMAND (or %uac SUBCOMMAND --help) explains one.")

    # -- the workbench ------------------------------------------------------------------------

    def _model_settings(self) -> ModelSettings | None:
        """Configured model settings; ``None`` leaves them to the environment at first use."""
        from uac_kernel.model.client import ModelSettings

        if not (self.model or self.base_url or self.offline):
            return None
        try:
            return ModelSettings.resolve(
                model=self.model or None,
                base_url=self.base_url or None,
                offline=True if self.offline else None,
            )
        except ModelError:
            return None  # no model named anywhere: the engine says so when one is needed

    def _open(self, path: str, user: str, read_only: bool = False) -> Workbench:
        """Open ``user`` ('': the store's only user) of ``path``; read-only, a user with no
        events is an error, as nothing could be read or written."""
        from uac_kernel.workbench import Workbench

        path = settings.store_path(path, memory=False)
        self._close()
        wb = Workbench(path, user=user or None, read_only=read_only, model=self._model_settings())
        self.workbench = wb
        if self.variable and self.shell is not None:
            self.shell.push({self.variable: wb})
        print(self._summary(wb))
        return wb

    def _close(self) -> None:
        wb, self.workbench = self.workbench, None
        if wb is None:
            return
        wb.close()
        if self.shell is not None and self.variable and self.shell.user_ns.get(self.variable) is wb:
            del self.shell.user_ns[self.variable]

    def release_store(self, *_: object) -> None:
        """Let go of the open workbench's store once it has been idle a moment (an IPython
        ``post_run_cell`` hook): the next operation opens it again."""
        if self.workbench is not None:
            self.workbench.store.release(linger=True)

    def _wb(self, *, read: bool = False) -> Workbench:
        """The open workbench; opens the configured store and user if none is.

        ``read``: the subcommand reads the user, so a user with no events is an error that
        names the store's users (a typo in --user, not an empty history).
        """
        if self.workbench is None:
            wb = self._open(self.db, self.user)
        else:
            wb = self.workbench
            wb.refresh()  # a terminal may have written since the last cell
        if read:
            wb.require_known()
        return wb

    def _summary(self, wb: Workbench) -> str:
        counts = wb.state.counts()
        checkpoints = wb.checkpoints.all()
        alerts = wb.alerts()
        critical = sum(1 for a in alerts if a.severity == "critical")
        cps = (
            f"{plural(len(checkpoints), 'checkpoint')} (latest {checkpoints[-1].version})"
            if checkpoints
            else "no checkpoint yet"
        )
        text = (
            f"uac: user {wb.user!r} of {wb.store.path}{' (read-only)' if wb.store.read_only else ''}"
            f": {plural(sum(counts.values()), 'record')} in {plural(len(counts), 'type')}, {cps}, "
            f"{plural(len(alerts), 'standing alert')}{f' ({critical} critical)' if critical else ''}"
        )
        if self.variable:
            text += f"; bound to `{self.variable}`"
        if not wb.known:
            users = ", ".join(wb.store.users()) or "none yet"
            text += (
                f"\n     user {wb.user!r} has no events yet (users here: {users}); "
                "`%uac ingest FILE` adds them, `%uac open --user NAME` opens another"
            )
        idle = [r["name"] for r in wb.stored_rules() if r["name"] not in wb.runner.rules]
        if idle:
            text += (
                f"\n     notebook rules logged but not in force: {', '.join(idle)} — "
                "`%uac edit rules` shows their code; run that cell to put them in force"
            )
        return text

    # -- subcommands ----------------------------------------------------------------------------

    @subcommand("open")
    @magic_arguments(name="uac open")
    @argument("path", nargs="?", help="the store file (default: UacMagics.db)")
    @argument("--user", default=None, help="the user id (default: UacMagics.user)")
    @argument("--read-only", action="store_true", help="open without taking the write lock")
    def cmd_open(self, rest: str, cell: str | None) -> None:
        """Open a store for one user (closing the workbench open before) and bind it."""
        args = parse_argstring(self.cmd_open, rest)
        path = _unquote(args.path) if args.path else self.db
        self._open(path, _unquote(args.user) if args.user else self.user, args.read_only)

    @subcommand("close")
    @magic_arguments(name="uac close")
    def cmd_close(self, rest: str, cell: str | None) -> None:
        """Close the open workbench, releasing the store's lock for other processes."""
        parse_argstring(self.cmd_close, rest)
        if self.workbench is None:
            print("uac: no workbench is open")
            return
        path = self.workbench.store.path
        self._close()
        print(f"uac: closed {path}")

    @subcommand("ingest")
    @magic_arguments(name="uac ingest")
    @argument("file", help="Event JSONL, a LoCoMo or LongMemEval file, or chat messages")
    @argument(
        "--format",
        default="auto",
        choices=["auto", "jsonl", "locomo", "longmemeval", "chat"],
        help="the file's format (default: detected)",
    )
    @argument("--history", default=None, help="the one conversation of a LoCoMo/LongMemEval file")
    def cmd_ingest(self, rest: str, cell: str | None) -> None:
        """Append a file to the log, atomically; prints what it appended and the alerts."""
        args = parse_argstring(self.cmd_ingest, rest)
        path = Path(os.path.expanduser(_unquote(args.file)))
        history = _unquote(args.history) if args.history else None
        report = self._wb().ingest(path, format=args.format, history=history)
        self._print_report(report)

    @staticmethod
    def _print_report(report: IngestReport) -> None:
        print(printable(report.summary()))
        for alert in report.raised:
            print(_alert_line("raised", alert))
        for alert in report.updated:
            print(_alert_line("updated", alert))
        for alert in report.cleared:
            print(_alert_line("cleared", alert))

    @subcommand("extract")
    @magic_arguments(name="uac extract")
    @argument("--batch-size", type=int, default=10, help="utterances per model call")
    @argument("--max-operations", type=int, default=None, help="cap per batch (default 100)")
    @argument("--max-new-types", type=int, default=None, help="cap per batch (default 10)")
    @argument("--max-new-fields", type=int, default=None, help="cap per batch (default 60)")
    def cmd_extract(self, rest: str, cell: str | None) -> None:
        """Turn pending utterances into typed facts with the model, then checkpoint. An answer
        that would change much of what is known is held: see ``%uac review``."""
        from uac_kernel.model.extract import ExtractionLimits

        args = parse_argstring(self.cmd_extract, rest)
        caps = {
            name: getattr(args, name)
            for name in ("max_operations", "max_new_types", "max_new_fields")
            if getattr(args, name) is not None
        }
        wb = self._wb(read=True)
        report = wb.extract(batch_size=args.batch_size, limits=ExtractionLimits(**caps))
        print(report.summary())
        for verb in ("raised", "updated", "cleared"):
            for alert in getattr(report, verb):
                print(_alert_line(verb, alert))
        if report.applied:
            self._print_parts(wb, wb.checkpoints.get().version, "checkpoint written")

    @subcommand("review")
    @magic_arguments(name="uac review")
    @argument("action", nargs="?", choices=["accept", "reject"], help="the decision")
    @argument("batch", nargs="?", type=int, help="a held batch's ID")
    @argument("--only", default=None, help="accept only these operations, e.g. 1,3")
    def cmd_review(self, rest: str, cell: str | None) -> None:
        """Model answers held for review: a widget with each operation's record before and
        after, Accept / Accept selected / Reject (the text where widgets are not shown);
        ``accept ID [--only 1,3]`` or ``reject ID`` decides from the line."""
        from uac_kernel.model.review import parse_only

        args = parse_argstring(self.cmd_review, rest)
        wb = self._wb(read=True)
        if args.action is None:
            held = wb.review()
            text = "\n".join(b.text() for b in held) or "no model answers are held for review"

            def make() -> Any:
                from uac_kernel.notebook.widgets import ReviewView

                return ReviewView(wb)

            self._show(make, text)
            return
        if args.batch is None:
            raise UsageError(f"%uac review {args.action} needs the ID of a held batch")
        if args.action == "reject":
            wb.reject(args.batch)
            print(f"batch {args.batch} rejected; nothing of it was applied")
            return
        only = parse_only(args.only) if args.only is not None else None
        report = wb.accept(args.batch, only)
        print(f"batch {args.batch}: accepted; {report.summary()}")
        for verb in ("raised", "updated", "cleared"):
            for alert in getattr(report, verb):
                print(_alert_line(verb, alert))

    @subcommand("checkpoint")
    @magic_arguments(name="uac checkpoint")
    def cmd_checkpoint(self, rest: str, cell: str | None) -> None:
        """Store the state as a new version of typed code; lists its parts with a ready
        ``%uac edit PART`` command for each (run each in a cell of its own)."""
        parse_argstring(self.cmd_checkpoint, rest)
        wb = self._wb(read=True)
        cp = wb.checkpoint()
        print(cp.summary())
        self._print_parts(wb, cp.version)

    @subcommand("checkpoints")
    @magic_arguments(name="uac checkpoints")
    def cmd_checkpoints(self, rest: str, cell: str | None) -> Table:
        """The checkpoints of the user: version, the log seq each covers, records, when."""
        parse_argstring(self.cmd_checkpoints, rest)
        cps = self._wb(read=True).checkpoints.all()
        return Table(
            ["version", "seq", "records", "created"],
            [
                (c.version, c.seq, c.records, c.created_at.strftime("%Y-%m-%d %H:%M:%S"))
                for c in cps
            ],
            0,
            caption=plural(len(cps), "checkpoint")
            if cps
            else "no checkpoint yet (%uac checkpoint)",
        )

    @subcommand("users")
    @magic_arguments(name="uac users")
    def cmd_users(self, rest: str, cell: str | None) -> Table:
        """The users of the store and their event counts (switch with ``%uac open --user``)."""
        parse_argstring(self.cmd_users, rest)
        from uac_kernel.log.store import Store

        if self.workbench is not None:
            counts, path = self.workbench.store.user_counts(), self.workbench.store.path
        else:
            store = Store(self.db, read_only=True)
            try:
                counts, path = store.user_counts(), store.path
            finally:
                store.close()
        return Table(["user", "events"], list(counts.items()), 0, caption=f"users of {path}")

    @staticmethod
    def _print_parts(wb: Workbench, version: int, title: str = "", *, pinned: bool = False) -> None:
        if title:
            print(f"checkpoint {version}: {title}")
        print("edit a part in a cell of its own (the command turns its cell into the code):")
        suffix = f" --version {version}" if pinned else ""
        for part in wb.parts(version):
            print(f"  %uac edit {part}{suffix}")

    @subcommand("code")
    @magic_arguments(name="uac code")
    @argument("--version", type=int, default=None, help="the checkpoint (default: the latest)")
    def cmd_code(self, rest: str, cell: str | None) -> None:
        """Print a checkpoint's whole code."""
        args = parse_argstring(self.cmd_code, rest)
        print(self._wb(read=True).code(args.version), end="")

    @subcommand("eval", cell=True)
    @magic_arguments(name="uac eval")
    @argument("expr", nargs="+", help="a Python expression over `user` (the rest of the line)")
    def cmd_eval(self, rest: str, cell: str | None) -> Any:
        """Evaluate a Python expression over the state in the sandbox and return its value:
        ``n = %uac eval len(user.all(Trip))``. ``%%uac eval`` takes the expression as the body.
        A value that would print past 100 kB comes back whole, as its own type (list, dict,
        str, int) that prints only its first 100 kB and says how much is left out."""
        expr = (cell if cell is not None else rest).strip()
        if not expr:
            raise UsageError("usage: %uac eval EXPR — e.g. %uac eval len(user.all(Trip))")
        value = self._wb(read=True).eval(
            expr, cpu_seconds=self.cpu_seconds, memory_mb=self.memory_mb
        )
        # Whole, but one that would print past the budget prints a bounded view of itself.
        return clipped(value)

    @subcommand("sql", cell=True)
    @magic_arguments(name="uac sql")
    @argument(
        "--timeout", metavar="S", help="stop the query after S seconds (UacMagics.sql_timeout)"
    )
    @argument("query", nargs="+", help="SQL over one table per record type (or the cell body)")
    def cmd_sql(self, rest: str, cell: str | None) -> SqlResult:
        """Run SQL over one table per record type (``Trip``, ``Trip_history``); returns the
        ``SqlResult``, shown as a table of ``displaylimit`` rows. ``%%uac sql`` takes the body."""
        timeout, rest = self._timeout_option(rest)
        query = (cell if cell is not None else rest).strip()
        if not query:
            raise UsageError("usage: %%uac sql with the query as the cell body, or %uac sql QUERY")
        return self._wb(read=True).sql(query, timeout=timeout)

    def _timeout_option(self, rest: str) -> tuple[float | None, str]:
        """A leading `--timeout S` (else ``sql_timeout``; ``None`` leaves it to the
        environment) and the rest of the line as written."""
        match = re.match(r"\s*--timeout[ =](\S+)\s*", rest)
        if not match:
            return self.sql_timeout, rest
        try:
            return float(match.group(1)), rest[match.end() :]
        except ValueError:
            raise UsageError(f"--timeout {match.group(1)!r}: give a number of seconds") from None

    @subcommand("fleet", cell=True)
    @magic_arguments(name="uac fleet")
    @argument("words", nargs="*", help="DIR, sql [--timeout S] DIR QUERY, or run ... DIR JOB")
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
            import_on_fresh_stack("uac_kernel.render.charts")
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

    @subcommand("ask", cell=True)
    @magic_arguments(name="uac ask")
    @argument("question", nargs="+", help="a question about the user (the rest of the line)")
    def cmd_ask(self, rest: str, cell: str | None) -> Answer:
        """Answer a question with code the model writes (run in the sandbox); shows the answer,
        the code and what it rests on, and returns the ``Answer``.

        The question is the rest of the line, taken as written: ``%uac ask How many trips did
        I take?`` (a line ending in ``?`` reaches ``%uac``, not IPython's help). ``%%uac ask``
        takes it as the cell body."""
        question = _unquote(cell if cell is not None else rest)
        if not question:
            raise UsageError("usage: %uac ask QUESTION")
        answer = self._wb(read=True).ask(question)
        if not answer.ok:
            raise UsageError(
                _one_line(
                    f"no answer after {answer.attempts} attempts: {answer.error} "
                    f"(last code: {answer.expression})"
                )
            )
        return answer

    @subcommand("alerts")
    @magic_arguments(name="uac alerts")
    def cmd_alerts(self, rest: str, cell: str | None) -> None:
        """The alerts standing now, most severe first, with their evidence (an inspector
        widget; the text where widgets are not shown)."""
        parse_argstring(self.cmd_alerts, rest)
        wb = self._wb(read=True)

        def make() -> Any:
            from uac_kernel.notebook.widgets import AlertInspector

            return AlertInspector(wb)

        self._show(make, alerts_text(wb.alerts(), wb.constraint_of))

    @subcommand("constraint", cell=True)
    @magic_arguments(name="uac constraint")
    @argument("--key", default=None, help="the key of the cell's one constraint")
    @argument("--retract", default=None, metavar="KEY", help="retract constraint KEY (no cell)")
    @argument("--reason", default=None, help="why (logged with the events)")
    def cmd_constraint(self, rest: str, cell: str | None) -> None:
        """``%%uac constraint [--key K]``: put the constraints of a YAML or JSON cell in force
        (one constraint, a list, or a mapping of key: constraint; see docs/constraints.md).
        A key in force is updated, so re-running an edited cell changes the constraint.
        ``%uac constraint --retract KEY [--reason R]`` retracts one. The cell is read as data,
        never run."""
        self._constrain(parse_argstring(self.cmd_constraint, rest), cell)

    @subcommand("constrain", cell=True)
    @magic_arguments(name="uac constrain")
    @argument("--key", default=None, help="the key of the cell's one constraint")
    @argument("--retract", default=None, metavar="KEY", help="retract constraint KEY (no cell)")
    @argument("--reason", default=None, help="why (logged with the events)")
    def cmd_constrain(self, rest: str, cell: str | None) -> None:
        """``%%uac constrain``: the same as ``%%uac constraint`` (the CLI's verb)."""
        self._constrain(parse_argstring(self.cmd_constrain, rest), cell)

    def _constrain(self, args: Any, cell: str | None) -> None:
        reason = _unquote(args.reason) if args.reason else None
        if args.retract is not None:
            if cell is not None and cell.strip():
                raise UsageError("`--retract KEY` takes no cell body; use the line magic")
            report = self._wb().retract_constraint(_unquote(args.retract), reason)
            self._print_report(report)
            return
        if cell is None or not cell.strip():
            raise UsageError(
                "`%%uac constraint` is a cell magic: write the constraint in the cell as YAML "
                "or JSON (or retract one: %uac constraint --retract KEY)"
            )
        from uac_kernel.constraints.files import read_constraints

        key = _unquote(args.key) if args.key else None
        found = read_constraints(cell, "%%uac constraint", key)
        report = self._wb().constrain(found, reason=reason)
        print(printable(f"in force: {', '.join(report.constraints)}"))
        self._print_report(report)

    @subcommand("constraints")
    @magic_arguments(name="uac constraints")
    @argument("--history", action="store_true", help="every version, ended ones too")
    def cmd_constraints(self, rest: str, cell: str | None) -> Table:
        """The constraints in force (with ``--history`` every version): key, kind, title,
        since when, who proposed it and from what, and the rule it is compiled into."""
        args = parse_argstring(self.cmd_constraints, rest)
        from uac_kernel.constraints import rule_name

        shown = self._wb(read=True).constraints(history=args.history)
        rows = [
            (
                cv.key,
                cv.constraint.kind,
                cv.constraint.title,
                show(cv.valid_from),
                "retracted" if cv.retracted else show(cv.valid_to, "in force"),
                " ".join(x for x in (cv.author or "", *cv.derived_from) if x),
                rule_name(cv.key),
            )
            for cv in shown
        ]
        columns = ["key", "kind", "title", "since", "until", "from", "rule"]
        caption = plural(len(rows), "constraint") + ("" if args.history else " in force")
        return Table(columns, rows, self.displaylimit, caption=caption, wrap=["title"])

    @subcommand("vocab", cell=True)
    @magic_arguments(name="uac vocab")
    @argument("words", nargs="*", help="bind|unbind TARGET NAME, concepts or roles")
    @argument("--reason", default=None, help="why (logged with the bindings)")
    @argument(
        "--unbound",
        action="store_true",
        help="what looks like a date, deadline, amount, document or substance and no rule reads",
    )
    def cmd_vocab(self, rest: str, cell: str | None) -> Table | None:
        """``%uac vocab``: the user's bindings (type.field, concept, author, score, status,
        reason; held proposals last), in a widget that accepts or rejects each (the table where
        widgets are not shown); ``--unbound``: the types and fields that look like dates,
        deadlines, amounts, documents or substances and that no rule or constraint reads, with
        the bind that would change that. ``%uac vocab bind TYPE.FIELD CONCEPT`` (or ``TYPE ROLE``),
        ``unbind ...`` (a person's rejection), ``concepts``, ``roles`` (the catalogue). A
        ``%%uac vocab`` cell: one ``bind`` or ``unbind`` a line, appended as one batch."""
        from uac_kernel.vocab import listing

        args = parse_argstring(self.cmd_vocab, rest)
        words = [_unquote(w) for w in args.words]
        reason = _unquote(args.reason) if args.reason else ""
        if args.unbound:
            listing.listing_only(words)
            rows = listing.unwatched_rows(self._wb(read=True).unwatched())
            caption = plural(len(rows), "type or field", "types and fields") + " no rule reads"
            return Table(listing.UNWATCHED_COLUMNS, rows, self.displaylimit, caption=caption)
        if cell is not None and cell.strip():
            if words:
                raise UsageError("`%%uac vocab` takes its commands in the cell, not on its line")
            lines = listing.vocab_lines(cell)
        elif words in (["concepts"], ["roles"]):
            roles = words == ["roles"]
            columns = listing.ROLE_COLUMNS if roles else listing.CONCEPT_COLUMNS
            rows = listing.catalogue_rows(roles)
            return Table(columns, rows, self.displaylimit, caption=plural(len(rows), words[0][:-1]))
        elif words:
            lines = [listing.vocab_command(words)]
        else:
            wb = self._wb(read=True)
            rows = listing.binding_rows(wb.vocab())
            caption = plural(len(rows), "binding")
            table = Table(listing.BINDING_COLUMNS, rows, self.displaylimit, caption=caption)

            def make() -> Any:
                from uac_kernel.notebook.widgets import VocabView

                return VocabView(wb)

            self._show(make, table.text())
            return None
        wb = self._wb()
        given = [wb.binding(t, name, reason=reason, status=st) for t, name, st in lines]
        self._print_report(wb.bind_all(given))
        return None

    @subcommand("log")
    @magic_arguments(name="uac log")
    @argument("--kind", default=None, help="only events of this kind (utterance, fact, alert, ...)")
    @argument("--after", type=int, default=0, help="only events after this seq (text view)")
    @argument(
        "--limit",
        type=int,
        metavar="N",
        default=None,
        help="events per page (default: UacMagics.displaylimit; 0: all in the text view)",
    )
    def cmd_log(self, rest: str, cell: str | None) -> None:
        """Browse the user's events (a paging widget of ``--limit`` events a page; the first
        ``--limit`` as text). ``--limit`` defaults to ``displaylimit``."""
        args = parse_argstring(self.cmd_log, rest)
        shown = self.displaylimit if args.limit is None else args.limit
        if shown < 0:
            raise UsageError(f"--limit is a number of events, 0 or more, not {shown}")
        wb = self._wb(read=True)
        limit = shown if shown > 0 else None
        kinds = [args.kind] if args.kind else None
        events = wb.log(
            kinds=kinds, after_seq=args.after, limit=None if limit is None else limit + 1
        )
        caption = ""
        if limit is not None and len(events) > limit:
            events = events[:limit]
            caption = (
                f"the first {limit} events after seq {args.after}; "
                f"the next with `%uac log{f' --kind {args.kind}' if args.kind else ''}"
                f"{f' --limit {args.limit}' if args.limit is not None else ''} "
                f"--after {events[-1].seq}`"
            )
        table = Table(
            ["seq", "ts", "kind", "source", "summary"],
            [(e.seq, e.ts, e.kind, e.source, summary(e.kind, e.payload)) for e in events],
            0,
            caption,
            wrap=["summary"],
        )

        def make() -> Any:
            from uac_kernel.notebook.widgets import LogBrowser

            page_size = shown if shown > 0 else 50
            return LogBrowser(wb, page_size=page_size, **({"kind": args.kind} if args.kind else {}))

        self._show(make, table.text(), table._repr_html_())

    @subcommand("state")
    @magic_arguments(name="uac state")
    def cmd_state(self, rest: str, cell: str | None) -> None:
        """Explore the typed state (a widget; record counts per type as text)."""
        parse_argstring(self.cmd_state, rest)
        wb = self._wb(read=True)
        counts = wb.state.counts()
        table = Table(
            ["type", "current", "versions"],
            [(t, n, len(wb.state.history(t))) for t, n in sorted(counts.items())],
            0,
        )

        def make() -> Any:
            from uac_kernel.notebook.widgets import StateExplorer

            return StateExplorer(wb)

        self._show(make, table.text(), table._repr_html_())

    @subcommand("diff")
    @magic_arguments(name="uac diff")
    @argument("a", type=int, help="the older checkpoint")
    @argument("b", type=int, help="the newer checkpoint")
    def cmd_diff(self, rest: str, cell: str | None) -> None:
        """What changed from checkpoint A to B (a widget, and the summary as text)."""
        args = parse_argstring(self.cmd_diff, rest)
        wb = self._wb(read=True)
        d = wb.diff(args.a, args.b)
        lines = [d.summary()]
        lines += [f"  + type {t}" for t in d.new_types]
        lines += [f"  + fields of {t}: {', '.join(f)}" for t, f in d.new_fields.items()]
        lines += [f"  + {c.type} {c.key}" for c in d.added]
        lines += [f"  ~ {c.type} {c.key}: {', '.join(c.changed_fields)}" for c in d.changed]
        lines += [f"  - {c.type} {c.key}" for c in d.retracted]

        def make() -> Any:
            from uac_kernel.notebook.widgets import DiffView

            return DiffView(wb, args.a, args.b)

        self._show(make, "\n".join(lines))

    @subcommand("history")
    @magic_arguments(name="uac history")
    @argument("type", help="a record type, e.g. Trip")
    @argument("key", help="the record's key")
    def cmd_history(self, rest: str, cell: str | None) -> Table:
        """Every version of one record: when it held, whether it was retracted, what changed
        from the version before (the first: the fields it came with), the log events behind
        it and all its fields."""
        args = parse_argstring(self.cmd_history, rest)
        wb = self._wb(read=True)
        type_name, key = _unquote(args.type), _unquote(args.key)
        versions = wb.versions(type_name, key)
        rows = []
        before: dict[str, Any] = {}
        for r in versions:
            now = field_values(r)
            changed = {k: v for k, v in {**before, **now}.items() if v != before.get(k)}
            before = now
            fields = {k: v for k, v in now.items() if v is not None}
            rows.append((r.valid_from, r.valid_to, r.retracted, changed, r.sources, fields))
        return Table(
            ["valid_from", "valid_to", "retracted", "changed", "sources", "fields"],
            rows,
            self.displaylimit,
            caption=f"{type_name} {key!r}: {plural(len(versions), 'version')}",
            wrap=["changed"],
        )

    @subcommand("chart")
    @magic_arguments(name="uac chart")
    @argument("kind", choices=["events", "records", "alerts", "result"], help="what to draw")
    @argument(
        "--freq",
        default=None,
        choices=["day", "week", "month", "quarter", "year"],
        help="the period of events/records charts",
    )
    @argument("expr", nargs="*", help="for `result`: an expression (the rest of the line)")
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
        try:
            # The first import of Altair, deep in IPython's stack, can cost seconds more than
            # on a fresh one (CPython gh-142183); see uac_kernel.notebook.imports.
            import_on_fresh_stack("uac_kernel.render.charts")
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

    @subcommand("verify")
    @magic_arguments(name="uac verify")
    @argument(
        "--head", default=None, help="a head from %%uac head: the chains must pass through it"
    )
    @argument("--all", action="store_true", help="every user of the store, not only this one")
    def cmd_verify(self, rest: str, cell: str | None) -> None:
        """Re-compute the hash chains; an error if any past event, model call or checkpoint was
        changed, removed, or erased without a forget event."""
        args = parse_argstring(self.cmd_verify, rest)
        wb = self._wb()
        report = wb.verify(head=args.head, all_users=args.all)
        if not report.ok:
            raise UsageError(_one_line(report.summary(wb.store.path)))
        print(report.summary(wb.store.path))

    @subcommand("forget")
    @magic_arguments(name="uac forget")
    @argument("--record", nargs=2, metavar=("TYPE", "KEY"), help="one record")
    @argument("--source", help="the events of one source")
    @argument("--text", help="every event that holds this text (any case)")
    @argument("--dry-run", action="store_true", help="list what would go; change nothing")
    def cmd_forget(self, rest: str, cell: str | None) -> None:
        """Erase a record, a source's events or everything holding a text, everywhere uac
        copied it; a forget event records what was erased, never the content."""
        args = parse_argstring(self.cmd_forget, rest)
        record = args.record or (None, None)
        wb = self._wb(read=True)
        what = {"type": record[0], "key": record[1], "source": args.source, "text": args.text}
        plan = wb.forget(**what, dry_run=args.dry_run)
        if plan.empty:
            print("nothing matches; nothing to forget")
        elif args.dry_run:
            print(f"would forget: {plan.summary()}")
            for line in plan.lines():
                print(f"  {line}")
        else:
            print(f"forgot: {plan.summary()}; the store file was rewritten without them")

    @subcommand("head")
    @magic_arguments(name="uac head")
    def cmd_head(self, rest: str, cell: str | None) -> None:
        """This user's chain head: keep it elsewhere, check later with %uac verify --head."""
        parse_argstring(self.cmd_head, rest)
        print(self._wb().head())

    @subcommand("calls")
    @magic_arguments(name="uac calls")
    @argument("--all-users", action="store_true", help="the calls of every user of the store")
    def cmd_calls(self, rest: str, cell: str | None) -> None:
        """The recent model calls and the tokens spent per purpose: the cost ledger."""
        from uac_kernel.model.client import call_totals, list_calls

        args = parse_argstring(self.cmd_calls, rest)
        wb = self._wb(read=not args.all_users)
        user = None if args.all_users else wb.user
        limit = self.displaylimit if self.displaylimit > 0 else 1_000_000
        calls = list_calls(wb.store, user, limit=limit)
        display(
            Table(
                ["call", "at", "purpose", "model", "tokens in", "tokens out", "ms", "outcome"],
                [
                    (
                        c.call_id,
                        c.created_at.strftime("%Y-%m-%d %H:%M:%S"),
                        c.purpose,
                        c.model,
                        c.tokens_in,
                        c.tokens_out,
                        f"{c.latency_ms:.0f}",
                        c.outcome,
                    )
                    for c in calls
                ],
                0,
                caption=f"the last {len(calls)} model calls",
            ),
            Table(
                ["purpose", "calls", "failed", "tokens in", "tokens out"],
                call_totals(wb.store, user),
                0,
                caption="per purpose",
            ),
        )

    # -- the model as editable cells ------------------------------------------------------------

    @subcommand("edit")
    @magic_arguments(name="uac edit")
    @argument("part", nargs="?", help="schema, a record type (e.g. Trip) or rules")
    @argument("--version", type=int, default=None, help="the checkpoint (default: the latest)")
    @argument(
        "--key",
        action="extend",
        nargs="+",
        metavar="KEY",
        help="only the records with these keys (one or several; repeatable)",
    )
    @argument(
        "--where",
        metavar="EXPR",
        help="""only the records r for which EXPR is true, e.g. --where "r.country == 'Japan'" """,
    )
    @argument("--last", type=int, metavar="N", help="only the N most recently changed records")
    @argument("--print", action="store_true", help="also print the code below the cell")
    @argument("--all", action="store_true", help="list a command for every part")
    def cmd_edit(self, rest: str, cell: str | None) -> None:
        """Turn this cell into one part of a checkpoint, as code to edit and run.

        The cell is replaced by ``%%uac cell --version N --part PART`` and the part's code
        (running ``%uac edit`` again is harmless: it replaces the same cell); the output is a
        one-line note on what the cell holds. ``--print`` also prints the code, for front-ends
        that ignore the replacement. Without ``--version`` the latest checkpoint is used, taken
        anew first if the log moved past it.

        Of a record type, ``--key``, ``--where`` and ``--last`` put only some records in the
        cell (together they narrow each other): ``--where`` is a query expression over one
        record ``r``, run in the sandbox like ``%uac eval``; ``--last N`` picks the N records
        the latest log events changed or created. Quote a value with spaces or quotes as a
        Python string literal: ``--key 'tokyo 2025'``. The cell line repeats the selection,
        and running the cell answers for the selected records only: a selected record deleted
        from the cell is retracted, a new one is added, the others stay as they are.

        ``--all`` lists a ready ``%uac edit`` command for every part, one cell each: a cell
        can create at most one cell (JupyterLab inserts only one per execution).
        """
        from uac_kernel.notebook import cellargs as _cellargs

        args = _cellargs.parse(self.cmd_edit, rest)
        wb = self._wb()
        version = args.version
        if version is None:
            latest = wb.checkpoints.latest()
            if latest is None or latest.seq != wb.state.seq:
                cp = wb.checkpoint()
                why = (
                    "no checkpoint yet"
                    if latest is None
                    else f"the log moved past checkpoint {latest.version}"
                )
                print(f"uac: {why}; took checkpoint {cp.version}")
                version = cp.version
            else:
                version = latest.version
        parts = wb.parts(version)
        if args.all:
            if args.part:
                raise UsageError("`%uac edit --all` takes no part")
            self._print_parts(wb, version, pinned=True)
            return
        if not args.part:
            raise UsageError(
                f"usage: %uac edit PART; parts of checkpoint {version}: {', '.join(parts)}"
            )
        part = _unquote(args.part)
        if part not in parts:
            raise UsageError(
                f"checkpoint {version} has no part {part!r}.{did_you_mean(part, parts)} "
                f"Parts: {', '.join(parts)}"
            )
        made = wb.edit_cell(part, version, key=args.key, where=args.where, last=args.last)
        code = made.code
        if part == "rules":
            code += self._idle_rules(wb)
        text = f"{_cellargs.header(made)}\n{code.rstrip()}\n"
        if self.shell is not None:
            self.shell.set_next_input(text, replace=True)
        print(_cellargs.note(made))
        if args.print or self.shell is None:
            print(text, end="")

    @staticmethod
    def _idle_rules(wb: Workbench) -> str:
        """Notebook rules the log holds but this session has not put in force, as code."""
        idle = [r for r in wb.stored_rules() if r["name"] not in wb.runner.rules]
        if not idle:
            return ""
        text = (
            "\n\n# Written in a notebook and logged, but not in force in this session.\n"
            "# Running this cell puts them in force; delete any you do not trust.\n"
        )
        return text + "".join(f"\n\n{r['source'].strip()}\n" for r in idle)

    @subcommand("cell", cell=True)
    @magic_arguments(name="uac cell")
    @argument("--version", type=int, required=True, help="the checkpoint the cell came from")
    @argument("--part", required=True, help="the part the cell holds")
    @argument("--key", action="extend", nargs="+", metavar="KEY", help="the cell's selection")
    @argument("--where", metavar="EXPR", help="the cell's selection")
    @argument("--last", type=int, metavar="N", help="the cell's selection")
    @argument(
        "--dry-run",
        action="store_true",
        help="show what the edit would change (records, alerts, answers); append nothing",
    )
    def cmd_cell(self, rest: str, cell: str | None) -> None:
        """``%%uac cell --version N --part PART``: apply an edited part (made by ``%uac edit``).

        The records are read as literals, never run, and what changed becomes correction
        events; if the log moved on since version N, edits to records nobody else touched are
        merged and overlapping ones refused. With ``--key``/``--where``/``--last`` (the
        selection ``%uac edit`` made the cell with, picked again from version N) only a
        selected record missing from the cell is retracted; the others stay as they are.
        ``@rule`` functions in the cell — and only they — are compiled and run in the user
        namespace (with ``rule``, ``Finding``, ``date``, ``datetime``, ``timedelta``), then put
        in force with their source logged. A rule must be self-contained: other code in the
        cell is not run. Then a checkpoint is taken.

        With ``--dry-run`` nothing is appended and no rule is run: the edit is shown as a
        what-if (``%%uac whatif``) — the records it would add, change or retract, the alerts it
        would raise or clear, the answers that would change. Run the cell without it to apply.
        """
        if cell is None:
            raise UsageError(
                "`%%uac cell` is a cell magic; make one with `%uac edit PART` (e.g. %uac edit rules)"
            )
        from uac_kernel.notebook import cellargs as _cellargs

        args = _cellargs.parse(self.cmd_cell, rest)
        wb = self._wb()
        part = _unquote(args.part)
        if args.dry_run:
            self._preview_cell(wb, cell, args, part)
            return
        rules = self._compile_rules(cell, f"%%uac cell {rest.strip()}")
        before = wb.state.seq
        plan, report = wb.apply_edit(
            cell, version=args.version, part=part, key=args.key, where=args.where, last=args.last
        )
        lines = [f"{part}, edited from checkpoint {args.version}: {plan.summary()}"]
        if report.appended:
            lines[0] += f" ({plural(report.appended, 'correction event')} appended)"
        lines += [_alert_line("raised", a) for a in report.raised]
        lines += [_alert_line("updated", a) for a in report.updated]
        lines += [_alert_line("cleared", a) for a in report.cleared]
        for r, source in rules:
            change = wb.define_rule(r, source)
            standing = sum(1 for a in wb.alerts() if a.rule == r.name)
            lines.append(f"rule {r.name}: in force, {plural(standing, 'alert')} standing")
            lines += [_alert_line("raised", a) for a in change.raised]
            lines += [_alert_line("updated", a) for a in change.updated]
            lines += [_alert_line("cleared", a) for a in change.cleared]
        if wb.state.seq != before:
            cp = wb.checkpoint()
            again = _cellargs.selection(args.key, args.where, args.last)
            lines.append(
                f"checkpoint {cp.version} taken; run this cell again after more edits, or "
                f"continue from the new version with `%uac edit {part} --version {cp.version}"
                f"{again}`"
            )
        print("\n".join(lines))

    def _preview_cell(self, wb: Workbench, cell: str, args: Any, part: str) -> None:
        """``%%uac cell ... --dry-run``: what applying the cell would do, as a what-if."""
        plan, w = wb.preview_edit(
            cell, version=args.version, part=part, key=args.key, where=args.where, last=args.last
        )
        head = [
            f"{part}, edited from checkpoint {args.version} (dry run): {plan.summary()}; "
            "nothing appended — run the cell without --dry-run to apply it"
        ]
        if plan.rules:
            names = ", ".join(r.name for r in plan.rules)
            head.append(f"rules in the cell, not run in a dry run: {names}")
        self._show_whatif(wb, w, head)

    def _compile_rules(self, body: str, header: str) -> list[tuple[Rule, str]]:
        """Define the ``@rule`` functions of a cell in the user namespace (not yet in force).

        Only those FunctionDef nodes are compiled — never the data of the cell. Their text is
        kept in ``linecache`` under the cell's line numbers, so tracebacks and the checkpoint's
        code (which reads a rule's source) show what was written.
        """
        from uac_kernel.checkpoints.edits import rule_sources, source_lines

        wanted = {s.name for s in rule_sources(body)}  # CodeError on a syntax error
        if not wanted:
            return []
        tree = ast.parse(body)
        lines = source_lines(body)
        digest = hashlib.sha256(body.encode()).hexdigest()[:12]
        filename = f"<uac cell {digest}>"
        cached = [header + "\n", *(ln if ln.endswith("\n") else ln + "\n" for ln in lines)]
        linecache.cache[filename] = (sum(map(len, cached)), None, cached, filename)
        ns = self.shell.user_ns if self.shell is not None else {}
        for name, helper in RULE_HELPERS.items():
            ns.setdefault(name, helper)
        defined: dict[str, tuple[Rule, str]] = {}
        for node in tree.body:
            if not (
                isinstance(node, ast.FunctionDef) and node.name in wanted and node.decorator_list
            ):
                continue
            first = min(d.lineno for d in node.decorator_list)
            source = "".join(lines[first - 1 : node.end_lineno])
            ast.increment_lineno(node, 1)  # the header line above the body
            code = compile(ast.Module(body=[node], type_ignores=[]), filename, "exec")
            exec(code, ns)
            obj = ns.get(node.name)
            if not isinstance(obj, Rule):
                raise UsageError(
                    f"{node.name} is not a rule after its definition ran: is `rule` in your "
                    "namespace uac's decorator? (from uac import rule)"
                )
            defined[obj.name] = (obj, source.rstrip() + "\n")
        return list(defined.values())

    # -- what-ifs -------------------------------------------------------------------------------

    @subcommand("whatif", cell=True)
    @magic_arguments(name="uac whatif")
    @argument("var", nargs="?", help="a Python list of event dicts in the namespace (no cell)")
    @argument(
        "--as-of",
        metavar="DATE",
        help="insert the events at DATE and replay the later log on top (a past what-if)",
    )
    @argument(
        "--expr",
        action="append",
        metavar="EXPR",
        help="an expression over `user` to re-run before and after (repeatable; default: "
        "those this session evaluated or asked)",
    )
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
        from uac_kernel.engine.whatif import moment

        as_of = moment(_unquote(args.as_of)) if args.as_of else None
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

    def _show_whatif(self, wb: Workbench, w: WhatIf, head: Sequence[str] = ()) -> None:
        """The what-if's report: its widget (with the Apply button) when there is one, else
        the text and HTML; ``head`` lines come first."""
        from uac_kernel.notebook.widgets import WhatIfWidget
        from uac_kernel.render.whatif_face import report_html, report_lines

        if head:
            print("\n".join(printable(h) for h in head))
        self._show(lambda: WhatIfWidget(wb, w), "\n".join(report_lines(w)), report_html(w))

    # -- widgets --------------------------------------------------------------------------------

    def _show(self, make: Callable[[], Any], text: str, html_text: str | None = None) -> None:
        """Display a widget with ``text`` as its text/plain fallback; only the text when the
        widget cannot be made (anywidget not installed)."""
        try:
            widget = make()
        except ImportError as exc:
            bundle = {"text/plain": text}
            if html_text is not None:
                bundle["text/html"] = html_text
            display(bundle, raw=True)
            print(f"(the interactive view needs anywidget: {exc})")
            return
        formatter = self.shell.display_formatter if self.shell is not None else None
        if formatter is None:
            display(widget)
            return
        data, metadata = formatter.format(widget)
        data["text/plain"] = text
        display(data, metadata=metadata, raw=True)


def _register_formatters(ip: InteractiveShell, magics: UacMagics) -> None:
    """Engine results returned by a magic (or a plain cell) draw as tables and answers."""
    if ip.display_formatter is None:
        return
    formatters = ip.display_formatter.formatters

    def sql_table(result: SqlResult) -> Table:
        return Table(result.columns, result.rows, magics.displaylimit)

    formatters["text/html"].for_type(SqlResult, lambda r: sql_table(r)._repr_html_())
    formatters["text/plain"].for_type(SqlResult, lambda r, p, cycle: p.text(sql_table(r).text()))
    formatters["text/html"].for_type(Answer, _answer_html)
    formatters["text/plain"].for_type(Answer, lambda a, p, cycle: p.text(answer_text(a)))


def load_ipython_extension(ip: InteractiveShell) -> None:
    """``%load_ext uac``: register ``%uac`` / ``%%uac``, the display of engine results and
    the input transformer that lets ``%uac ask How many trips?`` end in ``?`` unquoted."""
    magics = UacMagics(shell=ip)
    ip.register_magics(magics)
    _register_formatters(ip, magics)
    # Every workbench operation releases the store; a cell that used `wb.store` directly is
    # released here, so the notebook never keeps a terminal out between cells.
    ip.events.register("post_run_cell", magics.release_store)
    # After IPython's own cleanup transforms, before its help (`obj?`) and magic handling.
    if ask_line not in ip.input_transformers_cleanup:
        ip.input_transformers_cleanup.append(ask_line)
    if not ip.custom_exceptions:  # a handler the user set stays theirs
        ip.set_custom_exc((UacError,), _one_line_error)


def _one_line_error(
    shell: InteractiveShell, etype: type, value: BaseException, tb: Any, tb_offset: Any = None
) -> list[str]:
    """A uac error raised by a call in a cell (``save_chart``, ``wb.ask``) shows as its one
    line, as a magic's ``UsageError`` does; ``%tb`` still shows where it was raised."""
    sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb
    if sys.version_info >= (3, 12):
        sys.last_exc = value
    stb = [f"{etype.__name__}: {value}"]
    shell._showtraceback(etype, value, stb)
    return stb


def unload_ipython_extension(ip: InteractiveShell) -> None:
    """Close the open workbench and remove the magics, the result displays and the
    input transformer."""
    registry = ip.magics_manager.registry
    magics = registry.pop(UacMagics.__name__, None)
    if isinstance(magics, UacMagics):
        magics._close()
        if magics.release_store in ip.events.callbacks["post_run_cell"]:
            ip.events.unregister("post_run_cell", magics.release_store)
        if magics in ip.configurables:
            ip.configurables.remove(magics)  # type: ignore[arg-type]
    for kind in ("line", "cell"):
        ip.magics_manager.magics[kind].pop("uac", None)
    while ask_line in ip.input_transformers_cleanup:
        ip.input_transformers_cleanup.remove(ask_line)
    if ip.custom_exceptions == (UacError,):
        ip.set_custom_exc((), None)
    if ip.display_formatter is not None:
        for mime in ("text/html", "text/plain"):
            for typ in (SqlResult, Answer):
                ip.display_formatter.formatters[mime].pop(typ, None)
