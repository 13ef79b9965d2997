"""What a what-if costs next to a plain ingest of the same events, on stores of 100k and 1M
fact events (issue 16: "a what-if over a 1M-event store costs the new events plus the rules
they touch: <= 2x a plain ingest of the same events, with no write").

For each size, a store of the synthetic user of ``bench/scale.py`` (``History``) plus one
penicillin ``Allergy``; then, for batches of N new events (N = 1, 10, 100, 1000: an
amoxicillin ``Medication`` that conflicts with the allergy, then ``scale.new_fact_mix``'s
updates, adds and two retracts of existing records), side by side in one run:

(a) ``wb.ingest(batch)`` on a fresh copy of the store file (copied once per measurement, so
    every ingest starts from the same log), only the ``ingest`` call timed;
(b) ``wb.whatif(batch, expressions=[])`` on the original store: its first what-if after the
    open (cold, as the ingest is the first write after its open) and a second one (warm).

Both workbenches are opened fresh for each measurement, in two ways: from the snapshot the
store's last close wrote ("snapshot") and, on a copy without snapshots, by a full fold
("fold"). On the smaller store (``--extras-size``, default 100k) also a what-if with the five
session expressions of ``bench/scale.py`` (each run before and after in a forked sandbox) and
a what-if in the past (``as_of`` the middle of the log, which replays the later log twice;
its cost grows with the log by design). The SHA-256 of the store files (and any ``.wal``) is
taken before the first open and after the last close, and around every what-if: they must not
change.

    python bench/whatif.py [--sizes 100000 1000000] [--ns 1 10 100 1000] [--reps 3] [--quick]

See ``bench/README.md``; ``tests/bench/test_bench_whatif.py`` runs ``--quick`` at a tiny size.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import duckdb
from tqdm import tqdm

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from scale import (  # noqa: E402  (bench/scale.py, beside this script)
    EXPRESSIONS,
    SEED,
    SPAN_SECONDS,
    START,
    TYPE_WEIGHTS,
    TYPES,
    USER,
    History,
    add_fields,
    machine,
    median,
    new_fact_mix,
    per_day,
    timed_cpu,
    without_snapshots,
)

from uac_kernel.workbench import Workbench  # noqa: E402

DEFAULT_OUT = HERE / "results" / "whatif.json"
DEFAULT_WORKDIR = HERE / "out"
TARGET = 2.0  # what-if / ingest of the same events
NS = (1, 10, 100, 1000)
MODES = ("snapshot", "fold")
# The allergy every store holds, and the drug each batch starts with: they conflict
# (drug_allergy_cross_reactivity: penicillin class, critical).
ALLERGY = {"substance": "penicillin", "severity": "severe", "reaction": "anaphylaxis"}
DRUG = "amoxicillin"
# The batch of the past what-if: this many adds dated at the middle of the log.
PAST_EVENTS = 10


# -- the stores and the batches --------------------------------------------------------------


def build_store(size: int, workdir: Path, progress: bool) -> tuple[Path, dict[str, Any]]:
    """The history of ``size`` fact events, ingested file by file as ``bench/scale.py`` does,
    plus the allergy; closed, so its snapshot covers the whole log. A store already in
    ``workdir`` (``--workdir`` of an earlier ``--keep`` run) is used as it is."""
    db = workdir / "store.duckdb"
    if db.exists():
        return db, {"reused": True}
    history = History(size)
    t0 = time.perf_counter()
    files = history.write_batches(workdir / "history", progress)
    with Workbench(db, user=USER) as wb:
        for path in tqdm(
            files, desc=f"ingest {size:,}", unit="batch", disable=not progress, leave=False
        ):
            wb.ingest(path)
        assert wb.state.now is not None
        ts = wb.state.now + timedelta(seconds=1)
        wb.ingest([fact("add", "Allergy", "allergy-penicillin", ts, ALLERGY)])
    shutil.rmtree(workdir / "history", ignore_errors=True)
    return db, {"reused": False, "build_s": time.perf_counter() - t0}


def fact(op: str, t: str, key: str, ts: datetime, fields: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "fact", "ts": ts.isoformat(), "op": op, "type": t, "key": key, "fields": fields}


def drug(ts: datetime) -> dict[str, Any]:
    fields = {"name": DRUG, "dose_mg": 500.0, "start": ts.date().isoformat(), "active": True}
    return fact("add", "Medication", f"med-{DRUG}", ts, fields)


def batches(wb: Workbench, size: int, ns: list[int]) -> dict[int, list[dict[str, Any]]]:
    """For each N: the conflicting drug, then N - 1 events of ``new_fact_mix`` (mostly updates
    of random current records, some adds, two retracts), all dated after the log's last."""
    assert wb.state.now is not None
    rng = random.Random(SEED + 16)
    out = {}
    for n in ns:
        if 1 < n < 5:
            raise SystemExit(f"N = {n}: a batch is the drug alone (1) or at least 5 events")
        mix = new_fact_mix(wb, rng, size, n - 1, tag=f"whatif-{n}") if n > 1 else []
        out[n] = [drug(wb.state.now + timedelta(seconds=30)), *mix]
    return out


def past_batch(size: int) -> tuple[datetime, list[dict[str, Any]]]:
    """The middle of the log's time, and ``PAST_EVENTS`` adds dated then: the drug and
    records of the history's types."""
    when = START + timedelta(seconds=SPAN_SECONDS // 2)
    rng = random.Random(SEED + 17)
    events = [drug(when)]
    kinds = rng.choices(TYPES, weights=list(TYPE_WEIGHTS.values()), k=PAST_EVENTS - 1)
    for j, t in enumerate(kinds):
        if t == "Medication":
            t = "Transaction"  # one key per drug: an add could name a drug already taken
        fields = add_fields(rng, t, when, per_day(size, t))
        events.append(fact("add", t, f"{t.lower()}-past-{j}", when, fields))
    return when, events


# -- measuring -------------------------------------------------------------------------------


def digest(db: Path) -> dict[str, str]:
    """SHA-256 of the store file and of any write-ahead log beside it."""
    out = {}
    for p in (db, db.with_name(db.name + ".wal")):
        if p.exists():
            out[p.name] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def opened(db: Path) -> tuple[float, Workbench]:
    """A workbench on ``db`` (read-write, as a notebook opens one) that never writes a
    snapshot when it closes, and the seconds the open took."""
    t0 = time.perf_counter()
    wb = Workbench(db, user=USER, snapshots=False)
    return time.perf_counter() - t0, wb


def closed(wb: Workbench) -> None:
    wb.close()
    del wb
    gc.collect()


def alerts_of(change: Any) -> list[str]:
    """The alerts a report raises, clears and updates, as comparable text (what-if = ingest)."""
    return sorted(
        f"{verb} {a.rule} {a.severity}"
        for verb, alerts in (("raised", change.raised), ("cleared", change.cleared))
        for a in alerts
    ) + sorted(f"updated {a.rule} {a.severity}" for a in change.updated)


class Checked:
    """Hashes of one store around its what-ifs: every one must equal the first."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.first = digest(db)
        self.checks = 0
        self.same = True

    def check(self) -> None:
        self.checks += 1
        self.same = self.same and digest(self.db) == self.first


def measure_mode(
    mode: str,
    src: Path,
    workdir: Path,
    ns: list[int],
    events: dict[int, list[dict[str, Any]]],
    reps: int,
    progress: bool,
) -> dict[str, Any]:
    """Ingest on a copy and what-if on ``src``, interleaved N by N, rep by rep."""
    store = Checked(src)
    runs: dict[int, dict[str, list[Any]]] = {
        n: {k: [] for k in ("ingest", "ingest_cpu", "cold", "cold_cpu", "warm", "opens")}
        for n in ns
    }
    stages: dict[int, list[dict[str, float]]] = {n: [] for n in ns}
    ingest_stages: dict[int, list[dict[str, float]]] = {n: [] for n in ns}
    matches: dict[int, bool] = dict.fromkeys(ns, True)
    summary: dict[int, str] = {}
    copy = workdir / "copy.duckdb"
    bar = tqdm(total=reps * len(ns), desc=mode, disable=not progress, leave=False)
    for _ in range(reps):
        for n in ns:
            batch = events[n]
            shutil.copyfile(src, copy)
            open_i, wb = opened(copy)
            wall, cpu, report = timed_cpu(partial(wb.ingest, batch))
            if report.appended != n:
                raise SystemExit(f"ingest of {n} appended {report.appended}")
            closed(wb)
            copy.unlink()
            copy.with_name(copy.name + ".wal").unlink(missing_ok=True)
            runs[n]["ingest"].append(wall)
            runs[n]["ingest_cpu"].append(cpu)
            ingest_stages[n].append(report.seconds)

            open_w, wb = opened(src)
            store.check()
            cold, cold_cpu, what = timed_cpu(partial(wb.whatif, batch, expressions=[]))
            store.check()
            warm, _, again = timed_cpu(partial(wb.whatif, batch, expressions=[]))
            store.check()
            closed(wb)
            if what.new != n or not alerts_of(what) == alerts_of(report) == alerts_of(again):
                matches[n] = False
            summary[n] = what.summary()
            runs[n]["cold"].append(cold)
            runs[n]["cold_cpu"].append(cold_cpu)
            runs[n]["warm"].append(warm)
            runs[n]["opens"].append((open_i, open_w))
            stages[n].append(what.seconds)
            bar.update()
    bar.close()
    store.check()
    out: dict[str, Any] = {"store_unchanged": store.same, "hash_checks": store.checks, "by_n": {}}
    for n in ns:
        r = runs[n]
        row = {
            "ingest_s": median(r["ingest"]),
            "ingest_best_s": min(r["ingest"]),
            "ingest_cpu_s": median(r["ingest_cpu"]),
            "whatif_s": median(r["cold"]),
            "whatif_best_s": min(r["cold"]),
            "whatif_cpu_s": median(r["cold_cpu"]),
            "whatif_warm_s": median(r["warm"]),
            "open_s": median([a for a, _ in r["opens"]] + [b for _, b in r["opens"]]),
            # Where the what-if's time went (report.seconds) and the ingest's, medians by step.
            "whatif_seconds": medians(stages[n]),
            "ingest_seconds": medians(ingest_stages[n]),
            "same_alerts_as_ingest": matches[n],
            "report": summary[n],
            "ingest_walls_s": r["ingest"],
            "whatif_walls_s": r["cold"],
        }
        row["ratio"] = row["whatif_s"] / row["ingest_s"]
        row["ratio_best"] = row["whatif_best_s"] / row["ingest_best_s"]
        row["ratio_cpu"] = row["whatif_cpu_s"] / row["ingest_cpu_s"]
        row["ratio_warm"] = row["whatif_warm_s"] / row["ingest_s"]
        out["by_n"][str(n)] = row
    return out


def medians(laps: list[dict[str, float]]) -> dict[str, float]:
    names = dict.fromkeys(k for lap in laps for k in lap)
    return {k: median([lap.get(k, 0.0) for lap in laps]) for k in names}


def measure_extras(
    src: Path, size: int, batch: list[dict[str, Any]], reps: int, progress: bool
) -> dict[str, Any]:
    """A what-if with the five session expressions, and one in the past, on ``src``."""
    store = Checked(src)
    exprs = dict(EXPRESSIONS)
    when, past = past_batch(size)
    timings: dict[str, list[float]] = {"expressions": [], "plain": [], "past": []}
    laps: dict[str, list[dict[str, float]]] = {"expressions": [], "past": []}
    facts: dict[str, Any] = {}
    for _ in tqdm(range(reps), desc="expressions, past", disable=not progress, leave=False):
        _, wb = opened(src)
        store.check()
        # The plain what-if first: the base's records and indexes are read, as an ingest would.
        t, _, _ = timed_cpu(partial(wb.whatif, batch, expressions=[]))
        timings["plain"].append(t)
        t, _, with_exprs = timed_cpu(partial(wb.whatif, batch, expressions=exprs))
        store.check()
        timings["expressions"].append(t)
        laps["expressions"].append(with_exprs.seconds)
        t, _, then = timed_cpu(partial(wb.whatif, past, as_of=when, progress=False))
        store.check()
        timings["past"].append(t)
        laps["past"].append(then.seconds)
        closed(wb)
        facts = {
            "answers": len(with_exprs.answers),
            "answers_changed": len(with_exprs.changed_answers),
            "past_summary": then.summary(),
            "past_timeline_spans": len(then.timeline),
            "past_conflicts": len(then.conflicts),
        }
    store.check()
    return {
        "events": len(batch),
        "expressions": list(exprs),
        "with_expressions_s": median(timings["expressions"]),
        "with_expressions_best_s": min(timings["expressions"]),
        "without_expressions_s": median(timings["plain"]),
        "with_expressions_seconds": medians(laps["expressions"]),
        "past_events": len(past),
        "past_as_of": when.isoformat(),
        "past_s": median(timings["past"]),
        "past_best_s": min(timings["past"]),
        "past_seconds": medians(laps["past"]),
        **facts,
        "store_unchanged": store.same,
        "hash_checks": store.checks,
    }


def log_rows(db: Path) -> dict[str, int]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute("SELECT kind, count(*) FROM events GROUP BY kind").fetchall()
    finally:
        con.close()
    return {k: int(n) for k, n in rows}


def run_size(
    size: int,
    workdir: Path,
    ns: list[int],
    reps: int,
    modes: list[str],
    extras: bool,
    extras_n: int,
    progress: bool,
) -> dict[str, Any]:
    workdir.mkdir(parents=True, exist_ok=True)
    db, built = build_store(size, workdir, progress)
    full = workdir / "full.duckdb"
    without_snapshots(db, full)
    _, wb = opened(db)
    events = batches(wb, size, ns)
    current = sum(len(ts.current) for ts in wb.state.types.values())
    wb.whatif(events[ns[0]], expressions=[])  # imports what the first what-if imports
    closed(wb)
    copy = workdir / "warm-up.duckdb"
    shutil.copyfile(db, copy)
    _, wb = opened(copy)
    wb.ingest(events[ns[0]])  # and the first ingest, when the store was not built here
    closed(wb)
    copy.unlink()
    out: dict[str, Any] = {
        **built,
        "log_rows": log_rows(db),
        "current_records": current,
        "db_mb": db.stat().st_size / 2**20,
        "batch_ops": {
            str(n): dict(Counter(f"{e['op']} {e['type']}" for e in events[n])) for n in ns
        },
        "modes": {},
    }
    for mode in modes:
        src = db if mode == "snapshot" else full
        if progress:
            print(f"[{size:,}] {mode}", file=sys.stderr)
        out["modes"][mode] = measure_mode(mode, src, workdir, ns, events, reps, progress)
    if extras:
        if progress:
            print(f"[{size:,}] expressions and the past", file=sys.stderr)
        out["extras"] = measure_extras(db, size, events[extras_n], reps, progress)
    return out


# -- the report ------------------------------------------------------------------------------


def flatness(results: dict[str, Any]) -> dict[str, Any]:
    """What-if seconds at the largest size over the smallest, per mode and N."""
    sizes = sorted(results["sizes"], key=int)
    if len(sizes) < 2:
        return {}
    lo, hi = results["sizes"][sizes[0]], results["sizes"][sizes[-1]]
    out: dict[str, Any] = {"sizes": [int(sizes[0]), int(sizes[-1])]}
    for mode in hi["modes"]:
        if mode not in lo["modes"]:
            continue
        rows = {}
        for n, row in hi["modes"][mode]["by_n"].items():
            low = lo["modes"][mode]["by_n"].get(n)
            if low is not None:
                rows[n] = {
                    "whatif": row["whatif_s"] / low["whatif_s"],
                    "ingest": row["ingest_s"] / low["ingest_s"],
                }
        out[mode] = rows
    return out


def _ms(x: float) -> str:
    return f"{1000 * x:8.1f}"


def table(results: dict[str, Any]) -> str:
    lines = [
        f"what-if vs ingest of the same N events (medians of {results['reps']}; "
        f"target what-if/ingest <= {TARGET:g}x)",
        f"{'size':>9} {'mode':8} {'N':>5} {'ingest ms':>9} {'what-if':>8} {'warm':>8} "
        f"{'ratio':>6} {'cpu':>5}  {'vs target':9} what-if steps (ms)",
    ]
    for size, run in sorted(results["sizes"].items(), key=lambda kv: int(kv[0])):
        for mode, m in run["modes"].items():
            for n, row in m["by_n"].items():
                steps = " ".join(f"{k} {1000 * v:.1f}" for k, v in row["whatif_seconds"].items())
                ok = "ok" if row["ratio"] <= TARGET else "OVER"
                lines.append(
                    f"{int(size):>9,} {mode:8} {int(n):>5} {_ms(row['ingest_s']):>9} "
                    f"{_ms(row['whatif_s'])} {_ms(row['whatif_warm_s'])} "
                    f"{row['ratio']:5.2f}x {row['ratio_cpu']:4.2f}x  {ok:9} {steps}"
                )
            lines.append(
                f"{'':>9} {mode:8} store bytes unchanged: {m['store_unchanged']} "
                f"({m['hash_checks']} checks)"
            )
    flat = results.get("flatness") or {}
    if flat:
        lo, hi = flat["sizes"]
        lines.append(f"\nflatness: seconds at {hi:,} / at {lo:,} (1.0 = does not grow)")
        for mode, rows in flat.items():
            if mode == "sizes":
                continue
            cells = "  ".join(
                f"N={n}: what-if {r['whatif']:.2f}x ingest {r['ingest']:.2f}x"
                for n, r in rows.items()
            )
            lines.append(f"  {mode:8} {cells}")
    for size, run in results["sizes"].items():
        ex = run.get("extras")
        if ex:
            lines.append(
                f"\n{int(size):,} events, what-if of {ex['events']} events: "
                f"{1000 * ex['without_expressions_s']:.0f} ms; with {len(ex['expressions'])} "
                f"session expressions {1000 * ex['with_expressions_s']:.0f} ms "
                f"({ex['answers_changed']} of {ex['answers']} answers change); "
                f"in the past ({ex['past_events']} events as of {ex['past_as_of']}) "
                f"{ex['past_s']:.2f} s; store bytes unchanged: {ex['store_unchanged']}"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--ns", type=int, nargs="+", default=list(NS), help="batch sizes N")
    ap.add_argument("--reps", type=int, default=3, help="measurements of each N (medians)")
    ap.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    ap.add_argument(
        "--extras-size",
        type=int,
        default=100_000,
        help="the size whose store also gets the expressions and past what-ifs "
        "(default 100000, else the smallest of --sizes)",
    )
    ap.add_argument("--extras-n", type=int, default=100, help="N of the expressions what-if")
    ap.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: sizes 2000 and 4000, N = 1, 10, 100, one rep",
    )
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where the stores go (default: a temp dir under bench/out/); a store already "
        "there is used again",
    )
    ap.add_argument("--keep", action="store_true", help="keep the stores")
    ap.add_argument("--quiet", action="store_true", help="no progress bars")
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.ns, args.reps, args.extras_n = [2000, 4000], [1, 10, 100], 1, 10
    progress = not args.quiet
    extras_size = args.extras_size if args.extras_size in args.sizes else min(args.sizes)
    if args.extras_n not in args.ns:
        raise SystemExit(f"--extras-n {args.extras_n} is not one of --ns")
    t0 = time.perf_counter()
    results: dict[str, Any] = {
        "date": datetime.now().isoformat(timespec="seconds"),
        "machine": machine(),
        "target": TARGET,
        "reps": args.reps,
        "ns": args.ns,
        "seed": SEED,
        "sizes": {},
    }
    DEFAULT_WORKDIR.mkdir(parents=True, exist_ok=True)
    root = args.workdir or Path(tempfile.mkdtemp(prefix="whatif-", dir=DEFAULT_WORKDIR))
    try:
        for size in sorted(args.sizes):
            results["sizes"][str(size)] = run_size(
                size,
                root / f"size-{size}",
                args.ns,
                args.reps,
                args.modes,
                size == extras_size,
                args.extras_n,
                progress,
            )
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({**results, "partial": True}, indent=2))
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    results["flatness"] = flatness(results)
    results["store_unchanged"] = all(
        part["store_unchanged"]
        for run in results["sizes"].values()
        for part in [*run["modes"].values(), *([run["extras"]] if "extras" in run else [])]
    )
    results["load_average_at_end"] = os.getloadavg()
    results["total_wall_s"] = time.perf_counter() - t0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(table(results))
    print(
        f"\nload average {results['machine']['load_average_at_start']} at the start, "
        f"{results['load_average_at_end']} at the end; total {results['total_wall_s']:.0f} s; "
        f"results in {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
