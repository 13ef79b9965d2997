"""Where ``uac fleet run``'s tasks run: a local process pool, or Ray Core tasks.

Both take the same task function and items, share one model-call budget between all their
workers, retry a task whose worker raised or died, and yield each item with its result (or the
exception of its last attempt) as it finishes. Ray is imported only by ``run_ray``.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from multiprocessing.managers import BaseManager
from typing import TYPE_CHECKING, Any, TypeVar

from uac_kernel.core import settings
from uac_kernel.core.errors import FleetError, MissingExtra

if TYPE_CHECKING:
    # the budget manager's process imports this module: it needs no model layer
    from uac_kernel.model.client import Budget

__all__ = ["ENGINES", "Limiter", "run_local", "run_ray"]

T = TypeVar("T")
R = TypeVar("R")
Task = Callable[[T, "Budget"], R]
Finished = Iterator[tuple[T, "R | BaseException"]]

ENGINES = ("local", "ray")
# A worker process is replaced after this many tasks: each task's DuckDB connections leave
# about 0.6 MB of native memory behind (Python's own heap stays flat), so a worker that served
# a thousand users held 600 MB more. A new worker costs about a second of start-up.
TASKS_PER_WORKER = 100


class Limiter:
    """At most ``concurrency`` holders at once, and (with ``rate``) at most ``rate`` acquires
    per second, spaced evenly: a semaphore and a token bucket of depth one, in one object that
    lives in one process (a manager's, or a Ray actor) and is called from every worker."""

    def __init__(self, concurrency: int, rate: float | None = None) -> None:
        self._cond = threading.Condition()
        self._free = concurrency
        self._gap = 1.0 / rate if rate else 0.0
        self._next = 0.0

    def acquire(self) -> None:
        with self._cond:
            while self._free == 0:
                self._cond.wait()
            self._free -= 1
            now = time.monotonic()
            at = max(now, self._next)
            self._next = at + self._gap
        if at > now:
            time.sleep(at - now)

    def release(self) -> None:
        with self._cond:
            self._free += 1
            self._cond.notify()


def _watch_parent(parent: int) -> None:
    """In a worker or the budget manager: exit when the driver that started it (``parent``) is
    gone (killed with -9, it cannot stop them), rather than live on as an orphan. A task cut
    short this way leaves its partition whole, as any killed task does.

    On Linux the kernel does it (``PR_SET_PDEATHSIG``), so a job holding the GIL in C code (a
    long regex, an extension) dies too; elsewhere, and as a second net, a thread polls."""
    if sys.platform == "linux":
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the driver died before the line above took effect
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(1)

    threading.Thread(target=watch, name="uac-watch-parent", daemon=True).start()


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


class _BudgetManager(BaseManager):
    """Serves one ``Limiter`` to the pool's workers (each call runs on a thread of its own)."""


_BudgetManager.register("Limiter", Limiter)


def run_local(
    fn: Task[T, R],
    items: Sequence[T],
    *,
    jobs: int,
    retries: int,
    concurrency: int,
    rate: float | None,
) -> Finished[T, R]:
    """Run ``fn(item, budget)`` for each item in ``jobs`` spawned processes.

    A task that raised, or whose worker died, is submitted again up to ``retries`` times. A dead
    worker breaks the whole pool (``BrokenProcessPool``): every task in flight then counts an
    attempt, and a new pool takes over the rest.
    """
    try:
        os.getcwd()  # multiprocessing reads it too, to start any worker
    except FileNotFoundError:
        raise FleetError(
            "the current directory was removed, so no worker can start in it; change to a "
            "directory that exists (cd, os.chdir) and run again"
        ) from None
    ctx = multiprocessing.get_context("spawn")
    # a TCP address on loopback: a Unix socket under a long TMPDIR exceeds its 108-byte limit
    manager = _BudgetManager(address=("127.0.0.1", 0), ctx=ctx)
    manager.start(_watch_parent, (os.getpid(),))
    try:
        budget = manager.Limiter(concurrency, rate)  # type: ignore[attr-defined]
        pending = list(reversed(range(len(items))))
        attempts = [0] * len(items)
        while pending:
            pool = ProcessPoolExecutor(
                jobs,
                mp_context=ctx,
                initializer=_watch_parent,
                initargs=(os.getpid(),),
                max_tasks_per_child=TASKS_PER_WORKER,
            )
            try:
                running: dict[Future[R], int] = {}
                broken = False
                while (pending or running) and not broken:
                    # Only as many as there are workers: a broken pool fails what was queued
                    # too, and that must not count as their attempt.
                    while pending and len(running) < jobs:
                        i = pending.pop()
                        running[pool.submit(fn, items[i], budget)] = i
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in done:
                        i = running.pop(future)
                        exc = future.exception()
                        if exc is None:
                            yield items[i], future.result()
                            continue
                        broken = broken or isinstance(exc, BrokenProcessPool)
                        attempts[i] += 1
                        if attempts[i] > retries:
                            yield items[i], exc
                        else:
                            pending.append(i)
                for future, i in running.items():  # the broken pool's other tasks
                    future.cancel()
                    attempts[i] += 1
                    if attempts[i] > retries:
                        yield items[i], BrokenProcessPool("a worker of the pool died")
                    else:
                        pending.append(i)
            except BaseException:
                # stopped (Ctrl-C, the caller gave up): tasks not started never start, and
                # those running end on their own, each committing whole or not at all
                pool.shutdown(wait=False, cancel_futures=True)
                raise
            pool.shutdown()
    finally:
        manager.shutdown()


class _RayBudget:
    """A worker's side of the budget actor."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def acquire(self) -> None:
        import ray

        ray.get(self.actor.acquire.remote())

    def release(self) -> None:
        import ray

        ray.get(self.actor.release.remote())


def _ray_task(fn: Task[T, R], item: T, actor: Any) -> R:
    return fn(item, _RayBudget(actor))


def _start_ray(ray: Any, cpus: int, attempts: int = 3) -> None:
    """A local Ray instance of ``cpus`` CPUs. Its raylet dies when the dashboard agent takes
    over 15 s to start (a fixed timeout, ray-project/ray#65983), which a busy machine can
    cause: tried ``attempts`` times, then a one-line error."""
    for attempt in range(attempts):
        try:
            ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False)
            return
        except Exception as exc:
            ray.shutdown()
            if attempt == attempts - 1:
                raise FleetError(
                    f"a local Ray instance did not start ({str(exc).splitlines()[0][:120]}); "
                    "the machine may be too busy: try again, or start one with `ray start "
                    "--head` and set RAY_ADDRESS=auto"
                ) from exc


def run_ray(
    fn: Task[T, R],
    items: Sequence[T],
    *,
    jobs: int,
    retries: int,
    concurrency: int,
    rate: float | None,
    name: str,
) -> Finished[T, R]:
    """Run ``fn(item, budget)`` for each item as a Ray task, at most ``jobs`` in flight.

    Joins the cluster at ``RAY_ADDRESS`` when set, else starts a local instance of ``jobs``
    CPUs (and stops it at the end); a Ray already initialised in this process is used as it is.
    Ray retries a task that raised or whose worker died, ``retries`` times. The budget is a
    named actor (``name``), so every worker of the cluster takes the same one.
    """
    try:
        import ray
    except ImportError:
        raise MissingExtra("uac fleet run --engine ray", extra="fleet", missing="ray") from None

    started = False
    if not ray.is_initialized():
        address = settings.RAY_ADDRESS.get()
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            _start_ray(ray, jobs)
        started = True
    try:
        # Threads, so a blocked acquire does not hold up the release that would free it.
        limiter: Any = ray.remote(Limiter)
        actor = limiter.options(
            name=name, get_if_exists=True, num_cpus=0, max_concurrency=1000
        ).remote(concurrency, rate)
        # max_calls is an option of the function, not of a call (.options refuses it)
        remote: Any = ray.remote(max_calls=TASKS_PER_WORKER)(_ray_task)
        task = remote.options(num_cpus=1, max_retries=retries, retry_exceptions=True)
        pending = list(reversed(items))
        running: dict[Any, T] = {}
        try:
            while pending or running:
                while pending and len(running) < jobs:
                    item = pending.pop()
                    running[task.remote(fn, item, actor)] = item
                done, _ = ray.wait(list(running), num_returns=1)
                for ref in done:
                    item = running.pop(ref)
                    try:
                        yield item, ray.get(ref)
                    except ray.exceptions.RayError as exc:
                        yield item, exc
        finally:
            for ref in running:
                ray.cancel(ref, force=True)
            ray.kill(actor)
    finally:
        if started:
            ray.shutdown()
