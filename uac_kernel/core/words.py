"""Words as rules, constraints and the vocabulary matcher compare them: normalised tokens,
country names, zone offsets and weekdays.

Text is compared as lowercase word tokens, naively singularised, padded with spaces, so a term
matches whole words only. The rule library, the constraint knowledge tables and the matcher all
read these, so they live below all three.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

__all__ = [
    "COUNTRY_NAMES",
    "DAY_NAMES",
    "OFFSET",
    "WEEKDAYS",
    "ZONE",
    "classes",
    "country",
    "first_term",
    "norm",
    "singular",
    "split",
    "terms",
]

# -- text matching ---------------------------------------------------------------------------
# Text is compared as lowercase word tokens, naively singularised, padded with spaces, so a term
# matches whole words only: "amoxicillin-clavulanate" mentions "amoxicillin"; "K2" is not "K".

_WORD = re.compile(r"[a-z0-9]+")


def singular(w: str) -> str:
    return w[:-1] if len(w) > 3 and w[-1] == "s" and w[-2] != "s" else w


def norm(text: str) -> str:
    # Rules normalise the same short names (countries, drugs, categories) for every record on
    # every run: those are cached, so a run over 10k trips normalises each distinct name once.
    return _norm_short(text) if len(text) <= _SHORT else _normalise(text)


def _normalise(text: str) -> str:
    return " " + " ".join(singular(w) for w in _WORD.findall(text.lower())) + " "


_SHORT = 100  # characters: at most ~16k cached texts of this size take a few MB
_norm_short = functools.lru_cache(maxsize=16_384)(_normalise)


def terms(*lists: str) -> tuple[str, ...]:
    """Normalised terms from comma-separated lists: ``terms("penicillin, pen vk")``."""
    return tuple(norm(t) for text in lists for t in text.split(",") if t.strip())


def split(names: str) -> tuple[str, ...]:
    return tuple(names.split())


def first_term(text: str, terms: Iterable[str]) -> str | None:
    """The first of ``terms`` that normalised ``text`` mentions, or None."""
    return next((t.strip() for t in terms if t in text), None)


def classes(text: str, table: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """The classes of ``table`` that normalised ``text`` mentions, each with the word it matched."""
    return {cls: hit for cls, terms in table.items() if (hit := first_term(text, terms))}


# Other names people give a country: ISO 3166-1 codes, short and formal names, its nations, the
# demonym a passport's ``nationality`` often holds, and a few native names. Two-letter codes
# that are also US state codes (DE, IN, CA) or words ("no") are left out. A name not listed
# stands for itself. Matched whole, never as a word inside a longer name.
_COUNTRY_ALIASES = {
    "United Kingdom": "UK, U.K., GB, GBR, Great Britain, Britain, British, England, English, "
    "Scotland, Scottish, Wales, Welsh, Northern Ireland, "
    "United Kingdom of Great Britain and Northern Ireland",
    "United States": "US, U.S., USA, U.S.A., United States of America, America, American",
    "Ireland": "IE, IRL, Irish, Republic of Ireland, Eire",
    "Switzerland": "CH, CHE, Swiss, Schweiz, Suisse, Svizzera",
    "Germany": "DEU, German, Deutschland",
    "France": "FR, FRA, French",
    "Italy": "IT, ITA, Italian, Italia",
    "Spain": "ES, ESP, Spanish, España",
    "Portugal": "PT, PRT, Portuguese",
    "Netherlands": "NL, NLD, Dutch, Holland, The Netherlands",
    "Belgium": "BE, BEL, Belgian",
    "Austria": "AT, AUT, Austrian, Österreich",
    "Czechia": "CZ, CZE, Czech, Czech Republic",
    "Poland": "PL, POL, Polish, Polska",
    "Sweden": "SE, SWE, Swedish, Sverige",
    "Norway": "NOR, Norwegian, Norge",
    "Denmark": "DK, DNK, Danish, Danmark",
    "Japan": "JP, JPN, Japanese, Nippon",
    "China": "CN, CHN, Chinese, PRC, People's Republic of China",
    "South Korea": "KR, KOR, Korea, Korean, Republic of Korea",
    "India": "IND, Indian",
    "Canada": "CAN, Canadian",
    "Mexico": "MX, MEX, Mexican",
    "Brazil": "BR, BRA, Brazilian, Brasil",
    "Australia": "AU, AUS, Australian",
    "New Zealand": "NZ, NZL, New Zealander",
    "Nigeria": "NG, NGA, Nigerian",
    "South Africa": "ZA, ZAF, South African",
    "United Arab Emirates": "AE, ARE, UAE, Emirati",
}
COUNTRY_NAMES: dict[str, str] = {
    alias: norm(name)
    for name, aliases in _COUNTRY_ALIASES.items()
    for alias in (*terms(aliases), norm(name))
}


def country(text: str) -> str:
    """The normalised name of the country ``text`` names (``"UK"``, ``"GB"``, ``"British"`` and
    ``"United Kingdom"`` are one country); a name the table lacks, normalised."""
    n = norm(text)
    return COUNTRY_NAMES.get(n, n)


# Zone offsets as a record writes them (``+09:00``, ``UTC-5``, ``-0500``, ``Z``) and IANA zone names.
OFFSET = re.compile(r"(?:utc|gmt)?\s*(?:([+-])\s*(\d{1,2})(?::?(\d{2}))?)?", re.IGNORECASE)
ZONE = re.compile(r"[A-Za-z]+(?:/[A-Za-z0-9_+-]+){1,2}")

# Weekdays by name and short form, Monday 0.
DAY_NAMES = split("Monday Tuesday Wednesday Thursday Friday Saturday Sunday")
WEEKDAYS = {
    **{d.lower(): i for i, d in enumerate(DAY_NAMES)},
    **{d.lower()[:3]: i for i, d in enumerate(DAY_NAMES)},
    "tues": 1,
    "thur": 3,
    "thurs": 3,
}
