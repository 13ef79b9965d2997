"""Forgetting, verifiably: a privacy request erases content from everywhere uac copied it.

``plan_forget`` finds what must go, by record (type and key), by source, or by a text match:

- the events selected, and with them whole records: a fact event takes every event of its
  record and the utterances it was extracted from; an utterance takes the records extracted
  from it; a constraint event, likewise, every event of its constraint (which is then no longer
  in force) and the utterances it was derived from, and an utterance the constraints derived
  from it; a vocabulary event whose reason holds the text, every event of its binding (type,
  field and concept names are structure and stay, as schema events do);
- alerts whose evidence names a forgotten record, or whose reason quotes its key (the record
  that settled it), or that hold the text, and the alerts of a
  forgotten constraint's rule;
- model calls whose request or answer holds any of the forgotten content;
- checkpoint code, which is re-rendered from the log without it;
- rules written in a notebook whose source holds it (or whose ``rule`` event goes): taken out of
  force and their source erased from every stored rules segment (rule source is content, and a
  rule cannot be re-rendered without it; refusing instead would leave the user to find the rule).

``forget`` appends one ``forget`` event that names what it erased (positions only, never the
content), and in the same transaction replaces each payload by ``{"forgotten": N}`` and erases
its salt (see ``core.chain``), then rewrites the DuckDB file so no erased byte remains in its free
blocks. Schema events (type and field names) are structure, not content, and stay. Sources stay
too, so re-ingesting the original file does not bring a forgotten fact back.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import duckdb
import orjson

from uac_kernel.checkpoints.codegen import RULES, render_segments, segment_part, shipped
from uac_kernel.checkpoints.snapshot import drop_snapshots
from uac_kernel.core.chain import ERASED, content_hash, digest, new_salt
from uac_kernel.core.constraint_names import legacy_rule_name
from uac_kernel.core.display import plural, printable, shorten
from uac_kernel.core.errors import QueryError
from uac_kernel.core.segments import erase_rules
from uac_kernel.log.store import LoggedEvent, NewEvent, Store, owe_compaction
from uac_kernel.rules.engine import Rule
from uac_kernel.state.fold import State
from uac_kernel.state.mentions import fold_text as fold

__all__ = [
    "ForgetPlan",
    "follow_forgets",
    "forget",
    "forgotten",
    "plan_forget",
]

# A text to forget shorter than this would match too much to be what someone meant.
MIN_TEXT = 3
# How events.py names an event given without a source: a hash of its payload.
STAND_IN_SOURCE = "sha256:"
# How a notebook rule's event is named: its name and a hash of its source (see
# ``Workbench.define_rule``), which would confirm a guess of the source.
RULE_SOURCE = "rule:"
# Content pieces shorter than this are not looked for in model calls (a "1" or "yes" would
# match every call).
MIN_NEEDLE = 4


@dataclass
class ForgetPlan:
    """What ``forget`` will erase. Its ``lines`` show the content (to the person who asked);
    the ``forget`` event logged records only positions and counts."""

    user: str
    by: str
    events: list[LoggedEvent] = field(default_factory=list)
    records: list[tuple[str, str]] = field(default_factory=list)
    # The erased events whose source goes too (see ``forget``), by seq.
    sources: list[int] = field(default_factory=list)
    # Type and field names that hold the text: structure, not content, so they stay.
    names: list[str] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    checkpoints: list[int] = field(default_factory=list)
    # Notebook rules taken out of force, their source erased; and each stored rules segment
    # rewritten without them, as (version, text).
    rules: list[str] = field(default_factory=list)
    rule_segments: list[tuple[int, str]] = field(default_factory=list)
    # Of those, the rules in force (``in_force``) whose source holds the text.
    holding: list[str] = field(default_factory=list)

    def names_note(self) -> str:
        """What a forget leaves of the text, if any: the names it is part of."""
        if not self.names:
            return ""
        shown = ", ".join(printable(n) for n in self.names[:5])
        return (
            f"the name(s) {shown} hold the text and stay: type and field names are the "
            "schema, not content"
        )

    @property
    def empty(self) -> bool:
        return not self.events and not self.calls and not self.rules

    def summary(self) -> str:
        kinds: dict[str, int] = {}
        for ev in self.events:
            kinds[ev.kind] = kinds.get(ev.kind, 0) + 1
        parts = [plural(n, k) for k, n in sorted(kinds.items())] or ["no events"]
        text = (
            f"{', '.join(parts)} ({plural(len(self.records), 'record')}), "
            f"{plural(len(self.calls), 'model call')}, "
            f"code of {plural(len(self.checkpoints), 'checkpoint')} to re-render"
        )
        if self.rules:
            text += (
                f"; rule(s) {', '.join(printable(n) for n in self.rules)} taken out of force, "
                "their source erased (define them again without it)"
            )
        return f"{text}; {self.names_note()}" if self.names else text

    def lines(self) -> list[str]:
        """One line per record, event and call, control characters escaped for a terminal."""
        out = [f"{t} {k!r}" for t, k in self.records]
        for ev in self.events:
            text = ev.payload.get("text") if ev.kind == "utterance" else None
            shown = text if isinstance(text, str) else orjson.dumps(ev.payload).decode()
            out.append(
                printable(f"seq {ev.seq} {ev.kind} {ev.source or ''}: {shorten(shown, 100)}")
            )
        out += [f"model call {c}" for c in self.calls]
        return out


def plan_forget(
    store: Store,
    user: str,
    *,
    type: str | None = None,
    key: str | None = None,
    source: str | None = None,
    text: str | None = None,
    in_force: dict[str, str] | None = None,
) -> ForgetPlan:
    """What forgetting a record (``type`` and ``key``), a ``source`` or a ``text`` erases;
    ``in_force``: the source of each notebook rule in force, by name (a rule holding the text
    goes too)."""
    given = [n for n, v in (("type", type), ("source", source), ("text", text)) if v is not None]
    if len(given) != 1 or (type is None) != (key is None):
        raise QueryError(
            "say what to forget with exactly one of: a record (type and key), a source, or a text"
        )
    if text is not None and len(text.strip()) < MIN_TEXT:
        raise QueryError(f"a text to forget needs at least {MIN_TEXT} characters; give more of it")
    if text is not None and not _is_unicode(text):
        raise QueryError(
            "the text to forget is not valid Unicode (a terminal sent bytes in another "
            "encoding?); type it again in UTF-8"
        )
    by = "record" if type is not None else "source" if source is not None else "text"
    events = list(store.events(user))
    needle = fold(text) if text is not None else None

    def holds_text(ev: LoggedEvent) -> bool:
        if needle is None:
            return False
        # A binding's concept, type and field are names (structure, which stays); its reason
        # is content.
        held = (
            ev.payload.get("binding", {}).get("reason", "")
            if ev.kind == "vocabulary"
            else ev.payload
        )
        return needle in fold(ev.source or "") or any(needle in fold(s) for s in _strings(held))

    def record_of(ev: LoggedEvent) -> tuple[str, str] | None:
        if ev.kind == "fact":
            return (str(ev.payload.get("type")), str(ev.payload.get("key")))
        return None

    def constraint_of(ev: LoggedEvent) -> str | None:
        return str(ev.payload.get("key")) if ev.kind == "constraint" else None

    def binding_key(ev: LoggedEvent) -> tuple[str, str, str | None] | None:
        if ev.kind != "vocabulary":
            return None
        b = ev.payload["binding"]
        return (b.get("concept") or b.get("role"), b.get("type"), b.get("field"))

    seeds = [
        ev
        for ev in events
        if ev.kind
        in (
            "utterance",
            "fact",
            "alert",
            "review",
            "rule",
            "extraction",
            "constraint",
            "vocabulary",
        )
        and (
            (by == "record" and record_of(ev) == (type, key))
            or (by == "source" and ev.source == source)
            or holds_text(ev)
        )
    ]
    records = {r for ev in seeds if (r := record_of(ev)) is not None}
    # An alert that holds the text goes with the records it rests on: a rule would raise it
    # again from them at once.
    for ev in seeds:
        if ev.kind == "alert":
            records.update(
                (str(e.get("type")), str(e.get("key"))) for e in ev.payload.get("evidence") or ()
            )
    constraints = {k for ev in seeds if (k := constraint_of(ev)) is not None}
    # A binding goes whole, every event of its key: a later update or retract of it alone
    # would not fold.
    bindings = {b for ev in seeds if (b := binding_key(ev)) is not None}
    said = {ev.source for ev in seeds if ev.kind == "utterance" and ev.source}
    for ev in events:  # records and constraints derived from a forgotten utterance go with it
        if ev.kind == "fact" and said & set(ev.payload.get("derived_from") or ()):
            records.add((str(ev.payload["type"]), str(ev.payload["key"])))
        elif ev.kind == "constraint" and said & set(ev.payload.get("derived_from") or ()):
            constraints.add(str(ev.payload["key"]))
    origins = {
        s
        for ev in events
        if record_of(ev) in records or constraint_of(ev) in constraints
        for s in ev.payload.get("derived_from") or ()
    }
    # A forgotten constraint's alerts go with it: they were raised by its rule.
    rules = {
        ev.payload.get("rule") or legacy_rule_name(str(ev.payload["key"]))
        for ev in events
        if ev.kind == "constraint"
        and ev.payload.get("op") == "add"
        and constraint_of(ev) in constraints
    }
    chosen: dict[int, LoggedEvent] = {ev.seq: ev for ev in seeds}
    for ev in events:
        if (
            record_of(ev) in records
            or constraint_of(ev) in constraints
            or binding_key(ev) in bindings
            or (ev.kind == "alert" and ev.payload.get("rule") in rules)
            or (ev.kind == "utterance" and ev.source in origins)
            or (
                ev.kind == "alert"
                and any(
                    (e.get("type"), e.get("key")) in records
                    for e in ev.payload.get("evidence") or ()
                )
            )
            # a hold's reason names the records it would change
            or (ev.kind == "review" and any(k in str(ev.payload.get("reason")) for _, k in records))
        ):
            chosen[ev.seq] = ev
    # A clear's reason names the record that settled it (its key in quotes, with the values it
    # changed), or quotes the alert that replaced it: that alert goes whole, raised and
    # cleared, so no raise is left standing without its clear.
    told = {
        ev.payload.get("id")
        for ev in events
        if ev.kind == "alert" and any(f"'{k}'" in str(ev.payload.get("reason")) for _, k in records)
    }
    chosen.update(
        (ev.seq, ev) for ev in events if ev.kind == "alert" and ev.payload.get("id") in told
    )
    plan = ForgetPlan(user, by, [chosen[s] for s in sorted(chosen)], sorted(records))
    if needle is not None:
        plan.names = _names_holding(store, user, needle)
    plan.sources = [
        ev.seq
        for ev in plan.events
        if ev.source
        and (
            ev.source.startswith(STAND_IN_SOURCE)
            or (ev.kind == "rule" and ev.source.startswith(RULE_SOURCE))
            or (needle and needle in fold(ev.source))
        )
    ]
    _plan_rules(store, plan, needle, in_force or {})
    plan.calls = _calls_holding(store, user, _needles(plan, text))
    if plan.events:
        first = plan.events[0].seq
        # by the user's own event numbers: a checkpoint's seq is the store's where it was taken
        plan.checkpoints = [
            int(r[0])
            for r in store.con.execute(
                "SELECT version FROM checkpoints WHERE user_id = $u AND event_seq >= "
                "(SELECT user_seq FROM events WHERE user_id = $u AND seq = $s) ORDER BY version",
                {"u": user, "s": first},
            ).fetchall()
        ]
    return plan


def _plan_rules(
    store: Store, plan: ForgetPlan, needle: str | None, in_force: dict[str, str]
) -> None:
    """The notebook rules that go: those whose ``rule`` event goes, and those whose source holds
    the text, in force or in a stored rules segment; and each such segment without them."""
    sources = {
        fold(str(ev.payload.get("source", ""))).strip() for ev in plan.events if ev.kind == "rule"
    }
    names = {str(ev.payload.get("name")) for ev in plan.events if ev.kind == "rule"}

    def holds(block: str) -> bool:
        folded = fold(block)
        return (needle is not None and needle in folded) or folded.strip() in sources

    plan.holding = sorted(n for n, source in in_force.items() if holds(source))
    names.update(plan.holding)
    going = _rules_going(store, plan)
    for version, text in store.con.execute(
        "SELECT version, text FROM checkpoint_segments WHERE user_id = ? AND segment = ? "
        "ORDER BY version",
        [plan.user, RULES],
    ).fetchall():
        # A segment renders each rule as the function was defined, which need not be the source
        # its event logged: a rule also goes by name where its logged source goes (as verify
        # checks it).
        by_name = going.get(int(version), set())

        def goes(name: str, block: str, by_name: set[str] = by_name) -> bool:
            return name in by_name or holds(block)

        erased, gone = erase_rules(str(text), goes)
        if gone:
            plan.rule_segments.append((int(version), erased))
            names.update(gone)
    plan.rules = sorted(names)
    if needle is not None:  # a rule's name is structure, as type and field names are: it stays
        plan.names += [n for n in plan.rules if needle in fold(n) and n not in plan.names]


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def _names_holding(store: Store, user: str, needle: str) -> list[str]:
    """The user's type and field names that hold ``needle`` (folded)."""
    found: list[str] = []
    for ev in store.events(user, kinds=["schema"]):
        for name in (ev.payload.get("type"), ev.payload.get("field")):
            if isinstance(name, str) and needle in fold(name) and name not in found:
                found.append(name)
    return found


def _needles(plan: ForgetPlan, text: str | None) -> set[str]:
    """The pieces of forgotten content to look for in model calls: the text, utterance texts,
    record keys and the string values of forgotten facts."""
    found: set[str] = {text} if text else set()
    for ev in plan.events:
        if ev.kind == "utterance":
            found.add(str(ev.payload.get("text", "")))
        elif ev.kind == "fact":
            found.add(str(ev.payload.get("key", "")))
            found.update(v for v in _strings(ev.payload.get("fields") or {}) if isinstance(v, str))
        elif ev.kind == "constraint":
            found.add(str(ev.payload.get("key", "")))
            found.add(str((ev.payload.get("constraint") or {}).get("title", "")))
        elif ev.kind == "vocabulary":
            found.add(str(ev.payload["binding"].get("reason", "")))
    return {n for n in found if len(n) >= MIN_NEEDLE}


def _calls_holding(store: Store, user: str, needles: set[str]) -> list[int]:
    """Calls of ``user`` whose texts hold a needle: as written, or inside the JSON they are
    (strings decoded, so ``\\u00e9`` escapes and quotes match too), in any case or Unicode
    form."""
    if not needles:
        return []
    forms = {fold(n) for n in needles}
    out = []
    for call_id, *texts in store.con.execute(
        "SELECT call_id, request, response, content, error FROM model_calls "
        "WHERE user_id = ? AND salt <> '' ORDER BY call_id",
        [user],
    ).fetchall():
        if any(f in piece for piece in _pieces(texts) for f in forms):
            out.append(int(call_id))
    return out


def _pieces(texts: Iterable[Any]) -> Iterator[str]:
    """The folded texts of a call, and every string inside those that are JSON (a model's
    answer is JSON inside the response's JSON, so decode twice)."""
    todo = [str(t) for t in texts]
    while todo:
        text = todo.pop()
        yield fold(text)
        if text[:1] in ("{", "[", '"'):
            with contextlib.suppress(orjson.JSONDecodeError):
                todo.extend(_strings(orjson.loads(text)))


def forget(store: Store, plan: ForgetPlan) -> LoggedEvent | None:
    """Erase what ``plan`` names; return the ``forget`` event (None if there was nothing)."""
    if plan.empty:
        return None
    user = plan.user
    with store.writing():
        erased = {ev.seq for ev in plan.events}
        segments, added = _rerendered(store, user, erased, plan.checkpoints)
        segments += [(v, RULES, text) for v, text in plan.rule_segments]
        payload = {
            "by": plan.by,
            "events": _user_seqs(store, erased),
            "records": len(plan.records),
            "calls": plan.calls,
            "segments": [[v, s, digest(t)] for v, s, t in segments],
            "added_segments": [[v, s, digest(t)] for v, s, t in added],
            # the notebook rules whose logged source went, by name (``verify`` checks that no
            # stored rules segment still defines one from then)
            "rules": [
                [u, str(ev.payload.get("name"))]
                for u, ev in zip(_user_seqs(store, erased), plan.events, strict=True)
                if ev.kind == "rule"
            ],
            # every notebook rule taken out of force, by name (a name is structure, as in
            # ``names_note``): a workbench in another process holding one in force takes it
            # out when it catches up with this event (``Workbench._load``)
            "out_of_force": plan.rules,
        }
        last = store.con.execute("SELECT max(ts) FROM events WHERE user_id = ?", [user]).fetchone()
        ts: datetime = last[0] if last and last[0] else datetime(1970, 1, 1)

        def erase(con: duckdb.DuckDBPyConnection) -> None:
            # A snapshot holds the erased values too: the next open folds the log again.
            drop_snapshots(con, user)
            owe_compaction(con)
            con.execute(
                "UPDATE events SET payload = ?, salt = '' WHERE user_id = ? "
                "AND seq IN (SELECT unnest(?))",
                [ERASED, user, sorted(erased)],
            )
            # A stand-in source is a hash of the payload (it would confirm a guess of it), and
            # a source may hold the text itself; other sources stay, as ids of what was said.
            con.execute(
                "UPDATE events SET source = NULL WHERE user_id = ? AND seq IN (SELECT unnest(?))",
                [user, sorted(plan.sources)],
            )
            con.execute(
                "UPDATE model_calls SET request = '', response = '', content = '', error = '', "
                "request_key = '', salt = '' WHERE user_id = ? AND call_id IN (SELECT unnest(?))",
                [user, plan.calls],
            )
            for version, segment, text in segments:
                con.execute(
                    "UPDATE checkpoint_segments SET text = ?, salt = '' WHERE user_id = ? "
                    "AND version = ? AND segment = ?",
                    [text, user, version, segment],
                )
            if added:
                rows = []
                for version, segment, text in added:
                    salt = new_salt()
                    rows.append((user, version, segment, text, "", content_hash(salt, text)))
                appender = con.appender("checkpoint_segments")
                appender.append_rows(rows)
                appender.flush()

        logged = store.append([NewEvent(ts, "forget", user, payload)], within=erase)
    store.compact()
    return logged[0]


def _rules_going(store: Store, plan: ForgetPlan) -> dict[int, set[str]]:
    """By the version of each stored rules segment: the rules whose latest logged source, at a
    checkpoint that reads that segment, is an event the plan erases."""
    going = set(_user_seqs(store, {ev.seq for ev in plan.events if ev.kind == "rule"}))
    if not going:
        return {}
    logged = store.con.execute(
        "SELECT user_seq, json_extract_string(payload, '$.name') FROM events "
        "WHERE user_id = ? AND kind = 'rule' ORDER BY user_seq",
        [plan.user],
    ).fetchall()
    stored = {
        int(r[0])
        for r in store.con.execute(
            "SELECT version FROM checkpoint_segments WHERE user_id = ? AND segment = ?",
            [plan.user, RULES],
        ).fetchall()
    }
    out: dict[int, set[str]] = {}
    segment = None  # a version without its own rules segment reads the last one stored
    for version, event_seq in store.con.execute(
        "SELECT version, event_seq FROM checkpoints WHERE user_id = ? ORDER BY version",
        [plan.user],
    ).fetchall():
        segment = int(version) if int(version) in stored else segment
        latest = {str(name): int(n) for n, name in logged if int(n) <= int(event_seq)}
        if segment is not None:
            out.setdefault(segment, set()).update(n for n, at in latest.items() if at in going)
    return out


def _user_seqs(store: Store, seqs: set[int]) -> list[int]:
    rows = store.con.execute(
        "SELECT user_seq FROM events WHERE seq IN (SELECT unnest(?)) ORDER BY seq", [sorted(seqs)]
    ).fetchall()
    return [int(r[0]) for r in rows]


def _rerendered(
    store: Store, user: str, erased: set[int], versions: list[int]
) -> tuple[list[tuple[int, str, str]], list[tuple[int, str, str]]]:
    """The code of each checkpoint in ``versions``, re-rendered from the log without the erased
    events: (version, segment, text) to overwrite where the version stored that segment, and to
    add where it inherited it from an earlier version. The rules segment is kept as stored.

    Incremental, as checkpoints are: at each version only the segments the new fold changed
    since the previous version, and those the version stored, can differ from what the store
    holds now; any other segment was settled at an earlier version."""
    if not versions:
        return [], []
    points = dict(
        store.con.execute(
            "SELECT c.version, coalesce(e.seq, 0) FROM checkpoints c LEFT JOIN "
            "(SELECT seq, user_seq FROM events WHERE user_id = $u) e "
            "ON e.user_seq = c.event_seq WHERE c.user_id = $u ORDER BY c.version",
            {"u": user},
        ).fetchall()
    )
    stored: dict[int, dict[str, str]] = {}
    for version, segment, text in store.con.execute(
        "SELECT version, segment, text FROM checkpoint_segments WHERE user_id = ?", [user]
    ).fetchall():
        stored.setdefault(int(version), {})[str(segment)] = str(text)
    state = State(user)
    events = (ev for ev in store.events(user) if ev.seq not in erased)
    pending: LoggedEvent | None = next(events, None)
    effective: dict[str, str] = {}
    overwrite: list[tuple[int, str, str]] = []
    add: list[tuple[int, str, str]] = []
    for version in sorted(points):
        while pending is not None and pending.seq <= points[version]:
            state.apply(pending)
            pending = next(events, None)
        changed = state.take_dirty()
        here = stored.get(version, {})
        effective.update(here)
        if version not in versions:
            continue
        parts = changed | {p for name in here if (p := segment_part(state, name)) is not None}
        fresh = render_segments(state, parts, ())
        fresh.pop(RULES, None)
        for segment in sorted(set(fresh) | set(here)):
            if segment == RULES:
                continue
            text = fresh.get(segment, "")
            if effective.get(segment) == text:
                continue
            (overwrite if segment in here else add).append((version, segment, text))
            effective[segment] = text
    return overwrite, add


def follow_forgets(con: duckdb.DuckDBPyConnection, users: list[str], *, staged: str) -> int:
    """Erase in the store what a forget in the fleet erased of rows the store already holds
    (the fleet's chain passes through the store's, so it holds that forget event): the same
    erased values, as ``forget`` writes them. ``staged`` prefixes the tables holding the rows
    about to be imported (``<staged>events`` …). Returns the rows changed."""
    if not users:
        return 0
    changed = 0
    for sql in (
        "UPDATE events SET payload = i.payload, source = i.source, salt = '' "
        f"FROM {staged}events i WHERE events.user_id = i.user_id "
        "AND events.user_seq = i.user_seq AND i.salt = '' AND events.salt <> ''",
        "UPDATE model_calls SET request = i.request, response = i.response, "
        "content = i.content, error = i.error, request_key = i.request_key, salt = '' "
        f"FROM {staged}model_calls i WHERE model_calls.user_id = i.user_id "
        "AND model_calls.call_id = i.call_id AND i.salt = '' AND model_calls.salt <> ''",
        "UPDATE checkpoint_segments SET text = i.text, salt = '' "
        f"FROM {staged}checkpoint_segments i WHERE checkpoint_segments.user_id = i.user_id "
        "AND checkpoint_segments.version = i.version AND checkpoint_segments.segment = i.segment "
        "AND i.salt = '' AND checkpoint_segments.salt <> ''",
        # code a forget re-rendered into a checkpoint that had inherited it
        f"INSERT INTO checkpoint_segments SELECT i.* FROM {staged}checkpoint_segments i "
        "WHERE i.salt = '' AND i.version <= (SELECT coalesce(max(version), 0) FROM checkpoints c "
        "WHERE c.user_id = i.user_id) AND NOT EXISTS (SELECT 1 FROM checkpoint_segments s "
        "WHERE s.user_id = i.user_id AND s.version = i.version AND s.segment = i.segment)",
    ):
        row = con.execute(sql).fetchone()  # the number of rows changed
        changed += int(row[0]) if row else 0
    if changed:
        owe_compaction(con)
        for user in users:
            drop_snapshots(con, user)  # a snapshot may hold what was erased
    return changed


def forgotten(
    store: Store, user: str, after_seq: int, rules: Iterable[Rule], defined: Mapping[str, int]
) -> set[str]:
    """The rules in force that a forget logged after ``after_seq`` took out of force: a reload
    carries the rules in force over, and must not carry one whose source a forget in another
    process erased (its next checkpoint would render the source back).

    A rule defined in the session (``defined``: its name → the user_seq of the ``rule`` event
    that logged it) goes only if the event that logged its definition went (a clean
    redefinition stays); a shipped rule never goes; any other own rule the forget named goes
    (its source is known only in the session)."""
    library = shipped(rules)
    out: set[str] = set()
    for ev in store.events(user, after_seq=after_seq, kinds=["forget"]):
        erased = {int(u) for u, _name in ev.payload.get("rules") or ()}
        for name in map(str, ev.payload.get("out_of_force") or ()):
            logged = defined.get(name)
            if logged is not None:
                if logged in erased:
                    out.add(name)
            elif name not in library:
                out.add(name)
    return out
