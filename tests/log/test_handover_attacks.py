"""Attacks on the hand-over of a kept store connection between processes (log/handover.py).

Real DuckDB files under tmp_path and real subprocesses; the only time bounds are generous
liveness bounds (an asker must get the file well within its own wait)."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

import duckdb
import pytest
from helpers.events import jsonl, notes
from helpers.sharing import another_process_gets_it, patient_env, patient_uac
from helpers.store import log_is_sound

from uac_kernel.core.errors import StoreError, StoreLocked
from uac_kernel.log import handover
from uac_kernel.log.store import Store
from uac_kernel.workbench import Workbench

WRITER = """
import sys
from helpers.events import notes
from uac_kernel.workbench import Workbench
db, tag, batches = sys.argv[1], sys.argv[2], int(sys.argv[3])
wb = Workbench(db, user="u")
events = notes(tag, 5 * batches)
for i in range(batches):
    wb.ingest(events[5 * i : 5 * i + 5])
wb.close()
"""

# A reader whose every operation holds the file `dur` seconds (a long read: a big fold, a
# verify), back to back for `secs` seconds, starting `off` seconds after it says "open".
LONG_READER = """
import sys, time
from uac_kernel.log.store import Store
db, off, dur, secs = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
s = Store(db, read_only=True, lock_timeout=120)
s.release(keep=True)
print("open", flush=True)
time.sleep(off)
end = time.monotonic() + secs
while time.monotonic() < end:
    with s.hold():
        s.con.execute("SELECT count(*) FROM events").fetchall()
        time.sleep(dur)
s.close()
"""

# Holds the store in one operation for argv[2] seconds after saying "held".
LONG_OP = """
import sys, time
from uac_kernel.workbench import Workbench
wb = Workbench(sys.argv[1], user="u")
with wb.store.hold():
    wb.store.con.execute("SELECT 1").fetchall()
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
wb.close()
"""

# A workbench that has read its state and then sits idle (a notebook between cells).
IDLE = """
import sys, time
from uac_kernel.workbench import Workbench
wb = Workbench(sys.argv[1], user="u", read_only=sys.argv[2] == "ro")
wb.state
print("ready", flush=True)
time.sleep(120)
"""


def seeded(tmp_path: Path, n: int = 5) -> Path:
    db = tmp_path / "s.duckdb"
    wb = Workbench(db, user="u")
    wb.ingest(notes("seed", n))
    wb.close()
    return db


def child(code: str, *args: object, **kw: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=patient_env(),
        **kw,  # type: ignore[arg-type]
    )


def says(proc: subprocess.Popen[str], word: str) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    assert line == word, (line, proc.stderr.read() if proc.stderr else "")


def facts(db: Path) -> tuple[int, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute(
            "SELECT count(*), count(DISTINCT source) FROM events WHERE kind = 'fact'"
        ).fetchone()
    finally:
        con.close()
    assert row is not None
    return int(row[0]), int(row[1])


class ThreadErrors:
    """Exceptions raised in any thread (the watcher dies silently otherwise)."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self._old = threading.excepthook

    def __enter__(self) -> ThreadErrors:
        threading.excepthook = lambda a: self.errors.append(
            f"{a.thread.name if a.thread else '?'}: "
            + "".join(traceback.format_exception_only(a.exc_type, a.exc_value)).strip()
        )
        return self

    def __exit__(self, *exc: object) -> None:
        threading.excepthook = self._old


def watchers() -> int:
    return sum(t.name == "uac-store-watch" and t.is_alive() for t in threading.enumerate())


# --- defects ----------------------------------------------------------------------------------


def test_a_dropped_workbench_does_not_keep_the_store_open(tmp_path: Path) -> None:
    """A read-only workbench dropped without close (a notebook cell run again rebinds ``wb``)
    must not keep its Store alive: its watcher thread refers to the Store, so for KEEP=60 s
    the connection stays open, a thread keeps polling, and opening the store to write in
    this process is refused ("open read-only in this process; close that workbench") though
    no workbench is left to close. Before the change it was free 0.2 s after."""
    db = seeded(tmp_path)
    reader = Workbench(db, user="u", read_only=True)
    assert reader.state is not None
    del reader
    gc.collect()
    deadline = time.monotonic() + 10  # liveness bound; KEEP is 60 s
    while True:
        try:
            Workbench(db, user="u").close()
            break
        except StoreError as exc:
            if time.monotonic() > deadline:
                pytest.fail(f"10 s after the read-only workbench was dropped: {exc}")
            time.sleep(0.2)
            gc.collect()


def test_a_query_outside_an_operation_does_not_kill_the_watcher(tmp_path: Path) -> None:
    """A use of ``store.con`` outside any operation (``%uac users`` calls
    ``wb.store.user_kind_counts()``) that runs longer than two looks of the watcher: when
    another process asks meanwhile, the watcher closes the busy connection, DuckDB refuses
    (ResourceInUseException), the watcher thread dies with ``_watching`` left True, and the
    idle Store never lets go again: the asker waits its whole timeout for an idle holder."""
    db = seeded(tmp_path)
    wb = Workbench(db, user="u")
    con = wb.store.con
    con.create_function("slow", lambda x: time.sleep(2.0) or x, ["BIGINT"], "BIGINT")
    with ThreadErrors() as caught:
        got: list[object] = []
        query = threading.Thread(
            target=lambda: got.append(wb.store.con.execute("SELECT slow(1)").fetchall())
        )
        query.start()
        try:
            assert another_process_gets_it(db, wait=20), caught.errors
        finally:
            query.join()
            wb.close()
    assert got == [[(1,)]]
    assert caught.errors == []


@pytest.mark.parametrize("readers", [3])
def test_readers_with_long_operations_do_not_starve_a_writer(tmp_path: Path, readers: int) -> None:
    """Readers share the file: one that lets go for an asking writer comes back after GAP
    (0.05 s) and connects beside the others still reading, so with operations longer than
    GAP, staggered, one of them always holds it and the writer never gets in. (Already so
    before the change, with its 1 s HOLD_MAX; the hand-over does not fix it.)"""
    db = seeded(tmp_path)
    procs = [child(LONG_READER, db, 0.1 * i, 0.3, 25) for i in range(readers)]
    try:
        for p in procs:
            says(p, "open")
        time.sleep(1.5)
        try:
            Store(db, lock_timeout=10).close()
        except StoreLocked as exc:
            pytest.fail(f"writer starved by {readers} readers: {exc}")
    finally:
        for p in procs:
            p.kill()
            p.wait()


# --- cases that held --------------------------------------------------------------------------


def test_three_writers_back_to_back_lose_and_repeat_nothing(tmp_path: Path) -> None:
    db = seeded(tmp_path)
    procs = [child(WRITER, db, tag, 30) for tag in ("a", "b", "c")]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    assert facts(db) == (5 + 3 * 150, 5 + 3 * 150)
    log_is_sound(db)


@pytest.mark.parametrize("when", ["idle", "mid-batch"])
def test_a_holder_killed_leaves_the_store_usable(tmp_path: Path, when: str) -> None:
    db = seeded(tmp_path)
    code = (
        "import sys\nfrom helpers.events import notes\nfrom uac_kernel.workbench import Workbench\n"
        "wb = Workbench(sys.argv[1], user='u')\nwb.ingest(notes('k', 3))\n"
        "print('ready', flush=True)\n"
        + (
            "import time; time.sleep(120)\n"
            if when == "idle"
            else "while True:\n    wb.ingest(notes('m%d' % wb.state.seq, 2000))\n"
        )
    )
    holder = child(code, db)
    says(holder, "ready")
    time.sleep(0.5)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    wb = Workbench(db, user="u")
    try:
        assert wb.verify().ok
        wb.ingest(notes("after", 2))
    finally:
        wb.close()
    n = facts(db)[0]
    assert (n - 10) % 2000 == 0  # whole batches only
    log_is_sound(db)


def test_an_asker_behind_a_long_operation_gets_a_one_line_store_locked(tmp_path: Path) -> None:
    db = seeded(tmp_path)
    holder = child(LONG_OP, db, 30)
    try:
        says(holder, "held")
        with pytest.raises(StoreLocked) as caught:
            Store(db, lock_timeout=1)
        text = str(caught.value)
        assert "\n" not in text and f"process {holder.pid}" in text
        assert "UAC_LOCK_TIMEOUT" in text
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.parametrize("want", ["directory", "deleted", "stale-future"])
def test_an_odd_want_file_still_hands_the_store_over(tmp_path: Path, want: str) -> None:
    db = seeded(tmp_path)
    path = Path(handover.want_path(str(db)))
    if want == "stale-future":  # a stamp from a clock far ahead: compared with !=, not <
        handover.ask(str(db))
        os.utime(path, ns=(2**62, 2**62))
    idle = child(IDLE, db, "rw")
    try:
        says(idle, "ready")
        if want == "directory":
            path.unlink(missing_ok=True)
            path.mkdir()
        elif want == "deleted":
            path.unlink(missing_ok=True)
        assert another_process_gets_it(db, wait=30)
    finally:
        idle.kill()
        idle.wait()


@pytest.mark.parametrize("mode", ["rw", "ro"])
def test_the_cli_writes_beside_an_idle_workbench_that_then_sees_it(
    tmp_path: Path, mode: str
) -> None:
    db = seeded(tmp_path)
    idle = child(IDLE, db, mode)
    try:
        says(idle, "ready")
        done = patient_uac(
            "ingest", str(jsonl(tmp_path / "n.jsonl", notes("cli", 4))), "--db", str(db),
            "--user", "u", cwd=tmp_path, UAC_LOCK_TIMEOUT="30",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        done = patient_uac(
            "eval", "1 + 1", "--db", str(db), "--user", "u", cwd=tmp_path,
            UAC_LOCK_TIMEOUT="30",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    finally:
        idle.kill()
        idle.wait()
    assert facts(db) == (9, 9)


def test_an_idle_workbench_sees_what_another_process_wrote(tmp_path: Path) -> None:
    db = seeded(tmp_path)
    wb = Workbench(db, user="u")
    try:
        before = wb.state.seq
        w = child(WRITER, db, "o", 2)
        _, err = w.communicate(timeout=120)
        assert w.returncode == 0, err
        wb.refresh()
        assert wb.state.seq > before
        assert len(wb.log(kinds=["fact"])) == 15
    finally:
        wb.close()


def test_a_process_with_open_workbenches_exits_promptly(tmp_path: Path) -> None:
    db = seeded(tmp_path)
    code = (
        "import sys\nfrom helpers.events import notes\nfrom uac_kernel.workbench import Workbench\n"
        "ws = [Workbench(sys.argv[1], user='u') for _ in range(3)]\n"
        "ws[0].ingest(notes('x', 2)); ws[1].state; ws[2].verify()\n"
    )
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-c", code, str(db)],
            capture_output=True, text=True, env=patient_env(), timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr


def test_many_stores_close_racing_their_watchers(tmp_path: Path) -> None:
    db = seeded(tmp_path)
    before = watchers()  # those of stores other tests of this process left open
    with ThreadErrors() as caught:
        for i in range(60):
            s = Store(db)
            with s.hold():
                s.con.execute("SELECT 1").fetchall()
            time.sleep((i % 3) * 0.05 + (i % 7) * 0.001)
            s.close()
        stores = [Store(db) for _ in range(10)]
        for s in stores:
            with s.hold():
                s.con.execute("SELECT count(*) FROM events").fetchall()
        assert another_process_gets_it(db, wait=30)
        for s in stores:
            s.close()
        deadline = time.monotonic() + 10
        while watchers() > before and time.monotonic() < deadline:
            time.sleep(0.05)
    assert watchers() <= before  # every watcher of these stores ended with its connection
    assert caught.errors == []


def test_forked_evals_beside_other_writers(tmp_path: Path) -> None:
    db = seeded(tmp_path)
    wb = Workbench(db, user="u")
    try:
        assert wb.eval("1 + 1") == 2
        writers = [child(WRITER, db, t, 5) for t in ("f1", "f2")]
        k = 0
        while any(w.poll() is None for w in writers):
            assert wb.eval(f"{k} + 1") == k + 1
            k += 1
        for w in writers:
            assert w.returncode == 0, w.stderr.read() if w.stderr else ""
        wb.refresh()
        assert len(wb.log(kinds=["fact"])) == 55
        assert wb.verify().ok
    finally:
        wb.close()


def test_forget_compacts_beside_kept_stores_of_this_process_and_an_asker(tmp_path: Path) -> None:
    db = seeded(tmp_path)
    other = Workbench(db, user="u")  # kept, idle, with its watcher
    wb = Workbench(db, user="u")
    with ThreadErrors() as caught:
        w = child(WRITER, db, "g", 4)
        wb.forget(type="Note", key="seed0")
        _, err = w.communicate(timeout=120)
        assert w.returncode == 0, err
        other.refresh()
        assert len(other.log(kinds=["fact"])) == 4 + 20
        assert other.verify().ok and wb.verify().ok
        other.close()
        wb.close()
    assert caught.errors == []
    log_is_sound(db)
