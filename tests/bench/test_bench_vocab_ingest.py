"""bench/vocab_ingest.py: the same facts in our names and a newcomer's, side by side."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_newcomer_with_proposals_gets_the_alerts_of_our_names(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "vocab_ingest.py"), "--events", "240",
         "--batch", "60", "--out", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads((tmp_path / "vocab_ingest.json").read_text())
    alerts = result["standing_alerts"]
    # bound by the matcher, the newcomer's names raise what ours do; unbound, nothing reads them
    assert alerts["ours"] == alerts["theirs, proposed"] > 0 == alerts["theirs, not proposed"]
    assert result["bindings_proposed"] > 0 and result["batches"] == 4
    assert 0 < result["batches_that_changed_the_schema"] < result["batches"]
    assert out.stdout.startswith("vocab ingest: 240 events in 4 batches")
