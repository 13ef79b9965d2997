"""Constraints in force in a workbench: the rule each becomes, the keys new ones get, and the
events that put them in force, change or retract them (the ``constraint`` events of
docs/constraints.md "In the log")."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from uac_kernel.constraints.compile import compile_constraint
from uac_kernel.core.display import close_matches, did_you_mean
from uac_kernel.core.errors import ConstraintError, UacError
from uac_kernel.language.spec import Constraint, Select, constraint_json, parse_constraint
from uac_kernel.rules.engine import Finding, Rule
from uac_kernel.state.fold import ConstraintVersion, State
from uac_kernel.state.query import UserView

__all__ = [
    "as_constraints",
    "constraint_events",
    "describe",
    "in_force_rule",
    "name_warnings",
    "retract_event",
    "slug",
    "unknown_names",
]

# A key made from a title: short enough to read in a table.
SLUG_CHARS = 60


def in_force_rule(cv: ConstraintVersion) -> Rule:
    """The rule that checks ``cv`` in a workbench (its function bears the rule's own name,
    ``kinds._base.make_rule``). A constraint this uac cannot compile (a kind a later version
    added) becomes a rule that fails, so it stands as a ``rule_error`` alert that says why,
    instead of making the store unopenable.
    """
    try:
        return compile_constraint(cv.key, cv.constraint, cv.rule or None)
    except (ImportError, UacError) as exc:
        return _failing(cv, exc)


def _failing(cv: ConstraintVersion, exc: BaseException) -> Rule:
    from uac_kernel.core.constraint_names import rule_name

    name = cv.rule or rule_name(cv.key)
    why = f"constraint {cv.key!r} ({cv.constraint.kind}) cannot be compiled: {exc}"

    def run(user: UserView) -> Iterable[Finding]:
        raise ConstraintError(f"{why}; retract it or upgrade uac")

    run.__name__ = run.__qualname__ = name
    # Read no type: it fails once when put in force, and its alert stands until it is retracted.
    return Rule(name=name, func=run, watch=frozenset(), source=describe(cv), doc=why)


def describe(cv: ConstraintVersion) -> str:
    """``constraint 'key' (kind): title``, one line."""
    return f"constraint {cv.key!r} ({cv.constraint.kind}): {cv.constraint.title}"


def slug(title: str) -> str:
    """A key made from a title: lower-case words joined by ``-`` (``constraint`` when none)."""
    words = re.sub(r"[^a-z0-9]+", "-", title.casefold()).strip("-")
    return words[:SLUG_CHARS].rstrip("-") or "constraint"


def as_constraints(c: Any, where: str = "constraint") -> list[tuple[str | None, Constraint]]:
    """``c`` as (key or None, validated constraint) pairs: a constraint model or its JSON
    object (no key), a list of them, or a mapping of key → constraint (an object without a
    ``kind`` whose values are all objects)."""
    if (
        isinstance(c, dict)
        and c
        and "kind" not in c
        and all(isinstance(v, (dict, BaseModel)) for v in c.values())
    ):
        return [(str(k), parse_constraint(v, f"{where} {k!r}")) for k, v in c.items()]
    items = c if isinstance(c, (list, tuple)) else [c]
    if not items:
        raise ConstraintError(f"{where}: an empty list holds no constraint; give at least one")
    return [
        (None, parse_constraint(item, f"{where} {i}" if len(items) > 1 else where))
        for i, item in enumerate(items, 1)
    ]


def constraint_events(
    items: Sequence[tuple[str | None, Constraint]],
    in_force: dict[str, ConstraintVersion],
    taken: Collection[str],
    ts: datetime,
    *,
    seq: int,
    source: str | None,
    author: str | None,
    derived_from: Sequence[str],
    reason: str | None,
) -> tuple[list[dict[str, Any]], list[str]]:
    """The events that put ``items`` ((key or None, constraint)) in force, and their keys.

    A key in force is updated, others added; no key: a slug of the title, made unique among
    ``taken`` (every key ever used) and the batch. A constraint already in force as it is
    (under its key, or, with no key, under any) needs no event: its key is returned alone.
    Each event gets a source of its own (``source`` numbered when there are several), so one
    logged at the same time as an earlier one of the same content is not taken for it.
    """
    events: list[dict[str, Any]] = []
    keys: list[str] = []
    used = set(taken)
    for i, (key, c) in enumerate(items, 1):
        body = constraint_json(c)
        if key is None:
            same = next(
                (k for k, cv in in_force.items() if constraint_json(cv.constraint) == body), None
            )
            if same is not None:
                keys.append(same)
                continue
            key = base = slug(c.title)
            n = 1
            while key in used:
                n += 1
                key = f"{base}-{n}"
        elif key in in_force and constraint_json(in_force[key].constraint) == body:
            keys.append(key)
            continue
        used.add(key)
        keys.append(key)
        ev: dict[str, Any] = {
            "kind": "constraint",
            "ts": ts.isoformat(),
            "op": "update" if key in in_force else "add",
            "key": key,
            "constraint": body,
            "source": _source(source, key, seq, i, len(items)),
        }
        if author is not None:
            ev["author"] = author
        if derived_from:
            ev["derived_from"] = list(derived_from)
        if reason is not None:
            ev["reason"] = reason
        events.append(ev)
    return events, keys


def _source(source: str | None, key: str, seq: int, i: int, n: int) -> str:
    if source is None:
        # The log position makes it unique: the same constraint put back after a retract at
        # the same time is a new event, not one already logged.
        return f"constraint:{key}@{seq}"
    return source if n == 1 else f"{source}#{i}"


def retract_event(state: State, key: str, reason: str | None = None) -> dict[str, Any]:
    """The event that takes constraint ``key`` out of force in ``state`` (one not in force is a
    ``ConstraintError`` naming those that are)."""
    if key not in state.constraints:
        keys = sorted(state.constraints)
        raise ConstraintError(
            f"no constraint {key!r} is in force.{did_you_mean(key, keys)} In force: "
            f"{', '.join(keys) or 'none'}"
        )
    event: dict[str, Any] = {
        "kind": "constraint",
        "ts": (state.now or datetime(1970, 1, 1)).isoformat(),
        "op": "retract",
        "key": key,
        "source": f"retract:{key}@{state.seq}",
    }
    if reason is not None:
        event["reason"] = reason
    return event


# The attributes of a constraint (or of its Moments) that hold field names of the records it
# selects; a ``date`` that is a fixed date is no name and is passed over.
_FIELD_ATTRS = frozenset(
    {
        "amount", "as_of", "date", "done", "end", "expires", "fields", "first_date",
        "flow_amount", "flow_date", "lapsed", "length", "nights", "quantity", "rate_fields",
        "start", "starts", "then_date",
    }
)  # fmt: skip


def unknown_names(c: Constraint, schema: Mapping[str, Mapping[str, str]]) -> list[str]:
    """``path: why`` for each type ``c`` names that has no records in ``schema`` (type → field
    → field type) and each field it names that none of its known types has, with the closest
    name: a constraint may be written before its first record, so these are warnings, but a
    misspelt name would never match and the constraint could never alert."""
    selects: list[tuple[str, Select]] = []
    names: list[tuple[str, str]] = []  # (path, field name) outside the selects

    def walk(m: BaseModel, path: str) -> None:
        for attr in type(m).model_fields:
            v = getattr(m, attr)
            at = f"{path}{attr}"
            if isinstance(v, Select):
                selects.append((at, v))
            elif isinstance(v, BaseModel):
                walk(v, f"{at}.")
            elif attr == "match" and isinstance(v, dict):
                for k, n in v.items():
                    names.extend([(f"{at}.{k}", str(k)), (f"{at}.{k}", str(n))])
            elif attr in _FIELD_ATTRS:
                if isinstance(v, str):
                    names.append((at, v))
                elif isinstance(v, list):
                    names.extend((at, n) for n in v if isinstance(n, str))

    walk(c, "")
    out: list[str] = []
    types = list(schema)
    known: list[str] = []
    # The other names are checked only against the types of every select: a field may be one
    # of a type not recorded yet, or of the types playing a role.
    whole = True
    for at, sel in selects:
        whole = whole and sel.role is None
        for i, t in enumerate(n for n in (sel.type, *sel.also) if n is not None):
            where = f"{at}.type" if i == 0 else f"{at}.also"
            if t in schema:
                known.append(t)
            else:
                whole = False
                out.append(f"{where}: no records of type {t} yet{_mean(t, types)}")
        own = [t for t in (sel.type, *sel.also) if t is not None and t in schema]
        if sel.role is None and own and len(own) == len([sel.type, *sel.also]):
            for f in sel.where:
                if f != "key" and not any(f in schema[t] for t in own):
                    out.append(_no_field(f"{at}.where.{f}", f, own, schema))
    if not (whole and known):
        return out
    for at, f in dict.fromkeys(names):
        if f != "key" and not any(f in schema[t] for t in known):
            out.append(_no_field(at, f, list(dict.fromkeys(known)), schema))
    return out


def name_warnings(
    parsed: Sequence[tuple[str | None, Constraint]],
    schema: Mapping[str, Mapping[str, str]],
    origin: str,
) -> list[str]:
    """``warning: origin: [item: ]path: why`` for each name of ``unknown_names`` of each of
    ``parsed`` (key or None, constraint), as ``Workbench.constrain`` reports them."""
    out: list[str] = []
    for i, (k, c) in enumerate(parsed, 1):
        item = "" if len(parsed) == 1 else f"key {k!r}: " if k is not None else f"item {i}: "
        out += [f"warning: {origin}: {item}{why}" for why in unknown_names(c, schema)]
    return out


def _no_field(at: str, f: str, types: list[str], schema: Mapping[str, Mapping[str, str]]) -> str:
    fields = list(dict.fromkeys(n for t in types for n in schema[t]))
    return f"{at}: {' or '.join(types)} has no field {f}{_mean(f, fields)}"


def _mean(word: str, choices: list[str]) -> str:
    close = close_matches(word, choices)
    return f" (did you mean {close[0]}?)" if close else ""
