"""The engine at scale: ingest, fold, checkpoints, sandboxed queries, rules and memory.

For histories of 10k, 100k and 1M fact events (a seeded synthetic user, see ``History``) this
measures, each size in its own subprocess:

1. ingest rate of ``Workbench.ingest(file)`` in 10k-event batch files on a fresh DuckDB file,
   against DuckDB's own bulk insert (``appender.append_rows`` in a transaction) of exactly the
   rows the ingest wrote, batch by batch, interleaved with the ingest so both see the same load;
   and ``INSERT INTO events SELECT * FROM read_json(...)`` of the same rows;
2. full fold: opening a ``Workbench`` on that file;
3. checkpoints: the first (full) ``checkpoint()``, then 100 new fact events, then the next
   (incremental) one;
4. sandboxed aggregate queries (``Workbench.eval``) over 100k Transaction records against the
   same expressions run by plain ``eval``;
5. rules after one new fact, for a high-volume type (Transaction) and a low-volume one
   (Medication);
6. peak memory (``ru_maxrss``) of the process after the fold;
7. prompt tokens per question of ``ask`` (typed code: the schema summary, never the records)
   against a reader given the whole history as text (full context) or BM25's top 10 and top 50
   lines — see ``bench/prompt_scale.py``;
8. issue 14's figures, each against its floor from the same run: bulk ingest against our own
   write floor (``WriteFloor``: parse, canonical JSON, hash chain, appender; interleaved with
   stage 1), and whole ``uac`` processes on a copy of the store after a snapshot plus 1,000
   new events — ``eval "1"``, ``log --limit 5``, ``checkpoints`` against a full fold (the
   copy without snapshots), ``sql``'s first query against one ``arg_max`` query per type, and
   the open's peak RSS (see ``bench_i14``).

Run ``python bench/scale.py`` (see ``bench/README.md``); ``--sizes 2000`` is a quick smoke run;
``--only prompts`` measures just the prompt tokens (minutes for all three sizes, not a quarter
of an hour); ``--only i14`` just the ingest and issue 14's figures; ``--replot FILE ...``
redraws the chart from saved results.
"""

from __future__ import annotations

import argparse
import builtins
import gc
import json
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import orjson
import prompt_scale  # bench/prompt_scale.py, beside this script
from tqdm import tqdm

from uac_kernel.core.chain import GENESIS, content_hash, event_hash, new_salt
from uac_kernel.core.timing import no_gc
from uac_kernel.ingest.events import parse_jsonl, parse_objects, plan_batch
from uac_kernel.log.store import Store, dump_payload
from uac_kernel.sql.view import sql_type
from uac_kernel.state.query import namespace
from uac_kernel.workbench import Workbench

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "scale.json"
DEFAULT_PROMPTS_OUT = HERE / "results" / "scale_prompts.json"
DEFAULT_I14_OUT = HERE / "results" / "scale_i14.json"
DEFAULT_WORKDIR = HERE / "out"
BATCH = 10_000
SEED = 20261129
USER = "me"

# Targets from the issue: ingest ≥ 0.5× DuckDB bulk, incremental checkpoint ≤ 1% of a full one
# at 1M, sandboxed query ≤ 2× plain Python, 1M events fold in under 2 GB.
TARGETS = {
    "ingest_vs_bulk": 0.5,
    "checkpoint_incremental_vs_full": 0.01,
    "eval_sandbox_vs_plain": 2.0,
    "fold_peak_mb": 2048,
}

# -- the synthetic user ------------------------------------------------------------------------

START = datetime(2023, 1, 1)
SPAN_SECONDS = 3 * 365 * 86_400
TYPE_WEIGHTS = {
    "Transaction": 60.0,
    "Meal": 10.0,
    "Workout": 8.0,
    "SleepLog": 8.0,
    "Meeting": 5.0,
    "Purchase": 5.0,
    "Trip": 3.5,
    "Medication": 0.5,
}
TYPES = list(TYPE_WEIGHTS)
P_ADD, P_UPDATE = 0.85, 0.12  # the rest (3%) retracts a live key

CATEGORIES = (
    "groceries",
    "dining",
    "transport",
    "rent",
    "utilities",
    "entertainment",
    "health",
    "travel",
    "shopping",
    "subscriptions",
    "education",
    "gifts",
)
MERCHANTS = (
    "Trader Joe's",
    "Whole Foods",
    "Uber",
    "Lyft",
    "Shell",
    "Netflix",
    "Spotify",
    "Amazon",
    "Target",
    "Costco",
    "CVS",
    "Walgreens",
    "Starbucks",
    "Chipotle",
    "IKEA",
    "Apple",
    "Delta",
    "Airbnb",
    "Comcast",
    "PG&E",
)
ACCOUNTS = ("checking", "visa-4421", "amex-1007", "savings")
FOODS = (
    "oatmeal with berries",
    "chicken salad",
    "salmon and rice",
    "pasta bolognese",
    "veggie burrito",
    "greek yogurt",
    "ramen",
    "grilled cheese",
    "kale smoothie",
    "orange",
    "sushi",
    "pad thai",
    "lentil soup",
    "steak and fries",
    "avocado toast",
    "pepperoni pizza",
    "tofu stir fry",
    "caesar salad",
    "omelette",
    "fruit bowl",
)
ACTIVITIES = ("run", "cycling", "swim", "yoga", "strength", "hike", "rowing", "climbing")
MEETING_TITLES = (
    "1:1 with manager",
    "team standup",
    "design review",
    "dentist",
    "lunch with Sam",
    "sprint planning",
    "customer call",
    "book club",
    "parent-teacher meeting",
    "doctor's appointment",
    "interview loop",
    "all hands",
)
PLACES = ("office", "zoom", "cafe downtown", "clinic", "home", "conference room B")
ITEMS = (
    "headphones",
    "running shoes",
    "desk lamp",
    "blender",
    "winter jacket",
    "backpack",
    "coffee grinder",
    "monitor",
    "rain boots",
    "board game",
    "yoga mat",
    "phone case",
)
DESTINATIONS = (
    ("Tokyo", "Japan", True),
    ("Lisbon", "Portugal", True),
    ("Chicago", "USA", False),
    ("Denver", "USA", False),
    ("Mexico City", "Mexico", True),
    ("Seattle", "USA", False),
    ("Paris", "France", True),
    ("Austin", "USA", False),
)
MEDICATIONS = (
    ("metformin", 500.0),
    ("lisinopril", 10.0),
    ("atorvastatin", 20.0),
    ("ibuprofen", 400.0),
    ("vitamin d", 25.0),
    ("sertraline", 50.0),
    ("levothyroxine", 0.05),
    ("omeprazole", 20.0),
)


def _iso(d: date | datetime) -> str:
    return d.isoformat()


def add_fields(rng: random.Random, t: str, ts: datetime, per_day: float = 1.0) -> dict[str, Any]:
    """The fields of a new record of type ``t`` recorded at ``ts``.

    ``per_day`` is how many records of this type the history adds per day. Things dated in the
    future (planned meetings and trips, return windows) come at a fixed rate per day whatever
    the history's density, so a denser history holds more records, not an impossible calendar.
    """
    day = ts.date()
    if t == "Transaction":
        return {
            "amount": round(rng.lognormvariate(3.2, 1.0), 2),
            "category": rng.choice(CATEGORIES),
            "merchant": rng.choice(MERCHANTS),
            "account": rng.choice(ACCOUNTS),
            "date": _iso(day),
        }
    if t == "Meal":
        return {"item": rng.choice(FOODS), "calories": rng.randint(150, 1200), "date": _iso(day)}
    if t == "Workout":
        return {
            "activity": rng.choice(ACTIVITIES),
            "minutes": rng.randint(15, 120),
            "date": _iso(day),
        }
    if t == "SleepLog":
        return {
            "date": _iso(day),
            "hours": round(rng.uniform(4.5, 9.5), 1),
            "quality": rng.randint(1, 5),
        }
    if t == "Meeting":
        minutes = rng.choice((30, 30, 45, 60, 90))
        if rng.random() < min(0.5, 1.0 / per_day):  # about one meeting a day planned ahead
            start = datetime.combine(day + timedelta(days=rng.randint(1, 3)), datetime.min.time())
            start += timedelta(hours=rng.randint(8, 17), minutes=rng.choice((0, 30)))
        else:  # logged after it happened
            start = (ts - timedelta(minutes=minutes + rng.randint(10, 3 * 24 * 60))).replace(
                second=0, microsecond=0
            )
        return {
            "title": rng.choice(MEETING_TITLES),
            "start": _iso(start),
            "end": _iso(start + timedelta(minutes=minutes)),
            "location": rng.choice(PLACES),
        }
    if t == "Purchase":
        fields = {
            "item": rng.choice(ITEMS),
            "price": round(rng.uniform(8, 400), 2),
            "date": _iso(day),
        }
        if rng.random() < min(1.0, 0.5 / per_day):  # about one return window every two days
            fields["return_by"] = _iso(day + timedelta(days=30))
        return fields
    if t == "Trip":
        city, country, intl = rng.choice(DESTINATIONS)
        if rng.random() < min(0.5, (1 / 30) / per_day):  # about one trip a month planned ahead
            start = day + timedelta(days=rng.randint(7, 60))
        else:  # logged after coming back
            start = day - timedelta(days=rng.randint(16, 60))
        end = start + timedelta(days=rng.randint(2, 14))
        return {
            "destination": city,
            "country": country,
            "international": intl,
            "start": _iso(start),
            "end": _iso(end),
        }
    if t == "Medication":
        name, dose = rng.choice(MEDICATIONS)
        return {"name": name, "dose_mg": dose, "start": _iso(day), "active": True}
    raise ValueError(t)


def update_fields(rng: random.Random, t: str, ts: datetime) -> dict[str, Any]:
    """A realistic correction of a record of type ``t`` at ``ts``: one or two fields."""
    if t == "Transaction":
        return rng.choice(
            (
                {"amount": round(rng.lognormvariate(3.2, 1.0), 2)},
                {"category": rng.choice(CATEGORIES)},
            )
        )
    if t == "Meal":
        return {"calories": rng.randint(150, 1200)}
    if t == "Workout":
        return {"minutes": rng.randint(15, 120)}
    if t == "SleepLog":
        return {"hours": round(rng.uniform(4.5, 9.5), 1)}
    if t == "Meeting":
        return rng.choice(({"location": rng.choice(PLACES)}, {"cancelled": True}))
    if t == "Purchase":
        return rng.choice(({"returned": True}, {"price": round(rng.uniform(8, 400), 2)}))
    if t == "Trip":
        return {"rating": rng.randint(1, 5)}
    if t == "Medication":
        return {"dose_mg": rng.choice((5.0, 10.0, 20.0, 40.0))}
    raise ValueError(t)


class History:
    """A seeded synthetic history of fact events: ~85% adds, ~12% updates, ~3% retracts of live
    keys, types weighted by ``TYPE_WEIGHTS``, ``ts`` strictly increasing over three years.

    Medication is the exception that keeps it small: one key per drug name (at most
    ``len(MEDICATIONS)`` current), so most Medication events update a dose.
    """

    def __init__(self, size: int, seed: int = SEED):
        self.rng = random.Random(seed)
        self.size = size
        self.step = SPAN_SECONDS / max(size, 1)
        per_day = size / (SPAN_SECONDS / 86_400)
        self.per_day = {
            t: per_day * P_ADD * w / sum(TYPE_WEIGHTS.values()) for t, w in TYPE_WEIGHTS.items()
        }
        self.i = 0
        self.made = dict.fromkeys(TYPES, 0)
        # Live keys per type, as a list plus positions, so picking and removing are O(1).
        self.live: dict[str, list[str]] = {t: [] for t in TYPES}
        self.pos: dict[str, dict[str, int]] = {t: {} for t in TYPES}
        self.ops = Counter[str]()

    def _pick_type(self, live_only: bool) -> str | None:
        choices = [t for t in TYPES if self.live[t]] if live_only else TYPES
        if not choices:
            return None
        return self.rng.choices(choices, weights=[TYPE_WEIGHTS[t] for t in choices])[0]

    def _forget(self, t: str, key: str) -> None:
        keys, pos = self.live[t], self.pos[t]
        i = pos.pop(key)
        last = keys.pop()
        if last != key:
            keys[i] = last
            pos[last] = i

    def next(self) -> dict[str, Any]:
        rng = self.rng
        ts = START + timedelta(seconds=int(self.i * self.step) + 1)
        self.i += 1
        r = rng.random()
        op = "add" if r < P_ADD else "update" if r < P_ADD + P_UPDATE else "retract"
        t = self._pick_type(live_only=op != "add")
        if t is None:
            op, t = "add", self._pick_type(live_only=False)
        assert t is not None
        ev: dict[str, Any] = {"kind": "fact", "ts": _iso(ts), "op": op, "type": t}
        if op == "add":
            fields = add_fields(rng, t, ts, self.per_day[t])
            if t == "Medication":
                key = f"med-{fields['name'].replace(' ', '-')}"
                if key in self.pos[t]:  # already taking it: a dose change instead
                    op = ev["op"] = "update"
                    ev["key"] = key
                    ev["fields"] = update_fields(rng, t, ts)
                    self.ops[op] += 1
                    return ev
            else:
                self.made[t] += 1
                key = f"{t.lower()}-{self.made[t]:07d}"
            self.pos[t][key] = len(self.live[t])
            self.live[t].append(key)
            ev["key"] = key
            ev["fields"] = fields
        else:
            key = rng.choice(self.live[t])
            ev["key"] = key
            if op == "update":
                ev["fields"] = update_fields(rng, t, ts)
            else:
                self._forget(t, key)
                ev["reason"] = rng.choice(("entered by mistake", "duplicate", "user asked"))
        self.ops[op] += 1
        return ev

    def write_batches(self, directory: Path, progress: bool = True) -> list[Path]:
        """Write the whole history as Event JSONL files of ``BATCH`` lines each."""
        directory.mkdir(parents=True, exist_ok=True)
        paths = []
        with tqdm(
            total=self.size,
            desc=f"generate {self.size:,}",
            unit="ev",
            file=sys.stderr,
            disable=not progress,
            leave=False,
        ) as bar:
            for b, lo in enumerate(range(0, self.size, BATCH)):
                n = min(BATCH, self.size - lo)
                path = directory / f"batch-{b:05d}.jsonl"
                with path.open("wb") as f:
                    f.write(b"".join(orjson.dumps(self.next()) + b"\n" for _ in range(n)))
                paths.append(path)
                bar.update(n)
        return paths


def transaction_batches(directory: Path, n: int) -> list[Path]:
    """``n`` Transaction adds (the state the query benchmark runs over), in ``BATCH`` files."""
    rng = random.Random(SEED + 1)
    directory.mkdir(parents=True, exist_ok=True)
    step = SPAN_SECONDS / max(n, 1)
    paths = []
    for b, lo in enumerate(range(0, n, BATCH)):
        lines = []
        for i in range(lo, min(n, lo + BATCH)):
            ts = START + timedelta(seconds=int(i * step) + 1)
            lines.append(
                orjson.dumps(
                    {
                        "kind": "fact",
                        "ts": _iso(ts),
                        "op": "add",
                        "type": "Transaction",
                        "key": f"tx-{i:07d}",
                        "fields": add_fields(rng, "Transaction", ts),
                    }
                )
                + b"\n"
            )
        path = directory / f"tx-{b:05d}.jsonl"
        path.write_bytes(b"".join(lines))
        paths.append(path)
    return paths


# -- helpers -----------------------------------------------------------------------------------


def maxrss_mb() -> float:
    """Peak resident set size of this process so far (Linux reports KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mb() -> float:
    """Current resident set size of this process."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def timed_cpu(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """Wall and CPU seconds (all threads of this process): CPU time shows what the work costs
    when other jobs share the machine."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - w0, time.process_time() - c0, out


def median(xs: list[float]) -> float:
    return statistics.median(xs)


JSON_COLUMNS = (
    "{seq: 'BIGINT', user_seq: 'BIGINT', recorded_at: 'TIMESTAMP', ts: 'TIMESTAMP', "
    "kind: 'VARCHAR', user_id: 'VARCHAR', source: 'VARCHAR', payload: 'VARCHAR', "
    "salt: 'VARCHAR', payload_hash: 'VARCHAR', hash: 'VARCHAR'}"
)


def _fresh_events_table(path: Path, ddl: str) -> duckdb.DuckDBPyConnection:
    path.unlink(missing_ok=True)
    con = duckdb.connect(str(path))
    con.execute(ddl)
    return con


class WriteFloor:
    """Our own write floor: what logging a batch costs with nothing but the library's parse
    (``parse_jsonl``), canonical payload JSON (``dump_payload``), the salted content hash and
    the hash chain (``_chain``) and DuckDB's appender on a fresh events table, in one
    transaction per batch: no validation against the state, no fold, no rules."""

    def __init__(self, path: Path, ddl: str, user: str):
        self.con = _fresh_events_table(path, ddl)
        self.user = user
        self.seq, self.user_seq, self.prev = 0, 0, GENESIS

    def write(self, path: Path) -> int:
        """Log the events of one Event JSONL file; return how many."""
        with no_gc():  # as ingest's batches: no GC walk over the batch's objects
            rows = []
            now = datetime.now(UTC).replace(tzinfo=None)
            user, seq, user_seq, prev = self.user, self.seq, self.user_seq, self.prev
            for ev in parse_jsonl(path):
                seq += 1
                user_seq += 1
                text = dump_payload(ev.payload)
                salt = new_salt()
                payload_hash = content_hash(salt, text, ev.source or "")
                prev = event_hash(prev, user_seq, now, ev.ts, ev.kind, user, payload_hash)
                row = (seq, user_seq, now, ev.ts, ev.kind, user, ev.source, text, salt)
                rows.append((*row, payload_hash, prev))
            self.con.execute("BEGIN TRANSACTION")
            appender = self.con.appender("events")
            appender.append_rows(rows)
            appender.flush()
            self.con.execute("COMMIT")
            self.seq, self.user_seq, self.prev = seq, user_seq, prev
            return len(rows)

    def close(self) -> int:
        """Close the file; return the rows it holds."""
        n = int(self.con.execute("SELECT count(*) FROM events").fetchone()[0])
        self.con.close()
        return n


# -- stage 1: ingest vs DuckDB bulk (its own process, so the fold's peak memory is its own) -----


def stage_ingest(size: int, workdir: Path, progress: bool) -> dict[str, Any]:
    history = History(size)
    t_gen, files = timed(lambda: history.write_batches(workdir / "history", progress))
    db = workdir / "ingest.duckdb"
    db.unlink(missing_ok=True)
    wb = Workbench(db, user=USER)
    ddl = wb.store.con.execute(
        "SELECT sql FROM duckdb_tables() WHERE table_name = 'events'"
    ).fetchone()[0]
    bulk = _fresh_events_table(workdir / "bulk.duckdb", ddl)
    viajson = _fresh_events_table(workdir / "json.duckdb", ddl)
    floor = WriteFloor(workdir / "floor.duckdb", ddl, USER)
    rows_file = workdir / "rows.jsonl"

    t_ingest = t_bulk = t_json = cpu_ingest = cpu_bulk = t_floor = cpu_floor = 0.0
    stages: Counter[str] = Counter()  # IngestReport.seconds summed over the batches
    per_batch: list[dict[str, float]] = []
    last_seq = wb.store.last_seq
    facts = rows_written = 0
    for path in tqdm(
        files,
        desc=f"ingest {size:,}",
        unit="batch",
        file=sys.stderr,
        disable=not progress,
        leave=False,
    ):
        dt_i, cpu_i, report = timed_cpu(lambda path=path: wb.ingest(path))
        stages.update(report.seconds)
        facts += report.appended
        # The rows this ingest wrote (facts, schema changes, alerts), as DuckDB returns them.
        rows = wb.store.con.execute(
            "SELECT * FROM events WHERE seq > ? ORDER BY seq", [last_seq]
        ).fetchall()
        lo, hi = rows[0][0], rows[-1][0]
        last_seq = hi
        rows_written += len(rows)

        def append_bulk(rows: list[tuple[Any, ...]] = rows) -> None:
            bulk.execute("BEGIN TRANSACTION")
            appender = bulk.appender("events")
            appender.append_rows(rows)
            appender.flush()
            bulk.execute("COMMIT")

        dt_b, cpu_b, _ = timed_cpu(append_bulk)
        bulk.execute(
            f"COPY (SELECT * FROM events WHERE seq BETWEEN {lo} AND {hi} ORDER BY seq) "
            f"TO '{rows_file}' (FORMAT json)"
        )
        dt_j, _ = timed(
            lambda: viajson.execute(
                f"INSERT INTO events SELECT * FROM read_json('{rows_file}', "
                f"format = 'newline_delimited', columns = {JSON_COLUMNS})"
            )
        )
        dt_f, cpu_f, _ = timed_cpu(lambda path=path: floor.write(path))
        t_ingest, t_bulk, t_json = t_ingest + dt_i, t_bulk + dt_b, t_json + dt_j
        cpu_ingest, cpu_bulk = cpu_ingest + cpu_i, cpu_bulk + cpu_b
        t_floor, cpu_floor = t_floor + dt_f, cpu_floor + cpu_f
        per_batch.append(
            {
                "events": report.appended,
                "rows": len(rows),
                "ingest_s": dt_i,
                "bulk_s": dt_b,
                "read_json_s": dt_j,
                "write_floor_s": dt_f,
            }
        )
    kinds = dict(wb.store.con.execute("SELECT kind, count(*) FROM events GROUP BY kind").fetchall())
    wb.close()
    n_bulk = bulk.execute("SELECT count(*) FROM events").fetchone()[0]
    n_json = viajson.execute("SELECT count(*) FROM events").fetchone()[0]
    bulk.close()
    viajson.close()
    n_floor = floor.close()
    if not n_bulk == n_json == rows_written:
        raise RuntimeError(
            f"row counts differ: ingest {rows_written}, bulk {n_bulk}, json {n_json}"
        )
    if n_floor != facts:
        raise RuntimeError(f"the write floor logged {n_floor} events, ingest {facts}")
    for p in ("bulk.duckdb", "json.duckdb", "floor.duckdb", "rows.jsonl"):
        (workdir / p).unlink(missing_ok=True)
    return {
        "generate_s": t_gen,
        "history_ops": dict(history.ops),
        "batches": len(files),
        "fact_events": facts,
        "rows_written": rows_written,
        "rows_by_kind": kinds,
        "ingest_s": t_ingest,
        "ingest_events_per_s": facts / t_ingest,
        "ingest_rows_per_s": rows_written / t_ingest,
        "bulk_appender_s": t_bulk,
        "bulk_appender_rows_per_s": rows_written / t_bulk,
        "bulk_read_json_s": t_json,
        "bulk_read_json_rows_per_s": rows_written / t_json,
        # Same rows written both ways: the time ratio is the throughput ratio.
        "ingest_vs_bulk_appender": t_bulk / t_ingest,
        "ingest_vs_bulk_read_json": t_json / t_ingest,
        # CPU seconds of this process (DuckDB's threads included) for the same two jobs, and
        # the median batch rate of the appender (robust to a stall of the shared machine).
        "ingest_cpu_s": cpu_ingest,
        "bulk_appender_cpu_s": cpu_bulk,
        "ingest_vs_bulk_appender_cpu": cpu_bulk / cpu_ingest,
        "bulk_appender_median_batch_rows_per_s": median(
            [b["rows"] / b["bulk_s"] for b in per_batch]
        ),
        "ingest_last_batch_events_per_s": per_batch[-1]["events"] / per_batch[-1]["ingest_s"],
        "ingest_first_batch_events_per_s": per_batch[0]["events"] / per_batch[0]["ingest_s"],
        # Where ingest's time goes, per fact event, and its log write alone (hash chain, JSON,
        # appender, in one transaction) against the appender writing the same rows.
        "ingest_stage_us_per_event": {k: 1e6 * v / facts for k, v in stages.items()},
        "write_vs_bulk_appender": t_bulk / stages["write"],
        # Our own write floor (parse, canonical JSON, hash chain, appender) of the same files,
        # interleaved batch by batch; it logs the fact events only, so the ratio is by event.
        "write_floor_s": t_floor,
        "write_floor_events_per_s": facts / t_floor,
        "write_floor_cpu_s": cpu_floor,
        "ingest_vs_write_floor": t_floor / t_ingest,
        "ingest_vs_write_floor_cpu": cpu_floor / cpu_ingest,
        "ingest_stage_maxrss_mb": maxrss_mb(),
        "per_batch": per_batch,
        "db_size_mb": db.stat().st_size / 2**20,
    }


# -- stage 2: fold, checkpoints, rules, queries ----------------------------------------------


def per_day(size: int, t: str) -> float:
    """How many records of type ``t`` a history of ``size`` events adds per day."""
    return History(size).per_day[t]


def _sample_current(wb: Workbench, rng: random.Random, t: str, k: int) -> list[str]:
    keys = sorted(wb.state.types[t].current) if t in wb.state.types else []
    return rng.sample(keys, min(k, len(keys)))


def _ts_after(wb: Workbench, seconds: int) -> datetime:
    assert wb.state.now is not None
    return wb.state.now + timedelta(seconds=seconds)


def new_fact_mix(
    wb: Workbench, rng: random.Random, size: int, n: int = 100, tag: str = "new"
) -> list[dict[str, Any]]:
    """``n`` new fact events: mostly updates of random existing keys, some adds (keys named
    with ``tag``, so each mix adds new ones), two retracts. When a type has fewer current keys
    than its share of updates, adds make up the difference."""
    n_retract = 2
    n_update = n - max(1, n * 13 // 100) - n_retract
    present = [t for t in TYPES if wb.state.types.get(t) and wb.state.types[t].current]
    weights = [TYPE_WEIGHTS[t] for t in present]
    picks = Counter(rng.choices(present, weights=weights, k=n_update + n_retract))
    chosen: list[tuple[str, str]] = []
    for t, k in sorted(picks.items()):
        chosen += [(t, key) for key in _sample_current(wb, rng, t, k)]
    rng.shuffle(chosen)
    ops = ["retract"] * n_retract + ["update"] * (len(chosen) - n_retract)
    events: list[dict[str, Any]] = []
    for i, ((t, key), op) in enumerate(zip(chosen, ops, strict=True)):
        ts = _ts_after(wb, 60 * (i + 1))
        ev: dict[str, Any] = {"kind": "fact", "ts": _iso(ts), "op": op, "type": t, "key": key}
        if op == "update":
            ev["fields"] = update_fields(rng, t, ts)
        else:
            ev["reason"] = "entered by mistake"
        events.append(ev)
    n_add = n - len(events)
    for j, t in enumerate(rng.choices(TYPES, weights=list(TYPE_WEIGHTS.values()), k=n_add)):
        ts = _ts_after(wb, 60 * (len(events) + 1))
        events.append(
            {
                "kind": "fact",
                "ts": _iso(ts),
                "op": "add",
                "type": t,
                "key": f"{t.lower()}-{tag}-{j}",
                "fields": add_fields(rng, t, ts, per_day(size, t)),
            }
        )
    return events


def write_jsonl(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    return path


def bench_checkpoints(wb: Workbench, workdir: Path, size: int) -> dict[str, Any]:
    rng = random.Random(SEED + 2)
    t_full, cpu_full, full = timed_cpu(wb.checkpoint)
    mix = new_fact_mix(wb, rng, size)
    path = write_jsonl(workdir / "mix.jsonl", mix)
    # The first ingest after opening a store also loads every logged source (the dedup set),
    # and the rules of every type it touches run over the whole state.
    t_ing, report = timed(lambda: wb.ingest(path))
    t_incr, cpu_incr, incr = timed_cpu(wb.checkpoint)
    ops = Counter(e["op"] for e in mix)
    return {
        "full_s": t_full,
        "full_cpu_s": cpu_full,
        "full_segments": full.segments,
        "records": full.records,
        "new_events": report.appended,
        "new_events_ops": dict(ops),
        "first_ingest_after_open_s": t_ing,
        "incremental_s": t_incr,
        "incremental_cpu_s": cpu_incr,
        "incremental_segments": incr.segments,
        "incremental_vs_full": t_incr / t_full,
        "incremental_vs_full_cpu": cpu_incr / cpu_full,
    }


def bench_rules(wb: Workbench, size: int, reps: int) -> dict[str, Any]:
    """One new fact of a high-volume type and of a low-volume type: ingest total and rules."""
    rng = random.Random(SEED + 3)
    out: dict[str, Any] = {}
    for t in ("Transaction", "Medication"):
        totals, rules_only = [], []
        for i in range(reps):
            ts = _ts_after(wb, 60)
            ev = {
                "kind": "fact",
                "ts": _iso(ts),
                "op": "add",
                "type": t,
                "key": f"{t.lower()}-one-{i}",
                "fields": add_fields(rng, t, ts, per_day(size, t)),
            }
            dt, _ = timed(lambda ev=ev: wb.ingest([ev]))
            totals.append(dt)
            dt, _ = timed(lambda t=t: wb.runner.run(wb.view, {t}, False))
            rules_only.append(dt)
        # Which rules that change runs, and what each costs (one run each).
        view = wb.view
        per_rule = {
            r.name: timed(lambda r=r, view=view: r.alerts(view))[0]
            for r in wb.runner.rules.values()
            if r.watch is None or t in r.watch
        }
        out[t] = {
            "current_records": len(wb.state.types[t].current),
            "ingest_one_median_s": median(totals),
            "rules_median_s": median(rules_only),
            "rules_run": sorted(per_rule),
            "per_rule_s": dict(sorted(per_rule.items(), key=lambda kv: -kv[1])),
        }
    return out


EXPRESSIONS = {
    "count_if": "sum(1 for t in user.all(Transaction) if t.amount > 100 and t.category != 'rent')",
    "sum_by_category": (
        "{c: round(sum(t.amount for t in txs if t.category == c), 2) "
        "for txs in [user.all(Transaction)] for c in sorted({t.category for t in txs})}"
    ),
    "top5_by_amount": (
        "[(t.key, t.amount, t.merchant) "
        "for t in sorted(user.all(Transaction), key=lambda t: t.amount, reverse=True)[:5]]"
    ),
    "sum_since_date": "round(sum(t.amount for t in user.all(Transaction) if t.date >= date(2025, 1, 1)), 2)",
    # Nearly no work: what the sandbox itself costs (check, fork, pickle) at this process size.
    "constant": "1",
}


def _same(a: Any, b: Any) -> bool:
    norm = lambda v: json.loads(json.dumps(v, default=str))  # noqa: E731 - tuples vs lists
    return norm(a) == norm(b)


def bench_eval(workdir: Path, n_records: int, reps: int, progress: bool) -> dict[str, Any]:
    files = transaction_batches(workdir / "transactions", n_records)
    wb = Workbench(":memory:", user=USER, rules=())
    for path in tqdm(
        files,
        desc=f"eval state {n_records:,}",
        unit="batch",
        file=sys.stderr,
        disable=not progress,
        leave=False,
    ):
        wb.ingest(path)
    assert len(wb.state.types["Transaction"].current) == n_records
    results: dict[str, Any] = {"records": n_records, "process_rss_mb": rss_mb(), "expressions": {}}
    for name, expr in EXPRESSIONS.items():
        sandboxed, plain = [], []
        answer = wb.eval(expr)  # warm-up: first compile, first fork
        for _ in range(reps):
            # Side by side, so both see the same machine load. Plain: exactly what the sandbox
            # sees (the query namespace), compiled and evaluated in this process.
            dt, got = timed(lambda expr=expr: wb.eval(expr))
            sandboxed.append(dt)
            ns = {"__builtins__": builtins, **namespace(wb.state)}
            dt, direct = timed(lambda expr=expr, ns=ns: eval(compile(expr, "<query>", "eval"), ns))
            plain.append(dt)
        if not (_same(got, direct) and _same(answer, direct)):
            raise RuntimeError(f"{name}: sandbox answered {got!r}, plain eval {direct!r}")
        s, p = median(sandboxed), median(plain)
        results["expressions"][name] = {
            "expr": expr,
            "sandbox_median_s": s,
            "plain_median_s": p,
            "sandbox_vs_plain": s / p,
        }
    wb.close()
    return results


# -- issue 14: each figure against its floor, measured in the same run ------------------------

# Targets of issue 14: open after a snapshot + 1,000 new events ≤ 0.1× a full fold; `log` and
# `checkpoints` ≤ 0.05× a full fold; `uac sql`'s first query ≤ 3× one arg_max query per type;
# bulk ingest ≥ 0.5× our own write floor; peak RSS of an open ≤ 1.4 GB (here 1,400 MB).
I14_TARGETS = {
    "open_after_snapshot_vs_full_fold": 0.1,
    "log_vs_full_fold": 0.05,
    "checkpoints_vs_full_fold": 0.05,
    "sql_first_query_vs_floor": 3.0,
    "ingest_vs_write_floor": 0.5,
    "open_peak_rss_mb": 1400,
}
NEW_AFTER_SNAPSHOT = 1_000


def run_cli(db: Path, *args: str) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one whole ``uac`` process on ``db``, this checkout's."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE.parent), env.get("PYTHONPATH")) if p)
    cmd = [sys.executable, "-m", "uac_kernel.cli.main", "--db", str(db), "--user", USER, *args]
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
        # wait4 gives this child's own rusage (RUSAGE_CHILDREN is the peak of all of them).
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            tail = err.read().decode(errors="replace")[-2000:]
            raise RuntimeError(f"uac {' '.join(args)} failed ({proc.returncode}): {tail}")
    return wall, usage.ru_maxrss / 1024


def append_after_snapshot(db: Path, size: int, n: int) -> int:
    """Append ``n`` new fact events to ``db``, planned by the library on the state its latest
    snapshot opens to, through ``Store.append``: a path that writes no snapshot, so the next
    open has ``n`` events to fold after it."""
    wb = Workbench(db, user=USER, read_only=True)
    events = new_fact_mix(wb, random.Random(SEED + 4), size, n, tag="after-snapshot")
    planned = plan_batch(wb.state, parse_objects(events, "after-snapshot"), wb.limits)
    wb.close()
    store = Store(db)
    logged = store.append(planned)
    store.close()
    return sum(1 for e in logged if e.kind == "fact")


def without_snapshots(src: Path, dst: Path) -> int:
    """Copy ``src`` to ``dst`` and delete the copy's snapshots, so opening it folds the whole
    log; return how many snapshot rows it had (none in a store written before snapshots)."""
    shutil.copyfile(src, dst)
    con = duckdb.connect(str(dst))
    found = con.execute(
        "SELECT schema_name, table_name FROM duckdb_tables() WHERE table_name = 'snapshots'"
    ).fetchall()
    rows = 0
    for schema, table in found:
        name = f'"{schema}"."{table}"'
        rows += int(con.execute(f"SELECT count(*) FROM {name}").fetchone()[0])
        con.execute(f"DELETE FROM {name}")
    con.close()
    return rows


def sql_floor(db: Path, user: str) -> tuple[float, dict[str, int]]:
    """The floor of ``uac sql``'s tables: for each type, ONE DuckDB query over the store's
    events that keeps each key's last value of every field (JSON extraction, ``arg_max``) and
    drops retracted keys, into a table. Seconds for all types, and the rows per type."""
    con = duckdb.connect(str(db), read_only=True)
    schema: dict[str, dict[str, str]] = {}
    for t, f, ftype in con.execute(
        "SELECT payload->>'$.type', payload->>'$.field', payload->>'$.ftype' FROM events "
        "WHERE user_id = ? AND kind = 'schema' AND salt <> '' ORDER BY seq",
        [user],
    ).fetchall():
        fields = schema.setdefault(t, {})
        if f is not None:
            fields[f] = ftype
    rows: dict[str, int] = {}
    t0 = time.perf_counter()
    for t, fields in schema.items():
        columns = "".join(
            f", arg_max(CAST(payload{'->' if ftype.startswith('list[') else '->>'}"
            f"'$.fields.\"{f}\"' AS {sql_type(ftype)}), seq) "
            f'FILTER (WHERE json_exists(payload, \'$.fields."{f}"\')) AS "{f}"'
            for f, ftype in fields.items()
        )
        con.execute(
            f"CREATE TEMP TABLE \"{t}\" AS SELECT payload->>'$.key' AS key{columns}, "
            "max(ts) AS valid_from FROM events WHERE user_id = ? AND kind = 'fact' "
            "AND salt <> '' AND payload->>'$.type' = ? GROUP BY 1 "
            "HAVING arg_max(payload->>'$.op', seq) <> 'retract'",
            [user, t],
        )
    seconds = time.perf_counter() - t0
    for t in schema:
        rows[t] = int(con.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0])
    con.close()
    return seconds, rows


def bench_i14(
    size: int, workdir: Path, db: Path, ingest: dict[str, Any], reps: int, progress: bool
) -> dict[str, Any]:
    """Issue 14's figures on a copy of ``db`` (closed, so its latest snapshot is written):
    whole ``uac`` processes, interleaved rep by rep so each figure and its floor see the same
    load, best of ``reps``; the ingest ratio comes from ``stage_ingest`` of the same run."""
    snap, full = workdir / "i14.duckdb", workdir / "i14-full.duckdb"
    shutil.copyfile(db, snap)
    if progress:
        print(
            f"[{size:,}] issue 14: {NEW_AFTER_SNAPSHOT:,} events after the snapshot",
            file=sys.stderr,
        )
    added = append_after_snapshot(snap, size, NEW_AFTER_SNAPSHOT)
    snapshot_rows = without_snapshots(snap, full)
    _, tables = sql_floor(snap, USER)
    biggest = max(tables, key=lambda t: tables[t])
    query = f'SELECT count(*) FROM "{biggest}"'
    commands = {
        "full_fold": (full, ("eval", "1")),
        "open": (snap, ("eval", "1")),
        "log": (snap, ("log", "--limit", "5")),
        "checkpoints": (snap, ("checkpoints",)),
        "sql": (snap, ("sql", query)),
    }
    runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    floors: list[float] = []
    for _ in tqdm(
        range(reps), desc=f"issue 14 {size:,}", file=sys.stderr, disable=not progress, leave=False
    ):
        for name, (path, args) in commands.items():
            runs[name].append(run_cli(path, *args))
        floors.append(sql_floor(snap, USER)[0])
    best = {name: min(wall for wall, _ in r) for name, r in runs.items()}
    peak = {name: max(rss for _, rss in r) for name, r in runs.items()}
    full_s, floor_s = best["full_fold"], min(floors)
    for p in (snap, full):
        p.unlink(missing_ok=True)
    return {
        "new_events_after_snapshot": added,
        "snapshot_rows": snapshot_rows,
        "reps": reps,
        "full_fold_s": full_s,
        "open_after_snapshot_s": best["open"],
        "open_after_snapshot_vs_full_fold": best["open"] / full_s,
        "log_s": best["log"],
        "log_vs_full_fold": best["log"] / full_s,
        "checkpoints_s": best["checkpoints"],
        "checkpoints_vs_full_fold": best["checkpoints"] / full_s,
        "sql_query": query,
        "sql_first_query_s": best["sql"],
        "sql_floor_s": floor_s,
        "sql_floor_rows": tables,
        "sql_first_query_vs_floor": best["sql"] / floor_s,
        # The same without the open (`uac eval "1"` on the same store, same run).
        "sql_first_query_minus_open_s": best["sql"] - best["open"],
        "sql_first_query_minus_open_vs_floor": (best["sql"] - best["open"]) / floor_s,
        "ingest_s": ingest["ingest_s"],
        "write_floor_s": ingest["write_floor_s"],
        "ingest_vs_write_floor": ingest["ingest_vs_write_floor"],
        "open_peak_rss_mb": peak["open"],
        "full_fold_peak_rss_mb": peak["full_fold"],
        "runs": {
            name: [{"wall_s": wall, "maxrss_mb": rss} for wall, rss in r]
            for name, r in runs.items()
        },
        "sql_floor_runs_s": floors,
    }


# -- stage 3: prompt tokens (its own process: a BM25 index of 1M lines takes ~1 GB) ----------


def stage_prompts(workdir: Path) -> dict[str, Any]:
    """Prompt tokens of the history in ``workdir/history``, with the ``ask`` messages that
    ``run_one`` took from its fold (``workdir/ask.json``)."""
    asks = json.loads((workdir / "ask.json").read_text())
    t_read, lines = timed(
        lambda: prompt_scale.read_lines(sorted((workdir / "history").glob("batch-*.jsonl")))
    )
    out = prompt_scale.measure(asks, lines)
    out["read_s"] = t_read
    out["maxrss_mb"] = maxrss_mb()
    return out


def prompts_only(size: int, progress: bool) -> dict[str, Any]:
    """The prompt figures alone for a history of ``size`` events, counted as in the full run.

    The history is generated in memory and folded without rules: rules raise alerts, never
    records, so the schema summary ``ask`` sends is the same as in the full run (the smoke test
    checks it), and a 1M fold takes minutes instead of the full run's ingest of 9.
    """
    t_start = time.perf_counter()
    history = History(size)
    lines: list[Any] = []
    wb = Workbench(":memory:", user=USER, rules=())
    with tqdm(
        total=size,
        desc=f"fold {size:,}",
        unit="ev",
        file=sys.stderr,
        disable=not progress,
        leave=False,
    ) as bar:
        for lo in range(0, size, BATCH):
            events = [history.next() for _ in range(min(BATCH, size - lo))]
            lines += [prompt_scale.fact_line(e) for e in events]
            wb.ingest(events)
            bar.update(len(events))
    t_fold = time.perf_counter() - t_start
    asks = prompt_scale.ask_messages(wb)
    current = sum(wb.state.counts().values())
    wb.close()
    del wb
    gc.collect()
    prompts = prompt_scale.measure(asks, lines)
    prompts["fold_s"] = t_fold
    prompts["current_records"] = current
    prompts["maxrss_mb"] = maxrss_mb()
    return {
        "size": size,
        "prompt_tokens": prompt_scale.summary(prompts),
        "prompts": prompts,
        "wall_s": time.perf_counter() - t_start,
        "load_average_at_end": os.getloadavg(),
        "engine_commit": _git("rev-parse", "--short", "HEAD"),
    }


def run_one(
    size: int,
    workdir: Path,
    eval_records: int,
    reps: int,
    rule_reps: int,
    cli_reps: int,
    progress: bool,
    only: str | None = None,
) -> dict[str, Any]:
    """Every figure at ``size``, or with ``only="i14"`` the ingest and issue 14's alone."""
    t_start = time.perf_counter()
    workdir.mkdir(parents=True, exist_ok=True)
    stage_out = workdir / "ingest.json"
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--stage-ingest",
        str(size),
        "--workdir",
        str(workdir),
        "--out",
        str(stage_out),
    ]
    if not progress:
        cmd.append("--quiet")
    subprocess.run(cmd, check=True)
    ingest = json.loads(stage_out.read_text())
    if only == "i14":
        return {
            "size": size,
            "ingest": ingest,
            "i14": bench_i14(size, workdir, workdir / "ingest.duckdb", ingest, cli_reps, progress),
            "wall_s": time.perf_counter() - t_start,
            "load_average_at_end": os.getloadavg(),
            "engine_commit": _git("rev-parse", "--short", "HEAD"),
        }

    gc.collect()
    rss_before = rss_mb()
    t_fold, cpu_fold, wb = timed_cpu(lambda: Workbench(workdir / "ingest.duckdb", user=USER))
    log_rows = wb.store.last_seq
    memory = {
        "maxrss_after_fold_mb": maxrss_mb(),
        "rss_after_fold_mb": rss_mb(),
        "rss_before_fold_mb": rss_before,
    }
    fold = {
        "open_s": t_fold,
        "open_cpu_s": cpu_fold,
        "log_rows": log_rows,
        "rows_per_s": log_rows / t_fold,
        "fact_events_per_s": ingest["fact_events"] / t_fold,
        "current_records": sum(wb.state.counts().values()),
        "standing_alerts": len(wb.alerts()),
    }
    # What ``ask`` would send about this history, before the benches below add facts to it.
    (workdir / "ask.json").write_text(json.dumps(prompt_scale.ask_messages(wb)))

    if progress:
        print(f"[{size:,}] checkpoints", file=sys.stderr)
    checkpoints = bench_checkpoints(wb, workdir, size)
    if progress:
        print(f"[{size:,}] rules after one fact", file=sys.stderr)
    rules = bench_rules(wb, size, rule_reps)
    queries = bench_eval(workdir, eval_records, reps, progress)
    wb.close()
    memory["maxrss_end_mb"] = maxrss_mb()
    i14 = bench_i14(size, workdir, workdir / "ingest.duckdb", ingest, cli_reps, progress)

    if progress:
        print(f"[{size:,}] prompt tokens", file=sys.stderr)
    prompts_out = workdir / "prompts.json"
    subprocess.run(
        [
            sys.executable,
            str(Path(__file__).resolve()),
            "--stage-prompts",
            str(size),
            "--workdir",
            str(workdir),
            "--out",
            str(prompts_out),
        ],
        check=True,
    )
    prompts = json.loads(prompts_out.read_text())
    return {
        "size": size,
        "ingest": ingest,
        "fold": fold,
        "checkpoint": checkpoints,
        "rules": rules,
        "eval": queries,
        "memory": memory,
        "i14": i14,
        "prompt_tokens": prompt_scale.summary(prompts),
        "prompts": prompts,
        "wall_s": time.perf_counter() - t_start,
        "load_average_at_end": os.getloadavg(),
        "engine_commit": _git("rev-parse", "--short", "HEAD"),
    }


# -- report --------------------------------------------------------------------------------------


def _rate(x: float) -> str:
    return f"{x:,.0f}/s"


def _secs(x: float) -> str:
    if x < 1e-3:
        return f"{x * 1e6:.0f} µs"
    if x < 1:
        return f"{x * 1e3:.1f} ms"
    return f"{x:.2f} s"


def i14_rows(row: Callable[[str, Callable[[dict[str, Any]], str]], None]) -> None:
    """Issue 14's figures, each beside its floor from the same run and the ratio's target."""
    t = I14_TARGETS

    def ratio(x: float) -> str:
        return f"{x:.3f}×" if x < 0.1 else f"{x:.2f}×"

    row(
        "i14 snapshots in the store (whole processes, best of reps)",
        lambda r: f"{r['i14']['snapshot_rows']} snapshot rows",
    )
    row(
        "    full fold: `uac eval 1` without snapshots",
        lambda r: _secs(r["i14"]["full_fold_s"]),
    )
    for label, key in (
        (f"`uac eval 1` after snapshot + {NEW_AFTER_SNAPSHOT:,} events", "open_after_snapshot"),
        ("`uac log --limit 5`", "log"),
        ("`uac checkpoints`", "checkpoints"),
    ):
        target = t[f"{key}_vs_full_fold"]
        row(f"    {label}", lambda r, k=key: _secs(r["i14"][f"{k}_s"]))
        row(
            f"      / full fold (≤ {target:g}×)",
            lambda r, k=key: ratio(r["i14"][f"{k}_vs_full_fold"]),
        )
    row("    `uac sql` first query, whole process", lambda r: _secs(r["i14"]["sql_first_query_s"]))
    row("    floor: one arg_max query per type", lambda r: _secs(r["i14"]["sql_floor_s"]))
    row(
        f"      / floor (≤ {t['sql_first_query_vs_floor']:g}×)",
        lambda r: ratio(r["i14"]["sql_first_query_vs_floor"]),
    )
    row(
        "      minus the open (`uac eval 1`) / floor",
        lambda r: ratio(r["i14"]["sql_first_query_minus_open_vs_floor"]),
    )
    row(
        "    bulk ingest / write floor, wall",
        lambda r: (
            f"{_secs(r['i14']['ingest_s'])} / {_secs(r['i14']['write_floor_s'])} = "
            f"{r['i14']['ingest_vs_write_floor']:.2f}×"
        ),
    )
    row(f"      target ≥ {t['ingest_vs_write_floor']:g}×", lambda r: "")
    row(
        f"    peak RSS of the open (≤ {t['open_peak_rss_mb']:,} MB)",
        lambda r: f"{r['i14']['open_peak_rss_mb']:,.0f} MB",
    )
    row(
        "      of the full fold",
        lambda r: f"{r['i14']['full_fold_peak_rss_mb']:,.0f} MB",
    )


def table(results: dict[str, Any]) -> str:
    runs = [results["sizes"][k] for k in sorted(results["sizes"], key=int)]
    rows: list[tuple[str, list[str]]] = []

    def row(label: str, fn: Callable[[dict[str, Any]], str]) -> None:
        rows.append((label, [fn(r) for r in runs]))

    if all("ingest" in r for r in runs):  # not in --only prompts results
        row("fact events", lambda r: f"{r['ingest']['fact_events']:,}")
        row("log rows written (facts+schema+alerts)", lambda r: f"{r['ingest']['rows_written']:,}")
        row(
            "1  ingest (fact events/s, 10k batches)",
            lambda r: _rate(r["ingest"]["ingest_events_per_s"]),
        )
        row("   ingest (rows/s)", lambda r: _rate(r["ingest"]["ingest_rows_per_s"]))
        row(
            "   DuckDB appender, same rows (rows/s)",
            lambda r: _rate(r["ingest"]["bulk_appender_rows_per_s"]),
        )
        row(
            "   ratio ingest / appender (≥ 0.5)",
            lambda r: f"{r['ingest']['ingest_vs_bulk_appender']:.2f}×",
        )
        row(
            "   where it goes (µs/event)",
            lambda r: " ".join(
                f"{k} {v:.0f}" for k, v in r["ingest"]["ingest_stage_us_per_event"].items()
            ),
        )
        row(
            "   log write alone / appender",
            lambda r: f"{r['ingest']['write_vs_bulk_appender']:.2f}×",
        )
        row(
            "   DuckDB read_json, same rows (rows/s)",
            lambda r: _rate(r["ingest"]["bulk_read_json_rows_per_s"]),
        )
        row(
            "   ratio ingest / read_json",
            lambda r: f"{r['ingest']['ingest_vs_bulk_read_json']:.2f}×",
        )
        row(
            "   ratio ingest / appender, CPU time",
            lambda r: f"{r['ingest']['ingest_vs_bulk_appender_cpu']:.2f}×",
        )
        row(
            "   appender, median batch (rows/s)",
            lambda r: _rate(r["ingest"]["bulk_appender_median_batch_rows_per_s"]),
        )
        row(
            "   ingest: first → last batch (events/s)",
            lambda r: (
                f"{r['ingest']['ingest_first_batch_events_per_s']:,.0f} → "
                f"{r['ingest']['ingest_last_batch_events_per_s']:,.0f}"
            ),
        )
        row(
            "   our write floor (parse+JSON+hash chain+appender, events/s)",
            lambda r: _rate(r["ingest"]["write_floor_events_per_s"]),
        )
        row(
            "   ratio ingest / write floor (≥ 0.5)",
            lambda r: f"{r['ingest']['ingest_vs_write_floor']:.2f}×",
        )
    if all("fold" in r for r in runs):  # not in --only i14 results
        row(
            "2  full fold: open Workbench (wall / CPU)",
            lambda r: f"{_secs(r['fold']['open_s'])} / {_secs(r['fold']['open_cpu_s'])}",
        )
        row("   fold (log rows/s)", lambda r: _rate(r["fold"]["rows_per_s"]))
        row("   current records", lambda r: f"{r['fold']['current_records']:,}")
        row("3  checkpoint: full", lambda r: _secs(r["checkpoint"]["full_s"]))
        row(
            "   checkpoint: incremental after 100 events",
            lambda r: _secs(r["checkpoint"]["incremental_s"]),
        )
        row(
            "   ratio incremental / full (≤ 1% at 1M)",
            lambda r: f"{100 * r['checkpoint']['incremental_vs_full']:.2f}%",
        )
        row(
            "   segments full → incremental",
            lambda r: (
                f"{r['checkpoint']['full_segments']:,} → {r['checkpoint']['incremental_segments']:,}"
            ),
        )
        row(
            "   ratio by CPU time",
            lambda r: f"{100 * r['checkpoint']['incremental_vs_full_cpu']:.2f}%",
        )
        row(
            "   ingest of those 100 events (first after open)",
            lambda r: _secs(r["checkpoint"]["first_ingest_after_open_s"]),
        )
        for name in EXPRESSIONS:
            row(
                f"4  eval {name}: sandbox / plain",
                lambda r, n=name: (
                    f"{_secs(r['eval']['expressions'][n]['sandbox_median_s'])} / "
                    f"{_secs(r['eval']['expressions'][n]['plain_median_s'])}"
                ),
            )
            row(
                "   ratio (≤ 2×)",
                lambda r, n=name: f"{r['eval']['expressions'][n]['sandbox_vs_plain']:.2f}×",
            )
        row("   process RSS when forking", lambda r: f"{r['eval']['process_rss_mb']:,.0f} MB")
        for t in ("Transaction", "Medication"):
            row(
                f"5  one new {t}: ingest total",
                lambda r, t=t: _secs(r["rules"][t]["ingest_one_median_s"]),
            )
            row(
                "   of which rules (runner.run)",
                lambda r, t=t: _secs(r["rules"][t]["rules_median_s"]),
            )
            row(
                "   slowest rule",
                lambda r, t=t: "{} {}".format(
                    *next((k, _secs(v)) for k, v in r["rules"][t]["per_rule_s"].items())
                ),
            )
        row(
            "6  peak RSS after fold (< 2 GB at 1M)",
            lambda r: f"{r['memory']['maxrss_after_fold_mb']:,.0f} MB",
        )
        row(
            "   RSS: before → after fold",
            lambda r: (
                f"{r['memory']['rss_before_fold_mb']:,.0f} → {r['memory']['rss_after_fold_mb']:,.0f} MB"
            ),
        )
        row(
            "   peak RSS of the ingest process",
            lambda r: f"{r['ingest']['ingest_stage_maxrss_mb']:,.0f} MB",
        )
        row("   store file size", lambda r: f"{r['ingest']['db_size_mb']:,.0f} MB")
    if all("i14" in r for r in runs):
        i14_rows(row)
    if all("prompt_tokens" in r for r in runs):
        row(
            f"7  prompt tokens per question ({runs[0]['prompts']['encoding'].split()[0]}, "
            f"mean of {len(runs[0]['prompts']['questions'])})",
            lambda r: "",
        )
        for system in prompt_scale.SYSTEMS:
            row(
                f"   {prompt_scale.LABELS[system]}",
                lambda r, s=system: f"{r['prompt_tokens'][s]:,}",
            )
        row("   lines of full context (one per fact event)", lambda r: f"{r['prompts']['lines']:,}")
        row(
            "   full context / ask",
            lambda r: f"{r['prompt_tokens']['full_context'] / r['prompt_tokens']['ask']:,.0f}×",
        )
    row("wall time of this size", lambda r: f"{r['wall_s']:.0f} s")
    row(
        "load average (1 min) at end",
        lambda r: f"{r['load_average_at_end'][0]:.1f} on {results['machine']['cpu_count']} CPUs",
    )

    header = ["", *(f"{r['size']:,}" for r in runs)]
    widths = [max(len(header[0]), *(len(label) for label, _ in rows))]
    widths += [max(len(header[i + 1]), *(len(v[i]) for _, v in rows)) for i in range(len(runs))]
    lines = [
        "  ".join(
            h.ljust(w) if i == 0 else h.rjust(w)
            for i, (h, w) in enumerate(zip(header, widths, strict=True))
        )
    ]
    lines.append("  ".join("-" * w for w in widths))
    for label, values in rows:
        cells = [
            label.ljust(widths[0]),
            *(v.rjust(w) for v, w in zip(values, widths[1:], strict=True)),
        ]
        lines.append("  ".join(cells))
    return "\n".join(lines)


def _size_axis(sizes: list[int], pad: float = 1.0) -> Any:
    import altair as alt

    domain = [min(sizes) / pad, max(sizes) * pad] if pad > 1 and sizes else alt.Undefined
    return alt.X(
        "size:Q",
        scale=alt.Scale(type="log", domain=domain),
        axis=alt.Axis(values=sizes, format="~s"),
        title="fact events in the history",
    )


def prompt_panel(
    runs: list[dict[str, Any]], width: int = 360, height: int = 180, title: str = ""
) -> Any:
    """Prompt tokens per question by history size, one line per system (log scales)."""
    import altair as alt

    runs = [r for r in runs if "prompt_tokens" in r]
    labels = [prompt_scale.LABELS[s] for s in prompt_scale.SYSTEMS]
    values = [
        {"size": r["size"], "series": prompt_scale.LABELS[s], "value": r["prompt_tokens"][s]}
        for r in runs
        for s in prompt_scale.SYSTEMS
    ]
    base = alt.Chart(alt.Data(values=values)).encode(
        _size_axis([r["size"] for r in runs], pad=1.6),
        alt.Y("value:Q", scale=alt.Scale(type="log"), title="tokens (cl100k_base)"),
        alt.Color("series:N", title=None, sort=labels, legend=alt.Legend(labelLimit=300)),
    )
    line = base.mark_line(point=True).encode(
        tooltip=["series:N", "size:Q", alt.Tooltip("value:Q", format=",.0f")]
    )

    full = (
        base.transform_filter(alt.datum.series == prompt_scale.LABELS["full_context"])
        .mark_text(dy=-9, fontSize=9)
        .encode(text=alt.Text("value:Q", format=",.3~s"))
    )
    questions = len(runs[0]["prompts"]["questions"]) if runs else 0
    subtitle = (
        "at {:,}: ask {:,}, top-10 {:,}, top-50 {:,}, full context {:,}".format(
            runs[-1]["size"], *(runs[-1]["prompt_tokens"][s] for s in prompt_scale.SYSTEMS)
        )
        if runs
        else ""
    )
    return alt.layer(line, full).properties(
        title=alt.TitleParams(
            title or f"Prompt tokens per question (mean of {questions} aggregate questions)",
            subtitle=subtitle,
        ),
        width=width,
        height=height,
    )


def chart(results: dict[str, Any], path: Path) -> None:
    """Every scale figure: rates, checkpoint and rule times by size; ratios against their
    targets; per-batch ingest; prompt tokens by history size. Results of ``--only prompts``
    get the prompt panel alone."""
    import altair as alt

    runs = [results["sizes"][k] for k in sorted(results["sizes"], key=int)]
    title = f"uac engine at scale — {results['date']}, {results['machine']['platform']}"
    if results.get("prompts_date"):  # prompt figures merged in from another run (--replot)
        title += f"; prompt tokens {results['prompts_date']}"
    if not all("fold" in r for r in runs):
        prompt_panel(
            runs,
            width=420,
            height=260,
            title=f"uac prompt tokens per question by history size — {results['date']}",
        ).save(str(path))
        return
    sizes = [r["size"] for r in runs]
    x = _size_axis(sizes)

    def lines(values: list[dict[str, Any]], title: str, y_title: str, log: bool = True) -> Any:
        y = alt.Y("value:Q", title=y_title, scale=alt.Scale(type="log") if log else alt.Undefined)
        return (
            alt.Chart(alt.Data(values=values))
            .mark_line(point=True)
            .encode(x, y, alt.Color("series:N", title=None), tooltip=["series:N", "value:Q"])
            .properties(title=title, width=260, height=200)
        )

    def ratio(values: list[dict[str, Any]], title: str, target: float, log: bool = False) -> Any:
        top = max([target, *(v["value"] for v in values)])
        low = min([target, *(v["value"] for v in values)])
        y = alt.Y(
            "value:Q",
            title=None,
            scale=alt.Scale(type="log", domain=[low / 1.5, top * 1.5])
            if log
            else alt.Scale(domain=[0, top * 1.15]),
        )
        data = lines(values, title, "").encode(y).properties(width=200, height=160)
        goal = (
            alt.Chart(alt.Data(values=[{"target": target}]))
            .mark_rule(color="red", strokeDash=[5, 3])
            .encode(y=alt.Y("target:Q"))
        )
        return alt.layer(data, goal).resolve_scale(color="independent")

    rates, checkpoints, rules, batches, stages = [], [], [], [], []
    ingest_ratio, cp_ratio, eval_ratio, memory = [], [], [], []
    for r in runs:
        n, ing = r["size"], r["ingest"]
        rates += [
            {"size": n, "series": "ingest", "value": ing["ingest_rows_per_s"]},
            {"size": n, "series": "DuckDB appender", "value": ing["bulk_appender_rows_per_s"]},
            {"size": n, "series": "DuckDB read_json", "value": ing["bulk_read_json_rows_per_s"]},
            {"size": n, "series": "full fold (open)", "value": r["fold"]["rows_per_s"]},
        ]
        checkpoints += [
            {"size": n, "series": "full", "value": r["checkpoint"]["full_s"]},
            {"size": n, "series": "after 100 events", "value": r["checkpoint"]["incremental_s"]},
        ]
        for t, v in r["rules"].items():
            rules.append({"size": n, "series": f"{t}: ingest", "value": v["ingest_one_median_s"]})
            rules.append({"size": n, "series": f"{t}: rules", "value": v["rules_median_s"]})
        done = 0
        for b in ing["per_batch"]:
            done += b["events"]
            batches.append(
                {"events": done, "series": f"{n:,}", "value": b["events"] / b["ingest_s"]}
            )
        stages += [
            {"size": f"{n:,}", "stage": k, "value": v}
            for k, v in ing.get("ingest_stage_us_per_event", {}).items()
        ]
        ingest_ratio.append(
            {"size": n, "series": "ingest / appender", "value": ing["ingest_vs_bulk_appender"]}
        )
        cp_ratio.append(
            {
                "size": n,
                "series": "incremental / full",
                "value": r["checkpoint"]["incremental_vs_full"],
            }
        )
        eval_ratio += [
            {"size": n, "series": name, "value": e["sandbox_vs_plain"]}
            for name, e in r["eval"]["expressions"].items()
            if name != "constant"
        ]
        memory.append(
            {
                "size": n,
                "series": "peak RSS after fold",
                "value": r["memory"]["maxrss_after_fold_mb"],
            }
        )
    per_batch = (
        alt.Chart(alt.Data(values=batches))
        .mark_line(point=alt.OverlayMarkDef(size=12))
        .encode(
            alt.X(
                "events:Q",
                scale=alt.Scale(type="log"),
                axis=alt.Axis(format="~s"),
                title="fact events in the log after the batch",
            ),
            alt.Y("value:Q", scale=alt.Scale(type="log"), title="events/s"),
            alt.Color("series:N", title="history", sort=[f"{n:,}" for n in sizes]),
        )
        .properties(title="Ingest rate of each 10k batch as the log grows", width=400, height=180)
    )
    top = alt.hconcat(
        lines(rates, "Write and fold rates", "rows per second"),
        lines(checkpoints, "Checkpoint time", "seconds"),
        lines(rules, "One new fact: ingest and rules", "seconds"),
    ).resolve_scale(color="independent")
    bottom = alt.hconcat(
        ratio(ingest_ratio, "ingest / DuckDB appender (≥ 0.5)", TARGETS["ingest_vs_bulk"]),
        ratio(
            cp_ratio,
            "incremental / full checkpoint (≤ 1%)",
            TARGETS["checkpoint_incremental_vs_full"],
            log=True,
        ),
        ratio(eval_ratio, "sandbox / plain eval (≤ 2×)", TARGETS["eval_sandbox_vs_plain"]),
        ratio(memory, "peak RSS after fold, MB (< 2 GB)", TARGETS["fold_peak_mb"]),
    ).resolve_scale(color="independent")
    by_stage = (
        alt.Chart(alt.Data(values=stages))
        .mark_bar()
        .encode(
            alt.X("size:N", title="fact events", sort=[f"{n:,}" for n in sizes]),
            alt.Y("value:Q", title="µs per fact event", stack="zero"),
            alt.Color(
                "stage:N", title="ingest step", sort=list(dict.fromkeys(s["stage"] for s in stages))
            ),
            tooltip=["size:N", "stage:N", alt.Tooltip("value:Q", format=".1f")],
        )
        .properties(title="Where ingest's time goes", width=160, height=180)
    )
    panels = [per_batch, *([by_stage] if stages else [])]
    if any("prompt_tokens" in r for r in runs):
        panels.append(prompt_panel(runs))
    last = alt.hconcat(*panels).resolve_scale(color="independent")
    alt.vconcat(top, bottom, last, title=title).resolve_scale(color="independent").save(str(path))


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(HERE.parent), *args], capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def machine() -> dict[str, Any]:
    import pydantic

    status = _git("status", "--porcelain", "--", "uac_kernel")
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "memory_gb": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
        "python": platform.python_version(),
        "duckdb": duckdb.__version__,
        "pydantic": pydantic.VERSION,
        "orjson": orjson.__version__,
        "engine_commit": _git("rev-parse", "--short", "HEAD"),
        "engine_modified_files": status.splitlines() if status else [],
        "load_average_at_start": os.getloadavg(),
    }


# -- command line ----------------------------------------------------------------------------------


def replot(paths: list[Path], svg: Path) -> int:
    """Draw the chart of saved results; later files add their prompt figures to the first's sizes."""
    results = json.loads(paths[0].read_text())
    for path in paths[1:]:
        other = json.loads(path.read_text())
        for key, run in other["sizes"].items():
            if key in results["sizes"] and "prompt_tokens" in run:
                results["sizes"][key]["prompt_tokens"] = run["prompt_tokens"]
                results["sizes"][key]["prompts"] = run["prompts"]
                results["prompts_date"] = other["date"]
    svg.parent.mkdir(parents=True, exist_ok=True)
    chart(results, svg)
    print(f"chart in {svg}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="JSON results, chart as .svg beside it (default: bench/results/scale.json, or "
        "scale_prompts.json with --only prompts, scale_i14.json with --only i14)",
    )
    ap.add_argument(
        "--only",
        choices=["prompts", "i14"],
        help="prompts: only the prompt tokens (history generated and folded in memory); i14: "
        "only the ingest and issue 14's figures against their floors",
    )
    ap.add_argument(
        "--replot",
        type=Path,
        nargs="+",
        metavar="JSON",
        help="draw the chart (--out with .svg) from saved results; the prompt figures of later "
        "files (e.g. scale_prompts.json) join the sizes of the first",
    )
    ap.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where histories and stores go (default: a temp dir under bench/out/)",
    )
    ap.add_argument("--eval-records", type=int, default=100_000)
    ap.add_argument("--reps", type=int, default=7, help="repetitions of each query (medians)")
    ap.add_argument(
        "--rule-reps",
        type=int,
        default=3,
        help="new facts per type in the rules measurement (medians)",
    )
    ap.add_argument(
        "--cli-reps",
        type=int,
        default=3,
        help="runs of each whole `uac` process in issue 14's figures (best of)",
    )
    ap.add_argument("--no-chart", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the generated files and stores")
    ap.add_argument("--quiet", action="store_true", help="no progress bars")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--stage-ingest", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--stage-prompts", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--stage-prompts-only", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    progress = not args.quiet
    if args.out is None:
        args.out = {"prompts": DEFAULT_PROMPTS_OUT, "i14": DEFAULT_I14_OUT}.get(
            args.only or "", DEFAULT_OUT
        )

    if args.replot:
        return replot(args.replot, args.out.with_suffix(".svg"))
    if args.stage_prompts is not None:
        args.out.write_text(json.dumps(stage_prompts(args.workdir), indent=2))
        return 0
    if args.stage_prompts_only is not None:
        out = prompts_only(args.stage_prompts_only, progress)
        args.out.write_text(json.dumps(out, indent=2))
        return 0
    if args.stage_ingest is not None:
        out = stage_ingest(args.stage_ingest, args.workdir, progress)
        args.out.write_text(json.dumps(out, indent=2))
        return 0
    if args.one is not None:
        out = run_one(
            args.one,
            args.workdir,
            args.eval_records,
            args.reps,
            args.rule_reps,
            args.cli_reps,
            progress,
            args.only,
        )
        args.out.write_text(json.dumps(out, indent=2))
        return 0

    t0 = time.perf_counter()
    started = datetime.now().isoformat(timespec="seconds")
    DEFAULT_WORKDIR.mkdir(parents=True, exist_ok=True)
    root = args.workdir or Path(tempfile.mkdtemp(prefix="scale-", dir=DEFAULT_WORKDIR))
    results: dict[str, Any] = {
        "date": started,
        "machine": machine(),
        "targets": TARGETS,
        "i14_targets": I14_TARGETS,
        "batch": BATCH,
        "seed": SEED,
        **({"only": args.only} if args.only else {}),
        "sizes": {},
    }
    try:
        for size in args.sizes:
            workdir = root / f"size-{size}"
            out = workdir / "result.json"
            workdir.mkdir(parents=True, exist_ok=True)
            print(f"== {size:,} fact events", file=sys.stderr)
            cmd = [sys.executable, str(Path(__file__).resolve()), "--out", str(out)]
            if args.only == "prompts":
                cmd += ["--stage-prompts-only", str(size)]
            else:
                cmd += [
                    "--one",
                    str(size),
                    "--workdir",
                    str(workdir),
                    "--eval-records",
                    str(args.eval_records),
                    "--reps",
                    str(args.reps),
                    "--rule-reps",
                    str(args.rule_reps),
                    "--cli-reps",
                    str(args.cli_reps),
                    *(["--only", args.only] if args.only else []),
                ]
            if not progress:
                cmd.append("--quiet")
            subprocess.run(cmd, check=True)
            results["sizes"][str(size)] = json.loads(out.read_text())
            # Sizes finished so far survive a later failure or interruption.
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({**results, "partial": True}, indent=2))
            if not args.keep:
                shutil.rmtree(workdir, ignore_errors=True)
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    results["total_wall_s"] = time.perf_counter() - t0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2))
    print(table(results))
    print(f"\ntotal wall time {results['total_wall_s']:.0f} s; results in {args.out}")
    if not args.no_chart and args.only != "i14":  # the chart draws the full run's figures
        svg = args.out.with_suffix(".svg")
        try:
            chart(results, svg)
            print(f"chart in {svg}")
        except ImportError as exc:
            print(
                f"no chart ({exc}); install the dev extras: pip install -e '.[dev]'",
                file=sys.stderr,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
