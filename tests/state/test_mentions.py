"""What counts as a mention of a record: a distinctive word of its key or text values.

Records are folded from a real DuckDB store; the texts are what people might say, in several
languages.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.events import fact

from uac_kernel.state.fold import State
from uac_kernel.state.mentions import mentioned_constraints, mentioned_records
from uac_kernel.workbench import Workbench

HISTORY = [
    fact("2025-01-10", "add", "Trip", "trip-lisbon", end="2025-03-16"),
    fact("2025-01-10", "add", "Trip", "trip-tokyo", destination="東京", country="Japan"),
    fact("2025-01-10", "add", "Trip", "trip-kyoto", destination="京都", country="Japan"),
    fact("2025-01-10", "add", "Trip", "trip-osaka", destination="大阪", country="Japan"),
    fact("2025-01-10", "add", "Trip", "trip-seoul", destination="서울", country="Korea"),
    fact("2025-01-11", "add", "Person", "p-ana", name="Ana", tags=["sister"]),
    fact("2025-01-11", "add", "Person", "p-mueller", name="Jürgen Müller"),
    fact("2025-01-11", "add", "Person", "b3", name="Bo"),
    *[fact("2025-01-12", "add", "Book", f"book{i}", title=f"Title {i}") for i in range(1, 21)],
    *[
        fact("2025-01-12", "add", "Book", f"book-{c}", title=t)
        for c, t in zip("ab", ["Dune", "Emma"], strict=True)
    ],
]


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[State]:
    db = Path(tmp_path_factory.mktemp("mentions")) / "m.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest(HISTORY)
        wb.ingest(
            [
                {
                    "kind": "constraint",
                    "ts": "2025-01-13T09:00:00",
                    "op": "add",
                    "key": "passport-valid",
                    "constraint": {
                        "kind": "valid_on",
                        "title": "Passport valid for every trip",
                        "document": {"type": "Passport"},
                        "each": {"type": "Trip"},
                        "at": {"fields": ["end"]},
                    },
                }
            ]
        )
        yield wb.state


def said(state: State, text: str) -> list[str]:
    (found,) = mentioned_records(state, text)
    return [f"{t} {k}" for t, k in found]


@pytest.mark.parametrize(
    ("text", "records"),
    [
        pytest.param("Our Lisbon flight moved", ["Trip trip-lisbon"], id="a-word-of-the-key"),
        pytest.param("I slept 3, 4 and 20 hours", [], id="numbers-name-nothing"),
        pytest.param("What a title that was! Title 3 too", [], id="a-word-every-title-has"),
        pytest.param("I lent book3 to Bo", ["Book book3"], id="a-key-said-whole"),
        pytest.param("Bo said b3", [], id="short-words-name-nothing"),
        pytest.param("My books, the book, a Book", [], id="the-type-name"),
        pytest.param("Ana's passport expires", ["Person p-ana"], id="a-three-letter-name"),
        pytest.param("my sister called", ["Person p-ana"], id="a-word-of-a-list-value"),
        pytest.param("Herr JÜRGEN MÜLLER kommt", ["Person p-mueller"], id="case-folded-non-ascii"),
        # a name of several words is mentioned whole: one of its words may be a common one
        pytest.param("Herr Müller kommt", [], id="one-word-of-a-longer-name"),
        pytest.param("来週東京に行きます", ["Trip trip-tokyo"], id="inside-unspaced-text"),
        pytest.param("서울에 가요", ["Trip trip-seoul"], id="hangul-with-a-particle"),
        pytest.param("Japan was lovely", [], id="a-value-three-records-share"),
        pytest.param("I re-read Dune", ["Book book-a"], id="a-title"),
    ],
)
def test_a_text_mentions_the_records_a_distinctive_word_of_it_names(
    state: State, text: str, records: list[str]
) -> None:
    assert said(state, text) == records


def test_records_are_ranked_by_the_distinctive_words_said(state: State) -> None:
    assert said(state, "Jürgen Müller and Ana")[:2] == ["Person p-mueller", "Person p-ana"]


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        ("is my passport valid now?", {"passport-valid"}),
        ("my passport is renewed", set()),
        ("I slept 3 hours", set()),
    ],
)
def test_constraints_are_mentioned_by_their_key_or_title(
    state: State, text: str, keys: set[str]
) -> None:
    assert mentioned_constraints(state, text) == keys


def test_one_pass_answers_every_text(state: State) -> None:
    texts: tuple[Any, ...] = ("Dune", "Emma", "nothing here")
    assert mentioned_records(state, *texts) == [[("Book", "book-a")], [("Book", "book-b")], []]
