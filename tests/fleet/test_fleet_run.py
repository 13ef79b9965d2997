"""`uac fleet run` on a tiny fleet: the local process pool and a real local Ray instance give the
same results byte for byte; a rerun does nothing; a killed worker's task is retried and the
partition stays whole; bad data is a failed row; extraction keeps within the model-call budget
against the real openai client and `ChatServer`, 429s included."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.processes import suite_path

from uac_kernel.fleet.partition import Fleet
from uac_kernel.fleet.run import Job, RunProgress, run
from uac_kernel.fleet.verify import verify_fleet
from uac_kernel.model.client import ModelSettings
from uac_kernel.model.testing import ChatServer, Reply

ROOT = Path(__file__).resolve().parents[2]
# Ids that a path must not take raw: a dot, a slash, a tilde, a quote, non-ASCII.
USERS = ["ana", "bo.b/x", "~chi's", "dé ja", "eve"]
BAD = "zed"
COUNT = "{t: user.count(t) for t in user.types()}"


def events(i: int) -> list[dict[str, Any]]:
    """A few dozen events: trips added, updated and retracted, utterances; alerts for some."""
    out: list[dict[str, Any]] = []
    for n in range(8 + 3 * i):
        day = f"2025-0{1 + n % 9}-{10 + n % 18}T09:00:00"
        out.append(
            {
                "kind": "fact",
                "ts": day,
                "op": "add",
                "type": "Trip",
                "key": f"t{n}",
                "fields": {"destination": f"city {n}", "nights": n % 5 + 1},
                "source": f"trips#{n}",
            }
        )
        out.append({"kind": "utterance", "ts": day, "speaker": "user", "text": f"trip {n} ok"})
    out.append(
        {
            "kind": "fact",
            "ts": "2025-10-01T09:00:00",
            "op": "update",
            "type": "Trip",
            "key": "t1",
            "fields": {"nights": 9},
        }
    )
    out.append(
        {"kind": "fact", "ts": "2025-10-02T09:00:00", "op": "retract", "type": "Trip", "key": "t0"}
    )
    if i % 2 == 0:  # a penicillin allergy and amoxicillin: a standing alert
        out += [
            {
                "kind": "fact",
                "ts": "2025-10-03T09:00:00",
                "op": "add",
                "type": "Allergy",
                "key": "pen",
                "fields": {"substance": "penicillin", "reaction": "hives"},
            },
            {
                "kind": "fact",
                "ts": "2025-10-04T09:00:00",
                "op": "add",
                "type": "Medication",
                "key": "amox",
                "fields": {"name": "Amoxicillin 500 mg", "start": "2025-10-04"},
            },
        ]
    return out


def write_source(src: Path) -> Path:
    src.mkdir()
    for i, user in enumerate(USERS):
        lines = [json.dumps(e, ensure_ascii=False) for e in events(i)]
        (src / f"{urllib.parse.quote(user, safe='')}.jsonl").write_text("\n".join(lines) + "\n")
    # bad data: a fact without its key
    (src / f"{BAD}.jsonl").write_text(
        json.dumps({"kind": "fact", "ts": "2025-01-01T09:00:00", "op": "add", "type": "Trip"})
        + "\n"
    )
    return src


def tree(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


HELPER = '''
import os, time
from pathlib import Path

def pid(wb):
    """The worker process this task ran in."""
    return os.getpid()

def setting(wb, name, run):
    """What this worker's environment says for ``name``, and the directory it runs in (``run``
    tells the runs apart: a job already done is not run again)."""
    return [os.environ.get(name), os.getcwd()]

def late_note(wb, barrier, who):
    """Append a note; for one user, then wait at a barrier the test controls."""
    wb.ingest([{"kind": "utterance", "ts": "2025-12-01T10:00:00", "speaker": "user",
                "text": "a late note", "source": "late#1"}])
    if wb.user == who:
        d = Path(barrier)
        (d / f"pid-{os.getpid()}").write_text("")
        while not (d / "go").exists():
            time.sleep(0.02)
    return wb.eval("len(search('late note', 5))")
'''


@pytest.fixture(scope="module")
def helpers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A module of job functions: on sys.path, which spawned workers inherit, and on
    PYTHONPATH, which a Ray instance started after this passes to its workers."""
    path = tmp_path_factory.mktemp("helpers")
    (path / "fleet_helper.py").write_text(HELPER)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(path))
        patch.setenv("PYTHONPATH", os.pathsep.join([str(path), *sys.path]))
        yield path


@pytest.fixture(scope="module")
def ray_instance(helpers: Path) -> Iterator[None]:
    ray = pytest.importorskip("ray")
    # Ray's raylet dies when its dashboard agent takes over 15 s to start (a fixed timeout,
    # ray-project/ray#65983), which a machine busy with other work can cause: try again.
    for attempt in range(3):
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            break
        except Exception:
            ray.shutdown()
            if attempt == 2:
                raise
    yield
    ray.shutdown()


# The tests on Ray share one worker of pytest-xdist (--dist loadgroup): two local Ray instances
# at once would contend for Ray's fixed default ports.
@pytest.mark.xdist_group("ray")
def test_local_and_ray_give_the_same_results_and_a_rerun_does_nothing(
    tmp_path: Path, ray_instance: None
) -> None:
    src = write_source(tmp_path / "src")
    outputs = {}
    for engine in ("local", "ray"):
        root = tmp_path / engine
        seen: list[RunProgress] = []
        ingest = run(root, Job("ingest", (str(src),)), engine=engine, progress=seen.append)
        assert (ingest.total, ingest.ok, ingest.failed) == (6, 5, 1)
        assert seen[-1] == RunProgress(total=6, done=6, failed=1, skipped=0)
        bad = next(r for r in ingest.rows if r["user_id"] == BAD)
        assert bad["status"] == "failed" and "'key'" in bad["error"]
        assert Fleet(root).users() == sorted(USERS)  # nothing of the bad user was committed
        bench = run(root, Job("bench", (COUNT,)), engine=engine)  # checkpoint, alerts, query
        assert (bench.ok, bench.failed) == (5, 0)
        assert verify_fleet(root).ok
        outputs[engine] = (ingest, bench)

    for local, on_ray in zip(outputs["local"], outputs["ray"], strict=True):
        assert local.run_id == on_ray.run_id
        assert tree(local.run_dir / "results") == tree(on_ray.run_dir / "results")
        assert local.summary_path.read_bytes() == on_ray.summary_path.read_bytes()
        assert local.rows == on_ray.rows
    rows = {r["user_id"]: r for r in outputs["ray"][1].rows}
    assert json.loads(rows["ana"]["value"]) == {"Allergy": 1, "Medication": 1, "Trip": 7}
    assert json.loads(rows["bo.b/x"]["value"]) == {"Trip": 10}
    assert {u: r["alerts"] for u, r in rows.items()} == {
        "ana": 1,
        "bo.b/x": 0,
        "dé ja": 0,
        "eve": 1,
        "~chi's": 1,
    }
    assert {r["checkpoint_version"] for r in rows.values()} == {1}

    # A rerun of a finished run does nothing: no task, no commit, the same summary.
    root = tmp_path / "local"
    before = tree(root / "_commits")
    again = run(root, Job("bench", (COUNT,)), engine="local")
    assert (again.ran, again.skipped) == (0, 5) and "nothing to do" in again.summary()
    assert tree(root / "_commits") == before
    # Of a run with a failed user, only that user runs again (and fails again).
    retried = run(root, Job("ingest", (str(src),)), engine="local")
    assert (retried.ran, retried.skipped, retried.failed) == (1, 5, 1)
    assert tree(root / "_commits") == before


@pytest.mark.xdist_group("ray")
@pytest.mark.parametrize("engine", ["local", "ray"])
def test_a_killed_worker_is_retried_and_the_partition_stays_whole(
    tmp_path: Path, helpers: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    if engine == "ray":
        request.getfixturevalue("ray_instance")
    src = write_source(tmp_path / "src")
    root = tmp_path / "fleet"
    run(root, Job("ingest", (str(src),)), engine="local")
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    job = Job("call", ("fleet_helper:late_note", str(barrier), "eve"))
    done: list[Any] = []
    driver = threading.Thread(
        target=lambda: done.append(run(root, job, engine=engine, jobs=2, retries=2))
    )
    driver.start()
    deadline = time.monotonic() + 60
    while not list(barrier.glob("pid-*")) and time.monotonic() < deadline:
        time.sleep(0.02)
    [first] = list(barrier.glob("pid-*"))
    os.kill(int(first.name[4:]), signal.SIGKILL)  # the worker dies mid-task, before its commit
    (barrier / "go").write_text("")
    driver.join(120)
    [report] = done
    assert (report.ok, report.failed) == (5, 0)
    assert len(list(barrier.glob("pid-*"))) == 2  # the task ran again, in a new worker
    assert verify_fleet(root).ok
    assert {r["user_id"]: json.loads(r["value"]) for r in report.rows} == dict.fromkeys(USERS, 1)
    # the killed attempt committed nothing: one commit of the run, with the one note
    commits = [c for c in Fleet(root).commits("eve") if c["by"] == f"run {report.run_id}"]
    assert [c["rows"]["events"] for c in commits] == [1]


def extraction_answer(body: dict[str, Any]) -> str:
    prompt = " ".join(m["content"] for m in body["messages"] if m["role"] == "user")
    sources = sorted({s for s in prompt.split("[")[1:] for s in [s.split("]")[0]] if "#" in s})
    ops = [
        {
            "op": "add",
            "type": "Note",
            "key": source.replace("#", "-"),
            "fields": [{"name": "text", "value": source}],
            "utterances": [source],
        }
        for source in sources
    ]
    return json.dumps({"operations": ops})


def test_extract_keeps_within_the_model_call_budget_and_honours_429(tmp_path: Path) -> None:
    # one JSONL for all users, each line naming its user
    src = tmp_path / "turns.jsonl"
    turns = [
        {
            "user": u,
            "kind": "utterance",
            "ts": f"2025-03-{n + 1:02d}T10:00:00",
            "speaker": "user",
            "text": f"{u} says thing {n}",
            "source": f"{u}#{n}",
        }
        for n in range(25)  # three batches of extraction: three calls per user
        for u in ["u1", "u2", "u3", "u4"]
    ]
    src.write_text("\n".join(json.dumps(t) for t in turns) + "\n")
    root = tmp_path / "fleet"
    run(root, Job("ingest", (str(src),)))

    lock = threading.Lock()
    in_flight = [0, 0]  # now, most
    answered = [0]

    def responder(body: dict[str, Any]) -> Reply | str:
        with lock:
            in_flight[0] += 1
            in_flight[1] = max(in_flight[1], in_flight[0])
            first = answered[0] == 0
            answered[0] += 1
        try:
            time.sleep(0.3)
            if first:
                return Reply(status=429, retry_after=0.2)
            return extraction_answer(body)
        finally:
            with lock:
                in_flight[0] -= 1

    with ChatServer(responder) as server:
        model = ModelSettings(model="stand-in", base_url=server.base_url, timeout=10, max_retries=2)
        report = run(root, Job("extract"), jobs=3, concurrency=2, model=model)
        assert (report.ok, report.failed) == (4, 0)
        assert in_flight[1] <= 2
        calls = sum(r["calls"] for r in report.rows)
        assert calls == 12 and len(server.requests) == calls + 1  # the 429 was asked again
        assert all(r["tokens_in"] > 0 for r in report.rows)
        assert {r["value"] for r in report.rows} == {
            json.dumps({"applied": 3, "batches": 3, "held": 0, "pending": 0})
        }
        # A rerun makes no call: every user has a result.
        again = run(root, Job("extract"), jobs=3, concurrency=2, model=model)
        assert again.ran == 0 and len(server.requests) == calls + 1
    assert verify_fleet(root).ok


def test_the_command_line_and_a_missing_ray(tmp_path: Path) -> None:
    src = write_source(tmp_path / "src")
    root = tmp_path / "fleet"
    env = {**os.environ, "PYTHONPATH": suite_path()}

    def uac(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "uac_kernel.cli.main", "fleet", "run", *args],
            capture_output=True,
            text=True,
            timeout=120,
            **kw,
        )

    done = uac(str(root), "ingest", str(src), "--users", "ana,eve", env=env)
    assert done.returncode == 0, done.stderr
    assert "2 users: 2 ok, 0 failed" in done.stdout
    failed = uac(str(root), "ingest", str(src), "--jobs", "1", env=env)
    assert failed.returncode == 1
    assert f"failed {BAD}:" in failed.stdout and "1 user failed" in failed.stderr
    # without ray: one line that says what to install
    hidden = tmp_path / "no-ray"
    (hidden / "ray").mkdir(parents=True)
    (hidden / "ray" / "__init__.py").write_text("raise ImportError('no ray here')\n")
    no_ray = uac(
        str(root), "checkpoint", "--engine", "ray", env={**env, "PYTHONPATH": f"{hidden}:{ROOT}"}
    )
    assert no_ray.returncode == 1
    assert no_ray.stderr.strip().splitlines() == [
        "uac: error: uac fleet run --engine ray needs the 'fleet' extra (ray is not installed): "
        "pip install 'uac-kernel[fleet]'"
    ]


def test_a_long_temp_dir_path_does_not_stop_a_local_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local engine's budget manager listens on loopback TCP: a Unix socket under a TMPDIR
    this long would exceed the 108 bytes a socket path may have."""
    src = write_source(tmp_path / "src")
    deep = tmp_path / ("t" * 60) / ("u" * 60)
    deep.mkdir(parents=True)
    monkeypatch.setenv("TMPDIR", str(deep))
    monkeypatch.setattr("tempfile.tempdir", None)  # read TMPDIR again
    report = run(tmp_path / "fleet", Job("ingest", (str(src),)), jobs=2, progress=lambda p: None)
    assert (report.ok, report.failed) == (len(USERS), 1)
    assert not list(deep.iterdir())  # every task's store copy and the manager's files are gone


def test_a_worker_is_replaced_after_its_share_of_tasks(
    tmp_path: Path, helpers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers are recycled (each task leaves native memory behind): with 2 tasks a worker,
    5 users on one worker run in at least 3 processes, and every user is done once."""
    from uac_kernel.fleet import engines as _engines

    monkeypatch.setattr(_engines, "TASKS_PER_WORKER", 2)
    src = write_source(tmp_path / "src")
    root = tmp_path / "fleet"
    run(root, Job("ingest", (str(src),)), jobs=1, progress=lambda p: None)
    report = run(root, Job("call", ("fleet_helper:pid",)), jobs=1, progress=lambda p: None)
    assert (report.ok, report.failed) == (len(USERS), 0)
    pids = [json.loads(r["value"]) for r in report.rows]
    assert len(set(pids)) >= 3 and max(Counter(pids).values()) <= 2


def test_workers_see_the_drivers_environment_and_directory_as_they_are_at_each_run(
    tmp_path: Path, helpers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers are forked from a server started by the first run (it keeps the environment of
    that moment): a later run's workers still get the driver's environment and directory."""
    src = write_source(tmp_path / "src")
    root = tmp_path / "fleet"
    run(root, Job("ingest", (str(src),)), jobs=1, progress=lambda p: None)
    seen = []
    for n, where in enumerate((tmp_path, src)):
        monkeypatch.setenv("UAC_TEST_PROBE", f"value {n}")
        monkeypatch.chdir(where)
        job = Job("call", ("fleet_helper:setting", "UAC_TEST_PROBE", str(n)))
        report = run(root, job, jobs=2, users=["eve"], progress=lambda p: None)
        seen.append(json.loads(report.rows[0]["value"]))
    assert seen == [["value 0", str(tmp_path)], ["value 1", str(src)]]
