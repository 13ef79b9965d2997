"""The shipped rules, importable by name (generated checkpoint code imports them from here)."""

from uac_kernel.rules.engine import rule
from uac_kernel.rules.library import *  # noqa: F403  (re-export the library's __all__)
from uac_kernel.rules.library import __all__ as _library

__all__ = ["rule", *_library]
