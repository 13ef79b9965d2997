"""bench/scale.py runs end to end on a tiny history and reports every figure (no timing asserts)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "scale.py"

EXPRESSIONS = ("count_if", "sum_by_category", "top5_by_amount", "sum_since_date", "constant")
FIGURES = {
    "ingest": (
        "fact_events",
        "rows_written",
        "ingest_s",
        "ingest_events_per_s",
        "ingest_rows_per_s",
        "bulk_appender_s",
        "bulk_appender_rows_per_s",
        "bulk_read_json_s",
        "bulk_read_json_rows_per_s",
        "ingest_vs_bulk_appender",
        "ingest_vs_bulk_read_json",
        "ingest_stage_maxrss_mb",
    ),
    "fold": ("open_s", "log_rows", "rows_per_s", "fact_events_per_s", "current_records"),
    "checkpoint": (
        "full_s",
        "incremental_s",
        "incremental_vs_full",
        "first_ingest_after_open_s",
        "full_segments",
        "incremental_segments",
    ),
    "memory": ("maxrss_after_fold_mb", "rss_after_fold_mb"),
}


def positive(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def test_scale_bench_smoke(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    cmd = [
        sys.executable,
        str(SCRIPT),
        "--sizes",
        "2000",
        "--out",
        str(out),
        "--workdir",
        str(tmp_path / "work"),
        "--eval-records",
        "2000",
        "--reps",
        "2",
        "--rule-reps",
        "2",
        "--quiet",
        "--no-chart",
    ]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ratio ingest / appender" in done.stdout

    results = json.loads(out.read_text())
    for key in ("date", "machine", "targets", "sizes", "total_wall_s"):
        assert key in results
    for key in ("platform", "cpu_count", "python", "duckdb"):
        assert results["machine"][key]
    run = results["sizes"]["2000"]
    assert run["size"] == 2000
    assert run["ingest"]["fact_events"] == 2000
    assert run["ingest"]["rows_written"] >= 2000
    assert run["fold"]["log_rows"] >= run["ingest"]["rows_written"]
    for section, names in FIGURES.items():
        for name in names:
            assert positive(run[section][name]), f"{section}.{name} = {run[section].get(name)!r}"
    assert run["checkpoint"]["new_events"] == 100
    assert run["eval"]["records"] == 2000
    for name in EXPRESSIONS:
        e = run["eval"]["expressions"][name]
        for fig in ("sandbox_median_s", "plain_median_s", "sandbox_vs_plain"):
            assert positive(e[fig]), f"eval.{name}.{fig} = {e[fig]!r}"
    for t in ("Transaction", "Medication"):
        r = run["rules"][t]
        assert positive(r["ingest_one_median_s"]) and positive(r["rules_median_s"])
        assert r["rules_run"], f"no rule reads {t}"
        assert all(positive(v) for v in r["per_rule_s"].values())
