"""Processes sharing one store file: a patient wait for its lock, the CLI so, a holder of the file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from helpers.processes import suite_path

# Long enough for the other writer's batches on a loaded machine; a test that wants the
# bound to pass sets a short one itself.
PATIENT = {"UAC_LOCK_TIMEOUT": "120"}

# Another program holding the file: it takes the file as any DuckDB client would once this
# process lets go of it (after its linger), then keeps it for argv[2] seconds.
HOLDER = (
    "import duckdb, sys, time\n"
    "for _ in range(500):\n"
    "    try:\n"
    "        c = duckdb.connect(sys.argv[1])\n"
    "        break\n"
    "    except duckdb.IOException:\n"
    "        time.sleep(0.02)\n"
    "print('held', flush=True)\n"
    "time.sleep(float(sys.argv[2])); c.close(); print('let go', flush=True); time.sleep(60)"
)


def patient_env(**extra: str) -> dict[str, str]:
    """This process's environment for a child on the shared store: the suite's path, the
    patient lock wait, and ``extra``."""
    return {**os.environ, "PYTHONPATH": suite_path(), **PATIENT, **extra}


def patient_uac(*args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """``uac ARGS`` in a subprocess that waits patiently for the store's lock (``patient_env``)."""
    return subprocess.run(
        [sys.executable, "-m", "uac_kernel.cli.main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=patient_env(**extra),
        timeout=300,
    )


def hold(db: Path, seconds: float) -> subprocess.Popen[str]:
    """A process (``HOLDER``) that has taken the file at ``db`` and keeps it ``seconds``."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(db), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder
