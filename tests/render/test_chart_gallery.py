"""``scripts/chart_gallery.py`` draws every chart kind, each within a notebook's width."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from uac_kernel import Workbench
from uac_kernel.demo.life import demo_events
from uac_kernel.render.chart_fit import NOTEBOOK_WIDTH
from uac_kernel.render.charts import alerts_timeline
from uac_kernel.rules.library import LIBRARY

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "chart_gallery.py"
KINDS = {"events", "records", "alerts", "whatif", "result_bars", "result_line"}
KINDS |= {"result_histogram", "result_grouped", "fleet", "aggregate"}


def load_gallery() -> ModuleType:
    spec = importlib.util.spec_from_file_location("chart_gallery", SCRIPT)
    assert spec is not None and spec.loader is not None
    gallery = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gallery)
    return gallery


def test_the_gallery_draws_every_chart_kind_within_a_notebooks_width(tmp_path: Path) -> None:
    gallery = load_gallery()
    assert gallery.main(["--out", str(tmp_path), "--days", "200"]) == 0
    assert {p.stem for p in tmp_path.glob("*.png")} == KINDS
    for png in tmp_path.glob("*.png"):
        data = png.read_bytes()
        assert data.startswith(b"\x89PNG")
        assert int.from_bytes(data[16:20], "big") <= NOTEBOOK_WIDTH, png.name  # IHDR width


def test_the_gallery_history_raises_its_alerts_over_time(tmp_path: Path) -> None:
    """Ingested a week at a time, the demo's alerts are raised when they were, not all at the
    one instant a single batch of two years gets (the alerts chart drew two ticks at '08:27')."""
    gallery = load_gallery()
    wb = Workbench(tmp_path / "maya.duckdb", user="maya", rules=list(LIBRARY))
    try:
        assert gallery.ingest_by_week(wb, demo_events(days=200)) >= 28
        (rows,) = alerts_timeline(wb).to_dict()["datasets"].values()
        raised = {r["start"] for r in rows}
        assert len(raised) >= 3 and len({r["start"][:7] for r in rows}) >= 2  # months apart
    finally:
        wb.close()
