"""Whole-process `uac eval "1"` on a store with a snapshot plus new events, against the same
store with its snapshot deleted (a full fold), in the same run.

    python bench/snapshot_open.py STORE [--new 1000] [--reps 3] [--workdir DIR]

STORE is a store of one user ``me`` whose snapshot covers its log, e.g. the ``ingest.duckdb``
that ``bench/scale.py --stage-ingest N --keep`` leaves (its last close writes the snapshot).
The script copies it, ingests ``--new`` more events of the same generated history (fewer than
``CLOSE_AFTER``, so the snapshot is not refreshed), copies that and deletes the copy's snapshot,
then times the two opens alternately, with a floor (the same command on a store of one event),
and prints wall time and peak RSS (min and median of ``--reps``) and the ratios.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from scale import USER, History  # noqa: E402

from uac_kernel.checkpoints.snapshot import CLOSE_AFTER  # noqa: E402
from uac_kernel.workbench import Workbench  # noqa: E402


def run(db: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one `uac eval "1"` process, as /usr/bin/time sees it
    (the resource usage of a child of this process would count this process's own peak: Linux
    keeps the high-water mark across fork and exec)."""
    out = db.with_suffix(".time")
    cmd = ["/usr/bin/time", "-o", str(out), "-f", "%e %M"]
    cmd += [sys.executable, "-m", "uac_kernel.cli.main", "eval", "--db", str(db), "1"]
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0 or "ignored" in done.stderr:
        raise SystemExit(f"uac eval failed on {db}: {done.stderr}")
    wall, kb = out.read_text().split()[-2:]
    return float(wall), int(kb) / 1024


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("store", type=Path)
    ap.add_argument("--new", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--workdir", type=Path, default=None)
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
    times: dict[str, list[tuple[float, float]]] = {
        "snapshot + new": [],
        "full fold": [],
        "floor (1 event)": [],
    }
    for _ in range(args.reps):
        times["snapshot + new"].append(run(snap))
        times["full fold"].append(run(full))
        times["floor (1 event)"].append(run(floor))
    for name, got in times.items():
        walls, rss = [w for w, _ in got], [r for _, r in got]
        print(
            f"{name:15s} wall min {min(walls):.2f} s median {statistics.median(walls):.2f} s; "
            f"peak RSS min {min(rss):.0f} MB median {statistics.median(rss):.0f} MB"
        )
    a = min(w for w, _ in times["snapshot + new"])
    b = min(w for w, _ in times["full fold"])
    f = min(w for w, _ in times["floor (1 event)"])
    print(f"ratio (min wall): {a / b:.3f}; above the floor: {(a - f) / (b - f):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
