"""Commands that need no state, against a full fold: whole-process wall time and peak memory.

On one store, in one run, interleaved round by round so every command sees the same load:

- ``uac log --limit 5``, ``uac checkpoints`` and ``uac code`` (the latest checkpoint's code,
  written to /dev/null): none of them needs the user's state;
- ``uac eval "1"``: the floor they are compared with is a full open (fold + rules) of the same
  user, the figure each ratio divides by.

Each command runs as ``python -m uac_kernel.cli.main`` in its own process; its wall time and CPU
time (user + system, from ``os.wait4``, as its peak RSS) are the minimum over ``--reps`` rounds.
On a shared machine the CPU time is the steadier figure: the wall time of one command varies
with what else runs, its CPU time much less; each ratio is given for both. ``--before PATH`` runs another checkout's
engine (e.g. ``git archive COMMIT | tar -x -C /tmp/before``) in the same rounds, through
``PYTHONPATH``, so a change is measured against its parent on the same store and load.

    python bench/nofold.py --db STORE [--user me] [--reps 3] [--before PATH] [--out FILE]

Issue 14's target: ``log`` and ``checkpoints`` at most 0.05x a full fold at 1M events.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TARGET = 0.05
COMMANDS: dict[str, list[str]] = {
    "log --limit 5": ["log", "--limit", "5"],
    "checkpoints": ["checkpoints"],
    "code": ["code"],
    'eval "1"': ["eval", "1"],
}
FLOOR = 'eval "1"'


def run_once(engine: str, db: str, user: str, argv: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak RSS (MB) of one ``uac`` command in a fresh process."""
    env = dict(os.environ, PYTHONPATH=engine)
    cmd = [sys.executable, "-m", "uac_kernel.cli.main", "--db", db, "--user", user, *argv]
    start = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        proc = subprocess.Popen(cmd, cwd=engine, env=env, stdout=sink, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    err = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {err.strip()}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True)
    parser.add_argument("--user", default="me")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--before", default=None, help="another checkout, measured alongside")
    parser.add_argument("--out", default=None, help="write the figures as JSON")
    args = parser.parse_args()
    engines = {"this": str(HERE.parent)}
    if args.before:
        engines["before"] = str(Path(args.before).resolve())
    walls: dict[str, dict[str, list[float]]] = {e: {c: [] for c in COMMANDS} for e in engines}
    cpus: dict[str, dict[str, list[float]]] = {e: {c: [] for c in COMMANDS} for e in engines}
    rss: dict[str, dict[str, float]] = {e: dict.fromkeys(COMMANDS, 0.0) for e in engines}
    load_start = os.getloadavg()
    for _ in range(args.reps):
        for name, argv in COMMANDS.items():
            for engine, path in engines.items():
                wall, cpu, mb = run_once(path, args.db, args.user, argv)
                walls[engine][name].append(wall)
                cpus[engine][name].append(cpu)
                rss[engine][name] = max(rss[engine][name], mb)
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "db": args.db,
        "reps": args.reps,
        "target": TARGET,
        "load_average": [load_start, os.getloadavg()],
        "engines": {},
    }
    for engine in engines:
        floor = min(walls[engine][FLOOR])
        floor_cpu = min(cpus[engine][FLOOR])
        rows = {}
        print(f"{engine} ({engines[engine]}): min of {args.reps}, wall and CPU, ratio to {FLOOR}")
        for name in COMMANDS:
            best, cpu = min(walls[engine][name]), min(cpus[engine][name])
            rows[name] = {
                "wall_s": round(best, 3),
                "cpu_s": round(cpu, 3),
                "walls_s": [round(w, 3) for w in walls[engine][name]],
                "cpus_s": [round(c, 3) for c in cpus[engine][name]],
                "peak_rss_mb": round(rss[engine][name]),
                "ratio_to_fold": round(best / floor, 4),
                "cpu_ratio_to_fold": round(cpu / floor_cpu, 4),
            }
            print(
                f"  {name:16s} wall {best:7.3f} s {best / floor:6.3f}x   "
                f"CPU {cpu:7.3f} s {cpu / floor_cpu:6.3f}x   {rss[engine][name]:5.0f} MB"
            )
        result["engines"][engine] = rows
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
