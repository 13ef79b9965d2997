"""``import uac``: the short public face of the User as Code workbench (engine: ``uac_kernel``)."""

from uac_kernel import (
    Alert,
    Finding,
    IngestReport,
    Record,
    Rule,
    UacError,
    Workbench,
    __version__,
    open,
    rule,
)

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
