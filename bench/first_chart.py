"""The first chart in a new Jupyter kernel against a later one: with and without the background
import of the chart module, and with and without the bundle cache.

``%uac chart`` draws with Altair's ``jupyter`` renderer offline, whose JavaScript bundle
(Vega, Vega-Lite, vega-embed) vl-convert builds; uac keeps it in the user cache directory
(``uac_kernel.render.vega_bundle``). This starts real ``python3`` kernels (jupyter_client), each on
the same 10k-event store, and times cells from the client, as a person waits for them:
``%load_ext uac``, ``%uac open`` (read-only), then a pause of ``--pause`` seconds (2 by
default: a person reading the output and typing the next cell), then

1. ``%uac chart events`` — the first chart: the magic imports Altair (or waits for the rest of
   the import ``%load_ext`` started), and the bundle is loaded (warm cache) or built (cold);
2. ``%uac chart records`` — a second chart;
3. ``%uac chart events`` — the first chart's cell again, a like-for-like later chart.

Scenarios, one kernel each per round: ``warm cache, no background import`` (what a kernel paid
before ``%load_ext`` started the import: ``uac_kernel.notebook.imports.BACKGROUND = False`` is
set in the kernel first), ``warm cache, background import`` (as shipped), and ``cold cache,
background import`` (an empty cache directory: what the first kernel ever pays). Figures are
medians over ``--reps`` rounds: wall seconds per cell, and the kernel's CPU seconds for the cell
(``time.process_time`` read by the next cell). Target (issues 10, 29): the first chart within
2× a later one.

    python bench/first_chart.py [--reps 5] [--pause 2] [--out bench/results/first_chart.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import scale  # bench/scale.py: the work directory and machine facts
import startup  # bench/startup.py: the same 10k-event store

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "first_chart.json"
TARGET = 2.0
PAUSE = 2.0  # seconds between opening the store and the first chart, as a person waits
SETUP = {"load: %load_ext uac": "%load_ext uac", "open: %uac open": "%uac open {store}"}
CELLS = {
    "first chart: %uac chart events": "%uac chart events",
    "second chart: %uac chart records": "%uac chart records",
    "later chart: %uac chart events": "%uac chart events",
}
NO_BACKGROUND = "import uac_kernel.notebook.imports as _m\n_m.BACKGROUND = False"
SCENARIOS = (
    "warm cache, no background import",
    "warm cache, background import",
    "cold cache, background import",
)
WIDGET = "application/vnd.jupyter.widget-view+json"


def run_kernel(
    store: Path, cache: Path, *, background: bool = True, pause: float = PAUSE
) -> dict[str, dict[str, float]]:
    """Start a kernel with ``cache`` as uac's cache, time the cells (``pause`` seconds after
    the store is open), shut it down."""
    from jupyter_client.manager import start_new_kernel

    env = {**os.environ, "UAC_CACHE_DIR": str(cache)}
    km, kc = start_new_kernel(kernel_name="python3", env=env)
    try:

        def run(code: str) -> tuple[float, list[dict[str, Any]]]:
            outputs: list[dict[str, Any]] = []

            def keep(msg: dict[str, Any]) -> None:
                if msg["msg_type"] in ("display_data", "execute_result", "error", "stream"):
                    outputs.append(msg["content"])

            t0 = time.perf_counter()
            reply = kc.execute_interactive(code, timeout=300, output_hook=keep)
            wall = time.perf_counter() - t0
            if reply["content"]["status"] != "ok":
                raise SystemExit(f"cell {code!r} failed: {reply['content']}")
            return wall, outputs

        run("import time as _bench_time" + ("" if background else "\n" + NO_BACKGROUND))
        opening = f"{json.dumps(str(store))} --user {startup.USER} --read-only"
        cells = {n: c.replace("{store}", opening) for n, c in SETUP.items()} | CELLS
        figures: dict[str, dict[str, float]] = {}
        for name, code in cells.items():
            if name in CELLS and "pause" not in figures:
                # The person reads, and types the next cell; the kernel's CPU meanwhile is
                # the background import's.
                run("_bench_cpu = _bench_time.process_time()")
                time.sleep(pause)
                _, printed = run("print(_bench_time.process_time() - _bench_cpu)")
                figures["pause"] = {"wall": pause, "cpu": float(printed[-1]["text"])}
            run("_bench_cpu = _bench_time.process_time()")
            wall, outputs = run(code)
            _, printed = run("print(_bench_time.process_time() - _bench_cpu)")
            cpu = float(printed[-1]["text"])
            if "chart" in name and not any(WIDGET in o.get("data", {}) for o in outputs):
                raise SystemExit(f"{code!r} displayed no chart widget: {outputs}")
            figures[name] = {"wall": wall, "cpu": cpu}
        return figures
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=5, help="kernels per scenario (medians)")
    ap.add_argument("--events", type=int, default=10_000, help="fact events in the store")
    ap.add_argument("--pause", type=float, default=PAUSE, help="seconds before the first chart")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args(argv)

    scale.DEFAULT_WORKDIR.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="first-chart-", dir=scale.DEFAULT_WORKDIR))
    started = datetime.now().isoformat(timespec="seconds")
    machine = scale.machine()  # before the runs: its load average is the one at the start
    t0 = time.perf_counter()
    try:
        store = workdir / "store.duckdb"
        startup.build_store(store, args.events, workdir)
        warm = workdir / "cache-warm"
        run_kernel(store, warm, pause=0)  # the first kernel ever: fills the cache (not counted)
        samples: dict[str, dict[str, dict[str, list[float]]]] = {}
        for r in range(args.reps):
            for scenario in SCENARIOS:
                cache = workdir / f"cache-cold-{r}" if scenario.startswith("cold") else warm
                background = "no background" not in scenario
                figures = run_kernel(store, cache, background=background, pause=args.pause)
                per = samples.setdefault(scenario, {})
                for cell, f in figures.items():
                    for clock, v in f.items():
                        per.setdefault(cell, {}).setdefault(clock, []).append(v)
                print(
                    f"round {r + 1}/{args.reps} {scenario}: "
                    + ", ".join(f"{c.split(':')[0]} {f['wall']:.2f} s" for c, f in figures.items()),
                    file=sys.stderr,
                )
        results: dict[str, Any] = {
            "date": started,
            "machine": machine,
            "events": args.events,
            "reps": args.reps,
            "pause_s": args.pause,
            "target": TARGET,
            "scenarios": {},
        }
        for scenario, per in samples.items():
            medians = {
                cell: {clock: statistics.median(v) for clock, v in clocks.items()}
                for cell, clocks in per.items()
            }
            first = medians["first chart: %uac chart events"]
            later = medians["later chart: %uac chart events"]
            ratios = {}
            for clock in ("wall", "cpu"):
                ratios[f"first / later chart ({clock})"] = first[clock] / later[clock]
            figures_by_cell = {
                cell: {f"{clock}_median": m[clock] for clock in m} | dict(per[cell])
                for cell, m in medians.items()
            }
            results["scenarios"][scenario] = {"cells": figures_by_cell, "ratios": ratios}
        results["load_average_at_end"] = os.getloadavg()
        results["seconds"] = time.perf_counter() - t0
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(table(results))
    print(f"results: {args.out}")
    return 0


def table(results: dict[str, Any]) -> str:
    first, later = "first chart: %uac chart events", "later chart: %uac chart events"
    lines = [
        f"first chart against a later one, {results['pause_s']:g} s after the store is open "
        f"(medians of {results['reps']} kernels):",
        f"  {'scenario':<34} {'load s':>7} {'first s':>8} {'later s':>8} {'ratio':>7}",
    ]
    for scenario, s in results["scenarios"].items():
        c, r = s["cells"], s["ratios"]["first / later chart (wall)"]
        lines.append(
            f"  {scenario:<34} {c['load: %load_ext uac']['wall_median']:7.3f} "
            f"{c[first]['wall_median']:8.3f} {c[later]['wall_median']:8.3f} {r:6.2f}×"
        )
    lines.append("")
    for scenario, s in results["scenarios"].items():
        lines.append(f"{scenario} — medians of {results['reps']} kernels:   wall s   CPU s")
        for cell, f in s["cells"].items():
            lines.append(f"  {cell:<46} {f['wall_median']:7.3f} {f['cpu_median']:7.3f}")
        for name, r in s["ratios"].items():
            mark = "met" if r <= TARGET else "NOT met"
            lines.append(f"  {name:<46} {r:6.2f}×  (target ≤ {TARGET}×: {mark})")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
