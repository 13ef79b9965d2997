"""``uac bench locomo PATH``: LoCoMo question answering over uac, scored as its papers score it.

Each conversation (``sample_id``) of the file becomes a user of one store: its turns are ingested,
extracted into typed facts by the model, and every question is answered by ``Workbench.ask`` —
code the model writes, run in the sandbox. The answer's value, rendered as text, is the
prediction. Scores:

- **Token F1** as in the LoCoMo evaluation code (``task_eval/evaluation.py``): lowercase, drop
  ASCII punctuation, drop the words ``a an the and``, split on whitespace, F1 of the token
  multisets. Category 1 (multi-hop) splits gold and prediction on commas and averages, over the
  gold parts, the best F1 any prediction part reaches; category 3 scores against the gold text
  before its first ``;``; categories 2 and 4 compare whole strings. Unlike the original, tokens
  are not Porter-stemmed (no NLTK here), so inflected forms ("classes"/"class") do not match.
- **LLM judge** over categories 1–4: a second call (purpose ``judge``) sees question, gold answer
  and prediction and answers ``{"reason", "correct"}`` — generous about wording, strict about
  facts, a date counts when it names the same day or period. Judge accuracy over categories 1–4
  is the paper's headline figure (78.8%).
- **Refusal** on category 5 (adversarial: the conversation does not say): correct when the
  answer came back and is a refusal — empty, ``None``, "no information", "not mentioned",
  "unknown", ... (:func:`is_refusal`).

Every result is appended to a JSONL progress file as soon as it exists, so an interrupted run
resumes where it stopped: answered questions and extracted conversations are skipped, and every
model call already made is served from the store's call record.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import string
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
from pydantic import BaseModel, Field
from tqdm.auto import tqdm

from uac_kernel.core.errors import ModelError, ModelOutputInvalid, UacError
from uac_kernel.core.outputs import JSON, JSONL, Output, output_dir
from uac_kernel.ingest.adapters import locomo_questions, locomo_samples
from uac_kernel.log.store import Store
from uac_kernel.model.client import ModelClient, ModelSettings, call_totals
from uac_kernel.workbench import Workbench

__all__ = [
    "CATEGORIES",
    "Judgement",
    "LocomoResult",
    "f1_score",
    "is_refusal",
    "judge_messages",
    "locomo_f1",
    "multi_hop_f1",
    "normalize_answer",
    "render_value",
    "resolve_settings",
    "run",
    "summarise",
]

# The numbering of the released locomo10.json.
CATEGORIES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
JUDGED = (1, 2, 3, 4)
ADVERSARIAL = 5

NO_INFORMATION = "no information"
JUDGE_PREDICTION_CHARS = 4000

NO_ENDPOINT = (
    "uac bench locomo needs a model endpoint: set UAC_MODEL to the model's name, "
    "OPENAI_BASE_URL for a local or other OpenAI-compatible server "
    "(e.g. http://localhost:8000/v1), and OPENAI_API_KEY for a hosted API "
    "(or pass --model / --base-url)"
)

LICENSE_NOTE = (
    "holds LoCoMo questions, gold answers and quoted turns (CC BY-NC 4.0): keep it out of the "
    "repository and do not use it commercially"
)


# -- scoring --------------------------------------------------------------------------------

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """LoCoMo's normalisation: lowercase, no ASCII punctuation, no ``a an the and``, one space."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def f1_score(prediction: str, gold: str) -> float:
    """Token F1 of two strings after :func:`normalize_answer` (0.0 when nothing is shared)."""
    pred, truth = normalize_answer(prediction).split(), normalize_answer(gold).split()
    same = sum((Counter(pred) & Counter(truth)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(truth)
    return 2 * precision * recall / (precision + recall)


def multi_hop_f1(prediction: str, gold: str) -> float:
    """Category 1: the mean over comma-separated gold parts of the best F1 of a prediction part."""
    preds = [p.strip() for p in prediction.split(",")]
    parts = [g.strip() for g in gold.split(",")]
    return sum(max(f1_score(p, g) for p in preds) for g in parts) / len(parts)


def locomo_f1(category: int, prediction: str, gold: str) -> float:
    """The F1 LoCoMo's evaluation gives a prediction of a question of ``category`` (1–4)."""
    if category == 1:
        return multi_hop_f1(prediction, gold)
    if category == 3:
        gold = gold.split(";")[0].strip()
    return f1_score(prediction, gold)


_REFUSAL_WORDS = frozenset(
    ["", "none", "null", "nan", "na", "unknown", "nothing", "no answer", "not applicable"]
)
_REFUSAL_PHRASES = (
    "no information",
    "not mentioned",
    "never mentioned",
    "no mention",
    "not stated",
    "not specified",
    "not known",
    "not available",
    "no record",
    "no data",
    "does not say",
    "doesnt say",
    "does not mention",
    "doesnt mention",
    "cannot be determined",
    "cant be determined",
    "cannot tell",
    "cant tell",
    "cannot be found",
    "not found",
    "unknown",
)


def is_refusal(prediction: str | None) -> bool:
    """Whether a prediction says the conversation does not tell (category 5's right answer).

    Empty or ``None``; a whole answer such as "unknown", "none", "N/A"; or one containing a
    phrase such as "no information" or "not mentioned" (LoCoMo's own two) as whole words.
    """
    if prediction is None:
        return True
    text = " ".join(prediction.lower().translate(_PUNCTUATION).split())
    if text in _REFUSAL_WORDS:
        return True
    padded = f" {text} "
    return any(f" {phrase} " in padded for phrase in _REFUSAL_PHRASES)


_BOOKKEEPING = frozenset(["_type", "key", "valid_from", "valid_to", "sources", "retracted"])


def render_value(value: Any) -> str:
    """An answer's value as the text that is scored.

    Lists (and sets, tuples) are joined with ", " — LoCoMo's multi-hop answers are comma-separated
    — leaving out empty items; numbers are written plainly (``3``, ``2.5``), booleans as yes/no,
    dates as "7 May 2023" (LoCoMo's style), a date-time as its date plus a time that is not
    midnight; a search hit is its text; a record its own fields; ``None``, an empty string or an
    empty list is "no information".
    """
    text = _render(value)
    return text if text else NO_INFORMATION


def _render(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, datetime):
        day = _render(value.date())
        return day if value.time() == datetime.min.time() else f"{day} {value:%H:%M}"
    if isinstance(value, date):
        return f"{value.day} {value:%B} {value.year}"
    if isinstance(value, timedelta):
        if value.seconds == 0 and value.microseconds == 0:
            return f"{value.days} day" + ("" if value.days == 1 else "s")
        return str(value)
    if isinstance(value, dict):
        if "text" in value and "seq" in value:  # a search() hit
            return _render(value["text"])
        is_record = "_type" in value and "key" in value
        parts = []
        for k, v in value.items():
            if is_record and k in _BOOKKEEPING:
                continue
            shown = _render(v)
            if shown:
                parts.append(f"{_render(k)}: {shown}")
        return ", ".join(parts)
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [_render(v) for v in value]
        if isinstance(value, (set, frozenset)):
            items.sort()
        return ", ".join(i for i in items if i)
    return str(value)


# -- the judge ------------------------------------------------------------------------------


class Judgement(BaseModel):
    """The judge's verdict on one prediction (the reason comes first: it is written first)."""

    reason: str = Field(description="one sentence: which fact the answer gets right or wrong")
    correct: bool = Field(description="true when the answer states the gold answer's fact")


JUDGE_SYSTEM = """You grade answers to questions about a long conversation between two people.
You are given the question, the gold answer, and a generated answer; decide whether the
generated answer is correct.

- Be generous about wording. The generated answer may be longer, phrased differently, list more
  details or quote the conversation; it is correct when it states the fact the gold answer
  states.
- Be strict about facts. A different person, place, object, number or event is wrong. So is an
  answer that says the information is unavailable, and one that offers several candidates when
  only one of them matches the gold answer.
- Dates and times: correct when the generated answer names the same day, month, year or period
  as the gold answer, in any format ("7 May 2023", "May 7th, 2023", "2023-05-07"), or as a
  reference to the same point ("the Sunday before 25 May 2023" when the gold answer names that
  Sunday).

Return JSON with "reason" (one sentence) and "correct" (true or false)."""


def judge_messages(question: str, gold: str, prediction: str) -> list[dict[str, Any]]:
    if len(prediction) > JUDGE_PREDICTION_CHARS:
        prediction = prediction[: JUDGE_PREDICTION_CHARS - 3] + "..."
    prompt = f"Question: {question}\nGold answer: {gold}\nGenerated answer: {prediction}"
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": prompt}]


# -- settings -------------------------------------------------------------------------------


def resolve_settings(
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    *,
    offline: bool | None = None,
) -> ModelSettings:
    """Model settings for a benchmark run: arguments, then ``UAC_MODEL`` / ``OPENAI_BASE_URL`` /
    ``OPENAI_API_KEY``; a ``ModelError`` saying how to configure one when there is none."""
    try:
        settings = ModelSettings.resolve(model, base_url, api_key, offline=offline)
    except ModelError as exc:
        raise ModelError(NO_ENDPOINT) from exc
    return _require_endpoint(settings)


def _require_endpoint(settings: ModelSettings | None) -> ModelSettings:
    # Offline is allowed with a model name: then the run is a replay of a recorded one.
    if settings is None or not settings.model:
        raise ModelError(NO_ENDPOINT)
    return settings


def _host(settings: ModelSettings) -> str:
    return urlsplit(settings.base_url).netloc if settings.base_url else "api.openai.com"


# -- the progress file ----------------------------------------------------------------------


class _Progress:
    """The JSONL progress file: a ``run`` header, then ``sample`` and ``question`` lines."""

    def __init__(self, path: Path, header: dict[str, Any]):
        self.path = path
        self.samples: dict[str, dict[str, Any]] = {}
        self.answered: dict[tuple[str, int], dict[str, Any]] = {}
        # through outputs, checked before it is read: never appended to a store, whatever
        # the name links to
        self._file = Output(path, JSONL).appending()
        lines = self._read()
        if lines:
            try:
                self._check(lines[0], header)
            except UacError:
                self._file.close()
                raise
        for obj in lines[1:]:
            if obj.get("kind") == "sample":
                self.samples[obj["sample_id"]] = obj
            elif obj.get("kind") == "question":
                self.answered[(obj["sample_id"], obj["index"])] = obj
        data = path.read_bytes()
        cut = bool(data) and not data.endswith(b"\n")
        if cut:  # end the line an interruption cut off, so the next record starts afresh
            self._file.write(b"\n")
        if not lines:
            self.write(header)

    def _read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        out = []
        for raw in self.path.read_bytes().splitlines():
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue  # a line cut off by an interruption: that question is asked again
            if isinstance(obj, dict):
                out.append(obj)
        return out

    def _check(self, first: dict[str, Any], header: dict[str, Any]) -> None:
        for name in ("dataset_sha256", "model", "judge_model"):
            if first.get(name) != header[name]:
                raise UacError(
                    f"{self.path} belongs to another run ({name} {first.get(name)!r}, this run "
                    f"{header[name]!r}); pass another output directory, or remove the file to "
                    "start over"
                )

    def write(self, obj: dict[str, Any]) -> None:
        self._file.write(orjson.dumps(obj, default=_jsonable) + b"\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


def _jsonable(value: Any) -> Any:
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def _as_json(value: Any) -> Any:
    """A sandbox value as JSON data (dates as ISO text, durations in seconds, keys as text), so a
    record reads the same whether it was just made or read back from the progress file."""
    return orjson.loads(orjson.dumps(_string_keys(value), default=_jsonable))


def _string_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k if isinstance(k, str) else _render(k): _string_keys(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_string_keys(v) for v in value]
    return value


# -- results --------------------------------------------------------------------------------


@dataclass
class LocomoResult:
    """Scores per category and overall, per-question records, and what the run cost."""

    dataset: str
    model: str
    base_url_host: str
    judge_model: str
    records: list[dict[str, Any]]
    samples: list[dict[str, Any]]
    calls: dict[str, dict[str, int]]
    meta: dict[str, Any] = field(default_factory=dict)
    progress_path: Path | None = None
    json_path: Path | None = None

    @property
    def scores(self) -> dict[str, dict[str, Any]]:
        """Per category ("1".."5"), "overall" (categories 1–4) and "all" (LoCoMo's own mean)."""
        return summarise(self.records)

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmark": "locomo",
            **self.meta,
            "dataset": self.dataset,
            "model": self.model,
            "base_url_host": self.base_url_host,
            "judge_model": self.judge_model,
            "scores": self.scores,
            "calls": self.calls,
            "samples": self.samples,
            "questions": self.records,
        }

    def table(self) -> str:
        """The scores as a text table: n, F1 and judge accuracy per category, refusal on 5."""
        s = self.scores
        head = (
            f"LoCoMo  {self.dataset}  model {self.model} @ {self.base_url_host}"
            + (f", judge {self.judge_model}" if self.judge_model != self.model else "")
            + f"  ({len(self.samples)} conversations, {len(self.records)} questions)"
        )
        rows = [
            f"{'category':<16}{'n':>6}{'F1':>8}{'judge':>8}{'refusal':>9}{'failed':>8}{'s/q':>7}"
        ]
        for key, label in [
            *((str(c), f"{c} {n}") for c, n in CATEGORIES.items()),
            ("overall", "overall 1-4"),
        ]:
            row = s.get(key)
            if row is None:
                continue
            rows.append(
                f"{label:<16}{row['n']:>6}{_pct(row.get('f1')):>8}{_pct(row.get('judge')):>8}"
                f"{_pct(row.get('refusal')):>9}{row['failed']:>8}{row['seconds_mean']:>7.1f}"
            )
        if "all" in s:
            rows.append(
                f"LoCoMo score over all {s['all']['n']} questions: {_pct(s['all']['score'])}"
            )
        for purpose, c in self.calls.items():
            rows.append(
                f"{purpose}: {c['calls']} calls ({c['failed']} failed), "
                f"{c['tokens_in']:,} tokens in, {c['tokens_out']:,} out"
            )
        return "\n".join([head, *rows])


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def summarise(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Scores of per-question records: per category, categories 1–4 together, and LoCoMo's mean
    over every question (F1 for 1–4, refusal as 1/0 for 5)."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        groups[str(r["category"])].append(r)
        if r["category"] in JUDGED:
            groups["overall"].append(r)
    out: dict[str, dict[str, Any]] = {}
    keys = [str(c) for c in sorted(int(k) for k in groups if k.isdigit())]
    for key in [*keys, "overall"] if "overall" in groups else keys:
        rs = groups[key]
        judged = [r for r in rs if r["judge"] is not None]
        refusals = [r for r in rs if r["refused"] is not None]
        out[key] = {
            "name": CATEGORIES.get(int(key), "other") if key.isdigit() else "categories 1-4",
            "n": len(rs),
            "f1": _mean([r["f1"] for r in rs if r["f1"] is not None]),
            "judge": _mean([1.0 if r["judge"]["correct"] is True else 0.0 for r in judged]),
            "judge_failures": sum(1 for r in judged if r["judge"]["correct"] is None),
            "refusal": _mean([1.0 if r["refused"] else 0.0 for r in refusals]),
            "failed": sum(1 for r in rs if not r["ok"]),
            "seconds_mean": _mean([r["latency_s"]["ask"] + r["latency_s"]["judge"] for r in rs])
            or 0.0,
            "tokens_in": sum(t["in"] for r in rs for t in r["tokens"].values()),
            "tokens_out": sum(t["out"] for r in rs for t in r["tokens"].values()),
        }
    scored = [
        r["f1"] if r["f1"] is not None else (1.0 if r["refused"] else 0.0)
        for key in keys
        for r in groups[key]
    ]
    if scored:
        out["all"] = {"n": len(scored), "score": sum(scored) / len(scored)}
    return out


# -- the run --------------------------------------------------------------------------------


def run(
    path: str | Path,
    *,
    model: ModelSettings | None,
    db: str | Path,
    samples: Sequence[str] | None = None,
    limit: int | None = None,
    progress: bool = True,
    out: str | Path | None = None,
    judge: ModelSettings | None = None,
) -> LocomoResult:
    """Run LoCoMo at ``path`` through uac with ``model``; score; write the results.

    Every conversation is a user (its ``sample_id``) of the one store ``db``. ``samples`` picks
    conversations, ``limit`` the first N of their questions (in file order). ``judge`` is the
    judge's model (default: ``model``). The progress file ``<db stem>.locomo-progress.jsonl`` and
    the results ``<db stem>.locomo-results.json`` go in ``out`` (default: beside ``db``); running
    again resumes from the progress file. Raises ``ModelError`` without a model.
    """
    settings = _require_endpoint(model)
    judge_settings = judge or settings
    path, db = Path(path), Path(db)
    wanted = _select_samples(path, samples)
    selected = [q for q in locomo_questions(path) if q["sample_id"] in wanted]
    if limit is not None:
        selected = selected[: max(0, limit)]
    out_dir = output_dir(out if out is not None else db.parent, what="--out")
    json_path = out_dir / f"{db.stem}.locomo-results.json"
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    header = {
        "kind": "run",
        "benchmark": "locomo",
        "dataset": str(path),
        "dataset_sha256": digest,
        "model": settings.model,
        "base_url_host": _host(settings),
        "judge_model": judge_settings.model,
        "started": _now(),
    }
    log = _Progress(out_dir / f"{db.stem}.locomo-progress.jsonl", header)
    by_sample: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for q in selected:
        by_sample[q["sample_id"]].append(q)
    try:
        for sid, questions in by_sample.items():
            todo = [q for q in questions if (sid, q["index"]) not in log.answered]
            if todo:
                _run_sample(path, db, sid, todo, settings, judge_settings, log, progress)
    finally:
        log.close()
    records = [log.answered[(q["sample_id"], q["index"])] for q in selected]
    result = LocomoResult(
        dataset=str(path),
        model=settings.model,
        base_url_host=_host(settings),
        judge_model=judge_settings.model,
        records=records,
        samples=[log.samples[s] for s in by_sample if s in log.samples],
        calls=_totals(db, list(by_sample)),
        meta={
            "date": _now(),
            "machine": {
                "host": platform.node(),
                "system": platform.platform(),
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
            },
            "uac_version": _version(),
            "dataset_sha256": digest,
            "judge_base_url_host": _host(judge_settings),
            "license_note": LICENSE_NOTE,
        },
        progress_path=log.path,
        json_path=json_path,
    )
    Output(json_path, JSON).write_bytes(
        orjson.dumps(result.to_dict(), default=_jsonable, option=orjson.OPT_INDENT_2)
    )
    return result


def _select_samples(path: Path, samples: Sequence[str] | None) -> set[str]:
    ids = locomo_samples(path)
    if samples is None:
        return set(ids)
    unknown = [s for s in samples if s not in ids]
    if unknown:
        raise UacError(
            f"{path}: no sample_id {', '.join(map(repr, unknown))} in this file; "
            f"it holds {', '.join(ids)}"
        )
    return set(samples)


def _run_sample(
    path: Path,
    db: Path,
    sid: str,
    todo: list[dict[str, Any]],
    settings: ModelSettings,
    judge_settings: ModelSettings,
    log: _Progress,
    progress: bool,
) -> None:
    with Workbench(db, user=sid, model=settings) as wb:
        if sid not in log.samples:
            started = time.perf_counter()
            ingest = wb.ingest(path, format="locomo", history=sid)
            extraction = wb.extract(progress=progress)
            sample = {
                "kind": "sample",
                "sample_id": sid,
                "utterances_appended": ingest.appended,
                "utterances_already_logged": ingest.skipped,
                "extraction": {
                    "utterances": extraction.utterances,
                    "batches": extraction.batches,
                    "applied": extraction.applied,
                    "pending": extraction.pending,
                    "operations": extraction.operations,
                    "errors": extraction.errors[:5],
                },
                "records": sum(len(ts.current) for ts in wb.state.types.values()),
                "seconds": round(time.perf_counter() - started, 3),
            }
            log.write(sample)
            log.samples[sid] = sample
            if progress:
                tqdm.write(f"{sid}: {ingest.summary()}; {extraction.summary()}", file=sys.stderr)
        judge_client = ModelClient(wb.store, judge_settings)
        for q in tqdm(todo, desc=f"{sid} questions", unit="q", disable=not progress):
            record = _answer(wb, judge_client, q)
            log.write(record)
            log.answered[(sid, q["index"])] = record


def _answer(wb: Workbench, judge_client: ModelClient, q: dict[str, Any]) -> dict[str, Any]:
    category = q["category"]
    before = _last_call_id(wb.store)
    started = time.perf_counter()
    try:
        answer = wb.ask(q["question"])
        ok, value, error = answer.ok, answer.value, answer.error
        expression, attempts, call_ids = answer.expression, answer.attempts, answer.call_ids
    except ModelOutputInvalid as exc:  # an answer that does not fit the schema is a failed one
        ok, value, error, expression, attempts, call_ids = False, None, str(exc), "", 1, []
    ask_s = time.perf_counter() - started
    prediction = render_value(value) if ok else ""
    gold = q["answer"] or ""
    record: dict[str, Any] = {
        "kind": "question",
        "sample_id": q["sample_id"],
        "index": q["index"],
        "category": category,
        "question": q["question"],
        "answer": q["answer"],
        "adversarial_answer": q["adversarial_answer"],
        "prediction": prediction,
        "value": _as_json(value),
        "expression": expression,
        "ok": ok,
        "error": error,
        "attempts": attempts,
        "f1": None,
        "judge": None,
        "refused": None,
        "tokens": {"questions": _usage(wb.store, call_ids, before)},
        "latency_s": {"ask": round(ask_s, 3), "judge": 0.0},
    }
    if category == ADVERSARIAL:
        record["refused"] = ok and is_refusal(prediction)
        return record
    record["f1"] = locomo_f1(category, prediction, gold)
    if not ok:
        record["judge"] = {"correct": False, "reason": f"no answer: {error}", "called": False}
        return record
    started = time.perf_counter()
    try:
        reply = judge_client.structured(
            "judge", judge_messages(q["question"], gold, prediction), Judgement, user=wb.user
        )
        verdict: dict[str, Any] = {
            "correct": reply.value.correct,
            "reason": reply.value.reason,
            "called": True,
        }
        record["tokens"]["judge"] = {
            "in": reply.tokens_in,
            "out": reply.tokens_out,
            "replayed": reply.cached,
        }
    except ModelOutputInvalid as exc:  # counted as not correct, and reported as a failure
        verdict = {"correct": None, "reason": str(exc), "called": True}
    record["judge"] = verdict
    record["latency_s"]["judge"] = round(time.perf_counter() - started, 3)
    return record


def _last_call_id(store: Store) -> int:
    row = store.con.execute("SELECT coalesce(max(call_id), 0) FROM model_calls").fetchone()
    return int(row[0]) if row else 0


def _usage(store: Store, call_ids: Sequence[int], before: int) -> dict[str, Any]:
    """Tokens of the recorded calls an answer rests on; ``replayed`` when none of them was made
    now (all were served from the call record)."""
    if not call_ids:
        return {"in": 0, "out": 0, "replayed": False}
    row = store.con.execute(
        "SELECT coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0) FROM model_calls "
        "WHERE call_id IN (SELECT unnest(?))",
        [list(call_ids)],
    ).fetchone()
    tokens_in, tokens_out = (int(row[0]), int(row[1])) if row else (0, 0)
    return {"in": tokens_in, "out": tokens_out, "replayed": max(call_ids) <= before}


def _totals(db: Path, users: list[str]) -> dict[str, dict[str, int]]:
    """Calls and tokens per purpose over the run's conversations, from the call record."""
    totals: dict[str, dict[str, int]] = {}
    if not db.exists() or not users:
        return totals
    store = Store(db, read_only=True)
    try:
        for user in users:
            for purpose, n, failed, tin, tout in call_totals(store, user):
                t = totals.setdefault(
                    purpose, {"calls": 0, "failed": 0, "tokens_in": 0, "tokens_out": 0}
                )
                t["calls"] += n
                t["failed"] += failed
                t["tokens_in"] += tin
                t["tokens_out"] += tout
    finally:
        store.close()
    return dict(sorted(totals.items()))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _version() -> str:
    from uac_kernel import __version__

    return __version__
