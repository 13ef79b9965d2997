"""Versioned checkpoints: the generated code of a user's state, stored in DuckDB, and diffs.

A checkpoint stores only the code segments that changed since the previous version, so taking one
after k new events costs work proportional to k; the code of version N is, per segment, the newest
text at a version <= N.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from uac_kernel.core.chain import GENESIS, checkpoint_hash, content_hash, new_salt
from uac_kernel.core.display import plural
from uac_kernel.core.errors import CheckpointNotFound
from uac_kernel.core.segments import join_segments
from uac_kernel.log.store import Store

if TYPE_CHECKING:
    # Listing checkpoints and reading their stored code needs none of these (the state, the
    # records, the code generator and its rule library): `uac checkpoints` and `uac code` import
    # them only when they render or diff, not on every read (bench/nofold.py).
    from uac_kernel.core.records import Record
    from uac_kernel.rules.engine import Rule
    from uac_kernel.state.fold import State

__all__ = ["Checkpoint", "CheckpointDiff", "Checkpoints", "RecordChange", "diff_states"]


@dataclass(frozen=True)
class Checkpoint:
    """One stored checkpoint. ``code`` is read from the store on first use."""

    store: Store = field(repr=False, compare=False)
    user: str
    version: int
    seq: int
    created_at: datetime
    records: int
    segments: int
    # False when a checkpoint was asked for but the code had not changed since this version,
    # so no new version was stored.
    new: bool = field(default=True, compare=False)

    @property
    def code(self) -> str:
        return Checkpoints(self.store, self.user).code(self.version)

    def summary(self) -> str:
        """``checkpoint 3: 120 records, ...``, or ``no change since checkpoint 3 ...``."""
        if not self.new:
            return (
                f"no change since checkpoint {self.version} ({plural(self.records, 'record')}); "
                "no new version stored"
            )
        return (
            f"checkpoint {self.version}: {plural(self.records, 'record')}, covers the log up to "
            f"seq {self.seq} ({plural(self.segments, 'code segment')} written)"
        )


class Checkpoints:
    """The checkpoints of one user in one store."""

    def __init__(self, store: Store, user: str):
        self.store = store
        self.user = user

    def latest(self) -> Checkpoint | None:
        rows = self._rows("ORDER BY version DESC LIMIT 1")
        return rows[0] if rows else None

    def get(self, version: int | None = None) -> Checkpoint:
        if version is None:
            found = self.latest()
            if found is None:
                raise CheckpointNotFound(
                    f"user {self.user!r} has no checkpoint yet; run `uac checkpoint` first"
                )
            return found
        rows = self._rows("AND version = ?", [version])
        if not rows:
            known = [c.version for c in self.all()]
            raise CheckpointNotFound(
                f"user {self.user!r} has no checkpoint {version}; "
                f"existing versions: {', '.join(map(str, known)) or 'none'}"
            )
        return rows[0]

    def all(self) -> list[Checkpoint]:
        return self._rows("ORDER BY version")

    def _rows(self, tail: str, params: list[Any] | None = None) -> list[Checkpoint]:
        rows = self.store.con.execute(
            "SELECT version, event_seq, created_at, records, segments FROM checkpoints "
            f"WHERE user_id = ? {tail}",
            [self.user, *(params or [])],
        ).fetchall()
        local = self._local_seqs({int(r[1]) for r in rows})
        return [
            Checkpoint(self.store, self.user, v, local.get(int(e), 0), *rest)
            for v, e, *rest in rows
        ]

    def _local_seqs(self, event_seqs: set[int]) -> dict[int, int]:
        """The ``seq`` this store gives the user's events numbered ``event_seqs``.

        A checkpoint's stored ``seq`` is the store-wide number of the store it was taken in,
        which an import into another store (``uac import``) renumbers; the user's own number
        (``event_seq``) is kept, so a checkpoint maps to the events it covers through it. The
        numbers are constants in the query, so DuckDB reads the ``seq`` of those rows only."""
        wanted = sorted(n for n in event_seqs if n > 0)
        if not wanted:
            return {}
        rows = self.store.con.execute(
            "SELECT user_seq, seq FROM events WHERE user_id = ? "
            f"AND user_seq IN ({', '.join(str(n) for n in wanted)})",
            [self.user],
        ).fetchall()
        return {int(u): int(s) for u, s in rows}

    def _stored(self, names: list[str]) -> dict[str, str]:
        """The newest stored text of each named segment (those never written are absent)."""
        rows = self.store.con.execute(
            "SELECT segment, arg_max(text, version) FROM checkpoint_segments "
            "WHERE user_id = ? AND segment IN (SELECT unnest(?)) GROUP BY segment",
            [self.user, names],
        ).fetchall()
        return {str(k): str(v) for k, v in rows}

    def code(self, version: int) -> str:
        self.get(version)
        rows = self.store.con.execute(
            "SELECT segment, arg_max(text, version) FROM checkpoint_segments "
            "WHERE user_id = ? AND version <= ? GROUP BY segment",
            [self.user, version],
        ).fetchall()
        return join_segments(dict(rows))

    def take(
        self, state: State, dirty: Iterable[tuple[str, str, int]] | None, rules: Iterable[Rule]
    ) -> Checkpoint:
        """Store a new checkpoint of ``state``; render only ``dirty`` segments (None: all).

        If every rendered segment reads as the latest version already has it, nothing is
        stored: the latest version is returned with ``new`` False.
        """
        from uac_kernel.checkpoints.codegen import render_segments

        previous = self.latest()
        if previous is None:
            dirty = None  # the first checkpoint renders everything
        segments = render_segments(state, dirty, rules)
        if previous is not None and self._stored(list(segments)) == segments:
            return replace(previous, new=False)
        version = (previous.version if previous else 0) + 1
        now = datetime.now(UTC).replace(tzinfo=None)
        records = sum(state.counts().values())
        salted = {k: new_salt() for k in segments}
        hashes = {k: content_hash(salted[k], v) for k, v in segments.items()}
        store = self.store
        with store.writing():
            event_seq, head = store.head_at_seq(self.user, state.seq)
            row = store.con.execute(
                "SELECT hash FROM checkpoints WHERE user_id = ? ORDER BY version DESC LIMIT 1",
                [self.user],
            ).fetchone()
            link = checkpoint_hash(
                row[0] if row else GENESIS, self.user, version, state.seq, event_seq, head,
                records, hashes,
            )  # fmt: skip
            con = store.con
            con.execute("BEGIN TRANSACTION")
            try:
                appender = con.appender("checkpoint_segments")
                appender.append_rows(
                    [
                        (self.user, version, k, v, salted[k], hashes[k])
                        for k, v in sorted(segments.items())
                    ]
                )
                appender.flush()
                con.execute(
                    "INSERT INTO checkpoints VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        self.user,
                        version,
                        state.seq,
                        now,
                        records,
                        len(segments),
                        event_seq,
                        head,
                        link,
                    ],
                )
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        return Checkpoint(self.store, self.user, version, state.seq, now, records, len(segments))


@dataclass(frozen=True)
class RecordChange:
    type: str
    key: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None

    @property
    def changed_fields(self) -> list[str]:
        before, after = self.before or {}, self.after or {}
        return sorted(f for f in before.keys() | after.keys() if before.get(f) != after.get(f))


@dataclass(frozen=True)
class CheckpointDiff:
    """What changed between two states: records added, changed, retracted; schema growth."""

    a: int
    b: int
    added: list[RecordChange]
    changed: list[RecordChange]
    retracted: list[RecordChange]
    new_types: list[str]
    new_fields: dict[str, list[str]]

    def summary(self) -> str:
        return (
            f"checkpoint {self.a} → {self.b}: {len(self.added)} added, {len(self.changed)} changed, "
            f"{len(self.retracted)} retracted; {len(self.new_types)} new types, "
            f"{sum(len(v) for v in self.new_fields.values())} new fields"
        )


def diff_states(old: State, new: State, a: int = 0, b: int = 0) -> CheckpointDiff:
    from uac_kernel.core.records import field_values

    def _fields(rec: Record) -> dict[str, Any]:
        return {k: v for k, v in field_values(rec).items() if v is not None}

    added, changed, retracted = [], [], []
    for name, ts in new.types.items():
        before = old.types[name].current if name in old.types else {}
        for key, rec in ts.current.items():
            prev = before.get(key)
            if prev is None:
                added.append(RecordChange(name, key, None, _fields(rec)))
            elif _fields(prev) != _fields(rec):
                changed.append(RecordChange(name, key, _fields(prev), _fields(rec)))
        for key, prev in before.items():
            if key not in ts.current:
                retracted.append(RecordChange(name, key, _fields(prev), None))
    new_types = [t for t in new.schema.types if t not in old.schema.types]
    new_fields = {
        t: [f for f in fields if f not in old.schema.types[t]]
        for t, fields in new.schema.types.items()
        if t in old.schema.types and any(f not in old.schema.types[t] for f in fields)
    }
    return CheckpointDiff(a, b, added, changed, retracted, new_types, new_fields)
