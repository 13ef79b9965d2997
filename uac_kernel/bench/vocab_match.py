"""The matcher's precision and recall of bindings on the vocabulary stress bench's renamings.

Each alert scenario (the public set and the held-out one) is re-spelt under a seed by the ground
truth of ``uac_kernel.bench.respell.renamings(seed)`` (original type or ``Type.field`` → new
name); the matcher (``vocab.matcher.propose``) runs once over the re-spelt schema, every type
and field with the values the fixture gives it, as ingest would see them after the whole history.

The right answer for a renamed name follows from the catalogue's defaults, which are today's
names: a renamed type should play the roles whose default types include its original name, and a
renamed field of type ``T`` should carry the concepts whose default fields include its original
name, on a role ``T`` plays by default. Counted:

- **precision**: of the ``used`` bindings, those that are right (roles and concepts apart);
- **recall**: of the renamed fields that carry a concept some shipped rule reads, those a
  ``used`` binding (or a default the new name happens to have) reads as one of them; the same for
  renamed types and the roles rules read;
- **held**: proposals held for review, right and wrong, apart from both.

Only counts and per-concept aggregates are reported, never the names themselves: the bench must
not teach the matcher the generator's words.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from uac_kernel import __version__
from uac_kernel.bench.alerts import SETS, Fixture, load_fixtures
from uac_kernel.bench.respell import renamings
from uac_kernel.core.outputs import output_dir
from uac_kernel.core.schema import infer
from uac_kernel.vocab.binding import Binding, Vocabulary
from uac_kernel.vocab.catalogue import CONCEPTS, ROLES
from uac_kernel.vocab.matcher import propose

__all__ = ["SEEDS", "STEM", "Counts", "VocabMatch", "run", "score_scenario"]

SEEDS = (0, 1, 2)
STEM = "vocab_match"  # the results files: vocab_match.json and vocab_match.txt


@dataclass
class Counts:
    """Bindings counted against the ground truth, for one scenario or summed."""

    used_right: int = 0
    used_wrong: int = 0
    held_right: int = 0
    held_wrong: int = 0
    expected: int = 0  # renamed names that carry something a rule reads
    recalled: int = 0  # of those, read right through a used binding or a default

    def add(self, other: Counts) -> None:
        for k in vars(self):
            setattr(self, k, getattr(self, k) + getattr(other, k))

    @property
    def precision(self) -> float:
        used = self.used_right + self.used_wrong
        return self.used_right / used if used else 1.0

    @property
    def recall(self) -> float:
        return self.recalled / self.expected if self.expected else 1.0

    def to_json(self) -> dict[str, Any]:
        return {
            **vars(self),
            "precision": round(self.precision, 3),
            "recall": round(self.recall, 3),
        }


@dataclass
class Scored:
    """One scenario's counts: roles (types) and concepts (fields) apart, and per concept."""

    roles: Counts = field(default_factory=Counts)
    concepts: Counts = field(default_factory=Counts)
    # concept or role → [expected, recalled, used wrong onto it, held right]
    per_target: dict[str, list[int]] = field(default_factory=dict)

    def add(self, other: Scored) -> None:
        self.roles.add(other.roles)
        self.concepts.add(other.concepts)
        for k, v in other.per_target.items():
            got = self.per_target.setdefault(k, [0, 0, 0, 0])
            for i, x in enumerate(v):
                got[i] += x

    def _tally(self, target: str, i: int) -> None:
        self.per_target.setdefault(target, [0, 0, 0, 0])[i] += 1


def _right_roles(t: str) -> frozenset[str]:
    return frozenset(r.name for r in ROLES.values() if not r.any and t in r.types)


def _right_concepts(t: str, f: str) -> frozenset[str]:
    """The concepts a field named ``f`` on a type named ``t`` carries under the defaults."""
    return frozenset(
        c.name
        for c in CONCEPTS.values()
        if f in c.fields and any(ROLES[r].any or t in ROLES[r].types for r in c.roles)
    )


def _schema(
    fx: Fixture, types: Mapping[str, str], fields: Mapping[tuple[str, str], str]
) -> tuple[dict[str, dict[str, str]], dict[tuple[str, str], list[Any]], dict[str, set[str]]]:
    """The re-spelt schema (type → field → field type), every field's values and every type's
    keys, as the fixture's facts give them."""
    schema: dict[str, dict[str, str]] = {}
    values: dict[tuple[str, str], list[Any]] = {}
    keys: dict[str, set[str]] = {}
    for s in fx.sessions:
        for fact in s.facts:
            t = fact["type"]
            new_t = types.get(t, t)
            keys.setdefault(new_t, set()).add(fact["key"])
            have = schema.setdefault(new_t, {})
            for f, v in (fact.get("fields") or {}).items():
                new_f = fields.get((t, f), f)
                ftype = have.get(new_f) or infer(v)
                if ftype is None or v is None:
                    continue
                have[new_f] = ftype
                values.setdefault((new_t, new_f), []).append(v)
    return schema, values, keys


def score_scenario(fx: Fixture, rows: Sequence[Mapping[str, Any]], read: frozenset[str]) -> Scored:
    """Run the matcher over ``fx`` re-spelt by ``rows`` (its ground-truth renamings) and count
    its bindings; ``read``: the concepts and roles some rule reads."""
    types = {r["type"]: r["new_type"] for r in rows if r["kind"] == "type"}
    fields: dict[tuple[str, str], str] = {
        (r["type"], r["field"]): r["new_field"] for r in rows if r["kind"] == "field"
    }
    schema, values, keys = _schema(fx, types, fields)
    bindings = propose(
        schema,
        Vocabulary([]),
        values=lambda t, f: values.get((t, f), []),
        keys=lambda t: keys.get(t, set()),
    )
    back_t = {new: old for old, new in types.items()}
    back_f = {(types.get(t, t), new): (t, f) for (t, f), new in fields.items()}
    out = Scored()
    used: dict[tuple[str, str | None], set[str]] = {}
    for b in bindings:
        if b.field is None:
            right = b.target in _right_roles(back_t.get(b.type, b.type))
            counts = out.roles
        else:
            t, f = back_f.get((b.type, b.field), (back_t.get(b.type, b.type), b.field))
            right = b.target in _right_concepts(t, f)
            counts = out.concepts
        _count(counts, b, right)
        if b.status == "used":
            used.setdefault((b.type, b.field), set()).add(b.target)
            if not right:
                out._tally(b.target, 2)
        elif right:
            out._tally(b.target, 3)
    for old, new in types.items():
        for r in _right_roles(old) & read:
            out.roles.expected += 1
            out._tally(r, 0)
            if r in used.get((new, None), set()) or new in ROLES[r].types:
                out.roles.recalled += 1
                out._tally(r, 1)
    for (t, f), new in fields.items():
        carried = _right_concepts(t, f) & read
        if not carried:
            continue
        out.concepts.expected += 1
        for c in carried:
            out._tally(c, 0)
        bound = used.get((types.get(t, t), new), set())
        got = {c for c in carried if c in bound or new in CONCEPTS[c].fields}
        if got:
            out.concepts.recalled += 1
            for c in got:
                out._tally(c, 1)
    return out


def _count(counts: Counts, b: Binding, right: bool) -> None:
    if b.status == "used":
        counts.used_right += right
        counts.used_wrong += not right
    else:
        counts.held_right += right
        counts.held_wrong += not right


@dataclass
class VocabMatch:
    """Per seed, the counts summed over every scenario of every set."""

    seeds: tuple[int, ...]
    by_seed: dict[int, Scored]
    scenarios: int

    def total(self) -> Scored:
        out = Scored()
        for s in self.by_seed.values():
            out.add(s)
        return out

    def summary_line(self) -> str:
        t = self.total()
        return (
            f"vocab match: concepts precision {t.concepts.precision:.2f} recall "
            f"{t.concepts.recall:.2f}; roles precision {t.roles.precision:.2f} recall "
            f"{t.roles.recall:.2f} (seeds {', '.join(map(str, self.seeds))}, "
            f"{self.scenarios} scenarios each)"
        )

    def table(self) -> str:
        head = f"{'seed':<8}{'what':<10}{'used ok':>8}{'wrong':>7}{'held ok':>8}{'wrong':>7}"
        head += f"{'expected':>10}{'recalled':>10}{'precision':>11}{'recall':>8}"
        lines = [head]
        rows = [*((str(s), v) for s, v in self.by_seed.items()), ("all", self.total())]
        for seed, scored in rows:
            for what, c in (("concepts", scored.concepts), ("roles", scored.roles)):
                lines.append(
                    f"{seed:<8}{what:<10}{c.used_right:>8}{c.used_wrong:>7}{c.held_right:>8}"
                    f"{c.held_wrong:>7}{c.expected:>10}{c.recalled:>10}{c.precision:>11.2f}"
                    f"{c.recall:>8.2f}"
                )
        lines += [
            "",
            f"{'concept or role':<32}{'expected':>10}{'recalled':>10}{'used wrong':>12}"
            f"{'held right':>12}",
        ]
        for target, (n, got, wrong, held) in sorted(self.total().per_target.items()):
            lines.append(f"{target:<32}{n:>10}{got:>10}{wrong:>12}{held:>12}")
        return "\n".join([*lines, "", self.summary_line()]) + "\n"

    def to_json(self) -> dict[str, Any]:
        t = self.total()
        return {
            "bench": "vocab_match",
            "date": date.today().isoformat(),
            "uac": __version__,
            "python": platform.python_version(),
            "seeds": list(self.seeds),
            "scenarios_per_seed": self.scenarios,
            "by_seed": {
                str(s): {"concepts": v.concepts.to_json(), "roles": v.roles.to_json()}
                for s, v in self.by_seed.items()
            },
            "total": {"concepts": t.concepts.to_json(), "roles": t.roles.to_json()},
            "per_target": {
                k: {"expected": n, "recalled": got, "used_wrong": wrong, "held_right": held}
                for k, (n, got, wrong, held) in sorted(t.per_target.items())
            },
        }

    def write(self, out_dir: str | Path) -> tuple[Path, Path]:
        out = output_dir(out_dir, what="--out")
        js, txt = out / f"{STEM}.json", out / f"{STEM}.txt"
        js.write_text(json.dumps(self.to_json(), indent=1) + "\n", encoding="utf-8")
        txt.write_text(self.table(), encoding="utf-8")
        return js, txt


def run(
    seeds: Sequence[int] = SEEDS,
    sets: Iterable[str] = ("public", "holdout"),
    *,
    paths: dict[str, Path] | None = None,
    read: frozenset[str] | None = None,
) -> VocabMatch:
    """Score the matcher on ``sets`` re-spelt under each of ``seeds``. ``paths``: fixture files
    by set name (default the bundled ones); ``read``: the concepts and roles counted for recall
    (default: those the shipped library reads)."""
    files = {**SETS, **(paths or {})}
    names = list(sets)
    fixtures = {(n, fx.id): fx for n in names for fx in load_fixtures(files[n])}
    if read is None:
        from uac_kernel.rules.describe import readers
        from uac_kernel.rules.library import LIBRARY

        read = frozenset(readers(LIBRARY))
    by_seed: dict[int, Scored] = {}
    for seed in seeds:
        rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for row in renamings(seed, names, paths):
            rows.setdefault((row["set"], row["scenario"]), []).append(row)
        total = Scored()
        for key, fx in fixtures.items():
            total.add(score_scenario(fx, rows.get(key, []), read))
        by_seed[seed] = total
    return VocabMatch(tuple(seeds), by_seed, len(fixtures))
