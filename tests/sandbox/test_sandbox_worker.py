"""The warm sandbox worker: real processes, no mocks. A worker is reused while the state stands
still, replaced when it changes, discarded after any error, and no query can change what a later
one sees. (The escape corpus runs through the warm path in test_sandbox.py.)"""

from __future__ import annotations

import abc
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter, deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.events import fact
from helpers.processes import children
from pydantic import BaseModel, ConfigDict

from uac_kernel import Workbench
from uac_kernel.core.errors import SandboxFailed, SandboxLimit, SandboxRefused
from uac_kernel.sandbox import WarmSandbox, check, evaluate
from uac_kernel.sandbox._policy import _MUTATING_ATTRS

FAST: dict[str, Any] = {"cpu_seconds": 1.0, "memory_mb": 256}
ROOT = Path(__file__).resolve().parents[2]


class Note(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str
    tags: list[str]


def _namespace() -> dict[str, object]:
    return {"Note": Note, "note": Note(key="n1", tags=["b", "a"]), "xs": [3, 1, 2]}


@pytest.fixture
def box() -> Iterator[WarmSandbox]:
    with WarmSandbox(_namespace()) as warm:
        yield warm


def _wait_until_gone(pid: int) -> None:
    """Wait (up to a generous bound: this asserts an outcome, not a duration) until ``pid`` has
    exited: gone, or a zombie nobody reaped yet."""
    for _ in range(400):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return
        if state in ("Z", "X"):
            return
        time.sleep(0.05)
    raise AssertionError(f"process {pid} is still running")


# --- reuse and replacement ------------------------------------------------------------------


def test_queries_share_one_worker(box: WarmSandbox) -> None:
    assert box.pid is None  # forked at the first query, not before
    assert box.evaluate("sorted(xs)") == [1, 2, 3]
    pid = box.pid
    assert pid is not None and pid in children()
    assert box.evaluate("len(note.tags)") == 1 + 1
    assert box.evaluate("(n := 5, n)") == [5, 5]
    assert box.pid == pid
    with pytest.raises(SandboxFailed, match=r"^NameError: name 'n' is not defined$"):
        box.evaluate("(n, (n := 1))")  # ':=' bound in the previous query's scope only
    assert box.pid is None  # any error discards the worker ...
    assert pid not in children()  # ... killed and reaped
    assert box.evaluate("sum(xs)") == 6
    assert box.pid not in (None, pid)


def test_errors_are_those_of_the_one_shot_path(box: WarmSandbox) -> None:
    ns = _namespace()
    for expr in ("1/0", "note.nope", "xs[10]", "Note(key=1, tags=3)", "'a' * (70 * 2**20)"):
        with pytest.raises((SandboxFailed, SandboxLimit)) as one_shot:
            evaluate(expr, ns, **FAST)
        with pytest.raises(type(one_shot.value)) as warm:
            box.evaluate(expr, **FAST)
        assert str(warm.value) == str(one_shot.value), expr
    with pytest.raises(SandboxRefused):
        box.evaluate("xs.__class__")
    with pytest.raises(SandboxRefused, match="name 'open' is not defined in the query namespace"):
        box.evaluate("open('/etc/passwd')")
    for kwargs in ({"cpu_seconds": 0}, {"memory_mb": -1}, {"wall_seconds": float("nan")}):
        with pytest.raises(ValueError):
            box.evaluate("1", **kwargs)


@pytest.mark.parametrize(
    ("expr", "kwargs", "reason"),
    [
        ("[0]*10**9", FAST, r"memory limit of 256 MB.*narrow"),
        ("10**10**10", FAST, r"CPU time limit of 1\.0 s|memory limit of 256 MB"),
        ("sum(range(10**12))", FAST, r"CPU time limit of 1\.0 s.*narrow"),
        (
            "sum(range(10**12))",
            {"cpu_seconds": 30, "memory_mb": 256, "wall_seconds": 0.5},
            r"wall-clock time limit of 0\.5 s",
        ),
        ("(lambda f: f(f))(lambda f: f(f))", FAST, "recursion depth limit"),
    ],
    ids=["memory", "pow_tower", "cpu", "wall_clock", "recursion"],
)
def test_a_limit_replaces_the_worker(
    box: WarmSandbox, expr: str, kwargs: dict[str, Any], reason: str
) -> None:
    assert box.evaluate("len(xs)", **kwargs) == 3
    pid = box.pid
    with pytest.raises(SandboxLimit, match=reason):
        box.evaluate(expr, **kwargs)
    assert box.pid is None and pid not in children()
    assert box.evaluate("len(xs)", **kwargs) == 3
    assert box.pid not in (None, pid)


def test_a_worker_that_is_killed_between_queries_is_replaced(box: WarmSandbox) -> None:
    assert box.evaluate("1") == 1
    pid = box.pid
    assert pid is not None
    os.kill(pid, 9)
    _wait_until_gone(pid)
    assert box.evaluate("2") == 2  # not an error: it died before this query was sent
    assert box.pid not in (None, pid)


def test_a_new_memory_budget_gets_a_new_worker(box: WarmSandbox) -> None:
    box.evaluate("1", memory_mb=256)
    pid = box.pid
    box.evaluate("1", memory_mb=256, cpu_seconds=2)  # the CPU budget is per query
    assert box.pid == pid
    box.evaluate("1", memory_mb=512)
    assert box.pid not in (None, pid) and pid not in children()


def test_a_budget_beyond_a_workers_life_runs_one_shot(box: WarmSandbox) -> None:
    assert box.evaluate("1", cpu_seconds=10_000) == 1
    assert box.pid is None


# --- isolation between queries ----------------------------------------------------------------

MUTATIONS = [
    "note.tags.append('x')",
    "note.tags.sort()",
    "note.tags.reverse()",
    "[note.tags.clear()]",
    "xs.pop()",
    "list.insert(xs, 0, 9)",
    "sorted(xs, key=lambda x: xs.remove(x) or 0)",
    "Note.register(list)",  # class state: pydantic ignores it in isinstance, but it changes
    "(lambda f: f(note.tags, 'y'))(list.append)",
    "[d for d in [dict(a=1)] if d.update(b=2) is None]",
]


@pytest.mark.parametrize("expr", MUTATIONS)
def test_a_mutating_query_changes_nothing_later_queries_see(box: WarmSandbox, expr: str) -> None:
    assert box.evaluate("(note.tags, xs)") == [["b", "a"], [3, 1, 2]]
    pid = box.pid
    box.evaluate(expr)  # in a throw-away child, not in the worker
    assert box.pid == pid
    assert box.evaluate("(note.tags, xs, [1], note)") == [
        ["b", "a"],
        [3, 1, 2],
        [1],
        {"_type": "Note", "key": "n1", "tags": ["b", "a"]},
    ]
    assert box.pid == pid


def test_the_mutating_names_cover_every_mutable_type_a_query_can_reach() -> None:
    """A new Python release adding a method to one of these types fails this until it is sorted
    into mutating (routed to a one-shot child) or not."""
    pure = {
        *("copy", "count", "index", "get", "items", "keys", "values", "fromkeys"),
        *("difference", "intersection", "isdisjoint", "issubset", "issuperset", "union"),
        *("symmetric_difference", "elements", "most_common", "total", "maxlen", "mro"),
    }
    types: list[type] = [list, dict, set, Counter, deque, abc.ABCMeta]
    public = {n for t in types for n in dir(t) if not n.startswith("_")}
    assert public - pure <= _MUTATING_ATTRS, public - pure - _MUTATING_ATTRS
    mutating = {n for n in dir(bytearray) if n in dir(list) and not n.startswith("_")} - pure
    assert mutating <= _MUTATING_ATTRS
    gen = (x for x in [])
    assert {"send", "throw", "close"} <= {n for n in dir(gen) if not n.startswith("_")}
    assert {"send", "throw", "close"} <= _MUTATING_ATTRS
    for expr in MUTATIONS:
        check(expr)  # each passes the static check: routing, not refusal, keeps them apart


def test_queries_from_threads_share_the_worker_or_fork_their_own(box: WarmSandbox) -> None:
    results: list[object] = []

    def query(i: int) -> None:
        results.append(box.evaluate(f"sum(xs) + {i}"))

    threads = [threading.Thread(target=query, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == [6, 7, 8, 9, 10, 11]  # type: ignore[type-var]
    pid = box.pid
    assert pid is not None
    worker = threading.Thread(target=lambda: results.append(box.evaluate("max(xs)")))
    worker.start()
    worker.join()
    assert results[-1] == 3 and box.pid == pid  # the worker outlives the thread that used it


# --- life of the worker ---------------------------------------------------------------------


def test_close_kills_and_reaps_the_worker() -> None:
    before = children()
    box = WarmSandbox(_namespace())
    assert box.evaluate("len(xs)") == 3
    pid = box.pid
    assert pid in children()
    box.close()
    box.close()
    assert box.pid is None and children() <= before
    assert box.evaluate("len(xs)") == 3  # after close: one-shot children, none left behind
    assert box.pid is None and children() <= before


def test_an_idle_worker_leaves_and_the_next_query_forks_another() -> None:
    with WarmSandbox(_namespace(), idle_seconds=0.1) as box:
        assert box.evaluate("len(xs)") == 3
        pid = box.pid
        assert pid is not None
        _wait_until_gone(pid)
        assert box.evaluate("len(xs)") == 3
        assert box.pid not in (None, pid) and pid not in children()
    with pytest.raises(ValueError, match="idle_seconds"):
        WarmSandbox({}, idle_seconds=0)


def _script(body: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(body)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_worker_leaves_when_its_parent_dies() -> None:
    done = _script(
        """
        import os
        from uac_kernel.sandbox import WarmSandbox
        box = WarmSandbox({"xs": [1, 2]}, idle_seconds=None)
        assert box.evaluate("sum(xs)") == 3
        print(box.pid, flush=True)
        os._exit(0)  # no close, no finalizers: only the closed pipe tells the worker
        """
    )
    assert done.returncode == 0, done.stderr
    _wait_until_gone(int(done.stdout))


def test_ctrl_c_in_the_caller_kills_the_worker() -> None:
    done = _script(
        """
        import os, signal, threading
        from uac_kernel.sandbox import WarmSandbox
        box = WarmSandbox({})
        assert box.evaluate("1+1") == 2
        pid = box.pid
        threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        try:
            box.evaluate("sum(range(10**12))", cpu_seconds=30)
        except KeyboardInterrupt:
            print("interrupted")
        try:
            os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            print("no children")
        print(box.evaluate("1+1"), box.pid not in (None, pid))
        box.close()
        """
    )
    assert done.stdout.split() == ["interrupted", "no", "children", "2", "True"], done.stderr


# --- through the workbench ------------------------------------------------------------------


def _events(start: int, n: int) -> list[dict[str, Any]]:
    return [
        fact(f"2025-01-01T00:00:{i:02d}", "add", "Trip", f"t{i}", destination=f"D{i}", tags=["a"])
        for i in range(start, start + n)
    ]


def _write(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def test_workbench_reuses_the_worker_until_the_state_changes(tmp_path: Path) -> None:
    before = children()
    wb = Workbench(tmp_path / "u.duckdb", user="maya", rules=())
    wb.ingest(_write(tmp_path / "a.jsonl", _events(0, 3)))
    assert wb.eval("len(user.all(Trip))") == 3
    workers = children() - before
    assert len(workers) == 1  # one worker ...
    assert wb.eval("sorted(t.destination for t in user.all(Trip))") == ["D0", "D1", "D2"]
    assert children() - before == workers  # ... that answered both queries

    wb.ingest(_write(tmp_path / "b.jsonl", _events(3, 2)))
    assert not (children() - before)  # the ingest let the stale worker go at once
    assert wb.eval("len(user.all(Trip))") == 5  # the new worker sees the new records
    replaced = children() - before
    assert len(replaced) == 1 and not replaced & workers  # the old one killed and reaped

    assert wb.eval("user.all(Trip)[0].tags.append('x')") is None  # one-shot
    assert wb.eval("[t.tags for t in user.all(Trip)][:2]") == [["a"], ["a"]]
    assert children() - before == replaced
    with pytest.raises(SandboxLimit, match="memory limit of 256 MB"):
        wb.eval("[0]*10**9", cpu_seconds=1, memory_mb=256)
    assert wb.eval("len(user.all(Trip))") == 5

    wb.close()
    assert children() <= before  # no worker, no zombie


@pytest.mark.parametrize(
    ("expr", "expected", "reason"),
    [
        ("[0]*10**9", SandboxLimit, "memory limit of 256 MB"),
        ("10**10**10", SandboxLimit, r"CPU time limit of 1\.0 s|memory limit of 256 MB"),
        ("sum(range(10**12))", SandboxLimit, r"CPU time limit of 1\.0 s"),
        ("(lambda f: f(f))(lambda f: f(f))", SandboxLimit, "recursion depth limit"),
        ("'a' * (70 * 2**20)", SandboxLimit, "over the limit of 64 MB"),
        ("str(10**100000)", SandboxFailed, "^ValueError: Exceeds the limit"),
        ("user.all(Trip)[0].gi_frame", SandboxRefused, "attribute 'gi_frame' is not allowed"),
        ("search.__globals__", SandboxRefused, "attribute '__globals__' is not allowed"),
        ("open('/etc/passwd')", SandboxRefused, "name 'open' is not defined"),
    ],
)
def test_workbench_eval_stops_attacks(
    tmp_path: Path, expr: str, expected: type[Exception], reason: str
) -> None:
    with Workbench(tmp_path / "u.duckdb", user="maya", rules=()) as wb:
        wb.ingest(_write(tmp_path / "a.jsonl", _events(0, 2)))
        assert wb.eval("len(user.all(Trip))", cpu_seconds=1, memory_mb=256) == 2
        with pytest.raises(expected, match=reason):
            wb.eval(expr, cpu_seconds=1, memory_mb=256)
        assert wb.eval("len(user.all(Trip))", cpu_seconds=1, memory_mb=256) == 2


class Grows:
    """A namespace object whose method keeps memory in the worker, like a cache would."""

    def __init__(self) -> None:
        self._kept: list[object] = []

    def keep(self, n: int) -> int:
        self._kept.append([0] * n)
        return n


def test_a_worker_that_grew_retires_after_its_answer() -> None:
    with WarmSandbox({"grows": Grows()}) as box:
        assert box.evaluate("grows.keep(10)", memory_mb=256) == 10
        pid = box.pid
        assert pid is not None
        # 80 MB kept: past the 16 MB the worker may grow with a 256 MB budget, within the budget.
        assert box.evaluate("grows.keep(10**7)", memory_mb=256) == 10**7
        assert box.pid is None and pid not in children()
        assert box.evaluate("grows.keep(10)", memory_mb=256) == 10
