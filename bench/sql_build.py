"""`uac sql`'s first query against its floor, on a synthetic history of a given size.

For a store of ``--size`` fact events (bench/scale.py's seeded ``History``, ingested in 10k
batches; ``--store`` reuses a file made before) this measures, in the same run:

- first query: the whole ``Workbench.sql("SELECT count(*) FROM uac_tables")`` on a freshly
  opened workbench, which builds every type's ``<T>`` and ``<T>_history`` by SQL over the log
  (uac_kernel.sql.build) and copies them into the sandboxed view;
- floor: one DuckDB query over the same log, the latest payload of every key of every type
  (``arg_max(payload, seq)`` grouped by type and key), materialised as a table in DuckDB;
- the Python build of the same tables from the folded state (``SqlView`` without a store),
  the way ``uac sql`` built them before.

Each is the median of ``--reps`` runs (a fresh workbench each time for the first query), in
wall-clock seconds and in this process's CPU seconds, with the load average at the end. The
target of issue 14: first query <= 3x the floor. Run ``python bench/sql_build.py --size 100000``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from uac_kernel.sql.view import SqlView
from uac_kernel.workbench import Workbench

TARGET = 3.0


def make_store(size: int, path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from scale import USER, History  # bench/scale.py's synthetic user

    with tempfile.TemporaryDirectory() as tmp:
        files = History(size).write_batches(Path(tmp), False)
        wb = Workbench(path, user=USER)
        for f in files:
            wb.ingest(f)
        wb.close()


def cpu_seconds() -> float:
    """This process's CPU time (every thread's, DuckDB's included): on a machine others share,
    it moves less than the wall clock."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def floor_seconds(con: duckdb.DuckDBPyConnection, user: str, upto: int) -> tuple[float, float]:
    cur = con.cursor()
    c = cpu_seconds()
    t = time.perf_counter()
    cur.execute(
        "CREATE OR REPLACE TEMP TABLE floor AS SELECT payload->>'$.type' AS type, "
        "payload->>'$.key' AS key, arg_max(payload, seq) AS latest FROM events "
        "WHERE user_id = ? AND kind = 'fact' AND seq <= ? GROUP BY ALL",
        [user, upto],
    )
    dt, dc = time.perf_counter() - t, cpu_seconds() - c
    cur.close()
    return dt, dc


def run(path: Path, user: str, reps: int) -> dict[str, float | int]:
    first, floor, python, first_cpu, floor_cpu = [], [], [], [], []
    rows = 0
    for _ in range(reps):
        wb = Workbench(path, user=user, read_only=True)
        c = cpu_seconds()
        t = time.perf_counter()
        result = wb.sql("SELECT count(*) FROM uac_tables")
        first.append(time.perf_counter() - t)
        first_cpu.append(cpu_seconds() - c)
        wall, cpu = floor_seconds(wb.store.con, user, wb.state.seq)
        floor.append(wall)
        floor_cpu.append(cpu)
        view = SqlView()
        t = time.perf_counter()
        view.refresh(wb.state)
        python.append(time.perf_counter() - t)
        rows = sum(
            wb.sql(f'SELECT count(*) FROM "{h}"').rows[0][0] for _, h in wb.sql_tables().values()
        )
        assert result.rows[0][0] == len(wb.sql_tables())
        wb.close()
    f, fl, py, fc, flc = (
        statistics.median(x) for x in (first, floor, python, first_cpu, floor_cpu)
    )
    return {
        "history_rows": rows,
        "first_query_s": round(f, 3),
        "floor_s": round(fl, 3),
        "ratio": round(f / fl, 2),
        "target_ratio": TARGET,
        "first_query_cpu_s": round(fc, 3),
        "floor_cpu_s": round(flc, 3),
        "cpu_ratio": round(fc / flc, 2),
        "python_build_s": round(py, 3),
        "load_average": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=100_000, help="fact events (default 100000)")
    ap.add_argument("--store", type=Path, help="reuse (or create) this store file")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.store or Path(tmp) / "store.duckdb"
        if not path.exists():
            t = time.perf_counter()
            make_store(args.size, path)
            print(f"made {path} ({args.size:,} events) in {time.perf_counter() - t:.1f} s")
        out = run(path, "me", args.reps)
    print(json.dumps({"size": args.size, **out}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
