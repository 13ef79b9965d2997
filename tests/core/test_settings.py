"""Every environment variable goes through ``uac_kernel.core.settings``: a bad value is one line naming
the variable, on the command line (a real ``uac`` process) and in a notebook (a real IPython
shell); good values keep their meaning; docs/cli.md's table is the module's."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.events import add
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from uac_kernel.core import settings
from uac_kernel.core.errors import FleetError, QueryError, StoreError
from uac_kernel.workbench import Workbench

CLI_DOC = (Path(__file__).parents[2] / "docs" / "cli.md").read_text()
NUMBERS_BAD = ["inf", "-inf", "nan", "1e400", "-1", "abc", "١٢", " ", "\t", "9" * 5000, "1_0"]
TEXT_BAD = [" ", "\x1b[2J", "a\nb", "\u202ename"]
SWITCH_BAD = ["maybe", "2", " ", "١"]
# What each variable is bad at, beyond its kind's list: 0 is not a timeout, a memory, a thread
# count or a deadline; a huge whole number is past every bound.
BAD: dict[str, list[str]] = {
    "UAC_LOCK_TIMEOUT": [*NUMBERS_BAD, "86401"],
    "UAC_SQL_TIMEOUT": [*NUMBERS_BAD, "0", "86401"],
    "UAC_SQL_MEMORY_MB": [*NUMBERS_BAD, "0", "0.5", "64.0", "1e3", "16777217"],
    "UAC_SQL_THREADS": [*NUMBERS_BAD, "0", "-0", "1.5", "1025", "1000000000"],
    "UAC_MODEL_DEADLINE": [*NUMBERS_BAD, "0", "0.0", "86401"],
    "UAC_OFFLINE": SWITCH_BAD,
    "UAC_DB": TEXT_BAD,
    "UAC_USER": [" ", "\t"],  # any other id names a user, as --user does (shown escaped)
    "UAC_MODEL": TEXT_BAD,
    "OPENAI_BASE_URL": TEXT_BAD,
    "OPENAI_API_KEY": TEXT_BAD,
    "UAC_CACHE_DIR": TEXT_BAD,
    "RAY_ADDRESS": TEXT_BAD,
}
# A command that reads each variable (the model's variables with a model named, so the value
# under test is read). UAC_CACHE_DIR and RAY_ADDRESS are read by no command that runs without a
# chart in a notebook or a Ray cluster: the notebook test and the module test cover them.
MODEL = {"UAC_MODEL": "stand-in", "UAC_OFFLINE": "1"}
COMMANDS: dict[str, tuple[list[str], dict[str, str]]] = {
    "UAC_DB": (["eval", "1"], {}),
    "UAC_USER": (["eval", "1"], {}),
    "UAC_LOCK_TIMEOUT": (["eval", "1"], {}),
    "UAC_SQL_TIMEOUT": (["sql", "SELECT 1"], {}),
    "UAC_SQL_MEMORY_MB": (["sql", "SELECT 1"], {}),
    "UAC_SQL_THREADS": (["sql", "SELECT 1"], {}),
    "UAC_MODEL": (["ask", "how many trips?"], {"UAC_OFFLINE": "1"}),
    # a value taken for "off" would call this closed port, never a real endpoint
    "UAC_OFFLINE": (
        ["ask", "how many trips?"],
        {"UAC_MODEL": "stand-in", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"},
    ),
    "UAC_MODEL_DEADLINE": (["ask", "how many trips?"], MODEL),
    "OPENAI_BASE_URL": (["ask", "how many trips?"], MODEL),
    "OPENAI_API_KEY": (["ask", "how many trips?"], MODEL),
}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("settings") / "maya.duckdb"
    with Workbench(path, user="maya") as wb:
        wb.ingest([add("2025-03-01", "Trip", "tokyo", destination="Tokyo")])
    return path


def test_every_variable_is_in_the_table_and_the_cli_doc() -> None:
    assert set(BAD) == {s.name for s in settings.SETTINGS}
    assert settings.table() in CLI_DOC


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_bad_value_stops_the_command_with_one_line(name: str, store: Path) -> None:
    args, extra = COMMANDS[name]
    where = [] if name == "UAC_DB" else ["--db", str(store)]
    who = [] if name in ("UAC_DB", "UAC_USER") else ["--user", "maya"]
    base = {k: v for k, v in os.environ.items() if k not in BAD}
    # all the values at once: one process each, none waiting for another
    runs = [
        (
            value,
            subprocess.Popen(
                [sys.executable, "-m", "uac_kernel.cli.main", *where, *who, *args],
                cwd=store.parent,
                env={**base, **extra, name: value},
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            ),
        )
        for value in BAD[name]
    ]
    for value, proc in runs:
        out, err = proc.communicate(timeout=300)  # only a hang reaches this
        assert proc.returncode == 1, (value, out, err)
        assert err.startswith(f"uac: error: {name}=") and err.count("\n") == 1, (value, err)
        assert "Traceback" not in err and not out, (value, err)
        if name == "OPENAI_API_KEY":
            assert "characters, not shown" in err, err  # a key is never echoed


@pytest.mark.parametrize(
    ("value", "line"),
    [
        ("nan", "UAC_LOCK_TIMEOUT='nan' is not a number of seconds: set it to a number of "
         "seconds ≥ 0, at most 86400, e.g. 10, or unset it"),
        ("-1", "UAC_LOCK_TIMEOUT='-1' is negative: set it to a number of seconds ≥ 0, at most "
         "86400, e.g. 10, or unset it"),
        ("1e400", "UAC_LOCK_TIMEOUT='1e400' is more than 86400 seconds (a day): set it to a "
         "number of seconds ≥ 0, at most 86400, e.g. 10, or unset it"),
        ("\x1b[2J", r"UAC_LOCK_TIMEOUT='\x1b[2J' is not a number of seconds: set it to a number "
         "of seconds ≥ 0, at most 86400, e.g. 10, or unset it"),
    ],
)  # fmt: skip
def test_the_line_says_what_is_wrong_and_what_to_set(
    value: str, line: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UAC_LOCK_TIMEOUT", value)
    with pytest.raises(StoreError) as caught:
        settings.LOCK_TIMEOUT.get(10.0)
    assert str(caught.value) == line


def test_a_long_value_is_quoted_shortened(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UAC_SQL_THREADS", "9" * 100_000)
    with pytest.raises(QueryError) as caught:
        settings.SQL_THREADS.get(4)
    assert "is more than 1,024" in str(caught.value) and len(str(caught.value)) < 200


@pytest.mark.parametrize("name", ["UAC_CACHE_DIR", "RAY_ADDRESS"])
def test_the_variables_no_command_reads_are_parsed_too(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    setting = next(s for s in settings.SETTINGS if s.name == name)
    assert isinstance(setting, settings.Text)
    for value in BAD[name]:
        monkeypatch.setenv(name, value)
        with pytest.raises((QueryError, FleetError), match=f"^{name}="):
            setting.get()


def test_good_values_keep_their_meaning(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in BAD:
        monkeypatch.setenv(name, "")  # empty is unset
    assert settings.LOCK_TIMEOUT.get(10.0) == 10.0 and settings.SQL_THREADS.get(3) == 3
    assert settings.OFFLINE.get() is False and settings.DB.get() is None
    for text, seconds in [("0", 0.0), (" 0.5 ", 0.5), ("1e2", 100.0), ("86400", 86400.0)]:
        monkeypatch.setenv("UAC_LOCK_TIMEOUT", text)
        assert settings.LOCK_TIMEOUT.get(10.0) == seconds
    for text, count in [("1", 1), ("+8", 8), ("007", 7), ("16777216", 2**24)]:
        monkeypatch.setenv("UAC_SQL_MEMORY_MB", text)
        assert settings.SQL_MEMORY_MB.get(64) == count
    for text, on in [("1", True), ("TRUE", True), ("on", True), ("0", False), ("no", False)]:
        monkeypatch.setenv("UAC_OFFLINE", text)
        assert settings.OFFLINE.get() is on
    monkeypatch.setenv("UAC_USER", "Zoë Müller")
    assert settings.USER.get() == "Zoë Müller"


# -- in a notebook ------------------------------------------------------------------------------

# A %uac line that reads each variable, with the store and user named where they are not under
# test (UAC_SQL_TIMEOUT unless %config set UacMagics.sql_timeout).
NOTEBOOK = {
    "UAC_DB": "%uac open",
    "UAC_USER": "%uac open {db}",
    "UAC_LOCK_TIMEOUT": "%uac open {db} --user maya",
    "UAC_SQL_TIMEOUT": "%uac sql SELECT 1",
    "UAC_SQL_MEMORY_MB": "%uac sql SELECT 1",
    "UAC_SQL_THREADS": "%uac sql SELECT 1",
    "UAC_MODEL": "%uac ask how many trips?",
    "UAC_OFFLINE": "%uac ask how many trips?",
    "UAC_MODEL_DEADLINE": "%uac ask how many trips?",
    "OPENAI_BASE_URL": "%uac ask how many trips?",
    "OPENAI_API_KEY": "%uac ask how many trips?",
    "UAC_CACHE_DIR": "%uac chart events",
}


@pytest.fixture
def unloaded_ip(
    kernel_shell: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Any]:
    """Unlike conftest's ``ip``: the shell in ``tmp_path`` with uac not loaded and none of the
    test process's settings (each test sets its own, then loads uac)."""
    monkeypatch.chdir(tmp_path)  # a store a bad UAC_DB named before the fix is made here
    for name in BAD:
        monkeypatch.delenv(name, raising=False)
    shell = kernel_shell
    shell.reset(new_session=False)
    shell.config.pop("UacMagics", None)
    yield shell
    shell.run_cell("%unload_ext uac")


@pytest.mark.parametrize("name", sorted(NOTEBOOK))
def test_a_bad_value_is_a_usage_error_in_a_notebook(
    name: str, unloaded_ip: Any, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    line = NOTEBOOK[name].format(db=store)
    for value in BAD[name][:4]:
        unloaded_ip.run_cell("%unload_ext uac")
        monkeypatch.setenv("UAC_MODEL", "stand-in")
        monkeypatch.setenv("UAC_OFFLINE", "1")
        monkeypatch.setenv(name, value)
        assert unloaded_ip.run_cell("%load_ext uac").error_in_exec is None
        if not line.startswith("%uac open"):
            monkeypatch.delenv(name)
            assert unloaded_ip.run_cell(f"%uac open {store} --user maya").error_in_exec is None
            monkeypatch.setenv(name, value)
        with capture_output() as cap:
            result = unloaded_ip.run_cell(line)
        assert isinstance(result.error_in_exec, UsageError), (value, result.error_in_exec)
        message = str(result.error_in_exec)
        assert message.startswith(f"{name}=") and "\n" not in message, message
        assert "Traceback" not in cap.stderr
