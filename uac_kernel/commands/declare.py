"""A command's one declaration: its name, help and arguments, the faces it is typed on, its report
and its marimo helper; each face's argument parser is built from it."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from uac_kernel.core.faces import CLI, FACES, MAGIC, Face

__all__ = [
    "CLI",
    "FACES",
    "MAGIC",
    "VALUE",
    "Arg",
    "Command",
    "Face",
    "Marimo",
    "add_arguments",
    "arg",
]

VALUE = "value"
"""The ``report`` of a command whose engine call returns a value each face hands back as it is
(``eval``'s value, ``code``'s text): no renderer draws it; its declaration says why."""


@dataclass(frozen=True)
class Arg:
    """One argument as ``argparse.add_argument`` takes it, on the faces that offer it.

    ``per_face`` changes a keyword on one face only, where the faces differ in kind: a notebook
    line takes the rest of the line as one expression (``nargs="+"``), a terminal one quoted
    word; a terminal prints 50 events, a notebook a page of its widget."""

    names: tuple[str, ...]
    options: Mapping[str, Any]
    faces: frozenset[Face] = FACES
    group: str | None = None  # arguments of one group exclude each other
    per_face: Mapping[Face, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def dest(self) -> str:
        long = next((n for n in self.names if n.startswith("--")), self.names[0])
        return str(self.options.get("dest", long.lstrip("-").replace("-", "_")))

    def on(self, face: Face) -> dict[str, Any]:
        """The keywords of ``add_argument`` on ``face``."""
        return {**self.options, **self.per_face.get(face, {})}


def arg(
    *names: str,
    faces: Iterable[Face] = FACES,
    group: str | None = None,
    cli: Mapping[str, Any] | None = None,
    magic: Mapping[str, Any] | None = None,
    **options: Any,
) -> Arg:
    """An argument (``options``: ``add_argument``'s keywords; ``cli``/``magic``: those that
    differ on one face)."""
    per_face: dict[Face, Mapping[str, Any]] = {}
    if cli:
        per_face[CLI] = cli
    if magic:
        per_face[MAGIC] = magic
    return Arg(names, options, frozenset(faces), group, per_face)


@dataclass(frozen=True)
class Marimo:
    """A notebook command's marimo helper (a function of ``notebook/marimo.py``, since marimo
    runs no magics): its keywords are the command's notebook arguments, but ``widget`` (those
    its widget supplies: a page, the next page), spelled as ``names`` says where its public
    signature spells one otherwise, plus ``own`` (keywords a ``%uac`` line has no word for: a
    cell's body, a page size, the widget's filters)."""

    helper: str
    widget: tuple[str, ...] = ()
    names: Mapping[str, str] = field(default_factory=dict)
    own: tuple[str, ...] = ()

    def keywords(self, command: Command) -> set[str]:
        """The keywords the helper takes after its first argument (the workbench)."""
        declared = [a.dest for a in command.arguments(MAGIC) if a.dest not in self.widget]
        return {self.names.get(d, d) for d in declared} | set(self.own)


@dataclass(frozen=True)
class Command:
    """A command: ``name`` (``"fleet run"`` under a group), its one-line ``help``, its
    arguments, the faces it is typed on, and ``cell`` when ``%%uac NAME`` takes a cell body
    (``cell_form``: that line as `%uac help` shows it, and what the cell holds; ``magic_help``:
    the notebook's help line where the terminal's names options a notebook has not).
    ``required`` names the argument groups of which one must be given. ``report`` names the
    module of ``uac_kernel.render`` that draws what its engine call returns, the same on every
    face (a string: `uac --help` imports no renderer), or is ``VALUE`` for a value handed back
    as it is. On a notebook, ``marimo`` is its helper for marimo, or a line saying why it has
    none."""

    name: str
    help: str
    args: tuple[Arg, ...] = ()
    faces: frozenset[Face] = FACES
    aliases: tuple[str, ...] = ()
    cell: bool = False
    required: frozenset[str] = frozenset()
    description: str | None = None  # a longer text for `--help` than the listing's line
    store: bool = True  # the terminal's --db/--user apply (a fleet command reads a directory)
    report: str | None = None  # e.g. "checkpoint": uac_kernel.render.checkpoint draws its report
    marimo: Marimo | str | None = None
    magic_help: str | None = None  # `%uac help`'s line, where ``help`` names terminal options
    cell_form: tuple[str, str] | None = None  # `%%uac NAME [OPTIONS]`, and what the cell holds

    def arguments(self, face: Face) -> list[Arg]:
        return [a for a in self.args if face in a.faces]

    def help_on(self, face: Face) -> str:
        """The one-line help ``face`` shows: a notebook's names only what ``%uac`` takes."""
        return self.magic_help if face == MAGIC and self.magic_help else self.help


def add_arguments(
    parser: argparse.ArgumentParser,
    command: Command,
    face: Face,
    adapt: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> None:
    """Add ``command``'s arguments on ``face`` to ``parser``, in declared order (each one's
    keywords passed through ``adapt`` first, if given)."""
    groups: dict[str, Any] = {}
    for a in command.arguments(face):
        target: Any = parser
        if a.group is not None:
            if a.group not in groups:
                groups[a.group] = parser.add_mutually_exclusive_group(
                    required=a.group in command.required
                )
            target = groups[a.group]
        options = a.on(face)
        target.add_argument(*a.names, **(adapt(options) if adapt else options))
