"""The house rules of ``uac_kernel`` hold, and docs/architecture.md maps it truly.

``scripts/check_layers.py`` reads every import of the package: wings import only downward, no
circles, no module over its size; each breach it must find is planted in a throwaway package
first, so a checker that finds nothing cannot pass for one that works."""

from __future__ import annotations

import ast
import re
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import check_layers  # noqa: E402

MAP = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def test_the_package_keeps_the_house_rules() -> None:
    assert check_layers.breaches(check_layers.read_package(ROOT)) == []


def test_every_wing_has_a_rank_and_a_one_line_purpose_and_is_on_the_map() -> None:
    package = ROOT / "uac_kernel"
    folders = {p.parent.name for p in package.glob("*/__init__.py")}
    assert folders == set(check_layers.WINGS)
    for wing, rank in check_layers.WINGS.items():
        doc = ast.get_docstring(ast.parse((package / wing / "__init__.py").read_text()))
        assert doc, f"uac_kernel/{wing}/__init__.py: say in its docstring what the wing is for"
        assert re.search(rf"^\| {rank} \| `{wing}/` \| \S", MAP, re.M), f"{wing} not in the map"


def test_every_module_is_on_the_map() -> None:
    package = ROOT / "uac_kernel"
    missing = [
        p.relative_to(package).as_posix()
        for p in sorted(package.rglob("*.py"))
        if p.name != "__init__.py" and f"`{p.relative_to(package).as_posix()}`" not in MAP
    ]
    assert missing == [], "add these to docs/architecture.md's module tables"


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, source in {"uac_kernel/__init__.py": "", **files}.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
    return tmp_path


WINGS = {"low": 0, "high": 2, "left": 3, "right": 3}


def _breaches(tmp_path: Path, files: dict[str, str], max_lines: int = 800) -> list[str]:
    base = {f"uac_kernel/{w}/__init__.py": '"""A wing."""\n' for w in WINGS}
    package = check_layers.read_package(_package(tmp_path, {**base, **files}))
    return check_layers.breaches(package, WINGS, 1, {"__init__", "workbench"}, max_lines)


def test_a_clean_throwaway_package_has_no_breach(tmp_path: Path) -> None:
    files = {
        "uac_kernel/low/a.py": "X = 1\n",
        "uac_kernel/high/b.py": "from uac_kernel.low.a import X\n",
        "uac_kernel/workbench.py": "from uac_kernel.low import a\n",
        "uac_kernel/left/c.py": "from uac_kernel.workbench import a\nfrom uac_kernel.high import b\n",
    }
    assert _breaches(tmp_path, files) == []


@pytest.mark.parametrize(
    ("files", "found"),
    [
        (  # a module-level import up a wing
            {
                "uac_kernel/low/a.py": "from uac_kernel.high.b import Y\n",
                "uac_kernel/high/b.py": "Y = 1\n",
            },
            "imports uac_kernel.high.b upward",
        ),
        (  # an import inside a function counts
            {
                "uac_kernel/low/a.py": "def f():\n    from uac_kernel.high import b\n",
                "uac_kernel/high/b.py": "",
            },
            "imports uac_kernel.high.b upward",
        ),
        (  # so does one under TYPE_CHECKING, and a relative one
            {
                "uac_kernel/low/a.py": "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from ..high.b import Y\n",
                "uac_kernel/high/b.py": "Y = 1\n",
            },
            "imports uac_kernel.high.b upward",
        ),
        (  # wings of one rank are side by side
            {"uac_kernel/left/a.py": "import uac_kernel.right.b\n", "uac_kernel/right/b.py": ""},
            "imports uac_kernel.right.b sideways",
        ),
        (  # the lower wings may not import the top's orchestration
            {
                "uac_kernel/low/a.py": "from uac_kernel import workbench\n",
                "uac_kernel/workbench.py": "",
            },
            "imports uac_kernel.workbench upward",
        ),
        (  # a circle inside one wing
            {
                "uac_kernel/low/a.py": "from uac_kernel.low import b\n",
                "uac_kernel/low/b.py": "def f():\n    from uac_kernel.low.c import g\n",
                "uac_kernel/low/c.py": "from uac_kernel.low.a import *\ndef g(): ...\n",
            },
            "import circle: uac_kernel.low.a -> uac_kernel.low.b -> uac_kernel.low.c",
        ),
        (  # a module left at the top
            {"uac_kernel/helpers.py": ""},
            "a module at the top of the package",
        ),
        (  # a wing no one ranked
            {"uac_kernel/attic/__init__.py": "", "uac_kernel/attic/old.py": ""},
            "wing 'attic' has no rank",
        ),
    ],
)
def test_the_checker_finds_each_kind_of_breach(
    tmp_path: Path, files: dict[str, str], found: str
) -> None:
    problems = _breaches(tmp_path, files)
    assert any(found in line for line in problems), problems


def test_the_checker_counts_code_not_docstrings_or_comments(tmp_path: Path) -> None:
    body = '"""Doc\n\nstring."""\n# a comment\n\n' + "".join(f"X{i} = {i}\n" for i in range(5))
    files = {"uac_kernel/low/a.py": body}
    assert _breaches(tmp_path, files, max_lines=5) == []
    problems = _breaches(tmp_path, files, max_lines=4)
    assert [p for p in problems if "5 lines of code, over 4" in p], problems
