"""The checkpoint as code: typed state → a real Python module, and back by reading literals.

The module is what a person would write by hand, and it runs: import it and it defines one
pydantic class per record type, the current records of each type in ``records[T]``, their
earlier versions in ``history[T]``, and the rules in force in ``rules``. Every value from the log
appears only as a literal (``repr`` of str/int/float/bool, ``date(...)``, ``datetime(...)``),
wherever it stands, and the names the module binds cannot collide: record types start with a
capital letter, everything else the module binds does not (``schema.MODULE_NAMES``). Reading a
module back walks its syntax tree and accepts literals only: uac itself never runs it.

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

from uac_kernel.core.errors import CodeError, VocabularyError
from uac_kernel.core.limits import DEFAULT_LIMITS
from uac_kernel.core.names import class_name, field_identifier
from uac_kernel.core.records import Record
from uac_kernel.core.schema import FIELD_TYPES, Schema, check_field_name, check_type_name
from uac_kernel.core.segments import RULES, join_segments
from uac_kernel.rules.engine import Rule
from uac_kernel.rules.library import LIBRARY
from uac_kernel.state.fold import BLOCK, State, TypeState
from uac_kernel.vocab.binding import Binding
from uac_kernel.vocab.log import binding_json, binding_of, check_binding

__all__ = [
    "CONSTRAINTS",
    "HEADER",
    "RULES",
    "VOCABULARY",
    "list_target",
    "own_rule_sources",
    "parse_module",
    "read_literal",
    "render_module",
    "render_segments",
    "segment_part",
    "shipped",
]

HEADER = "0"
CONSTRAINTS = "4"
VOCABULARY = "5"
# A record longer than this is written one field per line (ruff's line length in this repo).
LINE = 100


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
    """One record as code: ``Trip(key='...', field=..., sources=(...)),`` on one line, or one
    argument per line when that line would be longer than ``LINE``."""
    parts = [f"key={rec.key!r}"]
    values = rec.__dict__
    for name in type(rec).own_fields():
        value = values[name]
        if value is not None:
            parts.append(f"{field_identifier(name)}={literal(value)}")
    if rec.valid_from is not None:
        parts.append(f"valid_from={literal(rec.valid_from)}")
    if rec.valid_to is not None:
        parts.append(f"valid_to={literal(rec.valid_to)}")
    parts.append(f"sources={literal(tuple(rec.sources))}")
    if rec.retracted:
        parts.append("retracted=True")
    name = class_name(type(rec).__name__)
    line = f"    {name}({', '.join(parts)}),\n"
    if len(line) <= LINE + 1:
        return line
    return f"    {name}(\n" + "".join(f"        {p},\n" for p in parts) + "    ),\n"


def schema_class(name: str, fields: dict[str, str]) -> str:
    # No `= None` defaults: a default binds the field's name in the class body, and a field
    # named `date` would then shadow the type for the annotations after it. Record makes every
    # field default to None. A name that is not an identifier is written as one (names.py) and
    # kept as written, as a literal: the class's title, the field's alias.
    body = ""
    for f, t in fields.items():
        ident = field_identifier(f)
        if ident == f:
            body += f"    {f}: {t} | None\n"
        else:
            body += f"    {ident}: Annotated[{t} | None, Field(alias={literal(f)})]\n"
    config = [f"title={literal(name)}"] if class_name(name) != name else []
    if body and _aliased(fields):
        config.append("populate_by_name=True")  # records are written with the identifiers
    if config:
        body = f"    model_config = ConfigDict({', '.join(config)})\n" + body
    body = body or "    pass\n"
    return f"\n\nclass {class_name(name)}(Record):\n{body}"


def _aliased(fields: Iterable[str]) -> bool:
    return any(field_identifier(f) != f for f in fields)


def _header_imports(schema: Schema) -> str:
    """What the classes of names written other than as identifiers need (nothing otherwise, so
    other checkpoints keep their bytes)."""
    types = schema.types
    if any(_aliased(f) for f in types.values()):
        return "from typing import Annotated\n\nfrom pydantic import ConfigDict, Field\n"
    if any(class_name(t) != t for t in types):
        return "\nfrom pydantic import ConfigDict\n"
    return ""


def _header(state: State) -> str:
    # Nothing from the log goes in the docstring: a user id is data, written only as a literal.
    clock = literal(state.now) if state.now else "None"
    return (
        '"""A user model, checkpointed from the uac event log.\n\n'
        "Generated code: every value is a literal. Import this module to use the user's records\n"
        "(pydantic objects) and rules; uac reads it back by its literals only, never by running it.\n"
        "Every field is optional: an unset field reads None. Edit a record in a notebook cell and\n"
        "run it to append a correction to the log.\n"
        '"""\n\n'
        f"from datetime import date, datetime\n{_header_imports(state.schema)}\n"
        "from uac import Record\n\n"
        f"user_id = {literal(state.user)}\n"
        f"seq = {state.seq}  # the last log event this checkpoint covers\n"
        f"clock = {clock}  # the time of the latest event: rules measure deadlines from it\n"
        "records: dict[type[Record], list[Record]] = {}  # the current records of each type\n"
        "history: dict[type[Record], list[Record]] = {}  # their superseded and retracted versions\n"
    )


def _rule_source(r: Rule) -> tuple[str, str] | None:
    """A user rule's source and the name it binds (its ``def``, or ``name = rule(...)(...)``),
    or None when no source was kept or it binds no name."""
    try:
        source = textwrap.dedent(inspect.getsource(r.func))
    except (OSError, TypeError):  # defined where no source is kept (e.g. a bare REPL)
        return None
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            return source, node.name
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            return source, node.targets[0].id
    return None


def shipped(rules: Iterable[Rule]) -> set[str]:
    """The names of ``rules`` that are the library's own functions."""
    # Shipped means the library's own function: a notebook rule may take a shipped rule's name.
    library = {r.name: r.func for r in LIBRARY}
    return {r.name for r in rules if library.get(r.name) is r.func}


def _own(r: Rule, library: set[str]) -> bool:
    """Whether ``r`` is the user's own: rendered with its source."""
    # a compiled constraint's function is uac's own code; the constraint is rendered as data
    module = getattr(r.func, "__module__", None) or ""  # None for code run from a cell
    return r.name not in library and not module.startswith("uac_kernel.constraints.")


def own_rule_sources(rules: Iterable[Rule]) -> dict[str, str]:
    """The source of each of the user's own rules that has one kept, by rule name."""
    rules = list(rules)
    library = shipped(rules)
    return {
        r.name: found[0]
        for r in rules
        if _own(r, library) and (found := _rule_source(r)) is not None
    }


def rules_code(rules: Iterable[Rule]) -> str:
    """The rules in force: shipped ones imported by name, the user's own with their source."""
    ordered = sorted(rules, key=lambda r: r.name)
    library = shipped(ordered)
    text = "\n\n# Rules in force\n"
    listed = [r.name for r in ordered if r.name in library]
    if listed:
        imports = "".join(f"    {n},\n" for n in listed)
        text += f"from uac.rules import (  # noqa: E402\n{imports})\n"
    own = ""
    for r in ordered:
        if not _own(r, library):
            continue
        found = _rule_source(r)
        if found is None:
            own += f"\n# {r.name}: in force, but its source was not kept by the session that defined it\n"
        else:
            own += "\n\n" + found[0]
            listed.append(found[1])
    if len(listed) > len(library):
        # What a rule written in a notebook cell has at hand there (magics_code.RULE_HELPERS), and
        # `uac` for rules decorated `@uac.rule`, as docs/rules.md writes them.
        text += (
            "from datetime import timedelta  # noqa: E402\n\n"
            "import uac  # noqa: E402\n"
            "from uac import Finding, rule  # noqa: E402\n"
        )
    return text + own + "\nrules = [\n" + "".join(f"    {n},\n" for n in listed) + "]\n"


def json_literal(value: Any) -> str:
    """Python source for a JSON value (objects, arrays, scalars): literals all the way down."""
    if isinstance(value, dict):
        return (
            "{" + ", ".join(f"{literal(str(k))}: {json_literal(v)}" for k, v in value.items()) + "}"
        )
    if isinstance(value, list):
        return "[" + ", ".join(json_literal(v) for v in value) + "]"
    return literal(value)


def constraints_code(state: State) -> str:
    """The constraints in force as data: ``constraints = {key: {...}}``, in the order they came
    into force; empty when the user never had one (so older checkpoints keep their bytes)."""
    if not state.constraints and not state.constraint_history:
        return ""
    from uac_kernel.language.spec import constraint_json

    lines = "".join(
        f"    {literal(key)}: {json_literal(constraint_json(cv.constraint))},\n"
        for key, cv in state.constraints.items()
    )
    return (
        "\n\n# Constraints in force: typed data that uac compiles into rules (docs/constraints.md).\n"
        "# Change them with `%%uac constraint` or `uac constrain`, not by editing this block.\n"
        f"constraints: dict[str, dict] = {{\n{lines}}}\n"
    )


def vocabulary_code(state: State) -> str:
    """The user's vocabulary bindings as data: ``vocabulary = [{...}, ...]``, in the order they
    were first bound; empty when the user never had one (so older checkpoints keep their bytes)."""
    bindings = state.vocab.bindings
    if not bindings and not state.vocab_seq:
        return ""
    lines = "".join(f"    {json_literal(binding_json(b))},\n" for b in bindings)
    return (
        "\n\n# Vocabulary: which of this user's types and fields carry the concepts rules read\n"
        "# (docs/vocabulary.md). Change it with `uac vocab bind` or a `%%uac vocab` cell.\n"
        f"vocabulary: list[dict] = [\n{lines}]\n"
    )


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

    The header, the rules, the constraints and the vocabulary are always included; they are
    small (a user has at most ``Limits.constraints`` in force, and a binding per field).
    """
    ordinal = {name: i + 1 for i, name in enumerate(state.types)}
    if dirty is None:
        dirty = [(name, "schema", 0) for name in state.types]
        for name, ts in state.types.items():
            dirty += [(name, "current", b) for b in range((len(ts.order) + BLOCK - 1) // BLOCK)]
            dirty += [(name, "history", b) for b in range((len(ts.history) + BLOCK - 1) // BLOCK)]
    out = {HEADER: _header(state), RULES: rules_code(rules)}
    if given := constraints_code(state):
        out[CONSTRAINTS] = given
    if bound := vocabulary_code(state):
        out[VOCABULARY] = bound
    for name, section, block in dirty:
        ts = state.types[name]
        t = _type_id(ordinal[name])
        if section == "schema":
            out[f"1:{t}"] = schema_class(name, state.schema.types[name])
            cls = class_name(name)
            out[f"2:{t}:a"] = f"\n\n# {cls}: current records\nrecords[{cls}] = [\n"
            out[f"2:{t}:c"] = (
                f"]\n\n# {cls}: superseded and retracted versions\nhistory[{cls}] = [\n"
            )
            out[f"2:{t}:e"] = "]\n"
        else:
            sub = "b" if section == "current" else "d"
            out[f"2:{t}:{sub}:{block:07d}"] = _block_lines(ts, section, block)
    return out


def segment_part(state: State, segment: str) -> tuple[str, str, int] | None:
    """The ``(type, section, block)`` that renders ``segment`` (None: the header or the rules;
    the inverse of the ids ``render_segments`` writes)."""
    parts = segment.split(":")
    if parts[0] in (HEADER, RULES, CONSTRAINTS, VOCABULARY) or len(parts) < 2:
        return None
    names = {_type_id(i + 1): name for i, name in enumerate(state.types)}
    name = names.get(parts[1])
    if name is None:
        return None
    if parts[0] == "1" or parts[2] in ("a", "c", "e"):
        return (name, "schema", 0)
    return (name, "current" if parts[2] == "b" else "history", int(parts[3]))


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
        except (TypeError, ValueError, OverflowError) as exc:
            raise CodeError(
                f"line {node.lineno}: {node.func.id}{tuple(args)} is not valid: {exc}"
            ) from None
    raise CodeError(
        f"line {getattr(node, 'lineno', '?')}: only literal values can be read back "
        f"(strings, numbers, True/False/None, lists, tuples, date(...), datetime(...)); "
        f"found {ast.unparse(node)[:60]!r}"
    )


def _read_field(item: ast.AnnAssign, where: str) -> tuple[str, str]:
    """A class body's field line as ``(name as written, ftype)``: ``name: T | None``, or
    ``ident: Annotated[T | None, Field(alias='name as written')]``."""
    ident = item.target.id  # type: ignore[union-attr]
    node, name = item.annotation, ident
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == "Annotated"
        and isinstance(node.slice, ast.Tuple)
        and len(node.slice.elts) == 2
    ):
        node, alias = node.slice.elts
        written = _call_literals(alias, "Field", where).get("alias")
        if not isinstance(written, str):
            raise CodeError(f"{where}: field {ident} needs Field(alias='its name as written')")
        name = written
    if (why := check_field_name(name)) is not None:
        raise CodeError(f"{where}: {why}")
    if field_identifier(name) != ident:
        raise CodeError(
            f"{where}: the field {name!r} is written {field_identifier(name)} in code, not {ident}"
        )
    return name, _read_annotation(node, where)


def _call_literals(node: ast.expr, func: str, where: str) -> dict[str, Any]:
    """The keyword literals of ``func(a=..., b=...)``."""
    if not (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == func
        and not node.args
        and all(kw.arg is not None for kw in node.keywords)
    ):
        raise CodeError(
            f"{where}: expected {func}(name=value, ...), found {ast.unparse(node)[:60]!r}"
        )
    return {str(kw.arg): read_literal(kw.value) for kw in node.keywords}


def _class_title(item: ast.stmt, where: str) -> str | None:
    """The type name as written from ``model_config = ConfigDict(title=...)``, or None when
    ``item`` is not that line."""
    if not (
        isinstance(item, ast.Assign)
        and len(item.targets) == 1
        and isinstance(item.targets[0], ast.Name)
        and item.targets[0].id == "model_config"
    ):
        return None
    config = _call_literals(item.value, "ConfigDict", where)
    title = config.get("title")
    return title if isinstance(title, str) else ""


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
    """The record classes of a module, by type name as written (a class's title, else its name)."""
    schema = Schema()
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            name = node.name
            fields: dict[str, str] = {}
            for item in node.body:
                where = f"line {item.lineno}: class {node.name}"
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    written, ftype = _read_field(item, where)
                    fields[written] = ftype
                elif (title := _class_title(item, where)) is not None:
                    name = title or name
                elif not (isinstance(item, ast.Pass) or _is_docstring(item)):
                    raise CodeError(
                        f"line {item.lineno}: class {node.name} may only declare fields "
                        "like `name: str | None`"
                    )
            if (why := check_type_name(name)) is not None:
                raise CodeError(f"line {node.lineno}: {why}")
            if class_name(name) != node.name:
                raise CodeError(
                    f"line {node.lineno}: the type {name!r} is written class "
                    f"{class_name(name)} in code, not {node.name}"
                )
            schema.types[name] = fields
    return schema


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


def list_target(node: ast.stmt) -> tuple[str, str] | None:
    """``(type, "records"|"history")`` when ``node`` assigns one of the module's record lists:
    ``records[Trip] = [...]``, or the ``Trip_records = [...]`` form of checkpoints made before
    version 0.2, which cells saved in older notebooks still hold."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
        return None
    target = node.targets[0]
    if (
        isinstance(target, ast.Subscript)
        and isinstance(target.value, ast.Name)
        and target.value.id in ("records", "history")
        and isinstance(target.slice, ast.Name)
    ):
        return target.slice.id, target.value.id
    if isinstance(target, ast.Name):
        type_name, _, section = target.id.rpartition("_")
        if section in ("records", "history") and type_name[:1].isupper():
            return type_name, section
    return None


def iter_records(
    tree: ast.Module, classes: dict[str, type[Record]]
) -> Iterator[tuple[str, str, Record]]:
    """``(type, "records"|"history", record)`` for every record call in the module's lists
    (``classes`` by type name as written; the lists name their classes)."""
    written = {class_name(t): t for t in classes}
    for node in tree.body:
        found = list_target(node)
        if found is None or found[0] not in written:
            continue
        type_name, section = written[found[0]], found[1]
        value = node.value  # type: ignore[attr-defined]
        if not isinstance(value, ast.List):
            raise CodeError(f"line {node.lineno}: {section}[{type_name}] must be a list of records")
        for call in value.elts:
            yield type_name, section, read_record(call, classes, type_name)


def read_record(call: ast.expr, classes: dict[str, type[Record]], expected: str) -> Record:
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and not call.args):
        raise CodeError(
            f"line {getattr(call, 'lineno', '?')}: each entry must be a record like "
            f"{class_name(expected)}(key='...', field=value)"
        )
    cls = classes[expected]
    shown = class_name(expected)
    if call.func.id != shown:
        raise CodeError(f"line {call.lineno}: a {call.func.id} record in the {shown} list")
    values: dict[str, Any] = {}
    written = {field_identifier(f): f for f in cls.own_fields()}
    for kw in call.keywords:
        if kw.arg is None:
            raise CodeError(f"line {call.lineno}: `**` is not allowed in a record")
        values[written.get(kw.arg, kw.arg)] = read_literal(kw.value)
    try:
        return cls.model_validate(values)
    except Exception as exc:  # pydantic's ValidationError, reported in one line
        first = str(exc).splitlines()
        detail = " ".join(first[1:3]).strip() if len(first) > 1 else str(exc)
        raise CodeError(f"line {call.lineno}: {expected} record is not valid: {detail}") from None


def read_header(tree: ast.Module) -> dict[str, Any]:
    """``user_id``, ``seq`` and ``clock`` of a module, read as literals."""
    out: dict[str, Any] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in ("user_id", "seq", "clock")
        ):
            out[node.targets[0].id] = read_literal(node.value)
    return out


def read_vocabulary(tree: ast.Module) -> list[Binding]:
    """The bindings of a module's ``vocabulary = [{...}, ...]``, read as literals and checked
    as a vocabulary event's are (none when the module has no such list)."""
    for node in tree.body:
        target: ast.expr | None = node.target if isinstance(node, ast.AnnAssign) else None
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
        if not (isinstance(target, ast.Name) and target.id == "vocabulary"):
            continue
        value = node.value  # type: ignore[attr-defined]
        if not isinstance(value, ast.List):
            raise CodeError(f"line {node.lineno}: vocabulary must be a list of bindings")
        out = []
        for item in value.elts:
            if not isinstance(item, ast.Dict) or None in item.keys:
                raise CodeError(f"line {item.lineno}: each binding must be a {{...}} of literals")
            pairs = zip(item.keys, item.values, strict=True)
            d = {read_literal(k): read_literal(v) for k, v in pairs}  # type: ignore[arg-type]
            try:
                out.append(binding_of(check_binding(d, "add", DEFAULT_LIMITS.value_chars)))
            except VocabularyError as exc:
                raise CodeError(f"line {item.lineno}: {exc}") from None
        return out
    return []


def parse_module(code: str) -> State:
    """Read a checkpoint module back into a ``State`` — by reading literals, never by running it."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise CodeError(
            f"line {exc.lineno}: {exc.msg}; fix the syntax and run the cell again"
        ) from None
    header = read_header(tree)
    user, seq, clock = header.get("user_id", ""), header.get("seq", 0), header.get("clock")
    if not isinstance(user, str) or type(seq) is not int or not isinstance(clock, datetime | None):
        raise CodeError(
            "the header must say user_id = 'a string', seq = an integer, "
            "clock = datetime(...) or None"
        )
    state = State(user)
    state.seq = seq
    state.now = clock
    state.schema = parse_classes(tree)
    state.bind(read_vocabulary(tree))
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
