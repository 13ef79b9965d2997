"""One store file shared by processes: a notebook and terminals, each holding it per operation.

Every test runs real subprocesses against a real DuckDB file: DuckDB's lock is per process, so
threads could not show it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers.events import jsonl, notes
from helpers.sharing import (
    PATIENT,
    a_client_that_does_not_ask_gets_it,
    another_process_gets_it,
    hold,
    patient_env,
    patient_uac,
)
from helpers.store import log_is_sound

from uac_kernel.core.errors import StoreLocked
from uac_kernel.log.store import Store
from uac_kernel.workbench import Workbench

ROOT = Path(__file__).resolve().parents[2]

# Opens user u, says "open", waits for "go" on stdin, then ingests the file in batches: the
# two writers of a test start their batches together.
WRITER = """
import json, sys
from uac_kernel.workbench import Workbench
db, path, batches = sys.argv[1], sys.argv[2], int(sys.argv[3])
events = [json.loads(line) for line in open(path)]
wb = Workbench(db, user="u")
print("open", flush=True)
sys.stdin.readline()
size = -(-len(events) // batches)
for i in range(0, len(events), size):
    wb.ingest(events[i : i + size])
wb.close()
print("done", flush=True)
"""


def kind_counts(db: Path) -> dict[str, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT kind, count(*) FROM events GROUP BY kind").fetchall()
    finally:
        con.close()
    return {str(k): int(n) for k, n in rows}


def run_writers(db: Path, files: list[Path], batches: int) -> None:
    """Start one WRITER per file, let them all open, then let them ingest at once."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), str(f), str(batches)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=patient_env(),
        )
        for f in files
    ]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "open"
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in procs:
            out, err = p.communicate(timeout=300)
            assert p.returncode == 0, err
            assert out.strip() == "done"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def alone(tmp_path: Path, files: list[Path]) -> dict[str, int]:
    """The kinds of event the same files logged by one process, one after the other."""
    db = tmp_path / "alone.duckdb"
    with Workbench(db, user="u") as wb:
        for f in files:
            wb.ingest(f)
    return kind_counts(db)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "shared.duckdb"
    Store(path).close()
    return path


def idle_off(store: Store) -> bool:
    """Whether ``store`` has no connection, soon (its watcher lets go at its next look); the
    bound is generous, a liveness check, not a timing."""
    deadline = time.monotonic() + 10
    while store.connected and time.monotonic() < deadline:
        time.sleep(0.02)
    return not store.connected


def handed_over(store: Store, db: Path) -> bool:
    """Another uac process asks for the file and gets it; ``store`` let go of it for that."""
    return another_process_gets_it(db) and idle_off(store)


# -- writers in parallel ----------------------------------------------------------------------


def test_two_processes_ingest_different_files_in_parallel(db: Path, tmp_path: Path) -> None:
    a = jsonl(tmp_path / "a.jsonl", notes("a", 240))
    b = jsonl(tmp_path / "b.jsonl", notes("b", 240))
    run_writers(db, [a, b], batches=12)
    log_is_sound(db)
    # the same events as one process ingesting both files: one schema event for Note, each
    # fact once, whichever process came first
    assert kind_counts(db) == alone(tmp_path, [a, b])
    with Workbench(db, user="u", read_only=True) as wb:
        assert wb.eval("len(user.all('Note'))") == 480


def test_the_same_file_ingested_by_two_processes_at_once_is_appended_once(
    db: Path, tmp_path: Path
) -> None:
    same = jsonl(tmp_path / "same.jsonl", notes("s", 240))
    run_writers(db, [same, same], batches=12)
    log_is_sound(db)
    assert kind_counts(db) == alone(tmp_path, [same])
    assert kind_counts(db)["fact"] == 240


# -- a notebook beside a terminal -------------------------------------------------------------


def test_a_workbench_sees_what_a_terminal_wrote_in_its_next_operation(
    db: Path, tmp_path: Path
) -> None:
    wb = Workbench(db, user="u")
    try:
        wb.ingest(notes("nb", 3))
        more = jsonl(tmp_path / "more.jsonl", notes("cli", 5))
        # the notebook's workbench is open, yet the terminal writes and reads without waiting
        done = patient_uac("ingest", str(more), "--db", str(db), "--user", "u", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        said = patient_uac(
            "eval", "len(user.all('Note'))", "--db", str(db), "--user", "u", cwd=tmp_path
        )
        assert said.returncode == 0, said.stderr
        assert json.loads(said.stdout) == 8
        # the notebook sees them in its next operation, and writes after them
        assert wb.eval("len(user.all('Note'))") == 8
        assert {e.source for e in wb.log(kinds=["fact"])} >= {f"cli:{i}" for i in range(5)}
        report = wb.ingest([*notes("cli", 5), *notes("nb2", 2)])
        assert (report.appended, report.skipped) == (2, 5)
        assert wb.eval("len(user.all('Note'))") == 10
    finally:
        wb.close()
    log_is_sound(db)


def test_a_forget_in_another_process_is_seen(db: Path, tmp_path: Path) -> None:
    wb = Workbench(db, user="u")
    try:
        wb.ingest(notes("n", 4))
        done = patient_uac(
            "forget", "--db", str(db), "--user", "u", "--record", "Note", "n1", cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr
        assert wb.eval("sorted(r.key for r in user.all('Note'))") == ["n0", "n2", "n3"]
        assert "note n1" not in json.dumps([e.payload for e in wb.log()])
    finally:
        wb.close()


def cell(ip: Any, source: str) -> Any:
    result = ip.run_cell(source)
    result.raise_error()
    return result.result


def test_a_notebook_sees_what_a_terminal_wrote_in_its_next_cell(
    kernel_shell: Any, db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    ip = kernel_shell
    ip.reset(new_session=False)
    cell(ip, "%load_ext uac")
    try:
        cell(ip, f"%config UacMagics.db = {str(db)!r}")
        cell(ip, "%config UacMagics.user = 'u'")
        jsonl(tmp_path / "first.jsonl", notes("nb", 2))
        cell(ip, "%uac open")
        cell(ip, "%uac ingest first.jsonl")
        # a cell that reads the store directly: the hook after the cell keeps it until asked
        assert cell(ip, "wb.store.con.execute('SELECT count(*) FROM events').fetchone()[0]") > 0
        assert handed_over(ip.user_ns["wb"].store, db)
        more = jsonl(tmp_path / "more.jsonl", notes("cli", 3))
        done = patient_uac("ingest", str(more), "--db", str(db), "--user", "u", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        said = patient_uac(
            "eval", "len(user.all('Note'))", "--db", str(db), "--user", "u", cwd=tmp_path
        )
        assert json.loads(said.stdout) == 5, said.stderr
        assert cell(ip, "%uac eval len(user.all('Note'))") == 5
        # `%uac state` reads the state directly: the magic catches up first
        cell(ip, "%uac state")
        assert cell(ip, "len(wb.state.all('Note'))") == 5
    finally:
        cell(ip, "%unload_ext uac")
    assert a_client_that_does_not_ask_gets_it(db)  # closed with the extension


# -- who holds the file -----------------------------------------------------------------------


def test_a_holder_past_the_bound_is_named_with_its_command(
    db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    holder = hold(db, 600)
    try:
        monkeypatch.setenv("UAC_LOCK_TIMEOUT", "0.3")
        with pytest.raises(StoreLocked) as caught:
            Workbench(db, user="u")
        message = str(caught.value)
        who = f"process {holder.pid} ({Path(sys.executable).name} -c import duckdb"
        assert who in message and "0.3 s" in message and "UAC_LOCK_TIMEOUT" in message
        assert "\n" not in message
        # the terminal says the same in one line
        said = patient_uac(
            "eval", "1", "--db", str(db), "--user", "u", cwd=tmp_path, UAC_LOCK_TIMEOUT="0.3"
        )
        assert said.returncode == 1
        (line,) = said.stderr.splitlines()
        assert line.startswith("uac: error: ") and f"process {holder.pid} (" in line
    finally:
        holder.kill()
        holder.wait()


def test_a_holder_that_lets_go_within_the_bound_is_waited_for(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UAC_LOCK_TIMEOUT", PATIENT["UAC_LOCK_TIMEOUT"])
    with Workbench(db, user="u") as wb:
        wb.ingest(notes("n", 2))
        holder = hold(db, 1.0)
        try:
            # the workbench's next operation waits for the holder to close, then runs
            assert wb.eval("len(user.all('Note'))") == 2
            assert wb.ingest(notes("m", 1)).appended == 1
            assert holder.stdout is not None and holder.stdout.readline().strip() == "let go"
        finally:
            holder.kill()
            holder.wait()
    log_is_sound(db)


def test_a_lock_timeout_that_is_not_a_number_is_a_clear_error(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from uac_kernel.core.errors import StoreError

    monkeypatch.setenv("UAC_LOCK_TIMEOUT", "soon")
    with pytest.raises(StoreError, match=r"UAC_LOCK_TIMEOUT='soon' is not a number"):
        Store(db)


# -- a connection kept between operations, handed over when asked ---------------------------


def test_operations_back_to_back_share_one_connection_until_another_process_asks(
    db: Path,
) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest(notes("n", 2))
        con = wb.store.con
        assert wb.eval("len(user.all('Note'))") == 2
        assert wb.ingest(notes("m", 1)).appended == 1
        assert wb.log(limit=1)
        assert wb.store.connected and wb.store.con is con  # no reconnect, not after a write
        assert not a_client_that_does_not_ask_gets_it(db)  # kept while idle
        assert handed_over(wb.store, db)  # a uac process asks, and gets it
        assert wb.eval("len(user.all('Note'))") == 3  # the next operation connects again
        wb.store.release()  # what the CLI's exit does: at once
        assert not wb.store.connected and a_client_that_does_not_ask_gets_it(db)


def test_an_idle_connection_is_closed_after_keep_seconds_for_clients_that_do_not_ask(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from uac_kernel.log import handover

    monkeypatch.setattr(handover, "KEEP", 0.3)
    with Workbench(db, user="u") as wb:
        assert wb.eval("1") == 1
        assert idle_off(wb.store) and a_client_that_does_not_ask_gets_it(db)


def test_operations_back_to_back_keep_one_watcher_thread(db: Path) -> None:
    """One watcher per Store while it is connected: a process making thousands of operations
    a second once kept a timer thread per operation alive (22,800 were seen)."""
    store = Store(db)
    try:
        before = threading.active_count()
        for _ in range(2_000):
            with store.hold():
                store.con.execute("SELECT 1").fetchone()
            assert threading.active_count() <= before + 1
        assert handed_over(store, db)
        deadline = time.monotonic() + 10
        while threading.active_count() > before and time.monotonic() < deadline:
            time.sleep(0.02)
        assert threading.active_count() <= before  # the watcher ended with the connection
    finally:
        store.close()


def test_every_workbench_operation_hands_the_file_over_when_asked(db: Path, tmp_path: Path) -> None:
    wb = Workbench(db, user="u")
    try:
        assert handed_over(wb.store, db)
        steps = [
            lambda: wb.ingest(notes("n", 3)),
            lambda: wb.checkpoint(),
            lambda: wb.eval("len(user.all('Note'))"),
            lambda: wb.sql("SELECT count(*) FROM Note"),
            lambda: wb.log(kinds=["fact"]),
            lambda: wb.alerts(),
            lambda: wb.code(),
            lambda: wb.versions("Note", "n1"),
            lambda: wb.verify(),
            lambda: wb.head(),
        ]
        for step in steps:
            step()
            assert handed_over(wb.store, db)
    finally:
        wb.close()


def test_a_read_only_workbench_leaves_the_file_to_writers_between_operations(
    db: Path, tmp_path: Path
) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest(notes("n", 2))
    reader = Workbench(db, user="u", read_only=True)
    try:
        assert reader.eval("len(user.all('Note'))") == 2
        more = jsonl(tmp_path / "more.jsonl", notes("m", 2))
        done = patient_uac("ingest", str(more), "--db", str(db), "--user", "u", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        # a reader sees the last committed batch, whole
        assert reader.eval("len(user.all('Note'))") == 4
    finally:
        reader.close()


def test_a_page_turned_in_the_log_widget_leaves_the_file_to_others(db: Path) -> None:
    from uac_kernel.notebook.paging import LogPager, events_by_seq

    with Workbench(db, user="u") as wb:
        wb.ingest(notes("n", 30))
        pager = LogPager(wb.store, wb.user, page_size=10)
        # a widget's callback, outside any cell or operation: each read lets go at its end
        for turn in (lambda: pager.page(2), pager.kinds, lambda: events_by_seq(wb.store, "u", [3])):
            assert turn()
            assert handed_over(wb.store, db)


def test_an_operation_keeps_the_lock_while_this_process_looks_at_the_file(db: Path) -> None:
    """Closing any descriptor of the file drops this process's DuckDB lock (POSIX record
    locks): neither opening a second Store nor the catch-up check may read the file itself."""
    with Workbench(db, user="u") as wb:
        wb.ingest(notes("n", 2))
        with wb.store.hold():
            wb.store.con.execute("SELECT 1").fetchall()
            Store(db, read_only=True).close()
            assert wb.eval("len(user.all('Note'))") == 2
            assert not a_client_that_does_not_ask_gets_it(db)
            assert not another_process_gets_it(db, wait=0.5)  # not in an operation
        assert handed_over(wb.store, db)


def test_a_workbench_reading_from_a_snapshot_another_process_rewrote_opens_again(
    db: Path, tmp_path: Path
) -> None:
    """A notebook's state reads its records lazily from the snapshot; a terminal's checkpoint
    rewrites that snapshot. The notebook's next operation opens again from the new one instead
    of reading rows of a snapshot newer than its state."""
    events = notes("a", 300)
    with Workbench(db, user="u") as wb:
        wb.ingest(events)
        wb.checkpoint()  # writes the snapshot
    nb = Workbench(db, user="u")
    assert nb._snap is not None  # opened from the snapshot: no Note read yet
    more = jsonl(
        tmp_path / "more.jsonl",
        [*notes("b", 20), {**events[0], "op": "update", "source": "upd:0", "fields": {"n": 1000}}],
    )
    assert (
        patient_uac("ingest", str(more), "--db", str(db), "--user", "u", cwd=tmp_path).returncode
        == 0
    )
    assert patient_uac("checkpoint", "--db", str(db), "--user", "u", cwd=tmp_path).returncode == 0
    try:
        total = nb.eval("sum(n.n for n in user.all('Note'))")
        count = nb.eval("len(user.all('Note'))")
    finally:
        nb.close()
    assert (count, total) == (320, sum(range(300)) - 0 + 1000 + sum(range(20)))


# -- asking for the file -----------------------------------------------------------------------


def test_asking_stamps_the_want_file_anew_each_time(db: Path) -> None:
    from uac_kernel.log import handover

    assert handover.asked(str(db)) == 0  # no one asked yet
    handover.ask(str(db))
    first = handover.asked(str(db))
    time.sleep(0.05)  # a file's time moves by the kernel's tick
    handover.ask(str(db))
    assert first != 0 and handover.asked(str(db)) not in (0, first)
    # writable by every user (past the umask): another user's process can ask too
    assert Path(handover.want_path(str(db))).stat().st_mode & 0o777 == 0o666


def test_asking_when_the_want_file_cannot_be_made_is_no_error(tmp_path: Path) -> None:
    """A want file that cannot be made (here its path is a link into no directory; a directory
    one cannot write is the same): the asker goes on waiting, the holder lets go after KEEP
    idle seconds."""
    from uac_kernel.log import handover

    db = tmp_path / "s.duckdb"
    Store(db).close()
    Path(handover.want_path(str(db))).symlink_to(tmp_path / "nowhere" / "want")
    handover.ask(str(db))
    assert handover.asked(str(db)) == 0


def test_a_holder_busy_with_back_to_back_operations_lets_go_between_two(db: Path) -> None:
    """A process running operations back to back lets go at the end of the one during which
    another process asked, and stays off the file while the other takes it."""
    store = Store(db)
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            with store.hold():
                store.con.execute("SELECT count(*) FROM events").fetchone()

    worker = threading.Thread(target=busy)
    worker.start()
    try:
        assert another_process_gets_it(db)
    finally:
        stop.set()
        worker.join()
        store.close()
