"""`uac fleet sql` and `uac fleet summary`: the fleet's queries. Nothing heavy is imported until
a command runs (`uac --help` stays fast)."""

from __future__ import annotations

import argparse

__all__ = ["cmd_fleet_sql", "cmd_fleet_summary"]


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
