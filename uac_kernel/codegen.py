"""The checkpoint as code: typed state → a readable Python module, and back by reading literals.

The module is what a person would write by hand: one pydantic class per record type, a list of
the current records of each type, a list of their earlier versions, and the rules in force.
Every value from the log appears only as a literal (``repr`` of str/int/float/bool, ``date(...)``,
``datetime(...)``), and reading a module back walks its syntax tree and accepts literals only:
nothing in it is ever executed.

The module is cut into *segments* (the header, one class per type, blocks of ``BLOCK`` records)
whose ids sort into module order, so a checkpoint re-renders only the segments its new events
touched.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Iterable, Iterator
from datetime import date, datetime
from typing import Any

from uac_kernel.errors import CodeError
from uac_kernel.fold import BLOCK, State, TypeState
from uac_kernel.records import Record
from uac_kernel.rules.engine import Rule
from uac_kernel.rules.library import LIBRARY
from uac_kernel.schema import FIELD_TYPES, Schema

__all__ = ["HEADER", "RULES", "parse_module", "read_literal", "render_module", "render_segments"]

HEADER = "0"
RULES = "3"


# -- rendering ---------------------------------------------------------------------------


def literal(value: Any) -> str:
    """Python source for a field value; round-trips through ``read_literal``."""
    if isinstance(value, datetime):
        parts = [value.year, value.month, value.day, value.hour, value.minute]
        if value.second or value.microsecond:
            parts.append(value.second)
        if value.microsecond:
            parts.append(value.microsecond)
        return f"datetime({', '.join(map(str, parts))})"
    if isinstance(value, date):
        return f"date({value.year}, {value.month}, {value.day})"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(literal(v) for v in value)
        if isinstance(value, tuple):
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        return f"[{inner}]"
    if value is None or isinstance(value, (bool, int, float, str)):
        return repr(value)
    raise CodeError(f"cannot render a value of type {type(value).__name__} as a literal")


def record_line(rec: Record) -> str:
    """One record as one line of code: ``Trip(key='...', field=..., valid_from=..., sources=(...))``."""
    parts = [f"key={rec.key!r}"]
    values = rec.__dict__
    for name in type(rec).own_fields():
        value = values[name]
        if value is not None:
            parts.append(f"{name}={literal(value)}")
    if rec.valid_from is not None:
        parts.append(f"valid_from={literal(rec.valid_from)}")
    if rec.valid_to is not None:
        parts.append(f"valid_to={literal(rec.valid_to)}")
    parts.append(f"sources={literal(tuple(rec.sources))}")
    if rec.retracted:
        parts.append("retracted=True")
    return f"    {type(rec).__name__}({', '.join(parts)}),\n"


def _annotation(ftype: str) -> str:
    return f"{ftype} | None"


def schema_class(name: str, fields: dict[str, str]) -> str:
    body = "".join(f"    {f}: {_annotation(t)} = None\n" for f, t in fields.items())
    body = body or "    pass\n"
    return f"\n\nclass {name}(Record):\n{body}"


def _header(state: State) -> str:
    clock = literal(state.now) if state.now else "None"
    return (
        f'"""The user model of {state.user!r}, checkpointed from the uac event log.\n\n'
        "Generated code. Every value is a literal: reading this module back never runs it.\n"
        "Edit a record in a notebook cell and run it to append a correction to the log.\n"
        '"""\n\n'
        "from datetime import date, datetime\n\n"
        "from uac import Record\n\n"
        f"USER = {state.user!r}\n"
        f"SEQ = {state.seq}  # the last log event this checkpoint covers\n"
        f"CLOCK = {clock}  # the time of the latest event: rules measure deadlines from it\n"
    )


def _rule_source(r: Rule) -> str | None:
    try:
        return textwrap.dedent(inspect.getsource(r.func))
    except (OSError, TypeError):  # defined where no source is kept (e.g. a bare REPL)
        return None


def rules_code(rules: Iterable[Rule]) -> str:
    """The rules section of the module (see ``_rules``)."""
    return _rules(rules)


def _rules(rules: Iterable[Rule]) -> str:
    """The rules in force: shipped ones imported by name, the user's own with their source."""
    shipped = {r.name for r in LIBRARY}
    ordered = sorted(rules, key=lambda r: r.name)
    text = "\n\n# Rules in force\n"
    listed = [r.name for r in ordered if r.name in shipped]
    if listed:
        imports = "".join(f"    {n},\n" for n in listed)
        text += f"from uac.rules import (  # noqa: E402\n{imports})\n"
    for r in ordered:
        if r.name in shipped:
            continue
        source = _rule_source(r)
        if source is None:
            text += f"\n# {r.name}: in force, but its source was not kept by the session that defined it\n"
        else:
            text += "\n\n" + source
            listed.append(r.name)
    return text + "\nRULES = [\n" + "".join(f"    {n},\n" for n in listed) + "]\n"


def _block_lines(ts: TypeState, section: str, block: int) -> str:
    lo, hi = block * BLOCK, (block + 1) * BLOCK
    if section == "history":
        return "".join(record_line(r) for r in ts.history[lo:hi])
    lines = []
    for i in range(lo, min(hi, len(ts.order))):
        key = ts.order[i]
        rec = ts.current.get(key)
        if rec is not None and ts.position[key] == i:
            lines.append(record_line(rec))
    return "".join(lines)


def _type_id(ordinal: int) -> str:
    return f"{ordinal:05d}"


def render_segments(
    state: State, dirty: Iterable[tuple[str, str, int]] | None, rules: Iterable[Rule]
) -> dict[str, str]:
    """The segments to (re)write: all of them when ``dirty`` is None, else those it names.

    The header and the rules are always included; they are small.
    """
    ordinal = {name: i + 1 for i, name in enumerate(state.types)}
    if dirty is None:
        dirty = [(name, "schema", 0) for name in state.types]
        for name, ts in state.types.items():
            dirty += [(name, "current", b) for b in range((len(ts.order) + BLOCK - 1) // BLOCK)]
            dirty += [(name, "history", b) for b in range((len(ts.history) + BLOCK - 1) // BLOCK)]
    out = {HEADER: _header(state), RULES: _rules(rules)}
    for name, section, block in dirty:
        ts = state.types[name]
        t = _type_id(ordinal[name])
        if section == "schema":
            out[f"1:{t}"] = schema_class(name, state.schema.types[name])
            out[f"2:{t}:a"] = f"\n\n# {name}: current records\n{name}_records = [\n"
            out[f"2:{t}:c"] = (
                f"]\n\n# {name}: superseded and retracted versions\n{name}_history = [\n"
            )
            out[f"2:{t}:e"] = "]\n"
        else:
            sub = "b" if section == "current" else "d"
            out[f"2:{t}:{sub}:{block:07d}"] = _block_lines(ts, section, block)
    return out


def join_segments(segments: dict[str, str]) -> str:
    return "".join(segments[k] for k in sorted(segments))


def render_module(state: State, rules: Iterable[Rule] = ()) -> str:
    """The whole module for ``state`` (a full render)."""
    return join_segments(render_segments(state, None, rules))


# -- reading back ------------------------------------------------------------------------


def read_literal(node: ast.expr) -> Any:
    """The value of a literal expression; anything that is not a literal is refused."""
    if isinstance(node, ast.Constant) and (
        node.value is None or isinstance(node.value, (bool, int, float, str))
    ):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = read_literal(node.operand)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [read_literal(e) for e in node.elts]
        return items if isinstance(node, ast.List) else tuple(items)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("date", "datetime")
        and not node.keywords
        and all(isinstance(a, ast.Constant) and type(a.value) is int for a in node.args)
    ):
        args = [a.value for a in node.args]  # type: ignore[attr-defined]
        try:
            return date(*args) if node.func.id == "date" else datetime(*args)
        except (TypeError, ValueError) as exc:
            raise CodeError(
                f"line {node.lineno}: {node.func.id}{tuple(args)} is not valid: {exc}"
            ) from None
    raise CodeError(
        f"line {getattr(node, 'lineno', '?')}: only literal values can be read back "
        f"(strings, numbers, True/False/None, lists, tuples, date(...), datetime(...)); "
        f"found {ast.unparse(node)[:60]!r}"
    )


def _read_annotation(node: ast.expr, where: str) -> str:
    # `T | None`, where T is a scalar name or list[scalar]
    if (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.BitOr)
        and isinstance(node.right, ast.Constant)
        and node.right.value is None
    ):
        node = node.left
    text = ast.unparse(node)
    if text not in FIELD_TYPES:
        raise CodeError(f"{where}: field type {text!r} is not one of {', '.join(FIELD_TYPES)}")
    return text


def parse_classes(tree: ast.Module) -> Schema:
    schema = Schema()
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            fields: dict[str, str] = {}
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    where = f"line {item.lineno}: class {node.name}"
                    fields[item.target.id] = _read_annotation(item.annotation, where)
                elif not (isinstance(item, ast.Pass) or _is_docstring(item)):
                    raise CodeError(
                        f"line {item.lineno}: class {node.name} may only declare fields "
                        "like `name: str | None = None`"
                    )
            schema.types[node.name] = fields
    return schema


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


def iter_records(
    tree: ast.Module, classes: dict[str, type[Record]]
) -> Iterator[tuple[str, str, Record]]:
    """``(type, "records"|"history", record)`` for every record call in the module's lists."""
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target = node.targets[0]
        if not isinstance(target, ast.Name) or not isinstance(node.value, ast.List):
            continue
        type_name, _, section = target.id.rpartition("_")
        if section not in ("records", "history") or type_name not in classes:
            continue
        for call in node.value.elts:
            yield type_name, section, read_record(call, classes, type_name)


def read_record(call: ast.expr, classes: dict[str, type[Record]], expected: str) -> Record:
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and not call.args):
        raise CodeError(
            f"line {getattr(call, 'lineno', '?')}: each entry must be a record like "
            f"{expected}(key='...', field=value)"
        )
    if call.func.id != expected:
        raise CodeError(f"line {call.lineno}: a {call.func.id} record in the {expected} list")
    values: dict[str, Any] = {}
    for kw in call.keywords:
        if kw.arg is None:
            raise CodeError(f"line {call.lineno}: `**` is not allowed in a record")
        values[kw.arg] = read_literal(kw.value)
    try:
        return classes[expected].model_validate(values)
    except Exception as exc:  # pydantic's ValidationError, reported in one line
        first = str(exc).splitlines()
        detail = " ".join(first[1:3]).strip() if len(first) > 1 else str(exc)
        raise CodeError(f"line {call.lineno}: {expected} record is not valid: {detail}") from None


def read_header(tree: ast.Module) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in ("USER", "SEQ", "CLOCK")
        ):
            out[node.targets[0].id] = read_literal(node.value)
    return out


def parse_module(code: str) -> State:
    """Read a checkpoint module back into a ``State`` — by reading literals, never by running it."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise CodeError(
            f"line {exc.lineno}: {exc.msg}; fix the syntax and run the cell again"
        ) from None
    header = read_header(tree)
    state = State(str(header.get("USER", "")))
    state.seq = int(header.get("SEQ", 0))
    state.now = header.get("CLOCK")
    state.schema = parse_classes(tree)
    for name, fields in state.schema.types.items():
        state.types[name] = TypeState.of(name, fields)
    classes = {name: ts.cls for name, ts in state.types.items()}
    for name, section, rec in iter_records(tree, classes):
        ts = state.types[name]
        if section == "history":
            ts.history.append(rec)
        else:
            if rec.key in ts.current:
                raise CodeError(f"{name} {rec.key!r} appears twice among the current records")
            ts.current[rec.key] = rec
            ts.position[rec.key] = len(ts.order)
            ts.order.append(rec.key)
    return state
