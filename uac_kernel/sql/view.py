"""The SQL view of a user's state: one DuckDB table per record type, in a separate database.

Table ``Trip`` holds the current records of type ``Trip`` (DuckDB names are case-insensitive,
so ``trip`` works too) and ``Trip_history`` every version, ended and retracted ones included.
Columns: ``key``, the type's own fields, ``valid_from``, ``valid_to``, ``sources`` (BIGINT[]),
and in the history table ``retracted``. The view lives in its own in-memory database with
external access switched off, so a query can neither touch the log nor read or write files.
Only the types that changed since the last query are rebuilt.

A workbench's view builds a type's tables by SQL over the user's log in the store, up to the
state's ``seq`` (``sql.build``), and copies them in from a file in a private temporary
directory, the one place the view's database may read (``allowed_directories``), which holds
nothing between builds. A history table is built only when a query names it (or names no
table); a current table alone comes from the snapshot's typed table when the workbench's
snapshot holds the type (``stored``), with the records changed since, else from the log. A view with no store behind its state builds them from the state's
records in Python; the tests hold the two builds equal cell for cell. A query builds only the
tables it names (read from DuckDB's parse of it); one that names none, or a table that is no
type's (``SHOW TABLES``, ``duckdb_tables()``, a misspelt name), has every type's built first.

Names never shadow each other: types are named in the order they first appeared in the log, and
a type whose table (or ``_history`` table) would clash, ignoring case, with one already named or
with ``uac_tables`` gets the first free suffix that is no type's name: ``TRIP`` after ``Trip``
is ``TRIP_2`` and ``TRIP_2_history``. A name once given never changes (ingest refuses a new type
named like a renamed table). Table ``uac_tables`` (``type``, ``current_table``,
``history_table``) lists which table is which, and ``uac_constraints`` (``key``, ``kind``,
``title``, ``json``, ``valid_from``, ``rule``) the constraints in force, and ``uac_vocabulary``
(``type``, ``field``, ``concept``, ``role``, ``author``, ``score``, ``status``, ``reason``) the
user's vocabulary bindings (``uac vocab``).

A query cannot change the view: DuckDB's own parser must find exactly one statement and it must
be a query (``SELECT``, ``WITH``, ``FROM``, ``VALUES``, ``DESCRIBE``, ``SHOW``, ``SUMMARIZE``);
anything else is a ``QueryError`` before it runs. As a second wall the query runs inside a
transaction that is always rolled back, so even a table function with side effects leaves nothing.

A query is bounded so that it cannot take the machine: it is interrupted after ``timeout``
seconds (default 30; env ``UAC_SQL_TIMEOUT``; at most ``MAX_TIMEOUT``, a day, since a timer
cannot wait for ever), and the view's database may use at most
``memory_mb`` of memory (default the smaller of 2 GB and a quarter of the RAM; env
``UAC_SQL_MEMORY_MB``) and ``threads`` threads (default half the CPUs, at most 4; env
``UAC_SQL_THREADS``). Either limit ends the query with a one-line ``QueryError`` that names it
and how to raise it.

Integer columns are ``BIGINT`` unless a value does not fit: then ``HUGEINT`` (128 bits), and
beyond that ``VARCHAR`` holding the exact digits, so one huge number never breaks the view.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import duckdb
import orjson

from uac_kernel.core import settings
from uac_kernel.core.display import close_matches, printable
from uac_kernel.core.errors import QueryError
from uac_kernel.core.names import quote_ident
from uac_kernel.core.records import Record
from uac_kernel.sql.build import FromStored, build_types
from uac_kernel.sql.types import sql_type
from uac_kernel.state.fold import State
from uac_kernel.vocab.binding import Vocabulary

if TYPE_CHECKING:
    from uac_kernel.log.store import Store

__all__ = [
    "CONSTRAINTS_TABLE",
    "DEFAULT_TIMEOUT",
    "INDEX_TABLE",
    "MAX_TIMEOUT",
    "VOCABULARY_TABLE",
    "SqlResult",
    "SqlView",
    "check_read_only",
    "default_memory_mb",
    "default_threads",
    "run_read_only",
    "table_names",
]

INDEX_TABLE = "uac_tables"
CONSTRAINTS_TABLE = "uac_constraints"
VOCABULARY_TABLE = "uac_vocabulary"
_VOCABULARY_COLUMNS = (
    "type VARCHAR, field VARCHAR, concept VARCHAR, role VARCHAR, author VARCHAR, score DOUBLE, "
    "status VARCHAR, reason VARCHAR"
)
DEFAULT_TIMEOUT = 30.0
# threading.Timer cannot wait for inf or 1e300 s (OverflowError in its thread, and the query
# would run unbounded): a day is longer than any query should take.
MAX_TIMEOUT = settings.SQL_TIMEOUT.most
_WRITING_NODE = re.compile(r'"type":"([A-Z]+_QUERY_NODE)"')


def default_memory_mb() -> int:
    """The SQL view's memory limit: env UAC_SQL_MEMORY_MB, else the smaller of 2 GB and a
    quarter of the RAM."""
    try:
        ram_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    except (ValueError, OSError, AttributeError):
        ram_mb = 8192
    return settings.SQL_MEMORY_MB.get(min(2048, max(ram_mb // 4, 64)))


_CONSTRAINT_COLUMNS = (
    "key VARCHAR, kind VARCHAR, title VARCHAR, json JSON, valid_from TIMESTAMP, rule VARCHAR"
)


def default_threads() -> int:
    """The SQL view's threads: env UAC_SQL_THREADS, else half the CPUs (1 to 4)."""
    return settings.SQL_THREADS.get(min(4, max(1, (os.cpu_count() or 2) // 2)))


def table_names(
    type_names: Iterable[str], reserved: Iterable[str] = ()
) -> dict[str, tuple[str, str]]:
    """Each type's (current, history) table, in the given order (the log's): a name that would
    clash, ignoring case, with one already given or with ``uac_tables`` gets a ``_2``, ``_3``...
    suffix (so does one that would clash with a ``reserved`` table name), so no type hides another
    and earlier types keep their names as types are added. A
    suffixed name is never the name of a type (of any position), so ``FROM Trip_2`` reads type
    ``Trip_2`` and never ``TRIP`` renamed."""
    order = list(type_names)
    types = {t.lower() for t in order}
    taken = {INDEX_TABLE, CONSTRAINTS_TABLE, VOCABULARY_TABLE, *(r.lower() for r in reserved)}
    names: dict[str, tuple[str, str]] = {}
    for name in order:
        base, n = name, 1
        while (
            base.lower() in taken
            or f"{base}_history".lower() in taken
            or (n > 1 and (base.lower() in types or f"{base}_history".lower() in types))
        ):
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
    """The tables of one user's state and the queries over them, within time and memory limits
    (``None``: the default, see the module docstring).

    With the ``store`` the state was folded from, a type's tables are built by SQL over its log
    (``sql.build``), a current table alone from ``stored`` when it gives the type's records;
    without a store, from the state's records in Python."""

    def __init__(
        self,
        *,
        timeout: float | None = None,
        memory_mb: int | None = None,
        threads: int | None = None,
        store: Store | None = None,
        stored: FromStored | None = None,
    ) -> None:
        self.store = store
        self.stored = stored
        # With a store, the tables come through a file in this private directory, the only
        # place the view's database may read (sql/build.py); it holds nothing between refreshes.
        self._dir = tempfile.TemporaryDirectory(prefix="uac-sql-") if store is not None else None
        self._loads = 0
        self.timeout, self.memory_mb, self.threads = bounds(timeout, memory_mb, threads)
        self.con = duckdb.connect(":memory:")
        self.con.execute(f"SET memory_limit = '{int(self.memory_mb)}MB'")
        self.con.execute(f"SET threads = {int(self.threads)}")
        # Spilling to disk would need a temp directory: memory is the limit, not the disk.
        self.con.execute("SET temp_directory = ''")
        if self._dir is not None:
            self.con.execute("SET allowed_directories = ?", [[self._dir.name + os.sep]])
        self.con.execute("SET enable_external_access = false")
        self.con.execute("SET lock_configuration = true")
        # Each type's seq its current table, and its history table, were built at.
        self._built: dict[str, int] = {}
        self._built_history: dict[str, int] = {}
        self.tables: dict[str, tuple[str, str]] = {}
        self.con.execute(
            f"CREATE TABLE {INDEX_TABLE} (type VARCHAR, current_table VARCHAR, history_table VARCHAR)"
        )
        self._constraints_seq = 0
        self.con.execute(f"CREATE TABLE {CONSTRAINTS_TABLE} ({_CONSTRAINT_COLUMNS})")
        self._vocab: Vocabulary | None = None
        self.con.execute(f"CREATE TABLE {VOCABULARY_TABLE} ({_VOCABULARY_COLUMNS})")

    def refresh(self, state: State, sql: str | None = None) -> None:
        """Bring the tables up to ``state``: with ``sql``, only those of the types it reads
        (``reads``); without, every type's."""
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
        if state.constraint_seq != self._constraints_seq:
            self._load_constraints(state)
        if state.vocab is not self._vocab:  # a new vocabulary object after every change
            self._load_vocabulary(state.vocab)
        wanted = None if sql is None else self.reads(sql)
        stale, histories = [], set()
        for n in state.types:
            seq = state.type_seq.get(n, 0)
            if wanted is not None and n not in wanted:
                continue
            if (wanted is None or wanted[n]) and self._built_history.get(n) != seq:
                stale.append(n)
                histories.add(n)
            elif self._built.get(n) != seq:
                stale.append(n)
        if self.store is not None:
            self._build_sql(state, stale, histories, names)
            return
        # No log to build from (a view given only states): the tables from the records.
        for name in stale:
            ts = state.types[name]
            seq = state.type_seq.get(name, 0)
            fields = state.schema.types[name]
            current, history = names[name]
            versions = state.history(name)
            # One column type for both tables, fitted to every version's values.
            columns = [
                (f, sql_type(t, (getattr(r, f, None) for r in versions))) for f, t in fields.items()
            ]
            self._load(current, columns, list(ts.current.values()), history=False)
            self._load(history, columns, versions, history=True)
            self._built[name] = self._built_history[name] = seq

    def reads(self, sql: str) -> dict[str, bool] | None:
        """The types whose tables ``sql`` names, each with whether it names the history table
        (a query over ``Trip`` need not build ``Transaction``, nor ``Trip_history``;
        ``uac_tables`` alone needs none), or ``None`` for every table: when it names no table,
        or one that is no type's — a catalog query (``SHOW TABLES``, ``duckdb_tables()``) lists
        them all, and a misspelt name's error suggests among them all."""
        try:
            named = {n.lower() for n in self.con.get_table_names(sql)}  # a parse, no run
            tree = self.con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
        except duckdb.Error:
            return None  # the query's own error is reported when it runs
        if tree is None or '"type":"TABLE_FUNCTION"' in tree[0]:
            # pragma_table_info('Trip_history'), duckdb_columns()...: a table by a string or
            # every table, which the parse does not name
            return None
        by_table = {
            t.lower(): (name, part == 1)
            for name, pair in self.tables.items()
            for part, t in enumerate(pair)
        }
        own = {INDEX_TABLE, CONSTRAINTS_TABLE, VOCABULARY_TABLE}
        if not named or not named <= by_table.keys() | own:
            return None
        types: dict[str, bool] = {}
        for n in named & by_table.keys():
            name, history = by_table[n]
            types[name] = types.get(name, False) or history
        return types

    def _build_sql(
        self,
        state: State,
        stale: list[str],
        histories: set[str],
        names: dict[str, tuple[str, str]],
    ) -> None:
        if self.store is None or self._dir is None or not stale:
            return
        self._loads += 1
        path = os.path.join(self._dir.name, f"build{self._loads}.duckdb")
        try:
            # Bounded by the state's seq: the tables show the state the user sees.
            built = build_types(
                self.store.con,
                state.user,
                state.seq,
                {n: state.schema.types[n] for n in stale},
                path,
                history=histories,
                stored=self.stored,
            )
            con = self.con
            quoted = path.replace("'", "''")
            con.execute(f"ATTACH '{quoted}' AS uac_build (READ_ONLY)")
            try:
                con.execute("BEGIN TRANSACTION")
                try:
                    for i, (name, (_, whole)) in enumerate(built.items()):  # h<i>: stale[i]
                        current, history = names[name]
                        source, drop = f"uac_build.h{i}", "_user, retracted"
                        if whole:
                            con.execute(
                                f"CREATE OR REPLACE TABLE {quote_ident(history)} AS "
                                f"SELECT * EXCLUDE (_user) FROM {source}"
                            )
                            source, drop = quote_ident(history), "retracted"
                        con.execute(
                            f"CREATE OR REPLACE TABLE {quote_ident(current)} AS SELECT * "
                            f"EXCLUDE ({drop}) FROM {source} WHERE valid_to IS NULL"
                        )
                except BaseException:
                    con.execute("ROLLBACK")  # the view keeps its tables as they were
                    raise
                con.execute("COMMIT")
            finally:
                con.execute("DETACH uac_build")
        finally:
            for leftover in (path, path + ".wal"):
                if os.path.exists(leftover):
                    os.remove(leftover)
        for name, (_, whole) in built.items():
            self._built[name] = state.type_seq.get(name, 0)
            if whole:
                self._built_history[name] = self._built[name]

    def _load_constraints(self, state: State) -> None:
        from uac_kernel.constraints import constraint_json

        rows = [
            (
                cv.key,
                cv.constraint.kind,
                cv.constraint.title,
                orjson.dumps(constraint_json(cv.constraint)).decode(),
                cv.valid_from,
                cv.rule,
            )
            for cv in state.constraints.values()
        ]
        self._replace(CONSTRAINTS_TABLE, _CONSTRAINT_COLUMNS, rows)
        self._constraints_seq = state.constraint_seq

    def _load_vocabulary(self, vocab: Vocabulary) -> None:
        rows = [
            (b.type, b.field, b.target if b.field is not None else None,
             b.target.partition(".")[0], b.author, b.score, b.status, b.reason)
            for b in vocab.bindings
        ]  # fmt: skip
        self._replace(VOCABULARY_TABLE, _VOCABULARY_COLUMNS, rows)
        self._vocab = vocab

    def _replace(self, table: str, columns: str, rows: list[tuple[Any, ...]]) -> None:
        """Replace a table of uac's own with ``rows``, in one transaction."""
        con = self.con
        con.execute("BEGIN TRANSACTION")
        con.execute(f"CREATE OR REPLACE TABLE {table} ({columns})")
        if rows:
            appender = con.appender(table)
            appender.append_rows(rows)
            appender.flush()
        con.execute("COMMIT")

    def _load(
        self, table: str, columns: Sequence[tuple[str, str]], records: list[Record], history: bool
    ) -> None:
        cols = [("key", "VARCHAR"), *columns]
        cols += [("valid_from", "TIMESTAMP"), ("valid_to", "TIMESTAMP"), ("sources", "BIGINT[]")]
        if history:
            cols.append(("retracted", "BOOLEAN"))
        ddl = ", ".join(f"{quote_ident(c)} {t}" for c, t in cols)
        rows = []
        for r in records:
            row = [
                r.key,
                *(_cell(getattr(r, f, None), t) for f, t in columns),
                r.valid_from,
                r.valid_to,
                list(r.sources),
            ]
            if history:
                row.append(r.retracted)
            rows.append(tuple(row))
        con = self.con
        con.execute("BEGIN TRANSACTION")
        con.execute(f"CREATE OR REPLACE TABLE {quote_ident(table)} ({ddl})")
        if rows:
            appender = con.appender(table)
            appender.append_rows(rows)
            appender.flush()
        con.execute("COMMIT")

    def _renamed(self) -> str:
        moved = [f"{t} is {cur}" for t, (cur, _) in self.tables.items() if cur != t]
        return f" (renamed to stay distinct: {', '.join(moved)})" if moved else ""

    def query(self, state: State, sql: str, *, timeout: float | None = None) -> SqlResult:
        """Run one read-only query; ``timeout`` (seconds) overrides the view's time limit."""
        limit = self.timeout if timeout is None else timeout
        _check_timeout(limit)
        try:
            self.refresh(state, sql)
        except duckdb.OutOfMemoryException:
            raise QueryError(
                f"the user's records do not fit in the SQL memory limit of {self.memory_mb} MB; "
                "raise it with the environment variable UAC_SQL_MEMORY_MB"
            ) from None
        return run_read_only(
            self.con,
            sql,
            timeout=limit,
            memory_mb=self.memory_mb,
            hint=f"tables are named after record types, e.g. Trip and Trip_history"
            f"{self._renamed()}; {INDEX_TABLE} lists them",
            raise_timeout="sql(..., timeout=S), uac sql --timeout S, %uac sql --timeout S",
        )


def run_read_only(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    *,
    timeout: float,
    memory_mb: int,
    hint: str,
    raise_timeout: str,
) -> SqlResult:
    """Run one read-only query on a cursor of ``con`` (a locked-down database: external access
    off, configuration locked), interrupted after ``timeout`` seconds and always rolled back.
    A refused or failed query is a one-line ``QueryError``: ``hint`` follows a failure,
    ``raise_timeout`` says how to raise the time limit."""
    cur = con.cursor()
    try:
        statements = cur.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(f"SQL failed: {_first_line(exc)}") from None
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
    # DuckDB has no statement timeout: a timer interrupts the cursor (only this query's).
    timer = threading.Timer(timeout, cur.interrupt)
    timer.daemon = True
    try:
        cur.begin()  # always rolled back: whatever a query might change does not stay
        try:
            timer.start()
            cur.execute(statements[0])
            columns = [d[0] for d in cur.description or []]
            return SqlResult(columns, cur.fetchall() if columns else [])
        finally:
            timer.cancel()
            cur.rollback()
    except duckdb.InterruptException:
        raise QueryError(
            f"the query ran past the SQL time limit of {timeout:g} s and was stopped; narrow "
            f"it (filter, aggregate, LIMIT) or raise the limit: {raise_timeout}"
        ) from None
    except duckdb.OutOfMemoryException:
        raise QueryError(
            f"the query needed more than the SQL memory limit of {memory_mb} MB and was "
            "stopped; narrow it (filter, aggregate, LIMIT) or raise the limit with the "
            "environment variable UAC_SQL_MEMORY_MB"
        ) from None
    except duckdb.Error as exc:
        raise QueryError(f"SQL failed: {_first_line(exc)}; {_column_hint(exc) or hint}") from None


_NO_COLUMN = re.compile(
    r'Referenced column "([^"]*)" not found|does not have a column named "([^"]*)"'
)


def _column_hint(exc: duckdb.Error) -> str:
    """For a column no table of the query has: the closest of DuckDB's candidate columns
    (``did you mean "distanceKm"?``), else where to see them; ``""`` for any other error."""
    text = str(exc)
    found = _NO_COLUMN.search(text)
    if not found:
        return ""
    name = found.group(1) or found.group(2) or ""
    listed = re.search(r"Candidate bindings:[ :]*(.*)", text)
    candidates = re.findall(r'"([^"]*)"', listed.group(1)) if listed else []
    close = close_matches(name, candidates)
    if close:
        return printable(f'did you mean "{close[0]}"?')
    return "DESCRIBE <table> lists a table's columns"


def _first_line(exc: duckdb.Error) -> str:
    """The first line of a DuckDB error with its suggestion (``Did you mean "Trip"?``,
    ``Candidate bindings: ...``) when it makes one, escaped: it can quote the query or a stored
    value (``Could not convert string 'k\x1b]0;...'``), and either may hold control characters."""
    lines = str(exc).splitlines() or [""]
    text = lines[0]
    if len(lines) > 1 and lines[1].startswith(("Did you mean", "Candidate bindings")):
        text += " " + lines[1]
    return printable(text)


def _cell(value: Any, column: str) -> Any:
    """A value as its column holds it: an int past HUGEINT goes into VARCHAR as its digits."""
    if not column.startswith("VARCHAR") or value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        return [v if v is None or isinstance(v, str) else str(v) for v in value]
    return str(value)


def bounds(
    timeout: float | None, memory_mb: int | None, threads: int | None
) -> tuple[float, int, int]:
    """A SQL connection's time, memory and thread bounds: those given, else the environment's
    (``UAC_SQL_TIMEOUT``, ``UAC_SQL_MEMORY_MB``, ``UAC_SQL_THREADS``), each checked."""
    timeout = settings.SQL_TIMEOUT.get(DEFAULT_TIMEOUT) if timeout is None else timeout
    memory_mb = default_memory_mb() if memory_mb is None else memory_mb
    threads = default_threads() if threads is None else threads
    _check_timeout(timeout)
    _check_positive("memory_mb", memory_mb, settings.SQL_MEMORY_MB.most, whole=True)
    _check_positive("threads", threads, settings.SQL_THREADS.most, whole=True)
    return timeout, int(memory_mb), int(threads)


def _check_positive(name: str, value: float, most: float = math.inf, whole: bool = False) -> None:
    # the bound of the variable that sets it too: DuckDB starts as many threads as it is told;
    # ``whole``: 0.5 MB would be set as 0 (no limit), so a count is a whole number (2.0 is one)
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not 0 < value <= most
        or (whole and not float(value).is_integer())
    ):
        upto = f" up to {most:,}" if most < math.inf else ""
        kind = " (a whole number)" if whole else ""
        raise QueryError(f"the SQL {name} must be a positive number{upto}{kind}, not {value!r}")


def _check_timeout(value: float) -> None:
    _check_positive("timeout", value)
    if value > MAX_TIMEOUT:
        raise QueryError(
            f"the SQL timeout must be at most {MAX_TIMEOUT:.0f} seconds (a day), not {value!r}"
        )
