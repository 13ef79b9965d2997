"""The bench's vocabulary: question patterns, history variants, systems, and constants."""

from __future__ import annotations

from datetime import date

OFFLINE_LABEL = "reference reader (offline ceiling)"
"""How offline results are labelled everywhere (JSON, table, chart)."""

PATTERNS = (
    "count",
    "sum",
    "average",
    "share",
    "window",
    "multi",
    "topk",
    "minmax",
    "threshold",
    "yoy",
)
VARIANTS = ("clean", "revised")
SYSTEMS = {
    "typed": "typed state + code",
    "bm25": "BM25 top-k",
    "embedding": "embedding top-k (all-MiniLM-L6-v2)",
    "full": "full context",
}
RETRIEVAL = ("bm25", "embedding")

FIRST_DAY = date(2023, 1, 1)
SPAN_DAYS = 1096  # 2023-01-01 .. 2025-12-31
YEARS = (2023, 2024, 2025)
TOP = 3  # the k of top-k questions
CORRECT_P = 0.12  # share of records corrected later in a revised history
RETRACT_P = 0.06  # share of records retracted later in a revised history
MAX_BATCH_CHARS = 9000  # typed expressions evaluated together, under the sandbox's 10k limit
