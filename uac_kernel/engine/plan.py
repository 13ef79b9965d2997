"""A batch planned before anything is appended: the events checked against the state, schema
events added, and every constraint the batch puts in force compiled (one that cannot be a rule,
or would take the name of a rule in force, refuses the batch)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from uac_kernel.checkpoints.snaptypes import prefetch
from uac_kernel.core.errors import ConstraintError
from uac_kernel.core.limits import Limits
from uac_kernel.ingest.events import InputEvent, plan_batch
from uac_kernel.log.store import NewEvent
from uac_kernel.state.fold import State

__all__ = ["check_compiles", "plan_events"]


def plan_events(
    state: State,
    fresh: Sequence[InputEvent],
    limits: Limits,
    *,
    propose_bindings: bool,
    taken: Collection[str],
) -> list[NewEvent]:
    """The events to append for ``fresh`` (checked against ``state``, schema events added), as
    an ingest appends them; ``taken``: the rules in force that are not a constraint's."""
    # The records the batch changes, read in one query per type if a snapshot holds them:
    # checking them one by one costs two queries a record.
    prefetch(state, (ev.payload for ev in fresh if ev.kind == "fact"))
    planned = plan_batch(state, fresh, limits, propose_bindings=propose_bindings)
    check_compiles(planned, taken)
    return planned


def check_compiles(planned: Iterable[NewEvent], taken: Collection[str] = ()) -> None:
    """Compile each constraint a batch puts in force, so one this uac cannot turn into a rule
    is refused before anything is appended; so is one whose rule would take the name of a
    rule in force that is not a constraint's (``taken``)."""
    for ev in planned:
        if ev.kind == "constraint" and ev.payload["op"] != "retract":
            from uac_kernel.constraints import compile_constraint, parse_constraint

            key = ev.payload["key"]
            c = parse_constraint(ev.payload["constraint"], f"constraint {key!r}")
            try:
                name = compile_constraint(key, c, ev.payload.get("rule")).name
            except ImportError as exc:
                raise ConstraintError(
                    f"constraint {key!r}: kind {c.kind!r} has no compiler in this uac ({exc}); "
                    "use another kind or upgrade uac"
                ) from None
            if name in taken:
                raise ConstraintError(
                    f"constraint {key!r} would be rule {name!r}, the name of a rule in force "
                    "that is not a constraint's; choose another key"
                )
