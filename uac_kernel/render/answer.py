"""A model's answer by code as text and HTML: the value, the code that computed it, why, and
what it rests on; what `uac ask` prints and a notebook shows for `%uac ask`'s ``Answer``."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

from uac_kernel.core.display import clip_json, plural, printable, show

if TYPE_CHECKING:
    from uac_kernel.model.ask import Answer

__all__ = ["answer_html", "answer_lines"]


def answer_lines(answer: Answer) -> list[str]:
    """The value as JSON (its first 100 kB), the code, why, the records and what was said."""
    value, _ = clip_json(answer.value)
    # The model wrote the code and the explanation: escaped like everything from outside.
    lines = [
        value,
        f"  code: {printable(answer.expression)}",
        f"  why:  {printable(answer.explanation)}",
    ]
    cert = answer.certificate
    keys = ", ".join(f"{r['type']} {r['key']}" for r in cert.records[:8])
    more = f" and {cert.records_total - 8} more" if cert.records_total > 8 else ""
    lines.append(f"  records ({cert.records_total}): {printable(keys)}{more}")
    for u in cert.utterances[:5]:
        said = f"[{u['source']}] {u['speaker']}: {u['text']}"
        lines.append(f"  said {show(u['ts'])[:10]} {printable(said)}")
    return lines


def answer_html(answer: Answer) -> str:
    """The answer as HTML, every piece escaped; what it rests on folded under a summary."""
    esc = html.escape
    value, _ = clip_json(answer.value)
    cert = answer.certificate
    records = "".join(f"<li>{esc(r['type'])} {esc(str(r['key']))}</li>" for r in cert.records[:8])
    if cert.records_total > 8:
        records += f"<li>… and {cert.records_total - 8} more</li>"
    said = "".join(
        f"<li>{esc(show(u['ts'])[:10])} [{esc(str(u['source']))}] "
        f"{esc(str(u['speaker']))}: {esc(str(u['text']))}</li>"
        for u in cert.utterances[:5]
    )
    said_too = f" and {plural(len(cert.utterances), 'utterance')}" if cert.utterances else ""
    return (
        f"<div><p><strong>{esc(value)}</strong></p>"
        f"<pre><code>{esc(answer.expression)}</code></pre><p>{esc(answer.explanation)}</p>"
        f"<details><summary>rests on {plural(cert.records_total, 'record')}{said_too}</summary>"
        f"<ul>{records}</ul><ul>{said}</ul></details></div>"
    )
