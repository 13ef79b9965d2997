"""bench/snapshot_open.py runs end to end on a small store with a snapshot and writes the
opens' wall times, peak RSS and ratios (no timing asserts)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from uac_kernel.workbench import Workbench

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from scale import USER, History  # noqa: E402


def test_snapshot_open_bench_quick(tmp_path: Path) -> None:
    store = tmp_path / "store.duckdb"
    history = History(300)
    with Workbench(store, user=USER) as wb:
        wb.ingest([history.next() for _ in range(300)])
        wb.checkpoint()  # the snapshot the bench opens from
    out = tmp_path / "so.json"
    cmd = [sys.executable, str(ROOT / "bench" / "snapshot_open.py"), str(store)]
    cmd += ["--new", "20", "--reps", "1", "--workdir", str(tmp_path), "--out", str(out)]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(out.read_text())
    assert got["fact_events_in_snapshot"] == 300 and got["new_after_snapshot"] == 20
    assert set(got["wall_s"]) == {"snapshot + new", "full fold", "floor (1 event)"}
    assert all(len(v) == 1 and v[0] > 0 for v in got["wall_s"].values())
    assert got["ratio_min_wall"] > 0 and "ratio (min wall)" in done.stdout
