from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest

from uac_kernel.core.schema import infer
from uac_kernel.ingest.events import parse_objects, plan_batch
from uac_kernel.log.integrity import Head, verify
from uac_kernel.log.store import NewEvent, Store
from uac_kernel.model.client import ModelSettings
from uac_kernel.model.testing import ChatServer
from uac_kernel.state.fold import State
from uac_kernel.state.query import UserView
from uac_kernel.vocab.binding import Binding
from uac_kernel.workbench import Workbench


def suite_path() -> str:
    """PYTHONPATH for a subprocess that imports uac and test modules by name, as the suite does
    (pyproject.toml's pytest ``pythonpath``: the checkout, tests/ and each of its folders)."""
    tests = Path(__file__).resolve().parent
    wings = sorted(p for p in tests.iterdir() if p.is_dir() and any(p.glob("test_*.py")))
    folders = [tests.parent, tests, *wings]
    return os.pathsep.join(str(p) for p in folders)


# A store another process holds is waited for up to UAC_LOCK_TIMEOUT seconds (10 by default)
# before the error naming that process; the tests that expect the error need not wait that
# long, and the CLI subprocesses they start inherit this.
os.environ.setdefault("UAC_LOCK_TIMEOUT", "2")


def fact(ts: str, op: str, type_: str, key: str, **fields: Any) -> dict[str, Any]:
    ev: dict[str, Any] = {"kind": "fact", "ts": ts, "op": op, "type": type_, "key": key}
    if op != "retract":
        ev["fields"] = fields
    elif fields:
        ev.update(fields)
    return ev


# -- events and alerts for rule and constraint tests ------------------------------------------


def _at(ts: str) -> str:
    """A date (``2025-01-01``) as that day at 09:00; a date-time as it is."""
    return f"{ts}T09:00:00" if len(ts) == 10 else ts


def add(ts: str, type_: str, key: str, **fields: Any) -> dict[str, Any]:
    return fact(_at(ts), "add", type_, key, **fields)


def update(ts: str, type_: str, key: str, **fields: Any) -> dict[str, Any]:
    return fact(_at(ts), "update", type_, key, **fields)


def retract(ts: str, type_: str, key: str) -> dict[str, Any]:
    return fact(_at(ts), "retract", type_, key)


def clock(ts: str) -> dict[str, Any]:
    """An utterance that only moves the log clock (``user.today``) to ``ts``."""
    return {"kind": "utterance", "ts": _at(ts), "speaker": "user", "text": "ok"}


def alerts(wb: Any) -> list[Any]:
    """The standing alerts; a rule that raised (a ``rule_error`` alert) fails the test."""
    found = wb.alerts()
    assert not [a.message for a in found if a.category == "rule_error"]
    return found


def keys(a: Any) -> set[str]:
    """``Type/key`` of each record an alert rests on."""
    return {f"{e.type}/{e.key}" for e in a.evidence}


def without_record(code: str, key: str) -> str:
    """``code`` (a checkpoint part) with the record of ``key`` deleted, however many lines it spans."""
    import ast

    lines = code.splitlines(keepends=True)
    # a cell's `%%uac cell ...` line is not Python: blank it, keeping the line numbers
    python = "".join("\n" if ln.startswith("%") else ln for ln in lines)
    for node in ast.walk(ast.parse(python)):
        if isinstance(node, ast.Call) and any(
            kw.arg == "key" and isinstance(kw.value, ast.Constant) and kw.value.value == key
            for kw in node.keywords
        ):
            return "".join(lines[: node.lineno - 1] + lines[node.end_lineno :])  # type: ignore[operator]
    raise AssertionError(f"no record {key!r} in the code")


def append(store: Store, state: State, events: Iterable[dict[str, Any]]) -> None:
    """Validate, append and fold a batch, as the workbench does."""
    state.apply_all(store.append(plan_batch(state, parse_objects(events))))


def bound(view: UserView, *bindings: tuple[str, str] | tuple[str, str, str]) -> UserView:
    """``view`` with a person's vocabulary bindings: ``(role, Type)`` or ``(concept, Type,
    field)`` (a user's own names read as the library's)."""
    view._state.bind(
        [Binding(b[0], b[1], b[2] if len(b) == 3 else None, author="person") for b in bindings]
    )
    return view


def append_as_before(db: Path, user: str, adds: list[dict[str, Any]]) -> None:
    """Append ``add`` facts of new types past today's ingest checks, which refuse a type SQL
    would confuse with another (test_input_attacks), as an older uac let them in."""
    events = []
    for ev in adds:
        ts = datetime.fromisoformat(ev["ts"])
        events.append(NewEvent(ts, "schema", user, {"type": ev["type"]}))
        for name, value in ev["fields"].items():
            schema = {"type": ev["type"], "field": name, "ftype": infer(value)}
            events.append(NewEvent(ts, "schema", user, schema))
        payload = {k: ev[k] for k in ("op", "type", "key", "fields")}
        events.append(NewEvent(ts, "fact", user, payload, f"before:{ev['type']}:{ev['key']}"))
    store = Store(str(db))
    store.append(events)
    store.close()


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


def tamper(db: Path, sql: str, params: list[Any] | None = None) -> None:
    """Change a store file as an outside tool would: through a DuckDB connection of its own."""
    con = duckdb.connect(str(db))
    con.execute(sql, params or [])
    con.close()


def check(db: Path, user: str | None = None, kept: dict[str, Head] | None = None) -> str:
    """``verify``'s problem for ``user`` (all users: None), or "" when the store verifies."""
    store = Store(db, read_only=True)
    try:
        report = verify(store, user, kept)
    finally:
        store.close()
    return "" if report.ok else report.problem


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


def uac_shell(shell: Any, db: Path, user: str, ingest: str) -> Iterator[Any]:
    """``shell`` with ``%load_ext uac``, ``UacMagics`` set to ``user`` of ``db`` and the file
    ``ingest`` ingested; unloaded after (for a fixture to ``yield from``)."""
    shell.reset(new_session=False)
    shell.config.pop("UacMagics", None)
    for line in ("%load_ext uac", f"%config UacMagics.db = {str(db)!r}",
                 f"%config UacMagics.user = {user!r}", f"%uac ingest {ingest}"):  # fmt: skip
        shell.run_cell(line).raise_error()
    yield shell
    shell.run_cell("%unload_ext uac").raise_error()


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
