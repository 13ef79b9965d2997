"""Travel rules: passport validity and pages, visas, the Schengen 90/180-day limit, and other
documents that expire before a trip.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from datetime import date, timedelta
from typing import Any

from uac_kernel.query import UserView
from uac_kernel.records import Record
from uac_kernel.rules.engine import Finding, rule
from uac_kernel.rules.library._common import (
    CERTIFICATES,
    MIN_BLANK_PAGES,
    PASSPORT_MONTHS,
    TRAVEL_DOCUMENTS,
    _before,
    _country,
    _day,
    _days,
    _flag,
    _from_day,
    _get,
    _label,
    _norm,
    _terms,
)

__all__ = ["document_expires_before_trip", "passport_validity", "schengen_90_180", "visa_validity"]


# -- travel ----------------------------------------------------------------------------------
def _upcoming_trips(user: UserView) -> Iterator[tuple[Record, date, date]]:
    """Current, not cancelled trips that have not ended: (trip, start, end or start)."""
    today = user.today
    # A trip that has not ended starts or ends from today on: the index reads just those.
    for trip in _from_day(user, "Trip", today, ("start", "end")):
        start = _day(_get(trip, "start"))
        if start is None or _flag(trip, "cancelled"):
            continue
        end = max(_day(_get(trip, "end")) or start, start)
        if today is None or end >= today:
            yield trip, start, end


def _trip_where(trip: Record) -> str:
    return ", ".join(
        v for n in ("destination", "country") if isinstance(v := _get(trip, n), str) and v
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
    # only an explicit traveller field does.
    fields = ("traveller", "travellers", "traveler", "travelers")
    return [n for f in fields for n in _names(_get(trip, f))]


def _passports_for(trip: Record, best: dict[str, Record]) -> list[Record]:
    """The passports of the trip's named travellers, plus those of no (or a 'me') holder."""
    names = _travellers(trip)
    if not names or all(h == "" for h in best):
        return list(best.values())
    me = {"", "me", "self", "user"}
    return [p for h, p in best.items() if h.strip() in me or any(_same_person(h, n) for n in names)]


def _passport_findings(
    p: Record, trip: Record, where: str, start: date, end: date, own: bool
) -> Iterator[Finding]:
    """``own``: the trip goes to the passport's own country, which lets its citizens in on it
    whatever its remaining validity or blank pages; it must only be valid for the journey."""
    exp = _day(_get(p, "expires")) or date.max
    if exp < start:
        yield Finding(
            f"{_label(p)} expires {exp}, {_days((start - exp).days)} before you leave for {where} "
            f"on {start} ({_label(trip)}): you cannot travel on it. Renew it now.",
            [p, trip],
        )
    elif exp <= end:
        yield Finding(
            f"{_label(p)} expires {exp}, during your trip to {where} ({start} – {end}, "
            f"{_label(trip)}): renew it before you leave.",
            [p, trip],
        )
    elif not own and exp != date.max and exp < end + PASSPORT_MONTHS:
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
    pages = _get(p, "blank_pages")
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
            about="blank_pages",
        )


@rule(
    watch=["Trip", "Passport", "Residence"],
    clock=True,
    severity="critical",
    category="travel_document_validity",
    source="U.S. Department of State, travel.state.gov country information (passport validity "
    "and blank pages; many countries require six months' validity)",
)
def passport_validity(user: UserView) -> Iterator[Finding]:
    """Reads current ``Trip`` (``start``, ``end``, ``country``, ``destination``, ``international``,
    traveller names in ``traveller(s)``/``companions``; skips ``cancelled`` and ended trips),
    ``Passport`` (``holder``, ``expires``, ``blank_pages``, ``country``/``nationality``) and
    ``Residence.country``.

    A trip is international if ``international`` is true, or if it is not false and names a
    ``country`` other than the home countries (residence and passport countries); countries are
    compared by name, code or demonym ("UK", "GB", "British", "United Kingdom" are one). For each
    traveller the passport with the latest ``expires`` is checked: critical if it expires before
    the trip ends; critical if less than 90 days, warning if less than 183 days (six months) after
    the return; critical if it has fewer than 2 ``blank_pages``. A trip to the passport's own
    country (``country``/``nationality``) is checked only for expiry before its end (its
    citizens need no remaining validity or pages to enter), and not at all if the user also
    lives there (domestic). A named traveller with no passport in that name but one with the
    same first name and another surname: critical. A trip's alerts clear once it has ended
    (the rule re-runs as the log's clock moves).
    """
    residence = _countries(*(_get(r, "country") for r in user.all("Residence")))
    home = residence | _countries(
        *(_get(p, n) for p in user.all("Passport") for n in ("country", "nationality"))
    )
    best: dict[str, Record] = {}
    for p in user.all("Passport"):
        if _flag(p, "cancelled", "lost", "replaced"):
            continue
        holder = _norm(str(_get(p, "holder") or "")).strip()
        exp = _day(_get(p, "expires")) or date.min
        if holder not in best or exp > (_day(_get(best[holder], "expires")) or date.min):
            best[holder] = p
    for trip, start, end in _upcoming_trips(user):
        dest = _countries(_get(trip, "country"))
        intl = _get(trip, "international")
        if intl is True or (intl is None and dest and not dest <= home):
            where = _trip_where(trip) or "your destination"
            passports = _passports_for(trip, best)
            for p in passports:
                own = bool(dest) and dest <= _countries(_get(p, "country"), _get(p, "nationality"))
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


def _areas(trip: Record) -> set[str]:
    """The normalised countries of a trip (``country``, ``countries``), plus Schengen if any is."""
    out = _countries(_get(trip, "country"), _get(trip, "countries"))
    return out | {_SCHENGEN_AREA} if out & SCHENGEN else out


@rule(
    watch=["Trip", "Visa"],
    clock=True,
    severity="critical",
    category="travel_document_validity",
    source="U.S. Department of State, travel.state.gov country information (visas: validity "
    "dates and number of entries)",
)
def visa_validity(user: UserView) -> Iterator[Finding]:
    """Reads current ``Visa`` records (``country``, ``starts``, ``expires``, ``entries``/
    ``single_entry``, ``used``; skips ``cancelled``) and ``Trip`` records (``country``/
    ``countries``, ``start``, ``end``). A visa for "Schengen" covers the Schengen countries.

    For each coming trip to a visa's country flags (critical): the visa ``starts`` after the trip
    starts; it ``expires`` before the trip ends; it is single-entry and already ``used``, or an
    earlier trip to the same country began within its validity.
    """
    visas: dict[str, list[Record]] = defaultdict(list)
    for v in user.all("Visa"):
        if not _flag(v, "cancelled"):
            for area in _countries(_get(v, "country")):
                visas[area].append(v)
    if not visas:
        return
    trips = [(t, s, _areas(t)) for t in user.all("Trip") if (s := _day(_get(t, "start")))]
    for trip, start, end in _upcoming_trips(user):
        where = _trip_where(trip) or "your destination"
        for v in {id(v): v for a in sorted(_areas(trip)) for v in visas.get(a, ())}.values():
            starts, expires = _day(_get(v, "starts")), _day(_get(v, "expires"))
            if starts is not None and starts > start:
                yield Finding(
                    f"{_label(v)} is valid from {starts}, {_days((starts - start).days)} after you "
                    f"arrive in {where} on {start} ({_label(trip)}): you would be refused entry; "
                    f"move the trip to on or after {starts} or get the visa's start changed.",
                    [v, trip],
                    about="starts",
                )
            if expires is not None and expires < end:
                yield Finding(
                    f"{_label(v)} expires {expires}, {_days((end - expires).days)} before your "
                    f"trip to {where} ends on {end} ({_label(trip)}): shorten the stay or extend "
                    "the visa.",
                    [v, trip],
                    about="expires",
                )
            entries = _get(v, "entries")
            single = _flag(v, "single_entry") or entries == 1 or "single" in str(entries).lower()
            if not single:
                continue
            v_areas = _countries(_get(v, "country"))
            used = [
                t
                for t, s, areas in trips
                if t is not trip
                and s < start
                and areas & v_areas
                and (starts is None or s >= starts)
                and (expires is None or s <= expires)
            ]
            if used or _flag(v, "used"):
                how = f" for {_label(used[0])}" if used else ""
                yield Finding(
                    f"{_label(v)} is single-entry and was already used{how}: it cannot be used "
                    f"again for {_label(trip)} on {start}; apply for a new visa before you go.",
                    [v, trip, *used[:1]],
                    about="used",
                )


@rule(
    watch=["Trip"],
    clock=True,
    severity="critical",
    category="travel_document_validity",
    source="Schengen Borders Code (Regulation (EU) 2016/399), Article 6: at most 90 days in any "
    "180-day period",
)
def schengen_90_180(user: UserView) -> Iterator[Finding]:
    """Reads ``Trip`` records (``country``/``countries``, ``start``, ``end``; skips ``cancelled``
    and, for the trip checked, ``resident``/``visa_exempt_long_stay`` true).

    For each coming trip to a Schengen country, counts the distinct days spent in the Schengen
    area (entry and exit days included) in the 180 days ending on the trip's last day, the trip
    itself included; flags more than 90 (critical) with the days used, planned and allowed.
    """
    stays = []
    # Only stays that end inside some coming trip's 180-day window count: none ended before
    # 180 days ago (the index hands over the trips from then on).
    since = _before(user.today, timedelta(days=180)) if user.today else None
    for t in _from_day(user, "Trip", since, ("start", "end")):
        s = _day(_get(t, "start"))
        if s is not None and not _flag(t, "cancelled") and _SCHENGEN_AREA in _areas(t):
            stays.append((t, s, max(_day(_get(t, "end")) or s, s)))
    coming = [
        (trip, start, end)
        for trip, start, end in _upcoming_trips(user)
        if _SCHENGEN_AREA in _areas(trip) and not _flag(trip, "resident", "visa_exempt_long_stay")
    ]
    if not stays or not coming:
        return
    # Each day in the area, once, with the stays that cover it (bounded to the windows asked).
    first = min(end for _, _, end in coming) - timedelta(days=179)
    last = max(end for _, _, end in coming)
    covered: dict[date, list[Record]] = defaultdict(list)
    for t, s, e in stays:
        lo, hi = max(s, first), min(e, last)
        for i in range(max((hi - lo).days + 1, 0)):
            covered[lo + timedelta(days=i)].append(t)
    for trip, start, end in coming:
        window = end - timedelta(days=179)
        days = [window + timedelta(days=i) for i in range(180)]
        days = [d for d in days if d in covered]
        before = [d for d in days if d < start and any(t is not trip for t in covered[d])]
        if len(days) > 90:
            planned = (end - start).days + 1
            yield Finding(
                f"{_label(trip)} ({start} – {end}, {planned} days) would bring your time in the "
                f"Schengen area to {len(days)} days in the 180 days up to {end}, over the 90-day "
                f"limit: {len(before)} days are already used since {window}, so at most "
                f"{max(90 - len(before), 0)} days remain. Shorten or move the trip.",
                [trip],
            )


@rule(
    watch=["Trip", *TRAVEL_DOCUMENTS],
    clock=True,
    severity="critical",
    category="travel_document_validity",
    source="U.S. Department of State, travel.state.gov (documents must be valid for the whole "
    "trip); WHO International Health Regulations (2005), Annex 6 (certificates of vaccination "
    "valid for a stated period); insurers' policy terms (no cover outside the policy period)",
)
def document_expires_before_trip(user: UserView) -> Iterator[Finding]:
    """Reads ``expires`` of current ``DriverLicense``, ``License``, ``IDCard``, ``Insurance``,
    ``HealthInsurance``, ``TravelInsurance``, ``HealthCertificate``, ``Certificate`` and
    ``Vaccination`` records (skips ``renewed``/``replaced``/``cancelled`` true) and current trips
    (``start``, ``end``).

    Of each type only the document with the latest ``expires`` counts (an old one that was
    replaced is not flagged). Flags it if it expires on or before a coming trip's end: critical if
    it has expired by departure (warning for certificates and vaccinations, which only some
    destinations check), warning if it expires during the trip.
    """
    docs: dict[str, tuple[Record, date]] = {}
    for t in TRAVEL_DOCUMENTS:
        for d in user.all(t):
            exp = _day(_get(d, "expires"))
            settled = _flag(d, "renewed", "replaced", "cancelled")
            if exp and not settled and (t not in docs or exp > docs[t][1]):
                docs[t] = (d, exp)
    if not docs:
        return
    for trip, start, end in _upcoming_trips(user):
        for t, (doc, exp) in docs.items():
            if exp < start:
                yield Finding(
                    f"{_label(doc)} expires {exp}, {_days((start - exp).days)} before "
                    f"{_label(trip)} starts on {start}: renew it before you go, or confirm you "
                    "won't need it.",
                    [doc, trip],
                    severity="warning" if t in CERTIFICATES else None,
                )
            elif exp <= end:
                yield Finding(
                    f"{_label(doc)} expires {exp}, during {_label(trip)} ({start} – {end}): "
                    "renew it before you leave.",
                    [doc, trip],
                    severity="warning",
                )
