"""What every constraint compiler shares: finding the records a ``Select`` names, resolving a
``Moment`` to a date, the fields a constraint reads, and the watch set and rule a compiled
constraint becomes.

A field list a constraint leaves out is the kind's concepts (``EXPIRES = concepts(...)``),
read through the user's vocabulary like the library's rules read them; one it gives is read as
written (``fields``). Where a kind read more names than a concept's defaults, the extra names
follow the concept as literals, so a constraint logged before concepts reads what it read.
"""

from __future__ import annotations

import calendar
from collections.abc import Callable, Iterable, Sequence
from datetime import date, timedelta
from typing import Any

from uac_kernel.core.records import Record
from uac_kernel.core.words import country as _country
from uac_kernel.core.words import first_term as _first_term
from uac_kernel.core.words import norm as _norm
from uac_kernel.core.words import terms as _terms
from uac_kernel.language.spec import Constraint, Moment, Select
from uac_kernel.rules.engine import Rule, RuleFunc, Severity
from uac_kernel.rules.library._common import _called_off as called_off
from uac_kernel.rules.library._common import _day, _get, _names, _number, _text
from uac_kernel.state.query import UserView
from uac_kernel.vocab.catalogue import CONCEPTS, Concept, concept, concepts
from uac_kernel.vocab.resolve import note, noting

__all__ = [
    "COUNTRY",
    "END",
    "EVENT_DATE",
    "START",
    "Names",
    "add_months",
    "called_off",
    "field_names",
    "fields",
    "ident",
    "is_country",
    "lower",
    "make_rule",
    "matches",
    "moment",
    "moment_text",
    "read",
    "same",
    "select",
    "stated_end",
    "text_of",
    "types_text",
    "watch",
]


def text_of(rec: Record) -> str:
    """Every string (and list of strings) field of ``rec``, normalised for whole-word matching."""
    return _norm(_text(rec, rec.__dict__))


Names = Sequence[str]  # field names as a constraint writes them, and concepts

# What a span of any type starts and ends with, and the day of a one-day event: a constraint
# over trips reads the user's trip bindings, one over bookings their booking bindings.
START = concepts("booking.start", "trip.start")
END = concepts("booking.end", "trip.end")
EVENT_DATE = concept("event.date")
LENGTH, NIGHTS = concepts("trip.length_days"), concepts("trip.nights")
# Fields naming countries: ``where`` and ``match`` compare them by country (UK = GB = United
# Kingdom): those bound to any country concept, and two names read so before concepts.
COUNTRY: Names = (
    *(Concept(n) for n, d in CONCEPTS.items() if d.value == "country"),
    "destination",
    "nationality",
)


def fields(given: list[str] | None, default: Names) -> Names:
    """The fields a constraint reads: those it names, as written (an empty list: none), or,
    left out, the kind's concepts."""
    return default if given is None else given


def field_names(rec: Record, names: Names) -> list[str]:
    """The user's own field names ``names`` stands for on ``rec``'s type, each once, in order."""
    return list(dict.fromkeys(_names(rec, names)))


def is_country(rec: Record, name: str) -> bool:
    """Whether field ``name`` of ``rec`` holds countries. Asking resolves every country
    concept on its type, but only a binding of ``name`` itself changes what the constraint
    reads (it compares ``name`` by country): only that one is noted for the alert to name."""
    with noting() as asked:
        country = name in field_names(rec, COUNTRY)
    if country:
        note(b for b in asked if b.field == name)
    return country


def same(have: Any, want: Any, country: bool) -> bool:
    """Whether one value of a record equals one wanted value."""
    if isinstance(want, str):
        if not isinstance(have, str):
            return False
        if country:
            return _country(have) == _country(want)
        return have.strip().casefold() == want.strip().casefold()
    if isinstance(want, bool) or isinstance(have, bool):
        return have is want
    return bool(have == want)


def matches(rec: Record, s: Select) -> bool:
    """Whether ``rec`` is one of the records ``s`` names (its type and key are the caller's):
    each ``where`` field has one of the wanted values (a list field: in one of its members)."""
    for name, want in s.where.items():
        have = _get(rec, name)
        haves = have if isinstance(have, list) else [have]
        wants = want if isinstance(want, list) else [want]
        country = is_country(rec, name)
        if not any(same(h, w, country) for h in haves for w in wants):
            return False
    return not s.mentions or _first_term(text_of(rec), _terms(*s.mentions)) is not None


def select(user: UserView, s: Select, among: Iterable[Record] | None = None) -> list[Record]:
    """The current records ``s`` names, of all its types (of ``among``, when given: an
    index-narrowed subset, read with ``read``)."""
    if s.key is not None:
        key = s.key
        pool: Iterable[Record] = [r for t in s.types if (r := user.get(t, key)) is not None]
    else:
        pool = read(s, user.all) if among is None else among
    return [r for r in pool if matches(r, s)]


def read(s: Select, fetch: Callable[[str], Iterable[Record]]) -> list[Record]:
    """What ``fetch`` reads of each type ``s`` names, together: an index-narrowed read of one
    type (``lambda t: _from_day(user, t, since, fields)``) made for all of them."""
    return [r for t in s.types for r in fetch(t)]


def ident(rec: Record) -> tuple[str, str]:
    """A record's identity across types: its type's name and its key."""
    return type(rec).__name__, rec.key


def types_text(s: Select) -> str:
    """The types ``s`` reads, for a message: ``Passport``, ``Expense or Transaction``; its role
    when no type of this user plays it."""
    return " or ".join(s.types) or str(s.role)


def add_months(d: date, months: int) -> date:
    """``d`` moved by whole calendar months, the day clamped to the month's length (Aug 31 + 6
    months is Feb 28/29); unchanged past the years 1–9999."""
    n = d.year * 12 + d.month - 1 + months
    year, month = divmod(n, 12)
    if not 1 <= year <= 9999:
        return d
    return date(year, month + 1, min(d.day, calendar.monthrange(year, month + 1)[1]))


MAX_LENGTH = 36_600  # days: a stated length beyond a century is bad data, not a span


def stated_end(m: Moment, rec: Record) -> tuple[date, str] | None:
    """The end ``rec``'s ``m.start`` and a stated length give, and how, for a message (``start
    2026-10-20 + 21 nights``); None without both. Days count both ends, nights the nights."""
    first, start = next(((d, f) for f in m.start if (d := _day(_get(rec, f)))), (None, ""))
    if first is None:
        return None
    lengths = ((fields(m.length, LENGTH), 1, "day"), (fields(m.nights, NIGHTS), 0, "night"))
    for names, spent, unit in lengths:
        for f in field_names(rec, names):
            n = _number(_get(rec, f))
            if n is not None and spent <= n <= MAX_LENGTH and n == int(n):
                try:
                    end = first + timedelta(days=int(n) - spent)
                except OverflowError:
                    return None
                return end, f"{start} {first} + {int(n)} {unit}{'' if n == 1 else 's'}"
    return None


def _base_date(m: Moment, rec: Record | None) -> tuple[date, str] | None:
    """The date ``m`` starts from for ``rec`` (before its shift), and where it comes from."""
    if rec is not None:
        for f in m.fields:
            if (found := _day(_get(rec, f))) is not None:
                return found, f"{f} {found}"
        if (stated := stated_end(m, rec)) is not None:
            return stated
    return (m.date, str(m.date)) if m.date is not None else None


def moment(m: Moment, rec: Record | None = None) -> date | None:
    """The date ``m`` names for ``rec``: its first set date field of ``m.fields`` (else the end
    its ``m.start`` and a stated length give, else ``m.date``), shifted by ``m.months`` then
    ``m.days``; None when there is no such date."""
    found = _base_date(m, rec)
    if found is None:
        return None
    shifted = add_months(found[0], m.months)
    try:
        return shifted + timedelta(days=m.days)
    except OverflowError:
        return shifted


Watch = tuple[frozenset[str], frozenset[str]]  # type names, roles


def watch(*selects: Select | None) -> Watch:
    """What a constraint reads: the types its selects name and the roles they name (the engine
    watches the types that play those for each user)."""
    given = [s for s in selects if s is not None]
    return (
        frozenset(t for s in given for t in s.named),
        frozenset(s.role for s in given if s.role is not None),
    )


def make_rule(name: str, c: Constraint, func: RuleFunc, reads: Watch, clock: bool) -> Rule:
    """The ``Rule`` a compiled constraint is: its name, what it reads, its severity and category,
    and as its source the constraint itself (kind and title), so the alert inspector and
    ``uac rules`` say which constraint an alert comes from."""
    cites = f"; {c.cites}" if c.cites else ""
    # The runner refuses two rules whose functions share a name, and every compiled constraint's
    # function is a closure of one name: give each its rule's name.
    func.__name__ = name
    return Rule(
        name=name,
        func=func,
        watch=reads[0],
        roles=reads[1],
        severity=c.severity,
        category=c.category,
        source=f"constraint ({c.kind}): {c.title}{cites}",
        clock=clock,
        doc=c.title,
    )


def lower(severity: Severity) -> Severity:
    """One step below ``severity``, at least info: for what only nears a limit, or rests on a
    guess (an unknown end date)."""
    return "warning" if severity == "critical" else "info"


def moment_text(m: Moment, rec: Record | None = None) -> str:
    """Where the date ``m`` names for ``rec`` comes from, for a message: ``end 2025-07-15, +6
    months``; ``2025-04-15`` for a fixed date; empty when there is none."""
    found = _base_date(m, rec)
    if found is None:
        return ""
    base = found[1]
    shift = [
        f"{n:+d} {unit}{'' if abs(n) == 1 else 's'}"
        for n, unit in ((m.months, "month"), (m.days, "day"))
        if n
    ]
    return f"{base}, {' '.join(shift)}" if shift else str(base)
