"""A checkpoint's code is its segments in the order of their ids (``codegen.render_segments``
names them so). Apart from the code generator, so that reading a stored version of the code
(``uac code``), and checking or erasing the rules a stored rules segment defines (``verify``,
``forget``), load neither it nor the state and the rules it renders."""

from __future__ import annotations

import ast
from collections.abc import Callable

__all__ = ["RULES", "erase_rules", "join_segments", "rule_names"]

RULES = "3"
"""The id of the rules segment (``codegen.rules_code``): the rules in force, a user's own with
their source, then ``rules = [...]``."""
ERASED_RULE = "\n# a rule was taken out of force here and its source erased by a forget\n"


def join_segments(segments: dict[str, str]) -> str:
    return "".join(segments[k] for k in sorted(segments))


def _own_rules(text: str) -> tuple[list[tuple[str, int, int]], ast.Assign | None]:
    """The user's rules a rules segment defines, as (name, first line, last line) counted from
    1, and its ``rules = [...]`` statement; none when the text does not parse."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return [], None
    found: list[tuple[str, int, int]] = []
    listing = None
    lines = text.splitlines()
    for node in tree.body:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
        end = _block_end(lines, node.end_lineno or node.lineno)
        if isinstance(node, ast.FunctionDef):
            found.append((node.name, first, end))
        elif (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
        ):
            if node.targets[0].id == "rules":
                listing = node
            else:
                found.append((node.targets[0].id, first, end))
    return found, listing


def _block_end(lines: list[str], end: int) -> int:
    """The last line of the block whose last statement ends at line ``end``: comments indented
    under it go with it (as ``inspect.getsource``, which rendered the rule, keeps them), up to
    the next line at the left margin; blank lines between are not part of it."""
    last = end
    for at in range(end, len(lines)):
        line = lines[at]
        if line.strip() and not line[:1].isspace():
            break
        if line.strip():
            last = at + 1
    return last


def rule_names(text: str) -> list[str]:
    """The names of the user's own rules (with their source) a rules segment defines."""
    return [name for name, _first, _end in _own_rules(text)[0]]


def erase_rules(text: str, goes: Callable[[str, str], bool]) -> tuple[str, list[str]]:
    """The rules segment ``text`` without each own rule for which ``goes(name, source)`` (left
    out of its ``rules`` list too, a comment in its place that names nothing), and the names
    taken out."""
    found, listing = _own_rules(text)
    lines = text.splitlines(keepends=True)
    gone = [(n, a, b) for n, a, b in found if goes(n, "".join(lines[a - 1 : b]))]
    if not gone or listing is None:
        return text, []
    names = {n for n, _a, _b in gone}
    kept = [
        e.id
        for e in getattr(listing.value, "elts", ())
        if isinstance(e, ast.Name) and e.id not in names
    ]
    listed = "rules = [\n" + "".join(f"    {n},\n" for n in kept) + "]\n"
    cuts = sorted([(a, b, ERASED_RULE) for _n, a, b in gone])
    cuts.append((listing.lineno, listing.end_lineno or listing.lineno, listed))
    out: list[str] = []
    at = 1
    for a, b, put in cuts:
        out += lines[at - 1 : a - 1]
        out.append(put)
        at = b + 1
    out += lines[at - 1 :]
    return "".join(out), sorted(names)
