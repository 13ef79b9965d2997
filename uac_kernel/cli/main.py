"""The ``uac`` command: a thin face over ``Workbench``. Every error is one line and exit code 1."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from uac_kernel.cli.opening import DEFAULT_DB
from uac_kernel.cli.parser import build_parser
from uac_kernel.core import settings
from uac_kernel.core.display import printable
from uac_kernel.core.errors import CommandLineError, UacError

# The engine (pydantic models, DuckDB, the sandbox) and the model layer (openai) are imported by
# the commands that use them, so `uac --help` starts in the time of Python and argparse
# (bench/startup.py measures it; tests/cli/test_startup.py checks what `import uac_kernel.cli.main` loads).

__all__ = ["main", "run"]


def main(argv: Sequence[str] | None = None, *, keep: list[object] | None = None) -> int:
    """Run one command; its exit code. With ``keep``, each workbench the command opened is
    appended to it (closed), so its state is freed when the caller drops the list, not here."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except CommandLineError as exc:
        print(f"uac: error: {printable(str(exc))}", file=sys.stderr)
        return 1
    args.keep = keep
    try:
        args.db_given = hasattr(args, "db") or settings.DB.get() is not None
        if not hasattr(args, "db"):
            args.db = settings.DB.get() or DEFAULT_DB
        args.db = settings.store_path(args.db, memory=False)
        args.user_given = hasattr(args, "user")  # on the command line
        if not args.user_given:
            # None: the store's only user ('me' in a new store); see users.resolve_user
            args.user = settings.USER.get()
        args.func(args)
    except UacError as exc:
        # Messages quote input, file names, stored text and model code: escaped here once, so
        # no message can drive the terminal or take a second line.
        print(f"uac: error: {printable(str(exc))}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except Exception as exc:
        # A DuckDB failure past opening (a damaged file is found when a query reaches the bad
        # block): one line. duckdb is loaded by then; `uac --help` never imports it.
        duckdb = sys.modules.get("duckdb")
        if duckdb is None or not isinstance(exc, duckdb.Error):
            raise
        from uac_kernel.log.store import damaged

        print(f"uac: error: {printable(str(damaged(args.db, exc)))}", file=sys.stderr)
        return 1
    return 0


def run() -> NoReturn:
    """The ``uac`` command (the console script and ``python -m uac_kernel.cli.main``): ``main``, then
    leave without freeing the folded state and without the interpreter's teardown when the
    process has nothing left to do.

    Both come after the answer is printed: freeing the state object by object when the command
    returns (``main(keep=...)`` keeps it alive instead), then the teardown. From the answer of
    `uac eval` to the process gone at 300k events: 0.60-0.63 s with both, 0.03-0.04 s without
    (bench/README.md). They are skipped only when no Store of the process is open (each was
    closed, so DuckDB checkpointed its write-ahead log; a committed batch is durable in that log
    anyway) and no thread but daemons is running; the exit handlers run and stdout and stderr are
    flushed first, as at a normal exit. Otherwise, and whenever a flush fails (a closed pipe),
    the exit is Python's own. Tests call ``main``, which returns and keeps nothing.
    """
    kept: list[object] = []
    code = main(keep=kept)
    if _may_skip_teardown():
        import atexit

        atexit._run_exitfuncs()  # what a normal exit runs first (it clears them after)
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            sys.exit(code)  # Python's own exit reports (or ignores) the failed flush as before
        os._exit(code)
    sys.exit(code)


def _may_skip_teardown() -> bool:
    """Whether the process holds nothing a teardown would still write or wait for: no Store
    open (DuckDB files are written only through Store) and no thread that Python would join."""
    import threading

    store = sys.modules.get("uac_kernel.log.store")
    if store is not None and store.open_paths():
        return False
    main_thread = threading.main_thread()
    return all(t is main_thread or t.daemon for t in threading.enumerate())


if __name__ == "__main__":
    run()
