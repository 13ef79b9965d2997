"""Commands that need no state answer without a fold; the open freezes its state for the GC;
the `uac` command leaves without the interpreter's teardown only when nothing is left open.

The stores are real DuckDB files built from the demo history; the commands run as real
subprocesses (``python -m uac_kernel.cli.main``, the console script's path) unless a test says so.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from helpers.processes import suite_path

from uac_kernel.cli.main import main
from uac_kernel.core.faces import CLI
from uac_kernel.demo.life import write_demo_jsonl
from uac_kernel.log.store import NewEvent, Store
from uac_kernel.render.listings import checkpoints_listing
from uac_kernel.render.log_listings import log_listing
from uac_kernel.render.table import listing_lines
from uac_kernel.workbench import Workbench, resolve_user

ROOT = Path(__file__).resolve().parents[2]
USER = "maya"


def uac(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "uac_kernel.cli.main", "--db", str(db), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def ok(done: subprocess.CompletedProcess[str], note: str = "") -> str:
    """What a command printed, when it succeeded with nothing on stderr but ``note``."""
    assert done.returncode == 0 and done.stderr == note, (done.returncode, done.stderr)
    return done.stdout


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.returncode, done.stdout)
    assert done.stderr.startswith("uac: error: ") and done.stderr.count("\n") == 1, done.stderr
    return done.stderr.removeprefix("uac: error: ").rstrip("\n")


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo history of one user in two ingests, with a checkpoint after each."""
    tmp = tmp_path_factory.mktemp("nofold")
    lines = tmp / "demo.jsonl"
    write_demo_jsonl(lines)
    text = lines.read_text(encoding="utf-8").splitlines(keepends=True)
    first, rest = tmp / "first.jsonl", tmp / "rest.jsonl"
    first.write_text("".join(text[: len(text) // 2]), encoding="utf-8")
    rest.write_text("".join(text[len(text) // 2 :]), encoding="utf-8")
    db = tmp / "demo.duckdb"
    with Workbench(db, user=USER) as wb:
        wb.ingest(first)
        wb.checkpoint()
        wb.ingest(rest)
        wb.checkpoint()
    return db


@pytest.fixture
def broken_db(demo_db: Path, tmp_path: Path) -> Iterator[Path]:
    """The demo store plus one event, appended with a valid hash chain, that the fold refuses:
    an update of a record that does not exist."""
    db = tmp_path / "broken.duckdb"
    shutil.copy(demo_db, db)
    store = Store(db)
    try:
        store.append(
            [
                NewEvent(
                    datetime(2030, 1, 1, 9),
                    "fact",
                    USER,
                    {"op": "update", "type": "Trip", "key": "no-such-trip", "fields": {}},
                )
            ]
        )
    finally:
        store.close()
    yield db


# What the commands print, drawn by the same renderers from a Workbench on the same store: the
# no-fold commands read the store alone and must show the same.


def log_as_workbench(
    db: Path,
    kinds: list[str] | None = None,
    after: int = 0,
    limit: int | None = 50,
    last: int | None = None,
) -> tuple[str, str]:
    """The lines `uac log` prints, and the note it prints on stderr (where the next page is);
    ``limit`` None is every event, ``last`` the newest."""
    with Workbench(db, user=USER, read_only=True) as wb:
        fetch = None if limit is None else limit + 1
        events = wb.log(kinds=kinds, after_seq=after, limit=fetch, last=last)
    kind = kinds[0] if kinds else None
    listing = log_listing(events, CLI, limit=limit, after=after, kind=kind, last=last)
    note = f"{listing.note}\n" if listing.note else ""
    return "".join(f"{line}\n" for line in listing_lines(listing)), note


def checkpoints_as_workbench(db: Path) -> str:
    with Workbench(db, user=USER, read_only=True) as wb:
        listing = checkpoints_listing(wb.checkpoints.all(), wb.user, CLI)
    return "".join(f"{line}\n" for line in listing_lines(listing))


def code_as_workbench(db: Path, version: int | None) -> str:
    with Workbench(db, user=USER, read_only=True) as wb:
        return wb.code(version)


@pytest.mark.parametrize(
    "args",
    [
        ("log",),
        ("log", "--limit", "5"),
        ("log", "--kind", "utterance", "--limit", "20"),
        ("log", "--kind", "fact", "--after", "300", "--limit", "7"),
        ("log", "--limit", "0"),
        ("log", "--last", "5"),
        ("log", "--kind", "fact", "--after", "300", "--last", "4"),
    ],
)
def test_log_prints_what_the_workbench_printed(demo_db: Path, args: tuple[str, ...]) -> None:
    kinds = [args[args.index("--kind") + 1]] if "--kind" in args else None
    after = int(args[args.index("--after") + 1]) if "--after" in args else 0
    last = int(args[args.index("--last") + 1]) if "--last" in args else None
    limit = int(args[args.index("--limit") + 1]) if "--limit" in args else 50
    limit = None if limit == 0 or last is not None else limit  # 0: every event
    expected, note = log_as_workbench(demo_db, kinds, after, limit, last)
    assert ok(uac(*args, db=demo_db), note) == expected
    # the demo holds more than a page; 0 shows all of it; --last says what it shows
    assert bool(note) == (limit is not None or last is not None), note
    if last is not None:
        assert expected.count("\n") == last + 1 and note.startswith(f"the newest {last} events")
    if kinds == ["utterance"]:
        assert expected.count("\n") == 21 and "\tutterance\tchat-" in expected  # sources shown


def test_checkpoints_and_code_print_what_the_workbench_printed(demo_db: Path) -> None:
    listed = ok(uac("checkpoints", db=demo_db))
    assert listed == checkpoints_as_workbench(demo_db) and listed.count("\n") == 3
    latest = code_as_workbench(demo_db, None)
    assert latest != code_as_workbench(demo_db, 1)
    assert ok(uac("code", db=demo_db)) == latest
    assert ok(uac("code", "--version", "1", db=demo_db)) == code_as_workbench(demo_db, 1)
    assert ok(uac("code", "--version", "2", db=demo_db)) == latest


def test_log_checkpoints_and_code_answer_when_the_fold_fails(
    demo_db: Path, broken_db: Path
) -> None:
    # the fold of this store fails for real: any command that needs the state says so
    assert "Trip 'no-such-trip' is not a current record" in one_line_error(
        uac("eval", "1", db=broken_db)
    )
    logged = ok(uac("log", "--limit", "100000", db=broken_db)).splitlines()
    assert "\n".join(logged[:-1]) + "\n" == log_as_workbench(demo_db, limit=100_000)[0]
    seq, _, kind, _, said = logged[-1].split("\t")
    assert kind == "fact" and said == "update Trip no-such-trip"
    last = ok(uac("log", "--after", str(int(seq) - 1), db=broken_db))
    assert last == "\n".join([logged[0], logged[-1]]) + "\n"
    assert ok(uac("checkpoints", db=broken_db)) == checkpoints_as_workbench(demo_db)
    assert ok(uac("code", db=broken_db)) == code_as_workbench(demo_db, None)
    assert ok(uac("code", "--version", "1", db=broken_db)) == code_as_workbench(demo_db, 1)


@pytest.mark.parametrize(
    "command", [("log",), ("checkpoints",), ("code",), ("code", "--version", "1")]
)
def test_unknown_user_messages_are_unchanged(broken_db: Path, command: tuple[str, ...]) -> None:
    message = one_line_error(uac(*command, "--user", "may", db=broken_db))
    assert message == f"user 'may' has no events in {broken_db}; users here: maya"
    # two users and none named
    store = Store(broken_db)
    store.append(
        [NewEvent(datetime(2030, 1, 2), "utterance", "bob", {"speaker": "user", "text": "hi"})]
    )
    store.close()
    message = one_line_error(uac(*command, db=broken_db))
    assert message == f"{broken_db} holds 2 users (bob, maya); name one with --user"


def test_unknown_kind_and_version_messages_are_unchanged(broken_db: Path) -> None:
    message = one_line_error(uac("log", "--kind", "alerts", db=broken_db))
    assert message.startswith("no event kind 'alerts'. Did you mean 'alert'? Kinds: alert, ")
    assert one_line_error(uac("code", "--version", "9", db=broken_db)) == (
        "user 'maya' has no checkpoint 9; existing versions: 1, 2"
    )


def test_an_empty_store_and_no_checkpoints_read_as_before(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    Store(db).close()  # a store with no events yet
    assert one_line_error(uac("log", db=db)) == (
        f"{db} holds no events yet; ingest a file first (uac ingest FILE)"
    )
    store = Store(db)
    store.append(
        [NewEvent(datetime(2030, 1, 2), "utterance", "bob", {"speaker": "user", "text": "hi"})]
    )
    store.close()
    assert (
        ok(uac("checkpoints", db=db))
        == "no checkpoints yet for bob; take one with `uac checkpoint`\n"
    )
    assert one_line_error(uac("code", db=db)) == (
        "user 'bob' has no checkpoint yet; run `uac checkpoint` first"
    )


def modules_after(args: list[str]) -> set[str]:
    """The modules a fresh interpreter holds after ``main(args)`` (stdout swallowed)."""
    probe = (
        "import contextlib, io, json, sys\n"
        "from uac_kernel.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    code = main({args!r})\n"
        "print(json.dumps([code, sorted(sys.modules)]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    code, modules = json.loads(out.splitlines()[-1])
    assert code == 0
    return set(modules)


@pytest.mark.parametrize(
    "command", [["log", "--limit", "5"], ["log", "--kind", "fact"], ["checkpoints"], ["code"]]
)
def test_the_commands_load_neither_the_workbench_nor_the_rules(
    demo_db: Path, command: list[str]
) -> None:
    loaded = modules_after(["--db", str(demo_db), *command])
    assert {
        "uac_kernel.workbench",
        "uac_kernel.rules.engine",
        "uac_kernel.sql.view",
    } & loaded == set()
    assert {"uac_kernel.state.fold", "uac_kernel.checkpoints.codegen", "pydantic"} & loaded == set()


def test_the_commands_run_in_process_through_main(
    demo_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # tests and other callers use main(), which returns; only run() may skip the teardown
    assert main(["--db", str(demo_db), "log", "--limit", "3"]) == 0
    assert capsys.readouterr().out == log_as_workbench(demo_db, limit=3)[0]
    assert main(["--db", str(demo_db), "code", "--version", "1"]) == 0
    assert capsys.readouterr().out == code_as_workbench(demo_db, 1)


def test_resolve_user_still_imports_from_the_workbench() -> None:
    from uac_kernel.log import users

    assert resolve_user is users.resolve_user


# -- the GC and an open ------------------------------------------------------------------------


def test_an_open_freezes_its_state_and_close_unfreezes_it(demo_db: Path) -> None:
    assert gc.isenabled()
    gc.unfreeze()
    wb = Workbench(demo_db, user=USER, read_only=True)
    try:
        assert gc.get_freeze_count() > 0 and gc.isenabled()
        assert wb.eval("len(user.all(Transaction))") > 0
    finally:
        wb.close()
    assert gc.get_freeze_count() == 0 and gc.isenabled()


def test_an_open_leaves_a_paused_gc_paused(demo_db: Path) -> None:
    gc.disable()
    try:
        with Workbench(demo_db, user=USER, read_only=True):
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_fold_again_after_another_write_sees_it(demo_db: Path, tmp_path: Path) -> None:
    # a notebook's workbench folds again when another wrote; the frozen old state is let go
    db = tmp_path / "again.duckdb"
    shutil.copy(demo_db, db)
    with Workbench(db, user=USER) as reader, Workbench(db, user=USER) as writer:
        before = reader.eval("len(user.all(Trip))")
        writer.ingest(
            [
                {
                    "kind": "fact",
                    "ts": "2030-01-01T09:00:00",
                    "op": "add",
                    "type": "Trip",
                    "key": "one-more",
                    "fields": {},
                }
            ]
        )
        assert reader.eval("len(user.all(Trip))") == before + 1
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


# -- leaving without the teardown ----------------------------------------------------------


# Run in a fresh interpreter: this test process may still hold stores and threads of other
# tests, and the answer is about the whole process.
TEARDOWN = """
import sys, threading
from pathlib import Path
from uac_kernel.cli.main import _may_skip_teardown, main
from uac_kernel.log.store import Store
from uac_kernel.workbench import Workbench
tmp, demo = Path(sys.argv[1]), sys.argv[2]
assert _may_skip_teardown()
store = Store(tmp / "s.duckdb")
assert not _may_skip_teardown()
store.close()
assert _may_skip_teardown()
stop = threading.Event()
worker = threading.Thread(target=stop.wait)
worker.start()
try:
    assert not _may_skip_teardown()  # Python would join it: so does the normal exit
finally:
    stop.set()
    worker.join()
daemon = threading.Thread(target=stop.wait, daemon=True)  # stop is set: it ends at once
daemon.start()
daemon.join()
assert _may_skip_teardown()
kept = []
assert main(["--db", demo, "eval", "len(user.all(Trip))"], keep=kept) == 0
(wb,) = kept
assert isinstance(wb, Workbench) and wb.state.counts()["Trip"] > 0
assert _may_skip_teardown()  # kept, but closed: its store is not open
assert main(["--db", demo, "log", "--limit", "1"], keep=kept) == 0
assert len(kept) == 1  # log opens no workbench
print("held")
"""


def test_teardown_is_skipped_only_with_no_store_open_and_no_thread_to_join(
    tmp_path: Path, demo_db: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", TEARDOWN, str(tmp_path), str(demo_db)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": suite_path()},
        timeout=300,
    )
    assert done.returncode == 0 and done.stdout.endswith("held\n"), done.stderr


def test_what_a_command_wrote_is_in_the_file_after_it_left(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    lines = [
        {"kind": "fact", "ts": f"2025-03-{d:02d}T10:00:00", "op": "add", "type": "Trip",
         "key": f"t{d}", "fields": {"country": "Japan"}}
        for d in range(1, 29)
    ]  # fmt: skip
    events.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    db = tmp_path / "s.duckdb"
    assert "28 events appended" in ok(uac("ingest", str(events), db=db))
    assert "checkpoint 1" in ok(uac("checkpoint", db=db))
    # closed before the command left: DuckDB checkpointed its write-ahead log into the file
    assert not Path(f"{db}.wal").exists()
    assert "hash chains intact" in ok(uac("verify", db=db))
    with Workbench(db, read_only=True) as wb:
        assert wb.eval("len(user.all(Trip))") == 28
        assert len(wb.checkpoints.all()) == 1


def test_output_piped_into_a_closed_reader_exits_as_before(demo_db: Path) -> None:
    # `uac log | head -1`: the reader leaves; the command ends quietly with code 0
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uac_kernel.cli.main",
            "--db",
            str(demo_db),
            "log",
            "--limit",
            "100000",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 0 and first.startswith(b"seq\t") and b"Traceback" not in err


def test_the_console_script_runs_run_and_keeps_the_exit_code(demo_db: Path) -> None:
    assert 'uac = "uac_kernel.cli.main:run"' in (ROOT / "pyproject.toml").read_text(
        encoding="utf-8"
    )
    script = "import sys\nfrom uac_kernel.cli.main import run\nsys.argv[0] = 'uac'\nrun()\n"
    for args, code in ((["log", "--limit", "2"], 0), (["code", "--version", "9"], 1)):
        done = subprocess.run(
            [sys.executable, "-c", script, "--db", str(demo_db), *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == code, done.stderr
        if code == 0:
            assert (done.stdout, done.stderr) == log_as_workbench(demo_db, limit=2)
        else:
            assert (
                done.stderr
                == "uac: error: user 'maya' has no checkpoint 9; existing versions: 1, 2\n"
            )
