"""Every command of `uac` and `%uac`, declared once: name, help, arguments, faces, the renderer
of its report and its marimo helper (the order is `uac --help`'s and the README's command table's:
the walk-through's order, then the model, many users, benchmarks, the demo)."""

from __future__ import annotations

from uac_kernel.commands.declare import CLI, MAGIC, VALUE, Arg, Command, Face, Marimo, arg
from uac_kernel.commands.types import (
    COUNT,
    FLEET_JOBS,
    FORCE_HELP,
    POSITIVE,
    moment,
    per_second,
    seconds,
)
from uac_kernel.ingest.adapters import FORMATS  # light: `uac --help` imports it

__all__ = ["COMMANDS", "GROUPS", "declared"]


_TERMINAL = (CLI,)  # printing JSON or writing a file is the terminal's; a notebook shows both
_NOTEBOOK = (MAGIC,)


def _force() -> Arg:
    return arg("--force", action="store_true", help=FORCE_HELP, faces=_TERMINAL)


def _json(help: str | None = "print JSON") -> Arg:
    return arg("--json", action="store_true", help=help, faces=_TERMINAL)


def _model_options() -> tuple[Arg, ...]:
    """The model a terminal command talks to (a notebook sets it with ``%config UacMagics``)."""
    return (
        arg("--model", default=None, help="model name (env UAC_MODEL)", faces=_TERMINAL),
        arg(
            "--base-url",
            default=None,
            help="OpenAI-compatible endpoint (env OPENAI_BASE_URL)",
            faces=_TERMINAL,
        ),
        arg(
            "--offline",
            action="store_true",
            help="answer only from recorded calls (env UAC_OFFLINE=1)",
            faces=_TERMINAL,
        ),
    )


def _sql_options() -> tuple[Arg, ...]:
    """The output and time options of a SQL command (`sql`, `fleet sql`)."""
    return (
        _json(),
        arg(
            "--out",
            default=None,
            metavar="FILE",
            help="write every row to FILE (TSV, or JSON with --json); the terminal gets 100 kB",
            faces=_TERMINAL,
        ),
        _force(),
        arg(
            "--timeout",
            type=seconds,
            default=None,
            metavar="S",
            help="stop the query after S seconds (default 30, env UAC_SQL_TIMEOUT; "
            "UacMagics.sql_timeout in a notebook)",
        ),
    )


def _rest_of_line(name: str, help: str) -> Arg:
    """One quoted word in a terminal; the rest of the line in a notebook."""
    return arg(name, help=help, magic={"nargs": "+"})


def _scenario_sets() -> tuple[Arg, ...]:
    """The options of a bench over the alert scenarios: where results go, which sets."""
    return (
        arg("--out", default="bench/results", help="directory for the JSON and text results"),
        arg(
            "--set",
            choices=("public", "holdout", "all"),
            default="all",
            help="the public 40, our held-out scenarios, or both (default)",
        ),
    )


_CONSTRAIN = (
    arg(
        "file",
        nargs="?",
        default=None,
        metavar="FILE",
        help="a YAML or JSON file of constraints (in a notebook: or a %%%%uac constraint cell)",
    ),
    arg("--key", default=None, help="the key of the file's (or cell's) one constraint"),
    arg("--retract", default=None, metavar="KEY", help="retract constraint KEY"),
    arg("--reason", default=None, help="why (logged with the events)"),
    arg("--source", default=None, help="where the constraints come from", faces=_TERMINAL),
)

_SELECTION = (
    arg(
        "--key",
        action="extend",
        nargs="+",
        metavar="KEY",
        help="only the records with these keys (one or several; repeatable)",
    ),
    arg(
        "--where",
        metavar="EXPR",
        help="only the records r for which EXPR is true, e.g. --where \"r.country == 'Japan'\"",
    ),
    arg("--last", type=POSITIVE, metavar="N", help="only the N most recently changed records"),
)

_ALL: tuple[Command, ...] = (
    Command(
        "ingest",
        "append a file of events or conversations to the log",
        (
            arg("file", help="Event JSONL, a LoCoMo or LongMemEval file, or chat messages"),
            arg(
                "--format",
                choices=["auto", *FORMATS],
                default="auto",
                help="the file's format: Event JSONL, a LoCoMo or LongMemEval file, or "
                "OpenAI-style chat messages (default: detected)",
            ),
            arg(
                "--history",
                group="history",
                help="the one conversation of a LoCoMo/LongMemEval file to ingest",
            ),
            arg(
                "--per-history",
                action="store_true",
                group="history",
                help="ingest each conversation as its own user",
                faces=_TERMINAL,  # a notebook's session is one user
            ),
        ),
        report="reports",
        marimo="a plain engine call: wb.ingest(path) returns the report",
    ),
    Command(
        "eval",
        "evaluate a sandboxed Python expression; prints JSON (the first 100 kB; --out for all)",
        (
            _rest_of_line("expr", "a Python expression over `user` (or the cell body)"),
            arg(
                "--out",
                default=None,
                metavar="FILE",
                help="write the whole result to FILE",
                faces=_TERMINAL,
            ),
            _force(),
        ),
        cell=True,
        magic_help="evaluate a sandboxed Python expression (the rest of the line) and return "
        "its value",
        cell_form=("%%uac eval", "the expression"),
        report=VALUE,  # any Python value: JSON in a terminal, the object itself in a notebook
        marimo=Marimo("evaluate"),
    ),
    Command(
        "sql",
        "run one read-only SQL query over one table per record type (stopped after --timeout "
        "seconds; memory env UAC_SQL_MEMORY_MB, threads UAC_SQL_THREADS)",
        (
            _rest_of_line("query", "SQL over one table per record type (or the cell body)"),
            *_sql_options(),
        ),
        cell=True,
        cell_form=("%%uac sql [--timeout S]", "the query"),
        report="listings",
        marimo="a value: wb.sql(query), which mo.ui.table shows",
    ),
    Command(
        "alerts",
        "the alerts standing now",
        (_json(),),
        report="alerts",
        marimo=Marimo("alert_inspector"),
    ),
    Command(
        "constrain",
        "put constraints in force from a YAML or JSON file (one, a list, or key: constraint), "
        "or retract one; see docs/constraints.md",
        _CONSTRAIN,
        aliases=("constraint",),
        cell=True,
        magic_help="put constraints in force from a YAML or JSON file or a `%%uac constraint` "
        "cell (one, a list, or key: constraint), or retract one; see docs/constraints.md",
        cell_form=(
            "%%uac constraint [--key KEY] [--reason REASON]",
            "the constraints, YAML or JSON",
        ),
        report="reports",
        marimo=Marimo("constrain", own=("text",)),
    ),
    Command(
        "constraints",
        "the constraints in force, and the rule of each",
        (arg("--history", action="store_true", help="every version, ended ones too"), _json()),
        report="listings",
        marimo=Marimo("constraints_table"),
    ),
    Command(
        "whatif",
        "fold hypothetical events onto a copy of the user and show what would change: records, "
        "alerts raised, escalated or cleared, answers; nothing is written (see docs/whatif.md)",
        (
            arg(
                "file",
                metavar="FILE",
                help="Event JSONL (or .yaml/.json) of the events",
                faces=_TERMINAL,
            ),
            arg(
                "var",
                nargs="?",
                help="a Python list of event dicts in the namespace (no cell)",
                faces=_NOTEBOOK,
            ),
            arg(
                "--as-of",
                type=moment,
                default=None,
                metavar="DATE",
                help="insert the events at DATE and replay the later log on top (a past what-if)",
            ),
            arg(
                "--expr",
                action="append",
                default=None,
                metavar="EXPR",
                help="an expression over `user` to re-run before and after (repeatable; in a "
                "notebook the default is those the session evaluated or asked)",
            ),
            _json("the whole report as JSON"),
            arg(
                "--chart",
                default=None,
                metavar="OUT",
                help="draw the alert timelines, real and what-if, into OUT (.svg, .png or .html)",
                faces=_TERMINAL,
            ),
            _force(),
        ),
        cell=True,
        cell_form=(
            "%%uac whatif [--as-of DATE] [--expr EXPR]",
            "the events: JSONL, a JSON array or YAML",
        ),
        report="whatif_face",
        marimo=Marimo("whatif", names={"var": "events", "expr": "expressions"}),
    ),
    Command(
        "checkpoint",
        "store the current state as a new version of typed code",
        report="checkpoint",
        marimo="a plain engine call: wb.checkpoint()",
    ),
    Command(
        "checkpoints",
        "list the checkpoints",
        report="listings",
        marimo="a plain engine call: wb.checkpoints.all()",
    ),
    Command(
        "code",
        "print a checkpoint's code, or write it as a module (--out)",
        (
            arg("--version", type=POSITIVE, default=None, help="the checkpoint (default: latest)"),
            arg(
                "--out",
                default=None,
                metavar="PATH",
                help="write the module to PATH.py",
                faces=_TERMINAL,
            ),
            _force(),
        ),
        report=VALUE,  # the checkpoint's code, as it is: a terminal prints it, a notebook too
        magic_help="print a checkpoint's code",
        marimo="a value: wb.code(version)",
    ),
    Command(
        "diff",
        "what changed between two checkpoints",
        (
            arg("a", type=POSITIVE, help="the older checkpoint"),
            arg("b", type=POSITIVE, help="the newer checkpoint"),
        ),
        report="checkpoint",
        marimo=Marimo("diff_view"),
    ),
    Command(
        "state",
        "record types with their current records and versions",
        report="listings",
        marimo=Marimo("state_explorer", own=("page_size", "query")),
    ),
    Command(
        "history",
        "every version of one record and how it came: asserted, updated or retracted, with "
        "the seq, time and reason of each event",
        (
            arg("type", help="a record type, e.g. Trip"),
            arg("key", help="the record's key"),
            _json("print the history as JSON, every reason whole"),
        ),
        report="listings",
        marimo="a plain engine call: wb.versions(type, key)",
    ),
    Command(
        "log",
        "print events of the log",
        (
            arg(
                "--kind",
                default=None,
                help="only events of this kind (utterance, fact, alert, ...)",
            ),
            arg("--after", type=COUNT, default=0, help="only events after this seq"),
            arg(
                "--limit",
                type=COUNT,
                metavar="N",
                help="the first N events (a terminal: 50; a notebook: UacMagics.displaylimit "
                "a page); 0 for all",
                group="shown",
                cli={"default": 50},
                magic={"default": None},
            ),
            arg(
                "--last",
                type=POSITIVE,
                metavar="N",
                help="the N newest events instead, oldest first like a tail (with --kind: of "
                "that kind; with --after: the newest N after that seq)",
                group="shown",
            ),
            _json("print the events whole, their payloads as the log holds them"),
        ),
        report="log_listings",
        marimo=Marimo(
            # the widget supplies a page (after) and pages to the newest itself (last)
            "log_browser",
            widget=("after", "last"),
            names={"limit": "page_size"},
            own=("query",),
        ),
    ),
    Command(
        "users",
        "the users and their events: all kinds, facts, utterances",
        report="log_listings",
        marimo="a plain engine call: wb.store.user_kind_counts()",
    ),
    Command(
        "vocab",
        "the user's vocabulary (which types and fields carry the concepts rules read), or "
        "`bind TYPE.FIELD CONCEPT`, `bind TYPE ROLE`, `unbind ...`, `concepts`, `roles`; see "
        "docs/vocabulary.md",
        (
            arg(
                "words",
                nargs="*",
                metavar="ACTION",
                help="bind|unbind TARGET NAME, concepts or roles",
            ),
            arg("--reason", default=None, help="why (logged with the bindings)"),
            arg(
                "--unbound",
                action="store_true",
                help="the types and fields that look like dates, deadlines, amounts, documents "
                "or substances and that no rule or constraint reads, with the bind that would "
                "change that",
            ),
            _json(),
        ),
        cell=True,
        cell_form=("%%uac vocab [--reason REASON]", "one `bind ...` or `unbind ...` a line"),
        report="listings",
        marimo="plain engine calls: wb.vocab(), wb.bind(...), wb.unwatched()",
    ),
    Command(
        "verify",
        "re-compute the hash chains (one user's with --user, else every user's); fails if any "
        "event, model call or checkpoint was changed, removed or erased without a forget event",
        (
            arg(
                "--head",
                default=None,
                metavar="HEAD",
                help="a head printed by the head command (or the file it was saved to): the "
                "chains must still pass through it",
            ),
            arg(
                "--all",
                action="store_true",
                help="every user of the store, not only this one",
                faces=_NOTEBOOK,  # a terminal verifies every user unless --user names one
            ),
            arg(
                "fleet",
                nargs="?",
                default=None,
                metavar="DIR",
                help="a fleet directory (`uac export`) to verify instead of the store: its "
                "commits, files and every user's chains",
                faces=_TERMINAL,
            ),
        ),
        report="integrity",
        marimo="a plain engine call: wb.verify(head=..., all_users=...)",
        magic_help="re-compute the user's hash chains (every user's with --all); fails if any "
        "event, model call or checkpoint was changed, removed or erased without a forget event",
    ),
    Command(
        "head",
        "print each user's chain head (one user's with --user); keep it elsewhere and check "
        "the store against it later with `uac verify --head`",
        magic_help="print the user's chain head; keep it elsewhere and check the store against "
        "it later with `%uac verify --head`",
        report="integrity",
        marimo="a plain engine call: wb.head()",
    ),
    Command(
        "forget",
        "erase a record, a source's events, or everything holding a text, from the log, model "
        "calls, checkpoints and the store file (a forget event says what, never the content)",
        (
            arg("--record", nargs=2, metavar=("TYPE", "KEY"), help="one record", group="what"),
            arg("--source", help="the events of one source, e.g. chat-42#3", group="what"),
            arg("--text", help="every event that holds this text (any case)", group="what"),
            arg("--dry-run", action="store_true", help="list what would go; change nothing"),
        ),
        required=frozenset({"what"}),
        report="forget",
        marimo="a plain engine call: wb.forget(...) returns the plan",
    ),
    Command(
        "extract",
        "turn pending utterances into typed facts with the model",
        (
            *_model_options(),
            arg("--batch-size", type=POSITIVE, default=10, help="utterances per model call"),
            # Caps on one batch's answer (ExtractionLimits); an answer over one is invalid.
            arg("--max-operations", type=POSITIVE, default=None, help="cap per batch (100)"),
            arg("--max-new-types", type=COUNT, default=None, help="cap per batch (10)"),
            arg("--max-new-fields", type=COUNT, default=None, help="cap per batch (60)"),
        ),
        report="reports",
        marimo="a plain engine call: wb.extract() returns the report",
    ),
    Command(
        "review",
        "model answers held for review: list them with a diff, or accept or reject one",
        (
            arg("action", nargs="?", choices=["accept", "reject"], help="the decision"),
            arg("batch", nargs="?", type=POSITIVE, metavar="ID", help="a held batch's ID"),
            arg("--only", default=None, metavar="N,M", help="accept only these operations"),
        ),
        description=(
            "An extraction answer that would retract or overwrite more than max(3, 10%) of the "
            "current records, or change a record its turns do not mention, is held, not applied. "
            "`review` lists held batches (each operation: the record before -> after, "
            "retractions marked); `review accept ID [--only 1,3]` applies them (re-validated "
            "against the state now); `review reject ID` drops them. The call record keeps "
            "every answer."
        ),
        report="review",
        marimo="plain engine calls: wb.review(), wb.accept(...), wb.reject(...)",
    ),
    Command(
        "ask",
        "answer a question with code the model writes; runs sandboxed",
        (
            *_model_options(),
            _rest_of_line("question", "a question about the user (or the cell body)"),
            _json(),
        ),
        cell=True,
        cell_form=("%%uac ask", "the question"),
        report="answer",
        marimo="a value: wb.ask(question) returns the Answer, which marimo shows",
    ),
    Command(
        "calls",
        "model calls and tokens per purpose (the cost ledger)",
        (
            arg(
                "--limit",
                type=COUNT,
                help="the most recent calls shown (a terminal: 20; a notebook: "
                "UacMagics.displaylimit); 0 for all",
                cli={"default": 20},
                magic={"default": None},
            ),
            arg("--all-users", action="store_true", help="the calls of every user of the store"),
        ),
        report="log_listings",
        marimo="plain engine calls: model.client.list_calls(wb.store), call_totals(wb.store)",
    ),
    Command(
        "export",
        "write the store's users (one with --user) into a fleet directory of per-user Parquet "
        "partitions, appending only what it does not hold yet",
        (
            arg("store", metavar="STORE", help="the store file to read"),
            arg("dir", metavar="DIR", help="the fleet directory (created if new)"),
        ),
        faces=frozenset(_TERMINAL),
    ),
    Command(
        "import",
        "append a fleet directory's users (one with --user) to a store, in one transaction",
        (
            arg("dir", metavar="DIR", help="the fleet directory"),
            arg("store", metavar="STORE", help="the store file (created if new)"),
        ),
        faces=frozenset(_TERMINAL),
    ),
    Command(
        "fleet run",
        "run a job for every user of a fleet, one task per user (local processes or Ray)",
        (
            arg("dir", metavar="DIR"),
            arg("job", metavar="JOB", choices=FLEET_JOBS),
            arg("args", nargs="*", metavar="ARG", help="the job's arguments"),
            arg("--engine", choices=("local", "ray"), default="local"),
            arg("--jobs", type=POSITIVE, default=2, help="workers (default 2)"),
            arg(
                "--concurrency",
                type=POSITIVE,
                default=8,
                help="model calls in flight (default 8)",
            ),
            arg(
                "--rate",
                type=per_second,
                default=None,
                help="model calls per second (default: any)",
            ),
            arg("--retries", type=COUNT, default=2, help="tries again per task (default 2)"),
            arg("--users", default=None, metavar="A,B", help="only these users", group="who"),
            arg("--limit", type=POSITIVE, default=None, help="only the first N users", group="who"),
            *_model_options(),
        ),
        faces=frozenset(_TERMINAL),
        store=False,
        description="Run JOB for every user of the fleet DIR: ingest SRC, extract, checkpoint, "
        "alerts, eval EXPR, ask QUESTION, bench [EXPR], call MODULE:FUNCTION [ARG ...]. Each "
        "user's work is committed to their partition as one commit, then their result is "
        "written to DIR/runs/RUN/results; a rerun skips the users done.",
    ),
    Command(
        "fleet sql",
        "run one read-only SQL query across a fleet directory's users: users, alerts, events, "
        "and one table per record type with user_id first (stopped after --timeout seconds; "
        "memory env UAC_SQL_MEMORY_MB, threads UAC_SQL_THREADS)",
        (
            arg("dir", help="the fleet directory"),
            arg("query"),
            arg("--users", default=None, metavar="A,B", help="only these users"),
            *_sql_options(),
        ),
        faces=frozenset(_TERMINAL),
        store=False,
    ),
    Command(
        "fleet summary",
        "a fleet directory's users, events, facts, model calls and standing alerts per rule",
        (arg("dir", help="the fleet directory"), _json()),
        faces=frozenset(_TERMINAL),
        store=False,
    ),
    Command(
        "bench aggregate",
        "aggregate questions: typed state vs retrieval",
        (
            *_model_options(),
            arg("--sizes", type=POSITIVE, nargs="+", default=[20, 50, 100, 200, 500]),
            arg("--seed", type=int, default=0),
            arg("--k", type=POSITIVE, default=10, help="top-k of the retrieval systems"),
            arg("--out", default=None, help="directory for the JSON, cases and chart"),
            arg("--no-embeddings", action="store_true", help="skip the embedding system"),
        ),
        faces=frozenset(_TERMINAL),
    ),
    Command(
        "bench alerts",
        "the 40 active-service scenarios: alerts raised in time?",
        (*_model_options(), *_scenario_sets()),
        faces=frozenset(_TERMINAL),
    ),
    Command(
        "bench vocab",
        "the alert scenarios re-spelt in other names: does the library keep its score?",
        (
            *_scenario_sets(),
            arg(
                "--seeds",
                type=int,
                nargs="+",
                default=[0, 1, 2],
                help="re-spell under these seeds",
            ),
            arg(
                "--report",
                action="store_true",
                help="print the renamings (original -> new), run nothing",
            ),
            arg(
                "--no-blame",
                action="store_true",
                help="do not replay each renaming of a lost scenario alone to name those that "
                "lose it",
            ),
        ),
        faces=frozenset(_TERMINAL),
    ),
    Command(
        "bench locomo",
        "LoCoMo through uac: extract, ask, score (needs a model)",
        (
            *_model_options(),
            arg("path", help="the LoCoMo JSON file (e.g. locomo10.json)"),
            arg("--samples", nargs="*", help="only these sample ids"),
            arg("--limit", type=POSITIVE, default=None, help="only the first N questions"),
            arg(
                "--out",
                default=None,
                help="where results and the progress file go (default: beside --db)",
            ),
            arg("--judge-model", default=None, help="the judge's model (default: --model)"),
        ),
        faces=frozenset(_TERMINAL),
    ),
    Command(
        "demo",
        "build the demo user and show what uac does (offline by default)",
        (
            arg(
                "--live",
                action="store_true",
                help="call the configured model instead of the bundled record",
            ),
        ),
        faces=frozenset(_TERMINAL),
    ),
    # -- the notebook's own ------------------------------------------------------------------
    Command(
        "open",
        "open a store for one user (closing the workbench open before) and bind it",
        (
            arg("path", nargs="?", help="the store file (default: UacMagics.db)"),
            arg("--user", default=None, help="the user id (default: UacMagics.user)"),
            arg("--read-only", action="store_true", help="open without taking the write lock"),
        ),
        faces=frozenset(_NOTEBOOK),
        marimo="a plain engine call: uac.open(path, user=...)",
    ),
    Command(
        "close",
        "close the open workbench, releasing the store's lock for other processes",
        faces=frozenset(_NOTEBOOK),
        marimo="a plain engine call: wb.close()",
    ),
    Command(
        "edit",
        "turn this cell into a part of a checkpoint's code, to edit and run",
        (
            arg("part", nargs="?", help="schema, a record type (e.g. Trip) or rules"),
            arg("--version", type=POSITIVE, default=None, help="the checkpoint (default: latest)"),
            *_SELECTION,
            arg("--print", action="store_true", help="also print the code below the cell"),
            arg("--all", action="store_true", help="list a command for every part"),
        ),
        faces=frozenset(_NOTEBOOK),
        marimo="marimo edits code in its own cells; a checkpoint's code is wb.code()",
    ),
    Command(
        "cell",
        "an edited part of a checkpoint's code: its changes become correction events",
        (
            arg(
                "--version", type=POSITIVE, required=True, help="the checkpoint the cell came from"
            ),
            arg("--part", required=True, help="the part the cell holds"),
            *_SELECTION,
            arg(
                "--dry-run",
                action="store_true",
                help="show what the edit would change (records, alerts, answers); append nothing",
            ),
        ),
        faces=frozenset(_NOTEBOOK),
        cell=True,
        cell_form=(
            "%%uac cell --version VERSION --part PART [--dry-run]",
            "the part's code, as `%uac edit` wrote it, edited",
        ),
        marimo="marimo edits code in its own cells; an edit is wb.apply_edit(...)",
    ),
    Command(
        "chart",
        "draw the events, records or alerts over time, or a result",
        (
            arg("kind", choices=["events", "records", "alerts", "result"], help="what to draw"),
            arg(
                "--freq",
                choices=["day", "week", "month", "quarter", "year"],
                help="events and records charts only: the period of a bar",
            ),
            arg("expr", nargs="*", help="for `result`: an expression (the rest of the line)"),
        ),
        faces=frozenset(_NOTEBOOK),
        marimo=Marimo("chart"),
    ),
    Command(
        "fleet",
        "a fleet directory: its summary, a SQL query across its users, or a run of a job",
        (arg("words", nargs="*", help="DIR, sql [--timeout S] DIR QUERY, or run ... DIR JOB"),),
        faces=frozenset(_NOTEBOOK),
        cell=True,
        cell_form=("%%uac fleet sql [--timeout S] DIR", "the query"),
        marimo=Marimo("fleet", names={"words": "root"}),
    ),
)

# The help of each group of commands in a terminal (`uac bench ...`, `uac fleet ...`).
GROUPS: dict[str, str] = {
    "bench": "benchmarks: aggregate, alerts, vocab, locomo",
    "fleet": "many users in a fleet directory (uac export)",
}

COMMANDS: dict[str, Command] = {c.name: c for c in _ALL}


def declared(face: Face) -> list[Command]:
    """The commands typed on ``face``, in declared order."""
    return [c for c in _ALL if face in c.faces]
