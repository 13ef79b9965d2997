"""Whole-process `uac eval "1"` on a store with a snapshot plus new events, against the same
store with its snapshot deleted (a full fold), in the same run.

    python bench/snapshot_open.py STORE [--new 1000] [--reps 3] [--workdir DIR] [--out FILE]

STORE is a store of one user ``me`` whose snapshot covers its log, e.g. the ``ingest.duckdb``
that ``bench/scale.py --stage-ingest N --keep`` leaves (its last close writes the snapshot).
The script copies it, ingests ``--new`` more events of the same generated history (fewer than
``CLOSE_AFTER``, so the snapshot is not refreshed), copies that and deletes the copy's snapshot,
then times the two opens alternately, with a floor (the same command on a store of one event),
and prints wall time and peak RSS (min and median of ``--reps``) and the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from scale import USER, History  # noqa: E402

from uac_kernel.checkpoints.snapshot import CLOSE_AFTER  # noqa: E402
from uac_kernel.workbench import Workbench  # noqa: E402


def run(db: Path) -> tuple[float, float | None]:
    """Wall seconds and peak RSS (MB) of one `uac eval "1"` process, as /usr/bin/time sees it
    (the resource usage of a child of this process would count this process's own peak: Linux
    keeps the high-water mark across fork and exec). Without /usr/bin/time (a minimal machine),
    the wall time alone."""
    cmd = [sys.executable, "-m", "uac_kernel.cli.main", "eval", "--db", str(db), "1"]
    out = db.with_suffix(".time")
    timed = Path("/usr/bin/time").exists()
    if timed:
        cmd = ["/usr/bin/time", "-o", str(out), "-f", "%e %M", *cmd]
    t = time.perf_counter()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - t
    if done.returncode != 0 or "ignored" in done.stderr:
        raise SystemExit(f"uac eval failed on {db}: {done.stderr}")
    if not timed:
        return took, None
    wall, kb = out.read_text().split()[-2:]
    return float(wall), int(kb) / 1024


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("store", type=Path)
    ap.add_argument("--new", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "snapshot_open.json")
    args = ap.parse_args()
    if args.new >= CLOSE_AFTER:
        raise SystemExit(f"--new must stay under CLOSE_AFTER ({CLOSE_AFTER}) to keep the snapshot")
    work = args.workdir or args.store.parent
    snap, full = work / "snap_delta.duckdb", work / "full_fold.duckdb"
    shutil.copy(args.store, snap)
    con = duckdb.connect(str(snap), read_only=True)
    row = con.execute("SELECT count(*) FROM events WHERE kind = 'fact'").fetchone()
    con.close()
    done = int(row[0]) if row else 0
    history = History(done)
    for _ in range(done):
        history.next()
    with Workbench(snap, user=USER) as wb:
        report = wb.ingest([history.next() for _ in range(args.new)])
    shutil.copy(snap, full)
    con = duckdb.connect(str(full))
    con.execute("DELETE FROM snapshots")
    con.close()
    # The floor: the same command on a store of one event (start-up, imports, the sandbox).
    floor = work / "floor.duckdb"
    floor.unlink(missing_ok=True)
    with Workbench(floor, user=USER) as wb:
        wb.ingest([History(1).next()])
    print(f"{done:,} fact events in the snapshot, {report.appended:,} new after it")
    times: dict[str, list[tuple[float, float | None]]] = {
        "snapshot + new": [],
        "full fold": [],
        "floor (1 event)": [],
    }
    for _ in range(args.reps):
        times["snapshot + new"].append(run(snap))
        times["full fold"].append(run(full))
        times["floor (1 event)"].append(run(floor))
    for name, got in times.items():
        walls, rss = [w for w, _ in got], [r for _, r in got if r is not None]
        peak = (
            f"peak RSS min {min(rss):.0f} MB median {statistics.median(rss):.0f} MB"
            if rss
            else "peak RSS not measured (no /usr/bin/time)"
        )
        print(
            f"{name:15s} wall min {min(walls):.2f} s median {statistics.median(walls):.2f} s; {peak}"
        )
    a = min(w for w, _ in times["snapshot + new"])
    b = min(w for w, _ in times["full fold"])
    f = min(w for w, _ in times["floor (1 event)"])
    # On a small store the full fold can cost no more than the floor: no ratio above it then.
    above = round((a - f) / (b - f), 3) if b > f else None
    print(
        f"ratio (min wall): {a / b:.3f}; above the floor: {above if above is not None else 'n/a'}"
    )
    doc = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "cpu_count": os.cpu_count(),
        "fact_events_in_snapshot": done,
        "new_after_snapshot": report.appended,
        "reps": args.reps,
        "wall_s": {k: [w for w, _ in v] for k, v in times.items()},
        "peak_rss_mb": {k: [r for _, r in v] for k, v in times.items()},
        "ratio_min_wall": round(a / b, 3),
        "ratio_above_floor": above,
        "target": 0.1,
        "load_average_at_end": round(os.getloadavg()[0], 2),
    }
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"results in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
