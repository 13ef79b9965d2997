"""Opening a user whose record type has many fields: the cost per field must stay flat.

For a type of 100, 500 and 2,000 fields (``--fields``) this writes a store holding what an
older uac let in: one ``add`` that brings every field at once, then ``--records`` more records
of the type in later events (each setting ten fields). The events are written through
``Store.append``, as an older version wrote them, since today's input limits (300 fields a
type, 100 new ones an event) would refuse them. Then it opens the user
(``Workbench(path, read_only=True)``) in a fresh process per round and reports the median wall
time, the ratio of seconds per field to the smallest size's (flat is linear; before the fix it
grew with the size: 500 fields took 3.6 s, 2,000 took 47 s and 6 GB), peak memory, and how
many record classes the type had (one per settled batch of schema changes, not one per field).

``--before PATH`` also opens the same stores with another checkout's engine (``git archive
COMMIT uac_kernel uac | tar -x -C PATH``) through ``PYTHONPATH``, up to ``--before-max`` fields
(quadratic engines take minutes and gigabytes beyond that).

    python bench/fields.py [--fields 100 500 2000] [--reps 3] [--out bench/results/fields.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import scale  # bench/scale.py, beside this script: machine facts

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "fields.json"
USER = "bench"
TYPE = "Wide"

# One round in a fresh process: open the user, print wall seconds, peak MB and class builds.
PROBE = """
import json, resource, sys, time
from uac_kernel.workbench import Workbench

t0 = time.perf_counter()
wb = Workbench(sys.argv[1], user=sys.argv[2], read_only=True)
seconds = time.perf_counter() - t0
ts = wb.state.types[sys.argv[3]]
print(json.dumps({
    "seconds": seconds,
    "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "builds": getattr(ts, "builds", None),
    "fields": len(ts.readers),
    "records": len(ts.current),
}))
wb.close()
"""


def build_store(path: Path, fields: int, records: int) -> None:
    """One type of ``fields`` fields, added by one event, then ``records`` more records."""
    from uac_kernel.log.store import NewEvent, Store

    t = datetime(2025, 1, 1)
    names = [f"f{i}" for i in range(fields)]
    events = [NewEvent(t, "schema", USER, {"type": TYPE})]
    events += [
        NewEvent(t, "schema", USER, {"type": TYPE, "field": f, "ftype": "int"}) for f in names
    ]
    events.append(
        NewEvent(
            t,
            "fact",
            USER,
            {
                "op": "add",
                "type": TYPE,
                "key": "all",
                "fields": {f: i for i, f in enumerate(names)},
            },
            "bench:all",
        )
    )
    for r in range(records):
        given = {names[(r * 10 + j) % fields]: r for j in range(10)}
        when = t + timedelta(minutes=r + 1)
        payload = {"op": "add", "type": TYPE, "key": f"r{r}", "fields": given}
        events.append(NewEvent(when, "fact", USER, payload, f"bench:{r}"))
    store = Store(str(path))
    try:
        store.append(events)
    finally:
        store.close()


def open_once(path: Path, engine: str | None) -> dict[str, Any]:
    env = dict(os.environ)
    if engine is not None:
        env["PYTHONPATH"] = engine
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(path), USER, TYPE],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        return {"error": f"rc {done.returncode}: {done.stderr.strip()[-300:]}"}
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def measure(path: Path, reps: int, engine: str | None) -> dict[str, Any]:
    rounds = [open_once(path, engine) for _ in range(reps)]
    failed = [r for r in rounds if "error" in r]
    if failed:
        return {"error": failed[0]["error"]}
    return {
        "seconds": statistics.median(r["seconds"] for r in rounds),
        "rounds": [r["seconds"] for r in rounds],
        "peak_mb": max(r["peak_mb"] for r in rounds),
        "builds": rounds[0]["builds"],
        "records": rounds[0]["records"],
    }


def with_ratios(rows: dict[int, dict[str, Any]]) -> None:
    """Add seconds per field and its ratio to the smallest size's (1.0 everywhere = linear)."""
    base: float | None = None
    for n in sorted(rows):
        row = rows[n]
        if "seconds" not in row:
            continue
        row["ms_per_field"] = row["seconds"] / n * 1000
        base = base or row["ms_per_field"]
        row["per_field_vs_smallest"] = row["ms_per_field"] / base


def table(results: dict[str, Any]) -> str:
    lines = [
        f"open a user whose type {TYPE} has N fields (+{results['records']} records), "
        f"median of {results['reps']} fresh processes",
        f"{'engine':<8}{'fields':>8}{'open s':>10}{'ms/field':>10}{'vs 1st':>8}{'peak MB':>9}"
        f"{'classes':>9}",
    ]
    for engine in ("after", "before"):
        for n, row in sorted(results.get(engine, {}).items(), key=lambda kv: int(kv[0])):
            if "error" in row:
                lines.append(f"{engine:<8}{n:>8}  failed: {row['error'][:60]}")
                continue
            lines.append(
                f"{engine:<8}{n:>8}{row['seconds']:>10.3f}{row['ms_per_field']:>10.3f}"
                f"{row['per_field_vs_smallest']:>8.2f}{row['peak_mb']:>9.0f}"
                f"{row['builds'] if row['builds'] is not None else '-':>9}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fields", type=int, nargs="+", default=[100, 500, 2000])
    ap.add_argument("--records", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--before", help="another checkout's engine to open the same stores with")
    ap.add_argument("--before-max", type=int, default=500)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)

    results: dict[str, Any] = {
        "date": datetime.now().isoformat(timespec="seconds"),
        "machine": scale.machine(),
        "records": args.records,
        "reps": args.reps,
        "after": {},
    }
    if args.before:
        results["before"] = {}
        results["before_engine"] = args.before
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.fields:
            path = Path(tmp) / f"fields-{n}.duckdb"
            build_store(path, n, args.records)
            results["after"][n] = measure(path, args.reps, None)
            if args.before and n <= args.before_max:
                results["before"][n] = measure(path, 1, args.before)
    for engine in ("after", "before"):
        if engine in results:
            with_ratios(results[engine])
    print(table(results))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
