"""A checkpoint taken, written by an extraction, or compared with another, as lines of text: what
`uac checkpoint`/`extract`/`diff` print and `%uac checkpoint`/`extract`/`diff` show, each
face's hint (the terminal's `uac code`, the notebook's `%uac edit PART`) spelled for it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from uac_kernel.core.display import printable, to_json
from uac_kernel.core.faces import CLI, MAGIC, Face, command

if TYPE_CHECKING:
    from uac_kernel.checkpoints.checkpoint import Checkpoint, CheckpointDiff

__all__ = ["checkpoint_lines", "diff_lines", "parts_lines", "written_lines"]


def parts_lines(version: int, parts: Sequence[str], *, pinned: bool = False) -> list[str]:
    """A ready ``%uac edit PART`` for each part of checkpoint ``version`` (with ``--version``
    when ``pinned``): the notebook's way into a checkpoint's code."""
    suffix = f" --version {version}" if pinned else ""
    return [
        "edit a part in a cell of its own (the command turns its cell into the code):",
        *(f"  {command(MAGIC, f'edit {part}{suffix}')}" for part in parts),
    ]


def checkpoint_lines(cp: Checkpoint, face: Face, parts: Sequence[str] = ()) -> list[str]:
    """The checkpoint's summary, then how to read it: the terminal's ``uac code --version N``,
    the notebook's ``parts`` each with its ``%uac edit PART``."""
    if face == CLI:
        return [f"{cp.summary()}; show it with `{command(CLI, f'code --version {cp.version}')}`"]
    return [cp.summary(), *parts_lines(cp.version, parts)]


def written_lines(version: int, face: Face, parts: Sequence[str] = ()) -> list[str]:
    """The checkpoint an extraction wrote, and how to read it (as ``checkpoint_lines``)."""
    if face == CLI:
        return [f"checkpoint {version} written; see it with `{command(CLI, 'code')}`"]
    return [f"checkpoint {version} written", *parts_lines(version, parts)]


def diff_lines(d: CheckpointDiff) -> list[str]:
    """The summary, then one line per new type, new fields, record added (with its fields),
    changed (each field before and after) and retracted; stored text escaped."""
    lines = [d.summary()]
    lines += [f"  + type {t}" for t in d.new_types]
    lines += [f"  + fields of {t}: {', '.join(fields)}" for t, fields in d.new_fields.items()]
    lines += [f"  + {c.type} {c.key}: {to_json(c.after)}" for c in d.added]
    for c in d.changed:
        before, after = c.before or {}, c.after or {}
        changes = {f: [before.get(f), after.get(f)] for f in c.changed_fields}
        lines.append(f"  ~ {c.type} {c.key}: {to_json(changes)}")
    lines += [f"  - {c.type} {c.key}" for c in d.retracted]
    return [printable(line) for line in lines]
