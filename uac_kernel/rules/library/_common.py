"""What the rules share: text matching, field conventions and record helpers.

Rules read concepts, never a user's spelling: ``_get(rec, TRIP_START)`` reads whichever fields
the user's vocabulary binds to ``trip.start`` on ``rec``'s type (``uac_kernel.vocab``), and
``user.role("trip")`` the records of every type that plays a trip. A plain string is a field
name as written (constraints pass the fields a person named). Rules skip a record that lacks
what they need, and measure time with ``user.today`` (the log clock), never the wall clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from typing import Any, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from uac_kernel.core.display import plural
from uac_kernel.core.records import Record
from uac_kernel.core.words import (
    OFFSET as _OFFSET,
)
from uac_kernel.core.words import (
    ZONE as _ZONE,
)
from uac_kernel.core.words import (
    first_term as _first_term,
)
from uac_kernel.core.words import (
    norm as _norm,
)
from uac_kernel.core.words import (
    terms as _terms,
)
from uac_kernel.state.query import UserView
from uac_kernel.vocab.catalogue import concept
from uac_kernel.vocab.resolve import current, fields_of, per_record, read, types_of

_When = TypeVar("_When", date, datetime)


# -- concepts every rule reads (data/concepts/record.toml) -------------------------------------
# A record called off (a trip, booking, appointment, policy, order, medication...) will not
# happen or holds no more: a ``record.called_off`` flag true, or its ``record.status`` naming
# one ("Cancelled by the airline", "declined", "called off").
CALLED_OFF = concept("record.called_off")
SETTLED = concept("record.settled")
STATUS = concept("record.status")
ACTIVE = concept("record.active")
LABEL = concept("record.label")
CURRENCY = concept("record.currency")
TRIP_START, TRIP_END = concept("trip.start"), concept("trip.end")
TRIP_DAYS, TRIP_NIGHTS = concept("trip.length_days"), concept("trip.nights")
TIMEZONE = concept("booking.timezone")
MEAL_WHEN = concept("meal.when")
DOCUMENT_VOID = concept("document.void")
MED_NAME, MED_END, MED_STOPPED = (
    concept("medication.name"),
    concept("medication.end"),
    concept("medication.stopped"),
)
CALLED_OFF_STATUS = _terms("cancelled, canceled, declined, void, voided, called off")
# A ``status`` text naming one of these settles a record as the flags do ("Filed", "paid").
SETTLED_STATUS = _terms(
    "done, resolved, cancelled, canceled, returned, filed, completed, complete, paid, renewed,",
    "submitted, closed",
)
# A document or policy whose ``document.void`` flag is true, or whose status says one of these,
# covers nothing, whatever its dates say.
VOID_STATUS = (*CALLED_OFF_STATUS, *_terms("lapsed, terminated, revoked, suspended, expired"))
MAX_ALL_DAY_COMMITMENT = timedelta(days=31)  # longer all-day ranges are periods (except trips)
PASSPORT_MONTHS = timedelta(days=183)
MIN_BLANK_PAGES = 2  # a visa sticker takes a full page, entry and exit stamps another


# -- record helpers --------------------------------------------------------------------------
def _names(rec: Record, names: str | Iterable[str]) -> Iterable[str]:
    """The fields to read on ``rec`` for ``names``: concepts resolved through the vocabulary in
    force, field names as they are; a single name or concept may stand for a list of one."""
    t = type(rec).__name__
    if isinstance(names, str):
        return fields_of(t, names)
    return [f for n in names for f in fields_of(t, n)]


def _get(rec: Record, name: str) -> Any:
    """The value of field or concept ``name`` on ``rec``: for a concept, the first of its
    fields that is set; None when none is."""
    # A record's __dict__ holds every field of its type; a miss (a field the type lacks) through
    # getattr goes down pydantic's slow path, ~40x slower, and rules probe many absent fields.
    return read(rec.__dict__, type(rec).__name__, name)


def _named(rec: Record, name: str) -> str:
    """The user's own name of the field ``_get(rec, name)`` read (for a message), or the
    concept's first default name when none is set."""
    values = rec.__dict__
    found = fields_of(type(rec).__name__, name)
    return next((f for f in found if values.get(f) is not None), found[0] if found else name)


def _flag(rec: Record, *names: str) -> bool:
    values, t = rec.__dict__, type(rec).__name__
    hit = False
    for n in names:
        fields = fields_of(t, n)  # every name resolved, a hit or not: each notes what it read
        if not hit:
            for f in fields:
                if values.get(f) is True:
                    hit = True
                    break
    return hit


def plays(rec: Record | str, role: str) -> bool:
    """Whether ``rec``'s type (or the type named) plays ``role`` for this user."""
    t = rec if isinstance(rec, str) else type(rec).__name__
    return current().plays(t, role)


def _status(rec: Record, terms: Iterable[str]) -> str | None:
    """The first of ``terms`` that the record's ``status`` text names, or None."""
    st = _get(rec, STATUS)
    return _first_term(_norm(st), terms) if isinstance(st, str) else None


def _called_off(rec: Record) -> bool:
    """Whether ``rec`` says it will not happen or holds no more (a cancelled trip, a declined
    invitation, a void booking): a ``record.called_off`` flag true, or a status naming one.
    The one test of cancellation every rule and compiled constraint uses."""
    return _flag(rec, CALLED_OFF) or _status(rec, CALLED_OFF_STATUS) is not None


def _settled(rec: Record) -> bool:
    """Done: a settled flag (``done``, ``filed``, ``paid``, ...) is true, or ``status`` says so;
    a record called off is settled too."""
    return _flag(rec, SETTLED) or _status(rec, SETTLED_STATUS) is not None or _called_off(rec)


def _void(rec: Record) -> str | None:
    """Why a document or policy covers nothing (a ``document.void`` flag such as ``cancelled``
    or ``lapsed`` true, or a status saying so), or None when it is in force."""
    values = rec.__dict__
    hit = next((f for f in _names(rec, DOCUMENT_VOID) if values.get(f) is True), None)
    return hit or _status(rec, VOID_STATUS)


# A trip's length, when its end date is missing: ``trip.length_days`` counts the days away (first
# and last included), ``trip.nights`` the nights (the return is the day after the last night).
def _trip_end(rec: Record) -> date | None:
    """The last day of a trip or stay: its end, else its start plus a stated length in days or
    nights; None when unknown (never the start day: an unknown end is unknown)."""
    start, end = _first_day(rec, TRIP_START), _first_day(rec, TRIP_END)
    if end is not None or start is None:
        return max(end, start) if end and start else end
    days, nights = _number(_get(rec, TRIP_DAYS)), _number(_get(rec, TRIP_NIGHTS))
    if days is not None and 1 <= days <= 3660:
        return start + timedelta(days=int(days) - 1)
    if nights is not None and 0 <= nights <= 3660:
        return start + timedelta(days=int(nights))
    return None


@per_record
def _trip_days(rec: Record) -> tuple[date | None, date | None, bool]:
    """A trip's first day (``trip.start``), last day (``_trip_end``) and whether it was called
    off, worked out once per trip: the travel rules go through every trip of their look-back.
    Read in the order the rules skip a trip (no start, then called off), so a skipped trip's
    other fields are not read, nor noted as bindings an alert rests on."""
    start = _day(_get(rec, TRIP_START))
    if start is None:
        return None, None, False
    if _called_off(rec):
        return start, None, True
    return start, _trip_end(rec), False


# A record's zone (``booking.timezone``): an offset (``+09:00``, ``UTC-5``, ``-0500``, ``Z``)
# or an IANA zone name (``Asia/Tokyo``). The log stores a time written with its own offset in
# UTC already, so only naive local times need one; records without one are compared as given.


def _zone(rec: Record) -> tuple[tzinfo, str] | None:
    """The zone a record's ``booking.timezone`` field names, and its text; None when unset or
    unreadable."""
    text = _first_text(rec, TIMEZONE)
    if text is None:
        return None
    m = _OFFSET.fullmatch(text)
    if m is not None or text.upper() == "Z":
        if m is None or m.group(1) is None:
            return UTC, text
        hours, minutes = int(m.group(2)), int(m.group(3) or 0)
        if hours > 14 or minutes >= 60:
            return None
        sign = -1 if m.group(1) == "-" else 1
        return timezone(sign * timedelta(hours=hours, minutes=minutes)), text
    if _ZONE.fullmatch(text) is None:  # a zone name, never a path: data picks no file
        return None
    try:
        return ZoneInfo(text), text
    except (ZoneInfoNotFoundError, ValueError):
        return None


def _utc(local: datetime, zone: tuple[tzinfo, str] | None) -> datetime:
    """A naive local time in ``zone`` as naive UTC (the log's clock); as given without a zone."""
    if zone is None:
        return local
    try:
        return local.replace(tzinfo=zone[0]).astimezone(UTC).replace(tzinfo=None)
    except OverflowError:
        return local


def _text(rec: Record, names: str | Iterable[str]) -> str:
    """The text of ``names`` (fields or concepts) on ``rec``, lists flattened, joined by ``;``."""
    parts: list[str] = []
    values = rec.__dict__
    for n in _names(rec, names):
        v = values.get(n)
        if v is None:  # most of a concept's names: fields the type lacks or leaves unset
            continue
        if isinstance(v, str):
            parts.append(v)
        elif isinstance(v, list):
            parts.extend(x for x in v if isinstance(x, str))
    return " ; ".join(parts)


DATE_TYPES = frozenset({"date", "datetime"})


def _date_fields(user: UserView, t: str, names: str | Iterable[str]) -> list[str]:
    """The fields ``names`` (fields or concepts) stand for that type ``t`` has as date or
    date-time fields, in ``names`` order."""
    ftypes = user.field_types(t)
    found = (
        fields_of(t, names)
        if isinstance(names, str)
        else [f for n in names for f in fields_of(t, n)]
    )
    return [f for f in dict.fromkeys(found) if ftypes.get(f) in DATE_TYPES]


def _dated_from(
    user: UserView, t: str, fields: Sequence[str], since: date | datetime
) -> list[Record]:
    """Current records of ``t`` with a value from ``since`` on in any of the date ``fields``.

    Read through the fold's field indexes, so a rule about what lies ahead reads the records
    ahead, not the type's whole past (a superset of what ``_first_day(rec, fields) >= since``
    keeps; the rule applies its own test)."""
    found: dict[str, Record] = {}
    for f in fields:
        for rec in user.where(t, f, since=since):
            found.setdefault(rec.key, rec)
    return list(found.values())


def _from_day(
    user: UserView, t: str, since: date | None, fields: str | Sequence[str]
) -> list[Record]:
    """Current records of ``t`` with a date from ``since`` on in any of ``fields``, and those
    with none of them set (the rule decides about those); every record when ``since`` is None
    or ``t`` has none of the fields as dates. A superset of ``_first_day(rec, fields) >= since``
    read through the field indexes, so its cost follows the records returned."""
    dated = _date_fields(user, t, fields)
    if since is None or not dated:
        return user.all(t)
    undated = [r for r in user.unset(t, dated[0]) if all(_get(r, f) is None for f in dated[1:])]
    return _dated_from(user, t, dated, since) + undated


def _not_past(
    user: UserView, t: str, today: date | None, fields: str | Sequence[str]
) -> list[Record]:
    """Current records of ``t`` not dated before ``today`` by their first date ``fields``, and
    those with none of the fields set; every record when there is no clock or no date field."""
    recs = _from_day(user, t, today, fields)
    if today is None:
        return recs
    return [r for r in recs if (d := _first_day(r, fields)) is None or d >= today]


def _uneaten(user: UserView, t: str, today: date | None) -> list[Record]:
    """Current records of food type ``t``; of meals and reservations, only those not dated
    before today (those were eaten). A habit or a restaurant has no such date."""
    return _not_past(user, t, today, MEAL_WHEN) if plays(t, "meal") else user.all(t)


def _at_least(user: UserView, t: str, field: str, low: float) -> list[Record]:
    """Current records of ``t`` whose number ``field`` is ``low`` or more, through its index;
    every record when the field is not a number field (the rule checks each value)."""
    if user.field_types(t).get(field) not in ("int", "float"):
        return user.all(t)
    return user.where(t, field, since=low)


def _day(v: Any) -> date | None:
    """A date or datetime field as a date; None for other values and for placeholder dates
    outside the years 1000–9000 (9999-12-31 often means "never"), so arithmetic cannot overflow."""
    d = v.date() if isinstance(v, datetime) else v if isinstance(v, date) else None
    return d if d is not None and 1000 < d.year < 9000 else None


def _before(when: _When, span: timedelta) -> _When:
    """``when - span``, or the first date (date-time) there is when that falls before year 1.

    The log clock and a record's ``valid_from`` may lie anywhere in years 1-9999 (unlike field
    dates, which ``_day`` bounds), so a rule's arithmetic on them must not overflow there."""
    try:
        return when - span
    except OverflowError:
        return type(when).min


def _after(when: _When, span: timedelta) -> _When:
    """``when + span``, or the last date (date-time) there is when that falls after 9999."""
    try:
        return when + span
    except OverflowError:
        return type(when).max


def _first_day(rec: Record, names: str | Iterable[str]) -> date | None:
    """The first of ``names`` (fields or concepts) on ``rec`` holding a date, as a date."""
    values = rec.__dict__
    for n in _names(rec, names):
        if (v := values.get(n)) is not None and (d := _day(v)) is not None:
            return d
    return None


def _number(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _money(x: float, rec: Record) -> str:
    cur = _get(rec, CURRENCY)
    return f"{cur} {x:,.2f}" if isinstance(cur, str) and cur else f"{x:,.2f}"


def _first_text(rec: Record, name: str) -> str | None:
    """The first non-blank text among the fields ``name`` (a field or concept) stands for on
    ``rec``, stripped; None when there is none."""
    values = rec.__dict__
    for f in _names(rec, name):
        if isinstance(v := values.get(f), str) and v.strip():
            return v.strip()
    return None


def _label(rec: Record) -> str:
    name = _first_text(rec, LABEL)
    base = f"{type(rec).__name__} '{rec.key}'"
    return f"{base} ({name})" if name else base


def _days(n: int) -> str:
    return plural(n, "day")


def _current_meds(
    user: UserView, today: date | None, roles: Sequence[str] = ("medication",)
) -> list[tuple[Record, str]]:
    """Current records of types playing ``roles`` and their normalised medication names
    (stopped, ended ones left out)."""
    out = []
    for t in dict.fromkeys(t for r in roles for t in types_of(r)):
        for m in user.all(t):
            if _get(m, ACTIVE) is False or _flag(m, MED_STOPPED) or _called_off(m):
                continue
            end = _first_day(m, MED_END)
            if end is not None and today is not None and end < today:
                continue
            text = _norm(_text(m, MED_NAME))
            if text.strip():
                out.append((m, text))
    return out
