"""The demo's conversation stage runs offline from the bundled call record, which is current."""

from __future__ import annotations

import re
from pathlib import Path

from uac_kernel.demo.chat import CALLS_FILE
from uac_kernel.demo.run import record_demo_calls, run_demo


def test_bundled_call_record_is_what_the_stand_in_produces(tmp_path: Path) -> None:
    fresh = tmp_path / CALLS_FILE
    record_demo_calls(fresh)
    shipped = Path(__file__).parents[2] / "uac_kernel" / "data" / CALLS_FILE
    assert fresh.read_text() == shipped.read_text(), (
        "re-make it: python -m uac_kernel.demo.run --record"
    )


def test_demo_extracts_and_answers_offline(tmp_path: Path) -> None:
    lines: list[str] = []
    wb = run_demo(tmp_path / "demo.duckdb", out=lines.append)
    text = "\n".join(lines)
    assert "10 utterances in 1 batch: 1 applied (9 fact operations), 0 left pending" in text
    flat = " ".join(text.split())
    assert "raised [critical] Passport 'passport-uk'" in flat and "Kyoto" in flat
    assert 'answer: ["rosuvastatin", "salbutamol inhaler"]' in text
    assert "no answer" not in text
    # What the conversation did to the alerts: raises and clears, in full, each clear with why.
    assert (
        "cleared [warning] FoodHabit 'habit-grapefruit-juice' (grapefruit juice) includes "
        "grapefruit" in flat
    )
    assert (
        "why: a record it was about changed: Medication 'med-atorvastatin' active True → False, "
        "end unset → 2026-01-15" in flat
    )
    assert (
        "cleared [warning] Purchase 'purchase-2025-12-noise-cancelling-headphones'" in flat
        and "why: the log's clock moved on to 2026-01-20" in flat
    )
    # A message shown shortened is cut between words, never inside one.
    shown = [x.split("] ", 1)[1] for x in lines if re.match(r"  \d{4}-\d\d-\d\d \w+ +\[", x)]
    logged = [ev.payload["message"] for ev in wb.alert_history()][: len(shown)]
    assert len(shown) == len(logged) > 20
    for short, message in zip(shown, logged, strict=True):
        assert short == message or (
            short.endswith("…")
            and message.startswith(short[:-1])
            and not message[len(short) - 1].isalnum()
        ), short
    # The passport rule leaves a trip to the passport's own country alone (UK passport, Birmingham).
    assert not [ev for ev in wb.alert_history() if "Birmingham" in ev.payload["message"]]
    # every model answer came from the record: the ledger holds only the bundled calls
    assert {
        c[0] for c in wb.store.con.execute("SELECT DISTINCT model FROM model_calls").fetchall()
    } == {"uac-demo-reference"}
    assert wb.verify().ok
