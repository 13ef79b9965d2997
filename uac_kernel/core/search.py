"""BM25 search over a user's utterances: retrieval for open questions that typed state misses.

The index grows with each ingested utterance (work per new event, not per history) and is
exposed to queries as ``search(text, k)``, so generated code can combine retrieval with
computation.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime

__all__ = ["Hit", "LogSearch", "tokenize"]

_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "from",
        "has",
        "have",
        "i",
        "i'm",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "so",
        "that",
        "the",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "will",
        "with",
        "you",
        "your",
    ]
)


def tokenize(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


@dataclass(frozen=True)
class Hit:
    """One retrieved utterance."""

    seq: int
    ts: datetime
    speaker: str
    text: str
    source: str | None
    score: float


class LogSearch:
    """An incremental BM25 (Okapi, k1=1.2, b=0.75) index over utterances."""

    k1 = 1.2
    b = 0.75

    def __init__(self) -> None:
        self.docs: list[tuple[int, datetime, str, str, str | None]] = []
        self.lengths: list[int] = []
        self.postings: dict[str, list[tuple[int, int]]] = {}
        self.total_length = 0

    def __len__(self) -> int:
        return len(self.docs)

    def add(self, seq: int, ts: datetime, speaker: str, text: str, source: str | None) -> None:
        terms = tokenize(text)
        doc = len(self.docs)
        self.docs.append((seq, ts, speaker, text, source))
        self.lengths.append(len(terms))
        self.total_length += len(terms)
        for term, tf in Counter(terms).items():
            self.postings.setdefault(term, []).append((doc, tf))

    def search(self, text: str, k: int = 5) -> list[Hit]:
        """The ``k`` utterances that best match ``text``, best first (ties: earlier first)."""
        n = len(self.docs)
        if n == 0 or k <= 0:
            return []
        avg = self.total_length / n or 1.0
        scores: dict[int, float] = {}
        for term in set(tokenize(text)):
            posting = self.postings.get(term)
            if not posting:
                continue
            idf = math.log(1 + (n - len(posting) + 0.5) / (len(posting) + 0.5))
            for doc, tf in posting:
                norm = tf + self.k1 * (1 - self.b + self.b * self.lengths[doc] / avg)
                scores[doc] = scores.get(doc, 0.0) + idf * tf * (self.k1 + 1) / norm
        best = sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[: min(k, 50)]
        return [Hit(*self.docs[d], score=round(s, 4)) for d, s in best]
