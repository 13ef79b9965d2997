"""``%uac ask How many trips?`` unquoted: an IPython input transformer for the question line.

IPython reads a line that ends in ``?`` as a help request (``Object `trips` not found.``)
before any magic sees it. ``ask_line`` runs among IPython's cleanup transforms, which
``TransformerManager.transform_cell`` applies before its line and token transforms — where
help syntax (``HelpEnd``) and ``%magic`` lines are read — and writes such a line as the call
IPython itself makes for a magic line, the question's text inside one string literal::

    %uac ask How many trips?        ->  get_ipython().run_line_magic('uac', 'ask How many trips?')
    n = %uac ask How many trips?    ->  n = get_ipython().run_line_magic('uac', 'ask How many ...')

The question is data. ``repr`` writes it as a literal that reads back exactly whatever it holds
(quotes, backslashes, ``$name``, ``{expr}``), and ``%uac`` takes its line verbatim
(``no_var_expand``), so nothing in it is evaluated or expanded. A question in quotes does not
end in ``?`` and is left to IPython, as is the body of a cell magic (``%%uac ask``) and a line
inside a string or brackets opened above it.
"""

from __future__ import annotations

import io
import re
import tokenize

__all__ = ["ask_line"]

_ASK = re.compile(
    r"(?P<indent>[ \t]*)(?P<target>[A-Za-z_]\w*[ \t]*=[ \t]*)?"
    r"%uac[ \t]+ask[ \t]+(?P<question>\S.*\?)[ \t]*"
)
# a magic or shell line (``x = %magic``, ``!ls``): not Python to tokenize
_ESCAPED = re.compile(r"[ \t]*(?:[A-Za-z_]\w*[ \t]*=[ \t]*)?[%!]")


def _inside_code(before: list[str]) -> bool:
    """Whether a line after ``before`` continues them: inside a string, brackets or a line
    ended by ``\\``. Magic and shell lines are read as blank lines."""
    source = "".join("\n" if _ESCAPED.match(ln) else ln for ln in before)
    try:
        for _ in tokenize.generate_tokens(io.StringIO(source).readline):
            pass
    except (tokenize.TokenError, SyntaxError):
        return True
    return False


def ask_line(lines: list[str]) -> list[str]:
    """``lines`` of a cell with each unquoted ``%uac ask ...?`` line as a magic call."""
    if not lines or lines[0].lstrip().startswith("%%"):
        return lines  # a cell magic's body is its own
    out = list(lines)
    for i, line in enumerate(lines):
        text = line.rstrip("\r\n")
        found = _ASK.fullmatch(text)
        if found is None or _inside_code(out[:i]):
            continue
        arg = "ask " + found.group("question")
        call = f"get_ipython().run_line_magic('uac', {arg!r})"
        out[i] = f"{found.group('indent')}{found.group('target') or ''}{call}{line[len(text) :]}"
    return out
