"""Append-only, named migrations of the store's own DuckDB schema, recorded in ``uac_migrations``.

Never edit or remove a migration once released: add a new one at the end.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime
from typing import Any

import duckdb

from uac_kernel.core.chain import (
    GENESIS,
    call_hash,
    checkpoint_hash,
    content_hash,
    event_hash,
    new_salt,
)
from uac_kernel.core.errors import StoreError

__all__ = ["migrate"]

Migration = Callable[[duckdb.DuckDBPyConnection], None]
MIGRATIONS: list[tuple[str, Migration]] = []


def migration(fn: Migration) -> Migration:
    MIGRATIONS.append((fn.__name__, fn))
    return fn


@migration
def m001_event_log(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """
        CREATE TABLE events (
            seq BIGINT NOT NULL,
            recorded_at TIMESTAMP NOT NULL,
            ts TIMESTAMP NOT NULL,
            kind VARCHAR NOT NULL,
            user_id VARCHAR NOT NULL,
            source VARCHAR,
            payload VARCHAR NOT NULL,
            hash VARCHAR NOT NULL
        )
        """
    )


@migration
def m002_checkpoints(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(
        """
        CREATE TABLE checkpoints (
            user_id VARCHAR NOT NULL,
            version INTEGER NOT NULL,
            seq BIGINT NOT NULL,
            created_at TIMESTAMP NOT NULL,
            records INTEGER NOT NULL,
            segments INTEGER NOT NULL
        )
        """
    )
    # A checkpoint stores only the segments of code that changed since the previous version;
    # the code of version N is, per segment, the newest text at a version <= N.
    con.execute(
        """
        CREATE TABLE checkpoint_segments (
            user_id VARCHAR NOT NULL,
            version INTEGER NOT NULL,
            segment VARCHAR NOT NULL,
            text VARCHAR NOT NULL
        )
        """
    )


@migration
def m003_model_calls(con: duckdb.DuckDBPyConnection) -> None:
    # Every model call, appended once: the cost ledger and the record that replays runs offline.
    con.execute(
        """
        CREATE TABLE model_calls (
            call_id BIGINT NOT NULL,
            created_at TIMESTAMP NOT NULL,
            user_id VARCHAR NOT NULL,
            purpose VARCHAR NOT NULL,
            model VARCHAR NOT NULL,
            base_url VARCHAR NOT NULL,
            request_key VARCHAR NOT NULL,
            request VARCHAR NOT NULL,
            response VARCHAR NOT NULL,
            content VARCHAR NOT NULL,
            tokens_in INTEGER NOT NULL,
            tokens_out INTEGER NOT NULL,
            latency_ms DOUBLE NOT NULL,
            outcome VARCHAR NOT NULL,
            error VARCHAR NOT NULL
        )
        """
    )


def _v1_event_hash(
    prev: str,
    seq: int,
    recorded_at: datetime,
    ts: datetime,
    kind: str,
    user: str,
    source: str | None,
    payload: str,
) -> str:
    """The event hash of stores before m004: one chain across all users, over the payload."""
    src = source or ""
    blob = (
        f"{prev}|{seq}|{recorded_at.isoformat()}|{ts.isoformat()}|{len(kind)}:{kind}|"
        f"{len(user)}:{user}|{len(src)}:{src}|{payload}"
    )
    return hashlib.sha256(blob.encode()).hexdigest()


@migration
def m004_user_chains(con: duckdb.DuckDBPyConnection) -> None:
    """One hash chain per user over salted payload hashes (so a payload can be forgotten and the
    chain still verify), chains of model calls and checkpoints per user, each naming the event
    chain head it was made at. The old store-wide chain is checked first: a broken one is not
    silently re-hashed into a valid one."""
    events = con.execute(
        "SELECT seq, recorded_at, ts, kind, user_id, source, payload, hash FROM events ORDER BY seq"
    ).fetchall()
    prev = GENESIS
    heads: dict[str, tuple[int, str]] = {}
    rows: list[tuple[Any, ...]] = []
    at: dict[str, list[tuple[datetime, int, str]]] = {}  # per user: (recorded_at, user_seq, hash)
    for expected, (seq, rec, ts, kind, user, src, payload, h) in enumerate(events, 1):
        if seq != expected or _v1_event_hash(prev, seq, rec, ts, kind, user, src, payload) != h:
            raise StoreError(
                f"the store's hash chain is broken at seq {seq}, so it is not upgraded to "
                "per-user chains; restore the store from a copy"
            )
        prev = h
        user_seq, user_prev = heads.get(user, (0, GENESIS))
        salt = new_salt()
        payload_hash = content_hash(salt, payload, src or "")
        link = event_hash(user_prev, user_seq + 1, rec, ts, kind, user, payload_hash)
        heads[user] = (user_seq + 1, link)
        at.setdefault(user, []).append((rec, user_seq + 1, link))
        rows.append(
            (seq, user_seq + 1, rec, ts, kind, user, src, payload, salt, payload_hash, link)
        )
    _rebuild(
        con,
        "events",
        """
        seq BIGINT NOT NULL,
        user_seq BIGINT NOT NULL,
        recorded_at TIMESTAMP NOT NULL,
        ts TIMESTAMP NOT NULL,
        kind VARCHAR NOT NULL,
        user_id VARCHAR NOT NULL,
        source VARCHAR,
        payload VARCHAR NOT NULL,
        salt VARCHAR NOT NULL,
        payload_hash VARCHAR NOT NULL,
        hash VARCHAR NOT NULL
        """,
        rows,
    )

    def head_at(user: str, seq_or_time: datetime | int) -> tuple[int, str]:
        """The user's event chain head at a recording time (calls) or a seq (checkpoints)."""
        found = (0, GENESIS)
        for rec, user_seq, link in at.get(user, []):
            if isinstance(seq_or_time, datetime) and rec > seq_or_time:
                break
            if isinstance(seq_or_time, int) and user_seq > seq_or_time:
                break
            found = (user_seq, link)
        return found

    calls = con.execute(
        "SELECT call_id, created_at, user_id, purpose, model, base_url, request_key, request, "
        "response, content, tokens_in, tokens_out, latency_ms, outcome, error FROM model_calls "
        "ORDER BY call_id"
    ).fetchall()
    call_heads: dict[str, str] = {}
    call_rows = []
    for row in calls:
        call_id, created, user, purpose, model, base_url, _key, req, resp, content = row[:10]
        tokens_in, tokens_out, latency, outcome, error = row[10:]
        salt = new_salt()
        chash = content_hash(salt, req, resp, content, error)
        event_seq, head = head_at(user, created)
        link = call_hash(
            call_heads.get(user, GENESIS), call_id, created, user, purpose, model, base_url,
            tokens_in, tokens_out, latency, outcome, event_seq, head, chash,
        )  # fmt: skip
        call_heads[user] = link
        call_rows.append((*row, salt, chash, event_seq, head, link))
    _rebuild(
        con,
        "model_calls",
        """
        call_id BIGINT NOT NULL,
        created_at TIMESTAMP NOT NULL,
        user_id VARCHAR NOT NULL,
        purpose VARCHAR NOT NULL,
        model VARCHAR NOT NULL,
        base_url VARCHAR NOT NULL,
        request_key VARCHAR NOT NULL,
        request VARCHAR NOT NULL,
        response VARCHAR NOT NULL,
        content VARCHAR NOT NULL,
        tokens_in BIGINT NOT NULL,
        tokens_out BIGINT NOT NULL,
        latency_ms DOUBLE NOT NULL,
        outcome VARCHAR NOT NULL,
        error VARCHAR NOT NULL,
        salt VARCHAR NOT NULL,
        content_hash VARCHAR NOT NULL,
        event_seq BIGINT NOT NULL,
        event_hash VARCHAR NOT NULL,
        hash VARCHAR NOT NULL
        """,
        call_rows,
    )

    # Checkpoint segments get salted text hashes; each checkpoint a link naming them.
    segments = con.execute(
        "SELECT user_id, version, segment, text FROM checkpoint_segments "
        "ORDER BY user_id, version, segment"
    ).fetchall()
    segment_rows = []
    stored: dict[tuple[str, int], dict[str, str]] = {}
    for user, version, segment, text in segments:
        salt = new_salt()
        text_hash = content_hash(salt, text)
        stored.setdefault((user, version), {})[segment] = text_hash
        segment_rows.append((user, version, segment, text, salt, text_hash))
    _rebuild(
        con,
        "checkpoint_segments",
        """
        user_id VARCHAR NOT NULL,
        version INTEGER NOT NULL,
        segment VARCHAR NOT NULL,
        text VARCHAR NOT NULL,
        salt VARCHAR NOT NULL,
        text_hash VARCHAR NOT NULL
        """,
        segment_rows,
    )

    checkpoints = con.execute(
        "SELECT user_id, version, seq, created_at, records, segments FROM checkpoints "
        "ORDER BY user_id, version"
    ).fetchall()
    seq_to_user_seq = {r[0]: r[1] for r in rows}
    checkpoint_heads: dict[str, str] = {}
    checkpoint_rows = []
    for user, version, seq, created, records, count in checkpoints:
        event_seq, head = head_at(user, seq_to_user_seq.get(seq, 0))
        link = checkpoint_hash(
            checkpoint_heads.get(user, GENESIS), user, version, seq, event_seq, head, records,
            stored.get((user, version), {}),
        )  # fmt: skip
        checkpoint_heads[user] = link
        checkpoint_rows.append((user, version, seq, created, records, count, event_seq, head, link))
    _rebuild(
        con,
        "checkpoints",
        """
        user_id VARCHAR NOT NULL,
        version INTEGER NOT NULL,
        seq BIGINT NOT NULL,
        created_at TIMESTAMP NOT NULL,
        records INTEGER NOT NULL,
        segments INTEGER NOT NULL,
        event_seq BIGINT NOT NULL,
        event_hash VARCHAR NOT NULL,
        hash VARCHAR NOT NULL
        """,
        checkpoint_rows,
    )


@migration
def m005_snapshots(con: duckdb.DuckDBPyConnection) -> None:
    # One snapshot of the fold per user (uac_kernel.checkpoints.snapshot): the chain position it covers and
    # its meta here, its records in typed tables of schema uac_snap. Deleting a row only makes
    # the next open fold the whole log.
    con.execute(
        """
        CREATE TABLE snapshots (
            user_id VARCHAR NOT NULL,
            user_seq BIGINT NOT NULL,
            hash VARCHAR NOT NULL,
            seq BIGINT NOT NULL,
            format INTEGER NOT NULL,
            gen BIGINT NOT NULL,
            created_at TIMESTAMP NOT NULL,
            meta JSON NOT NULL
        )
        """
    )
    con.execute("CREATE SCHEMA IF NOT EXISTS uac_snap")


@migration
def m006_uncompacted(con: duckdb.DuckDBPyConnection) -> None:
    # A row while the file may still hold bytes a forget erased (``Store.owe_compaction``):
    # written in the erasing transaction, gone with the file ``Store.compact`` rewrites.
    con.execute("CREATE TABLE uncompacted (since TIMESTAMP NOT NULL)")


def _rebuild(
    con: duckdb.DuckDBPyConnection, table: str, columns: str, rows: list[tuple[Any, ...]]
) -> None:
    """Replace ``table`` by one of ``columns`` holding ``rows`` (inside the migration's
    transaction, so a failure leaves the old table)."""
    con.execute(f"CREATE TABLE {table}_v2 ({columns})")
    _append(con, f"{table}_v2", rows)
    con.execute(f"DROP TABLE {table}")
    con.execute(f"ALTER TABLE {table}_v2 RENAME TO {table}")


def _append(con: duckdb.DuckDBPyConnection, table: str, rows: list[tuple[Any, ...]]) -> None:
    if rows:
        appender = con.appender(table)
        appender.append_rows(rows)
        appender.flush()


def migrate(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Apply the migrations this database has not seen; return their names."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS uac_migrations (name VARCHAR NOT NULL, applied_at TIMESTAMP)"
    )
    done = {row[0] for row in con.execute("SELECT name FROM uac_migrations").fetchall()}
    applied = []
    for name, fn in MIGRATIONS:
        if name in done:
            continue
        con.execute("BEGIN TRANSACTION")
        try:
            fn(con)
            con.execute("INSERT INTO uac_migrations VALUES (?, current_timestamp)", [name])
        except BaseException:
            con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")
        applied.append(name)
    return applied
