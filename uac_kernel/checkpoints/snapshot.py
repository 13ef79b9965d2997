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
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import CodeType
from typing import TYPE_CHECKING, Any

import duckdb
import orjson

from uac_kernel.core.errors import SnapshotIgnored, StoreError
from uac_kernel.core.records import Record, new_record
from uac_kernel.core.schema import Schema
from uac_kernel.log.store import LoggedEvent, Store, damaged, is_damage
from uac_kernel.rules.engine import Alert, Rule
from uac_kernel.sql.types import sql_type
from uac_kernel.state.fold import (
    ConstraintVersion,
    FieldIndex,
    State,
    TypeState,
    moved,
    order_value,
)
from uac_kernel.vocab.log import binding_json, binding_of

if TYPE_CHECKING:
    from uac_kernel.checkpoints.checkpoint import Checkpoint

__all__ = [
    "CLOSE_AFTER",
    "FORMAT",
    "Mark",
    "Restored",
    "SnapTypeState",
    "drop_snapshots",
    "fingerprint",
    "load_snapshot",
    "materialise",
    "prefetch",
    "reads_records",
    "write_snapshot",
]

FORMAT = 1
"""The snapshot format; a snapshot of another format is ignored (and rewritten at the next write)."""

# ``Workbench.close`` writes a snapshot once this many events were folded since the last one:
# below it the next open's fold of the new events costs less than ~0.2 s at the fold's rate,
# while a write costs a transaction and, after an open that folded the whole log, a full write.
CLOSE_AFTER = 10_000

SCHEMA = "uac_snap"
# Past this many keys a query by key costs more than reading the type's table whole.
PREFETCH_MAX = 20_000
# Queries by key a type may make before the next key it misses reads the part whole: a reader
# that keeps missing (a checkpoint rendering blocks, a rule going through records, many ingest
# batches) is going through the type, which costs one query per key, while a whole part costs
# what reading its rows costs (less than the fold of the log a plain open makes).
BY_KEY_QUERIES = 4
_RANK = {"BIGINT": 0, "HUGEINT": 1, "TIMESTAMP": 0, "VARCHAR": 2}


def _tag(user: str) -> str:
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
    tag = None if user is None else _tag(user)
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


def _reader(ftype: str, column: str) -> Any:
    """The converter from a cell back to the field value (None: the cell is the value)."""
    inner = ftype[5:-1] if ftype.startswith("list[") else ftype
    if not column.startswith("VARCHAR") or inner == "str":
        return None
    one = int if inner == "int" else datetime.fromisoformat
    if inner != ftype:
        return lambda v: None if v is None else [None if x is None else one(x) for x in v]
    return lambda v: None if v is None else one(v)


def _wider(new: str, old: str) -> bool:
    """Whether a column of type ``new`` cannot be stored in one of type ``old``."""
    base_new, base_old = new.removesuffix("[]"), old.removesuffix("[]")
    return base_new != base_old and _RANK.get(base_new, 9) > _RANK.get(base_old, 9)


@dataclass
class TypeMark:
    """Where one type's snapshot tables are and what they hold."""

    index: int
    fields: list[list[str]]  # [field, ftype, column type] in field order
    history: int  # rows of the history table (ended versions)
    order: int  # rows of the order table
    current: int  # rows of the current table


@dataclass
class Mark:
    """What the snapshot in the file holds, as the workbench that wrote or read it saw it."""

    gen: int
    seq: int
    types: dict[str, TypeMark] = field(default_factory=dict)


# -- lazy records --------------------------------------------------------------------------


@dataclass
class _Source:
    store: Store
    user: str
    tables: tuple[str, str, str]  # current, history, order
    fields: list[list[str]]
    gen: int
    pid: int
    reads: int = 0  # queries made (tests bound it by the number of types, not keys)

    def fetch(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        self.reads += 1
        if os.getpid() != self.pid:
            raise StoreError(
                f"records of {self.user!r} were not read before this process forked; "
                "read them in the parent first (uac_kernel.checkpoints.snapshot.materialise)"
            )
        # A read of ``wb.state`` outside any operation holds the file only while it runs.
        with self.store.hold():
            con = self.store.con
            row = con.execute("SELECT gen FROM snapshots WHERE user_id = ?", [self.user]).fetchone()
            if row is None or int(row[0]) != self.gen:
                raise StoreError(
                    f"the snapshot of user {self.user!r} was rewritten since this workbench read "
                    "it; call wb.refresh() to catch up (or reopen the workbench)"
                )
            return con.execute(sql, params).fetchall()


_ORDERED = ("BIGINT", "HUGEINT", "DOUBLE", "TIMESTAMP", "DATE")  # see SnapTypeState.index
_CURRENT = ("key", "valid_from", "sources")  # the leading columns of rows read
_ENDED = ("key", "valid_from", "valid_to", "sources", "retracted")
# The slots of TypeState, which the properties of SnapTypeState hide.
_CUR: Any = TypeState.__dict__["current"]
_HIST: Any = TypeState.__dict__["history"]
_ORD: Any = TypeState.__dict__["order"]
_POS: Any = TypeState.__dict__["position"]


class SnapTypeState(TypeState):
    """A ``TypeState`` whose records are in snapshot tables until first needed.

    Until its part is read, ``current`` answers a key from the rows fetched for it (one query
    for the keys a batch of events touches, see ``prefetch``) and records what the fold sets
    or deletes; ``history`` and ``order`` count and collect what the fold appends. Anything
    else (iterating, slicing, a length of ``current``) reads the whole table once and replays
    what was collected over it, so every answer is what a full fold gives.

    Reads by key are few: after ``BY_KEY_QUERIES`` of them (or one of more than
    ``PREFETCH_MAX`` keys) a key not yet read reads the part whole, so no reader makes one
    query per key, whatever it reads and however many batches it folds.
    """

    __slots__ = (
        "_by_key",
        "_hist_base",
        "_hist_new",
        "_loaded",
        "_ops",
        "_ord_base",
        "_ord_new",
        "_pos",
        "_proxies",
        "_seen",
        "_src",
    )

    _src: _Source
    _by_key: int  # queries by key made so far
    _loaded: set[str]
    _seen: dict[str, Record | None]
    _ops: list[tuple[str, Record | None]]
    _pos: dict[str, int]
    _hist_base: int
    _hist_new: list[Record]
    _ord_base: int
    _ord_new: list[str]
    _proxies: tuple[_LazyCurrent, _LazyList, _LazyList, _LazyPosition]

    @classmethod
    def restore(
        cls, name: str, fields: dict[str, str], src: _Source, mark: TypeMark, builds: int
    ) -> SnapTypeState:
        ts = cls.__new__(cls)
        TypeState.__init__(ts, name, Record, builds=builds)
        ts.define(fields)
        ts._src, ts._loaded, ts._by_key = src, set(), 0
        ts._seen, ts._ops, ts._pos = {}, [], {}
        ts._hist_base, ts._hist_new = mark.history, []
        ts._ord_base, ts._ord_new = mark.order, []
        ts._proxies = (
            _LazyCurrent(ts),
            _LazyList(ts, "history"),
            _LazyList(ts, "order"),
            _LazyPosition(ts),
        )
        return ts

    # The dataclass __init__ sets each part through these setters: a part set is a part read.
    @property
    def current(self) -> dict[str, Record]:
        if "current" in self._loaded:
            return _CUR.__get__(self)
        return self._proxies[0]  # type: ignore[return-value]

    @current.setter
    def current(self, value: dict[str, Record]) -> None:
        _CUR.__set__(self, value)
        _loaded(self).add("current")

    @property
    def history(self) -> list[Record]:
        if "history" in self._loaded:
            return _HIST.__get__(self)
        return self._proxies[1]  # type: ignore[return-value]

    @history.setter
    def history(self, value: list[Record]) -> None:
        _HIST.__set__(self, value)
        _loaded(self).add("history")

    @property
    def order(self) -> list[str]:
        if "order" in self._loaded:
            return _ORD.__get__(self)
        return self._proxies[2]  # type: ignore[return-value]

    @order.setter
    def order(self, value: list[str]) -> None:
        _ORD.__set__(self, value)
        _loaded(self).add("order")

    @property
    def position(self) -> dict[str, int]:
        if "order" in self._loaded:
            return _POS.__get__(self)
        return self._proxies[3]  # type: ignore[return-value]

    @position.setter
    def position(self, value: dict[str, int]) -> None:
        _POS.__set__(self, value)

    def settle(self, fields: dict[str, str]) -> None:
        """As ``TypeState.settle``, but records still in the tables are not read for it: they
        are built on the new class when read; only those already read are moved onto it."""
        if not self.stale:
            return
        if {"current", "history"} <= self._loaded:
            super().settle(fields)
            return
        cls = self.cls = self.new_class(fields)
        self.builds += 1
        self.stale = False
        if "current" in self._loaded:
            self.current = {k: moved(cls, r) for k, r in _CUR.__get__(self).items()}
        else:
            self._seen = {k: r and moved(cls, r) for k, r in self._seen.items()}
            self._ops = [(k, r and moved(cls, r)) for k, r in self._ops]
        if "history" in self._loaded:
            self.history = [moved(cls, r) for r in _HIST.__get__(self)]
        else:
            self._hist_new = [moved(cls, r) for r in self._hist_new]

    def index(self, name: str) -> FieldIndex:
        """As ``TypeState.index``, but built from the key and field columns of the table while
        the records are not read, and prefetching the records a range of it returns."""
        idx = self.indexes.get(name)
        if idx is not None or "current" in self._loaded:
            return idx if idx is not None else super().index(name)
        fields = [f for f, _, _ in self._src.fields]
        column, read, direct, order = "", None, False, ""
        if name in fields:
            i = fields.index(name)
            _, ftype, col = self._src.fields[i]
            read = _reader(ftype, col)
            # Numbers and naive date-times are their own order value, and a date is its midnight
            # (``order_value``): DuckDB gives them so, sorted, and Python only checks the order.
            direct = col in _ORDERED
            column = f", CAST(c{i} AS TIMESTAMP)" if col == "DATE" else f", c{i}"
            order = " ORDER BY 3, 1" if direct else ""
        rows = self._src.fetch(f"SELECT key, pos{column} FROM {self._src.tables[0]}{order}", [])
        entries: list[tuple[Any, str]] = []
        unset = _Prefetching(self)
        seen, known = self._seen, self._pos
        for key, pos, *cell in rows:
            known.setdefault(key, int(pos))
            if key in seen:  # touched since the snapshot: its record says (below)
                continue
            v = cell[0] if cell else None
            if not direct:
                v = order_value(read(v) if read is not None and v is not None else v)
            if v is None:
                unset.add(key)
            else:
                entries.append((v, key))
        for key, rec in seen.items():
            if rec is not None:
                v = order_value(rec.__dict__.get(name))
                if v is None:
                    unset.add(key)
                else:
                    entries.append((v, key))
        entries.sort()
        idx = self.indexes[name] = _SnapIndex(entries, unset)
        idx.ts = self
        return idx

    # -- reading the tables -----------------------------------------------------------------

    def _readers(self) -> list[Any]:
        return [_reader(ft, col) for _, ft, col in self._src.fields]

    def _columns(self) -> str:
        return "".join(f", c{i}" for i in range(len(self._src.fields)))

    def _by_key_allowed(self, keys: int) -> bool:
        """Whether ``keys`` keys may be read by a query by key, counting it; False once the type
        spent its ``BY_KEY_QUERIES`` or past ``PREFETCH_MAX`` keys: the caller reads whole."""
        if keys > PREFETCH_MAX or self._by_key >= BY_KEY_QUERIES:
            return False
        self._by_key += 1
        return True

    def prefetch(self, keys: Iterable[str]) -> None:
        """Read the current rows of ``keys`` (one query, or the whole table past the budget of
        reads by key), so the fold finds them."""
        if "current" in self._loaded:
            return
        todo = sorted({k for k in keys if k not in self._seen})
        if not todo:
            return
        if not self._by_key_allowed(len(todo)):
            self.load_current()
            return
        rows = self._src.fetch(
            f"SELECT pos, key, valid_from, sources{self._columns()} FROM {self._src.tables[0]} "
            "WHERE key IN (SELECT unnest(?))",
            [todo],
        )
        for key in todo:
            self._seen[key] = None
        for (pos, *_), rec in zip(rows, self._make([r[1:] for r in rows], _CURRENT), strict=True):
            self._seen[rec.key] = rec
            self._pos.setdefault(rec.key, int(pos))

    def _make(self, rows: Iterable[Sequence[Any]], lead: tuple[str, ...]) -> list[Record]:
        """Records of rows that hold the values of ``lead``, then the field columns."""
        fields = [f for f, _, _ in self._src.fields]
        names = [*lead, *fields]
        convert = [(f, read) for f, read in zip(fields, self._readers(), strict=True) if read]
        # Every value in the order the fold gives them, so the records equal the fold's.
        base: dict[str, Any] = {
            "key": None,
            "valid_from": None,
            "valid_to": None,
            "sources": (),
            "retracted": False,
            **self.blank,
        }
        cls = self.cls
        out = []
        for row in rows:
            values = base.copy()
            values.update(zip(names, row, strict=True))
            values["sources"] = tuple(values["sources"])
            for f, read in convert:
                if (v := values[f]) is not None:
                    values[f] = read(v)
            out.append(new_record(cls, values))
        return out

    def lookup(self, key: str) -> Record | None:
        """The current record of ``key`` (None: none), reading the part whole past the budget."""
        if key not in self._seen:
            self.prefetch([key])
            if "current" in self._loaded:
                return _CUR.__get__(self).get(key)
        return self._seen[key]

    def load_current(self) -> dict[str, Record]:
        if "current" not in self._loaded:
            rows = self._src.fetch(
                f"SELECT pos, key, valid_from, sources{self._columns()} "
                f"FROM {self._src.tables[0]} ORDER BY pos",
                [],
            )
            # The positions of current keys come with them: the fold and the code rendering
            # ask for them, and the order table would otherwise be read one key at a time.
            known = self._pos
            for pos, key, *_ in rows:
                known.setdefault(key, int(pos))
            records = {rec.key: rec for rec in self._make([r[1:] for r in rows], _CURRENT)}
            for key, rec in self._ops:
                if rec is None:
                    del records[key]
                else:
                    records[key] = rec
            self._ops, self._seen = [], {}
            self.current = records
        return _CUR.__get__(self)

    def load_history(self) -> list[Record]:
        if "history" not in self._loaded:
            rows = self._src.fetch(
                f"SELECT key, valid_from, valid_to, sources, retracted{self._columns()} "
                f"FROM {self._src.tables[1]} ORDER BY idx",
                [],
            )
            self.history = [*self._make(rows, _ENDED), *self._hist_new]
            self._hist_new = []
        return _HIST.__get__(self)

    def load_order(self) -> list[str]:
        if "order" not in self._loaded:
            rows = self._src.fetch(f"SELECT key FROM {self._src.tables[2]} ORDER BY pos", [])
            order = [r[0] for r in rows] + self._ord_new
            self._ord_new = []
            self.position = {key: i for i, key in enumerate(order)}
            self.order = order
        return _ORD.__get__(self)

    def load_position(self, key: str) -> int:
        pos = self._pos.get(key)
        if pos is not None:
            return pos
        if not self._by_key_allowed(1):
            self.load_order()
            return int(_POS.__get__(self)[key])
        rows = self._src.fetch(f"SELECT max(pos) FROM {self._src.tables[2]} WHERE key = ?", [key])
        if not rows or rows[0][0] is None:
            raise KeyError(key)
        pos = self._pos[key] = int(rows[0][0])
        return pos

    def tail(self, part: str, start: int) -> list[Any]:
        """The entries of ``history`` or ``order`` from ``start`` on, without reading the table
        when only entries appended since the snapshot are asked for."""
        if part in self._loaded:
            return list((_HIST if part == "history" else _ORD).__get__(self)[start:])
        base, new = (
            (self._hist_base, self._hist_new)
            if part == "history"
            else (self._ord_base, self._ord_new)
        )
        if start >= base:
            return list(new[start - base :])
        full = self.load_history() if part == "history" else self.load_order()
        return list(full[start:])

    def rebase(self, src: _Source, mark: TypeMark) -> None:
        """The snapshot tables now hold everything this state collected: start again from them."""
        src.reads += self._src.reads
        self._src = src
        self._ops = []
        self._hist_base, self._hist_new = mark.history, []
        self._ord_base, self._ord_new = mark.order, []


class _SnapIndex(FieldIndex):
    """A field index whose ranges fetch their records in one query (they are in a table)."""

    __slots__ = ("ts",)
    ts: SnapTypeState

    def between(self, lo: Any, hi: Any) -> list[str]:
        keys = super().between(lo, hi)
        self.ts.prefetch(keys)
        return keys


class _Prefetching(set[str]):
    """The unset keys of a field index: iterating them fetches their records in one query."""

    __slots__ = ("_ts",)

    def __init__(self, ts: SnapTypeState) -> None:
        super().__init__()
        self._ts = ts

    def __iter__(self) -> Iterator[str]:
        self._ts.prefetch(set.__iter__(self))
        return set.__iter__(self)


def _loaded(ts: SnapTypeState) -> set[str]:
    # The dataclass __init__ sets the parts before ``restore`` makes the set.
    try:
        return ts._loaded
    except AttributeError:
        ts._loaded = set()
        return ts._loaded


class _LazyCurrent(MutableMapping[str, Record]):
    __slots__ = ("_ts",)

    def __init__(self, ts: SnapTypeState) -> None:
        self._ts = ts

    def __getitem__(self, key: str) -> Record:
        ts = self._ts
        if "current" in ts._loaded:
            return _CUR.__get__(ts)[key]
        rec = ts.lookup(key)
        if rec is None:
            raise KeyError(key)
        return rec

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def __setitem__(self, key: str, rec: Record) -> None:
        ts = self._ts
        if "current" in ts._loaded:
            _CUR.__get__(ts)[key] = rec
            return
        ts._seen[key] = rec
        ts._ops.append((key, rec))

    def __delitem__(self, key: str) -> None:
        ts = self._ts
        found = "current" in ts._loaded or ts.lookup(key) is not None
        if "current" in ts._loaded:  # read before, or by the lookup
            del _CUR.__get__(ts)[key]
            return
        if not found:
            raise KeyError(key)
        ts._seen[key] = None
        ts._ops.append((key, None))

    def __iter__(self) -> Iterator[str]:
        return iter(self._ts.load_current())

    def __len__(self) -> int:
        return len(self._ts.load_current())

    def keys(self) -> Any:
        return self._ts.load_current().keys()

    def values(self) -> Any:
        return self._ts.load_current().values()

    def items(self) -> Any:
        return self._ts.load_current().items()


class _LazyList(Sequence[Any]):
    """``history`` or ``order`` before its table is read: appends and lengths only."""

    __slots__ = ("_part", "_ts")

    def __init__(self, ts: SnapTypeState, part: str) -> None:
        self._ts, self._part = ts, part

    def _full(self) -> list[Any]:
        return self._ts.load_history() if self._part == "history" else self._ts.load_order()

    def append(self, item: Any) -> None:
        ts = self._ts
        if self._part in ts._loaded:
            self._full().append(item)
        elif self._part == "history":
            ts._hist_new.append(item)
        else:
            ts._ord_new.append(item)

    def __len__(self) -> int:
        ts = self._ts
        if self._part in ts._loaded:
            return len(self._full())
        if self._part == "history":
            return ts._hist_base + len(ts._hist_new)
        return ts._ord_base + len(ts._ord_new)

    def __getitem__(self, i: Any) -> Any:
        return self._full()[i]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._full())


class _LazyPosition(Mapping[str, int]):
    """``position`` before the order table is read: the positions the fold looks up and sets."""

    __slots__ = ("_ts",)

    def __init__(self, ts: SnapTypeState) -> None:
        self._ts = ts

    def __getitem__(self, key: str) -> int:
        ts = self._ts
        if "order" in ts._loaded:
            return _POS.__get__(ts)[key]
        return ts.load_position(key)

    def __setitem__(self, key: str, pos: int) -> None:
        ts = self._ts
        if "order" in ts._loaded:
            _POS.__get__(ts)[key] = pos
        else:
            ts._pos[key] = pos

    def __iter__(self) -> Iterator[str]:
        self._ts.load_order()
        return iter(_POS.__get__(self._ts))

    def __len__(self) -> int:
        self._ts.load_order()
        return len(_POS.__get__(self._ts))


def materialise(state: State) -> bool:
    """Read every record of ``state`` still in snapshot tables (a sandbox forks with what the
    parent holds, and cannot read the store); return whether any were read."""
    read = False
    for ts in state.types.values():
        if isinstance(ts, SnapTypeState) and len(ts._loaded) < 3:
            ts.load_current()
            ts.load_history()
            ts.load_order()
            read = True
    return read


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
    }


def _cv_of(d: dict[str, Any]) -> ConstraintVersion:
    from uac_kernel.constraints import parse_constraint

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


def _write_type_delta(
    con: duckdb.DuckDBPyConnection, tag: str, ts: TypeState, old: TypeMark, ftypes: dict[str, str]
) -> TypeMark | None:
    """Bring one type's tables up to ``ts`` by its entries since ``old`` (new fields become new
    columns, unset in the rows already there); None when a column cannot hold the new values
    (the caller rewrites the type)."""
    known = [f[:2] for f in old.fields]
    if [[f, t] for f, t in ftypes.items()][: len(known)] != known:
        return None
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
    fields = [*old.fields]
    cur, hist, ordt = (_table(tag, old.index, p) for p in ("cur", "hist", "ord"))
    for f, t in list(ftypes.items())[len(known) :]:
        col = _column(t, (r.__dict__.get(f) for r in changed))
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
    tag = _tag(user)
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


def prefetch(state: State, facts: Iterable[dict[str, Any]]) -> None:
    """Read, one query per type, the current rows of the records the payloads of fact events
    ``facts`` touch (of the types ``state`` still holds in snapshot tables), so that checking
    and folding them reads none one by one."""
    lazy = {name: ts for name, ts in state.types.items() if isinstance(ts, SnapTypeState)}
    if not lazy:  # a state folded from the log: nothing to read (and no loop over the batch)
        return
    keys: dict[str, set[str]] = {}
    for p in facts:
        if p["type"] in lazy:
            keys.setdefault(p["type"], set()).add(p["key"])
    for name, touched in keys.items():
        lazy[name].prefetch(touched)


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
    tag = _tag(user)
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
