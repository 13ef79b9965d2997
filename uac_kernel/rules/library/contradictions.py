"""The contradiction rule: two current records that cannot both be true."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from uac_kernel.core.records import Record
from uac_kernel.core.words import norm as _norm
from uac_kernel.rules.engine import Finding, rule
from uac_kernel.rules.library._common import _first_day, _flag, _get, _label, _named
from uac_kernel.state.query import UserView
from uac_kernel.vocab.catalogue import Concept, concept, concepts
from uac_kernel.vocab.resolve import fields_of, types_of

__all__ = ["conflicting_records"]

# -- contradictions --------------------------------------------------------------------------
SINCE, UNTIL = concepts("residence.since", "residence.until")
ALLERGEN, ALLERGY_RESOLVED = concepts("allergy.allergen", "allergy.resolved")
# (role, the concept that says two records are about one thing, the concepts they must agree on)
IDENTITY_CHECKS: tuple[tuple[str, Concept, tuple[Concept, ...]], ...] = (
    ("passport", concept("passport.number"), concepts("document.expiry")),
    ("person", concept("person.name"), concepts("person.birthday")),
)


@rule(
    roles=["residence", "passport", "person", "allergy"],
    severity="warning",
    category="contradiction",
    source="User as Code (arXiv 2606.16707): state stays consistent; a correction is an update",
)
def conflicting_records(user: UserView) -> Iterator[Finding]:
    """Reads homes (role ``residence``: ``residence.since``, ``residence.until``), passports
    (``passport.number``, ``document.expiry``), people (role ``person``: ``person.name``,
    ``person.birthday``) and allergies (``allergy.allergen``, ``allergy.resolved``).

    Flags current records that cannot all be true: two or more current homes of one type (a home
    is current from its ``residence.since`` until its ``residence.until``); the same passport
    number with different expiry dates; the same person's name with different birthdays; an
    allergy recorded both as present and as resolved.
    """
    today = user.today
    for t in types_of("residence"):
        homes = []
        for r in user.all(t):
            since, until = _first_day(r, SINCE), _first_day(r, UNTIL)
            if not (
                (since and today and since > today) or (until and (today is None or until <= today))
            ):
                homes.append(r)
        if len(homes) > 1:
            names = ", ".join(_label(r) for r in homes)
            yield Finding(
                f"{len(homes)} current {t} records: {names}. Set `{_named(homes[0], UNTIL)}` on "
                "the ones you have left (or retract the wrong one).",
                homes,
            )
    for role, ident, values in IDENTITY_CHECKS:
        groups: dict[str, list[Record]] = defaultdict(list)
        for t in types_of(role):
            for r in user.all(t):
                if isinstance(v := _get(r, ident), str) and _norm(v).strip():
                    groups[_norm(v)].append(r)
        for key, recs in groups.items():
            for c in values:
                seen = {str(v): r for r in recs if (v := _get(r, c)) is not None}
                if len(seen) > 1:
                    parts = "; ".join(f"{_label(r)} says {v}" for v, r in sorted(seen.items()))
                    first = next(iter(seen.values()))
                    f = _named(first, c)
                    yield Finding(
                        f"Records with the same {_named(first, ident)} '{key.strip()}' disagree "
                        f"on {f}: {parts}. Correct the wrong one.",
                        list(seen.values()),
                        about=f,
                    )
    allergies: dict[str, list[Record]] = defaultdict(list)
    for t in types_of("allergy"):
        for a in user.all(t):
            if isinstance(s := _get(a, ALLERGEN), str) and _norm(s).strip():
                allergies[_norm(s)].append(a)
    for substance, recs in allergies.items():
        gone = [a for a in recs if _flag(a, ALLERGY_RESOLVED)]
        present = [a for a in recs if not _flag(a, ALLERGY_RESOLVED)]
        if gone and present:
            yield Finding(
                f"The allergy to {substance.strip()} is recorded as present "
                f"({_label(present[0])}) and as {_true_flag(gone[0], ALLERGY_RESOLVED)} "
                f"({_label(gone[0])}): confirm with the user or their doctor and retract the "
                "wrong record.",
                [present[0], gone[0]],
                about="allergy",
            )


def _true_flag(rec: Record, flags: Concept) -> str:
    """The user's name of the first field of ``flags`` that is true on ``rec``."""
    found = fields_of(type(rec).__name__, flags)
    return next((f for f in found if rec.__dict__.get(f) is True), found[0])
