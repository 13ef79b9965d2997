"""The constraint language: life-admin constraints as typed data that uac compiles into rules.

``uac.Obligation(...)``, ``uac.ValidOn(...)`` and the other kinds build a constraint;
``wb.constrain(c)`` puts it in force (a ``constraint`` event in the log), ``wb.constraints()``
lists those in force and ``wb.retract_constraint(key, reason)`` ends one. A constraint is never
code: every field is validated data. See docs/constraints.md.
"""

from uac_kernel.constraints import *  # noqa: F403  (re-export the language's __all__)
from uac_kernel.constraints import __all__ as _language

__all__ = [*_language]
