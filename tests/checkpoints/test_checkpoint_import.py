"""Checkpoint code is a real Python module: it imports, and what it defines is the state.

Three readings of one log must agree: the fold (the truth), the module read back by its literals
(``parse_module``), and the module *imported* — in this process for generated schemas, and in a
clean interpreter (``python -I``) for the demo, hostile histories and the CLI's ``--out`` file.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from helpers.checkpoints import (
    described_state,
    import_here,
    import_in_clean_interpreter,
    record_text,
    rule_names,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import uac
from uac_kernel.checkpoints.codegen import parse_module
from uac_kernel.core.errors import RuleError
from uac_kernel.core.names import class_name, field_identifier, style_key
from uac_kernel.core.schema import check_field_name, check_type_name
from uac_kernel.demo.life import demo_events
from uac_kernel.workbench import Workbench

# A user id that closed the header docstring of earlier checkpoints and ran on import.
BREAKOUT = 'x"""; __import__("os").system("touch CANARY"); """'
HOSTILE = [
    BREAKOUT,
    "'''; import os; os.system('touch CANARY'); '''",
    "line\nbreak\r\n\ttab \u2028 \x00 \x1b[31m",
    "back\\slash \\n and {0.__class__} %s {}",
    "Zürich 東京 🚀",
    "# not a comment",
]
# Names a field may have that are also names of types, builtins or pydantic methods.
SHADOWING_FIELDS = ["date", "datetime", "list", "str", "int", "float", "bool", "type", "match"]
SHADOWING_FIELDS += ["case", "records", "history", "user_id", "seq", "clock", "rules", "record"]
# Type names that are also names the module binds, or the lists of another type.
# `Trip_history` beside `Trip` is refused at ingest (SQL would confuse them): `Stay_history` ends
# in `_history` alone.
TRICKY_TYPES = ["USER", "SEQ", "CLOCK", "RULES", "Trip", "Trip_records", "Stay_history", "Date"]
# Names in other styles: keywords, camelCase, spaces, hyphens, letters beyond ASCII, quotes.
STYLED_TYPES = ["medication", "flight_leg", "bank account", "straße", "class", "2fa", "ＴＲＩＰ"]
STYLED_FIELDS = ["from", "class", "with", "drugName", "dose mg", "Dosis-Größe", "1st", "ﬁle"]
STYLED_FIELDS += ['q"uo\'te \\ """', "x__y", "café", "None", "id"]


# The same account of each module named on the command line, in one clean interpreter.


def describe_module_here(mod: ModuleType) -> dict[str, Any]:
    types = {}
    for cls, recs in mod.records.items():
        assert getattr(mod, cls.__name__) is cls
        own = {n: f for n, f in cls.model_fields.items() if n not in uac.Record.model_fields}
        attrs = {f.alias or n: n for n, f in own.items()}  # by name as written
        types[cls.model_config.get("title") or cls.__name__] = {
            "fields": {f.alias or n: _annotation(f.annotation) for n, f in own.items()},
            "records": [record_text(r, attrs) for r in recs],
            "history": [record_text(r, attrs) for r in mod.history[cls]],
        }
    clock = mod.clock.isoformat() if mod.clock else None
    rules = sorted(r.name for r in mod.rules)
    return {
        "user": mod.user_id,
        "seq": mod.seq,
        "clock": clock,
        "types": types,
        "rules": rules,
        "constraints": getattr(mod, "constraints", {}),
    }


def _annotation(ann: Any) -> str:
    inner = ann.__args__[0]
    if getattr(inner, "__origin__", None) is list:
        return f"list[{inner.__args__[0].__name__}]"
    return str(inner.__name__)


# -- generated schemas and records ----------------------------------------------------------------

# Only names ingest accepts: the validators are the contract.
# Any name ingest accepts, in any style (names.py): those that are no identifier are written as
# one in the module and kept as written beside it.
type_names = st.one_of(
    st.sampled_from(TRICKY_TYPES + STYLED_TYPES),
    st.from_regex(r"[A-Z][A-Za-z0-9_]{0,10}", fullmatch=True),
    st.text(max_size=10),
).filter(lambda n: check_type_name(n) is None and not n.casefold().endswith("_history"))
field_names = st.one_of(
    st.sampled_from(SHADOWING_FIELDS + STYLED_FIELDS),
    st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True),
    st.text(max_size=10),
).filter(lambda n: check_field_name(n) is None)
texts = st.one_of(st.sampled_from(HOSTILE), st.text(st.characters(exclude_categories=("Cs",))))
FIELD_VALUES = {
    "str": texts,
    "int": st.integers(min_value=-(2**63), max_value=2**63 - 1),
    "float": st.floats(allow_nan=False, allow_infinity=False),
    "bool": st.booleans(),
    "date": st.dates().map(date.isoformat),
    "datetime": st.datetimes(min_value=datetime(1900, 1, 1)).map(lambda d: d.isoformat()),
    "list[str]": st.lists(texts, min_size=1, max_size=3),
    "list[int]": st.lists(st.integers(-(10**6), 10**6), min_size=1, max_size=3),
}


@st.composite
def histories(draw: st.DrawFn) -> tuple[str, list[dict[str, Any]]]:
    """A user id and a history of adds, updates and retracts over a generated schema."""
    user = draw(texts.filter(lambda t: t.strip() != ""))
    # no two names one type's twins in case or style (refused at ingest: names.field_clash)
    names = draw(st.lists(type_names, min_size=1, max_size=3, unique_by=(class_name, style_key)))
    schema = {}
    for n in names:
        fnames = draw(
            st.lists(field_names, min_size=1, max_size=4, unique_by=(field_identifier, style_key))
        )
        schema[n] = {f: draw(st.sampled_from(sorted(FIELD_VALUES))) for f in fnames}
    events: list[dict[str, Any]] = []
    live: dict[str, set[str]] = {n: set() for n in names}
    clock = datetime(2025, 1, 1)
    for i in range(draw(st.integers(1, 12))):
        clock += timedelta(hours=draw(st.integers(0, 48)))
        type_ = draw(st.sampled_from(names))
        fields = schema[type_]
        keys = sorted(live[type_])
        op = draw(st.sampled_from(["add", "update", "retract"] if keys else ["add"]))
        # keys are at most 200 characters (limits.KEY_CHARS)
        key = draw(st.sampled_from(keys)) if op != "add" else draw(texts)[:190] + f"#{i}"
        event: dict[str, Any] = {
            "kind": "fact",
            "ts": clock.isoformat(),
            "op": op,
            "type": type_,
            "key": key,
        }
        if op == "retract":
            live[type_].discard(key)
            event["reason"] = draw(texts)
        else:
            chosen = draw(st.lists(st.sampled_from(sorted(fields)), min_size=1, unique=True))
            event["fields"] = {f: draw(FIELD_VALUES[fields[f]]) for f in chosen}
            live[type_].add(key)
        events.append(event)
    return user, events


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories())
def test_import_equals_literal_read_equals_fold(
    tmp_path_factory: pytest.TempPathFactory, history: tuple[str, list[dict[str, Any]]]
) -> None:
    user, events = history
    tmp = tmp_path_factory.mktemp("gen")
    with Workbench(tmp / "u.duckdb", user=user) as wb:
        wb.ingest(events)
        code = wb.checkpoint().code
        truth = described_state(wb.state, rule_names(wb))
    assert described_state(parse_module(code), truth["rules"]) == truth
    assert describe_module_here(import_here(code, tmp)) == truth


# -- the demo, hostile histories, and the CLI, in a clean interpreter -----------------------------


def test_demo_checkpoint_imports_in_a_clean_interpreter(tmp_path: Path) -> None:
    with Workbench(tmp_path / "demo.duckdb", user="maya") as wb:
        wb.ingest(demo_events())
        (tmp_path / "maya_model.py").write_text(wb.checkpoint().code, encoding="utf-8")
        truth = described_state(wb.state, rule_names(wb))
    assert truth["types"]["SleepLog"]["fields"]["date"] == "date"  # the field that broke import
    assert len(truth["rules"]) > 10
    assert import_in_clean_interpreter(tmp_path / "maya_model.py", tmp_path) == truth


def test_hostile_strings_everywhere_stay_literals_on_import(tmp_path: Path) -> None:
    events = [
        {
            "kind": "fact",
            "ts": f"2025-01-0{i + 1}",
            "op": "add",
            "type": "Note",
            "key": text,
            "fields": {"text": text, "tags": [text, text[::-1]], "date": "2025-01-01"},
        }
        for i, text in enumerate(HOSTILE)
    ]
    events.append({**events[0], "op": "retract", "ts": "2025-02-01", "reason": BREAKOUT})
    del events[-1]["fields"]
    with Workbench(tmp_path / "h.duckdb", user=BREAKOUT) as wb:
        wb.ingest(events)
        path = tmp_path / "hostile_model.py"
        path.write_text(wb.checkpoint().code, encoding="utf-8")
        truth = described_state(wb.state, rule_names(wb))
    assert import_in_clean_interpreter(path, tmp_path) == truth
    assert not (tmp_path / "CANARY").exists()
    assert truth["user"] == BREAKOUT


def test_a_rule_written_in_a_notebook_is_in_the_imported_module(tmp_path: Path) -> None:
    source = (
        "@rule(watch=['Trip'], severity='info', category='travel')\n"
        "def long_trips(user):\n"
        '    """Trips over two weeks."""\n'
        "    for t in user.all('Trip'):\n"
        "        if t.start and t.end and t.end - t.start > timedelta(days=14):\n"
        "            yield Finding(f'{t.destination}: a long trip', [t])\n"
    )
    (tmp_path / "my_rules.py").write_text(
        "from datetime import timedelta\nfrom uac import Finding, rule\n\n" + source
    )
    sys.path.insert(0, str(tmp_path))
    try:
        from my_rules import long_trips  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(tmp_path))
    with Workbench(tmp_path / "r.duckdb", user="u") as wb:
        wb.ingest(
            [
                {
                    "kind": "fact",
                    "ts": "2025-01-01",
                    "op": "add",
                    "type": "Trip",
                    "key": "t1",
                    "fields": {"destination": "Lima", "start": "2025-02-01", "end": "2025-03-01"},
                }
            ]
        )
        wb.define_rule(long_trips, source)
        path = tmp_path / "with_rule.py"
        path.write_text(wb.checkpoint().code, encoding="utf-8")
        truth = described_state(wb.state, rule_names(wb))
    assert "long_trips" in truth["rules"]
    assert import_in_clean_interpreter(path, tmp_path) == truth


def test_rules_cannot_take_names_the_module_binds() -> None:
    for name in ["records", "date", "Trip", "user_id"]:
        with pytest.raises(RuleError, match="is taken"):
            uac.rule(name=name)(lambda user: [])


def test_records_read_none_for_fields_their_type_gained_later(tmp_path: Path) -> None:
    with Workbench(tmp_path / "g.duckdb", user="u") as wb:
        trip = {"kind": "fact", "op": "add", "type": "Trip"}
        wb.ingest([{**trip, "ts": "2025-01-01", "key": "a", "fields": {"country": "Peru"}}])
        wb.ingest([{**trip, "ts": "2025-01-02", "key": "b", "fields": {"end": "2025-03-01"}}])
        # `a` was made before Trip had `end`: it reads None, as every unset field does
        assert [t.end for t in sorted(wb.state.all("Trip"), key=lambda t: t.key)] == [
            None,
            date(2025, 3, 1),
        ]
        with pytest.raises(AttributeError):
            _ = wb.state.all("Trip")[0]._private  # names no field can have are still errors


def test_names_that_shadow_types_builtins_and_module_names(tmp_path: Path) -> None:
    fields = {f: "2025-01-01" if f in ("date", "datetime") else f for f in SHADOWING_FIELDS}
    fields["list"] = ["a", "b"]
    events = [
        {"kind": "fact", "ts": "2025-01-01", "op": "add", "type": t, "key": t, "fields": fields}
        for t in TRICKY_TYPES
    ]
    with Workbench(tmp_path / "n.duckdb", user="USER") as wb:
        wb.ingest(events)
        path = tmp_path / "shadowing.py"
        path.write_text(wb.checkpoint().code, encoding="utf-8")
        truth = described_state(wb.state, rule_names(wb))
    assert sorted(truth["types"]) == sorted(TRICKY_TYPES)
    assert import_in_clean_interpreter(path, tmp_path) == truth


def test_uac_code_out_writes_a_module_that_imports(tmp_path: Path) -> None:
    uac_cmd = str(Path(sys.executable).with_name("uac"))
    events = tmp_path / "events.jsonl"
    events.write_text(
        json.dumps(
            {
                "kind": "fact",
                "ts": "2025-03-02T10:15:00",
                "op": "add",
                "type": "SleepLog",
                "key": "s1",
                "fields": {"date": "2025-03-01", "hours": 7.5},
            }
        )
        + "\n"
    )

    def uac_run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [uac_cmd, *args, "--db", "m.duckdb", "--user", "maya"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=False,
        )

    assert uac_run("ingest", str(events)).returncode == 0
    assert uac_run("checkpoint").returncode == 0
    done = uac_run("code", "--out", "maya_model.py")
    assert done.returncode == 0, done.stderr
    assert "`import maya_model`" in done.stdout
    script = (
        "import maya_model as m; s = m.records[m.SleepLog][0]; "
        "print(m.user_id, s.date.isoformat(), s.hours, len(m.rules))"
    )
    imported = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, '.'); {script}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert imported.returncode == 0, imported.stderr
    user, day, hours, rules = imported.stdout.split()
    assert (user, day, hours) == ("maya", "2025-03-01", "7.5") and int(rules) > 10
    bad = uac_run("code", "--out", "maya-model.py")
    assert bad.returncode == 1 and "name the file like a Python module" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
