"""What one new event costs as the history grows: whole `Workbench.ingest` calls of one event,
and the rules' share of them, on stores of 10k, 100k and 1M fact events, side by side.

For each size, a store of bench/scale.py's seeded synthetic history (ingested in 10k batches;
``--stores DIR`` keeps and reuses them) is copied and opened, and the next events of the same
history are ingested one at a time: ``--reps`` new records of each of Transaction (60% of the
history; the rules `duplicate_charge` and `transfer_during_freeze` read them in parts), Meeting
(5%; `overlapping_commitments`), Trip (3.5%; `residence_day_limits`, `schengen_90_180` and the
travel-document rules read every trip of their look-back), and one batch of ``--batch`` new
records in history order. An event's timestamp is the history's next, so within a day the log's clock
moves but its day does not, as in a real dense log. Medians of wall-clock seconds of the whole
ingest and of its "rules" lap (``IngestReport.seconds``), and the ratio of each size to the
smallest: the target is one event at 1M within 2x of one at 10k, the rules' cost within 1.5x.

    python bench/rules_incremental.py --sizes 10000 100000 1000000 --stores /tmp/stores

Results go to ``--out`` (bench/results/rules_incremental.json).
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
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from scale import USER, History  # noqa: E402
from sql_build import make_store  # noqa: E402

from uac_kernel.workbench import Workbench  # noqa: E402

TYPES = ("Transaction", "Meeting", "Trip")
TARGET_INGEST = 2.0  # one event at the largest size against the smallest
TARGET_RULES = 1.5


def next_of(history: History, type_: str) -> dict[str, Any]:
    """The history's next new record of ``type_`` (the events between are skipped)."""
    while True:
        ev = history.next()
        if ev["type"] == type_ and ev["op"] == "add":
            return ev


def measure(store: Path, size: int, reps: int, batch: int, work: Path) -> dict[str, Any]:
    db = work / f"m{size}.duckdb"
    for p in (db, Path(f"{db}.wal")):
        p.unlink(missing_ok=True)
    shutil.copy(store, db)
    history = History(size)
    for _ in range(size):
        history.next()
    t = time.perf_counter()
    wb = Workbench(db, user=USER)
    out: dict[str, Any] = {"open_s": round(time.perf_counter() - t, 3)}
    for _ in range(2):  # the first changes build the field indexes, the second the rules' parts
        wb.ingest([next_of(history, "Transaction")])
    for type_ in TYPES:
        total, rules = [], []
        for _ in range(reps):
            t = time.perf_counter()
            report = wb.ingest([next_of(history, type_)])
            total.append(time.perf_counter() - t)
            rules.append(report.seconds.get("rules", 0.0))
        out[type_] = {
            "ingest_s": round(statistics.median(total), 4),
            "rules_s": round(statistics.median(rules), 4),
        }
    events: list[dict[str, Any]] = []
    while len(events) < batch:  # new records only: an update may be of one skipped above
        if (ev := history.next())["op"] == "add":
            events.append(ev)
    t = time.perf_counter()
    report = wb.ingest(events)
    out[f"batch_{batch}"] = {
        "ingest_s": round(time.perf_counter() - t, 4),
        "rules_s": round(report.seconds.get("rules", 0.0), 4),
    }
    wb.close()
    db.unlink(missing_ok=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--stores", type=Path, help="keep and reuse the stores here")
    ap.add_argument("--reps", type=int, default=7, help="events of each type (medians)")
    ap.add_argument("--batch", type=int, default=100, help="events in the batch measured")
    ap.add_argument(
        "--out", type=Path, default=HERE / "results" / "rules_incremental.json", help="JSON"
    )
    args = ap.parse_args(argv)
    sizes = sorted(args.sizes)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        stores = args.stores or Path(tmp)
        stores.mkdir(parents=True, exist_ok=True)
        for size in sizes:
            store = stores / f"s{size}.duckdb"
            if not store.exists():
                t = time.perf_counter()
                make_store(size, store)
                print(f"made {store} in {time.perf_counter() - t:.1f} s", file=sys.stderr)
            results[str(size)] = measure(store, size, args.reps, args.batch, Path(tmp))
            print(f"{size:>9,}: {json.dumps(results[str(size)])}", file=sys.stderr)
    small, large = results[str(sizes[0])], results[str(sizes[-1])]
    ratios = {
        k: {
            "ingest": round(large[k]["ingest_s"] / small[k]["ingest_s"], 2),
            "rules": round(large[k]["rules_s"] / max(small[k]["rules_s"], 1e-4), 2),
        }
        for k in (*TYPES, f"batch_{args.batch}")
    }
    doc = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "cpu_count": os.cpu_count(),
        "load_average_at_end": round(os.getloadavg()[0], 2),
        "targets": {"ingest": TARGET_INGEST, "rules": TARGET_RULES},
        "sizes": results,
        f"ratio_{sizes[-1]}_to_{sizes[0]}": ratios,
    }
    text = json.dumps(doc, indent=2)
    args.out.write_text(text + "\n")
    print(f"{'':14}{'ingest ratio':>14}{'rules ratio':>13}")
    for k, r in ratios.items():
        flag = "" if r["ingest"] <= TARGET_INGEST else "  (over the target)"
        print(f"{k:14}{r['ingest']:>13.2f}x{r['rules']:>12.2f}x{flag}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
