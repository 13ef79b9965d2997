"""A warm worker: the same jail as the one-shot child, forked once per state version and
asked query after query, so only the first query pays for the fork.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import pickle
import select
import signal
import struct
import threading
import time
import weakref
from collections.abc import Mapping
from typing import Final

from uac_kernel.core.errors import UacError

try:
    import resource
except ImportError:  # pragma: no cover - Windows: neither fork nor rlimits
    resource = None  # type: ignore[assignment]
from uac_kernel.sandbox._child import (
    _EXIT_NO_RESULT,
    _KIND_OK,
    _KIND_SETUP,
    _MEMORY_PAYLOAD,
    MAX_RESULT_BYTES,
    _answer,
    _Budget,
    _budget,
    _ended,
    _isolate,
    _kill,
    _limit_address_space,
    _lower_limit,
    _one_line,
    _outcome,
    _read,
    _require_fork,
    _run_forked,
    _wait,
    _write_all,
)
from uac_kernel.sandbox._policy import (
    _as_expression,
    _check_names,
    _compile,
)

# --- a warm worker ---------------------------------------------------------------------------

# Why a warm worker: a fork costs ~85 ms per GB of the caller's address space (page tables), and
# a query that reads the records writes their reference counts, so the child copies every page
# it touches — paid again by every one-shot query. A worker forked once per state version pays
# both once; its later queries cost the evaluation plus a pipe round trip. It is jailed like the
# one-shot child (descriptors closed but its two pipes, no core files, no file growth, no new
# processes, the same builtins) and answers one query at a time: the parent sends the text (it
# has checked it; the worker compiles it with the same _compile) and a CPU budget, the worker
# answers with the same pickled (kind, payload) message, read by the same restricted unpickler.
#
# What one query does must not change what a later one sees:
# - Names: each query gets a fresh scope and fresh builtins (_answer); ':=' binds in that scope
#   only; the namespace maps names to the same objects every time.
# - Shared objects: records are frozen pydantic models, and user.all/history/fields/... hand out
#   fresh lists and dicts. What stays mutable and shared is a record's list field and a record
#   class's ABC registry (Trip.register). An expression has no assignment statement, comprehension
#   targets may only be names, and dunder methods (__setitem__, __iadd__, __dict__...) are
#   refused, so the only way to change an object is to call one of its mutating methods by
#   name, which the static check sees: an expression naming any method in _MUTATING_ATTRS, on
#   any object, runs in a throw-away child instead.
# - Caches the worker fills as it answers are derived from the state it was forked with and give
#   the answers a fresh child would: user.where's field indexes, the compile cache, the record
#   classes' field caches, _strptime's regex cache, modules C code imports. A query stopped half
#   way could leave one half-built, so a worker retires after any query that does not return a
#   value (an exception or a limit): only clean answers keep it.
# - Limits: the CPU budget is per query (ITIMER_PROF, and an RLIMIT_CPU soft limit raised per
#   query to the CPU used so far plus the budget and a margin; the hard limit, which the worker
#   cannot raise, caps its lifetime CPU at _WORKER_CPU_SECONDS, and the parent forks a new worker
#   before a query could cross it). The address-space limit is set once, to the size at the fork
#   plus memory_mb; memory left behind by a query (caches, or freed but kept by the allocator)
#   would shrink later budgets, so a worker that grew by more than _drift_bytes(memory_mb)
#   retires after its answer. The wall clock is the parent's, as for the one-shot child: at the
#   deadline it kills and reaps the worker and reports what the one-shot path reports.
# - Life: the parent kills and reaps the worker on close, when the caller's state changes (the
#   caller makes a new WarmSandbox), after any error, limit or death, and replaces one that
#   left; the worker also leaves at EOF on its request pipe (the parent is gone) and after
#   idle_seconds without a query. A forked copy of the parent never signals or uses the worker.
# The price: while it lives the worker keeps its copies of the pages it touched (up to the
# records' share of the caller's memory), and the caller copies once each page it writes that
# the worker still shares. Hence the idle timeout.

_REQUEST_FD: Final = 3
_REPLY_FD: Final = 4
_REQUEST: Final = struct.Struct("!Id")  # expression bytes that follow, CPU seconds
_REPLY: Final = struct.Struct("!QdB")  # message bytes that follow, worker CPU so far, retiring
_WORKER_CPU_SECONDS: Final = 600
_CPU_MARGIN: Final = 1


def _drift_bytes(memory_mb: int) -> int:
    """How much a worker may grow over its life before it retires: 1/16 of the memory budget,
    between 16 and 64 MB."""
    return min(64 * 2**20, max(16 * 2**20, memory_mb * 2**20 // 16))


def _worker_cpu_hard() -> int:
    """The hard RLIMIT_CPU a new worker gets: _WORKER_CPU_SECONDS, or the caller's if lower."""
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    if hard == resource.RLIM_INFINITY:
        return _WORKER_CPU_SECONDS
    return min(_WORKER_CPU_SECONDS, hard)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _move_worker_fds(request_fd: int, reply_fd: int) -> None:
    """In the worker: make the request pipe fd 3 and the reply pipe fd 4."""
    if reply_fd == _REQUEST_FD:
        moved = os.dup(reply_fd)
        os.close(reply_fd)
        reply_fd = moved
    for fd, target in ((request_fd, _REQUEST_FD), (reply_fd, _REPLY_FD)):
        if fd != target:
            os.dup2(fd, target)
            os.close(fd)


def _read_blocking(fd: int, size: int) -> bytes | None:
    """Read exactly ``size`` bytes; None at EOF."""
    chunks: list[bytes] = []
    while size:
        chunk = os.read(fd, size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _reply(message: bytes, retire: bool) -> None:
    header = _REPLY.pack(len(message), _cpu_seconds(), retire)
    if len(message) < 1 << 16:  # one write, so the parent wakes up once
        _write_all(_REPLY_FD, header + message)
    else:
        _write_all(_REPLY_FD, header)
        _write_all(_REPLY_FD, message)


def _serve(
    namespace: Mapping[str, object],
    memory_mb: int,
    idle_seconds: float | None,
    cpu_hard: int,
    baseline: int | None,
    statm_fd: int | None,
) -> int:
    """The worker's loop: answer queries until EOF, idleness, or an answer that retires it.

    ``statm_fd`` is /proc/self/statm kept open (re-reading it is 7 times cheaper than opening it
    per query); ``baseline`` the address space at the fork.
    """
    drift = _drift_bytes(memory_mb)
    poller = select.poll()
    poller.register(_REQUEST_FD, select.POLLIN)
    wait_ms = None if idle_seconds is None else math.ceil(idle_seconds * 1000)
    while True:
        if not poller.poll(wait_ms):
            return 0  # idle: the parent forks a new worker when it needs one
        header = _read_blocking(_REQUEST_FD, _REQUEST.size)
        if header is None:
            return 0  # EOF: the parent closed the pipe or is gone
        size, cpu_seconds = _REQUEST.unpack(header)
        request = _read_blocking(_REQUEST_FD, size)
        if request is None:
            return 0
        try:
            soft = min(math.ceil(_cpu_seconds() + cpu_seconds) + _CPU_MARGIN, cpu_hard)
            resource.setrlimit(resource.RLIMIT_CPU, (soft, cpu_hard))
            signal.setitimer(signal.ITIMER_PROF, cpu_seconds)
            kind, message = _answer(request.decode("utf-8", "surrogatepass"), namespace, None)
            signal.setitimer(signal.ITIMER_PROF, 0)
            grown = False
            if statm_fd is not None and baseline is not None:
                pages = int(os.pread(statm_fd, 64, 0).split()[0])
                grown = pages * os.sysconf("SC_PAGE_SIZE") - baseline > drift
            retire = kind != _KIND_OK or grown
        except MemoryError:
            message, retire = _MEMORY_PAYLOAD, True
        try:
            _reply(message, retire)
        except OSError:
            return _EXIT_NO_RESULT
        if retire:
            return 0


def _worker_main(
    namespace: Mapping[str, object],
    memory_mb: int,
    idle_seconds: float | None,
    request_fd: int,
    reply_fd: int,
) -> int:
    try:
        _move_worker_fds(request_fd, reply_fd)
    except OSError:
        return _EXIT_NO_RESULT
    try:
        _isolate(_REPLY_FD)
        # The soft limit is raised before each query; the hard one bounds the worker's life.
        _lower_limit(resource.RLIMIT_CPU, _CPU_MARGIN, _WORKER_CPU_SECONDS)
        cpu_hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
        baseline = _limit_address_space(memory_mb)
        statm_fd = None
        if baseline is not None:
            statm_fd = os.open("/proc/self/statm", os.O_RDONLY)
        gc.freeze()
    except BaseException as exc:
        with contextlib.suppress(OSError):
            _reply(pickle.dumps((_KIND_SETUP, _one_line(exc)), protocol=5), True)
        return _EXIT_NO_RESULT
    return _serve(namespace, memory_mb, idle_seconds, cpu_hard, baseline, statm_fd)


def _stop_worker(pid: int, fds: tuple[int, ...], owner: int) -> None:
    """Close the parent's pipe ends; kill and reap the worker if this process forked it."""
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)
    if os.getpid() == owner:
        _kill(pid)
        _wait(pid, None)


class _WorkerLeft(Exception):
    """The worker left (idle or at EOF) before it read the query: run it in a new one."""


class _Worker:
    """The parent's handle on one warm worker process: its pid, its pipes, its CPU so far."""

    def __init__(
        self, namespace: Mapping[str, object], memory_mb: int, idle_seconds: float | None
    ) -> None:
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        try:
            pid = os.fork()
        except OSError as exc:
            for fd in (request_r, request_w, reply_r, reply_w):
                os.close(fd)
            raise UacError(
                f"the sandbox could not start its process ({exc}); free memory or processes "
                "and retry"
            ) from exc
        if pid == 0:  # the worker: never returns into the caller's code
            exit_code = _EXIT_NO_RESULT
            try:
                os.close(request_w)
                os.close(reply_r)
                exit_code = _worker_main(namespace, memory_mb, idle_seconds, request_r, reply_w)
            finally:
                os._exit(exit_code)
        os.close(request_r)
        os.close(reply_w)
        # A worker that stops reading must not block the caller: a full pipe is a dead worker.
        os.set_blocking(request_w, False)
        self.pid = pid
        self.memory_mb = memory_mb
        self.cpu_hard = _worker_cpu_hard()
        self.cpu_used = 0.0  # the worker's CPU seconds at its last answer
        self._owner = os.getpid()
        self._request_fd, self._reply_fd = request_w, reply_r
        self._stop = weakref.finalize(self, _stop_worker, pid, (request_w, reply_r), self._owner)

    @property
    def alive(self) -> bool:
        """Not yet killed, reaped or closed (the process may still have left on its own)."""
        return self._stop.alive

    def usable(self, budget: _Budget) -> bool:
        """Whether this worker can take a query with ``budget``; else the caller replaces it."""
        if not self.alive or os.getpid() != self._owner or budget.memory_mb != self.memory_mb:
            return False
        if self.cpu_used + budget.cpu_seconds + _CPU_MARGIN + 1 > self.cpu_hard:
            return False
        try:
            reaped, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            reaped = self.pid
        if reaped:
            self._forget()
            return False
        return True

    def close(self) -> None:
        """Kill and reap the worker and close the pipes (once; later calls do nothing)."""
        self._stop()

    def _forget(self) -> None:
        """The process has been reaped: close the pipes and never signal its pid again."""
        if self._stop.detach() is not None:
            for fd in (self._request_fd, self._reply_fd):
                with contextlib.suppress(OSError):
                    os.close(fd)

    def run(self, text: str, budget: _Budget, *, may_retry: bool) -> object:
        """Have the worker evaluate ``text``; the result, or the one-shot path's error.

        The worker is discarded after any error, limit or death. Raises _WorkerLeft (only if
        ``may_retry``) when the worker had left before it read the query.
        """
        deadline = time.monotonic() + budget.wall_seconds
        encoded = text.encode("utf-8", "surrogatepass")
        cpu_before = self.cpu_used
        header: bytes = b""
        data = b""
        try:
            try:
                request = _REQUEST.pack(len(encoded), budget.cpu_seconds) + encoded
                _write_all(self._request_fd, request)
            except (BrokenPipeError, BlockingIOError):
                stopped: str | None = "eof"
            else:
                header, stopped = _read(self._reply_fd, deadline, _REPLY.size)
            if stopped is None:
                size, cpu, retire = _REPLY.unpack(header)
                if size > MAX_RESULT_BYTES + 4096:
                    stopped = "too_big"
                else:
                    data, stopped = _read(self._reply_fd, deadline, size)
        except BaseException:
            # Interrupted (Ctrl-C) or failed: the worker must not outlive the call.
            self.close()
            raise
        if stopped is not None:
            if stopped != "eof":
                _kill(self.pid)
            status, cpu_total, killed = _wait(self.pid, deadline if stopped == "eof" else None)
            self._forget()
            left = status is not None and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
            if may_retry and not header and left:
                raise _WorkerLeft
            cpu_used = max(cpu_total - cpu_before, 0.0)
            return _ended(
                b"", None if stopped == "eof" else stopped, status, cpu_used, killed, budget
            )
        self.cpu_used = cpu if math.isfinite(cpu) else math.inf
        try:
            value = _outcome(data, None, 0.0, budget)
        except BaseException:
            self.close()
            raise
        if retire:
            self.close()
        return value


class WarmSandbox:
    """:func:`evaluate` over one namespace, in a jailed worker process reused across queries.

    The worker is forked on the first query and answers later ones without forking again, so a
    query over a large state costs about what the expression costs (see the comment above). It
    sees the namespace's objects as they were at its fork: make a new WarmSandbox (and close
    this one) when they change. Same checks, limits, results and errors as :func:`evaluate`;
    expressions that call a mutating method (``append``, ``update``, ``sort``...), and queries
    made while another thread is using the worker, run in a one-shot child instead. The worker
    leaves after ``idle_seconds`` without a query (None: never) and the next query forks a new
    one. The namespace's own methods must not change what later queries see (those of the
    query namespace do not: ``user.where`` only builds an index of the state).

    >>> with WarmSandbox({"xs": [1, 2, 3]}) as box:   # doctest: +SKIP
    ...     box.evaluate("sum(xs)"), box.evaluate("max(xs)")
    (6, 3)
    """

    def __init__(
        self, namespace: Mapping[str, object], *, idle_seconds: float | None = 120.0
    ) -> None:
        if idle_seconds is not None and not (math.isfinite(idle_seconds) and idle_seconds > 0):
            raise ValueError(
                f"idle_seconds must be a positive number or None, not {idle_seconds!r}"
            )
        self._namespace = dict(namespace)
        self._idle_seconds = idle_seconds
        self._worker: _Worker | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def pid(self) -> int | None:
        """The worker's process id; None before the first query, after close, or once the worker
        was discarded (the next query forks a new one)."""
        worker = self._worker
        return worker.pid if worker is not None and worker.alive else None

    def evaluate(
        self,
        expr: str,
        *,
        cpu_seconds: float = 5.0,
        memory_mb: int = 1024,
        wall_seconds: float | None = None,
    ) -> object:
        """Like :func:`evaluate` over this sandbox's namespace."""
        _require_fork()
        budget = _budget(cpu_seconds, memory_mb, wall_seconds)
        compiled = _compile(_as_expression(expr))
        _check_names(compiled.free_names, self._namespace.keys())
        if compiled.mutating or self._closed or not self._lock.acquire(blocking=False):
            return _run_forked(compiled.code, self._namespace, budget)
        try:
            for may_retry in (True, False):
                worker = self._ready(budget)
                if worker is None:
                    break
                try:
                    return worker.run(expr, budget, may_retry=may_retry)
                except _WorkerLeft:
                    continue
        finally:
            self._lock.release()
        return _run_forked(compiled.code, self._namespace, budget)

    def _ready(self, budget: _Budget) -> _Worker | None:
        """A worker able to take the query; None when no worker can (the budget is too large)."""
        worker = self._worker
        if worker is not None and not worker.usable(budget):
            worker.close()
            worker = self._worker = None
        if worker is None:
            if budget.cpu_seconds + _CPU_MARGIN + 1 > _worker_cpu_hard():
                return None
            worker = self._worker = _Worker(self._namespace, budget.memory_mb, self._idle_seconds)
        return worker

    def close(self) -> None:
        """Kill and reap the worker (after a query another thread is running); later queries
        run in one-shot children."""
        with self._lock:
            self._closed = True
            if self._worker is not None:
                self._worker.close()
                self._worker = None

    def __enter__(self) -> WarmSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
