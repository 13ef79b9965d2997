"""The prompts each system would send; their tokens are counted by :mod:`uac_kernel.bench.tokens`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from pydantic import BaseModel, Field

from uac_kernel.model.ask import schema_summary
from uac_kernel.workbench import Workbench

# --- prompts --------------------------------------------------------------------------------------

READER_SYSTEM = """You answer a question about one user from excerpts of their conversations with you.

The excerpts are dated and in time order. A later correction changes what an earlier message
said; a retraction means the record never counts. Use only the excerpts. Compute the answer
exactly. Return JSON with "answer": the answer itself written as JSON text (a number, a string,
a list or an object), in the form the question asks for."""


class ReadAnswer(BaseModel):
    """A reader's answer from retrieved (or all) utterances."""

    answer: str = Field(
        description="the answer as JSON text: a number, a string, a list or an object"
    )


def reader_parts(question: str, lines: Sequence[tuple[datetime, str]]) -> list[str]:
    """The user message of a reader's prompt, in two parts: the question, then the excerpts.

    The parts meet where cl100k_base's pre-tokenizer always splits (after a blank line, before
    a letter), so the prompt's token count is the sum of the parts' counts, and the excerpts
    of the full context are counted once per history.
    """
    return [f"Question: {question}\n\n", excerpts(lines)]


def excerpts(lines: Sequence[tuple[datetime, str]]) -> str:
    body = "\n".join(f"[{ts:%Y-%m-%d}] {text}" for ts, text in lines)
    return f"Conversation excerpts ({len(lines)}, oldest first):\n{body}"


def _messages(system: str, parts: Sequence[str]) -> list[dict[str, str]]:
    return [{"role": "system", "content": system}, {"role": "user", "content": "".join(parts)}]


def reader_messages(question: str, lines: Sequence[tuple[datetime, str]]) -> list[dict[str, str]]:
    """The prompt a reader of retrieved (or all) utterances gets: the question, then the excerpts."""
    return _messages(READER_SYSTEM, reader_parts(question, lines))


def ask_parts(wb: Workbench, question: str) -> list[str]:
    """The user message ``Workbench.ask`` sends (see ``uac_kernel.model.ask.answer_question``), in
    two parts: the schema summary, which does not depend on the question, then the question."""
    return [_ask_preamble(wb), f"Question: {question}"]


def _ask_preamble(wb: Workbench) -> str:
    state = wb.state
    today = state.now.date().isoformat() if state.now else "unknown"
    return f"Typed records of this user (today is {today}):\n{schema_summary(state)}\n\n"
