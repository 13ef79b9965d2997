"""The `uac` commands over the user's state and code: eval, sql, alerts, state, history,
checkpoint(s), code, diff, whatif, constrain, constraints, vocab."""

from __future__ import annotations

import argparse
import importlib.util
import keyword
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uac_kernel.cli.opening import _open, _open_user
from uac_kernel.cli.output import (
    _output,
    _print_json,
    _print_listing,
    _print_listing_json,
    print_result,
    sql_output,
    to_json,
)
from uac_kernel.core.display import plural, printable
from uac_kernel.core.errors import CommandLineError, UacError
from uac_kernel.core.faces import CLI
from uac_kernel.render.alerts import alerts_lines
from uac_kernel.render.checkpoint import checkpoint_lines, diff_lines
from uac_kernel.render.history import history_json, history_listing, made_by
from uac_kernel.render.listings import (
    checkpoints_listing,
    constraints_listing,
    state_listing,
    vocab_listing,
)
from uac_kernel.render.reports import bound_lines, in_force_lines, retracted_lines

if TYPE_CHECKING:
    from uac_kernel.core.outputs import Output
    from uac_kernel.render.table import Listing

__all__ = [
    "cmd_alerts",
    "cmd_checkpoint",
    "cmd_checkpoints",
    "cmd_code",
    "cmd_constrain",
    "cmd_constraints",
    "cmd_diff",
    "cmd_eval",
    "cmd_history",
    "cmd_sql",
    "cmd_state",
    "cmd_vocab",
    "cmd_whatif",
]


def cmd_checkpoint(args: argparse.Namespace) -> None:
    with _open(args) as wb:
        for line in checkpoint_lines(wb.checkpoint(), CLI):
            print(line)


def cmd_checkpoints(args: argparse.Namespace) -> None:
    from uac_kernel.checkpoints.checkpoint import Checkpoints

    store, user = _open_user(args)
    try:
        checkpoints = Checkpoints(store, user).all()
    finally:
        store.close()
    _print_listing(checkpoints_listing(checkpoints, user, CLI))


def cmd_code(args: argparse.Namespace) -> None:
    from uac_kernel.checkpoints.checkpoint import Checkpoints
    from uac_kernel.core.outputs import PYTHON

    if args.out is not None:
        _check_module_name(args.out)
    target = _output(args, "out", PYTHON)
    # A stored version's code (the latest without --version): read, never rendered, so no fold.
    store, user = _open_user(args)
    try:
        code = Checkpoints(store, user).get(args.version).code
    finally:
        store.close()
    if target is None:
        sys.stdout.write(code)
        return
    target.write_text([code])
    lines = plural(len(code.splitlines()), "line")
    # the stem is an identifier (_check_module_name): nothing to escape
    print(f"{target.wrote(lines)}; `import {Path(args.out).stem}` from its folder")


def _check_module_name(path: str) -> None:
    """``uac code --out``'s file must be importable by its name, and hide no installed module."""
    out = Path(path)
    stem = out.stem
    if not out.name.endswith(".py") or not stem.isidentifier() or keyword.iskeyword(stem):
        raise UacError(
            f"--out {path!r}: name the file like a Python module (e.g. maya_model.py), "
            "so that `import maya_model` finds it"
        )
    if importlib.util.find_spec(stem) is not None or stem in sys.stdlib_module_names:
        # the module would hide it (or be hidden), and the checkpoint imports datetime and uac
        raise UacError(f"--out {path!r}: {stem!r} is the name of an installed module; pick another")


def cmd_diff(args: argparse.Namespace) -> None:
    with _open(args, read_only=True) as wb:
        for line in diff_lines(wb.diff(args.a, args.b)):
            print(line)


def cmd_eval(args: argparse.Namespace) -> None:
    from uac_kernel.core.outputs import JSON

    out = _output(args, "out", JSON)
    with _open(args, read_only=True) as wb:
        value = wb.eval(args.expr)
    _print_json(value, out)


def cmd_sql(args: argparse.Namespace) -> None:
    out = sql_output(args)
    with _open(args, read_only=True) as wb:
        result = wb.sql(args.query, timeout=args.timeout)
    print_result(result, args, out)


def cmd_alerts(args: argparse.Namespace) -> None:
    with _open(args, read_only=True) as wb:
        alerts = wb.alerts()
        if args.json:
            print(printable(to_json([a.model_dump(mode="json") for a in alerts])))
            return
        for line in alerts_lines(alerts, wb.constraint_of):
            print(line)


def cmd_whatif(args: argparse.Namespace) -> None:
    """Fold a file of hypothetical events onto a copy of the user's state and print what would
    change. The store is opened read-only: nothing is appended, nothing is written to it."""
    from uac_kernel.core.errors import EventError

    # The inputs are checked before the store is opened, so a mistyped name costs no fold. A
    # FIFO would block the open, and a device (/dev/zero) never ends: only files are read.
    try:
        regular = Path(args.file).stat().st_mode
    except OSError as exc:
        raise EventError(
            f"cannot read the file: {exc.strerror}; check the path", origin=args.file
        ) from exc
    if not stat.S_ISREG(regular):
        raise EventError("not a file (a directory, pipe or device); name a file", origin=args.file)
    if args.chart is not None and args.as_of is None:
        raise CommandLineError(
            "--chart draws the alert timelines of a past what-if: give --as-of DATE too"
        )
    chart = None
    if args.chart is not None:
        from uac_kernel.core.outputs import CHART_KINDS

        kind = CHART_KINDS.get(Path(args.chart).suffix.lower())
        if kind is None:
            raise CommandLineError(
                f"--chart {args.chart!r}: name a .svg, .png or .html file (drawn offline)"
            )
        chart = _output(args, "chart", kind)
    with _open(args, read_only=True) as wb:
        events = _whatif_events(args.file)
        w = wb.whatif(events, as_of=args.as_of, expressions=args.expr, origin=args.file)
    if args.json:
        _print_json(w.to_dict(), None)
    else:
        from uac_kernel.render.whatif_face import report_lines

        print("\n".join(report_lines(w)))
    if chart is not None:
        _save_whatif_chart(w, chart)


def _whatif_events(file: str) -> Any:
    """What ``Workbench.whatif`` reads: the path of an Event JSONL file as it is (read line by
    line, within the ingest bounds); a ``.yaml``/``.yml``/``.json`` file's events, parsed as a
    ``%%uac whatif`` cell's body is (a list of mappings, or ``---``-separated ones)."""
    if Path(file).suffix.lower() not in (".yaml", ".yml", ".json"):
        return file
    from uac_kernel.core.errors import EventError
    from uac_kernel.engine.whatif import MAX_TEXT_CHARS, events_from_text

    try:
        with Path(file).open("rb") as f:
            raw = f.read(4 * MAX_TEXT_CHARS + 1)  # UTF-8 takes at most 4 bytes a character
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        raise EventError(f"cannot read the file: {why}", origin=file) from None
    if len(raw) > 4 * MAX_TEXT_CHARS or len(text) > MAX_TEXT_CHARS:
        raise EventError(
            f"more than {MAX_TEXT_CHARS:,} characters of YAML or JSON; write the events as Event "
            "JSONL (.jsonl), which is read a line at a time",
            origin=file,
        )
    return events_from_text(text, file)


def _save_whatif_chart(w: Any, out: Output) -> None:
    """The real and the what-if alert timelines, drawn offline into ``out``."""
    from uac_kernel.render import charts

    charts.save_chart(charts.whatif_timeline(w), out)
    print(out.wrote("the alert timelines, real and what-if"))


def cmd_constrain(args: argparse.Namespace) -> None:
    if args.retract is not None:
        if args.file is not None or args.key is not None:
            raise CommandLineError("--retract KEY takes no FILE or --key; give one or the other")
        with _open(args) as wb:
            print("\n".join(retracted_lines(wb.retract_constraint(args.retract, args.reason))))
        return
    if args.file is None:
        raise CommandLineError("give a YAML or JSON FILE of constraints, or --retract KEY")
    from uac_kernel.constraints.files import constraints_of_file

    found = constraints_of_file(args.file, args.key)
    with _open(args, create=True) as wb:
        report = wb.constrain(found, source=args.source, reason=args.reason, origin=args.file)
        for warning in report.warnings:
            print(printable(warning), file=sys.stderr)
        print("\n".join(in_force_lines(report)))


def cmd_constraints(args: argparse.Namespace) -> None:
    from uac_kernel.constraints import constraint_json

    with _open(args, read_only=True) as wb:
        shown = wb.constraints(history=args.history)
        if args.json:
            rows = [
                {
                    "key": cv.key,
                    "kind": cv.constraint.kind,
                    "title": cv.constraint.title,
                    "since": cv.valid_from,
                    "until": cv.valid_to,
                    "retracted": cv.retracted,
                    "author": cv.author,
                    "derived_from": cv.derived_from,
                    "rule": cv.rule,
                    "constraint": constraint_json(cv.constraint),
                }
                for cv in shown
            ]
            print(printable(to_json(rows)))
            return
        _print_listing(constraints_listing(shown, args.history))


def cmd_vocab(args: argparse.Namespace) -> None:
    from uac_kernel.vocab import listing

    words = list(args.words)
    if args.unbound:
        listing.listing_only(words)
        with _open(args, read_only=True) as wb:
            _vocab_listing(vocab_listing("unbound", listing.unwatched_rows(wb.unwatched())), args)
        return
    if words[:1] in (["concepts"], ["roles"]) and len(words) == 1:
        rows = listing.catalogue_rows(words[0] == "roles")
        _vocab_listing(vocab_listing(words[0], rows), args)
        return
    if words:
        target, name, status = listing.vocab_command(words)
        with _open(args) as wb:
            report = wb.bind(target, name, reason=args.reason or "", status=status)
            print("\n".join(bound_lines(report)))
        return
    with _open(args, read_only=True) as wb:
        _vocab_listing(vocab_listing("bindings", listing.binding_rows(wb.vocab())), args)


def _vocab_listing(shown: Listing, args: argparse.Namespace) -> None:
    if args.json:
        _print_listing_json(shown)
    else:
        _print_listing(shown)


def cmd_state(args: argparse.Namespace) -> None:
    with _open(args, read_only=True) as wb:
        counts = wb.state.counts()
        versions = {name: len(wb.state.history(name)) for name in counts}
    _print_listing(state_listing(counts, versions))


def cmd_history(args: argparse.Namespace) -> None:
    with _open(args, read_only=True) as wb:
        versions = wb.versions(args.type, args.key)
        events = wb.store.events_at(wb.user, made_by(versions))
        what = (args.type, args.key, wb.user, versions, events)
    if args.json:
        print(printable(to_json(history_json(*what))))
        return
    listing = history_listing(*what)
    print(printable(listing.caption))  # the header: whose record, how many versions
    _print_listing(listing)
