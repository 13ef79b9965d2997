"""Edits of the user model as code: a changed cell becomes correction events in the log.

A checkpoint is shown in parts — the schema, one part per record type, the rules — each a piece
of the generated module. When a part comes back edited, it is read by literals only (never run),
compared with the checkpoint version it was rendered from, and turned into ``add`` / ``update``
/ ``retract`` facts authored by the notebook. If the log moved on since that version, edits to
records nobody else touched are merged; an edit that overlaps a later change is refused.
"""

from __future__ import annotations

import ast
import hashlib
import textwrap
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from uac_kernel.codegen import (
    list_target,
    parse_classes,
    read_literal,
    read_record,
    record_line,
    schema_class,
)
from uac_kernel.errors import CodeError, EditConflict
from uac_kernel.fold import State
from uac_kernel.records import Record, record_class
from uac_kernel.schema import RESERVED_FIELDS, check_field_name, infer, to_json_value

__all__ = ["EditPlan", "RuleSource", "part_names", "plan_edit", "render_part", "rule_sources"]

SCHEMA = "schema"
RULES = "rules"


def part_names(state: State) -> list[str]:
    """The parts a checkpoint is shown in: the schema, one per record type, the rules."""
    return [SCHEMA, *state.types, RULES]


def render_part(state: State, part: str, rules_code: str = "") -> str:
    """The code of one part, as the checkpoint module has it."""
    if part == SCHEMA:
        return "".join(schema_class(n, f) for n, f in state.schema.types.items()).lstrip("\n")
    if part == RULES:
        return rules_code.lstrip("\n")
    if part not in state.types:
        raise CodeError(f"no part {part!r}; parts are: {', '.join(part_names(state))}")
    ts = state.types[part]
    lines = "".join(record_line(r) for r in ts.current.values())
    return (
        schema_class(part, state.schema.types[part]).lstrip("\n")
        + f"\n\nrecords[{part}] = [\n{lines}]\n"
    )


@dataclass(frozen=True)
class RuleSource:
    """A ``@rule`` function written in a cell: its name and its exact source text."""

    name: str
    source: str


def rule_sources(code: str) -> list[RuleSource]:
    """The ``@rule`` functions a cell defines (found in its syntax tree, not run)."""
    tree = _parse(code)
    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(_is_rule(d) for d in node.decorator_list):
            # The function's own span starts at `def`; the rule starts at its first decorator.
            first = min(d.lineno for d in node.decorator_list)
            end = node.end_lineno or node.lineno
            source = "\n".join(code.splitlines()[first - 1 : end]) + "\n"
            found.append(RuleSource(node.name, textwrap.dedent(source)))
    return found


def _is_rule(node: ast.expr) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    return isinstance(target, ast.Name) and target.id == "rule"


def _parse(code: str) -> ast.Module:
    try:
        return ast.parse(code)
    except SyntaxError as exc:
        raise CodeError(
            f"line {exc.lineno}: {exc.msg}; fix the syntax and run the cell again"
        ) from None


@dataclass
class EditPlan:
    """The correction events an edited part amounts to, and what they do."""

    facts: list[dict[str, Any]] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    retracted: list[str] = field(default_factory=list)
    merged: bool = False
    rules: list[RuleSource] = field(default_factory=list)

    def summary(self) -> str:
        parts = []
        for label, keys in (
            ("added", self.added),
            ("changed", self.updated),
            ("retracted", self.retracted),
        ):
            if keys:
                parts.append(f"{label} {', '.join(keys)}")
        if self.rules:
            parts.append(f"rules {', '.join(r.name for r in self.rules)}")
        text = "; ".join(parts) or "no change"
        return text + (" (merged with later changes)" if self.merged else "")


def _values(rec: Record) -> dict[str, Any]:
    return {k: v for k, v in rec.fields().items() if v is not None}


def _cell_records(tree: ast.Module, part: str, state: State) -> dict[str, Record] | None:
    """The records of the part's list, read as literals; None when the cell has no list."""
    schema = parse_classes(tree)
    fields = dict(state.schema.types.get(part, {}))
    for fname, ftype in schema.types.get(part, {}).items():
        known = fields.get(fname)
        if known is not None and known != ftype:
            raise CodeError(
                f"class {part}: field {fname!r} is {known} in the log and cannot become {ftype}; "
                "add a new field instead"
            )
        fields[fname] = ftype
    # A field used in a record but not declared in the class is new: its type comes from its
    # first value, as for an ingested fact.
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == part:
            for kw in node.keywords:
                if kw.arg is None or kw.arg in fields or kw.arg in RESERVED_FIELDS:
                    continue
                if (why := check_field_name(kw.arg)) is not None:
                    raise CodeError(f"line {node.lineno}: {why}")
                inferred = infer(to_json_value(read_literal(kw.value)))
                if inferred is not None:
                    fields[kw.arg] = inferred
    cls = record_class(part, fields)
    records: dict[str, Record] | None = None
    for node in tree.body:
        found = list_target(node)
        if found is None or found[1] != "records":
            continue
        if found[0] != part:
            raise CodeError(
                f"line {node.lineno}: this cell is the {part} part; records[{found[0]}] "
                "belongs to another"
            )
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.List):
            raise CodeError(
                f"line {node.lineno}: records[{part}] must be a list of {part}(...) records"
            )
        records = {}
        for call in node.value.elts:
            rec = read_record(call, {part: cls}, part)
            if rec.key in records:
                raise CodeError(f"line {call.lineno}: {part} {rec.key!r} appears twice")
            records[rec.key] = rec
    return records


def plan_edit(base: State, current: State, code: str, part: str, digest_of: str) -> EditPlan:
    """The facts that turn ``base`` (the version the cell came from) into what the cell says,
    applied on top of ``current`` — or an ``EditConflict`` when they overlap later changes."""
    tree = _parse(code)
    plan = EditPlan(rules=rule_sources(code), merged=current.seq != base.seq)
    if part in (SCHEMA, RULES):
        _check_schema(tree, current)
        return plan
    cell = _cell_records(tree, part, current)
    if cell is None:
        return plan
    base_recs = base.types[part].current if part in base.types else {}
    now_recs = current.types[part].current if part in current.types else {}
    digest = hashlib.sha256(digest_of.encode()).hexdigest()[:16]
    conflicts: list[str] = []

    def emit(op: str, key: str, fields: dict[str, Any] | None = None) -> None:
        ev: dict[str, Any] = {
            "kind": "fact",
            "ts": (current.now or datetime(1970, 1, 1)).isoformat(),
            "op": op,
            "type": part,
            "key": key,
            "author": "notebook",
            "source": f"notebook:{digest}:{len(plan.facts) + 1}",
        }
        if fields is not None:
            ev["fields"] = {f: to_json_value(v) for f, v in fields.items()}
        else:
            ev["reason"] = "deleted in a notebook cell"
        plan.facts.append(ev)

    for key, rec in cell.items():
        mine = _values(rec)
        if key not in base_recs:
            if key in now_recs:
                if _values(now_recs[key]) != mine:
                    conflicts.append(f"{part} {key!r} was added since checkpoint {base.seq}")
                continue
            emit("add", key, mine)
            plan.added.append(key)
            continue
        theirs_base = _values(base_recs[key])
        changed = {
            f: mine.get(f)
            for f in set(mine) | set(theirs_base)
            if mine.get(f) != theirs_base.get(f)
        }
        if not changed:
            continue
        now = now_recs.get(key)
        if now is None:
            conflicts.append(f"{part} {key!r} was retracted after the version this cell came from")
            continue
        later = _values(now)
        pending = {}
        for f, v in changed.items():
            if later.get(f) == v:
                continue  # the log already says so
            if later.get(f) != theirs_base.get(f):
                conflicts.append(
                    f"{part} {key!r} field {f!r} was changed to {later.get(f)!r} since"
                )
                continue
            pending[f] = v
        if pending:
            emit("update", key, pending)
            plan.updated.append(key)
    for key in base_recs:
        if key in cell:
            continue
        now = now_recs.get(key)
        if now is None:
            continue  # retracted since: nothing to do
        if _values(now) != _values(base_recs[key]):
            conflicts.append(
                f"{part} {key!r} was changed since, so it cannot be deleted from an older version"
            )
            continue
        emit("retract", key)
        plan.retracted.append(key)
    if conflicts:
        raise EditConflict(
            "the edit overlaps changes made after the version this cell came from: "
            + "; ".join(conflicts)
            + f". Run `%uac edit {part}` for the current version and apply your edit there."
        )
    return plan


def _check_schema(tree: ast.Module, current: State) -> None:
    schema = parse_classes(tree)
    for name, fields in schema.types.items():
        known = current.schema.types.get(name, {})
        for fname, ftype in fields.items():
            if fname in known and known[fname] != ftype:
                raise CodeError(
                    f"class {name}: field {fname!r} is {known[fname]} in the log and cannot become "
                    f"{ftype}; add a new field instead"
                )
