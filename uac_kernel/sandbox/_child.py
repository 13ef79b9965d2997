"""The runtime wall: a query runs in a forked, jailed child under CPU, memory and wall-clock
limits, and only plain data comes back.
"""

from __future__ import annotations

import contextlib
import gc
import io
import math
import os
import pickle
import re
import select
import signal
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import CodeType
from typing import Final, cast

from uac_kernel.core.errors import SandboxFailed, SandboxLimit, UacError

try:
    import resource
except ImportError:  # pragma: no cover - Windows: neither fork nor rlimits
    resource = None  # type: ignore[assignment]
from uac_kernel.sandbox._plain import (
    to_plain,
)
from uac_kernel.sandbox._policy import (
    _as_expression,
    _check_names,
    _compile,
    _runtime_builtins,
)

MAX_RESULT_BYTES: Final = 64 * 2**20
"""The largest pickled result the child may hand back."""

_MESSAGE_CHARS: Final = 1000
_RESULT_FD: Final = 3

# Called in the child after the expression ran, to return side information (trusted code).
Collect = Callable[[], object]


# Why fork: CPU and memory can only be bounded for a whole process (a signal-based timeout cannot
# interrupt one long C-level operation such as 10**10**10, and a MemoryError inside the caller's
# process can leave it crippled), and a forked child shares the caller's state copy-on-write:
# nothing is serialised, so a namespace of a million records costs the same as an empty one.
# Forking a process with threads (a Jupyter kernel has several) is sound on CPython 3.11/Linux:
# the child runs one thread, touches nothing but the interpreter and the objects of the query,
# and never returns into the caller's code — it leaves through os._exit, so no atexit handler,
# buffer flush or destructor of the parent's resources (DuckDB connection, ZMQ sockets) runs
# in it. A lock that another thread held at the fork could at worst hang the child; the
# wall-clock limit kills it then. (Python 3.12+ warns about fork in threaded processes with a
# DeprecationWarning; the reasoning above still holds for this child.)

_KIND_OK: Final = "ok"
_KIND_ERROR: Final = "error"
_KIND_MEMORY: Final = "memory"
_KIND_RECURSION: Final = "recursion"
_KIND_TOO_BIG: Final = "too_big"
_KIND_SETUP: Final = "setup"
_MEMORY_PAYLOAD: Final = pickle.dumps((_KIND_MEMORY, None), protocol=5)
_EXIT_NO_RESULT: Final = 70


@dataclass(frozen=True, slots=True)
class _Budget:
    cpu_seconds: float
    memory_mb: int
    wall_seconds: float


def _one_line(exc: BaseException) -> str:
    try:
        message = str(exc)
    except Exception:
        message = ""
    # uac's own errors (a field a record's type never had) are already written for the user:
    # they read the same inside the sandbox as out. Python's errors say what kind they are.
    if message and not isinstance(exc, UacError):
        message = f"{type(exc).__name__}: {message}{_date_hint(exc, message)}"
    text = " ".join((message or type(exc).__name__).split())
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 3] + "..."


_DATE_VS_TEXT: Final = re.compile(
    r"not supported between instances of '(datetime\.date(?:time)?|str)' and "
    r"'(datetime\.date(?:time)?|str)'"
)


def _date_hint(exc: BaseException, message: str) -> str:
    """How to compare a date with a date, when a query compared one with text."""
    found = _DATE_VS_TEXT.search(message) if isinstance(exc, TypeError) else None
    if not found or "str" not in found.groups() or found.group(1) == found.group(2):
        return ""
    other = found.group(1) if found.group(2) == "str" else found.group(2)
    example = "datetime(2026, 3, 1, 9, 0)" if other.endswith("datetime") else "date(2026, 3, 1)"
    return f"; compare with a {other.removeprefix('datetime.')}, not text: {example}"


def _lower_limit(which: int, soft: int, hard: int) -> None:
    """Lower an rlimit, never above the hard limit already in force."""
    _, current_hard = resource.getrlimit(which)
    if current_hard != resource.RLIM_INFINITY:
        hard = min(hard, current_hard)
    resource.setrlimit(which, (min(soft, hard), hard))


def _address_space_bytes() -> int | None:
    """The child's current virtual size, from /proc (Linux); None where there is no /proc."""
    try:
        with open("/proc/self/statm", "rb") as f:
            pages = int(f.read().split()[0])
    except OSError:
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")


def _move_result_fd(result_fd: int) -> None:
    """In the child: make the result pipe fd 3 (the read end is already closed)."""
    if result_fd != _RESULT_FD:
        os.dup2(result_fd, _RESULT_FD)
        os.close(result_fd)


def _isolate(last_fd: int) -> None:
    """In a child: detach it from the parent's signals and descriptors (all but 0 to ``last_fd``)
    and forbid core files, file growth and new processes."""
    # Ctrl-C reaches the whole process group; the parent handles it and kills the child.
    for signum, handler in (
        (signal.SIGINT, signal.SIG_IGN),
        (signal.SIGPROF, signal.SIG_DFL),
        (signal.SIGXCPU, signal.SIG_DFL),
        (signal.SIGXFSZ, signal.SIG_IGN),
    ):
        signal.signal(signum, handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGPROF, signal.SIGXCPU})

    # Drop every inherited descriptor (store files, sockets, other evaluations' pipes) but
    # stdin/stdout/stderr and the child's own pipes (fd 3, and fd 4 for a worker).
    max_fd = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if max_fd == resource.RLIM_INFINITY or max_fd < 1024:
        max_fd = 1 << 20
    os.closerange(last_fd + 1, max_fd)

    _lower_limit(resource.RLIMIT_CORE, 0, 0)
    _lower_limit(resource.RLIMIT_FSIZE, 0, 0)
    if hasattr(resource, "RLIMIT_NPROC"):
        _lower_limit(resource.RLIMIT_NPROC, 0, 0)


def _limit_address_space(memory_mb: int) -> int | None:
    """Allow ``memory_mb`` of address space beyond what the child maps now; return that size."""
    size = _address_space_bytes()
    if size is not None:
        limit = size + memory_mb * 2**20
        _lower_limit(resource.RLIMIT_AS, limit, limit)
    return size


def _enter_jail(budget: _Budget) -> None:
    """In the one-shot child: isolate it and set its limits for one evaluation."""
    _isolate(_RESULT_FD)
    # The CPU budget is enforced precisely by the profiling timer (SIGPROF kills: its default
    # action); RLIMIT_CPU is the backstop should SIGPROF be ignored (SIGXCPU, then SIGKILL).
    cpu_backstop = math.ceil(budget.cpu_seconds) + 1
    _lower_limit(resource.RLIMIT_CPU, cpu_backstop, cpu_backstop + 1)
    _limit_address_space(budget.memory_mb)
    signal.setitimer(signal.ITIMER_PROF, budget.cpu_seconds)
    # The parent's objects are shared copy-on-write; keep the collector off them.
    gc.freeze()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _answer(
    code: CodeType | str, namespace: Mapping[str, object], collect: Collect | None
) -> tuple[str, bytes]:
    """Evaluate in a jailed child; return the kind of outcome and the pickled (kind, payload).

    ``code`` may be the expression's text (a warm worker compiles what the parent checked).
    Each evaluation gets a fresh scope and fresh builtins: names a query binds (``:=``) die
    with it.
    """
    try:
        if isinstance(code, str):
            code = _compile(code).code
        scope = dict(namespace)
        scope["__builtins__"] = _runtime_builtins()
        plain = to_plain(eval(code, scope))
        if collect is not None:
            # After to_plain: a lazy value (a generator) has run to its end by now, so
            # collect sees everything the expression did.
            plain = [plain, to_plain(collect())]
        message = pickle.dumps((_KIND_OK, plain), protocol=5)
        if len(message) > MAX_RESULT_BYTES:
            return _KIND_TOO_BIG, pickle.dumps((_KIND_TOO_BIG, len(message)), protocol=5)
        return _KIND_OK, message
    except MemoryError:
        return _KIND_MEMORY, _MEMORY_PAYLOAD
    except RecursionError:
        payload = pickle.dumps((_KIND_RECURSION, sys.getrecursionlimit()), protocol=5)
        return _KIND_RECURSION, payload
    except BaseException as exc:
        failure: object = _one_line(exc)
        if collect is not None:
            # What the expression was handed before it failed: an answer may rest on it later
            # (a trace that cannot be read is left out; the error still says what failed).
            with contextlib.suppress(Exception):
                failure = [failure, to_plain(collect())]
        return _KIND_ERROR, pickle.dumps((_KIND_ERROR, failure), protocol=5)


def _child(code: CodeType, namespace: Mapping[str, object], collect: Collect | None) -> bytes:
    """Evaluate in the jailed child and return the pickled (kind, payload) message."""
    return _answer(code, namespace, collect)[1]


def _child_main(
    code: CodeType,
    namespace: Mapping[str, object],
    budget: _Budget,
    result_fd: int,
    collect: Collect | None,
) -> int:
    try:
        _move_result_fd(result_fd)
    except OSError:
        return _EXIT_NO_RESULT
    try:
        _enter_jail(budget)
    except BaseException as exc:
        message = pickle.dumps((_KIND_SETUP, _one_line(exc)), protocol=5)
        with contextlib.suppress(OSError):
            _write_all(_RESULT_FD, message)
        return _EXIT_NO_RESULT
    try:
        message = _child(code, namespace, collect)
    except MemoryError:
        message = _MEMORY_PAYLOAD
    try:
        _write_all(_RESULT_FD, message)
    except OSError:
        return _EXIT_NO_RESULT
    return 0


def _read(fd: int, deadline: float, size: int | None = None) -> tuple[bytes, str | None]:
    """Read until EOF (``size`` None: a one-shot child's whole message, refused past the size
    limit) or exactly ``size`` bytes (a warm worker's framed reply, where an early EOF is
    "eof"); stop early at the deadline ("wall")."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    chunks: list[bytes] = []
    total = 0
    while size is None or total < size:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return b"", "wall"
        if not poller.poll(math.ceil(remaining * 1000)):
            continue
        chunk = os.read(fd, 1 << 20 if size is None else min(size - total, 1 << 20))
        if not chunk:
            return (b"".join(chunks), None) if size is None else (b"", "eof")
        total += len(chunk)
        if size is None and total > MAX_RESULT_BYTES + 4096:
            return b"", "too_big"
        chunks.append(chunk)
    return b"".join(chunks), None


def _wait(pid: int, deadline: float | None) -> tuple[int | None, float, bool]:
    """Reap the child, killing it once ``deadline`` passes (at once if None).

    Returns (wait status or None if it was reaped elsewhere, CPU seconds it used, killed by us).
    """
    delay = 0.0001
    killed = False
    while True:
        try:
            if deadline is None or killed:
                _, status, usage = os.wait4(pid, 0)
            else:
                reaped, status, usage = os.wait4(pid, os.WNOHANG)
                if reaped == 0:
                    if time.monotonic() >= deadline:
                        with contextlib.suppress(ProcessLookupError):
                            os.kill(pid, signal.SIGKILL)
                        killed = True
                    else:
                        time.sleep(delay)
                        delay = min(delay * 2, 0.01)
                    continue
        except ChildProcessError:  # SIGCHLD is ignored: the kernel reaped it
            return None, 0.0, killed
        return status, usage.ru_utime + usage.ru_stime, killed


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles plain data only: a subverted child must not make the parent run code."""

    _CLASSES: Final = frozenset(
        {
            ("datetime", "date"),
            ("datetime", "datetime"),
            ("datetime", "timedelta"),
            ("datetime", "timezone"),
        }
    )

    def find_class(self, module: str, name: str) -> type:
        if (module, name) in self._CLASSES:
            found: type = super().find_class(module, name)
            return found
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")


def _cpu_limit(budget: _Budget) -> SandboxLimit:
    return SandboxLimit(
        f"the expression exceeded the CPU time limit of {float(budget.cpu_seconds)} s; narrow "
        "the expression (fewer records, smaller ranges) or raise cpu_seconds"
    )


def _memory_limit(budget: _Budget, how: str = "") -> SandboxLimit:
    return SandboxLimit(
        f"the expression exceeded the memory limit of {budget.memory_mb} MB{how}; narrow the "
        "expression (fewer records, smaller ranges) or raise memory_mb"
    )


def _outcome(data: bytes, status: int | None, cpu_used: float, budget: _Budget) -> object:
    """Turn the child's exit status and message into the result or the matching error."""
    if status is not None and os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        if signum in (signal.SIGPROF, signal.SIGXCPU):
            raise _cpu_limit(budget)
        if signum == signal.SIGKILL:
            if cpu_used >= budget.cpu_seconds * 0.9:
                raise _cpu_limit(budget)
            raise _memory_limit(budget, " (the system killed the sandbox)")
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        raise _memory_limit(budget, f" or its stack (the sandbox died of {name})")
    try:
        kind, payload = _PlainUnpickler(io.BytesIO(data)).load()
    except Exception as exc:
        code = os.WEXITSTATUS(status) if status is not None and os.WIFEXITED(status) else "unknown"
        raise SandboxFailed(
            f"the sandbox ended (exit status {code}) without a readable result; retry, and "
            "report a bug if it persists"
        ) from exc
    if kind == _KIND_OK:
        return payload
    if kind == _KIND_ERROR:
        if isinstance(payload, list) and len(payload) == 2:
            raise SandboxFailed(str(payload[0]), trace=payload[1])
        raise SandboxFailed(str(payload))
    if kind == _KIND_MEMORY:
        raise _memory_limit(budget)
    if kind == _KIND_RECURSION:
        raise SandboxLimit(
            f"the expression exceeded the recursion depth limit of {payload}; narrow the "
            "expression (no deep recursion through lambdas, no deeply nested results)"
        )
    if kind == _KIND_TOO_BIG:
        raise _too_big(int(payload))
    raise UacError(f"the sandbox could not set up its limits ({payload}); report a bug")


def _too_big(size: int | None) -> SandboxLimit:
    what = f"{size / 2**20:.0f} MB" if size is not None else f"over {MAX_RESULT_BYTES // 2**20} MB"
    return SandboxLimit(
        f"the result is {what} when serialised, over the limit of "
        f"{MAX_RESULT_BYTES // 2**20} MB; narrow the expression (aggregate, slice, or pick fields)"
    )


def _run_forked(
    code: CodeType,
    namespace: Mapping[str, object],
    budget: _Budget,
    collect: Collect | None = None,
) -> object:
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(read_fd)
        os.close(write_fd)
        raise UacError(
            f"the sandbox could not start its process ({exc}); free memory or processes and retry"
        ) from exc
    if pid == 0:  # the child: never returns into the caller's code
        exit_code = _EXIT_NO_RESULT
        try:
            os.close(read_fd)
            exit_code = _child_main(code, namespace, budget, write_fd, collect)
        finally:
            os._exit(exit_code)
    os.close(write_fd)
    deadline = time.monotonic() + budget.wall_seconds
    try:
        data, stopped = _read(read_fd, deadline)
    except BaseException:
        # Interrupted (Ctrl-C) or failed: the child must not outlive the call.
        _kill(pid)
        _wait(pid, None)
        raise
    finally:
        os.close(read_fd)
    if stopped is not None:
        _kill(pid)
    status, cpu_used, killed = _wait(pid, None if stopped is not None else deadline)
    return _ended(data, stopped, status, cpu_used, killed, budget)


def _ended(
    data: bytes,
    stopped: str | None,
    status: int | None,
    cpu_used: float,
    killed: bool,
    budget: _Budget,
) -> object:
    """The result or error of an evaluation whose process has ended and been reaped.

    ``stopped`` says why the parent stopped reading ("wall", "too_big") or is None; ``killed``
    that the parent killed the process at the deadline; ``cpu_used`` is the evaluation's CPU.
    """
    if stopped == "too_big":
        raise _too_big(None)
    if stopped == "wall" or (killed and status is not None and os.WIFSIGNALED(status)):
        if cpu_used >= budget.cpu_seconds * 0.9:
            raise _cpu_limit(budget)
        raise SandboxLimit(
            f"the expression exceeded the wall-clock time limit of {budget.wall_seconds} s; "
            "narrow the expression or raise wall_seconds"
        )
    return _outcome(data, status, cpu_used, budget)


def _kill(pid: int) -> bool:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def _require_fork() -> None:
    if not hasattr(os, "fork") or resource is None:
        raise UacError(
            "the sandbox needs Linux or macOS: it runs each query in a forked process with "
            "resource limits; on Windows run uac under WSL"
        )


def _budget(cpu_seconds: float, memory_mb: int, wall_seconds: float | None) -> _Budget:
    if not (math.isfinite(cpu_seconds) and cpu_seconds > 0):
        raise ValueError(f"cpu_seconds must be a positive number of seconds, not {cpu_seconds!r}")
    if isinstance(memory_mb, bool) or not isinstance(memory_mb, int) or memory_mb <= 0:
        raise ValueError(f"memory_mb must be a positive int, not {memory_mb!r}")
    wall = 4 * cpu_seconds + 2 if wall_seconds is None else wall_seconds
    if not (math.isfinite(wall) and wall > 0):
        raise ValueError(f"wall_seconds must be a positive number of seconds, not {wall!r}")
    return _Budget(float(cpu_seconds), memory_mb, float(wall))


def evaluate(
    expr: str,
    namespace: Mapping[str, object],
    *,
    cpu_seconds: float = 5.0,
    memory_mb: int = 1024,
    wall_seconds: float | None = None,
) -> object:
    """Check ``expr``, run it over ``namespace`` in a forked child with resource limits, and return
    its result as plain data (see :func:`to_plain`).

    Raises SandboxRefused before running anything; SandboxLimit when the expression exceeds
    ``cpu_seconds`` of CPU, ``memory_mb`` of memory beyond what the process already uses, the wall
    clock (default ``4 * cpu_seconds + 2`` seconds), the recursion limit or a 64 MB result;
    SandboxFailed with ``"<ExcType>: <message>"`` when the expression raises.
    """
    _require_fork()
    budget = _budget(cpu_seconds, memory_mb, wall_seconds)
    compiled = _compile(_as_expression(expr))
    _check_names(compiled.free_names, namespace.keys())
    return _run_forked(compiled.code, namespace, budget)


def evaluate_traced(
    expr: str,
    namespace: Mapping[str, object],
    collect: Collect,
    *,
    cpu_seconds: float = 5.0,
    memory_mb: int = 1024,
    wall_seconds: float | None = None,
) -> tuple[object, object]:
    """Like :func:`evaluate`, and also return ``collect()`` as called in the child after the
    expression ran — e.g. which records a tracing namespace handed to it (trusted code only)."""
    _require_fork()
    budget = _budget(cpu_seconds, memory_mb, wall_seconds)
    compiled = _compile(_as_expression(expr))
    _check_names(compiled.free_names, namespace.keys())
    pair = cast(list[object], _run_forked(compiled.code, namespace, budget, collect))
    return pair[0], pair[1]
