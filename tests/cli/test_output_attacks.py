"""Attacks on what uac prints: results that print huge, and stored strings that drive the terminal.

Every case runs the real `uac` command in a subprocess or the real IPython shell with the
extension loaded. A result is measured as it will be printed: the terminal and the notebook get
a bounded view and a note that says how much was left out and how to get the rest. No control
character from the store reaches the output raw.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import one_line_error
from helpers.cli import uac_here as uac
from helpers.magics import run

from uac_kernel.core.display import TERMINAL_BUDGET, clip_json, json_chunks, json_size, printable

# A stored string that would clear the screen, retitle the terminal, ring, return the cursor,
# reverse the text, start a C1 CSI, open a bidi isolate, hide a NUL, and split a line or a cell.
HOSTILE = "x\x1b[2J\x1b]0;owned\x07\r\u202eevil\x9b31m\u2066\x00\u2028\t\ny"
RAW = ["\x1b", "\x07", "\r", "\u202e", "\x9b", "\u2066", "\x00", "\u2028"]

EVENTS: list[dict[str, Any]] = [
    {
        "kind": "fact",
        "ts": "2024-02-09",
        "op": "add",
        "type": "Allergy",
        "key": "pen" + HOSTILE,
        "fields": {"substance": "penicillin", "reaction": "hives" + HOSTILE},
    },
    {
        "kind": "fact",
        "ts": "2024-11-18",
        "op": "add",
        "type": "Medication",
        "key": "amox" + HOSTILE,
        "fields": {"name": "amoxicillin " + HOSTILE, "active": True},
    },
    {
        "kind": "utterance",
        "ts": "2024-11-18T10:00:00",
        "speaker": "user" + HOSTILE,
        "text": "said " + HOSTILE,
        "source": "chat" + HOSTILE,
    },
]


def clean(text: str) -> None:
    leaked = [c for c in RAW if c in text]
    assert not leaked, f"raw control characters printed: {leaked!r}"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("out")
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in EVENTS))
    return folder


def cli(store: Path, *args: str) -> Any:
    return uac(*args, "--db", "s.duckdb", "--user", "u", cwd=store)


@pytest.fixture(scope="module")
def ingested(store: Path) -> str:
    out = uac("ingest", "events.jsonl", "--db", "s.duckdb", "--user", "u", cwd=store)
    assert out.returncode == 0, out.stderr
    return out.stdout


# --- control characters --------------------------------------------------------------------

COMMANDS = [
    ("sql_table", ["sql", "SELECT * FROM Medication"]),
    ("sql_history", ["sql", "SELECT * FROM Allergy_history"]),
    ("sql_json", ["sql", "SELECT key, name FROM Medication", "--json"]),
    ("sql_column_name", ["sql", f"SELECT 1 AS {json.dumps(HOSTILE)}"]),
    ("alerts", ["alerts"]),
    ("alerts_json", ["alerts", "--json"]),
    ("log", ["log"]),
    ("log_utterances", ["log", "--kind", "utterance"]),
    ("eval_strings", ["eval", "[m.name for m in user.all(Medication)]"]),
    ("eval_keys", ["eval", "{m.key: m.name for m in user.all(Medication)}"]),
    ("eval_records", ["eval", "user.all(Allergy)"]),
    ("eval_search", ["eval", "search('said', 1)"]),
    ("eval_history", ["eval", "user.history(Medication)"]),
    ("sql_error_echoes_input", ["sql", f"SELECT * FROM {json.dumps(HOSTILE)}"]),
    ("eval_error_echoes_input", ["eval", f"user.all({HOSTILE!r})[0]"]),
]


def test_ingest_summary_and_alerts_are_escaped(ingested: str) -> None:
    clean(ingested)
    assert "raised [critical]" in ingested and printable("amox" + HOSTILE) in ingested


@pytest.mark.parametrize(("args",), [pytest.param(a, id=i) for i, a in COMMANDS])
def test_stored_control_characters_are_escaped(store: Path, ingested: str, args: list[str]) -> None:
    out = cli(store, *args)
    clean(out.stdout)
    clean(out.stderr)
    if out.returncode == 0:
        assert out.stdout.strip()
    else:
        one_line_error(out)


def test_a_cell_with_tabs_and_newlines_stays_one_tsv_cell(store: Path, ingested: str) -> None:
    out = cli(store, "sql", "SELECT key, name FROM Medication")
    header, row = out.stdout.splitlines()
    assert header == "key\tname"
    assert row.split("\t") == [printable("amox" + HOSTILE), printable("amoxicillin " + HOSTILE)]


def test_printable_escapes_every_control_and_invisible_mark() -> None:
    text = "".join(map(chr, range(0x20))) + "\x7f\x85\u061c\u200b\u200e\u202a\u2069\ufeff"
    shown = printable(text)
    assert shown.isprintable() and shown.isascii()
    assert printable("tab\there é 字 🙂") == "tab\\there é 字 🙂"
    assert json.loads(json.dumps(HOSTILE)[:1] + printable(HOSTILE) + '"') == HOSTILE


RUNNER = "easy 🏃\u200d♀\ufe0f"  # a woman running: runner, ZWJ, female sign, VS16


def test_printable_keeps_the_marks_that_build_an_emoji() -> None:
    assert printable(RUNNER) == RUNNER
    assert printable("👨🏽\u200d💻 1\ufe0f\u20e3 ❤\ufe0f") == "👨🏽\u200d💻 1\ufe0f\u20e3 ❤\ufe0f"
    scotland = "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"
    assert printable(scotland) == scotland


def test_printable_escapes_joiners_and_selectors_that_could_hide_text() -> None:
    assert printable("pay\u200dpal") == "pay\\u200dpal"  # between letters
    assert printable("\u200d🏃 🏃\u200d") == "\\u200d🏃 🏃\\u200d"  # not between two emoji
    assert printable("a\ufe0fb") == "a\\ufe0fb"
    tag = printable("a\U000e0041b")  # a lone tag character: invisible
    assert tag == "a\\udb40\\udc41b" and json.loads(f'"{tag}"') == "a\U000e0041b"
    # Controls, overrides and zero-width spaces beside an emoji are still escaped.
    assert printable("🏃\u200d\x1b\u202e\u200b") == "🏃\\u200d\\u001b\\u202e\\u200b"


# --- results that print huge ----------------------------------------------------------------

HUGE = "['a' * 2**20] * 3000"  # pickles in ~1 MB, prints as 3.1 GB of JSON


def test_eval_of_a_result_that_prints_huge_is_cut_with_a_note(store: Path, ingested: str) -> None:
    out = cli(store, "eval", HUGE)
    assert out.returncode == 0, out.stderr
    assert TERMINAL_BUDGET <= len(out.stdout) <= TERMINAL_BUDGET + 1
    assert out.stdout.startswith('["aaaa')
    assert out.stderr == (
        "… the result is 3.1 GB as JSON; only the first 100.0 kB are shown; "
        "write it whole with --out FILE\n"
    )


def test_eval_out_writes_the_whole_result(store: Path, ingested: str) -> None:
    out = cli(store, "eval", "['a' * 2**12] * 300 + [{(1, 2): 10**5000}]", "--out", "r.json")
    assert out.returncode == 0, out.stderr
    value = json.loads((store / "r.json").read_text())
    assert value[:300] == ["a" * 2**12] * 300
    # a tuple key becomes its text; an int too long for decimal text is written in hex
    assert value[300] == {"(1, 2)": hex(10**5000)}
    assert (
        out.stdout == f"wrote r.json ({(store / 'r.json').stat().st_size:,} characters of JSON)\n"
    )


@pytest.mark.parametrize(
    ("expr", "printed"),
    [
        pytest.param("{(1, 2): 3}", '{"(1, 2)": 3}', id="tuple_keys"),
        pytest.param("10**5000", json.dumps(hex(10**5000)), id="int_past_str_limit"),
        pytest.param("{date(2025, 1, 2): 1}", '{"2025-01-02": 1}', id="date_keys"),
        pytest.param("[float('nan'), float('inf')]", "[NaN, Infinity]", id="non_finite"),
        pytest.param("timedelta(days=1)", "86400.0", id="timedelta"),
        pytest.param("'\\ud800' + 'x'", '"\\ud800x"', id="lone_surrogate"),
        pytest.param(
            "{'\\u202e': '\\x1b[31m'}", '{"\\u202e": "\\u001b[31m"}', id="controls_in_keys"
        ),
    ],
)
def test_eval_values_json_cannot_print_still_print(
    store: Path, ingested: str, expr: str, printed: str
) -> None:
    out = cli(store, "eval", expr)
    assert out.returncode == 0, out.stderr
    assert out.stdout == printed + "\n"


def test_sql_output_stops_at_the_budget_and_out_writes_every_row(
    store: Path, ingested: str
) -> None:
    query = "SELECT i, repeat('x', 1000) AS pad FROM range(1000) t(i)"
    out = cli(store, "sql", query)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(out.stdout) <= TERMINAL_BUDGET and lines[0] == "i\tpad"
    assert out.stderr == (
        f"… {1000 - (len(lines) - 1)} more rows not shown (the output stops at 100 kB); "
        "write them all with --out FILE\n"
    )
    full = cli(store, "sql", query, "--out", "rows.tsv")
    assert full.stdout == "wrote rows.tsv (1,000 rows)\n"
    assert len((store / "rows.tsv").read_text().splitlines()) == 1001
    as_json = cli(store, "sql", query, "--json", "--out", "rows.json")
    assert as_json.returncode == 0, as_json.stderr
    assert len(json.loads((store / "rows.json").read_text())) == 1000


def test_sql_timeout_on_the_command_line(store: Path, ingested: str) -> None:
    query = "SELECT count(*) FROM range(100000000) a, range(100000000) b"
    err = one_line_error(cli(store, "sql", query, "--timeout", "0.5"))
    assert "SQL time limit of 0.5 s" in err and "--timeout S" in err
    bad = one_line_error(cli(store, "sql", "SELECT 1", "--timeout", "0"))
    assert "expected a positive number of seconds, got '0'" in bad


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(["a" * 2**20] * 3000, id="shared_megabyte_strings"),
        pytest.param("b" * 2**21, id="one_long_string"),
        pytest.param({str(i): "c" * 1000 for i in range(1000)}, id="wide_dict"),
        pytest.param([[["d" * 100] * 100] * 100] * 10, id="nested_lists"),
        pytest.param(10**50000, id="huge_int"),
    ],
)
def test_clip_json_builds_no_more_than_its_budget(value: Any) -> None:
    text, note = clip_json(value, 10_000)
    size = json_size(value)
    assert size == sum(len(c) for c in json_chunks(value)) or size > 10**8
    assert len(text) == 10_000 and note.startswith("… the result is ")
    assert text == "".join(json_chunks(value))[:10_000] if size < 10**8 else text.startswith("[")


# --- the notebook -------------------------------------------------------------------------------


@pytest.fixture
def hostile_ip(
    request: pytest.FixtureRequest, store: Path, ingested: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    """Unlike conftest's ``ip``: the shell with uac on this module's store (user ``u`` of
    ``s.duckdb`` in ``store``, the working dir, its hostile events ingested once by the CLI)."""
    shell = request.getfixturevalue("kernel_shell")
    monkeypatch.chdir(store)
    shell.reset(new_session=False)
    shell.config.pop("UacMagics", None)
    run(shell, "%load_ext uac")
    run(shell, f"%config UacMagics.db = {str(store / 's.duckdb')!r}")
    run(shell, "%config UacMagics.user = 'u'")
    yield shell
    run(shell, "%unload_ext uac")


def shown(ip: Any, value: Any) -> dict[str, str]:
    data, _ = ip.display_formatter.format(value)
    return data  # type: ignore[no-any-return]


def test_notebook_eval_of_a_huge_result_is_whole_but_prints_bounded(hostile_ip: Any) -> None:
    value = run(hostile_ip, f"%uac eval {HUGE}")
    assert isinstance(value, list) and len(value) == 3000 and value[2999] == "a" * 2**20
    text = shown(hostile_ip, value)["text/plain"]
    assert len(text) < TERMINAL_BUDGET + 200
    assert "the result is 3.1 GB as JSON; only the first 100.0 kB are shown" in text
    assert "the value itself is whole" in text
    small = run(hostile_ip, "%uac eval [1, 2]")
    assert type(small) is list and shown(hostile_ip, small)["text/plain"] == "[1, 2]"


@pytest.mark.parametrize(
    "expr",
    ["'x' * 2**21", "{i: 'y' * 1000 for i in range(1000)}", "10**5000"],
    ids=["str", "dict", "int"],
)
def test_notebook_eval_bounds_every_kind_of_result(hostile_ip: Any, expr: str) -> None:
    value = run(hostile_ip, f"%uac eval {expr}")
    assert value == run(hostile_ip, f"__import__('builtins').eval({expr!r})")
    assert len(shown(hostile_ip, value)["text/plain"]) < TERMINAL_BUDGET + 200


def test_notebook_tables_and_alerts_escape_control_characters(hostile_ip: Any) -> None:
    from helpers.magics import run_out

    table = shown(hostile_ip, run(hostile_ip, "%uac sql SELECT key, name FROM Medication"))
    clean(table["text/plain"])
    assert "\x1b" not in table["text/html"] and "&lt;" not in HOSTILE
    clean(run_out(hostile_ip, "%uac alerts"))


def test_notebook_sql_timeout(hostile_ip: Any) -> None:
    query = "SELECT count(*) FROM range(100000000) a, range(100000000) b"
    result = hostile_ip.run_cell(f"%uac sql --timeout 0.5 {query}")
    assert "SQL time limit of 0.5 s" in str(result.error_in_exec)
    run(hostile_ip, "%config UacMagics.sql_timeout = 0.5")
    result = hostile_ip.run_cell(f"%uac sql {query}")
    assert "SQL time limit of 0.5 s" in str(result.error_in_exec)
    assert run(hostile_ip, "%uac sql --timeout 5 SELECT 42").rows == [(42,)]
