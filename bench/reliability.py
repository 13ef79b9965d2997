"""The attack corpora, counted: how many hostile cases of each family were tried, held, failed.

Each family is a set of test modules whose cases are attacks — hostile model answers and
endpoints, hostile input files, sandbox escapes, SQL that tries to write or run away, forged
certificates, tampered store files, hostile strings in output. This runs them with pytest (the
real parts: DuckDB files, the openai client against a local server, subprocesses), reads the
JUnit report (a family may name test functions, ``file::test``, where a module also holds
tests that are not attacks), and writes ``bench/results/reliability.json`` plus a table. A case "held" when
uac did the safe thing the test asserts; "failed" otherwise. Skipped cases — a known weakness
kept as a strict ``xfail`` that documents it, or a case needing an optional extra — are counted
apart, never as held.

    python bench/reliability.py [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_OUT = HERE / "results" / "reliability.json"

FAMILIES: dict[str, list[str]] = {
    "sandbox escapes": [
        "tests/sandbox/test_sandbox.py::test_attack_is_refused",
        "tests/sandbox/test_sandbox.py::test_attack_is_stopped",
        "tests/sandbox/test_sandbox.py::test_attack_runs_and_reaches_nothing",
        "tests/sandbox/test_sandbox_worker.py",
    ],
    "forged ask certificates": ["tests/model/test_ask_attacks.py"],
    "SQL that writes, collides or runs away": ["tests/sql/test_sqlview_attacks.py"],
    "hostile model answers and endpoints": [
        "tests/model/test_model_attacks.py",
        "tests/model/test_review.py",
        "tests/model/test_review_seams.py",
        "tests/model/test_model_answer_attacks.py",
    ],
    "hostile input files and objects": ["tests/ingest/test_input_attacks.py"],
    "checkpoint code attacks": ["tests/checkpoints/test_checkpoint_attacks.py"],
    "tampered, truncated, damaged or shared stores; forgetting": [
        "tests/log/test_integrity.py",
        "tests/checkpoints/test_forget.py",
        "tests/checkpoints/test_forget_seams.py",
        "tests/fleet/test_fleet_forget.py",
        "tests/log/test_store_attacks.py",
        "tests/log/test_store_limit_attacks.py",
        "tests/model/test_review_forget_attacks.py",
    ],
    "hostile strings in output": ["tests/cli/test_output_attacks.py"],
    "files written over a store or another kind of file": [
        "tests/core/test_outputs.py",
        "tests/core/test_outputs_seams.py",
    ],
    "hostile settings in the environment": [
        "tests/core/test_settings.py",
        "tests/core/test_settings_seams.py",
    ],
    "snapshots that must read in bulk and answer as the fold": [
        "tests/checkpoints/test_snapshot_seams.py",
        "tests/checkpoints/test_snapshot.py::test_snapshot_reads_are_bounded_by_types_not_keys",
    ],
}


def run(files: list[str], report: Path) -> None:
    pytest = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    subprocess.run(
        [*pytest, f"--junitxml={report}", *files],
        cwd=ROOT,
        check=False,
    )


def counts(report: Path) -> dict[str, dict[str, int]]:
    """Per test module: tried, held, failed, skipped."""
    out: dict[str, dict[str, int]] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        module = "tests/" + case.get("classname", "").split(".")[-1] + ".py"
        row = out.setdefault(module, {"tried": 0, "held": 0, "failed": 0, "skipped": 0})
        if case.find("skipped") is not None:
            row["skipped"] += 1
            continue
        row["tried"] += 1
        if case.find("failure") is not None or case.find("error") is not None:
            row["failed"] += 1
        else:
            row["held"] += 1
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    files = [f for group in FAMILIES.values() for f in group if (ROOT / f.split("::")[0]).exists()]
    with tempfile.TemporaryDirectory() as work:
        report = Path(work) / "junit.xml"
        run(files, report)
        per_module = counts(report)
    families = {}
    for family, modules in FAMILIES.items():
        row = {"tried": 0, "held": 0, "failed": 0, "skipped": 0, "modules": modules}
        for m in {m.split("::")[0] for m in modules}:
            for k, v in per_module.get(m, {}).items():
                row[k] += v
        families[family] = row
    result = {
        "date": datetime.now().isoformat(timespec="seconds"),
        "families": families,
        "total": {
            k: sum(int(f[k]) for f in families.values())
            for k in ("tried", "held", "failed", "skipped")
        },
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    width = max(map(len, families))
    print(f"{'family':<{width}}  tried   held  failed")
    for family, row in families.items():
        print(f"{family:<{width}}  {row['tried']:>5}  {row['held']:>5}  {row['failed']:>6}")
    total = result["total"]
    print(f"{'total':<{width}}  {total['tried']:>5}  {total['held']:>5}  {total['failed']:>6}")
    print(f"results: {args.out}")
    return result


if __name__ == "__main__":
    main()
