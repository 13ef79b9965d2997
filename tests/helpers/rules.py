"""The rule library's tests: a user folded through a real store, the alerts one rule raises."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.events import fact
from uac_kernel.ingest.events import parse_objects, plan_batch
from uac_kernel.log.store import Store
from uac_kernel.rules.engine import Alert, Rule
from uac_kernel.state.fold import State
from uac_kernel.state.query import UserView
from uac_kernel.vocab.binding import Binding


def build(tmp_path: Path, events: list[dict[str, Any]], *, propose: bool = False) -> UserView:
    """A user of ``events``; the matcher proposes bindings only with ``propose``: the rules are
    tested on the catalogue's names and on a person's bindings, the matcher on its own."""
    tmp_path.mkdir(parents=True, exist_ok=True)  # a test may fold several states under one
    store = Store(tmp_path / "u.duckdb")
    st = State("u")
    st.apply_all(store.append(plan_batch(st, parse_objects(events), propose_bindings=propose)))
    store.close()
    return UserView(st)


def add(ts: str, type_: str, key: str, **fields: Any) -> dict[str, Any]:
    """An ``add`` fact at ``ts`` as written: a date stays a date (``helpers.events.add`` makes it
    that day at 09:00), as the rules' cases were written."""
    return fact(ts, "add", type_, key, **fields)


def clock(ts: str) -> dict[str, Any]:
    """An utterance that only moves the log clock (``user.today``) to ``ts`` as written (a date
    stays a date, unlike ``helpers.events.clock``)."""
    return {"kind": "utterance", "ts": ts, "speaker": "user", "text": "hello"}


def fire(r: Rule, view: UserView) -> list[Alert]:
    """The rule's alerts; a rule that raises fails the test (the runner would hide it)."""
    return sorted(r.alerts(view).values(), key=lambda a: a.id)


def one(r: Rule, view: UserView) -> Alert:
    alerts = fire(r, view)
    assert len(alerts) == 1, [a.message for a in alerts]
    (alert,) = alerts
    assert alert.category == r.category and alert.rule == r.name
    return alert


def bound(view: UserView, *bindings: tuple[str, str] | tuple[str, str, str]) -> UserView:
    """``view`` with a person's vocabulary bindings: ``(role, Type)`` or ``(concept, Type,
    field)`` (a user's own names read as the library's)."""
    view._state.bind(
        [Binding(b[0], b[1], b[2] if len(b) == 3 else None, author="person") for b in bindings]
    )
    return view


def by_amount(records: list[Any]) -> dict[Any, list[Any]]:
    """Records with an ``amount``, grouped by it in their order: what the partitioned rules of
    the tests flag when a group holds two or more."""
    groups: dict[Any, list[Any]] = {}
    for r in records:
        if r.amount is not None:
            groups.setdefault(r.amount, []).append(r)
    return groups
