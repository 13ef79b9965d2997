"""bench/newcomer: the 24 scenarios written in a new user's own names are well-formed data that
the real ``uac`` ingests, and the runner replays them through ``uac`` and writes its results."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from datetime import date
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "bench" / "newcomer" / "scenarios.json"


@pytest.fixture
def newcomer(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """bench/newcomer.py as a module."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    return importlib.import_module("newcomer")


def scenarios() -> list[dict[str, Any]]:
    data = json.loads(SCENARIOS.read_text(encoding="utf-8"))
    assert data["licence"] == "Apache-2.0" and "uac" in data["note"]
    found: list[dict[str, Any]] = data["scenarios"]
    return found


def test_scenarios_are_well_formed() -> None:
    """Unique ids, 18 alert scenarios and 6 traps, each naming records its history holds,
    with an expected date inside that history."""
    found = scenarios()
    ids = [s["id"] for s in found]
    assert len(ids) == len(set(ids)) == 24
    assert sum(s["expect"]["alerts"] for s in found) == 18
    for s in found:
        assert set(s) == {"id", "story", "events", "expect_at", "expect"}, s["id"]
        assert set(s["expect"]) == {"alerts", "about", "critical"}, s["id"]
        keys = {e["key"] for e in s["events"] if e["kind"] == "fact"}
        assert set(s["expect"]["about"]) <= keys, s["id"]
        assert bool(s["expect"]["about"]) == s["expect"]["alerts"], s["id"]
        assert not s["expect"]["critical"] or s["expect"]["alerts"], s["id"]
        days = [e["ts"][:10] for e in s["events"]]
        assert days == sorted(days) and days[0] <= s["expect_at"] <= days[-1], s["id"]
        date.fromisoformat(s["expect_at"])


def test_every_history_ingests_through_the_cli(newcomer: ModuleType, tmp_path: Path) -> None:
    """Each history, as one Event JSONL file, goes into a new store through the `uac` command."""
    for s in scenarios():
        path = tmp_path / f"{s['id']}.jsonl"
        path.write_text("".join(json.dumps(e) + "\n" for e in s["events"]), encoding="utf-8")
        done = newcomer.uac(
            newcomer.default_uac(), tmp_path / f"{s['id']}.duckdb", "ingest", str(path)
        )
        assert done.returncode == 0, f"{s['id']}: {done.stderr}"
        assert f"{len(s['events'])} events appended" in done.stdout, s["id"]


def test_runner_writes_its_results(tmp_path: Path) -> None:
    """Two scenarios (one alert, one trap) replayed day by day: the JSON, the table beside it and
    the totals line."""
    out = tmp_path / "newcomer.json"
    cmd = [
        sys.executable,
        str(ROOT / "bench" / "newcomer.py"),
        "--only",
        "nc09",
        "t06",
        "--out",
        str(out),
    ]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text(encoding="utf-8"))
    assert [r["id"] for r in report["results"]] == ["nc09", "t06"]
    assert report["totals"]["alert_scenarios"] == 1 and report["totals"]["traps"] == 1
    for r in report["results"]:
        assert r["outcome"] in {
            "caught",
            "late",
            "partial",
            "missed",
            "refused",
            "quiet",
            "alert",
            "false critical",
        }
        assert r["refused"] is None
    t = report["totals"]
    line = f"caught {t['caught']} of 1, false critical on traps {t['false_critical']} of 1"
    assert report["summary"] == line and done.stdout.rstrip().endswith(line)
    assert out.with_suffix(".txt").read_text(encoding="utf-8") == done.stdout


def test_runner_refuses_an_unknown_id(tmp_path: Path) -> None:
    cmd = [
        sys.executable,
        str(ROOT / "bench" / "newcomer.py"),
        "--only",
        "nc99",
        "--out",
        str(tmp_path / "x.json"),
    ]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "no scenario nc99" in done.stderr.splitlines()[-1]
    assert not (tmp_path / "x.json").exists()
