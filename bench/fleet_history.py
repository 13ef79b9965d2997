"""What a fleet task costs as the user's history grows: the same new events, on top of short
and long histories.

For each size in ``--sizes`` a fleet of one user with that many events (``fleet.history``: a
seeded ``scale.History`` with the facts the shipped rules alert on) is ingested with
``uac fleet run DIR ingest SRC``, then ``--rounds`` rounds each ingest ``--new`` new events (new
Transactions and Meals, after the history) with a whole ``uac fleet run`` process, as a person
would type it. Each round's task is timed by the run itself (``timings.parquet``: checkout,
open, ingest, close, commit, snapshot) and the process by wall clock. The first round after the
history's ingest is the one that finds no kept snapshot (a fleet written by an older uac, or
``uac export``): it is reported apart (``first_round``); the others give the medians.

With ``--before DIR`` (e.g. ``git archive COMMIT | tar -x -C DIR``) the same rounds run with that
engine on its own copy of each fleet, interleaved round by round with this one. Target (issue
28): a task's cost follows the new events, not the history: the task at the largest size within
about 2x of the task at the smallest, where the engine before grows with the history.

    python bench/fleet_history.py [--sizes 1000,100000] [--new 1000] [--rounds 3] [--before DIR]

Results: ``--out`` (bench/results/fleet_history.json).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from fleet import history  # noqa: E402  (bench/fleet.py, beside this script)
from scale import machine  # noqa: E402

USER = "alice"


def write(directory: Path, events: list[dict[str, Any]]) -> Path:
    directory.mkdir(parents=True)
    (directory / f"{USER}.jsonl").write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    return directory


def new_events(after: datetime, n: int, round_: int) -> list[dict[str, Any]]:
    """``n`` new facts after ``after``: Transactions and Meals with keys of their own."""
    rng = random.Random(round_)
    out = []
    for i in range(n):
        ts = after + timedelta(minutes=7 * (i + 1))
        day = ts.date().isoformat()
        if i % 3:
            fields = {"amount": round(rng.uniform(1, 90), 2), "category": "food",
                      "merchant": "Shop", "account": "checking", "date": day}  # fmt: skip
            out.append({"kind": "fact", "ts": ts.isoformat(), "op": "add",
                        "type": "Transaction", "key": f"r{round_}-{i}", "fields": fields})  # fmt: skip
        else:
            out.append({"kind": "fact", "ts": ts.isoformat(), "op": "add", "type": "Meal",
                        "key": f"m{round_}-{i}",
                        "fields": {"item": "apple", "calories": 100 + i, "date": day}})  # fmt: skip
    return out


def fleet_run(engine: Path, fleet: Path, src: Path) -> tuple[float, dict[str, float]]:
    """One ``uac fleet run FLEET ingest SRC`` with ``engine``: its wall time and its task's
    laps."""
    env = {**os.environ, "PYTHONPATH": str(engine)}
    cmd = [sys.executable, "-m", "uac_kernel.cli.main", "fleet", "run", str(fleet), "ingest",
           str(src), "--jobs", "1"]  # fmt: skip
    t = time.perf_counter()
    # not the checkout's directory: `-m` imports from the working directory first
    done = subprocess.run(cmd, env=env, cwd=tempfile.gettempdir(), capture_output=True, text=True)
    wall = time.perf_counter() - t
    if done.returncode != 0 or "1 ok" not in done.stdout:
        raise SystemExit(f"fleet run failed with {engine}: {done.stdout}{done.stderr}")
    runs = sorted((fleet / "runs").glob("*/timings.parquet"), key=os.path.getmtime)
    with duckdb.connect() as con:
        laps = con.execute(
            "SELECT step, sum(seconds) FROM read_parquet(?) GROUP BY step", [str(runs[-1])]
        ).fetchall()
    return wall, {str(step): float(s) for step, s in laps}


def median_laps(rounds: list[dict[str, float]]) -> dict[str, float]:
    steps = sorted({s for r in rounds for s in r})
    out = {s: statistics.median(r.get(s, 0.0) for r in rounds) for s in steps}
    out["task"] = statistics.median(sum(r.values()) for r in rounds)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,100000")
    ap.add_argument("--new", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--before", type=Path, help="another checkout's engine, for comparison")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "fleet_history.json")
    args = ap.parse_args()
    engines = {"this": ROOT, **({"before": args.before.resolve()} if args.before else {})}
    sizes = [int(s) for s in args.sizes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="uac-fleet-history-"))
    results: dict[str, Any] = {"new_events": args.new, "rounds": args.rounds, "sizes": {}}
    try:
        for size in sizes:
            events = history(0, size)
            src = write(work / f"src-{size}", events)
            base = work / f"fleet-{size}"
            t = time.perf_counter()
            fleet_run(ROOT, base, src)
            print(f"{size:,} events: history ingested in {time.perf_counter() - t:.1f} s")
            shutil.rmtree(base / "_snapshots", ignore_errors=True)  # as a fleet export wrote
            fleets = {}
            for name in engines:
                fleets[name] = work / f"fleet-{size}-{name}"
                shutil.copytree(base, fleets[name], copy_function=os.link)
            last = datetime.fromisoformat(events[-1]["ts"])
            seen: dict[str, list[tuple[float, dict[str, float]]]] = {n: [] for n in engines}
            for r in range(args.rounds + 1):
                batch = new_events(last, args.new, r)
                last = datetime.fromisoformat(batch[-1]["ts"])
                new = write(work / f"new-{size}-{r}", batch)
                for name, engine in engines.items():
                    seen[name].append(fleet_run(engine, fleets[name], new))
            entry: dict[str, Any] = {}
            for name in engines:
                first, rest = seen[name][0], seen[name][1:]
                entry[name] = {
                    "first_round": {"wall_s": first[0], "laps_s": first[1]},
                    "wall_s": statistics.median(w for w, _ in rest),
                    "laps_s": median_laps([laps for _, laps in rest]),
                }
                task = entry[name]["laps_s"]["task"]
                print(f"  {name:7s} task {task:.3f} s  process {entry[name]['wall_s']:.2f} s  "
                      + "  ".join(f"{s} {v:.3f}" for s, v in entry[name]["laps_s"].items()
                                  if s != "task"))  # fmt: skip
            results["sizes"][str(size)] = entry
            for name in engines:
                shutil.rmtree(fleets[name])
            shutil.rmtree(base)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    small, large = str(min(sizes)), str(max(sizes))
    results["growth"] = {
        name: {
            "task": results["sizes"][large][name]["laps_s"]["task"]
            / results["sizes"][small][name]["laps_s"]["task"],
            "process": results["sizes"][large][name]["wall_s"]
            / results["sizes"][small][name]["wall_s"],
        }
        for name in engines
    }
    for name, g in results["growth"].items():
        print(f"{name}: task at {int(large):,} events / at {int(small):,}: {g['task']:.2f}x "
              f"(whole process {g['process']:.2f}x)")  # fmt: skip
    results["machine"] = machine()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"results in {args.out}")


if __name__ == "__main__":
    main()
