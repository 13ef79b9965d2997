"""bench/first_chart.py runs end to end in real kernels on a small store, with and without the
background import, and writes every cell's times and the ratios (no timing asserts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_first_chart_bench_quick(tmp_path: Path) -> None:
    out = tmp_path / "fc.json"
    cmd = [sys.executable, str(ROOT / "bench" / "first_chart.py"), "--reps", "1"]
    cmd += ["--events", "200", "--pause", "0.2", "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["pause_s"] == 0.2 and got["reps"] == 1
    assert set(got["scenarios"]) == {
        "warm cache, no background import",
        "warm cache, background import",
        "cold cache, background import",
    }
    for scenario in got["scenarios"].values():
        cells = scenario["cells"]
        assert {"load: %load_ext uac", "pause", "first chart: %uac chart events"} <= set(cells)
        assert all(c["wall_median"] >= 0 for c in cells.values())
        assert scenario["ratios"]["first / later chart (wall)"] > 0
    assert "warm cache, background import" in done.stdout and "×" in done.stdout
