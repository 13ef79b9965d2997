"""``not_while``: no record of ``forbidden`` while a record of ``active`` stands.

An active record (a medication, a condition, a pregnancy) stands while it is current and not
ended: not ``active`` false, not ``stopped``/``discontinued``/``cancelled`` true, its ``end``
not before today. Its span runs from its ``start`` (or ``started``/``since``) to its ``end``
(or ``ends``/``until``), open at either side when unset. A forbidden record (a meal, a food
habit, a planned activity) counts when it is undated (a habit), or when its ``date``/``start``
(to its ``end``) falls in that span and is not over (meals eaten in the past are history).

It counts when its text mentions a word of ``forbidden.mentions`` or of the knowledge groups
named (``uac_kernel.language.knowledge``); with no words asked for at all, every record of
``forbidden`` counts (mentions that all normalise to no word name nothing, so none counts). One alert a pair, its evidence the two records.

The fields named above are the defaults of the concepts read (``record.active``,
``medication.stopped``, ``record.called_off``, ``record.since``, ``medication.end``,
``event.date``, ``booking.start``...): a user's vocabulary may bind others.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

from uac_kernel.constraints.kinds._base import (
    END,
    EVENT_DATE,
    START,
    Names,
    ident,
    make_rule,
    read,
    select,
    text_of,
    watch,
)
from uac_kernel.core.records import Record
from uac_kernel.core.words import first_term as _first_term
from uac_kernel.core.words import norm as _norm
from uac_kernel.language import knowledge
from uac_kernel.language.spec import NotWhile
from uac_kernel.rules.engine import Finding, Rule
from uac_kernel.rules.library._common import (
    ACTIVE,
    CALLED_OFF,
    MED_END,
    MED_STOPPED,
    _first_day,
    _flag,
    _from_day,
    _get,
    _label,
)
from uac_kernel.state.query import UserView
from uac_kernel.vocab.catalogue import concept

__all__ = ["compile"]

# The active record's span, and what stops it: a medication's concepts and the flags of a
# record called off (which hold the old ``cancelled``), then the names the kind read before
# concepts that theirs lack.
ACTIVE_START: Names = (concept("record.since"),)
ACTIVE_END: Names = (MED_END, "ends", "until")
STOPPED: Names = (MED_STOPPED, CALLED_OFF)
# The forbidden record's day (an event's, else a span's start) and end.
FORBIDDEN_DATE: Names = (EVENT_DATE, *START)
FORBIDDEN_END: Names = END

Groups = dict[str, tuple[str, ...]]  # label ("allergens/shellfish", "mentions") -> padded words


def _padded(groups: dict[str, tuple[str, ...]]) -> Groups:
    return {label: tuple(f" {w} " for w in words) for label, words in groups.items()}


def _hit(text: str, groups: Groups) -> tuple[str, str] | None:
    """(word, group label) of the first group ``text`` mentions, or None."""
    for label, words in groups.items():
        if (word := _first_term(text, words)) is not None:
            return word, label
    return None


def _standing(rec: Record, today: date | None) -> bool:
    if _get(rec, ACTIVE) is False or _flag(rec, *STOPPED):
        return False
    end = _first_day(rec, ACTIVE_END)
    return end is None or today is None or end >= today


def _apart(start: date | None, end: date | None, a_start: date | None, a_end: date | None) -> bool:
    """Whether a dated forbidden record (``start``..``end``) lies outside the active span."""
    if start is None or end is None:
        return False
    return (a_end is not None and start > a_end) or (a_start is not None and end < a_start)


def _span(start: date | None, end: date | None) -> str:
    if start is None and end is None:
        return ""
    since = f"since {start}" if start else "with no start date"
    return f" ({since}, until {end})" if end else f" ({since}, with no end date)"


def compile(name: str, c: NotWhile) -> Rule:
    # Mentions are words to look for here, not a filter: a record that names only a word of a
    # table group must still be found.
    forbidden = c.forbidden.model_copy(update={"mentions": []})
    said = tuple(w for m in c.forbidden.mentions if (w := _norm(m).strip()))
    words = _padded({**({"mentions": said} if said else {}), **knowledge.terms(c.table, c.groups)})
    active_words = _padded(knowledge.terms(c.table, c.active_groups)) if c.active_groups else {}
    # Mentions that all normalise to no word name nothing: they must not fall back to "every
    # record counts", which is for a constraint that gives no words at all.
    names_nothing = bool(c.forbidden.mentions) and not words

    def check(user: UserView) -> Iterator[Finding]:
        if names_nothing:
            return
        today = user.today
        actives = []
        # Only those not ended before today can stand: read through the end indexes.
        pool = read(c.active, lambda t: _from_day(user, t, today, ACTIVE_END))
        for rec in select(user, c.active, pool):
            if not _standing(rec, today):
                continue
            found = _hit(text_of(rec), active_words) if active_words else ("", "")
            if found is not None:
                actives.append((rec, found[0]))
        if not actives:
            return
        fields = (*FORBIDDEN_DATE, *FORBIDDEN_END)
        pool = select(user, forbidden, read(forbidden, lambda t: _from_day(user, t, today, fields)))
        for f in pool:
            start = _first_day(f, FORBIDDEN_DATE)
            end = _first_day(f, FORBIDDEN_END) or start
            if end is not None and today is not None and end < today:
                continue  # over: a meal eaten, a trip done
            hit = _hit(text_of(f), words) if words else ("", "")
            if hit is None:
                continue
            for a, a_word in actives:
                if ident(a) == ident(f):
                    continue
                a_start, a_end = _first_day(a, ACTIVE_START), _first_day(a, ACTIVE_END)
                if _apart(start, end, a_start, a_end):
                    continue
                yield _finding(c, f, a, hit, a_word, start, end, a_start, a_end)

    return make_rule(name, c, check, watch(c.active, c.forbidden), clock=True)


def _finding(
    c: NotWhile,
    f: Record,
    a: Record,
    hit: tuple[str, str],
    a_word: str,
    start: date | None,
    end: date | None,
    a_start: date | None,
    a_end: date | None,
) -> Finding:
    word, group = hit
    if not word:
        what = f"{_label(f)} is a {type(f).__name__}"
    else:
        where = "" if group == "mentions" else f" ({group.replace('/', ' table, group ')})"
        what = f"{_label(f)} mentions '{word}'{where}"
    when = (
        "undated, so always"
        if start is None
        else (f"on {start}" if end in (None, start) else f"from {start} to {end}")
    )
    because = f" (it names '{a_word}')" if a_word else ""
    return Finding(
        message=(
            f"{c.title}: {what}, {when}, while {_label(a)}{because} stands"
            f"{_span(a_start, a_end)}; change or cancel {_label(f)}, or record that "
            f"{_label(a)} has ended if it has"
        ),
        evidence=(a, f),
    )
