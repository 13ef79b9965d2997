"""bench/rules_incremental.py runs end to end on two tiny stores and reports every figure and
ratio (no timing asserts)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "rules_incremental.py"


def test_rules_incremental_bench_quick(tmp_path: Path) -> None:
    out = tmp_path / "ri.json"
    cmd = [sys.executable, str(SCRIPT), "--sizes", "1000", "3000", "--reps", "1", "--batch", "5"]
    cmd += ["--stores", str(tmp_path / "stores"), "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ingest ratio" in done.stdout and (tmp_path / "stores" / "s3000.duckdb").exists()
    results = json.loads(out.read_text())
    assert list(results["sizes"]) == ["1000", "3000"]
    ratios = results["ratio_3000_to_1000"]
    assert set(ratios) == {"Transaction", "Meeting", "Trip", "batch_5"}
    for size in results["sizes"].values():
        for k in ratios:
            assert 0 < size[k]["ingest_s"] < math.inf and size[k]["rules_s"] >= 0, k
    assert all(0 < r["ingest"] < math.inf and r["rules"] >= 0 for r in ratios.values())
