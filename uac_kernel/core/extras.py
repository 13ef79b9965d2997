"""Optional parts of uac and the extras that install them.

The core install (``pip install uac-kernel``) is the engine, the command line and the Jupyter
face. The rest comes with an extra, and a part whose extra is missing says so in one line,
naming the command (:class:`~uac_kernel.core.errors.MissingExtra`):

- ``marimo``: ``import uac.marimo`` and ``python -m uac_kernel.notebook.marimo_export``;
- ``bench``: prompt token counts of ``uac bench aggregate`` and ``bench/prompt_scale.py``;
- ``embeddings``: the embedding-retrieval system of ``uac bench aggregate``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from uac_kernel.core.errors import MissingExtra

__all__ = ["require"]


def require(module: str, *, extra: str, feature: str) -> ModuleType:
    """Import ``module``, or raise :class:`MissingExtra` naming ``extra``'s install command.

    Only a module that is not there counts as missing (``ModuleNotFoundError``, the module
    itself or one it needs); any other failure of an installed module is its own error.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise MissingExtra(feature, extra=extra, missing=exc.name or module) from None
