"""Importing a heavy module on a fresh, shallow stack.

CPython keeps its frames in chunks of memory; before the fix of gh-142183 (3.13.x/3.14.x
backports, not 3.11 or 3.12), a hot loop whose calls cross the boundary between two chunks
maps and unmaps a chunk on every call. Where the boundary falls depends on everything below
the caller. Importing Altair builds jsonschema's optional rfc3987-syntax grammar (a second of
Lark's hot loops); from inside ``%uac chart``, deep in IPython's stack, that landed on a
boundary: 3 s more CPU for the first chart of a kernel, half a million page faults (measured by
``bench/first_chart.py``). A new thread starts on a stack of its own, a few frames deep, so the
import costs what it costs at the top of a script, wherever it is asked for.
"""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType

__all__ = ["import_on_fresh_stack"]


def import_on_fresh_stack(name: str) -> ModuleType:
    """``importlib.import_module(name)`` run on a new thread, waited for; its exception, if
    any, is raised here. A module already imported is returned at once.

    Call it only where this thread holds no import lock (not from module-level code of a module
    being imported), or the two threads would wait for each other.
    """
    module = sys.modules.get(name)
    if module is not None:
        return module
    modules: list[ModuleType] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            modules.append(importlib.import_module(name))
        except BaseException as exc:  # handed to the caller, raised there
            errors.append(exc)

    worker = threading.Thread(target=run, name=f"import {name}", daemon=True)
    worker.start()
    worker.join()
    if errors:
        raise errors[0]
    return modules[0]
