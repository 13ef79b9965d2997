"""Every operation on a store opened from its snapshot against the same operation on the same
store with its snapshot deleted (a full fold), side by side in one run.

    python bench/snapshot_pairs.py [--sizes 20000 100000 1000000] [--reps 3] [--quick]

For each size a store of ``History(size)`` (bench/scale.py) is ingested in 10k batches by one
workbench, whose close writes the snapshot, as ``uac ingest`` of a big file leaves it; it is
cached under ``bench/out/snapshot_pairs/`` (git ignores it). Each operation is one whole ``uac``
process on a fresh copy of that store (``snapshot``) and of the copy with its snapshot rows
deleted (``plain``), alternately, ``--reps`` times: open and eval, the first checkpoint after
the big ingest, an ingest of 1,000 updates, rules (a constraint put in force), SQL, a what-if
and a forget. It prints the medians and their ratio (target: every ratio <= 1.3) and writes
``bench/results/snapshot_pairs.json``. ``--quick``: 2,000 events, one rep, output under
``--workdir`` unless ``--out`` says where (tests/bench/test_bench_snapshot_pairs.py).
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
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import orjson

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from scale import BATCH, USER, History, machine, update_fields  # noqa: E402

from uac_kernel.checkpoints.snapshot import CLOSE_AFTER  # noqa: E402
from uac_kernel.workbench import Workbench  # noqa: E402

TARGET = 1.3
UPDATES = 1000
RULE = {
    "kind": "window_limit",
    "title": "At most 90 days of trips in any 180",
    "subject": {"type": "Trip"},
    "measure": "days",
    "window_days": 180,
    "limit": 90,
}
SQL = "SELECT count(*), sum(amount) FROM Transaction"
EVAL = "len(user.all('Transaction'))"


def build(size: int, cache: Path, quiet: bool) -> tuple[Path, History]:
    """The store of ``History(size)`` with the snapshot its ingest's close writes (cached), and
    the history after it (its live keys are what the updates touch)."""
    path = cache / f"history-{size}.duckdb"
    history = History(size)
    if path.exists():
        for _ in range(size):
            history.next()
        return path, history
    tmp = path.with_suffix(".part")
    tmp.unlink(missing_ok=True)
    t0 = time.perf_counter()
    with Workbench(tmp, user=USER) as wb:
        for lo in range(0, size, BATCH):
            wb.ingest([history.next() for _ in range(min(BATCH, size - lo))])
        if size < CLOSE_AFTER:  # a tiny store (--quick): close would not write one
            with wb.store.writing():
                wb._write_snapshot()
    tmp.rename(path)
    if not quiet:
        print(f"built {size:,} events in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return path, history


def inputs(history: History, work: Path) -> dict[str, Path]:
    """The files the operations read: 1,000 updates of live keys, a what-if, a constraint."""
    rng = random.Random(25)
    live = [(t, k) for t, keys in history.live.items() for k in keys]
    when = datetime(2030, 1, 1)  # after every event of the history

    def update(i: int) -> dict[str, Any]:
        t, key = rng.choice(live)
        ts = (when + timedelta(seconds=i)).isoformat()
        return {"kind": "fact", "ts": ts, "op": "update", "type": t, "key": key,
                "fields": update_fields(rng, t, when)}  # fmt: skip

    files = {
        "updates": [update(i) for i in range(UPDATES)],
        "whatif": [update(i) for i in range(100)],
    }
    out = {}
    for name, events in files.items():
        out[name] = work / f"{name}.jsonl"
        out[name].write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    out["rule"] = work / "rule.json"
    out["rule"].write_text(json.dumps({"trips": RULE}))
    return out


def operations(files: dict[str, Path], forget: tuple[str, str]) -> dict[str, list[str]]:
    """Each operation's ``uac`` arguments."""
    return {
        "open+eval": ["eval", EVAL],
        "checkpoint": ["checkpoint"],
        "ingest 1,000 updates": ["ingest", str(files["updates"])],
        "rules": ["constrain", str(files["rule"])],
        "sql": ["sql", SQL],
        "what-if": ["whatif", str(files["whatif"])],
        "forget": ["forget", "--record", *forget],
    }


def run(db: Path, args: list[str]) -> float:
    """Wall seconds of one ``uac`` process on ``db``."""
    cmd = [sys.executable, "-m", "uac_kernel.cli.main", "--db", str(db), "--user", USER, *args]
    t0 = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0 or "ignored" in done.stderr:
        raise SystemExit(f"uac {' '.join(args[:1])} failed on {db}: {done.stderr[-2000:]}")
    return wall


def pairs(size: int, cache: Path, work: Path, reps: int, quiet: bool) -> dict[str, Any]:
    base, history = build(size, cache, quiet)
    work.mkdir(parents=True, exist_ok=True)
    plain = work / f"plain-{size}.duckdb"
    shutil.copyfile(base, plain)
    con = duckdb.connect(str(plain))
    con.execute("DELETE FROM snapshots")
    con.close()
    files = inputs(history, work)
    forget = ("Transaction", history.live["Transaction"][0])
    figures: dict[str, Any] = {}
    for name, args in operations(files, forget).items():
        walls: dict[str, list[float]] = {"snapshot": [], "plain": []}
        for _ in range(reps):
            for mode, src in (("snapshot", base), ("plain", plain)):
                db = work / f"run-{mode}.duckdb"
                shutil.copyfile(src, db)
                walls[mode].append(run(db, args))
                db.unlink()
        snap, full = statistics.median(walls["snapshot"]), statistics.median(walls["plain"])
        figures[name] = {"snapshot_s": snap, "plain_s": full, "ratio": snap / full, **walls}
        if not quiet:
            print(f"{size:>9,} {name:22s} snapshot {snap:7.2f} s  plain {full:7.2f} s  "
                  f"ratio {snap / full:5.2f}")  # fmt: skip
    return figures


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[20_000, 100_000, 1_000_000])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="2,000 events, one rep")
    ap.add_argument("--workdir", type=Path, default=HERE / "out" / "snapshot_pairs")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    sizes, reps = ([2000], 1) if args.quick else (args.sizes, args.reps)
    default = args.workdir if args.quick else HERE / "results"
    out = args.out or default / "snapshot_pairs.json"
    args.workdir.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"machine": machine(), "target": TARGET, "reps": reps, "sizes": {}}
    for size in sizes:
        results["sizes"][str(size)] = pairs(
            size, args.workdir, args.workdir / f"run-{size}", reps, args.quiet
        )
        out.write_text(json.dumps(results, indent=1))  # a long run keeps what it measured
    results["load_average_at_end"] = os.getloadavg()
    worst = max(f["ratio"] for s in results["sizes"].values() for f in s.values())
    results["worst_ratio"] = worst
    out.write_text(json.dumps(results, indent=1))
    print(f"worst ratio {worst:.2f} (target <= {TARGET}); wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
