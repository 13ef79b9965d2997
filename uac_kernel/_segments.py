"""A checkpoint's code is its segments in the order of their ids (``codegen.render_segments``
names them so). Apart from the code generator, so that reading a stored version of the code
(``uac code``) loads neither it nor the state and the rules it renders."""

from __future__ import annotations

__all__ = ["join_segments"]


def join_segments(segments: dict[str, str]) -> str:
    return "".join(segments[k] for k in sorted(segments))
