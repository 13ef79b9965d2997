"""The suite's fixtures, found by name; plain helpers several test files share are in helpers/."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

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
