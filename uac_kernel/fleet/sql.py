"""SQL across the users of a fleet directory: ``uac fleet sql DIR "SELECT ..."``.

The tables are built in an in-memory DuckDB from the Parquet files the users' commits list
(``partition.Fleet.files``; a stray part file is never read), then the database is locked down
as ``uac sql``'s view is (external access off, memory and threads bounded, configuration
locked) before the query runs, read-only, bounded in time and rolled back (``sql.view``):

- one table per record type, ``<T>`` (current records) and ``<T>_history`` (every version),
  ``user_id`` first, then the columns ``uac sql`` gives one user, built by the same SQL
  (``sql.build``, every window and group per user);
- ``uac_tables`` (type, current_table, history_table): which table is which;
- ``users`` (user_id, events, facts, first_ts, last_ts, checkpoints, calls, tokens_in,
  tokens_out): every user with a commit;
- ``alerts`` (user_id, rule, id, severity, category, message, evidence, since): the alerts
  standing by the logged alert events, as ``uac alerts`` lists them, most severe first; the
  message and ``since`` are those of the event that raised the alert or last changed its
  severity (``uac alerts`` words a message that counts days from the clock anew);
- ``events`` (user_id, user_seq, seq, ts, kind, source, payload): the raw log, for questions
  the record tables do not answer (``seq`` is what ``sources`` cells name).

Erased events (``uac forget``: salt '') are left out of every table and count.

Types are named in the order their first schema event was recorded across the fleet, by
``sql.view.table_names``; a type whose name clashes, ignoring case, with ``users``, ``alerts`` or
``events`` gets a suffix (``Users_2``). A field that users typed differently (an ``int`` for one,
a ``str`` for another) is a VARCHAR column: a string as it is, any other value as its JSON text.
A field named ``user_id`` is column ``user_id_2`` (the first such name no field has).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from uac_kernel.core.display import plural, printable, shorten
from uac_kernel.core.errors import FleetError, QueryError
from uac_kernel.core.names import quote_ident
from uac_kernel.fleet.partition import Fleet, check_columns, parquet_source
from uac_kernel.log.migrations import migrate
from uac_kernel.rules.engine import SEVERITIES
from uac_kernel.sql.build import MIXED, build_type, load_facts
from uac_kernel.sql.view import (
    INDEX_TABLE,
    SqlResult,
    _check_timeout,
    _first_line,
    bounds,
    run_read_only,
    table_names,
)

__all__ = ["FLEET_TABLES", "FleetSql", "FleetSummary", "fleet_sql", "fleet_summary"]

FLEET_TABLES = ("users", "alerts", "events")
"""The tables of every fleet's database besides the record types' and ``uac_tables``."""

# The store's tables the fleet's tables are built from (snapshots are never exported).
_SOURCES = ("events", "model_calls", "checkpoints")
_RAW = "uac_raw"


class FleetSql:
    """The tables of a fleet directory's committed rows (of ``users`` only, when given) and
    read-only queries over them, within time and memory limits (``None``: ``uac sql``'s
    defaults and environment variables). Without ``record_types`` only ``users``, ``alerts``
    and ``events`` are built (what a summary reads)."""

    def __init__(
        self,
        root: str | Path,
        *,
        users: Iterable[str] | None = None,
        timeout: float | None = None,
        memory_mb: int | None = None,
        threads: int | None = None,
        record_types: bool = True,
    ) -> None:
        fleet = Fleet(root)
        wanted = None if users is None else list(users)
        self.root = fleet.root
        self.timeout, self.memory_mb, self.threads = bounds(timeout, memory_mb, threads)
        known = fleet.users()
        if wanted is None:
            self.users = known
        else:
            missing = sorted(set(wanted) - set(known))
            if missing:
                raise FleetError(
                    f"no user {printable(shorten(repr(missing[0]), 80))} in the fleet "
                    f"{str(fleet.root)!r} ({plural(len(known), 'user')}); `uac fleet summary "
                    "DIR` counts them, `uac fleet sql DIR 'FROM users'` lists them"
                )
            self.users = sorted(set(wanted))
        check_columns(fleet, self.users)  # a file of other columns: one line naming its user
        files = {t: fleet.files(t, self.users) for t in _SOURCES}
        self.con = duckdb.connect(":memory:")
        con = self.con
        con.execute(f"SET memory_limit = '{int(self.memory_mb)}MB'")
        con.execute(f"SET threads = {int(self.threads)}")
        # Spilling to disk would need a temp directory: memory is the limit, not the disk.
        con.execute("SET temp_directory = ''")
        try:
            self.tables = _build(con, files, self.users, self.root, record_types)
        except duckdb.OutOfMemoryException:
            con.close()
            raise QueryError(
                f"the records of the fleet {str(self.root)!r} do not fit in the SQL memory "
                f"limit of {self.memory_mb} MB; raise it with the environment variable "
                "UAC_SQL_MEMORY_MB, or query fewer users"
            ) from None
        except BaseException:
            con.close()
            raise
        # Locked before any query: from here on no statement can read or write a file, attach
        # a database or change a setting (the memory limit included).
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")

    def query(self, sql: str, *, timeout: float | None = None) -> SqlResult:
        """Run one read-only query; ``timeout`` (seconds) overrides the time limit."""
        limit = self.timeout if timeout is None else timeout
        _check_timeout(limit)
        moved = [f"{t} is {cur}" for t, (cur, _) in self.tables.items() if cur != t]
        renamed = f" (renamed to stay distinct: {', '.join(moved)})" if moved else ""
        return run_read_only(
            self.con,
            sql,
            timeout=limit,
            memory_mb=self.memory_mb,
            hint=f"tables: {', '.join(FLEET_TABLES)}, and one per record type, e.g. Trip and "
            f"Trip_history{renamed}; {INDEX_TABLE} lists them",
            raise_timeout="uac fleet sql --timeout S, %uac fleet sql --timeout S",
        )

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> FleetSql:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def fleet_sql(
    root: str | Path,
    sql: str,
    *,
    users: Iterable[str] | None = None,
    timeout: float | None = None,
) -> SqlResult:
    """One read-only query over a fleet directory's tables (see the module docstring)."""
    with FleetSql(root, users=users) as db:
        return db.query(sql, timeout=timeout)


@dataclass(frozen=True)
class FleetSummary:
    """What a fleet directory holds: ``uac fleet summary``."""

    root: str
    users: int
    events: int
    facts: int
    calls: int
    tokens_in: int
    tokens_out: int
    alerts: int
    alerts_by_rule: dict[str, int]
    events_per_user: list[tuple[str, int]]

    def to_json(self) -> dict[str, Any]:
        return {
            "root": self.root,
            "users": self.users,
            "events": self.events,
            "facts": self.facts,
            "calls": self.calls,
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "alerts": self.alerts,
            "alerts_by_rule": self.alerts_by_rule,
        }


def fleet_summary(root: str | Path) -> FleetSummary:
    """Users, events, facts, model calls and tokens, and the standing alerts per rule."""
    with FleetSql(root, record_types=False) as db:
        per_user = db.con.execute(
            "SELECT user_id, events, facts, calls, tokens_in, tokens_out FROM users "
            "ORDER BY user_id"
        ).fetchall()
        by_rule = db.con.execute(
            "SELECT rule, count(*) FROM alerts GROUP BY rule ORDER BY count(*) DESC, rule"
        ).fetchall()
    return FleetSummary(
        root=str(db.root),
        users=len(per_user),
        events=sum(r[1] for r in per_user),
        facts=sum(r[2] for r in per_user),
        calls=sum(r[3] for r in per_user),
        tokens_in=sum(r[4] for r in per_user),
        tokens_out=sum(r[5] for r in per_user),
        alerts=sum(n for _, n in by_rule),
        alerts_by_rule={str(rule): int(n) for rule, n in by_rule},
        events_per_user=[(str(r[0]), int(r[1])) for r in per_user],
    )


def _build(
    con: duckdb.DuckDBPyConnection,
    files: Mapping[str, Sequence[Path]],
    users: list[str],
    root: Path,
    record_types: bool,
) -> dict[str, tuple[str, str]]:
    """Create the fleet's tables in ``con`` from the committed ``files`` (of the fleet at
    ``root``) of each store table; return each record type's (current, history) names."""
    # The store's own migrations make the raw tables, so every column has the store's type
    # even when no file holds a row; the files' rows go in by column name.
    con.execute(f"ATTACH ':memory:' AS {_RAW}")
    con.execute(f"USE {_RAW}")
    try:
        migrate(con)
    finally:
        con.execute("USE memory")
    for table in _SOURCES:
        if not files.get(table):
            continue
        try:
            con.execute(
                f"INSERT INTO {_RAW}.{table} BY NAME SELECT * FROM {parquet_source(files[table])}"
            )
        except (duckdb.IOException, duckdb.InvalidInputException) as exc:
            # A base commit rewrote a user's partition while it was read, or a file is damaged.
            raise FleetError(
                f"cannot read a committed {table} file of the fleet {str(root)!r} "
                f"({_first_line(exc)}); query again, and if it persists `uac verify {root}` "
                "names the damaged file"
            ) from None
    con.execute(
        f"""CREATE TABLE events AS SELECT user_id, user_seq, seq, ts, kind, source, payload
        FROM {_RAW}.events WHERE salt <> '' ORDER BY user_id, user_seq"""
    )
    con.execute("CREATE TABLE uac_users (user_id VARCHAR)")
    if users:
        con.executemany("INSERT INTO uac_users VALUES (?)", [(u,) for u in users])
    con.execute(
        f"""CREATE TABLE users AS
        WITH e AS (SELECT user_id, count(*) AS events, count(*) FILTER (kind = 'fact') AS facts,
                min(ts) AS first_ts, max(ts) AS last_ts FROM events GROUP BY user_id),
            c AS (SELECT user_id, count(*) AS checkpoints FROM {_RAW}.checkpoints
                GROUP BY user_id),
            m AS (SELECT user_id, count(*) AS calls, sum(tokens_in) AS tokens_in,
                sum(tokens_out) AS tokens_out FROM {_RAW}.model_calls GROUP BY user_id)
        SELECT user_id, coalesce(events, 0) AS events, coalesce(facts, 0) AS facts, first_ts,
            last_ts, coalesce(checkpoints, 0) AS checkpoints, coalesce(calls, 0) AS calls,
            coalesce(tokens_in, 0)::BIGINT AS tokens_in,
            coalesce(tokens_out, 0)::BIGINT AS tokens_out
        FROM uac_users LEFT JOIN e USING (user_id) LEFT JOIN c USING (user_id)
            LEFT JOIN m USING (user_id)
        ORDER BY user_id"""
    )
    con.execute("DROP TABLE uac_users")
    # An alert stands while its last logged event (of those not erased) raised or updated it.
    rank = "CASE a.severity " + " ".join(f"WHEN '{s}' THEN {i}" for i, s in enumerate(SEVERITIES))
    con.execute(
        f"""CREATE TABLE alerts AS
        WITH a AS (SELECT user_id, seq, ts, payload ->> '$.id' AS id,
                payload ->> '$.state' AS state, payload ->> '$.rule' AS rule,
                payload ->> '$.severity' AS severity, payload ->> '$.category' AS category,
                payload ->> '$.message' AS message, CAST(payload -> '$.evidence' AS JSON)
                AS evidence FROM events WHERE kind = 'alert'),
            last AS (SELECT user_id, id, arg_max(a, seq) AS a FROM a GROUP BY user_id, id)
        SELECT user_id, a.rule, id, a.severity, a.category, a.message, a.evidence,
            a.ts AS since
        FROM last WHERE a.state IN ('raised', 'updated')
        ORDER BY user_id, {rank} END, a.rule, id"""
    )
    tables = _build_types(con) if record_types else {}
    con.execute(f"DETACH {_RAW}")  # the salts, hashes and erased rows go with it
    return tables


def _build_types(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[str, str]]:
    """The record types' tables: the fields of every user's schema events (schema events are
    never erased), in the order they were first recorded across the fleet."""
    rows = con.execute(
        f"""SELECT payload ->> '$.type', payload ->> '$.field', payload ->> '$.ftype'
        FROM {_RAW}.events WHERE kind = 'schema'
        ORDER BY recorded_at, user_id, user_seq"""
    ).fetchall()
    types: dict[str, dict[str, str]] = {}
    for name, field, ftype in rows:
        fields = types.setdefault(str(name), {})
        if field is not None and ftype is not None:
            known = fields.setdefault(str(field), str(ftype))
            if known != ftype:
                fields[str(field)] = MIXED
    names = table_names(types, reserved=FLEET_TABLES)
    con.execute(
        f"CREATE TABLE {INDEX_TABLE} (type VARCHAR, current_table VARCHAR, history_table VARCHAR)"
    )
    if names:
        con.executemany(
            f"INSERT INTO {INDEX_TABLE} VALUES (?, ?, ?)",
            [(t, cur, hist) for t, (cur, hist) in names.items()],
        )
    cur = con.cursor()
    try:
        load_facts(
            cur,
            f"SELECT seq, ts, user_id, payload FROM {_RAW}.events "
            "WHERE kind = 'fact' AND salt <> ''",
            [],
            list(types),
        )
        for name, fields in types.items():
            current, history = names[name]
            build_type(cur, quote_ident(history), name, fields, columns=_field_columns(fields))
            cur.execute(
                f"CREATE TABLE {quote_ident(current)} AS SELECT * EXCLUDE (retracted) "
                f"FROM {quote_ident(history)} WHERE valid_to IS NULL"
            )
    finally:
        cur.close()
    return names


def _field_columns(fields: dict[str, str]) -> dict[str, str]:
    """Each field's column: its name, but for a field named ``user_id``, which the fleet's own
    column holds, the first of ``user_id_2``, ``user_id_3``... that is no field's name."""
    # SQL names are case-blind: `User_ID` is the user column too
    if "user_id" not in {f.lower() for f in fields}:
        return {f: f for f in fields}
    n = 2
    while f"user_id_{n}" in {f.lower() for f in fields}:
        n += 1
    return {f: f"user_id_{n}" if f.lower() == "user_id" else f for f in fields}
