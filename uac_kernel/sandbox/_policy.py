"""The static wall: what a query may say, checked on its syntax tree before it runs, and the
builtins it may call. See the package docstring for why each refusal is there.
"""

from __future__ import annotations

import ast
import functools
import importlib
import sys
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from types import CodeType, MappingProxyType
from typing import Final

from uac_kernel.core.display import close_matches
from uac_kernel.core.errors import SandboxRefused

MAX_EXPRESSION_CHARS: Final = 10_000
"""Longer expressions are refused before parsing."""

MAX_DEPTH: Final = 100
"""Expressions whose syntax tree nests deeper than this are refused."""


_SAFE_BUILTINS: Final[Mapping[str, object]] = MappingProxyType(
    {
        "len": len,
        "sum": sum,
        "min": min,
        "max": max,
        "sorted": sorted,
        "any": any,
        "all": all,
        "set": set,
        "list": list,
        "dict": dict,
        "tuple": tuple,
        "range": range,
        "enumerate": enumerate,
        "zip": zip,
        "round": round,
        "abs": abs,
        "str": str,
        "int": int,
        "float": float,
        "bool": bool,
        "date": date,
        "datetime": datetime,
        "timedelta": timedelta,
        "Counter": Counter,
    }
)


def safe_builtins() -> dict[str, object]:
    """The builtins a query sees (a fresh dict): DESIGN.md's safe set plus the date helpers."""
    return dict(_SAFE_BUILTINS)


# Modules C code reached from a query may load for the first time (datetime.strptime loads
# _strptime; date.strftime and date.timetuple load time).
_C_IMPORTS: Final = frozenset({"_strptime", "time"})


def _import_for_c_code(
    name: str,
    module_globals: object = None,
    module_locals: object = None,
    fromlist: object = (),
    level: int = 0,
) -> None:
    """The ``__import__`` of the query's builtins, for C code only.

    C functions import through the running frame's builtins (``PyImport_Import``) and then take
    the module from ``sys.modules``, ignoring what ``__import__`` returns. So this loads a module
    that is already loaded or one of ``_C_IMPORTS``, and returns None: nothing reaches the caller.
    A query cannot name it anyway (``_`` names are refused statically).
    """
    if level == 0 and (name in sys.modules or name in _C_IMPORTS):
        importlib.import_module(name)
        return
    raise ImportError(f"import of {name!r} is not available in a query")


def _runtime_builtins() -> dict[str, object]:
    return {**_SAFE_BUILTINS, "__import__": _import_for_c_code}


# --- static check -------------------------------------------------------------------------

_ALLOWED_NODES: Final[frozenset[type[ast.AST]]] = frozenset(
    {
        # literals, names, containers
        *(ast.Expression, ast.Constant, ast.Name, ast.Load, ast.Store, ast.Starred),
        *(ast.Tuple, ast.List, ast.Dict, ast.Set, ast.JoinedStr, ast.FormattedValue),
        # access and calls
        *(ast.Attribute, ast.Subscript, ast.Slice, ast.Call, ast.keyword),
        # comprehensions, lambdas, conditionals, walrus
        *(ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.comprehension),
        *(ast.Lambda, ast.arguments, ast.arg, ast.IfExp, ast.NamedExpr),
        # operators
        *(ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Invert, ast.Not, ast.UAdd, ast.USub),
        *(ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.MatMult, ast.Div, ast.FloorDiv, ast.Mod),
        *(ast.Pow, ast.LShift, ast.RShift, ast.BitOr, ast.BitXor, ast.BitAnd),
        *(ast.Compare, ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE),
        *(ast.Is, ast.IsNot, ast.In, ast.NotIn),
    }
)

_NODE_NAMES: Final[Mapping[type[ast.AST], str]] = MappingProxyType(
    {ast.Await: "'await'", ast.Yield: "'yield'", ast.YieldFrom: "'yield from'"}
)

# Attributes of frames, code objects, tracebacks, generators and coroutines (and their Python 2
# spellings): each leads to globals, builtins or bytecode.
_INTERNAL_ATTRS: Final = frozenset(
    {
        "f_back",
        "f_builtins",
        "f_code",
        "f_globals",
        "f_lasti",
        "f_lineno",
        "f_locals",
        "f_trace",
        "f_trace_lines",
        "f_trace_opcodes",
        "f_generator",
    }
)
_INTERNAL_PREFIXES: Final = ("gi_", "cr_", "ag_", "tb_", "co_", "func_", "im_")
_FORMAT_ATTRS: Final = frozenset({"format", "format_map"})
_PYDANTIC_ATTRS: Final = frozenset(
    {
        "construct",
        "copy",
        "dict",
        "from_orm",
        "json",
        "parse_file",
        "parse_obj",
        "parse_raw",
        "schema",
        "schema_json",
        "update_forward_refs",
        "validate",
    }
)


# Methods that change the object they are called on, on every mutable type a query can reach
# (lists, dicts, sets, Counters; deque and bytearray for good measure), ``register`` (ABC
# registration changes a record class's registry; pydantic ignores it in isinstance today, but
# that is not ours to rely on) and the generator methods. An expression naming one of them may change objects that outlive it, so it
# never runs in a warm worker (see WarmSandbox): only in a throw-away child.
_MUTATING_ATTRS: Final = frozenset(
    {
        *("append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse"),
        *("update", "setdefault", "popitem", "subtract"),
        *("add", "discard", "difference_update", "intersection_update"),
        "symmetric_difference_update",
        *("appendleft", "extendleft", "popleft", "rotate"),
        "register",
        *("send", "throw", "close"),
    }
)


def _attribute_refusal(name: str) -> str | None:
    """Why attribute ``name`` may not be read, or None when it may."""
    if name.startswith("_"):
        return f"attribute '{name}' is not allowed: dunder and private attributes are off limits"
    if name in _INTERNAL_ATTRS or name.startswith(_INTERNAL_PREFIXES):
        return (
            f"attribute '{name}' is not allowed: it reaches interpreter internals "
            "(frames, code, globals)"
        )
    if name in _FORMAT_ATTRS:
        return (
            f"attribute '{name}' is not allowed: str.{name} reads attributes named inside the "
            "string; use an f-string or '%' formatting"
        )
    if name == "mro":
        return "attribute 'mro' is not allowed: it reaches the class hierarchy up to object"
    if name.startswith("model_") or name in _PYDANTIC_ATTRS:
        return (
            f"attribute '{name}' is not allowed: pydantic model methods can read files and "
            "build classes; read fields directly (record.field) and build results with dict(...)"
        )
    return None


def _private(name: str) -> bool:
    """Names starting with ``_`` are off limits; only the throw-away local ``_`` is allowed."""
    return name.startswith("_") and name != "_"


def _refuse_name(name: str) -> SandboxRefused:
    return SandboxRefused(f"name '{name}' is not allowed: names starting with '_' are off limits")


def _check_target(target: ast.expr) -> None:
    """A comprehension target may only bind names (possibly unpacked), never store into objects."""
    if isinstance(target, ast.Name):
        return
    if isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            _check_target(elt)
        return
    if isinstance(target, ast.Starred):
        _check_target(target.value)
        return
    raise SandboxRefused(
        f"a comprehension may only bind names, not assign to {type(target).__name__.lower()}s"
    )


def _check_node(node: ast.AST) -> None:
    """Refuse one node that is not on the whitelist or that names something off limits."""
    kind = type(node)
    if kind not in _ALLOWED_NODES:
        what = _NODE_NAMES.get(kind, kind.__name__)
        raise SandboxRefused(
            f"{what} is not allowed in a query: a query is one expression built from literals, "
            "names, attributes, subscripts, calls, operators, comprehensions and lambdas"
        )
    if isinstance(node, ast.Name) and _private(node.id):
        raise _refuse_name(node.id)
    elif isinstance(node, ast.Attribute):
        reason = _attribute_refusal(node.attr)
        if reason is not None:
            raise SandboxRefused(reason)
    elif isinstance(node, ast.NamedExpr):
        target = node.target
        if isinstance(target, ast.Name) and target.id.startswith("_"):
            raise SandboxRefused(
                f"assignment expression ':=' to '{target.id}' is not allowed: names starting "
                "with '_' are off limits"
            )
    elif isinstance(node, ast.keyword):
        if node.arg is not None and node.arg.startswith("_"):
            raise SandboxRefused(
                f"keyword argument '{node.arg}' is not allowed: names starting with '_' "
                "are off limits"
            )
    elif isinstance(node, ast.arg):
        if _private(node.arg):
            raise _refuse_name(node.arg)
    elif isinstance(node, ast.comprehension):
        if node.is_async:
            raise SandboxRefused("'async for' is not allowed in a query")
        _check_target(node.target)


def _validate(tree: ast.Expression) -> None:
    """Walk the tree without recursion (it is not yet known to be shallow) and check each node."""
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise SandboxRefused(
                f"the expression nests deeper than {MAX_DEPTH} levels; split it into simpler parts"
            )
        _check_node(node)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


def _bound_by(target: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


def _free_names(node: ast.AST, bound: frozenset[str], out: set[str]) -> None:
    """Add to ``out`` the names ``node`` reads that no enclosing comprehension or lambda binds.

    Recursive: only called on trees :func:`_validate` has shown to be at most MAX_DEPTH deep.
    """
    if isinstance(node, ast.Name):
        if isinstance(node.ctx, ast.Load) and node.id not in bound:
            out.add(node.id)
        return
    if isinstance(node, ast.Lambda):
        args = node.args
        for default in [*args.defaults, *args.kw_defaults]:
            if default is not None:
                _free_names(default, bound, out)
        params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
        params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        _free_names(node.body, bound | params, out)
        return
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        inner = bound
        for i, gen in enumerate(node.generators):
            # The first iterable is evaluated in the enclosing scope, the rest inside.
            _free_names(gen.iter, bound if i == 0 else inner, out)
            inner = inner | _bound_by(gen.target)
            for cond in gen.ifs:
                _free_names(cond, inner, out)
        results = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        for result in results:
            _free_names(result, inner, out)
        return
    for child in ast.iter_child_nodes(node):
        _free_names(child, bound, out)


def _parse(expr: str) -> ast.Expression:
    if len(expr) > MAX_EXPRESSION_CHARS:
        raise SandboxRefused(
            f"the expression is {len(expr):,} characters long, over the limit of "
            f"{MAX_EXPRESSION_CHARS:,}; split it into smaller queries"
        )
    try:
        return ast.parse(expr, filename="<query>", mode="eval")
    except SyntaxError as exc:
        where = f" (column {exc.offset})" if exc.offset else ""
        raise SandboxRefused(f"not a Python expression: {exc.msg}{where}") from exc
    except (MemoryError, RecursionError, ValueError) as exc:
        raise SandboxRefused(
            f"the expression is too deeply nested to parse ({type(exc).__name__}); simplify it"
        ) from exc


@dataclass(frozen=True, slots=True)
class _Compiled:
    code: CodeType
    free_names: frozenset[str]
    mutating: bool  # names a method that changes its object (see _MUTATING_ATTRS)


@functools.lru_cache(maxsize=512)
def _compile(expr: str) -> _Compiled:
    """Parse, validate and compile ``expr`` once; the parent process caches the code object."""
    tree = _parse(expr)
    _validate(tree)
    # Walrus targets bind in the enclosing scope; counting them bound everywhere errs towards
    # a NameError at run time, never towards letting a name through.
    walrus = frozenset(
        n.target.id
        for n in ast.walk(tree)
        if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name)
    )
    free: set[str] = set()
    _free_names(tree, walrus, free)
    for name in sorted(free):
        if name.startswith("_"):
            raise _refuse_name(name)
    try:
        # Compile the validated tree itself, not the text: what was checked is what runs.
        code = compile(tree, "<query>", "eval", dont_inherit=True)
    except SyntaxError as exc:
        raise SandboxRefused(f"not a valid query expression: {exc.msg}") from exc
    except (MemoryError, RecursionError, ValueError) as exc:
        raise SandboxRefused(
            f"the expression cannot be compiled ({type(exc).__name__}); simplify it"
        ) from exc
    mutating = any(
        isinstance(n, ast.Attribute) and n.attr in _MUTATING_ATTRS for n in ast.walk(tree)
    )
    return _Compiled(code, frozenset(free), mutating)


def _as_expression(expr: object) -> str:
    if not isinstance(expr, str):
        raise SandboxRefused(f"a query must be a str, not {type(expr).__name__}")
    return expr


def _check_names(free: frozenset[str], available: Collection[str]) -> None:
    for name in sorted(free):
        if name not in available and name not in _SAFE_BUILTINS:
            names = sorted({n for n in [*available, *_SAFE_BUILTINS] if not n.startswith("_")})
            shown = ", ".join(names[:60]) + (
                f", ... ({len(names) - 60} more)" if len(names) > 60 else ""
            )
            close = close_matches(name, names)
            hint = f"; did you mean {close[0]!r}? Available" if close else "; available"
            raise SandboxRefused(
                f"name '{name}' is not defined in the query namespace{hint}: {shown}"
            )


def check(expr: str, names: Collection[str] | None = None) -> ast.Expression:
    """Parse and validate ``expr``; raise SandboxRefused with a one-line reason naming a construct.

    ``names`` are the names of the query namespace; when given, every name the expression reads
    (other than those its own comprehensions and lambdas bind) must be one of them or a safe
    builtin. Without ``names`` only the structure is checked. ``check`` alone is not a sandbox:
    only :func:`evaluate` runs code with the runtime limits.
    """
    text = _as_expression(expr)
    compiled = _compile(text)
    if names is not None:
        _check_names(compiled.free_names, names)
    return ast.parse(text, filename="<query>", mode="eval")  # a fresh tree the caller may keep
