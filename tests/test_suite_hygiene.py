"""The suite's own rules, checked on its source: no test asserts how long something took.

A wall-clock bound fails on a loaded machine (a what-if test asserted `< 60` s and took 92 s),
so a test bounds a count of operations, rows or bytes instead, or gives a subprocess a timeout
that only a hang reaches. A deadline a polling loop checks (`time.monotonic() < deadline`) is
such a hang-catcher and is allowed; a difference of two clock readings in an assert is not.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).parent
CLOCKS = {"monotonic", "perf_counter", "time", "monotonic_ns", "perf_counter_ns", "time_ns"}


def _is_clock(node: ast.AST) -> bool:
    """``time.monotonic()``, ``monotonic()``, ``time.time()``, ...: a reading of a clock."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return name in CLOCKS and not node.args


def _elapsed(node: ast.AST) -> bool:
    """A subtraction with a clock reading in it: a time something took."""
    return any(
        isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub) and any(map(_is_clock, ast.walk(n)))
        for n in ast.walk(node)
    )


def timed_asserts(source: str) -> list[int]:
    """Lines of ``assert`` statements that compare an elapsed time, directly or through a name
    that holds one (``took = time.monotonic() - started; assert took < 10``)."""
    tree = ast.parse(source)
    held = {
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and _elapsed(n.value)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    found = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Assert):
            continue
        for c in ast.walk(n.test):
            if isinstance(c, ast.Compare) and any(
                _elapsed(side) or (isinstance(side, ast.Name) and side.id in held)
                for side in (c.left, *c.comparators)
            ):
                found.append(n.lineno)
                break
    return found


def test_no_test_asserts_a_wall_clock_time() -> None:
    found = {
        path.name: lines
        for path in sorted(TESTS.rglob("*.py"))  # the tests, conftest.py and helpers/
        if (lines := timed_asserts(path.read_text(encoding="utf-8")))
    }
    assert not found, f"bound a count or a size, or give a hang-only timeout, not a time: {found}"


def test_the_check_finds_what_it_forbids() -> None:
    flagged = [
        "start = time.monotonic()\nrun()\nassert time.monotonic() - start < 60\n",
        "t0 = perf_counter()\nrun()\ntook = perf_counter() - t0\nassert took < 10, took\n",
        "s = time.time()\nassert ok and (time.time() - s) <= 5\n",
    ]
    allowed = [
        "deadline = time.monotonic() + 60\nwhile x:\n    assert time.monotonic() < deadline\n",
        "span = time.monotonic() - start\ntime.sleep(span / 2)\nassert proc.poll() is None\n",
        "assert len(rows) <= 200 and size < 1 << 20\n",
    ]
    assert [bool(timed_asserts(s)) for s in flagged] == [True] * len(flagged)
    assert [bool(timed_asserts(s)) for s in allowed] == [False] * len(allowed)


def imported_test_modules(source: str) -> list[str]:
    """The test modules (``test_*``) a source imports, at any depth of its code."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names]
    return [n for n in names if n.rsplit(".", 1)[-1].startswith("test_")]


def test_no_test_file_imports_another() -> None:
    """What several files share lives in ``tests/helpers/`` (plain code) or ``conftest.py``
    (fixtures): a test file is run, never imported."""
    found = {
        str(p.relative_to(TESTS)): imported_test_modules(p.read_text())
        for p in TESTS.rglob("*.py")
        if "browser_fixtures" not in p.parts
    }
    assert {k: v for k, v in found.items() if v} == {}


def test_the_import_check_finds_an_import_of_a_test_module() -> None:
    source = "import os\nfrom test_cli import uac\ndef f():\n    import tests.cli.test_x as t\n"
    assert imported_test_modules(source) == ["test_cli", "tests.cli.test_x"]
    assert imported_test_modules("from helpers.cli import uac\n") == []
