"""What the matcher's proposals cost ingest: the same batches with and without them, side by side.

The matcher runs when a batch changes the schema, for the types it changed, never per event.
This ingests the same facts in batches of ``--batch`` events into three fresh stores,
interleaved batch by batch so all see the same load: in the library's names; in a newcomer's
(camelCase fields, lower-case types) with the matcher's proposals (the default); and in the
newcomer's without them (``propose_bindings=False``: no rule reads their names). It reports the
CPU seconds of each (process time around each ``ingest`` call, summed), the ratio of the
newcomer with proposals to our names (the same rule work once bound, so the difference is what
proposing costs: the target is about 1), and how many batches changed the schema.

    python bench/vocab_ingest.py [--events 20000] [--batch 500] [--out bench/results]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from uac_kernel.core.outputs import JSON, Output
from uac_kernel.workbench import Workbench

HERE = Path(__file__).resolve().parent


# The same facts in the library's names and in a newcomer's (camelCase, lower-case types).
SPELLINGS: dict[str, dict[str, str]] = {
    "ours": {
        "trip": "Trip", "start": "start", "end": "end", "country": "country",
        "companions": "travellers", "med": "Medication", "drug": "name", "left": "quantity",
        "refill": "next_refill", "charge": "Transaction", "amount": "amount",
        "payee": "merchant", "on": "date", "duty": "Task", "title": "title", "due": "due",
        "done": "done",
    },
    "theirs": {
        "trip": "journey", "start": "leavesOn", "end": "comesBack", "country": "nation",
        "companions": "travelCompanions", "med": "script", "drug": "drugName",
        "left": "pillsLeft", "refill": "refillOn", "charge": "cardCharge", "amount": "amt",
        "payee": "payee", "on": "paidOn", "duty": "homework", "title": "title",
        "due": "turnIn", "done": "handedIn",
    },
}  # fmt: skip


def history(n: int, spelling: str) -> list[dict[str, Any]]:
    """``n`` facts over four types; each type gains a field halfway, so the schema changes a few
    times along the way and not only at the start. Trips follow one another (no two overlap), so
    the rules' work is the same whoever names the fields."""
    w = SPELLINGS[spelling]
    start = date(2024, 1, 1)
    out: list[dict[str, Any]] = []
    for i in range(n):
        day = start + timedelta(days=i // 4)
        ts = f"{day.isoformat()}T{(i % 24):02d}:00:00"
        late = i > n // 2
        kind = i % 4
        fields: dict[str, Any]
        if kind == 0:
            leave = date(2030, 1, 1) + timedelta(days=3 * (i // 4))
            fields = {w["start"]: leave.isoformat(), w["end"]: (leave + timedelta(days=1)).isoformat(),
                      w["country"]: "Japan"}  # fmt: skip
            if late:
                fields[w["companions"]] = ["Ann"]
            out.append(_fact(ts, w["trip"], f"j{i}", fields))
        elif kind == 1:
            fields = {w["drug"]: "ibuprofen", w["left"]: 200 + i % 10}
            if late:
                fields[w["refill"]] = (day + timedelta(days=10)).isoformat()
            out.append(_fact(ts, w["med"], f"s{i}", fields))
        elif kind == 2:
            fields = {w["amount"]: float(i % 90) + 0.5, w["payee"]: f"shop {i}",
                      w["on"]: day.isoformat()}  # fmt: skip
            out.append(_fact(ts, w["charge"], f"c{i}", fields))
        else:
            fields = {w["title"]: f"task {i}", w["due"]: (day + timedelta(days=10)).isoformat()}
            if late:
                fields[w["done"]] = False
            out.append(_fact(ts, w["duty"], f"h{i}", fields))
    return out


def _fact(ts: str, type_: str, key: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "fact", "ts": ts, "op": "add", "type": type_, "key": key, "fields": fields}


# (label, spelling, proposals): the newcomer with proposals against our names (the same rule
# work, so the difference is the matcher) and against the newcomer without them (no rule reads
# their names: ingest's floor).
LINES = (
    ("ours", "ours", True),
    ("theirs, proposed", "theirs", True),
    ("theirs, not proposed", "theirs", False),
)


def measure(events: int, batch: int) -> dict[str, Any]:
    facts = {s: history(events, s) for s in SPELLINGS}
    cpu = dict.fromkeys((label for label, _, _ in LINES), 0.0)
    schema_batches = 0
    with tempfile.TemporaryDirectory() as tmp:
        wbs = {
            label: Workbench(
                Path(tmp) / f"{i}.duckdb", user="me", snapshots=False, propose_bindings=on
            )
            for i, (label, _, on) in enumerate(LINES)
        }
        try:
            for lo in range(0, events, batch):
                for label, spelling, _ in LINES:
                    t0 = time.process_time()
                    report = wbs[label].ingest(facts[spelling][lo : lo + batch])
                    cpu[label] += time.process_time() - t0
                    if label == "ours" and report.schema_changes:
                        schema_batches += 1
            proposed = wbs["theirs, proposed"].vocab().bindings
            alerts = {label: len(wb.alerts()) for label, wb in wbs.items()}
        finally:
            for wb in wbs.values():
                wb.close()
    return {
        "events": events,
        "batch": batch,
        "batches": -(-events // batch),
        "batches_that_changed_the_schema": schema_batches,
        "bindings_proposed": len(proposed),
        "standing_alerts": alerts,
        "cpu_seconds": {k: round(v, 3) for k, v in cpu.items()},
        "ratio_to_ours": round(cpu["theirs, proposed"] / cpu["ours"], 3),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--out", default=str(HERE / "results"))
    args = ap.parse_args()
    result = measure(args.events, args.batch)
    result["measured_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    cpu = result["cpu_seconds"]
    line = (
        f"vocab ingest: {result['events']:,} events in {result['batches']} batches, "
        f"{result['batches_that_changed_the_schema']} changed the schema; CPU seconds: "
        + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items())
        + f"; a newcomer with proposals / our names: {result['ratio_to_ours']:.3f} "
        f"({result['bindings_proposed']} bindings proposed; standing alerts "
        + ", ".join(f"{k} {v}" for k, v in result["standing_alerts"].items())
        + ")"
    )
    Path(args.out).mkdir(parents=True, exist_ok=True)
    Output(Path(args.out) / "vocab_ingest.json", JSON).write_text([json.dumps(result, indent=2)])
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
