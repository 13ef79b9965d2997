"""Handing a store file over between processes.

DuckDB lets one process write a file, or several read it, never both. A process keeps its
connection between operations (connecting costs more than most operations), so another
process that finds the file locked asks for it: it stamps a file beside the store
(``<store>.uac-want``) with a new time on each try. The holder looks at the stamp at the end of
every operation and, while idle, every ``WATCH`` seconds, and lets go when it moved since it
connected; before it connects again it waits until the stamp has stood still ``QUIET`` seconds
(the asker got in, or gave up), so readers taking turns cannot keep a writer out. A holder also
lets go after ``KEEP`` idle seconds, for programs that do not ask (the ``duckdb`` shell,
another tool) and for a directory the asker cannot write. The want file is writable by all, and
stamped with the current time (which needs only write permission), so another user of a
shared store can ask too.
"""

from __future__ import annotations

import os
import time

__all__ = ["GAP", "KEEP", "QUIET", "WATCH", "ask", "asked", "quiet", "want_path"]

# Seconds between two looks at the stamp while the connection is idle: an asker waits about
# this long for an idle holder, plus its own retry pause (at most GAP).
WATCH = 0.1
# An asker retries (and stamps) at least this often.
GAP = 0.05
# Seconds the stamp must stand still before a holder that let go connects again.
QUIET = 2 * GAP
# Idle seconds after which a connection is closed even if no one asked.
KEEP = 60.0


def want_path(path: str) -> str:
    return f"{path}.uac-want"


def ask(path: str) -> None:
    """Stamp the want file of the store at ``path`` with a new time (best effort)."""
    want = want_path(path)
    try:
        if not os.path.exists(want):
            fd = os.open(want, os.O_WRONLY | os.O_CREAT, 0o666)
            try:
                os.fchmod(fd, 0o666)  # past the umask: another user's process asks too
            finally:
                os.close(fd)
        os.utime(want)  # the current time: write permission is enough
    except OSError:
        pass  # a directory the asker cannot write: the holder lets go after KEEP idle seconds


def asked(path: str) -> int:
    """The want file's stamp (0: none): a holder lets go when it differs from the one it saw
    on connecting."""
    try:
        return os.stat(want_path(path)).st_mtime_ns
    except OSError:
        return 0


def quiet(path: str, deadline: float) -> None:
    """Wait until no one has asked for the file for ``QUIET`` seconds (or ``deadline``, a
    ``time.monotonic`` time, passes). A stamp in the future is no one asking."""
    while time.monotonic() < deadline:
        since = (time.time_ns() - asked(path)) / 1e9
        if not 0 <= since < QUIET:
            return
        time.sleep(GAP)
