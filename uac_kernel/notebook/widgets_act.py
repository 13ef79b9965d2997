"""The widgets that change the log: review held model answers, apply a what-if, accept or reject
vocabulary bindings."""

from __future__ import annotations

from datetime import date, datetime
from typing import TYPE_CHECKING, Any, TypedDict, cast

import traitlets

from uac_kernel.core.display import plural, shorten, show
from uac_kernel.notebook.widget_base import _module, _record_now, _ts, _value, _Widget, provenance
from uac_kernel.render.whatif_face import report_lines

if TYPE_CHECKING:
    from uac_kernel.engine.whatif import WhatIf
    from uac_kernel.ingest.report import IngestReport
    from uac_kernel.rules.engine import Alert
    from uac_kernel.workbench import Workbench

__all__ = [
    "ReviewAction",
    "ReviewView",
    "VocabAction",
    "VocabView",
    "WhatIfAction",
    "WhatIfWidget",
    "applied_heading",
    "whatif_report",
]


class ReviewAction(TypedDict, total=False):
    """A decision the front end sends: ``{"action": "accept", "batch": 12, "only": [1, 3]}``
    (``only`` left out: every operation) or ``{"action": "reject", "batch": 12}``; or
    ``{"action": "hello"}`` when it is drawn: only a kernel answers, and until one does the
    buttons stay off (a static or exported view has none)."""

    action: str
    batch: int
    only: list[int]


class ReviewView(_Widget):
    """The model answers held for review, each operation as the record before and after it,
    with Accept, Accept selected (a checkbox per operation) and Reject.

    A button sends a ``ReviewAction`` message; ``accept`` and ``reject`` are the same calls
    from Python. Each decision is ``Workbench.accept``/``reject``: re-validated, logged, and
    then the list is read again. ``done`` says what the last decision did. ``readonly`` says
    why the buttons are off ("" when they work): a workbench open read-only.
    """

    _esm = _module("review_view.js")
    batches: traitlets.List[Any] = traitlets.List().tag(sync=True)
    done = traitlets.Unicode("").tag(sync=True)

    def __init__(self, wb: Workbench):
        self._wb = wb
        super().__init__()
        if wb.store.read_only:
            self.readonly = "this workbench is open read-only; open it writable to decide"
        self.on_msg(self._on_msg)
        self.refresh()

    def refresh(self) -> None:
        self._answer(self._build)

    def accept(self, batch: int, only: list[int] | None = None) -> None:
        def work() -> None:
            if self.readonly:
                raise ValueError(self.readonly)
            shown = [c["number"] for b in self.batches if b["id"] == batch for c in b["changes"]]
            report = self._wb.accept(batch, only)
            which = "all operations" if only is None else f"operations {_numbers(only)}"
            self.done = f"batch {batch}: accepted {which}; {report.summary()}"
            # the batch is decided and leaves the list: the operations not chosen go with it
            left = [n for n in shown if only is not None and n not in only]
            if left:
                self.done += f"; operations {_numbers(left)} were left out and not applied"
            self._build()

        self._answer(work)

    def reject(self, batch: int) -> None:
        def work() -> None:
            if self.readonly:
                raise ValueError(self.readonly)
            self._wb.reject(batch)
            self.done = f"batch {batch}: rejected; nothing of it was applied"
            self._build()

        self._answer(work)

    def _on_msg(self, widget: Any, content: Any, buffers: Any) -> None:
        def whole(v: Any) -> bool:
            return type(v) is int

        msg = cast(ReviewAction, content if isinstance(content, dict) else {})
        batch, only = msg.get("batch"), msg.get("only")
        if msg.get("action") == "hello" and len(msg) == 1:
            self._answer(lambda: None)  # the kernel is here: the buttons may work
        elif not whole(batch) or not (
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


class WhatIfAction(TypedDict):
    """What the front end sends: ``{"action": "apply"}`` (the Apply for real button), or
    ``{"action": "hello"}`` when it is drawn: only a kernel answers, and until one does Apply
    stays off (a static or exported view has none)."""

    action: str


class WhatIfWidget(_Widget):
    """A what-if's report — records added, changed and retracted (before → after), alerts it
    would raise, clear or escalate (with their evidence), answers that would change, the schema
    it would grow — and, for a what-if in the past, the alert timeline against the real one.

    Apply for real (or ``apply()``) appends the what-if's events through
    ``Workbench.apply_whatif``: the normal ingest, validated and bounded against the log as it
    is then, which may have changed since the what-if ran; a refusal shows as the error line.
    Once applied, ``applied`` is true, ``done`` says what the ingest did and ``heading`` (the
    widget's header: the what-if's summary until then) says where its events now are in the
    log; a second apply is refused. ``readonly`` says why Apply is off ("" when it works): a
    workbench open read-only, or a static export (``uac.marimo.whatif``). Each list shows at
    most ``limit`` entries (``report["totals"]`` has the counts). ``text()`` is the report as
    plain text, the widget's text/plain: after Apply it says what was appended, as ``heading``.
    """

    _esm = _module("whatif_view.js")
    report = traitlets.Dict().tag(sync=True)
    # The past what-if's timeline as SVG text (vl-convert, in the kernel); the front end shows
    # it as an image, so nothing in it runs or reaches the page as markup. "" for none.
    timeline_svg = traitlets.Unicode("").tag(sync=True)
    applied = traitlets.Bool(False).tag(sync=True)
    done = traitlets.Unicode("").tag(sync=True)
    heading = traitlets.Unicode("").tag(sync=True)

    def __init__(self, wb: Workbench, w: WhatIf, limit: int = 500, readonly: str = ""):
        self._wb = wb
        self._whatif = w
        self._limit = limit
        super().__init__()
        if not readonly and wb.store.read_only:
            readonly = "this workbench is open read-only; open it writable to apply the what-if"
        self.readonly = readonly
        self.on_msg(self._on_msg)
        self._answer(self._build)

    @property
    def whatif(self) -> WhatIf:
        return self._whatif

    def text(self) -> str:
        """The report as plain text (``report_lines``), what a notebook shows where the widget
        is not drawn (a saved copy, a terminal): once applied, headed by what was appended."""
        return "\n".join(report_lines(self._whatif, self.heading if self.applied else ""))

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)
        if not isinstance(bundle, tuple):
            return bundle
        data, metadata = bundle
        return {**data, "text/plain": self.text()}, metadata

    def apply(self) -> None:
        """Append the what-if's events for real (once), and say what the ingest did."""

        def work() -> None:
            if self.applied:
                raise ValueError("this what-if was applied already; run a new one to apply again")
            if self.readonly:
                raise ValueError(self.readonly)
            ingest = self._wb.apply_whatif(self._whatif)
            self.done = f"applied: {ingest.summary()}"
            self.heading = applied_heading(ingest)
            self.applied = True  # last: who watches it sees the heading and text() of it

        self._answer(work)

    def _on_msg(self, widget: Any, content: Any, buffers: Any) -> None:
        action = content.get("action") if isinstance(content, dict) else None
        if action == "apply":
            self.apply()
        elif action == "hello":
            self._answer(lambda: None)  # the kernel is here: Apply may work
        else:
            self._answer(lambda: _bad_whatif_message(content))

    def _build(self) -> None:
        self.report = whatif_report(self._wb, self._whatif, self._limit)
        self.heading = self._whatif.summary()
        if self._whatif.as_of is not None:
            from uac_kernel.render.charts import whatif_timeline

            self.timeline_svg = _svg(whatif_timeline(self._whatif, until=self._wb.state.now))


def applied_heading(ingest: IngestReport) -> str:
    """What is true of the log once a what-if was applied: how many of its events were
    appended and where (the seqs include the schema events the ingest logged with them)."""
    if not ingest.appended:
        return (
            f"applied: nothing new appended; {plural(ingest.skipped, 'event')} of the what-if "
            "already in the log"
        )
    first, last = ingest.first_seq, ingest.last_seq
    where = f"seq {first}" if first == last else f"seqs {first}–{last}"
    text = f"applied: {plural(ingest.appended, 'event')} appended to the log at {where}"
    if ingest.schema_changes:
        text += f" (with {plural(ingest.schema_changes, 'schema change')})"
    if ingest.skipped:
        text += f"; {ingest.skipped} already in the log"
    if ingest.repeated:
        text += f"; {ingest.repeated} repeated in the what-if"
    return text


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
        "repeated": w.repeated,
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
