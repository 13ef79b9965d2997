"""What a notebook's small steps cost when its process keeps the store's connection, and how long
another process waits for the file.

1. Per operation, in one process (a ``Workbench`` on a store of ``--events`` notes): a
   one-event ingest, an ``eval`` right after that write, and ``log(limit=1)``, ``--reps`` times
   each, either back to back (``kept``: the connection is never closed between them) or
   ``--pause`` seconds apart, as a notebook's cells are (``notebook``). Target: notebook <= 1.3x
   kept, per operation; the steps that found the connection closed are counted, and the same
   pacing of one query on a kept DuckDB connection gives the machine's own cost of pausing
   (``floor_paced_over_back_to_back``). With ``--before DIR`` (e.g. ``git archive COMMIT | tar -x -C DIR``) the
   same notebook steps run on that engine too.
2. Handover: a process holds the store with its connection kept (idle after an operation), and
   another uac process opens it to write (``Store(path)``). Its wait is the open's time minus
   the same open with no holder. Target: about half a second at most.

Each engine runs in its own subprocess (through ``PYTHONPATH``) on its own copy of the store;
medians; results to ``--out`` (bench/results/kept_connection.json).

    python bench/kept_connection.py [--events 2000] [--reps 30] [--pause 0.5] [--before DIR]
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from shared import notes  # noqa: E402  (bench/shared.py: notes with a source each)

TARGET = 1.3

SESSION = """
import json, sys, time
from uac_kernel.workbench import Workbench
db, reps, pause = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
wb = Workbench(db, user=sys.argv[4])
wb.eval("1")  # forks the warm sandbox
connects = 0  # steps that found the connection closed, so opened it again
times = {"ingest": [], "eval_after_write": [], "log": []}
for i in range(reps):
    ev = {"kind": "fact", "ts": "2025-06-01T10:00:00", "op": "add", "type": "Note",
          "key": f"s{pause}-{i}", "fields": {"text": "x", "n": i}}
    steps = (("ingest", lambda: wb.ingest([ev])),
             ("eval_after_write", lambda: wb.eval("len(user.all('Note'))")),
             ("log", lambda: wb.log(limit=1)))
    for name, step in steps:
        time.sleep(pause)
        connects += not wb.store.connected
        t = time.perf_counter(); step(); times[name].append(time.perf_counter() - t)
times["connects"] = connects
wb.close()
print(json.dumps(times))
"""

# The machine's own cost of pausing (caches, clock speed): one query on a kept DuckDB
# connection and a little Python, back to back and paced.
FLOOR = """
import json, sys, time
import duckdb
con = duckdb.connect(sys.argv[1], read_only=True)
reps, pause = int(sys.argv[2]), float(sys.argv[3])
times = []
for _ in range(reps):
    time.sleep(pause)
    t = time.perf_counter()
    con.execute("SELECT max(seq) FROM events").fetchone()
    sorted(str(i) for i in range(2000))
    times.append(time.perf_counter() - t)
print(json.dumps(times))
"""

HOLDER = """
import sys
from uac_kernel.workbench import Workbench
wb = Workbench(sys.argv[1], user=sys.argv[2])
wb.eval("1")
print("ready", flush=True)
sys.stdin.readline()
"""

TAKER = """
import json, sys, time
from uac_kernel.log.store import Store
t = time.perf_counter()
Store(sys.argv[1], lock_timeout=60).close()
print(json.dumps(time.perf_counter() - t))
"""


def env(engine: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(engine), "UAC_LOCK_TIMEOUT": "60"}


# `python -c` puts its working directory first on sys.path: run where no engine is, so each
# process imports the engine PYTHONPATH names.
NOWHERE = tempfile.gettempdir()


def run_json(engine: Path, code: str, *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        env=env(engine),
        cwd=NOWHERE,
    )
    if done.returncode:
        raise SystemExit(f"a bench process failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def session(
    engine: Path, seed: Path, user: str, work: Path, reps: int, pause: float
) -> dict[str, float]:
    db = work / f"session-{engine.name}-{pause}.duckdb"
    shutil.copy(seed, db)
    times = run_json(engine, SESSION, str(db), str(reps), str(pause), user)
    out = {op: round(1000 * statistics.median(t), 2) for op, t in times.items() if op != "connects"}
    return {**out, "connects": times["connects"]}


def floor(seed: Path, reps: int, pause: float) -> float:
    return statistics.median(run_json(ROOT, FLOOR, str(seed), str(3 * reps), str(pause)))


def handover(engine: Path, seed: Path, user: str, work: Path, reps: int) -> dict[str, float]:
    db = work / "handover.duckdb"
    shutil.copy(seed, db)
    alone, waited = [], []
    for _ in range(reps):
        alone.append(run_json(engine, TAKER, str(db)))
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(db), user],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env(engine),
            cwd=NOWHERE,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
            time.sleep(0.5)  # idle, its connection kept
            waited.append(run_json(engine, TAKER, str(db)))
        finally:
            holder.communicate("\n", timeout=120)
    a, w = statistics.median(alone), statistics.median(waited)
    return {
        "open_alone_s": round(a, 3),
        "open_beside_holder_s": round(w, 3),
        "wait_s": round(w - a, 3),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=2000, help="notes in the store made")
    ap.add_argument("--store", type=Path, help="a store to copy instead (e.g. bench/scale.py's)")
    ap.add_argument("--user", default="bench", help="its user (default bench)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--pause", type=float, default=0.5, help="seconds between notebook steps")
    ap.add_argument("--handovers", type=int, default=7)
    ap.add_argument("--before", type=Path, help="another checkout's engine, for comparison")
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "kept_connection.json"
    )
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="uac-kept-"))
    try:
        seed, user = work / "seed.duckdb", args.user
        if args.store is not None:
            shutil.copy(args.store, seed)
        else:
            src = work / "notes.jsonl"
            src.write_text(notes("n", args.events))
            run_json(ROOT, "import sys, json\nfrom uac_kernel.workbench import Workbench\n"
                     "wb = Workbench(sys.argv[1], user=sys.argv[3]); wb.ingest(sys.argv[2])\n"
                     "wb.close(); print(1)", str(seed), str(src), user)  # fmt: skip
        kept = session(ROOT, seed, user, work, args.reps, 0.0)
        notebook = session(ROOT, seed, user, work, args.reps, args.pause)
        out: dict[str, Any] = {
            "store": str(args.store) if args.store else f"{args.events} notes",
            "reps": args.reps,
            "pause_s": args.pause,
            "kept_ms": kept,
            "notebook_ms": notebook,
            "notebook_over_kept": {
                op: round(notebook[op] / kept[op], 2) for op in kept if op != "connects"
            },
            "target": TARGET,
            "floor_paced_over_back_to_back": round(
                floor(seed, args.reps, args.pause) / floor(seed, args.reps, 0.0), 2
            ),
        }
        if args.before is not None:
            before = session(args.before.resolve(), seed, user, work, args.reps, args.pause)
            out["notebook_ms_before"] = before
            out["before_over_kept"] = {
                op: round(before[op] / kept[op], 2) for op in kept if op != "connects"
            }
        out["handover"] = handover(ROOT, seed, user, work, args.handovers)
        out["load_average"] = round(os.getloadavg()[0], 2)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(out, indent=2)
    print(text)
    args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
