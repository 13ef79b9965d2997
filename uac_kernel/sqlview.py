"""The SQL view of a user's state: one DuckDB table per record type, in a separate database.

Table ``Trip`` holds the current records of type ``Trip`` (DuckDB names are case-insensitive,
so ``trip`` works too) and ``Trip_history`` every version, ended and retracted ones included.
Columns: ``key``, the type's own fields, ``valid_from``, ``valid_to``, ``sources`` (BIGINT[]),
and in the history table ``retracted``. The view lives in its own in-memory database with
external access switched off, so a query can neither touch the log nor read or write files.
Only the types that changed since the last query are rebuilt.
"""

from __future__ import annotations

from typing import Any

import duckdb

from uac_kernel.errors import QueryError
from uac_kernel.fold import State
from uac_kernel.records import Record

__all__ = ["SqlResult", "SqlView"]

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

    def refresh(self, state: State) -> None:
        for name, ts in state.types.items():
            seq = state.type_seq.get(name, 0)
            if self._built.get(name) == seq:
                continue
            fields = state.schema.types[name]
            self._load(name, fields, list(ts.current.values()), history=False)
            self._load(f"{name}_history", fields, state.history(name), history=True)
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

    def query(self, state: State, sql: str) -> SqlResult:
        self.refresh(state)
        try:
            cur = self.con.cursor()
            cur.execute(sql)
            columns = [d[0] for d in cur.description or []]
            return SqlResult(columns, cur.fetchall() if columns else [])
        except duckdb.Error as exc:
            first = str(exc).splitlines()[0]
            raise QueryError(
                f"SQL failed: {first}; tables are named after record types, e.g. Trip and Trip_history"
            ) from None
