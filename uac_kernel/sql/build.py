"""The SQL view's tables built by SQL over a log: one user's in the store's DuckDB (``uac sql``),
or every user's of a fleet directory (``fleet.sql``), by the same statements.

For each record type a cursor folds each user's fact events (for ``uac sql`` up to the state's
``seq``, erased ones left out, as the fold reads them) into the rows of ``<T>`` and
``<T>_history``: per key, the latest life (from its last ``add``), each field the value of the
latest event that gave it (``arg_max_null``, so an explicit null by an update clears it while a
field left out keeps its value), and window functions for the version each update or retract
ended. Every window and group is per (``user_id``, ``key``), so users never mix and one user's
rows are the same whichever other users the log holds. Rows are per user (``user_id`` order),
each user's in the fold's order: ended versions by the event that ended them, then the current
ones by the add that began their life.

A type whose history no query names needs only its current records: from a snapshot's typed
table and the records changed since (``Stored``, given by ``checkpoints.snapshot``), when the
snapshot can give them, else by the ``current`` part of the same fold.

The tables are written to a DuckDB file in the view's private directory, which the view's own
database (``SqlView``, external access off but for that directory) copies and then deletes:
DuckDB's own storage keeps every type exactly. User SQL never runs on the store's connection,
which sees every user's events.

Column types are ``sql.types.sql_type``'s; an int column's BIGINT/HUGEINT/VARCHAR choice is made
from the values in the log, as the Python build makes it from the versions' values.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import duckdb

from uac_kernel.core.names import quote_ident
from uac_kernel.sql.types import sql_type

__all__ = ["MIXED", "FromStored", "Stored", "build_type", "build_types", "load_facts"]

# The field type of a field whose type differs between users (fleet/sql.py): a VARCHAR column holding
# a string as it is and any other value as its JSON text.
MIXED = "mixed"

_FACTS = "uac_build_facts"
_EVENTS = "uac_build_events"
# A date-time with a UTC offset (the log's canonical form has none, but the fold reads one
# right): DuckDB's TIMESTAMP cast would drop the offset, so such text goes through TIMESTAMPTZ.
_OFFSET = r"\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d(:?\d\d)?)$"


@dataclass
class Stored:
    """A type's current records kept typed elsewhere in the store (a snapshot's table and the
    records changed since, see ``checkpoints.snapshot.stored_current``): the query ``sql``
    (with ``params``) selects columns ``key``, ``valid_from``, ``sources``, ``pos`` (the
    creation order) and ``c0``, ``c1``... for ``fields`` ([field, ftype, column type])."""

    sql: str
    params: list[Any]
    fields: list[list[str]]


# Given a cursor of the store's connection and a type's name, its current records as they are
# stored, or None when the store cannot give them as the state has them.
FromStored = Callable[[duckdb.DuckDBPyConnection, str], Stored | None]


def build_types(
    con: duckdb.DuckDBPyConnection,
    user: str,
    upto_seq: int,
    types: dict[str, dict[str, str]],
    path: str,
    *,
    history: Collection[str] | None = None,
    stored: FromStored | None = None,
) -> dict[str, tuple[list[tuple[str, str]], bool]]:
    """Write to a new DuckDB file at ``path`` the tables of ``types`` (name: {field: ftype}),
    built from ``user``'s fact events with ``seq <= upto_seq`` on a cursor of the store
    connection ``con``: table ``h<i>`` of the i-th type holds its current records (``valid_to``
    NULL), after its history when that was built. The history is built for the types in
    ``history`` (None: every type); another type's current records come from ``stored`` when
    it gives them. Return, in the order of ``types``, each type's columns (field, SQL type) and
    whether its history was built."""
    cur = con.cursor()
    try:
        # Attached to the store's database instance, which other workbenches of this process
        # may share: a name of its own.
        out = f"uac_build_{secrets.token_hex(8)}"
        cur.execute(f"ATTACH '{_quote(path)}' AS {out} (READ_WRITE)")
        try:
            tables = {name: f'{out}."h{i}"' for i, name in enumerate(types)}
            built: dict[str, tuple[list[tuple[str, str]], bool]] = {}
            logged = {}
            for name in types:
                whole = history is None or name in history
                rows = None if whole or stored is None else stored(cur, name)
                if rows is not None:
                    built[name] = (build_stored(cur, tables[name], rows, user), False)
                else:
                    logged[name] = whole
            if logged:
                load_facts(
                    cur,
                    "SELECT seq, ts, user_id, payload FROM events "
                    "WHERE user_id = ? AND kind = 'fact' AND seq <= ? AND salt <> ''",
                    [user, upto_seq],
                    list(logged),
                )
                for name, whole in logged.items():
                    # A field may be named user_id: the user column gets a name no field can have.
                    columns = build_type(
                        cur, tables[name], name, types[name], user_column="_user", history=whole
                    )
                    built[name] = (columns, whole)
            return {name: built[name] for name in types}
        finally:
            cur.execute(f"DETACH {out}")
    finally:
        cur.close()  # its temp tables go with it


def build_stored(
    cur: duckdb.DuckDBPyConnection, table: str, rows: Stored, user: str
) -> list[tuple[str, str]]:
    """Create ``table`` from stored current records, as ``build_type`` makes a current-only
    table: the stored text of an aware date-time becomes the UTC time the fold's build gives."""
    columns, cells = [], []
    for i, (f, ftype, column) in enumerate(rows.fields):
        cell = f"c{i}"
        if ftype == "datetime" and column == "VARCHAR":
            cell, column = _timestamp(cell), "TIMESTAMP"
        elif ftype == "list[datetime]" and column == "VARCHAR[]":
            cell, column = f"list_transform({cell}, lambda s: {_timestamp('s')})", "TIMESTAMP[]"
        cells.append(f", {cell} AS {quote_ident(f)}")
        columns.append((f, column))
    # Ordered by a name no field can have: ORDER BY takes a select-list name first (a field
    # may be named pos).
    cur.execute(
        f"CREATE TABLE {table} AS SELECT ?::VARCHAR AS _user, key{''.join(cells)}, valid_from, "
        "NULL::TIMESTAMP AS valid_to, sources, false AS retracted "
        f"FROM (SELECT pos AS _pos, * FROM ({rows.sql})) ORDER BY _pos",
        [user, *rows.params],
    )
    return columns


def load_facts(
    cur: duckdb.DuckDBPyConnection, events: str, params: list[Any], types: list[str]
) -> None:
    """Parse once, into a temp table of ``cur``, the type, key and op of the fact events that
    the query ``events`` (columns seq, ts, user_id, payload; parameters ``params``) selects,
    keeping those of ``types``."""
    cur.execute(
        f"CREATE OR REPLACE TEMP TABLE {_FACTS} AS "
        "SELECT seq, ts, _user, payload, h[1] AS type, h[2] AS key, h[3] AS op FROM ("
        "SELECT seq, ts, user_id AS _user, payload, "
        f"json_extract_string(payload, ['$.type', '$.key', '$.op']) AS h FROM ({events})) "
        "WHERE type IN (SELECT unnest(?))",
        [*params, types],
    )


def _quote(text: str) -> str:
    return text.replace("'", "''")


def _timestamp(text: str) -> str:
    return (
        f"CASE WHEN regexp_matches({text}, '{_OFFSET}') "
        f"THEN make_timestamp(epoch_us(CAST({text} AS TIMESTAMPTZ))) "
        f"ELSE CAST({text} AS TIMESTAMP) END"
    )


def _value(x: str, ftype: str, column: str) -> str:
    """The SQL expression of JSON value ``x`` of a field of ``ftype`` as type ``column``."""
    if ftype == MIXED:
        return f"({x}->>'$')"
    if ftype == "datetime":
        return _timestamp(f"({x}->>'$')")
    if ftype == "list[datetime]":
        return f"list_transform(CAST({x} AS VARCHAR[]), lambda s: {_timestamp('s')})"
    if column == "VARCHAR":  # a str, or an int too big for HUGEINT: its digits
        return f"({x}->>'$')"
    if ftype == "date":
        return f"CAST({x}->>'$' AS DATE)"
    return f"CAST({x} AS {column})"


def _int_columns(
    cur: duckdb.DuckDBPyConnection, name: str, fields: dict[str, str]
) -> dict[str, str]:
    """Each int or list[int] field's column: the narrowest of BIGINT, HUGEINT and VARCHAR that
    holds every value the type's events give it (``sql.types._int_column`` over the versions)."""
    ints = [(f, t) for f, t in fields.items() if t in ("int", "list[int]")]
    if not ints:
        return {}
    checks = []
    for n, (_, t) in enumerate(ints):
        for wide in ("BIGINT", "HUGEINT"):
            if t == "int":
                test = (
                    f"TRY_CAST(v[{n + 1}]->>'$' AS {wide}) IS NULL AND v[{n + 1}]->>'$' IS NOT NULL"
                )
            else:
                test = (
                    f"list_bool_or(list_transform(json_extract_string(v[{n + 1}], '$[*]'), "
                    f"lambda s: s IS NOT NULL AND TRY_CAST(s AS {wide}) IS NULL))"
                )
            checks.append(f"coalesce(bool_or({test}), false)")
    row = cur.execute(
        f"SELECT {', '.join(checks)} FROM (SELECT {_extract([f for f, _ in ints])} AS v "
        f"FROM {_FACTS} WHERE type = ?)",
        [name],
    ).fetchone()
    flags = list(row) if row else [False] * len(checks)
    out = {}
    for n, (f, t) in enumerate(ints):
        column = "VARCHAR" if flags[2 * n + 1] else "HUGEINT" if flags[2 * n] else "BIGINT"
        out[f] = column + ("[]" if t == "list[int]" else "")
    return out


def _extract(fields: list[str]) -> str:
    """The fields' JSON values in one parse of the payload: the n-th is NULL when the event
    leaves the field out, JSON null when it sets it to null. A field name may hold any character
    (names.py): each is a JSON pointer (``~`` and ``/`` escaped) in an SQL string (``'`` doubled)."""
    paths = (f.replace("~", "~0").replace("/", "~1").replace("'", "''") for f in fields)
    return "json_extract(payload, [{}])".format(", ".join(f"'/fields/{p}'" for p in paths))


def build_type(
    cur: duckdb.DuckDBPyConnection,
    table: str,
    name: str,
    fields: dict[str, str],
    *,
    columns: dict[str, str] | None = None,
    user_column: str = "user_id",
    history: bool = True,
) -> list[tuple[str, str]]:
    """Create ``table`` (a quoted, maybe qualified name) from the loaded facts of type ``name``:
    its history, the user column ``user_column`` first, the current records last (``valid_to``
    NULL); without ``history``, the current records alone. A field's column is named
    ``columns[field]`` (default: the field's name as written, quoted by names.quote_ident).
    Return its field columns (field, SQL type)."""
    ints = _int_columns(cur, name, fields)
    named = columns or {}
    field_columns = [
        (f, ints.get(f) or ("VARCHAR" if t == MIXED else sql_type(t))) for f, t in fields.items()
    ]
    # Per field n: whether the event sets it (_s<n>) and to what (_v<n>, typed). An add sets
    # every field, to null when it leaves it out: a record's new life starts blank, never with
    # the values of the life a retract ended, so a key needs no partition per life. Working
    # names start with '_', which no field's does: a field may be named seq, op or before.
    typed = "".join(
        f", op = 'add' OR v[{n + 1}] IS NOT NULL AS _s{n}, "
        f"{_value(f'v[{n + 1}]', fields[f], col)} AS _v{n}"
        for n, (f, col) in enumerate(field_columns)
    )
    cur.execute(
        f"CREATE OR REPLACE TEMP TABLE {_EVENTS} AS "
        f"SELECT seq AS _seq, ts AS _ts, _user, key, op AS _op{typed} FROM "
        f"(SELECT seq, ts, _user, key, op{', ' + _extract(list(fields)) + ' AS v' if fields else ''} "
        f"FROM {_FACTS} WHERE type = ?)",
        [name],
    )
    latest = "".join(
        f", arg_max_null(_v{n}, _seq) FILTER (WHERE _s{n}) AS {quote_ident(named.get(f, f))}"
        for n, (f, _) in enumerate(field_columns)
    )
    names = "".join(f", {quote_ident(named.get(f, f))}" for f, _ in field_columns)
    # Each ended version: the values before an update or retract; a struct keeps a field set
    # to null by an event apart from a field the event left out.
    before = "OVER (PARTITION BY _user, key ORDER BY _seq ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)"
    carried = "".join(
        f", (last_value(CASE WHEN _s{n} THEN struct_pack(v := _v{n}) END IGNORE NULLS) "
        f"{before}).v AS {quote_ident(named.get(f, f))}"
        for n, (f, _) in enumerate(field_columns)
    )
    # Only keys with an update or retract have ended versions: the windows see only their events.
    # One table, the history: ended versions, then the current version of each live key (the
    # events of its last life, from its last add), which the view takes as its current table
    # (``valid_to`` NULL), so the rows are built and written once.
    ended = f"""SELECT _user, key{names}, valid_from, _ts AS valid_to,
                list_filter(_before, lambda _x: _x >= _life_start)
                    || CASE WHEN _op = 'retract' THEN [_seq] ELSE [] END AS sources,
                _op = 'retract' AS retracted, 0 AS _part, _seq AS _o
            FROM w WHERE _op <> 'add'
            UNION ALL"""
    windows = f"""w AS (SELECT _seq, _user, key, _op, _ts{carried},
            lag(_ts) OVER (PARTITION BY _user, key ORDER BY _seq) AS valid_from,
            max(CASE WHEN _op = 'add' THEN _seq END)
                OVER (PARTITION BY _user, key ORDER BY _seq) AS _life_start,
            list(_seq) {before} AS _before FROM {_EVENTS}
            WHERE (_user, key) IN (SELECT (_user, key) FROM {_EVENTS} WHERE _op <> 'add')),"""
    cur.execute(
        f"""CREATE TABLE {table} AS
        WITH {windows if history else ""}
        life AS (SELECT _user, key, max(_seq) FILTER (WHERE _op = 'add') AS _start
            FROM {_EVENTS} GROUP BY _user, key),
        current AS (SELECT _user, key{latest}, arg_max(_ts, _seq) AS valid_from,
            NULL::TIMESTAMP AS valid_to, list(_seq ORDER BY _seq) AS sources, false AS retracted,
            1 AS _part, min(_seq) AS _o
            FROM {_EVENTS} JOIN life USING (_user, key) WHERE _seq >= _start
            GROUP BY _user, key HAVING bool_and(_op <> 'retract'))
        SELECT _user AS "{user_column}", key{names}, valid_from, valid_to, sources, retracted
        FROM ({ended if history else ""}
            FROM current)
        ORDER BY _user, _part, _o"""
    )
    return field_columns
