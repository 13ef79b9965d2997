"""bench/fleet.py's users and its stand-in model: the generated histories carry updates,
retractions and facts the shipped rules alert on; the extraction answers apply through the real
client and server (no timing asserts)."""

from __future__ import annotations

import importlib
from collections import Counter
from pathlib import Path
from types import ModuleType
from urllib.parse import unquote

import pytest

from uac_kernel.model.client import ModelSettings
from uac_kernel.model.testing import ChatServer
from uac_kernel.workbench import Workbench

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fleet(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """bench/fleet.py as a module."""
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    return importlib.import_module("fleet")


def test_histories_have_updates_retractions_and_alerts(fleet: ModuleType, tmp_path: Path) -> None:
    ops: Counter[str] = Counter()
    rules: Counter[str] = Counter()
    for i in range(8):
        events = fleet.history(i, 300)
        assert len(events) == 300
        assert events == fleet.history(i, 300)  # seeded: the same user every run
        ops.update(e["op"] for e in events)
        with Workbench(tmp_path / f"{i}.duckdb", user=fleet.user_id(i)) as wb:
            wb.ingest(events)
            rules.update(a.rule for a in wb.alerts())
    assert ops["add"] > ops["update"] > ops["retract"] > 0
    assert rules["drug_allergy_cross_reactivity"] > 0 and rules["passport_validity"] > 0


def test_user_files_name_their_user(fleet: ModuleType, tmp_path: Path) -> None:
    made = fleet.write_users(tmp_path, [("a.b/c~d", fleet.history(0, 20))])
    (path,) = tmp_path.iterdir()
    assert unquote(path.stem) == "a.b/c~d" and "/" not in path.stem and "." not in path.stem
    assert made["users"] == 1 and sum(v for k, v in made.items() if k != "users") == 20


def test_stand_in_model_extracts_each_turn(fleet: ModuleType, tmp_path: Path) -> None:
    said, answers = fleet.conversation(3, 12)
    assert len(said) == len(answers) == 12
    with ChatServer(fleet.Extractor(answers, latency=0.0)) as server:
        settings = ModelSettings(model="stand-in", base_url=server.base_url)
        with Workbench(tmp_path / "u.duckdb", user=fleet.user_id(3), model=settings) as wb:
            wb.ingest(said)
            report = wb.extract(batch_size=10)
            assert (report.batches, report.applied, report.pending) == (2, 2, 0)
            assert sum(wb.state.counts().values()) == 12
        assert len(server.requests) == 2


def test_bench_job_on_a_hard_linked_copy(fleet: ModuleType, tmp_path: Path) -> None:
    """The bench's own path on a tiny fleet, local engine: ingest, a hard-linked copy of one
    user, the bench job on it (a whole ``uac fleet run`` process), its per-step timings; the
    source fleet is left as it was."""
    built = fleet.build_fleet(tmp_path, 2, 40)
    assert built["ingest"]["status"] == {"ok": 2} and built["ingest"]["events_appended"] >= 80
    source = tmp_path / "fleet"
    before = sorted(p.relative_to(source) for p in source.rglob("*") if "runs" not in p.parts)
    copy = fleet.copy_fleet(source, tmp_path / "copy", [fleet.user_id(1)])
    r = fleet.bench_job(copy, "local", 1)
    assert r["users"] == 1 and r["status"] == {"ok": 1}
    assert set(fleet.JOB_STEPS) <= set(r["timings"]["steps"]) and r["timings"]["job"]["mean"] > 0
    assert (
        sorted(p.relative_to(source) for p in source.rglob("*") if "runs" not in p.parts) == before
    )
    assert fleet.tree_bytes(copy, skip=("runs",))["checkpoints"] > 0
