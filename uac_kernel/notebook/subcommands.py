"""`%uac` subcommands as marked methods: the marker, their help text from docstrings and argument
parsers, and the one-line form of an error."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from uac_kernel.core.display import printable

__all__ = ["subcommand"]


def _one_line(text: str) -> str:
    """An error message as a notebook shows it: one line, control characters escaped (it may
    quote input, stored text or model code, and a notebook renders ANSI escapes)."""
    return printable(re.sub(r"\s*\n\s*", " ", str(text)).strip())


def _doc(fn: Callable[..., Any]) -> str:
    """A subcommand's help: usage line first (magic_arguments wrote it into the docstring)."""
    return (fn.__doc__ or "").removeprefix("::").strip("\n")


def _usage(fn: Callable[..., Any], width: int = 86) -> list[str]:
    """A subcommand's whole usage from its parser, wrapped between its arguments at ``width``:
    ``%uac edit [--version VERSION] ... [part]``, continued under the first argument."""
    parser = fn.parser  # type: ignore[attr-defined]  # set by magic_arguments
    prog = f"%{parser.prog}"
    flat = " ".join(parser.format_usage().split()).removeprefix("::").strip()
    args, depth, start = [], 0, 0
    rest = flat.removeprefix(prog) + " "
    for i, ch in enumerate(rest):
        depth += (ch in "[{(<") - (ch in "]})>")
        if ch == " " and depth == 0:
            if rest[start:i].strip():
                args.append(rest[start:i].strip())
            start = i + 1
    lines = [prog]
    for arg in args:
        if len(lines[-1]) + 1 + len(arg) > width and lines[-1].strip() != prog:
            lines.append(" " * len(prog))
        lines[-1] += " " + arg
    return lines


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


_SUBCOMMAND = "_uac_subcommand"


def subcommand(name: str, *, cell: bool = False) -> Callable[[Any], Any]:
    """Mark a method as ``%uac NAME`` (``cell=True``: it also takes a ``%%uac NAME`` body)."""

    def mark(fn: Any) -> Any:
        setattr(fn, _SUBCOMMAND, (name, cell))
        return fn

    return mark
