"""bench/sql_build.py runs end to end on a tiny store and reports each case's first query, its
floor and their ratio (no timing asserts)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "sql_build.py"


def test_sql_build_bench_quick(tmp_path: Path) -> None:
    out = tmp_path / "sb.json"
    store = tmp_path / "store.duckdb"
    cmd = [sys.executable, str(SCRIPT), "--size", "2000", "--new", "50", "--reps", "1"]
    cmd += ["--store", str(store), "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())
    assert results["size"] == 2000 and results["new_after_snapshot"] == 50
    for case in ("snapshot", "snapshot + new", "log"):
        figures = results[case]
        assert 0 < figures["first_query_s"] < math.inf and 0 < figures["floor_s"] < math.inf
        assert 0 < figures["ratio"] < math.inf
    assert 0 < results["history_first_query_s"] < math.inf
    assert results["every_type"]["history_rows"] > 0 and results["every_type"]["python_build_s"] > 0
    assert store.exists()  # made once, kept for the next run; the runs work on copies
