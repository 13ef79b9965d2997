"""bench/snapshot_pairs.py runs end to end on a tiny store and reports every figure, for the
store opened from its snapshot and the same store folded plainly (no timing asserts)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "snapshot_pairs.py"
# bench/snapshot_pairs.py's operations, each timed on the snapshot and on the plain fold
OPERATIONS = {"open+eval", "checkpoint", "ingest 1,000 updates", "rules", "sql"} | {
    "what-if",
    "forget",
}


def test_snapshot_pairs_bench_quick(tmp_path: Path) -> None:
    out = tmp_path / "pairs.json"
    cmd = [sys.executable, str(SCRIPT), "--quick", "--quiet", "--out", str(out)]
    cmd += ["--workdir", str(tmp_path / "work")]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "target <= 1.3" in done.stdout

    results = json.loads(out.read_text())
    assert results["machine"]["engine_commit"] and len(results["load_average_at_end"]) == 3
    assert list(results["sizes"]) == ["2000"]
    figures = results["sizes"]["2000"]
    assert set(figures) == OPERATIONS
    for name, f in figures.items():
        # finite and positive: JSON holds no NaN or infinity that passes ``0 < x < inf``
        assert all(0 < f[k] < math.inf for k in ("snapshot_s", "plain_s", "ratio")), name
        assert len(f["snapshot"]) == len(f["plain"]) == results["reps"] == 1, name
    assert 0 < results["worst_ratio"] < math.inf
