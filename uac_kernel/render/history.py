"""One record's history as `uac history` and `%uac history` show it: a header line (whose record,
how many versions), then a row for each event that shaped the record — asserted (the add),
updated (an update: a payment, a finish or a correction alike; its reason, when it gave one, says
which), retracted — with its seq, time and the reason it gave, and the version it made; as JSON,
the same with every reason whole."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from uac_kernel.core.display import plural, shorten
from uac_kernel.render.table import Listing

if TYPE_CHECKING:
    from uac_kernel.core.records import Record
    from uac_kernel.log.store import LoggedEvent

__all__ = ["REASON_CHARS", "history_header", "history_json", "history_listing", "made_by"]

REASON_CHARS = 120
# Characters of a text field's value in the listing (whole in ``history_json``).
VALUE_CHARS = 200
"""A reason's width in the table (cut at a word, marked …); ``--json`` gives it whole."""

_HOW = {"add": "asserted", "update": "updated", "retract": "retracted"}


@dataclass(frozen=True)
class _Step:
    """One event that shaped the record: how (asserted, updated, retracted), its seq and time,
    the reason and author it gave, and the version it made (none for a retraction)."""

    how: str
    seq: int | None
    at: datetime | None
    reason: str | None
    author: str | None
    version: int | None
    record: Record


def made_by(versions: Sequence[Record]) -> set[int]:
    """The seqs of the events behind ``versions``' steps (the add, each update, a retract)."""
    return {r.sources[-1] for r in versions if r.sources} | {
        r.sources[-2] for r in versions if r.retracted and len(r.sources) > 1
    }


def _steps(versions: Sequence[Record], events: Mapping[int, LoggedEvent]) -> list[_Step]:
    def step(seq: int | None, fallback: str, version: int | None, r: Record) -> _Step:
        ev = events.get(seq) if seq is not None else None
        p = ev.payload if ev is not None else {}
        reason, author = p.get("reason"), p.get("author")
        return _Step(
            _HOW.get(str(p.get("op")), fallback),
            seq,
            ev.ts if ev is not None else None,  # an erased event (forget) gives no time
            reason if isinstance(reason, str) else None,
            author if isinstance(author, str) else None,
            version,
            r,
        )

    out = []
    for n, r in enumerate(versions, 1):
        # A version's sources are the add and each update up to it; a retracted version's
        # end with the retraction.
        made = r.sources[:-1] if r.retracted else r.sources
        out.append(step(made[-1] if made else None, "updated" if n > 1 else "asserted", n, r))
        if r.retracted:
            out.append(step(r.sources[-1] if r.sources else None, "retracted", None, r))
    return out


def _behind(s: _Step) -> tuple[int, ...]:
    """The seqs behind a step's version (a retracted version's without its retraction), or
    behind the whole record for the retraction."""
    r = s.record
    return r.sources[:-1] if r.retracted and s.version is not None else r.sources


def history_header(type_name: str, key: str, user: str, versions: Sequence[Record]) -> str:
    """What the history shows: whose record, how many versions, whether it was retracted."""
    end = ", retracted" if versions and versions[-1].retracted else ""
    return f"{type_name} {key!r} of user {user!r}: {plural(len(versions), 'version')}{end}"


def history_listing(
    type_name: str,
    key: str,
    user: str,
    versions: Sequence[Record],
    events: Mapping[int, LoggedEvent],
) -> Listing:
    """A row for each event that shaped the record (``events``: those behind it, by seq): how,
    its seq, time and reason (cut at ``REASON_CHARS``), the version it made, when that held,
    and its fields (a cell of ``field=value`` pairs; the rows keep the dicts): those the record
    was asserted with, then only those each update changed (every field of each version is
    in ``history_json``)."""
    from uac_kernel.core.records import field_values  # pydantic: not for `uac --help`

    rows: list[tuple[Any, ...]] = []
    before: dict[str, Any] | None = None
    for s in _steps(versions, events):
        reason = shorten(s.reason, REASON_CHARS) if s.reason else ""
        if s.version is None:  # a retraction: it ends the version above, makes none
            rows.append((s.how, s.seq, s.at, reason, "", "", "", ""))
            continue
        now = field_values(s.record)
        if before is None:  # the first version: what it came with
            shown = {k: v for k, v in now.items() if v is not None}
        else:  # an update: what it changed (a field it cleared shows as None)
            shown = {k: v for k, v in {**before, **now}.items() if v != before.get(k)}
        before = now
        shown = {k: _cut(v) for k, v in shown.items()}
        r = s.record
        rows.append((s.how, s.seq, s.at, reason, s.version, r.valid_from, r.valid_to, shown))
    return Listing(
        ["how", "seq", "at", "reason", "version", "valid_from", "valid_to", "fields"],
        rows,
        caption=history_header(type_name, key, user, versions),
    )


def history_json(
    type_name: str,
    key: str,
    user: str,
    versions: Sequence[Record],
    events: Mapping[int, LoggedEvent],
) -> dict[str, Any]:
    """The history as data: the record, then each step with its reason whole, and the fields
    of each version."""
    from uac_kernel.core.records import field_values

    return {
        "type": type_name,
        "key": key,
        "user": user,
        "versions": len(versions),
        "retracted": bool(versions) and versions[-1].retracted,
        "steps": [
            {
                "how": s.how,
                "seq": s.seq,
                "at": s.at,
                "reason": s.reason,
                "author": s.author,
                "version": s.version,
                "valid_from": s.record.valid_from if s.version is not None else None,
                "valid_to": s.record.valid_to,
                "sources": list(_behind(s)),
                "fields": field_values(s.record) if s.version is not None else None,
            }
            for s in _steps(versions, events)
        ],
    }


def _cut(value: Any) -> Any:
    """A text value cut at ``VALUE_CHARS``; any other as it is."""
    if isinstance(value, str) and len(value) > VALUE_CHARS:
        return f"{value[: VALUE_CHARS - 1]}… ({len(value) - VALUE_CHARS + 1:,} more characters)"
    return value
