"""Notebook widgets over a ``Workbench``: the log, alerts and their evidence, state, diffs, progress,
model answers held for review, what-ifs, and the vocabulary's proposals.

The widgets are a thin face. Each reads through the engine (the workbench, and one-page reads
of the store in ``notebook.paging``), shapes what it found into plain JSON traitlets, and leaves the
drawing to a small hand-written ES module from ``widgets/`` (shipped in the package as
``uac_kernel/_widgets``). Every string from the log is data: the front end puts it on the page
as text, never as markup.

They run wherever anywidget does — JupyterLab, Notebook 7, VS Code — and in marimo through
``mo.ui.anywidget(LogBrowser(wb))``. Nothing is fetched from the network.

>>> LogBrowser(wb).query = {"kind": "fact", "text": "tokyo"}   # doctest: +SKIP
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, TypedDict, cast

import traitlets

from uac_kernel.core.records import Record, field_values
from uac_kernel.notebook.paging import LogFilter, LogPager
from uac_kernel.notebook.widget_base import (
    _bound,
    _fields,
    _module,
    _record_now,
    _row,
    _ts,
    _value,
    _Widget,
    provenance,
)

if TYPE_CHECKING:
    from uac_kernel.workbench import Workbench

__all__ = ["AlertInspector", "DiffView", "LogBrowser", "StateExplorer"]


# -- front-end assets ------------------------------------------------------------------------


# -- shaping values for the front end -------------------------------------------------------


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
    the day it names. Only the page shown crosses to the browser. ``readonly`` (why the
    filters and pager do nothing, e.g. in a static export) turns them off and says why.
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

    def __init__(self, wb: Workbench, page_size: int = 50, readonly: str = "", **query: Any):
        self._wb = wb
        self._pager = LogPager(wb.store, wb.user, page_size)
        self._ready = False
        super().__init__(page_size=page_size, query={"page": 0, **query}, readonly=readonly)
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
    ``readonly`` (why the choices do nothing, e.g. in a static export) turns them off and says why.
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

    def __init__(self, wb: Workbench, page_size: int = 50, readonly: str = "", **query: Any):
        self._wb = wb
        self._ready = False
        first = min(wb.state.types, default="")
        query = {"type": first, "page": 0, **query}
        super().__init__(page_size=page_size, query=query, readonly=readonly)
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
    has the full counts). Change ``a``/``b`` (or the selects) to compare other versions;
    ``readonly`` (why the selects do nothing, e.g. in a static export) turns them off.
    """

    _esm = _module("diff_view.js")
    a = traitlets.Int(0).tag(sync=True)
    b = traitlets.Int(0).tag(sync=True)
    versions: traitlets.List[Any] = traitlets.List().tag(sync=True)
    diff = traitlets.Dict().tag(sync=True)

    def __init__(self, wb: Workbench, a: int, b: int, limit: int = 500, readonly: str = ""):
        self._wb = wb
        self._limit = limit
        self._ready = False
        super().__init__(a=a, b=b, readonly=readonly)
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


# -- model answers held for review ------------------------------------------------------------


# -- what-ifs ---------------------------------------------------------------------------------


# -- the vocabulary -----------------------------------------------------------------------------
