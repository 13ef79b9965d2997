"""bench/kept_connection.py runs end to end on a tiny store and reports each step's median,
ratio and connection count, and the handover wait (no timing asserts)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "kept_connection.py"


def test_kept_connection_bench_quick(tmp_path: Path) -> None:
    out = tmp_path / "kc.json"
    cmd = [sys.executable, str(SCRIPT), "--events", "50", "--reps", "2", "--pause", "0.3"]
    cmd += ["--handovers", "1", "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())
    steps = ("ingest", "eval_after_write", "log")
    for mode in ("kept_ms", "notebook_ms"):
        assert all(0 < results[mode][s] < math.inf for s in steps)
        assert results[mode]["connects"] == 0  # the connection is kept, paced or not
    assert all(0 < results["notebook_over_kept"][s] < math.inf for s in steps)
    handover = results["handover"]
    assert handover["open_beside_holder_s"] > 0 and handover["open_alone_s"] > 0
