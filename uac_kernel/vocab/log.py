"""The ``vocabulary`` event: a binding as the log holds it, checked against the catalogue and
the user's schema before it is appended.

One event a binding change::

    {"kind": "vocabulary", "ts": "...", "op": "add",
     "binding": {"concept": "trip.start", "type": "Journey", "field": "leaves_on",
                 "author": "person", "score": 1.0, "status": "used", "reason": "..."}}

``{"role": "trip", "type": "Journey", ...}`` (no ``field``) says a type plays a role. A binding
with ``via`` (a role, or a concept of the same field) was derived from that one (a Journey that
plays trip plays planned_activity as a Trip does): it is read only while its source is. ``add``
binds a key (concept or role, type, field) not bound yet, ``update`` changes a bound one,
``retract`` removes it (its binding then holds the key only). A ``used`` or ``held`` binding
names a type the user has, a field that type has, whose value kind fits the concept; a
``rejected`` one of a catalogue default may name a type or field the user lacks: it hides the
default (a person saying "``Trip.start`` is not when my trip starts", perhaps before any
``Trip`` exists).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from datetime import datetime
from typing import Any, Protocol, cast, get_args

from uac_kernel.core.display import did_you_mean
from uac_kernel.core.errors import VocabularyError
from uac_kernel.core.schema import check_field_name, check_type_name
from uac_kernel.vocab.binding import Author, Binding, Status
from uac_kernel.vocab.catalogue import CONCEPTS, KINDS, ROLES

__all__ = [
    "AUTHORS",
    "STATUSES",
    "binding_events",
    "binding_json",
    "binding_of",
    "check_binding",
    "schema_problem",
    "split_target",
    "target_problem",
]

# Who may write a binding in the log (``default`` is the catalogue's own, never logged).
AUTHORS = ("inferred", "model", "person")
STATUSES: tuple[str, ...] = get_args(Status)
_KEYS = {"concept", "role", "type", "field", "author", "score", "reason", "status", "via"}
_KEY_ONLY = {"concept", "role", "type", "field"}


def binding_json(b: Binding, key_only: bool = False) -> dict[str, Any]:
    """The binding as the event's ``binding`` object (canonical: every part given)."""
    out: dict[str, Any] = {"role" if b.field is None else "concept": b.target, "type": b.type}
    if b.field is not None:
        out["field"] = b.field
    if not key_only:
        out.update(author=b.author, score=b.score, status=b.status)
        if b.reason:
            out["reason"] = b.reason
        if b.via:
            out["via"] = b.via
    return out


def binding_of(d: dict[str, Any]) -> Binding:
    """The ``Binding`` of a canonical ``binding`` object (as ``check_binding`` leaves it)."""
    return Binding(
        target=d.get("concept") or d["role"],
        type=d["type"],
        field=d.get("field"),
        author=cast(Author, d.get("author", "person")),
        score=float(d.get("score", 1.0)),
        reason=d.get("reason", ""),
        status=cast(Status, d.get("status", "used")),
        via=d.get("via"),
    )


def _fail(reason: str, field: str) -> VocabularyError:
    return VocabularyError(f"binding.{field}: {reason}", field=field, reason=reason)


def split_target(text: str, types: Collection[str]) -> tuple[str, str | None]:
    """``"Type.field"`` or ``"Type"`` as (type, field or None), as a person writes it to
    ``uac vocab bind``. A type's name may hold a dot: the longest type name the text starts
    with wins; a text naming no type splits at its first dot."""
    if text in types:
        return text, None
    found = max((t for t in types if text.startswith(t + ".")), key=len, default=None)
    if found is not None:
        return found, text[len(found) + 1 :]
    type_name, dot, field = text.partition(".")
    return type_name, field if dot else None


def target_problem(name: str, is_role: bool) -> str | None:
    """Why ``name`` is not a concept (a role when ``is_role``) of the catalogue, or None."""
    known = ROLES if is_role else CONCEPTS
    if name in known:
        return None
    what, listing = ("role", "uac vocab roles") if is_role else ("concept", "uac vocab concepts")
    return f"no {what} {name!r} in the catalogue.{did_you_mean(name, list(known))} `{listing}` lists them"


def check_binding(obj: Any, op: str, reason_chars: int) -> dict[str, Any]:
    """The canonical ``binding`` object of a vocabulary event of ``op``; a ``VocabularyError``
    naming the part of it that is wrong (its ``field``) otherwise."""
    if not isinstance(obj, dict):
        raise VocabularyError(
            'binding must be a JSON object like {"concept": "trip.start", "type": "Journey", '
            '"field": "leaves_on"}',
            field="",
        )
    allowed = _KEY_ONLY if op == "retract" else _KEYS
    for k in obj:
        if k not in allowed:
            extra = "; a retract names only the binding's concept or role, type and field"
            raise _fail(
                f"unknown part; allowed: {', '.join(sorted(allowed))}"
                + (extra if op == "retract" and k in _KEYS else ""),
                str(k),
            )
    if ("concept" in obj) == ("role" in obj):
        raise VocabularyError(
            "a binding names a concept (with a field) or a role (without one), not both or neither",
            field="concept",
        )
    is_role = "role" in obj
    target = obj["role" if is_role else "concept"]
    where = "role" if is_role else "concept"
    if not isinstance(target, str):
        raise _fail(f"{where} must be a string", where)
    if (why := target_problem(target, is_role)) is not None:
        raise _fail(why, where)
    if (why := check_type_name(obj.get("type"))) is not None:
        raise _fail(why, "type")
    if is_role:
        if "field" in obj:
            raise _fail(
                "a role binding names a type, not a field; bind a field to a concept", "field"
            )
    else:
        if "field" not in obj:
            raise _fail(
                f"a concept is carried by a field: give the field of {obj['type']} that holds {target}",
                "field",
            )
        if (why := check_field_name(obj["field"])) is not None:
            raise _fail(why, "field")
    out = {k: obj[k] for k in ("concept", "role", "type", "field") if k in obj}
    if op == "retract":
        return out
    author = obj.get("author", "person")
    if author not in AUTHORS:
        raise _fail(f"author must be one of {', '.join(AUTHORS)}", "author")
    score = obj.get("score", 1.0)
    if type(score) not in (int, float) or not 0 <= score <= 1:
        raise _fail("score must be a number from 0 to 1", "score")
    status = obj.get("status", "used")
    if status not in STATUSES:
        raise _fail(f"status must be one of {', '.join(STATUSES)}", "status")
    reason = obj.get("reason", "")
    if not isinstance(reason, str):
        raise _fail("reason must be a string", "reason")
    if len(reason) > reason_chars:
        raise _fail(f"reason has {len(reason):,} characters; at most {reason_chars:,}", "reason")
    out.update(author=author, score=float(score), status=status)
    if reason:
        out["reason"] = reason
    if "via" in obj:
        via = obj["via"]
        if not isinstance(via, str) or target_problem(via, is_role) is not None or via == target:
            kind = "role" if is_role else "concept"
            raise _fail(f"via must name the {kind} this binding was derived from", "via")
        out["via"] = via
    return out


def schema_problem(
    b: Binding, types: Collection[str], field_types: dict[str, str]
) -> tuple[str, str] | None:
    """Why binding ``b`` cannot be used with the user's schema (``types``, and the fields of
    ``b.type`` with their types): ``(message, part)``, or None. A rejected binding of a
    catalogue default may name a type or field the user lacks (it hides the default, should
    it come); any other name the user lacks is a typo to fix."""
    hides = b.status == "rejected" and (
        b.type in ROLES[b.target].types if b.field is None else b.field in CONCEPTS[b.target].fields
    )
    if b.type not in types:
        if hides:
            return None
        known = sorted(types)
        return (
            f"the user has no type {b.type!r}.{did_you_mean(b.type, known)} Types: "
            f"{', '.join(known) or 'none yet'}",
            "type",
        )
    if b.field is None:
        return None
    ftype = field_types.get(b.field)
    if ftype is None:
        if hides:
            return None
        fields = list(field_types)
        return (
            f"{b.type} has no field {b.field!r}.{did_you_mean(b.field, fields)} Its fields: "
            f"{', '.join(fields) or 'none'}",
            "field",
        )
    kind = CONCEPTS[b.target].value
    if b.status != "rejected" and ftype not in KINDS[kind]:
        return (
            f"{b.type}.{b.field} holds {ftype}, and {b.target} is a {kind} "
            f"({' or '.join(sorted(KINDS[kind]))}); bind a field of that kind",
            "field",
        )
    return None


def binding_events(
    bindings: Iterable[Any], state: Bound, value_chars: int
) -> tuple[list[dict[str, Any]], list[str]]:
    """One vocabulary event per binding (a ``binding`` object of the event format), each with
    how its caller gave it (for a one-line error): an ``add``, or an ``update`` of a key already
    bound; one ``state`` has bound exactly so is left out."""
    ts = (state.now or datetime(1970, 1, 1)).isoformat()
    events: list[dict[str, Any]] = []
    asked: list[str] = []
    seen: set[tuple[str, str, str | None]] = set()
    for i, given in enumerate(bindings):
        try:
            b = binding_of(check_binding(given, "add", value_chars))
        except VocabularyError as exc:
            raise VocabularyError(f"{_said(given)}: {exc.reason}") from None
        bound = state.bound(b.key)
        if bound == b:
            continue
        op = "update" if bound is not None or b.key in seen else "add"
        seen.add(b.key)
        # A source of its own: binding, unbinding and binding again are three events.
        source = f"vocab:{state.seq}:{i}"
        events.append({"kind": "vocabulary", "ts": ts, "op": op, "binding": binding_json(b),
                       "source": source})  # fmt: skip
        asked.append(_said(given))
    return events, asked


class Bound(Protocol):
    """What ``binding_events`` reads of a state: its clock, seq and bindings."""

    @property
    def now(self) -> datetime | None: ...
    @property
    def seq(self) -> int: ...
    def bound(self, key: tuple[str, str, str | None]) -> Binding | None: ...


def _said(given: Any) -> str:
    """A binding as its caller gave it, for a one-line error."""
    if not isinstance(given, dict):
        return "the binding"
    where = ".".join(str(given[k]) for k in ("type", "field") if k in given)
    target = given.get("concept") or given.get("role")
    return f"{where} as {target}" if target is not None else where
