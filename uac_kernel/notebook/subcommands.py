"""`%uac` subcommands as marked methods: the marker, which builds each one's parser from its
declaration, their help text, and the one-line form of an error."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any, NoReturn

from IPython.core.error import UsageError
from IPython.core.magic_arguments import MagicArgumentParser

from uac_kernel.commands.catalogue import COMMANDS
from uac_kernel.commands.declare import CLI, MAGIC, Command, add_arguments
from uac_kernel.core.display import printable

__all__ = ["magic_parser", "subcommand"]


def _one_line(text: str) -> str:
    """An error message as a notebook shows it: one line, control characters escaped (it may
    quote input, stored text or model code, and a notebook renders ANSI escapes)."""
    return printable(re.sub(r"\s*\n\s*", " ", str(text)).strip())


def _doc(fn: Callable[..., Any]) -> str:
    """A subcommand's help: usage line first (``subcommand`` wrote it into the docstring)."""
    return (fn.__doc__ or "").removeprefix("::").strip("\n")


def _usage(fn: Callable[..., Any], width: int = 86) -> list[str]:
    """A subcommand's whole usage from its parser, wrapped between its arguments at ``width``:
    ``%uac edit [--version VERSION] ... [part]``, continued under the first argument."""
    parser = fn.parser  # type: ignore[attr-defined]  # set by subcommand
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


def _command(fn: Callable[..., Any]) -> Command:
    """The declaration ``subcommand`` made ``fn`` from (its help line, its arguments)."""
    command: Command = getattr(fn, _SUBCOMMAND)
    return command


def _unquote(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


_SUBCOMMAND = "_uac_subcommand"


def _unquoted(options: dict[str, Any]) -> dict[str, Any]:
    """A notebook line keeps its quotes (IPython splits it like a non-POSIX shell): a typed
    argument reads its value without them, as the terminal's does."""
    check = options.get("type")
    if check is None:
        return options

    def typed(text: str) -> Any:
        return check(_unquote(text))

    typed.__name__ = getattr(check, "__name__", "value")
    return {**options, "type": typed}


class _Parser(MagicArgumentParser):
    """A ``%uac NAME`` parser whose refusal of an option only the terminal has says so, and
    names the cell form where the command has one."""

    command: Command

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments:"):
            message += _terminal_only(self.command, message.split(":", 1)[1].split())
        raise UsageError(message)


def _terminal_only(command: Command, words: list[str]) -> str:
    """The hint for ``words`` a notebook line refused: those that are `uac NAME`'s options, and
    the cell form of ``command``."""
    offered = {n for a in command.arguments(MAGIC) for n in a.names}
    terminal = {n for a in command.arguments(CLI) for n in a.names} - offered
    given = [w.split("=", 1)[0] for w in words if w.startswith("-")]
    only = [w for w in dict.fromkeys(given) if w in terminal]
    hint = ""
    if only:
        options = sorted(n for n in offered if n.startswith("--"))
        takes = f"takes {', '.join(options)}" if options else "takes no options"
        hint = f"; {', '.join(only)} is for the terminal's `uac {command.name}`: %uac {command.name} {takes}"
    if command.cell_form is not None:
        form, holds = command.cell_form
        hint += f"; in a notebook, a cell headed `{form}` holds {holds}"
    return hint


def magic_parser(command: Command, doc: str | None = None) -> MagicArgumentParser:
    """The ``%uac NAME`` parser of ``command``'s declaration; ``doc``: what the notebook shows
    for it, when that says more than the declared help."""
    text = (doc or "").strip() or command.description or command.help
    parser = _Parser(prog=f"uac {command.name}", description=text)
    parser.command = command
    add_arguments(parser, command, MAGIC, _unquoted)
    return parser


def subcommand(name: str) -> Callable[[Any], Any]:
    """Make a method ``%uac NAME`` (and ``%%uac NAME`` where its declaration takes a cell),
    its arguments and help from the declaration ``commands.catalogue.COMMANDS[name]``."""
    command = COMMANDS[name]
    if MAGIC not in command.faces:
        raise ValueError(f"command {name!r} is not declared for the notebook")

    def mark(fn: Any) -> Any:
        parser = magic_parser(command, inspect.getdoc(fn))
        fn.parser = parser  # as magic_arguments sets it: parse_argstring(fn, line) reads it
        fn.__doc__ = parser.format_help()
        setattr(fn, _SUBCOMMAND, command)
        return fn

    return mark
