"""The listings of the state and its code, as `uac` and `%uac` both show them: checkpoints,
record types, constraints, the vocabulary and a SQL result (each a
``render.table.Listing``: the same columns on both faces)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from uac_kernel.core.display import plural
from uac_kernel.core.faces import Face, command
from uac_kernel.render.table import Listing

if TYPE_CHECKING:
    from uac_kernel.checkpoints.checkpoint import Checkpoint
    from uac_kernel.sql.view import SqlResult
    from uac_kernel.state.fold import ConstraintVersion

__all__ = [
    "checkpoints_listing",
    "constraints_listing",
    "sql_listing",
    "state_listing",
    "vocab_listing",
]


def checkpoints_listing(checkpoints: Sequence[Checkpoint], user: str, face: Face) -> Listing:
    """Each checkpoint: its version, the log seq it covers, its records and when it was taken."""
    return Listing(
        ["version", "seq", "records", "created"],
        [(c.version, c.seq, c.records, f"{c.created_at:%Y-%m-%d %H:%M:%S}") for c in checkpoints],
        caption=plural(len(checkpoints), "checkpoint"),
        empty=f"no checkpoints yet for {user}; take one with `{command(face, 'checkpoint')}`",
    )


def state_listing(counts: Mapping[str, int], versions: Mapping[str, int]) -> Listing:
    """Each record type: its current records and all their versions."""
    return Listing(
        ["type", "current", "versions"],
        [(name, n, versions[name]) for name, n in sorted(counts.items())],
        caption=plural(len(counts), "record type"),
    )


def constraints_listing(shown: Sequence[ConstraintVersion], history: bool) -> Listing:
    """Each constraint in force (``history``: every version): key, kind, title, since when,
    until when (``in force``; an ended one's date, and whether it was retracted), who proposed
    it and from what, and the rule it is compiled into."""

    def until(cv: ConstraintVersion) -> str:
        if cv.valid_to is None:
            return "in force"
        return cv.valid_to.isoformat() + (" (retracted)" if cv.retracted else "")

    def by(cv: ConstraintVersion) -> str:
        origin = f"from {', '.join(cv.derived_from)}" if cv.derived_from else ""
        return " ".join(x for x in (cv.author or "", origin) if x)

    rows = [
        (cv.key, cv.constraint.kind, cv.constraint.title, cv.valid_from, until(cv), by(cv),
         cv.rule)
        for cv in shown
    ]  # fmt: skip
    return Listing(
        ["key", "kind", "title", "since", "until", "from", "rule"],
        rows,
        caption=plural(len(rows), "constraint") + ("" if history else " in force"),
        empty="no constraints" if history else "no constraints in force",
    )


def vocab_listing(what: str, rows: Iterable[Sequence[str]]) -> Listing:
    """The vocabulary's rows (``vocab.listing``): ``what`` is ``bindings``, ``unbound`` (what
    no rule reads), ``concepts`` or ``roles``."""
    from uac_kernel.vocab import listing

    shown = [tuple(r) for r in rows]
    columns, caption = {
        "bindings": (listing.BINDING_COLUMNS, plural(len(shown), "binding")),
        "unbound": (
            listing.UNWATCHED_COLUMNS,
            plural(len(shown), "type or field", "types and fields") + " no rule reads",
        ),
        "concepts": (listing.CONCEPT_COLUMNS, plural(len(shown), "concept")),
        "roles": (listing.ROLE_COLUMNS, plural(len(shown), "role")),
    }[what]
    return Listing(columns, shown, caption=caption)


def sql_listing(result: SqlResult) -> Listing:
    """A query's columns and rows."""
    return Listing(result.columns, result.rows)
