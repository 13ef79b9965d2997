"""bench/fleet_history.py runs end to end on tiny histories and reports each size's task laps,
the first round apart, and the growth from the smallest size to the largest (no timing
asserts)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from uac_kernel.fleet.snapshots import KEEP_FROM

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "fleet_history.py"


def test_fleet_history_bench_quick(tmp_path: Path) -> None:
    out = tmp_path / "fh.json"
    cmd = [
        sys.executable,
        str(SCRIPT),
        "--sizes",
        f"100,{KEEP_FROM}",
        "--new",
        "20",
        "--rounds",
        "1",
    ]
    done = subprocess.run(
        [*cmd, "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(out.read_text())
    assert set(results["sizes"]) == {"100", str(KEEP_FROM)}
    for size, entry in results["sizes"].items():
        laps = entry["this"]["laps_s"]
        assert {"checkout", "open", "ingest", "commit"} <= set(laps)
        # a long log's task keeps its store for the next; a short one's keeps none
        assert ("snapshot" in laps) == (int(size) >= KEEP_FROM)
        assert 0 < laps["task"] < math.inf and entry["this"]["wall_s"] > 0
        assert "checkout" in entry["this"]["first_round"]["laps_s"]
    assert 0 < results["growth"]["this"]["task"] < math.inf
    assert f"this: task at {KEEP_FROM:,} events / at 100" in done.stdout
