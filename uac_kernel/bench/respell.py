"""Re-spell an alert scenario as another person would name things: the generator of the
vocabulary stress bench (``uac bench vocab``, ``uac_kernel.bench.vocab_stress``).

Every type and every field of a scenario is renamed, consistently through the scenario — its
facts and its constraints wherever they name a type or a field (made explicit where a
constraint leaned on a default name) — by a seeded draw from word lists written apart from
uac's vocabulary matcher (``data/respell_words.json``, general English and naming habits):

- whole-name synonyms (``Trip`` → ``Journey``, ``expires`` → ``valid thru``, ``start`` →
  ``leaves on``), or word by word synonyms and abbreviations (``amount`` → ``amt``,
  ``account`` → ``acct``), sometimes after a prefix (``my``, ``user``, or the type's own word:
  ``journey_start``);
- one naming habit per scenario for its fields (snake_case, camelCase, PascalCase, kebab-case,
  spaces) and one for its types (PascalCase, lower-case ``flight_leg``, camelCase, kebab-case,
  spaces).

One field name gets one new name across the scenario's types (a person who writes ``leaves on``
for a trip's start writes it for a meeting's too), so a constraint's field lists, which may read
several types at once, rename without ambiguity. Values are never touched: dates, amounts, record
keys (and the values that are keys of other records), user turns, the expected alert — so a trap
stays a trap. Every new name differs in its words from the original (not only in case or style),
is none of the bundled scenarios' own names (a renaming never lands on another field's meaning),
is one uac stores (``names.name_problem``), and clashes with no other name of its kind
(``names.field_clash``, ``names.type_clash``). The same seed gives the same renamings.

``renamings(seed)`` is the ground truth a vocabulary matcher is scored against: each row maps an
original type, or an original ``Type.field``, to its new spelling.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from uac_kernel.bench.alerts import SETS, Fixture, load_fixtures
from uac_kernel.core.names import field_clash, name_problem, style_key, type_clash
from uac_kernel.language.spec import (
    Before,
    Moment,
    NoOverlap,
    Obligation,
    Projection,
    Select,
    ValidOn,
    WindowLimit,
    parse_constraint,
)

__all__ = [
    "FIELD_STYLES",
    "TYPE_STYLES",
    "WORDS",
    "Respelling",
    "renamings",
    "renamings_report",
    "respell",
]

WORDS = Path(__file__).parent / "data" / "respell_words.json"
FIELD_STYLES = ("snake", "camel", "pascal", "kebab", "spaces")
TYPE_STYLES = ("pascal", "lower", "camel", "kebab", "spaces")
_PREFIX_SHARE = 0.2  # the share of names that get a prefix
_DRAWS = 12  # word-by-word spellings drawn per name, besides its whole-name synonyms

# The attributes of each constraint part that hold field names; the rest are values, words and
# numbers (a Moment's ``date`` is a date, a Select's ``key`` a record key). A Select's ``type``
# and ``also`` hold type names and its ``where`` keys field names; ValidOn's ``match`` maps a
# field to a field.
_FIELD_ATTRS: dict[type[BaseModel], tuple[str, ...]] = {
    Moment: ("fields", "start", "length", "nights"),
    Obligation: ("done",),
    ValidOn: ("starts", "expires", "lapsed"),
    WindowLimit: ("amount", "date", "end"),
    Projection: ("quantity", "as_of", "rate_fields", "flow_amount", "flow_date"),
    NoOverlap: ("start", "end"),
    Before: ("first_date", "then_date"),
}


@functools.cache
def _words() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(WORDS.read_text(encoding="utf-8"))
    return data


@functools.cache
def _bundled_names() -> frozenset[str]:
    """The style keys of every type and field name of the bundled scenarios."""
    return frozenset(
        key for path in SETS.values() for fx in load_fixtures(path) for key in _names(fx)
    )


def _names(fx: Fixture) -> Iterator[str]:
    for s in fx.sessions:
        for f in s.facts:
            yield style_key(f["type"])
            yield from (style_key(k) for k in f.get("fields") or {})


def _styled(words: list[str], style: str) -> str:
    words = [w.lower() for w in words]
    if style in ("snake", "lower"):
        return "_".join(words)
    if style == "kebab":
        return "-".join(words)
    if style == "spaces":
        return " ".join(words)
    caps = "".join(w[:1].upper() + w[1:] for w in words)
    return caps if style == "pascal" else caps[:1].lower() + caps[1:]


@dataclass
class Respelling:
    """One scenario's renamings under one seed: original name → new name."""

    scenario: str
    seed: int
    type_style: str
    field_style: str
    types: dict[str, str] = field(default_factory=dict)
    fields: dict[str, str] = field(default_factory=dict)  # one new name across the types
    how: dict[str, str] = field(default_factory=dict)  # "type:T" / "field:f" → how it was made
    field_types: dict[str, list[str]] = field(default_factory=dict)  # field → the types with it

    def type(self, name: str) -> str:
        return self.types.get(name, name)

    def field(self, name: str) -> str:
        return self.fields.get(name, name)

    def only(self, kind: str, original: str) -> Respelling:
        """This respelling with one renaming alone (``kind`` 'type' or 'field')."""
        types = {original: self.types[original]} if kind == "type" else {}
        fields = {original: self.fields[original]} if kind == "field" else {}
        return Respelling(
            self.scenario,
            self.seed,
            self.type_style,
            self.field_style,
            types,
            fields,
            self.how,
            self.field_types,
        )

    def singles(self) -> list[tuple[str, str]]:
        """Every renaming on its own: (kind, original)."""
        return [("type", t) for t in self.types] + [("field", f) for f in self.fields]

    def rows(self, set_name: str = "") -> list[dict[str, Any]]:
        """The ground truth: one row per type and one per field of each type that has it."""
        base = {"seed": self.seed, "set": set_name, "scenario": self.scenario}
        out = [
            {
                **base,
                "kind": "type",
                "type": t,
                "field": None,
                "new_type": new,
                "new_field": None,
                "original": t,
                "new": new,
                "how": self.how[f"type:{t}"],
            }
            for t, new in self.types.items()
        ]
        for f, new in self.fields.items():
            for t in self.field_types[f]:
                out.append(
                    {
                        **base,
                        "kind": "field",
                        "type": t,
                        "field": f,
                        "new_type": self.type(t),
                        "new_field": new,
                        "original": f"{t}.{f}",
                        "new": f"{self.type(t)}.{new}",
                        "how": self.how[f"field:{f}"],
                    }
                )
        return out

    def apply(self, fx: Fixture) -> Fixture:
        """``fx`` with these renamings in its facts and constraints; every value as it was."""
        data = fx.model_dump(mode="json")
        for s in data["sessions"]:
            s["facts"] = [self._fact(f) for f in s["facts"]]
            for c in s["constraints"]:
                if c.get("constraint") is not None:
                    where = f"{fx.id} constraint {c['key']}"
                    c["constraint"] = self._part(parse_constraint(c["constraint"], where))
        return Fixture.model_validate(data)

    def _fact(self, f: dict[str, Any]) -> dict[str, Any]:
        out = {**f, "type": self.type(f["type"])}
        if f.get("fields") is not None:
            out["fields"] = {self.field(k): v for k, v in f["fields"].items()}
        return out

    def _part(self, part: BaseModel) -> dict[str, Any]:
        """A constraint part as JSON, defaults included (a default field name is a name the
        constraint reads: renamed, it is written out), with its type and field names renamed."""
        out: dict[str, Any] = part.model_dump(mode="json")
        names = _FIELD_ATTRS.get(type(part), ())
        for attr in type(part).model_fields:
            value = getattr(part, attr)
            if attr in names:
                out[attr] = self._fields(value)
            elif isinstance(part, Select) and attr in ("type", "also"):
                out[attr] = self.type(value) if attr == "type" else [self.type(t) for t in value]
            elif isinstance(part, Select) and attr == "where":
                out[attr] = {self.field(k): v for k, v in out[attr].items()}
            elif isinstance(part, ValidOn) and attr == "match":
                out[attr] = {self.field(k): self.field(v) for k, v in value.items()}
            elif isinstance(value, BaseModel):
                out[attr] = self._part(value)
        return out

    def _fields(self, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list):
            return [self.field(v) for v in value]
        return None if value is None else self.field(value)


class _Draw:
    """The seeded choices for one scenario: new names that are valid, changed and distinct."""

    def __init__(self, fx: Fixture, seed: int) -> None:
        self.rng = random.Random(f"respell:{seed}:{fx.id}")
        self.taken = set(_bundled_names()) | set(_names(fx))
        self.words = _words()

    def options(self, original: str, whole: dict[str, list[str]]) -> list[tuple[str, list[str]]]:
        """Spellings to try for ``original``, in the order drawn: (how, words)."""
        key = style_key(original)
        parts = key.split("_")
        found: list[tuple[str, list[str]]] = [
            ("synonym", alt.split()) for alt in whole.get(key, [])
        ]
        for _ in range(_DRAWS):
            words: list[str] = []
            hows = set()
            for w in parts:
                subs = [("synonym", s) for s in self.words["words"].get(w, [])]
                subs += [("abbreviation", a) for a in self.words["abbreviations"].get(w, [])]
                how, pick = self.rng.choice([("", w), *subs])
                words += pick.split()
                hows.add(how)
            how = "abbreviation" if "abbreviation" in hows else "synonym" if hows - {""} else ""
            found.append((how, words))
        self.rng.shuffle(found)
        return [(h, w) for h, w in found if h]  # a draw that kept every word is no renaming

    def pick(
        self,
        original: str,
        whole: dict[str, list[str]],
        style: str,
        ok: Callable[[str], bool],
        prefixes: list[str],
    ) -> tuple[str, str]:
        """The new name of ``original`` and how it was made: the first option that ``ok``
        accepts; then the original's words after each prefix, and a numbered prefix last."""
        options = self.options(original, whole)
        if prefixes and self.rng.random() < _PREFIX_SHARE:
            prefix = self.rng.choice(prefixes)
            options = [(f"{h}+prefix", [prefix, *w]) for h, w in options]
        words = style_key(original).split("_")
        options += [("prefix", [p, *words]) for p in prefixes or ["my"]]
        options += [("prefix", [f"my{n}", *words]) for n in range(2, 100)]
        for how, words in options:
            new = _styled(words, style)
            if style_key(new) not in self.taken and ok(new):
                self.taken.add(style_key(new))
                return new, how
        raise AssertionError(f"no new name for {original!r}")  # 98 numbered prefixes: unreachable


def respell(fx: Fixture, seed: int) -> tuple[Fixture, Respelling]:
    """``fx`` re-spelt under ``seed``, and its renamings."""
    draw = _Draw(fx, seed)
    r = Respelling(
        fx.id,
        seed,
        type_style=draw.rng.choice(TYPE_STYLES),
        field_style=draw.rng.choice(FIELD_STYLES),
    )
    for s in fx.sessions:
        for f in s.facts:
            t = f["type"]
            if t not in r.types:

                def type_ok(new: str) -> bool:
                    return name_problem("type", new) is None and not type_clash(
                        r.types.values(), new
                    )

                r.types[t], r.how[f"type:{t}"] = draw.pick(
                    t, draw.words["type_names"], r.type_style, type_ok, []
                )
            for name in f.get("fields") or {}:
                r.field_types.setdefault(name, [])
                if t not in r.field_types[name]:
                    r.field_types[name].append(t)
                if name in r.fields:
                    continue
                new_type = r.types[t]

                def field_ok(new: str, new_type: str = new_type) -> bool:
                    return name_problem("field", new) is None and not field_clash(
                        new_type, r.fields.values(), new
                    )

                # a prefix: my_, user_, or the type's own word (journey_start)
                own = style_key(new_type).split("_")[-1]
                prefixes = [*draw.words["prefixes"], own]
                r.fields[name], r.how[f"field:{name}"] = draw.pick(
                    name, draw.words["field_names"], r.field_style, field_ok, prefixes
                )
    return r.apply(fx), r


def renamings(
    seed: int, sets: Iterable[str] = ("public", "holdout"), paths: dict[str, Path] | None = None
) -> list[dict[str, Any]]:
    """The ground truth of ``seed``: every renaming of the bundled scenarios (``sets``), one row
    per type (``kind`` 'type') and per field of each type (``kind`` 'field'), each with the
    original and new names (``type``/``field`` → ``new_type``/``new_field``; dotted as
    ``original`` → ``new``) and ``how`` it was made (synonym, abbreviation, prefix)."""
    files = {**SETS, **(paths or {})}
    return [
        row
        for name in sets
        for fx in load_fixtures(files[name])
        for row in respell(fx, seed)[1].rows(name)
    ]


def renamings_report(rows: list[dict[str, Any]]) -> str:
    """The renamings as a text table: seed, set, scenario, original → new, how."""
    width = max((len(r["original"]) for r in rows), default=8) + 2
    new = max((len(r["new"]) for r in rows), default=3) + 2
    lines = [f"{'seed':<6}{'set':<9}{'scenario':<18}{'original':<{width}}{'new':<{new}}how"]
    lines += [
        f"{r['seed']:<6}{r['set']:<9}{r['scenario']:<18}{r['original']:<{width}}"
        f"{r['new']:<{new}}{r['how']}"
        for r in rows
    ]
    return "\n".join(lines) + "\n"
