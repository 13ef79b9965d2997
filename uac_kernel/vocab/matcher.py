"""The matcher: bindings proposed from a user's own type and field names to the catalogue.

Deterministic, stdlib only. A name is split (camelCase, PascalCase, acronyms, snake, kebab,
spaces), casefolded, stripped of accents, its short forms expanded and its stop tokens dropped
(``data/concepts/_matcher.toml``), each token folded to a stem (expires, expiry, expiration →
``expir``); then compared with the ``words`` of every role and concept in the catalogue, read at
run time. A field is a candidate for a concept only when its schema type fits the concept's value
kind (``catalogue.KINDS``); a sample of its values may add a bonus (countries, time zones,
currency codes, weekdays, drug or food words; values that are keys of another type make a link),
never enough alone. Each proposal has a score in [0, 1] and the reason it matched; ``used`` when
it scores at least 0.75 and beats the next candidate by 0.15, ``held`` for review when lower or
ambiguous, or when it would feed a critical rule from a name alone; dropped under 0.5.

Proposals are computed when the schema changes, per changed type: names and catalogue words are
normalised once and cached, and each field's values are asked for at most once.
"""

from __future__ import annotations

import difflib
import functools
import shlex
import tomllib
import unicodedata
import zoneinfo
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any

from uac_kernel.core.names import style_key
from uac_kernel.core.tables import DRUG_CLASSES, FOOD_ALLERGENS, TERATOGENS
from uac_kernel.core.words import COUNTRY_NAMES, OFFSET, WEEKDAYS, country, norm
from uac_kernel.vocab.binding import Binding, Status, Vocabulary
from uac_kernel.vocab.catalogue import CONCEPTS, KINDS, ROLES

__all__ = ["JUDGED_USE", "SAMPLE", "Unwatched", "judge", "propose", "unwatched"]

USE, HOLD, MARGIN = 0.75, 0.5, 0.15  # used at USE and a MARGIN over the next; held from HOLD
_SHAPE_BONUS, _LINK_BONUS, _LINK_ALONE = 0.15, 0.2, 0.6
_VALUES_ALONE = 0.8  # a concept said by values alone, backed: used where the type plays its role
_VALUES_ROLE = 0.45  # what values a role's concept holds add to a type's fit for the role
_SHAPE_MISS = 0.3  # a sample that contradicts a kind's shape (a "zone" of garden beds)
_TENSE_MISS = 0.3  # a flag named in another tense than the concept's words ("closing", "closed")
SAMPLE = 50  # values read per field
_TEXT = frozenset({"str", "list[str]"})


def _table() -> dict[str, Any]:
    path = resources.files("uac_kernel") / "data" / "concepts" / "_matcher.toml"
    return tomllib.loads(path.read_text(encoding="utf-8"))


_DATA = _table()
_STOP = frozenset(_DATA["stop"])
_NEVER_A_STEM = frozenset(_DATA["never_a_stem"])
_CURRENCIES = frozenset(_DATA["currencies"])
_ABBREV: dict[str, str] = _DATA["abbreviations"]
_NEVER_FROM_NAME = frozenset(_DATA["hold"]["never_from_name"])
_WHOLE_NAME_ONLY = frozenset(_DATA["hold"]["whole_name_only"])
# The flags that silence alerts: a field held for one of them leaves a rule's alerts standing.
SILENCING = _NEVER_FROM_NAME | _WHOLE_NAME_ONLY
_CRITICAL_ROLES = frozenset(_DATA["hold"]["critical_roles"])
_PERSONAL_ROLES = frozenset(_DATA["not_the_user"]["roles"])
_AHEAD = frozenset(_DATA["tense"]["ahead"])
# A value kind whose shape is itself (a country field holds countries) and may contradict it.
_KIND_SHAPES = {"country": "country", "tz": "zone"}
# concept → the value shapes it expects (a concept the catalogue lacks is never a candidate)
_SHAPE_OF: dict[str, frozenset[str]] = {
    c: frozenset(s for s, cs in _DATA["shapes"].items() if c in cs)
    for cs in _DATA["shapes"].values()
    for c in cs
}
# shape → the concepts whose values have it (a country-kind concept holds countries)
_BY_SHAPE: dict[str, tuple[str, ...]] = {
    shape: tuple(
        sorted(
            c.name
            for c in CONCEPTS.values()
            if shape in _SHAPE_OF.get(c.name, ()) or _KIND_SHAPES.get(c.value) == shape
        )
    )
    for shape in ("country", "zone", "drug", "food")
}
# roles with a start and an end the values of two dates may show
_SPANNED = tuple(sorted(r for r in ROLES if f"{r}.start" in CONCEPTS and f"{r}.end" in CONCEPTS))
_SHAPE_WORDS = {
    "country": "countries",
    "zone": "time zones",
    "currency": "currency codes",
    "weekday": "weekdays",
    "drug": "drug names",
    "food": "foods",
}


# -- names -----------------------------------------------------------------------------------
# Tried in order, the first that leaves a stem of three letters or more is cut.
_SUFFIXES: tuple[str, ...] = (
    *("ations", "ation", "itions", "ition", "ings", "ing", "ures", "ure", "ies", "ied"),
    *("als", "al", "ed", "es", "y", "s", "e"),
)


@functools.lru_cache(maxsize=8192)
def _fold(token: str) -> str:
    """A token's stem: expires, expiry, expiration, expired → ``expir``; departure → depart;
    arrival → arriv; setting, set → ``set`` (a doubled last consonant is read single on both
    sides, so stopped and stop, cancelled and cancel meet)."""
    stem = next(
        (
            token[: -len(x)]
            for x in _SUFFIXES
            if token.endswith(x)
            and len(token) - len(x) >= 3
            and token[: -len(x)] not in _NEVER_A_STEM
        ),
        token,
    )
    if len(stem) >= 4 and stem[-1] == stem[-2] and stem[-1] not in "aeiou":
        stem = stem[:-1]
    return stem


def _plain(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


@dataclass(frozen=True, slots=True)
class _Name:
    """A name as the matcher reads it: folded tokens, in order (the last is the head word)."""

    tokens: tuple[str, ...]
    abbreviations: tuple[str, ...] = ()  # "thru→until"
    currency: str | None = None  # "GBP" of priceGBP


@functools.lru_cache(maxsize=8192)
def _read(name: str) -> _Name:
    raw = style_key(_plain(name)).split("_") if name.strip() else []
    words: list[str] = []
    abbreviations: list[str] = []
    currency = None
    for w in (w for w in raw if w):
        if w in _CURRENCIES and len(raw) > 1 and currency is None:
            currency = w.upper()
        elif w in _ABBREV:
            abbreviations.append(f"{w}→{_ABBREV[w]}")
            words.extend(_ABBREV[w].split())
        else:
            words.append(w)
    kept = [w for w in words if w not in _STOP] or words
    return _Name(tuple(_fold(w) for w in kept), tuple(abbreviations), currency)


@functools.cache
def _not_the_user_tokens() -> frozenset[str]:
    return frozenset(t for w in _DATA["not_the_user"]["words"] for t in _read(w).tokens)


def _someone_elses(t: str, fields: Iterable[str]) -> str | None:
    """Why type ``t``'s records belong to an animal or to someone the user serves (its name or
    a field's says so: ``PetPassport``, ``dog_name``), or None."""
    words = _not_the_user_tokens()
    for what, name in (("type name", t), *(("field", f) for f in fields)):
        if any(w in words for w in _read(name).tokens):
            return f"the {what} {name!r} says the record is not the user's"
    return None


def _ongoing(name: str) -> bool:
    """A name in the progressive (``is_closing``, ``shuttingDown``): something under way."""
    return any(len(w) > 5 and w.endswith("ing") for w in style_key(_plain(name)).split("_"))


def _done(name: str) -> bool:
    """Whether ``name`` ends in a past participle (``finished``, ``completedOn``, ``paid_at``
    aside): a date named so is when something happened."""
    words = [w for w in style_key(_plain(name)).split("_") if w and w not in _STOP]
    return bool(words) and len(words[-1]) > 4 and words[-1].endswith("ed")


# -- the catalogue's words, indexed ----------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Phrase:
    target: str  # a role or a concept
    word: str  # as the catalogue writes it
    tokens: frozenset[str]


@dataclass(frozen=True, slots=True)
class _Index:
    by_token: dict[str, tuple[_Phrase, ...]]
    tokens: tuple[str, ...]  # every token, for near misses


def _index(entries: Iterable[tuple[str, Iterable[str]]]) -> _Index:
    by_token: dict[str, list[_Phrase]] = {}
    for target, words in entries:
        for word in words:
            tokens = frozenset(_read(word).tokens)
            if tokens:
                phrase = _Phrase(target, word, tokens)
                for t in tokens:
                    by_token.setdefault(t, []).append(phrase)
    return _Index({t: tuple(p) for t, p in by_token.items()}, tuple(sorted(by_token)))


@functools.cache
def _concept_index() -> _Index:
    return _index((c.name, c.words) for c in CONCEPTS.values())


@functools.cache
def _role_index() -> _Index:
    return _index((r.name, (*r.words, r.name.replace("_", " "))) for r in ROLES.values())


@dataclass(frozen=True, slots=True)
class _Fit:
    """How well a name fits a target's words."""

    score: float
    covered: frozenset[str]
    words: tuple[str, ...]
    near: str | None = None  # a misspelt token read as this word


def _fits(name: str, index: _Index) -> dict[str, _Fit]:
    """Each target whose words explain some of ``name``'s tokens, and how well."""
    n = _read(name)
    got = _gerunds_said(name, _fits_tokens(n.tokens, index))
    if got or not n.tokens:
        return got
    # No word fits: a token of five letters or more within a letter or two of one (a typo) is
    # read as it, and what it gives is held, never used.
    for i, tok in enumerate(n.tokens):
        close = (
            difflib.get_close_matches(tok, index.tokens, n=1, cutoff=0.85) if len(tok) >= 5 else []
        )
        if close:
            swapped = (*n.tokens[:i], close[0], *n.tokens[i + 1 :])
            return {
                t: _Fit(min(f.score, 0.65), f.covered, f.words, near=close[0])
                for t, f in _fits_tokens(swapped, index).items()
            }
    return {}


def _gerunds_said(name: str, fits: dict[str, _Fit]) -> dict[str, _Fit]:
    """Drop fits resting only on catalogue nouns in -ing (a "booking", a "meeting") where the
    name has no -ing word: a Book is not a booking, a meet_date not a meeting."""
    if any(w.endswith(("ing", "ings")) for w in style_key(_plain(name)).split("_")):
        return fits
    return {t: f for t, f in fits.items() if not all(map(_gerund, f.words))}


def _gerund(word: str) -> bool:
    return any(w.endswith(("ing", "ings")) for w in word.split())


def _fits_tokens(tokens: tuple[str, ...], index: _Index) -> dict[str, _Fit]:
    have = frozenset(tokens)
    found: dict[str, list[_Phrase]] = {}
    for t in have:
        for p in index.by_token.get(t, ()):
            if p.tokens <= have:
                found.setdefault(p.target, []).append(p)
    out: dict[str, _Fit] = {}
    for target, phrases in found.items():
        covered: frozenset[str] = frozenset().union(*(p.tokens for p in phrases))
        words: tuple[str, ...]
        cov = len(covered) / len(have)
        # Of the words that say it whole, the one written out ("amount", not "amt").
        whole = min(
            (p for p in phrases if p.tokens == have),
            key=lambda p: (len(_read(p.word).abbreviations), len(p.word)),
            default=None,
        )
        if whole is not None:
            score, words = 1.0, (whole.word,)
        else:
            best = sorted({p.word: p for p in phrases}.values(), key=lambda p: -len(p.tokens))
            words = tuple(p.word for p in best)
            # The last token of a compound is its head ("warranty end" is an end).
            score = 0.95 if cov == 1 else (0.6 if tokens[-1] in covered else 0.35) + 0.3 * cov
        out[target] = _Fit(score, covered, words)
    # A target explaining a strict part of what another explains is not what the name means:
    # "valid_thru" is a document's expiry ("valid until"), not a booking's end ("until").
    return {t: f for t, f in out.items() if not any(f.covered < g.covered for g in out.values())}


@functools.lru_cache(maxsize=8192)
def _concept_fits(name: str) -> dict[str, _Fit]:
    return _fits(name, _concept_index())


@functools.lru_cache(maxsize=4096)
def _role_fits(name: str) -> dict[str, _Fit]:
    return {r: f for r, f in _fits(name, _role_index()).items() if not ROLES[r].any}


# -- values ----------------------------------------------------------------------------------
@functools.cache
def _zones() -> frozenset[str]:
    return frozenset(z.casefold() for z in zoneinfo.available_timezones())


@functools.cache
def _terms_of(shape: str) -> tuple[str, ...]:
    if shape == "drug":
        return tuple(
            {t for ts in DRUG_CLASSES.values() for t in ts}
            | {t for _, ts, _ in TERATOGENS.values() for t in ts}
        )
    return tuple({t for ts in FOOD_ALLERGENS.values() for t in ts})


def _looks(shape: str, v: str) -> bool:
    text = v.strip()
    if shape == "country":
        return country(text) in _COUNTRIES
    if shape == "zone":  # "+09:00", "UTC-5", "Z", "Asia/Tokyo"
        return OFFSET.fullmatch(text) is not None or text.casefold() in _zones() | {"z"}
    if shape == "currency":
        return text.casefold() in _CURRENCIES
    if shape == "weekday":
        words = norm(text).split()
        return bool(words) and all(w in WEEKDAYS or w in ("weekday", "weekend") for w in words)
    normed = norm(text)
    return any(t in normed for t in _terms_of(shape))


_COUNTRIES = frozenset(COUNTRY_NAMES.values())


def _texts(sample: Sequence[Any]) -> list[str]:
    out: list[str] = []
    for v in sample:
        if isinstance(v, str) and v.strip():
            out.append(v)
        elif isinstance(v, list):
            out.extend(x for x in v if isinstance(x, str) and x.strip())
    return out[:SAMPLE]


# -- proposing -------------------------------------------------------------------------------
@dataclass(slots=True)
class _Cand:
    concept: str
    score: float
    parts: list[str] = field(default_factory=list)  # the reason, term by term
    backed: bool = False  # values back the name (a shape or a link)
    alone: bool = False  # the values say it, the name does not


@dataclass
class _Matcher:
    schema: Mapping[str, Mapping[str, str]]
    vocab: Vocabulary
    values: Callable[[str, str], Sequence[Any]] | None
    keys: Callable[[str], Collection[str]] | None
    _samples: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    _owners: dict[str, set[str]] | None = None

    def sample(self, t: str, f: str) -> list[str]:
        got = self._samples.get((t, f))
        if got is None:
            got = _texts(self.values(t, f)) if self.values is not None else []
            self._samples[(t, f)] = got
        return got

    def link(self, t: str, f: str) -> str | None:
        """The other type whose keys this field's values are (at least 80% of them, and two,
        or the only one), or None."""
        if self.keys is None:
            return None
        if self._owners is None:
            self._owners = {}
            for other in self.schema:
                for k in self.keys(other):
                    self._owners.setdefault(k, set()).add(other)
        sample = self.sample(t, f)
        counts: dict[str, int] = {}
        for v in sample:
            for other in self._owners.get(v, ()):
                if other != t:
                    counts[other] = counts.get(other, 0) + 1
        if not counts:
            return None
        other, n = max(sorted(counts.items()), key=lambda kv: kv[1])
        return other if n >= 0.8 * len(sample) and (n >= 2 or len(sample) == 1) else None

    def candidates(self, t: str, f: str, ftype: str) -> dict[str, _Cand]:
        """The concepts ``t.f`` may carry, by name, kind, values and links."""
        out: dict[str, _Cand] = {}
        n = _read(f)
        for c, fit in _concept_fits(f).items():
            if ftype not in KINDS[CONCEPTS[c].value]:
                continue  # a kind that does not fit never binds (a text "start" is no date)
            if c in _AHEAD and _done(f):
                continue  # `finished` says when it happened, not a limit still ahead
            said = f"name {f!r} ~ {' + '.join(repr(w) for w in fit.words)}"
            notes = [*(f"abbreviation {a}" for a in n.abbreviations)]
            if fit.near:
                notes.append(f"read as a misspelling of {fit.near!r}")
            if notes:
                said += f" ({'; '.join(notes)})"
            score = fit.score - (0.05 if n.abbreviations else 0.0)
            parts = [said, f"{ftype} field"]
            # A flag's tense is its meaning: "shutting" (under way) is not "shut" (done).
            if CONCEPTS[c].value == "flags" and _ongoing(f) != any(map(_ongoing, fit.words)):
                score -= _TENSE_MISS
                parts.append("held: the name's tense differs from the concept's")
            out[c] = _Cand(c, score, parts)
        if n.currency is not None:
            for cand in out.values():
                if CONCEPTS[cand.concept].value == "money":
                    cand.parts.append(f"currency {n.currency} in the name")
        if ftype in _TEXT:
            self._values_say(t, f, ftype, out)
            self._values_alone(t, f, ftype, out)
        return out

    def _span(
        self, t: str, r: str, fields: Mapping[str, str], cands: dict[str, dict[str, _Cand]]
    ) -> None:
        """A start and an end of role ``r`` that the dates show where names do not: of the
        type's date fields no name reads as either, the one never after the other in every
        sampled record (at least two, one strictly) is the start, the other the end; beside a
        start the name found, the one date field never before it is the end."""
        if self.values is None:
            return
        start, end = f"{r}.start", f"{r}.end"
        dates = [f for f, ft in fields.items() if ft in KINDS[CONCEPTS[start].value]]
        # a field read by its name (the matcher's or a default's) is named; others are loose
        named = {
            c: [f for f in dates if c in cands.get(f, {}) or f in CONCEPTS[c].fields]
            for c in (start, end)
        }
        defaults = _defaults()
        loose = [
            f for f in dates if f not in defaults and not cands.get(f, {}).keys() & {start, end}
        ]
        pairs: list[tuple[str, str]] = []
        if not named[start] and not named[end] and len(loose) == 2:
            a, b = loose
            pairs = [(a, b), (b, a)]
        elif len(named[start]) == 1 and not named[end] and len(loose) == 1:
            pairs = [(named[start][0], loose[0])]
        elif len(named[end]) == 1 and not named[start] and len(loose) == 1:
            pairs = [(loose[0], named[end][0])]
        for a, b in pairs:
            xs, ys = self.values(t, a), self.values(t, b)
            if len(xs) < 2 or len(xs) != len(ys):
                continue  # a record lacking one of them: the samples are not aligned
            try:
                order = [str(x) <= str(y) for x, y in zip(xs, ys, strict=True)]
                strict = any(str(x) < str(y) for x, y in zip(xs, ys, strict=True))
            except TypeError:
                continue
            if all(order) and strict:
                said = f"{b!r} is never before {a!r} in {len(xs)} records"
                for f, c in ((a, start), (b, end)):
                    if f not in defaults and c not in cands.setdefault(f, {}):
                        cands[f][c] = _Cand(c, _VALUES_ALONE, [said, f"{fields[f]} field"], True)
                return

    def _values_alone(self, t: str, f: str, ftype: str, out: dict[str, _Cand]) -> None:
        """Concepts the values say when the name says none of them: a field of short texts
        most of which are drug names, foods, countries or time zones (a note that mentions a
        drug is no drug name: values of more than four words never count)."""
        if self.values is None:
            return
        sample = self.sample(t, f)
        if len(sample) < 2 or any(len(v.split()) > 4 for v in sample):
            return
        for shape, concepts in _BY_SHAPE.items():
            hits = sum(_looks(shape, v) for v in sample)
            if hits < 0.8 * len(sample):
                continue
            said = f"values look like {_SHAPE_WORDS[shape]} ({hits}/{len(sample)})"
            for c in concepts:
                if c not in out and ftype in KINDS[CONCEPTS[c].value]:
                    out[c] = _Cand(c, _VALUES_ALONE, [said, f"{ftype} field"], True, True)

    def _values_say(self, t: str, f: str, ftype: str, out: dict[str, _Cand]) -> None:
        if self.values is None:
            return
        for cand in out.values():
            c = CONCEPTS[cand.concept]
            shapes = _SHAPE_OF.get(c.name, frozenset()) | (
                {_KIND_SHAPES[c.value]} if c.value in _KIND_SHAPES else set()
            )
            sample = self.sample(t, f) if shapes else []
            for shape in sorted(shapes):
                hits = sum(_looks(shape, v) for v in sample)
                if sample and hits >= 0.5 * len(sample):
                    cand.score += _SHAPE_BONUS
                    cand.backed = True
                    cand.parts.append(
                        f"values look like {_SHAPE_WORDS[shape]} ({hits}/{len(sample)})"
                    )
                    break
                if len(sample) >= 3 and hits < 0.2 * len(sample) and shape in _KIND_SHAPES.values():
                    cand.score -= _SHAPE_MISS
                    cand.parts.append(f"values do not look like {_SHAPE_WORDS[shape]}")
        other = self.link(t, f)
        if other is None:
            return
        heads = set(_read(other).tokens)
        for c in CONCEPTS.values():
            if ftype not in KINDS[c.value] or _fold(c.name.partition(".")[2]) not in heads:
                continue
            said = f"values are keys of {other} (a link)"
            got = out.get(c.name)
            if got is None:
                out[c.name] = _Cand(c.name, _LINK_ALONE, [said, f"{ftype} field"], backed=True)
            else:
                got.score += _LINK_BONUS
                got.backed = True
                got.parts.append(said)

    def for_type(self, t: str) -> list[Binding]:
        fields = self.schema[t]
        vocab = self.vocab
        known = {b.key for b in vocab.bindings}
        # A field a person (or an earlier proposal) already put under a role's concept.
        bound = {(b.type, b.field, _roles_of(b.target)) for b in vocab.bindings if b.field}
        defaults = _defaults()
        cands = {
            f: self.candidates(t, f, ftype) for f, ftype in fields.items() if f not in defaults
        }
        # Roles: the type's name, and the share of the role's concepts its fields carry.
        roles: dict[str, tuple[float, Status, str]] = {}
        type_fits = _role_fits(t)
        for r in sorted(r for r in _SPANNED if r in type_fits or vocab.plays(t, r)):
            self._span(t, r, fields, cands)
        _one_role_per_value(t, type_fits, vocab, cands)
        others = _someone_elses(t, fields)
        for r in sorted({*type_fits, *(_roles_of(c) for cs in cands.values() for c in cs)}):
            if ROLES[r].any or vocab.plays(t, r) or (r, t, None) in known:
                continue
            score, parts, held_why = _role_score(t, r, type_fits.get(r), fields, cands)
            if score < HOLD:
                continue
            # Two roles the name fits as well, which no type plays both of by default (a
            # Transfer is a payment or an airport transfer): the name does not say which.
            rival = next(
                (
                    o
                    for o, fit in sorted(type_fits.items())
                    if o != r
                    and r in type_fits
                    and type_fits[r].score - fit.score < MARGIN
                    and not set(ROLES[o].types) & set(ROLES[r].types)
                ),
                None,
            )
            if rival is not None:
                held_why.append(f"the name fits {rival} as well")
            if others is not None and r in _PERSONAL_ROLES:
                held_why.append(others)
            roles[r] = (score, *_verdict(score, USE, parts, held_why))
        # A role's own type plays broader roles too (a Trip is a planned activity): what the
        # library reads of that type, it reads of a type playing the role.
        played = {
            b.target: (b.score, b.status, f"bound by {b.author}")
            for b in vocab.used()
            if b.type == t and b.field is None
        }
        via: dict[str, str] = {}
        for r, (score, standing, why) in sorted({**played, **roles}.items()):
            # a held role carries nothing wider until a person accepts it
            if r not in ROLES or ROLES[r].any or standing == "held":
                continue
            for wider in _wider_roles(r):
                if wider in roles or vocab.plays(t, wider) or (wider, t, None) in known:
                    continue
                said = f"as {ROLES[r].types[0]}, a {r}, is a {wider}; {t}: {why}"
                roles[wider] = (score, standing, said)
                via[wider] = r
        out = [
            Binding(r, t, None, "inferred", round(min(s, 1.0), 2), why, status, via.get(r))
            for r, (s, status, why) in roles.items()
        ]
        # Fields: the best concept per role each field may carry, for the roles the type plays
        # (a field may carry concepts of several roles: a trip's start is a booking's start).
        best: dict[tuple[str, str], tuple[_Cand, _Cand | None]] = {}
        for f, cs in cands.items():
            by_role: dict[str, list[_Cand]] = {}
            for cand in cs.values():
                by_role.setdefault(_role_for(t, cand.concept, vocab, roles), []).append(cand)
            # What a role the type plays knows beats what any type may hold: a passport's
            # `expiry` is its expiry, not a contract's end.
            specific = any(not ROLES[r].any and _playing(t, r, vocab, roles) for r in by_role)
            for r, group in by_role.items():
                if not _playing(t, r, vocab, roles) or (t, f, r) in bound:
                    continue
                if specific and ROLES[r].any:
                    continue
                group.sort(key=lambda c: (-c.score, c.concept))
                best[(f, r)] = (group[0], group[1] if len(group) > 1 else None)
        for (f, r), (cand, runner) in sorted(best.items()):
            c = cand.concept
            if cand.score < HOLD or (c, t, f) in known:
                continue
            held: list[str] = []
            if c in _NEVER_FROM_NAME:
                held.append(
                    "a flag that silences alerts is never taken from a name: bind it by hand"
                )
            if c in _WHOLE_NAME_ONLY and cand.score < 0.95:
                held.append("a flag that silences alerts is taken only from a name said whole")
            # a text read by critical rules, on a name that fits it only loosely
            if r in _CRITICAL_ROLES and fields[f] in _TEXT and not cand.backed and cand.score < 0.9:
                held.append(f"name only, and critical rules read {r}")
            if others is not None and r in _PERSONAL_ROLES:
                held.append(others)
            if (
                runner is not None
                and runner.score >= HOLD
                and cand.score - runner.score < MARGIN
                and not _same_reading(c, runner.concept)
            ):
                held.append(f"fits {runner.concept} too")
            rivals = [
                g
                for (g, r2), (x, _) in best.items()
                if r2 == r and g != f and x.concept == c and abs(cand.score - x.score) < MARGIN
            ]
            if rivals:
                held.append(f"{', '.join(map(repr, rivals))} fits {c} too")
            if r in roles:
                cand.parts.append(f"{t} {'may play' if roles[r][1] == 'held' else 'plays'} {r}")
                if roles[r][1] == "held":
                    held.append(f"{t} playing {r} is held")
            elif not ROLES[r].any:
                cand.parts.append(f"{t} plays {r}")
            status, reason = _verdict(cand.score, USE, cand.parts, held)
            out.append(Binding(c, t, f, "inferred", round(min(cand.score, 1.0), 2), reason, status))
        return out + self._implied(t, out, roles, known)

    def _implied(
        self, t: str, found: list[Binding], roles: Mapping[str, Any], known: Collection[Any]
    ) -> list[Binding]:
        """What the found field bindings carry besides: under the catalogue's own names a trip's
        ``destination`` is also a booking's place and the record's label, so a field bound as a
        trip's destination is read as those too, where the type plays their roles."""
        fields = self.schema[t]
        taken = {(b.target, b.field) for b in found} | {b.target for b in found if b.field}
        out: list[Binding] = []
        for b in sorted(found, key=lambda b: (-b.score, b.target, b.field or "")):
            # a held binding carries nothing more until a person accepts it
            if b.field is None or b.status == "held":
                continue
            first = CONCEPTS[b.target].fields[0] if CONCEPTS[b.target].fields else None
            if first is None or first in _STOP:
                continue  # a name that says nothing alone ("date") carries no meaning across
            for d in _same_as(b.target):
                c = CONCEPTS[d]
                if (
                    d in taken
                    or d in _NEVER_FROM_NAME | _WHOLE_NAME_ONLY
                    or (d, t, b.field) in known
                    or fields[b.field] not in KINDS[c.value]
                    or any(f in fields for f in c.fields)  # the type has a field it reads already
                    or not _playing(t, _role_for(t, d, self.vocab, roles), self.vocab, roles)
                ):
                    continue
                taken.add(d)
                why = f"{b.target}'s {first!r} is also {d}; {b.reason}"
                role = roles.get(_role_for(t, d, self.vocab, roles))
                standing: Status = "held" if role is not None and role[1] == "held" else b.status
                out.append(Binding(d, t, b.field, "inferred", b.score, why, standing, b.target))
        return out


def _one_role_per_value(
    t: str, type_fits: Mapping[str, _Fit], vocab: Vocabulary, cands: dict[str, dict[str, _Cand]]
) -> None:
    """Values that fit concepts of several roles (drug names: a medication's or an allergy's)
    speak only for the roles the field's name says, or else the type's name or vocabulary
    suggests, when one does."""
    for cs in cands.values():
        alone = [c for c in cs.values() if c.alone]
        named = {_roles_of(c.concept) for c in cs.values() if not c.alone}
        roles = {_roles_of(c.concept) for c in alone}
        known = named or {r for r in roles if r in type_fits or vocab.plays(t, r)}
        if not known or (not named and len(roles) < 2):
            continue
        for c in alone:
            if _roles_of(c.concept) not in known:
                del cs[c.concept]


@functools.cache
def _defaults() -> frozenset[str]:
    """Every field name some concept reads by default: a field so named needs no binding."""
    return frozenset(f for c in CONCEPTS.values() for f in c.fields)


@functools.cache
def _wider_roles(r: str) -> tuple[str, ...]:
    """The roles the role's own type (its first default) plays that take in at least as many
    types: a Trip is a planned activity, a Bill a payment (never a medication from a state)."""
    own = ROLES[r].types
    return tuple(
        o.name
        for o in ROLES.values()
        if o.name != r and not o.any and own and own[0] in o.types and len(o.types) >= len(own)
    )


@functools.cache
def _same_as(c: str) -> tuple[str, ...]:
    """The concepts that read the concept's own name (its first default field) too."""
    fields = CONCEPTS[c].fields
    return tuple(
        d.name for d in CONCEPTS.values() if d.name != c and fields and fields[0] in d.fields
    )


def _same_reading(a: str, b: str) -> bool:
    """Two concepts the catalogue reads from one field name: a field may carry both."""
    return a in _same_as(b) or b in _same_as(a)


def _roles_of(c: str) -> str:
    return CONCEPTS[c].role


def _role_for(t: str, c: str, vocab: Vocabulary, roles: Mapping[str, Any]) -> str:
    """The role under which type ``t`` would carry concept ``c``: the first of the concept's
    roles (its own, then ``also``) the type plays, else its own."""
    own = CONCEPTS[c].roles
    return next((r for r in own if not ROLES[r].any and _playing(t, r, vocab, roles)), own[0])


def _playing(t: str, r: str, vocab: Vocabulary, roles: Mapping[str, Any]) -> bool:
    return ROLES[r].any or vocab.plays(t, r) or r in roles


def _role_score(
    t: str,
    r: str,
    fit: _Fit | None,
    fields: Mapping[str, str],
    cands: Mapping[str, Mapping[str, _Cand]],
) -> tuple[float, list[str], list[str]]:
    """How well type ``t`` fits role ``r``: its score, the reason term by term, and why it must
    be held whatever the score."""
    members = [c for c in CONCEPTS.values() if r in c.roles]
    carried = sorted(
        c.name
        for c in members
        if any(f in fields and fields[f] in KINDS[c.value] for f in c.fields)
        or any(c.name in cs and cs[c.name].score >= HOLD for cs in cands.values())
    )
    share = len(carried) / len(members) if members else 0.0
    # a concept of the role whose values say it (drug names), not its name
    shown = sorted(
        {c.name for c in members for cs in cands.values() if c.name in cs and cs[c.name].backed}
    )
    parts = []
    if fit is not None:
        parts.append(f"type name {t!r} ~ {' + '.join(repr(w) for w in fit.words)}")
        score = 0.85 * fit.score + 0.3 * share
    else:
        score = 0.7 * share  # fields alone never make a role used
    if shown:
        score += _VALUES_ROLE
        parts.append(f"values show {', '.join(shown)}")
    if carried:
        parts.append(f"fields carry {', '.join(carried)}")
    held = []
    if r in _CRITICAL_ROLES and not carried:
        held.append(f"name only, and critical rules read {r}")
    return min(score, 1.0), parts, held


def _verdict(score: float, floor: float, parts: list[str], held: list[str]) -> tuple[Status, str]:
    status: Status = "used" if score >= floor and not held else "held"
    return status, "; ".join([*parts, *(f"held: {h}" for h in held)])


def propose(
    schema: Mapping[str, Mapping[str, str]],
    vocab: Vocabulary,
    *,
    values: Callable[[str, str], Sequence[Any]] | None = None,
    keys: Callable[[str], Collection[str]] | None = None,
    types: Collection[str] | None = None,
) -> list[Binding]:
    """Bindings proposed for ``types`` of ``schema`` (type → field → schema type; default every
    type): roles (type → role) and concepts (type.field → concept), author ``inferred``, each
    with a score and a reason, ``used`` or ``held``. Nothing ``vocab`` already has (a binding of
    any status: one a person rejected is never proposed again) nor what the catalogue's defaults
    already read. ``values(type, field)`` gives a sample of a field's values and
    ``keys(type)`` the keys of a type's records; without them names and kinds decide alone."""
    m = _Matcher(schema, vocab, values, keys)
    return [b for t in (schema if types is None else types) if t in schema for b in m.for_type(t)]


# A binding another author proposed (the extraction model, which read what the user said) is
# used from the score at which the matcher would hold a proposal of its own: two readers agree.
JUDGED_USE = HOLD


def judge(
    b: Binding,
    schema: Mapping[str, Mapping[str, str]],
    vocab: Vocabulary,
    *,
    values: Callable[[str, str], Sequence[Any]] | None = None,
    keys: Callable[[str], Collection[str]] | None = None,
) -> Binding:
    """``b``, proposed by another author, with the matcher's score and reason and a status:
    ``used`` when the matcher scores it ``JUDGED_USE`` or more and reads the name as nothing
    else; ``held`` when it scores it lower, prefers another concept of the same role (or the
    field is another concept's default name, or the name fits another role better), when the
    concept is a flag that silences alerts, or when the type plays none of the concept's roles.
    ``b.type`` (and ``b.field``) must be in ``schema``; ``values`` and ``keys`` as for
    ``propose``."""
    m = _Matcher(schema, vocab, values, keys)
    fields = schema[b.type]
    defaults = _defaults()
    if b.field is None:
        fits = _role_fits(b.type)
        fit = fits.get(b.target)
        by_field = {f: m.candidates(b.type, f, ft) for f, ft in fields.items() if f not in defaults}
        score, parts, held = _role_score(b.type, b.target, fit, fields, by_field)
        if not parts:
            parts.append(f"no word of {b.target} in {b.type!r} or its fields")
        mine = fit.score if fit is not None else 0.0
        held += [
            f"the name reads as {o}"
            for o, other in sorted(fits.items())
            if o != b.target and other.score >= max(HOLD, mine + MARGIN)
        ][:1]
        # a model's word never makes a pet's or a client's record the user's
        if b.target in _PERSONAL_ROLES and (others := _someone_elses(b.type, fields)):
            held.append(others)
        status, reason = _verdict(score, JUDGED_USE, parts, held)
        return replace(b, score=round(score, 2), reason=reason, status=status)
    c = CONCEPTS[b.target]
    ftype = fields[b.field]
    cands = m.candidates(b.type, b.field, ftype)
    got = cands.get(c.name)
    score = got.score if got is not None else 0.0
    parts = list(got.parts) if got is not None else [f"no word of {c.name} in {b.field!r}"]
    held = []
    if c.name in _NEVER_FROM_NAME:
        held.append("a flag that silences alerts is bound by a person")
    kin = set(c.roles)
    # Another concept of the same role the name fits clearly better; a near tie is the
    # author's to break ("where": a trip's destination or its places).
    rival = next(
        (
            o.concept
            for o in sorted(cands.values(), key=lambda x: (-x.score, x.concept))
            if o.concept != c.name
            and kin & set(CONCEPTS[o.concept].roles)
            and o.score >= max(HOLD, score + MARGIN)
        ),
        None,
    )
    if rival is not None:
        held.append(f"the matcher reads {b.field!r} as {rival}")
    held += [
        f"{b.field!r} is {d.name}'s name in the catalogue"
        for d in CONCEPTS.values()
        if d.name != c.name and b.field in d.fields and kin & set(d.roles)
    ][:1]
    if not any(vocab.plays(b.type, r) for r in c.roles):
        held.append(f"{b.type} does not play {c.role}")
    if kin & _PERSONAL_ROLES and (others := _someone_elses(b.type, fields)):
        held.append(others)
    status, reason = _verdict(score, JUDGED_USE, parts, held)
    return replace(b, score=round(min(score, 1.0), 2), reason=reason, status=status)


# -- what no binding reads -------------------------------------------------------------------
@dataclass(frozen=True)
class Unwatched:
    """A type or field that looks like something rules care about, which no binding reads."""

    type: str
    field: str | None
    looks: str  # date, deadline, amount, document, substance
    why: str
    # what its name reads as (a concept of a field, a role of a type); None: it does not say
    target: str | None = None

    @property
    def command(self) -> str:
        """The ``uac vocab bind`` that would put it under a rule's eyes (``CONCEPT`` where its
        name does not say which: ``uac vocab concepts`` lists them)."""
        if self.field is None:
            what = self.type if self.target else f"{self.type}.FIELD"
            return f"uac vocab bind {shlex.quote(what)} {self.target or 'CONCEPT'}"
        what = shlex.quote(f"{self.type}.{self.field}")
        return f"uac vocab bind {what} {self.target or 'CONCEPT'}"

    def describe(self) -> str:
        what = self.type if self.field is None else f"{self.type}.{self.field}"
        article = "an" if self.looks[0] in "aeiou" else "a"
        return f"{what}: looks like {article} {self.looks} ({self.why}); `{self.command}`"


def unwatched(
    schema: Mapping[str, Mapping[str, str]],
    vocab: Vocabulary,
    read: Collection[tuple[str, str]],
    *,
    values: Callable[[str, str], Sequence[Any]] | None = None,
) -> list[Unwatched]:
    """The types and fields of ``schema`` that look like dates, deadlines, amounts, documents or
    substances and that no binding or constraint reads (``read``: the (type, field) pairs read),
    each with why it looks like one: what uac is blind to for this user."""
    table = _DATA["unwatched"]
    deadlines = frozenset(table["deadline_roles"])
    documents = frozenset(table["document_roles"])
    substances = frozenset(table["substance_shapes"])
    out: list[Unwatched] = []
    for t, fields in schema.items():
        reads = {f for f in fields if (t, f) in read}
        if not reads:
            plays = next((r for r in sorted(documents) if r in ROLES and vocab.plays(t, r)), None)
            doc = plays or next((r for r in _role_fits(t) if r in documents), None)
            if doc is not None:
                why = f"{t!r} {'plays' if plays else 'reads as'} {doc}, and none of its fields is read"
                # a type that plays the role already needs a field bound, one that does not the role
                out.append(Unwatched(t, None, "document", why, None if plays else doc))
        for f, ftype in fields.items():
            if f in reads:
                continue
            # Only a name the words explain whole says what it is ("pet_name" is no drug name).
            fits = {
                c: x
                for c, x in _concept_fits(f).items()
                if x.score >= 0.9 and ftype in KINDS[CONCEPTS[c].value]
            }
            if ftype in KINDS["date"]:
                dl = sorted(c for c in fits if CONCEPTS[c].role in deadlines)
                named = dl or sorted(fits)
                looks = "deadline" if dl else "date"
                why = f"a {ftype} field" + (f" named like {named[0]}" if named else "")
                out.append(Unwatched(t, f, looks, why, named[0] if named else None))
            elif ftype in KINDS["money"]:
                money = sorted(c for c in fits if CONCEPTS[c].value == "money")
                if money or _read(f).currency:
                    why = (
                        f"named like {money[0]}"
                        if money
                        else f"currency {_read(f).currency} in the name"
                    )
                    out.append(
                        Unwatched(t, f, "amount", f"a number {why}", next(iter(money), None))
                    )
            elif ftype in _TEXT:
                named = sorted(c for c in fits if _SHAPE_OF.get(c, frozenset()) & substances)
                sample = _texts(values(t, f)) if values is not None else []
                hit = next(
                    ((v, s) for v in sample for s in sorted(substances) if _looks(s, v)), None
                )
                if named:
                    out.append(Unwatched(t, f, "substance", f"named like {named[0]}", named[0]))
                elif hit is not None:
                    # the first concept whose values have that shape (drugs: medication.name)
                    why, like = f"values name one ({hit[0]!r})", _DATA["shapes"][hit[1]][0]
                    out.append(Unwatched(t, f, "substance", why, like))
    return out
