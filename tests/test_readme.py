"""The README's examples run: its Python blocks, in order, against its own Event JSONL example."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = (Path(__file__).parent.parent / "README.md").read_text()


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_readme_python_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    # the README's JSONL example without its retraction, so Tokyo is still there to query
    events = [line for line in blocks("json")[0].splitlines() if '"retract"' not in line]
    (tmp_path / "events.jsonl").write_text("\n".join(events) + "\n")
    namespace: dict[str, object] = {}
    for code in blocks("python"):
        if code.lstrip().startswith("class Trip(Record)"):
            continue  # the sample of generated code is checked below
        exec(compile(code, "README.md", "exec"), namespace)
    wb = namespace["wb"]
    assert (
        wb.eval("len([t for t in user.all(Trip) if t.international and t.start.year == 2025])") == 1
    )  # type: ignore[attr-defined]
    generated = wb.checkpoint().code  # type: ignore[attr-defined]
    sample = next(b for b in blocks("python") if b.lstrip().startswith("class Trip(Record)"))
    for line in sample.strip().splitlines():
        assert line in generated.splitlines(), line
