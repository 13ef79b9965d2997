"""How long checking one user takes next to checking the whole store (issue 12).

A store of ``--users`` users × ``--events`` events each (default 1,000 × 1,000: one million
events, interleaved as real users' sessions would be) is written once through ``Store.append``.
Then, side by side in one run, interleaved round by round:

- ``verify(store, user)`` for a user drawn at random each round (the user's three chains);
- ``verify(store)``: every user's chains and the store-wide ``seq``.

Target: one user's check ≤ 0.05× the store-wide one. Medians of wall time over ``--reps``
rounds; the result goes to ``bench/results/verify.json``.

    python bench/verify.py [--users 1000] [--events 1000] [--reps 5] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import scale  # bench/scale.py, beside this script: machine facts
from tqdm import tqdm

from uac_kernel.log.integrity import verify
from uac_kernel.log.store import NewEvent, Store

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "results" / "verify.json"
TARGET = 0.05


def build(path: Path, users: int, events: int, progress: bool) -> None:
    store = Store(path)
    start = datetime(2024, 1, 1)
    batch_users = max(1, 20_000 // events)  # ~20k events a batch, several users interleaved
    for lo in tqdm(range(0, users, batch_users), desc="writing", disable=not progress):
        batch = [
            NewEvent(
                start + timedelta(minutes=i),
                "utterance",
                f"user-{u:05d}",
                {"speaker": "user", "text": f"message {i} of user {u}"},
                f"u{u}#{i}",
            )
            for i in range(events)
            for u in range(lo, min(users, lo + batch_users))
        ]
        store.append(batch)
    store.close()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--events", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=HERE / "out") as work:
        path = Path(work) / "verify.duckdb"
        build(path, args.users, args.events, not args.quiet)
        store = Store(path, read_only=True)
        rng = random.Random(0)
        one: list[float] = []
        whole: list[float] = []
        for _ in tqdm(range(args.reps), desc="verifying", disable=args.quiet):
            user = f"user-{rng.randrange(args.users):05d}"
            t = time.perf_counter()
            report = verify(store, user)
            one.append(time.perf_counter() - t)
            if not report.ok or report.events != args.events:
                raise SystemExit(f"one user's check failed: {report}")
            t = time.perf_counter()
            report = verify(store)
            whole.append(time.perf_counter() - t)
            if not report.ok or report.events != args.users * args.events:
                raise SystemExit(f"the store-wide check failed: {report}")
        store.close()
    ratio = statistics.median(one) / statistics.median(whole)
    result = {
        "date": datetime.now().isoformat(timespec="seconds"),
        "machine": scale.machine(),
        "users": args.users,
        "events_per_user": args.events,
        "reps": args.reps,
        "one_user_s": one,
        "store_wide_s": whole,
        "median_one_user_s": statistics.median(one),
        "median_store_wide_s": statistics.median(whole),
        "ratio": ratio,
        "target": TARGET,
        "met": ratio <= TARGET,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"{args.users:,} users × {args.events:,} events: one user {statistics.median(one):.3f} s, "
        f"store-wide {statistics.median(whole):.2f} s, ratio {ratio:.4f} "
        f"(target ≤ {TARGET}: {'met' if ratio <= TARGET else 'MISSED'}); {args.out}"
    )
    return result


if __name__ == "__main__":
    sys.path.insert(0, str(HERE))
    main()
