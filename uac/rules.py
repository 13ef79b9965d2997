"""The shipped rules, importable by name (generated checkpoint code imports them from here), and
``EVERY``, the part of a record every finding of a partitioned rule may rest on."""

from uac_kernel.rules.engine import EVERY, rule
from uac_kernel.rules.library import *  # noqa: F403  (re-export the library's __all__)
from uac_kernel.rules.library import __all__ as _library

__all__ = ["EVERY", "rule", *_library]
