"""Snapshots of the fold in the store file, so an open folds only the events after them.

A user's snapshot is one row of table ``snapshots`` (the chain position it covers: ``user_seq``
and ``hash`` of the last event folded, the store ``seq``, the format, a generation counter and
a JSON ``meta`` with the schema, constraints, standing alerts and what the next checkpoint must
re-render) plus three typed tables per record type in schema ``uac_snap``: the current records
(``..._cur``, with their creation position ``pos``), the ended versions (``..._hist``, with
their place ``idx``) and the creation order (``..._ord``). Field columns are named ``c0``,
``c1``... (fields may differ only in case, which DuckDB names do not tell apart) and typed as
``uac sql`` types them; an aware date-time is kept as its ISO text, so it comes back equal.

On open (``load_snapshot``) the row is checked against the log: the event at ``user_seq`` must
have that hash, no ``forget`` may have come after it, the format, the meta and every table's
columns and row count must be as written, and the latest checkpoint must be the one it
recorded or a later one. Anything else is a ``SnapshotIgnored`` warning and a full fold. Records
are read lazily, per type and per part (``SnapTypeState``): the fold of the new events reads
only the rows of the keys they touch, and a type's table is read whole on first use.

No snapshot is never a different answer: ``DELETE FROM snapshots`` (or ``drop_snapshots``)
makes the next open fold the whole log.
"""

from __future__ import annotations

import ast
import hashlib
import os
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import CodeType
from typing import TYPE_CHECKING, Any

import duckdb
import orjson

from uac_kernel.checkpoints.snaptypes import (
    Mark,
    SnapTypeState,
    TypeMark,
    _Source,
    _wider,
    materialise,
    prefetch,
)
from uac_kernel.core.errors import SnapshotIgnored
from uac_kernel.core.records import Record
from uac_kernel.core.schema import Schema
from uac_kernel.log.store import LoggedEvent, Store, damaged, is_damage
from uac_kernel.rules.engine import Alert, Rule
from uac_kernel.sql.build import FromStored, Stored
from uac_kernel.sql.types import sql_type
from uac_kernel.state.fold import ConstraintVersion, State, TypeState
from uac_kernel.vocab.log import binding_json, binding_of

if TYPE_CHECKING:
    from uac_kernel.checkpoints.checkpoint import Checkpoint

__all__ = [
    "CLOSE_AFTER",
    "FORMAT",
    "SCHEMA",
    "Restored",
    "drop_snapshots",
    "fingerprint",
    "load_snapshot",
    "reads_records",
    "stored_current",
    "stored_for",
    "user_tag",
    "write_snapshot",
]

FORMAT = 1
"""The snapshot format; a snapshot of another format is ignored (and rewritten at the next write)."""

# ``Workbench.close`` writes a snapshot once this many events were folded since the last one:
# below it the next open's fold of the new events costs less than ~0.2 s at the fold's rate,
# while a write costs a transaction and, after an open that folded the whole log, a full write.
CLOSE_AFTER = 10_000

SCHEMA = "uac_snap"


def user_tag(user: str) -> str:
    """The prefix of a user's snapshot tables (a hash: any text can be a user id)."""
    return "u" + hashlib.sha256(user.encode()).hexdigest()[:16]


def _table(tag: str, index: int, part: str) -> str:
    return f'{SCHEMA}."{tag}_{index}_{part}"'


def _tables_of(con: duckdb.DuckDBPyConnection, tag: str | None) -> list[str]:
    rows = con.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = ?", [SCHEMA]
    ).fetchall()
    return [r[0] for r in rows if tag is None or r[0].startswith(tag + "_")]


def drop_snapshots(con: duckdb.DuckDBPyConnection, user: str | None = None) -> int:
    """Drop the snapshot of ``user`` (every user's with None), row and tables; return how many
    rows went. The next open of such a user folds the log in full."""
    tag = None if user is None else user_tag(user)
    for name in _tables_of(con, tag):
        quoted = name.replace('"', '""')  # a table of a hostile store may hold a quote
        con.execute(f'DROP TABLE {SCHEMA}."{quoted}"')
    where, params = ("", []) if user is None else (" WHERE user_id = ?", [user])
    row = con.execute(f"SELECT count(*) FROM snapshots{where}", params).fetchone()
    con.execute(f"DELETE FROM snapshots{where}", params)
    return int(row[0]) if row else 0


# -- columns -------------------------------------------------------------------------------


def snapshot_gen(con: duckdb.DuckDBPyConnection, user: str) -> int | None:
    """The generation of ``user``'s snapshot in the store (None: there is none)."""
    row = con.execute("SELECT gen FROM snapshots WHERE user_id = ?", [user]).fetchone()
    return None if row is None else int(row[0])


def _column(ftype: str, values: Iterable[Any]) -> str:
    """The column type of a field: ``sql_type``'s, but an aware date-time makes it text."""
    inner = ftype[5:-1] if ftype.startswith("list[") else ftype
    if inner != "datetime":
        return sql_type(ftype, values)
    listed = inner != ftype
    aware = any(
        d is not None and d.tzinfo is not None
        for v in values
        for d in ((v or ()) if listed else (v,))
    )
    column = "VARCHAR" if aware else "TIMESTAMP"
    return column + "[]" if listed else column


def _to_cell(value: Any, column: str) -> Any:
    """A value as its column holds it: text columns of ints and date-times hold their text."""
    if value is None or not column.startswith("VARCHAR"):
        return value
    if isinstance(value, list):
        return [_to_cell(v, "VARCHAR") for v in value]
    if isinstance(value, str):
        return value
    return value.isoformat() if isinstance(value, datetime) else str(value)


# -- lazy records --------------------------------------------------------------------------


def reads_records(expr: str) -> bool:
    """Whether a query expression can read records: only through ``user`` (record classes
    expose no records). One that does not parse is the sandbox's to refuse."""
    try:
        tree = ast.parse(expr, mode="eval")
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(n, ast.Name) and n.id == "user" for n in ast.walk(tree))


# -- rules ---------------------------------------------------------------------------------


def _code_digest(code: CodeType, h: Any) -> None:
    h.update(code.co_code)
    for c in code.co_consts:
        if isinstance(c, CodeType):
            _code_digest(c, h)
        elif isinstance(c, frozenset):
            h.update(repr(sorted(map(repr, c))).encode())
        else:
            h.update(repr(c).encode())
    h.update(repr(code.co_names).encode())


def fingerprint(r: Rule) -> str | None:
    """What a rule is, to tell whether alerts it left in a snapshot are still its answers:
    None for a rule whose code cannot be read (it always runs on open)."""
    code = getattr(r.func, "__code__", None)
    if not isinstance(code, CodeType):
        return None
    h = hashlib.sha256()
    watch = None if r.watch is None else sorted(r.watch)
    h.update(repr((r.name, watch, sorted(r.roles), r.severity, r.category, r.clock)).encode())
    h.update(repr((getattr(r.func, "__module__", ""), r.func.__qualname__)).encode())
    _code_digest(code, h)
    return h.hexdigest()[:32]


# -- writing -------------------------------------------------------------------------------


def _cv_json(cv: ConstraintVersion) -> dict[str, Any]:
    from uac_kernel.constraints import constraint_json

    return {
        "key": cv.key,
        "constraint": constraint_json(cv.constraint),
        "valid_from": cv.valid_from.isoformat(),
        "sources": list(cv.sources),
        "source": cv.source,
        "author": cv.author,
        "derived_from": list(cv.derived_from),
        "reason": cv.reason,
        "valid_to": cv.valid_to.isoformat() if cv.valid_to is not None else None,
        "retracted": cv.retracted,
        "ended_because": cv.ended_because,
        "rule": cv.rule,
    }


def _cv_of(d: dict[str, Any]) -> ConstraintVersion:
    from uac_kernel.constraints import parse_constraint
    from uac_kernel.core.constraint_names import legacy_rule_name

    return ConstraintVersion(
        key=d["key"],
        constraint=parse_constraint(d["constraint"], f"snapshot constraint {d['key']!r}"),
        valid_from=datetime.fromisoformat(d["valid_from"]),
        sources=tuple(d["sources"]),
        source=d["source"],
        author=d["author"],
        derived_from=tuple(d["derived_from"]),
        reason=d["reason"],
        valid_to=datetime.fromisoformat(d["valid_to"]) if d["valid_to"] else None,
        retracted=d["retracted"],
        ended_because=d["ended_because"],
        # A snapshot written before names were chosen: its constraints had the names of then.
        rule=d.get("rule") or legacy_rule_name(d["key"]),
    )


def _current_row(r: Record, pos: int, fields: list[list[str]]) -> tuple[Any, ...]:
    d = r.__dict__
    cells = [_to_cell(d.get(f), col) for f, _, col in fields]
    return (r.key, r.valid_from, list(r.sources), pos, *cells)


def _history_row(r: Record, idx: int, fields: list[list[str]]) -> tuple[Any, ...]:
    d = r.__dict__
    cells = [_to_cell(d.get(f), col) for f, _, col in fields]
    return (idx, r.key, r.valid_from, r.valid_to, list(r.sources), r.retracted, *cells)


def _ddl(fields: list[list[str]]) -> tuple[str, str, str]:
    cols = "".join(f", c{i} {col}" for i, (_, _, col) in enumerate(fields))
    return (
        f"key VARCHAR, valid_from TIMESTAMP, sources BIGINT[], pos BIGINT{cols}",
        "idx BIGINT, key VARCHAR, valid_from TIMESTAMP, valid_to TIMESTAMP, sources BIGINT[], "
        f"retracted BOOLEAN{cols}",
        "pos BIGINT, key VARCHAR",
    )


def _append(con: duckdb.DuckDBPyConnection, table: str, rows: list[tuple[Any, ...]]) -> None:
    if rows:
        appender = con.appender(table)
        appender.append_rows(rows)
        appender.flush()


def _write_type_full(
    con: duckdb.DuckDBPyConnection, tag: str, index: int, ts: TypeState, ftypes: dict[str, str]
) -> TypeMark:
    history = ts.load_history() if isinstance(ts, SnapTypeState) else ts.history
    order = ts.load_order() if isinstance(ts, SnapTypeState) else ts.order
    current = ts.load_current() if isinstance(ts, SnapTypeState) else ts.current
    position = ts.position
    versions = [*history, *current.values()]
    fields = [[f, t, _column(t, (r.__dict__.get(f) for r in versions))] for f, t in ftypes.items()]
    cur, hist, ordt = (_table(tag, index, p) for p in ("cur", "hist", "ord"))
    for table, ddl in zip((cur, hist, ordt), _ddl(fields), strict=True):
        con.execute(f"CREATE OR REPLACE TABLE {table} ({ddl})")
    _append(con, cur, [_current_row(r, position[k], fields) for k, r in current.items()])
    _append(con, hist, [_history_row(r, i, fields) for i, r in enumerate(history)])
    _append(con, ordt, list(enumerate(order)))
    return TypeMark(index, fields, len(history), len(order), len(current))


def _since(
    ts: TypeState, old: TypeMark
) -> tuple[list[Record], list[str], list[str], list[Record]] | None:
    """A type's entries since the snapshot ``old``: the versions ended and the keys created
    since, the keys they touch and those keys' current records; None when a column of ``old``
    cannot hold their values."""
    if isinstance(ts, SnapTypeState):
        new_hist = ts.tail("history", old.history)
        new_ord = ts.tail("order", old.order)
    else:
        new_hist, new_ord = ts.history[old.history :], ts.order[old.order :]
    touched = sorted({r.key for r in new_hist} | set(new_ord))
    current = ts.current
    now = [rec for k in touched if (rec := current.get(k)) is not None]
    changed = [*new_hist, *now]
    for f, t, col in old.fields:
        if _wider(_column(t, (r.__dict__.get(f) for r in changed)), col):
            return None
    return new_hist, new_ord, touched, now


def _write_type_delta(
    con: duckdb.DuckDBPyConnection, tag: str, ts: TypeState, old: TypeMark, ftypes: dict[str, str]
) -> TypeMark | None:
    """Bring one type's tables up to ``ts`` by its entries since ``old`` (new fields become new
    columns, unset in the rows already there); None when a column cannot hold the new values
    (the caller rewrites the type)."""
    known = [f[:2] for f in old.fields]
    if [[f, t] for f, t in ftypes.items()][: len(known)] != known:
        return None
    since = _since(ts, old)
    if since is None:
        return None
    new_hist, new_ord, touched, now = since
    fields = [*old.fields]
    cur, hist, ordt = (_table(tag, old.index, p) for p in ("cur", "hist", "ord"))
    for f, t in list(ftypes.items())[len(known) :]:
        col = _column(t, (r.__dict__.get(f) for r in (*new_hist, *now)))
        for table in (cur, hist):
            con.execute(f"ALTER TABLE {table} ADD COLUMN c{len(fields)} {col}")
        fields.append([f, t, col])
    if touched:
        con.execute(f"DELETE FROM {cur} WHERE key IN (SELECT unnest(?))", [touched])
    position = ts.position
    _append(con, cur, [_current_row(r, position[r.key], fields) for r in now])
    _append(con, hist, [_history_row(r, old.history + i, fields) for i, r in enumerate(new_hist)])
    _append(con, ordt, [(old.order + i, k) for i, k in enumerate(new_ord)])
    # Counted by DuckDB: a lazily read type would have to read every record to say it.
    row = con.execute(f"SELECT count(*) FROM {cur}").fetchone()
    rows = int(row[0]) if row else 0
    return TypeMark(old.index, fields, old.history + len(new_hist), old.order + len(new_ord), rows)


def write_snapshot(
    store: Store,
    state: State,
    active: Mapping[str, Mapping[str, Alert]],
    rules: Mapping[str, Rule],
    latest: Checkpoint | None,
    mark: Mark | None,
) -> Mark | None:
    """Write the snapshot of ``state`` (with the standing alerts ``active`` of ``rules``) in one
    transaction; the caller holds the store's writer lock. Types unchanged since ``mark`` (the
    snapshot this workbench read or wrote last) are left as they are, changed ones get their
    new rows only; the first write, or one after another process replaced the snapshot, writes
    every table. Returns the new mark (None: no event to cover yet)."""
    user = state.user
    con = store.con
    head = con.execute(
        "SELECT user_seq, hash FROM events WHERE user_id = ? AND seq = ?", [user, state.seq]
    ).fetchone()
    if head is None:
        return None
    tag = user_tag(user)
    row = con.execute("SELECT gen FROM snapshots WHERE user_id = ?", [user]).fetchone()
    gen = int(row[0]) + 1 if row else 1
    if mark is not None and (row is None or int(row[0]) != mark.gen):
        mark = None  # another writer's snapshot, or none: start afresh
    if mark is not None and mark.seq == state.seq:
        return mark  # nothing folded since: the snapshot still covers the state
    if mark is None:
        materialise(state)  # its records are in the tables about to be dropped
    marks: dict[str, TypeMark] = {}
    con.execute("BEGIN TRANSACTION")
    try:
        if mark is None:
            drop_snapshots(con, user)
        free = max((m.index for m in (mark.types.values() if mark else ())), default=-1) + 1
        for name, ts in state.types.items():
            ftypes = state.schema.types[name]
            old = mark.types.get(name) if mark is not None else None
            done = _write_type_delta(con, tag, ts, old, ftypes) if old is not None else None
            if done is None:
                index = old.index if old is not None else free
                free += old is None
                done = _write_type_full(con, tag, index, ts, ftypes)
            marks[name] = done
        fps = {name: fingerprint(r) for name, r in rules.items()}
        meta = {
            "schema": state.schema.types,
            "types": {
                n: {"index": m.index, "fields": m.fields, "history": m.history, "order": m.order,
                "current": m.current,
                    "builds": state.types[n].builds}
                for n, m in marks.items()
            },
            "now": state.now.isoformat() if state.now else None,
            "type_seq": state.type_seq,
            "constraint_seq": state.constraint_seq,
            "constraints": [_cv_json(cv) for cv in state.constraints.values()],
            "constraint_history": [_cv_json(cv) for cv in state.constraint_history],
            "vocab_seq": state.vocab_seq,
            "vocabulary": [binding_json(b) for b in state.vocab.bindings],
            "dirty": sorted(state.dirty),
            "checkpoint": [latest.version, latest.seq] if latest is not None else None,
            "alerts": {
                name: [a.model_dump(mode="json") for a in alerts.values()]
                for name, alerts in active.items()
                if name in rules and fps.get(name) is not None
            },
            "rules": {n: fp for n, fp in fps.items() if fp is not None},
        }  # fmt: skip
        con.execute("DELETE FROM snapshots WHERE user_id = ?", [user])
        con.execute(
            "INSERT INTO snapshots VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                user,
                int(head[0]),
                str(head[1]),
                state.seq,
                FORMAT,
                gen,
                datetime.now(UTC).replace(tzinfo=None),
                orjson.dumps(meta).decode(),
            ],
        )
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    new = Mark(gen, state.seq, marks)
    for name, ts in state.types.items():
        if isinstance(ts, SnapTypeState):
            m = marks[name]
            ts.rebase(_source(store, user, tag, m, gen), m)
    return new


def _source(store: Store, user: str, tag: str, m: TypeMark, gen: int) -> _Source:
    tables = (
        _table(tag, m.index, "cur"),
        _table(tag, m.index, "hist"),
        _table(tag, m.index, "ord"),
    )
    return _Source(store, user, tables, m.fields, gen, os.getpid())


def stored_current(
    cur: duckdb.DuckDBPyConnection, state: State, mark: Mark | None, name: str
) -> Stored | None:
    """The current records of type ``name`` of ``state`` (folded from the snapshot ``mark``,
    the one this workbench read or wrote last) as the snapshot's table and, in a temp table of
    the cursor ``cur``, the records changed since: for ``uac sql``, which then need not fold the
    log. None when the snapshot cannot give them: another process rewrote it, the type is not
    in it or has other fields now, or a changed value needs a wider column (as in
    ``_write_type_delta``)."""
    old = mark.types.get(name) if mark is not None else None
    ts = state.types.get(name)
    if mark is None or old is None or ts is None:
        return None
    if [list(f) for f in state.schema.types[name].items()] != [f[:2] for f in old.fields]:
        return None
    if snapshot_gen(cur, state.user) != mark.gen:
        return None
    since = _since(ts, old)
    if since is None:
        return None
    _, _, touched, now = since
    tag = user_tag(state.user)
    if not _columns_fit(cur, tag, old):
        return None
    delta = "uac_snap_changed"
    cur.execute(f"CREATE OR REPLACE TEMP TABLE {delta} ({_ddl(old.fields)[0]})")
    position = ts.position
    _append(cur, delta, [_current_row(r, position[r.key], old.fields) for r in now])
    table = _table(tag, old.index, "cur")
    return Stored(
        f"FROM {table} WHERE key NOT IN (SELECT unnest(?)) UNION ALL BY NAME FROM {delta}",
        [touched],
        old.fields,
    )


def _columns_fit(cur: duckdb.DuckDBPyConnection, tag: str, mark: TypeMark) -> bool:
    """Whether each column of a type's snapshot tables is the one ``_column`` gives its values
    (the state reads any int or date-time column back right; ``uac sql`` shows the column's
    type): a hostile store may retype a column and its meta together. An int column wider
    than BIGINT must hold a value that needs it."""
    wide: list[tuple[str, str]] = []  # (the narrower type, the column's cells)
    for i, (_, ftype, col) in enumerate(mark.fields):
        listed = ftype.startswith("list[")
        inner, base = ftype.removeprefix("list[").removesuffix("]"), col.removesuffix("[]")
        if listed != col.endswith("[]"):
            return False
        if inner == "int" and base in ("HUGEINT", "VARCHAR"):
            wide.append(("BIGINT" if base == "HUGEINT" else "HUGEINT", f"c{i}"))
            if listed:
                wide[-1] = (wide[-1][0], f"unnest(c{i})")
        elif base != sql_type(inner) and not (inner == "datetime" and base == "VARCHAR"):
            return False
    for narrower, cells in wide:
        rows = " UNION ALL ".join(
            f"SELECT {cells} AS v FROM {_table(tag, mark.index, part)}" for part in ("cur", "hist")
        )
        needed = f"bool_or(v IS NOT NULL AND TRY_CAST(v AS {narrower}) IS NULL)"
        row = cur.execute(f"SELECT {needed} FROM ({rows})").fetchone()
        if not (row and row[0]):
            return False
    return True


def stored_for(at: Callable[[], tuple[State, Mark | None]]) -> FromStored:
    """``stored_current`` of the state and snapshot mark ``at`` gives when a table is built (a
    workbench's, which a catch-up may replace)."""
    return lambda cur, name: stored_current(cur, *at(), name)


# -- reading -------------------------------------------------------------------------------


@dataclass
class Restored:
    """A state read from a snapshot, before the events after it are folded."""

    state: State
    mark: Mark
    now: datetime | None
    alerts: dict[str, dict[str, Alert]]  # standing alerts of each rule with a fingerprint
    rules: dict[str, str]  # rule name → fingerprint when the snapshot was written
    # The latest checkpoint came after the snapshot: fold up to it, then take the dirty set.
    checkpoint_seq: int | None

    def prefetch(self, events: Sequence[LoggedEvent]) -> None:
        user = self.state.user
        prefetch(self.state, (e.payload for e in events if e.kind == "fact" and e.user == user))


_TYPES_SQL = f"""
SELECT table_name, string_agg(column_name || ' ' || data_type, ', ' ORDER BY ordinal_position)
FROM information_schema.columns WHERE table_schema = '{SCHEMA}'
AND starts_with(table_name, ?) GROUP BY table_name
"""


def load_snapshot(store: Store, user: str, latest: Checkpoint | None) -> Restored | None:
    """The snapshot of ``user`` as a lazily read state, or None (with a ``SnapshotIgnored``
    warning when there was one that does not fit the log)."""
    con = store.con
    try:
        row = con.execute(
            "SELECT user_seq, hash, seq, format, gen, meta FROM snapshots WHERE user_id = ?",
            [user],
        ).fetchone()
    except duckdb.CatalogException:
        return None  # a store from before snapshots, opened read-only (so not migrated)
    if row is None:
        return None
    try:
        why, restored = _restore(store, user, row, latest)
    except (duckdb.Error, ValueError, KeyError, TypeError, IndexError, AttributeError) as exc:
        if isinstance(exc, duckdb.Error) and is_damage(exc):
            # the file, not the snapshot, is broken: folding the log would only meet it again
            raise damaged(store.path, exc) from None
        why, restored = f"it cannot be read ({type(exc).__name__}: {exc})".splitlines()[0], None
    if restored is None:
        warnings.warn(
            f"snapshot of {user} ignored: {why}; folding the log", SnapshotIgnored, stacklevel=3
        )
    return restored


def _restore(
    store: Store, user: str, row: tuple[Any, ...], latest: Checkpoint | None
) -> tuple[str, Restored | None]:
    from uac_kernel.core.errors import ConstraintError

    user_seq, chash, seq, fmt, gen, meta_text = row
    if fmt != FORMAT:
        return f"format {fmt}, this uac reads format {FORMAT}", None
    con = store.con
    at = con.execute(
        "SELECT seq, hash FROM events WHERE user_id = ? AND user_seq = ?", [user, user_seq]
    ).fetchone()
    if at is None or at[1] != chash or at[0] != seq:
        return f"the log has no event {user_seq} with the hash it covers", None
    forgot = con.execute(
        "SELECT count(*) FROM events WHERE user_id = ? AND seq > ? AND kind = 'forget'",
        [user, seq],
    ).fetchone()
    if forgot and forgot[0]:
        return "a forget erased events since it was written", None
    meta = orjson.loads(meta_text)
    cp = meta["checkpoint"]
    checkpoint_seq: int | None = None
    if latest is not None and [latest.version, latest.seq] != cp:
        if latest.seq < seq:
            return "the checkpoints changed since it was written", None
        checkpoint_seq = latest.seq
    elif latest is None and cp is not None:
        return "the checkpoints changed since it was written", None
    tag = user_tag(user)
    found = dict(con.execute(_TYPES_SQL, [tag + "_"]).fetchall())
    schema = Schema({t: dict(f) for t, f in meta["schema"].items()})
    marks: dict[str, TypeMark] = {}
    counts: list[str] = []
    for name, t in meta["types"].items():
        m = TypeMark(
            int(t["index"]), t["fields"], int(t["history"]), int(t["order"]), int(t["current"])
        )
        if [f[:2] for f in m.fields] != [[f, ft] for f, ft in schema.types[name].items()]:
            return f"its fields of {name} are not its schema's", None
        for part, want in zip(("cur", "hist", "ord"), _ddl(m.fields), strict=True):
            have = found.get(f"{tag}_{m.index}_{part}")
            if have is None:
                return f"table {part} of {name} is missing", None
            if have != want:
                return f"table {part} of {name} has columns {have}, not {want}", None
        marks[name] = m
        counts += [
            f"(SELECT count(*) FROM {_table(tag, m.index, 'hist')}) = {m.history}",
            f"(SELECT count(*) FROM {_table(tag, m.index, 'ord')}) = {m.order}",
            f"(SELECT count(*) FROM {_table(tag, m.index, 'cur')}) = {m.current}",
        ]
    if set(marks) != set(schema.types):
        return "it does not hold every type of its schema", None
    if counts:
        ok = con.execute("SELECT " + " AND ".join(counts)).fetchone()
        if not ok or not ok[0]:
            return "a table does not hold the rows it wrote", None
    state = State(user)
    state.schema = schema
    mark = Mark(int(gen), int(seq), marks)
    for name, m in marks.items():
        src = _source(store, user, tag, m, int(gen))
        builds = int(meta["types"][name]["builds"])
        state.types[name] = SnapTypeState.restore(name, schema.types[name], src, m, builds)
    state.seq = int(seq)
    state.now = datetime.fromisoformat(meta["now"]) if meta["now"] else None
    state.type_seq = {k: int(v) for k, v in meta["type_seq"].items()}
    state.constraint_seq = int(meta["constraint_seq"])
    try:
        state.constraints = {d["key"]: _cv_of(d) for d in meta["constraints"]}
        state.constraint_history = [_cv_of(d) for d in meta["constraint_history"]]
    except ConstraintError as exc:
        return f"a constraint does not parse ({exc})", None
    # A snapshot written before the vocabulary event kind has none (nor had its log).
    state.bind(binding_of(d) for d in meta.get("vocabulary", ()))
    state.vocab_seq = int(meta.get("vocab_seq", 0))
    state.take_changed_vocab()  # as the snapshot found it: its alerts were read through it
    if checkpoint_seq is None:
        state.dirty = {(str(a), str(b), int(c)) for a, b, c in meta["dirty"]}
    alerts = {
        name: {a["id"]: Alert.model_validate(a) for a in found_alerts}
        for name, found_alerts in meta["alerts"].items()
    }
    rules = {str(k): str(v) for k, v in meta["rules"].items()}
    now = state.now
    return "", Restored(state, mark, now, alerts, rules, checkpoint_seq)
