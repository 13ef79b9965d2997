"""The `uac` command through its `main(argv)`, in this process, against real store files (as a
process of its own where that is what a test checks: tests/cli/test_startup.py, the kill -9 and
race cases of the store and snapshot tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.checkpoints import import_clean
from helpers.cli import one_line_error, uac_here

from uac_kernel.cli.main import main
from uac_kernel.workbench import Workbench

ROOT = Path(__file__).resolve().parents[2]
# What `uac demo` writes into the directory it runs in, and nothing else.
DEMO_FILES = {"uac-demo.duckdb", "uac-demo.jsonl", "uac-demo.py"}


@pytest.fixture
def events(tmp_path: Path) -> Path:
    lines = [
        {
            "kind": "utterance",
            "ts": "2025-03-02T10:15:00",
            "speaker": "user",
            "text": "Back from Tokyo!",
            "source": "chat-42#3",
        },
        {
            "kind": "fact",
            "ts": "2025-03-02T10:15:00",
            "op": "add",
            "type": "Trip",
            "key": "tokyo-2025",
            "fields": {
                "destination": "Tokyo",
                "country": "Japan",
                "start": "2025-02-20",
                "international": True,
            },
        },
        {
            "kind": "fact",
            "ts": "2025-04-01T09:00:00",
            "op": "update",
            "type": "Trip",
            "key": "tokyo-2025",
            "fields": {"end": "2025-03-01"},
        },
        {
            "kind": "fact",
            "ts": "2025-04-02T09:00:00",
            "op": "add",
            "type": "Allergy",
            "key": "pen",
            "fields": {"substance": "penicillin", "severity": "severe"},
        },
        {
            "kind": "fact",
            "ts": "2025-04-03T09:00:00",
            "op": "add",
            "type": "Medication",
            "key": "amox",
            "fields": {"name": "Amoxicillin 500 mg", "active": True},
        },
    ]
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def test_full_cli_round_trip(tmp_path: Path, events: Path) -> None:
    env = {"UAC_DB": str(tmp_path / "store.duckdb"), "UAC_USER": "maya"}
    out = uac_here("ingest", str(events), cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert "5 events appended" in out.stdout and "raised [critical]" in out.stdout
    assert (
        "0 events appended, 5 already in the log"
        in uac_here("ingest", str(events), cwd=tmp_path, env=env).stdout
    )
    assert "checkpoint 1: 3 records" in uac_here("checkpoint", cwd=tmp_path, env=env).stdout
    code = uac_here("code", cwd=tmp_path, env=env).stdout
    assert "class Trip(Record):" in code and "key='tokyo-2025'," in code
    result = uac_here(
        "eval", "[t.destination for t in user.all(Trip) if t.international]", cwd=tmp_path, env=env
    )
    assert json.loads(result.stdout) == ["Tokyo"]
    assert (
        json.loads(
            uac_here("eval", "user.get(Trip, 'tokyo-2025').end", cwd=tmp_path, env=env).stdout
        )
        == "2025-03-01"
    )
    sql = uac_here("sql", "SELECT destination FROM trip", "--json", cwd=tmp_path, env=env)
    assert json.loads(sql.stdout) == [{"destination": "Tokyo"}]
    alerts = json.loads(uac_here("alerts", "--json", cwd=tmp_path, env=env).stdout)
    assert [a["rule"] for a in alerts] == ["drug_allergy_cross_reactivity"]
    log = uac_here("log", "--kind", "fact", cwd=tmp_path, env=env).stdout.splitlines()
    assert len(log) == 5 and log[0].startswith("seq\tts\tkind") and "\tfact\t" in log[1]
    assert "hash chains intact" in uac_here("verify", cwd=tmp_path, env=env).stdout
    # --db and --user on the command line win over the environment
    other = uac_here(
        "eval",
        "len(user.types())",
        "--db",
        str(tmp_path / "store.duckdb"),
        "--user",
        "nobody",
        cwd=tmp_path,
        env=env,
    )
    assert other.returncode == 1
    assert f"user 'nobody' has no events in {tmp_path / 'store.duckdb'}" in other.stderr


def test_diff_via_cli(tmp_path: Path, events: Path) -> None:
    env = {"UAC_DB": str(tmp_path / "s.duckdb")}
    lines = events.read_text().splitlines()
    first = tmp_path / "a.jsonl"
    first.write_text("\n".join(lines[:2]) + "\n")
    uac_here("ingest", str(first), cwd=tmp_path, env=env)
    uac_here("checkpoint", cwd=tmp_path, env=env)
    uac_here("ingest", str(events), cwd=tmp_path, env=env)
    uac_here("checkpoint", cwd=tmp_path, env=env)
    out = uac_here("diff", "1", "2", cwd=tmp_path, env=env).stdout
    assert "2 added, 1 changed, 0 retracted" in out and "~ Trip tokyo-2025" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("ingest", "missing.jsonl"), "missing.jsonl: cannot read the file"),
        (("eval", "__import__('os')"), "not allowed"),
        (("eval", "open('/etc/passwd').read()"), "open"),
        (("code", "--version", "9"), "has no checkpoint 9"),
        (("sql", "SELECT * FROM nowhere"), "SQL failed"),
        (
            ("log", "--kind", "alerts"),
            "no event kind 'alerts'. Did you mean 'alert'? Kinds: alert,",
        ),
        (("history", "Trp", "tokyo-2025"), "no record type 'Trp'. Did you mean 'Trip'?"),
        (
            ("eval", "len([t for t in user.all(Trip) if t.internatonal])"),
            "uac: error: Trip has no field 'internatonal'. Did you mean 'international'?\n",
        ),
        (("demo", "--user", "bob"), "the demo's user is 'maya'"),
        (
            ("eval", "len(user.all(Trips))"),
            "not defined in the query namespace; did you mean 'Trip'?",
        ),
        (("eval", "len(user.all('Trips'))"), "no record type 'Trips'. Did you mean 'Trip'?"),
        (
            ("eval", "[t for t in user.all(Trip) if t.start >= '2025-01-01']"),
            "'datetime.date' and 'str'; compare with a date, not text: date(",
        ),
        (("sql", "SELECT destnation FROM Trip"), 'did you mean "destination"?\n'),
        (("alert",), "unknown command 'alert'; did you mean 'alerts'? See"),
    ],
)
def test_errors_are_one_line_and_exit_non_zero(
    tmp_path: Path, events: Path, args: tuple[str, ...], message: str
) -> None:
    env = {"UAC_DB": str(tmp_path / "s.duckdb")}
    uac_here("ingest", str(events), cwd=tmp_path, env=env)
    out = uac_here(*args, cwd=tmp_path, env=env)
    assert out.returncode == 1
    assert (
        out.stderr.count("\n") == 1
        and out.stderr.startswith("uac: error: ")
        and message in out.stderr
    ), out.stderr


def test_bad_line_names_file_line_and_field(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"kind": "fact", "ts": "2025-01-01", "op": "add", "type": "Trip", "key": "t", "fields": {"nights": 2}}\n'
        '{"kind": "fact", "ts": "2025-01-02", "op": "add", "type": "Trip", "key": "u", "fields": {"nights": "two"}}\n'
    )
    out = uac_here("ingest", str(bad), "--db", str(tmp_path / "s.duckdb"), cwd=tmp_path)
    assert out.returncode == 1
    assert f"{bad}:2: field 'fields.nights': expected a whole number" in out.stderr
    assert (
        "no store" in uac_here("log", "--db", str(tmp_path / "s.duckdb"), cwd=tmp_path).stderr
        or uac_here("log", "--db", str(tmp_path / "s.duckdb"), cwd=tmp_path).stdout == ""
    )


def test_verify_fails_on_tampering(tmp_path: Path, events: Path) -> None:
    import duckdb

    db = tmp_path / "s.duckdb"
    uac_here("ingest", str(events), "--db", str(db), cwd=tmp_path)
    con = duckdb.connect(str(db))
    con.execute("UPDATE events SET ts = ts + INTERVAL 1 DAY WHERE seq = 2")
    con.close()
    out = uac_here("verify", "--db", str(db), cwd=tmp_path)
    assert out.returncode == 1 and "failed at event 2: user 'me': event 2 was changed" in out.stderr


def test_demo_runs_offline(tmp_path: Path) -> None:
    out = uac_here("demo", cwd=tmp_path, env={"OPENAI_API_KEY": "", "NO_NETWORK": "1"})
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "1023 events" in text and "Transaction" in text
    assert "answer: " in text and "penicillin" in text and "Alerts standing" in text
    assert {p.name for p in tmp_path.iterdir()} == DEMO_FILES
    code = (tmp_path / "uac-demo.py").read_text()
    assert (
        code == uac_here("code", "--db", "uac-demo.duckdb", "--user", "maya", cwd=tmp_path).stdout
    )
    # the checkpoint runs as Python in a clean interpreter, and holds every current record
    (imported,) = import_clean([tmp_path / "uac-demo.py"], tmp_path)
    count = sum(len(t["records"]) for t in imported["types"].values())
    with Workbench(tmp_path / "uac-demo.duckdb", user="maya", read_only=True) as wb:
        assert count == sum(len(ts.current) for ts in wb.state.types.values()) > 800
    again = uac_here("demo", cwd=tmp_path)  # a second run rebuilds the demo store from scratch
    assert again.returncode == 0 and "1023 events appended" in again.stdout


def test_the_demos_questions_replay_offline_with_no_model_named(tmp_path: Path) -> None:
    from uac_kernel.demo.chat import DEMO_QUESTIONS_ASKED

    assert uac_here("demo", cwd=tmp_path).returncode == 0
    question, expression, _ = DEMO_QUESTIONS_ASKED[0]
    # No --user either: the demo store has one user, maya.
    env = {"UAC_OFFLINE": "1", "UAC_MODEL": "", "OPENAI_BASE_URL": "", "UAC_USER": ""}
    ask = uac_here("ask", question, "--db", "uac-demo.duckdb", cwd=tmp_path, env=env)
    assert ask.returncode == 0, ask.stderr
    assert f"  code: {expression}" in ask.stdout
    value = uac_here("eval", expression, "--db", "uac-demo.duckdb", cwd=tmp_path, env=env).stdout
    assert ask.stdout.splitlines()[0] == value.strip()
    # a question the record never saw is still refused, naming the model it replayed
    missing = uac_here("ask", "Never asked?", "--db", "uac-demo.duckdb", cwd=tmp_path, env=env)
    assert missing.returncode == 1 and "to model uac-demo-reference" in missing.stderr


def test_demo_writes_beside_the_store_it_was_given(tmp_path: Path) -> None:
    out = uac_here("demo", "--db", "out/demo.duckdb", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*"))
    assert written == ["out", "out/demo.duckdb", "out/demo.jsonl", "out/demo.py"]


def test_a_checkout_ignores_what_the_demo_writes(tmp_path: Path) -> None:
    """`./scripts/demo` then `./scripts/test`: the demo's files in the project root are neither
    the linter's business nor `git status`'s, in a clone and in a checkout without git."""
    git = subprocess.run(
        ["git", "-C", str(ROOT), "check-ignore", "--no-index", *sorted(DEMO_FILES)],
        capture_output=True,
        text=True,
        check=False,
    )
    if git.returncode == 128:
        pytest.skip(f"{ROOT} is not a git checkout: {git.stderr.strip()}")
    assert set(git.stdout.split()) == DEMO_FILES, "the demo's files must be in .gitignore"

    (tmp_path / "pyproject.toml").write_bytes((ROOT / "pyproject.toml").read_bytes())
    (tmp_path / "uac-demo.py").write_text("import os\nx  =  [ 1 ]\n")  # unformatted, unused import
    (tmp_path / "uac-demo.jsonl").write_text("{}\n")
    for check in (["check", "."], ["format", "--check", "."]):
        done = subprocess.run(
            [sys.executable, "-m", "ruff", *check, "--no-cache"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, f"ruff {' '.join(check)} read the demo's files:\n{done.stdout}"


def test_extract_ask_and_calls_via_cli(tmp_path: Path) -> None:
    from helpers.extraction import TURNS, fake_model

    from uac_kernel.model.testing import ChatServer

    turns = tmp_path / "turns.jsonl"
    turns.write_text("".join(json.dumps(t) + "\n" for t in TURNS))
    with ChatServer(fake_model) as server:
        env = {
            "UAC_DB": str(tmp_path / "s.duckdb"),
            "UAC_USER": "maya",
            "UAC_MODEL": "stand-in",
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_KEY": "",
        }
        assert uac_here("ingest", str(turns), cwd=tmp_path, env=env).returncode == 0
        out = uac_here("extract", cwd=tmp_path, env=env)
        assert out.returncode == 0, out.stderr
        assert "3 fact operations" in out.stdout and "raised [critical]" in out.stdout
        ask = uac_here("ask", "How many trips did I book?", cwd=tmp_path, env=env)
        assert ask.returncode == 0, ask.stderr
        assert ask.stdout.splitlines()[0] == "1" and "code: len(user.all(Trip))" in ask.stdout
        assert "[chat-2#1] user: Booked Lisbon" in ask.stdout
        calls = uac_here("calls", cwd=tmp_path, env=env).stdout
        assert "extraction\t1\t0\t" in calls and "questions\t1\t0\t" in calls
    # the server is gone: offline, the same question is answered from the record
    offline = uac_here("ask", "How many trips did I book?", "--offline", cwd=tmp_path, env=env)
    assert offline.returncode == 0 and offline.stdout.splitlines()[0] == "1"
    # with no model named, offline replay uses the model the store's recorded calls used
    unnamed = {**env, "UAC_MODEL": "", "UAC_USER": ""}
    offline = uac_here("ask", "How many trips did I book?", "--offline", cwd=tmp_path, env=unnamed)
    assert offline.returncode == 0, offline.stderr
    assert offline.stdout.splitlines()[0] == "1"
    missing = uac_here("ask", "Never asked before?", "--offline", cwd=tmp_path, env=env)
    assert missing.returncode == 1 and "no recorded answer" in missing.stderr


READS = [
    ("eval", "len(user.all(Trip))"),
    ("sql", "SELECT * FROM Trip"),
    ("alerts",),
    ("code",),
    ("checkpoint",),
    ("checkpoints",),
    ("log",),
    ("history", "Trip", "tokyo-2025"),
    ("state",),
    ("diff", "1", "1"),
    ("calls",),
    ("extract", "--offline"),
    ("ask", "How many trips?", "--offline"),
]


def test_a_user_with_no_events_is_named_with_the_users_here(tmp_path: Path, events: Path) -> None:
    db = tmp_path / "s.duckdb"
    assert (
        uac_here("ingest", str(events), "--db", str(db), "--user", "maya", cwd=tmp_path).returncode
        == 0
    )
    before = db.read_bytes()
    for args in READS:
        out = uac_here(*args, "--db", str(db), "--user", "may", cwd=tmp_path)
        assert f"user 'may' has no events in {db}; users here: maya" in one_line_error(out), args
    assert db.read_bytes() == before, "a refused read wrote nothing"
    # one user and no --user: that user
    assert uac_here("eval", "len(user.all(Trip))", "--db", str(db), cwd=tmp_path).stdout == "1\n"
    # ingesting under a new name is how a user is made
    made = uac_here("ingest", str(events), "--db", str(db), "--user", "bob", cwd=tmp_path)
    assert made.returncode == 0 and "5 events appended" in made.stdout
    # every event counts (schema and alert events too), then the facts and utterances among them
    assert uac_here("users", "--db", str(db), cwd=tmp_path).stdout == (
        "user\tevents\tfacts\tutterances\nbob\t18\t4\t1\nmaya\t18\t4\t1\n"
    )
    # two users and no --user: name one
    out = uac_here("eval", "1", "--db", str(db), cwd=tmp_path)
    assert f"{db} holds 2 users (bob, maya); name one with --user" in one_line_error(out)
    # ... which the store-wide commands do not need
    assert uac_here("verify", "--db", str(db), cwd=tmp_path).returncode == 0
    assert uac_here("calls", "--all-users", "--db", str(db), cwd=tmp_path).returncode == 0


def test_reading_a_missing_store_creates_none(tmp_path: Path) -> None:
    for args in READS:
        out = uac_here(*args, "--db", "new.duckdb", cwd=tmp_path)
        assert "no store at new.duckdb" in one_line_error(out), args
    # right after `uac demo`, the default store is not there but the demo's is: say so
    (tmp_path / "uac-demo.duckdb").write_bytes(b"")
    out = uac_here("eval", "1", cwd=tmp_path, env={"UAC_DB": ""})
    assert "the demo's store is here: pass --db uac-demo.duckdb" in one_line_error(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["uac-demo.duckdb"]


def test_ingest_creates_no_store_from_a_file_it_cannot_read(tmp_path: Path) -> None:
    (tmp_path / "folder").mkdir()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "fact", "ts": "2025-01-01", "op": "nope"}\n')
    for name, message in (
        ("missing.jsonl", "missing.jsonl: cannot read the file: No such file or directory"),
        ("folder", "folder: cannot read the file: Is a directory"),
        (str(bad), f"{bad}:1:"),
    ):
        out = uac_here("ingest", name, "--db", "new.duckdb", cwd=tmp_path)
        assert message in one_line_error(out)
        assert not (tmp_path / "new.duckdb").exists(), name


def not_a_store(kind: str, tmp_path: Path, events: Path) -> Path:
    """A path given as --db that cannot be a store."""
    if kind == "events file":
        return events
    path = tmp_path / f"{kind}.duckdb"
    if kind == "directory":
        path.mkdir()
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "garbage":
        path.write_bytes(bytes(range(256)) * 40)
    else:  # the first 5,000 bytes of a real store
        real = tmp_path / "real.duckdb"
        assert uac_here("ingest", str(events), "--db", str(real), cwd=tmp_path).returncode == 0
        path.write_bytes(real.read_bytes()[:5000])
    return path


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("events file", "is not a uac store (not a DuckDB database file); it looks like JSON"),
        ("directory", "is a directory, not a store"),
        ("empty", "is an empty file, not a store"),
        ("garbage", "is not a uac store (not a DuckDB database file)"),
        ("truncated", "it is damaged or not a DuckDB database"),
    ],
)
def test_a_db_that_is_not_a_store_is_one_line(
    tmp_path: Path, events: Path, kind: str, message: str
) -> None:
    path = not_a_store(kind, tmp_path, events)
    for args in (("eval", "1"), ("ingest", str(events)), ("users",), ("verify",)):
        err = one_line_error(uac_here(*args, "--db", str(path), cwd=tmp_path))
        assert str(path) in err and message in err, (args, err)


def test_another_programs_duckdb_is_refused_and_left_alone(tmp_path: Path, events: Path) -> None:
    import duckdb

    path = tmp_path / "theirs.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE orders (id INTEGER)")
    con.close()
    before = path.read_bytes()
    for args in (("ingest", str(events)), ("eval", "1")):
        err = one_line_error(uac_here(*args, "--db", str(path), cwd=tmp_path))
        assert (
            "is a DuckDB database of another program, not a uac store (its tables: orders)" in err
        )
    assert path.read_bytes() == before


def test_a_checkpoint_that_changes_nothing_stores_no_version(tmp_path: Path, events: Path) -> None:
    env = {"UAC_DB": str(tmp_path / "s.duckdb")}
    uac_here("ingest", str(events), cwd=tmp_path, env=env)
    assert uac_here("checkpoint", cwd=tmp_path, env=env).stdout.startswith(
        "checkpoint 1: 3 records"
    )
    again = uac_here("checkpoint", cwd=tmp_path, env=env)
    assert again.returncode == 0
    assert again.stdout.startswith("no change since checkpoint 1 (3 records); no new version")
    assert len(uac_here("checkpoints", cwd=tmp_path, env=env).stdout.splitlines()) == 2


def test_cli_says_why_an_alert_cleared_and_shows_dates_as_read(
    tmp_path: Path, events: Path
) -> None:
    env = {"UAC_DB": str(tmp_path / "store.duckdb"), "UAC_USER": "maya"}
    assert uac_here("ingest", str(events), cwd=tmp_path, env=env).returncode == 0
    stop = tmp_path / "stop.jsonl"
    stop.write_text(
        json.dumps(
            {"kind": "fact", "ts": "2025-04-05T09:00:00", "op": "update", "type": "Medication"}
            | {"key": "amox", "fields": {"active": False}}
        )
        + "\n"
    )
    out = uac_here("ingest", str(stop), cwd=tmp_path, env=env).stdout
    assert (
        "  cleared [critical] drug_allergy_cross_reactivity: Medication 'amox' (Amoxicillin 500 mg) is in"
        in out
    )
    assert (
        "      why: a record it was about changed: Medication 'amox' active True → False\n" in out
    )
    sql = uac_here("sql", "SELECT valid_from, start FROM Trip", cwd=tmp_path, env=env).stdout
    assert sql.splitlines()[1] == "2025-04-01 09:00\t2025-02-20"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["alert"], "unknown command 'alert'; did you mean 'alerts'? See uac --help"),
        (["checkpoin"], "unknown command 'checkpoin'; did you mean 'checkpoint' or 'checkpoints'?"),
        (
            ["bench", "alrts"],
            "unknown command 'alrts'; did you mean 'alerts'? See uac bench --help",
        ),
        ([], "the following arguments are required: COMMAND; see uac --help"),
        (["sql"], "the following arguments are required: query; see uac sql --help"),
        (
            ["code", "--version", "x"],
            "argument --version: expected a whole number, got 'x'; see uac code --help",
        ),
        (
            ["ingest", "f.jsonl", "--format", "lcomo"],
            "argument --format: 'lcomo' is not one of auto, jsonl, locomo, longmemeval, chat; "
            "did you mean 'locomo'? See uac ingest --help",
        ),
        # numbers: a limit or a seq is 0 or more, a version or a size 1 or more
        (
            ["log", "--limit", "-1"],
            "argument --limit: must be 0 or more, got -1; see uac log --help",
        ),
        (["log", "--after", "-1"], "argument --after: must be 0 or more, got -1"),
        (["calls", "--limit", "-1"], "argument --limit: must be 0 or more, got -1"),
        (["code", "--version", "0"], "argument --version: must be positive, got 0"),
        (["diff", "0", "1"], "argument a: must be positive, got 0"),
        (["extract", "--batch-size", "0"], "argument --batch-size: must be positive, got 0"),
        (["bench", "aggregate", "--sizes", "20", "0"], "argument --sizes: must be positive, got 0"),
        (["bench", "aggregate", "--k", "0"], "argument --k: must be positive, got 0"),
        (
            ["bench", "locomo", "l.json", "--limit", "0"],
            "argument --limit: must be positive, got 0",
        ),
    ],
)
def test_argument_errors_are_one_line_and_exit_1(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("uac: error: ") and err.count("\n") == 1, err
    assert message in err, err


def test_help_is_still_argparses_and_a_bad_limit_no_traceback(tmp_path: Path, events: Path) -> None:
    done = uac_here("code", "--help", cwd=tmp_path)
    assert done.returncode == 0 and done.stderr == ""
    assert done.stdout.startswith(
        "usage: uac code [-h] [--db DB] [--user USER] [--version VERSION]"
    )
    env = {"UAC_DB": str(tmp_path / "s.duckdb")}
    assert uac_here("ingest", str(events), cwd=tmp_path, env=env).returncode == 0
    for command in ("log", "calls"):  # these reached DuckDB as LIMIT -1, a BinderException
        err = one_line_error(uac_here(command, "--limit", "-1", cwd=tmp_path, env=env))
        assert "must be 0 or more, got -1" in err
    # 0 is no limit, as in a notebook: every event (it listed none, silently, before), every
    # call (none recorded here: the headers, and the calls' totals, still are)
    log = uac_here("log", "--limit", "0", cwd=tmp_path, env=env)
    every = uac_here("log", "--limit", "1000", cwd=tmp_path, env=env)
    assert log.stderr == "" and log.stdout == every.stdout and len(log.stdout.splitlines()) > 5
    calls = uac_here("calls", "--limit", "0", cwd=tmp_path, env=env)
    assert calls.returncode == 0 and calls.stdout == (
        "call\tat\tpurpose\tmodel\ttokens in\ttokens out\tms\toutcome\n\n"
        "purpose\tcalls\tfailed\ttokens in\ttokens out\n"
    )
    assert "did you mean 'alerts'" in one_line_error(uac_here("alert", cwd=tmp_path, env=env))


def test_counts_agree_with_their_nouns_and_no_checkpoint_is_said(tmp_path: Path) -> None:
    one = tmp_path / "one.jsonl"
    trip = {"kind": "fact", "ts": "2025-01-01", "op": "add", "type": "Trip", "key": "t"}
    one.write_text(json.dumps(trip | {"fields": {"nights": 1}}) + "\n")
    env = {"UAC_DB": str(tmp_path / "s.duckdb"), "UAC_USER": "maya"}
    assert uac_here("ingest", str(one), cwd=tmp_path, env=env).stdout.startswith("1 event appended")
    empty = uac_here("checkpoints", cwd=tmp_path, env=env)
    assert empty.returncode == 0
    assert empty.stdout == "no checkpoints yet for maya; take one with `uac checkpoint`\n"
    assert uac_here("checkpoint", cwd=tmp_path, env=env).stdout.startswith(
        "checkpoint 1: 1 record, "
    )
    listed = uac_here("checkpoints", cwd=tmp_path, env=env).stdout.splitlines()
    assert listed[0] == "version\tseq\trecords\tcreated" and listed[1].startswith("1\t3\t1\t")
    again = uac_here("checkpoint", cwd=tmp_path, env=env).stdout
    assert again.startswith("no change since checkpoint 1 (1 record);")


def test_no_model_configured_names_the_flags_on_the_command_line(
    tmp_path: Path, events: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"UAC_DB": str(tmp_path / "s.duckdb"), "UAC_MODEL": "", "UAC_OFFLINE": ""}
    assert uac_here("ingest", str(events), cwd=tmp_path, env=env).returncode == 0
    err = one_line_error(uac_here("ask", "How many trips?", cwd=tmp_path, env=env))
    assert "no model configured: pass --model NAME or set UAC_MODEL (and --base-url URL" in err
    assert "or pass --offline or set UAC_OFFLINE=1" in err and "model=..." not in err
    # ... while Python, the same check, names the arguments
    from uac_kernel.core.errors import ModelError
    from uac_kernel.model.client import ModelSettings

    monkeypatch.delenv("UAC_MODEL", raising=False)
    with pytest.raises(ModelError, match=r"pass model=\.\.\. or set UAC_MODEL \(and base_url="):
        ModelSettings.resolve(model=None, offline=False)


def test_the_demos_try_lines_run_as_printed(tmp_path: Path) -> None:
    """`uac demo` from a venv that is not activated: what it says to try works when pasted."""
    here = Path(sys.executable).parent  # where the venv's `uac` is, if it is installed
    path = os.pathsep.join(
        p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p) != here
    )
    out = uac_here("demo", cwd=tmp_path, env={"PATH": path})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Try:  "))
    commands = [line.removeprefix("Try:").strip() for line in lines[start:]]
    assert len(commands) == 4 and not any(c.startswith("uac ") for c in commands), commands
    for command in commands:
        ran = subprocess.run(
            command,
            shell=True,
            cwd=tmp_path,
            env={**os.environ, "PATH": path},
            capture_output=True,
            text=True,
            check=False,
        )
        assert ran.returncode == 0 and ran.stdout, (command, ran.stderr)
    # With the venv activated (its bin on PATH), plain `uac`; from the repository, before it is
    # activated, the venv's `uac` relative to where you are.
    probe = [
        sys.executable,
        "-c",
        "from uac_kernel.demo.run import uac_command; print(uac_command())",
    ]
    said = subprocess.run(
        probe,
        env={**os.environ, "PATH": f"{here}{os.pathsep}{path}"},
        capture_output=True,
        text=True,
        check=False,
    )
    script = here / "uac"
    if not script.exists():
        pytest.skip(f"no `uac` script beside {sys.executable}: the demo says `python -m`")
    assert said.stdout == "uac\n", said.stderr
    if script.is_relative_to(ROOT):
        said = subprocess.run(
            probe,
            cwd=ROOT,
            env={**os.environ, "PATH": path},
            capture_output=True,
            text=True,
            check=False,
        )
        assert said.stdout == f"{script.relative_to(ROOT)}\n", said.stderr


# -- constraints ----------------------------------------------------------------------------

CONSTRAINTS_YAML = """\
tax:
  kind: obligation
  title: File the tax return
  due: {date: 2025-04-15}
  lead_days: 30
  done_by: {type: TaxReturn}
rent:
  kind: obligation
  title: "Pay rent \\x1b[31m; rm -rf / #"
  due: {date: 2025-04-03}
"""


def test_constrain_lists_retracts_and_alerts_name_the_constraint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "c.duckdb")
    log = tmp_path / "clock.jsonl"
    log.write_text(
        json.dumps(
            {"kind": "utterance", "ts": "2025-04-01T09:00:00", "speaker": "user", "text": "hi"}
        )
        + "\n"
    )
    assert main(["ingest", str(log), "--db", db]) == 0
    file = tmp_path / "c.yaml"
    file.write_text(CONSTRAINTS_YAML)
    capsys.readouterr()
    assert main(["constrain", str(file), "--db", db, "--reason", "said so"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("in force: tax, rent;") and "raised [" in out
    assert main(["constraints", "--db", db]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert [r.split("\t")[:2] for r in rows[1:]] == [["tax", "obligation"], ["rent", "obligation"]]
    assert "\x1b" not in "".join(rows) and rows[1].endswith("constraint_tax")
    assert main(["alerts", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "    constraint: tax (obligation): File the tax return" in out
    assert main(["constrain", "--retract", "tax", "--reason", "filed", "--db", db]) == 0
    assert "constraint 'tax' was retracted: filed" in capsys.readouterr().out
    assert main(["constraints", "--history", "--json", "--db", db]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [(c["key"], c["retracted"]) for c in shown] == [("tax", True), ("rent", False)]
    assert shown[0]["constraint"]["lead_days"] == 30
    # the log says what each constraint event did, in a line, not as the payload's JSON
    assert main(["log", "--kind", "constraint", "--db", db]) == 0
    summaries = [r.split("\t")[-1] for r in capsys.readouterr().out.splitlines()[1:]]
    assert summaries == [
        "add tax (obligation): File the tax return; on TaxReturn (reason: said so)",
        "add rent (obligation): Pay rent \\u001b[31m; rm -rf / # (reason: said so)",
        "retract tax (reason: filed)",
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: obligation\ntitle: x\n", "c.yaml: due: Field required"),
        (
            "- kind: obligation\n  title: x\n  due: {date: 2025-01-01}\n- kind: obligation\n  title: y\n  due: {days: 3}\n",
            "c.yaml: item 2: due: Value error, a moment needs",
        ),
        (
            "a: &x {kind: obligation, title: t, due: {date: 2025-01-01}}\nb: *x\n",
            "line 2: a YAML alias",
        ),
        ("a: [unclosed\n", "c.yaml: line 2: invalid YAML"),
        ('{"kind": "obligation",}', "c.yaml: line 1: invalid JSON"),
        ("!!python/object:os.system {}\n", "invalid YAML"),
        (
            "tax:\n  kind: obligation\n  title: t\n  due: {date: 2025-01-01}\n  code: 'import os'\n",
            "c.yaml: key 'tax': code: Extra inputs are not permitted",
        ),
    ],
)
def test_constrain_errors_name_the_file_item_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    file = tmp_path / "c.yaml"
    file.write_text(text)
    db = str(tmp_path / "c.duckdb")
    assert main(["constrain", str(file), "--db", db]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert main(["constraints", "--db", db]) == 1  # nothing was written: no user yet


def test_a_bench_passes_offline_to_the_model_it_names(monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse

    from uac_kernel.cli.bench_cmds import _model

    monkeypatch.delenv("UAC_OFFLINE", raising=False)
    named = argparse.Namespace(model="local", base_url=None, offline=True)
    assert _model(named).offline is True  # type: ignore[union-attr]
    assert _model(argparse.Namespace(model="local", base_url=None, offline=False)).offline is False  # type: ignore[union-attr]
    assert _model(argparse.Namespace(model=None, base_url=None, offline=True)) is None
