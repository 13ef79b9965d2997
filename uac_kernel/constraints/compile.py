"""Constraints compiled by trusted code into ordinary rules.

``compile_constraint(key, c)`` returns a ``Rule`` named ``constraint_<key>`` (a public
identifier derived from the key, with a short hash when the key is not one), watching exactly
the record types the constraint names, ``clock=True`` when it reads today's date, with findings
whose evidence is the records involved: so a constraint's alerts run, clear, escalate and
explain exactly like a library rule's. One module a kind does the work (``kinds/``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from importlib import import_module

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


_HASHED = re.compile(r"_[0-9a-f]{12}$")


def rule_name(key: str) -> str:
    """The rule name of the constraint ``key``: ``constraint_`` + the key, when the key is
    already a lower-case identifier; otherwise + a slug of it and 12 hex digits of its hash.
    A plain name never ends like a hashed one, so two keys never share a rule."""
    slug = re.sub(r"[^a-z0-9]+", "_", key.lower()).strip("_")[:48]
    if slug == key and not _HASHED.search(key):
        return f"constraint_{slug}"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return f"constraint_{slug}_{digest}" if slug else f"constraint_{digest}"


def compile_constraint(key: str, c: Constraint) -> Rule:
    """The rule that checks constraint ``c`` logged under ``key``."""
    module = import_module(f"uac_kernel.constraints.kinds.{_MODULES[c.kind]}")
    compiler: Compiler = module.compile
    return compiler(rule_name(key), c)
