"""How fast the `uac` command starts: `uac --help` and `uac eval` on a 10k-event store.

Side by side, in one run, interleaved round by round so every command sees the same load:

- ``python -c "import duckdb, pydantic"`` — the floor: an interpreter with the two libraries
  every real command needs;
- the query itself — ``Workbench(store, read_only=True)``, ``.eval(EXPR)``, ``.close()`` timed
  in a warm process (a probe that imported the engine and ran the query once first);
- ``uac --help`` and ``uac --db STORE --user bench eval EXPR``.

Targets (issue 10): ``uac --help`` within 1.5× the floor, ``uac eval`` within 1.5× the floor
plus the query. Wall time and CPU time (user + system, the command's children included: the
sandbox's worker) are both medians over ``--reps`` rounds.

Python's bytecode cache matters at this scale: an editable install run with
``PYTHONDONTWRITEBYTECODE=1`` compiles the engine's sources on every start. So each command is
measured twice: with bytecode cached (a private ``PYTHONPYCACHEPREFIX`` under the work
directory, filled by one untimed run; what a user of an installed package sees) and with
``PYTHONDONTWRITEBYTECODE=1`` (the installed libraries still use their own caches; the engine
is compiled each time unless the checkout holds ``__pycache__``).

``--before PATH`` measures another checkout's engine (e.g. ``git archive COMMIT | tar -x -C
/tmp/before``) in the same rounds, through ``PYTHONPATH``, against the same store. The engine
measured otherwise is the one this interpreter imports (the ``PYTHONPATH`` it is run with, else
the installed one).

    python bench/startup.py [--events 10000] [--reps 15] [--out bench/results/startup.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import scale  # bench/scale.py, beside this script: the synthetic history and machine facts

import uac_kernel

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "startup.json"
USER = "bench"
EXPR = "round(sum(t.amount for t in user.all(Transaction) if t.amount), 2)"
TARGET = 1.5
MODES = ("bytecode cached", "no bytecode cache")

# The query itself, in a warm process: print the median wall and CPU seconds of REPS rounds of
# open + eval + close, after one untimed round (imports, pydantic's first validations).
PROBE = """
import json, resource, statistics, sys, time
from uac_kernel.workbench import Workbench

db, user, expr, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])

def cpu():
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)  # the sandbox worker, reaped on close
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

def once():
    wb = Workbench(db, user=user, read_only=True)
    try:
        return wb.eval(expr)
    finally:
        wb.close()

value = once()
walls, cpus = [], []
for _ in range(reps):
    t0, c0 = time.perf_counter(), cpu()
    once()
    walls.append(time.perf_counter() - t0)
    cpus.append(cpu() - c0)
print(json.dumps({"value": value, "wall": walls, "cpu": cpus}))
"""


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall and CPU seconds of one command (its reaped children included), and its stdout."""
    c0, t0 = children_cpu(), time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - t0, children_cpu() - c0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")
    return wall, cpu, done.stdout


def build_store(path: Path, events: int, workdir: Path) -> None:
    """``events`` fact events of the scale benchmark's seeded user, ingested and checkpointed."""
    from uac_kernel.workbench import Workbench

    files = scale.History(events).write_batches(workdir / "history", progress=False)
    with Workbench(str(path), user=USER) as wb:
        for f in files:
            wb.ingest(f)
        wb.checkpoint()


def uac_command() -> list[str]:
    """The console script beside this interpreter, as a user runs it; else ``-m``."""
    script = Path(sys.executable).with_name("uac")
    return [str(script)] if script.exists() else [sys.executable, "-m", "uac_kernel.cli.main"]


def environments(workdir: Path) -> dict[str, dict[str, str]]:
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    cached = {k: v for k, v in base.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cached["PYTHONPYCACHEPREFIX"] = str(workdir / "pycache")
    return dict(zip(MODES, (cached, {**base, "PYTHONDONTWRITEBYTECODE": "1"}), strict=True))


def measure(
    store: Path, reps: int, workdir: Path, before: Path | None, modes: list[str]
) -> dict[str, dict[str, Any]]:
    uac = uac_command()
    engines: dict[str, str | None] = {"": None}
    if before is not None:
        engines["before: "] = str(before.resolve())
    results: dict[str, dict[str, Any]] = {}
    for mode, env in environments(workdir).items():
        if mode not in modes:
            continue
        commands: dict[str, tuple[list[str], dict[str, str]]] = {
            "python -c pass": ([sys.executable, "-c", "pass"], env),
            "floor: python -c 'import duckdb, pydantic'": (
                [sys.executable, "-c", "import duckdb, pydantic"],
                env,
            ),
        }
        for label, path in engines.items():
            e = env if path is None else {**env, "PYTHONPATH": path}
            commands[f"{label}uac --help"] = ([*uac, "--help"], e)
            commands[f"{label}uac eval"] = (
                [*uac, "--db", str(store), "--user", USER, "eval", EXPR],
                e,
            )
            commands[f"{label}query in a warm process"] = (
                [sys.executable, "-c", PROBE, str(store), USER, EXPR, "1"],
                e,
            )
        for cmd, e in commands.values():  # untimed: fills the bytecode cache, warms the disk
            run_timed(cmd, e)
        samples: dict[str, dict[str, list[float]]] = {k: {"wall": [], "cpu": []} for k in commands}
        values: dict[str, Any] = {}
        for _ in range(reps):
            for name, (cmd, e) in commands.items():
                wall, cpu, out = run_timed(cmd, e)
                if name.endswith("query in a warm process"):
                    probe = json.loads(out)
                    wall, cpu = probe["wall"][0], probe["cpu"][0]
                    values[name] = probe["value"]
                elif name.endswith("uac eval"):
                    values[name] = json.loads(out)
                samples[name]["wall"].append(wall)
                samples[name]["cpu"].append(cpu)
        for label in engines:
            got, want = values[f"{label}uac eval"], values[f"{label}query in a warm process"]
            if got != want:
                raise SystemExit(f"{label}uac eval printed {got!r}, the query gives {want!r}")
        results[mode] = {
            name: {
                "wall_median": statistics.median(s["wall"]),
                "cpu_median": statistics.median(s["cpu"]),
                "wall": s["wall"],
                "cpu": s["cpu"],
            }
            for name, s in samples.items()
        }
        results[mode]["ratios"] = ratios(results[mode], engines)
    return results


def ratios(figures: dict[str, Any], engines: dict[str, str | None]) -> dict[str, float]:
    floor = figures["floor: python -c 'import duckdb, pydantic'"]
    out: dict[str, float] = {}
    for label in engines:
        query = figures[f"{label}query in a warm process"]
        for clock in ("wall", "cpu"):
            key = f"{clock}_median"
            out[f"{label}uac --help / floor ({clock})"] = (
                figures[f"{label}uac --help"][key] / floor[key]
            )
            out[f"{label}uac eval / (floor + query) ({clock})"] = figures[f"{label}uac eval"][
                key
            ] / (floor[key] + query[key])
    return out


def table(results: dict[str, Any], reps: int) -> str:
    lines = []
    for mode, figures in results["modes"].items():
        lines.append(f"{mode} — medians of {reps} rounds:   wall s   CPU s")
        for name, f in figures.items():
            if name != "ratios":
                lines.append(f"  {name:<48} {f['wall_median']:7.3f} {f['cpu_median']:7.3f}")
        for name, r in figures["ratios"].items():
            mark = "met" if r <= TARGET else "NOT met"
            lines.append(f"  {name:<48} {r:6.2f}×  (target ≤ {TARGET}×: {mark})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=10_000, help="fact events in the store")
    ap.add_argument("--reps", type=int, default=15, help="rounds (medians)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--before", type=Path, default=None, help="another checkout to measure too")
    ap.add_argument("--note", default=None, help="a note kept in the results (what was measured)")
    ap.add_argument("--workdir", type=Path, default=None, help="default: a temp dir in bench/out/")
    ap.add_argument(
        "--modes",
        nargs="+",
        choices=MODES,
        default=list(MODES),
        help="bytecode cache modes to measure (default: both)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the store and the bytecode cache")
    args = ap.parse_args(argv)

    scale.DEFAULT_WORKDIR.mkdir(parents=True, exist_ok=True)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="startup-", dir=scale.DEFAULT_WORKDIR))
    started = datetime.now().isoformat(timespec="seconds")
    t0 = time.perf_counter()
    try:
        store = workdir / "store.duckdb"
        if not store.exists():
            build_store(store, args.events, workdir)
        results: dict[str, Any] = {
            "date": started,
            "machine": scale.machine(),
            "events": args.events,
            "expression": EXPR,
            "reps": args.reps,
            "target": TARGET,
            "uac": uac_command(),
            "engine": str(Path(uac_kernel.__file__).parent),
            "before": str(args.before) if args.before else None,
            "note": args.note,
        }
        results["modes"] = measure(store, args.reps, workdir, args.before, args.modes)
        results["load_average_at_end"] = os.getloadavg()
        results["seconds"] = time.perf_counter() - t0
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(table(results, args.reps))
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
