"""Checking a store: each user's chains of events, model calls and checkpoints, against each
other and against heads kept elsewhere.

``verify(store, user)`` reads only that user's rows; ``verify(store)`` reads every user's and
checks the store-wide ``seq`` too. A row whose content was erased by ``forget`` passes only if
a ``forget`` event of the same user names it; any other change, a missing or repeated row, a
re-hashed chain that no longer passes through a head the user kept (``uac head``), or a call or
checkpoint naming events the log no longer holds is reported with where it is.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from uac_kernel.core.chain import (
    ERASED,
    GENESIS,
    call_hash,
    checkpoint_hash,
    content_hash,
    digest,
    event_hash,
)
from uac_kernel.core.errors import StoreError
from uac_kernel.core.segments import RULES, rule_names
from uac_kernel.log.store import Store

__all__ = ["Head", "VerifyReport", "heads", "parse_heads", "verify", "verify_users"]

_FETCH = 50_000


@dataclass(frozen=True)
class VerifyReport:
    """What ``verify`` checked, and the first problem found (``ok`` False)."""

    ok: bool
    events: int
    first_bad_seq: int | None = None
    problem: str = ""
    users: int = 0
    calls: int = 0
    checkpoints: int = 0
    forgotten: int = 0
    heads: int = 0

    def summary(self, where: str) -> str:
        if not self.ok:
            at = f" at event {self.first_bad_seq}" if self.first_bad_seq is not None else ""
            return f"{where}: integrity check failed{at}: {self.problem}"
        parts = [
            f"{self.events} events",
            f"{self.calls} model calls",
            f"{self.checkpoints} checkpoints",
        ]
        text = f"{where}: {', '.join(parts)} of {self.users} user(s) verified, hash chains intact"
        if self.forgotten:
            text += f"; {self.forgotten} erased by forget, each named by a forget event"
        if self.heads:
            text += f"; passes through {self.heads} kept head(s)"
        return text


@dataclass(frozen=True)
class Head:
    """A position in one user's three chains: how many events, calls and checkpoints, and the
    hash of the last of each. Its text form is what ``uac head`` prints."""

    events: int
    event_hash: str
    calls: int
    call_hash: str
    checkpoints: int
    checkpoint_hash: str

    def __str__(self) -> str:
        return (
            f"e{self.events}.{self.event_hash}-c{self.calls}.{self.call_hash}"
            f"-k{self.checkpoints}.{self.checkpoint_hash}"
        )

    @classmethod
    def parse(cls, text: str) -> Head:
        try:
            e, c, k = text.strip().split("-")
            (en, eh), (cn, ch), (kn, kh) = (p[1:].split(".") for p in (e, c, k))
            if (e[0], c[0], k[0]) != ("e", "c", "k") or any(len(h) != 64 for h in (eh, ch, kh)):
                raise ValueError
            return cls(int(en), eh, int(cn), ch, int(kn), kh)
        except ValueError:
            raise StoreError(
                f"{text.strip()[:80]!r} is not a head printed by `uac head` "
                "(e<N>.<hash>-c<N>.<hash>-k<N>.<hash>); copy it whole"
            ) from None


def heads(store: Store, user: str | None = None) -> dict[str, Head]:
    """Each user's (or one user's) current head."""
    out: dict[str, Head] = {}
    where, params = ("WHERE user_id = ?", [user]) if user is not None else ("", [])
    found: dict[str, dict[str, tuple[int, str]]] = {}
    for table, count in (("events", "events"), ("model_calls", "calls"), ("checkpoints", "k")):
        order = {"events": "seq", "model_calls": "call_id", "checkpoints": "version"}[table]
        rows = store.con.execute(
            f"SELECT user_id, count(*), arg_max(hash, {order}) FROM {table} {where} GROUP BY ALL",
            params,
        ).fetchall()
        for u, n, h in rows:
            found.setdefault(str(u), {})[count] = (int(n), str(h))
    for u in sorted(found):
        e, c, k = (found[u].get(name, (0, GENESIS)) for name in ("events", "calls", "k"))
        out[u] = Head(e[0], e[1], c[0], c[1], k[0], k[1])
    return out


def parse_heads(text: str, user: str | None) -> dict[str, Head]:
    """Heads from ``uac head``'s output: one ``HEAD<TAB>"user"`` line per user, or one bare
    head for ``user``."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) == 1 and "\t" not in lines[0]:
        if user is None:
            raise StoreError(
                "a bare head belongs to one user: pass --user USER with it "
                "(or pass the file `uac head` wrote for every user)"
            )
        return {user: Head.parse(lines[0])}
    out: dict[str, Head] = {}
    for n, line in enumerate(lines, 1):
        token, _, name = line.partition("\t")
        try:
            who = orjson.loads(name)
        except orjson.JSONDecodeError:
            who = None
        if not isinstance(who, str):
            raise StoreError(
                f'line {n} of the heads is not `HEAD<TAB>"user"` as `uac head` writes it'
            )
        out[who] = Head.parse(token)
    if user is not None:
        if user not in out:
            raise StoreError(f"the heads name no user {user!r}; pass a head of that user")
        return {user: out[user]}
    return out


def read_heads(value: str, user: str | None) -> dict[str, Head]:
    """``--head``: a file written by ``uac head``, or one head as text."""
    path = Path(value)
    if len(value) < 4096 and path.is_file():
        # utf-8-sig: a head file saved by Notepad or PowerShell starts with a byte order mark
        return parse_heads(path.read_text(encoding="utf-8-sig", errors="replace"), user)
    return parse_heads(value, user)


class _Broken(Exception):
    def __init__(self, problem: str, seq: int | None = None):
        super().__init__(problem)
        self.problem, self.seq = problem, seq


def verify(
    store: Store, user: str | None = None, kept: Mapping[str, Head] | None = None
) -> VerifyReport:
    """Check ``user``'s chains, or every user's and the store-wide ``seq``, and that each chain
    still passes through its ``kept`` head."""
    kept = dict(kept or {})
    checked_heads = len(kept)
    totals = {"events": 0, "calls": 0, "checkpoints": 0, "forgotten": 0, "users": 0}
    try:
        forgets = _forget_events(store, user)
        for name, (ev, ca, po, se) in _per_user(store, user):
            totals["users"] += 1
            forgot, head = forgets.get(name, _Forgotten()), kept.pop(name, None)
            _verify_user(name, ev, ca, po, se, forgot, head, totals)
        if user is not None and totals["users"] == 0 and not kept:
            raise _Broken(f"the store holds nothing of user {user!r}")
        for name in kept:
            raise _Broken(
                f"user {name!r} of the kept head has no events in the store: removed, or a head "
                "of another store"
            )
        if user is None:
            _check_seq(store)
        if store.compaction_owed:
            raise _Broken(
                "the file may still hold bytes a forget erased (the forget, or an import "
                "carrying one, was cut short before it rewrote the file); run any command that "
                "writes to the store, e.g. `uac checkpoint`, to rewrite it"
            )
    except _Broken as exc:
        return VerifyReport(False, totals["events"], exc.seq, exc.problem, users=totals["users"])
    return VerifyReport(
        True,
        totals["events"],
        users=totals["users"],
        calls=totals["calls"],
        checkpoints=totals["checkpoints"],
        forgotten=totals["forgotten"],
        heads=checked_heads,
    )


def _per_user(
    store: Store, user: str | None
) -> Iterator[tuple[str, tuple[list[tuple[Any, ...]], ...]]]:
    """Each user's (or ``user``'s) rows of events, calls, checkpoints and checkpoint segments,
    in chain order, user by user in one pass over each table."""
    events = _grouped(
        store,
        "SELECT user_id, seq, user_seq, recorded_at, ts, kind, source, payload, salt, "
        "payload_hash, hash FROM events",
        "seq",
        user,
    )
    calls = _grouped(
        store,
        "SELECT user_id, call_id, created_at, purpose, model, base_url, request, response, "
        "content, error, request_key, tokens_in, tokens_out, latency_ms, outcome, salt, content_hash, "
        "event_seq, event_hash, hash FROM model_calls",
        "call_id",
        user,
    )
    points = _grouped(
        store,
        "SELECT user_id, version, seq, records, event_seq, event_hash, hash FROM checkpoints",
        "version",
        user,
    )
    segments = _grouped(
        store,
        "SELECT user_id, version, segment, text, salt, text_hash FROM checkpoint_segments",
        "version, segment",
        user,
    )
    streams = [events, calls, points, segments]
    current: list[tuple[str, list[tuple[Any, ...]]] | None] = [next(s, None) for s in streams]
    while any(c is not None for c in current):
        name = min(c[0] for c in current if c is not None)
        groups: list[list[tuple[Any, ...]]] = []
        for i, c in enumerate(current):
            if c is not None and c[0] == name:
                groups.append(c[1])
                current[i] = next(streams[i], None)
            else:
                groups.append([])
        yield name, tuple(groups)


def verify_users(store: Store) -> Iterator[tuple[str, str]]:
    """Check every user's chains in one pass over each table, going on past a broken one:
    yields each user and the first problem of their chains ('' when intact). The store-wide
    ``seq`` is not checked (a fleet's partitions keep the numbers of the stores they came
    from)."""
    try:
        forgets = _forget_events(store, None)
    except _Broken:  # one forget event is not as written: find whose, and check the others
        forgets = {}
        for (who,) in store.con.execute(
            "SELECT DISTINCT user_id FROM events WHERE kind = 'forget'"
        ).fetchall():
            # a user whose forget event was changed: their chain walk reports it
            with contextlib.suppress(_Broken):
                forgets.update(_forget_events(store, str(who)))
    totals = {"events": 0, "calls": 0, "checkpoints": 0, "forgotten": 0, "users": 0}
    for name, (ev, ca, po, se) in _per_user(store, None):
        try:
            _verify_user(name, ev, ca, po, se, forgets.get(name, _Forgotten()), None, totals)
        except _Broken as exc:
            yield name, exc.problem
        else:
            yield name, ""


@dataclass
class _Forgotten:
    """What a user's forget events name, each with the ``user_seq`` of the forget event that
    names it (a forget event may name only what came before it), and for re-rendered code the
    digest of the text it wrote."""

    events: dict[int, int] = field(default_factory=dict)
    calls: dict[int, int] = field(default_factory=dict)
    segments: dict[tuple[int, str], tuple[int, str]] = field(default_factory=dict)
    # Segments a forget added to a checkpoint that had inherited them: not part of its hash.
    added: dict[tuple[int, str], tuple[int, str]] = field(default_factory=dict)
    # The names of notebook rules whose logged source a forget erased, by that rule event's
    # user_seq.
    rules: dict[int, str] = field(default_factory=dict)


def _check_rules(
    who: str,
    events: list[tuple[Any, ...]],
    points: list[tuple[Any, ...]],
    segments: list[tuple[Any, ...]],
    erased: dict[int, str],
) -> None:
    """No checkpoint's rules segment may still define a notebook rule whose latest logged
    source at that checkpoint a forget erased (it would hold what was forgotten)."""
    logged: list[tuple[int, str]] = [(n, name) for n, name in erased.items()]
    for _seq, user_seq, _r, _ts, kind, _src, payload, salt, _ph, _h in events:
        if kind == "rule" and salt != "":
            logged.append((int(user_seq), str(orjson.loads(payload).get("name"))))
    logged.sort()
    rules_text = {int(v): str(t) for v, seg, t, _salt, _h in segments if seg == RULES}
    text = ""
    for version, _seq, _records, event_seq, _head, _h in points:
        text = rules_text.get(int(version), text)  # a version inherits the segment it did not store
        latest = {name: n for n, name in logged if n <= int(event_seq)}
        for name in rule_names(text):
            if latest.get(name) in erased:
                raise _Broken(
                    f"{who}: the code of checkpoint {version} still defines rule {name!r}, whose "
                    "source a forget erased; run the same `uac forget` again to erase it there"
                )


def _forget_events(store: Store, user: str | None) -> dict[str, _Forgotten]:
    """What each user's ``forget`` events name as erased. A forget event is trusted only if its
    payload is the one written (the chain walk checks its link)."""
    where, params = ("AND user_id = ?", [user]) if user is not None else ("", [])
    out: dict[str, _Forgotten] = {}
    for u, seq, user_seq, src, payload, salt, payload_hash in store.con.execute(
        "SELECT user_id, seq, user_seq, source, payload, salt, payload_hash FROM events "
        f"WHERE kind = 'forget' {where} ORDER BY seq",
        params,
    ).fetchall():
        if salt == "" or content_hash(salt, payload, src or "") != payload_hash:
            raise _Broken(f"user {u!r}: event {seq} was changed after it was written", seq)
        try:
            body = orjson.loads(payload)
            f = out.setdefault(str(u), _Forgotten())
            f.events.update((int(n), user_seq) for n in body["events"])
            f.calls.update((int(n), user_seq) for n in body["calls"])
            for v, name, digest in body["segments"]:
                f.segments[(int(v), str(name))] = (user_seq, str(digest))
            for v, name, digest in body["added_segments"]:
                f.added[(int(v), str(name))] = (user_seq, str(digest))
            f.rules.update((int(n), str(name)) for n, name in body.get("rules", ()))
        except (orjson.JSONDecodeError, TypeError, ValueError, KeyError, AttributeError):
            raise _Broken(f"user {u!r}: forget event {seq} is not one uac wrote", seq) from None
    return out


def _grouped(
    store: Store, select: str, order: str, user: str | None
) -> Iterator[tuple[str, list[tuple[Any, ...]]]]:
    where, params = (" WHERE user_id = ?", [user]) if user is not None else ("", [])
    cur = store.con.cursor()
    cur.execute(f"{select}{where} ORDER BY user_id, {order}", params)

    def rows() -> Iterator[tuple[Any, ...]]:
        while chunk := cur.fetchmany(_FETCH):
            yield from chunk

    for name, group in itertools.groupby(rows(), key=lambda r: r[0]):
        yield str(name), [r[1:] for r in group]


def _verify_user(
    user: str,
    events: list[tuple[Any, ...]],
    calls: list[tuple[Any, ...]],
    points: list[tuple[Any, ...]],
    segments: list[tuple[Any, ...]],
    forgotten: _Forgotten,
    kept: Head | None,
    totals: dict[str, int],
) -> None:
    who = f"user {user!r}"
    erased_events = forgotten.events
    links: list[str] = []
    prev = GENESIS
    for n, (seq, user_seq, rec, ts, kind, src, payload, salt, payload_hash, h) in enumerate(
        events, 1
    ):
        if user_seq != n:
            raise _Broken(f"{who}: event {n} of the user's chain is missing or repeated", seq)
        if salt == "":
            by = erased_events.get(user_seq, 0)
            if by <= user_seq:
                raise _Broken(
                    f"{who}: the payload of event {seq} was erased, but no forget event after "
                    "it names it",
                    seq,
                )
            if payload != ERASED:
                raise _Broken(f"{who}: erased event {seq} holds something again", seq)
            totals["forgotten"] += 1
        elif content_hash(salt, payload, src or "") != payload_hash:
            raise _Broken(f"{who}: event {seq} was changed after it was written", seq)
        if event_hash(prev, user_seq, rec, ts, kind, user, payload_hash) != h:
            raise _Broken(f"{who}: event {seq} was changed after it was written", seq)
        prev = h
        links.append(h)
    totals["events"] += len(events)

    def names_event(what: str, event_seq: int, head: str) -> None:
        if event_seq > len(links):
            raise _Broken(
                f"{who}: {what} was made when the user's log held {event_seq} events, but it "
                f"holds {len(links)}: events were removed from the end"
            )
        if (links[event_seq - 1] if event_seq else GENESIS) != head:
            raise _Broken(f"{who}: {what} names event {event_seq} with another hash: the log "
                          "was rewritten")  # fmt: skip

    erased_calls = forgotten.calls
    prev = GENESIS
    call_links: list[str] = []
    for row in calls:
        call_id, created, purpose, model, base_url, req, resp, content, error, key = row[:10]
        tokens_in, tokens_out, latency, outcome, salt, chash, event_seq, head, h = row[10:]
        if salt == "":
            if erased_calls.get(call_id, 0) <= event_seq:
                raise _Broken(
                    f"{who}: model call {call_id} was erased, but no forget event after it names it"
                )
            if (req, resp, content, error, key) != ("", "", "", "", ""):
                raise _Broken(f"{who}: erased model call {call_id} holds something again")
            totals["forgotten"] += 1
        elif content_hash(salt, req, resp, content, error) != chash:
            raise _Broken(f"{who}: model call {call_id} was changed after it was recorded")
        link = call_hash(
            prev, call_id, created, user, purpose, model, base_url, tokens_in, tokens_out,
            latency, outcome, event_seq, head, chash,
        )  # fmt: skip
        if link != h:
            raise _Broken(f"{who}: model call {call_id} was changed, removed or re-ordered")
        names_event(f"model call {call_id}", event_seq, head)
        prev = h
        call_links.append(h)
    totals["calls"] += len(calls)

    taken_at = {version: event_seq for version, _seq, _records, event_seq, _h, _l in points}
    by_version: dict[int, dict[str, str]] = {}
    for version, segment, text, salt, text_hash in segments:
        if salt == "":
            # Code a forget re-rendered: named by a forget event after the checkpoint, with the
            # digest of exactly this text.
            named = forgotten.added.get((version, segment)) or forgotten.segments.get(
                (version, segment)
            )
            if named is None or named[0] <= taken_at.get(version, 0):
                raise _Broken(
                    f"{who}: checkpoint {version}'s code was erased, but no forget event after "
                    "it names it"
                )
            if digest(text) != named[1]:
                raise _Broken(f"{who}: the code of checkpoint {version} was changed after a forget")
            totals["forgotten"] += 1
            if (version, segment) in forgotten.added:
                continue
        elif content_hash(salt, text) != text_hash:
            raise _Broken(f"{who}: the code of checkpoint {version} was changed after it was taken")
        by_version.setdefault(version, {})[segment] = text_hash
    if forgotten.rules:
        _check_rules(who, events, points, segments, forgotten.rules)
    prev = GENESIS
    point_links: list[str] = []
    for n, (version, seq, records, event_seq, head, h) in enumerate(points, 1):
        if version != n:
            raise _Broken(f"{who}: checkpoint {n} is missing or repeated")
        link = checkpoint_hash(
            prev, user, version, seq, event_seq, head, records, by_version.pop(version, {})
        )
        if link != h:
            raise _Broken(f"{who}: checkpoint {version} was changed after it was taken")
        names_event(f"checkpoint {version}", event_seq, head)
        prev = h
        point_links.append(h)
    if by_version:
        raise _Broken(f"{who}: code of checkpoint {min(by_version)} belongs to no checkpoint")
    totals["checkpoints"] += len(points)

    if kept is not None:
        for what, chain, n, h in (
            ("events", links, kept.events, kept.event_hash),
            ("model calls", call_links, kept.calls, kept.call_hash),
            ("checkpoints", point_links, kept.checkpoints, kept.checkpoint_hash),
        ):
            if n > len(chain):
                raise _Broken(
                    f"{who}: the kept head counts {n} {what}, the store holds {len(chain)}: "
                    "some were removed"
                )
            if (chain[n - 1] if n else GENESIS) != h:
                raise _Broken(
                    f"{who}: the {what} chain does not pass through the kept head: it was rewritten"
                )


def _check_seq(store: Store) -> None:
    row = store.con.execute(
        "SELECT count(*), coalesce(max(seq), 0), count(DISTINCT seq) FROM events"
    ).fetchone()
    n, last, distinct = row if row else (0, 0, 0)
    if not (n == last == distinct):
        raise _Broken(
            f"the store's event numbers are not 1..{last} once each ({n} events, "
            f"{distinct} distinct): events were removed or duplicated"
        )
