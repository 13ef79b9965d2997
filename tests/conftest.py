"""The suite's fixtures, found by name; plain helpers several test files share are in helpers/."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.events import jsonl
from helpers.magics import run, shell_with_store
from helpers.maya import STORE

from uac_kernel.model.client import ModelSettings
from uac_kernel.model.testing import ChatServer
from uac_kernel.workbench import Workbench

# A store another process holds is waited for up to UAC_LOCK_TIMEOUT seconds (10 by default)
# before the error naming that process; the tests that expect the error need not wait that
# long, and the CLI subprocesses they start inherit this.
os.environ.setdefault("UAC_LOCK_TIMEOUT", "2")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "user.duckdb"


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    """The local chat-completions server the real ``openai`` client talks to."""
    with ChatServer() as srv:
        yield srv


@pytest.fixture
def model_wb(db: Path, chat_server: ChatServer) -> Iterator[Workbench]:
    """User maya's workbench whose model is the stand-in behind ``chat_server`` (no retries)."""
    settings = ModelSettings(model="stand-in", base_url=chat_server.base_url, max_retries=0)
    with Workbench(db, user="maya", model=settings) as wb:
        yield wb


@pytest.fixture(autouse=True, scope="session")
def uac_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """uac's cache (the offline Vega bundle) is the test run's, not the home directory's; the
    kernels and commands the tests start inherit it, so only the first chart builds it."""
    path = tmp_path_factory.mktemp("uac-cache")
    patch = pytest.MonkeyPatch()
    patch.setenv("UAC_CACHE_DIR", str(path))
    yield path
    patch.undo()


# -- the notebook's shell ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def kernel_shell() -> Iterator[Any]:
    """ipykernel's in-process kernel shell, the one a notebook talks to: one per test module."""
    pytest.importorskip("ipykernel", reason="pip install -e '.[dev]'")
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    from ipykernel.inprocess.manager import InProcessKernelManager

    km = InProcessKernelManager()
    km.start_kernel()
    kernel = km.kernel
    yield kernel.shell
    km.shutdown_kernel()
    # The shell and kernel are process-wide singletons: leave none behind for other test
    # modules. Their objects are kept until the process ends, as they would be without the
    # clearing: collected earlier, ipykernel 7.4 reports its IOPub task as destroyed pending.
    type(kernel.shell).clear_instance()
    type(kernel).clear_instance()
    _RETIRED_KERNELS.append(kernel)


_RETIRED_KERNELS: list[Any] = []


# The events.jsonl in the working directory of the ``ip`` shell: an allergy, two medications.
SHELL_EVENTS = [
    {
        "kind": "fact",
        "ts": "2024-02-09",
        "op": "add",
        "type": "Allergy",
        "key": "pen",
        "fields": {"substance": "penicillin", "severity": "severe"},
    },
    {
        "kind": "fact",
        "ts": "2024-11-18",
        "op": "add",
        "type": "Medication",
        "key": "amox",
        "fields": {"name": "amoxicillin", "active": True},
    },
    {
        "kind": "fact",
        "ts": "2024-11-18",
        "op": "add",
        "type": "Medication",
        "key": "ibu",
        "fields": {"name": "ibuprofen", "dose_mg": 200.0},
    },
]


@pytest.fixture
def ip(kernel_shell: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The shell with ``%load_ext uac`` and user maya's store ``maya.duckdb`` in ``tmp_path``
    (also the working dir), nothing open or ingested yet; ``events.jsonl`` there holds
    ``SHELL_EVENTS`` for a test to ingest."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in SHELL_EVENTS))
    ip = kernel_shell
    ip.reset(new_session=False)
    ip.payload_manager.clear_payload()
    ip.config.pop("UacMagics", None)  # %config persists in the shell's config across tests
    run(ip, "%load_ext uac")
    run(ip, f"%config UacMagics.db = {str(tmp_path / 'maya.duckdb')!r}")
    run(ip, "%config UacMagics.user = 'maya'")
    yield ip
    run(ip, "%unload_ext uac")


@pytest.fixture
def maya_ip(kernel_shell: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Unlike ``ip``: the shell with Maya's store (``helpers.maya.STORE``: a severe penicillin
    allergy, ibuprofen) ingested from ``store.jsonl`` in ``tmp_path`` (the working dir) into
    ``maya.duckdb``; no ``events.jsonl``."""
    monkeypatch.chdir(tmp_path)
    jsonl(tmp_path / "store.jsonl", STORE)
    yield from shell_with_store(kernel_shell, tmp_path / "maya.duckdb", "maya", "store.jsonl")


@pytest.fixture(scope="module")
def uac_shell(kernel_shell: Any) -> Iterator[Any]:
    """Unlike ``ip``: the shell with uac's magics loaded and no store or user set, one per test
    module (for magics that name their own files, like ``%uac fleet``)."""
    kernel_shell.run_cell("%load_ext uac").raise_error()
    yield kernel_shell
    kernel_shell.run_cell("%unload_ext uac")
