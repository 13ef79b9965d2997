"""Check the engine's house rules from its imports: wings import only downward, no circles.

Every import in ``uac_kernel`` counts — at module level, inside functions and under
``TYPE_CHECKING`` — because a late import still ties two modules together. A module may import
from its own wing or from a wing of a lower rank; two wings of one rank are rooms side by side
and do not import each other. A module is also at most ``MAX_LINES`` lines of code (docstrings,
comments and blank lines aside). ``docs/architecture.md`` explains the wings; this table is its
executable half. Run it with no arguments to check the checkout (exit 1 and one line a breach).
"""

from __future__ import annotations

import argparse
import ast
import io
import sys
import tokenize
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["MAX_LINES", "TOP", "WINGS", "Module", "breaches", "code_lines", "read_package"]

# Wing -> rank. The top of the package (``__init__`` and ``workbench``) is TOP.
WINGS: dict[str, int] = {
    "core": 0,
    "sandbox": 1,
    "vocab": 2,
    "language": 3,
    "log": 4,
    "state": 5,
    "rules": 6,
    "constraints": 7,
    "sql": 8,
    "checkpoints": 9,
    "ingest": 10,
    "model": 11,
    "engine": 12,
    "fleet": 14,
    "render": 15,
    "bench": 16,
    "demo": 17,
    "commands": 18,
    "cli": 19,
    "notebook": 19,
}
TOP = 13
TOP_MODULES = {"__init__", "workbench"}
MAX_LINES = 800


@dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. uac_kernel.log.store
    path: Path
    imports: frozenset[str]  # dotted names of the package's modules it imports
    lines: int  # lines of code

    @property
    def wing(self) -> str:
        parts = self.name.split(".")
        return (
            parts[1]
            if len(parts) > 2 or (len(parts) == 2 and self.path.name == "__init__.py")
            else ""
        )


def code_lines(source: str) -> int:
    """Lines holding code: not blank, not only a comment, not part of a docstring."""
    tree = ast.parse(source)
    doc: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            value = first.value if isinstance(first, ast.Expr) else None
            if (
                first is not None
                and isinstance(value, ast.Constant)
                and isinstance(value.value, str)
            ):
                doc.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    code: set[int] = set()
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in skip and tok.type != tokenize.ENDMARKER:
            code.update(range(tok.start[0], tok.end[0] + 1))
    return len(code - doc)


def read_package(root: Path, package: str = "uac_kernel") -> dict[str, Module]:
    """Every module of ``package`` under ``root`` with the package modules it imports."""
    paths: dict[str, Path] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        paths[".".join(parts)] = path

    def known(name: str) -> str:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name

    modules: dict[str, Module] = {}
    for name, path in paths.items():
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source, str(path))
        found: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(known(a.name) for a in node.names if _inside(a.name, package))
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, name, path.name == "__init__.py")
                if not _inside(base, package):
                    continue
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    found.add(full if full in paths else known(base))
        found.discard(name)
        found.discard("")
        modules[name] = Module(name, path, frozenset(found), code_lines(source))
    return modules


def _inside(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _rank(module: Module, wings: Mapping[str, int], top: int) -> int | None:
    return top if module.wing == "" else wings.get(module.wing)


def _circles(modules: Mapping[str, Module]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in modules:
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(modules[start].imports)))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in modules:
                    continue
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(modules[nxt].imports))))
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        m = stack.pop()
                        on.discard(m)
                        group.append(m)
                        if m == node:
                            break
                    if len(group) > 1:
                        out.append(sorted(group))
    return out


def breaches(
    modules: Mapping[str, Module],
    wings: Mapping[str, int] = WINGS,
    top: int = TOP,
    top_modules: set[str] = TOP_MODULES,
    max_lines: int = MAX_LINES,
) -> list[str]:
    """One line a breach of the house rules; none when the package keeps them."""
    found: list[str] = []
    for m in modules.values():
        rank = _rank(m, wings, top)
        if m.wing == "" and m.path.stem not in top_modules:
            found.append(f"{m.path}: a module at the top of the package; move it into a wing")
        if rank is None:
            found.append(f"{m.path}: wing {m.wing!r} has no rank; add it to WINGS")
            continue
        for target in sorted(m.imports):
            other = modules.get(target)
            if other is None or other.wing == m.wing:
                continue
            theirs = _rank(other, wings, top)
            if theirs is not None and theirs >= rank:
                way = "sideways" if theirs == rank else "upward"
                found.append(
                    f"{m.path}: imports {target} {way} ({m.wing or 'top'} {rank} -> "
                    f"{other.wing or 'top'} {theirs}); move the shared part down a wing"
                )
        if m.lines > max_lines:
            found.append(f"{m.path}: {m.lines} lines of code, over {max_lines}; split it")
    for group in _circles(modules):
        found.append("import circle: " + " -> ".join(group) + "; cut one import")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, default=Path(__file__).parent.parent)
    args = parser.parse_args(argv)
    problems = breaches(read_package(args.root))
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
