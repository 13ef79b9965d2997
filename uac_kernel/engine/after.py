"""The one path after events are folded into a state: the constraints they changed put in force
(or out), the rules they affect run, and the alert change returned.

Every way events reach a state takes it: an ingest (and an applied edit or what-if, which are
ingests), catching up with another process's writes, an open from the log or from a snapshot,
and both runs of a what-if. What differs is only which rules start from scratch (``kept``) and
what the caller does with the change: an ingest logs it, a catch-up or an open reconciles the
standing alerts with the log (``engine.alerts``), a what-if reports it.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime

from uac_kernel.rules.engine import AlertChange, ClearedAlert, RuleRunner, as_cleared
from uac_kernel.state.fold import ConstraintVersion, State
from uac_kernel.state.query import UserView

__all__ = ["after_events", "constraint_key", "constraints_changed", "put_all_in_force"]


def constraint_key(rules_of: dict[str, str], rule: str) -> str | None:
    """The key of the constraint whose rule is ``rule`` (``rules_of``: key → rule name)."""
    return next((k for k, name in rules_of.items() if name == rule), None)


def _put_in_force(runner: RuleRunner, rules_of: dict[str, str], cv: ConstraintVersion) -> None:
    from uac_kernel.constraints.inforce import in_force_rule

    r = in_force_rule(cv)
    runner.add(r)
    rules_of[cv.key] = r.name


def put_all_in_force(state: State, runner: RuleRunner, rules_of: dict[str, str]) -> None:
    """Put the rule of every constraint in force in ``runner`` (each compiled once per open):
    the constraint changes folded so far are taken, so ``after_events`` does not compile them
    again."""
    state.take_changed_constraints()
    for cv in state.constraints.values():
        _put_in_force(runner, rules_of, cv)


def constraints_changed(
    state: State, runner: RuleRunner, rules_of: dict[str, str], keys: Collection[str]
) -> list[ClearedAlert]:
    """Put the rules of the constraints ``keys`` in force, in their new version, or take
    those of retracted ones out; return the alerts the retracted ones had standing."""
    cleared: list[ClearedAlert] = []
    for key in sorted(keys):
        cv = state.constraints.get(key)
        if cv is not None:
            _put_in_force(runner, rules_of, cv)
            continue
        name = rules_of.pop(key, None)
        if name is None:
            continue
        ended = next(v for v in reversed(state.constraint_history) if v.key == key)
        because = f": {ended.ended_because}" if ended.ended_because else ""
        reason = f"constraint {key!r} was retracted{because}"
        cleared += [as_cleared(a, reason) for a in runner.remove(name)]
    return cleared


def after_events(
    state: State,
    runner: RuleRunner,
    rules_of: dict[str, str],
    before: datetime | None,
    *,
    kept: Collection[str] | None = None,
) -> AlertChange | None:
    """Bring the rules up to date with what was folded into ``state`` since the last call.

    The constraints the events put in force, changed or retracted are put in (or taken out of)
    ``runner``; the rules the events affect run (those reading a changed type, the clock
    rules if the clock moved, every rule if the vocabulary changed: rules read through it);
    ``before`` is the log's clock before the events: a clock rule runs when the day moved, or
    when the time moved if its last run read the time (``user.now``); the rule of a new or
    changed constraint runs on the whole state, as does every rule not
    in ``kept`` when it is given (an open: the rules whose standing alerts a snapshot kept, or
    none). ``rules_of`` maps constraint keys to their rules' names and is kept up to date.
    None when the events changed nothing a rule reads (never for an open).
    """
    clock_moved = state.now != before
    day_moved = clock_moved and (
        before is None or state.now is None or state.now.date() != before.date()
    )
    changed: set[str] | None = state.take_changed_types()
    keys = state.take_changed_keys()
    rebound = state.take_changed_vocab()
    if rebound:
        changed = None
    constrained = state.take_changed_constraints()
    ended = constraints_changed(state, runner, rules_of, constrained)
    whole = {rules_of[k] for k in constrained if k in state.constraints}
    if kept is not None:
        whole |= {name for name in runner.rules if name not in kept}
    if kept is None and not (changed is None or changed or clock_moved or constrained):
        return None
    view = UserView(state)
    # A rule that cannot say which types it reads runs whenever this does (``Rule.watches``).
    # In an ingest the rule of a changed constraint runs in the first pass too when the events
    # touch what it reads, so an alert a retracted record settled says so; the second pass
    # only clears what the new version alone settled. An open runs each rule once.
    rest = [name for name in runner.rules if kept is None or name not in whole]
    change = runner.run(
        view,
        changed,
        clock_moved,
        only=rest,
        vocab=rebound,
        day_moved=day_moved,
        changed_keys=keys,
        opening=kept is not None,
        day_before=before.date() if before is not None else None,
        since=state.changes_after,
        clock_before=before,
        fact_keys=state.changed_facts,
    )
    if whole:
        again = runner.run(view, None, only=whole, opening=kept is not None)
        change.raised += again.raised
        change.updated += again.updated
        for a in again.cleared:
            key = constraint_key(rules_of, a.rule)
            if key is None or key not in constrained:
                change.cleared.append(a)
                continue
            cv = state.constraints.get(key)
            said = f"constraint {cv.key!r}" if cv is not None else "its constraint"
            change.cleared.append(as_cleared(a, f"{said} was updated ({a.reason})"))
    change.cleared += ended
    return change
