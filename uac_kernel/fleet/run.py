"""Batch work over the users of a fleet directory: one task per user, on a process pool or Ray.

A task checks the user's partition out into a private single-file store, runs the job there
with an ordinary ``Workbench``, commits what it appended to the partition as one commit, and
only then writes the user's result file. So a task that fails or is killed leaves the partition
as it was (its uncommitted part files are never read), and a user with an 'ok' result is done:
a rerun of the same run skips them (a failed user is tried again), and a run whose every user
succeeded does nothing.

The run's id is a hash of the job and the model, not of the engine or the worker counts, so
``--engine local`` and ``--engine ray`` write the same results; both write them in the same
form, and ``summary.parquet`` is built from them, ordered by user, byte for byte the same.
Only ``timings.parquet`` (seconds per step) depends on time.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import shutil
import tempfile
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uac_kernel.core.display import plural
from uac_kernel.core.errors import FleetError, UacError
from uac_kernel.core.settings import redacted
from uac_kernel.fleet import files as fleetfiles
from uac_kernel.fleet.partition import Fleet, bucket, encode

if TYPE_CHECKING:
    from uac_kernel.core.timing import Stopwatch
    from uac_kernel.model.client import Budget, ModelSettings
    from uac_kernel.workbench import Workbench

__all__ = ["JOBS", "Job", "RunProgress", "RunReport", "run", "run_id_of"]

# Each job and how many arguments it takes (least, most; None: any number).
JOBS: dict[str, tuple[int, int | None]] = {
    "ingest": (1, 1),  # SRC: a directory of <enc>.jsonl files, or one JSONL with a "user" field
    "extract": (0, 0),
    "checkpoint": (0, 0),
    "alerts": (0, 0),
    "eval": (1, 1),  # EXPR
    "ask": (1, 1),  # QUESTION
    "bench": (0, 1),  # [EXPR]: checkpoint, alerts and one query, each timed
    "call": (1, None),  # MODULE:FUNCTION [ARG ...]: FUNCTION(workbench, *ARGS), any JSON value
}
MODEL_JOBS = frozenset({"extract", "ask"})
# The one query of ``bench`` when none is given: it reads every record type's count.
BENCH_QUERY = "{t: user.count(t) for t in user.types()}"

SUMMARY_COLUMNS = (
    ("user_id", "VARCHAR"),
    ("status", "VARCHAR"),
    ("error", "VARCHAR"),
    ("events_before", "BIGINT"),
    ("events_appended", "BIGINT"),
    ("calls", "BIGINT"),
    ("tokens_in", "BIGINT"),
    ("tokens_out", "BIGINT"),
    ("alerts", "BIGINT"),
    ("alerts_by_rule", "VARCHAR"),
    ("checkpoint_version", "BIGINT"),
    ("value", "VARCHAR"),
)


@dataclass(frozen=True)
class Job:
    """What a run does for each user: ``Job("eval", ("len(user.all('Trip'))",))``."""

    name: str
    args: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.name not in JOBS:
            raise FleetError(
                f"unknown job {self.name!r}; the jobs are {', '.join(JOBS)} (uac fleet run --help)"
            )
        least, most = JOBS[self.name]
        if len(self.args) < least or (most is not None and len(self.args) > most):
            wanted = f"{least}" if least == most else f"{least} to {most if most else 'any'}"
            raise FleetError(
                f"job {self.name} takes {wanted} argument(s), not {len(self.args)}: "
                f"{' '.join(map(repr, self.args)) or 'none'}"
            )
        if not all(isinstance(a, str) for a in self.args):
            raise FleetError(f"job {self.name}: every argument must be a string")


@dataclass(frozen=True)
class RunProgress:
    """Where a run is, for a progress display: users with a result of this run (``done``, the
    ``failed`` among them and those ``skipped`` as done before it started) of ``total``."""

    total: int
    done: int
    failed: int
    skipped: int


@dataclass
class RunReport:
    """What ``run`` did; ``rows`` are the summary's rows (every user with a result of the run)."""

    run_id: str
    run_dir: Path
    total: int
    ran: int
    ok: int
    failed: int
    skipped: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    # one line per ingest source refused before the run (a file name that is no user id)
    refused: list[str] = field(default_factory=list)

    @property
    def summary_path(self) -> Path:
        return self.run_dir / "summary.parquet"

    @property
    def timings_path(self) -> Path:
        return self.run_dir / "timings.parquet"

    def summary(self) -> str:
        if not self.ran:
            return (
                f"run {self.run_id}: nothing to do, all {plural(self.total, 'user')} are done "
                f"({self.summary_path})"
            )
        skipped = f", {self.skipped} done before" if self.skipped else ""
        return (
            f"run {self.run_id}: {plural(self.total, 'user')}: {self.ok} ok, {self.failed} "
            f"failed{skipped}; summary in {self.summary_path}"
        )


def run_id_of(job: Job, model: ModelSettings | None) -> str:
    """The run's id: the job and the model it calls, not how or where it runs."""
    spec = [job.name, list(job.args), model.model if model else None]
    spec.append(model.base_url if model else None)
    return hashlib.sha256(json.dumps(spec, ensure_ascii=False).encode()).hexdigest()[:16]


def _user_file(run_dir: Path, kind: str, user: str, suffix: str) -> Path:
    return run_dir / kind / f"bucket={bucket(user)}" / f"{encode(user)}{suffix}"


def _head(fleet: Fleet, user: str) -> int:
    """The user's event head in the partition: what a file written from their data records."""
    return int(fleet.head(user).get("events", [0])[0])


def _json(value: Any) -> str:
    def default(v: Any) -> Any:
        if isinstance(v, (date, datetime)):
            return v.isoformat()
        if isinstance(v, timedelta):
            return v.total_seconds()
        if isinstance(v, (set, frozenset)):
            return sorted(v, key=repr)
        if isinstance(v, tuple):
            return list(v)
        return str(v)

    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=default)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # a lone surrogate (which `uac eval` answers fine) has no UTF-8: keep it as a JSON escape
        text = json.dumps(value, ensure_ascii=True, sort_keys=True, default=default)
    return text


# -- the task (runs in a worker) ------------------------------------------------------------


@dataclass(frozen=True)
class _Task:
    root: str
    run_dir: str
    run_id: str
    user: str
    job: Job
    model: ModelSettings | None
    source: str | None  # the user's Event JSONL (ingest)
    driver: int  # the driver's pid: names the task's temp dir, so a rerun finds a killed one's


def _task(task: _Task, budget: Budget) -> dict[str, Any]:
    """One user's task: checkout, the job, commit, then the result file. Returns the result.

    A ``UacError`` (bad data, a refused expression, a model that failed) is a 'failed' result and
    nothing is committed; any other exception propagates, so the engine retries the task.
    """
    from uac_kernel.fleet import snapshots
    from uac_kernel.fleet.checkout import checkout, commit

    fleet = Fleet(task.root)
    run_dir = Path(task.run_dir)
    from uac_kernel.core.timing import Stopwatch  # imported by a task: `uac fleet` starts light

    clock = Stopwatch()
    row: dict[str, Any] = {name: None for name, _ in SUMMARY_COLUMNS}
    row.update(user_id=task.user, status="ok", error="")
    tmp = Path(tempfile.mkdtemp(prefix=f"{_tmp_prefix(task.run_id)}{task.driver}-"))
    try:
        path = tmp / "user.duckdb"
        try:
            # checkout refuses a partition whose chains fail: nothing is committed on top of it
            long = _head(fleet, task.user) >= snapshots.KEEP_FROM
            verified = checkout(fleet, task.user, path, snapshot=True)
            clock.lap("checkout")
            _run_job(task, path, budget, row, clock, snapshots=long)
        except UacError as exc:
            row.update(status="failed", error=str(exc).splitlines()[0][:2000] if str(exc) else "")
        else:
            made = commit(fleet, task.user, path, by=f"run {task.run_id}")
            clock.lap("commit")
            if made is not None:
                files = fleet.commits(task.user)[made - 1]["files"].values()
                verified |= snapshots.digests(fleet, (fleet.root / rel for rel in files))
            if _keeps_store(row):
                snapshots.save(fleet, task.user, path, verified)
                clock.lap("snapshot")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    timings = {"user_id": task.user, "seconds": clock.laps}
    # written after the commit, from the partition at its head
    heads = {task.user: _head(fleet, task.user)}
    for kind, value in (("timings", timings), ("results", row)):
        fleetfiles.write(
            fleet.root, _user_file(run_dir, kind, task.user, ".json"), _json(value), heads
        )
    return row


def _tmp_prefix(run_id: str) -> str:
    return f"uac-fleet-{run_id}-"


def _clear_dead_tasks_tmp(run_id: str) -> None:
    """Remove the private store copies a killed run's tasks left in the temp dir: those of a
    driver no longer alive (a live one is another run of the same job, still at work)."""
    prefix = _tmp_prefix(run_id)
    for path in Path(tempfile.gettempdir()).glob(f"{prefix}*"):
        pid = path.name[len(prefix) :].partition("-")[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            pass  # alive, another user's


def _keeps_store(row: dict[str, Any]) -> bool:
    """Whether the task keeps the user's store beside the partition: their log is long
    enough for it to pay."""
    from uac_kernel.fleet.snapshots import KEEP_FROM

    return (row["events_before"] or 0) + (row["events_appended"] or 0) >= KEEP_FROM


def _run_job(
    task: _Task,
    path: Path,
    budget: Budget,
    row: dict[str, Any],
    clock: Stopwatch,
    *,
    snapshots: bool,
) -> None:
    from uac_kernel.workbench import Workbench

    user, job = task.user, task.job
    # a short log's store writes no snapshot (a checkpoint would): it is thrown away after
    # the commit; an ingest may make a log long
    wb = Workbench(
        path, user=user, create=True, model=task.model, snapshots=snapshots or job.name == "ingest"
    )
    try:
        if task.model is not None:
            wb.model.budget = budget
        with wb.store.hold():
            con = wb.store.con
            row["events_before"] = wb.store.user_counts().get(user, 0)
            last_call = con.execute("SELECT coalesce(max(call_id), 0) FROM model_calls").fetchone()
        clock.lap("open")
        row["value"] = _json(_job_value(wb, job, task.source, clock))
        alerts = wb.alerts()
        with wb.store.hold():
            con = wb.store.con
            row["events_appended"] = wb.store.user_counts().get(user, 0) - row["events_before"]
            calls = con.execute(
                "SELECT count(*), coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0) "
                "FROM model_calls WHERE call_id > ? AND outcome <> 'rejected'",
                [last_call[0] if last_call else 0],
            ).fetchone()
            latest = wb.checkpoints.latest()
        row["calls"], row["tokens_in"], row["tokens_out"] = (int(n) for n in calls or (0, 0, 0))
        row["alerts"] = len(alerts)
        row["alerts_by_rule"] = _json(dict(sorted(Counter(a.rule for a in alerts).items())))
        row["checkpoint_version"] = latest.version if latest is not None else None
    finally:
        wb.close(snapshot=_keeps_store(row))  # kept beside the partition for the next task
    clock.lap("close")


def _job_value(wb: Workbench, job: Job, source: str | None, clock: Stopwatch) -> Any:
    """Run the job on the user's workbench; its answer (any JSON value) or None."""
    name, args = job.name, job.args
    if name == "ingest":
        report = wb.ingest(str(source))
        clock.lap("ingest")
        return {"appended": report.appended, "skipped": report.skipped}
    if name == "extract":
        extracted = wb.extract(progress=False)
        clock.lap("extract")
        return {
            "batches": extracted.batches,
            "applied": extracted.applied,
            "pending": extracted.pending,
            "held": extracted.held,
        }
    if name == "checkpoint":
        wb.checkpoint()
        clock.lap("checkpoint")
        return None
    if name == "alerts":
        value = sorted(a.id for a in wb.alerts())
        clock.lap("alerts")
        return value
    if name == "eval":
        value = wb.eval(args[0])
        clock.lap("eval")
        return value
    if name == "ask":
        answer = wb.ask(args[0])
        clock.lap("ask")
        if not answer.ok:
            raise UacError(f"no answer after {plural(answer.attempts, 'attempt')}: {answer.error}")
        return answer.value
    if name == "bench":
        wb.checkpoint()
        clock.lap("checkpoint")
        wb.alerts()
        clock.lap("alerts")
        value = wb.eval(args[0] if args else BENCH_QUERY)
        clock.lap("query")
        return value
    module, _, function = args[0].partition(":")
    fn = getattr(importlib.import_module(module), function)
    value = fn(wb, *args[1:])
    clock.lap("call")
    return value


# -- the driver -----------------------------------------------------------------------------


def run(
    root: str | Path,
    job: Job,
    *,
    engine: str = "local",
    jobs: int = 2,
    concurrency: int = 8,
    rate: float | None = None,
    retries: int = 2,
    users: Iterable[str] | None = None,
    limit: int | None = None,
    model: ModelSettings | None = None,
    progress: Callable[[RunProgress], None] | None = None,
) -> RunReport:
    """Run ``job`` for each user of the fleet at ``root`` (of ``SRC`` for ``ingest``), or only
    ``users``, or the first ``limit`` of them, on ``engine`` with ``jobs`` workers.

    Model calls across all workers keep within ``concurrency`` in flight and ``rate`` per
    second. A task that raised or whose worker died is tried again up to ``retries`` times.
    ``progress`` is called as users finish (else a tqdm bar shows it in a terminal).
    """
    from uac_kernel.fleet import engines as _engines

    if engine not in _engines.ENGINES:
        raise FleetError(f"unknown engine {engine!r}; use one of {', '.join(_engines.ENGINES)}")
    for what, n, least in (("jobs", jobs, 1), ("concurrency", concurrency, 1)):
        if n < least:
            raise FleetError(f"{what} must be at least {least}, not {n}")
    if retries < 0:
        raise FleetError(f"retries must be 0 or more, not {retries}")
    if rate is not None and not 0 < rate < float("inf"):
        raise FleetError(f"rate must be a number of calls per second above 0, not {rate}")
    if job.name == "ingest":
        job = Job("ingest", (str(Path(job.args[0]).resolve()),))
    if model is None and job.name in MODEL_JOBS:
        from uac_kernel.model.client import ModelSettings

        model = ModelSettings.resolve()
    fleet = Fleet(root, create=job.name == "ingest")
    run_id = run_id_of(job, model)
    run_dir = fleet.root / "runs" / run_id
    spec = {
        "format": 1,
        "run_id": run_id,
        "job": job.name,
        "args": list(job.args),
        "model": model.model if model else None,
        "base_url": redacted(model.base_url) if model and model.base_url else None,
    }
    if not (run_dir / "run.json").exists():
        # the job's arguments as typed: no user's data (a forget names it as not reached)
        fleetfiles.write(fleet.root, run_dir / "run.json", _json(spec) + "\n", {})
    sources: dict[str, str] = {}
    refused: list[str] = []
    damaged: dict[str, str] = {}
    if job.name == "ingest":
        sources = _ingest_sources(Path(job.args[0]), fleet, run_dir, refused)
        known = sorted(sources)
    else:
        # a user whose last commit cannot be read fails alone; the others run
        readable, damaged = fleet.scan()
        known = sorted([*readable, *damaged])
    chosen = _choose(known, users, limit, fleet.root, job)
    todo = [u for u in chosen if not _finished(run_dir, u)]
    report = RunReport(run_id, run_dir, len(chosen), len(todo), 0, 0, len(chosen) - len(todo))
    report.refused = refused
    given_up: list[dict[str, Any]] = []
    for user in [u for u in todo if u in damaged]:
        unread: dict[str, Any] = {name: None for name, _ in SUMMARY_COLUMNS}
        unread.update(user_id=user, status="failed", error=damaged[user][:2000])
        given_up.append(unread)
        report.failed += 1
    todo = [u for u in todo if u not in damaged]
    _clear_dead_tasks_tmp(run_id)
    if todo:
        tasks = [
            _Task(str(fleet.root), str(run_dir), run_id, u, job, model, sources.get(u), os.getpid())
            for u in todo
        ]
        finished = (
            _engines.run_local(
                _task, tasks, jobs=jobs, retries=retries, concurrency=concurrency, rate=rate
            )
            if engine == "local"
            else _engines.run_ray(
                _task,
                tasks,
                jobs=jobs,
                retries=retries,
                concurrency=concurrency,
                rate=rate,
                name=f"uac-budget-{run_id}",
            )
        )
        show = _Progress(report, progress)
        try:
            for task, outcome in finished:
                row: dict[str, Any]
                if isinstance(outcome, BaseException):
                    row = {name: None for name, _ in SUMMARY_COLUMNS}
                    row.update(user_id=task.user, status="failed", error=_gave_up(outcome))
                    given_up.append(row)
                else:
                    row = outcome
                if row["status"] == "ok":
                    report.ok += 1
                else:
                    report.failed += 1
                show.update()
        finally:
            show.close()
    rows = None
    if not todo and not given_up and report.summary_path.exists():
        rows = _read_rows(run_dir)
    if rows is None or any(r["status"] != "ok" for r in rows):
        # a failed row with no result file behind it (a damaged user since removed) goes
        rows = _write_summary(fleet, run_dir, given_up)
    report.rows = rows
    return report


def _finished(run_dir: Path, user: str) -> bool:
    """Whether the user has an 'ok' result in the run: a failed one is tried again."""
    try:
        result = json.loads(_user_file(run_dir, "results", user, ".json").read_text("utf-8"))
    except FileNotFoundError:
        return False
    except ValueError:  # damaged (a torn or edited file): run the user again, which rewrites it
        return False
    return isinstance(result, dict) and result.get("status") == "ok"


def _gave_up(exc: BaseException) -> str:
    """One line for a task given up after its retries: what its last attempt raised."""
    from concurrent.futures.process import BrokenProcessPool

    cause = getattr(exc, "cause", None)  # a Ray task error carries the task's own exception
    if isinstance(cause, BaseException):
        exc = cause
    if isinstance(exc, BrokenProcessPool) or type(exc).__name__ in (
        "WorkerCrashedError",
        "NodeDiedError",
    ):
        text = "its worker died (killed, or out of memory) on every attempt"
    else:
        lines = str(exc).strip().splitlines()
        text = f"{type(exc).__name__}: {lines[0][:300] if lines else ''}"
    # its result file is written after its commit: a commit it made is whole and kept, and the
    # rerun runs the job again on it
    return f"{text}; its partition is whole, rerun to try it again"


class _Progress:
    """A tqdm bar in a terminal, or the caller's ``progress`` callable."""

    def __init__(self, report: RunReport, callback: Callable[[RunProgress], None] | None):
        self.report = report
        self.callback = callback
        self.bar: Any = None
        if callback is None:
            from tqdm.auto import tqdm

            self.bar = tqdm(
                total=report.total, initial=report.skipped, desc="users", unit="user", disable=None
            )
        self.update(advance=0)

    def update(self, advance: int = 1) -> None:
        r = self.report
        if self.callback is not None:
            self.callback(RunProgress(r.total, r.ok + r.failed, r.failed, r.skipped))
        elif self.bar is not None:
            self.bar.update(advance)
            self.bar.set_postfix(failed=r.failed, refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _choose(
    known: Sequence[str], users: Iterable[str] | None, limit: int | None, root: Path, job: Job
) -> list[str]:
    if users is not None:
        wanted = list(dict.fromkeys(users))
        missing = [u for u in wanted if u not in set(known)]
        if missing:
            where = f"source {job.args[0]}" if job.name == "ingest" else f"fleet {root}"
            raise FleetError(
                f"user {missing[0]!r} is not in the {where}"
                f"{f' (nor {len(missing) - 1} more)' if len(missing) > 1 else ''}; "
                "`uac fleet summary` lists the users"
            )
        chosen = sorted(wanted)
    else:
        chosen = list(known)
    if limit is not None:
        if limit < 1:
            raise FleetError(f"limit must be at least 1, not {limit}")
        chosen = chosen[:limit]
    return chosen


def _ingest_sources(src: Path, fleet: Fleet, run_dir: Path, refused: list[str]) -> dict[str, str]:
    """Each user's Event JSONL for ``ingest SRC``: a directory's ``<enc>.jsonl`` files (the
    user is the unquoted name), or one JSONL file split by its objects' ``"user"`` field into
    ``runs/<id>/input/<hash of its content>`` (kept, so a rerun of the same file splits nothing;
    a changed file is split again). A file whose name is no user id (not UTF-8, before or
    after unquoting) is left out with a line in ``refused``; two naming one user are an error."""
    if src.is_dir():
        files = sorted(p for p in src.iterdir() if p.suffix == ".jsonl" and p.is_file())
        if not files:
            raise FleetError(f"{src}: no .jsonl files; ingest SRC takes <user>.jsonl files")
        by_user: dict[str, Path] = {}
        for p in files:
            try:
                p.name.encode("utf-8")
                user = urllib.parse.unquote(p.stem, errors="strict")
            except UnicodeError:
                shown = ascii(os.fsencode(p.name))[2:-1]
                refused.append(
                    f"{src}/{shown}: the file name is not UTF-8 (nor %-escapes of it), so it "
                    "names no user; rename it to <user, percent-encoded>.jsonl"
                )
                continue
            if user in by_user:
                raise FleetError(
                    f"{by_user[user]} and {p.name} both name user {user!r}; merge them "
                    "into one <user>.jsonl"
                )
            by_user[user] = p
        return {u: str(p) for u, p in by_user.items()}
    if not src.is_file():
        raise FleetError(f"{src}: no such file or directory; ingest SRC is a directory or a JSONL")
    digest = hashlib.sha256()
    with src.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    done = run_dir / "input" / digest.hexdigest()[:16]
    if not done.is_dir():
        _split_jsonl(src, fleet, done)
    return {
        json.loads(p.with_suffix(".user").read_text(encoding="utf-8")): str(p)
        for p in sorted(done.glob("bucket=*/*.jsonl"))
    }


def _split_jsonl(src: Path, fleet: Fleet, done: Path) -> None:
    done.parent.mkdir(parents=True, exist_ok=True)
    fleetfiles.clear_split(done.parent)
    staging, lock = fleetfiles.staging_dir(done.parent, fleetfiles.SPLIT)
    try:
        lines: dict[str, list[str]] = {}
        with src.open(encoding="utf-8") as handle:
            for n, raw in enumerate(handle, 1):
                if not raw.strip():
                    continue
                try:
                    obj = json.loads(raw)
                except ValueError as exc:
                    raise FleetError(f"{src}:{n}: not JSON ({exc}); one event per line") from None
                user = obj.pop("user", None) if isinstance(obj, dict) else None
                if not isinstance(user, str) or not user:
                    raise FleetError(
                        f'{src}:{n}: no "user" string field; a single ingest file names each '
                        "event's user (or give a directory of <user>.jsonl files)"
                    )
                # ASCII: a lone surrogate stays an escape, for the event parser to refuse
                lines.setdefault(user, []).append(json.dumps(obj))
        for user, events in lines.items():
            rel = Path(f"bucket={bucket(user)}") / f"{encode(user)}.jsonl"
            heads = {user: _head(fleet, user)}
            for final in (done / rel, (done / rel).with_suffix(".user")):
                fleetfiles.note(fleet.root, final, heads)  # before the rename brings it in
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(events) + "\n", encoding="utf-8")
            # the user's id as given: a long one's file name is a hash of it
            path.with_suffix(".user").write_text(json.dumps(user), encoding="utf-8")
        os.rename(staging, done)
    except UnicodeDecodeError as exc:
        raise FleetError(
            f"{src}: byte {exc.start} of a line is not UTF-8; Event JSONL is UTF-8 text"
        ) from None
    except OSError as exc:
        if not done.is_dir():  # else another driver split it first: the same content
            raise FleetError(f"{src}: cannot split it into {done}: {exc}") from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        os.close(lock)


def _result_rows(results: list[Path]) -> list[dict[str, Any]]:
    rows = []
    for path in results:
        try:
            row = json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            row = None
        if not isinstance(row, dict) or not isinstance(row.get("user_id"), str):
            raise FleetError(
                f"{path}: a damaged result file; delete it and run the same command again "
                "to rerun its user"
            )
        rows.append(row)
    return rows


def _write_summary(
    fleet: Fleet, run_dir: Path, given_up: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``summary.parquet`` from every result (and the users given up this time), ordered by
    user; ``timings.parquet`` from every timing. Written by DuckDB, each temp then renamed."""
    import duckdb

    results = sorted((run_dir / "results").glob("bucket=*/*.json"))
    rows = sorted(_result_rows(results) + given_up, key=lambda r: r["user_id"])
    # both tables gather the results: they hold each user's data as of their result file
    heads = fleetfiles.recorded_heads(fleet.root, results)
    heads.update({r["user_id"]: 0 for r in given_up if r["user_id"] not in heads})
    names = [name for name, _ in SUMMARY_COLUMNS]
    con = duckdb.connect()
    try:
        con.execute("SET threads = 1")  # one writer thread: the same bytes every time
        con.execute(
            "CREATE TABLE summary (" + ", ".join(f'"{n}" {t}' for n, t in SUMMARY_COLUMNS) + ")"
        )
        if rows:
            con.executemany(
                f"INSERT INTO summary VALUES ({', '.join('?' * len(names))})",
                [[r.get(n) for n in names] for r in rows],
            )
        con.execute("CREATE TABLE timings (user_id VARCHAR, step VARCHAR, seconds DOUBLE)")
        timings = []
        for path in (run_dir / "timings").glob("bucket=*/*.json"):
            try:
                laps = json.loads(path.read_text(encoding="utf-8"))
                timings += [[laps["user_id"], k, float(v)] for k, v in laps["seconds"].items()]
            except (ValueError, TypeError, KeyError, AttributeError):
                continue  # a damaged timing: only the time it took is lost
        if timings:  # none when every task was given up
            con.executemany("INSERT INTO timings VALUES (?, ?, ?)", timings)
        for table, order in (("summary", "user_id"), ("timings", "user_id, step")):
            target = run_dir / f"{table}.parquet"
            with fleetfiles.noted(fleet.root, target, heads, keyed_rows=True) as tmp:
                quoted = str(tmp).replace("'", "''")
                con.execute(
                    f"COPY (SELECT * FROM {table} ORDER BY {order}) TO '{quoted}' (FORMAT parquet)"
                )
    finally:
        con.close()
    return [{n: r.get(n) for n in names} for r in rows]


def _read_rows(run_dir: Path) -> list[dict[str, Any]]:
    import duckdb

    con = duckdb.connect()
    try:
        cur = con.execute(
            "SELECT * FROM read_parquet(?) ORDER BY user_id", [str(run_dir / "summary.parquet")]
        )
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]
    finally:
        con.close()
