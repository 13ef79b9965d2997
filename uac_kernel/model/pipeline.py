"""An extraction run over a user's pending utterances: each batch proposed by the model, then
held for review when it would change much of what is known, or appended."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from uac_kernel.core.limits import Limits
from uac_kernel.ingest.events import InputEvent
from uac_kernel.ingest.report import IngestReport
from uac_kernel.log.store import Store
from uac_kernel.model.client import ModelClient
from uac_kernel.model.extract import (
    ExtractionLimits,
    ExtractionReport,
    batches,
    pending_utterances,
    propose_batch,
)
from uac_kernel.model.review import hold
from uac_kernel.state.fold import State

__all__ = ["extract_pending"]


def extract_pending(
    store: Store,
    state: Callable[[], State],
    model: Callable[[], ModelClient],
    append: Callable[[Sequence[InputEvent]], IngestReport],
    *,
    batch_size: int,
    max_chars: int,
    progress: bool | None,
    limits: ExtractionLimits | None,
    input_limits: Limits,
) -> ExtractionReport:
    """Propose facts for the pending utterances of ``state()``'s user, batch by batch, and
    ``append`` each batch's events (``model()``: the client, made when first needed) (or the held batch); ``state()`` is the state as it is after
    the last append. A batch whose answer stays invalid after one retry stays pending."""
    from tqdm.auto import tqdm

    limits = limits or ExtractionLimits()
    pending = pending_utterances(store, state().user)
    report = ExtractionReport(utterances=len(pending))
    groups = list(batches(pending, batch_size, max_chars))
    for batch in tqdm(
        groups,
        desc="extracting",
        unit="batch",
        disable=None if progress is None else not progress,
    ):
        report.batches += 1
        proposal = propose_batch(state(), batch, model(), limits, input_limits)
        if proposal.events is None:
            report.pending += 1
            report.errors.append(proposal.error)
            continue
        held = hold(store, state(), proposal, limits, batch)
        if held is not None:
            append([held])
            report.held += 1
            continue
        ingest = append(proposal.events)
        report.applied += 1
        report.constraints += sum(ev.kind == "constraint" for ev in proposal.events)
        report.operations += sum(ev.kind == "fact" for ev in proposal.events)
        # the model's bindings (the matcher's own proposals come when they are planned)
        bound = [ev.payload["binding"] for ev in proposal.events if ev.kind == "vocabulary"]
        report.bindings += len(bound)
        report.held_bindings += sum(b["status"] == "held" for b in bound)
        report.dropped.extend(proposal.dropped)
        report.raised.extend(ingest.raised)
        report.cleared.extend(ingest.cleared)
        report.updated.extend(ingest.updated)
    return report
