"""Notebook widgets over a ``Workbench``: the log, alerts and their evidence, state, diffs, progress,
model answers held for review, what-ifs, and the vocabulary's proposals.

The widgets are a thin face. Each reads through the engine (the workbench, and one-page reads
of the store in ``_paging``), shapes what it found into plain JSON traitlets, and leaves the
drawing to a small hand-written ES module from ``widgets/`` (shipped in the package as
``uac_kernel/_widgets``). Every string from the log is data: the front end puts it on the page
as text, never as markup.

They run wherever anywidget does — JupyterLab, Notebook 7, VS Code — and in marimo through
``mo.ui.anywidget(LogBrowser(wb))``. Nothing is fetched from the network.

>>> LogBrowser(wb).query = {"kind": "fact", "text": "tokyo"}   # doctest: +SKIP
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, date, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, cast

import anywidget
import duckdb
import orjson
import traitlets

from uac_kernel.core.display import shorten, show
from uac_kernel.core.errors import UacError
from uac_kernel.core.records import Record, field_values
from uac_kernel.log.store import LoggedEvent
from uac_kernel.notebook.paging import LogFilter, LogPager, events_by_seq, utterances_by_source
from uac_kernel.render.summary import summary

if TYPE_CHECKING:
    from uac_kernel.engine.whatif import WhatIf
    from uac_kernel.rules.engine import Alert
    from uac_kernel.workbench import Workbench

__all__ = [
    "AlertInspector",
    "DiffView",
    "LogBrowser",
    "Progress",
    "ReviewView",
    "StateExplorer",
    "VocabView",
    "WhatIfWidget",
    "progress",
]

T = TypeVar("T")

SUMMARY_WIDTH = 160
PAYLOAD_CHARS = 4000
# What a widget shows instead of a traceback: bad input, and the store's own errors.
_SHOWN_ERRORS = (ValueError, UacError, duckdb.Error)


# -- front-end assets ------------------------------------------------------------------------


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


# -- shaping values for the front end -------------------------------------------------------


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
    """What every uac widget has: the shared styles, an error line, and an answer counter."""

    _css = asset("uac.css")
    error = traitlets.Unicode("").tag(sync=True)
    # Bumped by every answer, so the front end can tell "done" even when nothing changed.
    served = traitlets.Int(0).tag(sync=True)

    def _answer(self, work: Callable[[], None]) -> None:
        try:
            with self.hold_sync():
                work()
                self.error = ""
        except _SHOWN_ERRORS as exc:
            self.error = str(exc)
        self.served += 1


# -- the log ----------------------------------------------------------------------------------


class LogQuery(TypedDict, total=False):
    """What the log browser shows: filters, and the page (from 0)."""

    kind: str
    type: str
    text: str
    start: str
    end: str
    page: int


class LogBrowser(_Widget):
    """The user's events, a page at a time, filtered by kind, record type, text and time.

    Set ``query`` (or use the controls) to filter and page: ``{"kind": "fact", "type": "Trip",
    "text": "tokyo", "start": "2025-01-01", "end": "2025-03-31", "page": 0}``; ``end`` includes
    the day it names. Only the page shown crosses to the browser.
    """

    _esm = _module("log_browser.js")
    query = traitlets.Dict().tag(sync=True)
    page_size = traitlets.Int(50).tag(sync=True)
    rows: traitlets.List[Any] = traitlets.List().tag(sync=True)
    total = traitlets.Int(0).tag(sync=True)
    page = traitlets.Int(0).tag(sync=True)
    pages = traitlets.Int(1).tag(sync=True)
    kinds: traitlets.List[Any] = traitlets.List().tag(sync=True)
    types: traitlets.List[Any] = traitlets.List().tag(sync=True)
    elapsed_ms = traitlets.Float(0.0).tag(sync=True)

    def __init__(self, wb: Workbench, page_size: int = 50, **query: Any):
        self._wb = wb
        self._pager = LogPager(wb.store, wb.user, page_size)
        self._ready = False
        super().__init__(page_size=page_size, query={"page": 0, **query})
        self._ready = True
        self.refresh()

    def refresh(self) -> None:
        """Show what the log holds now, keeping filters and page."""
        self._options()
        self._serve()

    def next_page(self) -> None:
        self.query = {**self.query, "page": self.page + 1}

    def prev_page(self) -> None:
        self.query = {**self.query, "page": max(0, self.page - 1)}

    def _options(self) -> None:
        self.kinds = [{"name": k, "count": n} for k, n in self._pager.kinds().items()]
        self.types = sorted(self._wb.state.types)

    @traitlets.observe("query", "page_size")
    def _on_query(self, change: dict[str, Any]) -> None:
        if self._ready:
            self._serve()

    def _filter(self) -> tuple[LogFilter, int]:
        q = cast(LogQuery, self.query)
        page = q.get("page", 0)
        if not isinstance(page, int) or isinstance(page, bool):
            raise ValueError(f"page must be a whole number, not {page!r}")
        f = LogFilter(
            kind=str(q.get("kind") or ""),
            type=str(q.get("type") or ""),
            text=str(q.get("text") or ""),
            ts_from=_bound(str(q.get("start") or ""), end=False),
            ts_to=_bound(str(q.get("end") or ""), end=True),
        )
        return f, page

    def _serve(self) -> None:
        def work() -> None:
            started = time.perf_counter()
            f, page = self._filter()
            self._pager.page_size = max(1, self.page_size)
            self._pager.set_filter(f)
            self.page, events = self._pager.page(page)
            self.rows = [_row(ev) for ev in events]
            self.total = self._pager.total()
            self.pages = self._pager.pages()
            self.elapsed_ms = round((time.perf_counter() - started) * 1000, 1)

        self._answer(work)


# -- alerts ------------------------------------------------------------------------------------


class AlertInspector(_Widget):
    """The standing alerts, most severe first, each with its evidence and its history.

    Evidence is the records an alert rests on (current field values, or their last version if
    they have since changed) and the log events behind them, facts with the utterances they were
    derived from. ``past`` holds alerts that no longer stand, newest first; ``not_in_force``
    marks one the log still has raised whose rule this session does not run.
    """

    _esm = _module("alert_inspector.js")
    alerts: traitlets.List[Any] = traitlets.List().tag(sync=True)
    past: traitlets.List[Any] = traitlets.List().tag(sync=True)
    counts = traitlets.Dict().tag(sync=True)

    def __init__(self, wb: Workbench, past_limit: int = 50):
        self._wb = wb
        self._past_limit = past_limit
        super().__init__()
        self.refresh()

    def refresh(self) -> None:
        self._answer(self._build)

    def _build(self) -> None:
        wb = self._wb
        history: dict[str, list[dict[str, Any]]] = {}
        last: dict[str, dict[str, Any]] = {}
        for ev in wb.alert_history():
            p = ev.payload
            history.setdefault(str(p.get("id")), []).append(
                {
                    "seq": ev.seq,
                    "ts": _ts(ev.ts),
                    "recorded_at": _ts(ev.recorded_at),
                    "state": p.get("state", ""),
                    "severity": p.get("severity", ""),
                    "message": p.get("message", ""),
                    "reason": p.get("reason", ""),  # why a cleared alert cleared
                }
            )
            last[str(p.get("id"))] = p
        standing = wb.alerts()
        seqs = {s for a in standing for e in a.evidence for s in e.sources}
        events = {e["seq"]: e for e in provenance(wb, seqs)}
        alerts = []
        for a in standing:
            evidence = []
            for e in a.evidence:
                evidence.append(
                    {
                        "type": e.type,
                        "key": e.key,
                        **_record_now(wb, e.type, e.key),
                        "events": [events[s] for s in e.sources if s in events],
                    }
                )
            alerts.append(
                {
                    "id": a.id,
                    "rule": a.rule,
                    "severity": a.severity,
                    "category": a.category,
                    "message": a.message,
                    "evidence": evidence,
                    "constraint": _constraint(wb, a.rule),
                    "history": history.get(a.id, []),
                }
            )
        now = {a.id for a in standing}
        gone = [i for i in last if i not in now]
        gone.sort(key=lambda i: history[i][-1]["seq"], reverse=True)
        self.past = [
            {
                "id": i,
                # the log still has it raised, but no rule of this session evaluates it
                "not_in_force": last[i].get("rule") not in wb.runner.rules
                and last[i].get("state") in ("raised", "updated"),
                "rule": last[i].get("rule", ""),
                "severity": last[i].get("severity", ""),
                "category": last[i].get("category", ""),
                "message": last[i].get("message", ""),
                "history": history[i],
            }
            for i in gone[: self._past_limit]
        ]
        self.alerts = alerts
        self.counts = {
            s: sum(a.severity == s for a in standing) for s in ("critical", "warning", "info")
        }


def _constraint(wb: Workbench, rule: str) -> dict[str, str] | None:
    """The constraint whose rule raised an alert (key, kind, title, its JSON), or None."""
    cv = wb.constraint_of(rule)
    if cv is None:
        return None
    from uac_kernel.constraints import constraint_json

    c = cv.constraint
    text = json.dumps(constraint_json(c), ensure_ascii=False, indent=2)
    return {"key": cv.key, "kind": c.kind, "title": c.title, "json": text}


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


# -- state ------------------------------------------------------------------------------------


class StateQuery(TypedDict, total=False):
    """What the state explorer shows: a type, its records filtered and paged, one record."""

    type: str
    text: str
    scope: str  # "current" or "all" (retracted records too)
    page: int
    key: str


class StateExplorer(_Widget):
    """Record types with their counts → the records of one type → one record's versions.

    Records are paged here in the kernel (``page_size`` a page) and filtered by ``text``
    (case-insensitive, in the key or any field value). A record's versions come with their
    provenance: the log events behind them and the utterances facts were derived from.
    """

    _esm = _module("state_explorer.js")
    query = traitlets.Dict().tag(sync=True)
    page_size = traitlets.Int(50).tag(sync=True)
    types: traitlets.List[Any] = traitlets.List().tag(sync=True)
    columns: traitlets.List[Any] = traitlets.List().tag(sync=True)
    records: traitlets.List[Any] = traitlets.List().tag(sync=True)
    total = traitlets.Int(0).tag(sync=True)
    page = traitlets.Int(0).tag(sync=True)
    pages = traitlets.Int(1).tag(sync=True)
    record = traitlets.Dict().tag(sync=True)

    def __init__(self, wb: Workbench, page_size: int = 50, **query: Any):
        self._wb = wb
        self._ready = False
        first = min(wb.state.types, default="")
        super().__init__(page_size=page_size, query={"type": first, "page": 0, **query})
        self._ready = True
        self.refresh()

    def refresh(self) -> None:
        self._answer(self._build)

    @traitlets.observe("query", "page_size")
    def _on_query(self, change: dict[str, Any]) -> None:
        if self._ready:
            self.refresh()

    def _build(self) -> None:
        state = self._wb.state
        self.types = [
            {
                "name": name,
                "count": len(ts.current),
                "versions": len(ts.history) + len(ts.current),
                "fields": [{"name": f, "ftype": t} for f, t in state.schema.types[name].items()],
            }
            for name, ts in sorted(state.types.items())
        ]
        q = cast(StateQuery, self.query)
        name = str(q.get("type") or "")
        ts = state.types.get(name)
        if ts is None:
            if name:
                raise ValueError(
                    f"no record type {name!r}; the types are {', '.join(sorted(state.types))}"
                )
            self.columns, self.records, self.total, self.page, self.pages = [], [], 0, 0, 1
            self.record = {}
            return
        records = list(ts.current.values())
        if q.get("scope") == "all":
            ended: dict[str, Record] = {}
            for rec in ts.history:
                if rec.key not in ts.current:
                    ended[rec.key] = rec
            records += ended.values()
        needle = str(q.get("text") or "").casefold()
        if needle:
            records = [r for r in records if needle in _haystack(r)]
        size = max(1, self.page_size)
        pages = max(1, -(-len(records) // size))
        page = q.get("page", 0)
        page = max(0, min(page if isinstance(page, int) else 0, pages - 1))
        self.columns = list(ts.readers)
        self.records = [
            {
                "key": r.key,
                "valid_from": _ts(r.valid_from),
                "retracted": r.retracted,
                "fields": _fields(r),
            }
            for r in records[page * size : (page + 1) * size]
        ]
        self.total, self.page, self.pages = len(records), page, pages
        key = q.get("key")
        self.record = self._record(name, str(key)) if key else {}

    def _record(self, type_name: str, key: str) -> dict[str, Any]:
        versions = self._wb.state.versions(type_name, key)
        if not versions:
            raise ValueError(f"{type_name} has no record {key!r}")
        seqs = {s for v in versions for s in v.sources}
        return {
            "type": type_name,
            "key": key,
            "current": self._wb.state.get(type_name, key) is not None,
            "versions": [
                {
                    "valid_from": _ts(v.valid_from),
                    "valid_to": _ts(v.valid_to),
                    "retracted": v.retracted,
                    "fields": _fields(v),
                    "sources": list(v.sources),
                }
                for v in versions
            ],
            "events": provenance(self._wb, seqs),
        }


def _haystack(rec: Record) -> str:
    values = [str(_value(v)) for v in field_values(rec).values() if v is not None]
    return " ".join([rec.key, *values]).casefold()


# -- checkpoint diffs -------------------------------------------------------------------------


class DiffView(_Widget):
    """What changed from checkpoint ``a`` to ``b``: records added, changed field by field,
    retracted; new types and fields. Each list shows at most ``limit`` records (``totals``
    has the full counts). Change ``a``/``b`` (or the selects) to compare other versions.
    """

    _esm = _module("diff_view.js")
    a = traitlets.Int(0).tag(sync=True)
    b = traitlets.Int(0).tag(sync=True)
    versions: traitlets.List[Any] = traitlets.List().tag(sync=True)
    diff = traitlets.Dict().tag(sync=True)

    def __init__(self, wb: Workbench, a: int, b: int, limit: int = 500):
        self._wb = wb
        self._limit = limit
        self._ready = False
        super().__init__(a=a, b=b)
        self._ready = True
        self.refresh()

    def refresh(self) -> None:
        self._answer(self._build)

    @traitlets.observe("a", "b")
    def _on_versions(self, change: dict[str, Any]) -> None:
        if self._ready:
            self.refresh()

    def _build(self) -> None:
        self.versions = [
            {
                "version": c.version,
                "seq": c.seq,
                "created_at": _ts(c.created_at),
                "records": c.records,
            }
            for c in self._wb.checkpoints.all()
        ]
        d = self._wb.diff(self.a, self.b)
        n = self._limit
        self.diff = {
            "a": d.a,
            "b": d.b,
            "summary": d.summary(),
            "totals": {
                "added": len(d.added),
                "changed": len(d.changed),
                "retracted": len(d.retracted),
            },
            "added": [
                {"type": c.type, "key": c.key, "fields": _value(c.after or {})} for c in d.added[:n]
            ],
            "changed": [
                {
                    "type": c.type,
                    "key": c.key,
                    "changes": [
                        {
                            "field": f,
                            "before": _value((c.before or {}).get(f)),
                            "after": _value((c.after or {}).get(f)),
                        }
                        for f in c.changed_fields
                    ],
                }
                for c in d.changed[:n]
            ],
            "retracted": [
                {"type": c.type, "key": c.key, "fields": _value(c.before or {})}
                for c in d.retracted[:n]
            ],
            "new_types": list(d.new_types),
            "new_fields": {t: list(fs) for t, fs in d.new_fields.items()},
        }


# -- progress ---------------------------------------------------------------------------------


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


# -- model answers held for review ------------------------------------------------------------


class ReviewAction(TypedDict, total=False):
    """A decision the front end sends: ``{"action": "accept", "batch": 12, "only": [1, 3]}``
    (``only`` left out: every operation) or ``{"action": "reject", "batch": 12}``."""

    action: str
    batch: int
    only: list[int]


class ReviewView(_Widget):
    """The model answers held for review, each operation as the record before and after it,
    with Accept, Accept selected (a checkbox per operation) and Reject.

    A button sends a ``ReviewAction`` message; ``accept`` and ``reject`` are the same calls
    from Python. Each decision is ``Workbench.accept``/``reject``: re-validated, logged, and
    then the list is read again. ``done`` says what the last decision did.
    """

    _esm = _module("review_view.js")
    batches: traitlets.List[Any] = traitlets.List().tag(sync=True)
    done = traitlets.Unicode("").tag(sync=True)

    def __init__(self, wb: Workbench):
        self._wb = wb
        super().__init__()
        self.on_msg(self._on_msg)
        self.refresh()

    def refresh(self) -> None:
        self._answer(self._build)

    def accept(self, batch: int, only: list[int] | None = None) -> None:
        def work() -> None:
            report = self._wb.accept(batch, only)
            which = "all operations" if only is None else f"operations {_numbers(only)}"
            self.done = f"batch {batch}: accepted {which}; {report.summary()}"
            self._build()

        self._answer(work)

    def reject(self, batch: int) -> None:
        def work() -> None:
            self._wb.reject(batch)
            self.done = f"batch {batch}: rejected; nothing of it was applied"
            self._build()

        self._answer(work)

    def _on_msg(self, widget: Any, content: Any, buffers: Any) -> None:
        def whole(v: Any) -> bool:
            return type(v) is int

        msg = cast(ReviewAction, content if isinstance(content, dict) else {})
        batch, only = msg.get("batch"), msg.get("only")
        if not whole(batch) or not (
            only is None or (isinstance(only, list) and all(whole(n) for n in only))
        ):
            self._answer(lambda: _bad_message(content))
        elif msg.get("action") == "accept":
            self.accept(cast(int, batch), only)
        elif msg.get("action") == "reject":
            self.reject(cast(int, batch))
        else:
            self._answer(lambda: _bad_message(content))

    def _build(self) -> None:
        self.batches = [
            {
                "id": b.id,
                "held_at": _ts(b.held_at),
                "reason": b.reason,
                "utterances": b.utterances,
                "changes": [
                    {
                        "number": c.number,
                        "op": c.op,
                        "type": c.type,
                        "key": c.key,
                        "reason": c.reason,
                        "fields": [
                            {
                                "field": name,
                                "before": _value((c.before or {}).get(name)),
                                "after": _value((c.after or {}).get(name)),
                            }
                            for name in (c.after or c.before or {})
                        ],
                    }
                    for c in b.changes
                ],
            }
            for b in self._wb.review()
        ]


def _numbers(only: list[int]) -> str:
    return ", ".join(map(str, sorted(only)))


def _bad_message(content: Any) -> None:
    raise ValueError(f"not a review decision: {shorten(repr(content), 80)}")


# -- what-ifs ---------------------------------------------------------------------------------


class WhatIfAction(TypedDict):
    """What the front end sends: ``{"action": "apply"}`` (the Apply for real button)."""

    action: str


class WhatIfWidget(_Widget):
    """A what-if's report — records added, changed and retracted (before → after), alerts it
    would raise, clear or escalate (with their evidence), answers that would change, the schema
    it would grow — and, for a what-if in the past, the alert timeline against the real one.

    Apply for real (or ``apply()``) appends the what-if's events through
    ``Workbench.apply_whatif``: the normal ingest, validated and bounded against the log as it
    is then, which may have changed since the what-if ran; a refusal shows as the error line.
    Once applied, ``applied`` is true and ``done`` says what the ingest did; a second apply is
    refused. Each list shows at most ``limit`` entries (``report["totals"]`` has the counts).
    """

    _esm = _module("whatif_view.js")
    report = traitlets.Dict().tag(sync=True)
    # The past what-if's timeline as SVG text (vl-convert, in the kernel); the front end shows
    # it as an image, so nothing in it runs or reaches the page as markup. "" for none.
    timeline_svg = traitlets.Unicode("").tag(sync=True)
    applied = traitlets.Bool(False).tag(sync=True)
    done = traitlets.Unicode("").tag(sync=True)

    def __init__(self, wb: Workbench, w: WhatIf, limit: int = 500):
        self._wb = wb
        self._whatif = w
        self._limit = limit
        super().__init__()
        self.on_msg(self._on_msg)
        self._answer(self._build)

    @property
    def whatif(self) -> WhatIf:
        return self._whatif

    def apply(self) -> None:
        """Append the what-if's events for real (once), and say what the ingest did."""

        def work() -> None:
            if self.applied:
                raise ValueError("this what-if was applied already; run a new one to apply again")
            ingest = self._wb.apply_whatif(self._whatif)
            self.applied = True
            self.done = f"applied: {ingest.summary()}"

        self._answer(work)

    def _on_msg(self, widget: Any, content: Any, buffers: Any) -> None:
        if isinstance(content, dict) and content.get("action") == "apply":
            self.apply()
        else:
            self._answer(lambda: _bad_whatif_message(content))

    def _build(self) -> None:
        self.report = whatif_report(self._wb, self._whatif, self._limit)
        if self._whatif.as_of is not None:
            from uac_kernel.render.charts import whatif_timeline

            self.timeline_svg = _svg(whatif_timeline(self._whatif, until=self._wb.state.now))


def _svg(chart: Any) -> str:
    import vl_convert

    return str(vl_convert.vegalite_to_svg(chart.to_dict()))


def _bad_whatif_message(content: Any) -> None:
    raise ValueError(f"not a what-if action: {shorten(repr(content), 80)}")


def _plain(v: Any) -> Any:
    """A value as JSON for the front end: ``_value``, and sets sorted, other objects as text."""
    if isinstance(v, (set, frozenset)):
        return sorted((_plain(x) for x in v), key=repr)
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if v is None or isinstance(v, (str, int, float, bool, date, datetime)):
        return _value(v)
    return str(v)


def whatif_report(wb: Workbench, w: WhatIf, limit: int = 500) -> dict[str, Any]:
    """A what-if as the plain JSON the widget draws: at most ``limit`` entries a list."""
    changed = {(c.type, c.key): c for c in w.records}
    seqs = {s for a in (*w.raised, *w.updated, *w.cleared) for e in a.evidence for s in e.sources}
    events = {e["seq"]: e for e in provenance(wb, seqs)}

    def evidence(a: Alert) -> list[dict[str, Any]]:
        out = []
        for e in a.evidence:
            c = changed.get((e.type, e.key))
            if c is not None:  # the record as the what-if leaves it
                record = {
                    "status": "what-if: retracted" if c.after is None else f"what-if: {c.change}",
                    "valid_from": "",
                    "valid_to": "",
                    "fields": _plain(c.after if c.after is not None else c.before or {}),
                }
            else:
                record = _record_now(wb, e.type, e.key)
            out.append(
                {
                    "type": e.type,
                    "key": e.key,
                    **record,
                    "events": [events[s] for s in e.sources if s in events],
                    # sources past the log's end: the what-if's own events
                    "hypothetical": sum(s not in events for s in e.sources),
                }
            )
        return out

    def alert(a: Alert, **extra: Any) -> dict[str, Any]:
        return {
            "id": a.id,
            "rule": a.rule,
            "severity": a.severity,
            "category": a.category,
            "message": a.message,
            "evidence": evidence(a),
            **extra,
        }

    def record(c: Any) -> dict[str, Any]:
        before, after = c.before or {}, c.after or {}
        names = list(c.fields) or list(after or before)
        return {
            "type": c.type,
            "key": c.key,
            "change": c.change,
            "fields": [
                {
                    "field": f,
                    "before": _plain(before.get(f)) if c.before is not None else None,
                    "after": _plain(after.get(f)) if c.after is not None else None,
                }
                for f in names
            ],
        }

    answers = [a for a in w.answers if a.changed]
    escalated = w.escalated()
    n = limit
    return {
        "user": w.user,
        "as_of": "" if w.as_of is None else show(w.as_of),
        "summary": w.summary(),
        "new": w.new,
        "skipped": w.skipped,
        "totals": {
            "records": len(w.records),
            "raised": len(w.raised),
            "cleared": len(w.cleared),
            "escalated": len(escalated),
            "answers": len(w.answers),
            "answers_changed": len(answers),
        },
        "schema": list(w.schema),
        "records": [record(c) for c in w.records[:n]],
        "raised": [alert(a) for a in w.raised[:n]],
        "cleared": [alert(a, reason=a.reason) for a in w.cleared[:n]],
        "escalated": [alert(a, before=before, after=after) for before, after, a in escalated[:n]],
        "answers": [a.to_dict() for a in answers[:n]],
        "conflicts": list(w.conflicts),
    }


# -- the vocabulary -----------------------------------------------------------------------------


class VocabAction(TypedDict):
    """What the front end sends: ``{"action": "accept", "key": ["trip.start", "Journey",
    "leaves_on"]}`` (or ``"reject"``; the key's field null for a role), or ``{"action":
    "hello"}`` when it is drawn: only a kernel answers, and until one does the buttons stay
    disabled (a static or exported view has none)."""

    action: str
    key: list[str | None]


class VocabView(_Widget):
    """The bindings in force and the proposals held for review, each with its author, score
    and reason; Accept makes a person's ``used`` binding and Reject a person's ``rejected``
    one, through ``Workbench.bind`` and ``Workbench.unbind`` (as ``uac vocab bind/unbind``).
    ``readonly`` says why the buttons are off ("" when they work): a workbench open read-only.
    """

    _esm = _module("vocab_view.js")
    bindings: traitlets.List[Any] = traitlets.List().tag(sync=True)
    done = traitlets.Unicode("").tag(sync=True)
    readonly = traitlets.Unicode("").tag(sync=True)

    def __init__(self, wb: Workbench):
        self._wb = wb
        super().__init__()
        if wb.store.read_only:
            self.readonly = "this workbench is open read-only; open it writable to decide"
        self.on_msg(self._on_msg)
        self._answer(self._build)

    def accept(self, target: str, type_name: str, field: str | None) -> None:
        """A person's ``used`` binding of the key (a held proposal accepted)."""
        self._decide("accept", (target, type_name, field))

    def reject(self, target: str, type_name: str, field: str | None) -> None:
        """A person's ``rejected`` binding of the key: never read, never proposed again."""
        self._decide("reject", (target, type_name, field))

    def _decide(self, action: str, key: tuple[str, str, str | None]) -> None:
        def work() -> None:
            if self.readonly:
                raise ValueError(self.readonly)
            b = self._wb.state.bound(key)
            if b is None or b.status == "rejected":
                raise ValueError(f"not a binding shown here: {shorten(repr(list(key)), 80)}")
            what = b.type if b.field is None else f"{b.type}.{b.field}"
            decide = self._wb.bind if action == "accept" else self._wb.unbind
            report = decide(what, b.target)
            verb = "accepted" if action == "accept" else "rejected"
            self.done = f"{verb} {what} as {b.target}; {report.summary()}"
            self._build()

        self._answer(work)

    def _on_msg(self, widget: Any, content: Any, buffers: Any) -> None:
        msg = cast(VocabAction, content if isinstance(content, dict) else {})
        key = msg.get("key")
        if msg.get("action") == "hello":
            self._answer(lambda: None)  # the kernel is here: the buttons may work
        elif (
            msg.get("action") in ("accept", "reject")
            and isinstance(key, list)
            and len(key) == 3
            and all(isinstance(k, str) for k in key[:2])
            and (key[2] is None or isinstance(key[2], str))
        ):
            self._decide(msg["action"], (cast(str, key[0]), cast(str, key[1]), key[2]))
        else:
            self._answer(lambda: _bad_vocab_message(content))

    def _build(self) -> None:
        vocab = self._wb.vocab()
        self.bindings = [
            {
                "key": list(b.key),
                "what": b.type if b.field is None else f"{b.type}.{b.field}",
                "target": b.target if b.field is not None else f"role {b.target}",
                "author": b.author,
                "score": round(b.score, 2),
                "status": b.status,
                "reason": b.reason,
            }
            for b in [*vocab.held(), *vocab.used()]
        ]


def _bad_vocab_message(content: Any) -> None:
    raise ValueError(f"not a vocabulary decision: {shorten(repr(content), 80)}")
