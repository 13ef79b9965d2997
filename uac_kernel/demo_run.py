"""``uac demo``: build a fresh store from the demo user and show a newcomer what uac does."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from uac_kernel.demo import DEMO_USER, write_demo_jsonl
from uac_kernel.errors import StoreError
from uac_kernel.store import Store
from uac_kernel.workbench import IngestReport, Workbench

__all__ = ["DEMO_QUESTIONS", "DEMO_USER_ID", "run_demo"]

DEMO_USER_ID = "maya"

# Aggregate questions a bag of retrieved facts cannot answer, and the one line that does.
DEMO_QUESTIONS: list[tuple[str, str]] = [
    (
        "How many international trips did Maya take in 2025?",
        "len([t for t in user.all(Trip) if t.international and t.start.year == 2025])",
    ),
    (
        "Which countries did she visit most?",
        "Counter(t.country for t in user.all(Trip) if t.international).most_common(3)",
    ),
    (
        "What did groceries cost in 2024 (GBP)?",
        "round(sum(t.amount for t in user.all(Transaction) "
        "if t.category == 'groceries' and t.date.year == 2024), 2)",
    ),
    (
        "How many hours did she run, per year?",
        "{y: round(sum(w.minutes for w in user.all(Workout) if w.kind == 'run' and w.date.year == y) / 60, 1) "
        "for y in (2024, 2025)}",
    ),
    (
        "Where does she live now, and where did she live before?",
        "{'now': [r.city for r in user.all(Residence)], "
        "'before': sorted({r.city for r in user.history(Residence) if r.retracted})}",
    ),
]


def _fresh_path(path: Path) -> None:
    """Remove an earlier demo store at ``path``; refuse to touch any other store."""
    if not path.exists():
        return
    store = Store(path, read_only=True)
    try:
        users = store.users()
    finally:
        store.close()
    if users not in ([], [DEMO_USER_ID]):
        raise StoreError(
            f"{path} holds other users' data, not the demo; pass another --db for the demo"
        )
    path.unlink()
    Path(f"{path}.wal").unlink(missing_ok=True)


def run_demo(path: Path, out: Callable[[str], None] = print) -> Workbench:
    """Build the demo store at ``path`` (replacing an earlier demo) and report on it."""
    _fresh_path(path)
    events_file = path.with_suffix(".jsonl")
    lines = write_demo_jsonl(events_file)
    wb = Workbench(path, user=DEMO_USER_ID)
    # Replay the history day by day, as an assistant would have lived it, so the rules run after
    # every day's changes and the alert history shows when each alert was raised and cleared.
    days: dict[str, list[dict[str, Any]]] = {}
    for text in events_file.read_text(encoding="utf-8").splitlines():
        event = json.loads(text)
        days.setdefault(event["ts"][:10], []).append(event)
    report = IngestReport()
    for day in tqdm(days.values(), desc="replaying the demo history", unit="day", disable=None):
        r = wb.ingest(day, origin=str(events_file))
        report.appended += r.appended
        report.schema_changes += r.schema_changes
    checkpoint = wb.checkpoint()
    code_file = path.with_suffix(".py")
    code_file.write_text(checkpoint.code, encoding="utf-8")

    out(f"uac demo — the synthetic user {DEMO_USER!r}, two years of life in {lines} events")
    out(f"store: {path}   (events: {events_file})")
    out(f"ingest: {report.summary()}")
    out("")
    out("Typed records now (current / all versions):")
    for name, count in sorted(wb.state.counts().items(), key=lambda kv: -kv[1]):
        out(f"  {name:<14} {count:>4} / {len(wb.state.history(name)):>4}")
    out("")
    out("Aggregate questions, answered by one line of code over the typed state:")
    for question, expr in DEMO_QUESTIONS:
        answer = wb.eval(expr)
        out(f"  Q: {question}")
        out(f"     code:   {expr}")
        out(f"     answer: {json.dumps(answer, ensure_ascii=False, default=str)}")
    out("")
    out("Alert history (rules ran after every day's changes):")
    for ev in wb.alert_history():
        p = ev.payload
        message = p["message"] if len(p["message"]) <= 100 else p["message"][:97] + "..."
        out(f"  {ev.ts:%Y-%m-%d} {p['state']:<7} [{p['severity']}] {message}")
    out("")
    alerts = wb.alerts()
    out(f"Alerts standing at the end of the history ({len(alerts)}):")
    for alert in alerts:
        evidence = ", ".join(f"{e.type} {e.key}" for e in alert.evidence)
        out(f"  [{alert.severity}] {alert.message}")
        out(f"      rule {alert.rule}; evidence: {evidence}")
    out("")
    out(
        f"Checkpoint {checkpoint.version}: {checkpoint.records} records as typed Python code, "
        f"covering the log up to event {checkpoint.seq}."
    )
    out(f"  code: {code_file}   (or: uac code --db {path})")
    out(f'Try:  uac eval --db {path} --user {DEMO_USER_ID} "len(user.all(Trip))"')
    out(
        f'      uac sql --db {path} --user {DEMO_USER_ID} "SELECT category, count(*) FROM Transaction GROUP BY ALL"'
    )
    out(f"      uac verify --db {path}")
    return wb
