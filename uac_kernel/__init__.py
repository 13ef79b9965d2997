"""uac_kernel — the engine of User as Code: an append-only log folded into typed state."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uac_kernel.errors import UacError
from uac_kernel.records import Record
from uac_kernel.rules.engine import Alert, Finding, Rule, rule

if TYPE_CHECKING:
    from uac_kernel.workbench import IngestReport, Workbench

__all__ = [
    "Alert",
    "Finding",
    "IngestReport",
    "Record",
    "Rule",
    "UacError",
    "Workbench",
    "__version__",
    "open",
    "rule",
]

__version__ = "0.1.0"


def open(path: str = ":memory:", user: str = "me", *, read_only: bool = False) -> Workbench:
    """Open (or create) a store and work on one of its users: ``uac.open("memory.duckdb", user="maya")``."""
    from uac_kernel.workbench import Workbench

    return Workbench(path, user=user, read_only=read_only)


def __getattr__(name: str) -> Any:
    # The workbench pulls in the sandbox and the rule library; importing them lazily keeps
    # `import uac_kernel.store` (and the CLI's start-up) light.
    if name in ("Workbench", "IngestReport"):
        from uac_kernel import workbench

        return getattr(workbench, name)
    raise AttributeError(f"module 'uac_kernel' has no attribute {name!r}")
