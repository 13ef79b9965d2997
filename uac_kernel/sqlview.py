"""The SQL view of a user's state: one DuckDB table per record type, in a separate database.

Table ``Trip`` holds the current records of type ``Trip`` (DuckDB names are case-insensitive,
so ``trip`` works too) and ``Trip_history`` every version, ended and retracted ones included.
Columns: ``key``, the type's own fields, ``valid_from``, ``valid_to``, ``sources`` (BIGINT[]),
and in the history table ``retracted``. The view lives in its own in-memory database with
external access switched off, so a query can neither touch the log nor read or write files.
Only the types that changed since the last query are rebuilt.

Names never shadow each other: types are named in the order they first appeared in the log, and
a type whose table (or ``_history`` table) would clash, ignoring case, with one already named or
with ``uac_tables`` gets the first free suffix: ``TRIP`` after ``Trip`` is ``TRIP_2`` and
``TRIP_2_history``. A name once given never changes. Table ``uac_tables`` (``type``,
``current_table``, ``history_table``) lists which table is which.

A query cannot change the view: DuckDB's own parser must find exactly one statement and it must
be a query (``SELECT``, ``WITH``, ``FROM``, ``VALUES``, ``DESCRIBE``, ``SHOW``, ``SUMMARIZE``);
anything else is a ``QueryError`` before it runs. As a second wall the query runs inside a
transaction that is always rolled back, so even a table function with side effects leaves nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import duckdb

from uac_kernel.errors import QueryError
from uac_kernel.fold import State
from uac_kernel.records import Record

__all__ = ["INDEX_TABLE", "SqlResult", "SqlView", "check_read_only", "table_names"]

INDEX_TABLE = "uac_tables"
_WRITING_NODE = re.compile(r'"type":"([A-Z]+_QUERY_NODE)"')

_SQL_TYPES = {
    "bool": "BOOLEAN",
    "int": "BIGINT",
    "float": "DOUBLE",
    "str": "VARCHAR",
    "date": "DATE",
    "datetime": "TIMESTAMP",
}


def sql_type(ftype: str) -> str:
    if ftype.startswith("list["):
        return _SQL_TYPES[ftype[5:-1]] + "[]"
    return _SQL_TYPES[ftype]


def table_names(type_names: Iterable[str]) -> dict[str, tuple[str, str]]:
    """Each type's (current, history) table, in the given order (the log's): a name that would
    clash, ignoring case, with one already given or with ``uac_tables`` gets a ``_2``, ``_3``...
    suffix, so no type hides another and earlier types keep their names as types are added."""
    taken = {INDEX_TABLE}
    names: dict[str, tuple[str, str]] = {}
    for name in type_names:
        base, n = name, 1
        while base.lower() in taken or f"{base}_history".lower() in taken:
            n += 1
            base = f"{name}_{n}"
        taken.update((base.lower(), f"{base}_history".lower()))
        names[name] = (base, f"{base}_history")
    return names


def check_read_only(statements: list[duckdb.Statement]) -> None:
    """A ``QueryError`` unless DuckDB parsed exactly one query (its SELECT statement type also
    covers WITH, FROM-first, VALUES, DESCRIBE, SHOW and SUMMARIZE)."""
    if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
        kinds = ", ".join(s.type.name for s in statements) or "nothing"
        raise QueryError(
            f"only one SELECT/WITH query is allowed, the view is read-only (got {kinds})"
        )


class SqlResult:
    """Columns and rows of a query result."""

    def __init__(self, columns: list[str], rows: list[tuple[Any, ...]]):
        self.columns = columns
        self.rows = rows

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, row, strict=True)) for row in self.rows]

    def __repr__(self) -> str:
        return f"SqlResult(columns={self.columns}, rows={len(self.rows)})"


class SqlView:
    def __init__(self) -> None:
        self.con = duckdb.connect(":memory:")
        self.con.execute("SET enable_external_access = false")
        self.con.execute("SET lock_configuration = true")
        self._built: dict[str, int] = {}
        self.tables: dict[str, tuple[str, str]] = {}
        self.con.execute(
            f"CREATE TABLE {INDEX_TABLE} (type VARCHAR, current_table VARCHAR, history_table VARCHAR)"
        )

    def refresh(self, state: State) -> None:
        names = table_names(t for t in state.schema.types if t in state.types)
        if names != self.tables:
            self.con.execute("BEGIN TRANSACTION")
            self.con.execute(
                f"CREATE OR REPLACE TABLE {INDEX_TABLE} "
                "(type VARCHAR, current_table VARCHAR, history_table VARCHAR)"
            )
            self.con.executemany(
                f"INSERT INTO {INDEX_TABLE} VALUES (?, ?, ?)",
                [(t, cur, hist) for t, (cur, hist) in names.items()],
            )
            self.con.execute("COMMIT")
            self.tables = names
        for name, ts in state.types.items():
            seq = state.type_seq.get(name, 0)
            if self._built.get(name) == seq:
                continue
            fields = state.schema.types[name]
            current, history = names[name]
            self._load(current, fields, list(ts.current.values()), history=False)
            self._load(history, fields, state.history(name), history=True)
            self._built[name] = seq

    def _load(
        self, table: str, fields: dict[str, str], records: list[Record], history: bool
    ) -> None:
        cols = [("key", "VARCHAR")] + [(f, sql_type(t)) for f, t in fields.items()]
        cols += [("valid_from", "TIMESTAMP"), ("valid_to", "TIMESTAMP"), ("sources", "BIGINT[]")]
        if history:
            cols.append(("retracted", "BOOLEAN"))
        ddl = ", ".join(f'"{c}" {t}' for c, t in cols)
        names = list(fields)
        rows = []
        for r in records:
            row = [
                r.key,
                *(getattr(r, f, None) for f in names),
                r.valid_from,
                r.valid_to,
                list(r.sources),
            ]
            if history:
                row.append(r.retracted)
            rows.append(tuple(row))
        con = self.con
        con.execute("BEGIN TRANSACTION")
        con.execute(f'CREATE OR REPLACE TABLE "{table}" ({ddl})')
        if rows:
            appender = con.appender(table)
            appender.append_rows(rows)
            appender.flush()
        con.execute("COMMIT")

    def _renamed(self) -> str:
        moved = [f"{t} is {cur}" for t, (cur, _) in self.tables.items() if cur != t]
        return f" (renamed to stay distinct: {', '.join(moved)})" if moved else ""

    def query(self, state: State, sql: str) -> SqlResult:
        self.refresh(state)
        cur = self.con.cursor()
        try:
            statements = cur.extract_statements(sql)
        except duckdb.Error as exc:
            raise QueryError(f"SQL failed: {str(exc).splitlines()[0]}") from None
        check_read_only(statements)
        # DuckDB calls `WITH d AS (DELETE ... RETURNING *) SELECT ...` a SELECT too: its parse
        # tree names a query node of every other kind (DELETE_QUERY_NODE, COPY_QUERY_NODE, ...).
        tree = cur.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
        writes = sorted(set(_WRITING_NODE.findall(tree[0] if tree else "")))
        if writes:
            kinds = ", ".join(w.removesuffix("_QUERY_NODE") for w in writes)
            raise QueryError(
                f"only one SELECT/WITH query is allowed, the view is read-only (got {kinds} in a WITH)"
            )
        try:
            cur.begin()  # always rolled back: whatever a query might change does not stay
            try:
                cur.execute(statements[0])
                columns = [d[0] for d in cur.description or []]
                return SqlResult(columns, cur.fetchall() if columns else [])
            finally:
                cur.rollback()
        except duckdb.Error as exc:
            first = str(exc).splitlines()[0]
            raise QueryError(
                f"SQL failed: {first}; tables are named after record types, e.g. Trip and"
                f" Trip_history{self._renamed()}; {INDEX_TABLE} lists them"
            ) from None
