"""Handing a store file over between processes.

DuckDB lets one process write a file, or several read it, never both. A process keeps its
connection between operations (connecting costs more than most operations), so another
process that finds the file locked asks for it: it stamps a file beside the store
(``<store>.uac-want``) with a new time on each try. The holder looks at the stamp at the end of
every operation and, while idle, every ``WATCH`` seconds, and lets go when it moved since it
connected; it then stays off the file ``GAP`` seconds, so the asker gets its turn. A holder
also lets go after ``KEEP`` idle seconds, for programs that do not ask (the ``duckdb`` shell,
another tool) and for a directory the asker cannot write.
"""

from __future__ import annotations

import os
import time

__all__ = ["GAP", "KEEP", "WATCH", "ask", "asked", "want_path"]

# Seconds between two looks at the stamp while the connection is idle: an asker waits about
# this long for an idle holder, plus its own retry pause (at most GAP).
WATCH = 0.1
# Seconds a holder stays off the file after letting go when asked; an asker retries at least
# this often.
GAP = 0.05
# Idle seconds after which a connection is closed even if no one asked.
KEEP = 60.0


def want_path(path: str) -> str:
    return f"{path}.uac-want"


def ask(path: str) -> None:
    """Stamp the want file of the store at ``path`` with a new time (best effort)."""
    want = want_path(path)
    stamp = time.time_ns()
    try:
        if not os.path.exists(want):
            os.close(os.open(want, os.O_WRONLY | os.O_CREAT, 0o666))
        os.utime(want, ns=(stamp, stamp))
    except OSError:
        pass  # a directory the asker cannot write: the holder lets go after KEEP idle seconds


def asked(path: str) -> int:
    """The want file's stamp (0: none): a holder lets go when it differs from the one it saw
    on connecting."""
    try:
        return os.stat(want_path(path)).st_mtime_ns
    except OSError:
        return 0
