"""Edits of the user model as code: a changed cell becomes correction events in the log.

A checkpoint is shown in parts — the schema, one part per record type, the rules — each a piece
of the generated module. When a part comes back edited, it is read by literals only (never run),
compared with the checkpoint version it was rendered from, and turned into ``add`` / ``update``
/ ``retract`` facts authored by the notebook. If the log moved on since that version, edits to
records nobody else touched are merged; an edit that overlaps a later change is refused.

A record type's part may hold a *selection* of its records (``Selection``: keys, an expression
over each record, the most recently changed): the cell then answers for those records only. The
selection is recomputed against the version the cell came from, so applying it is
deterministic; a record left out of the cell's selection is never retracted by it.
"""

from __future__ import annotations

import ast
import hashlib
import re
import textwrap
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from uac_kernel.checkpoints.codegen import (
    list_target,
    parse_classes,
    read_literal,
    read_record,
    record_line,
    schema_class,
)
from uac_kernel.core.display import close_matches, plural
from uac_kernel.core.errors import (
    CodeError,
    EditConflict,
    QueryError,
    SandboxFailed,
    SandboxLimit,
    SandboxRefused,
    UnknownField,
)
from uac_kernel.core.names import class_name, field_clash, field_identifier
from uac_kernel.core.records import Record, field_values, record_class
from uac_kernel.core.schema import RESERVED_FIELDS, check_field_name, infer, to_json_value
from uac_kernel.sandbox import check
from uac_kernel.state.fold import State

__all__ = [
    "LARGE",
    "Cell",
    "EditPlan",
    "RuleSource",
    "Selection",
    "part_names",
    "plan_edit",
    "render_part",
    "rule_sources",
    "select_keys",
    "source_lines",
]

SCHEMA = "schema"
RULES = "rules"
# A type with more current records than this is worth narrowing before it is edited in a cell.
LARGE = 200


def part_names(state: State) -> list[str]:
    """The parts a checkpoint is shown in: the schema, one per record type, the rules."""
    return [SCHEMA, *state.types, RULES]


def render_part(
    state: State, part: str, rules_code: str = "", keys: Collection[str] | None = None
) -> str:
    """The code of one part, as the checkpoint module has it; of a record type, only the
    records under ``keys`` when given (in module order), headed by a comment that says so."""
    if part == SCHEMA:
        return "".join(schema_class(n, f) for n, f in state.schema.types.items()).lstrip("\n")
    if part == RULES:
        return rules_code.lstrip("\n")
    if part not in state.types:
        raise CodeError(f"no part {part!r}; parts are: {', '.join(part_names(state))}")
    ts = state.types[part]
    records = ts.current.values()
    note = ""
    if keys is not None:
        wanted = set(keys)
        records = [r for r in records if r.key in wanted]  # type: ignore[assignment]
        note = (
            f"# {len(records):,} of {plural(len(ts.current), f'{part} record', fmt=',')}, as selected; "
            "the others stay as they are.\n"
        )
    lines = "".join(record_line(r) for r in records)
    return (
        schema_class(part, state.schema.types[part]).lstrip("\n")
        + f"\n\n{note}records[{class_name(part)}] = [\n{lines}]\n"
    )


@dataclass(frozen=True)
class Selection:
    """Which records of a type a cell holds; nothing given: all of them.

    ``keys``: the records with these keys. ``where``: those for which a query expression over
    one record, bound to ``r``, is true — ``r.country == 'Japan'`` — run in the sandbox with
    the query namespace (``user``, the record classes, the safe builtins) around it. ``last``:
    the ``last`` most recently changed or created records (by the latest log event behind each).
    Given together they narrow each other: of the keys given, those ``where`` holds for, the
    ``last`` most recent of those.
    """

    keys: tuple[str, ...] = ()
    where: str | None = None
    last: int | None = None

    @classmethod
    def of(
        cls,
        key: str | Iterable[str] | None = None,
        where: str | None = None,
        last: int | None = None,
    ) -> Selection:
        """A selection from the arguments the faces take: one key or several."""
        keys = (key,) if isinstance(key, str) else tuple(key or ())
        for k in keys:
            if not isinstance(k, str):
                raise QueryError(f"a key is a string, not {type(k).__name__} ({k!r})")
        if where is not None and not isinstance(where, str):
            raise QueryError(f"where is an expression as a string, not {type(where).__name__}")
        if last is not None and (isinstance(last, bool) or not isinstance(last, int) or last < 1):
            raise QueryError(
                f"last must be a positive number of records, not {last!r}; "
                "it picks the N most recently changed records"
            )
        return cls(tuple(dict.fromkeys(keys)), where, last)

    def __bool__(self) -> bool:
        return bool(self.keys) or self.where is not None or self.last is not None

    def describe(self, shown: int = 3) -> str:
        """One line: ``key 'a', 'b'; where "r.x == 1"; last 5`` (every value a literal)."""
        out = []
        if self.keys:
            more = len(self.keys) - shown
            listed = ", ".join(repr(k) for k in self.keys[:shown])
            out.append(f"key {listed}" + (f" and {more:,} more" if more > 0 else ""))
        if self.where is not None:
            out.append(f"where {self.where!r}")
        if self.last is not None:
            out.append(f"last {self.last}")
        return "; ".join(out) or "all records"


@dataclass(frozen=True)
class Cell:
    """One part of a checkpoint as an editable cell: its code and which records it holds.

    ``keys`` are the records of the type the selection picked (None: a whole part); ``total``
    is how many current records the type has in that version (0 for schema and rules).
    """

    part: str
    version: int
    code: str
    selection: Selection = Selection()
    keys: list[str] | None = None
    total: int = 0

    @property
    def large(self) -> bool:
        """The whole of a type with more than ``LARGE`` records: worth narrowing."""
        return self.keys is None and self.total > LARGE


def where_query(part: str, where: str, names: Collection[str], fields: Collection[str]) -> str:
    """The one sandboxed query that lists the keys of the records of ``part`` for which
    ``where`` (an expression over a record ``r``) is true. ``where`` meets the sandbox's static
    check on its own first, so its errors name the user's text, not the query around it.

    ``r.NAME`` must name one of ``fields`` (or ``key``, ``valid_from``, ``valid_to``,
    ``sources``): checked before it runs, so a misspelt name is refused even when the part
    holds no record to read it on."""
    expr = check(where, [*names, "r"]).body
    rebinds = any(
        isinstance(n, ast.Name) and n.id == "r" and not isinstance(n.ctx, ast.Load)
        for n in ast.walk(expr)
    ) or any(isinstance(n, ast.arg) and n.arg == "r" for n in ast.walk(expr))
    # a field as code writes it (`r.from_`, names.field_identifier) is one of them too
    idents = [i for f in fields if (i := field_identifier(f)) != f]
    known = [*fields, *idents, *Record.model_fields]
    for node in ast.walk(expr):
        if (
            not rebinds
            and isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "r"
            and node.attr not in known
            and not hasattr(Record, node.attr)
        ):
            raise UnknownField(part, node.attr, known)
    query = ast.parse("[r.key for r in user.all(T) if x]", mode="eval")
    comp = query.body
    assert isinstance(comp, ast.ListComp)  # the template above
    call = comp.generators[0].iter
    assert isinstance(call, ast.Call)
    call.args[0] = ast.Constant(part)
    comp.generators[0].ifs[0] = expr
    return ast.unparse(ast.fix_missing_locations(query))


def select_keys(
    state: State,
    part: str,
    sel: Selection,
    run: Callable[[str], object],
    names: Collection[str],
    version: int,
) -> list[str] | None:
    """The keys of the current records of ``part`` in ``state`` that ``sel`` picks, in module
    order; None when ``sel`` is empty. ``run`` evaluates a query in the sandbox over
    ``state`` (whose namespace has ``names``); ``version`` names the checkpoint in errors."""
    if not sel:
        return None
    if part not in state.types:
        what = "has no records" if part in (SCHEMA, RULES) else "is not a record type"
        raise QueryError(
            f"{part} {what} to select from; key, where and last pick records of a record type"
        )
    current = state.types[part].current
    keys = list(current)
    if sel.keys:
        unknown = [k for k in sel.keys if k not in current]
        if unknown:
            raise QueryError(_unknown_keys(state, part, unknown, version))
        wanted = set(sel.keys)
        keys = [k for k in keys if k in wanted]
    if sel.where is not None:
        try:
            query = where_query(part, sel.where, names, state.schema.types.get(part, {}))
            found = run(query)
        except (SandboxRefused, SandboxFailed, SandboxLimit) as exc:
            raise type(exc)(f"where {sel.where!r}: {exc}") from exc
        if not isinstance(found, list):
            raise QueryError(f"where {sel.where!r} did not select records")
        matched = set(found)
        keys = [k for k in keys if k in matched]
    if sel.last is not None and len(keys) > sel.last:
        # The most recent: the latest log event behind each record (its last source).
        recent = sorted(keys, key=lambda k: max(current[k].sources, default=0))[-sel.last :]
        chosen = set(recent)
        keys = [k for k in keys if k in chosen]
    return keys


def _unknown_keys(state: State, part: str, unknown: list[str], version: int) -> str:
    """``no Trip with key 'tokio' in checkpoint 3. Did you mean 'tokyo-2025'?``"""
    listed = ", ".join(repr(k) for k in unknown[:3]) + (
        f" and {len(unknown) - 3:,} more" if len(unknown) > 3 else ""
    )
    text = f"no {part} with key{'s' if len(unknown) > 1 else ''} {listed} in checkpoint {version}"
    first = unknown[0]
    if any(r.key == first for r in state.types[part].history):
        return text + f" ({first!r} was retracted before it)"
    keys = list(state.types[part].current)
    close = close_matches(first, keys, n=3)
    if close:
        return text + f". Did you mean {', '.join(repr(c) for c in close)}?"
    return text + (f"; its keys include {', '.join(repr(k) for k in keys[:3])}" if keys else "")


@dataclass(frozen=True)
class RuleSource:
    """A ``@rule`` function written in a cell: its name and its exact source text."""

    name: str
    source: str


def source_lines(code: str) -> list[str]:
    """``code``'s lines as Python numbers them (ends kept): only ``\\n``, ``\\r\\n`` and ``\\r``
    end a line, unlike ``str.splitlines``, which also breaks at ``\\x0c``, ``\\x85``, U+2028..."""
    return re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z", code)


def rule_sources(code: str) -> list[RuleSource]:
    """The ``@rule`` functions a cell defines (found in its syntax tree, not run)."""
    tree = _parse(code)
    found = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any(_is_rule(d) for d in node.decorator_list):
            # The function's own span starts at `def`; the rule starts at its first decorator.
            first = min(d.lineno for d in node.decorator_list)
            end = node.end_lineno or node.lineno
            source = "".join(source_lines(code)[first - 1 : end]).rstrip("\r\n") + "\n"
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
    return {k: v for k, v in field_values(rec).items() if v is not None}


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
    shown = class_name(part)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == shown:
            idents = {field_identifier(f) for f in fields}
            for kw in node.keywords:
                if kw.arg is None or kw.arg in idents or kw.arg in RESERVED_FIELDS:
                    continue
                why = check_field_name(kw.arg) or field_clash(part, fields, kw.arg)
                if why is not None:
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
        if found[0] != shown:
            raise CodeError(
                f"line {node.lineno}: this cell is the {part} part; records[{found[0]}] "
                "belongs to another"
            )
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.List):
            raise CodeError(
                f"line {node.lineno}: records[{shown}] must be a list of {shown}(...) records"
            )
        records = {}
        for call in node.value.elts:
            rec = read_record(call, {part: cls}, part)
            if rec.key in records:
                raise CodeError(f"line {call.lineno}: {part} {rec.key!r} appears twice")
            records[rec.key] = rec
    return records


# The checkpoint's data blocks a cell of records does not edit: each changes through events of
# its own kind, so a cell's change to one would be silently lost. What to do instead:
_BLOCKS = {
    "constraints": "change a constraint with a `%%uac constraint --key KEY` cell of YAML or "
    "JSON (or `uac constrain`), retract one with `%uac constraint --retract KEY`",
    "vocabulary": "bind with `uac vocab bind TYPE.FIELD CONCEPT` (or a `%%uac vocab` cell), "
    "reject a binding with `uac vocab unbind TYPE.FIELD CONCEPT`",
}


def _refuse_blocks(tree: ast.Module) -> None:
    """A cell that writes, deletes or calls a method on the checkpoint's ``constraints`` or
    ``vocabulary`` block (anywhere in a statement: ``constraints['k'] = ...``, ``del``, a tuple
    target, ``:=``, ``.append()``) is refused in one line that says how to change it."""
    for node in ast.walk(tree):
        targets: list[ast.expr]
        # Read by another path (``v = vocabulary``, ``[vocabulary][0]``, ``globals()['vocabulary']``)
        # a block could be changed where no target names it: a cell only ever assigns it.
        if (
            isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in _BLOCKS
        ) or (
            isinstance(node, ast.Subscript)
            and isinstance(node.slice, ast.Constant)
            and node.slice.value in _BLOCKS
            and isinstance(node.value, ast.Call)
        ):
            named = node.id if isinstance(node, ast.Name) else str(node.slice.value)  # type: ignore[attr-defined]
            raise CodeError(
                f"line {node.lineno}: the {named} block is not edited in a cell; " + _BLOCKS[named]
            )
        if isinstance(node, ast.Assign | ast.Delete):
            targets = node.targets
        elif isinstance(
            node,
            ast.AugAssign
            | ast.AnnAssign
            | ast.NamedExpr
            | ast.For
            | ast.AsyncFor
            | ast.comprehension,
        ):
            targets = [node.target]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets = [node.optional_vars]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            targets = [node.func.value]
        else:
            continue
        for target in targets:
            if (block := _block_named(target)) is not None:
                raise CodeError(
                    f"line {target.lineno}: the {block} block is not edited in a cell; "
                    + _BLOCKS[block]
                )


def _block_named(target: ast.expr) -> str | None:
    """The block ``target`` is (``constraints``), a part of (``constraints['k'][...]``,
    ``vocabulary[0]``) or holds in a tuple or list, or None."""
    if isinstance(target, ast.Tuple | ast.List):
        return next((b for t in target.elts if (b := _block_named(t)) is not None), None)
    while isinstance(target, ast.Subscript | ast.Attribute | ast.Starred):
        target = target.value
    return target.id if isinstance(target, ast.Name) and target.id in _BLOCKS else None


def plan_edit(
    base: State,
    current: State,
    code: str,
    part: str,
    digest_of: str,
    selected: Collection[str] | None = None,
) -> EditPlan:
    """The facts that turn ``base`` (the version the cell came from) into what the cell says,
    applied on top of ``current`` — or an ``EditConflict`` when they overlap later changes.

    ``selected``: the keys of ``base`` the cell was made of (``select_keys``); None, every
    record of the type. Only a selected record missing from the cell is retracted; every
    record the cell holds is compared with ``base``, whether selected or not."""
    tree = _parse(code)
    _refuse_blocks(tree)
    plan = EditPlan(rules=rule_sources(code), merged=current.seq != base.seq)
    if part in (SCHEMA, RULES):
        _check_schema(tree, current, new_ones=part == SCHEMA)
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
    answers_for = base_recs if selected is None else [k for k in selected if k in base_recs]
    for key in answers_for:
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


def _check_schema(tree: ast.Module, current: State, new_ones: bool) -> None:
    """The classes of a cell against the schema the log holds: a field's type cannot change.

    ``new_ones`` (the schema part): a class or a field the log does not have is an error that
    says how one is added — types and fields come from values, not from declarations, so
    applying it would silently change nothing."""
    schema = parse_classes(tree)
    for name, fields in schema.types.items():
        if name not in current.schema.types:
            if new_ones:
                raise CodeError(
                    f"{name} is new: a type comes into the schema with its first record — "
                    f"add one as a fact, e.g. with `%uac ingest FILE` or `wb.ingest([...])`"
                )
            continue
        known = current.schema.types[name]
        for fname, ftype in fields.items():
            if fname not in known:
                if new_ones:
                    raise CodeError(
                        f"{name}.{fname} is new: a field comes into the schema with its first "
                        f"value — give a record a value in `%uac edit {name}`"
                    )
            elif known[fname] != ftype:
                raise CodeError(
                    f"class {name}: field {fname!r} is {known[fname]} in the log and cannot become "
                    f"{ftype}; add a new field instead"
                )
