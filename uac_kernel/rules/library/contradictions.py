"""The contradiction rule: two current records that cannot both be true."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from uac_kernel.query import UserView
from uac_kernel.records import Record
from uac_kernel.rules.engine import Finding, rule
from uac_kernel.rules.library._common import (
    SINGULAR_TYPES,
    _day,
    _first_day,
    _flag,
    _get,
    _label,
    _norm,
)

__all__ = ["conflicting_records"]

# -- contradictions --------------------------------------------------------------------------
IDENTITY_CHECKS: tuple[tuple[tuple[str, ...], str, tuple[str, ...]], ...] = (
    (("Passport",), "number", ("expires",)),
    (("Person", "Contact"), "name", ("birthday",)),
)


@rule(
    watch=[*SINGULAR_TYPES, "Passport", "Person", "Contact", "Allergy"],
    severity="warning",
    category="contradiction",
    source="User as Code (arXiv 2606.16707): state stays consistent; a correction is an update",
)
def conflicting_records(user: UserView) -> Iterator[Finding]:
    """Reads ``Residence``/``Home`` (``since``, ``until``/``end``/``moved_out``), ``Passport``
    (``number``, ``expires``), ``Person``/``Contact`` (``name``, ``birthday``) and ``Allergy``
    (``substance``, ``absent``/``resolved``).

    Flags current records that cannot all be true: two or more current homes (a home is current
    from ``since`` until ``until``/``end``/``moved_out``); the same passport number with different
    ``expires``; the same person's name with different ``birthday``; an allergy recorded both as
    present and as ``absent``/``resolved``.
    """
    today = user.today
    for t in SINGULAR_TYPES:
        homes = []
        for r in user.all(t):
            since = _day(_get(r, "since"))
            until = _first_day(r, ("until", "end", "moved_out"))
            if not (
                (since and today and since > today) or (until and (today is None or until <= today))
            ):
                homes.append(r)
        if len(homes) > 1:
            names = ", ".join(_label(r) for r in homes)
            yield Finding(
                f"{len(homes)} current {t} records: {names}. Set `until` on the ones you "
                f"have left (or retract the wrong one).",
                homes,
            )
    for types, ident, values in IDENTITY_CHECKS:
        groups: dict[str, list[Record]] = defaultdict(list)
        for t in types:
            for r in user.all(t):
                if isinstance(v := _get(r, ident), str) and _norm(v).strip():
                    groups[_norm(v)].append(r)
        for key, recs in groups.items():
            for f in values:
                seen = {str(v): r for r in recs if (v := _get(r, f)) is not None}
                if len(seen) > 1:
                    parts = "; ".join(f"{_label(r)} says {v}" for v, r in sorted(seen.items()))
                    yield Finding(
                        f"Records with the same {ident} '{key.strip()}' disagree on {f}: "
                        f"{parts}. Correct the wrong one.",
                        list(seen.values()),
                        about=f,
                    )
    allergies: dict[str, list[Record]] = defaultdict(list)
    for a in user.all("Allergy"):
        if isinstance(s := _get(a, "substance"), str) and _norm(s).strip():
            allergies[_norm(s)].append(a)
    for substance, recs in allergies.items():
        gone = [a for a in recs if _flag(a, "absent", "resolved")]
        present = [a for a in recs if not _flag(a, "absent", "resolved")]
        if gone and present:
            yield Finding(
                f"The allergy to {substance.strip()} is recorded as present "
                f"({_label(present[0])}) and as absent/resolved ({_label(gone[0])}): confirm "
                "with the user or their doctor and retract the wrong record.",
                [present[0], gone[0]],
                about="allergy",
            )
