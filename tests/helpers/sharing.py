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

# Another program holding the file: a DuckDB client that asks for the file as uac does
# (log.handover) until the holder lets go, then keeps it for argv[2] seconds.
HOLDER = (
    "import duckdb, sys, time\n"
    "from uac_kernel.log.handover import ask\n"
    "for _ in range(500):\n"
    "    try:\n"
    "        c = duckdb.connect(sys.argv[1])\n"
    "        break\n"
    "    except duckdb.IOException:\n"
    "        ask(sys.argv[1])\n"
    "        time.sleep(0.02)\n"
    "print('held', flush=True)\n"
    "time.sleep(float(sys.argv[2])); c.close(); print('let go', flush=True); time.sleep(60)"
)

# Another uac process that opens the store to write, waiting up to argv[2] seconds.
TAKER = "import sys\nfrom uac_kernel.log.store import Store\nStore(sys.argv[1], lock_timeout=float(sys.argv[2])).close()"


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
        [sys.executable, "-c", HOLDER, str(db), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
        env=patient_env(),
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    return holder


def another_process_gets_it(db: Path, wait: float = 60.0) -> bool:
    """Whether another uac process opens the store to write within ``wait`` seconds: one that
    holds it lets go when asked (the bound is a liveness check, not a timing)."""
    done = subprocess.run(
        [sys.executable, "-c", TAKER, str(db), str(wait)],
        capture_output=True,
        text=True,
        timeout=wait + 60,
        env=patient_env(),
    )
    return done.returncode == 0


def a_client_that_does_not_ask_gets_it(db: Path) -> bool:
    """Whether a DuckDB client that does not ask for the file opens it at once."""
    done = subprocess.run(
        [sys.executable, "-c", "import duckdb, sys; duckdb.connect(sys.argv[1]).close()", str(db)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.returncode == 0
