"""The uac command line as a person runs it: a real process, and the one-line error it ends with."""

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


def one_line_error(out: subprocess.CompletedProcess[str]) -> str:
    """The ``uac: error: ...`` line a failed command printed, its only line, with no traceback."""
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert out.stderr.startswith("uac: error: ") and out.stderr.count("\n") == 1, out.stderr
    assert "Traceback" not in out.stderr
    return out.stderr
