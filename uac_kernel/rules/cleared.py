"""What made a cleared alert clear, found by undoing part of the change that cleared it.

A batch of events can add a record, change another and move the log's clock at once; the alert
it clears says which of these mattered only if that is known, not guessed from what changed
beside it. So the rule runs again on the state as it would be with some of the batch undone
(``Undone``: a view of the state with chosen records back as they were before the batch, and
the clock, if asked, where it stood): a record is named when undoing its change alone brings the
alert back; the clock when undoing every record's change still leaves the alert cleared.

Only the alerts that clear are asked about, and only over the records the rule reads that the
batch changed (``changed_records``), a few at most (``MANY_CHANGED``); each undone view is run
once per rule and shared by all of its cleared alerts (``rules.engine.why_cleared``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import date, datetime
from typing import Any

from uac_kernel.core.display import printable, shorten, show
from uac_kernel.core.records import Record, field_values, new_record
from uac_kernel.state.fold import State, TypeState, order_value
from uac_kernel.state.query import UserView

__all__ = [
    "MANY_CHANGED",
    "Undone",
    "changed_records",
    "changes",
    "label",
    "version_after",
    "what_became",
]

Ref = tuple[str, str]

# More records than this changed in the types a rule reads: a clear names none of them (each
# would be undone on its own, one run of the rule each). A batch that clears a rule's alerts
# runs it again at most MANY_CHANGED + 1 times: every change undone, then each record's alone
# (not when one changed), or the clock put back as well.
MANY_CHANGED = 4
# A type whose changed keys the fold did not keep (a new field changes every record's class) is
# searched for them only up to this many versions.
SCANNED = 20_000
# Characters of a field's value and of a key a reason quotes.
VALUE_CHARS = 60
KEY_CHARS = 80


def changes(was: Record, now: Record, limit: int = 3) -> str:
    """The fields that differ between two versions of a record: ``active True → False``."""
    a, b = field_values(was), field_values(now)
    diffs = [
        f"{n} {_said(a.get(n))} → {_said(b.get(n))}"
        for n in dict.fromkeys([*a, *b])
        if a.get(n) != b.get(n)
    ]
    more = f" and {len(diffs) - limit} more fields" if len(diffs) > limit else ""
    return ", ".join(diffs[:limit]) + more


def _said(value: Any, width: int = VALUE_CHARS) -> str:
    """A field's value in a reason: on one line, escaped, at most ``width`` characters (the
    reason is logged with the alert and shown wherever it is)."""
    return shorten(printable(show(value, "unset")), width)


def label(type_name: str, key: str) -> str:
    """``PetVaccine 'rabies-2026'``: a record as a reason names it, its key escaped and cut."""
    return f"{type_name} '{_said(key, KEY_CHARS)}'"


def version_after(state: State, type_name: str, key: str, seq: int) -> Record | None:
    """The version of record ``type_name`` ``key`` that was current just after event ``seq``:
    None when it did not exist then (not yet added, or retracted)."""
    best: tuple[int, Record | None] = (-1, None)
    for v in state.versions(type_name, key):
        if not v.sources:
            continue
        made: list[tuple[int, Record | None]] = []
        if v.retracted:
            # A retraction keeps only the retracted copy: the version it ended was current from
            # the event before the retraction's.
            made.append((v.sources[-1], None))
            if len(v.sources) > 1:
                alive = {**v.__dict__, "retracted": False, "sources": v.sources[:-1]}
                made.append((v.sources[-2], new_record(type(v), {**alive, "valid_to": None})))
        else:
            made.append((v.sources[-1], v))
        for at, rec in made:
            if best[0] < at <= seq:
                best = (at, rec)
    return best[1]


def changed_records(
    state: State,
    types: Collection[str],
    changed_keys: Mapping[str, Collection[str] | None],
    since: int,
) -> list[Ref] | None:
    """The records of ``types`` the events after ``since`` added, changed or retracted, in type
    and key order; None when more than ``MANY_CHANGED`` did or they cannot be told cheaply."""
    found: list[Ref] = []
    for t in sorted(types):
        keys = changed_keys.get(t, ())
        if keys is None:
            ts = state.types.get(t)
            # Only a type held whole in memory is searched: one a snapshot reads lazily, or a
            # trial's layer, would be read whole to be searched.
            if type(ts) is not TypeState or len(ts.current) + len(ts.history) > SCANNED:
                return None
            versions = [*ts.history, *ts.current.values()]
            keys = {v.key for v in versions if v.sources and v.sources[-1] > since}
        found += [(t, k) for k in sorted(keys)]
        if len(found) > MANY_CHANGED:
            return None
    return found


def what_became(state: State, type_name: str, key: str, since: int) -> str:
    """``PetVaccine 'rabies-2026', added (event 7)``, ``…, changed (event 9): expiry 2025-03-01
    → 2026-03-01``, ``…, retracted (event 9)``: what the events after ``since`` made of a record."""
    named = label(type_name, key)
    now = state.get(type_name, key)
    was = version_after(state, type_name, key, since)
    if now is None:
        gone = [v for v in state.versions(type_name, key) if v.retracted and v.sources]
        at = f" (event {gone[-1].sources[-1]})" if gone else ""
        return f"{named}, {'retracted' if gone else 'removed'}{at}"
    event = f" (event {now.sources[-1]})" if now.sources else ""
    if was is None:
        return f"{named}, added{event}"
    what = changes(was, now)
    return f"{named}, changed{event}{': ' + what if what else ''}"


class Undone(UserView):
    """``base`` (a view of the state: whole, or a partitioned rule's parts) as it would be had
    the batch after event ``since`` not changed the records ``refs`` (each back as it was then:
    ``version_after``), and, with ``clock``, had the log's clock stayed at ``before``. Every
    other record and type reads as ``base`` has it."""

    def __init__(
        self,
        base: UserView,
        since: int,
        refs: Collection[Ref],
        clock: bool = False,
        before: datetime | None = None,
    ) -> None:
        super().__init__(base._state)
        self._base = base
        self._since = since
        self._undone: dict[str, dict[str, Record | None]] = {}
        for t, key in refs:
            self._undone.setdefault(t, {})[key] = version_after(base._state, t, key, since)
        self._clock = clock
        self._before = before

    @property
    def now(self) -> datetime | None:
        self._read_time = True
        return self._before if self._clock else self._state.now

    @property
    def today(self) -> date | None:
        self._read_day = True
        now = self._before if self._clock else self._state.now
        return now.date() if now else None

    def _place(self, name: str) -> Any:
        ts = self._state.types.get(name)
        position = ts.position if ts is not None else {}
        return lambda r: (position.get(r.key, len(position)), r.key)

    def _kept(self, name: str, records: list[Record]) -> list[Record]:
        """``records`` of type ``name`` without the undone ones."""
        undone = self._undone.get(name, {})
        return [r for r in records if r.key not in undone]

    def _back(self, name: str) -> list[Record]:
        """The undone records of type ``name`` as they were (those that were)."""
        return [r for r in self._undone.get(name, {}).values() if r is not None]

    def all(self, T: type[Record] | str) -> list[Record]:
        name = self._name(T)
        if name not in self._undone:
            return self._base.all(T)
        found = self._kept(name, self._base.all(name)) + self._back(name)
        return self._handed(sorted(found, key=self._place(name)))

    def count(self, T: type[Record] | str) -> int:
        name = self._name(T)
        return self._base.count(T) if name not in self._undone else len(self.all(name))

    def get(self, T: type[Record] | str, key: str) -> Record | None:
        undone = self._undone.get(self._name(T), {})
        if key not in undone:
            return self._base.get(T, key)
        rec = undone[key]
        return self._handed([rec])[0] if rec is not None else None

    def history(self, T: type[Record] | str) -> list[Record]:
        name = self._name(T)
        if name not in self._undone:
            return self._base.history(T)
        back = self._back(name)
        current = {r.sources for r in back}
        since, undone = self._since, self._undone[name]
        found = [
            r
            for r in self._base.history(name)
            if r.key not in undone
            or (r.sources and r.sources[-1] <= since and r.sources not in current)
        ]
        return self._handed([*found, *back])

    def where(
        self,
        T: type[Record] | str,
        field: str,
        since: date | datetime | float | None = None,
        before: date | datetime | float | None = None,
    ) -> list[Record]:
        name = self._name(T)
        if name not in self._undone:
            return self._base.where(T, field, since, before)
        lo, hi = order_value(since), order_value(before)
        found = self._kept(name, self._base.where(name, field, since, before))
        for r in self._back(name):
            v: Any = order_value(r.__dict__.get(field))
            if v is not None and (lo is None or v >= lo) and (hi is None or v < hi):
                found.append(r)
        found.sort(key=lambda r: (order_value(r.__dict__.get(field)), r.key))
        return self._handed(found)

    def unset(self, T: type[Record] | str, field: str) -> list[Record]:
        name = self._name(T)
        if name not in self._undone:
            return self._base.unset(T, field)
        back = [r for r in self._back(name) if order_value(r.__dict__.get(field)) is None]
        found = self._kept(name, self._base.unset(name, field)) + back
        return self._handed(sorted(found, key=self._place(name)))
