"""What the command and the short import load: the model layer and the chart stack only on demand.

`uac --help` and `uac eval` should start in about the time of Python, DuckDB and pydantic
(bench/startup.py measures it); these tests guard the lazy imports that make it so, by looking
at ``sys.modules`` in a fresh interpreter. They assert nothing about time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# Packages no plain command needs: the model client, the chart and notebook stacks, tokenisers.
HEAVY = ("openai", "altair", "vl_convert", "marimo", "anywidget", "tiktoken", "IPython", "tqdm")


def loaded_after(code: str, cwd: Path | None = None) -> set[str]:
    """The top-level packages in ``sys.modules`` after running ``code`` in a new interpreter."""
    probe = (
        f"{code}\nimport json, sys\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=cwd
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


@pytest.mark.parametrize("module", ["uac_kernel.cli.main", "uac", "uac_kernel"])
def test_importing_the_command_or_the_short_face_loads_no_heavy_package(module: str) -> None:
    assert loaded_after(f"import {module}") & set(HEAVY) == set()


def test_uac_help_loads_neither_the_engine_nor_the_model_layer() -> None:
    code = (
        "from uac_kernel.cli.main import main\n"
        "import contextlib, io\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    main(['--help'])"
    )
    loaded = loaded_after(code)
    assert loaded & {*HEAVY, "duckdb", "pydantic"} == set()


def test_uac_eval_loads_no_heavy_package(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text(
        '{"kind": "fact", "ts": "2025-03-02", "op": "add", "type": "Trip", "key": "t1", '
        '"fields": {"country": "Japan"}}\n'
    )
    db = str(tmp_path / "s.duckdb")
    subprocess.run(
        [sys.executable, "-m", "uac_kernel.cli.main", "--db", db, "ingest", str(events)],
        check=True,
        capture_output=True,
    )
    code = (
        "from uac_kernel.cli.main import main\n"
        f"assert main(['--db', {db!r}, 'eval', 'len(user.all(Trip))']) == 0"
    )
    loaded = loaded_after(code)
    assert "duckdb" in loaded  # the probe did run the query
    assert loaded & set(HEAVY) == set()


def test_the_model_client_still_imports_openai_when_it_calls() -> None:
    # a call to a port nothing listens on: it reaches for the network, and fails
    code = (
        "from pydantic import BaseModel\n"
        "from uac_kernel.core.errors import ModelError\n"
        "from uac_kernel.model.client import ModelClient, ModelSettings\n"
        "from uac_kernel.log.store import Store\n"
        "class A(BaseModel):\n    x: int\n"
        "settings = ModelSettings(model='m', base_url='http://127.0.0.1:9/v1', max_retries=0)\n"
        "try:\n"
        "    ModelClient(Store(':memory:'), settings).structured('q', [], A)\n"
        "except ModelError:\n"
        "    pass\n"
    )
    assert "openai" in loaded_after(code)


BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_startup_bench_runs_and_reports_every_ratio(tmp_path: Path) -> None:
    out, work = tmp_path / "startup.json", tmp_path / "work"
    args = ["--events", "300", "--reps", "1", "--out", str(out), "--workdir", str(work)]
    args += ["--modes", "bytecode cached"]
    subprocess.run([sys.executable, BENCH / "startup.py", *args], check=True, capture_output=True)
    results = json.loads(out.read_text())
    assert set(results["modes"]) == {"bytecode cached"}
    for figures in results["modes"].values():
        assert len(figures["ratios"]) == 4
        assert all(r > 0 for r in figures["ratios"].values())
        assert figures["uac eval"]["wall_median"] > 0
