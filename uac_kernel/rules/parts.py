"""Rules read in parts: after a change, a rule that declares how its records fall into parts runs
again on the parts the change touched, not on the whole history.

A rule declares ``partition=`` (see ``rules.engine.rule``): a function of one record of a type
it reads that gives the record's part (any hashable value: a merchant and an amount, a record's
own key), ``None`` for a record that can take part in no finding, or ``EVERY`` for a record every
finding may rest on (a freeze every payment is checked against). The contract: what the rule
finds about one part depends only on that part's records and the ``EVERY`` ones, and every
finding rests on a record of its part. The engine keeps each such rule's ``Parts`` up to date as
records change and runs the rule on a ``PartView``: the records of the touched parts and the
``EVERY`` ones, the other types as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable, Mapping
from datetime import date, datetime, timedelta
from typing import Any

from uac_kernel.core.records import Record
from uac_kernel.state.fold import State, order_value
from uac_kernel.state.query import UserView

__all__ = ["EVERY", "WAKE_SPAN", "PartView", "Partition", "Parts", "Wakes"]


class _Every:
    """The part of a record every finding may rest on."""

    def __repr__(self) -> str:
        return "EVERY"


EVERY = _Every()

Partition = Callable[[Record], Hashable | None]
Wakes = Callable[[Record], Iterable[date]]

# Past this many days at once, a clock rule with wakes runs whole rather than day by day.
WAKE_SPAN = 400

Ref = tuple[str, str]  # (type, key)


class Parts:
    """Which part each current record of a rule's types is in, and the records of each part."""

    def __init__(
        self, partition: Partition, types: frozenset[str], wakes: Wakes | None = None
    ) -> None:
        self.partition = partition
        self.wakes = wakes
        self.types = types
        self.of: dict[Ref, Hashable] = {}
        self.members: dict[Hashable, dict[Ref, None]] = {}
        # The days on which the clock passing may change what the rule finds about a record's
        # part (a charge leaving a 90-day window), and the records that wake on each.
        self.wake_of: dict[Ref, tuple[date, ...]] = {}
        self.woken: dict[date, set[Ref]] = {}

    @classmethod
    def build(
        cls, partition: Partition, types: frozenset[str], state: State, wakes: Wakes | None = None
    ) -> Parts:
        parts = cls(partition, types, wakes)
        for t in sorted(types):
            for rec in state.all(t):
                parts._put((t, rec.key), rec)
        return parts

    def _put(self, ref: Ref, rec: Record) -> Hashable | None:
        part = self.partition(rec)
        if part is None:
            return None
        hash(part)  # a part that cannot be a key fails here, before anything is kept
        days = tuple(dict.fromkeys(self.wakes(rec))) if self.wakes is not None else ()
        self.of[ref] = part
        self.members.setdefault(part, {})[ref] = None
        if days:
            self.wake_of[ref] = days
            for d in days:
                self.woken.setdefault(d, set()).add(ref)
        return part

    def _take(self, ref: Ref) -> Hashable | None:
        part = self.of.pop(ref, None)
        if part is not None:
            members = self.members[part]
            del members[ref]
            if not members:
                del self.members[part]
        for d in self.wake_of.pop(ref, ()):
            refs = self.woken[d]
            refs.discard(ref)
            if not refs:
                del self.woken[d]
        return part

    def woken_between(self, after: date, upto: date) -> set[Hashable] | None:
        """The parts of the records that wake on a day in ``(after, upto]``; None when that is
        more than ``WAKE_SPAN`` days (run the rule whole)."""
        days = (upto - after).days
        if days > WAKE_SPAN or days < 0:
            return None
        out: set[Hashable] = set()
        for i in range(1, days + 1):
            for ref in self.woken.get(after + timedelta(days=i), ()):
                out.add(self.of[ref])
        return out

    def update(self, state: State, changed: Mapping[str, Collection[str]]) -> tuple[set, dict]:
        """Move the ``changed`` records (keys by type) to their parts now; return the parts
        they left or joined, and the part each was in before (absent: none)."""
        touched: set[Hashable] = set()
        before: dict[Ref, Hashable] = {}
        for t, keys in changed.items():
            if t not in self.types:
                continue
            for key in keys:
                ref = (t, key)
                was = self._take(ref)
                if was is not None:
                    before[ref] = was
                    touched.add(was)
                rec = state.get(t, key)
                now = None if rec is None else self._put(ref, rec)
                if now is not None:
                    touched.add(now)
        return touched, before

    def shown(self, parts: Iterable[Hashable]) -> dict[str, set[str]]:
        """The keys, by type, of the records of ``parts`` and of the ``EVERY`` ones."""
        out: dict[str, set[str]] = {t: set() for t in self.types}
        for part in (*parts, EVERY):
            for t, key in self.members.get(part, ()):
                out[t].add(key)
        return out


class PartView(UserView):
    """``user`` for a rule run on the ``touched`` parts: of the types in ``shown``, only the
    current records of those keys (and the versions that were in those parts); every other
    type whole."""

    def __init__(
        self, state: State, shown: dict[str, set[str]], parts: Parts, touched: set[Hashable]
    ) -> None:
        super().__init__(state)
        self._shown = shown
        self._parts = parts
        self._touched = touched
        # A type's shown records, gathered once per view: a rule reads a type several times
        # (its records without a date, then those from a day on), and the state cannot change
        # while the rule runs on the view.
        self._found: dict[str, list[Record] | None] = {}

    def _records(self, name: str) -> list[Record] | None:
        """The current records of ``name`` shown, in order of creation; None for a type
        shown whole. The view's own list: callers hand out new lists, never this one."""
        if name in self._found:
            return self._found[name]
        keys = self._shown.get(name)
        ts = self._state.types.get(name)
        if keys is None or ts is None:
            self._found[name] = None
            return None
        found = [r for k in keys if (r := self._state.get(name, k)) is not None]
        position = ts.position
        found.sort(key=lambda r: position[r.key])
        self._found[name] = found
        return found

    def all(self, T: type[Record] | str) -> list[Record]:
        found = self._records(self._name(T))
        return super().all(T) if found is None else self._handed(list(found))

    def count(self, T: type[Record] | str) -> int:
        found = self._records(self._name(T))
        return super().count(T) if found is None else len(found)

    def history(self, T: type[Record] | str) -> list[Record]:
        name = self._name(T)
        if name not in self._shown:
            return super().history(T)
        # Every version that was in a touched part: ended ones too (a retracted record, one
        # that moved to another part), placed by the partition as it reads each version.
        return self._handed([r for r in self._state.history(name) if self._in_touched(r)])

    def _in_touched(self, rec: Record) -> bool:
        try:
            part = self._parts.partition(rec)
            return part is EVERY or part in self._touched
        except Exception:  # a version the partition cannot place: shown, as the whole run would
            return True

    def where(
        self,
        T: type[Record] | str,
        field: str,
        since: date | datetime | float | None = None,
        before: date | datetime | float | None = None,
    ) -> list[Record]:
        name = self._name(T)
        found = self._records(name)
        if found is None:
            return super().where(T, field, since, before)
        self._bounds(name, field, since, before)
        # One field orders one kind of value (``_bounds`` checked the bounds are of it).
        lo: Any = order_value(since)
        hi: Any = order_value(before)
        ordered: list[tuple[Any, str, Record]] = []
        for r in found:
            v = order_value(r.__dict__.get(field))
            if v is not None and (lo is None or v >= lo) and (hi is None or v < hi):
                ordered.append((v, r.key, r))
        ordered.sort(key=lambda x: (x[0], x[1]))
        return self._handed([r for _, _, r in ordered])

    def unset(self, T: type[Record] | str, field: str) -> list[Record]:
        found = self._records(self._name(T))
        if found is None:
            return super().unset(T, field)
        self._orderable(self._name(T), field)
        return self._handed([r for r in found if order_value(r.__dict__.get(field)) is None])
