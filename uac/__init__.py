"""``import uac``: the short public face of the User as Code workbench (engine: ``uac_kernel``)."""

from typing import Any

from uac import constraints
from uac_kernel import (
    Alert,
    Before,
    Finding,
    IngestReport,
    Moment,
    NoOverlap,
    NotWhile,
    Obligation,
    Projection,
    Record,
    Rule,
    Select,
    UacError,
    ValidOn,
    WhatIf,
    WindowLimit,
    Workbench,
    __version__,
    open,
    parse_constraint,
    rule,
)

__all__ = [
    "Alert",
    "Before",
    "Finding",
    "IngestReport",
    "Moment",
    "NoOverlap",
    "NotWhile",
    "Obligation",
    "Projection",
    "Record",
    "Rule",
    "Select",
    "UacError",
    "ValidOn",
    "WhatIf",
    "WindowLimit",
    "Workbench",
    "__version__",
    "constraints",
    "load_ipython_extension",
    "open",
    "parse_constraint",
    "rule",
    "unload_ipython_extension",
]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext uac``: the ``%uac`` / ``%%uac`` magics; settings under ``%config UacMagics``."""
    from uac_kernel.notebook.magics import load_ipython_extension as load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext uac``: close the open workbench and remove the magics."""
    from uac_kernel.notebook.magics import unload_ipython_extension as unload

    unload(ipython)
