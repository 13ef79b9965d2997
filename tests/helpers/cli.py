"""The uac command line as a person runs it: a real process (or, where the process is not what a
test checks, the same ``main`` in this one), and the one-line error it ends with."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def uac(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``uac ARGS`` in a subprocess in ``cwd``, with this process's environment and ``env``."""
    return subprocess.run(
        [sys.executable, "-m", "uac_kernel.cli.main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


def uac_here(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``uac ARGS`` through ``main(argv)`` in this process, in ``cwd`` with ``env`` added to the
    environment: what ``uac`` gives, for tests where the process boundary is not what they
    check (a process costs a second of imports; kill -9, locks and a clean interpreter need
    ``uac``)."""
    import contextlib
    import io

    from uac_kernel.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    os.environ.update(env or {})
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # --help
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return subprocess.CompletedProcess(["uac", *args], code, out.getvalue(), err.getvalue())


def one_line_error(out: subprocess.CompletedProcess[str]) -> str:
    """The ``uac: error: ...`` line a failed command printed, its only line, with no traceback."""
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert out.stderr.startswith("uac: error: ") and out.stderr.count("\n") == 1, out.stderr
    assert "Traceback" not in out.stderr
    return out.stderr
