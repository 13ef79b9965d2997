"""Importing a heavy module on a fresh, shallow stack.

CPython keeps its frames in chunks of memory; before the fix of gh-142183 (3.13.x/3.14.x
backports, not 3.11 or 3.12), a hot loop whose calls cross the boundary between two chunks
maps and unmaps a chunk on every call. Where the boundary falls depends on everything below
the caller. Importing Altair builds jsonschema's optional rfc3987-syntax grammar (a second of
Lark's hot loops); from inside ``%uac chart``, deep in IPython's stack, that landed on a
boundary: 3 s more CPU for the first chart of a kernel, half a million page faults (measured by
``bench/first_chart.py``). A new thread starts on a stack of its own, a few frames deep, so the
import costs what it costs at the top of a script, wherever it is asked for.

:func:`import_in_background` starts such an import without waiting: ``%load_ext uac`` starts
the chart module's (Altair, about 1.5 s) so that by the first ``%uac chart``, a cell or more
later, it is done or partly done (``bench/first_chart.py``). :func:`import_on_fresh_stack`
waits for an import started so; if it failed, it imports again, which raises the error where
the module is needed, as if nothing had been started.
"""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType

__all__ = ["BACKGROUND", "import_in_background", "import_on_fresh_stack"]

# Off: import_in_background starts nothing (bench/first_chart.py compares both).
BACKGROUND = True
# name -> the thread importing it, started by import_in_background.
_started: dict[str, threading.Thread] = {}


def import_on_fresh_stack(name: str) -> ModuleType:
    """``importlib.import_module(name)`` run on a new thread, waited for; its exception, if
    any, is raised here. A module already imported is returned at once.

    Call it only where this thread holds no import lock (not from module-level code of a module
    being imported), or the two threads would wait for each other.
    """
    started = _started.pop(name, None)
    if started is not None:  # done, or failed (then imported again below, to raise here)
        started.join()
    module = sys.modules.get(name)
    if module is not None and not _initializing(module):
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


def import_in_background(*names: str) -> threading.Thread | None:
    """Import ``names``, in order, on a daemon thread of its own; return at once (the thread,
    or None if there is nothing to import or :data:`BACKGROUND` is off).

    An error is kept from no one: the thread stops at the first module that fails, and the
    next :func:`import_on_fresh_stack` (or plain ``import``) of it imports it again and
    raises. A plain ``import`` of a module the thread is importing waits for it (Python's
    per-module import lock). Call it only where this thread holds no import lock.
    """
    todo = [n for n in names if n not in sys.modules and n not in _started]
    if not BACKGROUND or not todo:
        return None

    def run() -> None:
        for name in todo:
            try:
                importlib.import_module(name)
            except BaseException:  # raised again where the module is imported next
                return

    worker = threading.Thread(target=run, name=f"import {', '.join(todo)}", daemon=True)
    for name in todo:
        _started[name] = worker
    worker.start()
    return worker


def _initializing(module: ModuleType) -> bool:
    """Whether ``module`` is still being imported (by another thread)."""
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))
