"""`uac sql`'s first query against its floor, on a synthetic history of a given size.

For a store of ``--size`` fact events (bench/scale.py's seeded ``History``, ingested in 10k
batches; ``--store`` reuses a file made before) this measures, in the same run:

- first query, every type: the whole ``Workbench.sql("SHOW TABLES")`` on a freshly opened
  workbench, which builds every type's ``<T>`` and ``<T>_history`` by SQL over the log
  (uac_kernel.sql.build) and copies them into the sandboxed view;
- floor: one DuckDB query over the same log, the latest payload of every key of every type
  (``arg_max(payload, seq)`` grouped by type and key), materialised as a table in DuckDB;
- first query, one type: ``SELECT count(*) FROM T`` for the type with the most events, which
  builds only T's tables, against the same floor over T's events alone;
- the Python build of the same tables from the folded state (``SqlView`` without a store),
  the way ``uac sql`` built them before.

Each is the median of ``--reps`` runs (a fresh workbench each time for a first query), in
wall-clock seconds and in this process's CPU seconds, with the load average at the end; the
results go to ``--out`` (bench/results/sql_build.json). Targets: every type <= 3x its floor;
one type <= 2x its floor. Run ``python bench/sql_build.py --size 100000``.
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

TARGET = 3.0  # every type's tables against the floor over every type
TARGET_ONE = 2.0  # one type's tables against the floor over that type


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


def floor_seconds(
    con: duckdb.DuckDBPyConnection, user: str, upto: int, only: str | None = None
) -> tuple[float, float]:
    """The latest payload of every key (of type ``only``, else of every type), as a table."""
    cur = con.cursor()
    c = cpu_seconds()
    t = time.perf_counter()
    one = " AND payload->>'$.type' = ?" if only is not None else ""
    cur.execute(
        "CREATE OR REPLACE TEMP TABLE floor AS SELECT payload->>'$.type' AS type, "
        "payload->>'$.key' AS key, arg_max(payload, seq) AS latest FROM events "
        f"WHERE user_id = ? AND kind = 'fact' AND seq <= ?{one} GROUP BY ALL",
        [user, upto, *([only] if only is not None else [])],
    )
    dt, dc = time.perf_counter() - t, cpu_seconds() - c
    cur.close()
    return dt, dc


def largest_type(path: Path, user: str) -> str:
    with duckdb.connect(str(path), read_only=True) as con:
        row = con.execute(
            "SELECT payload->>'$.type' FROM events WHERE user_id = ? AND kind = 'fact' "
            "GROUP BY 1 ORDER BY count(*) DESC LIMIT 1",
            [user],
        ).fetchone()
    assert row is not None, "no facts in the store"
    return str(row[0])


def run(path: Path, user: str, reps: int) -> dict[str, float | int | str]:
    first, floor, python, first_cpu, floor_cpu = [], [], [], [], []
    one, one_floor = [], []
    rows = 0
    big = largest_type(path, user)
    for _ in range(reps):
        wb = Workbench(path, user=user, read_only=True)
        t = time.perf_counter()
        counted = wb.sql(f'SELECT count(*) FROM "{big}"').rows[0][0]
        one.append(time.perf_counter() - t)
        one_floor.append(floor_seconds(wb.store.con, user, wb.state.seq, big)[0])
        assert counted == wb.state.counts()[big]
        wb.close()
        wb = Workbench(path, user=user, read_only=True)
        c = cpu_seconds()
        t = time.perf_counter()
        wb.sql("SHOW TABLES")
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
        wb.close()
    f, fl, py, fc, flc, o, ofl = (
        statistics.median(x) for x in (first, floor, python, first_cpu, floor_cpu, one, one_floor)
    )
    return {
        "history_rows": rows,
        "one_type": big,
        "one_type_first_query_s": round(o, 3),
        "one_type_floor_s": round(ofl, 3),
        "one_type_ratio": round(o / ofl, 2),
        "one_type_target_ratio": TARGET_ONE,
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
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "sql_build.json"
    )
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = args.store or Path(tmp) / "store.duckdb"
        if not path.exists():
            t = time.perf_counter()
            make_store(args.size, path)
            print(f"made {path} ({args.size:,} events) in {time.perf_counter() - t:.1f} s")
        out = run(path, "me", args.reps)
    text = json.dumps({"size": args.size, **out}, indent=2)
    print(text)
    args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
