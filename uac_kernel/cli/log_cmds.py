"""The `uac` commands over the log itself: ingest, log, calls, users, verify, export, import,
forget, head."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from uac_kernel.cli.opening import _open, _open_store, _open_user
from uac_kernel.cli.output import _print_listing, _print_report, to_json
from uac_kernel.core.display import printable
from uac_kernel.core.errors import CommandLineError, UacError
from uac_kernel.core.faces import CLI
from uac_kernel.ingest.adapters import read_histories
from uac_kernel.render.forget import forget_lines
from uac_kernel.render.integrity import heads_lines, verify_line
from uac_kernel.render.log_listings import calls_listings, log_listing, users_listing

__all__ = [
    "cmd_calls",
    "cmd_export",
    "cmd_forget",
    "cmd_head",
    "cmd_import",
    "cmd_ingest",
    "cmd_log",
    "cmd_users",
    "cmd_verify",
]


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


def cmd_log(args: argparse.Namespace) -> None:
    from uac_kernel.log.users import check_kind

    kinds = [args.kind] if args.kind else None
    store, user = _open_user(args)
    try:
        check_kind(store, *(kinds or ()))
        # --limit 0 is every event; --last N the N newest (argparse keeps the two apart)
        limit = None if args.last is not None or args.limit == 0 else args.limit
        got = store.events(
            user,
            after_seq=args.after,
            kinds=kinds,
            limit=None if limit is None else limit + 1,
            last=args.last,
        )
        events = list(got)
    finally:
        store.close()
    if args.json:
        rows = [
            {"seq": e.seq, "ts": e.ts, "kind": e.kind, "source": e.source, "payload": e.payload}
            for e in events[:limit]
        ]
        print(printable(to_json(rows)))
        return
    listing = log_listing(
        events, CLI, limit=limit, after=args.after, kind=args.kind, last=args.last
    )
    _print_listing(listing)


def cmd_calls(args: argparse.Namespace) -> None:
    from uac_kernel.log.users import resolve_user
    from uac_kernel.model.client import call_totals, list_calls

    store = _open_store(args)
    try:
        user = None if args.all_users else resolve_user(store, args.user, create=False)
        calls = list_calls(store, user, limit=args.limit or 1_000_000)  # 0: all, as in a notebook
        listings = calls_listings(calls, call_totals(store, user))
    finally:
        store.close()
    _print_listing(*listings)


def cmd_users(args: argparse.Namespace) -> None:
    store = _open_store(args)
    try:
        counts = store.user_kind_counts()
    finally:
        store.close()
    _print_listing(users_listing(counts, args.db))


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
    print(verify_line(report, args.db))


def _verify_fleet(args: argparse.Namespace) -> None:
    """``uac verify DIR``: a fleet directory, one line per problem."""
    from uac_kernel.fleet.verify import verify_fleet

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
    from uac_kernel.fleet.export import export_store

    users = [args.user] if args.user_given else None
    # a report of several lines (what a carried forget reached): each line made printable
    summary = export_store(args.store, args.dir, users=users).summary()
    print("\n".join(printable(line) for line in summary.splitlines()))


def cmd_import(args: argparse.Namespace) -> None:
    from uac_kernel.fleet.importing import import_fleet

    users = [args.user] if args.user_given else None
    print(printable(import_fleet(args.dir, args.store, users=users).summary()))


def cmd_forget(args: argparse.Namespace) -> None:
    record = args.record or (None, None)
    with _open(args, read_only=args.dry_run) as wb:
        wb.require_known()
        plan = wb.forget(
            type=record[0], key=record[1], source=args.source, text=args.text, dry_run=args.dry_run
        )
        for line in forget_lines(plan, dry_run=args.dry_run):
            print(line)
        if not args.dry_run and not plan.empty:
            print(verify_line(wb.verify(), args.db))


def cmd_head(args: argparse.Namespace) -> None:
    from uac_kernel.log.integrity import heads

    store = _open_store(args)
    try:
        found = heads(store, args.user)
    finally:
        store.close()
    if args.user is not None and args.user not in found:
        raise UacError(f"{args.db} holds nothing of user {args.user!r}; see `uac users`")
    for line in heads_lines(found, args.user):
        print(line)
