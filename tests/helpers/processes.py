"""Processes a test starts and watches: the path a child imports from, the pids below this one."""

from __future__ import annotations

import os
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def suite_path() -> str:
    """PYTHONPATH for a subprocess that imports uac and the suite's helpers (``import helpers``),
    as pyproject.toml's pytest ``pythonpath`` has it: the checkout and tests/."""
    return os.pathsep.join(str(p) for p in (TESTS.parent, TESTS))


def children() -> set[int]:
    """Pids (zombies included) whose parent is this process, from /proc."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid():
            found.add(int(stat.parent.name))
    return found


def descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc), zombies left out."""
    parent: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z":
            parent[int(stat.parent.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {p for p, pp in parent.items() if pp in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    """``pid`` is a process that has not ended (a zombie has)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"
