"""Alerts in the log: an alert change logged as ``alert`` events, and the standing alerts of the
rules in force reconciled with what the log says stands."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from uac_kernel.log.store import NewEvent, Store
from uac_kernel.rules.engine import Alert, AlertChange, RuleRunner, as_cleared, why_cleared
from uac_kernel.state.fold import State
from uac_kernel.state.query import UserView

__all__ = ["log_alerts", "reconcile"]


def log_alerts(store: Store, state: State, change: AlertChange) -> None:
    """Append ``change`` as ``alert`` events of ``state``'s user, at its clock, and fold them."""
    if store.read_only or not (change.raised or change.cleared or change.updated):
        return
    ts = state.now or datetime(1970, 1, 1)
    events = [
        NewEvent(ts, "alert", state.user, {"state": what, **alert.model_dump(mode="json")})
        for what, alerts in (
            ("raised", change.raised),
            ("updated", change.updated),
            ("cleared", change.cleared),
        )
        for alert in alerts
    ]
    state.apply_all(store.append(events))


def reconcile(
    store: Store, state: State, runner: RuleRunner, rules: Collection[str]
) -> AlertChange:
    """Log what differs between the standing alerts of ``rules`` and those the log says stand.

    Only rules in force are evaluated, so only their alerts are reconciled: an alert of a
    rule this session does not run (a notebook rule not yet re-run) is left as the log has
    it, not cleared.
    """
    logged: dict[str, dict[str, Any]] = {}
    for ev in store.events(state.user, kinds=["alert"]):
        if ev.payload["rule"] not in rules:
            continue
        if ev.payload["state"] in ("raised", "updated"):
            logged[ev.payload["id"]] = ev.payload
        else:
            logged.pop(ev.payload["id"], None)
    standing = {a.id: a for a in runner.standing() if a.rule in rules}
    view = UserView(state)
    change = AlertChange(
        raised=[a for i, a in standing.items() if i not in logged],
        updated=[
            a for i, a in standing.items() if i in logged and logged[i]["severity"] != a.severity
        ],
        cleared=[
            as_cleared(a, why_cleared(a, view, runner.rules.get(a.rule)))
            for i, p in logged.items()
            if i not in standing
            for a in [Alert.model_validate(p)]
        ],
    )
    log_alerts(store, state, change)
    return change
