"""`%uac log --last N` and `%uac history` on a real IPython kernel shell, over a real DuckDB
file: the newest events as text (the widget on its last page), and a record's history with a
header and the reason of each correction and retraction."""

from __future__ import annotations

import os
from typing import Any

import pytest

os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
pytest.importorskip("ipykernel", reason="pip install -e '.[dev]'")

from helpers.magics import run, run_out, usage_error, widget_outputs

from uac_kernel.workbench import Workbench


@pytest.fixture
def loaded(ip: Any) -> Any:
    run(ip, "%uac open")
    run(ip, "%uac ingest events.jsonl")
    return ip


def test_log_last(loaded: Any) -> None:
    ip = loaded
    wb = ip.user_ns["wb"]
    assert isinstance(wb, Workbench)
    every = [e.seq for e in wb.log()]
    assert [e.seq for e in wb.log(last=2)] == every[-2:]
    ((browser, text),) = widget_outputs(ip, "%uac log --last 2")
    header, *rows, note = text.splitlines()
    assert header.startswith("seq\tts") and [int(r.split("\t")[0]) for r in rows] == every[-2:]
    assert note == "the newest 2 events, oldest first"
    assert browser.page_size == 2 and browser.page == browser.pages - 1  # the newest page
    ((_, text),) = widget_outputs(ip, "%uac log --last 1 --kind fact")
    (row,) = text.splitlines()[1:-1]
    facts = [e.seq for e in wb.log(kinds=["fact"])]
    assert row.startswith(f"{facts[-1]}\t") and "\tfact\t" in row
    assert usage_error(ip, "%uac log --last 0") == "argument --last: must be positive, got 0"
    assert "not allowed with argument" in usage_error(ip, "%uac log --last 2 --limit 3")
    assert "--last N" in run_out(ip, "%uac help log")


def test_history_has_a_header_and_the_reasons(ip: Any, tmp_path: Any) -> None:
    import json

    trip = {"kind": "fact", "type": "Trip", "key": "tokyo"}
    lines = [
        {**trip, "ts": "2025-03-02", "op": "add", "fields": {"city": "Tokyo"}},
        {**trip, "ts": "2025-04-01", "op": "update", "fields": {"city": "Kyoto"},
         "reason": "typo\n\x1b[2J" + "long " * 100},
        {**trip, "ts": "2025-05-01", "op": "retract", "reason": "never happened"},
    ]  # fmt: skip
    (tmp_path / "trips.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    run(ip, "%uac open")
    run(ip, "%uac ingest trips.jsonl")
    from IPython.utils.capture import capture_output

    with capture_output() as cap:
        table = run(ip, "%uac history Trip tokyo")
    assert cap.stdout == "Trip 'tokyo' of user 'maya': 2 versions, retracted\n"
    assert [r[0] for r in table.rows] == ["asserted", "updated", "retracted"]
    assert table.rows[2][3] == "never happened" and table.rows[1][5] is not None
    text = table.text()
    assert "\x1b" not in text and "typo \\u001b[2Jlong" in text and "…" in text
    assert "\x1b" not in table._repr_html_()
