"""The demo's conversation stage runs offline from the bundled call record, which is current."""

from __future__ import annotations

from pathlib import Path

from uac_kernel.demo_chat import CALLS_FILE
from uac_kernel.demo_run import record_demo_calls, run_demo


def test_bundled_call_record_is_what_the_stand_in_produces(tmp_path: Path) -> None:
    fresh = tmp_path / CALLS_FILE
    record_demo_calls(fresh)
    shipped = Path(__file__).parent.parent / "uac_kernel" / "data" / CALLS_FILE
    assert fresh.read_text() == shipped.read_text(), (
        "re-make it: python -m uac_kernel.demo_run --record"
    )


def test_demo_extracts_and_answers_offline(tmp_path: Path) -> None:
    lines: list[str] = []
    wb = run_demo(tmp_path / "demo.duckdb", out=lines.append)
    text = "\n".join(lines)
    assert "10 utterances in 1 batches: 1 applied (9 fact operations), 0 left pending" in text
    assert "raised [critical] Passport 'passport-uk'" in text and "Kyoto" in text
    assert 'answer: ["rosuvastatin", "salbutamol inhaler"]' in text
    assert "no answer" not in text
    # every model answer came from the record: the ledger holds only the bundled calls
    assert {
        c[0] for c in wb.store.con.execute("SELECT DISTINCT model FROM model_calls").fetchall()
    } == {"uac-demo-reference"}
    assert wb.verify().ok
