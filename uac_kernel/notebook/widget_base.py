"""What every uac widget shares: its front-end asset, the shape of a log row and an event's
provenance, and the base class that answers a front-end request with an error line instead of a
traceback and says why its controls are off where nothing answers them (``readonly``)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, date, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

import anywidget
import duckdb
import orjson
import traitlets

from uac_kernel.core.display import shorten, show
from uac_kernel.core.errors import UacError
from uac_kernel.core.records import Record, field_values
from uac_kernel.log.store import LoggedEvent
from uac_kernel.notebook.paging import events_by_seq, utterances_by_source
from uac_kernel.render.summary import summary

if TYPE_CHECKING:
    from uac_kernel.workbench import Workbench

__all__ = [
    "PAYLOAD_CHARS",
    "SUMMARY_WIDTH",
    "EventInfo",
    "LogRow",
    "Progress",
    "T",
    "Utterance",
    "asset",
    "in_notebook",
    "progress",
    "provenance",
    "summarize",
]


T = TypeVar("T")


SUMMARY_WIDTH = 160


PAYLOAD_CHARS = 4000


# What a widget shows instead of a traceback: bad input, and the store's own errors.
_SHOWN_ERRORS = (ValueError, UacError, duckdb.Error)


def asset(name: str) -> str:
    """The text of a front-end file: shipped in the package, else from a source checkout.

    A wheel carries ``widgets/`` as ``uac_kernel/_widgets``; an editable install imports the
    package from the checkout, where the files sit in ``widgets/`` beside it.
    """
    shipped = resources.files("uac_kernel").joinpath("_widgets", name)
    if shipped.is_file():
        return shipped.read_text(encoding="utf-8")
    checkout = Path(__file__).resolve().parents[2] / "widgets" / name
    if not checkout.is_file():
        raise FileNotFoundError(
            f"widget asset {name!r} is missing from this installation of uac-kernel; reinstall it"
        )
    return checkout.read_text(encoding="utf-8")


def _module(name: str) -> str:
    # Modules are loaded from a string, so they cannot import each other: the shared helpers
    # are put in front of each widget's own module.
    return asset("_common.js") + "\n" + asset(name)


def _value(v: Any) -> Any:
    """A field value as JSON: dates and times as a person reads them (``2026-02-19``,
    ``2026-02-19 10:00``; see ``show``), tuples as lists."""
    if isinstance(v, (date, datetime)):
        return show(v)
    if isinstance(v, (list, tuple)):
        return [_value(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _value(x) for k, x in v.items()}
    return v


def _ts(v: datetime | None) -> str:
    return "" if v is None else v.isoformat(sep=" ", timespec="seconds")


def _fields(rec: Record) -> dict[str, Any]:
    return {k: _value(v) for k, v in field_values(rec).items() if v is not None}


def summarize(ev: LoggedEvent, width: int = SUMMARY_WIDTH) -> str:
    """One line saying what an event is: ``user: Back from Tokyo!``, ``add Trip tokyo …``."""
    return shorten(summary(ev.kind, ev.payload), width)


class LogRow(TypedDict):
    """One row of the log browser."""

    seq: int
    ts: str
    kind: str
    source: str
    summary: str
    payload: str


class Utterance(TypedDict):
    seq: int
    ts: str
    speaker: str
    text: str
    source: str


class EventInfo(TypedDict):
    """A log event behind a record, with the utterances a fact was derived from."""

    seq: int
    ts: str
    kind: str
    source: str
    summary: str
    derived_from: list[str]
    utterances: list[Utterance]


def _row(ev: LoggedEvent) -> LogRow:
    payload = orjson.dumps(ev.payload, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()
    if len(payload) > PAYLOAD_CHARS:
        payload = payload[:PAYLOAD_CHARS] + f"\n… ({len(payload) - PAYLOAD_CHARS} more characters)"
    return {
        "seq": ev.seq,
        "ts": _ts(ev.ts),
        "kind": ev.kind,
        "source": ev.source or "",
        "summary": summarize(ev),
        "payload": payload,
    }


def provenance(wb: Workbench, seqs: Iterable[int]) -> list[EventInfo]:
    """The log events with these seqs, each fact with the utterances it was derived from."""
    events = events_by_seq(wb.store, wb.user, seqs)
    derived = {
        s
        for ev in events.values()
        if isinstance(ev.payload.get("derived_from"), list)
        for s in ev.payload["derived_from"]
    }
    said = utterances_by_source(wb.store, wb.user, derived)
    out: list[EventInfo] = []
    for ev in events.values():
        names = [str(s) for s in ev.payload.get("derived_from") or []]
        out.append(
            {
                "seq": ev.seq,
                "ts": _ts(ev.ts),
                "kind": ev.kind,
                "source": ev.source or "",
                "summary": summarize(ev),
                "derived_from": names,
                "utterances": [_utterance(said[s]) for s in names if s in said],
            }
        )
    return out


def _utterance(ev: LoggedEvent) -> Utterance:
    return {
        "seq": ev.seq,
        "ts": _ts(ev.ts),
        "speaker": str(ev.payload.get("speaker", "")),
        "text": str(ev.payload.get("text", "")),
        "source": ev.source or "",
    }


def _bound(text: str, end: bool) -> datetime | None:
    """A time bound from ISO text; an end bound covers the whole day (minute, second) it names."""
    text = text.strip()
    if not text:
        return None
    try:
        if len(text) == 10:
            day = datetime.combine(date.fromisoformat(text), datetime.min.time())
            return day + timedelta(days=1) if end else day
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is not an ISO date or date-time like 2025-03-02 or 2025-03-02T10:15"
        ) from None
    if when.tzinfo is not None:
        when = when.astimezone(UTC).replace(tzinfo=None)  # as the log stores times
    if not end:
        return when
    clock = re.split(r"[+\-Z]", text[11:])[0]  # the time of day, without its offset
    step = (
        timedelta(minutes=1)
        if clock.count(":") == 1
        else timedelta(seconds=1)
        if "." not in clock
        else timedelta(microseconds=1)
    )
    return when + step


class _Widget(anywidget.AnyWidget):
    """What every uac widget has: the shared styles, an error line, an answer counter, and
    ``readonly``: why its controls that ask the kernel are off, "" while they work (a static
    export, where no kernel answers, or a workbench open read-only for one that writes). The
    front end disables those controls and shows the reason beside them (``kernelControls`` in
    ``widgets/_common.js``)."""

    _css = asset("uac.css")
    error = traitlets.Unicode("").tag(sync=True)
    readonly = traitlets.Unicode("").tag(sync=True)
    # Bumped by every answer, so the front end can tell "done" even when nothing changed.
    served = traitlets.Int(0).tag(sync=True)

    def set_state(self, sync_data: dict[str, Any]) -> None:
        """A front end's update, but for ``readonly``: the kernel says why controls are off; a
        browser (or anything speaking the comm) may not clear it to apply."""
        super().set_state({k: v for k, v in sync_data.items() if k != "readonly"})

    def _answer(self, work: Callable[[], None]) -> None:
        try:
            with self.hold_sync():
                work()
                self.error = ""
        except _SHOWN_ERRORS as exc:
            self.error = str(exc)
        self.served += 1


def _record_now(wb: Workbench, type_name: str, key: str) -> dict[str, Any]:
    """A record's current fields, or its last version and why it is no longer current."""
    rec = wb.state.get(type_name, key)
    status = "current"
    if rec is None:
        versions = wb.state.versions(type_name, key)
        if not versions:
            return {"status": "missing", "valid_from": "", "valid_to": "", "fields": {}}
        rec = versions[-1]
        status = "retracted" if rec.retracted else "ended"
    return {
        "status": status,
        "valid_from": _ts(rec.valid_from),
        "valid_to": _ts(rec.valid_to),
        "fields": _fields(rec),
    }


class Progress(_Widget):
    """A progress bar for long work: ``with Progress(n, "ingest") as bar: ... bar.update(k)``.

    Entering the ``with`` block shows the bar in a notebook. Updates reach the browser at most
    ten times a second, however often ``update`` is called. ``total=None`` counts up without
    an end.
    """

    _esm = _module("progress.js")
    value = traitlets.Int(0).tag(sync=True)
    total = traitlets.Int(None, allow_none=True).tag(sync=True)
    description = traitlets.Unicode("").tag(sync=True)
    elapsed = traitlets.Float(0.0).tag(sync=True)
    status = traitlets.Unicode("running").tag(sync=True)  # running, done, failed, stopped

    interval = 0.1

    def __init__(self, total: int | None = None, description: str = ""):
        super().__init__(total=total, description=description)
        self._n = 0
        self._started = time.monotonic()
        self._synced = 0.0
        self._shown = False

    @property
    def n(self) -> int:
        """How much is done (``value`` lags it by at most ``interval`` seconds)."""
        return self._n

    def update(self, n: int = 1) -> None:
        self._n += n
        now = time.monotonic()
        if now - self._synced >= self.interval or (
            self.total is not None and self._n >= self.total
        ):
            self._sync(now)

    def finish(self, status: str = "done") -> None:
        """Show the final count and how it ended (``done``, ``failed`` or ``stopped``)."""
        self._sync(time.monotonic())
        self.status = status

    def _sync(self, now: float) -> None:
        self._synced = now
        with self.hold_sync():
            self.value = self._n
            self.elapsed = round(now - self._started, 3)

    def show(self) -> None:
        """Display the bar in a notebook (once); elsewhere do nothing."""
        if not self._shown and in_notebook():
            from IPython.display import display

            display(self)
            self._shown = True

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        self._shown = True
        return super()._repr_mimebundle_(**kwargs)

    def __enter__(self) -> Progress:
        self.show()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        if exc_type is None:
            self.finish("done")
        elif issubclass(exc_type, (KeyboardInterrupt, GeneratorExit)):
            self.finish("stopped")
        else:
            self.finish("failed")


def in_notebook() -> bool:
    """Whether this runs in a notebook kernel (Jupyter, VS Code), not in a terminal."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def progress(iterable: Iterable[T], total: int | None = None, desc: str = "") -> Iterator[T]:
    """Iterate with a progress bar: the ``Progress`` widget in a notebook, ``tqdm`` elsewhere."""
    if total is None:
        try:
            total = len(iterable)  # type: ignore[arg-type]
        except TypeError:
            total = None
    if not in_notebook():
        from tqdm import tqdm

        yield from tqdm(iterable, total=total, desc=desc)
        return
    with Progress(total, desc) as bar:
        for item in iterable:
            yield item
            bar.update(1)
