"""An outside pass over issue 25 part 1 (no face writes over a store, ``uac_kernel/core/outputs.py``)
and the seams around it: races with a second process, a second process holding a pending WAL,
/proc/self/fd, kill -9 mid-write, hostile names, FIFOs and devices, fleet partitions, and the
writers that do not go through ``outputs.Output`` (the locomo progress file, the bench alerts
directory, the marimo export's assets, the demo's files beside its store).

Every case asserts the safe behaviour. Real parts only: real DuckDB files, real ``uac``
subprocesses, a real IPython shell; the only timeouts catch a hang.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import os
import resource
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers.cli import one_line_error, uac_here
from helpers.cli import uac as uac_process
from helpers.events import jsonl
from helpers.magics import run
from helpers.maya import STORE
from helpers.store import fingerprint

from uac_kernel.core.errors import OutputRefused

CLI = (sys.executable, "-m", "uac_kernel.cli.main")
HANG = 300  # a timeout that only catches a hang
BIG = "list(range(3_000_000))"  # an eval result whose JSON takes seconds to write (~26 MB)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Maya's store (one checkpoint) and a fleet of it."""
    home = tmp_path_factory.mktemp("seams")
    jsonl(home / "maya.jsonl", STORE)
    for argv in (
        ["ingest", "maya.jsonl", "--user", "maya"],
        ["checkpoint"],
        ["export", "maya.duckdb", "fleet"],
    ):
        done = uac_here("--db", "maya.duckdb", *argv, cwd=home)
        assert done.returncode == 0, done.stderr
    return home


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def verified(home: Path, before: dict[str, str]) -> None:
    assert fingerprint(home / "maya.duckdb") == before
    done = uac_here("--db", "maya.duckdb", "verify", cwd=home)
    assert done.returncode == 0, done.stderr


def temporaries(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


def make_store(path: Path) -> None:
    """A DuckDB database of another program at ``path``."""
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE precious AS SELECT 42 AS answer")
    con.close()


def start_big_eval(home: Path, out: Path | str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, "--db", "maya.duckdb", "eval", BIG, "--out", str(out), *extra],
        cwd=home,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_temporary(proc: subprocess.Popen[str], pattern: str) -> list[str]:
    """Wait until the writer has its temporary file (it is writing the result)."""
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline:
        found = glob.glob(pattern)
        if found:
            return found
        if proc.poll() is not None:
            pytest.fail(f"the writer ended before its temporary file was seen: {proc.stderr}")
        time.sleep(0.001)
    pytest.fail("hang: no temporary file")


# -- races: a file that becomes a store while the result is written --------------------------


def test_a_store_put_at_the_output_path_during_the_write_is_kept(
    home: Path, tmp_path: Path
) -> None:
    out = tmp_path / "result.json"
    proc = start_big_eval(home, out)
    wait_for_temporary(proc, str(tmp_path / ".result.json.*.tmp"))
    make_store(out)  # another program makes its database right there
    stored = sha(out)
    _, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 1 and "result.json" in err and err.count("\n") == 1, err
    assert sha(out) == stored
    assert duckdb.connect(str(out)).execute("SELECT answer FROM precious").fetchone() == (42,)
    assert temporaries(tmp_path) == []


def test_a_symbolic_link_re_pointed_during_the_write_never_lets_a_store_be_replaced(
    home: Path, tmp_path: Path
) -> None:
    """The check before the rename must look at the file the rename replaces. The link
    ``latest.json`` names ``a.json`` (new) when checked; while the result is written, the link
    is pointed at ``b.json`` and a store is put at ``a.json``. Replacing ``a.json`` now would
    destroy that store."""
    a, b, link = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "latest.json"
    link.symlink_to(a)
    proc = start_big_eval(home, link)
    wait_for_temporary(proc, str(tmp_path / ".a.json.*.tmp"))
    make_store(a)
    stored = sha(a)
    b.write_text("[]\n")
    link.unlink()
    link.symlink_to(b)
    proc.communicate(timeout=HANG)
    assert sha(a) == stored, "the store put at a.json was replaced by the result"
    assert duckdb.connect(str(a)).execute("SELECT answer FROM precious").fetchone() == (42,)


# -- kill -9 mid-write ----------------------------------------------------------------------


def test_a_kill_mid_write_leaves_the_old_file(home: Path, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    out.write_text("[1, 2, 3]\n")
    out.chmod(0o640)
    proc = start_big_eval(home, out)
    wait_for_temporary(proc, str(tmp_path / ".result.json.*.tmp"))
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=HANG)
    assert out.read_text() == "[1, 2, 3]\n"
    assert stat.S_IMODE(out.stat().st_mode) == 0o640


def test_the_temporary_file_a_kill_left_is_gone_after_the_next_write(
    home: Path, tmp_path: Path
) -> None:
    """A kill -9 cannot clean up after itself; the next write to the same file should (or the
    temporary should be made where a kill leaves nothing, e.g. O_TMPFILE). Otherwise every
    killed export leaves a hidden copy of the data (~26 MB here) beside the result, forever,
    and a forget never reaches it."""
    out = tmp_path / "result.json"
    out.write_text("[]\n")
    proc = start_big_eval(home, out)
    wait_for_temporary(proc, str(tmp_path / ".result.json.*.tmp"))
    time.sleep(0.5)  # some of the result is in the temporary file
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=HANG)
    # the next process clears a killed one's temporaries
    done = uac_process("--db", "maya.duckdb", "eval", "1", "--out", str(out), cwd=home)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == "1"
    assert temporaries(tmp_path) == [], "a killed write's temporary (a copy of data) is left"


# -- a second process holding its store open with a pending WAL ---------------------------


HOLDER = """
import sys, duckdb
con = duckdb.connect(sys.argv[1])
con.execute("SET checkpoint_threshold = '1GB'")
con.execute("CREATE TABLE IF NOT EXISTS precious (answer INTEGER)")
con.execute("INSERT INTO precious VALUES (42)")
print("ready", flush=True)
sys.stdin.readline()
con.execute("INSERT INTO precious VALUES (43)")
con.close()
print("closed", flush=True)
"""


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """Another process with ``w.duckdb`` open and rows in its WAL, not checkpointed."""
    db = tmp_path / "w.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE precious (answer INTEGER)")
    con.close()
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    assert Path(f"{db}.wal").stat().st_size > 0
    yield db, proc
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=HANG)


def _wal_fd(pid: int, wal: Path) -> str:
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == str(wal):
                return f"/proc/{pid}/fd/{fd}"
        except OSError:
            continue
    pytest.skip("the holder keeps no descriptor of its WAL open")


WAL_PATHS: dict[str, Callable[[Path, Path, int], tuple[str, list[str]]]] = {
    "the .wal itself, --force": lambda wal, tmp, pid: (str(wal), ["--force"]),
    "a symbolic link to it, --force": lambda wal, tmp, pid: (
        _symlink(tmp / "log.json", wal),
        ["--force"],
    ),
    "a hard link to it, --force": lambda wal, tmp, pid: (
        _hardlink(tmp / "log.json", wal),
        ["--force"],
    ),
    "the holder's /proc/PID/fd of it": lambda wal, tmp, pid: (_wal_fd(pid, wal), ["--force"]),
}


def _symlink(path: Path, to: Path) -> str:
    path.symlink_to(to)
    return str(path)


def _hardlink(path: Path, to: Path) -> str:
    os.link(to, path)
    return str(path)


@pytest.mark.parametrize("where", list(WAL_PATHS))
def test_the_pending_wal_of_another_process_survives_every_output(
    home: Path, tmp_path: Path, holder: tuple[Path, subprocess.Popen[str]], where: str
) -> None:
    db, proc = holder
    wal = Path(f"{db}.wal")
    wal_before = sha(wal)
    out, extra = WAL_PATHS[where](wal, tmp_path, proc.pid)
    done = uac_here("--db", "maya.duckdb", "eval", "1", "--out", out, *extra, cwd=home)
    if done.returncode != 0:
        one_line_error(done)
    assert sha(wal) == wal_before  # the WAL's bytes, as the holder wrote them
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == "closed\n"
    proc.wait(timeout=HANG)
    rows = duckdb.connect(str(db)).execute("SELECT answer FROM precious ORDER BY 1").fetchall()
    assert rows == [(42,), (43,)]


# -- /proc/self/fd in a notebook: the descriptor of the open store ----------------------------


def test_proc_self_fd_of_the_open_store_is_refused_in_a_notebook(
    maya_ip: Any, tmp_path: Path
) -> None:
    store = tmp_path / "maya.duckdb"
    fds = [
        f"/proc/self/fd/{fd}"
        for fd in os.listdir("/proc/self/fd")
        if os.path.realpath(f"/proc/self/fd/{fd}") == str(store)
    ]
    if not fds:
        pytest.skip("DuckDB keeps no descriptor of the store open")
    run(maya_ip, "from uac_kernel.render.charts import events_over_time, save_chart")
    run(maya_ip, "c = events_over_time(wb)")
    run(maya_ip, "n = len(wb.log())")
    head = store.read_bytes()[8:12]
    for fd in fds:  # no suffix: refused before anything is written
        result = maya_ip.run_cell(f"save_chart(c, {fd!r}, force=True)")
        assert result.error_in_exec is not None
    # through a symbolic link named as a chart, to the store's descriptor
    link = tmp_path / "fd.svg"
    link.symlink_to(fds[0])
    result = maya_ip.run_cell(f"save_chart(c, {str(link)!r}, force=True)")
    assert isinstance(result.error_in_exec, OutputRefused), result.error_in_exec
    assert "\n" not in str(result.error_in_exec)
    assert store.read_bytes()[8:12] == head == b"DUCK"
    assert run(maya_ip, "wb.verify().ok") and run(maya_ip, "len(wb.log()) == n")


# -- hostile names -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [["eval", "1"], ["sql", "SELECT * FROM Medication"]],
    ids=["eval", "sql"],
)
def test_a_name_with_control_characters_is_reported_on_one_escaped_line(
    home: Path, tmp_path: Path, argv: list[str]
) -> None:
    out = tmp_path / "a\x1b[31mred\nline.json"
    if argv[0] == "sql":
        out = out.with_suffix(".tsv")
    done = uac_here("--db", "maya.duckdb", *argv, "--out", str(out), cwd=home)
    assert done.returncode == 0, done.stderr
    assert out.exists()
    assert "\x1b" not in done.stdout, "a terminal escape from the file name reached the terminal"
    assert done.stdout.count("\n") == 1, done.stdout


def test_a_long_but_valid_file_name_is_written_or_refused_in_one_line(
    home: Path, tmp_path: Path
) -> None:
    """250 bytes is a valid name (NAME_MAX is 255); the temporary beside it is not."""
    out = tmp_path / ("x" * 245 + ".json")
    done = uac_here("--db", "maya.duckdb", "eval", "1", "--out", str(out), cwd=home)
    assert "Traceback" not in done.stderr, done.stderr[-600:]
    assert done.returncode == 0, done.stderr[-600:]
    assert out.read_text() == "1"
    assert temporaries(tmp_path) == []


def test_a_name_too_long_for_the_file_system_is_one_line(home: Path, tmp_path: Path) -> None:
    out = tmp_path / ("x" * 300 + ".json")
    one_line_error(uac_here("--db", "maya.duckdb", "eval", "1", "--out", str(out), cwd=home))


def test_a_name_that_is_not_utf8_is_written_without_a_traceback(home: Path, tmp_path: Path) -> None:
    out = os.fsencode(str(tmp_path)) + b"/\xff\xfe.json"
    done = subprocess.run(
        [*CLI, "--db", "maya.duckdb", "eval", "1", "--out", os.fsdecode(out)],
        cwd=home,
        capture_output=True,
        timeout=HANG,
    )
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
    assert Path(os.fsdecode(out)).read_text() == "1"


def test_an_empty_path_is_one_line(home: Path) -> None:
    one_line_error(uac_here("--db", "maya.duckdb", "eval", "1", "--out", "", cwd=home))


# -- paths that differ only by a trailing slash, a dot, .., case --------------------------------


@pytest.mark.parametrize(
    "spelled", ["maya.duckdb/", "maya.duckdb/.", "./fleet/../maya.duckdb", "maya.duckdb.wal"]
)
def test_the_store_spelled_otherwise_is_refused(home: Path, spelled: str) -> None:
    before = fingerprint(home / "maya.duckdb")
    one_line_error(
        uac_here("--db", "maya.duckdb", "eval", "1", "--out", spelled, "--force", cwd=home)
    )
    verified(home, before)


def test_dot_dot_through_a_symbolic_link_to_a_directory_is_refused(
    home: Path, tmp_path: Path
) -> None:
    (tmp_path / "sub").mkdir()
    (home / "deep").mkdir(exist_ok=True)
    (tmp_path / "into").symlink_to(home / "deep")
    before = fingerprint(home / "maya.duckdb")
    # the OS resolves "into" first, then "..": the store's folder, not tmp_path
    done = uac_here(
        "--db",
        "maya.duckdb",
        "eval",
        "1",
        "--out",
        str(tmp_path / "into/../maya.duckdb"),
        "--force",
        cwd=home,
    )
    one_line_error(done)
    verified(home, before)


def test_a_trailing_slash_names_a_directory_not_a_file(home: Path, tmp_path: Path) -> None:
    """`--out results/` asks for a directory; writing a file called `results` is not what was
    asked (and shadows the directory the user meant to make)."""
    done = uac_here("--db", "maya.duckdb", "eval", "1", "--out", f"{tmp_path}/results/", cwd=home)
    assert not (tmp_path / "results").is_file(), "a file named 'results' was written"
    one_line_error(done)


def test_a_path_differing_only_in_case_is_another_file(home: Path, tmp_path: Path) -> None:
    before = fingerprint(home / "maya.duckdb")
    done = uac_here("--db", "maya.duckdb", "eval", "1", "--out", "MAYA.DUCKDB", cwd=home)
    assert done.returncode == 0, done.stderr  # another file on a case-sensitive file system
    assert (home / "MAYA.DUCKDB").read_text() == "1"
    (home / "MAYA.DUCKDB").unlink()
    verified(home, before)


# -- dangling links, a store inside a fleet, a partition file -------------------------------


@pytest.mark.parametrize(
    "points_to", ["maya.duckdb.wal", "fleet/new.tsv", "fleet/not-yet/deeper.tsv"]
)
def test_a_dangling_link_into_the_store_or_fleet_is_refused(
    home: Path, tmp_path: Path, points_to: str
) -> None:
    link = tmp_path / "rows.tsv"
    link.symlink_to(home / points_to)
    before = fingerprint(home / "maya.duckdb")
    done = uac_here(
        "--db",
        "maya.duckdb",
        "sql",
        "SELECT * FROM Medication",
        "--out",
        str(link),
        "--force",
        cwd=home,
    )
    one_line_error(done)
    assert not (home / points_to).exists()
    verified(home, before)


def _a_partition(home: Path) -> Path:
    parts = [p for p in (home / "fleet").rglob("*.parquet") if p.is_file()]
    assert parts
    return parts[0]


def test_a_link_to_a_fleet_partition_is_refused_and_a_hard_link_leaves_it(
    home: Path, tmp_path: Path
) -> None:
    part = _a_partition(home)
    before = sha(part)
    soft = tmp_path / "soft.tsv"
    soft.symlink_to(part)
    err = one_line_error(
        uac_here("--db", "maya.duckdb", "sql", "SELECT 1", "--out", str(soft), "--force", cwd=home)
    )
    assert "fleet" in err
    hard = tmp_path / "hard.tsv"
    os.link(part, hard)
    assert "pass --force" in one_line_error(
        uac_here("--db", "maya.duckdb", "sql", "SELECT 1", "--out", str(hard), cwd=home)
    )
    done = uac_here(
        "--db", "maya.duckdb", "sql", "SELECT 1", "--out", str(hard), "--force", cwd=home
    )
    assert done.returncode == 0, done.stderr  # the name is replaced, never the partition's bytes
    assert sha(part) == before
    done = uac_here("--db", "maya.duckdb", "verify", "fleet", cwd=home)
    assert done.returncode == 0, done.stderr


def test_a_store_inside_a_fleet_directory_is_refused(home: Path) -> None:
    inner = home / "fleet" / "inner.duckdb"
    make_store(inner)
    try:
        stored = sha(inner)
        one_line_error(
            uac_here("--db", "maya.duckdb", "eval", "1", "--out", str(inner), "--force", cwd=home)
        )
        assert sha(inner) == stored
    finally:
        inner.unlink()


@pytest.mark.parametrize("suffix", [".png", ".svg", ".html", ".py", ".json", ".tsv", ".csv"])
def test_a_duckdb_file_named_as_any_kind_is_refused_with_force(
    home: Path, tmp_path: Path, suffix: str
) -> None:
    other = tmp_path / f"stats{suffix}"
    make_store(other)
    stored = sha(other)
    argv = {
        ".png": ["whatif", "maya.jsonl", "--as-of", "2024-03-01", "--chart"],
        ".svg": ["whatif", "maya.jsonl", "--as-of", "2024-03-01", "--chart"],
        ".html": ["whatif", "maya.jsonl", "--as-of", "2024-03-01", "--chart"],
        ".py": ["code", "--out"],
        ".json": ["eval", "1", "--out"],
        ".tsv": ["sql", "SELECT 1", "--out"],
        ".csv": ["sql", "SELECT 1", "--out"],
    }[suffix]
    one_line_error(uac_here("--db", "maya.duckdb", *argv, str(other), "--force", cwd=home))
    assert sha(other) == stored


# -- FIFOs, devices, read-only places, a full disk ------------------------------------------


def test_a_fifo_with_a_reader_gets_the_whole_result(home: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    done = uac_here("--db", "maya.duckdb", "eval", "[1, 2]", "--out", str(fifo), cwd=home)
    reader.join(HANG)
    assert done.returncode == 0, done.stderr
    assert got and got[0].replace(b" ", b"").replace(b"\n", b"") == b"[1,2]"
    assert stat.S_ISFIFO(fifo.lstat().st_mode)
    assert temporaries(tmp_path) == []


def test_dev_null_is_written_straight_through(home: Path) -> None:
    done = uac_here("--db", "maya.duckdb", "eval", "1", "--out", "/dev/null", cwd=home)
    assert done.returncode == 0, done.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_read_only_file_system_is_one_line(home: Path) -> None:
    err = one_line_error(
        uac_here("--db", "maya.duckdb", "eval", "1", "--out", "/sys/x.json", cwd=home)
    )
    assert "/sys/x.json" in err


def test_a_full_disk_with_force_over_another_kind_leaves_the_old_file(
    home: Path, tmp_path: Path
) -> None:
    out = tmp_path / "notes.md"
    out.write_text("my notes\n")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (65_536, 65_536))

    done = subprocess.run(
        [*CLI, "--db", "maya.duckdb", "eval", BIG, "--out", str(out), "--force"],
        cwd=home,
        capture_output=True,
        text=True,
        timeout=HANG,
        preexec_fn=limit,
    )
    assert "notes.md" in one_line_error(done)
    assert out.read_text() == "my notes\n"
    assert temporaries(tmp_path) == []


def test_a_replaced_file_through_a_link_keeps_the_targets_mode(home: Path, tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("[]\n")
    real.chmod(0o600)
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    done = uac_here("--db", "maya.duckdb", "eval", "1", "--out", str(link), cwd=home)
    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and real.read_text() == "1"
    assert stat.S_IMODE(real.stat().st_mode) == 0o600


# -- writers beside the faces: bench results, the marimo export's assets, the demo --------------


def test_the_locomo_progress_file_never_appends_to_a_store(home: Path, tmp_path: Path) -> None:
    """`uac bench locomo` keeps `<db stem>.locomo-progress.jsonl` in --out and appends to it
    with open('ab'): not through outputs.Output. A link there to a store is appended to."""
    from uac_kernel.bench import locomo
    from uac_kernel.model.client import ModelSettings

    data = Path(__file__).parent.parent / "fixtures" / "locomo_mini.json"
    victim = tmp_path / "victim.duckdb"
    make_store(victim)
    stored = sha(victim)
    out = tmp_path / "out"
    out.mkdir()
    (out / "bench.locomo-progress.jsonl").symlink_to(victim)
    with pytest.raises(Exception):  # noqa: B017 - offline with no record: it stops early
        locomo.run(
            data,
            model=ModelSettings(model="m", offline=True),
            db=tmp_path / "bench.duckdb",
            out=out,
            progress=False,
            limit=1,
        )
    assert sha(victim) == stored, "the progress header was appended to a DuckDB store"


def test_bench_alerts_into_a_store_path_is_one_line(home: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.duckdb"
    make_store(victim)
    stored = sha(victim)
    done = uac_here("bench", "alerts", "--set", "public", "--out", str(victim), cwd=tmp_path)
    # stderr has the progress bars; the error is the last line, and no traceback
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-800:]
    assert done.stderr.splitlines()[-1].startswith("uac: error: ")
    assert sha(victim) == stored


def test_the_marimo_export_never_copies_its_assets_over_a_store(home: Path, tmp_path: Path) -> None:
    """The page goes through Output, the front end is shutil.copytree'd into the directory:
    a file there named like one of marimo's (favicon.ico) that links to a store is written
    through."""
    pytest.importorskip("marimo")
    from uac_kernel.notebook.marimo_export import export_offline

    notebook = Path(__file__).parents[2] / "notebooks" / "marimo_tour.py"
    victim = tmp_path / "victim.duckdb"
    make_store(victim)
    stored = sha(victim)
    out = tmp_path / "site"
    out.mkdir()
    (out / "favicon.ico").symlink_to(victim)
    with contextlib.suppress(OutputRefused):  # refusing is safe
        export_offline(notebook, out)
    assert sha(victim) == stored, "marimo's favicon.ico was copied over the store"


def test_uac_demo_never_deletes_a_real_users_store_called_maya(tmp_path: Path) -> None:
    """`uac demo --db S` removes S when its only user is 'maya' (the demo's user id), whoever
    made it: here a store of Maya's own events, ingested by her."""
    jsonl(tmp_path / "mine.jsonl", STORE)
    done = uac_here("--db", "life.duckdb", "ingest", "mine.jsonl", "--user", "maya", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    before = fingerprint(tmp_path / "life.duckdb")
    done = uac_here("--db", "life.duckdb", "demo", cwd=tmp_path)
    assert fingerprint(tmp_path / "life.duckdb") == before, "the user's store was replaced"
    one_line_error(done)


def test_uac_demo_never_replaces_the_users_files_beside_its_store(tmp_path: Path) -> None:
    """The demo writes S.jsonl and S.py beside the store S: files the user never named. A
    user's own `life.jsonl` (her events) and `life.py` are replaced without a word."""
    (tmp_path / "life.jsonl").write_text('{"kind": "note", "text": "my own events"}\n')
    (tmp_path / "life.py").write_text("# my analysis\n")
    done = uac_here("--db", "life.duckdb", "demo", cwd=tmp_path)
    assert (tmp_path / "life.jsonl").read_text().startswith('{"kind": "note"'), done.stdout[:200]
    assert (tmp_path / "life.py").read_text() == "# my analysis\n"
