"""Constraints compiled into rules: the language's constraints (``language.spec``) turned by
trusted code, one compiler a kind (``kinds/``), into ordinary rules (``compile``), put in force
in a workbench (``inforce``) and read from files (``files``)."""

from uac_kernel.constraints.compile import compile_constraint, rule_name
from uac_kernel.language.spec import (
    KINDS,
    Before,
    Constraint,
    Moment,
    NoOverlap,
    NotWhile,
    Obligation,
    Projection,
    Select,
    ValidOn,
    WindowLimit,
    constraint_json,
    parse_constraint,
)

__all__ = [
    "KINDS",
    "Before",
    "Constraint",
    "Moment",
    "NoOverlap",
    "NotWhile",
    "Obligation",
    "Projection",
    "Select",
    "ValidOn",
    "WindowLimit",
    "compile_constraint",
    "constraint_json",
    "parse_constraint",
    "rule_name",
]
