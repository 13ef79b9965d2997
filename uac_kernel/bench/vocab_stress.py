"""``uac bench vocab``: does the library keep its score when a user names things their own way?

The scenarios of ``uac bench alerts`` (the public 40 and the held-out ones), re-spelt under
several seeds by ``uac_kernel.bench.respell`` (every type and field renamed consistently within
a scenario through synonyms, abbreviations, prefixes and naming styles; values untouched), are
replayed through the same replay and scored by the same scoring as ``uac bench alerts``
(``alerts.run_scenario``), on the library line: the shipped rules alone. Whatever the product
does with a new user's names on that path (a vocabulary it infers after a schema change, say)
is what is measured; the bench binds nothing itself.

Reported side by side, from one run:

- the score under our names (the scenarios as written) and re-spelt, per seed and set;
- the **ratio**: alerts caught re-spelt over alerts caught under our names, per seed and their
  mean (target ``TARGET_RATIO``);
- **false critical on traps**: traps that raised a critical alert re-spelt (target 0), and false
  critical alerts in all scenarios;
- per scenario caught under our names and missed re-spelt, why, and which renamings lost the
  alert: each renaming alone (the scenario with that one name changed) is replayed, and those
  that miss the alert by themselves are named; when none does, it took several together.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from uac_kernel import __version__
from uac_kernel.bench.alerts import (
    SETS,
    AlertBenchResult,
    Fixture,
    ScenarioOutcome,
    load_fixtures,
    run_scenario,
    write_results,
)
from uac_kernel.bench.respell import Respelling, respell
from uac_kernel.core.outputs import output_dir

__all__ = ["SEEDS", "STEM", "TARGET_RATIO", "Lost", "VocabStress", "run"]

SEEDS = (0, 1, 2)
TARGET_RATIO = 0.90
STEM = "vocab_stress"  # the results files: vocab_stress.json and vocab_stress.txt
MODE = "fixtures, library alone"


@dataclass
class Lost:
    """A scenario caught under our names and missed re-spelt under one seed."""

    seed: int
    set: str
    scenario: str
    reason: str
    renamings: int  # how many the scenario had
    blamed: list[dict[str, Any]] = field(default_factory=list)  # each loses the alert alone
    blame_run: bool = False  # False: single renamings were not replayed (--no-blame)

    def text(self) -> str:
        if not self.blame_run:
            who = "renamings not replayed one by one"
        elif self.blamed:
            who = ", ".join(f"{r['original']} -> {r['new']} ({r['how']})" for r in self.blamed)
        else:
            who = f"no single renaming of the {self.renamings}: several together"
        return f"seed {self.seed}  {self.set}/{self.scenario} ({self.reason}): {who}"


@dataclass
class VocabStress:
    """Our names and every seed's re-spelling, per set: the report and results files."""

    seeds: tuple[int, ...]
    ours: dict[str, AlertBenchResult]
    respelt: dict[int, dict[str, AlertBenchResult]]
    lost: list[Lost]
    seconds: float = 0.0
    date: str = field(default_factory=lambda: date.today().isoformat())
    machine: str = field(default_factory=platform.platform)
    version: str = __version__

    @staticmethod
    def _caught(results: Iterable[AlertBenchResult]) -> tuple[int, int]:
        rs = list(results)
        return sum(r.caught for r in rs), sum(r.total for r in rs)

    def ratio(self, seed: int) -> float:
        """Alerts caught re-spelt under ``seed`` over alerts caught under our names."""
        ours, _ = self._caught(self.ours.values())
        got, _ = self._caught(self.respelt[seed].values())
        return got / ours if ours else 0.0

    @property
    def mean_ratio(self) -> float:
        return sum(self.ratio(s) for s in self.seeds) / len(self.seeds)

    def traps_sprung(self, seed: int) -> list[ScenarioOutcome]:
        """The traps that raised a critical alert re-spelt under ``seed``."""
        return [o for r in self.respelt[seed].values() for o in r.traps if not o.caught]

    @property
    def trap_false_critical(self) -> int:
        """Traps sprung, summed over the seeds (target 0)."""
        return sum(len(self.traps_sprung(s)) for s in self.seeds)

    def summary_line(self) -> str:
        seeds = ", ".join(map(str, self.seeds))
        return (
            f"vocab stress: re-spelt, the library keeps {self.mean_ratio:.2f} of its score under "
            f"our names (mean of seeds {seeds}; target {TARGET_RATIO:.2f}), "
            f"{self.trap_false_critical} false critical on traps (target 0)"
        )

    def table(self) -> list[str]:
        cols = ["our names", *(f"seed {s}" for s in self.seeds)]
        lines = [f"{'':<28}" + "".join(f"{c:>12}" for c in cols)]
        for name, ours in self.ours.items():
            cells = [f"{ours.caught}/{ours.total}"]
            cells += [
                f"{self.respelt[s][name].caught}/{self.respelt[s][name].total}" for s in self.seeds
            ]
            lines.append(f"{name + ' caught':<28}" + "".join(f"{c:>12}" for c in cells))
        cells = ["{}/{}".format(*self._caught(self.ours.values()))]
        cells += ["{}/{}".format(*self._caught(self.respelt[s].values())) for s in self.seeds]
        lines.append(f"{'all caught':<28}" + "".join(f"{c:>12}" for c in cells))
        cells = ["1.00", *(f"{self.ratio(s):.2f}" for s in self.seeds)]
        lines.append(
            f"{'ratio':<28}"
            + "".join(f"{c:>12}" for c in cells)
            + f"   mean {self.mean_ratio:.2f} (target >= {TARGET_RATIO:.2f})"
        )
        traps = sum(len(r.traps) for r in self.ours.values())
        cells = [str(sum(len(r.traps) - r.traps_held for r in self.ours.values()))]
        cells += [str(len(self.traps_sprung(s))) for s in self.seeds]
        lines.append(
            f"{f'false critical on {traps} traps':<28}"
            + "".join(f"{c:>12}" for c in cells)
            + "   (target 0)"
        )
        cells = [str(sum(r.false_critical for r in self.ours.values()))]
        cells += [str(sum(r.false_critical for r in self.respelt[s].values())) for s in self.seeds]
        lines.append(f"{'scenarios w/ false critical':<28}" + "".join(f"{c:>12}" for c in cells))
        return lines

    def report(self) -> str:
        lines = [
            f"uac bench vocab: {self.date}, {MODE}, seeds {', '.join(map(str, self.seeds))}, "
            f"uac {self.version}, {self.machine}, {self.seconds:.0f} s",
            "the alert scenarios re-spelt: every type and field renamed within a scenario "
            "(synonyms, abbreviations, prefixes, naming styles); values untouched",
            "",
            *self.table(),
            "",
            f"lost alerts: caught under our names, missed re-spelt ({len(self.lost)}); "
            "the renamings that lose the alert on their own",
        ]
        lines += [f"  {lost.text()}" for lost in self.lost] or ["  none"]
        sprung = [(s, o) for s in self.seeds for o in self.traps_sprung(s)]
        lines.append(f"traps sprung re-spelt ({len(sprung)})")
        lines += [f"  seed {s}  {o.id}: {o.reason}" for s, o in sprung] or ["  none"]
        lines.append(self.summary_line())
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        def score(r: AlertBenchResult) -> dict[str, Any]:
            return {
                "caught": r.caught,
                "total": r.total,
                "traps": len(r.traps),
                "traps_held": r.traps_held,
                "false_critical": r.false_critical,
            }

        return {
            "benchmark": "vocab_stress",
            "date": self.date,
            "machine": self.machine,
            "uac_version": self.version,
            "mode": MODE,
            "seconds": round(self.seconds, 1),
            "seeds": list(self.seeds),
            "target_ratio": TARGET_RATIO,
            "ours": {name: score(r) for name, r in self.ours.items()},
            "respelt": {
                str(s): {name: score(r) for name, r in self.respelt[s].items()} for s in self.seeds
            },
            "ratio": {str(s): round(self.ratio(s), 4) for s in self.seeds},
            "mean_ratio": round(self.mean_ratio, 4),
            "trap_false_critical": {str(s): len(self.traps_sprung(s)) for s in self.seeds},
            "scenarios": {
                name: [
                    {
                        "id": o.id,
                        "trap": o.trap,
                        "ours": o.caught,
                        "respelt": {
                            str(s): self.respelt[s][name].outcomes[i].caught for s in self.seeds
                        },
                    }
                    for i, o in enumerate(ours.outcomes)
                ]
                for name, ours in self.ours.items()
            },
            "lost": [
                {
                    "seed": lost.seed,
                    "set": lost.set,
                    "scenario": lost.scenario,
                    "reason": lost.reason,
                    "renamings": lost.renamings,
                    "blame_run": lost.blame_run,
                    "blamed": [
                        {k: r[k] for k in ("kind", "original", "new", "how")} for r in lost.blamed
                    ],
                }
                for lost in self.lost
            ],
            "summary": self.summary_line(),
        }

    def write(self, out_dir: str | Path) -> tuple[Path, Path]:
        """Write ``vocab_stress.json`` and ``vocab_stress.txt`` into ``out_dir``."""
        return write_results(out_dir, STEM, self.to_json(), self.report())


class _Blame:
    """Which single renamings lose a scenario's alert, each replayed once (cached by renaming:
    seeds that draw the same new name for the same original share the replay)."""

    def __init__(self, bar: tqdm[Any]) -> None:
        self.bar = bar
        self.seen: dict[tuple[str, str, str, str], bool] = {}

    def __call__(self, fx: Fixture, r: Respelling, set_name: str) -> list[dict[str, Any]]:
        rows = {(row["kind"], row["field"] or row["type"]): row for row in r.rows(set_name)}
        singles = r.singles()
        self.bar.total += len(singles)
        self.bar.refresh()
        blamed = []
        for kind, original in singles:
            new = r.types[original] if kind == "type" else r.fields[original]
            key = (fx.id, kind, original, new)
            if key not in self.seen:
                self.seen[key] = not run_scenario(r.only(kind, original).apply(fx)).caught
            self.bar.update()
            if self.seen[key]:
                blamed.append(rows[(kind, original)])
        return blamed


def run(
    seeds: Sequence[int] = SEEDS,
    sets: Iterable[str] | Mapping[str, Sequence[Fixture]] = ("public", "holdout"),
    *,
    blame: bool = True,
    progress: bool = True,
    out_dir: str | Path | None = None,
) -> VocabStress:
    """Replay ``sets`` (names of the bundled sets, or name → fixtures) under our names and
    re-spelt under each of ``seeds``, on the library line; with ``out_dir``, write the results.
    ``blame``: replay each renaming of a lost scenario alone, to name those that lose it."""
    if out_dir is not None:
        output_dir(out_dir, what="--out")  # refused before the replay, not after it
    if isinstance(sets, Mapping):
        items = {name: list(fxs) for name, fxs in sets.items()}
    else:
        items = {name: load_fixtures(SETS[name]) for name in sets}
    started = time.perf_counter()
    n = sum(len(v) for v in items.values())
    with tqdm(total=n * (1 + len(seeds)), unit="replay", disable=not progress) as bar:
        ours: dict[str, AlertBenchResult] = {}
        for name, fxs in items.items():
            bar.set_description(f"our names, {name}")
            ours[name] = AlertBenchResult(_replay(fxs, bar), mode=MODE, set=name)
        respelt: dict[int, dict[str, AlertBenchResult]] = {}
        lost: list[Lost] = []
        why = _Blame(bar)
        for seed in seeds:
            respelt[seed] = {}
            for name, fxs in items.items():
                bar.set_description(f"seed {seed}, {name}")
                pairs = [respell(fx, seed) for fx in fxs]
                outcomes = _replay([new for new, _ in pairs], bar)
                respelt[seed][name] = AlertBenchResult(outcomes, mode=MODE, set=name)
                for fx, (_, r), mine, got in zip(
                    fxs, pairs, ours[name].outcomes, outcomes, strict=True
                ):
                    if mine.trap or not mine.caught or got.caught:
                        continue
                    lost.append(
                        Lost(
                            seed,
                            name,
                            fx.id,
                            got.reason,
                            len(r.singles()),
                            why(fx, r, name) if blame else [],
                            blame_run=blame,
                        )
                    )
    result = VocabStress(tuple(seeds), ours, respelt, lost, time.perf_counter() - started)
    if out_dir is not None:
        result.write(out_dir)
    return result


def _replay(fixtures: Sequence[Fixture], bar: tqdm[Any]) -> list[ScenarioOutcome]:
    out = []
    for fx in fixtures:
        out.append(run_scenario(fx))
        bar.update()
    return out
