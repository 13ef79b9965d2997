"""The `uac` argument parser: every command, its arguments and help, and the argument types checked
before a store opens."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, NoReturn

from uac_kernel.cli.bench_cmds import (
    cmd_bench_aggregate,
    cmd_bench_alerts,
    cmd_bench_locomo,
    cmd_bench_vocab,
)
from uac_kernel.cli.fleet import add_fleet_queries
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
from uac_kernel.cli.options import FORCE_HELP, sql_options
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
from uac_kernel.core.errors import CommandLineError, QueryError
from uac_kernel.ingest.adapters import FORMATS

__all__ = ["COUNT", "FLEET_JOBS", "POSITIVE", "build_parser"]


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
