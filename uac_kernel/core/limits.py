"""Bounds on what comes in: one place for every limit an input is checked against.

Every path that appends facts (an Event JSONL file, event objects, a LoCoMo or LongMemEval
file, a model's extraction, a notebook edit) is validated by ``events.plan_batch`` against these
before anything is appended, so one hostile line cannot make a user unopenable. The defaults sit
far above what a real history holds; ``Workbench(limits=Limits(...))`` changes them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_LIMITS", "INT_MAX", "INT_MIN", "KEY_CHARS", "Limits"]

# Ints are stored as DuckDB BIGINT and read by JSON consumers as 64-bit: wider ones are refused.
INT_MIN = -(2**63)
INT_MAX = 2**63 - 1
# Longest record key: it identifies a record (and a constraint), so it stays short.
KEY_CHARS = 200


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds an input batch is checked against (see the README's Event JSONL section)."""

    line_bytes: int = 1 << 20
    """Bytes of one line of an Event JSONL file, and of one event object as JSON (1 MiB)."""
    value_chars: int = 1_000_000
    """Characters of one string field value, of one string of a list value, or of a reason."""
    text_chars: int = 1_000_000
    """Characters of an utterance's text."""
    list_items: int = 1_000
    """Items of one list field value (lists hold scalars only: nested lists are refused)."""
    meta_depth: int = 8
    """Nesting depth of an utterance's ``meta`` object."""
    fields_per_type: int = 300
    """Fields of one record type, counting the ones it has."""
    new_fields_per_event: int = 100
    """Fields one fact event may add to the schema."""
    types: int = 300
    """Record types of one user."""
    constraints: int = 200
    """Constraints of one user in force at once: each is a rule run after every change of the
    types it reads, so a user needs tens, not thousands."""
    json_bytes: int = 4 << 30
    """Bytes of a LoCoMo, LongMemEval or chat file that is one JSON document, which is read whole
    (4 GiB: LongMemEval-M, the largest such file uac reads, is about 2.7 GB). A larger file is
    refused before anything is read; line-by-line files (Event JSONL, chat JSONL) have no such
    bound."""


DEFAULT_LIMITS = Limits()
