"""The notebook faces of what-ifs on a real IPython kernel shell over a real store file:
`%%uac whatif` (JSONL and YAML bodies), `%uac whatif VAR`, `%%uac cell --dry-run`, their
mistakes as one-line UsageErrors, and `uac.marimo.whatif` in a marimo app run by ``app.run()``.
None of them appends to the log.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from helpers.events import retract, update

os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
pytest.importorskip("ipykernel", reason="pip install -e '.[dev]'")

from helpers.magics import (
    change,
    edit_cell,
    logged,
    run,
    run_out,
    usage_error,
    widget_outputs,
)
from helpers.maya import AMOXICILLIN, AMOXICILLIN_YAML, MEDICATIONS, RULE, STORE
from IPython.utils.capture import capture_output

# -- the magics -------------------------------------------------------------------------------


def shown(ip: Any, source: str) -> str:
    """What a cell showed as text: printed, and the text/plain of what it displayed."""
    with capture_output() as cap:
        run(ip, source)
    return cap.stdout + "".join(o.data.get("text/plain", "") for o in cap.outputs)


def test_whatif_cell_jsonl(maya_ip: Any) -> None:
    before = logged(maya_ip)
    out = shown(maya_ip, f"%%uac whatif --expr {MEDICATIONS!r}\n{json.dumps(AMOXICILLIN)}\n")
    assert "amoxicillin" in out and "1 raised" in out and RULE in out
    assert logged(maya_ip) == before
    assert [a.rule for a in maya_ip.user_ns["wb"].alerts()] == []


def test_whatif_cell_yaml(maya_ip: Any) -> None:
    before = logged(maya_ip)
    out = shown(maya_ip, "%%uac whatif\n" + AMOXICILLIN_YAML)
    assert "1 raised" in out and RULE in out
    assert logged(maya_ip) == before


def test_whatif_of_a_variable(maya_ip: Any) -> None:
    maya_ip.user_ns["prescription"] = [AMOXICILLIN]
    before = logged(maya_ip)
    out = shown(maya_ip, "%uac whatif prescription")
    assert "1 raised" in out and RULE in out
    assert logged(maya_ip) == before
    # the session's expressions are re-run by default
    run(maya_ip, f"%uac eval {MEDICATIONS}")
    out = shown(maya_ip, "%uac whatif prescription")
    assert MEDICATIONS in out


def test_past_whatif_in_a_cell(maya_ip: Any) -> None:
    # the real log: the allergy, then amoxicillin for a week of November (the alert stood);
    # what if the allergy had been retracted in March?
    stopped = update("2024-11-25", "Medication", "med-amoxicillin", active=False)
    maya_ip.user_ns["wb"].ingest([AMOXICILLIN, stopped])
    before = logged(maya_ip)
    retraction = retract("2024-03-01", "Allergy", "allergy-penicillin")
    out = shown(maya_ip, f"%%uac whatif --as-of '2024-03-01T12:00'\n{json.dumps(retraction)}\n")
    assert "as of 2024-03-01 12:00" in out and "retracted Allergy" in out
    timeline = [line.split() for line in out.splitlines() if RULE in line and "→" in line]
    assert [(t[0], t[3], t[6]) for t in timeline] == [("real", "2024-11-18", "2024-11-25")]
    assert logged(maya_ip) == before


def test_whatif_html_is_escaped(maya_ip: Any) -> None:
    from uac_kernel.render.whatif_face import report_html

    hostile = {**AMOXICILLIN, "fields": {**AMOXICILLIN["fields"], "name": "<b>amoxicillin</b>"}}
    maya_ip.user_ns["hostile"] = [hostile]
    with capture_output() as cap:
        run(maya_ip, "%uac whatif hostile")
    assert "<b>amoxicillin</b>" in "".join(o.data["text/plain"] for o in cap.outputs)
    assert all("<b>amoxicillin" not in o.data.get("text/html", "") for o in cap.outputs)
    # the HTML shown where the widget is not
    html = report_html(maya_ip.user_ns["wb"].whatif([hostile]), ["<i>head</i>"])
    assert "&lt;b&gt;amoxicillin" in html and "<b>" not in html and "<i>" not in html


def test_whatif_mistakes_are_one_line_usage_errors(maya_ip: Any) -> None:
    before = logged(maya_ip)
    maya_ip.user_ns["one"] = AMOXICILLIN
    maya_ip.user_ns["text"] = "not events"
    maya_ip.user_ns["mixed"] = [AMOXICILLIN, 3]
    cases = {
        "%uac whatif": "usage: %%uac whatif",
        "%uac whatif nothing_here": "no variable 'nothing_here'",
        "%uac whatif one": "is one event; put it in a list",
        "%uac whatif text": "text is a str, not a list of event dicts",
        "%uac whatif mixed": "mixed[1] is a int, not an event dict",
        "%uac whatif os.system('x')": "name a variable",
        "%%uac whatif\n  \n": "write the events in the cell",
        "%%uac whatif prescription\n{}": "takes its events from the cell",
        "%%uac whatif\n- kind: fact\n  op: [": "%%uac whatif",
        '%%uac whatif\n{"kind": "fact", "ts": "2024-11-18T09:00:00", "op": "add", '
        '"type": "Medication", "key": "x", "fields": {"dose_mg": "lots"}}': "dose_mg",
        f"%%uac whatif --as-of March\n{json.dumps(AMOXICILLIN)}": "March",
    }
    for source, message in cases.items():
        assert message in usage_error(maya_ip, source), source
    assert logged(maya_ip) == before


def test_whatif_widget_heading_after_apply(maya_ip: Any) -> None:
    pytest.importorskip("anywidget", reason="pip install anywidget")
    maya_ip.user_ns["prescription"] = [AMOXICILLIN]
    ((widget, text),) = widget_outputs(maya_ip, "%uac whatif prescription")
    wb = maya_ip.user_ns["wb"]
    before = logged(maya_ip)
    assert widget.heading == widget.whatif.summary() and widget.heading.endswith(
        "; nothing was appended"
    )
    assert "nothing was appended" in text  # the text shown where widgets are not: true then
    assert widget.readonly == "" and not widget.applied

    with capture_output() as cap:
        widget._on_msg(widget, {"action": "apply"}, [])  # the Apply button's message
    assert widget.error == "" and widget.applied
    new = wb.log()[before:]
    facts = [e.seq for e in new if e.kind != "alert"]
    # the header no longer says nothing was appended: it says where the event now is
    assert widget.heading.startswith("applied: 1 event appended to the log at seq")
    assert "nothing" not in widget.heading
    where = f"seq {facts[0]}" if len(facts) == 1 else f"seqs {facts[0]}–{facts[-1]}"
    assert where in widget.heading, (widget.heading, facts)
    # the output is sent again, its text (what a saved notebook shows) headed the same way
    ((update,),) = [[o for o in cap.outputs if o.update]]
    assert update.data["text/plain"] == widget.text()
    first, second, *rest = widget.text().splitlines()
    assert first == widget.heading and "nothing was appended" not in widget.text()
    assert second.startswith("predicted before it was applied: what-if: 1 event; 1 added")
    assert rest == text.splitlines()[1:]  # the records and alerts it predicted, as before
    assert update.data["application/vnd.jupyter.widget-view+json"]["model_id"] == widget.model_id
    assert widget.done.startswith("applied: 1 event appended") and "1 raised" in widget.done
    assert [a.rule for a in wb.alerts()] == [RULE]

    # a second press appends nothing and leaves the header as it is
    heading, grown = widget.heading, logged(maya_ip)
    widget._on_msg(widget, {"action": "apply"}, [])
    assert "applied already" in widget.error
    assert logged(maya_ip) == grown and widget.heading == heading
    # the same what-if shown again and applied: its event is in the log already
    ((again, _),) = widget_outputs(maya_ip, "%uac whatif prescription")
    again.apply()
    assert again.error == "" and logged(maya_ip) == grown
    assert (
        again.heading == "applied: nothing new appended; 1 event of the what-if already in the log"
    )


def test_help_lists_whatif(maya_ip: Any) -> None:
    out = run_out(maya_ip, "%uac help")
    assert "%uac whatif" in out and "--as-of" in out
    assert "nothing is appended" in run_out(maya_ip, "%uac whatif --help")


def test_cell_dry_run_appends_nothing(maya_ip: Any) -> None:
    run_out(maya_ip, "%uac checkpoint")
    text = edit_cell(maya_ip, "%uac edit Medication")
    text = change(text, "name='ibuprofen'", "name='amoxicillin'")
    header, body = text.split("\n", 1)
    before, versions = logged(maya_ip), len(maya_ip.user_ns["wb"].checkpoints.all())
    out = shown(maya_ip, f"{header} --dry-run\n{body}")
    assert "(dry run)" in out and "nothing appended" in out
    assert "1 raised" in out and RULE in out
    assert logged(maya_ip) == before and len(maya_ip.user_ns["wb"].checkpoints.all()) == versions
    assert maya_ip.user_ns["wb"].alerts() == []
    # the same cell without --dry-run applies it, and raises the alert it showed
    out = run_out(maya_ip, f"{header}\n{body}")
    assert "correction event" in out and RULE in out
    assert logged(maya_ip) > before


# -- marimo -----------------------------------------------------------------------------------

_MARIMO_APP = """
import marimo

app = marimo.App()


@app.cell
def _():
    import json

    import uac
    import uac.marimo as um

    store, amoxicillin, amoxicillin_yaml = json.loads(EVENTS)
    wb = uac.open(":memory:", user="maya")
    wb.ingest(store)
    before = len(wb.log())
    return amoxicillin, amoxicillin_yaml, before, um, wb


@app.cell
def _(amoxicillin, um, wb):
    view = um.whatif(wb, [amoxicillin], expressions=["len(user.all(Medication))"])
    view
    return (view,)


@app.cell
def _(amoxicillin_yaml, um, wb):
    text_view = um.whatif(wb, amoxicillin_yaml)
    bad_view = um.whatif(wb, "- kind: fact\\n  op: add\\n")
    empty_view = um.whatif(wb, "  ")
    return bad_view, empty_view, text_view


@app.cell
def _(before, wb):
    after = len(wb.log())
    return (after,)
"""


def test_marimo_whatif_in_an_app(tmp_path: Path) -> None:
    mo = pytest.importorskip("marimo", reason="pip install marimo")
    import runpy

    events = json.dumps([STORE, AMOXICILLIN, AMOXICILLIN_YAML])
    path = tmp_path / "whatif_app.py"
    path.write_text(_MARIMO_APP.replace("EVENTS", repr(events)), encoding="utf-8")
    app = runpy.run_path(str(path))["app"]
    outputs, defs = app.run()
    assert defs["after"] == defs["before"], "a what-if appended to the log"
    view = defs["view"]
    assert outputs[1] is view

    def text(view: Any) -> str:
        if isinstance(view, mo.ui.anywidget):  # the what-if widget, with its Apply button
            return json.dumps(view.widget.report, default=str)
        assert isinstance(view, mo.Html), type(view)  # the report, where there is no widget
        return str(view.text)

    assert RULE in text(view) and "amoxicillin" in text(view)
    assert RULE in text(defs["text_view"])
    assert "danger" in defs["bad_view"].text and "what-if" in defs["bad_view"].text
    assert "Write the events" in defs["empty_view"].text


def test_marimo_whatif_in_a_static_export_turns_apply_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The notebook's argument `marimo_export` passes (`mo.cli_args()`; marimo reads a script's
    # from sys.argv): Apply is off and says why, and applying from Python appends nothing.
    pytest.importorskip("marimo", reason="pip install marimo")
    import runpy

    events = json.dumps([STORE, AMOXICILLIN, AMOXICILLIN_YAML])
    path = tmp_path / "whatif_app.py"
    path.write_text(_MARIMO_APP.replace("EVENTS", repr(events)), encoding="utf-8")
    app = runpy.run_path(str(path))["app"]
    monkeypatch.setattr("sys.argv", ["whatif_app.py", "--uac-static-export=tour.py"])
    _, defs = app.run()
    widget = defs["view"].widget
    assert (
        widget.readonly == "this is a static export: run `marimo edit tour.py` to apply a what-if"
    )
    widget.apply()
    assert widget.error == widget.readonly and not widget.applied
    assert len(defs["wb"].log()) == defs["before"]
    monkeypatch.setattr("sys.argv", ["whatif_app.py"])
    _, defs = app.run()
    assert defs["view"].widget.readonly == ""
