"""A trial fold: events folded onto a layer over a state, which the state never sees.

``Trial(state)`` is a ``State`` that reads through to ``state`` and keeps every change of its
own: a type the trial's events touch gets a layer (``_TrialType``) whose current records,
history, creation order, positions and field indexes hold only what the trial changed, on top
of the base's. Nothing of the base is written, so a what-if leaves the workbench's state as it
was even when it fails half-way or is interrupted, and it costs the events it folds and what
the rules read, not the size of the state: no record of the base is copied.

The base may read records it had not read yet (a state opened from a snapshot reads them
lazily): that fills the base's own cache with what the log says, which changes no answer.

A new field of an existing type gives the layer the type's new class, as the fold's ``settle``
does, but the base's records are moved onto it only as they are read (the trial's own at once),
so a what-if that adds a field to a type of a million records costs the records its rules read.

The base's own caches may fill during a trial: records a snapshot had not read yet, and a field
index a rule asks for (``user.where``) built from the base's records. Both hold only what the
base's log says; a later ingest keeps the index up to date as it would have had it built it.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Mapping, MutableMapping, Sequence
from typing import Any, cast

from uac_kernel.core.records import Record
from uac_kernel.state.fold import FieldIndex, State, TypeState, moved

__all__ = ["Trial"]


class _Mover:
    """The class a layer's records are read on once the trial gave their type a new field
    (None: as they are), and the base's records already moved onto it, by key or place."""

    __slots__ = ("cls", "done")

    def __init__(self) -> None:
        self.cls: type[Record] | None = None
        self.done: dict[Any, Record] = {}

    def to(self, cls: type[Record]) -> None:
        self.cls, self.done = cls, {}

    def read(self, at: Any, rec: Any) -> Any:
        cls = self.cls
        if cls is None or type(rec) is cls:
            return rec
        found = self.done.get(at)
        if found is None:
            found = self.done[at] = moved(cls, rec)
        return found


class _Current(MutableMapping[str, Record]):
    """A type's current records: the base's, with the trial's sets and deletes over them.

    Iteration order is a dict's: a changed record keeps its place, a deleted one that comes
    back goes to the end, as in the fold's own dict.
    """

    __slots__ = ("_base", "_changed", "_gone", "_mover", "_new", "_read")

    def __init__(self, base: Mapping[str, Record]) -> None:
        self._base = base
        self._changed: dict[str, Record] = {}  # base keys with a new record in place
        self._gone: set[str] = set()  # base keys deleted (maybe back in _new)
        self._new: dict[str, Record] = {}  # keys added by the trial, in order
        self._mover = _Mover()
        self._read = self._mover.read

    def move_to(self, cls: type[Record]) -> None:
        """Records are of ``cls`` from now on: the trial's at once, the base's as read."""
        self._mover.to(cls)
        self._changed = {k: moved(cls, r) for k, r in self._changed.items()}
        self._new = {k: moved(cls, r) for k, r in self._new.items()}

    def touched(self) -> set[str]:
        return {*self._changed, *self._gone, *self._new}

    def before(self, key: str) -> Record | None:
        """The base's record of ``key``, as the base has it."""
        return self._base.get(key)

    def __getitem__(self, key: str) -> Record:
        if key in self._new:
            return self._new[key]
        if key in self._gone:
            raise KeyError(key)
        if key in self._changed:
            return self._changed[key]
        return self._read(key, self._base[key])

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def _in_base(self, key: str) -> bool:
        return key not in self._gone and self._base.get(key) is not None

    def __setitem__(self, key: str, rec: Record) -> None:
        if key in self._new or key in self._gone or not self._in_base(key):
            self._new[key] = rec
        else:
            self._changed[key] = rec

    def __delitem__(self, key: str) -> None:
        if key in self._new:
            del self._new[key]
        elif self._in_base(key):
            self._gone.add(key)
            self._changed.pop(key, None)
        else:
            raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        gone = self._gone
        yield from (k for k in self._base if k not in gone)
        yield from self._new

    def __len__(self) -> int:
        return len(self._base) - len(self._gone) + len(self._new)

    def values(self) -> Any:
        return [r for _, r in self.items()]

    def items(self) -> Any:
        gone, changed, read = self._gone, self._changed, self._read
        out = [
            (k, c if (c := changed.get(k)) is not None else read(k, r))
            for k, r in self._base.items()
            if k not in gone
        ]
        return out + list(self._new.items())

    def keys(self) -> Any:
        return list(self)


class _Appended(Sequence[Any]):
    """A type's history or creation order: the base's, then what the trial appended."""

    __slots__ = ("_base", "_mover", "_new", "_read")

    def __init__(self, base: Sequence[Any]) -> None:
        self._base = base
        self._new: list[Any] = []
        self._mover = _Mover()
        self._read = self._mover.read

    def move_to(self, cls: type[Record]) -> None:
        self._mover.to(cls)
        self._new = [moved(cls, r) for r in self._new]

    def append(self, item: Any) -> None:
        self._new.append(item)

    def __len__(self) -> int:
        return len(self._base) + len(self._new)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return list(self)[i]
        n = len(self._base)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._read(i, self._base[i]) if i < n else self._new[i - n]

    def __iter__(self) -> Iterator[Any]:
        read = self._read
        yield from (read(i, item) for i, item in enumerate(self._base))
        yield from self._new


class _Position(Mapping[str, int]):
    """Each key's place in the creation order: the trial's, else the base's."""

    __slots__ = ("_base", "_own")

    def __init__(self, base: Mapping[str, int]) -> None:
        self._base = base
        self._own: dict[str, int] = {}

    def __getitem__(self, key: str) -> int:
        own = self._own.get(key)
        return own if own is not None else self._base[key]

    def __setitem__(self, key: str, pos: int) -> None:
        self._own[key] = pos

    def __iter__(self) -> Iterator[str]:
        yield from self._own
        yield from (k for k in self._base if k not in self._own)

    def __len__(self) -> int:
        return len(set(self._base) | set(self._own))


class _Index(FieldIndex):
    """A field index of a layered type: the base's entries, less the keys the trial touched,
    merged with the trial's own entries for those keys (``entries`` and ``unset`` here)."""

    __slots__ = ("_base", "_hidden")

    def __init__(self, base: FieldIndex, name: str, current: _Current) -> None:
        FieldIndex.__init__(self)
        self._base = base
        self._hidden: set[str] = set()
        for key in current.touched():
            self._hidden.add(key)
            rec = current.get(key)
            if rec is not None:
                FieldIndex.add(self, key, rec.__dict__.get(name))

    def add(self, key: str, value: Any) -> None:
        self._hidden.add(key)
        FieldIndex.add(self, key, value)

    def remove(self, key: str, value: Any) -> None:
        self._hidden.add(key)
        FieldIndex.remove(self, key, value)

    def between(self, lo: Any, hi: Any) -> list[str]:
        base = self._base
        keys = base.between(lo, hi)  # (a snapshot's index fetches those records here)
        if not self._hidden:
            return keys
        start = 0 if lo is None else bisect_left(base.entries, (lo, ""))
        stop = len(base.entries) if hi is None else bisect_left(base.entries, (hi, ""))
        hidden = self._hidden
        kept = (e for e in base.entries[start:stop] if e[1] not in hidden)
        mine_start = 0 if lo is None else bisect_left(self.entries, (lo, ""))
        mine_stop = len(self.entries) if hi is None else bisect_left(self.entries, (hi, ""))
        return [k for _, k in heapq.merge(kept, self.entries[mine_start:mine_stop])]

    def all_unset(self) -> set[str]:
        return {k for k in self._base.unset if k not in self._hidden} | self.unset


class _TrialType(TypeState):
    """The layer of one existing type: reads through to ``base``, keeps its own changes."""

    __slots__ = ("_base",)

    _base: TypeState

    @classmethod
    def over(cls, base: TypeState) -> _TrialType:
        ts = cls(
            base.name,
            base.cls,
            readers=dict(base.readers),
            blank=dict(base.blank),
            current=cast(dict[str, Record], _Current(base.current)),
            history=cast(list[Record], _Appended(base.history)),
            order=cast(list[str], _Appended(base.order)),
            position=cast(dict[str, int], _Position(base.position)),
            builds=base.builds,
        )
        ts._base = base
        return ts

    @property
    def layer(self) -> _Current:
        return cast(_Current, self.current)

    def settle(self, fields: dict[str, str]) -> None:
        # The base's records move onto the new class as they are read: see the module doc.
        if not self.stale:
            return
        cls = self.cls = self.new_class(fields)
        self.builds += 1
        self.stale = False
        self.layer.move_to(cls)
        cast(_Appended, self.history).move_to(cls)

    def index(self, name: str) -> FieldIndex:
        idx = self.indexes.get(name)
        if idx is None:
            idx = self.indexes[name] = _Index(self._base.index(name), name, self.layer)
        return idx


class Trial(State):
    """``base`` with events folded onto a layer of its own (see the module doc)."""

    def __init__(self, base: State) -> None:
        super().__init__(base.user)
        self.base = base
        self.schema = base.schema.copy()
        self.types = dict(base.types)
        self.seq, self.now = base.seq, base.now
        self.keys_taken_at = base.seq  # what the trial folds is its change
        self.type_seq = dict(base.type_seq)
        self.constraints = dict(base.constraints)
        self.constraint_history = list(base.constraint_history)
        self.constraint_seq = base.constraint_seq
        self.vocab_bindings = dict(base.vocab_bindings)
        self.vocab_seq = base.vocab_seq
        self.layers: dict[str, _TrialType] = {}

    def _writable(self, name: str) -> TypeState | None:
        ts = self.types.get(name)
        if ts is not None and ts is self.base.types.get(name):
            ts = self.types[name] = self.layers[name] = _TrialType.over(ts)
        return ts

    def unset(self, type_name: str, field_name: str) -> list[Record]:
        ts = self.types.get(type_name)
        if not isinstance(ts, _TrialType):
            return super().unset(type_name, field_name)
        idx = cast(_Index, ts.index(field_name))
        keys = sorted(idx.all_unset(), key=ts.position.__getitem__)
        return [ts.current[k] for k in keys]

    def touched(self) -> Iterable[tuple[str, str, Record | None, Record | None]]:
        """(type, key, record before, record after) of every record the trial touched."""
        for name, ts in self.types.items():
            base = self.base.types.get(name)
            if isinstance(ts, _TrialType):
                for key in sorted(ts.layer.touched(), key=_order_of(ts)):
                    yield name, key, ts.layer.before(key), ts.current.get(key)
            elif base is None:
                for key, rec in ts.current.items():
                    yield name, key, None, rec


def _order_of(ts: TypeState) -> Any:
    def place(key: str) -> tuple[int, str]:
        try:
            return ts.position[key], key
        except KeyError:
            return -1, key

    return place
