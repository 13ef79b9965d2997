"""`uac sql`'s first query against its floor, on a synthetic history of a given size.

For a store of ``--size`` fact events (bench/scale.py's seeded ``History``, ingested in 10k
batches, its snapshot written at the last close; ``--store`` reuses a file made before) this
measures, in the same run:

- first query, one type: ``SELECT count(*) FROM T`` for the type with the most events on a
  freshly opened workbench, which builds only T's current table, in three stores:
  ``snapshot`` (the store as made: its snapshot covers the log, so the table is copied from the
  snapshot's typed table), ``snapshot + new`` (``--new`` more events of the same history logged
  after the snapshot: the snapshot's rows and the records changed since) and ``log`` (the
  snapshot deleted: the current records folded by SQL over the log);
- its floor, in the same store: one DuckDB query, the latest payload of every key of T
  (``arg_max(payload, seq)`` grouped by key), materialised as a table;
- first query of T's history (``SELECT count(*) FROM T_history``), from the log;
- first query, every type: the whole ``Workbench.sql("SHOW TABLES")``, which builds every
  type's ``<T>`` and ``<T>_history`` and copies them into the sandboxed view, against the
  floor over every type's events;
- the Python build of the same tables from the folded state (``SqlView`` without a store),
  the way ``uac sql`` built them before (``--no-python`` skips it).

Each is the median of ``--reps`` runs (a fresh workbench each time), in wall-clock seconds
(every type: and in this process's CPU seconds), with the load average at the end; the
results go to ``--out`` (bench/results/sql_build.json). Targets: one type's current table
<= 2x its floor; every type <= 3x its floor. Run ``python bench/sql_build.py --size 1000000``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
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


def one_type_stores(path: Path, work: Path, new: int) -> dict[str, Path]:
    """The stores of the one-type cases: ``path`` as made, a copy with ``new`` events of the
    same history after its snapshot, and a copy without a snapshot."""
    from scale import USER, History

    delta, log = work / "snapshot_new.duckdb", work / "log.duckdb"
    for p in (delta, log):
        shutil.copy(path, p)
        Path(f"{p}.wal").unlink(missing_ok=True)
    with duckdb.connect(str(delta), read_only=True) as con:
        row = con.execute("SELECT count(*) FROM events WHERE kind = 'fact'").fetchone()
    done = int(row[0]) if row else 0
    history = History(done)  # as made: its next events follow on
    for _ in range(done):
        history.next()
    with Workbench(delta, user=USER) as wb:
        wb.ingest([history.next() for _ in range(new)])
    with duckdb.connect(str(log)) as con:
        con.execute("DELETE FROM snapshots")
    return {"snapshot": path, "snapshot + new": delta, "log": log}


def one_type(stores: dict[str, Path], user: str, reps: int) -> dict[str, object]:
    """Each one-type case's first query and floor (medians), and the history table's."""
    big = largest_type(stores["snapshot"], user)
    out: dict[str, object] = {"one_type": big}
    for case, path in stores.items():
        first, floors = [], []
        for _ in range(reps):
            wb = Workbench(path, user=user, read_only=True)
            t = time.perf_counter()
            counted = wb.sql(f'SELECT count(*) FROM "{big}"').rows[0][0]
            first.append(time.perf_counter() - t)
            floors.append(floor_seconds(wb.store.con, user, wb.state.seq, big)[0])
            assert counted == wb.state.counts()[big]
            if case == "log":
                t = time.perf_counter()
                wb.sql(f'SELECT count(*) FROM "{big}_history"')
                out.setdefault("history", []).append(time.perf_counter() - t)  # type: ignore[union-attr]
            wb.close()
        f, fl = statistics.median(first), statistics.median(floors)
        out[case] = {
            "first_query_s": round(f, 3),
            "floor_s": round(fl, 3),
            "ratio": round(f / fl, 2),
        }
    hist = statistics.median(out.pop("history"))  # type: ignore[arg-type]
    log_floor = out["log"]["floor_s"]  # type: ignore[index]
    out["history_first_query_s"] = round(hist, 3)
    out["history_ratio"] = round(hist / log_floor, 2)
    out["target_ratio"] = TARGET_ONE
    return out


def every_type(path: Path, user: str, reps: int, python: bool) -> dict[str, float | int]:
    first, floor, py, first_cpu, floor_cpu = [], [], [], [], []
    rows = 0
    for _ in range(reps):
        wb = Workbench(path, user=user, read_only=True)
        c = cpu_seconds()
        t = time.perf_counter()
        wb.sql("SHOW TABLES")
        first.append(time.perf_counter() - t)
        first_cpu.append(cpu_seconds() - c)
        wall, cpu = floor_seconds(wb.store.con, user, wb.state.seq)
        floor.append(wall)
        floor_cpu.append(cpu)
        if python:
            view = SqlView()
            t = time.perf_counter()
            view.refresh(wb.state)
            py.append(time.perf_counter() - t)
        rows = sum(
            wb.sql(f'SELECT count(*) FROM "{h}"').rows[0][0] for _, h in wb.sql_tables().values()
        )
        wb.close()
    f, fl, fc, flc = (statistics.median(x) for x in (first, floor, first_cpu, floor_cpu))
    out: dict[str, float | int] = {
        "history_rows": rows,
        "first_query_s": round(f, 3),
        "floor_s": round(fl, 3),
        "ratio": round(f / fl, 2),
        "target_ratio": TARGET,
        "first_query_cpu_s": round(fc, 3),
        "floor_cpu_s": round(flc, 3),
        "cpu_ratio": round(fc / flc, 2),
    }
    if py:
        out["python_build_s"] = round(statistics.median(py), 3)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=100_000, help="fact events (default 100000)")
    ap.add_argument("--store", type=Path, help="reuse (or create) this store file")
    ap.add_argument("--new", type=int, default=1000, help="events after the snapshot (1000)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-python", action="store_true", help="skip the Python build")
    ap.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "sql_build.json"
    )
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from scale import USER

    with tempfile.TemporaryDirectory() as tmp:
        path = args.store or Path(tmp) / "store.duckdb"
        if not path.exists():
            t = time.perf_counter()
            make_store(args.size, path)
            print(f"made {path} ({args.size:,} events) in {time.perf_counter() - t:.1f} s")
        made = Path(tmp) / "made.duckdb"  # the runs never write to the store given
        shutil.copy(path, made)
        stores = one_type_stores(made, Path(tmp), args.new)
        out = {
            "size": args.size,
            "new_after_snapshot": args.new,
            **one_type(stores, USER, args.reps),
            "every_type": every_type(made, USER, args.reps, not args.no_python),
            "load_average": round(os.getloadavg()[0], 2),
        }
    text = json.dumps(out, indent=2)
    print(text)
    args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
