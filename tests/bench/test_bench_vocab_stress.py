"""The vocabulary stress bench: the re-spelling generator (``uac_kernel.bench.respell``) and the
bench that replays the re-spelt alert scenarios (``uac_kernel.bench.vocab_stress``,
``uac bench vocab``)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from uac_kernel.bench.alerts import HOLDOUT, Fixture, load_fixtures
from uac_kernel.bench.respell import Respelling, renamings, respell
from uac_kernel.bench.vocab_stress import STEM, run
from uac_kernel.core.names import field_clash, name_problem, style_key, type_clash
from uac_kernel.language.spec import parse_constraint

SEEDS = (0, 1, 2)
# Where a constraint holds words, keys and choices (``measure: days``), never a type or field
# name.
TEXT = {
    "title",
    "cites",
    "key",
    "category",
    "mentions",
    "groups",
    "active_groups",
    "table",
    "kind",
    "severity",
    "measure",
    "per",
    "period",
}


@pytest.fixture(scope="module")
def scenarios() -> list[Fixture]:
    return load_fixtures() + load_fixtures(HOLDOUT)


@pytest.fixture(scope="module")
def respelt(scenarios: list[Fixture]) -> list[tuple[Fixture, Fixture, Respelling]]:
    return [(fx, *respell(fx, seed)) for seed in SEEDS for fx in scenarios]


def _facts(fx: Fixture) -> Iterator[dict[str, Any]]:
    for s in fx.sessions:
        yield from s.facts


def test_renaming_is_consistent_within_a_scenario(
    respelt: list[tuple[Fixture, Fixture, Respelling]],
) -> None:
    for old, new, r in respelt:
        types: dict[str, set[str]] = {}
        fields: dict[str, set[str]] = {}
        for a, b in zip(_facts(old), _facts(new), strict=True):
            types.setdefault(a["type"], set()).add(b["type"])
            for (ka, _), (kb, _) in zip(a["fields"].items(), b["fields"].items(), strict=True):
                fields.setdefault(ka, set()).add(kb)
        assert types == {t: {r.types[t]} for t in types}, old.id
        assert fields == {f: {r.fields[f]} for f in fields}, old.id
        # one-to-one: two names never become one
        assert len(set(r.types.values())) == len(r.types)
        assert len({style_key(n) for n in r.fields.values()}) == len(r.fields)


def test_renaming_is_deterministic_per_seed() -> None:
    assert renamings(0) == renamings(0)
    assert renamings(0) != renamings(1)


def test_every_type_and_field_is_renamed_in_its_words(
    respelt: list[tuple[Fixture, Fixture, Respelling]],
) -> None:
    for old, _, r in respelt:
        assert set(r.types) == {f["type"] for f in _facts(old)}
        assert set(r.fields) == {k for f in _facts(old) for k in f["fields"]}
        for a, b in [*r.types.items(), *r.fields.items()]:
            assert style_key(a) != style_key(b), (old.id, a, b)


def test_values_keys_turns_and_the_expected_alert_are_kept(
    respelt: list[tuple[Fixture, Fixture, Respelling]],
) -> None:
    for old, new, r in respelt:
        assert new.expected == old.expected and new.trap == old.trap  # a trap stays a trap
        assert [s.user_turns for s in new.sessions] == [s.user_turns for s in old.sessions]
        for a, b in zip(_facts(old), _facts(new), strict=True):
            # dates, amounts and the keys of other records (Autopay.account) alike
            assert list(a["fields"].values()) == list(b["fields"].values())
            assert {k: a[k] for k in ("ts", "op", "key")} == {k: b[k] for k in ("ts", "op", "key")}
        # renamed back, each constraint is the original (its defaults written out)
        back = Respelling(
            r.scenario,
            r.seed,
            r.type_style,
            r.field_style,
            {v: k for k, v in r.types.items()},
            {v: k for k, v in r.fields.items()},
        ).apply(new)
        for s_old, s_back in zip(old.sessions, back.sessions, strict=True):
            assert list(s_back.facts) == list(s_old.facts)
            for c_old, c_back in zip(s_old.constraints, s_back.constraints, strict=True):
                assert c_back.key == c_old.key and c_back.op == c_old.op
                assert parse_constraint(c_back.constraint) == parse_constraint(c_old.constraint)


def _names(obj: Any, attr: str = "") -> Iterator[str]:
    """Every string of a constraint's JSON outside its text attributes, dict keys too."""
    if attr in TEXT:
        return
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, list):
        for v in obj:
            yield from _names(v, attr)
    elif isinstance(obj, dict):
        for k, v in obj.items():
            if attr in ("where", "match"):
                yield k
            yield from _names(v, k)


def test_constraints_name_only_new_names(
    respelt: list[tuple[Fixture, Fixture, Respelling]],
) -> None:
    """A constraint reads a renamed type or field nowhere by its old name: every position that
    holds a name is renamed (a new name is never one of the scenarios' own)."""
    checked = 0
    for _, new, r in respelt:
        old_names = set(r.types) | set(r.fields)
        for s in new.sessions:
            for c in s.constraints:
                if c.constraint is not None:
                    assert not old_names & set(_names(c.constraint)), (new.id, c.key)
                    checked += 1
    assert checked > 50


def test_new_names_are_stored_by_uac_and_never_clash(
    respelt: list[tuple[Fixture, Fixture, Respelling]],
) -> None:
    for _, new, r in respelt:
        for t in r.types.values():
            assert name_problem("type", t) is None
            assert type_clash(r.types.values(), t) is None
        for f in r.fields.values():
            assert name_problem("field", f) is None
        by_type: dict[str, set[str]] = {}
        for fact in _facts(new):
            by_type.setdefault(fact["type"], set()).update(fact["fields"])
        for t, names in by_type.items():
            for f in names:
                assert field_clash(t, names, f) is None, (new.id, t, f)


def test_renamings_rows_are_the_ground_truth(scenarios: list[Fixture]) -> None:
    rows = renamings(0)
    pairs = {(r["scenario"], r["type"], r["field"]) for r in rows if r["kind"] == "field"}
    expected = {(fx.id, f["type"], k) for fx in scenarios for f in _facts(fx) for k in f["fields"]}
    assert pairs == expected
    for row in rows:
        assert row["how"] and row["set"] in ("public", "holdout")
        if row["kind"] == "field":
            assert row["new"] == f"{row['new_type']}.{row['new_field']}"


def test_a_tiny_run_writes_the_results(tmp_path: Path, scenarios: list[Fixture]) -> None:
    picked = [next(fx for fx in scenarios if fx.id == "travel_01")]
    picked.append(next(fx for fx in scenarios if fx.trap))
    result = run((0,), {"two": picked}, progress=False, out_dir=tmp_path)
    data = json.loads((tmp_path / f"{STEM}.json").read_text())
    text = (tmp_path / f"{STEM}.txt").read_text()
    assert data["ours"]["two"] == {
        "caught": 1,
        "total": 1,
        "traps": 1,
        "traps_held": 1,
        "false_critical": 0,
    }
    assert data["seeds"] == [0] and set(data["ratio"]) == {"0"}
    assert data["trap_false_critical"] == {"0": 0}
    assert [s["id"] for s in data["scenarios"]["two"]] == [fx.id for fx in picked]
    assert data["summary"] == result.summary_line() and result.summary_line() in text
    # a lost alert names the renamings that lose it alone, each a row of the ground truth
    for lost in data["lost"]:
        assert lost["scenario"] == "travel_01" and lost["blame_run"]
        truth = {(r["original"], r["new"]) for r in renamings(0) if r["scenario"] == "travel_01"}
        assert {(b["original"], b["new"]) for b in lost["blamed"]} <= truth


def test_cli_report_prints_the_renamings() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "uac_kernel.cli.main", "bench", "vocab", "--report", "--seeds", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split()[:4] == ["seed", "set", "scenario", "original"]
    assert len(lines) == 1 + len(renamings(1))


def test_cli_refuses_a_bad_seed_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "uac_kernel.cli.main", "bench", "vocab", "--seeds", "x"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1 and "--seeds" in done.stderr
