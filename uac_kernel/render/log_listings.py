"""The listings of the log, as `uac` and `%uac` both show them: the store's users, a page of
events (one line of what each says, ``render.summary``) and the model calls with their totals
(each a ``render.table.Listing``: the same columns on both faces)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from uac_kernel.core.display import plural
from uac_kernel.core.faces import Face, command
from uac_kernel.render.summary import summary
from uac_kernel.render.table import Listing

if TYPE_CHECKING:
    from uac_kernel.log.store import LoggedEvent
    from uac_kernel.model.client import CallSummary

__all__ = ["calls_listings", "log_listing", "users_listing"]


def users_listing(counts: Mapping[str, Mapping[str, int]], path: str) -> Listing:
    """Each user of the store: their events of every kind (the schema, alert and extraction
    events uac writes itself included), of which facts and utterances."""
    return Listing(
        ["user", "events", "facts", "utterances"],
        [
            (user, sum(kinds.values()), kinds.get("fact", 0), kinds.get("utterance", 0))
            for user, kinds in counts.items()
        ],
        caption=f"users of {path}",
        empty=f"{path} holds no events yet",
    )


def log_listing(
    events: Sequence[LoggedEvent],
    face: Face,
    *,
    limit: int | None,
    after: int = 0,
    kind: str | None = None,
    limit_given: bool = True,
    last: int | None = None,
) -> Listing:
    """The first ``limit`` of ``events`` (``None``: all; fetch one more, and the note says how
    to see the next page, spelled for ``face``), or with ``last`` the newest ``last`` events
    (fetched as they are): seq, time, kind, source and what the event says (``summary``)."""
    more = last is None and limit is not None and len(events) > limit
    shown = events[:limit] if more else events
    note = ""
    if last is not None:
        of = f" of kind {kind}" if kind else ""
        since = f" after seq {after}" if after else ""
        every = " (all there are)" if len(shown) < last else ""
        note = f"the newest {plural(len(shown), 'event')}{of}{since}{every}, oldest first"
    elif more:
        options = f"{f' --kind {kind}' if kind else ''}{f' --limit {limit}' if limit_given else ''}"
        line = command(face, f"log{options} --after {shown[-1].seq}")
        note = f"the first {limit} events after seq {after}; the next with `{line}`"
    return Listing(
        ["seq", "ts", "kind", "source", "summary"],
        [(e.seq, e.ts, e.kind, e.source, _line(summary(e.kind, e.payload))) for e in shown],
        caption=plural(len(shown), "event"),
        note=note,
    )


def calls_listings(
    calls: Sequence[CallSummary], totals: Iterable[Sequence[object]]
) -> tuple[Listing, Listing]:
    """The recent model calls (id, when, purpose, model, tokens in and out, milliseconds,
    outcome), then per purpose: calls, failed, tokens in and out — the cost ledger."""
    return (
        Listing(
            ["call", "at", "purpose", "model", "tokens in", "tokens out", "ms", "outcome"],
            [
                (
                    c.call_id,
                    f"{c.created_at:%Y-%m-%d %H:%M:%S}",
                    c.purpose,
                    c.model,
                    c.tokens_in,
                    c.tokens_out,
                    f"{c.latency_ms:.0f}",
                    c.outcome,
                )
                for c in calls
            ],
            caption=f"the last {plural(len(calls), 'model call')}",
        ),
        Listing(
            ["purpose", "calls", "failed", "tokens in", "tokens out"],
            [tuple(t) for t in totals],
            caption="per purpose",
        ),
    )


# Characters of an event's line in a listing: a value or reason may hold a megabyte, which
# `--json` gives whole.
SUMMARY_CHARS = 500


def _line(text: str) -> str:
    """``text`` cut at ``SUMMARY_CHARS``, saying how much more there is."""
    if len(text) <= SUMMARY_CHARS:
        return text
    return f"{text[: SUMMARY_CHARS - 1]}… ({len(text) - SUMMARY_CHARS + 1:,} more characters)"
