"""Constraints written by hand: a YAML or JSON text (a file for ``uac constrain``, a
``%%uac constraint`` cell) holding one constraint object, a list of them, or a mapping of
key → constraint. Read as data only: JSON by the JSON parser, YAML by PyYAML's safe loader
with aliases refused (an alias can make a small text a huge value), never by running it.
A key given twice in one mapping, nesting deeper than ``MAX_DEPTH`` and a text over
``MAX_CHARS`` are refused; YAML booleans are YAML 1.2's (true/false), so `NO` stays a word."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from uac_kernel.core.errors import ConstraintError
from uac_kernel.core.limits import KEY_CHARS
from uac_kernel.language.spec import Constraint, parse_constraint

__all__ = [
    "MAX_CHARS",
    "MAX_DEPTH",
    "StrictLoader",
    "constraints_of_file",
    "read_constraint_file",
    "read_constraints",
]

# A constraint is a few hundred characters; a file of the most a user may have in force fits.
MAX_CHARS = 1 << 20
# A constraint nests a few levels (a mapping of them, a constraint, a Select, a where); far
# more is not a constraint, and deep data would exhaust the parsers' recursion.
MAX_DEPTH = 32


class StrictLoader(yaml.SafeLoader):
    """The safe loader, refusing aliases and a key given twice in one mapping, reading only
    true/false as booleans (constraint files, what-if cells)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise ConstraintError(
                f"line {mark.line + 1}: a YAML alias (*name); write the value out in full"
            )
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        # PyYAML keeps the last of two equal keys: a constraint or a field would be dropped
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                first = seen.setdefault(key, key_node.start_mark.line + 1)
            except TypeError:  # an unhashable key: the safe constructor refuses it
                continue
            if first != key_node.start_mark.line + 1:
                raise ConstraintError(_twice(key, key_node.start_mark.line + 1, first))
        return super().construct_mapping(node, deep)


# YAML 1.2 core schema booleans only: YAML 1.1 also reads yes/no/on/off/y/n as booleans, so
# `country: NO` would silently become false (https://yaml.org/spec/1.2.2/#1032-tag-resolution).
StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in found if tag != "tag:yaml.org,2002:bool"]
    for first, found in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def _twice(key: Any, line: int | None, first: int | None = None) -> str:
    where = f"line {line}: " if line is not None else ""
    also = f" (first on line {first})" if first is not None else ""
    return f"{where}key {_cut(str(key))!r} is given twice{also}; keep one of them"


def _cut(text: str, most: int = 60) -> str:
    return text if len(text) <= most else text[:most] + "..."


def _no_twice(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a key given twice (``json`` keeps the last one)."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ConstraintError(_twice(key, None))
        found[key] = value
    return found


def _load(text: str, origin: str) -> Any:
    try:
        data = _parse(text, origin)
    except RecursionError:  # the parsers recurse per level of nesting
        raise ConstraintError(_too_deep(origin)) from None
    if _depth(data) > MAX_DEPTH:
        raise ConstraintError(_too_deep(origin))
    return data


def _too_deep(origin: str) -> str:
    return (
        f"{origin}: lists and mappings nest more than {MAX_DEPTH} levels deep; a constraint "
        "nests a few, see docs/constraints.md"
    )


def _depth(data: Any) -> int:
    """How deep lists and mappings nest in ``data`` (without recursion: it may be deep)."""
    most, todo = 0, [(data, 1)]
    while todo:
        value, depth = todo.pop()
        if isinstance(value, dict | list):
            most = max(most, depth)
            if depth <= MAX_DEPTH:
                todo.extend(
                    (v, depth + 1) for v in (value.values() if isinstance(value, dict) else value)
                )
    return most


def _parse(text: str, origin: str) -> Any:
    if text.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(text, object_pairs_hook=_no_twice)
        except ConstraintError as exc:
            raise ConstraintError(f"{origin}: {exc}") from None
        except json.JSONDecodeError as exc:
            raise ConstraintError(
                f"{origin}: line {exc.lineno}: invalid JSON ({exc.msg}); fix it or write YAML"
            ) from None
    try:
        return yaml.load(text, Loader=StrictLoader)  # the safe loader, aliases refused
    except ConstraintError as exc:
        raise ConstraintError(f"{origin}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or "not YAML"
        if isinstance(exc, yaml.reader.ReaderError):  # a character YAML refuses (NUL, …)
            where = f"line {text.count(chr(10), 0, exc.position) + 1}: "
            problem = f"{exc.reason}: #x{ord(str(exc.character)[:1] or ' '):04x}"
        raise ConstraintError(
            f"{origin}: {where}invalid YAML ({problem}); fix it (docs/constraints.md shows each "
            "kind) or write JSON"
        ) from None


def read_constraints(
    text: str, origin: str, key: str | None = None
) -> dict[str, Constraint] | list[Constraint]:
    """The constraints ``text`` holds, for ``Workbench.constrain``: by key (a mapping, or one
    constraint with ``key``), else as a list.

    Errors are ``ConstraintError``s naming ``origin``, the item (its number or key) and the
    field: ``rules.yaml: item 2: due.fields: ...``.
    """
    if len(text) > MAX_CHARS:
        raise ConstraintError(
            f"{origin}: {len(text):,} characters; a constraint file holds at most {MAX_CHARS:,}"
        )
    if key is not None:
        _check_key(key, f"{origin}: --key")
    data = _load(text, origin)
    if isinstance(data, dict) and data and "kind" not in data:
        if key is not None and len(data) > 1:
            raise ConstraintError(_one_key(origin, len(data)))
        found: dict[str, Constraint] = {}
        for i, (k, v) in enumerate(data.items(), 1):
            if key is None:
                _check_key(str(k), f"{origin}: item {i}: key")
            found[str(k) if key is None else key] = parse_constraint(
                v, f"{origin}: key {_cut(str(k))!r}"
            )
        return found
    if isinstance(data, list):
        if not data:
            raise ConstraintError(f"{origin}: an empty list holds no constraint")
        if key is not None and len(data) > 1:
            raise ConstraintError(_one_key(origin, len(data)))
        listed = [parse_constraint(v, f"{origin}: item {i}") for i, v in enumerate(data, 1)]
    else:
        listed = [parse_constraint(data, origin)]
    return {key: listed[0]} if key is not None else listed


def _check_key(key: str, where: str) -> None:
    """A key as a constraint event's (``limits.KEY_CHARS``), refused here where the file and
    the item can be named."""
    if not key:
        raise ConstraintError(f"{where}: the key is empty; give the constraint a key")
    if len(key) > KEY_CHARS:
        raise ConstraintError(
            f"{where}: the key {_cut(key)!r} has {len(key):,} characters; at most {KEY_CHARS}"
        )


def read_constraint_file(path: str) -> str:
    """The text of constraint file ``path``, reading at most ``MAX_CHARS`` + 1 bytes: a pipe or
    device that never ends, or a huge file, is refused at the bound, not read whole. An
    ``OSError`` or ``UnicodeDecodeError`` is the caller's to report; anything but a regular
    file (a FIFO would block the open until a writer came) is refused before it is opened."""
    if Path(path).exists() and not Path(path).is_file():
        raise ConstraintError(
            f"{path}: not a regular file (a directory, pipe or device); give a YAML or JSON file"
        )
    with Path(path).open("rb") as f:
        data = f.read(MAX_CHARS + 1)
    if len(data) > MAX_CHARS:
        raise ConstraintError(
            f"{path}: more than {MAX_CHARS:,} bytes; a constraint file holds at most "
            f"{MAX_CHARS:,}: split it"
        )
    return data.decode("utf-8")


def constraints_of_file(
    path: str, key: str | None = None
) -> dict[str, Constraint] | list[Constraint]:
    """The constraints of file ``path`` (``read_constraints``, named by the path), as
    `uac constrain FILE` and `%uac constrain FILE` both read them; a file that cannot be read is
    a ``ConstraintError`` that says why."""
    try:
        text = read_constraint_file(path)
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        raise ConstraintError(f"cannot read {path}: {why}; check the path") from None
    return read_constraints(text, path, key)


def _one_key(origin: str, n: int) -> str:
    return (
        f"{origin}: --key names one constraint but the text holds {n}; leave --key out or "
        "write a mapping of key: constraint"
    )
