"""The hashes that make the store tamper-evident, in one place (the store, its migration and
``verify`` must compute them identically).

Each user has three chains: their events, their model calls and their checkpoints. A row's hash
covers its own columns and the previous row's hash of the same chain, and commits to its content
(an event's payload, a call's request and answer, a checkpoint segment's code) only through a
*salted* content hash. That is what lets ``forget`` erase content and the chain still verify:
the erased row keeps its content hash, its salt is erased with the content (so the hash can no
longer confirm a guess of what it held), and a later ``forget`` event in the user's chain names
the row. An erased row that no ``forget`` event names is tampering.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Callable
from datetime import datetime

__all__ = [
    "ERASED",
    "GENESIS",
    "call_hash",
    "checkpoint_hash",
    "content_hash",
    "digest",
    "event_hash",
    "event_linker",
    "new_salt",
    "new_salts",
]

GENESIS = "0" * 64
ERASED = '{"forgotten":true}'
"""The payload of an erased event: nothing else may stand there."""


def digest(text: str) -> str:
    """The plain hash of a text that holds no secret (code a forget re-rendered without it)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def new_salt() -> str:
    return secrets.token_hex(16)


def new_salts(n: int) -> list[str]:
    """``n`` salts such as ``new_salt`` makes, from one read of the system's randomness (a
    batch's: one call instead of one per event)."""
    text = secrets.token_hex(16 * n)
    return [text[i : i + 32] for i in range(0, 32 * n, 32)]


def content_hash(salt: str, *texts: str) -> str:
    """The salted hash of one or more texts; each text is length-prefixed."""
    parts = [salt.encode()]
    for text in texts:
        data = text.encode("utf-8", "surrogatepass")
        parts += (b"|%d:" % len(data), data)
    return hashlib.sha256(b"".join(parts)).hexdigest()


def _free(*parts: str) -> str:
    # Length prefixes keep the encoding unambiguous whatever the free-text parts hold.
    return "|".join(f"{len(p)}:{p}" for p in parts)


def event_hash(
    prev: str,
    user_seq: int,
    recorded_at: datetime,
    ts: datetime,
    kind: str,
    user: str,
    payload_hash: str,
) -> str:
    """An event's link in its user's chain. The store-wide ``seq`` is not covered, so a user's
    log keeps verifying when it is moved to another store; ``user_seq`` numbers the user's
    events 1, 2, 3 … without gaps. ``payload_hash`` is ``content_hash(salt, payload, source)``:
    a source can hold content too (a stand-in source is a hash of the payload), so it is
    erased with the payload."""
    blob = (
        f"{prev}|{user_seq}|{recorded_at.isoformat()}|{ts.isoformat()}|"
        f"{_free(kind, user)}|{payload_hash}"
    )
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def event_linker(recorded_at: datetime) -> Callable[[str, int, datetime, str, str, str], str]:
    """``event_hash`` with ``recorded_at`` given, for a batch of events recorded at once: its
    text, and each kind and user's, made once per batch rather than once per event."""
    recorded = recorded_at.isoformat()
    named: dict[tuple[str, str], str] = {}

    def link(prev: str, user_seq: int, ts: datetime, kind: str, user: str, payload: str) -> str:
        who = named.get((kind, user))
        if who is None:
            who = named[(kind, user)] = _free(kind, user)
        blob = f"{prev}|{user_seq}|{recorded}|{ts.isoformat()}|{who}|{payload}"
        return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()

    return link


def call_hash(
    prev: str,
    call_id: int,
    created_at: datetime,
    user: str,
    purpose: str,
    model: str,
    base_url: str,
    tokens_in: int,
    tokens_out: int,
    latency_ms: float,
    outcome: str,
    event_seq: int,
    event_hash: str,
    content: str,
) -> str:
    """A model call's link in its user's chain of calls; ``content`` is the salted hash of its
    request, response, answer and error; ``event_seq``/``event_hash`` the user's event chain
    head when the call was recorded, so deleting events past it is caught."""
    blob = (
        f"{prev}|{call_id}|{created_at.isoformat()}|{_free(user, purpose, model, base_url)}|"
        f"{tokens_in}|{tokens_out}|{latency_ms!r}|{_free(outcome)}|{event_seq}|{event_hash}|"
        f"{content}"
    )
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()


def checkpoint_hash(
    prev: str,
    user: str,
    version: int,
    seq: int,
    event_seq: int,
    event_hash: str,
    records: int,
    segments: dict[str, str],
) -> str:
    """A checkpoint's link in its user's chain of checkpoints: it covers the salted hash of
    every segment this version stored (by segment name) and the event chain head it was
    taken at."""
    parts = "".join(f"|{_free(name)}:{segments[name]}" for name in sorted(segments))
    blob = f"{prev}|{_free(user)}|{version}|{seq}|{event_seq}|{event_hash}|{records}{parts}"
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()
