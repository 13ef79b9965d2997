"""Checkpoint code imported for real, here or in a clean interpreter, and described like a fold."""

from __future__ import annotations

import ast
import importlib.util
import itertools
import json
import subprocess
import sys
import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

from uac_kernel.language.spec import constraint_json
from uac_kernel.state.fold import State
from uac_kernel.workbench import Workbench


def described_state(state: State, rules: list[str]) -> dict[str, Any]:
    """A canonical, JSON-able account of a fold's state: types, fields, records, history."""
    types = {}
    for name, ts in state.types.items():
        fields = state.schema.types[name]
        ordered = [
            ts.current[k]
            for i, k in enumerate(ts.order)
            if k in ts.current and ts.position.get(k) == i
        ]
        types[name] = {
            "fields": dict(fields),
            "records": [record_text(r, {f: f for f in fields}) for r in ordered],
            "history": [record_text(r, {f: f for f in fields}) for r in ts.history],
        }
    when = state.now.isoformat() if state.now else None
    # constraints in force are data in the module (a compiled constraint's rule is not listed)
    given = {k: constraint_json(cv.constraint) for k, cv in state.constraints.items()}
    return {
        "user": state.user,
        "seq": state.seq,
        "clock": when,
        "types": types,
        "rules": rules,
        "constraints": given,
    }


def record_text(rec: Any, attrs: dict[str, str]) -> list[str]:
    """A record as text; ``attrs`` maps each field's name as written to the attribute that
    holds it (the name itself on the state's records)."""
    # repr tells 1 from 1.0 and True, a date from a datetime and from a string
    own = [f"{w}={getattr(rec, a)!r}" for w, a in attrs.items()]
    meta = [rec.key, rec.valid_from, rec.valid_to, tuple(rec.sources), rec.retracted]
    return [repr(v) for v in meta] + own


def rule_names(wb: Workbench) -> list[str]:
    return sorted(wb.runner.rules)


# The same account of each module named on the command line, in one clean interpreter.
DESCRIBE_MANY = r"""
import importlib.util, json, sys, warnings
warnings.simplefilter("ignore")  # fields named like deprecated pydantic methods warn
from uac import Record

def rec(r, attrs):
    meta = [r.key, r.valid_from, r.valid_to, tuple(r.sources), r.retracted]
    return [repr(v) for v in meta] + [f"{w}={getattr(r, a)!r}" for w, a in attrs.items()]

def annotation(f):
    a = f.annotation.__args__[0]
    return f"list[{a.__args__[0].__name__}]" if getattr(a, "__origin__", None) is list else a.__name__

out = []
for i, path in enumerate(sys.argv[1:]):
    spec = importlib.util.spec_from_file_location(f"checkpoint_{i}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    types = {}
    for cls, recs in mod.records.items():
        assert getattr(mod, cls.__name__) is cls, cls
        assert all(type(r) is cls for r in recs + mod.history[cls]), cls
        own = {n: f for n, f in cls.model_fields.items() if n not in Record.model_fields}
        # by name as written: a field's alias, a class's title
        attrs = {f.alias or n: n for n, f in own.items()}
        fields = {f.alias or n: annotation(f) for n, f in own.items()}
        types[cls.model_config.get("title") or cls.__name__] = {
            "fields": fields, "records": [rec(r, attrs) for r in recs],
            "history": [rec(r, attrs) for r in mod.history[cls]]}
    clock = mod.clock.isoformat() if mod.clock else None
    out.append({"user": mod.user_id, "seq": mod.seq, "clock": clock, "types": types,
                "rules": sorted(r.name for r in mod.rules),
                "constraints": getattr(mod, "constraints", {})})
print(json.dumps(out))
"""


def import_clean(paths: list[Path], cwd: Path) -> list[dict[str, Any]]:
    """Import every module in ``paths`` in one ``python -I`` and describe each."""
    done = subprocess.run(
        [sys.executable, "-I", "-c", DESCRIBE_MANY, *map(str, paths)],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found: list[dict[str, Any]] = json.loads(done.stdout)
    return found


def import_in_clean_interpreter(path: Path, cwd: Path) -> dict[str, Any]:
    """Import the module at ``path`` in ``python -I`` (no cwd, no PYTHONPATH) and describe it."""
    return import_clean([path], cwd)[0]


_names = itertools.count()


def import_here(code: str, tmp: Path) -> ModuleType:
    """Import checkpoint code in this process, as a module of a name of its own."""
    name = f"checkpoint_here_{next(_names)}"
    path = tmp / f"{name}.py"
    path.write_text(code, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spec.loader.exec_module(mod)
    return mod


def without_record(code: str, key: str) -> str:
    """``code`` (a checkpoint part) with the record of ``key`` deleted, however many lines it spans."""
    lines = code.splitlines(keepends=True)
    # a cell's `%%uac cell ...` line is not Python: blank it, keeping the line numbers
    python = "".join("\n" if ln.startswith("%") else ln for ln in lines)
    for node in ast.walk(ast.parse(python)):
        if isinstance(node, ast.Call) and any(
            kw.arg == "key" and isinstance(kw.value, ast.Constant) and kw.value.value == key
            for kw in node.keywords
        ):
            return "".join(lines[: node.lineno - 1] + lines[node.end_lineno :])
    raise AssertionError(f"no record {key!r} in the code")
