"""The marimo helpers come from the commands' declarations: each notebook command names its
helper in ``notebook/marimo.py`` (or says why it has none), and a helper's keywords are the
command's notebook arguments, but those its widget supplies."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from uac_kernel.commands.catalogue import declared
from uac_kernel.commands.declare import MAGIC, Marimo

um = pytest.importorskip("uac_kernel.notebook.marimo", reason="pip install marimo")


def _helpers() -> dict[str, Any]:
    """The module's helpers tied to a declaration, by the command's name."""
    return {
        fn.uac_command.name: fn
        for fn in vars(um).values()
        if callable(fn) and getattr(fn, "uac_command", None) is not None
    }


def test_every_notebook_command_has_a_helper_or_says_why_not() -> None:
    for command in declared(MAGIC):
        assert command.marimo, f"{command.name}: name its marimo helper, or say why it has none"
        if isinstance(command.marimo, str):
            assert "\n" not in command.marimo, command.name  # one line
    named = {c.name for c in declared(MAGIC) if isinstance(c.marimo, Marimo)}
    assert set(_helpers()) == named


@pytest.mark.parametrize(
    "name", sorted(c.name for c in declared(MAGIC) if isinstance(c.marimo, Marimo))
)
def test_a_helper_takes_the_declared_notebook_arguments(name: str) -> None:
    fn = _helpers()[name]
    command = fn.uac_command
    assert isinstance(command.marimo, Marimo) and fn.__name__ == command.marimo.helper
    assert fn.__name__ in um.__all__
    params = list(inspect.signature(fn).parameters.values())
    if params[0].name == "wb":  # the workbench every helper but the fleet's reads
        params = params[1:]
    assert {p.name for p in params} == command.marimo.keywords(command)
    assert f"``%uac {name}``: {command.help}." in (fn.__doc__ or "")


def test_an_undeclared_argument_fails_the_check() -> None:
    """The check sees a keyword the declaration lacks, and a declared one the helper lacks."""
    from dataclasses import replace

    from uac_kernel.commands.catalogue import COMMANDS
    from uac_kernel.commands.declare import arg

    constraints = COMMANDS["constraints"]
    assert isinstance(constraints.marimo, Marimo)
    more = replace(constraints, args=(*constraints.args, arg("--since", help="a date")))
    assert constraints.marimo.keywords(more) == {"history", "since"}


def test_log_browser_refuses_an_unknown_kind_as_the_other_faces_do(db: Any) -> None:
    """`uac log --kind nosuch` and `%uac log --kind nosuch` name the kinds there are; the
    helper taking the same declared --kind must not show an empty browser instead."""
    from helpers.events import fact

    from uac_kernel.core.errors import UacError
    from uac_kernel.workbench import Workbench

    with Workbench(db, user="u") as wb:
        wb.ingest(
            [{**fact("2025-01-01T09:00:00", "add", "Trip", "t1", city="Oslo"), "source": "s"}]
        )
        assert um.log_browser(wb, kind="fact").widget.total == 1
        with pytest.raises(UacError, match="no event kind 'nosuch'"):
            um.log_browser(wb, kind="nosuch")
