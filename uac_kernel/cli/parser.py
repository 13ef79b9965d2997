"""The `uac` argument parser, built from the commands' declarations (``commands.catalogue``):
each command's body, and the one-line form of a mistake."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from uac_kernel.cli.bench_cmds import (
    cmd_bench_aggregate,
    cmd_bench_alerts,
    cmd_bench_locomo,
    cmd_bench_vocab,
)
from uac_kernel.cli.fleet import cmd_fleet_sql, cmd_fleet_summary
from uac_kernel.cli.log_cmds import (
    cmd_calls,
    cmd_export,
    cmd_forget,
    cmd_head,
    cmd_import,
    cmd_ingest,
    cmd_log,
    cmd_users,
    cmd_verify,
)
from uac_kernel.cli.model_cmds import cmd_ask, cmd_demo, cmd_extract, cmd_fleet_run, cmd_review
from uac_kernel.cli.opening import DEFAULT_DB
from uac_kernel.cli.state_cmds import (
    cmd_alerts,
    cmd_checkpoint,
    cmd_checkpoints,
    cmd_code,
    cmd_constrain,
    cmd_constraints,
    cmd_diff,
    cmd_eval,
    cmd_history,
    cmd_sql,
    cmd_state,
    cmd_vocab,
    cmd_whatif,
)
from uac_kernel.commands.catalogue import GROUPS, declared
from uac_kernel.commands.declare import CLI
from uac_kernel.core.errors import CommandLineError

__all__ = ["BODIES", "build_parser"]

# The body of each command the terminal declares (commands.catalogue), by name.
BODIES: dict[str, Callable[[argparse.Namespace], None]] = {
    "ingest": cmd_ingest,
    "checkpoint": cmd_checkpoint,
    "checkpoints": cmd_checkpoints,
    "users": cmd_users,
    "state": cmd_state,
    "history": cmd_history,
    "code": cmd_code,
    "diff": cmd_diff,
    "eval": cmd_eval,
    "sql": cmd_sql,
    "alerts": cmd_alerts,
    "constrain": cmd_constrain,
    "vocab": cmd_vocab,
    "whatif": cmd_whatif,
    "constraints": cmd_constraints,
    "log": cmd_log,
    "verify": cmd_verify,
    "export": cmd_export,
    "import": cmd_import,
    "forget": cmd_forget,
    "head": cmd_head,
    "extract": cmd_extract,
    "review": cmd_review,
    "ask": cmd_ask,
    "bench aggregate": cmd_bench_aggregate,
    "bench alerts": cmd_bench_alerts,
    "bench vocab": cmd_bench_vocab,
    "bench locomo": cmd_bench_locomo,
    "fleet run": cmd_fleet_run,
    "fleet sql": cmd_fleet_sql,
    "fleet summary": cmd_fleet_summary,
    "calls": cmd_calls,
    "demo": cmd_demo,
}


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


def build_parser() -> argparse.ArgumentParser:
    """`uac`'s parser: the store options, then every command the terminal declares."""
    from uac_kernel.commands.declare import add_arguments

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
    groups: dict[str, Any] = {}
    for command in declared(CLI):
        group, _, name = command.name.rpartition(" ")
        where = sub
        if group:
            if group not in groups:
                text = GROUPS[group]
                g = sub.add_parser(group, help=text, description=text)
                groups[group] = g.add_subparsers(dest=group, required=True, metavar=group.upper())
            where = groups[group]
        p = where.add_parser(
            name,
            parents=[common] if command.store else [],
            help=command.help,
            description=command.description or command.help,
            aliases=list(command.aliases),
        )
        p.set_defaults(func=BODIES[command.name])
        add_arguments(p, command, CLI)
    return parser
