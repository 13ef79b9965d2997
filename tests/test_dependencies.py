"""scripts/dependencies.py reads licences and authors the way packages actually write them."""

from __future__ import annotations

import email
import importlib.util
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("dependencies", ROOT / "scripts" / "dependencies.py")
assert _spec is not None and _spec.loader is not None
deps = importlib.util.module_from_spec(_spec)
sys.modules["dependencies"] = deps
_spec.loader.exec_module(deps)


def meta(text: str) -> Any:
    return email.message_from_string(text.strip() + "\n")


def test_licence_prefers_the_expression_then_a_short_field_then_classifiers() -> None:
    assert deps.licence_of(meta("License-Expression: MIT\nLicense: BSD")) == "MIT"
    assert deps.licence_of(meta("License: Apache 2.0")) == "Apache 2.0"
    full_text = "License: Copyright (c) 2015, Someone\n All rights reserved.\n"
    bsd = "Classifier: License :: OSI Approved :: BSD License\n"
    assert deps.licence_of(meta(full_text + bsd)) == "BSD License"
    assert deps.licence_of(meta("License: UNKNOWN\n" + bsd)) == "BSD License"
    assert deps.licence_of(meta("License: BSD 3-Clause License\n  \n  Copyright ...")) == (
        "BSD 3-Clause License"
    )
    assert deps.licence_of(meta("Name: anonymous")) == ""


def test_people_are_names_not_addresses_unless_there_is_no_name() -> None:
    assert deps.people_of(meta("Author: Kenneth Reitz\nAuthor-email: me@example.org")) == (
        "Kenneth Reitz"
    )
    two = 'Author-email: "Samuel Colvin" <s@example.org>, Eric <e@example.org>'
    assert deps.people_of(meta(two)) == "Samuel Colvin, Eric"
    assert deps.people_of(meta("Author-email: devs@example.org")) == "devs@example.org"
    assert deps.people_of(meta("Maintainer: DuckDB Foundation")) == "DuckDB Foundation"
    many = "Author: A, B, C, D, E"
    assert deps.people_of(meta(many)) == "A, B, C and 2 more"
    assert deps.people_of(meta("Author: UNKNOWN")) == ""


class _Dist(deps.md.Distribution):
    def __init__(self, headers: str, files: dict[str, str]) -> None:
        self._headers = headers
        self._files = files

    def read_text(self, filename: str) -> str | None:
        if filename == "METADATA":
            return self._headers
        return self._files.get(filename)

    def locate_file(self, path: Any) -> Path:
        return Path(str(path))


def test_a_copyright_line_in_a_shipped_licence_file_names_the_holder() -> None:
    dist = _Dist(
        "Name: vl-convert-python\nLicense-File: LICENSE\n",
        {"licenses/LICENSE": "Copyright 2023 Jon Mease\n\nRedistribution and use ..."},
    )
    assert deps.copyright_of(dist) == "Jon Mease (copyright holder in its licence file)"
    apache = _Dist(
        "Name: x\nLicense-File: LICENSE\n",
        {"LICENSE": "   Copyright [yyyy] [name of copyright owner]\n"},
    )
    assert deps.copyright_of(apache) == ""


def test_every_direct_dependency_has_a_reason() -> None:
    core, extras = deps.project_requirements()
    names = {deps.canonical(r.name) for r in core}
    names |= {deps.canonical(r.name) for reqs in extras.values() for r in reqs}
    assert names - {"uac-kernel"} <= deps.WHY.keys()
