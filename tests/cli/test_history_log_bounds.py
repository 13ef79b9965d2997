"""`uac history` and `uac log`'s constraint lines on hostile values: escaped, one line each, and
bounded in length (a value or reason may hold up to a megabyte)."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.cli import uac_here

from uac_kernel import Workbench

BIG = "a\r\x1b[31m\u202e" + "y" * 999_000
MOST = 2_000  # characters a line of a terminal listing may reasonably take


def test_history_of_a_record_with_a_megabyte_field_prints_bounded_lines(tmp_path: Path) -> None:
    """The first version's row shows 'the fields it was asserted with': the 999k-character
    text whole, a line of 999,156 characters (at e1db8cf 1,998,248: 'changed' and 'fields'
    both); the reason column beside it is cut at REASON_CHARS."""
    note = {"kind": "fact", "type": "Note", "key": "n"}
    lines = [
        {**note, "ts": "2026-01-01T00:00:00", "op": "add", "fields": {"text": BIG, "n": 1}},
        {**note, "ts": "2026-01-02T00:00:00", "op": "update", "fields": {"text": BIG + "z"}},
    ]
    (tmp_path / "e.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    env = {"UAC_DB": str(tmp_path / "s.duckdb"), "UAC_USER": "maya"}
    assert uac_here("ingest", str(tmp_path / "e.jsonl"), cwd=tmp_path, env=env).returncode == 0
    done = uac_here("history", "Note", "n", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout and "\r" not in done.stdout
    longest = max(len(line) for line in done.stdout.splitlines())
    assert longest <= MOST, f"a line of {longest:,} characters"


def test_log_prints_a_constraint_event_with_a_long_reason_on_a_bounded_line(tmp_path: Path) -> None:
    """`uac log` reads a constraint event as 'add KEY (kind): title (reason: …)': a 100,000
    character reason made a line of 150,104 characters (escaped, but whole)."""
    db = tmp_path / "s.duckdb"
    with Workbench(db, user="maya", rules=[]) as wb:
        wb.constrain(
            {"kind": "obligation", "title": "Book the dentist", "due": {"date": "2024-11-20"}},
            key="dentist",
            reason="R\x1b[31m\r\n" * 10_000,
        )
    env = {"UAC_DB": str(db), "UAC_USER": "maya"}
    done = uac_here("log", "--kind", "constraint", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if "dentist" in x]
    assert "\x1b" not in line
    assert len(line) <= MOST, f"a line of {len(line):,} characters"
