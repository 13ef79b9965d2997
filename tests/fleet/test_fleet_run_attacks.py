"""Outside attacks on session 22's fleet changes: ``Fleet.scan`` and `uac fleet run` failing a
damaged user alone (hostile commit directory names, strays in the wrong bucket, symlinked
directories, commit json that is huge, deep, not an object or names another user; `--users`,
`--limit`, reruns, the CLI and the magic), the local engine's budget manager on loopback TCP
(a stranger connecting without the authkey, a driver killed with SIGKILL), ``Workbench(...,
snapshots=False)`` never writing a snapshot, and checkout / verify / import reading hostile
part files' footers on a shared connection.

Real parts only: real DuckDB files and fleets, real process pools and CLI subprocesses.
Each case was found failing and is fixed; it stays as a test."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from multiprocessing.connection import Client
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers.constraints import TAX
from helpers.events import fact
from helpers.processes import alive, descendants, suite_path

from uac_kernel.checkpoints.snapshot import CLOSE_AFTER
from uac_kernel.core.errors import FleetError, UacError
from uac_kernel.fleet.checkout import checkout
from uac_kernel.fleet.export import export_store
from uac_kernel.fleet.importing import import_fleet
from uac_kernel.fleet.partition import Fleet, bucket, encode, parquet_source
from uac_kernel.fleet.run import Job, run
from uac_kernel.fleet.verify import verify_fleet
from uac_kernel.workbench import Workbench

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
ENV = {**os.environ, "PYTHONPATH": suite_path()}
LONG = "ü" * 26  # percent-encoded over 150 characters: its directory is the ~hash form
USERS = ["ann", "bob", "cat", "dan", "eve", "fay", LONG]
COUNT = Job("eval", ("len(user.all('Trip'))",))


def trips(user: str, n: int = 3) -> list[dict[str, Any]]:
    return [
        {**fact(f"2025-01-0{i}T09:00:00", "add", "Trip", f"t{i}", city=f"c{i}"), "source": f"s#{i}"}
        for i in range(1, n + 1)
    ]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fleet of USERS, three trips each, exported from a store (copied by each test)."""
    d = tmp_path_factory.mktemp("s22")
    for user in USERS:
        with Workbench(d / "s.duckdb", user=user) as wb:
            wb.ingest(trips(user))
    export_store(d / "s.duckdb", d / "fleet")
    return d / "fleet"


def fresh(base: Path, tmp_path: Path, name: str = "fleet") -> Path:
    root = tmp_path / name
    shutil.copytree(base, root, symlinks=True)
    return root


def commit_of(root: Path, user: str) -> Path:
    return Fleet(root).dir("_commits", user) / "000001.json"


def stray(root: Path, bucket_name: str, name: bytes, text: bytes = b"{garbage") -> Path:
    """A commit directory ``_commits/<bucket_name>/<name>`` holding one damaged commit."""
    d = os.path.join(os.fsencode(root), b"_commits", bucket_name.encode(), name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, b"000001.json"), "wb") as f:
        f.write(text)
    return Path(os.fsdecode(d))


def go(root: Path, job: Job = COUNT, **kw: Any) -> Any:
    return run(root, job, jobs=1, retries=0, progress=lambda p: None, **kw)


def status(report: Any) -> dict[str, tuple[str, str | None]]:
    return {r["user_id"]: (r["status"], r["error"]) for r in report.rows}


def uac(*args: str, env: dict[str, str] = ENV) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "uac_kernel.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.returncode, done.stdout[-500:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("uac: error: "), done.stderr[-2000:]
    return lines[0]


# --- 1. Fleet.scan and fleet run over damaged commit directories -----------------------------


def damage_many(root: Path) -> dict[str, str]:
    """Damage cat, dan, eve, fay, the long id, one stray and ann's part file, each its own way;
    the label each should fail under, with a word its error should hold."""
    commit_of(root, "cat").write_text('{"user": "cat", "junk": "' + "x" * (2 << 20) + '"}')
    commit_of(root, "dan").write_text("[" * 100_000 + "]" * 100_000)
    commit_of(root, "eve").write_text('["not", "an", "object"]')
    target = commit_of(root, "fay").with_name("elsewhere.json")
    os.replace(commit_of(root, "fay"), target)
    os.symlink(target.name, commit_of(root, "fay"))
    long_dir = Fleet(root).dir("_commits", LONG)
    (long_dir / "000001.json").write_text("{")
    wrong = "00" if bucket("zed") != "00" else "01"
    stray(root, f"bucket={wrong}", b"user=zed")
    [part] = Fleet(root).files("events", ["ann"])
    part.write_bytes(os.urandom(4096))
    return {
        "cat": "over",
        "dan": "nested too deep",
        "eve": "not a commit object",
        "fay": "symlink",
        long_dir.relative_to(root).as_posix(): "cannot read commit",
        f"_commits/bucket={wrong}/user=zed": "cannot read commit",
        "ann": "cannot be read",
    }


def test_each_damaged_user_fails_alone_under_its_label(base: Path, tmp_path: Path) -> None:
    root = fresh(base, tmp_path)
    expected = damage_many(root)
    readable, damaged = Fleet(root).scan()
    assert readable == ["ann", "bob"]
    assert set(damaged) == set(expected) - {"ann"}
    with pytest.raises(FleetError) as err:
        Fleet(root).users()
    assert "\n" not in str(err.value)
    report = go(root)
    got = status(report)
    assert got.pop("bob") == ("ok", "")
    assert set(got) == set(expected)
    for label, (st, error) in got.items():
        assert st == "failed" and error and expected[label] in error, (label, error)
        assert "\n" not in error and len(error) <= 2000
    assert (report.total, report.ok, report.failed) == (len(expected) + 1, 1, len(expected))
    with duckdb.connect() as con:
        rows = con.execute(
            "SELECT user_id, status FROM read_parquet(?) ORDER BY user_id",
            [str(report.summary_path)],
        ).fetchall()
    assert rows == sorted((r["user_id"], r["status"]) for r in report.rows)
    assert len(Fleet(root).commits("bob")) == 1


def test_rerun_skips_the_ok_tries_the_failed_again_and_a_repair_runs(
    base: Path, tmp_path: Path
) -> None:
    root = fresh(base, tmp_path)
    good = commit_of(root, "cat").read_bytes()
    commit_of(root, "cat").write_text("[]")
    first = go(root)
    assert status(first)["cat"][0] == "failed" and first.ok == len(USERS) - 1
    again = go(root)
    assert (again.ran, again.skipped, again.ok, again.failed) == (1, len(USERS) - 1, 0, 1)
    assert status(again) == status(first)
    commit_of(root, "cat").write_bytes(good)
    repaired = go(root)
    assert (repaired.ran, repaired.ok, repaired.failed) == (1, 1, 0)
    assert {s for s, _e in status(repaired).values()} == {"ok"}
    assert go(root).ran == 0


def test_users_and_limit_name_a_damaged_label(base: Path, tmp_path: Path) -> None:
    root = fresh(base, tmp_path)
    label = "_commits/bucket=00/user=zz"
    stray(root, "bucket=00", b"user=zz", b"[]")
    commit_of(root, "cat").write_text("{")
    named = go(root, users=[label, "cat"])
    assert {u: s for u, (s, _e) in status(named).items()} == {label: "failed", "cat": "failed"}
    first = go(root, limit=1)
    assert first.total == 1 and [r["user_id"] for r in first.rows] == [label]
    with pytest.raises(FleetError) as err:
        go(root, users=["zz"])
    assert "\n" not in str(err.value) and "'zz'" in str(err.value)


def test_stray_dir_named_with_a_non_utf8_escape_fails_alone(base: Path, tmp_path: Path) -> None:
    root = fresh(base, tmp_path)
    stray(root, "bucket=00", b"user=%FF")
    report = go(root)
    got = status(report)
    assert got.pop("_commits/bucket=00/user=%FF")[0] == "failed"
    assert {s for s, _e in got.values()} == {"ok"}


def test_cli_over_a_stray_dir_named_with_a_non_utf8_escape(base: Path, tmp_path: Path) -> None:
    root = fresh(base, tmp_path)
    stray(root, "bucket=00", b"user=%FF")
    for args in (
        ("fleet", "run", str(root), "--jobs", "1", "eval", "1"),
        ("fleet", "summary", str(root)),
        ("fleet", "sql", str(root), "SELECT 1"),
    ):
        one_line_error(uac(*args))


@pytest.mark.parametrize("kind", ["escaped-surrogate", "raw-bytes"])
def test_damaged_dir_whose_label_is_not_utf8(base: Path, tmp_path: Path, kind: str) -> None:
    root = fresh(base, tmp_path)
    if kind == "escaped-surrogate":
        stray(root, f"bucket={bucket(chr(0xD800))}", f"user={encode(chr(0xD800))}".encode())
    else:
        stray(root, "bucket=00", b"user=\xff\xfe")
    report = go(root)
    failed = [r for r in report.rows if r["status"] == "failed"]
    assert len(failed) == 1 and report.ok == len(USERS)


def test_cli_with_a_non_utf8_label_names_the_dir_printably(base: Path, tmp_path: Path) -> None:
    """The CLI over a raw non-UTF-8 stray: one failed line naming the directory escaped, the
    other users ok, and no store blamed (the run opens none)."""
    root = fresh(base, tmp_path)
    stray(root, "bucket=00", b"user=\xff")
    done = uac("fleet", "run", str(root), "--jobs", "1", "eval", "1")
    line = one_line_error(done)
    assert "1 user failed" in line and "uac.duckdb" not in line
    assert "failed _commits/bucket=00/user=\\udcff" in done.stdout


def test_damaged_dirs_error_is_one_line(base: Path, tmp_path: Path) -> None:
    root = fresh(base, tmp_path)
    stray(root, "bucket=00", b"user=a\nb")
    report = go(root)
    [bad] = [r for r in report.rows if r["status"] == "failed"]
    assert "\n" not in bad["error"]


def test_a_removed_damaged_dir_does_not_stay_failed(base: Path, tmp_path: Path) -> None:
    root = fresh(base, tmp_path)
    d = stray(root, "bucket=00", b"user=zz", b"[]")
    assert go(root).failed == 1
    shutil.rmtree(d)
    again = go(root)
    assert again.ran == 0
    assert [r["user_id"] for r in again.rows if r["status"] != "ok"] == []


def test_a_removed_damaged_dir_leaves_the_cli_with_nothing_to_do(
    base: Path, tmp_path: Path
) -> None:
    """The CLI face of the case above: nothing to do, exit 0, no stale failed line."""
    root = fresh(base, tmp_path)
    d = stray(root, "bucket=00", b"user=zz", b"[]")
    assert go(root).failed == 1
    shutil.rmtree(d)
    done = uac("fleet", "run", str(root), "--jobs", "1", "eval", "len(user.all('Trip'))")
    assert "nothing to do" in done.stdout and done.returncode == 0, done.stdout + done.stderr
    assert "failed" not in done.stdout.replace("0 failed", "")


def test_a_stray_copy_of_a_users_commit_dir_lists_them_once(base: Path, tmp_path: Path) -> None:
    root = fresh(base, tmp_path)
    wrong = "00" if bucket("ann") != "00" else "01"
    shutil.copytree(Fleet(root).dir("_commits", "ann"), root / "_commits" / f"bucket={wrong}" / "x")
    readable, damaged = Fleet(root).scan()
    assert readable == sorted(USERS)
    assert list(damaged) == [f"_commits/bucket={wrong}/x"]


def test_a_commit_naming_another_user_fails_its_owner(base: Path, tmp_path: Path) -> None:
    root = fresh(base, tmp_path)
    path = commit_of(root, "bob")
    meta = json.loads(path.read_text())
    meta["user"] = "carol"
    path.write_text(json.dumps(meta))
    got = status(go(root, limit=3))
    assert "carol" not in got
    assert got["bob"][0] == "failed"


def test_a_symlinked_commit_dir_out_of_the_fleet_is_no_user(base: Path, tmp_path: Path) -> None:
    root = fresh(base, tmp_path)
    outside = tmp_path / "outside"
    shutil.copytree(Fleet(root).dir("_commits", "bob"), outside)
    meta = json.loads((outside / "000001.json").read_text())
    meta["user"] = "mallory"
    (outside / "000001.json").write_text(json.dumps(meta))
    d = root / "_commits" / f"bucket={bucket('mallory')}"
    d.mkdir(exist_ok=True)
    os.symlink(outside, d / f"user={encode('mallory')}")
    readable, damaged = Fleet(root).scan()
    assert "mallory" not in readable and "symbolic link" in damaged["mallory"]
    # named, it is a failed row saying why: never run on the commits outside the fleet
    rows = {r["user_id"]: r for r in go(root, users=["mallory"]).rows}
    assert rows["mallory"]["status"] == "failed" and "symbolic link" in rows["mallory"]["error"]


def test_cli_prints_each_failed_user_on_one_line(base: Path, tmp_path: Path) -> None:
    root = fresh(base, tmp_path)
    stray(root, "bucket=00", b"user=a\nb")  # a raw newline in the label and its error
    commit_of(root, "cat").write_text("[]")
    done = uac("fleet", "run", str(root), "--jobs", "1", "eval", "1")
    line = one_line_error(done)
    assert "2 users failed" in line
    failed = [ln for ln in done.stdout.splitlines() if ln.startswith("  failed ")]
    assert len(failed) == 2, done.stdout
    assert any(ln.startswith("  failed cat: ") for ln in failed)
    assert any(ln.startswith("  failed _commits/bucket=00/user=a\\nb: ") for ln in failed)
    for args in (("fleet", "summary", str(root)), ("fleet", "sql", str(root), "SELECT 1")):
        one_line_error(uac(*args))


def magic_error(shell: Any, line: str) -> BaseException | None:
    result = shell.run_cell(line)
    return result.error_in_exec or result.error_before_exec


def test_magic_fleet_run_over_a_damaged_user_is_one_usage_error(
    uac_shell: Any, base: Path, tmp_path: Path
) -> None:
    from IPython.core.error import UsageError

    root = fresh(base, tmp_path)
    commit_of(root, "cat").write_text("{")
    for line in (f'%uac fleet run --jobs 1 "{root}" eval 1', f'%uac fleet "{root}"'):
        err = magic_error(uac_shell, line)
        assert isinstance(err, UsageError), (line, type(err).__name__, str(err)[:300])
        assert "\n" not in str(err).strip()


def test_magic_fleet_run_over_a_non_utf8_escape_dir(
    uac_shell: Any, base: Path, tmp_path: Path
) -> None:
    from IPython.core.error import UsageError

    root = fresh(base, tmp_path)
    stray(root, "bucket=00", b"user=%FF")
    err = magic_error(uac_shell, f'%uac fleet run --jobs 1 "{root}" eval 1')
    assert isinstance(err, UsageError), (type(err).__name__, str(err)[:300])


# --- 2. the local engine's budget manager on loopback TCP ------------------------------------

HELPER = '''
import os, re, time
from pathlib import Path

def wait(wb, barrier):
    """Mark this worker as started, then wait for the test's go."""
    d = Path(barrier)
    (d / f"pid-{os.getpid()}").write_text("")
    while not (d / "go").exists():
        time.sleep(0.02)
    return 1

def hold_gil(wb, barrier):
    """Mark this worker as started, then run a regex that holds the GIL for ages."""
    (Path(barrier) / f"pid-{os.getpid()}").write_text("")
    re.match(r"(a+)+$", "a" * 60 + "b")
    return 1
'''


def listening_ports(pids: set[int]) -> set[tuple[str, int]]:
    """The TCP addresses the processes ``pids`` listen on (from /proc)."""
    inodes = set()
    for pid in pids:
        try:
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    target = os.readlink(fd)
                    if target.startswith("socket:["):
                        inodes.add(target[8:-1])
        except OSError:
            continue
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        cols = line.split()
        if cols[3] == "0A" and cols[9] in inodes:
            host, port = cols[1].split(":")
            ip = ".".join(str(int(host[i : i + 2], 16)) for i in (6, 4, 2, 0))
            found.add((ip, int(port, 16)))
    return found


def start_call(
    root: Path, tmp_path: Path, fn: str, pipe: bool = True
) -> tuple[subprocess.Popen[str], Path]:
    helpers = tmp_path / "helpers"
    helpers.mkdir()
    (helpers / "s22helper.py").write_text(HELPER)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = {**ENV, "PYTHONPATH": f"{helpers}{os.pathsep}{ROOT}"}
    args = ["fleet", "run", str(root), "--jobs", "1", "--users", "ann", "--retries", "0"]
    proc = subprocess.Popen(
        [PY, "-m", "uac_kernel.cli.main", *args, "call", f"s22helper:{fn}", str(barrier)],
        env=env, text=True, start_new_session=True,
        stdout=subprocess.PIPE if pipe else subprocess.DEVNULL,
        stderr=subprocess.PIPE if pipe else subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while not list(barrier.glob("pid-*")):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    return proc, barrier


def test_a_stranger_on_the_budget_managers_port_is_refused_and_the_run_ends(
    base: Path, tmp_path: Path
) -> None:
    from multiprocessing import AuthenticationError

    root = fresh(base, tmp_path)
    proc, barrier = start_call(root, tmp_path, "wait")
    silent = None
    try:
        ports = listening_ports(descendants(proc.pid))
        assert len(ports) == 1, ports  # the manager's, and on loopback only
        [address] = ports
        assert address[0] == "127.0.0.1"
        with pytest.raises(AuthenticationError):
            Client(address, authkey=b"wrong key")
        with contextlib.closing(Client(address, authkey=None)) as conn:  # no handshake here
            assert conn.recv_bytes(256).startswith(b"#CHALLENGE#")
            conn.send_bytes(b"not the digest")
            assert conn.recv_bytes(256) == b"#FAILURE#"
        with socket.create_connection(address, timeout=5) as raw:
            raw.sendall(b"\xff\xff\xff\x7f" + b"garbage" * 100)
            with contextlib.suppress(OSError):
                raw.recv(1024)
        silent = socket.create_connection(address, timeout=5)  # says nothing, stays open
        (barrier / "go").write_text("")
        out, err = proc.communicate(timeout=60)
    finally:
        if silent is not None:
            silent.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err[-2000:]
    assert "1 user: 1 ok, 0 failed" in out


def test_a_worker_holding_the_gil_does_not_outlive_its_killed_driver(
    base: Path, tmp_path: Path
) -> None:
    root = fresh(base, tmp_path)
    proc, _barrier = start_call(root, tmp_path, "hold_gil", pipe=False)
    below = descendants(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)  # the driver only
    proc.wait()
    try:
        deadline = time.monotonic() + 5
        while any(alive(p) for p in below) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = {p for p in below if alive(p)}
    finally:
        for p in below:  # started by this test: end them by id
            if alive(p):
                os.kill(p, signal.SIGKILL)
    assert below and not left


# --- 3. Workbench(snapshots=False) -----------------------------------------------------------


def notes(start: int, stop: int) -> list[dict[str, Any]]:
    return [
        {**fact(f"2025-0{1 + k % 9}-{10 + k % 18}T09:00:00", "add", "Note", f"n{k}", text=f"n {k}"),
         "source": f"n#{k}"}
        for k in range(start, stop)
    ]  # fmt: skip


def workout(db: Path, snapshots: bool) -> list[Any]:
    """Every kind of write, then the answers a workbench gives, before and after a reopen."""
    answers: list[Any] = []
    with Workbench(db, user="u", snapshots=snapshots) as wb:
        wb.ingest(notes(0, CLOSE_AFTER + 50))
        wb.ingest([
            {**fact("2025-03-01T09:00:00", "add", "Medication", "amox", name="amoxicillin"),
             "source": "m#1"},
            {**fact("2025-03-01T09:00:00", "add", "Allergy", "pen", substance="penicillin"),
             "source": "a#1"},
        ])  # fmt: skip
        answers.append(sorted(a.rule for a in wb.alerts()))
        wb.constrain(TAX, key="tax")
        cp = wb.checkpoint()
        cell = wb.cell("Medication")
        wb.apply_edit(
            cell.replace("amoxicillin", "azithromycin"), version=cp.version, part="Medication"
        )
        wb.forget(source="n#3")
        answers += [wb.checkpoint().code, wb.eval("len(user.all('Note'))")]
        answers += [sorted(a.rule for a in wb.alerts()), wb.sql("SELECT count(*) FROM Note").rows]
    with Workbench(db, user="u", snapshots=snapshots) as wb:
        answers += [wb.eval("len(user.all('Note'))"), sorted(a.rule for a in wb.alerts())]
        wb.ingest(notes(CLOSE_AFTER + 50, 2 * CLOSE_AFTER + 60))
        answers += [wb.eval("len(user.all('Note'))"), wb.code()]
    with Workbench(db, user="u", snapshots=snapshots) as wb:
        answers.append(wb.eval("sorted(r.key for r in user.all('Note'))[:5]"))
    return answers


def test_a_workbench_without_snapshots_writes_none_and_answers_the_same(tmp_path: Path) -> None:
    without = workout(tmp_path / "without.duckdb", snapshots=False)
    with_ = workout(tmp_path / "with.duckdb", snapshots=True)
    assert without == with_
    with duckdb.connect(str(tmp_path / "without.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM snapshots").fetchone() == (0,)
        assert con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'uac_snap'"
        ).fetchone() == (0,)
    with duckdb.connect(str(tmp_path / "with.duckdb"), read_only=True) as con:
        row = con.execute("SELECT count(*) FROM snapshots").fetchone()
        assert row is not None and row[0] > 0  # the same work does write one with snapshots


# --- 4. hostile part files in checkout, verify, import ---------------------------------------


def rewrite(path: Path, select: str) -> None:
    out = path.with_name("edited.parquet.x")
    with duckdb.connect() as con:
        target = str(out).replace("'", "''")
        query = select.format(src=parquet_source([path]))
        con.execute(f"COPY ({query}) TO '{target}' (FORMAT parquet)")
    os.replace(out, path)


def swap_for_symlink(path: Path) -> None:
    target = path.with_name("target.bin")
    os.replace(path, target)
    os.symlink(target.name, path)


def huge_then_footer(path: Path) -> None:
    """A sparse 3 GiB hole, then the real file: the footer reads, the offsets do not."""
    data = path.read_bytes()
    with path.open("wb") as f:
        f.seek(3 << 30)
        f.write(data)


PART_DAMAGE = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:-20]),
    "garbage": lambda p: p.write_bytes(os.urandom(5000)),
    "empty": lambda p: p.write_bytes(b""),
    "magic-only": lambda p: p.write_bytes(b"PAR1" + b"\0" * 100 + b"PAR1"),
    "wrong-type": lambda p: rewrite(
        p, "SELECT * REPLACE (CAST(user_seq AS VARCHAR) AS user_seq) FROM {src}"
    ),
    "extra-column": lambda p: rewrite(p, "SELECT *, 1 AS extra FROM {src}"),
    "missing-column": lambda p: rewrite(p, "SELECT * EXCLUDE (payload) FROM {src}"),
    "directory": lambda p: (p.unlink(), p.mkdir()),
    "symlink": swap_for_symlink,
    "huge": huge_then_footer,
}


@pytest.mark.parametrize("kind", list(PART_DAMAGE))
def test_hostile_part_file_is_one_line_and_leaves_no_store(
    base: Path, tmp_path: Path, kind: str
) -> None:
    root = fresh(base, tmp_path, "o'q fleet")  # a quote and a space in every path read
    [part] = Fleet(root).files("events", ["ann"])
    PART_DAMAGE[kind](part)
    out = tmp_path / "ann.duckdb"
    with pytest.raises(FleetError) as err:
        checkout(Fleet(root), "ann", out)
    text = str(err.value)
    assert "\n" not in text and "'ann'" in text, text
    # the file by name, or (rows unreadable past a sound footer) the command that names it
    assert part.name in text or f"uac verify {root}" in text, text
    assert not out.exists() and not Path(f"{out}.wal").exists()
    checkout(Fleet(root), "bob", tmp_path / "bob.duckdb")  # the others still check out
    report = verify_fleet(root)
    assert not report.ok and all("\n" not in p for p in report.problems)
    assert any("'ann'" in p for p in report.problems)
    assert not any("'bob'" in p for p in report.problems)
    store = tmp_path / "imported.duckdb"
    with pytest.raises(UacError) as err:
        import_fleet(root, store)
    assert "\n" not in str(err.value) and "'ann'" in str(err.value)
    if store.exists():
        with duckdb.connect(str(store), read_only=True) as con:
            assert con.execute("SELECT count(*) FROM events").fetchone() == (0,)


# --- a driver whose current directory was removed ---------------------------------------------


def test_a_run_from_a_removed_current_directory_is_one_fleet_error(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = fresh(base, tmp_path)
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.raises(FleetError, match="current directory") as info:
        run(root, COUNT, jobs=1, retries=0, users=["ann"], progress=lambda p: None)
    assert "\n" not in str(info.value)


def test_cli_run_from_a_removed_current_directory_is_one_line(base: Path, tmp_path: Path) -> None:
    root = fresh(base, tmp_path)
    gone = tmp_path / "gone"
    gone.mkdir()
    script = (
        "import os, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); "
        "from uac_kernel.cli.main import main; sys.exit(main(sys.argv[2:]))"
    )
    args = ["fleet", "run", str(root), "--jobs", "1", "--users", "ann", "eval", "1"]
    proc = subprocess.run(
        [PY, "-c", script, str(gone), *args], env=ENV, text=True, capture_output=True, timeout=120
    )
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.startswith("uac: error:") and "current directory" in proc.stderr
