"""Many users: what a fleet run costs per user, how it scales with workers, how extraction
scales with the model-call budget, and how many bytes a user's event takes on disk.

Every run is a whole ``uac fleet run`` process, as a person would type it; the fleets are
generated (``scale.History``: adds, updates and retractions of eight record types, plus facts
that the shipped rules alert on), ingested once with ``fleet run ... ingest SRC`` and copied by
hard links (a partition's files are never rewritten, so a copy costs nothing and each run
starts from the same committed state):

1. **population**: the ``bench`` job (checkpoint + alerts + one query, each timed per user by
   the run itself in ``timings.parquet``) over fleets of 100, 1,000 and 2,000 users of 1,000
   events: the per-user cost must stay flat (within ±20%) as the population grows;
2. **throughput**: the same job over one fleet with ``--engine ray`` and ``--engine local`` at
   1 and 2 workers, interleaved round by round: users per second of the whole process (the Ray
   runs join one local instance the bench starts, through ``RAY_ADDRESS``, as on a cluster);
3. **extract**: ``fleet run ... extract`` over 200 users against ``uac_kernel.model.testing.ChatServer``
   answering every call after 200 ms, at model-call budgets (``--concurrency``) 1, 8 and 32,
   against what the latency predicts (calls × latency / budget) and the CPU floor (the same run
   with no latency);
4. **bytes**: bytes per event on disk of a single-file store holding users and of the fleet
   directory ``uac export`` writes from it, and of the fleet after ingest and after the bench.

``python bench/fleet.py --quick`` runs small sizes in a few minutes; without it, the sizes
above (about an hour on 2 cores: some 9,000 user tasks, most of 1,000 events).
``--report FILE`` prints the figures of a results file as text. Results:
``bench/results/fleet.json`` (``fleet_quick.json``), each stage with its date, the engine's
commit and the machine's load; a stage that cannot measure records its error and the others
go on. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import duckdb
import orjson
from scale import History, machine  # bench/scale.py, beside this script

from uac_kernel.model.testing import ChatServer, Reply
from uac_kernel.workbench import Workbench

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
SEED = 20261202
LATENCY = 0.2  # seconds the chat server waits before each answer (extract)
# The question of the bench job: one typical aggregate over the largest type.
QUERY = "round(sum(t.amount for t in user.all('Transaction') if t.category == 'groceries'), 2)"
TARGETS = {
    "population_flat_within": 0.20,  # per-user cost at each population / at the smallest
    "ray_two_over_one_workers": 1.7,  # throughput with 2 workers / with 1 (at least)
    "ray_over_local_same_workers": 1.3,  # ray wall time / local wall time (at most)
}


class BenchFailed(Exception):
    """A stage could not measure (a run failed, Ray did not start): recorded, the rest go on."""


@dataclass(frozen=True)
class Sizes:
    populations: tuple[int, ...]
    events: int  # per user
    throughput_users: int
    rounds: int  # interleaved rounds of the four throughput runs
    extract_users: int
    turns: int  # user turns per user to extract (10 per model call)
    budgets: tuple[int, ...]
    store_users: int  # users of 1,000 events in the single-file store of the bytes figure


FULL = Sizes((100, 1_000, 2_000), 1_000, 200, 2, 200, 50, (1, 8, 32), 20)
# Quick: every stage in small, including extraction with budgets a 2-core machine can start
# workers for in seconds.
QUICK = Sizes((10, 20, 40), 100, 12, 1, 4, 100, (1, 2, 4), 10)
STORE_EVENTS = 1_000  # per user in the bytes figure's store, at every size


# -- the users ---------------------------------------------------------------------------------


def user_id(i: int) -> str:
    return f"user-{i:05d}"


def file_stem(user: str) -> str:
    """The name ``fleet run ... ingest SRC`` reads a user from (``unquote(stem)``)."""
    return quote(user, safe="").replace(".", "%2E").replace("~", "%7E")


def _fact(ts: datetime, op: str, t: str, key: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "fact", "ts": ts.isoformat(), "op": op, "type": t, "key": key, "fields": fields}


def alert_facts(rng: random.Random, after: datetime) -> list[dict[str, Any]]:
    """Facts the shipped rules alert on, for some users: a drug the user is allergic to (about
    a third), a passport that expires before a planned trip ends (about a third)."""
    day = after.date()
    out: list[dict[str, Any]] = []
    if rng.random() < 0.35:
        drug = rng.choice(("amoxicillin", "ampicillin", "augmentin"))
        out.append(
            _fact(after, "add", "Allergy", "allergy-penicillin", {"substance": "penicillin"})
        )
        out.append(
            _fact(
                after,
                "add",
                "Medication",
                f"med-{drug}",
                {"name": drug, "dose_mg": 500.0, "start": day.isoformat(), "active": True},
            )
        )
    if rng.random() < 0.35:
        start = day + timedelta(days=rng.randint(10, 40))
        out.append(
            _fact(
                after,
                "add",
                "Passport",
                "passport",
                {
                    "holder": "me",
                    "country": "USA",
                    "expires": (start + timedelta(days=rng.randint(-5, 120))).isoformat(),
                },
            )
        )
        out.append(
            _fact(
                after,
                "add",
                "Trip",
                "trip-planned",
                {
                    "destination": "Tokyo",
                    "country": "Japan",
                    "international": True,
                    "start": start.isoformat(),
                    "end": (start + timedelta(days=rng.randint(3, 14))).isoformat(),
                },
            )
        )
    return out


def history(i: int, events: int) -> list[dict[str, Any]]:
    """User ``i``'s ``events`` fact events: a seeded ``History`` with the alert facts last."""
    rng = random.Random(SEED + i)
    gen = History(events, seed=SEED + i)
    body = [gen.next() for _ in range(events)]
    extra = alert_facts(rng, datetime.fromisoformat(body[-1]["ts"]))
    body = body[: events - len(extra)]
    last = datetime.fromisoformat(body[-1]["ts"])
    for k, ev in enumerate(extra, 1):
        ev["ts"] = (last + timedelta(seconds=k)).isoformat()
    return body + extra


def write_users(directory: Path, lines: Iterable[tuple[str, list[dict[str, Any]]]]) -> Counter[str]:
    """One ``<enc>.jsonl`` per user; the count of each ``op``/``kind`` written."""
    directory.mkdir(parents=True, exist_ok=True)
    made = Counter[str]()
    for user, events in lines:
        (directory / f"{file_stem(user)}.jsonl").write_bytes(
            b"".join(orjson.dumps(ev) + b"\n" for ev in events)
        )
        made.update(ev.get("op", ev["kind"]) for ev in events)
        made["users"] += 1
    return made


def conversation(i: int, turns: int) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """User ``i``'s ``turns`` utterances, each stating one new record, and the operation a
    model would extract from each turn, by the turn's source."""
    gen = History(turns * 4, seed=SEED + 100_000 + i)
    user = user_id(i)
    said: list[dict[str, Any]] = []
    answers: dict[str, dict[str, Any]] = {}
    while len(said) < turns:
        ev = gen.next()
        if ev["op"] != "add":
            continue
        source = f"{user}#turn-{len(said) + 1}"
        fields = ev["fields"]
        text = f"New {ev['type']}: " + ", ".join(f"{k} {v}" for k, v in fields.items())
        said.append(
            {"kind": "utterance", "ts": ev["ts"], "speaker": "user", "text": text, "source": source}
        )
        answers[source] = {
            "op": "add",
            "type": ev["type"],
            "key": ev["key"],
            "fields": [{"name": k, "value": v} for k, v in fields.items()],
            "utterances": [source],
        }
    return said, answers


class Extractor:
    """The model behind the chat server: for each turn in the prompt (``[source] ...``), the
    operation ``conversation`` recorded for it, after ``latency`` seconds."""

    TURN = re.compile(r"^\[([^\]]+)\] ", re.MULTILINE)

    def __init__(self, answers: dict[str, dict[str, Any]], latency: float) -> None:
        self.answers = answers
        self.latency = latency

    def __call__(self, body: dict[str, Any]) -> Reply:
        prompt = " ".join(m["content"] for m in body["messages"] if m["role"] == "user")
        ops = [self.answers[s] for s in self.TURN.findall(prompt) if s in self.answers]
        return Reply(content=json.dumps({"operations": ops}), delay=self.latency)


# -- fleets on disk ----------------------------------------------------------------------------


def copy_fleet(src: Path, dst: Path, users: Iterable[str] | None = None) -> Path:
    """Hard-link the committed partitions of ``users`` (all when None) of the fleet at ``src``
    into a new fleet at ``dst``, without its runs. Part files and commit files are written once
    and never changed, so the copy shares them safely."""
    wanted = None if users is None else {f"user={file_stem(u)}" for u in users}
    dst.mkdir(parents=True)
    for top in src.iterdir():
        if top.is_file():
            shutil.copy2(top, dst / top.name)
            continue
        if top.name == "runs" or top.name.startswith("."):  # runs, and an export's staging
            continue
        for bucket in top.iterdir():
            for part in bucket.iterdir():
                if wanted is not None and part.name not in wanted:
                    continue
                into = dst / top.name / bucket.name / part.name
                into.mkdir(parents=True)
                for f in part.iterdir():
                    os.link(f, into / f.name)
    return dst


def tree_bytes(root: Path, skip: tuple[str, ...] = ()) -> dict[str, int]:
    """Bytes of the files under each top-level directory of ``root`` (and ``files``)."""
    out: dict[str, int] = {}
    for top in sorted(root.iterdir()):
        if top.name in skip:
            continue
        files = [top] if top.is_file() else [p for p in top.rglob("*") if p.is_file()]
        out[top.name] = sum(p.stat().st_size for p in files)
        out["files"] = out.get("files", 0) + len(files)
    return out


def the_run(fleet: Path, job: str) -> Path:
    """The directory of the one run of ``job`` in ``fleet``."""
    found = [d for d in (fleet / "runs").iterdir() if _job_name(d) == job]
    if len(found) != 1:
        raise BenchFailed(f"expected one {job} run in {fleet}/runs, found {len(found)}")
    return found[0]


def _job_name(run: Path) -> str:
    spec = json.loads((run / "run.json").read_text())
    job = spec.get("job", spec)
    return str(job.get("name") if isinstance(job, dict) else job)


def parquet_rows(path: Path) -> list[dict[str, Any]]:
    con = duckdb.connect()
    try:
        rel = con.execute("SELECT * FROM read_parquet(?)", [str(path)])
        names = [d[0] for d in rel.description]
        return [dict(zip(names, row, strict=True)) for row in rel.fetchall()]
    finally:
        con.close()


# -- whole processes ---------------------------------------------------------------------------


def uac_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)  # a Ray run joins the bench's own instance, named in ``extra``
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env.setdefault("OPENAI_API_KEY", "not-needed")
    env["RAY_USAGE_STATS_ENABLED"] = "0"  # no prompt, no network
    # The bench's own Ray instance listens on 127.0.0.1 only; its drivers join it without the
    # token a cluster would hand out.
    env["RAY_AUTH_MODE"] = "disabled"
    env["TQDM_DISABLE"] = "1"
    env.update(extra)
    return env


def uac(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run one whole ``uac`` process: its wall seconds, the CPU seconds of it and the children it
    reaped (a local pool's workers; not Ray's, which its own daemons start), its peak RSS, the
    1-minute load average before and after, and its output."""
    cmd = [sys.executable, "-m", "uac_kernel.cli.main", *args]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=uac_env(**(env or {})), cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text, error = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if code != 0:
        raise BenchFailed(f"uac {' '.join(args)} failed ({code}):\n{error[-3000:]}")
    return {
        "wall_s": wall,
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "load_before": load,
        "load_after": os.getloadavg()[0],
        "stdout_tail": text[-400:],
    }


# Holds a local Ray instance for the bench's Ray runs and prints its address; stops it (and
# every process it started) when its stdin closes.
RAY_HOLDER = """
import sys, ray
ray.init(
    num_cpus=int(sys.argv[1]),
    include_dashboard=False,
    log_to_driver=False,
    _node_ip_address="127.0.0.1",
)
print(ray.get_runtime_context().gcs_address, flush=True)
sys.stdin.read()
ray.shutdown()
"""


class RayInstance:
    """A local Ray instance of ``cpus`` CPUs that ``fleet run --engine ray`` joins through
    ``RAY_ADDRESS``, as it joins a cluster: started once (its start is timed apart; a busy
    machine can make Ray's own 30 s start deadline fail, so it tries up to three times)."""

    def __init__(self, cpus: int) -> None:
        self.cpus = cpus
        self.proc: subprocess.Popen[str] | None = None
        self.address = ""
        self.start_s = 0.0
        self.attempts = 0

    def __enter__(self) -> RayInstance:
        while not self.address:
            self.attempts += 1
            t0 = time.perf_counter()
            self.proc = subprocess.Popen(
                [sys.executable, "-c", RAY_HOLDER, str(self.cpus)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                env=uac_env(),
            )
            assert self.proc.stdout is not None
            self.address = self.proc.stdout.readline().strip()
            self.start_s = time.perf_counter() - t0
            if not self.address:
                self.proc.wait()
                if self.attempts == 3:
                    raise BenchFailed("could not start a local Ray instance (3 attempts)")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:  # its shutdown hung: end the holder we started
                self.proc.kill()
                self.proc.wait()


def fleet_run(fleet: Path, job: list[str], *, engine: str = "local", jobs: int = 2,
              options: Iterable[str] = (), ray: str = "") -> dict[str, Any]:  # fmt: skip
    """One whole ``uac fleet run`` process; ``ray`` is the address of the Ray instance to join."""
    args = ["fleet", "run", str(fleet), "--engine", engine, "--jobs", str(jobs), *options, *job]
    return {"engine": engine, "jobs": jobs, **uac(*args, env={"RAY_ADDRESS": ray} if ray else {})}


# The steps of the bench job proper; a task also checks out, opens, closes and commits.
JOB_STEPS = ("checkpoint", "alerts", "query")


def _spread(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {
        "mean": statistics.fmean(xs),
        "median": statistics.median(xs),
        "p90": xs[min(len(xs) - 1, int(0.9 * len(xs)))],
    }


def user_laps(rows: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Seconds of each step by user, from ``timings.parquet`` rows (user_id, step, seconds)."""
    laps: dict[str, dict[str, float]] = {}
    for r in rows:
        laps.setdefault(r["user_id"], {})[r["step"]] = float(r["seconds"])
    return laps


def step_stats(laps: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Mean, median and 90th percentile over users of each step's seconds, of the job's own
    steps together (``job``: checkpoint + alerts + query) and of the whole task (``task``:
    every step, checkout to commit)."""
    steps = sorted({s for user in laps.values() for s in user})
    out: dict[str, Any] = {"users": len(laps), "steps": steps}
    for s in steps:
        out[s] = _spread([user.get(s, 0.0) for user in laps.values()])
    out["job"] = _spread([sum(user.get(s, 0.0) for s in JOB_STEPS) for user in laps.values()])
    out["task"] = _spread([sum(user.values()) for user in laps.values()])
    return out


def summary_totals(run: Path) -> dict[str, Any]:
    rows = parquet_rows(run / "summary.parquet")
    status = Counter(r["status"] for r in rows)
    alerts = Counter[str]()
    for r in rows:
        alerts.update(json.loads(r["alerts_by_rule"] or "{}"))
    return {
        "users": len(rows),
        "status": dict(status),
        "events_before": sum(r["events_before"] or 0 for r in rows),
        "events_appended": sum(r["events_appended"] or 0 for r in rows),
        "calls": sum(r["calls"] or 0 for r in rows),
        "tokens_in": sum(r["tokens_in"] or 0 for r in rows),
        "tokens_out": sum(r["tokens_out"] or 0 for r in rows),
        "alerts": sum(r["alerts"] or 0 for r in rows),
        "alerts_by_rule": dict(alerts.most_common()),
    }


# -- the stages --------------------------------------------------------------------------------


def build_fleet(work: Path, n: int, events: int) -> dict[str, Any]:
    """Generate ``n`` users of ``events`` facts and ingest them into a new fleet, ``work/fleet``
    (one run)."""
    src = work / "src"
    t0 = time.perf_counter()
    made = write_users(src, ((user_id(i), history(i, events)) for i in range(n)))
    generated = time.perf_counter() - t0
    fleet = work / "fleet"
    ran = fleet_run(fleet, ["ingest", str(src)])
    run = the_run(fleet, "ingest")
    totals = summary_totals(run)
    if totals["status"].get("ok") != n:
        raise BenchFailed(f"ingest: {totals['status']} of {n} users")
    held = tree_bytes(fleet, skip=("runs",))
    return {
        "users": n,
        "events_per_user": events,
        "generated": dict(made),
        "generate_s": generated,
        "ingest": {**ran, **totals, "events_per_s": n * events / ran["wall_s"]},
        "bytes_after_ingest": held,
        "per_event_after_ingest": per_event(held, n, events),
    }


def bench_job(fleet: Path, engine: str, jobs: int, ray: str = "") -> dict[str, Any]:
    ran = fleet_run(fleet, ["bench", QUERY], engine=engine, jobs=jobs, ray=ray)
    run = the_run(fleet, "bench")
    totals = summary_totals(run)
    laps = user_laps(parquet_rows(run / "timings.parquet"))
    users = totals["users"]
    if totals["status"].get("ok") != users:
        raise BenchFailed(f"bench in {fleet}: {totals['status']}")
    return {
        **ran,
        **totals,
        "users_per_s": users / ran["wall_s"],
        "timings": step_stats(laps),
        "laps": laps,
    }


def stage_population(work: Path, fleet: Path, sizes: Sizes, log: Any) -> dict[str, Any]:
    runs = []
    for p in sizes.populations:
        sub = copy_fleet(fleet, work / f"pop-{p}", [user_id(i) for i in range(p)])
        log(f"population {p}: bench job")
        r = bench_job(sub, "local", 2)
        r["population"] = p
        first = {user_id(i) for i in range(sizes.populations[0])}
        r["first_users_job_mean"] = statistics.fmean(
            sum(laps.get(s, 0.0) for s in JOB_STEPS)
            for user, laps in r.pop("laps").items()
            if user in first
        )
        r["bytes_after_bench"] = tree_bytes(sub, skip=("runs",))
        runs.append(r)
        shutil.rmtree(sub)
    base = runs[0]["timings"]["job"]["mean"]
    for r in runs:
        r["per_user_vs_smallest"] = r["timings"]["job"]["mean"] / base
        # The same users in every population: what differs is only how many others there are.
        r["first_users_vs_smallest"] = r["first_users_job_mean"] / runs[0]["first_users_job_mean"]
    worst = max(abs(r["per_user_vs_smallest"] - 1) for r in runs)
    return {
        "runs": runs,
        "worst_deviation": worst,
        "flat": worst <= TARGETS["population_flat_within"],
    }


def stage_throughput(work: Path, fleet: Path, sizes: Sizes, log: Any) -> dict[str, Any]:
    users = [user_id(i) for i in range(sizes.throughput_users)]
    order = [("local", 1), ("ray", 1), ("local", 2), ("ray", 2)]
    runs: list[dict[str, Any]] = []
    log("throughput: start a local Ray instance of 2 CPUs")
    with RayInstance(2) as ray:
        for rnd in range(sizes.rounds):
            # Alternate the order round by round so neither engine always runs first.
            for engine, jobs in order if rnd % 2 == 0 else order[::-1]:
                sub = copy_fleet(fleet, work / f"tp-{rnd}-{engine}-{jobs}", users)
                log(f"throughput round {rnd + 1}: {engine} × {jobs}")
                r = bench_job(sub, engine, jobs, ray.address if engine == "ray" else "")
                r.pop("laps")
                runs.append({"round": rnd, **r})
                shutil.rmtree(sub)

    def best(engine: str, jobs: int) -> float:
        return min(r["wall_s"] for r in runs if r["engine"] == engine and r["jobs"] == jobs)

    walls = {f"{e}_{j}": best(e, j) for e, j in order}
    return {
        "users": len(users),
        "ray_start_s": ray.start_s,
        "ray_start_attempts": ray.attempts,
        "runs": runs,
        "best_wall_s": walls,
        "users_per_s": {k: len(users) / v for k, v in walls.items()},
        "ray_two_over_one_workers": walls["ray_1"] / walls["ray_2"],
        "local_two_over_one_workers": walls["local_1"] / walls["local_2"],
        "ray_over_local_1": walls["ray_1"] / walls["local_1"],
        "ray_over_local_2": walls["ray_2"] / walls["local_2"],
    }


def stage_extract(work: Path, sizes: Sizes, log: Any) -> dict[str, Any]:
    n = sizes.extract_users
    answers: dict[str, dict[str, Any]] = {}

    def users() -> Iterator[tuple[str, list[dict[str, Any]]]]:
        for i in range(n):
            said, ops = conversation(i, sizes.turns)
            answers.update(ops)
            yield user_id(i), said

    src = work / "talk-src"
    write_users(src, users())
    fleet = work / "talk"
    log(f"extract: ingest {n} users' turns")
    fleet_run(fleet, ["ingest", str(src)])
    runs = []
    # The budget runs, then the same at the largest budget with no latency: the CPU floor.
    plan = [(c, LATENCY) for c in sizes.budgets] + [(max(sizes.budgets), 0.0)]
    for budget, latency in plan:
        sub = copy_fleet(fleet, work / f"talk-{budget}-{latency}")
        model = Extractor(answers, latency)
        # A user's calls are sequential: as many workers as the largest budget, in every run,
        # so the budget alone limits the calls in flight.
        jobs = min(max(sizes.budgets), n)
        log(f"extract: budget {budget}, latency {latency} s, {jobs} workers")
        with ChatServer(model) as server:
            options = ["--concurrency", str(budget), "--model", "stand-in"]
            options += ["--base-url", server.base_url]
            ran = fleet_run(sub, ["extract"], jobs=jobs, options=options)
            requests = len(server.requests)
        run = the_run(sub, "extract")
        totals = summary_totals(run)
        totals["timings"] = step_stats(user_laps(parquet_rows(run / "timings.parquet")))
        if totals["status"].get("ok") != n:
            raise BenchFailed(f"extract at budget {budget}: {totals['status']}")
        runs.append(
            {
                "budget": budget,
                "latency_s": latency,
                "requests_served": requests,
                **ran,
                **totals,
                "latency_bound_s": requests * latency / budget,
            }
        )
        if latency == 0.0:  # the last run: what a conversational user's partition holds
            runs[-1]["bytes_after"] = tree_bytes(sub, skip=("runs",))
        shutil.rmtree(sub)
    floor = runs[-1]["wall_s"]
    for r in runs[:-1]:
        r["cpu_floor_s"] = floor
        r["predicted_s"] = max(r["latency_bound_s"], floor)
        r["wall_over_predicted"] = r["wall_s"] / r["predicted_s"]
    last = runs[-1]
    held = last["bytes_after"]
    events = last["events_before"] + last["events_appended"]
    return {
        "users": n,
        "turns_per_user": sizes.turns,
        "latency_s": LATENCY,
        "workers": min(max(sizes.budgets), n),
        "runs": runs,
        # A conversational user after extraction: turns, facts, extraction events, calls.
        "events_per_user": events / n,
        "calls_per_user": last["calls"] / n,
        "tokens_in_per_call": last["tokens_in"] / max(last["calls"], 1),
        "tokens_out_per_call": last["tokens_out"] / max(last["calls"], 1),
        "bytes_per_event": held.get("events", 0) / max(events, 1),
        "bytes_per_call": held.get("model_calls", 0) / max(last["calls"], 1),
        "bytes_per_user": sum(v for k, v in held.items() if k != "files") / n,
    }


def stage_bytes(work: Path, sizes: Sizes, log: Any) -> dict[str, Any]:
    """A single-file store holding ``store_users`` users, its size halfway and at the end (the
    second half's growth is the marginal cost of an event), then ``uac export`` of it."""
    store = work / "users.duckdb"
    n, events = sizes.store_users, STORE_EVENTS
    sizes_at: dict[int, int] = {}
    log(f"bytes: {n} users into one store")
    for i in range(n):
        with Workbench(store, user=user_id(i)) as wb:
            wb.ingest(history(i, events))
        if i + 1 in (n // 2, n):
            sizes_at[i + 1] = store.stat().st_size
    con = duckdb.connect(str(store), read_only=True)
    try:
        found = con.execute("SELECT count(*) FROM events").fetchone()
    finally:
        con.close()
    rows = int(found[0]) if found else 0
    exported = work / "exported"
    ran = uac("export", str(store), str(exported))
    fleet = tree_bytes(exported)
    tables = sum(v for k, v in fleet.items() if k not in ("files", "_commits", "uac-fleet.json"))
    half, full = n // 2, n
    return {
        "users": n,
        "events_per_user": events,
        # The log holds the facts and the schema and alert events they caused; per event below
        # is per fact event ingested.
        "log_rows": rows,
        "store_bytes": sizes_at[full],
        "store_bytes_per_event": sizes_at[full] / (full * events),
        "store_marginal_bytes_per_event": (sizes_at[full] - sizes_at[half])
        / ((full - half) * events),
        "export": {**ran, "bytes": fleet},
        "fleet_bytes_per_event": sum(v for k, v in fleet.items() if k != "files") / (full * events),
        "fleet_table_bytes_per_event": tables / (full * events),
    }


def per_event(b: dict[str, int], users: int, events: int) -> dict[str, float]:
    total = sum(v for k, v in b.items() if k != "files")
    return {"bytes_per_event": total / (users * events), "files_per_user": b["files"] / users}


def report(results: dict[str, Any]) -> str:
    """The figures as plain text, for the terminal and bench/README.md."""
    stages = {k: v for k, v in results.items() if isinstance(v, dict)}
    lines = [f"{k}: not measured ({v['error']})" for k, v in stages.items() if "error" in v]
    results = {k: v for k, v in stages.items() if "error" not in v}
    if built := results.get("fleet"):
        ing = built["ingest"]
        lines.append(
            f"ingest: {built['users']:,} users × {built['events_per_user']:,} events in "
            f"{ing['wall_s']:.1f} s ({ing['events_per_s']:,.0f} events/s, local × 2); "
            f"{built['per_event_after_ingest']['bytes_per_event']:.0f} bytes/event, "
            f"{built['per_event_after_ingest']['files_per_user']:.1f} files/user"
        )
    if pop := results.get("population"):
        lines.append("population  per-user s (mean, median, p90 of checkpoint+alerts+query)  "
                     "vs smallest  wall s  users/s")  # fmt: skip
        for r in pop["runs"]:
            t = r["timings"]["job"]
            lines.append(
                f"{r['population']:>10,}  {t['mean']:.3f} {t['median']:.3f} {t['p90']:.3f}"
                f"{'':>28}{r['per_user_vs_smallest']:>9.2f}×  {r['wall_s']:>6.1f}  "
                f"{r['users_per_s']:>7.1f}"
            )
        verdict = "flat" if pop["flat"] else "NOT flat"
        lines.append(f"worst deviation {pop['worst_deviation']:.0%} ({verdict}, target ±20%)")
    if tp := results.get("throughput"):
        lines.append(f"throughput, bench job over {tp['users']} users (best of rounds):")
        for k, v in tp["best_wall_s"].items():
            lines.append(f"  {k:<8} {v:7.1f} s  {tp['users_per_s'][k]:6.2f} users/s")
        lines.append(
            f"  ray 2 vs 1 workers {tp['ray_two_over_one_workers']:.2f}× (≥ 1.7), local "
            f"{tp['local_two_over_one_workers']:.2f}×; ray / local: 1 worker "
            f"{tp['ray_over_local_1']:.2f}×, 2 workers {tp['ray_over_local_2']:.2f}× (≤ 1.3)"
        )
    if ex := results.get("extract"):
        lines.append(
            f"extract over {ex['users']} users × {ex['turns_per_user']} turns, "
            f"{ex['latency_s'] * 1000:.0f} ms a call:"
        )
        for r in ex["runs"]:
            pred = (
                f"predicted {r['predicted_s']:.1f} s (calls×latency/budget "
                f"{r['latency_bound_s']:.1f}, CPU floor {r['cpu_floor_s']:.1f}) → "
                f"{r['wall_over_predicted']:.2f}×"
                if "predicted_s" in r
                else "the CPU floor"
            )
            lines.append(
                f"  budget {r['budget']:>3}, latency {r['latency_s']:.1f} s: {r['requests_served']} "
                f"calls, {r['wall_s']:.1f} s wall, {pred}"
            )
    if b := results.get("bytes"):
        lines.append(
            f"bytes/event: store of {b['users']} users {b['store_bytes_per_event']:.0f} "
            f"(marginal {b['store_marginal_bytes_per_event']:.0f}); its export "
            f"{b['fleet_bytes_per_event']:.0f} ({b['fleet_table_bytes_per_event']:.0f} in "
            "Parquet parts)"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes: a few minutes")
    ap.add_argument(
        "--only", nargs="+", choices=("population", "throughput", "extract", "bytes"), default=None
    )
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--workdir", type=Path, default=None, help="default: a temp dir in bench/out")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--report", type=Path, metavar="FILE", help="print FILE's figures as text")
    args = ap.parse_args(argv)
    if args.report:
        print(report(json.loads(args.report.read_text())))
        return 0
    sizes = QUICK if args.quick else FULL
    stages = args.only or ["population", "throughput", "extract", "bytes"]
    out = args.out or RESULTS / ("fleet_quick.json" if args.quick else "fleet.json")
    (HERE / "out").mkdir(exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="fleet-", dir=args.workdir or HERE / "out"))
    started = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - started:7.1f} s] {msg}", file=sys.stderr, flush=True)

    # With --only, the other stages of an earlier run in the same file are kept.
    results: dict[str, Any] = {}
    if args.only and out.exists():
        results = json.loads(out.read_text())
    results.update(
        {"quick": args.quick, "sizes": asdict(sizes), "query": QUERY, "targets": TARGETS}
    )

    def stage(name: str, fn: Any, *fn_args: Any) -> Any:
        """Run one stage; its figures, or its error, go into the results with the date, the
        engine's commit and the machine's load, and the file is written at once."""
        info = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "machine": machine()}
        try:
            value = fn(*fn_args)
        except BenchFailed as exc:
            log(f"{name} failed: {exc}")
            results[name] = {**info, "error": str(exc)}
            value = None
        else:
            results[name] = {**info, **value} if isinstance(value, dict) else value
        results[name]["load_average_at_end"] = os.getloadavg()
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1, default=str) + "\n")
        return value

    try:
        if {"population", "throughput"} & set(stages):
            n = max(max(sizes.populations), sizes.throughput_users)
            log(f"generate and ingest {n} users × {sizes.events} events")
            built = stage("fleet", build_fleet, work, n, sizes.events)
            if built is not None:
                fleet = work / "fleet"
                if "population" in stages:
                    stage("population", stage_population, work, fleet, sizes, log)
                if "throughput" in stages:
                    stage("throughput", stage_throughput, work, fleet, sizes, log)
        if "extract" in stages:
            stage("extract", stage_extract, work, sizes, log)
        if "bytes" in stages:
            stage("bytes", stage_bytes, work, sizes, log)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(report(results))
    log(f"results in {out} ({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
