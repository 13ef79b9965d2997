"""The `uac` commands that talk to a model or start one: extract, review, ask, fleet run, demo."""

from __future__ import annotations

import argparse
from pathlib import Path

from uac_kernel.cli.opening import DEMO_DB, MODEL_FLAGS, _open
from uac_kernel.cli.output import _print_json, _print_report
from uac_kernel.core.display import plural, printable
from uac_kernel.core.errors import CommandLineError, UacError
from uac_kernel.core.faces import CLI
from uac_kernel.render.answer import answer_lines
from uac_kernel.render.checkpoint import written_lines
from uac_kernel.render.review import accepted_lines, held_lines, rejected_line

__all__ = ["cmd_ask", "cmd_demo", "cmd_extract", "cmd_fleet_run", "cmd_review"]


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
            print("\n".join(written_lines(wb.checkpoints.get().version, CLI)))


def cmd_review(args: argparse.Namespace) -> None:
    from uac_kernel.model.review import parse_only

    if args.action is None:
        if args.batch is not None or args.only is not None:
            raise CommandLineError("say what to do with the batch: uac review accept|reject ID")
        with _open(args, read_only=True) as wb:
            print("\n".join(held_lines(wb.review())))
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
            print(rejected_line(args.batch))
            return
        only = parse_only(args.only) if args.only is not None else None
        print("\n".join(accepted_lines(wb.accept(args.batch, only), args.batch, args.only)))


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
    print("\n".join(answer_lines(answer)))


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


def cmd_demo(args: argparse.Namespace) -> None:
    from uac_kernel.demo.run import DEMO_USER_ID, run_demo

    if args.user_given and args.user != DEMO_USER_ID:
        raise UacError(
            f"the demo's user is {DEMO_USER_ID!r} (its recorded model calls are hers); "
            f"run `uac demo` without --user, then read it with --user {DEMO_USER_ID}"
        )
    path = Path(args.db) if args.db_given else Path(DEMO_DB)
    run_demo(path, out=print, live=args.live).close()
