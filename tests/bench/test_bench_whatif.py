"""bench/whatif.py runs end to end on tiny stores and reports every figure, with the store's
bytes unchanged by its what-ifs (no timing asserts)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "whatif.py"
ROW = (
    "ingest_s",
    "ingest_best_s",
    "ingest_cpu_s",
    "whatif_s",
    "whatif_best_s",
    "whatif_cpu_s",
    "whatif_warm_s",
    "open_s",
    "ratio",
    "ratio_best",
    "ratio_cpu",
    "ratio_warm",
)
EXTRAS = (
    "with_expressions_s",
    "with_expressions_best_s",
    "without_expressions_s",
    "past_s",
    "past_best_s",
)


def positive(x: object) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def test_whatif_bench_quick(tmp_path: Path) -> None:
    out = tmp_path / "whatif.json"
    cmd = [sys.executable, str(SCRIPT), "--quick", "--out", str(out), "--quiet"]
    cmd += ["--workdir", str(tmp_path / "work")]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "target what-if/ingest <= 2x" in done.stdout and "flatness" in done.stdout

    results = json.loads(out.read_text())
    for key in ("engine_commit", "platform", "cpu_count", "load_average_at_start"):
        assert results["machine"][key]
    assert len(results["load_average_at_end"]) == 3
    assert results["store_unchanged"] is True
    assert sorted(results["sizes"], key=int) == ["2000", "4000"]
    for size, run in results["sizes"].items():
        assert run["log_rows"]["fact"] == int(size) + 1  # the history and the allergy
        assert set(run["modes"]) == {"snapshot", "fold"}
        for mode, m in run["modes"].items():
            assert m["store_unchanged"] is True and m["hash_checks"] > 0
            assert sorted(m["by_n"], key=int) == ["1", "10", "100"]
            for n, row in m["by_n"].items():
                where = f"{size} {mode} N={n}"
                for name in ROW:
                    assert positive(row[name]), f"{where}: {name} = {row.get(name)!r}"
                assert row["same_alerts_as_ingest"] is True, where
                # The drug meets the allergy: the what-if raises the critical alert.
                assert "1 raised" in row["report"] and "nothing was appended" in row["report"]
                steps = row["whatif_seconds"]
                assert list(steps) == ["parse", "validate", "fold", "rules"], where
                assert all(positive(v) for v in steps.values()), where
    for mode in ("snapshot", "fold"):
        for n in ("1", "10", "100"):
            flat = results["flatness"][mode][n]
            assert positive(flat["whatif"]) and positive(flat["ingest"])

    extras = results["sizes"]["2000"]["extras"]  # on the smallest store only
    assert "extras" not in results["sizes"]["4000"]
    for name in EXTRAS:
        assert positive(extras[name]), f"extras.{name} = {extras.get(name)!r}"
    assert extras["answers"] == 5 and extras["store_unchanged"] is True
    assert positive(extras["with_expressions_seconds"]["answers"])
    assert {"what-if run", "real run"} <= set(extras["past_seconds"])
    assert extras["past_timeline_spans"] >= 1
