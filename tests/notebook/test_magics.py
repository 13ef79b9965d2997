"""``%load_ext uac``: the magics on a real IPython kernel shell, over a real DuckDB file.

The shell is ipykernel's in-process kernel shell — the ``ZMQInteractiveShell`` a notebook
talks to — so ``set_next_input`` writes the payload a front-end reads.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
pytest.importorskip("ipykernel", reason="pip install -e '.[dev]'")

from helpers.checkpoints import without_record
from helpers.events import fact
from helpers.magics import change, edit_cell, run, run_out, usage_error, widget_outputs
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from uac_kernel.commands.catalogue import COMMANDS
from uac_kernel.commands.declare import MAGIC
from uac_kernel.core.errors import QueryError
from uac_kernel.model.ask import Answer
from uac_kernel.notebook.magics import UacMagics
from uac_kernel.notebook.tables import Table
from uac_kernel.rules.engine import Rule
from uac_kernel.sql.view import SqlResult
from uac_kernel.workbench import Workbench

HOSTILE = (
    "a \"quote\" 'apostrophe' back\\slash\nnew line \"); import os; os.system('touch CANARY') #"
)


def wb_of(ip: Any) -> Workbench:
    wb = ip.user_ns["wb"]
    assert isinstance(wb, Workbench)
    return wb


@pytest.fixture
def loaded(ip: Any) -> Any:
    """The demo medications ingested and checkpoint 1 taken."""
    run(ip, "%uac open")
    run(ip, "%uac ingest events.jsonl")
    run(ip, "%uac checkpoint")
    return ip


# -- open, ingest, checkpoint, queries --------------------------------------------------------


def test_open_ingest_checkpoint_eval(ip: Any, tmp_path: Path) -> None:
    out = run_out(ip, "%uac open")
    assert "user 'maya' of" in out and "maya.duckdb" in out and "bound to `wb`" in out
    assert wb_of(ip).store.path == str(tmp_path / "maya.duckdb")
    out = run_out(ip, "%uac ingest events.jsonl --format jsonl")
    assert "3 events appended" in out and "raised [critical] drug_allergy_cross_reactivity" in out
    out = run_out(ip, "%uac checkpoint")
    assert out.startswith("checkpoint 1: 3 records")
    for part in ("schema", "Allergy", "Medication", "rules"):
        assert f"  %uac edit {part}\n" in out
    run(ip, "n = %uac eval len(user.all(Medication))")
    assert ip.user_ns["n"] == 2
    assert run(ip, "%%uac eval\nsorted({m.name for m in user.all(Medication)})") == [
        "amoxicillin",
        "ibuprofen",
    ]
    out = run_out(ip, "%uac open --read-only")
    assert "(read-only)" in out and "3 records in 2 types, 1 checkpoint (latest 1)" in out
    assert "1 standing alert (1 critical)" in out


def test_subcommands_open_the_configured_store_on_first_use(ip: Any, tmp_path: Path) -> None:
    out = run_out(ip, "%uac ingest events.jsonl")
    assert "user 'maya'" in out and "3 events appended" in out
    assert wb_of(ip).user == "maya" and (tmp_path / "maya.duckdb").exists()


def test_sql_cell_returns_the_result_shown_as_an_escaped_table(loaded: Any) -> None:
    ip = loaded
    wb_of(ip).ingest(
        [
            {
                "kind": "fact",
                "ts": "2024-12-01",
                "op": "add",
                "type": "Medication",
                "key": "x",
                "fields": {"name": "<script>alert(1)</script>"},
            }
        ]
    )
    result = run(ip, "%%uac sql\nSELECT key, name FROM Medication ORDER BY key")
    assert isinstance(result, SqlResult) and [r[0] for r in result.rows] == ["amox", "ibu", "x"]
    run(ip, "%config UacMagics.displaylimit = 2")
    data, _ = ip.display_formatter.format(result)
    assert "&lt;script&gt;" not in data["text/html"]  # cut by displaylimit
    assert "1 more row " in data["text/html"] and "1 more row " in data["text/plain"]
    run(ip, "%config UacMagics.displaylimit = 20")
    data, _ = ip.display_formatter.format(result)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in data["text/html"]
    assert "<script>" not in data["text/html"]
    assert data["text/plain"].splitlines()[0].split() == ["key", "name"]
    line = run(ip, "%uac sql SELECT count(*) AS n FROM Medication_history")
    assert line.records() == [{"n": 3}]


def test_history_shows_every_version(loaded: Any) -> None:
    ip = loaded
    wb_of(ip).ingest(
        [
            {
                "kind": "fact",
                "ts": "2024-12-01",
                "op": "update",
                "type": "Medication",
                "key": "ibu",
                "fields": {"dose_mg": 400.0},
            }
        ]
    )
    table = run(ip, "%uac history Medication ibu")
    assert isinstance(table, Table)
    assert table.columns == [
        "how", "seq", "at", "reason", "version", "valid_from", "valid_to", "fields"
    ]  # fmt: skip
    assert [r[0] for r in table.rows] == ["asserted", "updated"]
    # the fields it was asserted with, then only what the correction changed
    assert [r[7] for r in table.rows] == [
        {"name": "ibuprofen", "dose_mg": 200.0},
        {"dose_mg": 400.0},
    ]
    assert table.text().splitlines()[-1].endswith("\tdose_mg=400.0")
    assert table.rows[0][6] is not None and table.rows[1][6] is None
    # the header is printed above the table (so the text view has it too), not a caption
    assert run_out(ip, "%uac history Medication ibu") == (
        "Medication 'ibu' of user 'maya': 2 versions\n"
    )
    assert "Did you mean 'ibu'?" in usage_error(ip, "%uac history Medication ibuu")
    assert "Did you mean 'Medication'?" in usage_error(ip, "%uac history medication ibu")


def test_history_text_shows_what_each_version_changed(loaded: Any) -> None:
    """An update of a record with long fields: the text shows what it changed, each change
    whole in its cell (a tab-separated line a version, as `uac history` prints it)."""
    ip = loaded
    bactrim = {
        "name": "Bactrim DS (sulfamethoxazole/trimethoprim)",
        "dose": "800/160 mg twice daily with a full glass of water",
        "start": "2025-02-12",
        "active": True,
    }
    wb_of(ip).ingest(
        [
            {"kind": "fact", "ts": "2025-02-12", "op": "add", "type": "Medication"}
            | {"key": "bactrim", "fields": bactrim},
            {"kind": "fact", "ts": "2025-02-26", "op": "update", "type": "Medication"}
            | {"key": "bactrim", "fields": {"active": False, "end": "2025-02-26"}},
        ]
    )
    text = run(ip, "%uac history Medication bactrim").text()
    header, *lines = text.splitlines()
    changed = header.split("\t").index("fields")
    assert [ln.split("\t")[changed] for ln in lines] == [
        "name=Bactrim DS (sulfamethoxazole/trimethoprim), active=True, dose=800/160 mg twice "
        "daily with a full glass of water, start=2025-02-12",
        "active=False, end=2025-02-26",
    ]


def test_tables_show_dates_as_a_person_reads_them(loaded: Any) -> None:
    """History and SQL tables show ISO dates and minute date-times, never Python reprs;
    in HTML left-aligned, a date kept on one line; a long text cell whole."""
    ip = loaded
    renewal = {"due": "2026-02-19", "starts_at": "2026-02-19T10:00:00", "note": "word " * 30}
    wb_of(ip).ingest(
        [
            {"kind": "fact", "ts": "2026-01-20T08:30:00", "op": "add", "type": "Task"}
            | {"key": "renew", "fields": renewal}
        ]
    )
    table = run(ip, "%uac history Task renew")
    text, page = table.text(), table._repr_html_()
    assert "datetime" not in text and "datetime" not in page
    assert (
        "2026-01-20 08:30" in text
        and "due=2026-02-19" in text
        and "starts_at=2026-02-19 10:00" in text
    )
    assert '<span style="white-space: nowrap">2026-02-19</span>' in page
    assert '<span style="white-space: nowrap">2026-02-19 10:00</span>' in page
    assert page.count("text-align: left") == page.count("<td ") + page.count("<th ")
    row = text.splitlines()[1]  # under the header
    assert row.endswith("note=" + "word " * 30)  # the fields, whole
    result = run(ip, "%uac sql SELECT due, starts_at FROM Task")
    data, _ = ip.display_formatter.format(result)
    assert data["text/plain"].splitlines()[-1].split("\t") == ["2026-02-19", "2026-02-19 10:00"]


def test_verify_calls_code_close(loaded: Any) -> None:
    ip = loaded
    out = run_out(ip, "%uac verify")
    assert out.endswith("hash chains intact\n")
    with capture_output() as cap:
        run(ip, "%uac calls")
    (shown,) = cap.outputs  # both tables, as `uac calls` prints them
    assert shown.data["text/plain"].splitlines() == [
        "call\tat\tpurpose\tmodel\ttokens in\ttokens out\tms\toutcome",
        "",
        "purpose\tcalls\tfailed\ttokens in\ttokens out",
    ]
    assert "<caption>the last 0 model calls</caption>" in shown.data["text/html"]
    assert "<caption>per purpose</caption>" in shown.data["text/html"]
    assert "records[Medication] = [" in run_out(ip, "%uac code --version 1")
    assert "closed" in run_out(ip, "%uac close") and "wb" not in ip.user_ns


def test_ask_through_a_local_chat_server(loaded: Any) -> None:
    from uac_kernel.model.testing import ChatServer

    ip = loaded
    expr = {"expression": "len(user.all(Medication))", "explanation": "counts medications"}
    with ChatServer(lambda body: json.dumps(expr)) as server:
        run(ip, "%config UacMagics.model = 'local-model'")
        run(ip, f"%config UacMagics.base_url = {server.base_url!r}")
        run(ip, "%uac open")
        answer = run(ip, '%uac ask "How many medications do I take?"')
        assert run(ip, "%%uac ask\nHow many medications do I take?").value == 2
    assert isinstance(answer, Answer) and answer.ok and answer.value == 2
    data, _ = ip.display_formatter.format(answer)
    assert data["text/plain"].splitlines()[:2] == ["2", "  code: len(user.all(Medication))"]
    assert "<code>len(user.all(Medication))</code>" in data["text/html"]
    out = run_out(ip, "%uac calls")
    assert out == ""  # tables are displayed, not printed
    with capture_output() as cap:
        run(ip, "%uac calls --limit 1")  # the declared limit, over displaylimit
    assert len(cap.outputs[0].data["text/plain"].splitlines()) == 5  # header, 1 call; the totals
    assert "<caption>the last 1 model call</caption>" in cap.outputs[0].data["text/html"]
    # offline: the same question is answered from the record, a new one is refused
    run(ip, "%config UacMagics.offline = True")
    run(ip, "%uac open")
    assert run(ip, "%uac ask 'How many medications do I take?'").value == 2
    assert "offline" in usage_error(ip, "%uac ask 'Something never asked?'").lower()


# Questions that end in `?` (IPython's help syntax), each data whatever it holds: quotes,
# backslashes, IPython's `$name` and `{expr}` expansions, string-literal breakers, shell syntax.
QUESTIONS = [
    "How many medications do I take?",
    """What's "ibuprofen" \\n and 'amox'\\?""",
    "Is $SECRET or {SECRET} or {__import__('os').system('touch CANARY')} set?",
    "'); __import__('os').system('touch CANARY') #?",
    """\"\"\" ''' $(touch CANARY) `touch CANARY` ; !ls %%time ??""",
    "   spaced   out\tand tabbed, ünïcödé ✓?",
]


def test_ask_a_question_ending_in_a_question_mark_unquoted(loaded: Any, tmp_path: Path) -> None:
    from uac_kernel.model.testing import ChatServer
    from uac_kernel.notebook.askline import ask_line

    ip = loaded
    ip.user_ns["SECRET"] = "EXPANDED"
    expr = {"expression": "len(user.all(Medication))", "explanation": "counts medications"}
    with ChatServer(lambda body: json.dumps(expr)) as server:
        run(ip, "%config UacMagics.model = 'local-model'")
        run(ip, f"%config UacMagics.base_url = {server.base_url!r}")
        run(ip, "%uac open")
        for question in QUESTIONS:
            answer = run(ip, f"%uac ask {question}")
            assert isinstance(answer, Answer), question  # not IPython's help
            assert answer.question == question.strip() and answer.value == 2
            asked = server.requests[-1]["messages"][-1]["content"]
            assert asked.endswith(f"\n\nQuestion: {question.strip()}")
        # bound to a name, inside a block, among other lines; a quoted question as before
        run(ip, "x = 1\nif x:\n    a = %uac ask How many medications do I take now?\ny = 2")
        assert ip.user_ns["a"].question == "How many medications do I take now?"
        assert run(ip, "%uac ask 'How many medications do I take?'").question == QUESTIONS[0]
    assert not (tmp_path / "CANARY").exists()
    # a `%uac ask` line in a string, or in the body of a cell magic, is left as written
    run(ip, 's = """\n%uac ask in a string?\n"""')
    assert ip.user_ns["s"] == "\n%uac ask in a string?\n"
    run_out(ip, "%%writefile body.txt\n%uac ask in a body?")
    assert (tmp_path / "body.txt").read_text() == "%uac ask in a body?\n"
    run(ip, "%unload_ext uac")
    assert ask_line not in ip.input_transformers_cleanup
    run(ip, "%load_ext uac")
    assert ip.input_transformers_cleanup.count(ask_line) == 1


# -- errors -------------------------------------------------------------------------------------


def test_errors_are_one_line_usage_errors(loaded: Any) -> None:
    ip = loaded
    assert "__import__" in usage_error(ip, "%uac eval __import__('os')")
    message = usage_error(ip, "%uac chekpoint")
    assert "Did you mean 'checkpoint'?" in message
    assert "cannot read the file" in usage_error(ip, "%uac ingest missing.jsonl")
    assert "invalid choice" in usage_error(ip, "%uac ingest events.jsonl --format csv")
    assert "Did you mean 'Medication'?" in usage_error(ip, "%uac edit Medicaton")
    assert "no checkpoint 9" in usage_error(ip, "%uac diff 1 9")
    assert "cell magic" in usage_error(ip, "%uac cell --version 1 --part Medication")
    assert "SQL failed" in usage_error(ip, "%%uac sql\nSELECT * FROM Nope")
    assert "takes no cell body" in usage_error(ip, "%%uac checkpoint\nbody")
    run(ip, "%config UacMagics.cpu_seconds = 0.5")
    assert "CPU" in usage_error(ip, "%uac eval sum(range(10**12))")


def test_a_misspelt_field_in_eval_is_a_one_line_usage_error(loaded: Any) -> None:
    ip = loaded
    message = usage_error(ip, "%uac eval [m.nmae for m in user.all(Medication)]")
    assert message == "Medication has no field 'nmae'. Did you mean 'name'?"
    # a field of the type that one record never set still reads None
    assert run(ip, "%uac eval [m.dose_mg for m in user.all(Medication)]") == [None, 200.0]


def plain(lines: list[str]) -> str:
    """Traceback lines as text, without their colours."""
    return re.sub(r"\x1b\[[0-9;]*m", "", "".join(lines))


def test_a_uac_error_from_a_call_in_a_cell_shows_one_line_and_tb_has_the_rest(
    loaded: Any,
) -> None:
    ip = loaded
    result = ip.run_cell("wb.sql('SELECT * FROM Nope')")
    assert isinstance(result.error_in_exec, QueryError)
    # what the kernel sends the notebook as the cell's error (its traceback lines)
    assert ip._last_traceback == [f"QueryError: {result.error_in_exec}"]
    run(ip, "%tb")
    frames = plain(ip._last_traceback)
    assert len(ip._last_traceback) > 1 and "wb.sql(" in frames and "workbench.py" in frames
    result = ip.run_cell("1 / 0")  # anything else keeps its whole traceback
    assert isinstance(result.error_in_exec, ZeroDivisionError)
    assert len(ip._last_traceback) > 1 and "1 / 0" in plain(ip._last_traceback)
    run(ip, "%unload_ext uac")
    assert ip.custom_exceptions == ()
    run(ip, "%load_ext uac")


def test_a_custom_error_handler_the_user_set_stays_theirs(kernel_shell: Any) -> None:
    ip = kernel_shell
    seen: list[BaseException] = []
    ip.set_custom_exc(
        (ValueError,), lambda shell, etype, value, tb, tb_offset=None: seen.append(value)
    )
    try:
        run(ip, "%load_ext uac")
        run(ip, "%unload_ext uac")
        assert ip.custom_exceptions == (ValueError,)
        ip.run_cell("raise ValueError('mine')")
        assert [str(e) for e in seen] == ["mine"]
    finally:
        ip.set_custom_exc((), None)


def _help_entries(ip: Any) -> list[dict[str, str]]:
    """`%uac help` read back: an entry per verb, its usage whole (continued on lines indented
    under its arguments, its other names after it), its cell form and what the cell holds where
    it has one, then the line of what it does."""
    out = run_out(ip, "%uac")
    lines = out.splitlines()[2:-1]
    assert all(len(ln) <= 88 for ln in lines)
    entries: list[dict[str, str]] = []
    for ln in lines:
        if ln.startswith("  %uac "):
            entries.append({"usage": ln, "cell": "", "holds": "", "help": ""})
            continue
        entry = entries[-1]
        if ln.startswith("  %%uac "):
            assert not entry["cell"] and not entry["help"], ln  # one cell form, after the usage
            entry["cell"] = ln.strip()
        elif ln.startswith(" " * 8) and ln.strip().startswith("(the cell: "):
            assert entry["cell"] and not entry["holds"], ln
            entry["holds"] = ln.strip().removeprefix("(the cell: ").removesuffix(")")
        elif ln.startswith(" " * 8):
            assert not entry["cell"] and not entry["help"], ln  # the usage comes whole first
            entry["usage"] += " " + ln.strip()
        else:
            assert ln.startswith("    ") and ln[4] != " ", ln
            entry["help"] = f"{entry['help']} {ln.strip()}".strip()
    return entries


def test_help(ip: Any) -> None:
    out = run_out(ip, "%uac")
    entries = _help_entries(ip)
    magics = ip.magics_manager.registry["UacMagics"]
    # one entry per command, its other names (aliases) after it
    methods = {fn.__func__: fn for fn, _ in magics.commands.values()}
    assert len(entries) == len(methods) == len(magics.commands) - 1  # `constraint`
    by_usage = sorted(methods.values(), key=lambda fn: fn.parser.prog)
    for entry, fn in zip(entries, by_usage, strict=True):
        usage = " ".join(fn.parser.format_usage().split()).removeprefix(":: ")
        assert " ".join(entry["usage"].split()).split(" (also:")[0] == usage
        # every verb says what it does: the words `uac --help` uses, where they fit a notebook
        command = COMMANDS[fn.parser.prog[4:]]
        assert entry["help"] and entry["help"] == " ".join(command.help_on(MAGIC).split())
        # every verb that reads a cell shows that form, and what the cell holds
        takes_cell = magics.commands[fn.parser.prog[4:]][1]
        assert bool(entry["cell"]) == takes_cell == bool(entry["holds"]), entry
    cells = {e["cell"].split()[1] for e in entries if e["cell"]}
    assert {"whatif", "sql", "constraint", "eval", "vocab", "ask", "cell", "fleet"} == cells
    summary = " ".join(out.split())
    for usage in (
        "%uac edit [--version VERSION] [--key KEY [KEY ...]] [--where EXPR] [--last N] "
        "[--print] [--all] [part]",
        "%uac ingest [--format {auto,jsonl,locomo,longmemeval,chat}] [--history HISTORY] file",
        "%uac chart [--freq {day,week,month,quarter,year}] {events,records,alerts,result} "
        "[expr ...]",
        "%uac cell --version VERSION --part PART [--key KEY [KEY ...]] [--where EXPR] [--last N]",
        "%uac log [--kind KIND] [--after AFTER] [--limit N | --last N]",
    ):
        assert usage in summary
    out = run_out(ip, "%uac edit --help")
    assert "JupyterLab inserts only one per execution" in out
    assert "%uac open [--user USER] [--read-only] [path]" in run_out(ip, "%uac help open")


_SAMPLE = {"VERSION": "1", "S": "5", "DATE": "2025-01-01", "as_of": "2025-01-01"}


def _mentions(entry: dict[str, str], own: str) -> list[tuple[str, str]]:
    """Each option an entry of `%uac help` names, with the verb it belongs to: one inside a
    quoted `%uac VERB ...` is VERB's, any other the entry's own (``own``)."""
    found: list[tuple[str, str]] = []
    for text in (entry["usage"], entry["cell"], entry["help"]):
        for i, part in enumerate(text.split("`")):
            quoted = re.match(r"%%?uac (\w+)", part) if i % 2 else None
            verb = quoted.group(1) if quoted else own
            assert i % 2 == 0 or quoted or "--" not in part, part  # no terminal `uac X --y`
            found += [(verb, opt) for opt in re.findall(r"--[a-z][\w-]*", part)]
    return found


def test_every_option_help_names_is_one_the_magic_takes(ip: Any) -> None:
    magics = ip.magics_manager.registry["UacMagics"]
    entries = _help_entries(ip)
    seen = set()
    for entry in entries:
        own = entry["usage"].split()[1]
        for verb, opt in _mentions(entry, own):
            seen.add(opt)
            fn = magics.commands[verb][0]
            if verb == "fleet":  # its words are its own: a cell's line reaches fleet sql
                message = usage_error(ip, f"%%uac fleet sql {opt} 5 /no/such/fleet\nSELECT 1")
                assert opt not in message and "unrecognized" not in message, message
                continue
            action = next((a for a in fn.parser._actions if opt in a.option_strings), None)
            assert action is not None, f"%uac help names {opt} for %uac {verb}, which refuses it"
            value = _SAMPLE.get(action.dest, next(iter(action.choices or ["1"])))
            value = " ".join([value] * (action.nargs if isinstance(action.nargs, int) else 1))
            try:
                fn.parser.parse_argstring(f"{opt} {value}")
            except UsageError as exc:  # only what else the verb needs is missing
                assert "required" in str(exc), (verb, opt, str(exc))
    # the options that only a terminal has are not named; those a notebook has are
    assert not seen & {"--out", "--json", "--model", "--base-url", "--force"}
    assert {"--all", "--head", "--key", "--timeout", "--as-of", "--expr"} <= seen
    # each cell form parses whole, its placeholders filled in
    for entry in entries:
        if not entry["cell"] or entry["cell"].startswith("%%uac fleet"):
            continue
        words = entry["cell"].replace("[", "").replace("]", "").split()[2:]
        line = " ".join(_SAMPLE.get(w, w) for w in words)
        try:
            magics.commands[entry["cell"].split()[1]][0].parser.parse_argstring(line)
        except UsageError as exc:  # a line's own words (`%uac sql QUERY`): the cell's body
            assert str(exc).startswith("the following arguments are required: "), str(exc)
            assert "-" not in str(exc).split(": ", 1)[1], str(exc)


@pytest.mark.parametrize(
    ("line", "form"),
    [
        ("%uac eval", "%%uac eval"),
        ("%uac sql", "%%uac sql"),
        ("%uac ask", "%%uac ask"),
        ("%uac whatif", "%%uac whatif"),
        ("%uac constrain", "%%uac constraint"),
        ("%uac fleet sql fleetdir", "%%uac fleet sql DIR"),
    ],
)
def test_a_cell_verb_with_nothing_to_read_names_its_cell_form(
    loaded: Any, line: str, form: str
) -> None:
    assert form in usage_error(loaded, line)


def test_a_terminal_option_in_a_notebook_says_whose_it_is(loaded: Any) -> None:
    message = usage_error(loaded, "%uac code --out code.py")
    assert message == (
        "unrecognized arguments: --out code.py; --out is for the terminal's `uac code`: "
        "%uac code takes --version"
    )
    message = usage_error(loaded, "%uac alerts --json")
    assert message.endswith(
        "--json is for the terminal's `uac alerts`: %uac alerts takes no options"
    )
    message = usage_error(loaded, "%uac whatif events --chart out.svg")
    assert (
        "--chart is for the terminal's `uac whatif`: %uac whatif takes --as-of, --expr" in message
    )
    assert message.endswith(
        "in a notebook, a cell headed `%%uac whatif [--as-of DATE] [--expr EXPR]` holds the "
        "events: JSONL, a JSON array or YAML"
    )


# -- the model as editable cells -----------------------------------------------------------------


def test_edit_replaces_its_own_cell(loaded: Any) -> None:
    ip = loaded
    ip.payload_manager.clear_payload()
    out = run_out(ip, "%uac edit Medication")
    (payload,) = ip.payload_manager.read_payload()
    assert payload["source"] == "set_next_input" and payload["replace"] is True
    text = payload["text"]
    assert text.startswith("%%uac cell --version 1 --part Medication\nclass Medication(Record):")
    assert (
        text
        == "%%uac cell --version 1 --part Medication\n"
        + wb_of(ip).cell("Medication", 1).rstrip()
        + "\n"
    )
    # the output is a one-line note, not the code again: the cell holds it
    assert out == "Medication of checkpoint 1: its 2 records in this cell; edit and run the cell\n"
    assert text in run_out(ip, "%uac edit Medication --print")  # for front-ends that ignore it
    # re-running it yields the same single replacement, not another cell
    assert edit_cell(ip, "%uac edit Medication") == text
    out = run_out(ip, "%uac edit --all")
    assert "%uac edit Allergy --version 1" in out and not ip.payload_manager.read_payload()


def test_a_new_field_in_the_schema_part_is_a_one_line_error(loaded: Any) -> None:
    ip = loaded
    text = edit_cell(ip, "%uac edit schema")
    added = change(
        text, "class Medication(Record):\n", "class Medication(Record):\n    rating: int | None\n"
    )
    assert usage_error(ip, added) == (
        "Medication.rating is new: a field comes into the schema with its first value — "
        "give a record a value in `%uac edit Medication`"
    )
    assert "schema, edited from checkpoint 1: no change" in run_out(ip, text)


def test_edit_round_trip_change_delete_add(loaded: Any) -> None:
    ip = loaded
    wb = wb_of(ip)
    assert [a.rule for a in wb.alerts()] == ["drug_allergy_cross_reactivity"]
    text = edit_cell(ip, "%uac edit Medication")
    # (2) one record changed: the allergy alert clears, and the output says so
    changed = change(text, "name='amoxicillin'", "name='azithromycin'")
    out = run_out(ip, changed)
    assert "Medication, edited from checkpoint 1: changed amox" in out
    assert "cleared [critical] drug_allergy_cross_reactivity" in out
    assert "checkpoint 2 taken" in out and "`%uac edit Medication --version 2`" in out
    assert wb.alerts() == [] and wb.state.get("Medication", "amox").name == "azithromycin"  # type: ignore[union-attr]
    # running the same cell again changes nothing and takes no checkpoint
    out = run_out(ip, changed)
    assert "no change" in out and "checkpoint" not in out.split(":", 1)[1]
    assert wb.checkpoints.latest().version == 2  # type: ignore[union-attr]
    # (3) a deleted record and (4) a new one, from the new version
    text = edit_cell(ip, "%uac edit Medication --version 2")
    lines = without_record(text, "ibu").splitlines()
    lines.insert(-1, "    Medication(key='vitd', name='vitamin D', dose_mg=25.0, active=True),")
    out = run_out(ip, "\n".join(lines))
    assert "added vitd; retracted ibu" in out and "checkpoint 3 taken" in out
    assert sorted(m.key for m in wb.state.all("Medication")) == ["amox", "vitd"]
    assert wb.state.versions("Medication", "ibu")[-1].retracted
    authors = {e.payload.get("author") for e in wb.log(kinds=["fact"])[-3:]}
    assert authors == {"notebook"}


def test_rule_written_in_a_cell(loaded: Any, tmp_path: Path) -> None:
    ip = loaded
    wb = wb_of(ip)
    text = edit_cell(ip, "%uac edit rules")
    assert text.startswith("%%uac cell --version 1 --part rules\n")
    rule_code = (
        "\n\n@rule(watch=['Medication'], severity='info', category='pharmacy')\n"
        "def unnamed_dose(user):\n"
        '    """A medication without a dose."""\n'
        "    for m in user.all('Medication'):\n"
        "        if m.dose_mg is None:\n"
        "            yield Finding(f'{m.name}: no dose recorded', [m])\n"
        "\n\nopen('CANARY', 'w').write('other code in the cell never runs')\n"
    )
    out = run_out(ip, text + rule_code)
    assert "rule unnamed_dose: in force, 1 alert standing" in out
    assert "raised [info] unnamed_dose: amoxicillin: no dose recorded" in out
    assert "checkpoint 2 taken" in out
    assert isinstance(wb.runner.rules["unnamed_dose"], Rule)
    assert [a.rule for a in wb.alerts()] == ["drug_allergy_cross_reactivity", "unnamed_dose"]
    (stored,) = wb.stored_rules()
    assert stored["name"] == "unnamed_dose"
    assert stored["source"].startswith("@rule(watch=['Medication'], severity='info'")
    assert "yield Finding" in stored["source"] and "CANARY" not in stored["source"]
    assert not (tmp_path / "CANARY").exists()
    # the checkpoint's code shows the rule as written
    assert "def unnamed_dose(user):" in wb.code(2)
    # the rule reacts to later changes
    wb.ingest(
        [
            {
                "kind": "fact",
                "ts": "2024-12-01",
                "op": "update",
                "type": "Medication",
                "key": "amox",
                "fields": {"dose_mg": 500.0},
            }
        ]
    )
    assert "unnamed_dose" not in [a.rule for a in wb.alerts()]
    # a new session: the rule is logged but not in force until its cell runs again
    out = run_out(ip, "%uac open")
    assert "notebook rules logged but not in force: unnamed_dose" in out
    text = edit_cell(ip, "%uac edit rules")
    assert "def unnamed_dose(user):" in text and "not in force in this session" in text
    out = run_out(ip, text)
    assert "rule unnamed_dose: in force" in out and "unnamed_dose" in wb_of(ip).runner.rules


def test_stale_edit_is_merged_and_a_conflict_refused(loaded: Any) -> None:
    ip = loaded
    wb = wb_of(ip)
    text = edit_cell(ip, "%uac edit Medication")
    # (6) another change arrives between the edit command and running the cell
    wb.ingest(
        [
            {
                "kind": "fact",
                "ts": "2024-12-01",
                "op": "update",
                "type": "Medication",
                "key": "ibu",
                "fields": {"dose_mg": 400.0},
            }
        ]
    )
    out = run_out(ip, change(text, "name='amoxicillin'", "name='azithromycin'"))
    assert "changed amox (merged with later changes)" in out
    assert wb.state.get("Medication", "ibu").dose_mg == 400.0  # type: ignore[union-attr]
    # (7) an edit of the field that changed since is refused, naming the record
    message = usage_error(ip, change(text, "dose_mg=200.0", "dose_mg=300.0"))
    assert "'ibu' field 'dose_mg' was changed to 400.0 since" in message
    assert "%uac edit Medication" in message
    assert wb.state.get("Medication", "ibu").dose_mg == 400.0  # type: ignore[union-attr]


def test_hostile_strings_stay_data(loaded: Any, tmp_path: Path) -> None:
    ip = loaded
    wb = wb_of(ip)
    wb.ingest(
        [
            {
                "kind": "fact",
                "ts": "2024-12-02",
                "op": "add",
                "type": "Note",
                "key": "n1",
                "fields": {"text": HOSTILE, "mood": "ok"},
            }
        ]
    )
    text = edit_cell(ip, "%uac edit Note")
    assert text.startswith("%%uac cell --version 2 --part Note\n")
    # the newline in the data stays an escape, within one line
    assert f"        text={HOSTILE!r},\n" in text
    # (8) an edit of another field: the hostile value survives byte for byte
    out = run_out(ip, change(text, "mood='ok'", "mood='calm \\\\ \"still\"'"))
    assert "changed n1" in out
    note = wb.state.get("Note", "n1")
    assert note is not None and note.text == HOSTILE and note.mood == 'calm \\ "still"'
    assert not (tmp_path / "CANARY").exists()
    # and the next version renders it again unchanged
    again = edit_cell(ip, "%uac edit Note")
    assert "no change" in run_out(ip, again) and wb.state.get("Note", "n1").text == HOSTILE  # type: ignore[union-attr]
    # data in a cell never runs: a value that is code is refused as not a literal
    message = usage_error(ip, change(again, "mood=", "mood=open('CANARY', 'w'), x="))
    assert "only literal values" in message
    # statements around the records are not part of the data and are never run
    out = run_out(
        ip,
        change(
            again, "records[Note] = [", "import os\nos.system('touch CANARY')\nrecords[Note] = ["
        ),
    )
    assert "no change" in out and not (tmp_path / "CANARY").exists()
    assert wb.state.get("Note", "n1").text == HOSTILE  # type: ignore[union-attr]


HOSTILE_KEYS = [
    HOSTILE,
    "-x",
    "--",
    "--where r.x --last 1",
    'it\'s "quoted"',
    "back\\slash '",
    "line\u2028separator",
    " %%uac cell --part Allergy ",
]


def test_edit_a_selection_round_trip(loaded: Any) -> None:
    ip = loaded
    wb = wb_of(ip)
    ip.payload_manager.clear_payload()
    out = run_out(ip, "%uac edit Medication --key amox")
    assert out == (
        "Medication of checkpoint 1: 1 of 2 records in this cell (key 'amox'); edit and run "
        "the cell — records left out stay as they are\n"
    )
    text = edit_cell(ip, "%uac edit Medication --key amox")
    assert text.startswith("%%uac cell --version 1 --part Medication --key 'amox'\n")
    assert "key='amox'" in text and "key='ibu'" not in text
    out = run_out(ip, change(text, "name='amoxicillin'", "name='azithromycin'"))
    assert "changed amox" in out and "cleared [critical] drug_allergy_cross_reactivity" in out
    assert "`%uac edit Medication --version 2 --key 'amox'`" in out
    # deleting the one selected record retracts it, and only it: ibu was never in the cell
    text = edit_cell(ip, "%uac edit Medication --version 2 --key amox")
    out = run_out(ip, without_record(text, "amox"))
    assert "retracted amox" in out and "ibu" not in out
    assert [m.key for m in wb.state.all("Medication")] == ["ibu"]


def test_edit_where_and_last(loaded: Any) -> None:
    ip = loaded
    wb = wb_of(ip)
    text = edit_cell(
        ip, """%uac edit Medication --where "r.dose_mg is not None and r.dose_mg < 300" """
    )
    assert text.startswith(
        "%%uac cell --version 1 --part Medication --where 'r.dose_mg is not None and "
        "r.dose_mg < 300'\n"
    )
    assert "key='ibu'" in text and "key='amox'" not in text
    # a new record in the cell is added, the selected one deleted is retracted, amox stays
    lines = without_record(text, "ibu").splitlines()
    lines.insert(-1, "    Medication(key='para', name='paracetamol', dose_mg=500.0),")
    out = run_out(ip, "\n".join(lines))
    assert "added para; retracted ibu" in out
    assert sorted(m.key for m in wb.state.all("Medication")) == ["amox", "para"]
    # --last: the most recently changed record; several --key values, repeated or listed
    assert "key='para'" in edit_cell(ip, "%uac edit Medication --last 1")
    assert "key='amox'" not in edit_cell(ip, "%uac edit Medication --last 1")
    both = edit_cell(ip, "%uac edit Medication --key amox para")
    assert both.startswith("%%uac cell --version 2 --part Medication --key 'amox' --key 'para'\n")
    assert both == edit_cell(ip, "%uac edit Medication --key amox --key=para")


def test_edit_selection_errors_are_one_line(loaded: Any) -> None:
    ip = loaded
    message = usage_error(ip, "%uac edit Medication --key amx")
    assert message == "no Medication with key 'amx' in checkpoint 1. Did you mean 'amox'?"
    message = usage_error(ip, "%uac edit Medication --where 'r.dose_mg >'")
    assert message.startswith("where 'r.dose_mg >': not a Python expression")
    message = usage_error(ip, "%uac edit Medication --where \"__import__('os').system('x')\"")
    assert "names starting with '_'" in message
    message = usage_error(ip, "%uac edit Medication --where r.dose > 1")
    assert "unrecognized arguments" in message  # an unquoted expression with spaces
    message = usage_error(ip, "%uac edit Medication --where r.dose>1")
    assert "Medication has no field 'dose'. Did you mean 'dose_mg'?" in message
    assert "argument --last: must be positive, got 0" in usage_error(
        ip, "%uac edit Medication --last 0"
    )
    message = usage_error(ip, "%uac edit Medication --last many")
    assert message == "argument --last: expected a whole number, got 'many'"
    assert "no records to select" in usage_error(ip, "%uac edit schema --key amox")
    assert "unclosed quote" in usage_error(ip, "%uac edit Medication --key 'amox")


def test_edit_hostile_keys_round_trip_through_the_cell_line(loaded: Any, tmp_path: Path) -> None:
    ip = loaded
    wb = wb_of(ip)
    wb.ingest(
        [fact("2024-12-02", "add", "Note", k, text="kept", n=i) for i, k in enumerate(HOSTILE_KEYS)]
    )
    for i, key in enumerate(HOSTILE_KEYS):
        text = edit_cell(ip, f"%uac edit Note --key {key!r}")
        header, body = text.split("\n", 1)
        # one line, printable: the key cannot end the magic's line or become an option
        assert header.isprintable() and header.endswith(f"--key {key!r}")
        assert [n.key for n in wb.state.all("Note") if f"key={n.key!r}" in body] == [key]
        out = run_out(ip, change(text, f"n={i},", f"n={i + 100},"))
        assert f"changed {key}" in out, out
        assert wb.state.get("Note", key).n == i + 100  # type: ignore[union-attr]
        # and deleting it from its own cell retracts that key alone
    out = run_out(ip, without_record(edit_cell(ip, "%uac edit Note --key '--'"), "--"))
    assert "retracted --" in out
    assert sorted(n.key for n in wb.state.all("Note")) == sorted(set(HOSTILE_KEYS) - {"--"})
    assert not (tmp_path / "CANARY").exists()


def test_edit_a_stale_selection(loaded: Any) -> None:
    ip = loaded
    wb = wb_of(ip)
    text = edit_cell(ip, """%uac edit Medication --where "r.name == 'ibuprofen'" """)
    # later, amox is renamed to ibuprofen: it matches now, but not in checkpoint 1
    wb.ingest([fact("2024-12-01", "update", "Medication", "amox", name="ibuprofen")])
    out = run_out(ip, change(text, "dose_mg=200.0", "dose_mg=400.0"))
    assert "changed ibu (merged with later changes)" in out and "retracted" not in out
    assert wb.state.get("Medication", "amox").name == "ibuprofen"  # type: ignore[union-attr]
    assert wb.state.get("Medication", "ibu").dose_mg == 400.0  # type: ignore[union-attr]


def test_edit_a_large_type_tells_how_to_narrow_it(loaded: Any) -> None:
    ip = loaded
    wb = wb_of(ip)
    wb.ingest([fact("2025-01-01", "add", "Txn", f"x{i:03d}", amount=float(i)) for i in range(201)])
    ip.payload_manager.clear_payload()
    out = run_out(ip, "%uac edit Txn")
    (payload,) = ip.payload_manager.read_payload()
    assert payload["text"].count("Txn(key=") == 201  # the cell is made all the same
    assert out.count("\n") == 2  # the new checkpoint, and the note; not the code
    assert "Txn of checkpoint 2: all 201 records in this cell (" in out
    assert 'narrow it with --key KEY, --where "r.FIELD == VALUE" or --last N' in out
    text = edit_cell(ip, "%uac edit Txn --where 'r.amount >= 199'")
    assert text.count("Txn(key=") == 2


# -- widgets and charts ----------------------------------------------------------------------------


def test_widgets_with_text_fallbacks(loaded: Any) -> None:
    from uac_kernel.notebook import widgets

    ip = loaded
    ((inspector, text),) = widget_outputs(ip, "%uac alerts")
    assert isinstance(inspector, widgets.AlertInspector)
    assert text.startswith("[critical] drug_allergy_cross_reactivity:")
    assert "evidence: " in text
    ((browser, text),) = widget_outputs(ip, "%uac log --kind fact")
    assert isinstance(browser, widgets.LogBrowser) and browser.query.get("kind") == "fact"
    assert text.splitlines()[0].split("\t") == ["seq", "ts", "kind", "source", "summary"]
    assert {ln.split("\t")[2] for ln in text.splitlines()[1:]} == {"fact"}
    run(ip, "%config UacMagics.displaylimit = 2")
    ((_, text),) = widget_outputs(ip, "%uac log --kind fact")
    *rows, last = text.splitlines()
    assert last.startswith("the first 2 events after seq 0; the next with `%uac log --kind fact")
    assert len(rows) == 3  # header, 2 events
    run(ip, "%config UacMagics.displaylimit = 20")
    ((explorer, text),) = widget_outputs(ip, "%uac state")
    assert isinstance(explorer, widgets.StateExplorer)
    assert "Medication\t2\t" in text
    run(ip, "%uac eval 1")
    wb_of(ip).ingest(
        [
            {
                "kind": "fact",
                "ts": "2024-12-01",
                "op": "add",
                "type": "Trip",
                "key": "t1",
                "fields": {"destination": "Lisbon"},
            }
        ]
    )
    run(ip, "%uac checkpoint")
    ((view, text),) = widget_outputs(ip, "%uac diff 1 2")
    assert isinstance(view, widgets.DiffView)
    assert text.splitlines()[0].startswith("checkpoint 1 → 2: 1 added")
    assert "  + Trip t1" in text and "  + type Trip" in text


def test_log_limit(loaded: Any) -> None:
    ip = loaded
    ((browser, text),) = widget_outputs(ip, "%uac log --limit 2")
    assert browser.page_size == 2 and len(browser.rows) == 2
    *rows, last = text.splitlines()
    assert last.startswith("the first 2 events after seq 0; the next with `%uac log --limit 2")
    assert len(rows) == 3  # header, 2 events
    ((browser, text),) = widget_outputs(ip, "%uac log --kind fact --limit 1")
    assert browser.page_size == 1 and browser.query.get("kind") == "fact"
    assert "`%uac log --kind fact --limit 1 --after " in text
    ((browser, text),) = widget_outputs(ip, "%uac log --limit 0")  # all, as displaylimit 0
    seqs = [ln.split("\t")[0] for ln in text.splitlines()[1:]]
    assert seqs == [str(e.seq) for e in wb_of(ip).log()]  # and no note
    assert usage_error(ip, "%uac log --limit -1") == "argument --limit: must be 0 or more, got -1"


def test_log_text_shows_an_alerts_message(loaded: Any) -> None:
    """Each event reads as the log browser's summary; an alert's is its message, whole."""
    ip = loaded
    (alert,) = wb_of(ip).alerts()
    assert len(alert.message) > 120
    ((_, text),) = widget_outputs(ip, "%uac log --kind alert")
    header, line = text.splitlines()
    assert header.split("\t")[2::2] == ["kind", "summary"]
    assert line.split("\t")[2::2] == [
        "alert",
        f"raised critical drug_allergy_cross_reactivity: {alert.message}",
    ]


def test_charts(loaded: Any) -> None:
    import altair as alt

    from uac_kernel.render import charts

    ip = loaded
    previous = alt.renderers.active
    try:
        events = run(ip, "%uac chart events --freq month")
        assert isinstance(events, alt.TopLevelMixin) and alt.renderers.active == "jupyter"
        assert isinstance(run(ip, "%uac chart records"), alt.TopLevelMixin)
        assert isinstance(run(ip, "%uac chart alerts"), alt.TopLevelMixin)
        result = run(ip, "%uac chart result Counter(m.name for m in user.all('Medication'))")
        assert isinstance(result, alt.Chart)
        assert (
            result.to_dict()["title"]["text"] == "Counter(m.name for m in user.all('Medication'))"
        )
        assert "cannot chart" in usage_error(ip, "%uac chart result 'a string'")
        assert "invalid choice" in usage_error(ip, "%uac chart evnts")
        assert usage_error(ip, "%uac chart alerts --freq week") == (
            "--freq is for `events` and `records` charts, not `alerts`"
        )
        assert charts.enable_offline  # the module the magic draws with
    finally:
        alt.renderers.enable(previous)


def test_chart_result_of_a_counter_is_most_common_first(loaded: Any) -> None:
    # The sandbox hands back a plain dict, no longer a Counter: it must come in most_common
    # order, as docs/charts.md promises, not in the order the keys were first counted.
    chart = run(
        loaded, "%uac chart result Counter(['easy', 'tempo', 'long', 'long', 'tempo', 'long'])"
    )
    rows = next(iter(chart.to_dict()["datasets"].values()))
    assert [(r["label"], r["value"]) for r in rows] == [("long", 3), ("tempo", 2), ("easy", 1)]
    assert list(wb_of(loaded).eval("Counter('abbccc')")) == ["c", "b", "a"]


def test_unload_closes_the_store(ip: Any) -> None:
    run(ip, "%uac open")
    magics = ip.magics_manager.registry["UacMagics"]
    assert isinstance(magics, UacMagics)
    wb = wb_of(ip)
    run(ip, "%unload_ext uac")
    assert "uac" not in ip.magics_manager.magics["line"] and "wb" not in ip.user_ns
    with pytest.raises(Exception, match="closed"):
        wb.store.con.execute("SELECT 1")
    run(ip, "%load_ext uac")


# -- dead ends: a mistyped user or kind, a checkpoint of nothing, a verb only one face has --------


def test_a_user_with_no_events_is_an_error_where_a_read_is_asked(
    loaded: Any, tmp_path: Path
) -> None:
    ip = loaded
    out = run_out(ip, "%uac open --user may")  # read-write: ingesting would create the user
    assert "user 'may' has no events yet (users here: maya)" in out
    expected = f"user 'may' has no events in {tmp_path / 'maya.duckdb'}; users here: maya"
    for line in (
        "%uac eval 1",
        "%%uac sql\nSELECT 1",
        "%uac alerts",
        "%uac log",
        "%uac state",
        "%uac code",
        "%uac checkpoint",
        "%uac checkpoints",
        "%uac history Medication amox",
        "%uac diff 1 1",
        "%uac chart events",
        "%uac calls",
        "%uac extract",
        "%uac ask 'How many medications?'",
    ):
        assert usage_error(ip, line) == expected, line
    assert wb_of(ip).store.users() == ["maya"], "the refused reads wrote nothing"
    assert usage_error(ip, "%uac open --read-only --user may") == expected
    # ingesting is how a user is made
    run_out(ip, "%uac open --user may")
    assert "3 events appended" in run_out(ip, "%uac ingest events.jsonl")
    assert run(ip, "%uac eval len(user.all(Medication))") == 2
    users = run(ip, "%uac users")
    assert isinstance(users, Table) and [r[0] for r in users.rows] == ["may", "maya"]


def test_without_a_configured_user_the_stores_only_user_opens(loaded: Any) -> None:
    ip = loaded
    run_out(ip, "%config UacMagics.user = ''")
    assert "uac: user 'maya' of" in run_out(ip, "%uac open")


def test_a_checkpoint_that_changes_nothing_stores_no_version(loaded: Any) -> None:
    ip = loaded  # checkpoint 1 taken
    out = run_out(ip, "%uac checkpoint")
    assert out.startswith("no change since checkpoint 1 (3 records); no new version stored\n")
    table = run(ip, "%uac checkpoints")
    assert isinstance(table, Table) and [r[0] for r in table.rows] == [1]


def test_an_unknown_log_kind_says_which_exist(loaded: Any) -> None:
    message = usage_error(loaded, "%uac log --kind alerts")
    assert "no event kind 'alerts'. Did you mean 'alert'? Kinds: alert, " in message


# Verbs only one face offers, and why; every other verb is both `uac VERB` and `%uac VERB`.
CLI_ONLY = {
    "demo": "builds (and replaces) a store file and prints a tour; the notebooks are the tour",
    "bench": "benchmarks run for minutes to hours and write result files",
    "export": "copies a whole store into a fleet directory: a job for a terminal, not a cell",
    "import": "brings a fleet directory back into a store file: a job for a terminal",
}
MAGICS_ONLY = {
    "open": "a notebook keeps one workbench open across cells; a command opens its own",
    "close": "releases the store that `%uac open` holds",
    "edit": "turns its own cell into code to edit: it needs a notebook cell",
    "cell": "applies an edited cell: it is the body of a cell magic",
    "chart": "draws an Altair chart in the notebook's output",
}


def test_the_magics_and_the_cli_offer_the_same_verbs(ip: Any) -> None:
    import argparse

    from uac_kernel.cli.parser import build_parser

    (subparsers,) = [
        a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)
    ]
    cli = set(subparsers.choices)
    magics = set(ip.magics_manager.registry["UacMagics"].commands)
    assert {"checkpoints", "users", "history", "state"} <= cli & magics
    assert cli - magics == set(CLI_ONLY), "a CLI verb the magics lack"
    assert magics - cli == set(MAGICS_ONLY), "a magic the CLI lacks"


def test_head_verify_and_forget(loaded: Any, tmp_path: Path) -> None:
    ip = loaded
    head = run_out(ip, "%uac head").strip()
    assert head.startswith("e") and "-c" in head and "-k" in head
    assert "passes through 1 kept head" in run_out(ip, f"%uac verify --head {head}")
    dry = run_out(ip, "%uac forget --record Allergy pen --dry-run")
    assert "would forget" in dry and "penicillin" in dry
    assert wb_of(ip).eval("len(user.all('Allergy'))") == 1
    out = run_out(ip, "%uac forget --record Allergy pen")
    assert out.startswith("forgot:") and "penicillin" not in out
    assert wb_of(ip).eval("len(user.all('Allergy'))") == 0
    assert not any("penicillin" in a.message for a in wb_of(ip).alerts())
    assert b"penicillin" not in (tmp_path / "maya.duckdb").read_bytes()
    assert "passes through 1 kept head" in run_out(ip, f"%uac verify --head {head}")
    assert "nothing of maya matches" in run_out(ip, "%uac forget --text penicillin")
    message = usage_error(ip, "%uac forget")  # the terminal's words: one declaration
    assert message == "one of the arguments --record --source --text is required"
    assert "not a head" in usage_error(ip, "%uac verify --head e1")


# -- model answers held for review -----------------------------------------------------------------


def test_review_widget_accepts_through_its_python_handler(ip: Any, tmp_path: Path) -> None:
    from helpers.review import HISTORY, TURNS, held_one

    from uac_kernel.model.testing import ChatServer
    from uac_kernel.notebook.widgets_act import ReviewView

    (tmp_path / "review.jsonl").write_text("".join(json.dumps(e) + "\n" for e in HISTORY + TURNS))
    with ChatServer() as server:
        run(ip, "%config UacMagics.model = 'stand-in'")
        run(ip, f"%config UacMagics.base_url = {server.base_url!r}")
        run(ip, "%uac open")
        run(ip, "%uac ingest review.jsonl")
        wb: Workbench = ip.user_ns["wb"]
        batch_id = held_one(wb, server)
    ((view, text),) = widget_outputs(ip, "%uac review")
    assert isinstance(view, ReviewView)
    assert text.startswith(f"held batch {batch_id} (4 operations on chat-9#1..chat-9#2")
    (shown,) = view.batches
    assert [(c["number"], c["op"], c["key"]) for c in shown["changes"]] == [
        (1, "update", "trip-lisbon"),
        (2, "update", "med-statin"),
        (3, "add", "fl-1"),
        (4, "retract", "trip-oslo"),
    ]
    assert {"field": "end", "before": "2025-03-16", "after": "2025-03-18"} in shown["changes"][0][
        "fields"
    ]
    # a message that is not a decision is an error line, and changes nothing
    view._on_msg(view, {"action": "accept", "batch": "1; DROP"}, [])
    assert view.error.startswith("not a review decision: ") and len(view.batches) == 1
    view._on_msg(view, {"action": "accept", "batch": batch_id, "only": [5]}, [])
    assert view.error == (
        f"held batch {batch_id} has no operation 5 (it has 1 to 4); `uac review` numbers them"
    )
    # the "Accept selected" button's message, as the front end sends it
    view._on_msg(view, {"action": "accept", "batch": batch_id, "only": [1, 3]}, [])
    assert view.error == "" and view.batches == []
    assert view.done.startswith(f"batch {batch_id}: accepted operations 1, 3; ")
    # the batch left the list: the line says the other two went with it, unapplied
    assert view.done.endswith("; operations 2, 4 were left out and not applied"), view.done
    assert wb.state.get("Flight", "fl-1") is not None and wb.state.get("Trip", "trip-oslo")
    assert wb.log(kinds=["review"])[-1].payload["operations"] == [1, 3]
    ((_, text),) = widget_outputs(ip, "%uac review")
    assert text == "no model answers are held for review"


def test_review_magic_rejects_and_accepts_from_the_line(ip: Any, tmp_path: Path) -> None:
    from helpers.review import HISTORY, TURNS, held_one

    from uac_kernel.model.testing import ChatServer

    (tmp_path / "review.jsonl").write_text("".join(json.dumps(e) + "\n" for e in HISTORY + TURNS))
    with ChatServer() as server:
        run(ip, "%config UacMagics.model = 'stand-in'")
        run(ip, f"%config UacMagics.base_url = {server.base_url!r}")
        run(ip, "%uac open")
        run(ip, "%uac ingest review.jsonl")
        wb: Workbench = ip.user_ns["wb"]
        batch_id = held_one(wb, server)
    assert (
        usage_error(ip, "%uac review accept") == "%uac review accept needs the ID of a held batch"
    )
    assert usage_error(ip, f"%uac review accept {batch_id} --only one") == (
        "--only takes operation numbers from 1 separated by commas, like 1,3; not 'one'"
    )
    out = run_out(ip, f"%uac review reject {batch_id}")
    assert out == f"batch {batch_id} rejected; nothing of it was applied\n"
    assert usage_error(ip, f"%uac review accept {batch_id}") == (
        f"no batch {batch_id} is held for review of user 'maya' (held: none); "
        "`uac review` lists them"
    )
    assert wb.state.get("Trip", "trip-oslo") is not None


# -- constraints --------------------------------------------------------------------------------

CONSTRAINT_CELL = """%%uac constraint --key refill
kind: obligation
title: Refill the amoxicillin prescription
due: {date: 2024-11-25}
subject: {type: Medication, key: amox}
"""


def test_a_constraint_cell_puts_it_in_force_and_rerunning_it_edited_updates_it(loaded: Any) -> None:
    out = run_out(loaded, CONSTRAINT_CELL)
    assert out.startswith("in force: refill") and "raised [warning] constraint_refill" in out
    assert list(wb_of(loaded).state.constraints) == ["refill"]
    assert "appended" in run_out(loaded, CONSTRAINT_CELL.replace("2024-11-25", "2024-11-20"))
    ops = [e.payload["op"] for e in wb_of(loaded).log(kinds=["constraint"])]
    assert ops == ["add", "update"]
    table = run(loaded, "%uac constraints")
    assert isinstance(table, Table) and [r[:3] for r in table.rows] == [
        ("refill", "obligation", "Refill the amoxicillin prescription")
    ]
    assert table.rows[0][-1] == "constraint_refill"
    # the alert text names the constraint behind the alert
    from uac_kernel.render.alerts import alerts_lines

    wb = wb_of(loaded)
    assert "    constraint: refill (obligation): Refill the amoxicillin" in "\n".join(
        alerts_lines(wb.alerts(), wb.constraint_of)
    )
    out = run_out(loaded, "%uac constraint --retract refill --reason 'course finished'")
    assert "why: constraint 'refill' was retracted: course finished" in out
    assert len(run(loaded, "%uac constraints --history").rows) == 2


PETS = [
    fact("2026-01-05T08:00:00", "add", "Pet", "biscuit", petName="Biscuit", species="dog"),
    fact("2026-01-10T09:00:00", "add", "PetVaccine", "biscuit-rabies-2024", petKey="biscuit",
         vaccineName="rabies", givenOn="2024-03-01", validUntil="2026-03-01"),
    fact("2026-01-12T10:00:00", "add", "PetTrip", "biscuit-brittany-2026", petKey="biscuit",
         destinationCountry="France", leavesOn="2026-04-02", returnsOn="2026-04-12",
         crossesBorder=True),
]  # fmt: skip

RABIES = """kind: valid_on
title: Rabies jab valid for every day of a pet trip abroad
severity: critical
document: {type: PetVaccine, where: {vaccineName: rabies}}
each: {type: PetTrip, where: {crossesBorder: true}}
match: {petKey: petKey}
at: {fields: [leavesOn]}
until: {fields: [returnsOn]}
starts: [givenOn]
expires: [validUntil]
"""


def test_constrain_file_puts_it_in_force_as_the_terminal_does(ip: Any, tmp_path: Path) -> None:
    from helpers.cli import uac_here

    (tmp_path / "pets.jsonl").write_text("".join(json.dumps(e) + "\n" for e in PETS))
    (tmp_path / "rabies.yaml").write_text(RABIES)
    run(ip, "%uac open")
    run(ip, "%uac ingest pets.jsonl")
    out = run_out(ip, "%uac constrain rabies.yaml --key rabies-for-pet-trips --reason 'EU rules'")
    assert out.startswith("in force: rabies-for-pet-trips; 1 event appended")
    assert "raised [critical] constraint_rabies_for_pet_trips: Rabies jab valid" in out
    (notebook,) = [e.payload for e in wb_of(ip).log(kinds=["constraint"])]
    run(ip, "%uac close")
    # the terminal's `uac constrain FILE` on the same events appends the same constraint event
    env = {"UAC_DB": str(tmp_path / "cli.duckdb"), "UAC_USER": "maya"}
    assert uac_here("ingest", "pets.jsonl", cwd=tmp_path, env=env).returncode == 0
    done = uac_here(
        "constrain", "rabies.yaml", "--key", "rabies-for-pet-trips", "--reason", "EU rules",
        cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 0 and done.stdout == out
    with Workbench(tmp_path / "cli.duckdb", user="maya", read_only=True) as wb:
        assert [e.payload for e in wb.log(kinds=["constraint"])] == [notebook]


def test_constrain_prints_a_warning_for_a_type_no_record_has(ip: Any, tmp_path: Path) -> None:
    (tmp_path / "pets.jsonl").write_text("".join(json.dumps(e) + "\n" for e in PETS))
    typo = RABIES.replace("type: PetVaccine", "type: PetVacine")
    assert typo != RABIES
    (tmp_path / "typo.yaml").write_text(typo)
    run(ip, "%uac open")
    run(ip, "%uac ingest pets.jsonl")
    out = run_out(ip, "%uac constrain typo.yaml --key rabies")
    first, second = out.splitlines()[:2]
    assert first.startswith("warning: typo.yaml: ") and "(did you mean PetVaccine?)" in first
    assert second.startswith("in force: rabies")


def test_python_constructors_work_in_a_notebook(loaded: Any) -> None:
    run(
        loaded,
        "import uac\nwb.constrain(uac.Obligation(title='Book the dentist', due=uac.Moment(date='2024-11-20')))",
    )
    assert list(wb_of(loaded).state.constraints) == ["book-the-dentist"]


@pytest.mark.parametrize(
    ("cell", "words"),
    [
        ("%%uac constraint\nkind: obligation\ntitle: x\n", "%%uac constraint: due: Field required"),
        (
            "%%uac constraint\n- {kind: obligation, title: x, due: {date: 2024-01-01}}\n- {kind: nope}\n",
            "%%uac constraint: item 2: kind",
        ),
        ("%%uac constraint\n!!python/object/apply:os.system ['touch CANARY']\n", "invalid YAML"),
        ("%%uac constraint\n", "is a cell magic"),
        (
            "%uac constraint --key refill",
            "give a YAML or JSON file (%uac constrain FILE --key refill) or write the "
            "constraint in a cell under `%%uac constraint --key refill`",
        ),
        ("%uac constrain missing.yaml", "cannot read missing.yaml: No such file or directory"),
        ("%%uac constraint rules.yaml\nkind: obligation\n", "in a FILE (%uac constrain rules"),
        ("%uac constrain rules.yaml --retract refill", "`--retract KEY` takes no FILE"),
        ("%uac constraint --retract nothing", "no constraint 'nothing' is in force"),
        (
            "%%uac constraint --key a\n- {kind: obligation, title: x, due: {date: 2024-01-01}}\n"
            "- {kind: obligation, title: y, due: {date: 2024-01-01}}\n",
            "--key names one constraint",
        ),
    ],
)
def test_bad_constraint_cells_are_one_line_usage_errors(
    loaded: Any, tmp_path: Path, cell: str, words: str
) -> None:
    assert words in usage_error(loaded, cell)
    assert wb_of(loaded).state.constraints == {}
    assert not (tmp_path / "CANARY").exists()


def test_hostile_constraint_titles_and_keys_display_as_data(loaded: Any) -> None:
    TITLE = HOSTILE + " <script>alert(1)</script>"
    cell = "%%uac constraint\n" + json.dumps(
        {HOSTILE[:60]: {"kind": "obligation", "title": TITLE, "due": {"date": "2024-11-19"}}}
    )
    run_out(loaded, cell)
    table = run(loaded, "%uac constraints")
    html = table._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert table.rows[0][2] == TITLE  # the title as given, as data
    assert not (Path.cwd() / "CANARY").exists()


def test_constrain_is_the_same_cell_as_constraint(loaded: Any) -> None:
    out = run_out(loaded, CONSTRAINT_CELL.replace("%%uac constraint", "%%uac constrain"))
    assert out.startswith("in force: refill")


def test_an_empty_listing_says_so_in_its_html_as_in_its_text(ip: Any) -> None:
    """A notebook draws the HTML: an empty listing's line (and its hint) must be there too,
    not only in text/plain under a table of headers alone."""
    run(ip, "%uac open")
    run(ip, "%uac ingest events.jsonl")
    for cell, said in [
        ("%uac checkpoints", "take one with `%uac checkpoint`"),
        ("%uac constraints", "no constraints in force"),
        ("%uac constraints --history", "no constraints"),
    ]:
        table = run(ip, cell)
        assert said in table.text(), cell
        assert said in table._repr_html_(), cell


def test_the_docs_name_every_verb_the_magics_lack() -> None:
    """docs/notebooks.md's "except ..." lists exactly the terminal's verbs no magic has."""
    from uac_kernel.commands.declare import CLI

    text = " ".join((Path(__file__).parents[2] / "docs" / "notebooks.md").read_text().split())
    found = re.search(r"under the same names, except (.*?) \(run them in a terminal\)", text)
    assert found, "docs/notebooks.md lost its sentence on the verbs the magics lack"
    said = re.findall(r"`([^`]+)`", found.group(1))
    magic = {n.split()[0] for n, c in COMMANDS.items() if MAGIC in c.faces}
    terminal = dict.fromkeys(n.split()[0] for n, c in COMMANDS.items() if CLI in c.faces)
    assert said == [n for n in terminal if n not in magic]
