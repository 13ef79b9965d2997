"""The sandboxed evaluator for query expressions written by users or by language models.

A query is one Python expression over the query namespace (``user``, the record classes, the
safe builtins). Code a model writes is untrusted, so it meets two independent walls:

1. **Static** (:func:`check`): the expression is parsed with ``mode="eval"`` and every AST node is
   checked against a whitelist. Names and attributes starting with ``_`` are refused, and so are
   attributes that reach interpreter internals (``gi_frame``, ``f_globals``, ``mro``...), that
   read attributes by name inside a string (``str.format``/``format_map``), or that load and
   rebuild pydantic models (``model_*``, ``parse_file``...). Free names must be in the namespace.
2. **Runtime** (:func:`evaluate`): the compiled code runs in a child made with ``os.fork()``
   whose ``__builtins__`` hold only :func:`safe_builtins` (plus an ``__import__`` that C code
   such as ``datetime.strptime`` needs and that hands nothing back); the child lowers its limits
   (CPU time, address space, no core files, no file growth, no new processes), closes every
   inherited file descriptor but its result pipe, evaluates, converts the result to plain data
   with :func:`to_plain`, pickles it into the pipe and leaves with ``os._exit``. The parent
   enforces a wall-clock limit, kills and reaps the child, and unpickles the answer with an
   unpickler that only knows the ``datetime`` classes — even a subverted child cannot make the
   parent run code.

:class:`WarmSandbox` (what ``Workbench.eval`` uses) keeps the runtime wall warm: the same jail
in a worker forked once per state version, which answers query after query over a pipe, each
under its own CPU and wall-clock limits, so only the first query pays for the fork. Expressions
that name a mutating method (``append``, ``update``, ``sort``...) still run in a one-shot child,
and the worker is discarded after any error: the comment above :class:`WarmSandbox` says why no
query can change what a later one sees.

What the attribute rules were checked against (``tests/test_sandbox.py`` crawls these objects'
public attributes and asserts that no module, frame, code object, traceback, file, builtins
dict or unexpected class is reachable):

- ``str int float bool bytes complex list tuple dict set range enumerate zip``: public methods
  return plain values, iterators or bound methods; the only public attribute of ``type`` itself
  is ``mro`` (refused: it reaches ``object`` and thence every class). ``str.format`` and
  ``str.format_map`` are refused because ``"{0.__class__}".format(x)`` walks attributes
  named inside a string, which the static check never sees. ``%``-formatting reads mapping keys
  only. ``str.encode``/``bytes.decode`` import codec modules from the ``encodings`` package
  only (dotted names are rejected by the codec search), which is harmless.
- ``date datetime timedelta timezone``: plain values; ``datetime.strptime`` imports
  ``_strptime`` internally; nothing reaches a module.
- ``Counter``: a dict; ``fromkeys`` raises; ``elements`` returns an ``itertools.chain``.
- generators: ``gi_frame``/``gi_code``/``gi_yieldfrom`` are refused (every ``gi_``, ``cr_``,
  ``ag_``, ``tb_``, ``co_`` name is); ``send``/``throw``/``close`` need objects a query cannot
  make. Lambdas and bound methods have no public attributes at all.
- pydantic models (class and instance): every ``model_*`` name and the v1-style methods
  (``parse_file`` reads a file, ``parse_raw``, ``construct``, ``copy``, ``json``, ``dict``...)
  are refused; what remains is the fields, ``register`` (ABC registration, harmless in a
  throw-away child, and always run in one), and the methods the record classes themselves
  define.

- ``list[int]`` (``GenericAlias``), ``int | str``, slices, dict views (``.mapping`` is a
  read-only proxy of the same dict): nothing new is reachable.

Limits of this design: the namespace builder decides what ``user`` and the records expose —
any public attribute there that leads to a store, a connection or a file would be reachable, so
keep those behind ``_`` names. The child's ``RLIMIT_FSIZE`` of 0 and closed descriptors mean a
subverted child could not write through the parent's open files nor grow any file, but it could
still truncate or unlink one: the static wall is the one that must hold. The memory limit needs
``/proc/self/statm`` (Linux); on macOS only the CPU and wall-clock limits apply.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import gc
import importlib
import io
import math
import os
import pickle
import select
import signal
import struct
import sys
import threading
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, MappingView
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from types import CodeType, MappingProxyType
from typing import Final, cast

from pydantic import BaseModel

from uac_kernel.errors import SandboxFailed, SandboxLimit, SandboxRefused, UacError

try:
    import resource
except ImportError:  # pragma: no cover - Windows: neither fork nor rlimits
    resource = None  # type: ignore[assignment]

__all__ = [
    "MAX_DEPTH",
    "MAX_EXPRESSION_CHARS",
    "MAX_RESULT_BYTES",
    "WarmSandbox",
    "check",
    "evaluate",
    "evaluate_traced",
    "safe_builtins",
    "to_plain",
]

# Called in the child after the expression ran, to return side information (trusted code).
Collect = Callable[[], object]

MAX_EXPRESSION_CHARS: Final = 10_000
"""Longer expressions are refused before parsing."""

MAX_DEPTH: Final = 100
"""Expressions whose syntax tree nests deeper than this are refused."""

MAX_RESULT_BYTES: Final = 64 * 2**20
"""The largest pickled result the child may hand back."""

_REPR_CHARS: Final = 200
_MESSAGE_CHARS: Final = 1000
_RESULT_FD: Final = 3

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
            raise SandboxRefused(
                f"name '{name}' is not defined in the query namespace; available: {shown}"
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


# --- plain data ----------------------------------------------------------------------------


def _truncated_repr(value: object) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= _REPR_CHARS else text[: _REPR_CHARS - 3] + "..."


def _plain_datetime(value: datetime) -> datetime:
    tz = value.tzinfo
    if type(value) is datetime and (tz is None or type(tz) is timezone):
        return value
    offset = value.utcoffset()
    return datetime(
        value.year,
        value.month,
        value.day,
        value.hour,
        value.minute,
        value.second,
        value.microsecond,
        tzinfo=None if offset is None else timezone(offset),
        fold=value.fold,
    )


def _plain_scalar(value: object) -> tuple[bool, object]:
    """(True, plain value) for None, bool, int, float, str and the date types; else (False, None).

    Subclasses become their exact base type so the parent can unpickle them without the class.
    """
    if value is None:
        return True, None
    if isinstance(value, bool):
        return True, value
    if isinstance(value, int):
        return True, int.__int__(value)
    if isinstance(value, float):
        return True, float.__float__(value)
    if isinstance(value, str):
        return True, str.__str__(value)
    if isinstance(value, datetime):
        return True, _plain_datetime(value)
    if isinstance(value, date):
        return True, value if type(value) is date else date(value.year, value.month, value.day)
    if isinstance(value, timedelta):
        if type(value) is timedelta:
            return True, value
        return True, timedelta(value.days, value.seconds, value.microseconds)
    return False, None


def _plain_key(key: object) -> object:
    done, plain = _plain_scalar(key)
    if done:
        return plain
    if isinstance(key, tuple):
        return tuple(_plain_key(k) for k in key)
    return _truncated_repr(key)


def _plain(value: object, active: set[int]) -> object:
    done, plain = _plain_scalar(value)
    if done:
        return plain
    if isinstance(value, BaseModel):
        if id(value) in active:
            return "[...]"
        active.add(id(value))
        try:
            fields = _plain(value.model_dump(), active)
        finally:
            active.discard(id(value))
        return {"type": type(value).__name__, **(fields if isinstance(fields, dict) else {})}
    containers = (Mapping, list, tuple, deque, set, frozenset, MappingView, Iterator, range)
    if not isinstance(value, containers):
        return _truncated_repr(value)
    if id(value) in active:
        return "[...]"
    active.add(id(value))
    try:
        if isinstance(value, Mapping):
            return {_plain_key(k): _plain(v, active) for k, v in value.items()}
        items = [_plain(v, active) for v in cast(Iterable[object], value)]
        if isinstance(value, (set, frozenset)):
            with contextlib.suppress(TypeError):
                items.sort()
        return items
    finally:
        active.discard(id(value))


def to_plain(value: object) -> object:
    """``value`` as plain data: None, bool, int, float, str, date, datetime, timedelta, lists and
    dicts of them.

    Lists and tuples become lists; sets sorted lists (when their items compare); mappings (and
    Counters) dicts, whose tuple keys stay tuples; pydantic models ``{"type": class name,
    **fields}``; iterators, generators and ranges are consumed into lists; anything else becomes
    its ``repr`` cut to 200 characters. Inside :func:`evaluate` it runs in the child, under the
    same limits as the expression.
    """
    return _plain(value, set())


# --- running in a child ----------------------------------------------------------------------

# Why fork: CPU and memory can only be bounded for a whole process (a signal-based timeout cannot
# interrupt one long C-level operation such as 10**10**10, and a MemoryError inside the caller's
# process can leave it crippled), and a forked child shares the caller's state copy-on-write:
# nothing is serialised, so a namespace of a million records costs the same as an empty one.
# Forking a process with threads (a Jupyter kernel has several) is sound on CPython 3.11/Linux:
# the child runs one thread, touches nothing but the interpreter and the objects of the query,
# and never returns into the caller's code — it leaves through os._exit, so no atexit handler,
# buffer flush or destructor of the parent's resources (DuckDB connection, ZMQ sockets) runs
# in it. A lock that another thread held at the fork could at worst hang the child; the
# wall-clock limit kills it then. (Python 3.12+ warns about fork in threaded processes with a
# DeprecationWarning; the reasoning above still holds for this child.)

_KIND_OK: Final = "ok"
_KIND_ERROR: Final = "error"
_KIND_MEMORY: Final = "memory"
_KIND_RECURSION: Final = "recursion"
_KIND_TOO_BIG: Final = "too_big"
_KIND_SETUP: Final = "setup"
_MEMORY_PAYLOAD: Final = pickle.dumps((_KIND_MEMORY, None), protocol=5)
_EXIT_NO_RESULT: Final = 70


@dataclass(frozen=True, slots=True)
class _Budget:
    cpu_seconds: float
    memory_mb: int
    wall_seconds: float


def _one_line(exc: BaseException) -> str:
    try:
        message = str(exc)
    except Exception:
        message = ""
    text = " ".join(f"{type(exc).__name__}: {message}".split()) if message else type(exc).__name__
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 3] + "..."


def _lower_limit(which: int, soft: int, hard: int) -> None:
    """Lower an rlimit, never above the hard limit already in force."""
    _, current_hard = resource.getrlimit(which)
    if current_hard != resource.RLIM_INFINITY:
        hard = min(hard, current_hard)
    resource.setrlimit(which, (min(soft, hard), hard))


def _address_space_bytes() -> int | None:
    """The child's current virtual size, from /proc (Linux); None where there is no /proc."""
    try:
        with open("/proc/self/statm", "rb") as f:
            pages = int(f.read().split()[0])
    except OSError:
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


def _move_result_fd(result_fd: int) -> None:
    """In the child: make the result pipe fd 3 (the read end is already closed)."""
    if result_fd != _RESULT_FD:
        os.dup2(result_fd, _RESULT_FD)
        os.close(result_fd)


def _isolate(last_fd: int) -> None:
    """In a child: detach it from the parent's signals and descriptors (all but 0 to ``last_fd``)
    and forbid core files, file growth and new processes."""
    # Ctrl-C reaches the whole process group; the parent handles it and kills the child.
    for signum, handler in (
        (signal.SIGINT, signal.SIG_IGN),
        (signal.SIGPROF, signal.SIG_DFL),
        (signal.SIGXCPU, signal.SIG_DFL),
        (signal.SIGXFSZ, signal.SIG_IGN),
    ):
        signal.signal(signum, handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGPROF, signal.SIGXCPU})

    # Drop every inherited descriptor (store files, sockets, other evaluations' pipes) but
    # stdin/stdout/stderr and the child's own pipes (fd 3, and fd 4 for a worker).
    max_fd = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if max_fd == resource.RLIM_INFINITY or max_fd < 1024:
        max_fd = 1 << 20
    os.closerange(last_fd + 1, max_fd)

    _lower_limit(resource.RLIMIT_CORE, 0, 0)
    _lower_limit(resource.RLIMIT_FSIZE, 0, 0)
    if hasattr(resource, "RLIMIT_NPROC"):
        _lower_limit(resource.RLIMIT_NPROC, 0, 0)


def _limit_address_space(memory_mb: int) -> int | None:
    """Allow ``memory_mb`` of address space beyond what the child maps now; return that size."""
    size = _address_space_bytes()
    if size is not None:
        limit = size + memory_mb * 2**20
        _lower_limit(resource.RLIMIT_AS, limit, limit)
    return size


def _enter_jail(budget: _Budget) -> None:
    """In the one-shot child: isolate it and set its limits for one evaluation."""
    _isolate(_RESULT_FD)
    # The CPU budget is enforced precisely by the profiling timer (SIGPROF kills: its default
    # action); RLIMIT_CPU is the backstop should SIGPROF be ignored (SIGXCPU, then SIGKILL).
    cpu_backstop = math.ceil(budget.cpu_seconds) + 1
    _lower_limit(resource.RLIMIT_CPU, cpu_backstop, cpu_backstop + 1)
    _limit_address_space(budget.memory_mb)
    signal.setitimer(signal.ITIMER_PROF, budget.cpu_seconds)
    # The parent's objects are shared copy-on-write; keep the collector off them.
    gc.freeze()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _answer(
    code: CodeType | str, namespace: Mapping[str, object], collect: Collect | None
) -> tuple[str, bytes]:
    """Evaluate in a jailed child; return the kind of outcome and the pickled (kind, payload).

    ``code`` may be the expression's text (a warm worker compiles what the parent checked).
    Each evaluation gets a fresh scope and fresh builtins: names a query binds (``:=``) die
    with it.
    """
    try:
        if isinstance(code, str):
            code = _compile(code).code
        scope = dict(namespace)
        scope["__builtins__"] = _runtime_builtins()
        value = eval(code, scope)
        if collect is not None:
            value = (value, collect())
        message = pickle.dumps((_KIND_OK, to_plain(value)), protocol=5)
        if len(message) > MAX_RESULT_BYTES:
            return _KIND_TOO_BIG, pickle.dumps((_KIND_TOO_BIG, len(message)), protocol=5)
        return _KIND_OK, message
    except MemoryError:
        return _KIND_MEMORY, _MEMORY_PAYLOAD
    except RecursionError:
        payload = pickle.dumps((_KIND_RECURSION, sys.getrecursionlimit()), protocol=5)
        return _KIND_RECURSION, payload
    except BaseException as exc:
        return _KIND_ERROR, pickle.dumps((_KIND_ERROR, _one_line(exc)), protocol=5)


def _child(code: CodeType, namespace: Mapping[str, object], collect: Collect | None) -> bytes:
    """Evaluate in the jailed child and return the pickled (kind, payload) message."""
    return _answer(code, namespace, collect)[1]


def _child_main(
    code: CodeType,
    namespace: Mapping[str, object],
    budget: _Budget,
    result_fd: int,
    collect: Collect | None,
) -> int:
    try:
        _move_result_fd(result_fd)
    except OSError:
        return _EXIT_NO_RESULT
    try:
        _enter_jail(budget)
    except BaseException as exc:
        message = pickle.dumps((_KIND_SETUP, _one_line(exc)), protocol=5)
        with contextlib.suppress(OSError):
            _write_all(_RESULT_FD, message)
        return _EXIT_NO_RESULT
    try:
        message = _child(code, namespace, collect)
    except MemoryError:
        message = _MEMORY_PAYLOAD
    try:
        _write_all(_RESULT_FD, message)
    except OSError:
        return _EXIT_NO_RESULT
    return 0


def _read(fd: int, deadline: float, size: int | None = None) -> tuple[bytes, str | None]:
    """Read until EOF (``size`` None: a one-shot child's whole message, refused past the size
    limit) or exactly ``size`` bytes (a warm worker's framed reply, where an early EOF is
    "eof"); stop early at the deadline ("wall")."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    chunks: list[bytes] = []
    total = 0
    while size is None or total < size:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return b"", "wall"
        if not poller.poll(math.ceil(remaining * 1000)):
            continue
        chunk = os.read(fd, 1 << 20 if size is None else min(size - total, 1 << 20))
        if not chunk:
            return (b"".join(chunks), None) if size is None else (b"", "eof")
        total += len(chunk)
        if size is None and total > MAX_RESULT_BYTES + 4096:
            return b"", "too_big"
        chunks.append(chunk)
    return b"".join(chunks), None


def _wait(pid: int, deadline: float | None) -> tuple[int | None, float, bool]:
    """Reap the child, killing it once ``deadline`` passes (at once if None).

    Returns (wait status or None if it was reaped elsewhere, CPU seconds it used, killed by us).
    """
    delay = 0.0001
    killed = False
    while True:
        try:
            if deadline is None or killed:
                _, status, usage = os.wait4(pid, 0)
            else:
                reaped, status, usage = os.wait4(pid, os.WNOHANG)
                if reaped == 0:
                    if time.monotonic() >= deadline:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
                        killed = True
                    else:
                        time.sleep(delay)
                        delay = min(delay * 2, 0.01)
                    continue
        except ChildProcessError:  # SIGCHLD is ignored: the kernel reaped it
            return None, 0.0, killed
        return status, usage.ru_utime + usage.ru_stime, killed


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles plain data only: a subverted child must not make the parent run code."""

    _CLASSES: Final = frozenset(
        {
            ("datetime", "date"),
            ("datetime", "datetime"),
            ("datetime", "timedelta"),
            ("datetime", "timezone"),
        }
    )

    def find_class(self, module: str, name: str) -> type:
        if (module, name) in self._CLASSES:
            found: type = super().find_class(module, name)
            return found
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")


def _cpu_limit(budget: _Budget) -> SandboxLimit:
    return SandboxLimit(
        f"the expression exceeded the CPU time limit of {float(budget.cpu_seconds)} s; narrow "
        "the expression (fewer records, smaller ranges) or raise cpu_seconds"
    )


def _memory_limit(budget: _Budget, how: str = "") -> SandboxLimit:
    return SandboxLimit(
        f"the expression exceeded the memory limit of {budget.memory_mb} MB{how}; narrow the "
        "expression (fewer records, smaller ranges) or raise memory_mb"
    )


def _outcome(data: bytes, status: int | None, cpu_used: float, budget: _Budget) -> object:
    """Turn the child's exit status and message into the result or the matching error."""
    if status is not None and os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        if signum in (signal.SIGPROF, signal.SIGXCPU):
            raise _cpu_limit(budget)
        if signum == signal.SIGKILL:
            if cpu_used >= budget.cpu_seconds * 0.9:
                raise _cpu_limit(budget)
            raise _memory_limit(budget, " (the system killed the sandbox)")
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        raise _memory_limit(budget, f" or its stack (the sandbox died of {name})")
    try:
        kind, payload = _PlainUnpickler(io.BytesIO(data)).load()
    except Exception as exc:
        code = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else "unknown"
        raise SandboxFailed(
            f"the sandbox ended (exit status {code}) without a readable result; retry, and "
            "report a bug if it persists"
        ) from exc
    if kind == _KIND_OK:
        return payload
    if kind == _KIND_ERROR:
        raise SandboxFailed(str(payload))
    if kind == _KIND_MEMORY:
        raise _memory_limit(budget)
    if kind == _KIND_RECURSION:
        raise SandboxLimit(
            f"the expression exceeded the recursion depth limit of {payload}; narrow the "
            "expression (no deep recursion through lambdas, no deeply nested results)"
        )
    if kind == _KIND_TOO_BIG:
        raise _too_big(int(payload))
    raise UacError(f"the sandbox could not set up its limits ({payload}); report a bug")


def _too_big(size: int | None) -> SandboxLimit:
    what = f"{size / 2**20:.0f} MB" if size is not None else f"over {MAX_RESULT_BYTES // 2**20} MB"
    return SandboxLimit(
        f"the result is {what} when serialised, over the limit of "
        f"{MAX_RESULT_BYTES // 2**20} MB; narrow the expression (aggregate, slice, or pick fields)"
    )


def _run_forked(
    code: CodeType,
    namespace: Mapping[str, object],
    budget: _Budget,
    collect: Collect | None = None,
) -> object:
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(read_fd)
        os.close(write_fd)
        raise UacError(
            f"the sandbox could not start its process ({exc}); free memory or processes and retry"
        ) from exc
    if pid == 0:  # the child: never returns into the caller's code
        exit_code = _EXIT_NO_RESULT
        try:
            os.close(read_fd)
            exit_code = _child_main(code, namespace, budget, write_fd, collect)
        finally:
            os._exit(exit_code)
    os.close(write_fd)
    deadline = time.monotonic() + budget.wall_seconds
    try:
        data, stopped = _read(read_fd, deadline)
    except BaseException:
        # Interrupted (Ctrl-C) or failed: the child must not outlive the call.
        _kill(pid)
        _wait(pid, None)
        raise
    finally:
        os.close(read_fd)
    if stopped is not None:
        _kill(pid)
    status, cpu_used, killed = _wait(pid, None if stopped is not None else deadline)
    return _ended(data, stopped, status, cpu_used, killed, budget)


def _ended(
    data: bytes,
    stopped: str | None,
    status: int | None,
    cpu_used: float,
    killed: bool,
    budget: _Budget,
) -> object:
    """The result or error of an evaluation whose process has ended and been reaped.

    ``stopped`` says why the parent stopped reading ("wall", "too_big") or is None; ``killed``
    that the parent killed the process at the deadline; ``cpu_used`` is the evaluation's CPU.
    """
    if stopped == "too_big":
        raise _too_big(None)
    if stopped == "wall" or (killed and status is not None and os.WIFSIGNALED(status)):
        if cpu_used >= budget.cpu_seconds * 0.9:
            raise _cpu_limit(budget)
        raise SandboxLimit(
            f"the expression exceeded the wall-clock time limit of {budget.wall_seconds} s; "
            "narrow the expression or raise wall_seconds"
        )
    return _outcome(data, status, cpu_used, budget)


def _kill(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def _require_fork() -> None:
    if not hasattr(os, "fork") or resource is None:
        raise UacError(
            "the sandbox needs Linux or macOS: it runs each query in a forked process with "
            "resource limits; on Windows run uac under WSL"
        )


def _budget(cpu_seconds: float, memory_mb: int, wall_seconds: float | None) -> _Budget:
    if not (math.isfinite(cpu_seconds) and cpu_seconds > 0):
        raise ValueError(f"cpu_seconds must be a positive number of seconds, not {cpu_seconds!r}")
    if isinstance(memory_mb, bool) or not isinstance(memory_mb, int) or memory_mb <= 0:
        raise ValueError(f"memory_mb must be a positive int, not {memory_mb!r}")
    wall = 4 * cpu_seconds + 2 if wall_seconds is None else wall_seconds
    if not (math.isfinite(wall) and wall > 0):
        raise ValueError(f"wall_seconds must be a positive number of seconds, not {wall!r}")
    return _Budget(float(cpu_seconds), memory_mb, float(wall))


def evaluate(
    expr: str,
    namespace: Mapping[str, object],
    *,
    cpu_seconds: float = 5.0,
    memory_mb: int = 1024,
    wall_seconds: float | None = None,
) -> object:
    """Check ``expr``, run it over ``namespace`` in a forked child with resource limits, and return
    its result as plain data (see :func:`to_plain`).

    Raises SandboxRefused before running anything; SandboxLimit when the expression exceeds
    ``cpu_seconds`` of CPU, ``memory_mb`` of memory beyond what the process already uses, the wall
    clock (default ``4 * cpu_seconds + 2`` seconds), the recursion limit or a 64 MB result;
    SandboxFailed with ``"<ExcType>: <message>"`` when the expression raises.
    """
    _require_fork()
    budget = _budget(cpu_seconds, memory_mb, wall_seconds)
    compiled = _compile(_as_expression(expr))
    _check_names(compiled.free_names, namespace.keys())
    return _run_forked(compiled.code, namespace, budget)


def evaluate_traced(
    expr: str,
    namespace: Mapping[str, object],
    collect: Collect,
    *,
    cpu_seconds: float = 5.0,
    memory_mb: int = 1024,
    wall_seconds: float | None = None,
) -> tuple[object, object]:
    """Like :func:`evaluate`, and also return ``collect()`` as called in the child after the
    expression ran — e.g. which records a tracing namespace handed to it (trusted code only)."""
    _require_fork()
    budget = _budget(cpu_seconds, memory_mb, wall_seconds)
    compiled = _compile(_as_expression(expr))
    _check_names(compiled.free_names, namespace.keys())
    pair = cast(list[object], _run_forked(compiled.code, namespace, budget, collect))
    return pair[0], pair[1]


# --- a warm worker ---------------------------------------------------------------------------

# Why a warm worker: a fork costs ~85 ms per GB of the caller's address space (page tables), and
# a query that reads the records writes their reference counts, so the child copies every page
# it touches — paid again by every one-shot query. A worker forked once per state version pays
# both once; its later queries cost the evaluation plus a pipe round trip. It is jailed like the
# one-shot child (descriptors closed but its two pipes, no core files, no file growth, no new
# processes, the same builtins) and answers one query at a time: the parent sends the text (it
# has checked it; the worker compiles it with the same _compile) and a CPU budget, the worker
# answers with the same pickled (kind, payload) message, read by the same restricted unpickler.
#
# What one query does must not change what a later one sees:
# - Names: each query gets a fresh scope and fresh builtins (_answer); ':=' binds in that scope
#   only; the namespace maps names to the same objects every time.
# - Shared objects: records are frozen pydantic models, and user.all/history/fields/... hand out
#   fresh lists and dicts. What stays mutable and shared is a record's list field and a record
#   class's ABC registry (Trip.register). An expression has no assignment statement, comprehension
#   targets may only be names, and dunder methods (__setitem__, __iadd__, __dict__...) are
#   refused, so the only way to change an object is to call one of its mutating methods by
#   name, which the static check sees: an expression naming any method in _MUTATING_ATTRS, on
#   any object, runs in a throw-away child instead.
# - Caches the worker fills as it answers are derived from the state it was forked with and give
#   the answers a fresh child would: user.where's field indexes, the compile cache, the record
#   classes' field caches, _strptime's regex cache, modules C code imports. A query stopped half
#   way could leave one half-built, so a worker retires after any query that does not return a
#   value (an exception or a limit): only clean answers keep it.
# - Limits: the CPU budget is per query (ITIMER_PROF, and an RLIMIT_CPU soft limit raised per
#   query to the CPU used so far plus the budget and a margin; the hard limit, which the worker
#   cannot raise, caps its lifetime CPU at _WORKER_CPU_SECONDS, and the parent forks a new worker
#   before a query could cross it). The address-space limit is set once, to the size at the fork
#   plus memory_mb; memory left behind by a query (caches, or freed but kept by the allocator)
#   would shrink later budgets, so a worker that grew by more than _drift_bytes(memory_mb)
#   retires after its answer. The wall clock is the parent's, as for the one-shot child: at the
#   deadline it kills and reaps the worker and reports what the one-shot path reports.
# - Life: the parent kills and reaps the worker on close, when the caller's state changes (the
#   caller makes a new WarmSandbox), after any error, limit or death, and replaces one that
#   left; the worker also leaves at EOF on its request pipe (the parent is gone) and after
#   idle_seconds without a query. A forked copy of the parent never signals or uses the worker.
# The price: while it lives the worker keeps its copies of the pages it touched (up to the
# records' share of the caller's memory), and the caller copies once each page it writes that
# the worker still shares. Hence the idle timeout.

_REQUEST_FD: Final = 3
_REPLY_FD: Final = 4
_REQUEST: Final = struct.Struct("!Id")  # expression bytes that follow, CPU seconds
_REPLY: Final = struct.Struct("!QdB")  # message bytes that follow, worker CPU so far, retiring
_WORKER_CPU_SECONDS: Final = 600
_CPU_MARGIN: Final = 1


def _drift_bytes(memory_mb: int) -> int:
    """How much a worker may grow over its life before it retires: 1/16 of the memory budget,
    between 16 and 64 MB."""
    return min(64 * 2**20, max(16 * 2**20, memory_mb * 2**20 // 16))


def _worker_cpu_hard() -> int:
    """The hard RLIMIT_CPU a new worker gets: _WORKER_CPU_SECONDS, or the caller's if lower."""
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    if hard == resource.RLIM_INFINITY:
        return _WORKER_CPU_SECONDS
    return min(_WORKER_CPU_SECONDS, hard)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _move_worker_fds(request_fd: int, reply_fd: int) -> None:
    """In the worker: make the request pipe fd 3 and the reply pipe fd 4."""
    if reply_fd == _REQUEST_FD:
        moved = os.dup(reply_fd)
        os.close(reply_fd)
        reply_fd = moved
    for fd, target in ((request_fd, _REQUEST_FD), (reply_fd, _REPLY_FD)):
        if fd != target:
            os.dup2(fd, target)
            os.close(fd)


def _read_blocking(fd: int, size: int) -> bytes | None:
    """Read exactly ``size`` bytes; None at EOF."""
    chunks: list[bytes] = []
    while size:
        chunk = os.read(fd, size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _reply(message: bytes, retire: bool) -> None:
    header = _REPLY.pack(len(message), _cpu_seconds(), retire)
    if len(message) < 1 << 16:  # one write, so the parent wakes up once
        _write_all(_REPLY_FD, header + message)
    else:
        _write_all(_REPLY_FD, header)
        _write_all(_REPLY_FD, message)


def _serve(
    namespace: Mapping[str, object],
    memory_mb: int,
    idle_seconds: float | None,
    cpu_hard: int,
    baseline: int | None,
    statm_fd: int | None,
) -> int:
    """The worker's loop: answer queries until EOF, idleness, or an answer that retires it.

    ``statm_fd`` is /proc/self/statm kept open (re-reading it is 7 times cheaper than opening it
    per query); ``baseline`` the address space at the fork.
    """
    drift = _drift_bytes(memory_mb)
    poller = select.poll()
    poller.register(_REQUEST_FD, select.POLLIN)
    wait_ms = None if idle_seconds is None else math.ceil(idle_seconds * 1000)
    while True:
        if not poller.poll(wait_ms):
            return 0  # idle: the parent forks a new worker when it needs one
        header = _read_blocking(_REQUEST_FD, _REQUEST.size)
        if header is None:
            return 0  # EOF: the parent closed the pipe or is gone
        size, cpu_seconds = _REQUEST.unpack(header)
        request = _read_blocking(_REQUEST_FD, size)
        if request is None:
            return 0
        try:
            soft = min(math.ceil(_cpu_seconds() + cpu_seconds) + _CPU_MARGIN, cpu_hard)
            resource.setrlimit(resource.RLIMIT_CPU, (soft, cpu_hard))
            signal.setitimer(signal.ITIMER_PROF, cpu_seconds)
            kind, message = _answer(request.decode("utf-8", "surrogatepass"), namespace, None)
            signal.setitimer(signal.ITIMER_PROF, 0)
            grown = False
            if statm_fd is not None and baseline is not None:
                pages = int(os.pread(statm_fd, 64, 0).split()[0])
                grown = pages * os.sysconf("SC_PAGE_SIZE") - baseline > drift
            retire = kind != _KIND_OK or grown
        except MemoryError:
            message, retire = _MEMORY_PAYLOAD, True
        try:
            _reply(message, retire)
        except OSError:
            return _EXIT_NO_RESULT
        if retire:
            return 0


def _worker_main(
    namespace: Mapping[str, object],
    memory_mb: int,
    idle_seconds: float | None,
    request_fd: int,
    reply_fd: int,
) -> int:
    try:
        _move_worker_fds(request_fd, reply_fd)
    except OSError:
        return _EXIT_NO_RESULT
    try:
        _isolate(_REPLY_FD)
        # The soft limit is raised before each query; the hard one bounds the worker's life.
        _lower_limit(resource.RLIMIT_CPU, _CPU_MARGIN, _WORKER_CPU_SECONDS)
        cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        baseline = _limit_address_space(memory_mb)
        statm_fd = None
        if baseline is not None:
            statm_fd = os.open("/proc/self/statm", os.O_RDONLY)
        gc.freeze()
    except BaseException as exc:
        with contextlib.suppress(OSError):
            _reply(pickle.dumps((_KIND_SETUP, _one_line(exc)), protocol=5), True)
        return _EXIT_NO_RESULT
    return _serve(namespace, memory_mb, idle_seconds, cpu_hard, baseline, statm_fd)


def _stop_worker(pid: int, fds: tuple[int, ...], owner: int) -> None:
    """Close the parent's pipe ends; kill and reap the worker if this process forked it."""
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    if os.getpid() == owner:
        _kill(pid)
        _wait(pid, None)


class _WorkerLeft(Exception):
    """The worker left (idle or at EOF) before it read the query: run it in a new one."""


class _Worker:
    """The parent's handle on one warm worker process: its pid, its pipes, its CPU so far."""

    def __init__(
        self, namespace: Mapping[str, object], memory_mb: int, idle_seconds: float | None
    ) -> None:
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        try:
            pid = os.fork()
        except OSError as exc:
            for fd in (request_r, request_w, reply_r, reply_w):
                os.close(fd)
            raise UacError(
                f"the sandbox could not start its process ({exc}); free memory or processes "
                "and retry"
            ) from exc
        if pid == 0:  # the worker: never returns into the caller's code
            exit_code = _EXIT_NO_RESULT
            try:
                os.close(request_w)
                os.close(reply_r)
                exit_code = _worker_main(namespace, memory_mb, idle_seconds, request_r, reply_w)
            finally:
                os._exit(exit_code)
        os.close(request_r)
        os.close(reply_w)
        # A worker that stops reading must not block the caller: a full pipe is a dead worker.
        os.set_blocking(request_w, False)
        self.pid = pid
        self.memory_mb = memory_mb
        self.cpu_hard = _worker_cpu_hard()
        self.cpu_used = 0.0  # the worker's CPU seconds at its last answer
        self._owner = os.getpid()
        self._request_fd, self._reply_fd = request_w, reply_r
        self._stop = weakref.finalize(self, _stop_worker, pid, (request_w, reply_r), self._owner)

    @property
    def alive(self) -> bool:
        """Not yet killed, reaped or closed (the process may still have left on its own)."""
        return self._stop.alive

    def usable(self, budget: _Budget) -> bool:
        """Whether this worker can take a query with ``budget``; else the caller replaces it."""
        if not self.alive or os.getpid() != self._owner or budget.memory_mb != self.memory_mb:
            return False
        if self.cpu_used + budget.cpu_seconds + _CPU_MARGIN + 1 > self.cpu_hard:
            return False
        try:
            reaped, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            reaped = self.pid
        if reaped:
            self._forget()
            return False
        return True

    def close(self) -> None:
        """Kill and reap the worker and close the pipes (once; later calls do nothing)."""
        self._stop()

    def _forget(self) -> None:
        """The process has been reaped: close the pipes and never signal its pid again."""
        if self._stop.detach() is not None:
            for fd in (self._request_fd, self._reply_fd):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def run(self, text: str, budget: _Budget, *, may_retry: bool) -> object:
        """Have the worker evaluate ``text``; the result, or the one-shot path's error.

        The worker is discarded after any error, limit or death. Raises _WorkerLeft (only if
        ``may_retry``) when the worker had left before it read the query.
        """
        deadline = time.monotonic() + budget.wall_seconds
        encoded = text.encode("utf-8", "surrogatepass")
        cpu_before = self.cpu_used
        header: bytes = b""
        data = b""
        try:
            try:
                request = _REQUEST.pack(len(encoded), budget.cpu_seconds) + encoded
                _write_all(self._request_fd, request)
            except (BrokenPipeError, BlockingIOError):
                stopped: str | None = "eof"
            else:
                header, stopped = _read(self._reply_fd, deadline, _REPLY.size)
            if stopped is None:
                size, cpu, retire = _REPLY.unpack(header)
                if size > MAX_RESULT_BYTES + 4096:
                    stopped = "too_big"
                else:
                    data, stopped = _read(self._reply_fd, deadline, size)
        except BaseException:
            # Interrupted (Ctrl-C) or failed: the worker must not outlive the call.
            self.close()
            raise
        if stopped is not None:
            if stopped != "eof":
                _kill(self.pid)
            status, cpu_total, killed = _wait(self.pid, deadline if stopped == "eof" else None)
            self._forget()
            left = status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
            if may_retry and not header and left:
                raise _WorkerLeft
            cpu_used = max(cpu_total - cpu_before, 0.0)
            return _ended(
                b"", None if stopped == "eof" else stopped, status, cpu_used, killed, budget
            )
        self.cpu_used = cpu if math.isfinite(cpu) else math.inf
        try:
            value = _outcome(data, None, 0.0, budget)
        except BaseException:
            self.close()
            raise
        if retire:
            self.close()
        return value


class WarmSandbox:
    """:func:`evaluate` over one namespace, in a jailed worker process reused across queries.

    The worker is forked on the first query and answers later ones without forking again, so a
    query over a large state costs about what the expression costs (see the comment above). It
    sees the namespace's objects as they were at its fork: make a new WarmSandbox (and close
    this one) when they change. Same checks, limits, results and errors as :func:`evaluate`;
    expressions that call a mutating method (``append``, ``update``, ``sort``...), and queries
    made while another thread is using the worker, run in a one-shot child instead. The worker
    leaves after ``idle_seconds`` without a query (None: never) and the next query forks a new
    one. The namespace's own methods must not change what later queries see (those of the
    query namespace do not: ``user.where`` only builds an index of the state).

    >>> with WarmSandbox({"xs": [1, 2, 3]}) as box:   # doctest: +SKIP
    ...     box.evaluate("sum(xs)"), box.evaluate("max(xs)")
    (6, 3)
    """

    def __init__(
        self, namespace: Mapping[str, object], *, idle_seconds: float | None = 120.0
    ) -> None:
        if idle_seconds is not None and not (math.isfinite(idle_seconds) and idle_seconds > 0):
            raise ValueError(
                f"idle_seconds must be a positive number or None, not {idle_seconds!r}"
            )
        self._namespace = dict(namespace)
        self._idle_seconds = idle_seconds
        self._worker: _Worker | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def pid(self) -> int | None:
        """The worker's process id; None before the first query, after close, or once the worker
        was discarded (the next query forks a new one)."""
        worker = self._worker
        return worker.pid if worker is not None and worker.alive else None

    def evaluate(
        self,
        expr: str,
        *,
        cpu_seconds: float = 5.0,
        memory_mb: int = 1024,
        wall_seconds: float | None = None,
    ) -> object:
        """Like :func:`evaluate` over this sandbox's namespace."""
        _require_fork()
        budget = _budget(cpu_seconds, memory_mb, wall_seconds)
        compiled = _compile(_as_expression(expr))
        _check_names(compiled.free_names, self._namespace.keys())
        if compiled.mutating or self._closed or not self._lock.acquire(blocking=False):
            return _run_forked(compiled.code, self._namespace, budget)
        try:
            for may_retry in (True, False):
                worker = self._ready(budget)
                if worker is None:
                    break
                try:
                    return worker.run(expr, budget, may_retry=may_retry)
                except _WorkerLeft:
                    continue
        finally:
            self._lock.release()
        return _run_forked(compiled.code, self._namespace, budget)

    def _ready(self, budget: _Budget) -> _Worker | None:
        """A worker able to take the query; None when no worker can (the budget is too large)."""
        worker = self._worker
        if worker is not None and not worker.usable(budget):
            worker.close()
            worker = self._worker = None
        if worker is None:
            if budget.cpu_seconds + _CPU_MARGIN + 1 > _worker_cpu_hard():
                return None
            worker = self._worker = _Worker(self._namespace, budget.memory_mb, self._idle_seconds)
        return worker

    def close(self) -> None:
        """Kill and reap the worker (after a query another thread is running); later queries
        run in one-shot children."""
        with self._lock:
            self._closed = True
            if self._worker is not None:
                self._worker.close()
                self._worker = None

    def __enter__(self) -> WarmSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
