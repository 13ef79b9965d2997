"""Constraints: life-admin rules as typed data (``spec``), compiled by trusted code into rules
(``compile``), with knowledge tables kept as data (``knowledge``)."""

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
