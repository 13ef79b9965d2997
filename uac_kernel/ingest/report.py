"""``IngestReport``: what one batch appended, skipped as already logged, and the alerts it raised,
updated or cleared."""

from __future__ import annotations

from dataclasses import dataclass, field

from uac_kernel.core.display import plural
from uac_kernel.rules.engine import Alert, ClearedAlert

__all__ = ["IngestReport"]


@dataclass
class IngestReport:
    """What an ingest appended, skipped as already logged, and which alerts it raised or cleared."""

    appended: int = 0
    skipped: int = 0
    # Events identical to an earlier one of the same batch (same source and content): one is
    # appended. ``skipped`` counts those already in the log.
    repeated: int = 0
    schema_changes: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    raised: list[Alert] = field(default_factory=list)
    cleared: list[ClearedAlert] = field(default_factory=list)
    updated: list[Alert] = field(default_factory=list)
    # The keys of the constraints the call put in force, changed or retracted (``constrain``,
    # ``retract_constraint``; a constraint already in force as given is listed too).
    constraints: list[str] = field(default_factory=list)
    # ``warning: origin: path: why`` for each type or field those constraints name that the
    # user's records do not have yet (``constrain``): put in force all the same.
    warnings: list[str] = field(default_factory=list)
    # Where the time went, in seconds: parse, validate, write (the log), fold, rules. "rules"
    # also holds the GC's one walk over the batch's new records once it resumes (see no_gc).
    seconds: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        text = f"{plural(self.appended, 'event')} appended, {self.skipped} already in the log"
        if self.repeated:
            text += f", {self.repeated} repeated in the file"
        if self.schema_changes:
            text += f", {plural(self.schema_changes, 'schema change')}"
        if self.raised or self.cleared:
            text += f"; alerts: {len(self.raised)} raised, {len(self.cleared)} cleared"
        return text
