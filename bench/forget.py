"""How the cost of ``forget`` grows with the checkpoints it re-renders (issue 12).

A user with one Allergy record and ``C`` checkpoints of ``--per`` new Trip records each is
written; then the Allergy (the user's first fact, so every checkpoint holds it) is forgotten and
timed: the plan, the erasure, the re-rendered code of every checkpoint, and the rewrite of the
file. Side by side in one run for each ``C`` in ``--checkpoints``; the figure to watch is the
time per checkpoint, which stays flat when re-rendering follows what each checkpoint changed
(it grew with the store while every checkpoint was rendered whole). Results go to
``bench/results/forget.json``.

    python bench/forget.py [--checkpoints 20 100 200] [--per 40] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import scale  # bench/scale.py, beside this script: machine facts

from uac_kernel.workbench import Workbench

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "forget.json"


def run(path: Path, checkpoints: int, per: int) -> dict[str, Any]:
    with Workbench(path, user="u") as wb:
        wb.ingest(
            [
                {
                    "kind": "fact",
                    "ts": "2025-01-01T00:00:00",
                    "op": "add",
                    "type": "Allergy",
                    "key": "a1",
                    "fields": {"substance": "Zyloprimarex"},
                }
            ]
        )
        for c in range(checkpoints):
            wb.ingest(
                [
                    {
                        "kind": "fact",
                        "ts": f"2025-02-01T{c % 24:02d}:{i % 60:02d}:00",
                        "op": "add",
                        "type": "Trip",
                        "key": f"t{c}-{i}",
                        "fields": {"destination": f"city {c}-{i}"},
                    }
                    for i in range(per)
                ]
            )
            wb.checkpoint()
        start = time.perf_counter()
        plan = wb.forget(type="Allergy", key="a1")
        took = time.perf_counter() - start
        if not wb.verify().ok or len(plan.checkpoints) != checkpoints:
            raise SystemExit(f"forget at {checkpoints} checkpoints did not verify")
    return {
        "checkpoints": checkpoints,
        "records": checkpoints * per + 1,
        "forget_s": took,
        "per_checkpoint_ms": took / checkpoints * 1000,
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoints", type=int, nargs="+", default=[20, 100, 200])
    ap.add_argument("--per", type=int, default=40)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(dir=HERE / "out") as work:
        for n in args.checkpoints:
            rows.append(run(Path(work) / f"f{n}.duckdb", n, args.per))
            r = rows[-1]
            print(
                f"{n:>5} checkpoints, {r['records']:>6} records: forget {r['forget_s']:.2f} s, "
                f"{r['per_checkpoint_ms']:.1f} ms a checkpoint"
            )
    growth = rows[-1]["per_checkpoint_ms"] / rows[0]["per_checkpoint_ms"]
    result = {
        "date": datetime.now().isoformat(timespec="seconds"),
        "machine": scale.machine(),
        "per": args.per,
        "rows": rows,
        "per_checkpoint_growth": growth,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"time a checkpoint, largest / smallest: {growth:.2f}x; {args.out}")
    return result


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
