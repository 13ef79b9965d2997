"""Every command is declared once and each face is built from the declaration: the `uac` parser
and the `%uac` parsers hold exactly the declared arguments, and every command runs on every
face it is declared for (the terminal's in process through ``main(argv)``; the notebook's in a
real IPython kernel shell), over a real DuckDB file."""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from uac_kernel.cli.main import main
from uac_kernel.cli.parser import BODIES, build_parser
from uac_kernel.commands.catalogue import COMMANDS, declared
from uac_kernel.commands.declare import CLI, MAGIC, VALUE, Arg, Command, Face
from uac_kernel.core.errors import CommandLineError
from uac_kernel.notebook.magics import UacMagics

EVENTS = [
    {"kind": "fact", "ts": "2024-02-09", "op": "add", "type": "Allergy", "key": "pen",
     "fields": {"substance": "penicillin"}},
    {"kind": "fact", "ts": "2024-11-18", "op": "add", "type": "Medication", "key": "amox",
     "fields": {"name": "amoxicillin"}},
]  # fmt: skip
WHATIF = {"kind": "fact", "ts": "2024-11-20", "op": "retract", "type": "Medication", "key": "amox"}
CONSTRAINT = (
    "kind: obligation\ntitle: File taxes\ndue: {date: '2025-04-15'}\ndone_by: {type: Tax}\n"
)


def _terminal_parsers() -> dict[str, argparse.ArgumentParser]:
    """Each command's parser in `uac`'s, by its declared name (``"fleet run"`` in a group)."""
    found: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    if sub.prog.rsplit(" ", 1)[-1] != name:
                        continue  # an alias: the same parser under another name
                    walk(sub, f"{prefix}{name} ")
                    if not any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
                        found[f"{prefix}{name}"] = sub

    walk(build_parser(), "")
    return found


def _as_parsed(parser: argparse.ArgumentParser, face: Face) -> list[tuple[Any, ...]]:
    """What a parser does with each of its own arguments (help aside, and the terminal's
    store options, which every command shares)."""
    return [
        (
            tuple(a.option_strings) or (a.dest,),
            a.dest,
            a.nargs or None,
            a.choices,
            a.required if a.option_strings else None,
        )
        for a in parser._actions
        if not isinstance(a, argparse._HelpAction)
        and not (face == CLI and a.dest in ("db", "user"))
    ]


def _as_declared(command: Command, face: Face) -> list[tuple[Any, ...]]:
    def one(a: Arg) -> tuple[Any, ...]:
        options = a.on(face)
        positional = not a.names[0].startswith("-")
        required = None if positional else bool(options.get("required", False))
        return (a.names if not positional else (a.dest,), a.dest, options.get("nargs"),
                options.get("choices"), required)  # fmt: skip

    return [one(a) for a in command.arguments(face)]


def test_the_terminal_parses_exactly_what_is_declared() -> None:
    parsers = _terminal_parsers()
    assert sorted(parsers) == sorted(c.name for c in declared(CLI)) == sorted(BODIES)
    for command in declared(CLI):
        parser = parsers[command.name]
        assert _as_parsed(parser, CLI) == _as_declared(command, CLI), command.name
        assert parser.description == (command.description or command.help)
        groups = [{a.dest for a in g._group_actions} for g in parser._mutually_exclusive_groups]
        assert groups == _groups(command, CLI), command.name


def test_the_store_options_are_on_the_commands_that_open_a_store() -> None:
    """A fleet command reads a directory: `--user` there would be taken for `--users` by
    argparse's abbreviations, or silently ignored."""
    parsers = _terminal_parsers()
    for command in declared(CLI):
        dests = {a.dest for a in parsers[command.name]._actions}
        assert ({"db", "user"} <= dests) == command.store, command.name
    assert {c.name for c in declared(CLI) if not c.store} == {
        "fleet run",
        "fleet sql",
        "fleet summary",
    }
    args = build_parser().parse_args(["fleet", "sql", "d", "SELECT 1", "--user", "alice"])
    assert args.users == "alice"  # the abbreviation of --users, as before


def test_the_notebook_parses_exactly_what_is_declared() -> None:
    methods = {}
    for attr in dir(UacMagics):
        command = getattr(getattr(UacMagics, attr), "_uac_subcommand", None)
        if command is not None:
            methods[command.name] = getattr(UacMagics, attr)
    assert sorted(methods) == sorted(c.name for c in declared(MAGIC))
    for command in declared(MAGIC):
        parser = methods[command.name].parser
        assert parser.prog == f"uac {command.name}"
        assert _as_parsed(parser, MAGIC) == _as_declared(command, MAGIC), command.name
        groups = [{a.dest for a in g._group_actions} for g in parser._mutually_exclusive_groups]
        assert groups == _groups(command, MAGIC), command.name


def _groups(command: Command, face: Face) -> list[set[str]]:
    named: dict[str, set[str]] = {}
    for a in command.arguments(face):
        if a.group is not None:
            named.setdefault(a.group, set()).add(a.dest)
    return list(named.values())


def test_a_declaration_names_a_face_of_each_argument_it_is_offered_on() -> None:
    for command in COMMANDS.values():
        for a in command.args:
            assert a.faces <= command.faces or a.faces == {CLI, MAGIC}, (command.name, a.names)
            assert a.faces & command.faces, (command.name, a.names)
        assert command.help and "\n" not in command.help, command.name  # a listing's line


def test_ingest_offers_the_formats_the_adapters_read() -> None:
    from uac_kernel.ingest.adapters import FORMATS

    (fmt,) = [a for a in COMMANDS["ingest"].args if a.names == ("--format",)]
    assert fmt.options["choices"] == ["auto", *FORMATS]


# -- every command, run on every face it is declared for ---------------------------------------


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with a user, an alert and two checkpoints; each test
    works on a copy."""
    root = tmp_path_factory.mktemp("store")
    events = root / "events.jsonl"
    events.write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    db = root / "maya.duckdb"
    assert main(["--db", str(db), "--user", "maya", "ingest", str(events)]) == 0
    assert main(["--db", str(db), "checkpoint"]) == 0
    (root / "more.jsonl").write_text(json.dumps({**EVENTS[1], "key": "ibu", "fields": {"name": "ibuprofen"}}) + "\n")  # fmt: skip
    assert main(["--db", str(db), "ingest", str(root / "more.jsonl")]) == 0
    assert main(["--db", str(db), "checkpoint"]) == 0
    return db


@pytest.fixture
def work(store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the store in an empty working directory, with the files commands read."""
    import shutil

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("UAC_DB", raising=False)
    monkeypatch.delenv("UAC_USER", raising=False)
    monkeypatch.setenv("UAC_OFFLINE", "1")
    shutil.copy(store, tmp_path / "maya.duckdb")
    (tmp_path / "events.jsonl").write_text(json.dumps(EVENTS[0] | {"key": "sulfa"}) + "\n")
    (tmp_path / "whatif.jsonl").write_text(json.dumps(WHATIF) + "\n")
    (tmp_path / "tax.yaml").write_text(CONSTRAINT)
    return tmp_path / "maya.duckdb"


# One run of each command on the terminal: its arguments after `uac --db STORE`, and a piece of
# what it prints. Commands that need a model, a benchmark's data or a fleet of processes run in
# their own tests (named here); the declaration test above still checks their parsers.
TERMINAL: dict[str, tuple[list[str], str]] = {
    "ingest": (["ingest", "events.jsonl"], "1 event appended"),
    "checkpoint": (["checkpoint"], "checkpoint"),
    "checkpoints": (["checkpoints"], "2"),
    "users": (["users"], "maya"),
    "state": (["state"], "Medication"),
    "history": (["history", "Medication", "amox"], "amoxicillin"),
    "code": (["code", "--version", "1"], "class Medication"),
    "diff": (["diff", "1", "2"], "ibu"),
    "eval": (["eval", "len(user.all(Medication))"], "2"),
    "sql": (["sql", "SELECT count(*) AS n FROM Medication"], "2"),
    "alerts": (["alerts"], "drug_allergy_cross_reactivity"),
    "constrain": (["constrain", "tax.yaml", "--key", "tax"], "tax"),
    "vocab": (["vocab", "concepts"], "date"),
    "whatif": (["whatif", "whatif.jsonl"], "cleared"),
    "constraints": (["constraints"], ""),
    "log": (["log", "--limit", "2"], "schema"),
    "verify": (["verify"], "hash chains intact"),
    "export": (["export", "maya.duckdb", "fleet"], "1 user committed"),
    "forget": (["forget", "--record", "Medication", "ibu", "--dry-run"], "would forget"),
    "head": (["head"], "maya"),
    "extract": (["extract"], "pending"),
    "review": (["review"], "no model answers are held"),
    "calls": (["calls"], ""),
    "bench vocab": (["bench", "vocab", "--report", "--out", "out"], "original"),
    "fleet summary": (["fleet", "summary", "fleet"], "users"),
    "fleet sql": (["fleet", "sql", "fleet", "SELECT count(*) AS n FROM users"], "1"),
}
ELSEWHERE = {
    "import": "tests/fleet/test_partition.py",
    "ask": "tests/cli/test_cli.py::test_extract_ask_and_calls_via_cli",
    "bench aggregate": "tests/bench/test_bench_aggregate.py",
    "bench alerts": "tests/bench/test_bench_alerts.py",
    "bench locomo": "tests/bench/test_bench_locomo.py",
    "fleet run": "tests/fleet/test_fleet_run.py",
    "demo": "tests/cli/test_cli.py::test_demo_runs_offline",
}


def test_every_terminal_command_is_run_here_or_named_with_its_tests() -> None:
    names = {c.name for c in declared(CLI)}
    assert set(TERMINAL) | set(ELSEWHERE) == names and not set(TERMINAL) & set(ELSEWHERE)
    root = Path(__file__).parents[2]
    for where in ELSEWHERE.values():
        assert (root / where.split("::")[0]).is_file(), where


@pytest.mark.parametrize("name", sorted(TERMINAL))
def test_each_command_runs_in_the_terminal(
    name: str, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv, said = TERMINAL[name]
    if name == "fleet sql" or name == "fleet summary":
        assert main(["--db", str(work), "export", str(work), "fleet"]) == 0
        capsys.readouterr()
    code = main(["--db", str(work), *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert said.lower() in out.lower(), out


@pytest.mark.parametrize("name", sorted(c.name for c in declared(CLI)))
def test_each_terminal_command_explains_itself(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main([*name.split(), "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    command = COMMANDS[name]
    assert "".join((command.description or command.help).split()) in "".join(out.split())
    for a in command.arguments(CLI):
        assert a.names[0] in out or str(a.on(CLI).get("metavar", "")) in out, a.names


# -- the notebook ---------------------------------------------------------------------------


@pytest.fixture
def store_ip(kernel_shell: Any, work: Path) -> Iterator[Any]:
    """Unlike conftest's ``ip``: ``%load_ext uac`` over the copy of the module's store (two
    checkpoints, an alert), with a list of events bound to ``hypothetical``."""
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    shell = kernel_shell
    shell.reset(new_session=False)
    shell.config.pop("UacMagics", None)
    shell.run_line_magic("load_ext", "uac")
    shell.run_line_magic("config", f"UacMagics.db = {str(work)!r}")
    shell.run_line_magic("config", "UacMagics.user = 'maya'")
    shell.user_ns["hypothetical"] = [WHATIF]
    yield shell
    shell.run_line_magic("unload_ext", "uac")


# One run of each notebook command: the line after `%uac`, a cell body (or None), and a piece of
# what it shows (as text) or returns.
NOTEBOOK: dict[str, tuple[str, str | None, str]] = {
    "open": ("open", None, "maya"),
    "close": ("close", None, "closed"),
    "ingest": ("ingest events.jsonl", None, "1 event appended"),
    "checkpoint": ("checkpoint", None, "checkpoint"),
    "checkpoints": ("checkpoints", None, "2"),
    "users": ("users", None, "maya"),
    "state": ("state", None, "Medication"),
    "history": ("history Medication amox", None, "amoxicillin"),
    "code": ("code --version 1", None, "class Medication"),
    "diff": ("diff 1 2", None, "ibu"),
    "eval": ("eval len(user.all(Medication))", None, "2"),
    "sql": ("sql SELECT count(*) AS n FROM Medication", None, "2"),
    "alerts": ("alerts", None, "drug_allergy_cross_reactivity"),
    "constrain": ("constrain --key tax", CONSTRAINT, "tax"),
    "vocab": ("vocab concepts", None, "date"),
    "whatif": ("whatif hypothetical", None, "cleared"),
    "constraints": ("constraints", None, ""),
    "log": ("log --limit 2", None, "schema"),
    "verify": ("verify", None, "hash chains intact"),
    "forget": ("forget --record Medication ibu --dry-run", None, "would forget"),
    "head": ("head", None, ""),
    "extract": ("extract", None, "pending"),
    "review": ("review", None, "no model answers are held"),
    "calls": ("calls", None, ""),
    "edit": ("edit --all", None, "%uac edit Medication"),
    "cell": ("edit Medication", None, "%%uac cell"),
    "chart": ("chart events", None, ""),
    "fleet": ("fleet fleet", None, "users"),
}
NOTEBOOK_ELSEWHERE = {"ask": "tests/notebook/test_magics.py (a real ChatServer)"}


def test_every_notebook_command_is_run_here_or_named_with_its_tests() -> None:
    names = {c.name for c in declared(MAGIC)}
    assert set(NOTEBOOK) | set(NOTEBOOK_ELSEWHERE) == names


@pytest.mark.parametrize("name", sorted(NOTEBOOK))
def test_each_command_runs_in_the_notebook(name: str, store_ip: Any, work: Path) -> None:
    ip = store_ip
    line, cell, said = NOTEBOOK[name]
    if name == "fleet":
        assert main(["--db", str(work), "export", str(work), "fleet"]) == 0
    if name == "close":
        ip.run_line_magic("uac", "open")
    with capture_output() as captured:
        if cell is None:
            result = ip.run_line_magic("uac", line)
        else:
            result = ip.run_cell_magic("uac", line, cell)
    shown = captured.stdout + "".join(str(o.data) for o in captured.outputs)
    shown += "" if result is None else repr(result) + str(getattr(result, "text", ""))
    if name == "cell":  # `edit` wrote the cell's next input: run it, unchanged
        (payload,) = ip.payload_manager.read_payload()
        assert payload["text"].startswith(said), payload
        with capture_output() as captured:
            ip.run_cell(payload["text"]).raise_error()
        assert "no change" in captured.stdout.lower(), captured.stdout
        return
    assert said.lower() in shown.lower(), shown


@pytest.mark.parametrize("name", sorted(c.name for c in declared(MAGIC)))
def test_each_notebook_command_explains_itself(name: str, store_ip: Any) -> None:
    ip = store_ip
    with capture_output() as captured:
        ip.run_line_magic("uac", f"{name} --help")
    out = " ".join(captured.stdout.split())
    assert out.startswith(f"%uac {name}")
    for a in COMMANDS[name].arguments(MAGIC):
        assert a.names[0] in out or str(a.on(MAGIC).get("metavar", "")) in out, a.names


def test_help_lists_each_notebook_command_once_with_its_other_names(store_ip: Any) -> None:
    with capture_output() as captured:
        store_ip.run_line_magic("uac", "help")
    lines = [line.split()[0:2] for line in captured.stdout.splitlines()[1:-1]]
    names = [words[1] for words in lines if words and words[0] == "%uac"]
    assert names == sorted(c.name for c in declared(MAGIC))
    assert "(also: %uac constraint)" in captured.stdout


def test_a_typed_value_reads_the_same_quoted_negative_or_in_an_edit_line(store_ip: Any) -> None:
    ip = store_ip
    for line in ("edit Medication --last -3", "edit Medication --last '-3'"):
        with pytest.raises(UsageError) as raised:
            ip.run_line_magic("uac", line)
        assert str(raised.value) == "argument --last: must be positive, got -3"
    for timeout in ("0", "'0'", "nan"):
        with pytest.raises(UsageError, match="argument --timeout: expected a positive number"):
            ip.run_line_magic("uac", f"sql --timeout {timeout} SELECT 1")
    assert ip.run_line_magic("uac", "sql --timeout '5' SELECT 1 AS one").rows == [(1,)]


def test_an_argument_declared_for_one_face_is_refused_on_the_other(store_ip: Any) -> None:
    ip = store_ip
    with pytest.raises(UsageError, match="unrecognized arguments: --json"):
        ip.run_line_magic("uac", "alerts --json")
    with pytest.raises(CommandLineError, match="unrecognized arguments: --all"):
        build_parser().parse_args(["verify", "--all"])


# -- one renderer per report: both faces show what it draws ------------------------------------


def _both_faces() -> list[Command]:
    return [c for c in declared(CLI) if MAGIC in c.faces]


def test_every_command_on_both_faces_declares_the_report_it_draws() -> None:
    import importlib

    values = set()
    for command in _both_faces():
        assert command.report, f"{command.name}: name its renderer (Command(report=...))"
        if command.report == VALUE:  # handed back as it is; the declaration says why
            values.add(command.name)
            continue
        module = importlib.import_module(f"uac_kernel.render.{command.report}")
        assert module.__all__, command.report
    assert values == {"eval", "code"}


# One run of a command on each face, over two copies of one store: the terminal's arguments
# after `uac --db STORE --user maya`, the notebook's line and cell.
BOTH: dict[str, tuple[list[str], str, str | None]] = {
    "ingest": (["ingest", "events.jsonl"], "ingest events.jsonl", None),
    "checkpoint": (["checkpoint"], "checkpoint", None),
    "checkpoint (new)": (["checkpoint"], "checkpoint", None),
    "diff": (["diff", "1", "2"], "diff 1 2", None),
    "alerts": (["alerts"], "alerts", None),
    "constrain": (["constrain", "tax.yaml", "--key", "tax"], "constrain --key tax", CONSTRAINT),
    "constrain --retract": (["constrain", "--retract", "tax"], "constrain --retract tax", None),
    "whatif": (["whatif", "whatif.jsonl"], "whatif hypothetical", None),
    "verify": (["verify"], "verify", None),
    "forget": (["forget", "--record", "Medication", "ibu", "--dry-run"],
               "forget --record Medication ibu --dry-run", None),
    "forget (done)": (["forget", "--record", "Medication", "ibu"],
                      "forget --record Medication ibu", None),
    "forget (nothing)": (["forget", "--text", "zebra"], "forget --text zebra", None),
    "head": (["head"], "head", None),
    "extract": (["extract"], "extract", None),
    "review": (["review"], "review", None),
    "checkpoints": (["checkpoints"], "checkpoints", None),
    "users": (["users"], "users", None),
    "state": (["state"], "state", None),
    "history": (["history", "Medication", "amox"], "history Medication amox", None),
    "constraints": (["constraints"], "constraints", None),
    "constraints --history": (["constraints", "--history"], "constraints --history", None),
    "log": (["log", "--limit", "3"], "log --limit 3", None),
    "log (facts)": (["log", "--kind", "fact"], "log --kind fact", None),
    "calls": (["calls"], "calls", None),
    "vocab": (["vocab"], "vocab", None),
    "vocab (concepts)": (["vocab", "concepts"], "vocab concepts", None),
    "vocab --unbound": (["vocab", "--unbound"], "vocab --unbound", None),
    "sql": (["sql", "SELECT key, name FROM Medication ORDER BY key"],
            "sql SELECT key, name FROM Medication ORDER BY key", None),
}  # fmt: skip
BOTH_ELSEWHERE = {"ask": "tests/cli/test_cli.py and tests/notebook/test_magics.py (a model)"}


def test_every_reported_command_is_compared_on_both_faces() -> None:
    reported = {c.name for c in _both_faces() if c.report != VALUE}
    assert {name.split(" (")[0].split(" --")[0] for name in BOTH} | set(BOTH_ELSEWHERE) == reported


def _without_hints(text: str, *stores: Path) -> list[str]:
    """The lines a face shows, its hints aside (a terminal's `uac code ...`, a notebook's
    `%uac edit PART` lines) and each store's path as STORE."""
    for db in stores:
        text = text.replace(str(db), "STORE")
    lines = []
    for line in text.splitlines():
        if "%uac " in line or line.startswith("edit a part in a cell"):
            continue
        lines.append(re.sub(r"; (show|see) it with `uac [^`]*`$", "", line))
    return lines


@pytest.mark.parametrize("name", sorted(BOTH))
def test_both_faces_show_the_report_as_its_renderer_draws_it(
    name: str, store: Path, store_ip: Any, work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    argv, line, cell = BOTH[name]
    terminal = work.with_name("terminal.duckdb")
    shutil.copy(store, terminal)
    ip = store_ip
    ip.run_line_magic("config", "UacMagics.displaylimit = 0")  # a notebook pages; a terminal not
    with capture_output():
        ip.run_line_magic("uac", "open")  # what opening prints is not the command's
    if name == "checkpoint (new)":  # a new fact first, on both copies, so a version is taken
        assert main(["--db", str(terminal), "--user", "maya", "ingest", "events.jsonl"]) == 0
        with capture_output():
            ip.run_line_magic("uac", "ingest events.jsonl")
    if name in ("constrain --retract", "constraints --history"):
        given = ["constrain", "tax.yaml", "--key", "tax"]
        assert main(["--db", str(terminal), "--user", "maya", *given]) == 0
        with capture_output():
            ip.run_cell_magic("uac", "constrain --key tax", CONSTRAINT)
    capsys.readouterr()
    code = main(["--db", str(terminal), "--user", "maya", *argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    with capture_output() as captured:
        if cell is None:
            result = ip.run_line_magic("uac", line)
        else:
            result = ip.run_cell_magic("uac", line, cell)
    shown = captured.stdout + "".join(
        o.data["text/plain"] + "\n"
        for o in captured.outputs
        if not re.search(r"\[\d\d:\d\d.*/s\]$", o.data["text/plain"])  # a progress bar
    )
    if result is not None:  # a returned listing: shown as the cell's value
        shown += ip.display_formatter.format(result)[0]["text/plain"] + "\n"
    assert _without_hints(out, terminal) == _without_hints(shown, work), (out, shown)
