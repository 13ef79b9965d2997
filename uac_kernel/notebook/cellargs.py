"""The argument lines of ``%uac edit`` and ``%%uac cell``, which carry arbitrary strings, and
the one-line note ``%uac edit`` prints about the cell it made.

A record key is data — it may hold quotes, backslashes, a newline, ``--where`` — and a
``--where`` expression is Python with its own quotes. IPython splits a magic's line with
``shlex`` in non-POSIX mode, where quotes stay in the tokens and a backslash escapes nothing, so
such values cannot all be written there. These two lines are split here instead, with Python's
own quoting:

- tokens are separated by whitespace outside string literals;
- a token that is one string literal (``'it\\'s'``, ``"r.country == 'Japan'"``), or
  ``--option=`` followed by one, stands for the string it spells (read by
  ``ast.literal_eval``: a literal is read, never run); any other token is taken as written.

``quote`` writes a value as ``repr`` does: one line, printable characters only, so a value can
neither end the magic's line nor turn into another option, and reads back exactly. argparse
reads a value starting with ``-`` as an option and drops one that is exactly ``--``; ``parse``
hands such quoted values to it as placeholders and puts them back after.
"""

from __future__ import annotations

import ast
import re
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError

from uac_kernel.core.display import plural

if TYPE_CHECKING:
    from uac_kernel.checkpoints.edits import Cell

__all__ = ["header", "note", "option", "parse", "quote", "selection", "split"]

_STRING = r"""'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*\""""
_TOKEN = re.compile(rf"""\s*((?:{_STRING}|[^\s'"])+)""")
_WHOLE = re.compile(_STRING)
_OPTION = re.compile(r"(--[A-Za-z][\w-]*=)(.*)", re.DOTALL)
_NEGATIVE = re.compile(r"-\d+|-\d*\.\d+")  # argparse's own pattern of a negative number


def _read(literal: str) -> str:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an unknown escape like '\d' reads as written
            value = ast.literal_eval(literal)
    except (SyntaxError, ValueError) as exc:
        raise UsageError(f"{literal[:60]} is not a valid string literal: {exc}") from None
    if not isinstance(value, str):  # the pattern only matches str literals; kept as a guard
        raise UsageError(f"{literal[:60]} is not a string")
    return value


def parse(fn: Callable[..., Any], line: str) -> Any:
    """``line`` parsed by the parser of ``fn`` (``subcommands.magic_parser``), split by ``split``."""
    held: dict[str, str] = {}

    def hold(value: str) -> str:
        # argparse reads a negative number as a value (none of these parsers has an option
        # that looks like one): it reaches the argument's type as written
        if not value.startswith("-") or _NEGATIVE.fullmatch(value):
            return value
        mark = f"\x00uac-value-{len(held)}\x00"
        held[mark] = value
        return mark

    args = fn.parser.parse_args(split(line, hold))  # type: ignore[attr-defined]
    for name, value in vars(args).items():
        if isinstance(value, str):
            setattr(args, name, held.get(value, value))
        elif isinstance(value, list):
            setattr(args, name, [held.get(v, v) if isinstance(v, str) else v for v in value])
    return args


def split(line: str, hold: Callable[[str], str] = str) -> list[str]:
    """The arguments of ``line``, with string literals read back into the strings they spell
    (each passed through ``hold``)."""
    argv: list[str] = []
    text = line.strip()
    pos = 0
    while pos < len(text):
        found = _TOKEN.match(text, pos)
        if found is None:
            rest = text[pos:].lstrip()
            raise UsageError(
                f"unclosed quote in {rest[:60]!r}: quote a value as a Python string literal, "
                """e.g. --where "r.country == 'Japan'" """.rstrip()
            )
        token = found.group(1)
        opt = _OPTION.fullmatch(token)
        if opt is not None and _WHOLE.fullmatch(opt.group(2)):
            token = opt.group(1) + hold(_read(opt.group(2)))
        elif _WHOLE.fullmatch(token):
            token = hold(_read(token))
        argv.append(token)
        pos = found.end()
    return argv


def quote(value: str) -> str:
    """``value`` as one Python string literal that ``split`` reads back exactly."""
    return repr(value)


def option(name: str, values: Sequence[str | int]) -> str:
    """`` --name 'v'`` for each value, which ``parse`` reads back; ints are written bare."""
    return "".join(f" --{name} {v if isinstance(v, int) else quote(v)}" for v in values)


def selection(keys: Sequence[str] | None, where: str | None, last: int | None) -> str:
    """The options that repeat a selection: `` --key 'a' --where "r.x == 1" --last 5``."""
    return (
        option("key", keys or ())
        + option("where", [] if where is None else [where])
        + option("last", [] if last is None else [last])
    )


def header(cell: Cell) -> str:
    """The ``%%uac cell`` line that heads an edit cell: version, part and selection."""
    sel = cell.selection
    return f"%%uac cell --version {cell.version} --part {cell.part}" + selection(
        sel.keys, sel.where, sel.last
    )


def note(cell: Cell) -> str:
    """One line on what ``%uac edit`` put in its cell and how to go on."""
    what = f"{cell.part} of checkpoint {cell.version}"
    if cell.keys is not None:
        return (
            f"{what}: {len(cell.keys):,} of {plural(cell.total, 'record', fmt=',')} in this cell "
            f"({cell.selection.describe()}); edit and run the cell — records left out stay "
            "as they are"
        )
    if cell.large:
        return (
            f"{what}: all {cell.total:,} records in this cell ({len(cell.code):,} characters); "
            'narrow it with --key KEY, --where "r.FIELD == VALUE" or --last N'
        )
    if cell.total:
        return f"{what}: its {plural(cell.total, 'record', fmt=',')} in this cell; edit and run the cell"
    return f"{what} in this cell; edit and run the cell"
