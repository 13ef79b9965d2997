"""Attacks on the checkpoint module (codegen, checkpoint, edits): what must hold, and what broke.

The contract under attack (docs/checkpoints.md, DESIGN.md "Data is never code"):

1. Whatever ingest accepts, the checkpoint imports in a clean interpreter (``python -I``) and
   defines exactly the state: records, history, values and their Python types, user_id, seq,
   clock, and the rules in force.
2. A string from the log stands in the code only as an escaped literal; importing never runs
   data; reading a module or cell back (``parse_module``, ``Workbench.apply_edit``) reads
   literals and never executes anything.
3. An error is one line that says what to fix.

Tests under "held" pin what survived the attacks. Tests under "fixed" each reproduce a break
the attacks found, with a comment saying what it was; they pin the fix.
"""

from __future__ import annotations

import importlib.util
import inspect
import itertools
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from helpers.checkpoints import described_state as truth
from helpers.checkpoints import import_clean, import_here

import uac
from uac_kernel.checkpoints.codegen import parse_module, render_module
from uac_kernel.core.errors import CodeError, EventError, RuleError, UacError
from uac_kernel.rules.engine import Rule
from uac_kernel.workbench import Workbench

# Fields named like deprecated pydantic methods (copy, json, ...) warn when their class is made.
pytestmark = pytest.mark.filterwarnings("ignore:Field name .* shadows an attribute")

# -- helpers -------------------------------------------------------------------------------------


def fact(
    ts: str, op: str, type_: str, key: str, fields: dict[str, Any] | None = None, **kw: Any
) -> dict[str, Any]:
    ev: dict[str, Any] = {"kind": "fact", "ts": ts, "op": op, "type": type_, "key": key, **kw}
    if fields is not None:
        ev["fields"] = fields
    return ev


_names = itertools.count()


def load_rules(tmp: Path, source: str) -> ModuleType:
    """Rules written in a file, imported as a notebook would have them (source kept)."""
    name = f"attack_rules_{next(_names)}"
    path = tmp / f"{name}.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and "\r" not in text, text
    return text


@pytest.fixture
def canary(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "CANARY"
    yield path
    assert not path.exists(), "data ran as code: the canary file was written"


def run_code(tmp: Path) -> str:
    return f"__import__('os').system('touch {tmp / 'CANARY'}')"


# == held ========================================================================================


def hostile_strings(tmp: Path) -> list[str]:
    cmd = run_code(tmp)
    return [
        f'x"""; {cmd}; """',
        f"x'''; {cmd}; '''",
        "ends in a backslash\\",
        "\\",
        "'",
        '"',
        "cr\rcrlf\r\nff\x0cvt\x0bnul\x00esc\x1b[31m del\x7f",
        "separators\x1c\x1d\x1e\x85\u2028\u2029",
        "bidi \u202eevil\u202c \u2066iso\u2069 bom\ufeff zwsp\u200b nbsp\u00a0 ideo\u3000",
        f"# a comment\n{cmd}\n#",
        f"\\N{{BULLET}} {{0.__class__}} %s \\x41 \\u0041 \\'; {cmd}",
        "Zürich 東京 🚀 a\u0301 \U0010fffd",
        " ",
        "\t",
    ]


def test_hostile_strings_as_user_ids_keys_values_and_reasons_stay_literals(
    tmp_path: Path, canary: Path
) -> None:
    # Every hostile string as a user id (one user each), a key, a str and a list[str] value and a
    # retract reason; one 100k-character value. Import == parse == fold, and nothing ran.
    strings = hostile_strings(tmp_path)
    db = tmp_path / "h.duckdb"
    paths, truths, codes = [], [], []
    long = "y" * 100_000 + strings[0]
    for i, user in enumerate([*strings, long, ""]):
        events = [
            fact(
                f"2025-01-0{1 + j % 9}",
                "add",
                "Note",
                f"{j}:{s}"[:200],
                {"text": s, "tags": [s, user]},
            )
            for j, s in enumerate(strings)
        ]
        events.append(fact("2025-01-01", "add", "Note", "long", {"text": long}))
        events.append(fact("2025-02-01", "retract", "Note", "0:" + strings[0], reason=user))
        events.append(fact("2025-02-02", "add", "Note", "0:" + strings[0], {"text": user}))
        with Workbench(db, user=user, rules=[]) as wb:
            wb.ingest(events)
            code = wb.checkpoint().code
            truths.append(truth(wb.state, []))
        assert truth(parse_module(code), []) == truths[-1]
        path = tmp_path / f"hostile_{i}.py"
        path.write_text(code, encoding="utf-8")
        paths.append(path)
        codes.append(code)
    assert import_clean(paths, tmp_path) == truths
    for code in codes:
        # no line break of any kind, no bidi control, no NUL outside an escape
        assert len(code.splitlines()) == code.count("\n")
        assert not any(c in code for c in "\x00\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2069")


def test_values_at_the_limits_import_with_their_types(tmp_path: Path) -> None:
    big = 1.7976931348623157e308
    adds = [
        ("a", {"f": -0.0, "i": 2**63 - 1, "dt": "2025-01-01T10:00:00.000001", "d": "0001-01-01"}),
        ("b", {"f": 1e-320, "i": -(2**63), "dt": "0001-01-01T00:00:00", "d": "9999-12-31"}),
        ("c", {"f": 5e-324, "i": 0, "dt": "9999-12-31T23:59:59.999999"}),
        ("d", {"f": big, "dt": "2025-01-01", "b": False, "li": [1], "ls": ["x"]}),
        (
            "e",
            {"f": -big, "dt": "2025-01-01 10:00", "b": True, "li": [], "ls": ["a", "2025-01-01"]},
        ),
        ("g", {"f": 2.0**63, "lf": [1, 2.5], "ldt": ["2025-01-01T00:00:00.5", "2025-01-02"]}),
        ("h", {}),  # every field unset
    ]
    events = [fact("2025-01-01T10:00:00+05:30", "add", "V", k, f) for k, f in adds]
    events += [
        fact("2025-06-01T00:00:00Z", "update", "V", "a", {"f": None, "ls": ["n"]}),  # a null
        fact("2025-06-02", "retract", "V", "b", reason="gone"),
        fact("2025-06-02", "add", "V", "b", {"i": 0}),  # re-added under the same key
        fact("2025-06-03", "retract", "V", "b"),
        fact("2025-06-04", "add", "V", "b", {"f": 0.0}),
        fact("9999-12-30T23:59:59.999999", "update", "V", "c", {"li": []}),
        # the same field names as V, each with the other list-ness
        fact("2025-01-01", "add", "W", "w", {"f": [0.5], "li": 1, "ls": "x", "d": ["2025-01-01"]}),
    ]
    with Workbench(tmp_path / "v.duckdb", user="u", rules=[]) as wb:
        wb.ingest(events)
        code = wb.checkpoint().code
        want = truth(wb.state, [])
    for rejected in ([[1]], [1, "x"], {"a": 1}):  # nested lists, mixed lists, objects
        with Workbench(tmp_path / "v.duckdb", user="u", rules=[]) as wb:
            with pytest.raises(EventError) as err:
                wb.ingest([fact("2025-07-01", "update", "V", "a", {"li": rejected})])
            one_line(err.value)
    assert want["types"]["V"]["fields"]["lf"] == "list[float]"
    assert truth(parse_module(code), []) == want
    (tmp_path / "limits.py").write_text(code, encoding="utf-8")
    assert import_clean([tmp_path / "limits.py"], tmp_path) == [want]


# Names differing only in case (`TRIP` beside `Trip`) are refused at ingest (test_input_attacks).
TYPE_NAMES = ["A" + "b" * 63, "Z9_", "Trip", "Match", "Case", "Type", "Exception"]
TYPE_NAMES += ["BaseModel", "Any", "Optional", "NotImplemented", "Ellipsis", "List", "Dict"]
TYPE_NAMES += ["Date", "Datetime", "Records", "History", "Rules", "USER_ID", "Seq", "X_records"]
FIELD_NAMES = ["a" * 64, "match", "case", "type", "print", "open", "exec", "eval", "self", "cls"]
FIELD_NAMES += ["copy", "json", "dict", "schema", "validate", "construct", "model", "parse_obj"]
FIELD_NAMES += ["schema_json", "from_orm", "key_", "fields_", "date", "datetime", "str", "list"]
FIELD_NAMES += ["none", "true", "records", "history", "rules", "record", "user_id", "x0_"]


def test_names_at_the_validators_limits(tmp_path: Path) -> None:
    # Every accepted odd name, each type with one record that sets every field and one that
    # sets none (an unset field must read None, not whatever the name means on the class).
    fields: dict[str, Any] = {f: f"v-{f}" for f in FIELD_NAMES}
    fields["date"], fields["datetime"], fields["list"] = "2025-01-01", "2025-01-01T01:02", [1]
    events = []
    for t in TYPE_NAMES:
        events += [
            fact("2025-01-01", "add", t, "full", fields),
            fact("2025-01-01", "add", t, "e", {}),
        ]
    with Workbench(tmp_path / "n.duckdb", user="USER", rules=[]) as wb:
        wb.ingest(events)
        code = wb.checkpoint().code
        want = truth(wb.state, [])
    assert truth(parse_module(code), []) == want
    (tmp_path / "names.py").write_text(code, encoding="utf-8")
    assert import_clean([tmp_path / "names.py"], tmp_path) == [want]


# Only names that cannot be stored or would break uac are refused (docs/events.md "Names"); names in any
# other style (`trip`, `1T`, `Tr ip`, `class`, `x-y`) are let in (tests/core/test_names.py).
@pytest.mark.parametrize(
    ("type_", "field"),
    [
        ("A" * 65, "x"),
        ("Record", "x"),
        ("Finding", "x"),
        ("record", "x"),
        ("", "x"),
        ("T\n", "x"),
        ("T", "Key"),
        ("T", "key"),
        ("T", "valid_from"),
        ("T", "sources"),
        ("T", "retracted"),
        ("T", "model_x"),
        ("T", "_x"),
        ("T", "a" * 65),
        ("T", "x\n"),
        ("T", "__import__"),
        ("T", " "),
    ],
)
def test_names_ingest_refuses(type_: str, field: str) -> None:
    with Workbench(":memory:", user="u", rules=[]) as wb:
        with pytest.raises(EventError):
            wb.ingest([fact("2025-01-01", "add", type_, "k", {field: 1})])
        assert not wb.state.types


def test_lone_surrogates_and_huge_ints_never_get_in() -> None:
    with Workbench(":memory:", user="u", rules=[]) as wb:
        for ev in [
            fact("2025-01-01", "add", "T", "\ud800", {"s": "x"}),
            fact("2025-01-01", "add", "T", "k", {"s": "a\udfffb"}),
            fact("2025-01-01", "add", "T", "k", {"ls": ["\udc80"]}),
            fact("2025-01-01", "add", "T", "k", {"n": 2**64}),
            fact("2025-01-01", "add", "T", "k", {"n": -(2**63) - 1}),
            fact("2025-01-01", "add", "T", "k", {"n": 10**5000}),
        ]:
            with pytest.raises(EventError) as err:
                wb.ingest([ev])
            one_line(err.value)
        assert wb.state.seq == 0


def test_incremental_checkpoints_equal_a_full_render_across_block_boundaries(
    tmp_path: Path,
) -> None:
    # 2,000 records (40 blocks of 50): updates and retractions scattered over the blocks,
    # re-adds of retracted keys, new fields and a new type, across a reopened session and a
    # batch left unchekpointed when the session closed. Every stored version equals a full
    # render of the fold at its seq, and the last one imports.
    import random

    rng = random.Random(7)
    db = tmp_path / "big.duckdb"
    wb = Workbench(db, user="u", rules=[])
    wb.ingest([fact("2025-01-01", "add", "Item", f"k{i}", {"n": i}) for i in range(2000)])
    wb.checkpoint()
    for rnd in range(6):
        ts = f"2025-02-{rnd + 1:02d}"
        ts_ = wb.state.types["Item"]
        touched = rng.sample(sorted(ts_.current), 40)
        events = [
            fact(ts, "update", "Item", k, {"n": -rnd}) if j % 2 else fact(ts, "retract", "Item", k)
            for j, k in enumerate(touched)
        ]
        gone = sorted({r.key for r in ts_.history if r.retracted} - set(ts_.current) - set(touched))
        events += [fact(ts, "add", "Item", k, {"again": rnd}) for k in gone[:5]]
        events.append(fact(ts, "add", f"Late{rnd % 2}", f"x{rnd}", {f"f{rnd}": True}))
        wb.ingest(events)
        if rnd == 2:  # close with a batch not yet checkpointed, then reopen
            wb.close()
            wb = Workbench(db, user="u", rules=[])
        else:
            cp = wb.checkpoint()
            assert cp.code == render_module(wb.state, [])
    code = wb.checkpoint().code
    for c in wb.checkpoints.all():
        assert wb.code(c.version) == render_module(wb.state_at_seq(c.seq), []), c.version
    want = truth(wb.state, [])
    wb.close()
    (tmp_path / "big_model.py").write_text(code, encoding="utf-8")
    assert import_clean([tmp_path / "big_model.py"], tmp_path) == [want]


BASE_TRIP = {"destination": "Lima", "nights": 3, "start": "2025-02-01"}


@pytest.fixture
def trip_wb(tmp_path: Path) -> Iterator[tuple[Workbench, int, str]]:
    with Workbench(tmp_path / "e.duckdb", user="u", rules=[]) as wb:
        wb.ingest([fact("2025-01-01", "add", "Trip", "a", BASE_TRIP)])
        cp = wb.checkpoint()
        yield wb, cp.version, wb.cell("Trip", cp.version)


SMUGGLE: dict[str, Callable[[str, str], str]] = {
    "class decorator": lambda c, x: f"@{x}\n{c}",
    "metaclass": lambda c, x: c.replace("(Record):", f"(Record, metaclass={x}):"),
    "class keyword": lambda c, x: c.replace("(Record):", f"(Record, extra={x}):"),
    "class base": lambda c, x: c.replace("(Record):", f"({x} or Record):"),
    "class body statement": lambda c, x: c.replace("(Record):\n", f"(Record):\n    {x}\n"),
    "annotation": lambda c, x: c.replace("(Record):\n", f"(Record):\n    evil: {x}\n"),
    "walrus": lambda c, x: c.replace("destination='Lima'", f"destination=(y := {x})"),
    "f-string": lambda c, x: c.replace("destination='Lima'", f"destination=f'{{{x}}}'"),
    "f-string key": lambda c, x: c.replace("key='a'", f"key=f'{{{x}}}'"),
    "lambda default": lambda c, x: c.replace("nights=3", f"nights=(lambda q={x}: 3)"),
    "date argument": lambda c, x: c.replace("date(2025, 2, 1)", f"date(2025, 2, {x})"),
    "method on a literal": lambda c, x: c.replace("'Lima'", f"'Lima'.join([{x}])"),
    "double star": lambda c, x: c.replace("key='a'", f"key='a', **{{'n': {x}}}"),
    "starred entry": lambda c, x: c.replace(
        "records[Trip] = [\n", f"records[Trip] = [\n    *{x},\n"
    ),
    "list concatenation": lambda c, x: c.replace("records[Trip] = [", f"records[Trip] = [{x}] + ["),
    "model_construct": lambda c, x: c.replace("    Trip(", f"    Trip.model_construct(z={x}, "),
    "subscript value": lambda c, x: c.replace("nights=3", f"nights=[3][{x}]"),
    "other type's list": lambda c, x: c + f"records[Other] = [Other(key={x})]\n",
    "statement after the list": lambda c, x: c.rstrip("\n") + f"; {x}\n",
    "import after the list": lambda c, x: c + f"import os\nos.system({x!r})\n",
    "exec before the class": lambda c, x: f"exec({x!r})\n{c}",
    "rule with an evil default": lambda c, x: (
        f"@rule(watch=['Trip'])\ndef r(user, q={x}):\n    return []\n\n{c}"
    ),
    "decorated function": lambda c, x: f"@{x}\ndef f():\n    pass\n\n{c}",
    "annotated list": lambda c, x: c.replace("records[Trip] = [", f"records[Trip]: {x} = ["),
    "header smuggled": lambda c, x: f"user_id = {x}\nseq = {x}\nclock = {x}\n{c}",
}


@pytest.mark.parametrize("how", sorted(SMUGGLE))
def test_edit_cells_and_modules_that_smuggle_code_never_run_it(
    trip_wb: tuple[Workbench, int, str], tmp_path: Path, canary: Path, how: str
) -> None:
    wb, version, cell = trip_wb
    text = SMUGGLE[how](cell, run_code(tmp_path))
    assert text != cell
    before = truth(wb.state, [])
    try:
        plan, _ = wb.apply_edit(text, version=version, part="Trip")
    except CodeError as exc:
        one_line(exc)
    else:
        # accepted only where the code around the records is ignored: the records are as they were
        assert not (plan.added or plan.updated or plan.retracted), plan.summary()
        assert truth(wb.state, [])["types"] == before["types"]
    try:
        parse_module(text)
    except CodeError as exc:
        one_line(exc)


@pytest.mark.parametrize(
    ("name", "fn_name"),
    [("records", "ok"), ("history", "ok"), ("Trip", "ok"), ("date", "ok"), ("ok", "records")],
)
def test_rule_names_cannot_take_the_module_names(name: str, fn_name: str) -> None:
    def fn(user: Any) -> list[Any]:
        return []

    fn.__name__ = fn_name
    with pytest.raises(RuleError) as err:
        uac.rule(name=name)(fn)
    one_line(err.value)


def _magics(db: Path, user: str) -> Any:
    from uac_kernel.notebook.magics import UacMagics

    m = UacMagics(None)
    m.db, m.user = str(db), user
    return m


RULE_CELL = (
    '@rule(watch=["T"], severity="info")\n'
    "def positive_t(user):\n"
    '    """T records with n over zero."""\n'
    '    for t in user.all("T"):\n'
    "        if t.n and t.n > 0:\n"
    '            yield Finding("positive", [t])\n'
)


def _rule_from_a_cell(tmp_path: Path, cell: str) -> tuple[str, list[str], list[dict[str, Any]]]:
    db = tmp_path / "m.duckdb"
    with Workbench(db, user="u") as wb:
        wb.ingest([fact("2025-01-01", "add", "T", "a", {"n": 1})])
        wb.checkpoint()
    m = _magics(db, "u")
    m.uac("open")
    try:
        m.uac("cell --version 1 --part rules", cell)
        wb = m.workbench
        return wb.checkpoint().code, sorted(wb.runner.rules), wb.stored_rules()
    finally:
        m.workbench.close()


def test_a_rule_written_in_a_cell_is_in_the_imported_module(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, in_force, _ = _rule_from_a_cell(tmp_path, RULE_CELL)
    assert "positive_t" in in_force
    (tmp_path / "cell_rules.py").write_text(code, encoding="utf-8")
    (got,) = import_clean([tmp_path / "cell_rules.py"], tmp_path)
    assert got["rules"] == in_force


@pytest.mark.parametrize("out", ["maya-model.py", "model.txt", "nodir/model.py", "adir.py"])
def test_uac_code_out_refuses_what_it_cannot_write_in_one_line(
    cli_store: Path, out: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from uac_kernel.cli.main import main

    (cli_store.parent / "adir.py").mkdir(exist_ok=True)
    assert main(["code", "--out", str(cli_store.parent / out), *cli_args(cli_store)]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("uac: error: --out"), err


@pytest.fixture
def cli_store(tmp_path: Path) -> Path:
    db = tmp_path / "cli.duckdb"
    with Workbench(db, user="maya", rules=[]) as wb:
        wb.ingest([fact("2025-01-01", "add", "SleepLog", "s1", {"date": "2025-03-01"})])
        wb.checkpoint()
    return db


def cli_args(db: Path) -> list[str]:
    return ["--db", str(db), "--user", "maya"]


def test_uac_code_out_with_a_non_ascii_module_name_imports(
    cli_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from uac_kernel.cli.main import main

    folder = cli_store.parent / "out"
    folder.mkdir()
    assert main(["code", "--out", str(folder / "café_model.py"), *cli_args(cli_store)]) == 0
    assert "`import café_model`" in capsys.readouterr().out
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            "import sys; sys.path.insert(0, '.'); import café_model as m; "
            "print(m.records[m.SleepLog][0].date)",
        ],
        capture_output=True,
        text=True,
        cwd=folder,
        check=False,
    )
    assert done.returncode == 0 and done.stdout.strip() == "2025-03-01", done.stderr[-2000:]


# == fixed =======================================================================================


@pytest.mark.parametrize("name", ["fields", "own_fields"])
def test_a_field_named_like_a_record_method_is_refused_and_reads_none_in_old_code(
    tmp_path: Path, name: str
) -> None:
    # Was: ingest accepted a field `fields`; it hid Record.fields() (apply_edit, diff and the
    # rules step of ingest crashed) and, declared without a default in checkpoint code, took
    # the inherited method as its default. Now the name is reserved, in one line...
    with Workbench(tmp_path / "f.duckdb", user="u", rules=[]) as wb:
        with pytest.raises(EventError, match="reserved") as err:
            wb.ingest([fact("2025-01-01", "add", "T", "a", {name: "v"})])
        one_line(err.value)
    # ... and code that declares it (a checkpoint of an older store) still reads None
    mod = import_here(
        f"from uac import Record\n\nclass T(Record):\n    {name}: str | None\n", tmp_path
    )
    assert getattr(mod.T(key="k"), name) is None


@pytest.mark.parametrize(
    "events",
    [
        [fact("2025-01-01", "add", "F", "a", {"x": float("inf")})],  # a new field
        [
            fact("2025-01-01", "add", "F", "a", {"x": 1.5}),
            fact("2025-01-01", "add", "F", "b", {"x": float("nan")}),
        ],
        [
            fact("2025-01-01", "add", "F", "a", {"x": [1.5]}),
            fact("2025-01-01", "add", "F", "b", {"x": [float("-inf")]}),
        ],
    ],
    ids=["inf new field", "nan float field", "-inf in list[float]"],
)
def test_non_finite_floats_from_objects_are_refused(
    tmp_path: Path, events: list[dict[str, Any]]
) -> None:
    # Was: Workbench.ingest of objects accepted inf/nan for a float field (coerce returns a
    # float as is, before its finiteness check); the log stores them as null (orjson), so the
    # state differs from fold(log) once reopened, and the checkpoint says `x=inf` / `x=nan`:
    # NameError: name 'inf' is not defined on import. Either refuse them (a one-line
    # EventError, as the JSONL path does) or keep them and render them importably.
    db = tmp_path / "nf.duckdb"
    with Workbench(db, user="u", rules=[]) as wb:
        try:
            wb.ingest(events)
        except EventError as exc:
            one_line(exc)
            return
        code = wb.checkpoint().code
        live = truth(wb.state, [])
    with Workbench(db, user="u", rules=[]) as wb:
        assert truth(wb.state, []) == live, "the state is not fold(log) once reopened"
    import_here(code, tmp_path)


def test_an_edit_cell_with_1e999_is_refused(
    trip_wb: tuple[Workbench, int, str], tmp_path: Path
) -> None:
    # Was: `rate=1e999` in a cell is the literal inf (read_literal accepts any float); the
    # edit is applied, the state holds inf, the log holds null, and the next checkpoint has
    # `x=inf`. A cell value must be refused in one line unless the log can hold it as read.
    wb, _, _ = trip_wb
    wb.ingest([fact("2025-01-02", "update", "Trip", "a", {"rate": 1.5})])
    cp = wb.checkpoint()
    cell = wb.cell("Trip", cp.version)
    try:
        wb.apply_edit(cell.replace("rate=1.5", "rate=1e999"), version=cp.version, part="Trip")
    except (CodeError, EventError) as exc:
        one_line(exc)
        return
    import_here(wb.checkpoint().code, tmp_path)


@pytest.mark.parametrize(
    "snippet",
    [
        "records[T] = [T(key='a', d=date(18446744073709551616, 1, 1))]",
        "records[T] = [T(key='a', d=datetime(2025, 1, 1, 99999999999999999999))]",
        "seq = 'x'",
        "seq = [1]",
    ],
)
def test_parse_module_errors_are_code_errors(snippet: str) -> None:
    # Was: an out-of-range date argument escaped as OverflowError ("Python int too large to
    # convert to C long": read_literal catches only TypeError/ValueError), and a header `seq`
    # that is not an int escapes as ValueError/TypeError, instead of a one-line CodeError.
    code = f"class T(Record):\n    d: date | None\n\n\n{snippet}\n"
    with pytest.raises(CodeError) as err:
        parse_module(code)
    one_line(err.value)


def test_an_edit_cell_with_an_out_of_range_date_is_a_code_error(
    tmp_path: Path,
) -> None:
    # Was: the same OverflowError escaped from Workbench.apply_edit (and so from %%uac cell).
    with Workbench(tmp_path / "d.duckdb", user="u", rules=[]) as wb:
        wb.ingest([fact("2025-01-01", "add", "D", "a", {"d": "2025-01-01"})])
        cp = wb.checkpoint()
        cell = wb.cell("D", cp.version).replace("d=date(2025,", "d=date(18446744073709551616,")
        with pytest.raises(CodeError) as err:
            wb.apply_edit(cell, version=cp.version, part="D")
        one_line(err.value)


@pytest.mark.parametrize("declared", ["model_config: str | None", "fields: str | None"])
def test_an_edit_cell_declaring_a_reserved_field_is_a_code_error(
    tmp_path: Path, declared: str
) -> None:
    # Was: the class of a cell could declare any name (parse_classes checks only the type), so
    # `model_config` raises pydantic's multi-line PydanticUserError and `fields` a TypeError
    # ('NoneType' object is not callable), instead of a one-line CodeError naming the field.
    with Workbench(tmp_path / "r.duckdb", user="u", rules=[]) as wb:
        wb.ingest([fact("2025-01-01", "add", "D", "a", {"n": 1})])
        cp = wb.checkpoint()
        cell = wb.cell("D", cp.version).replace("(Record):\n", f"(Record):\n    {declared}\n")
        with pytest.raises(CodeError) as err:
            wb.apply_edit(cell, version=cp.version, part="D")
        one_line(err.value)


@pytest.mark.parametrize("ts", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:00:00-05:00"])
def test_a_ts_with_an_offset_at_the_calendar_edge_is_an_event_error(ts: str) -> None:
    # Was: _parse_ts converted to UTC without a guard: OverflowError("date value out of
    # range") escapes ingest instead of an EventError naming the line and `ts`.
    with Workbench(":memory:", user="u", rules=[]) as wb:
        with pytest.raises(EventError) as err:
            wb.ingest([fact(ts, "add", "T", "k", {"n": 1})])
        one_line(err.value)


@pytest.mark.parametrize(
    "event",
    [
        fact("2025-01-01", "add", "T", "k", {"a\nb": 1}),
        {**fact("2025-01-01", "add", "T", "k", {"n": 1}), "x\ny": 2},
    ],
    ids=["field name", "event key"],
)
def test_an_event_error_quotes_a_name(event: dict[str, Any]) -> None:
    # Was: EventError wrote `field '<name>'` unescaped, so a name holding a newline makes a
    # two-line error (the message itself uses repr; the location prefix does not).
    with Workbench(":memory:", user="u", rules=[]) as wb:
        with pytest.raises(EventError) as err:
            wb.ingest([event])
        one_line(err.value)


def test_a_lone_surrogate_user_id_is_a_one_line_error(tmp_path: Path) -> None:
    # Was: user ids were never validated: Workbench(user='\ud800') raises duckdb's
    # InvalidInputException ("Python Conversion Failure ...") from Checkpoints.latest(), not a
    # one-line UacError (and leaves the store open: it fails after the store was opened).
    with (
        pytest.raises(UacError) as err,
        Workbench(tmp_path / "s.duckdb", user="\ud800", rules=[]) as wb,
    ):
        wb.ingest([fact("2025-01-01", "add", "T", "k", {"n": 1})])
    one_line(err.value)


def _rules_module_state(
    tmp_path: Path, source: str, names: list[str]
) -> tuple[ModuleType, Workbench]:
    mod = load_rules(tmp_path, source)
    wb = Workbench(tmp_path / "rules.duckdb", user="u")
    wb.ingest([fact("2025-01-01", "add", "T", "a", {"n": 1})])
    for name in names:
        r = getattr(mod, name)
        wb.define_rule(r, inspect.getsource(r.func))
    return mod, wb


def _imported_rules(wb: Workbench, tmp: Path) -> dict[str, Rule]:
    mod = import_here(wb.checkpoint().code, tmp)
    return {r.name: r for r in mod.rules}


def test_two_rules_in_force_cannot_share_a_function_name(tmp_path: Path) -> None:
    # Was: rules `first` and `second`, both `def check`, were defined twice in the module, whose
    # `rules` then held `second` twice. Checkpoint code binds a rule by its function's name.
    src = """
        from uac import Finding, rule

        @rule(name="first", watch=["T"])
        def check(user):
            return []

        FIRST = check

        @rule(name="second", watch=["T"])
        def check(user):
            return []
    """
    with pytest.raises(RuleError, match="give each rule a function of its own name") as err:
        _rules_module_state(tmp_path, src, ["FIRST", "check"])
    one_line(err.value)


def test_a_rule_function_cannot_take_a_shipped_rule_s_name_while_it_is_in_force(
    tmp_path: Path,
) -> None:
    # Was: `@rule(name="mine") def passport_validity` rebound the shipped rule's import in the
    # module, which lost passport_validity and held `mine` twice.
    src = """
        from uac import rule

        @rule(name="mine", watch=["T"])
        def passport_validity(user):
            return []
    """
    with pytest.raises(RuleError, match="'passport_validity'") as err:
        _rules_module_state(tmp_path, src, ["passport_validity"])
    one_line(err.value)


def test_a_notebook_rule_named_like_a_shipped_rule_is_the_one_imported(tmp_path: Path) -> None:
    # Was: a notebook rule put in force under a shipped rule's name (`name="passport_validity"`)
    # replaces it in the runner, but the module imports the shipped one from uac.rules: the rule
    # the module says is in force is not the one that is.
    src = """
        from uac import rule

        @rule(name="passport_validity", watch=["T"])
        def my_passport_check(user):
            return []
    """
    mod, wb = _rules_module_state(tmp_path, src, ["my_passport_check"])
    with wb:
        assert wb.runner.rules["passport_validity"].func is mod.my_passport_check.func
        imported = _imported_rules(wb, tmp_path)["passport_validity"]
        assert imported.func.__name__ == "my_passport_check"


def test_a_rule_decorated_as_uac_rule_imports(tmp_path: Path) -> None:
    # Was: docs/rules.md writes rules as `@uac.rule(...)`; the module copies that source but
    # binds no `uac`, so importing the checkpoint raises NameError: name 'uac' is not defined.
    src = """
        import uac

        @uac.rule(watch=["T"])
        def dotted(user):
            return []
    """
    _, wb = _rules_module_state(tmp_path, src, ["dotted"])
    with wb:
        assert "dotted" in _imported_rules(wb, tmp_path)


def test_a_rule_bound_by_assignment_is_in_rules(tmp_path: Path) -> None:
    # Was (documented in codegen by a comment, but against "same rules in force"): a rule made
    # from a lambda has a source but no `def`; the module writes only a comment, and its
    # `rules` lacks a rule that is in force.
    src = """
        import uac

        lam = uac.rule(name="lam", watch=["T"])(lambda user: [])
    """
    _, wb = _rules_module_state(tmp_path, src, ["lam"])
    with wb:
        assert "lam" in _imported_rules(wb, tmp_path)


@pytest.mark.parametrize("char", ["\u2028", "\x0c", "\x85", "\x1e"])
def test_a_cell_with_a_unicode_line_break_before_a_rule(
    tmp_path: Path, char: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: edits.rule_sources and magics._compile_rules cut a rule's source out of the cell
    # by str.splitlines(), which also breaks at U+2028, \x0c, \x85, \x1c-\x1e (Python's
    # tokenizer does not). A comment holding one shifts every later line: the logged source is
    # the wrong lines (here it starts with 'break' and loses the last line), and the checkpoint
    # (which reads the source back through linecache) drops the rule: "source was not kept".
    cell = f"# a note with a line{char}break in it\n{RULE_CELL}"
    code, in_force, logged = _rule_from_a_cell(tmp_path, cell)
    assert [r["source"] for r in logged] == [RULE_CELL]
    assert "positive_t" in in_force
    (tmp_path / "cell_rules.py").write_text(code, encoding="utf-8")
    (got,) = import_clean([tmp_path / "cell_rules.py"], tmp_path)
    assert got["rules"] == in_force


@pytest.mark.parametrize("stem", ["class", "None", "datetime", "uac", "pydantic", "typing"])
def test_uac_code_out_refuses_a_module_name_import_cannot_use(
    cli_store: Path, stem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: --out checked only str.isidentifier(): a keyword stem (class.py: `import class` is a
    # SyntaxError) and a stem that shadows a module the checkpoint itself imports (datetime.py,
    # uac.py, pydantic.py, typing.py: ImportError, "partially initialized module") are written
    # with "`import STEM` from its folder". Either refuse them in one line or the printed
    # import must work.
    from uac_kernel.cli.main import main

    folder = cli_store.parent / f"out_{stem}"
    folder.mkdir()
    rc = main(["code", "--out", str(folder / f"{stem}.py"), *cli_args(cli_store)])
    cap = capsys.readouterr()
    if rc == 1:
        assert len(cap.err.strip().splitlines()) == 1, cap.err
        return
    assert f"`import {stem}`" in cap.out
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-c",
            f"import sys; sys.path.insert(0, '.')\nimport {stem} as m\n"
            "print(m.records[m.SleepLog][0].date)",
        ],
        capture_output=True,
        text=True,
        cwd=folder,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-1500:]


def test_uac_code_out_error_quotes_the_path(
    cli_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Was: the --out refusal wrote the path as given; a newline in it splits the error.
    from uac_kernel.cli.main import main

    assert main(["code", "--out", "a\nb.py", *cli_args(cli_store)]) == 1
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
