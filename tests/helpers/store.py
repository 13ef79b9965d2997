"""A store file read and changed beside the workbench: hashes, soundness, tampering, old appends."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from uac_kernel.core.schema import infer
from uac_kernel.ingest.events import parse_objects, plan_batch
from uac_kernel.log.integrity import Head, verify
from uac_kernel.log.store import NewEvent, Store
from uac_kernel.state.fold import State


def fingerprint(db: Path) -> dict[str, str]:
    """The SHA-256 of the store file and of its write-ahead log, if it has one."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in (db, db.with_name(db.name + ".wal"))
        if p.exists()
    }


def files(db: Path) -> dict[str, str]:
    """The sha256 of every file of the store (the database and any write-ahead log)."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(db.parent.iterdir())
        if p.name.startswith(db.name)
    }


def append(store: Store, state: State, events: Iterable[dict[str, Any]]) -> None:
    """Validate, append and fold a batch, as the workbench does."""
    state.apply_all(store.append(plan_batch(state, parse_objects(events))))


def append_as_before(db: Path, user: str, adds: list[dict[str, Any]]) -> None:
    """Append ``add`` facts of new types past today's ingest checks, which refuse a type SQL
    would confuse with another (test_input_attacks), as an older uac let them in."""
    events = []
    for ev in adds:
        ts = datetime.fromisoformat(ev["ts"])
        events.append(NewEvent(ts, "schema", user, {"type": ev["type"]}))
        for name, value in ev["fields"].items():
            schema = {"type": ev["type"], "field": name, "ftype": infer(value)}
            events.append(NewEvent(ts, "schema", user, schema))
        payload = {k: ev[k] for k in ("op", "type", "key", "fields")}
        events.append(NewEvent(ts, "fact", user, payload, f"before:{ev['type']}:{ev['key']}"))
    store = Store(str(db))
    store.append(events)
    store.close()


def tamper(db: Path, sql: str, params: list[Any] | None = None) -> None:
    """Change a store file as an outside tool would: through a DuckDB connection of its own."""
    con = duckdb.connect(str(db))
    con.execute(sql, params or [])
    con.close()


def check(db: Path, user: str | None = None, kept: dict[str, Head] | None = None) -> str:
    """``verify``'s problem for ``user`` (all users: None), or "" when the store verifies."""
    store = Store(db, read_only=True)
    try:
        report = verify(store, user, kept)
    finally:
        store.close()
    return "" if report.ok else report.problem


def log_is_sound(db: Path) -> None:
    """The chains verify; seq runs 1..n with no gap or repeat; no source is logged twice."""
    store = Store(db, read_only=True)
    try:
        assert verify(store).ok
        n, distinct, top = store.con.execute(
            "SELECT count(*), count(DISTINCT seq), max(seq) FROM events"
        ).fetchone()  # type: ignore[misc]
        twice = store.con.execute(
            "SELECT user_id, source FROM events WHERE source IS NOT NULL "
            "GROUP BY ALL HAVING count(*) > 1"
        ).fetchall()
    finally:
        store.close()
    assert n == distinct == top
    assert twice == []
