"""The teaching notebooks run top to bottom, offline, and are stored without outputs.

Every ``notebooks/*.ipynb`` is executed by nbclient in a fresh ``python3`` kernel (this
interpreter's ipykernel) inside a temporary copy of ``notebooks/``, so the stores and files the
notebooks write never land in the repository; a cell that raises fails the test, with the cell
and its error in the message. ``notebooks/marimo_tour.py`` runs headless through marimo's
``app.run()`` in a subprocess. The notebooks in the repository must carry no outputs and no
execution counts, no run timings and no saved widget state (the recipe is in
``notebooks/README.md``).
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.checkpoints import described_state, import_in_clean_interpreter, record_text

from uac_kernel.core.errors import MissingExtra

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
IPYNBS = sorted(NOTEBOOKS.glob("*.ipynb"))
MARIMO_TOUR = NOTEBOOKS / "marimo_tour.py"

CELL_TIMEOUT = 300  # seconds for one cell (the slowest, a first chart, takes ~10 s unloaded)


def _isolated_env(tmp: Path) -> dict[str, str]:
    """The kernel's environment: this interpreter's, without the user's IPython profile or uac
    settings (the notebooks name their own store and user)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UAC_")}
    env["IPYTHONDIR"] = str(tmp / ".ipython")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def _copy_notebooks(tmp: Path) -> Path:
    work = tmp / "notebooks"
    shutil.copytree(NOTEBOOKS, work, ignore=shutil.ignore_patterns("*.duckdb*", "*.jsonl"))
    return work


def _shown_by_git_status(work: Path, before: set[str]) -> list[str]:
    """What a notebook wrote next to itself in ``work`` (its copy of ``notebooks/``) that
    `git status` would show had it run in the checkout, as a reader runs it by hand."""
    written = [
        f"notebooks/{p.name}/" if p.is_dir() else f"notebooks/{p.name}"
        for p in sorted(work.iterdir())
        if p.name not in before
    ]
    if not written:
        return []
    done = subprocess.run(
        ["git", "-C", str(ROOT), "check-ignore", "--no-index", *written],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode == 128:  # not a git checkout: there is no status to dirty
        return []
    return sorted(set(written) - set(done.stdout.splitlines()))


def test_there_are_notebooks() -> None:
    names = {p.name for p in IPYNBS}
    assert {
        "tour.ipynb",
        "memory_as_code.ipynb",
        "rules_and_alerts.ipynb",
        "aggregate_vs_retrieval.ipynb",
    } <= names
    assert MARIMO_TOUR.is_file()


CLEAR = (
    "jupyter nbconvert --clear-output --inplace --ClearMetadataPreprocessor.enabled=True "
    "--ClearMetadataPreprocessor.preserve_nb_metadata_mask=kernelspec "
    "--ClearMetadataPreprocessor.preserve_nb_metadata_mask=language_info"
)


@pytest.mark.parametrize("path", IPYNBS, ids=lambda p: p.stem)
def test_notebook_is_stored_without_outputs(path: Path) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    dirty = [
        f"cell {i} ({cell.get('id', '?')})"
        for i, cell in enumerate(nb["cells"])
        if cell["cell_type"] == "code"
        and (
            cell.get("outputs") or cell.get("execution_count") or cell["metadata"].get("execution")
        )
    ]
    assert not dirty, (
        f"{path.name}: {', '.join(dirty)} keep outputs, execution counts or run timings; "
        f"clear them with `{CLEAR} {path.relative_to(ROOT)}`"
    )
    assert "widgets" not in nb["metadata"], (
        f"{path.name} stores widget state; clear it with `{CLEAR} {path.relative_to(ROOT)}`"
    )
    assert nb["metadata"].get("kernelspec", {}).get("name") == "python3"


@pytest.mark.parametrize("path", IPYNBS, ids=lambda p: p.stem)
def test_notebook_runs(path: Path, tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat", reason="pip install -e '.[dev]'")
    nbclient = pytest.importorskip("nbclient", reason="pip install -e '.[dev]'")
    pytest.importorskip("ipykernel", reason="pip install -e '.[dev]'")
    from nbclient.exceptions import CellExecutionError

    work = _copy_notebooks(tmp_path)
    nb = nbformat.read(work / path.name, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(_checkpoint_cell(tmp_path)))
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT,
        kernel_name="python3",
        resources={"metadata": {"path": str(work)}},
    )
    before = sorted(p.name for p in NOTEBOOKS.iterdir())
    copied = {p.name for p in work.iterdir()}
    started = time.monotonic()
    try:
        client.execute(env=_isolated_env(tmp_path))
    except CellExecutionError as exc:
        pytest.fail(f"{path.name}: a cell failed\n{exc}")
    print(f"{path.name}: {time.monotonic() - started:.1f} s")

    errors = [
        f"cell {i}: {out.get('ename')}: {out.get('evalue')}"
        for i, cell in enumerate(nb.cells)
        for out in cell.get("outputs", [])
        if out.get("output_type") == "error"
    ]
    assert not errors, f"{path.name}:\n" + "\n".join(errors)
    not_run = [
        i for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.execution_count is None
    ]
    assert not not_run, f"{path.name}: cells {not_run} never ran"
    if path.name == "rules_and_alerts.ipynb":
        # the words around `%uac chart alerts` are true of the chart it draws: one critical
        # bar, the drug–allergy alert, from 18 to 25 November 2024
        rows = _chart_rows(nb, "alert-chart")
        assert [(r["rule"], r["severity"], r["start"][:10], r["end"][:10]) for r in rows] == [
            ("drug_allergy_cross_reactivity", "critical", "2024-11-18", "2024-11-25")
        ], rows
    after = sorted(p.name for p in NOTEBOOKS.iterdir())
    assert after == before, f"{path.name} wrote into notebooks/ of the repository: {after}"
    dirty = _shown_by_git_status(work, copied)
    assert not dirty, f"{path.name} writes files that .gitignore does not cover: {dirty}"
    # the user model the notebook built, as checkpoint code, imports and is the kernel's state
    truth = json.loads((tmp_path / "nb_truth.json").read_text())
    assert import_in_clean_interpreter(tmp_path / "nb_model.py", tmp_path) == truth


def _chart_rows(nb: Any, cell_id: str) -> list[dict[str, Any]]:
    """The rows of the Altair chart (a JupyterChart widget) the cell ``cell_id`` displayed, from
    the widget state nbclient stored with the run."""
    (cell,) = [c for c in nb.cells if c.get("id") == cell_id]
    views = [
        o["data"]["application/vnd.jupyter.widget-view+json"]["model_id"]
        for o in cell.outputs
        if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
    ]
    assert len(views) == 1, f"cell {cell_id} displayed {len(views)} charts"
    state = nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    datasets = state[views[0]]["state"]["spec"]["datasets"]
    return [row for rows in datasets.values() for row in rows]


def _checkpoint_cell(tmp: Path) -> str:
    """A last cell that writes the kernel's user model (`wb`, which every notebook leaves open)
    as checkpoint code, and an account of its state to compare the imported module with."""
    return "\n".join(
        [
            "from __future__ import annotations",
            "import json",
            "from uac_kernel.checkpoints.codegen import render_module",
            "from uac_kernel.language.spec import constraint_json",
            inspect.getsource(record_text),
            inspect.getsource(described_state),
            f"open({str(tmp / 'nb_model.py')!r}, 'w', encoding='utf-8').write(",
            "    render_module(wb.state, wb.runner.rules.values()))",
            f"open({str(tmp / 'nb_truth.json')!r}, 'w').write(",
            "    json.dumps(described_state(wb.state, sorted(",
            "        n for n in wb.runner.rules if wb.constraint_of(n) is None))))",
        ]
    )


_RUN_MARIMO = """
import importlib.util, json, sys
sys.dont_write_bytecode = True
spec = importlib.util.spec_from_file_location("marimo_tour", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
outputs, defs = module.app.run()
print(json.dumps({
    "outputs": [type(o).__name__ for o in outputs],
    "answer": defs["answer"],
    "records": sum(defs["wb"].state.counts().values()),
    # run live, the expression box and the what-if's Apply work: nothing says otherwise
    "box_disabled": "data-disabled='true'" in defs["expression"].text,
    "apply_off": defs["whatif_view"].widget.readonly,
}))
"""


def test_marimo_tour_runs_headless(tmp_path: Path) -> None:
    pytest.importorskip("marimo", reason="pip install marimo")
    work = _copy_notebooks(tmp_path)
    before = sorted(p.name for p in work.iterdir())
    # then, as for the Jupyter notebooks, write the tour's user model as checkpoint code
    cell = _checkpoint_cell(tmp_path).replace("wb.", "defs['wb'].")
    script = "from __future__ import annotations" + _RUN_MARIMO + cell.split("\n", 1)[1]
    done = subprocess.run(
        [sys.executable, "-c", script, str(work / MARIMO_TOUR.name)],
        cwd=work,
        env=_isolated_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=CELL_TIMEOUT,
    )
    assert done.returncode == 0, f"marimo_tour.py failed:\n{done.stderr[-4000:]}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # The uac.marimo helpers drew widgets and charts; the eval cell computed its answer.
    assert "anywidget" in result["outputs"], result
    assert "altair_chart" in result["outputs"], result
    assert isinstance(result["answer"], int), result
    assert result["records"] > 0, result
    assert result["box_disabled"] is False and result["apply_off"] == "", result
    after = sorted(p.name for p in work.iterdir())
    assert after == before, f"marimo_tour.py wrote files into its folder: {after}"
    truth = json.loads((tmp_path / "nb_truth.json").read_text())
    assert import_in_clean_interpreter(tmp_path / "nb_model.py", tmp_path) == truth


# -- uac.marimo: the helpers the marimo tour uses ------------------------------------------------

EVENTS = [
    {"kind": "utterance", "ts": "2025-02-01T09:00:00", "speaker": "user", "text": "Off to Tokyo!"},
    {
        "kind": "fact",
        "ts": "2025-02-01T09:00:00",
        "op": "add",
        "type": "Trip",
        "key": "tokyo",
        "fields": {"country": "Japan", "start": "2025-02-20", "international": True},
    },
    {
        "kind": "fact",
        "ts": "2025-02-03T08:00:00",
        "op": "add",
        "type": "Allergy",
        "key": "penicillin",
        "fields": {"substance": "penicillin", "severity": "severe"},
    },
    {
        "kind": "fact",
        "ts": "2025-11-12T16:30:00",
        "op": "add",
        "type": "Medication",
        "key": "amoxicillin",
        "fields": {"name": "amoxicillin", "start": "2025-11-12"},
    },
]


@pytest.fixture
def wb() -> Any:
    import uac

    workbench = uac.open(":memory:", user="maya")
    workbench.ingest(EVENTS)
    workbench.checkpoint()
    yield workbench
    workbench.close()


def test_marimo_helpers_wrap_widgets_and_charts(wb: Any) -> None:
    mo = pytest.importorskip("marimo", reason="pip install marimo")
    import uac.marimo as um
    from uac_kernel.notebook.widgets import AlertInspector, DiffView, LogBrowser, StateExplorer

    version = wb.checkpoint().version
    for element, widget in (
        (um.log_browser(wb, kind="fact"), LogBrowser),
        (um.alert_inspector(wb), AlertInspector),
        (um.state_explorer(wb), StateExplorer),
        (um.diff_view(wb, 1, version), DiffView),
    ):
        assert isinstance(element, mo.ui.anywidget)
        assert isinstance(element.widget, widget)
    assert um.alert_inspector(wb).widget.alerts, "the drug-allergy alert reaches the widget"
    for kind, expr in (
        ("events", None),
        ("records", None),
        ("alerts", None),
        ("result", "Counter(t.country for t in user.all(Trip))"),
    ):
        assert isinstance(um.chart(wb, kind, expr), mo.ui.altair_chart), kind
    assert isinstance(um.chart(wb, "events", freq="month"), mo.ui.altair_chart)


def test_marimo_chart_arguments_are_checked(wb: Any) -> None:
    import uac.marimo as um
    from uac_kernel.core.errors import QueryError

    with pytest.raises(QueryError, match="not one of events, records, alerts, result"):
        um.chart(wb, "pie")  # type: ignore[arg-type]
    with pytest.raises(QueryError, match="needs an expression"):
        um.chart(wb, "result")
    with pytest.raises(QueryError, match="takes no expression"):
        um.chart(wb, "events", "len(user.all(Trip))")
    with pytest.raises(QueryError, match="freq applies"):
        um.chart(wb, "alerts", freq="month")


def test_marimo_helpers_say_how_to_install_marimo(wb: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import uac.marimo as um

    monkeypatch.setitem(sys.modules, "marimo", None)  # `import marimo` now fails
    command = re.escape(
        "needs the 'marimo' extra (marimo is not installed): pip install 'uac-kernel[marimo]'"
    )
    with pytest.raises(MissingExtra, match=command):
        um.alert_inspector(wb)
    with pytest.raises(MissingExtra, match=command):
        um.chart(wb, "events")


def test_marimo_evaluate_shows_a_mistake_instead_of_nothing(wb: Any) -> None:
    mo = pytest.importorskip("marimo", reason="pip install marimo")
    import html

    import uac.marimo as um

    value, view = um.evaluate(wb, "len(user.all(Trip))")
    assert value == 1 and "<strong>1</strong>" in view.text
    value, view = um.evaluate(wb, "len(user.all(Trp))")  # a typo in the tour's input box
    assert value is None and isinstance(view, mo.Html)
    shown = html.unescape(html.unescape(view.text))  # marimo escapes the callout's HTML again
    assert "danger" in shown and "len(user.all(Trp))" in shown
    assert "name 'Trp' is not defined in the query namespace" in shown
    value, view = um.evaluate(wb, "   ")
    assert value is None and "Type an expression" in view.text
    value, view = um.evaluate(wb, "[t.countyr for t in user.all(Trip)]")  # a misspelt field
    assert value is None
    shown = html.unescape(html.unescape(view.text))
    assert "danger" in shown and "Trip has no field 'countyr'. Did you mean 'country'?" in shown
