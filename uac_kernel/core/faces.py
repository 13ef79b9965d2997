"""The two faces a command is typed on, the terminal (`uac`) and the notebook (`%uac`): what a
declaration offers on each and how a renderer spells a hint for each."""

from __future__ import annotations

from typing import Literal

__all__ = ["CLI", "FACES", "MAGIC", "Face", "command"]

Face = Literal["cli", "magic"]
CLI: Face = "cli"  # the `uac` command
MAGIC: Face = "magic"  # `%uac` in IPython (its marimo helpers are functions, see notebook/marimo)
FACES: frozenset[Face] = frozenset((CLI, MAGIC))


def command(face: Face, line: str) -> str:
    """``line`` (``code --version 3``) as it is typed on ``face``: `uac ...` or `%uac ...`."""
    return f"{'uac' if face == CLI else '%uac'} {line}"
