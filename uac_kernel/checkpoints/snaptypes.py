"""A snapshot's types read lazily: a record type whose current records, history and field indexes
come out of the store's typed tables only when a rule or query first reads them."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from uac_kernel.core.errors import StoreError
from uac_kernel.core.records import Record, new_record
from uac_kernel.log.store import Store
from uac_kernel.state.fold import FieldIndex, State, TypeState, moved, order_value

__all__ = [
    "BY_KEY_QUERIES",
    "BY_KEY_QUERIES_MAX",
    "PREFETCH_MAX",
    "RANGE_QUERIES",
    "ROWS_PER_QUERY",
    "Mark",
    "SnapTypeState",
    "TypeMark",
    "materialise",
    "prefetch",
]


# Past this many keys a query by key costs more than reading the type's table whole.
PREFETCH_MAX = 20_000


# Ranges of a field index a type may read by their keys: a rule reading a window of a long
# history (90 days of charges) reads that window's rows, not the type's table, while the range
# holds at most ``PREFETCH_MAX`` keys or a quarter of the table's rows (past that, reading it
# whole costs less).
RANGE_QUERIES = 4


# Queries by key a type may make before the next key it misses reads the part whole: a reader
# that keeps missing (a checkpoint rendering blocks, a rule going through records, many ingest
# batches) is going through the type, which costs one query per key, while a whole part costs
# what reading its rows costs (less than the fold of the log a plain open makes).
BY_KEY_QUERIES = 4
# A long table allows one more query by key per this many rows, up to ``BY_KEY_QUERIES_MAX``:
# a query by key scans the key column (10 ms at 500k rows), reading the table whole makes every
# record (4-5 s at 500k), so a reader missing a few keys of a long table (an alert cleared names
# its records) should not read it whole, while the queries it may make stay a fraction of what
# the whole read costs (each scans the column, so their number is capped).
ROWS_PER_QUERY = 20_000
BY_KEY_QUERIES_MAX = 32


_RANK = {"BIGINT": 0, "HUGEINT": 1, "TIMESTAMP": 0, "VARCHAR": 2}


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
                "read them in the parent first (uac_kernel.checkpoints.snaptypes.materialise)"
            )
        # A read of ``wb.state`` outside any operation is an operation of its own (log.handover).
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
        "_ended_by_key",
        "_hist_base",
        "_hist_new",
        "_loaded",
        "_ops",
        "_ord_base",
        "_ord_new",
        "_pos",
        "_proxies",
        "_ranges",
        "_rows",
        "_seen",
        "_src",
    )

    _src: _Source
    _by_key: int  # queries by key made so far
    _ended_by_key: int  # queries of one key's ended versions made so far
    _ranges: int  # ranges of an index read by their keys so far
    _rows: int  # rows of the current table
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
        ts._src, ts._loaded, ts._by_key, ts._ended_by_key = src, set(), 0, 0
        ts._ranges, ts._rows = 0, mark.current
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
        spent its ``BY_KEY_QUERIES`` (more for a long table: ``ROWS_PER_QUERY``) or past
        ``PREFETCH_MAX`` keys: the caller reads whole."""
        allowed = max(BY_KEY_QUERIES, min(self._rows // ROWS_PER_QUERY, BY_KEY_QUERIES_MAX))
        if keys > PREFETCH_MAX or self._by_key >= allowed:
            return False
        self._by_key += 1
        return True

    def _unread(self, keys: Iterable[str]) -> list[str]:
        """The keys among ``keys`` not read yet, sorted; none once the table is read whole."""
        if "current" in self._loaded:
            return []
        # Keys are text: another value names no record (and DuckDB would refuse to compare it).
        return sorted({k for k in keys if type(k) is str and k not in self._seen})

    def prefetch(self, keys: Iterable[str]) -> None:
        """Read the current rows of ``keys`` (one query, or the whole table past the budget of
        reads by key), so the fold finds them."""
        todo = self._unread(keys)
        if not todo:
            return
        if not self._by_key_allowed(len(todo)):
            self.load_current()
            return
        self._fetch(todo)

    def prefetch_range(self, keys: Iterable[str]) -> None:
        """Read the current rows of a range of a field index: by their keys, on a budget of
        its own, while the range is small against the table (``RANGE_QUERIES``); else as
        ``prefetch``."""
        todo = self._unread(keys)
        if not todo:
            return
        if self._ranges >= RANGE_QUERIES or len(todo) > max(PREFETCH_MAX, self._rows // 4):
            self.prefetch(todo)
            return
        self._ranges += 1
        self._fetch(todo)

    def _fetch(self, todo: list[str]) -> None:
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
        if type(key) is not str:
            hash(key)  # an unhashable key fails as a dict's would
            return None  # keys are text: another value names no record
        if key not in self._seen:
            self.prefetch([key])
            if "current" in self._loaded:
                return _CUR.__get__(self).get(key)
        return self._seen[key]

    def ended(self, key: str) -> list[Record]:
        """As ``TypeState.ended``, with one query by key while the history is not read (an
        alert cleared names what changed in one record; the history of a type is the
        longest part of a long log)."""
        if not isinstance(key, str):
            return []  # keys are text: DuckDB would read 5 as '5'
        if "history" in self._loaded or self._ended_by_key >= BY_KEY_QUERIES:
            return super().ended(key)
        self._ended_by_key += 1  # a budget of its own: folding batches spends the other
        rows = self._src.fetch(
            f"SELECT key, valid_from, valid_to, sources, retracted{self._columns()} "
            f"FROM {self._src.tables[1]} WHERE key = ? ORDER BY idx",
            [key],
        )
        return [*self._make(rows, _ENDED), *(r for r in self._hist_new if r.key == key)]

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
        if type(key) is not str:
            raise KeyError(key)
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
        self._rows = mark.current


class _SnapIndex(FieldIndex):
    """A field index whose ranges fetch their records in one query (they are in a table)."""

    __slots__ = ("ts",)
    ts: SnapTypeState

    def between(self, lo: Any, hi: Any) -> list[str]:
        keys = super().between(lo, hi)
        self.ts.prefetch_range(keys)
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
