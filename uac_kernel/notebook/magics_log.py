"""`%uac` subcommands over the log: open, close, ingest, log, users, verify, forget, head, calls,
checkpoint, checkpoints."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import parse_argstring
from IPython.display import display

from uac_kernel.core.faces import MAGIC
from uac_kernel.notebook.session import Session
from uac_kernel.notebook.subcommands import _one_line, _unquote, subcommand
from uac_kernel.notebook.tables import Table
from uac_kernel.render.checkpoint import checkpoint_lines
from uac_kernel.render.forget import forget_lines
from uac_kernel.render.integrity import heads_lines, verify_line
from uac_kernel.render.listings import checkpoints_listing
from uac_kernel.render.log_listings import calls_listings, log_listing, users_listing
from uac_kernel.render.table import listings_html, listings_lines

__all__ = ["LogMagics"]


class LogMagics(Session):
    """`%uac` subcommands over the log: open, close, ingest, log, users, verify, forget, head, calls, checkpoint, checkpoints."""

    @subcommand("open")
    def cmd_open(self, rest: str, cell: str | None) -> None:
        """Open a store for one user (closing the workbench open before) and bind it."""
        args = parse_argstring(self.cmd_open, rest)
        path = _unquote(args.path) if args.path else self.db
        self._open(path, _unquote(args.user) if args.user else self.user, args.read_only)

    @subcommand("close")
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
    def cmd_ingest(self, rest: str, cell: str | None) -> None:
        """Append a file to the log, atomically; prints what it appended and the alerts."""
        args = parse_argstring(self.cmd_ingest, rest)
        path = Path(os.path.expanduser(_unquote(args.file)))
        history = _unquote(args.history) if args.history else None
        report = self._wb().ingest(path, format=args.format, history=history)
        self._print_report(report)

    @subcommand("checkpoint")
    def cmd_checkpoint(self, rest: str, cell: str | None) -> None:
        """Store the state as a new version of typed code; lists its parts with a ready
        ``%uac edit PART`` command for each (run each in a cell of its own)."""
        parse_argstring(self.cmd_checkpoint, rest)
        wb = self._wb(read=True)
        cp = wb.checkpoint()
        print("\n".join(checkpoint_lines(cp, MAGIC, wb.parts(cp.version))))

    @subcommand("checkpoints")
    def cmd_checkpoints(self, rest: str, cell: str | None) -> Table:
        """The checkpoints of the user: version, the log seq each covers, records, when."""
        parse_argstring(self.cmd_checkpoints, rest)
        wb = self._wb(read=True)
        return Table.of(checkpoints_listing(wb.checkpoints.all(), wb.user, MAGIC), 0)

    @subcommand("users")
    def cmd_users(self, rest: str, cell: str | None) -> Table:
        """The users of the store and their events: all kinds, facts, utterances (switch with
        ``%uac open --user``)."""
        parse_argstring(self.cmd_users, rest)
        from uac_kernel.log.store import Store

        if self.workbench is not None:
            counts, path = self.workbench.store.user_kind_counts(), self.workbench.store.path
        else:
            store = Store(self.db, read_only=True)
            try:
                counts, path = store.user_kind_counts(), store.path
            finally:
                store.close()
        return Table.of(users_listing(counts, str(path)), 0)

    @subcommand("log")
    def cmd_log(self, rest: str, cell: str | None) -> None:
        """Browse the user's events (a paging widget of ``--limit`` events a page; the first
        ``--limit`` as text). ``--limit`` defaults to ``displaylimit``; ``--last N`` shows the
        N newest as text, oldest first, and opens the widget on its last page."""
        args = parse_argstring(self.cmd_log, rest)
        shown = args.last or (self.displaylimit if args.limit is None else args.limit)
        wb = self._wb(read=True)
        limit = shown if shown > 0 and args.last is None else None
        kinds = [args.kind] if args.kind else None
        events = wb.log(
            kinds=kinds,
            after_seq=args.after,
            limit=None if limit is None else limit + 1,
            last=args.last,
        )
        listing = log_listing(
            events,
            MAGIC,
            limit=limit,
            after=args.after,
            kind=args.kind,
            limit_given=args.limit is not None,
            last=args.last,
        )
        table = Table.of(listing, 0)

        def make() -> Any:
            from uac_kernel.notebook.widgets import LogBrowser

            query: dict[str, Any] = {"kind": args.kind} if args.kind else {}
            if args.last is not None:
                query["page"] = 2**31  # past the end: the last page, the newest events
            return LogBrowser(wb, page_size=shown if shown > 0 else 50, **query)

        self._show(make, table.text(), table._repr_html_())

    @subcommand("verify")
    def cmd_verify(self, rest: str, cell: str | None) -> None:
        """Re-compute the hash chains; an error if any past event, model call or checkpoint was
        changed, removed, or erased without a forget event."""
        args = parse_argstring(self.cmd_verify, rest)
        wb = self._wb()
        report = wb.verify(head=args.head, all_users=args.all)
        if not report.ok:
            raise UsageError(_one_line(report.summary(wb.store.path)))
        print(verify_line(report, wb.store.path))

    @subcommand("forget")
    def cmd_forget(self, rest: str, cell: str | None) -> None:
        """Erase a record, a source's events or everything holding a text, everywhere uac
        copied it; a forget event records what was erased, never the content."""
        args = parse_argstring(self.cmd_forget, rest)
        record = args.record or (None, None)
        wb = self._wb(read=True)
        what = {"type": record[0], "key": record[1], "source": args.source, "text": args.text}
        plan = wb.forget(**what, dry_run=args.dry_run)
        print("\n".join(forget_lines(plan, dry_run=args.dry_run)))
        if not args.dry_run and not plan.empty:
            print(verify_line(wb.verify(), wb.store.path))

    @subcommand("head")
    def cmd_head(self, rest: str, cell: str | None) -> None:
        """This user's chain head: keep it elsewhere, check later with %uac verify --head."""
        parse_argstring(self.cmd_head, rest)
        wb = self._wb()
        print("\n".join(heads_lines({wb.user: wb.head()}, wb.user)))

    @subcommand("calls")
    def cmd_calls(self, rest: str, cell: str | None) -> None:
        """The recent model calls and the tokens spent per purpose: the cost ledger."""
        from uac_kernel.model.client import call_totals, list_calls

        args = parse_argstring(self.cmd_calls, rest)
        wb = self._wb(read=not args.all_users)
        user = None if args.all_users else wb.user
        shown = self.displaylimit if args.limit is None else args.limit
        limit = shown if shown > 0 else 1_000_000
        listings = calls_listings(
            list_calls(wb.store, user, limit=limit), call_totals(wb.store, user)
        )
        bundle = {
            "text/plain": "\n".join(listings_lines(listings)),
            "text/html": listings_html(listings),
        }
        display(bundle, raw=True)
