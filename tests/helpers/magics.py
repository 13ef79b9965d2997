"""Cells run in the notebook's shell with uac's magics: value, printed text, usage errors, widgets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from IPython.core.error import UsageError
from IPython.core.interactiveshell import ExecutionResult
from IPython.utils.capture import capture_output


def shell_with_store(shell: Any, db: Path, user: str, ingest: str) -> Iterator[Any]:
    """``shell`` with ``%load_ext uac``, ``UacMagics`` set to ``user`` of ``db`` and the file
    ``ingest`` ingested; unloaded after (for a fixture to ``yield from``)."""
    shell.reset(new_session=False)
    shell.config.pop("UacMagics", None)
    for line in ("%load_ext uac", f"%config UacMagics.db = {str(db)!r}",
                 f"%config UacMagics.user = {user!r}", f"%uac ingest {ingest}"):  # fmt: skip
        shell.run_cell(line).raise_error()
    yield shell
    shell.run_cell("%unload_ext uac").raise_error()


def run(ip: Any, source: str) -> Any:
    """Run a cell; fail on any error; return its result value."""
    result: ExecutionResult = ip.run_cell(source)
    result.raise_error()
    return result.result


def run_out(ip: Any, source: str) -> str:
    """Run a cell as ``run`` does; return what it printed."""
    with capture_output() as cap:
        run(ip, source)
    return cap.stdout


def usage_error(ip: Any, source: str) -> str:
    """Run a cell that must fail with a one-line UsageError shown without a traceback."""
    with capture_output() as cap:
        result = ip.run_cell(source)
    assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
    message = str(result.error_in_exec)
    assert "\n" not in message
    assert "Traceback" not in cap.stderr and "UsageError: " + message in cap.stderr
    return message


def edit_cell(ip: Any, command: str) -> str:
    """Run ``%uac edit ...`` and return the cell text it put in the set_next_input payload."""
    ip.payload_manager.clear_payload()
    run_out(ip, command)
    (payload,) = [p for p in ip.payload_manager.read_payload() if p["source"] == "set_next_input"]
    assert payload["replace"] is True
    ip.payload_manager.clear_payload()
    text: str = payload["text"]
    return text


def change(text: str, old: str, new: str) -> str:
    """``text`` (a cell ``edit_cell`` gave) with ``old``, which must be in it, made ``new``."""
    assert old in text, old
    return text.replace(old, new)


def widget_outputs(ip: Any, source: str) -> list[tuple[Any, str]]:
    """The widgets a cell displayed, with the text/plain shown where widgets are not."""
    from ipywidgets.widgets.widget import _instances

    with capture_output() as cap:
        run(ip, source)
    found = []
    for output in cap.outputs:
        view = output.data.get("application/vnd.jupyter.widget-view+json")
        if view is not None:
            found.append((_instances[view["model_id"]], output.data["text/plain"]))
    return found


def logged(ip: Any) -> int:
    """How many events the log of the shell's workbench (``wb``) holds."""
    return len(ip.user_ns["wb"].log())
