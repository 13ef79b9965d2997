"""`uac fleet sql` and `uac fleet summary`: the fleet's queries, registered on the `fleet`
subparser. Nothing heavy is imported until a command runs (`uac --help` stays fast)."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["add_fleet_queries"]


def add_fleet_queries(fleet_sub: Any) -> None:
    """Register ``sql`` and ``summary`` on the ``fleet`` subparsers action ``fleet_sub``."""
    from uac_kernel.cli.options import sql_options

    text = (
        "run one read-only SQL query across a fleet directory's users: users, alerts, events, "
        "and one table per record type with user_id first (stopped after --timeout seconds; "
        "memory env UAC_SQL_MEMORY_MB, threads UAC_SQL_THREADS)"
    )
    p = fleet_sub.add_parser("sql", help=text, description=text)
    p.set_defaults(func=cmd_fleet_sql)
    p.add_argument("dir", help="the fleet directory")
    p.add_argument("query")
    p.add_argument("--users", default=None, metavar="A,B", help="only these users")
    sql_options(p)
    text = "a fleet directory's users, events, facts, model calls and standing alerts per rule"
    p = fleet_sub.add_parser("summary", help=text, description=text)
    p.set_defaults(func=cmd_fleet_summary)
    p.add_argument("dir", help="the fleet directory")
    p.add_argument("--json", action="store_true")


def cmd_fleet_sql(args: argparse.Namespace) -> None:
    from uac_kernel.cli.output import print_result, sql_output
    from uac_kernel.fleet.sql import fleet_sql

    out = sql_output(args)
    users = None if args.users is None else [u for u in args.users.split(",") if u]
    print_result(fleet_sql(args.dir, args.query, users=users, timeout=args.timeout), args, out)


def cmd_fleet_summary(args: argparse.Namespace) -> None:
    from uac_kernel.cli.output import to_json
    from uac_kernel.core.display import printable
    from uac_kernel.fleet.sql import fleet_summary
    from uac_kernel.render.fleet_face import summary_lines

    summary = fleet_summary(args.dir)
    if args.json:
        print(printable(to_json(summary.to_json())))
        return
    for line in summary_lines(summary):
        print(line)
