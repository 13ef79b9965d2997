"""Residence-day limits: days present in a country against a legal limit or a stated one."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta

from uac_kernel.core.records import Record
from uac_kernel.core.words import country as _country
from uac_kernel.rules.engine import Finding, Severity, rule
from uac_kernel.rules.library._common import (
    _after,
    _before,
    _called_off,
    _days,
    _get,
    _label,
    _number,
    _text,
    _trip_days,
)
from uac_kernel.rules.library.travel import (
    TRIP_COUNTRY,
    TRIP_WHERE,
    _home_countries,
    _trip_countries,
    _trips_from,
    _values,
)
from uac_kernel.state.query import UserView
from uac_kernel.vocab.catalogue import concept
from uac_kernel.vocab.resolve import types_of

__all__ = ["residence_day_limits"]


@dataclass(frozen=True, slots=True)
class StayLimit:
    """A limit on days present in ``country``: ``days`` or more (``over``: more than ``days``)
    in a ``period`` — ``"tax_year_uk"`` (6 April – 5 April), ``"calendar_year"``,
    ``"substantial_presence"`` (the US weighted three-year test), ``"visit"`` (one stay) or a
    rolling window of ``window`` days."""

    country: str
    name: str
    days: int
    period: str
    source: str
    consequence: str
    over: bool = False  # the limit is broken by more than ``days`` (else by reaching it)
    midnights: bool = False  # a day counts when present at midnight (else any part of a day)
    window: int = 0
    severity: Severity = "warning"


# Tax-residence tests and per-visit limits, each from its official source. Schengen's 90/180 is
# the rule ``schengen_90_180``. A test for a country is skipped when the user lives there or
# holds its passport (it concerns visitors).
STAY_LIMITS: tuple[StayLimit, ...] = (
    StayLimit(
        _country("United Kingdom"),
        "the UK Statutory Residence Test",
        183,
        "tax_year_uk",
        "HMRC RDR3, Statutory Residence Test guidance (Finance Act 2013, Schedule 45)",
        "you become UK tax resident for that tax year",
        midnights=True,
    ),
    StayLimit(
        _country("Canada"),
        "Canada's 183-day rule",
        183,
        "calendar_year",
        "Income Tax Act (Canada) s. 250(1)(a); CRA Income Tax Folio S5-F1-C1",
        "you are deemed resident in Canada for the year and taxed on worldwide income",
    ),
    StayLimit(
        _country("United States"),
        "the US substantial presence test",
        183,
        "substantial_presence",
        "26 U.S.C. 7701(b)(3); IRS Publication 519 (31 days this year and 183 days counting "
        "all of this year, a third of last year and a sixth of the year before)",
        "you become a US resident for tax purposes for the year",
    ),
    StayLimit(
        _country("United States"),
        "the US Visa Waiver Program (ESTA)",
        90,
        "visit",
        "8 U.S.C. 1187(a); 8 CFR 217.2 (admission for at most 90 days)",
        "if you enter visa-free under the VWP you overstay, which bars visa-free travel later",
        over=True,
    ),
)
LIMIT_COUNTRY = concept("stay_limit.country")
LIMIT_DAYS = concept("stay_limit.days")
LIMIT_WINDOW = concept("stay_limit.window")
_VWP_EXEMPT = frozenset({_country("United States"), _country("Canada")})  # no VWP needed
LOOKBACK = timedelta(days=3 * 366)  # the substantial presence test looks back two years


def _uk_tax_year(d: date) -> tuple[date, date]:
    first = date(d.year if d >= date(d.year, 4, 6) else d.year - 1, 4, 6)
    return first, date(first.year + 1, 4, 5)


def _presence(trips: list[tuple[Record, date, date]], midnights: bool) -> set[date]:
    """The days present on the trips (from first to last; at midnight: but the last), each
    once. The stays are merged first: a dense history has many trips over the same days."""
    spans = sorted((s, e - timedelta(days=1) if midnights and e > s else e) for _, s, e in trips)
    merged: list[list[date]] = []
    for s, last in spans:
        if merged and s <= _after(merged[-1][1], timedelta(days=1)):
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([s, last])
    days: set[date] = set()
    for lo, hi in merged:
        days.update(lo + timedelta(days=i) for i in range((hi - lo).days + 1))
    return days


def _count(days: set[date], lo: date, hi: date) -> int:
    return sum(1 for d in days if lo <= d <= hi)


def _stated(user: UserView) -> list[tuple[StayLimit, Record]]:
    """Limits stated by records of types playing ``stay_limit``: ``stay_limit.country``,
    ``stay_limit.days``, ``stay_limit.window`` (none: per visit)."""
    out = []
    for t in types_of("stay_limit"):
        for r in user.all(t):
            country = _text(r, LIMIT_COUNTRY)
            days = next((x for v in _values(r, LIMIT_DAYS) if (x := _number(v)) is not None), None)
            window = _number(_get(r, LIMIT_WINDOW))
            if not country.strip() or days is None or not 0 < days < 3660 or _called_off(r):
                continue
            ok_window = window is not None and 0 < window <= 3660
            out.append(
                (
                    StayLimit(
                        _country(country),
                        f"the stated limit of {_label(r)}",
                        int(days),
                        "rolling" if ok_window else "visit",
                        "stated by the user",
                        "you break the limit you recorded",
                        over=True,
                        window=int(window) if ok_window and window else 0,
                        severity="critical",
                    ),
                    r,
                )
            )
    return out


@rule(
    roles=["trip", "residence", "passport", "stay_limit"],
    clock=True,
    severity="warning",
    category="travel_document_validity",
    source="HMRC RDR3 (UK Statutory Residence Test, 183 days in a tax year from 6 April); "
    "26 U.S.C. 7701(b)(3) and IRS Publication 519 (substantial presence test); Income Tax Act "
    "(Canada) s. 250(1)(a) (183 days); 8 U.S.C. 1187 and 8 CFR 217.2 (Visa Waiver Program, 90 "
    "days a visit); a limit the user stated (role stay_limit)",
)
def residence_day_limits(user: UserView) -> Iterator[Finding]:
    """Reads trips (role ``trip``: ``trip.country``, ``trip.start``, ``trip.end`` or a stated
    length; skips called-off ones), home countries (``residence.country``; a passport's
    ``document.country``/``passport.nationality``) and limits the user stated (role
    ``stay_limit``: ``stay_limit.country``, ``stay_limit.days``, ``stay_limit.window``; none
    means per visit).

    For each coming trip to a country with a limit, counts the days present from the user's
    trips: the UK Statutory Residence Test (183 days at midnight in a tax year from 6 April),
    Canada's 183 days in a calendar year, the US substantial presence test (31 days this year
    and 183 weighted days over three years), the US Visa Waiver Program's 90 days a visit
    (warning, for travellers who are not US or Canadian), and stated limits (critical). The tax
    tests are skipped for the user's own countries. A trip with no end recorded counts through
    today while under way (the message says by when it had to end to stay within the limit),
    else its first day only, and the message says so. An alert names the trip, the other trips
    whose days it counted and the stated limit it breaks.
    """
    today = user.today
    limits = [(lim, None) for lim in STAY_LIMITS] + _stated(user)
    if today is None or not any(lim.country for lim, _ in limits):
        return
    wanted = {lim.country for lim, _ in limits}
    # (trip, start, last day counted, end when known) of the trips to a country with a limit; a
    # trip with no end recorded counts through today while under way, else its first day only.
    by_country: dict[str, list[tuple[Record, date, date, date | None]]] = {}
    for t in _trips_from(user, _before(today, LOOKBACK)):
        s, e, off = _trip_days(t)
        if s is None or off:
            continue
        for c in _trip_countries(t) & wanted:
            by_country.setdefault(c, []).append((t, s, e or max(s, today), e))
    if not any(last >= today for stays in by_country.values() for _, _, last, _ in stays):
        return  # no trip to such a country lies ahead or is under way
    home, passports = _home_countries(user)
    present: dict[tuple[str, bool], set[date]] = {}  # days present, by country and counting
    for lim, stated in limits:
        stays = by_country.get(lim.country)
        if not stays:
            continue
        if stated is None and (lim.country in home | passports):
            continue
        if lim.period == "visit" and stated is None and passports & _VWP_EXEMPT:
            continue
        if lim.period == "visit":
            days: set[date] = set()  # a visit counts its own days alone
        elif (lim.country, lim.midnights) in present:
            days = present[lim.country, lim.midnights]
        else:
            days = _presence([(t, s, last) for t, s, last, _ in stays], lim.midnights)
            present[lim.country, lim.midnights] = days
        for trip, start, last, end in stays:
            if last < today:
                continue  # over: what it did is counted for the trips ahead
            checked = _check(lim, days, start, last)
            if checked is None:
                continue
            span, lo, hi = checked
            # The other trips whose days the count took in (a visit counts only its own).
            counted = [
                t
                for t, s, x, _ in stays
                if t is not trip and s <= hi and x >= lo and lim.period != "visit"
            ]
            # The trip's own words for where it goes; a list of countries reads as the limit's.
            named = " ; ".join(
                v for v in _values(trip, TRIP_COUNTRY, TRIP_WHERE) if isinstance(v, str) and v
            )
            todo = " Shorten or move the trip, or take advice before you go."
            if end is None and start >= today:
                todo += (
                    " The trip's return date is not recorded, so only its first day was "
                    "counted: the real count may be higher."
                )
            elif end is None:
                others = [(t, s, x) for t, s, x, _ in stays if t is not trip]
                todo = _under_way(lim, others, start, today)
            yield Finding(
                f"{_label(trip)} ({start} – {end or 'return not recorded'}) brings your days in "
                f"{named or lim.country.strip().title()} to "
                f"{span}, against {lim.name} ({lim.days} days; {lim.source}): "
                f"{lim.consequence}.{todo}",
                [trip, *counted, *([stated] if stated is not None else [])],
                about=lim.name,
                severity=lim.severity,
            )


def _under_way(
    lim: StayLimit, others: list[tuple[Record, date, date]], start: date, today: date
) -> str:
    """What a message says of a stay begun on ``start`` with no end recorded, counted through
    ``today``: the last day it could have ended within ``lim``, found by adding its days one
    by one to the other trips' (the count may fall again as a year or window turns, so the
    first day it breaks is looked for, not solved for)."""
    days = _presence(others, lim.midnights)
    day = start
    while day <= today:
        # Present at midnight: a stay ending on ``day`` spends its nights up to the one before.
        if not lim.midnights or day == start:
            days.add(day)
        else:
            days.add(day - timedelta(days=1))
        if _check(lim, days, start, day) is not None:
            break
        day += timedelta(days=1)
    leave = day - timedelta(days=1)
    told = (
        "the limit was already broken on arrival"
        if leave < start
        else f"to stay within the limit you had to leave by {leave}"
    )
    return (
        f" The trip is under way with no return date recorded, so it was counted through "
        f"today ({today}): {told}. Leave as soon as you can or take advice, and record the "
        "return date."
    )


def _check(
    lim: StayLimit, days: set[date], start: date, last: date
) -> tuple[str, date, date] | None:
    """When the trip from ``start`` to ``last`` breaks ``lim``: the days counted, said, and the
    first and last day of the period counted."""
    broken = (lambda n: n > lim.days) if lim.over else (lambda n: n >= lim.days)
    if lim.period == "visit":
        n = (last - start).days + 1
        return (f"{_days(n)} in one visit", start, last) if broken(n) else None
    if lim.period == "rolling":
        lo = last - timedelta(days=lim.window - 1)
        n = _count(days, lo, last)
        said = f"{_days(n)} in the {lim.window} days {lo} – {last}"
        return (said, lo, last) if broken(n) else None
    if lim.period == "tax_year_uk":
        lo, hi = _uk_tax_year(last)
        n = _count(days, lo, hi)
        return (f"{_days(n)} in the UK tax year {lo} – {hi}", lo, hi) if broken(n) else None
    year = last.year
    n = _count(days, date(year, 1, 1), date(year, 12, 31))
    if lim.period == "calendar_year":
        said = f"{_days(n)} in {year}"
        return (said, date(year, 1, 1), date(year, 12, 31)) if broken(n) else None
    prior = _count(days, date(year - 1, 1, 1), date(year - 1, 12, 31))
    second = _count(days, date(year - 2, 1, 1), date(year - 2, 12, 31))
    weighted = n + prior / 3 + second / 6
    if n >= 31 and broken(int(weighted)):
        said = (
            f"{_days(n)} in {year}, {prior} in {year - 1} and {second} in {year - 2}: "
            f"{n} + {prior}/3 + {second}/6 = {weighted:.1f} weighted days"
        )
        return said, date(year - 2, 1, 1), date(year, 12, 31)
    return None
