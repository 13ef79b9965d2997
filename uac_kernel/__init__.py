"""uac_kernel — the engine of User as Code: an append-only log folded into typed state."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from uac_kernel.core.errors import UacError

if TYPE_CHECKING:
    from uac_kernel.core.records import Record
    from uac_kernel.engine.whatif import WhatIf
    from uac_kernel.ingest.report import IngestReport
    from uac_kernel.language.spec import (
        Before,
        Moment,
        NoOverlap,
        NotWhile,
        Obligation,
        Projection,
        Select,
        ValidOn,
        WindowLimit,
        parse_constraint,
    )
    from uac_kernel.rules.engine import Alert, Finding, Rule, rule
    from uac_kernel.workbench import Workbench

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
    "open",
    "parse_constraint",
    "rule",
]

__version__ = "0.1.0"


def open(
    path: str = ":memory:",
    user: str | None = None,
    *,
    read_only: bool = False,
    create: bool | None = None,
) -> Workbench:
    """Open (or create) a store and work on one of its users: ``uac.open("memory.duckdb", user="maya")``.

    Without ``user``, the store's only user (``"me"`` in a new store). A user exists by having
    events: opening one with none is an error when nothing can be written (``read_only``) or
    ``create=False`` says a read is meant; it names the users the store holds.
    """
    from uac_kernel.workbench import Workbench

    return Workbench(path, user=user, read_only=read_only, create=create)


_LAZY = {
    "Workbench": "uac_kernel.workbench",
    "IngestReport": "uac_kernel.ingest.report",
    "WhatIf": "uac_kernel.engine.whatif",
    "Record": "uac_kernel.core.records",
    "Alert": "uac_kernel.rules.engine",
    "Finding": "uac_kernel.rules.engine",
    "Rule": "uac_kernel.rules.engine",
    "rule": "uac_kernel.rules.engine",
    "Before": "uac_kernel.language.spec",
    "Moment": "uac_kernel.language.spec",
    "NoOverlap": "uac_kernel.language.spec",
    "NotWhile": "uac_kernel.language.spec",
    "Obligation": "uac_kernel.language.spec",
    "Projection": "uac_kernel.language.spec",
    "Select": "uac_kernel.language.spec",
    "ValidOn": "uac_kernel.language.spec",
    "WindowLimit": "uac_kernel.language.spec",
    "parse_constraint": "uac_kernel.language.spec",
}


def __getattr__(name: str) -> Any:
    # The public names are imported on first use: the workbench pulls in the sandbox and the rule
    # library, records and rules pull in pydantic and DuckDB, so `import uac_kernel.log.store` and
    # the CLI's start-up (`uac --help`) load only what they use.
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'uac_kernel' has no attribute {name!r}")
