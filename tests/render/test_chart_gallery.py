"""``scripts/chart_gallery.py`` draws every chart kind, each within a notebook's width."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from uac_kernel.render.chart_fit import NOTEBOOK_WIDTH

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "chart_gallery.py"
KINDS = {"events", "records", "alerts", "whatif", "result_bars", "result_line"}
KINDS |= {"result_histogram", "result_grouped", "fleet", "aggregate"}


def test_the_gallery_draws_every_chart_kind_within_a_notebooks_width(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("chart_gallery", SCRIPT)
    assert spec is not None and spec.loader is not None
    gallery = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gallery)
    assert gallery.main(["--out", str(tmp_path), "--days", "200"]) == 0
    assert {p.stem for p in tmp_path.glob("*.png")} == KINDS
    for png in tmp_path.glob("*.png"):
        data = png.read_bytes()
        assert data.startswith(b"\x89PNG")
        assert int.from_bytes(data[16:20], "big") <= NOTEBOOK_WIDTH, png.name  # IHDR width
