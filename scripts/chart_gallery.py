"""Draw every kind of chart uac makes, at a notebook's width, to PNG files (docs/charts.md).

Real data: the demo user's two years (``uac_kernel.demo.life``) with the rule library, ingested
a week at a time as she would have told it (so each alert is raised and cleared when it was,
not all at one instant as one batch of two years would), a what-if on it, aggregate results of her history, a fleet summary, and the aggregate benchmark's
committed cases (``bench/results/aggregate-2026-11-29-cases.jsonl.gz``). Each chart is drawn by
vl-convert at scale 1, as a notebook shows it.

    python scripts/chart_gallery.py [--out docs/charts]
"""

from __future__ import annotations

import argparse
import gzip
import itertools
import json
import sys
import tempfile
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path
from typing import Any

import altair as alt
import vl_convert as vlc

from uac_kernel import Workbench
from uac_kernel.bench.aggregate._questions import Question
from uac_kernel.bench.aggregate._results import AggregateResult
from uac_kernel.demo.life import demo_events
from uac_kernel.fleet.sql import FleetSummary
from uac_kernel.render import charts
from uac_kernel.rules.library import LIBRARY

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "bench" / "results" / "aggregate-2026-11-29-cases.jsonl.gz"
MEDICATION = {
    "kind": "fact",
    "ts": "2024-06-03T09:00:00",
    "op": "add",
    "type": "Medication",
    "key": "med-2024-06-amoxicillin",
    "fields": {"name": "amoxicillin", "dose_mg": 500.0, "active": True},
}


def aggregate_result() -> AggregateResult:
    """The aggregate benchmark's committed run, its rows rebuilt from its cases file."""
    meta = json.loads(CASES.with_name("aggregate-2026-11-29.json").read_text())
    questions, rows = [], []
    with gzip.open(CASES, "rt") as f:
        for line in f:
            case = json.loads(line)
            fields = ("id", "size", "variant", "type", "pattern", "question", "expression")
            q = {k: case[k] for k in fields}
            questions.append(
                Question(q["id"], q["id"].split("/")[0], q["size"], q["variant"], q["type"],
                         q["pattern"], q["question"], "", "", {}, q["expression"], case["truth"])
            )  # fmt: skip
            for system, out in case["outcomes"].items():
                name, _, k = system.partition("@")
                rows.append(
                    {"question": q["id"], "size": q["size"], "variant": q["variant"],
                     "type": q["type"], "pattern": q["pattern"], "system": name,
                     "k": int(k) if k else None, "correct": out["correct"],
                     "prompt_tokens": out.get("prompt_tokens")}
                )  # fmt: skip
    return AggregateResult(meta=meta, questions=questions, rows=rows)


def gallery(wb: Workbench) -> Iterator[tuple[str, str, Callable[[], alt.TopLevelMixin]]]:
    """(file name, what it shows, the chart) for every chart kind."""
    yield (
        "events",
        "`%uac chart events --freq month`: events per month, one colour per kind",
        lambda: charts.events_over_time(wb, "month"),
    )
    yield (
        "records",
        "`%uac chart records`: current records of each type, month by month",
        lambda: charts.records_over_time(wb, "month"),
    )
    yield (
        "alerts",
        "`%uac chart alerts`: every alert, raised → cleared, by severity",
        lambda: charts.alerts_timeline(wb),
    )
    what = wb.whatif([MEDICATION], as_of=str(MEDICATION["ts"]), expressions=[])
    yield (
        "whatif",
        "`%uac whatif --as-of`: the alerts of a what-if against the real ones",
        (lambda: charts.whatif_timeline(what)),
    )
    yield (
        "result_bars",
        "`%uac chart result`: a Counter as bars, most common first",
        lambda: charts.result_chart(
            wb.eval("Counter(t.category for t in user.all(Transaction)).most_common(12)"),
            title="Transactions per category",
        ),
    )
    yield (
        "result_line",
        "`%uac chart result`: a SQL result of months and numbers as a line",
        lambda: charts.result_chart(
            wb.sql(
                "SELECT strftime(date, '%Y-%m') AS month, round(sum(amount)) AS spent "
                "FROM Transaction WHERE currency = 'GBP' GROUP BY ALL ORDER BY month"
            ),
            title="Money spent per month (GBP)",
        ),
    )
    yield (
        "result_histogram",
        "`%uac chart result`: a list of numbers as a histogram",
        lambda: charts.result_chart(
            wb.eval("[t.amount for t in user.all(Transaction) if t.amount and t.amount < 200]"),
            title="Transaction amounts under 200",
        ),
    )
    yield (
        "result_grouped",
        "`%uac chart result`: a dict of group → {x: number}",
        lambda: charts.result_chart(
            wb.eval(
                "{c: {y: sum(1 for t in user.all(Trip) if t.country == c and t.start.year == y)"
                " for y in (2024, 2025)} for c in sorted({t.country for t in user.all(Trip)})}"
            ),
            title="Trips per country and year",
        ),
    )
    yield (
        "fleet",
        "`%uac fleet DIR`: standing alerts per rule beside events per user",
        lambda: charts.fleet_charts(fleet_summary()),
    )
    yield (
        "aggregate",
        "`uac bench aggregate`: accuracy and prompt tokens per system",
        lambda: aggregate_result().chart(),
    )


def ingest_by_week(wb: Workbench, events: list[dict[str, Any]]) -> int:
    """Ingest ``events`` (in time order) one ISO week at a time; the number of batches."""

    def week(event: dict[str, Any]) -> tuple[int, int]:
        year, number, _ = date.fromisoformat(str(event["ts"])[:10]).isocalendar()
        return year, number

    batches = 0
    for _, batch in itertools.groupby(events, key=week):
        wb.ingest(list(batch))
        batches += 1
    return batches


def fleet_summary() -> FleetSummary:
    """A fleet of 40 users as ``fleet.sql.fleet_summary`` reports one."""
    per_user = [(f"user-{i:03d}", 600 + (i * 137) % 900) for i in range(40)]
    return FleetSummary(
        root="fleet/",
        users=len(per_user),
        events=sum(n for _, n in per_user),
        facts=sum(n for _, n in per_user) // 2,
        calls=0,
        tokens_in=0,
        tokens_out=0,
        alerts=31,
        alerts_by_rule={
            "drug_allergy_cross_reactivity": 9,
            "document_expires_before_trip": 7,
            "food_drug_interaction": 6,
            "subscription_price_increase_unnoticed": 5,
            "duplicate_charge": 4,
        },
        events_per_user=per_user,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "charts")
    ap.add_argument("--days", type=int, default=730, help="days of the demo history")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        wb = Workbench(Path(tmp) / "maya.duckdb", user="maya", rules=list(LIBRARY))
        try:
            ingest_by_week(wb, demo_events(days=args.days))
            for name, what, make in gallery(wb):
                png: Any = vlc.vegalite_to_png(make().to_json(), scale=1)
                (args.out / f"{name}.png").write_bytes(png)
                print(f"{name}.png: {what}")
        finally:
            wb.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
