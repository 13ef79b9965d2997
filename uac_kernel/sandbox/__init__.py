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

What the attribute rules were checked against (``tests/sandbox/test_sandbox.py`` crawls these objects'
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

from uac_kernel.sandbox._child import MAX_RESULT_BYTES, evaluate, evaluate_traced
from uac_kernel.sandbox._plain import to_plain
from uac_kernel.sandbox._policy import MAX_DEPTH, MAX_EXPRESSION_CHARS, check, safe_builtins
from uac_kernel.sandbox._warm import WarmSandbox

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
