"""The matcher's precision/recall bench (``uac_kernel.bench.vocab_match``, ``bench/vocab_match.py``):
bindings counted right or wrong against the renamings' ground truth, on tiny inputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from uac_kernel.bench.alerts import SETS, Fixture, load_fixtures
from uac_kernel.bench.vocab_match import STEM, run, score_scenario

ROOT = Path(__file__).resolve().parents[2]
READ = frozenset({"trip", "passport", "trip.start", "trip.end", "document.expiry"})


def travel() -> Fixture:
    """A passport and a trip abroad (the public scenario travel_01)."""
    return next(fx for fx in load_fixtures(SETS["public"]) if fx.id == "travel_01")


def row(kind: str, t: str, new_t: str, f: str | None = None, new_f: str | None = None) -> Any:
    return {"kind": kind, "type": t, "new_type": new_t, "field": f, "new_field": new_f}


def test_right_and_wrong_bindings_are_counted_apart() -> None:
    rows = [
        row("type", "Trip", "Journey"),
        row("type", "Passport", "TravelDocument"),
        row("field", "Trip", "Journey", "start", "leaves_on"),
        row("field", "Trip", "Journey", "end", "returns_on"),
        row("field", "Passport", "TravelDocument", "expires", "good_until"),
        # a field no rule reads, renamed to a name that reads as an expiry too: two fields fit
        # one concept, so both are held, and the wrong one is counted apart from precision
        row("field", "Passport", "TravelDocument", "received", "valid_until"),
    ]
    got = score_scenario(travel(), rows, READ)
    assert got.roles.expected == 2 and got.roles.recalled == 2
    assert got.roles.used_wrong == 0
    # start, end and expires carry what rules read; received does not
    assert got.concepts.expected == 3 and got.concepts.recalled >= 2
    assert got.concepts.used_wrong == 0 and got.concepts.held_wrong == 1
    assert got.per_target["trip.start"][:2] == [1, 1]
    assert got.per_target["document.expiry"] == [1, 0, 0, 1]  # expected, held right
    assert got.concepts.precision == 1.0 and got.concepts.recall == 2 / 3


def test_unrenamed_names_read_by_default_count_as_recalled() -> None:
    got = score_scenario(travel(), [], READ)
    assert got.roles.expected == got.concepts.expected == 0  # nothing renamed, nothing expected


def test_the_bench_writes_its_results_on_a_tiny_set(tmp_path: Path) -> None:
    tiny = tmp_path / "tiny.json"
    tiny.write_text(
        json.dumps(
            {
                "about": "one scenario",
                "credit": "tests",
                "license": "Apache-2.0",
                "scenarios": [travel().model_dump(mode="json")],
            }
        )
    )
    result = run(seeds=(0, 1), sets=("tiny",), paths={"tiny": tiny})
    assert result.scenarios == 1 and set(result.by_seed) == {0, 1}
    total = result.total()
    assert 0 < total.concepts.recalled <= total.concepts.expected
    js, txt = result.write(tmp_path / "out")
    data = json.loads(js.read_text())
    assert data["seeds"] == [0, 1] and data["total"]["concepts"]["expected"] == (
        total.concepts.expected
    )
    assert txt.read_text().rstrip().splitlines()[-1] == result.summary_line()


def test_the_script_runs_one_seed_of_the_held_out_set(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            *(sys.executable, str(ROOT / "bench" / "vocab_match.py")),
            *("--seeds", "0", "--set", "holdout", "--out", str(tmp_path)),
        ],
        capture_output=True,
        text=True,
        timeout=300,  # a few seconds; this only catches a hang
        check=True,
    )
    assert done.stdout.rstrip().splitlines()[-1].startswith("vocab match: concepts precision")
    data = json.loads((tmp_path / f"{STEM}.json").read_text())
    assert data["scenarios_per_seed"] == len(load_fixtures(SETS["holdout"]))
