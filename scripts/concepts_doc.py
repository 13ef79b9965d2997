"""docs/rules.md "Concepts": the catalogue (uac_kernel/data/concepts/*.toml) and the shipped rules
that read each concept, as tables.

    .venv/bin/python scripts/concepts_doc.py --write   # after a change to the catalogue or a rule
    .venv/bin/python scripts/concepts_doc.py --check   # tests/vocab/test_vocab_catalogue.py runs this
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from uac_kernel.rules.describe import END, START, catalogue_markdown
from uac_kernel.rules.library import LIBRARY

DOC = Path(__file__).resolve().parent.parent / "docs" / "rules.md"


def rendered(text: str) -> str:
    head, start, rest = text.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise SystemExit(f"error: {DOC} has no {START} … {END} section; add the two markers")
    return head + catalogue_markdown(LIBRARY) + tail


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the section")
    ap.add_argument("--check", action="store_true", help="fail when the section is out of date")
    args = ap.parse_args()
    text = DOC.read_text(encoding="utf-8")
    new = rendered(text)
    if args.write:
        DOC.write_text(new, encoding="utf-8")
        return 0
    if new != text:
        print(
            "error: docs/rules.md's concept tables are out of date: run "
            ".venv/bin/python scripts/concepts_doc.py --write and commit it",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
