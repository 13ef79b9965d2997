"""Constraints compiled by trusted code into ordinary rules.

``compile_constraint(key, c, name)`` returns a ``Rule`` named ``name``: ``constraint_`` and the
key as a person reads it, chosen when the key was added (``names``), watching exactly
the record types the constraint names, ``clock=True`` when it reads today's date, with findings
whose evidence is the records involved: so a constraint's alerts run, clear, escalate and
explain exactly like a library rule's. One module a kind does the work (``kinds/``).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module

from uac_kernel.core.constraint_names import rule_name
from uac_kernel.language.spec import Constraint
from uac_kernel.rules.engine import Rule

__all__ = ["compile_constraint", "rule_name"]

Compiler = Callable[[str, Constraint], Rule]

# kind -> module of uac_kernel.constraints.kinds that defines ``compile(name, c) -> Rule``
_MODULES = {
    "obligation": "obligation",
    "valid_on": "validity",
    "window_limit": "window",
    "projection": "projection",
    "no_overlap": "ordering",
    "before": "ordering",
    "not_while": "cooccurrence",
}


def compile_constraint(key: str, c: Constraint, name: str | None = None) -> Rule:
    """The rule that checks constraint ``c`` logged under ``key``, named ``name`` (the name
    its key was given in the log, ``ConstraintVersion.rule``) or, by default, ``rule_name(key)``."""
    module = import_module(f"uac_kernel.constraints.kinds.{_MODULES[c.kind]}")
    compiler: Compiler = module.compile
    return compiler(name or rule_name(key), c)
