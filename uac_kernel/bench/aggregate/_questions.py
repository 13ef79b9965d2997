"""Aggregate questions over a history, and their ground truth."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from uac_kernel.bench.aggregate._common import (
    FIRST_DAY,
    PATTERNS,
    SPAN_DAYS,
    TOP,
    YEARS,
)
from uac_kernel.bench.aggregate._history import (
    History,
    _rng,
)
from uac_kernel.bench.aggregate._kinds import (
    KINDS,
    Kind,
    _render,
    say_date,
)

# --- questions and their ground truth ------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    """One aggregate question about one record type of one history."""

    id: str
    history: str
    size: int
    variant: str
    type: str
    pattern: str
    text: str  # the question as the user asks it: what retrieval searches with
    form: str  # how to give the answer, e.g. "Answer with a whole number."
    answer_kind: str  # int | number | set | list | mapping
    params: Mapping[str, Any]
    expression: str  # the typed-state reference program, run in the sandbox
    truth: Any

    @property
    def prompt(self) -> str:
        """What a model is asked: the question and the form of its answer."""
        return f"{self.text} {self.form}"


def _nums(rs: Iterable[Mapping[str, Any]], n: str) -> list[Any]:
    return [r[n] for r in rs if r.get(n) is not None]


def _month(d: date) -> str:
    return f"{d.year}-{d.month:02d}"


def _monthly(kind: Kind, rs: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    d, n = kind.date_field, kind.num_field
    sums: dict[str, Any] = {}
    for r in rs:
        if r.get(d) is not None and r.get(n) is not None:
            sums[_month(r[d])] = sums.get(_month(r[d]), 0) + r[n]
    return sums


def _label(value: Any) -> Any:
    return value.isoformat() if isinstance(value, date) else value


def compute(pattern: str, kind: Kind, params: Mapping[str, Any], rs: list[dict[str, Any]]) -> Any:
    """The reference program of a pattern over records given as field dicts (None-safe).

    The ground truth is this over the generator's final records; the text readers apply it to
    the records they rebuilt from what their system showed them.
    """
    c, n, d, lab = kind.cat_field, kind.num_field, kind.date_field, kind.label_field
    p = params
    if pattern == "count":
        return sum(1 for r in rs if r.get(d) is not None and r[d].year == p["year"])
    if pattern == "sum":
        return sum(_nums(rs, n))
    if pattern == "average":
        xs = _nums([r for r in rs if r.get(c) == p["v"]], n)
        return sum(xs) / len(xs) if xs else None
    if pattern == "share":
        cats = Counter(r[c] for r in rs if r.get(c) is not None)
        total = sum(cats.values())
        return {k: v / total for k, v in cats.items()}
    if pattern == "window":
        return sum(1 for r in rs if r.get(d) is not None and p["start"] <= r[d] <= p["end"])
    if pattern == "multi":
        return sum(
            1
            for r in rs
            if r.get(c) == p["v"]
            and r.get(d) is not None
            and r[d].year == p["year"]
            and r.get(n) is not None
            and r[n] > p["x"]
        )
    if pattern == "topk":
        ranked = [r for r in rs if r.get(n) is not None and r.get(d) is not None]
        ranked.sort(key=lambda r: (r[n], r[d]), reverse=True)
        return [_label(r.get(lab)) for r in ranked[:TOP]]
    if pattern == "minmax":
        xs = _nums(rs, n)
        return (max(xs) if p["which"] == "highest" else min(xs)) if xs else None
    if pattern == "threshold":
        return sorted(m for m, s in _monthly(kind, rs).items() if s > p["x"])
    if pattern == "yoy":
        by_year: dict[int, Any] = {p["y1"]: 0, p["y2"]: 0}
        for r in rs:
            if r.get(d) is not None and r.get(n) is not None and r[d].year in by_year:
                by_year[r[d].year] += r[n]
        return by_year[p["y2"]] - by_year[p["y1"]]
    raise ValueError(f"unknown pattern {pattern!r}; use one of {', '.join(PATTERNS)}")


def _in_scope(pattern: str, kind: Kind, p: Mapping[str, Any], r: Mapping[str, Any]) -> bool:
    """Whether a record version bears on the answer (for retrieval completeness)."""
    c, d = kind.cat_field, kind.date_field
    if pattern == "count":
        return bool(r[d].year == p["year"])
    if pattern == "average":
        return bool(r.get(c) == p["v"])
    if pattern == "window":
        return bool(p["start"] <= r[d] <= p["end"])
    if pattern == "multi":
        return bool(r.get(c) == p["v"] and r[d].year == p["year"])
    if pattern == "yoy":
        return bool(r[d].year in (p["y1"], p["y2"]))
    return True


def _date_code(d: date) -> str:
    return f"date({d.year}, {d.month}, {d.day})"


def _expression(pattern: str, kind: Kind, p: Mapping[str, Any]) -> str:
    """The typed-state reference program: the one-line expression a good model would write."""
    t, c, n, d, lab = kind.name, kind.cat_field, kind.num_field, kind.date_field, kind.label_field
    every = f"user.all({t})"
    if pattern == "count":
        return f"len([r for r in {every} if r.{d}.year == {p['year']}])"
    if pattern == "sum":
        return f"sum(r.{n} for r in {every})"
    if pattern == "average":
        return f"(lambda xs: sum(xs) / len(xs))([r.{n} for r in {every} if r.{c} == {p['v']!r}])"
    if pattern == "share":
        return (
            f"(lambda rs: {{k: v / len(rs) for k, v in Counter(r.{c} for r in rs).items()}})"
            f"({every})"
        )
    if pattern == "window":
        lo, hi = _date_code(p["start"]), _date_code(p["end"])
        return f"len([r for r in {every} if {lo} <= r.{d} <= {hi}])"
    if pattern == "multi":
        return (
            f"len([r for r in {every} if r.{c} == {p['v']!r} and r.{d}.year == {p['year']} "
            f"and r.{n} > {p['x']!r}])"
        )
    if pattern == "topk":
        return (
            f"[r.{lab} for r in sorted({every}, key=lambda r: (r.{n}, r.{d}), reverse=True)"
            f"[:{TOP}]]"
        )
    if pattern == "minmax":
        return f"{'max' if p['which'] == 'highest' else 'min'}(r.{n} for r in {every})"
    if pattern == "threshold":
        month = f"r.{d}.strftime('%Y-%m')"
        return (
            f"sorted(m for m in {{{month} for r in {every}}} "
            f"if sum(r.{n} for r in {every} if {month} == m) > {p['x']!r})"
        )
    if pattern == "yoy":
        return (
            f"sum(r.{n} for r in {every} if r.{d}.year == {p['y2']}) "
            f"- sum(r.{n} for r in {every} if r.{d}.year == {p['y1']})"
        )
    raise ValueError(f"unknown pattern {pattern!r}")


ANSWER_KINDS = {
    "count": "int",
    "sum": "number",
    "average": "number",
    "share": "mapping",
    "window": "int",
    "multi": "int",
    "topk": "list",
    "minmax": "number",
    "threshold": "set",
    "yoy": "number",
}


def _text(pattern: str, kind: Kind, p: Mapping[str, Any]) -> tuple[str, str]:
    """The question as a user asks it, and how the answer should be given."""
    pl, nl = kind.plural, kind.num_label
    cats = kind.cat_phrase.format(v=p.get("v"))
    whole, number = "Answer with a whole number.", "Answer with a number."
    if pattern == "count":
        return f"How many {pl} did I have in {p['year']} ({kind.date_desc})?", whole
    if pattern == "sum":
        return f"What is the total {nl} across all my {pl}?", number
    if pattern == "average":
        return f"What is the average {nl} of my {cats}?", number
    if pattern == "share":
        return (
            f"What share of my {pl} falls under each {kind.cat_label}?",
            f"Answer with a JSON object mapping each {kind.cat_label} to a fraction between 0 and 1.",
        )
    if pattern == "window":
        return (
            f"How many of my {pl} fall between {say_date(p['start'])} and {say_date(p['end'])} "
            f"inclusive ({kind.date_desc})?",
            whole,
        )
    if pattern == "multi":
        x = _render(kind.fields[kind.num_field], p["x"])
        return f"How many {cats} in {p['year']} ({kind.date_desc}) had a {nl} above {x}?", whole
    if pattern == "topk":
        return (
            f"Which {TOP} of my {pl} had the highest {nl} (on a tie, the more recent first)?",
            f"Answer with a JSON list of their {kind.label_desc}, highest first.",
        )
    if pattern == "minmax":
        return f"What was the {p['which']} {nl} among my {pl}?", number
    if pattern == "threshold":
        return (
            f"In which months was the total {nl} of my {pl} above {p['x']} ({kind.date_desc})?",
            "Answer with a JSON list of months as YYYY-MM.",
        )
    if pattern == "yoy":
        return (
            f"By how much did the total {nl} of my {pl} change from {p['y1']} to {p['y2']} "
            f"({kind.date_desc})?",
            f"Answer with a number: the {p['y2']} total minus the {p['y1']} total.",
        )
    raise ValueError(f"unknown pattern {pattern!r}")


def _params(
    pattern: str, kind: Kind, rs: list[dict[str, Any]], rng: random.Random
) -> dict[str, Any]:
    c, n, d = kind.cat_field, kind.num_field, kind.date_field
    if pattern == "count":
        return {"year": rng.choice(YEARS)}
    if pattern == "average":
        return {"v": rng.choice(sorted({r[c] for r in rs}))}
    if pattern == "window":
        start = FIRST_DAY + timedelta(days=rng.randrange(SPAN_DAYS - 120))
        return {"start": start, "end": start + timedelta(days=119)}
    if pattern == "multi":
        r0 = rng.choice(rs)
        group = sorted(r[n] for r in rs if r[c] == r0[c] and r[d].year == r0[d].year)
        # just below the lower median, so at least half of the group counts
        median = group[(len(group) - 1) // 2]
        unit = {"int": 1, "tenth": 0.1}.get(kind.fields[n], 0.01)
        x = median - unit if isinstance(median, int) else _round_for(kind, median - unit)
        return {"v": r0[c], "year": r0[d].year, "x": x}
    if pattern == "minmax":
        return {"which": rng.choice(("highest", "lowest"))}
    if pattern == "threshold":
        # x lies strictly between two monthly totals, far enough from both that the order in
        # which a system adds up floats cannot move a month across it.
        sums = sorted(set(_monthly(kind, rs).values()))
        first = min(len(sums) - 1, max(1, int(len(sums) * 0.7)))
        for i in [*range(first, len(sums)), *range(first - 1, 0, -1)]:
            lo, hi = sums[i - 1], sums[i]
            if isinstance(lo, int) and isinstance(hi, int):
                return {"x": lo}
            x = _round_for(kind, (lo + hi) / 2)
            if lo + 0.001 < x < hi - 0.001:
                return {"x": x}
        return {"x": _round_for(kind, sums[0] / 2) if sums else 0}
    if pattern == "yoy":
        y1 = rng.choice(YEARS[:-1])
        return {"y1": y1, "y2": y1 + 1}
    return {}


def _round_for(kind: Kind, x: float) -> float:
    return round(x, 1 if kind.fields[kind.num_field] == "tenth" else 2)


def make_questions(
    history: History,
    *,
    patterns: Sequence[str] | None = None,
    types: Sequence[str] | None = None,
) -> list[Question]:
    """Every pattern for every record type of ``history`` (or the ones asked for)."""
    chosen = list(patterns) if patterns is not None else list(PATTERNS)
    kinds = list(types) if types is not None else list(KINDS)
    for p in chosen:
        if p not in PATTERNS:
            raise ValueError(f"unknown pattern {p!r}; use one of {', '.join(PATTERNS)}")
    for t in kinds:
        if t not in KINDS:
            raise ValueError(f"unknown record type {t!r}; use one of {', '.join(KINDS)}")
    out = []
    for t in kinds:
        kind, rs = KINDS[t], history.current(t)
        if not rs:
            continue
        for pattern in chosen:
            rng = _rng("question", history.seed, history.size, history.variant, t, pattern)
            params = _params(pattern, kind, rs, rng)
            text, form = _text(pattern, kind, params)
            out.append(
                Question(
                    id=f"{history.id}/{t}/{pattern}",
                    history=history.id,
                    size=history.size,
                    variant=history.variant,
                    type=t,
                    pattern=pattern,
                    text=text,
                    form=form,
                    answer_kind=ANSWER_KINDS[pattern],
                    params=params,
                    expression=_expression(pattern, kind, params),
                    truth=compute(pattern, kind, params, rs),
                )
            )
    return out


def relevant(history: History, q: Question) -> set[int]:
    """Indices of the utterances a reader must see to answer ``q`` (every version in scope)."""
    kind = KINDS[q.type]
    keys = {
        key
        for (t, key), versions in history.versions.items()
        if t == q.type and any(_in_scope(q.pattern, kind, q.params, v) for v in versions)
    }
    return {i for i, s in enumerate(history.said) if s.type == q.type and s.key in keys}
