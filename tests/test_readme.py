"""The README's walk-through works as a newcomer runs it, and the examples moved to docs/ run.

The README's "Your own history in five minutes" is run end to end: its bash blocks, in order,
by bash in an empty directory with the real ``uac`` command on PATH; then its Python block and
its notebook cell on the store that made. The blocks are read from the README, so the test
breaks when the README drifts from what uac does."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
WALK_TITLE = "## Your own history in five minutes"


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, flags=re.S)


def doc(name: str) -> str:
    return (ROOT / "docs" / name).read_text()


def walk_through() -> str:
    """The README's five-minute section, up to the next section."""
    assert WALK_TITLE in README
    return README.split(WALK_TITLE, 1)[1].split("\n## ", 1)[0]


def test_readme_is_short_and_begins_with_the_two_commands() -> None:
    lines = README.splitlines()
    assert len(lines) <= 260, f"README.md has {len(lines)} lines: move detail into docs/"
    first = blocks(README, "bash")[0]
    assert README.index(first) < 60  # the first thing under the title
    assert first.splitlines()[0].startswith("./scripts/demo ")
    assert first.splitlines()[1].startswith("./scripts/test ")
    assert "./scripts/lab" in "\n".join(lines[:15])  # on the first screen
    for script in ("demo", "test", "lab"):
        assert os.access(ROOT / "scripts" / script, os.X_OK), script


@pytest.fixture(scope="module")
def walked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty directory where the README's bash blocks ran, in order, as one script."""
    work = tmp_path_factory.mktemp("newcomer")
    bin_dir = work / "bin"
    bin_dir.mkdir()
    # `uac` as the installed console script runs it: this interpreter, this checkout's code
    uac = bin_dir / "uac"
    uac.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m uac_kernel.cli.main "$@"\n')
    uac.chmod(0o755)
    home = work / "home"
    home.mkdir()
    script = "set -euo pipefail\n" + "\n".join(blocks(walk_through(), "bash"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UAC_", "OPENAI_"))}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = str(ROOT)
    run = subprocess.run(
        ["bash", "-c", script],
        cwd=home,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    (work / "stdout.txt").write_text(run.stdout)
    return home


def test_every_command_of_the_walk_through_is_a_uac_command() -> None:
    commands = [
        line.split()[1]
        for b in blocks(walk_through(), "bash")
        for line in b.splitlines()
        if line.startswith("uac ")
    ]
    assert {"ingest", "alerts", "eval", "sql", "constrain", "whatif", "checkpoint"} <= set(commands)
    from uac_kernel.cli.parser import build_parser

    parser = build_parser()
    choices = next(a for a in parser._actions if a.dest == "command").choices
    assert choices is not None
    assert set(commands) <= set(choices), set(commands) - set(choices)


def test_the_command_table_lists_the_commands_of_uac_help_in_its_order() -> None:
    from uac_kernel.cli.parser import build_parser

    table = README.split("## Commands", 1)[1].split("\n## ", 1)[0]
    rows = [ln.split("|")[1] for ln in table.splitlines() if ln.startswith("| `uac ")]
    listed = [word.split()[0].rstrip("`") for row in rows for word in row.split("`uac ")[1:]]
    parser = build_parser()
    action = next(a for a in parser._actions if a.dest == "command")
    helped = [a.dest for a in action._choices_actions]  # type: ignore[attr-defined]
    assert listed == helped


def test_the_walk_through_runs_and_says_what_the_readme_says(walked: Path) -> None:
    out = (walked.parent / "stdout.txt").read_text()
    text = walk_through()
    # the alerts the prose promises: the shipped insurance rule, then the constraint's own
    assert "raised [critical] document_expires_before_trip" in out and "Insurance" in text
    assert "raised [critical] constraint_expenses" in out
    assert "constraint: expenses (obligation)" in out
    assert "nothing was appended" in out and "[] → ['tokyo-2025']" in out
    assert "cleared [critical] constraint_expenses" in out  # the real ingest clears it
    assert "checkpoint 1:" in out and "class Trip(Record):" in out
    assert "hash chains intact" in out
    assert (walked / "uac.duckdb").exists()


def test_the_walk_through_python_block_runs(
    walked: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(walked)
    (code,) = blocks(walk_through(), "python")
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert "['Japan', 'Portugal', 'UK']" in out
    assert "['document_expires_before_trip']" in out


def test_the_walk_through_notebook_cell_runs(
    walked: Path, kernel_shell: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers.magics import run

    monkeypatch.chdir(walked)
    ip = kernel_shell
    ip.reset(new_session=False)
    ip.payload_manager.clear_payload()
    ip.config.pop("UacMagics", None)
    first, constraint_cell = blocks(walk_through(), "ipython")
    try:
        for line in first.splitlines():
            run(ip, line.split("  #")[0].strip())
        payload = ip.payload_manager.read_payload()
        # `%uac edit Trip` turned its cell into the Trip records as code
        assert any("%%uac cell" in p.get("text", "") for p in payload), payload
        assert "tokyo-2025" in str(payload)
        # `%uac constrain FILE` found the terminal's constraint in force and appended nothing
        assert [e.payload["op"] for e in ip.user_ns["wb"].log(kinds=["constraint"])] == ["add"]
        # the cell form: one cell, its body the constraint; it updates the one in force
        assert constraint_cell.startswith("%%uac constraint --key expenses\n")
        run(ip, constraint_cell)
        made = ip.user_ns["wb"].log(kinds=["constraint"])[-1]
        assert made.payload["op"] == "update" and made.payload["constraint"]["due"]["days"] == 21
    finally:
        run(ip, "%unload_ext uac")


# -- the examples that moved to docs/ --------------------------------------------------------


def test_docs_python_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/python-api.md's blocks, then docs/notebooks.md's, in order, against the Event JSONL
    example of docs/events.md."""
    monkeypatch.chdir(tmp_path)
    # the JSONL example without its retraction, so Tokyo is still there to query
    events = [
        line for line in blocks(doc("events.md"), "json")[0].splitlines() if '"retract"' not in line
    ]
    (tmp_path / "events.jsonl").write_text("\n".join(events) + "\n")
    namespace: dict[str, object] = {}
    for code in blocks(doc("python-api.md"), "python") + blocks(doc("notebooks.md"), "python"):
        exec(compile(code, "docs", "exec"), namespace)
    wb = namespace["wb"]
    assert (
        wb.eval("len([t for t in user.all(Trip) if t.international and t.start.year == 2025])") == 1
    )  # type: ignore[attr-defined]
    generated = wb.checkpoint().code  # type: ignore[attr-defined]
    (sample,) = blocks(doc("checkpoints.md"), "python")
    assert sample.lstrip().startswith("class Trip(Record)")
    for line in sample.strip().splitlines():
        assert line in generated.splitlines(), line
