"""Type and field names as users write them, and the Python identifiers code gives them.

A name is data: it is kept as written in the log, the state, the SQL view (quoted) and every
report. Only where a name must be Python source (the checkpoint module, a notebook part) does it
become an identifier — the name itself when it already is one, else a deterministic spelling of it
(``from`` → ``from_``, ``drug name`` → ``drug_name``, type ``flight_leg`` → ``FlightLeg``) that
the code keeps beside the original (a pydantic alias, a class title). Two names of one type that
differ only in case or style (``drugName`` and ``drug_name``) would be one SQL column and one
identifier, so they are refused as a clash.
"""

from __future__ import annotations

import functools
import keyword
import re
import unicodedata
from collections.abc import Callable, Iterable

__all__ = [
    "NAME_CHARS",
    "RESERVED_FIELDS",
    "RESERVED_TYPES",
    "class_name",
    "field_clash",
    "field_identifier",
    "name_problem",
    "quote_ident",
    "style_key",
    "type_clash",
]

# Longer names are refused (and never reach the caches below, which a stream of long hostile
# names would otherwise fill).
NAME_CHARS = 64

# The names that would break uac itself (README "Names"): every record's own attributes and SQL
# columns, and Record's methods, which a field of that name would hide. Refused in any case
# (``Key`` is the SQL column ``key``) and as the identifier code writes (``valid-from`` is
# ``valid_from``); ``key_`` or ``validFrom`` is another column and attribute, so it is let in.
RESERVED_FIELDS = frozenset(
    {"key", "valid_from", "valid_to", "sources", "retracted", "fields", "own_fields"}
)
# Class names bound in the query namespace and in generated code (compared by ``class_name``).
RESERVED_TYPES = frozenset(
    {
        "Record",
        "Finding",
        "Counter",
        "Alert",
        "Severity",
        "State",
        "User",
        "True",
        "False",
        "None",
        "Annotated",
        "ConfigDict",
        "Field",
    }
)

_UNSHOWABLE = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def name_problem(what: str, name: object) -> str | None:
    """Why ``name`` cannot be stored as a ``what`` ('type' or 'field') name, or None.

    Only what cannot be stored or shown on one line is refused: a non-string, an empty or blank
    name, one over ``NAME_CHARS``, control, invisible or line-break characters.
    """
    if not isinstance(name, str):
        return f"{what} name must be a string, not {type(name).__name__}"
    if not name.strip():
        return (
            f"{what} name is empty; give a name such as {'Trip' if what == 'type' else 'start'!r}"
        )
    if len(name) > NAME_CHARS:
        return f"{what} name {_cut(name)} has {len(name):,} characters; use at most {NAME_CHARS}"
    return _problem(what, name)


# Cached: ingest asks for every field of every event, and a user has few names. Only names
# within NAME_CHARS get here, so a stream of long hostile names cannot fill it with large keys.
@functools.lru_cache(maxsize=4096)
def _problem(what: str, name: str) -> str | None:
    # Invisible and direction-changing characters (Cf) too: they make two names look alike, or
    # reorder the line a report shows; a lone surrogate (Cs) cannot be stored as UTF-8.
    if any(unicodedata.category(c) in _UNSHOWABLE for c in name):
        return (
            f"{what} name {_cut(name)} holds a control, invisible or line-break character; "
            "remove it"
        )
    if what == "type":
        if class_name(name) in RESERVED_TYPES:
            return f"type name {name!r} is reserved (class {class_name(name)}); choose another name"
        return None
    # the identifier too: `model dump` is written model_dump in code
    if name.startswith("_") or field_identifier(name).startswith("model_"):
        return (
            f"field name {name!r} is reserved: names starting with '_' or 'model_' belong to "
            "uac and pydantic; choose another name"
        )
    for same in (name.casefold(), field_identifier(name)):
        if same in RESERVED_FIELDS:
            return f"field name {name!r} is reserved (every record has {same}); choose another name"
    return None


def _cut(name: str) -> str:
    """``repr(name)``, shortened: a 10,000-character name must not make a 10,000-character error."""
    text = repr(name)
    return text if len(text) <= 40 else text[:36] + "...'"


@functools.lru_cache(maxsize=4096)
def _words(name: str) -> tuple[str, ...]:
    text = unicodedata.normalize("NFKC", name)
    spaced = "".join(c if c.isalnum() else " " for c in _CAMEL.sub(" ", text))
    return tuple(spaced.split())


def style_key(name: str) -> str:
    """The name with case and style taken away: ``drugName``, ``Drug-Name`` → ``drug_name``."""
    return "_".join(w.casefold() for w in _words(name))


def _identifier(name: str) -> bool:
    """Whether ``name`` is usable as written as an identifier in generated code."""
    return (
        name.isidentifier()
        and not keyword.iskeyword(name)
        and not name.startswith("_")
        # Python reads identifiers in NFKC: 'ﬁle' in source is the name 'file'
        and unicodedata.normalize("NFKC", name) == name
    )


def _spell(text: str, prefix: str) -> str:
    """``text`` with every character an identifier cannot hold made '_', as an identifier."""
    text = unicodedata.normalize("NFKC", text)
    text = re.sub(r"_+", "_", "".join(c if ("a" + c).isidentifier() else "_" for c in text))
    text = text.strip("_")
    if not text or not text[0].isidentifier():
        text = prefix + text
    return text + "_" if keyword.iskeyword(text) else text


@functools.lru_cache(maxsize=4096)
def field_identifier(name: str) -> str:
    """The Python identifier of field ``name`` in generated code: the name itself when it is
    one (``drugName``), else ``from`` → ``from_``, ``drug name`` → ``drug_name``, ``1st`` →
    ``f_1st``. Deterministic; ``field_clash`` keeps it unique within a type."""
    return name if _identifier(name) else _spell(name, "f_")


@functools.lru_cache(maxsize=4096)
def class_name(name: str) -> str:
    """The class name of type ``name`` in generated code and the query namespace: the name
    itself when it is an identifier starting with a capital (``Trip``), else its words
    capitalised (``flight_leg`` → ``FlightLeg``, ``medication`` → ``Medication``)."""
    if _identifier(name) and name[0].isupper():
        return name
    joined = "".join(w[:1].upper() + w[1:] for w in _words(name))
    spelt = _spell(joined, "T")
    return spelt if spelt[0].isupper() else "T" + spelt


def field_clash(type_name: str, fields: Iterable[str], name: str) -> str | None:
    """Why field ``name`` cannot join the type's ``fields``: one of them differs from it only in
    case or style, so SQL (case-blind) or generated code would take the two for one."""
    if (other := _twin(fields, name, field_identifier)) is None:
        return None
    return (
        f"field {name!r} of {type_name} differs from its field {other!r} only in case or style, "
        f"which SQL and code cannot tell apart; use {other!r} or another name"
    )


def type_clash(types: Iterable[str], name: str) -> str | None:
    """Why type ``name`` cannot join ``types``: one of them differs from it only in case or
    style (``flight_leg`` and ``FlightLeg``: one class; ``ＴＲＩＰ`` and ``Trip``: one name)."""
    if (other := _twin(types, name, class_name)) is None:
        return None
    return (
        f"type {name!r} differs from the existing type {other!r} only in case or style, which "
        f"SQL and code cannot tell apart; use {other!r} or another name"
    )


def _twin(names: Iterable[str], name: str, ident: Callable[[str], str]) -> str | None:
    """The first of ``names`` that is ``name`` in other case or style, or the same identifier."""
    key, mine = style_key(name), ident(name)
    for other in names:
        if other != name and (style_key(other) == key or ident(other) == mine):
            return other
    return None


def quote_ident(name: str) -> str:
    """``name`` as a quoted SQL identifier: any text, its double quotes doubled."""
    return '"' + name.replace('"', '""') + '"'
