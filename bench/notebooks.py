"""How long the teaching notebooks and the alerts benchmark take, for the times the docs quote.

Each Jupyter notebook in ``notebooks/`` runs top to bottom in a fresh ``python3`` kernel
(nbclient), from a temporary copy of the folder, as ``tests/notebook/test_notebooks.py`` runs them; the
marimo tour runs headless (``python notebooks/marimo_tour.py``); ``uac bench alerts`` runs as
the README shows it. Recorded per run: the wall time, and for a notebook its slowest cell.

uac's cache directory (the offline Vega bundle) is filled before the runs, so the figures are
what a person sees after their first chart ever; ``--cold-cache`` gives every kernel an empty
one instead (what every kernel paid before the bundle was cached).

    python bench/notebooks.py [--reps 1] [--out bench/results/notebooks.json]
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
from datetime import datetime
from pathlib import Path
from typing import Any

import scale  # bench/scale.py: machine facts

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NOTEBOOKS = ROOT / "notebooks"
DEFAULT_OUT = HERE / "results" / "notebooks.json"


def run_ipynb(path: Path, env: dict[str, str]) -> dict[str, Any]:
    import nbclient
    import nbformat

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "notebooks"
        shutil.copytree(NOTEBOOKS, work, ignore=shutil.ignore_patterns("*.duckdb*", "*.jsonl"))
        nb = nbformat.read(work / path.name, as_version=4)
        client = nbclient.NotebookClient(
            nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(work)}}
        )
        t0 = time.perf_counter()
        client.execute(env=env)
        wall = time.perf_counter() - t0
    cells = []
    for cell in nb.cells:
        timing = cell.get("metadata", {}).get("execution", {})
        if cell.cell_type == "code" and "iopub.execute_input" in timing:
            started = datetime.fromisoformat(timing["iopub.execute_input"].replace("Z", "+00:00"))
            ended = datetime.fromisoformat(timing["shell.execute_reply"].replace("Z", "+00:00"))
            cells.append(((ended - started).total_seconds(), cell.source.splitlines()[0][:60]))
    slowest = max(cells)
    return {"wall": wall, "slowest_cell": {"seconds": slowest[0], "first_line": slowest[1]}}


def run_command(cmd: list[str], env: dict[str, str], cwd: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=cwd, check=True, capture_output=True)
    return {"wall": time.perf_counter() - t0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=1, help="runs of each (medians)")
    ap.add_argument("--cold-cache", action="store_true", help="an empty uac cache for every run")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)

    started = datetime.now().isoformat(timespec="seconds")
    machine = scale.machine()  # before the runs: its load average is the one at the start
    t0 = time.perf_counter()
    uac = Path(sys.executable).with_name("uac")
    jobs: dict[str, Any] = {
        p.name: (lambda env, p=p: run_ipynb(p, env)) for p in sorted(NOTEBOOKS.glob("*.ipynb"))
    }
    jobs["marimo_tour.py (headless)"] = lambda env: run_command(
        [sys.executable, str(NOTEBOOKS / "marimo_tour.py")], env, ROOT
    )
    jobs["uac bench alerts"] = lambda env: run_command(
        [str(uac), "bench", "alerts", "--out", env["BENCH_TMP"]], env, ROOT
    )
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in jobs}
    with tempfile.TemporaryDirectory() as tmp:
        warm = Path(tmp) / "cache"
        env = {**os.environ, "UAC_CACHE_DIR": str(warm), "BENCH_TMP": str(Path(tmp) / "out")}
        if not args.cold_cache:
            subprocess.run(
                [
                    sys.executable,
                    "-c",
                    "from uac_kernel.render.charts import enable_offline as e; e()",
                ],
                env=env,
                check=True,
            )
        for r in range(args.reps):
            for name, job in jobs.items():
                if args.cold_cache:
                    env["UAC_CACHE_DIR"] = str(Path(tmp) / f"cold-{r}-{len(runs[name])}-{name}")
                runs[name].append(job(env))
                print(f"{name}: {runs[name][-1]['wall']:.1f} s", file=sys.stderr)
    results = {
        "date": started,
        "machine": machine,
        "cache": "cold" if args.cold_cache else "warm",
        "reps": args.reps,
        "runs": {
            name: {"wall_median": statistics.median(r["wall"] for r in rs), "runs": rs}
            for name, rs in runs.items()
        },
        "load_average_at_end": os.getloadavg(),
        "seconds": time.perf_counter() - t0,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    for name, r in results["runs"].items():
        slow = r["runs"][0].get("slowest_cell")
        extra = f"   slowest cell {slow['seconds']:.1f} s: {slow['first_line']}" if slow else ""
        print(f"{name:<32} {r['wall_median']:6.1f} s{extra}")
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
