"""How fast `%uac log` shows its first page on a large store, against reading the whole log.

The log browser pages on the kernel side: one parameterised SELECT of one page (plus a count)
crosses to the browser. This measures, on a store of N events (default 1,000,000): building the
`LogBrowser` widget (kind counts, total, first page), the next page, a kind filter, a jump to a
middle page — and, side by side, what a widget that pulled the user's whole log into Python
would pay. Writes JSON (default bench/results/log-page.json).

    python bench/log_page.py [--events 1000000] [--out bench/results/log-page.json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

from tqdm import tqdm

from uac_kernel.log.store import NewEvent, Store
from uac_kernel.notebook.widgets import LogBrowser
from uac_kernel.workbench import Workbench

USER = "bench"


def build(path: Path, n: int) -> None:
    store = Store(path)
    start = datetime(2020, 1, 1)
    batch = 100_000
    for lo in tqdm(range(0, n, batch), desc="building the log", unit="batch"):
        events = [
            NewEvent(
                start + timedelta(seconds=30 * i),
                "utterance",
                USER,
                {"speaker": "user", "text": f"message {i} about trip {i % 97} and dinner {i % 13}"},
                f"bench#{i}",
            )
            for i in range(lo, min(n, lo + batch))
        ]
        store.append(events)
    store.close()


def timed(fn: object, reps: int = 5) -> float:
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--out", default="bench/results/log-page.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log.duckdb"
        build(path, args.events)
        wb = Workbench(path, user=USER, rules=[])
        first = timed(lambda: LogBrowser(wb), reps=3)
        browser = LogBrowser(wb)
        next_page = timed(browser.next_page)
        # A query trait set twice to the same value does nothing, so these run once each.
        kind = timed(lambda: setattr(browser, "query", {"kind": "utterance", "page": 0}), reps=1)
        middle = timed(lambda: setattr(browser, "query", {"page": browser.pages // 2}), reps=1)
        whole = timed(lambda: list(wb.store.events(USER)), reps=1)
        wb.close()
    result = {
        "date": datetime.now().isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "python": platform.python_version()},
        "events": args.events,
        "seconds": {
            "first_page_widget": first,
            "next_page": next_page,
            "kind_filter": kind,
            "middle_page_jump": middle,
            "whole_log_into_python": whole,
        },
        "whole_log_vs_first_page": whole / first,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for name, seconds in result["seconds"].items():  # type: ignore[union-attr]
        print(f"{name:<24} {seconds * 1000:10.1f} ms")
    print(f"reading the whole log costs {result['whole_log_vs_first_page']:.0f}x the first page")


if __name__ == "__main__":
    main()
