"""Seeded histories: every record said once in a sentence and given once as a fact, with the
corrections and retractions of a ``revised`` history.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from uac_kernel.bench.aggregate._common import (
    CORRECT_P,
    FIRST_DAY,
    RETRACT_P,
    SPAN_DAYS,
    VARIANTS,
)
from uac_kernel.bench.aggregate._kinds import (
    _LABEL_POOLS,
    ACTIVITIES,
    CAT_FIXES,
    GENRES,
    KINDS,
    MEETING_KINDS,
    NUM_FIXES,
    QUALITIES,
    RETRACTIONS,
    SHOPPING,
    SPENDING,
    Kind,
)

# --- histories -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Said:
    """One utterance, and the fact operation a good extractor gives for it."""

    ts: datetime
    text: str
    op: str  # add | update | retract
    type: str
    key: str
    fields: Mapping[str, Any]


@dataclass
class History:
    """One user's generated history: what was said, in time order, and the records it leaves."""

    id: str
    size: int
    variant: str
    seed: int
    said: list[Said]
    records: dict[str, dict[str, dict[str, Any]]]  # type -> key -> fields (current records)
    versions: dict[tuple[str, str], list[dict[str, Any]]]  # every version, retracted ones too

    def events(self) -> list[dict[str, Any]]:
        """Event JSONL objects: each utterance followed by the fact extracted from it."""
        out: list[dict[str, Any]] = []
        for i, s in enumerate(self.said):
            ts, source = s.ts.isoformat(), f"{self.id}#{i}"
            out.append(
                {"kind": "utterance", "ts": ts, "speaker": "user", "text": s.text, "source": source}
            )
            fact: dict[str, Any] = {
                "kind": "fact",
                "ts": ts,
                "op": s.op,
                "type": s.type,
                "key": s.key,
                "source": f"{source}/fact",
                "derived_from": [source],
            }
            if s.op == "retract":
                fact["reason"] = "the user retracted it"
            else:
                fact["fields"] = {
                    k: v.isoformat() if isinstance(v, date) else v for k, v in s.fields.items()
                }
            out.append(fact)
        return out

    def current(self, type_name: str) -> list[dict[str, Any]]:
        return list(self.records.get(type_name, {}).values())


def _rng(*parts: object) -> random.Random:
    return random.Random(":".join(map(str, parts)))


def _shares(size: int, rng: random.Random) -> dict[str, int]:
    names = list(KINDS)
    extra = set(rng.sample(names, size % len(names)))
    return {n: size // len(names) + (n in extra) for n in names}


def generate_history(size: int, *, seed: int = 0, variant: str = "clean") -> History:
    """A deterministic history of ``size`` records over the ten kinds (same seed, same bytes).

    The ``revised`` variant holds the same records said the same way, plus later corrections
    (about 12% of records) and retractions (about 6%).
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; use one of {', '.join(VARIANTS)}")
    if size < len(KINDS):
        raise ValueError(f"size must be at least {len(KINDS)} (one record per kind)")
    rng = _rng("aggregate", seed, size)
    said: list[Said] = []
    records: dict[str, dict[str, dict[str, Any]]] = {}
    for name, n in _shares(size, rng).items():
        kind = KINDS[name]
        pool = _LABEL_POOLS[name]() if name in _LABEL_POOLS else [None] * n
        if n > len(pool):
            raise ValueError(
                f"size {size} needs {n} {kind.plural} with distinct names, more than the "
                f"{len(pool)} the generator has; use sizes up to {len(pool) * len(KINDS)}"
            )
        labels = rng.sample(pool, n)
        days = sorted(rng.sample(range(SPAN_DAYS), n))
        records[name] = {}
        for i, (offset, label) in enumerate(zip(days, labels, strict=True)):
            day = FIRST_DAY + timedelta(days=offset)
            fields = kind.draw(rng, day, label)
            lag = fields["nights"] if name == "Trip" else rng.randint(0, 3)
            ts = datetime.combine(day + timedelta(days=lag), datetime.min.time()) + timedelta(
                hours=rng.randint(7, 22), minutes=rng.randint(0, 59)
            )
            text = rng.choice(kind.add_templates).render(fields)
            key = f"{name.lower()}-{i:04d}"
            said.append(Said(ts, text, "add", name, key, fields))
            records[name][key] = dict(fields)
    versions = {(s.type, s.key): [dict(s.fields)] for s in said}
    if variant == "revised":
        said += _revisions(said, records, versions, _rng("aggregate-revised", seed, size))
    said.sort(key=lambda s: s.ts)
    return History(f"agg-{size}-{variant}-s{seed}", size, variant, seed, said, records, versions)


def _revisions(
    adds: list[Said],
    records: dict[str, dict[str, dict[str, Any]]],
    versions: dict[tuple[str, str], list[dict[str, Any]]],
    rng: random.Random,
) -> list[Said]:
    out: list[Said] = []
    for s in list(adds):
        kind, roll = KINDS[s.type], rng.random()
        if roll >= CORRECT_P + RETRACT_P:
            continue
        ts = s.ts + timedelta(days=rng.randint(1, 90), hours=rng.randint(0, 12))
        handle = kind.handle_template.render(s.fields)
        current = records[s.type][s.key]
        if roll < RETRACT_P:
            text = rng.choice(RETRACTIONS).render({"handle": handle})
            out.append(Said(ts, text, "retract", s.type, s.key, {}))
            del records[s.type][s.key]
            continue
        if kind.cat_fixable and rng.random() < 0.4:
            fname = kind.cat_field
            old = current[fname]
            choices = sorted({str(v) for v in _category_values(kind)} - {old})
            new: Any = rng.choice(choices)
            value_text, old_text = new, old
            template = rng.choice(CAT_FIXES)
        else:
            fname = kind.num_field
            old = current[fname]
            new = _changed_number(kind, old, rng)
            value_text = kind.value_template.render({fname: new})
            old_text = kind.value_template.render({fname: old})
            template = rng.choice(NUM_FIXES)
        text = template.render({"handle": handle, "value": value_text, "old": old_text})
        out.append(Said(ts, text, "update", s.type, s.key, {fname: new}))
        current[fname] = new
        versions[(s.type, s.key)].append(dict(current))
    return out


def _category_values(kind: Kind) -> Iterable[str]:
    return {
        "Contact": ("friend", "colleague", "neighbour", "cousin", "client", "classmate"),
        "Transaction": tuple(SPENDING),
        "SleepLog": QUALITIES,
        "Workout": ACTIVITIES,
        "Book": GENRES,
        "Meeting": MEETING_KINDS,
        "Purchase": tuple(SHOPPING),
    }[kind.name]


def _changed_number(kind: Kind, old: Any, rng: random.Random) -> Any:
    vk = kind.fields[kind.num_field]
    if vk == "int":
        step = 5 if kind.name in ("Meal", "Workout", "Meeting") else 1
        delta = rng.choice((-3, -2, -1, 1, 2, 3)) * step
        return old + delta if old + delta > 1 else old + abs(delta)
    if vk == "tenth":
        new = round(old + rng.choice((-1.5, -1.0, -0.5, 0.5, 1.0, 1.5)), 1)
        return new if new > 0 else round(old + 1.0, 1)
    new = round(old * rng.choice((0.5, 0.8, 1.25, 1.5, 2.0)) + rng.choice((-1, 1)) * 0.37, 2)
    return new if new > 0 and new != old else round(old + 10.0, 2)
