"""Append-only, named migrations of the store's own DuckDB schema, recorded in ``uac_migrations``.

Never edit or remove a migration once released: add a new one at the end.
"""

from __future__ import annotations

from collections.abc import Callable

import duckdb

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
