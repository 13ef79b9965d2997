"""The ``uac`` command: a thin face over ``Workbench``. Every error is one line and exit code 1."""

from __future__ import annotations

import argparse
import importlib.util
import json
import keyword
import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from uac_kernel.cli.fleet import add_fleet_queries
from uac_kernel.cli.options import FORCE_HELP, sql_options
from uac_kernel.core import settings
from uac_kernel.core.display import plural, printable
from uac_kernel.core.errors import CommandLineError, QueryError, UacError
from uac_kernel.ingest.adapters import FORMATS, read_histories

if TYPE_CHECKING:
    from uac_kernel.core.outputs import Kind, Output
    from uac_kernel.log.store import Store
    from uac_kernel.model.extract import ExtractionReport
    from uac_kernel.sql.view import SqlResult
    from uac_kernel.workbench import IngestReport, Workbench

# The engine (pydantic models, DuckDB, the sandbox) and the model layer (openai) are imported by
# the commands that use them, so `uac --help` starts in the time of Python and argparse
# (bench/startup.py measures it; tests/test_startup.py checks what `import uac_kernel.cli.main` loads).

__all__ = ["main", "run"]

DEFAULT_DB = "uac.duckdb"
DEMO_DB = "uac-demo.duckdb"
# How the model settings are given here, for ModelSettings.resolve's messages (see model_options).
MODEL_FLAGS = {"model": "--model NAME", "base_url": "--base-url URL", "offline": "--offline"}


def to_json(value: Any) -> str:
    def default(v: Any) -> Any:
        if isinstance(v, (date, datetime)):
            return v.isoformat()
        if isinstance(v, timedelta):
            return v.total_seconds()
        if isinstance(v, (set, frozenset, tuple)):
            return list(v)
        return str(v)

    return json.dumps(value, ensure_ascii=False, default=default, indent=None)


def _row(*cells: Any) -> None:
    """Print one tab-separated line; each cell (a user id, a model name, any stored text) with
    its control and invisible characters escaped, so it cannot drive the terminal."""
    print("\t".join(printable(str(c)) for c in cells))


def _open(args: argparse.Namespace, *, read_only: bool = False, create: bool = False) -> Workbench:
    """The workbench of ``--user`` (default: the store's only user) in ``--db``.

    Only ``ingest`` creates (a store, a user); for every other command a missing store or a
    user with no events is an error that names the users the store holds.
    """
    from uac_kernel.workbench import Workbench

    if not create:
        _check_default_db(args)
    model = None
    if hasattr(args, "model"):  # only the commands that call a model load the model layer
        from uac_kernel.model.client import ModelSettings

        model = ModelSettings.resolve(
            model=args.model,
            base_url=args.base_url,
            offline=True if args.offline else None,
            spelled=MODEL_FLAGS,
        )
    wb = Workbench(args.db, user=args.user, read_only=read_only, create=create, model=model)
    if args.keep is not None:
        args.keep.append(wb)  # see run(): its state is not freed before the process ends
    return wb


def _open_store(args: argparse.Namespace) -> Store:
    """The store itself, read-only, for the commands about the whole store (no one user)."""
    from uac_kernel.log.store import Store

    _check_default_db(args)
    return Store(args.db, read_only=True)


def _open_user(args: argparse.Namespace) -> tuple[Store, str]:
    """The store, read-only, and the user of ``--user`` (default: its only user) in it, for
    the commands that read the log or the checkpoints: they need no fold of the user's state,
    so they answer in the time of a query, whatever the size of the history."""
    from uac_kernel.log.users import resolve_user

    store = _open_store(args)
    try:
        return store, resolve_user(store, args.user, create=False)
    except BaseException:
        store.close()
        raise


def _check_default_db(args: argparse.Namespace) -> None:
    """Right after `uac demo` the store is uac-demo.duckdb, not the default: say so."""
    if not args.db_given and not Path(args.db).exists() and Path(DEMO_DB).exists():
        raise UacError(
            f"no store at {args.db} (the default; env UAC_DB); the demo's store is here: "
            f"pass --db {DEMO_DB}"
        )


def _print_report(report: IngestReport | ExtractionReport, prefix: str = "") -> None:
    """The summary, then every alert raised, moved to another severity or cleared, in full;
    a cleared one with why it cleared."""
    print(printable(prefix + report.summary()))
    for verb, alerts in (("raised", report.raised), ("updated", report.updated)):
        for alert in alerts:
            print(f"  {verb} [{alert.severity}] {printable(alert.message)}")
    for alert in report.cleared:
        print(f"  cleared [{alert.severity}] {printable(alert.message)}")
        if alert.reason:
            print(f"      why: {printable(alert.reason)}")


def cmd_ingest(args: argparse.Namespace) -> None:
    from uac_kernel.core.errors import EventError

    # The input is checked before the store is opened, so a mistyped file creates no store.
    try:
        Path(args.file).open("rb").close()
    except OSError as exc:
        raise EventError(
            f"cannot read the file: {exc.strerror}; check the path", origin=args.file
        ) from exc
    created = not Path(args.db).exists()
    try:
        _ingest(args)
    except UacError:
        if created:
            _remove_if_empty(args.db)  # a batch lands whole or not at all: maybe nothing did
        raise


def _ingest(args: argparse.Namespace) -> None:
    if args.per_history:
        # One user per conversation of the file; one workbench at a time (one writer per store).
        from uac_kernel.workbench import Workbench

        fmt = None if args.format == "auto" else args.format
        for key, batch in read_histories(args.file, fmt):
            with Workbench(args.db, user=key or args.user) as wb:
                _print_report(wb.append_parsed(batch), f"{wb.user}: ")
        return
    with _open(args, create=True) as wb:
        _print_report(wb.ingest(args.file, format=args.format, history=args.history))


def _remove_if_empty(path: str) -> None:
    """Remove a store this command created if a failed ingest left no event in it."""
    from uac_kernel.log.store import Store

    try:
        store = Store(path, read_only=True)
    except UacError:
        return
    try:
        empty = not store.user_counts()
    finally:
        store.close()
    if empty:
        Path(path).unlink(missing_ok=True)
        Path(f"{path}.wal").unlink(missing_ok=True)


def cmd_checkpoint(args: argparse.Namespace) -> None:
    with _open(args) as wb:
        cp = wb.checkpoint()
        print(f"{cp.summary()}; show it with `uac code --version {cp.version}`")


def cmd_checkpoints(args: argparse.Namespace) -> None:
    from uac_kernel.checkpoints.checkpoint import Checkpoints

    store, user = _open_user(args)
    try:
        checkpoints = Checkpoints(store, user).all()
    finally:
        store.close()
    if not checkpoints:
        print(printable(f"no checkpoints yet for {user}; take one with `uac checkpoint`"))
    for cp in checkpoints:
        _row(
            cp.version,
            f"seq {cp.seq}",
            plural(cp.records, "record"),
            f"{cp.created_at:%Y-%m-%d %H:%M:%S}",
        )


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
        d = wb.diff(args.a, args.b)
        print(d.summary())
        for t in d.new_types:
            print(printable(f"  + type {t}"))
        for t, fields in d.new_fields.items():
            print(printable(f"  + fields of {t}: {', '.join(fields)}"))
        for c in d.added:
            print(printable(f"  + {c.type} {c.key}: {to_json(c.after)}"))
        for c in d.changed:
            changes = {
                f: [(c.before or {}).get(f), (c.after or {}).get(f)] for f in c.changed_fields
            }
            print(printable(f"  ~ {c.type} {c.key}: {to_json(changes)}"))
        for c in d.retracted:
            print(printable(f"  - {c.type} {c.key}"))


def _output(args: argparse.Namespace, option: str, kind: Kind) -> Output | None:
    """The file of ``--option`` (None if not given), checked now, before any work: never the
    store the command reads (``--db``), a file of another kind only with ``--force``."""
    from uac_kernel.core.outputs import Output

    path = getattr(args, option)
    if path is None:
        return None
    target = Output(path, kind, force=args.force, protect=(args.db,), what=f"--{option}")
    target.check()
    return target


def _print_json(value: Any, out: Output | None) -> None:
    """The result as JSON: whole into ``out``, else cut at the terminal budget with a note on
    stderr that says how to get the rest."""
    from uac_kernel.core.display import clip_json, json_chunks

    if out is not None:
        written = out.write_text(json_chunks(value))
        print(out.wrote(f"{written:,} characters of JSON"))
        return
    text, note = clip_json(value)
    print(text)
    if note:
        print(f"{note}; write it whole with --out FILE", file=sys.stderr)


def cmd_eval(args: argparse.Namespace) -> None:
    from uac_kernel.core.outputs import JSON

    out = _output(args, "out", JSON)
    with _open(args, read_only=True) as wb:
        value = wb.eval(args.expr)
    _print_json(value, out)


def _tsv(columns: list[str], rows: Iterable[Sequence[Any]]) -> Iterator[str]:
    """Lines of tab-separated cells, as the notebook's tables show values (2026-02-19 10:00);
    a tab, a newline or any control character inside a cell is escaped."""
    from uac_kernel.core.display import show

    yield "\t".join(printable(c) for c in columns) + "\n"
    for row in rows:
        yield "\t".join(printable(show(v)) for v in row) + "\n"


def cmd_sql(args: argparse.Namespace) -> None:
    out = sql_output(args)
    with _open(args, read_only=True) as wb:
        result = wb.sql(args.query, timeout=args.timeout)
    print_result(result, args, out)


def sql_output(args: argparse.Namespace) -> Output | None:
    """The checked ``--out`` of a SQL command (see sql_options): JSON with ``--json``, else TSV."""
    from uac_kernel.core.outputs import JSON, TSV

    return _output(args, "out", JSON if args.json else TSV)


def print_result(result: SqlResult, args: argparse.Namespace, out: Output | None) -> None:
    """A query's rows as `uac sql` prints them: TSV cut at the terminal budget, or whole into
    ``out``; JSON with ``args.json``."""
    from uac_kernel.core.display import TERMINAL_BUDGET

    if args.json:
        _print_json(result.records(), out)
        return
    if out is not None:
        out.write_text(_tsv(result.columns, result.rows))
        print(out.wrote(plural(len(result.rows), "row", fmt=",")))
        return
    used = 0
    for n, line in enumerate(_tsv(result.columns, result.rows)):
        if used + len(line) > TERMINAL_BUDGET:
            # The header counts too: column names can be as long as the query allows.
            cut = "" if n else "the header line is cut, and "
            if not n:
                sys.stdout.write(line[:TERMINAL_BUDGET] + "…\n")
            left = len(result.rows) - max(n - 1, 0)
            print(
                f"… {cut}{plural(left, 'more row', fmt=',')} not shown (the output stops at "
                f"{TERMINAL_BUDGET // 1000} kB); write them all with --out FILE",
                file=sys.stderr,
            )
            return
        sys.stdout.write(line)
        used += len(line)


def cmd_alerts(args: argparse.Namespace) -> None:
    with _open(args, read_only=True) as wb:
        alerts = wb.alerts()
        if args.json:
            print(printable(to_json([a.model_dump(mode="json") for a in alerts])))
            return
        if not alerts:
            print("no alerts")
        for a in alerts:
            evidence = ", ".join(
                f"{e.type} {e.key} (events {', '.join(map(str, e.sources))})" for e in a.evidence
            )
            print(f"[{a.severity}] {printable(a.rule)}: {printable(a.message)}")
            if evidence:
                print(f"    evidence: {printable(evidence)}")
            if (cv := wb.constraint_of(a.rule)) is not None:
                c = cv.constraint
                print(f"    constraint: {printable(f'{cv.key} ({c.kind}): {c.title}')}")


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
            _print_report(wb.retract_constraint(args.retract, args.reason), "retracted; ")
        return
    if args.file is None:
        raise CommandLineError("give a YAML or JSON FILE of constraints, or --retract KEY")
    from uac_kernel.constraints.files import read_constraint_file, read_constraints

    try:
        text = read_constraint_file(args.file)
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        raise CommandLineError(f"cannot read {args.file}: {why}") from None
    found = read_constraints(text, args.file, args.key)
    with _open(args, create=True) as wb:
        report = wb.constrain(found, source=args.source, reason=args.reason)
        _print_report(report, f"in force: {', '.join(report.constraints)}; ")


def cmd_constraints(args: argparse.Namespace) -> None:
    from uac_kernel.constraints import constraint_json, rule_name

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
                    "rule": rule_name(cv.key),
                    "constraint": constraint_json(cv.constraint),
                }
                for cv in shown
            ]
            print(printable(to_json(rows)))
            return
        if not shown:
            print("no constraints in force" if not args.history else "no constraints")
        for cv in shown:
            by = cv.author or ""
            if cv.derived_from:
                by += f" from {', '.join(cv.derived_from)}"
            until = ""
            if args.history and cv.valid_to is not None:
                until = f"until {cv.valid_to.isoformat()}{' (retracted)' if cv.retracted else ''}"
            _row(cv.key, cv.constraint.kind, cv.constraint.title,
                 f"since {cv.valid_from.isoformat()}", *([until] if args.history else []),
                 by.strip() or "-", rule_name(cv.key))  # fmt: skip


def cmd_vocab(args: argparse.Namespace) -> None:
    from uac_kernel.vocab import listing

    words = list(args.words)
    if args.unbound:
        listing.listing_only(words)
        with _open(args, read_only=True) as wb:
            _table(listing.UNWATCHED_COLUMNS, listing.unwatched_rows(wb.unwatched()), args.json)
        return
    if words[:1] in (["concepts"], ["roles"]) and len(words) == 1:
        roles = words[0] == "roles"
        columns = listing.ROLE_COLUMNS if roles else listing.CONCEPT_COLUMNS
        _table(columns, listing.catalogue_rows(roles), args.json)
        return
    if words:
        target, name, status = listing.vocab_command(words)
        with _open(args) as wb:
            report = wb.bind(target, name, reason=args.reason or "", status=status)
            _print_report(report, "" if report.appended else "already so; ")
        return
    with _open(args, read_only=True) as wb:
        _table(listing.BINDING_COLUMNS, listing.binding_rows(wb.vocab()), args.json)


def _table(columns: list[str], rows: list[tuple[str, ...]], as_json: bool) -> None:
    """Rows as JSON objects, or a header and tab-separated lines."""
    if as_json:
        print(printable(to_json([dict(zip(columns, r, strict=True)) for r in rows])))
        return
    _row(*columns)
    for r in rows:
        _row(*r)


def cmd_log(args: argparse.Namespace) -> None:
    from uac_kernel.log.users import check_kind

    kinds = [args.kind] if args.kind else None
    store, user = _open_user(args)
    try:
        for kind in kinds or ():
            check_kind(store, kind)
        for ev in store.events(user, after_seq=args.after, kinds=kinds, limit=args.limit):
            source = f" {ev.source}" if ev.source else ""
            fields = printable(f"{ev.kind}{source}"), printable(to_json(ev.payload))
            print(f"{ev.seq}\t{ev.ts.isoformat()}\t{fields[0]}\t{fields[1]}")
    finally:
        store.close()


def cmd_extract(args: argparse.Namespace) -> None:
    from uac_kernel.model.extract import ExtractionLimits

    caps = {
        name: getattr(args, name)
        for name in ("max_operations", "max_new_types", "max_new_fields")
        if getattr(args, name) is not None
    }
    with _open(args) as wb:
        report = wb.extract(batch_size=args.batch_size, limits=ExtractionLimits(**caps))
        _print_report(report)
        if report.applied:
            print(f"checkpoint {wb.checkpoints.get().version} written; see it with `uac code`")


def cmd_review(args: argparse.Namespace) -> None:
    from uac_kernel.model.review import parse_only

    if args.action is None:
        if args.batch is not None or args.only is not None:
            raise CommandLineError("say what to do with the batch: uac review accept|reject ID")
        with _open(args, read_only=True) as wb:
            held = wb.review()
            for batch in held:
                print(batch.text())
            if not held:
                print("no model answers are held for review")
        return
    if args.batch is None:
        raise CommandLineError(
            f"uac review {args.action} needs the ID of a held batch; `uac review` lists them"
        )
    if args.action == "reject" and args.only is not None:
        raise CommandLineError("--only goes with accept; reject takes the whole batch")
    with _open(args) as wb:
        if args.action == "reject":
            wb.reject(args.batch)
            print(f"batch {args.batch} rejected; nothing of it was applied")
            return
        only = parse_only(args.only) if args.only is not None else None
        report = wb.accept(args.batch, only)
        which = "all operations" if only is None else f"operations {args.only}"
        _print_report(report, f"batch {args.batch}: accepted {which}; ")


def cmd_ask(args: argparse.Namespace) -> None:
    with _open(args) as wb:
        answer = wb.ask(args.question)
    if args.json:
        _print_json(
            {
                "question": answer.question,
                "ok": answer.ok,
                "value": answer.value,
                "expression": answer.expression,
                "explanation": answer.explanation,
                "error": answer.error,
                "records": answer.certificate.records,
                "records_total": answer.certificate.records_total,
                "utterances": answer.certificate.utterances,
            },
            None,
        )
        if not answer.ok:
            raise UacError(f"no answer: {printable(answer.error)}")
        return
    if not answer.ok:
        raise UacError(
            f"no answer after {plural(answer.attempts, 'attempt')}: {printable(answer.error)} "
            f"(last code: {printable(answer.expression)})"
        )
    # The model wrote the code and the explanation, and the log the rest: all escaped.
    _print_json(answer.value, None)
    print(f"  code: {printable(answer.expression)}")
    print(f"  why:  {printable(answer.explanation)}")
    cert = answer.certificate
    keys = ", ".join(f"{r['type']} {r['key']}" for r in cert.records[:8])
    more = f" and {cert.records_total - 8} more" if cert.records_total > 8 else ""
    print(f"  records ({cert.records_total}): {printable(keys)}{more}")
    for u in cert.utterances[:5]:
        said = f"[{u['source']}] {u['speaker']}: {u['text']}"
        print(f"  said {u['ts']:%Y-%m-%d} {printable(said)}")


def cmd_fleet_run(args: argparse.Namespace) -> None:
    from uac_kernel.fleet.run import MODEL_JOBS, Job, run

    model = None
    if args.job in MODEL_JOBS or args.model or args.base_url or args.offline:
        from uac_kernel.model.client import ModelSettings

        model = ModelSettings.resolve(
            model=args.model,
            base_url=args.base_url,
            offline=True if args.offline else None,
            spelled=MODEL_FLAGS,
        )
    users = [u for u in args.users.split(",") if u] if args.users is not None else None
    report = run(
        args.dir,
        Job(args.job, tuple(args.args)),
        engine=args.engine,
        jobs=args.jobs,
        concurrency=args.concurrency,
        rate=args.rate,
        retries=args.retries,
        users=users,
        limit=args.limit,
        model=model,
    )
    print(printable(report.summary()))
    for line in report.refused:
        print(f"  refused {printable(line)}")
    failed = [r for r in report.rows if r["status"] != "ok"]
    for row in failed:
        print(f"  failed {printable(row['user_id'])}: {printable(row['error'] or '')}")
    if report.refused and not failed:
        raise UacError(
            f"{plural(len(report.refused), 'ingest file')} refused; rename each as its line says "
            "and run the same command again: the users done are skipped"
        )
    if failed:
        raise UacError(
            f"{plural(len(failed), 'user')} failed; fix what each line says and run the same "
            "command again: the users done are skipped"
        )


def cmd_calls(args: argparse.Namespace) -> None:
    from uac_kernel.log.users import resolve_user
    from uac_kernel.model.client import call_totals, list_calls

    store = _open_store(args)
    try:
        user = None if args.all_users else resolve_user(store, args.user, create=False)
        for c in list_calls(store, user, limit=args.limit):
            _row(
                c.call_id,
                f"{c.created_at:%Y-%m-%d %H:%M:%S}",
                c.purpose,
                c.model,
                f"{c.tokens_in}+{c.tokens_out} tokens",
                f"{c.latency_ms:.0f} ms",
                c.outcome,
            )
        print("purpose\tcalls\tfailed\ttokens in\ttokens out")
        for totals in call_totals(store, user):
            _row(*totals)
    finally:
        store.close()


def cmd_users(args: argparse.Namespace) -> None:
    store = _open_store(args)
    try:
        counts = store.user_kind_counts()
    finally:
        store.close()
    if not counts:
        print(printable(f"{args.db} holds no events yet"))
        return
    # events: every kind, the schema, alert and extraction events uac writes itself included
    print("user\tevents\tfacts\tutterances")
    for user, kinds in counts.items():
        _row(user, sum(kinds.values()), kinds.get("fact", 0), kinds.get("utterance", 0))


def cmd_state(args: argparse.Namespace) -> None:
    with _open(args, read_only=True) as wb:
        print("type\tcurrent\tversions")
        for name, n in sorted(wb.state.counts().items()):
            _row(name, n, len(wb.state.history(name)))


def cmd_history(args: argparse.Namespace) -> None:
    from uac_kernel.core.records import field_values

    with _open(args, read_only=True) as wb:
        for r in wb.versions(args.type, args.key):
            fields = {k: v for k, v in field_values(r).items() if v is not None}
            print(
                f"{r.valid_from.isoformat() if r.valid_from else ''}\t"
                f"{r.valid_to.isoformat() if r.valid_to else ''}\t"
                f"{'retracted' if r.retracted else ''}\t{printable(to_json(fields))}\t"
                f"events {', '.join(map(str, r.sources))}"
            )


def cmd_bench_aggregate(args: argparse.Namespace) -> None:
    from uac_kernel.bench import aggregate
    from uac_kernel.model.client import ModelSettings

    model = None
    if args.model or args.base_url:
        model = ModelSettings.resolve(model=args.model, base_url=args.base_url, spelled=MODEL_FLAGS)
    result = aggregate.run(
        sizes=args.sizes,
        seed=args.seed,
        k=args.k,
        model=model,
        out_dir=Path(args.out) if args.out else None,
        embeddings=not args.no_embeddings,
    )
    print(result.table())


def _sets(args: argparse.Namespace) -> tuple[str, ...]:
    """The alert scenario sets ``--set`` names."""
    return ("public", "holdout") if args.set == "all" else (args.set,)


def cmd_bench_alerts(args: argparse.Namespace) -> None:
    from uac_kernel.bench import alerts
    from uac_kernel.model.client import ModelSettings

    model = None
    if args.model or args.base_url:
        model = ModelSettings.resolve(model=args.model, base_url=args.base_url, spelled=MODEL_FLAGS)
    bench = alerts.run_all(_sets(args), model=model, out_dir=Path(args.out) if args.out else None)
    print(bench.report(), end="")


def cmd_bench_vocab(args: argparse.Namespace) -> None:
    from uac_kernel.bench import respell, vocab_stress

    sets = _sets(args)
    if args.report:
        rows = [row for seed in args.seeds for row in respell.renamings(seed, sets)]
        print(respell.renamings_report(rows), end="")
        return
    result = vocab_stress.run(
        args.seeds, sets, blame=not args.no_blame, out_dir=Path(args.out) if args.out else None
    )
    print(result.report(), end="")


def cmd_bench_locomo(args: argparse.Namespace) -> None:
    from uac_kernel.bench import locomo

    model = locomo.resolve_settings(
        args.model, args.base_url, offline=True if args.offline else None
    )
    judge = None
    if args.judge_model:
        judge = locomo.resolve_settings(
            args.judge_model, args.base_url, offline=True if args.offline else None
        )
    db = Path(args.db) if args.db_given else Path("locomo.duckdb")
    result = locomo.run(
        args.path,
        model=model,
        db=db,
        samples=args.samples or None,
        limit=args.limit,
        out=args.out,
        judge=judge,
    )
    print(result.table())
    print(f"results: {result.json_path}   progress (resumable): {result.progress_path}")


def cmd_verify(args: argparse.Namespace) -> None:
    from uac_kernel.log.integrity import read_heads, verify

    if args.fleet is not None:
        _verify_fleet(args)
        return
    store = _open_store(args)
    try:
        kept = read_heads(args.head, args.user) if args.head is not None else None
        report = verify(store, args.user, kept)
    finally:
        store.close()
    if not report.ok:
        raise UacError(report.summary(args.db))
    print(printable(report.summary(args.db)))


def _verify_fleet(args: argparse.Namespace) -> None:
    """``uac verify DIR``: a fleet directory, one line per problem."""
    from uac_kernel.fleet.partition import verify_fleet

    if args.head is not None:
        raise CommandLineError(
            "--head checks a store's chains: verify the store with `uac verify --db STORE "
            "--head HEAD`, or the fleet directory without it"
        )
    # only a --user given on the command line narrows a fleet's commands (not UAC_USER)
    report = verify_fleet(args.fleet, users=[args.user] if args.user_given else None)
    for problem in report.problems:
        print(printable(problem), file=sys.stderr)
    if not report.ok:
        raise UacError(report.summary())
    print(printable(report.summary()))


def cmd_export(args: argparse.Namespace) -> None:
    from uac_kernel.fleet.partition import export_store

    users = [args.user] if args.user_given else None
    print(printable(export_store(args.store, args.dir, users=users).summary()))


def cmd_import(args: argparse.Namespace) -> None:
    from uac_kernel.fleet.partition import import_fleet

    users = [args.user] if args.user_given else None
    print(printable(import_fleet(args.dir, args.store, users=users).summary()))


def cmd_forget(args: argparse.Namespace) -> None:
    record = args.record or (None, None)
    with _open(args, read_only=args.dry_run) as wb:
        wb.require_known()
        plan = wb.forget(
            type=record[0], key=record[1], source=args.source, text=args.text, dry_run=args.dry_run
        )
        if plan.empty:
            print(printable(f"nothing of {wb.user} matches; nothing to forget"))
        elif args.dry_run:
            print(printable(f"would forget: {plan.summary()}"))
            for line in plan.lines():
                print(f"  {printable(line)}")
            print("run again without --dry-run to forget them")
        else:
            print(printable(f"forgot: {plan.summary()}; the store file was rewritten without them"))
            print(printable(wb.verify().summary(args.db)))


def cmd_head(args: argparse.Namespace) -> None:
    from uac_kernel.log.integrity import heads

    store = _open_store(args)
    try:
        found = heads(store, args.user)
    finally:
        store.close()
    if args.user is not None:
        if args.user not in found:
            raise UacError(f"{args.db} holds nothing of user {args.user!r}; see `uac users`")
        print(found[args.user])
        return
    for user, head in found.items():
        print(f"{head}\t{json.dumps(user)}")


def cmd_demo(args: argparse.Namespace) -> None:
    from uac_kernel.demo.run import DEMO_USER_ID, run_demo

    if args.user_given and args.user != DEMO_USER_ID:
        raise UacError(
            f"the demo's user is {DEMO_USER_ID!r} (its recorded model calls are hers); "
            f"run `uac demo` without --user, then read it with --user {DEMO_USER_ID}"
        )
    path = Path(args.db) if args.db_given else Path(DEMO_DB)
    run_demo(path, out=print, live=args.live).close()


class _Parser(argparse.ArgumentParser):
    """argparse, but a mistake is one line and exit code 1 like every other error (``--help``
    is argparse's own); an unknown command or choice names the closest ones."""

    def error(self, message: str) -> NoReturn:
        # "...; see uac log --help", or after a question "...? See uac --help"
        sep, see = (" ", "See") if message.endswith("?") else ("; ", "see")
        raise CommandLineError(f"{message}{sep}{see} {self.prog} --help")

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is None or value in action.choices:
            return
        choices = [str(c) for c in action.choices]
        what = (
            f"unknown command {value!r}"
            if isinstance(action, argparse._SubParsersAction)
            else f"argument {'/'.join(action.option_strings) or action.metavar or action.dest}: "
            f"{value!r} is not one of {', '.join(choices)}"
        )
        raise argparse.ArgumentError(None, what + _did_you_mean(str(value), choices))


def _did_you_mean(word: str, choices: Sequence[str]) -> str:
    """``; did you mean 'alerts'?`` for the closest choices, else ``""``."""
    from uac_kernel.core.display import close_matches

    close = close_matches(word, choices, n=2)
    return f"; did you mean {' or '.join(map(repr, close))}?" if close else ""


def _whole(low: int) -> Callable[[str], int]:
    """An argparse type: a whole number of at least ``low`` (0: none negative; 1: positive)."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if n < low:
            raise argparse.ArgumentTypeError(
                f"must be {'positive' if low == 1 else f'{low} or more'}, got {n}"
            )
        return n

    return parse


def _moment(text: str) -> datetime:
    """An argparse type: a what-if's moment (``whatif.moment``), checked before the store opens."""
    from uac_kernel.engine.whatif import moment

    try:
        return moment(text)
    except QueryError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("as of ")) from None


def _per_second(text: str) -> float:
    """An argparse type: a positive, finite number (of calls per second)."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number per second, got {text!r}")
    return value


# `uac fleet run`'s jobs (uac_kernel.fleet.run.JOBS, named here so `uac --help` loads no engine)
FLEET_JOBS = ("ingest", "extract", "checkpoint", "alerts", "eval", "ask", "bench", "call")
COUNT = _whole(0)  # a limit or a seq: 0 or more
POSITIVE = _whole(1)  # a version, a batch size, a size: 1 or more


def build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument(
        "--db",
        default=argparse.SUPPRESS,
        help=f"store file (env UAC_DB; default {DEFAULT_DB}, or uac-demo.duckdb for `demo`)",
    )
    common.add_argument(
        "--user",
        default=argparse.SUPPRESS,
        help="user id (env UAC_USER; default: the store's only user, or 'me' in a new store)",
    )
    parser = _Parser(
        prog="uac", parents=[common], description="User as Code: executable user memory."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(
        name: str,
        fn: Callable[[argparse.Namespace], None],
        help: str,
        aliases: Sequence[str] = (),
    ) -> argparse.ArgumentParser:
        p = sub.add_parser(
            name, parents=[common], help=help, description=help, aliases=list(aliases)
        )
        p.set_defaults(func=fn)
        return p

    p = add("ingest", cmd_ingest, "append a file of events or conversations to the log")
    p.add_argument("file")
    p.add_argument(
        "--format",
        choices=["auto", *FORMATS],
        default="auto",
        help="Event JSONL, a LoCoMo or LongMemEval file, or OpenAI-style chat messages",
    )
    history = p.add_mutually_exclusive_group()
    history.add_argument(
        "--history", help="the one conversation of a LoCoMo/LongMemEval file to ingest"
    )
    history.add_argument(
        "--per-history", action="store_true", help="ingest each conversation as its own user"
    )
    add("checkpoint", cmd_checkpoint, "store the current state as a new version of typed code")
    add("checkpoints", cmd_checkpoints, "list the checkpoints")
    add("users", cmd_users, "the users and their events: all kinds, facts, utterances")
    add("state", cmd_state, "record types with their current records and versions")
    p = add("history", cmd_history, "every version of one record and the events behind it")
    p.add_argument("type", help="a record type, e.g. Trip")
    p.add_argument("key", help="the record's key")
    p = add("code", cmd_code, "print a checkpoint's code, or write it as a module (--out)")
    p.add_argument("--version", type=POSITIVE, default=None)
    p.add_argument("--out", default=None, metavar="PATH", help="write the module to PATH.py")
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p = add("diff", cmd_diff, "what changed between two checkpoints")
    p.add_argument("a", type=POSITIVE)
    p.add_argument("b", type=POSITIVE)
    p = add(
        "eval",
        cmd_eval,
        "evaluate a sandboxed Python expression; prints JSON (the first 100 kB; --out for all)",
    )
    p.add_argument("expr")
    p.add_argument("--out", default=None, metavar="FILE", help="write the whole result to FILE")
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p = add(
        "sql",
        cmd_sql,
        "run one read-only SQL query over one table per record type (stopped after --timeout "
        "seconds; memory env UAC_SQL_MEMORY_MB, threads UAC_SQL_THREADS)",
    )
    p.add_argument("query")
    sql_options(p)
    add("alerts", cmd_alerts, "the alerts standing now").add_argument("--json", action="store_true")
    p = add(
        "constrain",  # `uac constraint` too, as the notebook's `%%uac constraint`
        cmd_constrain,
        "put constraints in force from a YAML or JSON file (one, a list, or key: constraint), "
        "or retract one; see docs/constraints.md",
        aliases=["constraint"],
    )
    p.add_argument("file", nargs="?", default=None, metavar="FILE")
    p.add_argument("--key", default=None, help="the key of the file's one constraint")
    p.add_argument("--retract", default=None, metavar="KEY", help="retract constraint KEY")
    p.add_argument("--reason", default=None, help="why (logged with the events)")
    p.add_argument("--source", default=None, help="where the constraints come from")
    p = add(
        "vocab",
        cmd_vocab,
        "the user's vocabulary (which types and fields carry the concepts rules read), or "
        "`bind TYPE.FIELD CONCEPT`, `bind TYPE ROLE`, `unbind ...`, `concepts`, `roles`; see "
        "docs/vocabulary.md",
    )
    p.add_argument(
        "words", nargs="*", metavar="ACTION", help="bind|unbind TARGET NAME, concepts or roles"
    )
    p.add_argument("--reason", default=None, help="why (logged with the binding)")
    p.add_argument(
        "--unbound",
        action="store_true",
        help="the types and fields that look like dates, deadlines, amounts, documents or "
        "substances and that no rule or constraint reads, with the bind that would change that",
    )
    p.add_argument("--json", action="store_true")
    p = add(
        "whatif",
        cmd_whatif,
        "fold hypothetical events onto a copy of the user and show what would change: records, "
        "alerts raised, escalated or cleared, answers; nothing is written (see docs/whatif.md)",
    )
    p.add_argument("file", metavar="FILE", help="Event JSONL (or .yaml/.json) of the events")
    p.add_argument(
        "--as-of",
        type=_moment,
        default=None,
        metavar="DATE",
        help="insert the events at DATE and replay the later log on top (a past what-if)",
    )
    p.add_argument(
        "--expr",
        action="append",
        default=None,
        metavar="EXPR",
        help="an expression over `user` to re-run before and after (repeatable)",
    )
    p.add_argument("--json", action="store_true", help="the whole report as JSON")
    p.add_argument(
        "--chart",
        default=None,
        metavar="OUT",
        help="draw the alert timelines, real and what-if, into OUT (.svg, .png or .html)",
    )
    p.add_argument("--force", action="store_true", help=FORCE_HELP)
    p = add("constraints", cmd_constraints, "the constraints in force, and the rule of each")
    p.add_argument("--history", action="store_true", help="every version, ended ones too")
    p.add_argument("--json", action="store_true")
    p = add("log", cmd_log, "print events of the log")
    p.add_argument("--kind", default=None)
    p.add_argument("--after", type=COUNT, default=0, help="only events after this seq")
    p.add_argument("--limit", type=COUNT, default=50)
    p = add(
        "verify",
        cmd_verify,
        "re-compute the hash chains (one user's with --user, else every user's); fails if any "
        "event, model call or checkpoint was changed, removed or erased without a forget event",
    )
    p.add_argument(
        "--head",
        default=None,
        metavar="HEAD",
        help="a head printed by `uac head` (or the file it was saved to): the chains must "
        "still pass through it",
    )
    p.add_argument(
        "fleet",
        nargs="?",
        default=None,
        metavar="DIR",
        help="a fleet directory (`uac export`) to verify instead of the store: its commits, "
        "files and every user's chains",
    )
    p = add(
        "export",
        cmd_export,
        "write the store's users (one with --user) into a fleet directory of per-user Parquet "
        "partitions, appending only what it does not hold yet",
    )
    p.add_argument("store", metavar="STORE", help="the store file to read")
    p.add_argument("dir", metavar="DIR", help="the fleet directory (created if new)")
    p = add(
        "import",
        cmd_import,
        "append a fleet directory's users (one with --user) to a store, in one transaction",
    )
    p.add_argument("dir", metavar="DIR", help="the fleet directory")
    p.add_argument("store", metavar="STORE", help="the store file (created if new)")
    p = add(
        "forget",
        cmd_forget,
        "erase a record, a source's events, or everything holding a text, from the log, model "
        "calls, checkpoints and the store file (a forget event says what, never the content)",
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--record", nargs=2, metavar=("TYPE", "KEY"), help="one record")
    what.add_argument("--source", help="the events of one source, e.g. chat-42#3")
    what.add_argument("--text", help="every event that holds this text (any case)")
    p.add_argument("--dry-run", action="store_true", help="list what would go; change nothing")
    add(
        "head",
        cmd_head,
        "print each user's chain head (one user's with --user); keep it elsewhere and check "
        "the store against it later with `uac verify --head`",
    )

    def model_options(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--model", default=None, help="model name (env UAC_MODEL)")
        p.add_argument(
            "--base-url", default=None, help="OpenAI-compatible endpoint (env OPENAI_BASE_URL)"
        )
        p.add_argument(
            "--offline",
            action="store_true",
            help="answer only from recorded calls (env UAC_OFFLINE=1)",
        )
        return p

    p = model_options(
        add("extract", cmd_extract, "turn pending utterances into typed facts with the model")
    )
    p.add_argument("--batch-size", type=POSITIVE, default=10)
    # Caps on one batch's answer (ExtractionLimits); an answer over one is invalid.
    p.add_argument("--max-operations", type=POSITIVE, default=None, help="per batch (100)")
    p.add_argument("--max-new-types", type=COUNT, default=None, help="per batch (10)")
    p.add_argument("--max-new-fields", type=COUNT, default=None, help="per batch (60)")
    p = add(
        "review",
        cmd_review,
        "model answers held for review: list them with a diff, or accept or reject one",
    )
    p.description = (
        "An extraction answer that would retract or overwrite more than max(3, 10%) of the "
        "current records, or change a record its turns do not mention, is held, not applied. "
        "`uac review` lists held batches (each operation: the record before -> after, "
        "retractions marked); `uac review accept ID [--only 1,3]` applies them (re-validated "
        "against the state now); `uac review reject ID` drops them. The call record keeps "
        "every answer."
    )
    p.add_argument("action", nargs="?", choices=["accept", "reject"], help="the decision")
    p.add_argument("batch", nargs="?", type=POSITIVE, metavar="ID", help="a held batch's ID")
    p.add_argument("--only", default=None, metavar="N,M", help="accept only these operations")
    p = model_options(
        add("ask", cmd_ask, "answer a question with code the model writes; runs sandboxed")
    )
    p.add_argument("question")
    p.add_argument("--json", action="store_true")
    bench = sub.add_parser(
        "bench", help="benchmarks: aggregate, alerts, vocab, locomo", description="benchmarks"
    )
    bench_sub = bench.add_subparsers(dest="bench", required=True, metavar="BENCH")

    def add_bench(
        name: str, fn: Callable[[argparse.Namespace], None], help: str
    ) -> argparse.ArgumentParser:
        p = bench_sub.add_parser(name, parents=[common], help=help, description=help)
        p.set_defaults(func=fn)
        return p

    p = model_options(
        add_bench("aggregate", cmd_bench_aggregate, "aggregate questions: typed state vs retrieval")
    )
    p.add_argument("--sizes", type=POSITIVE, nargs="+", default=[20, 50, 100, 200, 500])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--k", type=POSITIVE, default=10, help="top-k of the retrieval systems")
    p.add_argument("--out", default=None, help="directory for the JSON, cases and chart")
    p.add_argument("--no-embeddings", action="store_true", help="skip the embedding system")

    def scenario_sets(p: argparse.ArgumentParser) -> None:
        """The options of a bench over the alert scenarios: where results go, which sets."""
        p.add_argument(
            "--out", default="bench/results", help="directory for the JSON and text results"
        )
        p.add_argument(
            "--set",
            choices=("public", "holdout", "all"),
            default="all",
            help="the public 40, our held-out scenarios, or both (default)",
        )

    p = model_options(
        add_bench(
            "alerts", cmd_bench_alerts, "the 40 active-service scenarios: alerts raised in time?"
        )
    )
    scenario_sets(p)
    p = add_bench(
        "vocab",
        cmd_bench_vocab,
        "the alert scenarios re-spelt in other names: does the library keep its score?",
    )
    scenario_sets(p)
    p.add_argument(
        "--seeds", type=int, nargs="+", default=[0, 1, 2], help="re-spell under these seeds"
    )
    p.add_argument(
        "--report", action="store_true", help="print the renamings (original -> new), run nothing"
    )
    p.add_argument(
        "--no-blame",
        action="store_true",
        help="do not replay each renaming of a lost scenario alone to name those that lose it",
    )
    p = model_options(
        add_bench(
            "locomo", cmd_bench_locomo, "LoCoMo through uac: extract, ask, score (needs a model)"
        )
    )
    p.add_argument("path", help="the LoCoMo JSON file (e.g. locomo10.json)")
    p.add_argument("--samples", nargs="*", help="only these sample ids")
    p.add_argument("--limit", type=POSITIVE, default=None, help="only the first N questions")
    p.add_argument(
        "--out", default=None, help="where results and the progress file go (default: beside --db)"
    )
    p.add_argument("--judge-model", default=None, help="the judge's model (default: --model)")

    fleet = sub.add_parser(
        "fleet", help="many users in a fleet directory (uac export)", description="fleets"
    )
    fleet_sub = fleet.add_subparsers(dest="fleet", required=True, metavar="FLEET")
    p = fleet_sub.add_parser(
        "run",
        help="run a job for every user of a fleet, one task per user (local processes or Ray)",
        description="Run JOB for every user of the fleet DIR: ingest SRC, extract, checkpoint, "
        "alerts, eval EXPR, ask QUESTION, bench [EXPR], call MODULE:FUNCTION [ARG ...]. Each "
        "user's work is committed to their partition as one commit, then their result is "
        "written to DIR/runs/RUN/results; a rerun skips the users done.",
    )
    p.set_defaults(func=cmd_fleet_run)
    p.add_argument("dir", metavar="DIR")
    p.add_argument("job", metavar="JOB", choices=FLEET_JOBS)
    p.add_argument("args", nargs="*", metavar="ARG", help="the job's arguments")
    p.add_argument("--engine", choices=("local", "ray"), default="local")
    p.add_argument("--jobs", type=POSITIVE, default=2, help="workers (default 2)")
    p.add_argument(
        "--concurrency", type=POSITIVE, default=8, help="model calls in flight (default 8)"
    )
    p.add_argument(
        "--rate", type=_per_second, default=None, help="model calls per second (default: any)"
    )
    p.add_argument("--retries", type=COUNT, default=2, help="tries again per task (default 2)")
    who = p.add_mutually_exclusive_group()
    who.add_argument("--users", default=None, metavar="A,B", help="only these users")
    who.add_argument("--limit", type=POSITIVE, default=None, help="only the first N users")
    model_options(p)
    add_fleet_queries(fleet_sub)  # sql, summary
    p = add("calls", cmd_calls, "model calls and tokens per purpose (the cost ledger)")
    p.add_argument("--limit", type=COUNT, default=20)
    p.add_argument("--all-users", action="store_true")
    p = add("demo", cmd_demo, "build the demo user and show what uac does (offline by default)")
    p.add_argument(
        "--live",
        action="store_true",
        help="call the configured model instead of the bundled record",
    )
    return parser


def main(argv: Sequence[str] | None = None, *, keep: list[object] | None = None) -> int:
    """Run one command; its exit code. With ``keep``, each workbench the command opened is
    appended to it (closed), so its state is freed when the caller drops the list, not here."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except CommandLineError as exc:
        print(f"uac: error: {printable(str(exc))}", file=sys.stderr)
        return 1
    args.keep = keep
    try:
        args.db_given = hasattr(args, "db") or settings.DB.get() is not None
        if not hasattr(args, "db"):
            args.db = settings.DB.get() or DEFAULT_DB
        args.db = settings.store_path(args.db, memory=False)
        args.user_given = hasattr(args, "user")  # on the command line
        if not args.user_given:
            # None: the store's only user ('me' in a new store); see users.resolve_user
            args.user = settings.USER.get()
        args.func(args)
    except UacError as exc:
        # Messages quote input, file names, stored text and model code: escaped here once, so
        # no message can drive the terminal or take a second line.
        print(f"uac: error: {printable(str(exc))}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except Exception as exc:
        # A DuckDB failure past opening (a damaged file is found when a query reaches the bad
        # block): one line. duckdb is loaded by then; `uac --help` never imports it.
        duckdb = sys.modules.get("duckdb")
        if duckdb is None or not isinstance(exc, duckdb.Error):
            raise
        from uac_kernel.log.store import damaged

        print(f"uac: error: {printable(str(damaged(args.db, exc)))}", file=sys.stderr)
        return 1
    return 0


def run() -> NoReturn:
    """The ``uac`` command (the console script and ``python -m uac_kernel.cli.main``): ``main``, then
    leave without freeing the folded state and without the interpreter's teardown when the
    process has nothing left to do.

    Both come after the answer is printed: freeing the state object by object when the command
    returns (``main(keep=...)`` keeps it alive instead), then the teardown. From the answer of
    `uac eval` to the process gone at 300k events: 0.60-0.63 s with both, 0.03-0.04 s without
    (bench/README.md). They are skipped only when no Store of the process is open (each was
    closed, so DuckDB checkpointed its write-ahead log; a committed batch is durable in that log
    anyway) and no thread but daemons is running; the exit handlers run and stdout and stderr are
    flushed first, as at a normal exit. Otherwise, and whenever a flush fails (a closed pipe),
    the exit is Python's own. Tests call ``main``, which returns and keeps nothing.
    """
    kept: list[object] = []
    code = main(keep=kept)
    if _may_skip_teardown():
        import atexit

        atexit._run_exitfuncs()  # what a normal exit runs first (it clears them after)
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            sys.exit(code)  # Python's own exit reports (or ignores) the failed flush as before
        os._exit(code)
    sys.exit(code)


def _may_skip_teardown() -> bool:
    """Whether the process holds nothing a teardown would still write or wait for: no Store
    open (DuckDB files are written only through Store) and no thread that Python would join."""
    import threading

    store = sys.modules.get("uac_kernel.log.store")
    if store is not None and store.open_paths():
        return False
    main_thread = threading.main_thread()
    return all(t is main_thread or t.daemon for t in threading.enumerate())


if __name__ == "__main__":
    run()
