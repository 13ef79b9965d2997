"""bench/scale.py runs end to end on a tiny history and reports every figure (no timing asserts)."""

from __future__ import annotations

import importlib
import json
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from uac_kernel.workbench import Workbench

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "scale.py"
PROMPT_SYSTEMS = ("ask", "top_10", "top_50", "full_context")
TYPES = ("Transaction", "Meal", "Workout", "SleepLog", "Meeting", "Purchase", "Trip", "Medication")

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
        "write_vs_bulk_appender",
        "write_floor_s",
        "write_floor_events_per_s",
        "ingest_vs_write_floor",
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


I14_FIGURES = (
    "full_fold_s",
    "open_after_snapshot_s",
    "open_after_snapshot_vs_full_fold",
    "log_s",
    "log_vs_full_fold",
    "checkpoints_s",
    "checkpoints_vs_full_fold",
    "sql_first_query_s",
    "sql_floor_s",
    "sql_first_query_vs_floor",
    "ingest_s",
    "write_floor_s",
    "ingest_vs_write_floor",
    "open_peak_rss_mb",
    "full_fold_peak_rss_mb",
)


def check_i14(run: dict[str, Any], reps: int) -> None:
    """Issue 14's figures are there, each beside its floor, from whole processes."""
    i14 = run["i14"]
    for name in I14_FIGURES:
        assert positive(i14[name]), f"i14.{name} = {i14.get(name)!r}"
    assert i14["new_events_after_snapshot"] == 1000
    assert isinstance(i14["snapshot_rows"], int) and i14["snapshot_rows"] >= 0
    assert i14["ingest_vs_write_floor"] == run["ingest"]["ingest_vs_write_floor"]
    ratio = i14["open_after_snapshot_s"] / i14["full_fold_s"]
    assert math.isclose(i14["open_after_snapshot_vs_full_fold"], ratio)
    assert all(len(runs) == reps for runs in i14["runs"].values())
    assert len(i14["sql_floor_runs_s"]) == reps
    # The floor's tables hold the current records: the store's types, each with rows.
    assert set(i14["sql_floor_rows"]) == set(TYPES) and all(i14["sql_floor_rows"].values())
    assert i14["sql_query"] == 'SELECT count(*) FROM "Transaction"'  # the largest type


def check_prompt_tokens(run: dict[str, Any], size: int) -> dict[str, int]:
    """The prompt figures of one size are there, whole numbers, in the expected order."""
    tokens, prompts = run["prompt_tokens"], run["prompts"]
    assert sorted(tokens) == sorted(PROMPT_SYSTEMS)
    assert all(isinstance(tokens[s], int) and tokens[s] > 0 for s in PROMPT_SYSTEMS)
    assert prompts["lines"] == size  # one line per fact event
    assert prompts["encoding"].startswith("cl100k_base")
    assert len(prompts["per_question"]) == len(prompts["questions"]) == 3
    # A schema summary, not records: a few hundred tokens plus the system message.
    assert 500 < tokens["ask"] < 3000
    assert tokens["top_10"] < tokens["top_50"] < tokens["full_context"]
    assert tokens["full_context"] > 20 * size  # every line, ~40 tokens each
    return tokens


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
        "--cli-reps",
        "1",
        "--quiet",
        "--no-chart",
    ]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ratio ingest / appender" in done.stdout
    assert "prompt tokens per question" in done.stdout
    assert "ratio ingest / write floor" in done.stdout and "`uac sql` first query" in done.stdout

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
    stages = run["ingest"]["ingest_stage_us_per_event"]
    assert list(stages) == ["parse", "validate", "write", "fold", "rules"]
    assert all(positive(v) for v in stages.values())
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
    check_prompt_tokens(run, 2000)
    check_i14(run, reps=1)


def test_scale_i14_only(tmp_path: Path) -> None:
    """--only i14: the ingest and issue 14's figures against their floors, nothing else."""
    out = tmp_path / "i14.json"
    cmd = [sys.executable, str(SCRIPT), "--only", "i14", "--sizes", "2000", "--cli-reps", "2"]
    cmd += ["--out", str(out), "--workdir", str(tmp_path / "work"), "--quiet"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    for label in ("/ full fold (≤ 0.1×)", "/ floor (≤ 3×)", "peak RSS of the open"):
        assert label in done.stdout
    results = json.loads(out.read_text())
    assert results["only"] == "i14" and results["i14_targets"]["ingest_vs_write_floor"] == 0.5
    run = results["sizes"]["2000"]
    assert set(run) >= {"ingest", "i14"} and "fold" not in run and "prompts" not in run
    check_i14(run, reps=2)
    assert not out.with_suffix(".svg").exists()


def test_scale_prompts_only(tmp_path: Path) -> None:
    """--only prompts: ask stays flat while the full context grows with the history."""
    out = tmp_path / "prompts.json"
    cmd = [sys.executable, str(SCRIPT), "--only", "prompts", "--sizes", "2000", "8000"]
    cmd += ["--out", str(out), "--quiet"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "full context / ask" in done.stdout
    assert out.with_suffix(".svg").read_text().startswith("<svg")
    results = json.loads(out.read_text())
    assert results["only"] == "prompts"
    small = check_prompt_tokens(results["sizes"]["2000"], 2000)
    large = check_prompt_tokens(results["sizes"]["8000"], 8000)
    assert abs(large["ask"] - small["ask"]) < 0.05 * small["ask"]
    assert large["top_10"] < 2 * small["top_10"] and large["top_50"] < 2 * small["top_50"]
    assert 3.5 < large["full_context"] / small["full_context"] < 4.5


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, ModuleType]:
    """bench/scale.py and bench/prompt_scale.py as modules."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    return importlib.import_module("scale"), importlib.import_module("prompt_scale")


def test_prompt_counts_are_exact(bench: tuple[ModuleType, ModuleType]) -> None:
    """Counting the full context piece by piece gives the count of the whole prompt."""
    from uac_kernel.bench.aggregate import READER_SYSTEM, TokenCounter, reader_parts

    scale, prompt_scale = bench
    history = scale.History(1500)
    events = [history.next() for _ in range(1500)]
    lines = [prompt_scale.fact_line(e) for e in events]
    assert {text.split()[0] for _, text in lines} == {"add", "update", "retract"}
    with Workbench(":memory:", rules=()) as wb:
        wb.ingest(events)
        asks = prompt_scale.ask_messages(wb)
    got = prompt_scale.measure(asks, lines)
    encoding = TokenCounter().encoding
    for q, row in got["per_question"].items():
        whole = READER_SYSTEM, "".join(reader_parts(q, lines))
        assert row["full_context"] == sum(len(encoding.encode_ordinary(t)) for t in whole)
    text = "".join(reader_parts(got["questions"][0], lines))
    assert prompt_scale.count_pieces(encoding, text, piece_chars=500) == len(
        encoding.encode_ordinary(text)
    )


def test_ask_prompt_does_not_depend_on_rules(bench: tuple[ModuleType, ModuleType]) -> None:
    """--only prompts folds without rules; the schema summary ask sends is the same."""
    scale, prompt_scale = bench
    history = scale.History(1500)
    events = [history.next() for _ in range(1500)]
    with Workbench(":memory:") as with_rules, Workbench(":memory:", rules=()) as without:
        with_rules.ingest(events)
        without.ingest(events)
        assert prompt_scale.ask_messages(with_rules) == prompt_scale.ask_messages(without)


def test_full_fold_copy_drops_the_snapshots(
    bench: tuple[ModuleType, ModuleType], tmp_path: Path
) -> None:
    """The full-fold copy keeps every event and no snapshot row; the original keeps its own.
    A store with no snapshots table is copied as it is."""
    import duckdb

    scale, _ = bench

    def make(path: Path, snapshots: bool) -> None:
        con = duckdb.connect(str(path))
        con.execute("CREATE TABLE events AS SELECT range AS seq FROM range(5)")
        if snapshots:
            con.execute("CREATE TABLE snapshots AS SELECT 'me' AS user_id FROM range(2)")
        con.close()

    def count(path: Path, table: str) -> int:
        con = duckdb.connect(str(path), read_only=True)
        n = int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
        con.close()
        return n

    make(tmp_path / "snap.duckdb", snapshots=True)
    assert scale.without_snapshots(tmp_path / "snap.duckdb", tmp_path / "full.duckdb") == 2
    assert (
        count(tmp_path / "full.duckdb", "snapshots"),
        count(tmp_path / "full.duckdb", "events"),
    ) == (0, 5)
    assert count(tmp_path / "snap.duckdb", "snapshots") == 2
    make(tmp_path / "old.duckdb", snapshots=False)
    assert scale.without_snapshots(tmp_path / "old.duckdb", tmp_path / "old-full.duckdb") == 0
    assert count(tmp_path / "old-full.duckdb", "events") == 5
