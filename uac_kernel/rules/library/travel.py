"""Travel rules: passport validity and pages, visas, the Schengen 90/180-day limit, and other
documents that expire before a trip.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from datetime import date, timedelta
from typing import Any

from uac_kernel.core.records import Record
from uac_kernel.core.words import country as _country
from uac_kernel.core.words import norm as _norm
from uac_kernel.core.words import terms as _terms
from uac_kernel.rules.engine import Finding, rule
from uac_kernel.rules.library._common import (
    MIN_BLANK_PAGES,
    PASSPORT_MONTHS,
    TRIP_DAYS,
    TRIP_END,
    TRIP_START,
    _before,
    _called_off,
    _day,
    _days,
    _first_day,
    _flag,
    _from_day,
    _get,
    _label,
    _named,
    _number,
    _trip_days,
    _void,
    plays,
)
from uac_kernel.state.query import UserView
from uac_kernel.vocab.catalogue import concept
from uac_kernel.vocab.resolve import fields_of, per_record, types_of

__all__ = ["document_expires_before_trip", "passport_validity", "schengen_90_180", "visa_validity"]

# What the travel rules read (data/concepts/travel.toml); the roles they read are ``trip``,
# ``passport``, ``visa``, ``residence``, ``document``, ``insurance_policy``, ``health_certificate``.
TRIP_WHERE = concept("trip.destination")
TRIP_COUNTRY = concept("trip.country")
TRIP_INTERNATIONAL = concept("trip.international")
TRAVELLERS = concept("trip.travellers")
TRIP_EXEMPT = concept("trip.exempt")
EXPIRY = concept("document.expiry")
VALID_FROM = concept("document.valid_from")
HOLDER = concept("document.holder")
DOC_COUNTRY = concept("document.country")
RENEWED = concept("document.renewed")
SUPERSEDED = concept("document.superseded")
BLANK_PAGES = concept("passport.blank_pages")
NATIONALITY = concept("passport.nationality")
VISA_ENTRIES = concept("visa.entries")
SINGLE_ENTRY = concept("visa.single_entry")
VISA_USED = concept("visa.used")
RESIDENCE_COUNTRY = concept("residence.country")


# -- travel ----------------------------------------------------------------------------------
def _upcoming_trips(user: UserView) -> Iterator[tuple[Record, date, date | None]]:
    """Current, not cancelled trips that have not ended: (trip, start, end), the end None when
    neither ``end`` nor a stated length gives it. A trip with an unknown end is coming while it
    has not started: what can be checked without its end is checked before departure."""
    today = user.today
    # A trip that has not ended starts or ends from today on: the index reads just those.
    for trip in _trips_from(user, today):
        start, end, off = _trip_days(trip)
        if start is None or off:
            continue
        if today is None or (end or start) >= today:
            yield trip, start, end


def _trips_from(user: UserView, since: date | None) -> list[Record]:
    """Current records of every type playing ``trip`` that start or end from ``since`` on (or
    have neither date), read through the date indexes."""
    return [r for t in types_of("trip") for r in _from_day(user, t, since, (TRIP_START, TRIP_END))]


def _values(rec: Record, *names: str) -> list[Any]:
    """Every value set on ``rec`` in the fields bound to the concepts ``names``, in read order:
    a concept several fields carry (a trip's ``country`` and ``countries``) reads them all."""
    values, t = rec.__dict__, type(rec).__name__
    return [v for n in names for f in fields_of(t, n) if (v := values.get(f)) is not None]


def _role_countries(user: UserView, role: str, *names: str) -> set[str]:
    """The countries the records of every type playing ``role`` name in ``names``."""
    return _countries(*(v for t in types_of(role) for r in user.all(t) for v in _values(r, *names)))


def _home_countries(user: UserView) -> tuple[set[str], set[str]]:
    """The user's home countries: where they live (``residence.country``), and those of their
    passports (``document.country``, ``passport.nationality``)."""
    return (
        _role_countries(user, "residence", RESIDENCE_COUNTRY),
        _role_countries(user, "passport", DOC_COUNTRY, NATIONALITY),
    )


def _span_text(start: date, end: date | None) -> str:
    return f"{start} – {end}" if end else f"from {start}, return date not recorded"


def _trip_where(trip: Record) -> str:
    return ", ".join(
        v for n in (TRIP_WHERE, TRIP_COUNTRY) if isinstance(v := _get(trip, n), str) and v
    )


def _names(v: Any) -> list[str]:
    items = v if isinstance(v, list) else [v]
    return [_norm(x) for x in items if isinstance(x, str) and _norm(x).strip()]


def _countries(*values: Any) -> set[str]:
    """The countries named by ``values`` (a name or a list of names), one name per country."""
    return {_country(n) for v in values for n in _names(v)}


def _same_person(a: str, b: str) -> bool:
    sa, sb = set(a.split()), set(b.split())
    return bool(sa) and bool(sb) and (sa <= sb or sb <= sa)


def _travellers(trip: Record) -> list[str]:
    # Companions travel *with* the user, so naming them never narrows whose passport counts;
    # only a ``trip.travellers`` field does.
    return [n for v in _values(trip, TRAVELLERS) for n in _names(v)]


def _passports_for(trip: Record, best: dict[str, Record]) -> list[Record]:
    """The passports of the trip's named travellers, plus those of no (or a 'me') holder."""
    names = _travellers(trip)
    if not names or all(h == "" for h in best):
        return list(best.values())
    me = {"", "me", "self", "user"}
    return [p for h, p in best.items() if h.strip() in me or any(_same_person(h, n) for n in names)]


def _passport_findings(
    p: Record, trip: Record, where: str, start: date, end: date | None, own: bool
) -> Iterator[Finding]:
    """``own``: the trip goes to the passport's own country, which lets its citizens in on it
    whatever its remaining validity or blank pages; it must only be valid for the journey.
    ``end`` None: the return is unknown, so the margin after it is at most that after departure."""
    exp = _day(_get(p, EXPIRY)) or date.max
    if exp < start:
        yield Finding(
            f"{_label(p)} expires {exp}, {_days((start - exp).days)} before you leave for {where} "
            f"on {start} ({_label(trip)}): you cannot travel on it. Renew it now.",
            [p, trip],
        )
    elif end is not None and exp <= end:
        yield Finding(
            f"{_label(p)} expires {exp}, during your trip to {where} ({start} – {end}, "
            f"{_label(trip)}): renew it before you leave.",
            [p, trip],
        )
    elif end is None and not own and exp != date.max and exp < start + PASSPORT_MONTHS:
        after = (exp - start).days
        yield Finding(
            f"{_label(p)} expires {exp}, {_days(after)} after you leave for {where} on {start} "
            f"({_label(trip)}). The return date is not recorded, so the passport will be valid "
            f"at most {_days(after)} after you come back, and it may expire while you are away. "
            "Many countries require six months' validity beyond the stay: check the entry rules "
            "on travel.state.gov, record the return date, and renew before you go.",
            [p, trip],
            severity="critical" if after < 90 else "warning",
        )
    elif end is not None and not own and exp != date.max and exp < end + PASSPORT_MONTHS:
        after = (exp - end).days
        yield Finding(
            f"{_label(p)} expires {exp}, only {_days(after)} after you return from {where} on "
            f"{end} ({_days((exp - start).days)} after departure on {start}; {_label(trip)}). "
            "Many countries require six months' validity beyond the stay: you need a passport "
            f"valid until at least {end + PASSPORT_MONTHS}. Check the entry rules on "
            "travel.state.gov and renew before you go.",
            [p, trip],
            severity="critical" if after < 90 else "warning",
        )
    pages = _get(p, BLANK_PAGES)
    if (
        not own
        and isinstance(pages, int)
        and not isinstance(pages, bool)
        and 0 <= pages < MIN_BLANK_PAGES
    ):
        yield Finding(
            f"{_label(p)} has {pages} blank page{'' if pages == 1 else 's'} left and "
            f"{_label(trip)} goes to {where} on {start}: many countries require "
            f"{MIN_BLANK_PAGES} (a visa takes a full page, entry and exit stamps another). Renew "
            "the passport before applying for any visa.",
            [p, trip],
            about=_named(p, BLANK_PAGES),
        )


@rule(
    roles=["trip", "passport", "residence"],
    clock=True,
    severity="critical",
    category="travel_document_validity",
    source="U.S. Department of State, travel.state.gov country information (passport validity "
    "and blank pages; many countries require six months' validity)",
)
def passport_validity(user: UserView) -> Iterator[Finding]:
    """Reads current trips (role ``trip``: ``trip.start``, ``trip.end`` or a stated
    ``trip.length_days``/``trip.nights``, ``trip.country``, ``trip.destination``,
    ``trip.international``, traveller names in ``trip.travellers``; skips called-off and ended
    trips), passports (role ``passport``: ``document.holder``, ``document.expiry``,
    ``passport.blank_pages``, ``document.country``/``passport.nationality``; skips
    ``document.superseded`` ones) and ``residence.country`` of the role ``residence``.

    A trip is international if ``trip.international`` is true, or if it is not false and names a
    country other than the home countries (residence and passport countries); countries are
    compared by name, code or demonym ("UK", "GB", "British", "United Kingdom" are one). Whose
    passports count: those of the trip's travellers and of no (or a "me") holder; without
    travellers, every passport. Companions named elsewhere travel with the user and never narrow
    it. For each holder the passport with the latest expiry is checked: critical if it expires
    before the trip ends; critical if less than 90 days, warning if less than 183 days (six
    months) after the return; critical if it has fewer than 2 blank pages. A trip to the
    passport's own country (its country or nationality) is checked only for expiry before its end
    (its citizens need no remaining validity or pages to enter), and not at all if the user also
    lives there (domestic). A trip with no end recorded is checked against its departure: the
    validity left after the return is at most that left after departure (critical under 90 days,
    warning under 183), and the message says the return date is unknown. A named traveller with
    no passport in that name but one with the same first name and another surname: critical. A
    trip's alerts clear once it has ended (the rule re-runs as the log's clock moves).
    """
    residence, passport_countries = _home_countries(user)
    home = residence | passport_countries
    best: dict[str, Record] = {}
    for p in (p for t in types_of("passport") for p in user.all(t)):
        if _flag(p, SUPERSEDED) or _called_off(p):
            continue
        holder = _norm(str(_get(p, HOLDER) or "")).strip()
        exp = _day(_get(p, EXPIRY)) or date.min
        if holder not in best or exp > (_day(_get(best[holder], EXPIRY)) or date.min):
            best[holder] = p
    for trip, start, end in _upcoming_trips(user):
        dest = _countries(*_values(trip, TRIP_COUNTRY))
        intl = _get(trip, TRIP_INTERNATIONAL)
        if intl is True or (intl is None and dest and not dest <= home):
            where = _trip_where(trip) or "your destination"
            passports = _passports_for(trip, best)
            for p in passports:
                own = bool(dest) and dest <= _countries(*_values(p, DOC_COUNTRY, NATIONALITY))
                if not (own and dest <= residence):
                    yield from _passport_findings(p, trip, where, start, end, own)
            yield from _name_mismatches(trip, best, passports)


def _name_mismatches(
    trip: Record, best: dict[str, Record], found: list[Record]
) -> Iterator[Finding]:
    """A named traveller with no passport of that name, but one whose holder has the same
    first name and another surname (a ticket must match the passport exactly)."""
    matched = {id(p) for p in found}
    for name in _travellers(trip):
        if any(_same_person(h, name) for h in best):
            continue
        for holder, p in best.items():
            first = holder.split()[:1]
            if id(p) not in matched and first and first == name.split()[:1]:
                yield Finding(
                    f"{_label(trip)} is booked for '{name.strip().title()}', but {_label(p)} is in "
                    f"the name '{holder.title()}': airlines require the ticket name to match the "
                    "passport exactly; correct the booking or reissue the passport before you go.",
                    [p, trip],
                    about=f"name:{name.strip()}",
                )


# Schengen area members (European Commission, "Schengen Area", 29 countries since 2025).
SCHENGEN = frozenset(
    _country(t)
    for t in _terms(
        "Austria, Belgium, Bulgaria, Croatia, Czechia, Czech Republic, Denmark, Estonia, Finland,",
        "France, Germany, Greece, Hungary, Iceland, Italy, Latvia, Liechtenstein, Lithuania,",
        "Luxembourg, Malta, Netherlands, Norway, Poland, Portugal, Romania, Slovakia, Slovenia,",
        "Spain, Sweden, Switzerland",
    )
)
_SCHENGEN_AREA = _norm("Schengen")


@per_record
def _trip_countries(trip: Record) -> frozenset[str]:
    """The normalised countries of a trip (``trip.country``), worked out once per trip."""
    return frozenset(_countries(*_values(trip, TRIP_COUNTRY)))


@per_record
def _areas(trip: Record) -> frozenset[str]:
    """The normalised countries of a trip (``trip.country``), plus Schengen if any is."""
    out = _trip_countries(trip)
    return out | {_SCHENGEN_AREA} if out & SCHENGEN else out


@rule(
    roles=["trip", "visa"],
    clock=True,
    severity="critical",
    category="travel_document_validity",
    source="U.S. Department of State, travel.state.gov country information (visas: validity "
    "dates and number of entries)",
)
def visa_validity(user: UserView) -> Iterator[Finding]:
    """Reads current visas (role ``visa``: ``document.country``, ``document.valid_from``,
    ``document.expiry``, ``visa.entries``/``visa.single_entry``, ``visa.used``; skips called-off
    ones) and trips (role ``trip``: ``trip.country``, ``trip.start``, ``trip.end``). A visa for
    "Schengen" covers the Schengen countries.

    For each coming trip to a visa's country flags (critical): the visa starts after the trip
    starts; it expires before the trip ends; it is single-entry and already used, or an earlier
    trip to the same country (not called off) began within its validity. A trip with no end
    recorded (no end or stated length): a visa expiring before arrival is critical, one expiring
    later a warning naming the date to leave by.
    """
    visas: dict[str, list[Record]] = defaultdict(list)
    for v in (v for t in types_of("visa") for v in user.all(t)):
        if not _called_off(v):
            for area in _countries(*_values(v, DOC_COUNTRY)):
                visas[area].append(v)
    if not visas:
        return
    # A trip called off never entered the country, so it used no entry.
    trips = [
        (t, s, _areas(t))
        for t in _trips_from(user, None)
        if (s := _day(_get(t, TRIP_START))) and not _called_off(t)
    ]
    for trip, start, end in _upcoming_trips(user):
        where = _trip_where(trip) or "your destination"
        for v in {id(v): v for a in sorted(_areas(trip)) for v in visas.get(a, ())}.values():
            starts, expires = _first_day(v, VALID_FROM), _day(_get(v, EXPIRY))
            if starts is not None and starts > start:
                yield Finding(
                    f"{_label(v)} is valid from {starts}, {_days((starts - start).days)} after you "
                    f"arrive in {where} on {start} ({_label(trip)}): you would be refused entry; "
                    f"move the trip to on or after {starts} or get the visa's start changed.",
                    [v, trip],
                    about=_named(v, VALID_FROM),
                )
            if expires is not None and end is None and expires >= start:
                yield Finding(
                    f"{_label(v)} expires {expires} and {_label(trip)} to {where} starts {start} "
                    "with no return date recorded: leave by the visa's expiry or extend it, and "
                    "record the return date so it can be checked.",
                    [v, trip],
                    about=_named(v, EXPIRY),
                    severity="warning",
                )
            elif expires is not None and expires < (end or start):
                yield Finding(
                    f"{_label(v)} expires {expires}, {_days(((end or start) - expires).days)} before "
                    f"your trip to {where} ({_span_text(start, end)}, {_label(trip)}) ends: "
                    "shorten the stay or extend the visa.",
                    [v, trip],
                    about=_named(v, EXPIRY),
                )
            entries = _get(v, VISA_ENTRIES)
            single = _flag(v, SINGLE_ENTRY) or entries == 1 or "single" in str(entries).lower()
            if not single:
                continue
            v_areas = _countries(*_values(v, DOC_COUNTRY))
            used = [
                t
                for t, s, areas in trips
                if t is not trip
                and s < start
                and areas & v_areas
                and (starts is None or s >= starts)
                and (expires is None or s <= expires)
            ]
            if used or _flag(v, VISA_USED):
                how = f" for {_label(used[0])}" if used else ""
                yield Finding(
                    f"{_label(v)} is single-entry and was already used{how}: it cannot be used "
                    f"again for {_label(trip)} on {start}; apply for a new visa before you go.",
                    [v, trip, *used[:1]],
                    about=_named(v, VISA_USED),
                )


@rule(
    roles=["trip"],
    clock=True,
    severity="critical",
    category="travel_document_validity",
    source="Schengen Borders Code (Regulation (EU) 2016/399), Article 6: at most 90 days in any "
    "180-day period",
)
def schengen_90_180(user: UserView) -> Iterator[Finding]:
    """Reads trips (role ``trip``: ``trip.country``, ``trip.start``, ``trip.end`` or a stated
    length ``trip.length_days``/``trip.nights``; skips called-off ones and, for the trip checked,
    one whose ``trip.exempt`` flag is true: a resident or a long-stay visa holder).

    For each coming trip to a Schengen country, counts the distinct days spent in the Schengen
    area (entry and exit days included) in the 180 days ending on the trip's last day, the trip
    itself included; flags more than 90 (critical) with the days used, planned and allowed, and
    names the earlier stays counted. A stay whose stated length in days exceeds its dates counts the stated days (the records disagree and
    an overstay bars entry, so the count errs safe; the message says so). A coming trip with no
    end recorded: the date by which to leave, when earlier stays leave fewer than 90 days (warning).
    """
    stays: list[tuple[Record, date, date]] = []
    extra: dict[str, int] = {}  # stated days beyond a stay's dates
    # Only stays that end inside some coming trip's 180-day window count: none ended before
    # 180 days ago (the index hands over the trips from then on).
    since = _before(user.today, timedelta(days=180)) if user.today else None
    for t in _trips_from(user, since):
        s, e, off = _trip_days(t)
        if s is None or off or _SCHENGEN_AREA not in _areas(t):
            continue
        stated = _number(_get(t, TRIP_DAYS))
        if e is not None and stated is not None and (e - s).days + 1 < stated <= 3660:
            extra[t.key] = int(stated) - (e - s).days - 1
        stays.append((t, s, e or s))  # an unknown end counts the days known: the first
    coming = [
        (trip, start, end)
        for trip, start, end in _upcoming_trips(user)
        if _SCHENGEN_AREA in _areas(trip) and not _flag(trip, TRIP_EXEMPT)
    ]
    if not stays or not coming:
        return
    # Each day in the area, once, with the stays that cover it (bounded to the windows asked).
    first = min(start for _, start, _ in coming) - timedelta(days=179)
    last = max((end or start) + timedelta(days=89) for _, start, end in coming)
    covered: dict[date, list[Record]] = defaultdict(list)
    for t, s, e in stays:
        lo, hi = max(s, first), min(e, last)
        for i in range(max((hi - lo).days + 1, 0)):
            covered[lo + timedelta(days=i)].append(t)

    def used(window: date, upto: date, skip: Record) -> tuple[set[date], list[Record]]:
        """Days in the area from ``window`` to ``upto`` by stays other than ``skip``, and the
        stays inside the window whose stated length adds days their dates lack."""
        days = {
            window + timedelta(days=i)
            for i in range((upto - window).days + 1)
            if any(t is not skip for t in covered.get(window + timedelta(days=i), ()))
        }
        longer = [
            t for t, s, e in stays if t.key in extra and t is not skip and window <= s and e <= upto
        ]
        return days, longer

    def counted(days: set[date], longer: list[Record], skip: Record) -> list[Record]:
        """The earlier stays a count rests on: those covering ``days``, and ``longer``."""
        found = {id(t): t for d in sorted(days) for t in covered[d] if t is not skip}
        return list({**found, **{id(t): t for t in longer}}.values())

    for trip, start, end in coming:
        if end is None:
            # Staying on from the first day: the last day that keeps within 90 in 180.
            stay_until = None
            earlier: list[Record] = []
            for i in range(90):
                d = start + timedelta(days=i)
                before, longer = used(d - timedelta(days=179), d, trip)
                gone = {x for x in before if x < start}
                total = len(gone) + i + 1 + sum(extra[t.key] for t in longer)
                earlier = counted(gone, longer, trip)
                if total > 90:
                    break
                stay_until = d
            if stay_until is None or stay_until < start + timedelta(days=89):
                can = (
                    f"leave by {stay_until} ({_days((stay_until - start).days + 1)} at most)"
                    if stay_until
                    else "you have no days left: do not enter"
                )
                yield Finding(
                    f"{_label(trip)} starts {start} with no return date recorded, and earlier "
                    f"Schengen stays count against the 90 days in any 180: {can}. Record the "
                    "return date so it can be checked.",
                    [trip, *earlier],
                    severity="warning" if stay_until else "critical",
                )
            continue
        window = end - timedelta(days=179)
        before, longer = used(window, end, trip)
        own = {start + timedelta(days=i) for i in range((end - start).days + 1)}
        total = len(before | own) + sum(extra[t.key] for t in longer)
        if total > 90:
            prior = len({d for d in before if d < start}) + sum(extra[t.key] for t in longer)
            note = "".join(
                f" {_label(t)} states {int(_get(t, TRIP_DAYS))} days, {_days(extra[t.key])} more "
                "than its dates cover: counted as stated, to be safe; correct the dates if the "
                "stated length is wrong."
                for t in longer
            )
            planned = (end - start).days + 1
            yield Finding(
                f"{_label(trip)} ({start} – {end}, {planned} days) would bring your time in the "
                f"Schengen area to {total} days in the 180 days up to {end}, over the 90-day "
                f"limit: {prior} days are already used since {window}, so at most "
                f"{max(90 - prior, 0)} days remain. Shorten or move the trip.{note}",
                [trip, *counted(before, longer, trip)],
            )


@rule(
    roles=["trip", "document"],
    clock=True,
    severity="critical",
    category="travel_document_validity",
    source="U.S. Department of State, travel.state.gov (documents must be valid for the whole "
    "trip); WHO International Health Regulations (2005), Annex 6 (certificates of vaccination "
    "valid for a stated period); insurers' policy terms (no cover outside the policy period)",
)
def document_expires_before_trip(user: UserView) -> Iterator[Finding]:
    """Reads current records of every type playing ``document`` (by default licences, identity
    cards, insurance policies, health certificates and vaccinations): ``document.expiry``,
    ``document.valid_from``, ``document.renewed`` (cover continues past the expiry) and what
    voids one (``document.void`` true, or such a status); and coming trips (role ``trip``:
    ``trip.start``, ``trip.end`` or a stated length).

    The documents of a type are intervals, all of them: a trip is covered on the days some
    document in force covers. A cancelled or lapsed one covers nothing. Flags the uncovered days
    of a coming trip, naming the documents and the trip: critical when the departure day is
    uncovered (warning for types playing ``health_certificate``, which only some destinations
    check), warning for a gap later in the trip. A trip with no end recorded is checked on the
    days known, its first. Also flags a coming gap between two policies of one type playing
    ``insurance_policy`` (one ends before the next starts): warning, with the uncovered days.
    """
    coverage: dict[str, tuple[list[Record], list[tuple[date | None, date | None]]]] = {}
    for t in types_of("document"):
        docs = user.all(t)
        spans = [_doc_span(d) for d in docs if not _void(d)]
        bounded = any(_void(d) or _get(d, EXPIRY) is not None for d in docs)
        if docs and bounded:
            coverage[t] = (docs, [sp for sp in spans if sp is not None])
    if not coverage:
        return
    for trip, start, end in _upcoming_trips(user):
        for t, (docs, spans) in coverage.items():
            gaps = _uncovered(spans, start, end or start)
            if not gaps:
                continue
            at_start = gaps[0][0] == start
            n = sum((hi - lo).days + 1 for lo, hi in gaps)
            where = ", ".join(f"{lo}" if lo == hi else f"{lo} – {hi}" for lo, hi in gaps)
            unknown = "" if end else "; later days cannot be checked without a return date"
            yield Finding(
                f"No {t} in force covers {_label(trip)} ({_span_text(start, end)}) on "
                f"{_days(n)}: {where}{unknown}. {_describe(docs, start)} Renew or replace it before "
                "you go, or confirm you won't need it there.",
                [*docs, trip],
                severity=None if at_start and not plays(t, "health_certificate") else "warning",
            )
    today = user.today
    for t, (all_docs, _) in coverage.items():
        if not plays(t, "insurance_policy"):
            continue
        docs = [d for d in all_docs if not _void(d)]
        for a, b, lo, hi in _policy_gaps(docs):
            if today is None or hi >= today:
                yield Finding(
                    f"{_label(a)} ends {lo - timedelta(days=1)} and {_label(b)} starts "
                    f"{hi + timedelta(days=1)}: no {t} covers {lo} – {hi} "
                    f"({_days((hi - lo).days + 1)}). Move the new policy's start or extend the "
                    "old one so the cover is continuous.",
                    [a, b],
                    about="gap",
                    severity="warning",
                )


def _doc_span(d: Record) -> tuple[date | None, date | None]:
    """The days a document in force covers: (first or None, last or None: open)."""
    renewed = _flag(d, RENEWED)
    return _first_day(d, VALID_FROM), None if renewed else _day(_get(d, EXPIRY))


def _uncovered(
    spans: list[tuple[date | None, date | None]], lo: date, hi: date
) -> list[tuple[date, date]]:
    """The runs of days from ``lo`` to ``hi`` that no span covers, in order."""
    gaps: list[tuple[date, date]] = []
    day = lo
    for first, last in sorted(spans, key=lambda sp: sp[0] or date.min):
        if day > hi:
            break
        if last is not None and last < day:
            continue
        if first is not None and first > day:
            gaps.append((day, min(first - timedelta(days=1), hi)))
        if last is None:
            return gaps
        day = max(day, last + timedelta(days=1))
    if day <= hi:
        gaps.append((day, hi))
    return gaps


def _policy_gaps(docs: list[Record]) -> Iterator[tuple[Record, Record, date, date]]:
    """Consecutive policies with days between them: (earlier, later, first and last day
    uncovered). Only a later policy with a start date can show a gap."""
    spans = sorted(
        ((d, *_doc_span(d)) for d in docs), key=lambda x: (x[1] or date.min, x[2] or date.max)
    )
    reach: Record | None = None  # the policy covering furthest so far, and its last day
    ends: date | None = None
    for d, first, last in spans:
        gap = ends is not None and first is not None and first > ends + timedelta(days=1)
        if reach is not None and ends is not None and first is not None and gap:
            yield reach, d, ends + timedelta(days=1), first - timedelta(days=1)
        if reach is None or (ends is not None and (last is None or last > ends)):
            reach, ends = d, last


def _describe(docs: list[Record], start: date) -> str:
    """What each document covers, or why it covers nothing, against a trip from ``start``."""
    parts = []
    for d in docs[:4]:
        why = _void(d)
        first, last = _doc_span(d)
        if why:
            parts.append(f"{_label(d)} is {why}: it covers nothing")
        elif last is not None and last < start:
            parts.append(f"{_label(d)} expires {last}, {_days((start - last).days)} before {start}")
        else:
            until = last or ("open-ended" if _flag(d, RENEWED) else "no end date")
            parts.append(f"{_label(d)} covers {first or '…'} – {until}")
    return "; ".join(parts) + "."
