"""Which existing records (and constraints) a conversation really mentions.

A model may change an existing record without review only when the turns it read mention the
record; what counts as a mention decides how far a hostile answer reaches, so it is a real
reference, not any shared word. A text mentions a record when it says a *distinctive* word of
the record's key or of one of its text values (lists of strings included), one that:

- has a letter and at least three characters: a number ("I slept 3 hours") names no book
  titled "Title 3", and ``a`` or ``b3`` names nothing. A word of a value has no digit either: a
  quantity with its unit ("20mg") is a number too; only a key, an identifier, may hold one. A character of a script written without
  spaces (Chinese, Japanese, Korean, Thai…) counts two, and such a word is found inside the
  text's runs of that script, which no space splits into words;
- is not a stop word nor a word of a type name (``book`` is every ``Book``'s word, and a
  constraint titled "valid for every trip" is not named by "a trip to Rome");
- comes from the key or a name-like value, one of at most ``NAME_WORDS`` words: a longer text
  (a note, a description) is prose, its words the language's ("Water the plants every
  morning" is not named by "Good morning"), however few records of its type hold them;
- singles the record out: at most ``SHARED`` records of its type hold it. A word many records
  share ("title" in "Title 1", "Title 2"…) names none of them, however often it is said.

Only the user's own turns mention (``said_by_user``): an assistant turn is a model's words.
Words are compared in one normal form, NFKC then case-folded (as ``forget`` matches: "WEISS"
says "Weiß", a decomposed or fullwidth letter the composed one), split at anything not a
letter or a digit (``trip_lisbon`` and ``trip-lisbon`` both hold ``lisbon``).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping

from uac_kernel.core.records import field_values
from uac_kernel.core.search import tokenize
from uac_kernel.log.store import LoggedEvent
from uac_kernel.state.fold import State

__all__ = [
    "NAME_WORDS",
    "SHARED",
    "fold_text",
    "mentioned_constraints",
    "mentioned_records",
    "said_by_user",
    "words",
]

SHARED = 2  # a word held by more records of a type than this names none of them
NAME_WORDS = 3  # a value of more words than this is prose, not a name
_MIN_WEIGHT = 3  # a distinctive word's length, a character of an unspaced script counting 2
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
# Scripts written without spaces between words that East Asian width does not mark wide:
# Thai, Lao, Tibetan, Myanmar, Khmer.
_UNSPACED = ((0x0E00, 0x0FFF), (0x1000, 0x109F), (0x1780, 0x17FF))


def fold_text(text: str) -> str:
    """What a text match compares: the same letters however they are composed, in any case."""
    return unicodedata.normalize("NFKC", text).casefold()


def words(text: str) -> set[str]:
    """The words of ``text``: folded, split at anything not a letter or digit, stop words
    left out."""
    return {part for token in tokenize(fold_text(text)) for part in token.split("_") if part}


def said_by_user(turns: Iterable[LoggedEvent]) -> str:
    """The text of the user's own ``turns``, the words that may mention a record."""
    return "\n".join(u.payload["text"] for u in turns if u.payload.get("speaker") == "user")


def _unspaced(ch: str) -> bool:
    return unicodedata.east_asian_width(ch) in "WF" or any(
        lo <= ord(ch) <= hi for lo, hi in _UNSPACED
    )


def _weight(word: str) -> int:
    return sum(2 if _unspaced(ch) else 1 for ch in word)


def _type_words(name: str) -> set[str]:
    """``BankAccount`` → bankaccount, bank, account (and their plurals): words that name every
    record of the type, so none in particular."""
    found = {fold_text(name), *(fold_text(part) for part in _CAMEL.findall(name))}
    return found | {f"{w}s" for w in found} | {f"{w}es" for w in found}


def _names(key: str, values: Iterable[str]) -> list[set[str]]:
    """The names of a record, each as its words: its key, and its name-like values (at most
    ``NAME_WORDS`` words), without words with a digit (a quantity, "20mg", is a number)."""
    found = [words(key)]
    for value in values:
        if len(held := words(value)) <= NAME_WORDS:
            found.append({w for w in held if not any(ch.isdigit() for ch in w)})
    return [ws for ws in found if ws]


def _distinctive(
    names: Mapping[str, tuple[str, list[str]]], common: set[str]
) -> dict[str, list[set[str]]]:
    """For each id of one group (a record type), each of its names as its distinctive words:
    those with a letter and enough length, not in ``common``, held by at most ``SHARED`` ids.
    A name with none names nothing."""
    held = {i: _names(key, values) for i, (key, values) in names.items()}
    df = Counter(w for found in held.values() for w in set().union(*found))
    return {
        i: [
            kept
            for ws in found
            if (
                kept := {
                    w
                    for w in ws
                    if df[w] <= SHARED
                    and w not in common
                    and _weight(w) >= _MIN_WEIGHT
                    and any(ch.isalpha() for ch in w)
                }
            )
        ]
        for i, found in held.items()
    }


def _said(names: list[set[str]], said: set[str], unspaced: str) -> int:
    """How many distinctive words of the most fully said of a record's ``names`` a text says:
    a name counts only when every one of its distinctive words is said ("Bill Evans" is not
    mentioned by "the electricity bill"), as a word of the text or (a word of an unspaced
    script) inside its unspaced runs."""
    return max(
        (
            len(ws)
            for ws in names
            if all(w in said or (_unspaced(w[0]) and w in unspaced) for w in ws)
        ),
        default=0,
    )


def _unspaced_runs(text: str) -> str:
    return " ".join(w for w in words(text) if any(_unspaced(ch) for ch in w))


def _ranked(
    state: State,
    groups: Mapping[str, Mapping[str, tuple[str, list[str]]]],
    texts: tuple[str, ...],
) -> list[list[tuple[str, str]]]:
    """For each of ``texts``, the (group, id) it mentions, most distinctive words said first."""
    said = [(words(text), _unspaced_runs(text)) for text in texts]
    scored: list[list[tuple[int, str, str]]] = [[] for _ in texts]
    common = {w for name in (*state.types, *groups) for w in _type_words(name)}
    for group, names in groups.items():
        for ident, own in _distinctive(names, common).items():
            for found, (ws, runs) in zip(scored, said, strict=True):
                if own and (n := _said(own, ws, runs)):
                    found.append((-n, group, ident))
    return [[(group, ident) for _, group, ident in sorted(found)] for found in scored]


def mentioned_records(state: State, *texts: str) -> list[list[tuple[str, str]]]:
    """For each of ``texts``, the current records it mentions, as (type, key), most
    distinctive words said first. One pass over the records for all the texts."""
    groups = {
        name: {
            key: (
                key,
                [
                    item
                    for v in field_values(rec).values()
                    for item in (v if isinstance(v, list) else [v])
                    if isinstance(item, str)
                ],
            )
            for key, rec in ts.current.items()
        }
        for name, ts in state.types.items()
    }
    return _ranked(state, groups, texts)


def mentioned_constraints(state: State, text: str) -> set[str]:
    """The keys of the constraints in force that ``text`` mentions, by their key or title, as
    records are mentioned (the constraints in force are one group)."""
    names = {key: (key, [cv.constraint.title]) for key, cv in state.constraints.items()}
    (found,) = _ranked(state, {"Constraint": names}, (text,))
    return {key for _, key in found}
