"""`%uac` subcommands over the model as code: code, state, diff, history, edit, cell, constraint(s),
vocab."""

from __future__ import annotations

import ast
import hashlib
import linecache
import os
from dataclasses import replace
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic_arguments import parse_argstring

from uac_kernel.core.display import did_you_mean, plural, printable
from uac_kernel.notebook.session import Session
from uac_kernel.notebook.subcommands import _unquote, subcommand
from uac_kernel.notebook.tables import Table
from uac_kernel.render.checkpoint import diff_lines, parts_lines
from uac_kernel.render.history import history_listing, made_by
from uac_kernel.render.listings import (
    constraints_listing,
    state_listing,
    vocab_listing,
)
from uac_kernel.render.reports import alert_lines, bound_lines, in_force_lines, retracted_lines
from uac_kernel.rules.engine import Finding, Rule, rule

if TYPE_CHECKING:
    from uac_kernel.workbench import Workbench

__all__ = ["RULE_HELPERS", "CodeMagics"]

# What a @rule function written in a cell can use besides the user namespace.
RULE_HELPERS: dict[str, Any] = {
    "rule": rule,
    "Finding": Finding,
    "date": date,
    "datetime": datetime,
    "timedelta": timedelta,
}


class CodeMagics(Session):
    """`%uac` subcommands over the model as code: code, state, diff, history, edit, cell, constraint(s), vocab."""

    @subcommand("code")
    def cmd_code(self, rest: str, cell: str | None) -> None:
        """Print a checkpoint's whole code."""
        args = parse_argstring(self.cmd_code, rest)
        print(self._wb(read=True).code(args.version), end="")

    @subcommand("constrain")
    def cmd_constrain(self, rest: str, cell: str | None) -> None:
        """``%uac constrain FILE [--key K]`` puts the constraints of a YAML or JSON file in force,
        as `uac constrain FILE` does; ``%%uac constraint [--key K]`` (or ``%%uac constrain``)
        those written in the cell (one constraint, a list, or a mapping of key: constraint; see
        docs/constraints.md). A key in force is updated, so re-running an edited cell changes
        the constraint. ``%uac constrain --retract KEY [--reason R]`` retracts one. The file or
        cell is read as data, never run."""
        self._constrain(parse_argstring(self.cmd_constrain, rest), cell)

    def _constrain(self, args: Any, cell: str | None) -> None:
        from uac_kernel.constraints.files import constraints_of_file, read_constraints

        reason = _unquote(args.reason) if args.reason else None
        key = _unquote(args.key) if args.key else None
        path = os.path.expanduser(_unquote(args.file)) if args.file else None
        body = cell if cell is not None and cell.strip() else None
        if args.retract is not None:
            if body is not None or path is not None or key is not None:
                raise UsageError(
                    "`--retract KEY` takes no FILE, --key or cell; use the line magic "
                    "%uac constrain --retract KEY"
                )
            report = self._wb().retract_constraint(_unquote(args.retract), reason)
            print("\n".join(retracted_lines(report)))
            return
        if path is not None and body is not None:
            raise UsageError(
                f"give the constraints in a FILE (%uac constrain {args.file}) or in the cell "
                "(%%uac constraint), not both"
            )
        if path is not None:
            found = constraints_of_file(path, key)
        elif body is not None:
            found = read_constraints(body, "%%uac constraint", key)
        else:
            option = f" --key {args.key}" if args.key else ""
            raise UsageError(
                f"give a YAML or JSON file (%uac constrain FILE{option}) or write the constraint "
                f"in a cell under `%%uac constraint{option}`; %uac constrain --retract KEY "
                "retracts one"
            )
        origin = _unquote(args.file) if path is not None else "%%uac constraint"
        report = self._wb().constrain(found, reason=reason, origin=origin)
        print("\n".join([*report.warnings, *in_force_lines(report)]))

    @subcommand("constraints")
    def cmd_constraints(self, rest: str, cell: str | None) -> Table:
        """The constraints in force (with ``--history`` every version): key, kind, title,
        since when, who proposed it and from what, and the rule it is compiled into."""
        args = parse_argstring(self.cmd_constraints, rest)
        shown = self._wb(read=True).constraints(history=args.history)
        return Table.of(constraints_listing(shown, args.history), self.displaylimit)

    @subcommand("vocab")
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
            return Table.of(vocab_listing("unbound", rows), self.displaylimit)
        if cell is not None and cell.strip():
            if words:
                raise UsageError("`%%uac vocab` takes its commands in the cell, not on its line")
            lines = listing.vocab_lines(cell)
        elif words in (["concepts"], ["roles"]):
            rows = listing.catalogue_rows(words == ["roles"])
            return Table.of(vocab_listing(words[0], rows), self.displaylimit)
        elif words:
            lines = [listing.vocab_command(words)]
        else:
            wb = self._wb(read=True)
            table = Table.of(vocab_listing("bindings", listing.binding_rows(wb.vocab())), 0)

            def make() -> Any:
                from uac_kernel.notebook.widgets_act import VocabView

                return VocabView(wb)

            self._show(make, table.text(), table._repr_html_())
            return None
        wb = self._wb()
        given = [wb.binding(t, name, reason=reason, status=st) for t, name, st in lines]
        print("\n".join(bound_lines(wb.bind_all(given))))
        return None

    @subcommand("state")
    def cmd_state(self, rest: str, cell: str | None) -> None:
        """Explore the typed state (a widget; record counts per type as text)."""
        parse_argstring(self.cmd_state, rest)
        wb = self._wb(read=True)
        counts = wb.state.counts()
        versions = {name: len(wb.state.history(name)) for name in counts}
        table = Table.of(state_listing(counts, versions), 0)

        def make() -> Any:
            from uac_kernel.notebook.widgets import StateExplorer

            return StateExplorer(wb)

        self._show(make, table.text(), table._repr_html_())

    @subcommand("diff")
    def cmd_diff(self, rest: str, cell: str | None) -> None:
        """What changed from checkpoint A to B (a widget, and the summary as text)."""
        args = parse_argstring(self.cmd_diff, rest)
        wb = self._wb(read=True)
        lines = diff_lines(wb.diff(args.a, args.b))

        def make() -> Any:
            from uac_kernel.notebook.widgets import DiffView

            return DiffView(wb, args.a, args.b)

        self._show(make, "\n".join(lines))

    @subcommand("history")
    def cmd_history(self, rest: str, cell: str | None) -> Table:
        """Every version of one record: when it held, whether it was retracted, what changed
        from the version before (the first: the fields it came with), the log events behind
        it and all its fields."""
        args = parse_argstring(self.cmd_history, rest)
        wb = self._wb(read=True)
        type_name, key = _unquote(args.type), _unquote(args.key)
        versions = wb.versions(type_name, key)
        events = wb.store.events_at(wb.user, made_by(versions))
        listing = history_listing(type_name, key, wb.user, versions, events)
        print(printable(listing.caption))  # the header: whose record, how many versions
        return Table.of(replace(listing, caption=""), self.displaylimit)

    @subcommand("edit")
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
            print("\n".join(parts_lines(version, wb.parts(version), pinned=True)))
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

    @subcommand("cell")
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
        lines += alert_lines(report)
        for r, source in rules:
            change = wb.define_rule(r, source)
            standing = sum(1 for a in wb.alerts() if a.rule == r.name)
            lines.append(f"rule {r.name}: in force, {plural(standing, 'alert')} standing")
            lines += alert_lines(change)
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
