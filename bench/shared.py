"""What sharing a store between processes costs: the open/close each operation now pays, and
ingest throughput of two writer processes against one.

1. Per operation: a notebook-style ``Workbench`` (read-write) runs
   ``wb.eval("len(user.all('Note'))")`` (reads the state only) and ``wb.log(limit=1)`` (reads
   the store) ``--reps`` times each; the medians are reported for this checkout's engine and,
   with ``--before PATH``
   (e.g. ``git archive COMMIT | tar -x -C /tmp/before``), for an engine that holds its
   connection. The floor is DuckDB alone: connect, ``SELECT max(seq)``, close.
2. Throughput: the same ``2 × --events`` facts (sources set) ingested in batches of
   ``--batch``, by one process (file A, then file B) and by two processes at once (A | B),
   each started and opened before the clock starts. Events per second of wall time.

Each engine runs in its own subprocess (through ``PYTHONPATH``) on its own copy of the store.

    python bench/shared.py [--events 5000] [--batch 250] [--reps 200] [--before /tmp/before]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# Each operation timed --reps times: a query of the state (no read of the store needed when
# nothing was written) and one of the log (it reads the store).
OPS = """
import json, sys, time
from uac_kernel.workbench import Workbench
db, reps = sys.argv[1], int(sys.argv[2])
wb = Workbench(db, user="bench")
ops = {"eval": lambda: wb.eval("len(user.all('Note'))"), "log": lambda: wb.log(limit=1)}
times = {}
for name, op in ops.items():
    op()  # the first eval forks the warm sandbox
    times[name] = []
    for _ in range(reps):
        t = time.perf_counter(); op(); times[name].append(time.perf_counter() - t)
wb.close()
print(json.dumps(times))
"""
FLOOR = """
import duckdb, json, sys, time
db, reps = sys.argv[1], int(sys.argv[2])
times = []
for _ in range(reps):
    t = time.perf_counter()
    c = duckdb.connect(db); c.execute("SELECT max(seq) FROM events").fetchone(); c.close()
    times.append(time.perf_counter() - t)
print(json.dumps(times))
"""
# Opens, says "open", waits for "go", ingests each file in batches; prints its seconds.
WRITER = """
import json, sys, time
from uac_kernel.workbench import Workbench
db, batch, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
wb = Workbench(db, user="bench")
print("open", flush=True)
sys.stdin.readline()
t = time.perf_counter()
for f in files:
    events = [json.loads(line) for line in open(f)]
    for i in range(0, len(events), batch):
        wb.ingest(events[i : i + batch])
wb.close()
print(json.dumps(time.perf_counter() - t), flush=True)
"""


def notes(prefix: str, n: int) -> str:
    return "".join(
        json.dumps(
            {
                "kind": "fact",
                "ts": f"2025-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}",
                "op": "add",
                "type": "Note",
                "key": f"{prefix}{i}",
                "fields": {"text": f"note {prefix}{i}", "n": i},
                "source": f"{prefix}:{i}",
            }
        )
        + "\n"
        for i in range(n)
    )


def env(engine: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(engine), "UAC_LOCK_TIMEOUT": "300"}


def run_json(engine: Path, code: str, *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env(engine),
        check=True,
        cwd=tempfile.gettempdir(),  # not the checkout: `python -c` imports from its cwd first
    )
    return json.loads(done.stdout)


def writers(engine: Path, db: Path, batch: int, groups: list[list[Path]]) -> float:
    """Wall seconds from "go" until every writer (one per group of files) is done."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(db), str(batch), *map(str, files)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env(engine),
            cwd=tempfile.gettempdir(),
        )
        for files in groups
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "open"
    start = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        p.communicate()
        if p.returncode:
            raise SystemExit(f"a writer failed ({p.returncode})")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=5000, help="facts per file")
    parser.add_argument("--batch", type=int, default=250)
    parser.add_argument("--reps", type=int, default=200)
    parser.add_argument("--before", type=Path, help="another checkout's engine, for comparison")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="uac-shared-"))
    try:
        a, b = work / "a.jsonl", work / "b.jsonl"
        a.write_text(notes("a", args.events))
        b.write_text(notes("b", args.events))
        seed = work / "seed.duckdb"
        writers(ROOT, seed, args.batch, [[a]])  # a store of --events facts to query
        results: dict[str, Any] = {"events": args.events, "batch": args.batch}
        engines = {"after": ROOT, **({"before": args.before} if args.before else {})}
        floor_db = work / "floor.duckdb"
        shutil.copy(seed, floor_db)
        results["floor_ms"] = 1000 * statistics.median(
            run_json(ROOT, FLOOR, str(floor_db), str(args.reps))
        )
        for name, engine in engines.items():
            db = work / f"eval-{name}.duckdb"
            shutil.copy(seed, db)
            times = run_json(engine, OPS, str(db), str(args.reps))
            for op, seconds in times.items():
                results[f"{op}_ms_{name}"] = 1000 * statistics.median(seconds)
        for name, engine in engines.items():
            one, two = work / f"one-{name}.duckdb", work / f"two-{name}.duckdb"
            t1 = writers(engine, one, args.batch, [[a, b]])
            results[f"one_process_events_per_s_{name}"] = 2 * args.events / t1
            if name == "after":  # an engine that holds its connection cannot run two writers
                t2 = writers(engine, two, args.batch, [[a], [b]])
                results["two_processes_events_per_s"] = 2 * args.events / t2
        for op in ("eval", "log"):
            if f"{op}_ms_before" in results:
                results[f"{op}_added_ms"] = results[f"{op}_ms_after"] - results[f"{op}_ms_before"]
        results["log_added_over_floor"] = results.get("log_added_ms", 0.0) / results["floor_ms"]
        results["two_over_one"] = (
            results["two_processes_events_per_s"] / results["one_process_events_per_s_after"]
        )
        text = json.dumps({k: round(v, 3) for k, v in results.items()}, indent=1)
        print(text)
        if args.out:
            args.out.write_text(text + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
