"""Outside attacks on issue 25 part 5 (settings from the environment) and the seams around it:
every variable through the command, the notebook and the Python API. Each case asserts what
SHOULD happen; real ``uac`` processes, real DuckDB files, a real IPython shell, the real openai
client against the local chat server. No wall-clock assertion: a timeout only catches a hang."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers.events import add
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

from uac_kernel.core import settings
from uac_kernel.core.errors import ModelError, QueryError, StoreError
from uac_kernel.model.client import ModelSettings
from uac_kernel.model.testing import ChatServer
from uac_kernel.sql.view import SqlView
from uac_kernel.workbench import Workbench

HANG = 300  # seconds: only a hang reaches this
NAMES = [s.name for s in settings.SETTINGS]
RUNAWAY = "SELECT count(*) FROM range(1000000000000) t(i) WHERE i * i % 7 = 3"
CONTROL = ("\x1b", "\x07", "\x9b", "\r")
SECRET = "s3cretPW"


def _env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in NAMES}
    return {**base, "UAC_LOCK_TIMEOUT": "2", **extra}


def uac(args: list[str], cwd: Path, **extra: str) -> tuple[int, str, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "uac_kernel.cli.main", *args],
        cwd=cwd,
        env=_env(**extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = proc.communicate(timeout=HANG)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"uac {args} hung with {extra}")
    return proc.returncode, out, err


def one_line(err: str, name: str | None = None) -> None:
    assert err.count("\n") == 1 and err.startswith("uac: error: "), err
    assert "Traceback" not in err, err
    assert not any(c in err for c in CONTROL), err
    if name is not None:
        assert err.startswith(f"uac: error: {name}="), err


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("seams") / "maya.duckdb"
    with Workbench(path, user="maya") as wb:
        wb.ingest([add("2025-03-01", "Trip", "tokyo", destination="Tokyo")])
    return path


@pytest.fixture(scope="module")
def fleet(store: Path) -> Path:
    root = store.parent / "fleet"
    code, _, err = uac(["export", str(store), str(root)], store.parent)
    assert code == 0, err
    return root


@pytest.fixture
def events(tmp_path: Path) -> Path:
    path = tmp_path / "ev.jsonl"
    path.write_text(json.dumps(add("2025-03-02", "Trip", "oslo", destination="Oslo")) + "\n")
    return path


def model_calls(db: Path) -> int:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT count(*) FROM model_calls").fetchone()[0]  # type: ignore[index]
    finally:
        con.close()


# -- spellings of numbers, through several commands -------------------------------------------

SPELLINGS = [
    ("UAC_SQL_TIMEOUT", "0x10", "sql"),
    ("UAC_SQL_TIMEOUT", "1_000", "sql"),
    ("UAC_SQL_TIMEOUT", "１２", "sql"),
    ("UAC_SQL_TIMEOUT", "Infinity", "fleet-sql"),
    ("UAC_SQL_TIMEOUT", "9" * 100_000, "sql"),
    ("UAC_SQL_TIMEOUT", "-0", "fleet-sql"),
    ("UAC_SQL_THREADS", "-0", "sql"),
    ("UAC_SQL_THREADS", "+0", "fleet-sql"),
    ("UAC_SQL_THREADS", "0x10", "sql"),
    ("UAC_SQL_THREADS", "1e3", "sql"),
    ("UAC_SQL_THREADS", "٤", "fleet-sql"),
    ("UAC_SQL_THREADS", "1025", "fleet-sql"),
    ("UAC_SQL_MEMORY_MB", "inf", "fleet-sql"),
    ("UAC_SQL_MEMORY_MB", "1e400", "sql"),
    ("UAC_SQL_MEMORY_MB", "9" * 100_000, "fleet-sql"),
    ("UAC_LOCK_TIMEOUT", "nan", "ingest"),
    ("UAC_LOCK_TIMEOUT", "-inf", "import"),
    ("UAC_LOCK_TIMEOUT", "\x1b]0;pwned\x07", "export"),
    ("UAC_LOCK_TIMEOUT", "5\x9b31m", "forget"),
    ("UAC_LOCK_TIMEOUT", "1\r2", "verify"),
    ("UAC_MODEL_DEADLINE", "inf", "ask"),
    ("UAC_OFFLINE", "enabled", "ask"),
    ("UAC_DB", "\x1b[2Jx.duckdb", "ingest"),
]


@pytest.mark.parametrize(("name", "value", "face"), SPELLINGS, ids=lambda v: repr(v)[:20])
def test_a_bad_spelling_is_one_escaped_line_and_writes_nothing(
    name: str, value: str, face: str, store: Path, fleet: Path, events: Path, tmp_path: Path
) -> None:
    before = store.read_bytes()
    target = tmp_path / "new.duckdb"
    out_dir = tmp_path / "out"
    db = [] if name == "UAC_DB" else ["--db", str(store)]
    faces = {
        "sql": [*db, "sql", "SELECT 1"],
        "fleet-sql": ["fleet", "sql", str(fleet), "SELECT 1"],
        "ingest": [*([] if name == "UAC_DB" else ["--db", str(target)]), "ingest", str(events)],
        "import": ["import", str(fleet), str(target)],
        "export": ["export", str(store), str(out_dir)],
        "forget": [*db, "forget", "--text", "Tokyo"],
        "verify": [*db, "verify"],
        "ask": [*db, "ask", "how many trips?"],
    }
    extra = {"UAC_MODEL": "stand-in", "UAC_OFFLINE": "1"} if face == "ask" else {}
    code, out, err = uac(faces[face], tmp_path, **{**extra, name: value})
    assert code == 1, (out, err)
    one_line(err, name)
    assert len(err) < 400  # a long value is shortened
    assert store.read_bytes() == before
    assert not target.exists() and not out_dir.exists()
    assert not list(tmp_path.glob("*.duckdb"))


def test_good_spellings_take_effect(store: Path, fleet: Path) -> None:
    q = "SELECT current_setting('threads') AS t, current_setting('memory_limit') AS m"
    env = {"UAC_SQL_THREADS": " 2\n", "UAC_SQL_MEMORY_MB": "+0100\t"}
    for args in (
        ["--db", str(store), "sql", q, "--json"],
        ["fleet", "sql", str(fleet), q, "--json"],
    ):
        code, out, err = uac(args, store.parent, **env)
        assert code == 0, err
        assert '"t": 2' in out.replace("'", '"') or '"t":2' in out, out
        assert "95.3 MiB" in out, out


# -- good values really bound what they say ---------------------------------------------------


@pytest.mark.parametrize("face", ["sql", "fleet-sql"])
def test_sql_timeout_from_the_environment_stops_a_runaway_query(
    face: str, store: Path, fleet: Path
) -> None:
    args = (
        ["--db", str(store), "sql", RUNAWAY]
        if face == "sql"
        else ["fleet", "sql", str(fleet), RUNAWAY]
    )
    code, out, err = uac(args, store.parent, UAC_SQL_TIMEOUT="1", UAC_SQL_THREADS="1")
    assert code == 1 and not out
    one_line(err)
    assert "time limit of 1 s" in err, err


@pytest.fixture
def holder(store: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the store read-write until it is killed."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time\n"
            f"c = duckdb.connect({str(store)!r})\n"
            "print('held', flush=True)\n"
            "time.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("value", ["1", " 0 ", "0.5"])
def test_lock_timeout_from_the_environment_bounds_the_wait(
    value: str, store: Path, events: Path, holder: subprocess.Popen[str]
) -> None:
    code, out, err = uac(
        ["--db", str(store), "--user", "maya", "ingest", str(events)],
        store.parent,
        UAC_LOCK_TIMEOUT=value,
    )
    assert code == 1 and not out
    one_line(err)
    assert f"still open after {float(value):g} s (UAC_LOCK_TIMEOUT)" in err, err
    assert f"process {holder.pid}" in err, err


# -- UAC_DB: paths that are not a store file --------------------------------------------------


def test_uac_db_a_directory_is_one_line(tmp_path: Path, events: Path) -> None:
    (tmp_path / "d.duckdb").mkdir()
    for args in (["eval", "1"], ["ingest", str(events)]):
        code, _, err = uac(args, tmp_path, UAC_DB="d.duckdb")
        assert code == 1
        one_line(err)
        assert "is a directory" in err


def test_uac_db_a_fifo_is_one_line_not_a_hang(tmp_path: Path, events: Path) -> None:
    os.mkfifo(tmp_path / "pipe.duckdb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "uac_kernel.cli.main", "eval", "1"],
        cwd=tmp_path,
        env=_env(UAC_DB="pipe.duckdb"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, err = proc.communicate(timeout=60)  # a store check reads 12 bytes: 60 s is a hang
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("uac eval with UAC_DB a FIFO hangs opening it (store._check_store_file)")
    assert proc.returncode == 1
    one_line(err)


@pytest.mark.parametrize("path", ["missing/dir/x.duckdb", "/proc/uac-seams.duckdb"])
def test_uac_db_in_a_missing_or_unwritable_place_is_not_called_damaged(
    path: str, tmp_path: Path, events: Path
) -> None:
    code, _, err = uac(["ingest", str(events)], tmp_path, UAC_DB=path)
    assert code == 1
    one_line(err)
    # the file is not damaged: there is no such directory, or it cannot be created there
    assert "damaged" not in err and "restore it from a copy" not in err, err


def test_uac_db_a_character_device_is_not_called_an_empty_file_to_delete(
    tmp_path: Path,
) -> None:
    code, _, err = uac(["eval", "1"], tmp_path, UAC_DB="/dev/null")
    assert code == 1
    one_line(err)
    assert "delete it" not in err, err  # never advise deleting /dev/null
    assert Path("/dev/null").exists()


def test_uac_db_memory_is_not_a_store_that_forgets_what_it_was_given(
    tmp_path: Path, events: Path
) -> None:
    # ':memory:' ingests, says "1 event appended" and exits 0: the events are gone at exit
    code, out, err = uac(["ingest", str(events)], tmp_path, UAC_DB=":memory:")
    assert code == 1, (out, err)
    one_line(err)


def test_uac_db_with_a_tilde_is_read_where_it_was_written(tmp_path: Path, events: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    code, out, err = uac(["ingest", str(events)], tmp_path, UAC_DB="~/x.duckdb", HOME=str(home))
    if code == 0:  # written: then it must be found again by the same setting
        code, out, err = uac(["eval", "1"], tmp_path, UAC_DB="~/x.duckdb", HOME=str(home))
        assert code == 0 and out.strip() == "1", err
    else:
        one_line(err)
        assert not list(home.iterdir()), "refused, yet a store was written under $HOME"


def test_uac_db_an_url_is_refused_without_installing_an_extension(
    tmp_path: Path, events: Path
) -> None:
    code, _, err = uac(["ingest", str(events)], tmp_path, UAC_DB="s3://bucket/x.duckdb")
    assert code == 1
    one_line(err)
    assert "install" not in err and "extension" not in err, err


# -- UAC_USER with hostile characters ---------------------------------------------------------


@pytest.mark.parametrize(
    "user", ["../../esc", "a'; DROP TABLE events; --", "maya\x7f", "*", " maya", "%"]
)
def test_a_hostile_user_reaches_no_other_user_and_no_outside_file(
    user: str, store: Path, tmp_path: Path, events: Path
) -> None:
    before = store.read_bytes()
    code, out, err = uac(
        ["--db", str(store), "eval", "len(user.all('Trip'))"], tmp_path, UAC_USER=user
    )
    assert code == 1 and not out
    one_line(err)
    assert store.read_bytes() == before
    # a store made for it exports under the fleet directory only
    db = tmp_path / "h.duckdb"
    code, _, err = uac(["--db", str(db), "ingest", str(events)], tmp_path, UAC_USER=user)
    if code != 0:
        one_line(err, "UAC_USER")
        return
    root = tmp_path / "deep" / "fleet"
    code, _, err = uac(["export", str(db), str(root)], tmp_path)
    assert code == 0, err
    outside = [p for p in tmp_path.rglob("*") if not p.is_relative_to(root)]
    assert {p.name for p in outside if p.is_file()} <= {"ev.jsonl", "h.duckdb", "h.duckdb.wal"}
    code, _, err = uac(["verify", str(root)], tmp_path)
    assert code == 0, err


# -- the model's variables --------------------------------------------------------------------


@pytest.mark.parametrize("value", ["gpt\nx", "gpt\u2028x", "gpt\x1b[31mx", "\x85"])
def test_uac_model_with_a_newline_is_one_line(value: str, store: Path) -> None:
    code, _, err = uac(
        ["--db", str(store), "ask", "how many trips?"], store.parent, UAC_MODEL=value
    )
    assert code == 1
    one_line(err, "UAC_MODEL")


def test_a_url_with_credentials_is_not_echoed_when_the_call_fails(
    store: Path, tmp_path: Path
) -> None:
    db = tmp_path / "c.duckdb"
    db.write_bytes(store.read_bytes())
    code, _, err = uac(
        ["--db", str(db), "ask", "how many trips?"],
        tmp_path,
        UAC_MODEL="stand-in",
        OPENAI_BASE_URL=f"http://bob:{SECRET}@127.0.0.1:9/v1",
        UAC_MODEL_DEADLINE="20",
    )
    assert code == 1
    one_line(err)
    assert SECRET not in err, err  # model.py: "... call to M at {base_url} failed"


def test_a_bad_url_with_credentials_is_refused_without_echoing_them(store: Path) -> None:
    code, _, err = uac(
        ["--db", str(store), "ask", "how many trips?"],
        store.parent,
        UAC_MODEL="stand-in",
        OPENAI_BASE_URL=f"http://bob:{SECRET}@127.0.0.1:9/v1\x1b",
    )
    assert code == 1
    one_line(err, "OPENAI_BASE_URL")
    assert SECRET not in err, err  # settings.Text._shown quotes the whole URL


def test_a_url_with_credentials_is_not_kept_in_the_store(store: Path, tmp_path: Path) -> None:
    db = tmp_path / "k.duckdb"
    db.write_bytes(store.read_bytes())
    answer = json.dumps({"expression": "len(user.all('Trip'))", "explanation": "count"})
    with ChatServer(lambda body: answer) as server:
        url = server.base_url.replace("http://", f"http://bob:{SECRET}@")
        code, out, err = uac(
            ["--db", str(db), "ask", "how many trips?"],
            tmp_path,
            UAC_MODEL="stand-in",
            OPENAI_BASE_URL=url,
        )
    assert code == 0, err
    assert SECRET not in out
    # the call record (model_calls.base_url) and its export hold no password
    assert SECRET.encode() not in db.read_bytes()
    root = tmp_path / "fleet"
    code, _, err = uac(["export", str(db), str(root)], tmp_path)
    assert code == 0, err
    for f in root.rglob("*"):
        if f.is_file():
            assert SECRET.encode() not in f.read_bytes(), f


@pytest.mark.parametrize("url", ["file:///etc/passwd", "javascript:alert(1)", "ftp://127.0.0.1:9/"])
def test_a_url_that_is_not_http_is_refused_before_any_call(
    url: str, store: Path, tmp_path: Path
) -> None:
    db = tmp_path / "u.duckdb"
    db.write_bytes(store.read_bytes())
    code, _, err = uac(
        ["--db", str(db), "ask", "how many trips?"],
        tmp_path,
        UAC_MODEL="stand-in",
        OPENAI_BASE_URL=url,
        UAC_MODEL_DEADLINE="20",
    )
    assert code == 1
    one_line(err, "OPENAI_BASE_URL")
    assert model_calls(db) == 0  # nothing written: no failed call recorded for it


def test_the_api_key_is_never_echoed_nor_stored(store: Path, tmp_path: Path) -> None:
    db = tmp_path / "a.duckdb"
    db.write_bytes(store.read_bytes())
    answer = json.dumps({"expression": "1", "explanation": "one"})
    with ChatServer(lambda body: answer) as server:
        code, out, err = uac(
            ["--db", str(db), "ask", "how many trips?"],
            tmp_path,
            UAC_MODEL="stand-in",
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_KEY=f"sk-{SECRET}",
        )
    assert code == 0, err
    assert SECRET not in out + err
    assert SECRET.encode() not in db.read_bytes()


# -- the Python API ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"threads": float("inf")},
        {"memory_mb": float("inf")},
        {"memory_mb": 1e400},
        {"threads": float("nan")},
        {"timeout": float("nan")},
        {"timeout": float("inf")},
        {"threads": True},
        {"memory_mb": 0.5},
    ],
    ids=repr,
)
def test_sqlview_bounds_are_query_errors(kwargs: dict[str, Any]) -> None:
    # int(inf) raises before DuckDB sees a thread count: no call here reaches DuckDB past 1024
    with pytest.raises(QueryError):
        SqlView(**kwargs).con.close()  # memory_mb=0.5 is taken as SET memory_limit = '0MB'


@pytest.mark.parametrize("timeout", [float("inf"), float("nan"), -0.0, 1e400, True, "5", 86401])
def test_wb_sql_timeout_is_checked(timeout: Any, store: Path) -> None:
    with Workbench(store, user="maya", read_only=True) as wb, pytest.raises(QueryError):
        wb.sql("SELECT 1", timeout=timeout)


def test_a_bad_environment_value_in_the_python_api_is_its_error(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UAC_LOCK_TIMEOUT", "nan")
    with pytest.raises(StoreError, match=r"^UAC_LOCK_TIMEOUT='nan'"):
        Workbench(store, user="maya", read_only=True)
    monkeypatch.delenv("UAC_LOCK_TIMEOUT")
    monkeypatch.setenv("UAC_SQL_THREADS", "\x1b[2J")
    with (
        Workbench(store, user="maya", read_only=True) as wb,
        pytest.raises(QueryError, match=r"^UAC_SQL_THREADS='\\x1b\[2J'"),
    ):
        wb.sql("SELECT 1")


@pytest.mark.parametrize("deadline", [float("nan"), float("inf"), -1.0, 0.0])
def test_model_settings_refuse_a_deadline_that_cannot_bound_a_call(deadline: float) -> None:
    # UAC_MODEL_DEADLINE=nan is refused; the same value as an argument must not slip through
    with pytest.raises((ModelError, ValueError)):
        ModelSettings.resolve(model="stand-in", deadline=deadline)


# -- in a notebook ----------------------------------------------------------------------------


@pytest.fixture
def bare_ip(kernel_shell: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Unlike conftest's ``ip``: uac loaded with no store or user set and none of uac's
    settings in the environment (but a 2 s lock wait), in ``tmp_path``; closed after."""
    monkeypatch.chdir(tmp_path)
    for name in NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("UAC_LOCK_TIMEOUT", "2")
    shell = kernel_shell
    shell.reset(new_session=False)
    shell.config.pop("UacMagics", None)
    shell.run_cell("%unload_ext uac")
    assert shell.run_cell("%load_ext uac").error_in_exec is None
    yield shell
    shell.run_cell("%uac close")
    shell.run_cell("%unload_ext uac")


def usage_error(ip: Any, line: str) -> str:
    with capture_output() as cap:
        result = ip.run_cell(line)
    assert isinstance(result.error_in_exec, UsageError), (line, result.error_in_exec)
    assert "Traceback" not in cap.stderr
    message = str(result.error_in_exec)
    assert "\n" not in message and not any(c in message for c in CONTROL), message
    return message


def test_notebook_sql_timeout_from_the_environment_stops_a_runaway_query(
    bare_ip: Any, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert bare_ip.run_cell(f"%uac open {store} --user maya --read-only").error_in_exec is None
    monkeypatch.setenv("UAC_SQL_TIMEOUT", "1")
    monkeypatch.setenv("UAC_SQL_THREADS", "1")
    # docs/cli.md: the variables are "the command's and the notebook's alike"; the magic passes its
    # own sql_timeout (30.0) whether or not %config set it, so the variable is never read
    message = usage_error(bare_ip, f"%uac sql {RUNAWAY}")
    assert "time limit of 1 s" in message, message


def test_notebook_bad_sql_timeout_is_a_usage_error(
    bare_ip: Any, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert bare_ip.run_cell(f"%uac open {store} --user maya --read-only").error_in_exec is None
    monkeypatch.setenv("UAC_SQL_TIMEOUT", "nan")
    message = usage_error(bare_ip, "%uac sql SELECT 1")
    assert message.startswith("UAC_SQL_TIMEOUT="), message


def test_notebook_escape_in_a_value_is_escaped(
    bare_ip: Any, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert bare_ip.run_cell(f"%uac open {store} --user maya --read-only").error_in_exec is None
    monkeypatch.setenv("UAC_SQL_THREADS", "\x1b]0;pwned\x07")
    message = usage_error(bare_ip, "%uac sql SELECT 1")
    assert message.startswith("UAC_SQL_THREADS="), message


def test_notebook_lock_timeout_bounds_the_wait(
    bare_ip: Any, store: Path, holder: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UAC_LOCK_TIMEOUT", "1")
    message = usage_error(bare_ip, f"%uac open {store} --user maya")
    assert "still open after 1 s (UAC_LOCK_TIMEOUT)" in message, message


def test_notebook_url_with_credentials_is_not_echoed(
    bare_ip: Any, store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "n.duckdb"
    db.write_bytes(store.read_bytes())
    assert bare_ip.run_cell(f"%uac open {db} --user maya").error_in_exec is None
    monkeypatch.setenv("UAC_MODEL", "stand-in")
    monkeypatch.setenv("UAC_MODEL_DEADLINE", "20")
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://bob:{SECRET}@127.0.0.1:9/v1")
    message = usage_error(bare_ip, "%uac ask how many trips?")
    assert SECRET not in message, message


@pytest.mark.parametrize("kind", ["file", "fifo", "blank-ish"])
def test_notebook_cache_dir_that_is_not_a_directory(
    kind: str, bare_ip: Any, store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cache"
    if kind == "file":
        path.write_text("not a directory")
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        path = Path("\x1b[2J")
    assert bare_ip.run_cell(f"%uac open {store} --user maya --read-only").error_in_exec is None
    monkeypatch.setenv("UAC_CACHE_DIR", str(path))
    with capture_output() as cap:
        result = bare_ip.run_cell("%uac chart events")
    # either the chart is drawn (the bundle is rebuildable) or one line says why
    if result.error_in_exec is not None:
        assert isinstance(result.error_in_exec, UsageError), repr(result.error_in_exec)
        message = str(result.error_in_exec)
        assert "\n" not in message and not any(c in message for c in CONTROL), message
    assert "Traceback" not in cap.stderr
    if kind == "file":
        assert path.read_text() == "not a directory"  # never overwritten
