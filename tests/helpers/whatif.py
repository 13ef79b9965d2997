"""A what-if's workbench: its rules, a store of events, the state a what-if could change."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from uac_kernel.engine.whatif import AlertSpan, WhatIf
from uac_kernel.rules.engine import Finding, rule
from uac_kernel.rules.library import LIBRARY
from uac_kernel.state.query import UserView
from uac_kernel.workbench import Workbench

USER = "maya"


@rule(watch=["Trip"], severity="info")
def trips_ahead(user: UserView) -> Iterator[Finding]:
    """A rule reading a field index (``where``) and the unset keys of one (``unset``)."""
    today = user.today or date(2025, 1, 1)
    for t in user.where("Trip", "start", since=today):
        yield Finding(f"trip {t.key} ahead", [t])
    for t in user.unset("Trip", "end"):
        yield Finding(f"trip {t.key} has no end", [t], about="open")


RULES = [*LIBRARY, trips_ahead]


def store_with(tmp_path: Path, events: list[dict[str, Any]], name: str = "a.duckdb") -> Path:
    """A store of ``USER`` with ``events`` ingested under ``RULES``, checkpointed."""
    db = tmp_path / name
    with Workbench(db, user=USER, rules=RULES) as wb:
        wb.ingest(events)
        wb.checkpoint()  # also writes a snapshot: later opens read records lazily
    return db


def dump(wb: Workbench) -> dict[str, Any]:
    """Everything of a workbench's state and rules a what-if could have changed."""
    st = wb.state
    out: dict[str, Any] = {
        "seq": st.seq,
        "now": st.now,
        "schema": {t: dict(f) for t, f in st.schema.types.items()},
        "type_seq": dict(st.type_seq),
        "constraints": dict(st.constraints),
        "constraint_history": list(st.constraint_history),
        "rules": sorted(wb.runner.rules),
        "active": {n: dict(a) for n, a in wb.runner.active.items()},
        "constraint_rules": dict(wb._constraint_rules),
    }
    for name, ts in st.types.items():
        out[f"type {name}"] = {
            "fields": list(ts.readers),
            "blank": dict(ts.blank),
            "class fields": sorted(ts.cls.model_fields),
            "current": [(k, type(r).__name__, dict(r.__dict__)) for k, r in ts.current.items()],
            "history": [dict(r.__dict__) for r in ts.history],
            "order": list(ts.order),
            "position": {k: ts.position[k] for k in ts.order},
            "indexes": {
                n: (list(i.entries), sorted(i.unset)) for n, i in sorted(ts.indexes.items())
            },
        }
    return out


def spans_whatif(
    n: int, backwards: bool = False, message: str = "message \x1b[31m\u202e", user: str = "maya"
) -> WhatIf:
    """A what-if whose timeline is ``n`` spans with hostile labels (``backwards``: each ends
    before it starts)."""
    t0 = datetime(2024, 1, 1)
    w = WhatIf(user=user, events=[], as_of=t0)
    w.log_end = t0 + timedelta(days=400)
    w.timeline = [
        AlertSpan(
            "real" if i % 2 else "what-if",
            f"id{i}",
            f"rule{i}<script>alert(1)</script>",
            "critical",
            f"{message} {i} " + "x" * 200,
            t0 + timedelta(hours=i),
            (t0 + timedelta(hours=i - 5)) if backwards else t0 + timedelta(hours=i + 3),
        )
        for i in range(n)
    ]
    return w
