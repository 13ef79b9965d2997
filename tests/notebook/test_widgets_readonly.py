"""Can a widget whose controls are off (``readonly``: a static export's reason, a read-only
workbench) still write to the log? The front end's messages, as a comm delivers them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.events import fact

from uac_kernel.notebook import widgets_act as wact
from uac_kernel.workbench import Workbench

WHATIF = [fact("2025-03-05T09:00:00", "add", "Medication", "amox", name="Amoxicillin")]


def from_front_end(widget: Any, data: dict[str, Any]) -> None:
    """A comm message from the browser, handled as ipywidgets handles it."""
    widget._handle_msg({"content": {"data": data}, "buffers": []})


def test_the_front_end_cannot_clear_readonly_and_apply_a_whatif(tmp_path: Path) -> None:
    """``readonly`` is a synced trait (``tag(sync=True)``): the browser may set it, and the
    Python side trusts it. An 'update' that sets it to '' followed by {"action": "apply"}
    appended the what-if's events although the widget was made read-only (here with the static
    export's reason, as ``uac.marimo.whatif`` makes it)."""
    wb = Workbench(tmp_path / "w.duckdb", user="maya", rules=[])
    wb.ingest([fact("2025-03-01T09:00:00", "add", "Note", "n", text="x")])
    seq = wb.state.seq
    view = wact.WhatIfWidget(wb, wb.whatif(WHATIF, expressions=[]), readonly="a static export")
    from_front_end(view, {"method": "update", "state": {"readonly": ""}, "buffer_paths": []})
    from_front_end(view, {"method": "custom", "content": {"action": "apply"}})
    assert wb.state.seq == seq, f"appended: {view.done}"
    assert not view.applied
    wb.close()
