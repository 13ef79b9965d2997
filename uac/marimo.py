"""``import uac.marimo as um``: the workbench's widgets and charts for marimo (no magics).

The same functions as :mod:`uac_kernel.notebook.marimo`; see there.
"""

from uac_kernel.notebook.marimo import (
    CHART_KINDS,
    alert_inspector,
    chart,
    constrain,
    constraints_table,
    diff_view,
    evaluate,
    fleet,
    log_browser,
    state_explorer,
    static_note,
    whatif,
)

__all__ = [
    "CHART_KINDS",
    "alert_inspector",
    "chart",
    "constrain",
    "constraints_table",
    "diff_view",
    "evaluate",
    "fleet",
    "log_browser",
    "state_explorer",
    "static_note",
    "whatif",
]
