"""``uac demo``: build a fresh store from the demo user and show a newcomer what uac does."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
import textwrap
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from uac_kernel.core.display import plural, shorten
from uac_kernel.core.errors import StoreError
from uac_kernel.core.outputs import PYTHON, Output
from uac_kernel.demo.chat import (
    CALLS_FILE,
    DEMO_MODEL,
    DEMO_QUESTIONS_ASKED,
    conversations,
    export_calls,
    import_calls,
    reference_model,
)
from uac_kernel.demo.life import demo_jsonl, write_demo_jsonl
from uac_kernel.demo.timeline import DEMO_USER
from uac_kernel.ingest.events import InputEvent
from uac_kernel.ingest.report import IngestReport
from uac_kernel.log.store import Store
from uac_kernel.model.ask import Answer
from uac_kernel.model.client import ModelSettings
from uac_kernel.model.extract import ExtractionReport
from uac_kernel.model.testing import ChatServer
from uac_kernel.rules.engine import Alert, ClearedAlert
from uac_kernel.vocab.log import binding_of
from uac_kernel.workbench import Workbench

__all__ = ["DEMO_QUESTIONS", "DEMO_USER_ID", "run_demo", "uac_command"]

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


def _claim(path: Path) -> None:
    """Make ``path`` ready for a new demo store, replacing only what an earlier demo made.

    A store there is removed only if it is empty or the demo's (its user is the demo's and it
    holds the demo's first event); the events and code files beside it (``.jsonl``, ``.py``)
    are replaced only beside such a store, or when the events file is the demo's to the byte.
    Anything else is refused in one line: ``maya`` is the README's example user too."""
    events_file, code_file = path.with_suffix(".jsonl"), path.with_suffix(".py")
    lines = demo_jsonl()
    ours = False
    if path.exists():
        store = Store(path, read_only=True)
        try:
            users = store.users()
            first = json.loads(lines[0])["source"]
            ours = users == [DEMO_USER_ID] and bool(store.logged_sources(DEMO_USER_ID, {first}))
        finally:
            store.close()
        if not ours and users:
            raise StoreError(
                f"{path} holds data the demo did not make; pass another --db for the demo"
            )
    if not ours:
        if events_file.exists() and events_file.read_bytes() != "".join(lines).encode():
            raise StoreError(
                f"{events_file} exists and is not the demo's events (the demo writes them "
                "there); pass another --db for the demo"
            )
        if code_file.exists():
            raise StoreError(
                f"{code_file} exists and the demo did not write it (the demo writes its model "
                "there); pass another --db for the demo"
            )
    if path.exists():
        path.unlink()
        Path(f"{path}.wal").unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)


def build_history(path: Path, model: ModelSettings | None = None) -> tuple[Workbench, int]:
    """A fresh demo store with the two typed years, replayed day by day so the rules run after
    every day's changes and the alert history shows when each alert was raised and cleared."""
    _claim(path)
    events_file = path.with_suffix(".jsonl")
    lines = write_demo_jsonl(events_file)
    wb = Workbench(path, user=DEMO_USER_ID, model=model)
    days: dict[str, list[dict[str, Any]]] = {}
    for text in events_file.read_text(encoding="utf-8").splitlines():
        event = json.loads(text)
        days.setdefault(event["ts"][:10], []).append(event)
    for day in tqdm(days.values(), desc="replaying the demo history", unit="day", disable=None):
        wb.ingest(day, origin=str(events_file))
    # The history's utterances came with their facts already typed: nothing to extract there.
    said = [ev.source for ev in wb.log(kinds=["utterance"]) if ev.source]
    last = wb.state.now or datetime(2024, 1, 1)
    marker = {"utterances": said, "operations": 0, "note": "facts were given as typed events"}
    wb.append_parsed([InputEvent("demo", 0, last, "extraction", "extraction:demo-history", marker)])
    wb.checkpoint()
    return wb, lines


def run_conversations(wb: Workbench) -> tuple[IngestReport, ExtractionReport, list[Answer]]:
    """January 2026 arrives as plain chat: extract it, then ask questions answered by code."""
    ingest = wb.ingest(conversations(), origin="demo conversations")
    extraction = wb.extract(progress=False)
    answers = [wb.ask(question) for question, _, _ in DEMO_QUESTIONS_ASKED]
    return ingest, extraction, answers


def record_demo_calls(target: Path) -> int:
    """Re-make the bundled call record with the scripted stand-in model (see demo/chat.py)."""
    with tempfile.TemporaryDirectory() as tmp, ChatServer(reference_model) as server:
        settings = ModelSettings(model=DEMO_MODEL, base_url=server.base_url)
        wb, _ = build_history(Path(tmp) / "demo.duckdb", settings)
        run_conversations(wb)
        count = export_calls(wb.store, target)
        wb.close()
    return count


def _wrapped(text: str, indent: str, first: str = "", width: int = 100) -> list[str]:
    """``first`` then ``text`` in lines of ``width``, continued under ``indent``; words whole."""
    return textwrap.wrap(
        text,
        width,
        initial_indent=first,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _alert_lines(state: str, severity: str, message: str, reason: str = "") -> list[str]:
    """An alert in full: its state, severity and message, and for a clear the reason."""
    head = f"  {state:<7} [{severity}] "
    lines = _wrapped(message, " " * len(head), head)
    if reason:
        lines += _wrapped(reason, " " * (len(head) + 5), " " * len(head) + "why: ")
    return lines


def _alert_changes(
    what: str, raised: list[Alert], updated: list[Alert], cleared: list[ClearedAlert]
) -> list[str]:
    """What ``what`` did to the alerts: a count line, then every alert it raised, moved to
    another severity or cleared, in full, each clear with its reason."""
    counts = ", ".join(
        f"{len(alerts)} {state}"
        for state, alerts in (("raised", raised), ("updated", updated), ("cleared", cleared))
        if alerts
    )
    lines = [f"  alerts after {what}: {counts or 'none raised or cleared'}"]
    for state, alerts in (("raised", raised), ("updated", updated)):
        for alert in alerts:
            lines += _alert_lines(state, alert.severity, alert.message)
    for c in cleared:
        lines += _alert_lines("cleared", c.severity, c.message, c.reason)
    return lines


def uac_command() -> str:
    """``uac`` as the demo's reader can type it in the shell the demo ran in.

    ``uac`` itself when that is on PATH and is this one; else the ``uac`` installed beside this
    Python, relative when it is under the current directory (``.venv/bin/uac`` from the
    repository, before the venv is activated), absolute otherwise; else ``python -m``.
    """
    here = shutil.which("uac", path=os.path.dirname(sys.executable))
    if here is None:
        return f"{shlex.quote(sys.executable)} -m uac_kernel.cli.main"
    found = shutil.which("uac")
    if found is not None and os.path.samefile(found, here):
        return "uac"
    relative = os.path.relpath(here)
    if relative.startswith(os.pardir):
        return shlex.quote(here)
    return shlex.quote(relative if os.sep in relative else os.path.join(os.curdir, relative))


def run_demo(path: Path, out: Callable[[str], None] = print, *, live: bool = False) -> Workbench:
    """Build the demo store at ``path`` (replacing an earlier demo) and report on it.

    Offline (the default) the model's part is served from the bundled call record; ``live``
    calls the configured endpoint instead (UAC_MODEL, OPENAI_BASE_URL, OPENAI_API_KEY).
    """
    model = ModelSettings.resolve() if live else ModelSettings(model=DEMO_MODEL, offline=True)
    wb, lines = build_history(path, model)
    typed_records = sum(wb.state.counts().values())
    history_alerts = wb.alert_history()
    if not live:
        import_calls(wb.store, DEMO_USER_ID)
    ingest, extraction, answers = run_conversations(wb)
    checkpoint = wb.checkpoints.get()
    learned = (
        wb.diff(checkpoint.version - 1, checkpoint.version) if checkpoint.version > 1 else None
    )
    code_file = path.with_suffix(".py")
    Output(code_file, PYTHON, protect=(path,)).write_text([checkpoint.code])

    out(f"uac demo — the synthetic user {DEMO_USER!r}: two years of life in {lines} events")
    out(f"store: {path}   (events: {path.with_suffix('.jsonl')})")
    out(f"ingest: {lines} events appended, day by day; {typed_records} typed records")
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
    out("Alert history of the two years (rules ran after every day's changes):")
    for ev in history_alerts:
        p = ev.payload
        out(f"  {ev.ts:%Y-%m-%d} {p['state']:<7} [{p['severity']}] {shorten(p['message'], 100)}")
        for line in _wrapped(p.get("reason", ""), " " * 26, " " * 21 + "why: "):
            out(line)
    out("")
    source = "live model" if live else f"bundled call record of {DEMO_MODEL!r}, offline"
    out(f"January 2026 arrives as conversation ({ingest.appended} turns); extraction ({source}):")
    clock = f"moving the log's clock to {wb.log(kinds=['utterance'])[-1].ts:%Y-%m-%d}"
    for line in _alert_changes(
        f"the turns ({clock})", ingest.raised, ingest.updated, ingest.cleared
    ):
        out(line)
    out(f"  {extraction.summary()}")
    for ev in wb.log(kinds=["fact"], after_seq=ingest.last_seq or 0):
        p = ev.payload
        fields = json.dumps(p.get("fields", {}), ensure_ascii=False)
        out(
            f"  {p['op']:<7} {p['type']} {p['key']} {shorten(fields, 70)}  <- {', '.join(p.get('derived_from', []))}"
        )
    for ev in wb.log(kinds=["vocabulary"], after_seq=ingest.last_seq or 0):
        b = binding_of(ev.payload["binding"])
        out(f"  {b.status:<7} {b.short()}")
        for line in _wrapped(b.reason, " " * 15, " " * 10 + "why: "):
            out(line)
    if learned is not None:
        out(f"  {learned.summary()}   (uac diff {learned.a} {learned.b})")
    for line in _alert_changes(
        "extraction", extraction.raised, extraction.updated, extraction.cleared
    ):
        out(line)
    out("")
    out("Questions answered by code the model wrote (run in the sandbox):")
    for a in answers:
        out(f"  Q: {a.question}")
        if not a.ok:
            out(f"     no answer: {a.error}")
            continue
        out(f"     code:   {a.expression}")
        out(f"     answer: {json.dumps(a.value, ensure_ascii=False, default=str)}")
        cert = a.certificate
        said = "; ".join(f"[{u['source']}] {shorten(u['text'], 60)}" for u in cert.utterances[:2])
        records = plural(cert.records_total, "record")
        out(f"     rests on {records}{', said: ' + said if said else ''}")
    out("")
    alerts = wb.alerts()
    out(f"Alerts standing now ({len(alerts)}):")
    for alert in alerts:
        evidence = ", ".join(f"{e.type} {e.key}" for e in alert.evidence)
        out(f"  [{alert.severity}] {alert.message}")
        out(f"      rule {alert.rule}; evidence: {evidence}")
    out("")
    out(
        f"Checkpoint {checkpoint.version}: {plural(checkpoint.records, 'record')} as typed Python code, "
        f"covering the log up to event {checkpoint.seq}."
    )
    # Commands the reader can paste as printed: the venv need not be activated.
    uac, db = uac_command(), shlex.quote(str(path))
    out(f"  code: {code_file}   (or: {uac} code --db {db} --user {DEMO_USER_ID})")
    out(f'Try:  {uac} eval --db {db} --user {DEMO_USER_ID} "len(user.all(Trip))"')
    out(
        f'      {uac} sql --db {db} --user {DEMO_USER_ID} "SELECT category, count(*) FROM Transaction GROUP BY ALL"'
    )
    out(f"      {uac} calls --db {db} --user {DEMO_USER_ID}     # the model calls and their tokens")
    out(f"      {uac} verify --db {db}")
    return wb


def main() -> None:
    """``python -m uac_kernel.demo.run --record``: re-make the bundled demo call record."""
    import sys

    if sys.argv[1:] != ["--record"]:
        raise SystemExit("usage: python -m uac_kernel.demo.run --record")
    target = Path(__file__).parent.parent / "data" / CALLS_FILE
    print(f"{record_demo_calls(target)} calls written to {target}")


if __name__ == "__main__":
    main()
