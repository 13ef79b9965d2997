"""``import_on_fresh_stack``: the import runs on a thread of its own; its result and its errors
come back to the caller as a plain import's would."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from uac_kernel.notebook import imports, magics
from uac_kernel.notebook.imports import import_in_background, import_on_fresh_stack


@pytest.fixture
def module_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in ("uac_fresh_probe", "uac_fresh_broken"):
        sys.modules.pop(name, None)


def test_the_module_is_imported_on_another_thread_and_returned(module_dir: Path) -> None:
    (module_dir / "uac_fresh_probe.py").write_text(
        "import threading\nIMPORTED_ON = threading.current_thread().name\n"
    )
    module = import_on_fresh_stack("uac_fresh_probe")
    assert sys.modules["uac_fresh_probe"] is module
    assert module.IMPORTED_ON == "import uac_fresh_probe"  # the worker thread's name
    assert import_on_fresh_stack("uac_fresh_probe") is module  # imported: no second thread


def test_errors_are_raised_in_the_caller(module_dir: Path) -> None:
    with pytest.raises(ModuleNotFoundError, match="uac_no_such_module"):
        import_on_fresh_stack("uac_no_such_module")
    (module_dir / "uac_fresh_broken.py").write_text("raise ValueError('broken at import')\n")
    with pytest.raises(ValueError, match="broken at import"):
        import_on_fresh_stack("uac_fresh_broken")


def test_a_module_blocked_in_sys_modules_is_an_import_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uac_fresh_blocked", None)  # how tests hide a package
    with pytest.raises(ImportError):
        import_on_fresh_stack("uac_fresh_blocked")


def test_a_background_import_is_waited_for(module_dir: Path) -> None:
    (module_dir / "uac_fresh_probe.py").write_text(
        "import threading, time\ntime.sleep(0.3)\nIMPORTED_ON = threading.current_thread().name\n"
    )
    worker = import_in_background("uac_fresh_probe")
    assert worker is not None  # returned at once, the import still running
    module = import_on_fresh_stack("uac_fresh_probe")  # waits for the rest
    assert not worker.is_alive() and module.IMPORTED_ON == "import uac_fresh_probe"
    assert import_in_background("uac_fresh_probe") is None  # imported: nothing to start


def test_a_background_import_error_is_raised_where_the_module_is_imported(
    module_dir: Path,
) -> None:
    (module_dir / "uac_fresh_broken.py").write_text("raise ValueError('broken at import')\n")
    worker = import_in_background("uac_fresh_broken")
    assert worker is not None
    worker.join()  # failed on its thread, quietly
    assert "uac_fresh_broken" not in sys.modules
    with pytest.raises(ValueError, match="broken at import"):
        import_on_fresh_stack("uac_fresh_broken")
    with pytest.raises(ValueError, match="broken at import"):  # a plain import too
        __import__("uac_fresh_broken")


def test_no_background_import_when_switched_off(
    module_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (module_dir / "uac_fresh_probe.py").write_text("X = 1\n")
    monkeypatch.setattr(imports, "BACKGROUND", False)
    assert import_in_background("uac_fresh_probe") is None
    assert "uac_fresh_probe" not in sys.modules


def test_load_ext_starts_the_chart_import(
    kernel_shell: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[tuple[str, ...]] = []
    monkeypatch.setattr(magics, "import_in_background", lambda *names: started.append(names))
    magics.load_ipython_extension(kernel_shell)
    try:
        assert started == [("uac_kernel.render.charts",)]
    finally:
        magics.unload_ipython_extension(kernel_shell)
