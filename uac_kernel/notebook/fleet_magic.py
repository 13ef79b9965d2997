"""The lines of `%uac fleet ...` parsed, and `%uac fleet run [OPTIONS] DIR JOB [ARG ...]`:
``fleet.run`` with a progress widget."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from uac_kernel.core.display import plural
from uac_kernel.core.errors import FleetError

if TYPE_CHECKING:
    from uac_kernel.fleet.run import RunProgress, RunReport
    from uac_kernel.model.client import ModelSettings

__all__ = ["USAGE", "first_word", "parse_run", "run_with_progress"]

USAGE = (
    "%uac fleet run [--engine local|ray] [--jobs N] [--concurrency C] [--rate R] "
    "[--retries K] [--users A,B | --limit N] DIR JOB [ARG ...]"
)
# Jobs whose one argument is the rest of the line, as written (a Python expression, a question).
_VERBATIM = ("eval", "ask", "bench")
_OPTIONS: dict[str, Callable[[str], Any]] = {
    "engine": str,
    "jobs": int,
    "concurrency": int,
    "rate": float,
    "retries": int,
    "users": lambda text: [u for u in text.split(",") if u],
    "limit": int,
}


def first_word(text: str) -> tuple[str, str]:
    """The first word of ``text`` (in quotes when it holds spaces) and the rest, as written."""
    text = text.lstrip()
    if text[:1] in ("'", '"'):
        end = text.find(text[0], 1)
        if end < 0:
            raise FleetError(f"unclosed quote in {text[:60]!r}; close it")
        return text[1:end], text[end + 1 :].lstrip()
    parts = text.split(None, 1)
    return (parts[0], parts[1] if len(parts) > 1 else "") if parts else ("", "")


def parse_run(line: str) -> tuple[str, str, tuple[str, ...], dict[str, Any]]:
    """(DIR, JOB, its arguments, the run's options) of a ``%uac fleet run`` line; options go
    before DIR or between DIR and JOB, as on the command line."""
    options: dict[str, Any] = {}
    rest = _options(line, options)
    root, rest = first_word(rest)
    rest = _options(rest, options)
    job, rest = first_word(rest)
    if not root or not job:
        raise FleetError(f"usage: {USAGE}")
    if job in _VERBATIM:
        args: tuple[str, ...] = (rest.strip(),) if rest.strip() else ()
    else:
        try:
            args = tuple(shlex.split(rest))
        except ValueError as exc:
            raise FleetError(f"the arguments of {job}: {exc}") from None
    return root, job, args, options


def _options(rest: str, options: dict[str, Any]) -> str:
    """Read the ``--name value`` options at the start of ``rest`` into ``options``; the rest."""
    while rest.lstrip().startswith("--"):
        word, rest = first_word(rest)
        name, eq, value = word[2:].partition("=")
        if name not in _OPTIONS:
            raise FleetError(f"unknown option --{name}; usage: {USAGE}")
        if not eq:
            value, rest = first_word(rest)
        try:
            options[name] = _OPTIONS[name](value)
        except ValueError:
            raise FleetError(f"--{name} {value!r} is not a number; usage: {USAGE}") from None
    return rest


def run_with_progress(line: str, model: ModelSettings | None) -> RunReport:
    """Run the line's job over the fleet, a progress widget showing users done and failed (a
    tqdm bar where widgets cannot be made)."""
    from uac_kernel.fleet.run import Job, run

    root, job, args, options = parse_run(line)
    try:
        from uac_kernel.notebook.widget_base import Progress
    except ImportError:  # anywidget missing: fleet.run's own tqdm bar
        return run(root, Job(job, args), model=model, **options)
    bar: Progress | None = None

    def progress(p: RunProgress) -> None:
        nonlocal bar
        if bar is None:
            bar = Progress(p.total, f"fleet run {job}")
            bar.show()
            bar.update(p.skipped)
        bar.description = f"fleet run {job}: {plural(p.failed, 'user')} failed"
        bar.update(p.skipped + p.done - bar.n)

    try:
        report = run(root, Job(job, args), model=model, progress=progress, **options)
    except BaseException:
        if bar is not None:
            bar.finish("failed")
        raise
    if bar is not None:
        bar.finish("failed" if report.failed else "done")
    return report
