"""The sandbox: real forks, real limits, no mocks. Every attack must be refused or stopped, leave
no trace, and leave the test process working."""

from __future__ import annotations

import ast
import builtins
import enum
import io
import os
import pickle
import re
import resource
import subprocess
import sys
import textwrap
import threading
import types
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import duckdb
import pytest
from helpers.processes import children
from pydantic import BaseModel, ConfigDict

from uac_kernel.core.errors import SandboxFailed, SandboxLimit, SandboxRefused, UacError
from uac_kernel.core.records import record_class
from uac_kernel.sandbox import WarmSandbox, _child, check, evaluate, safe_builtins, to_plain

FAST: dict[str, Any] = {"cpu_seconds": 1.0, "memory_mb": 256}


class Medication(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str
    name: str
    dose_mg: float
    start: date
    active: bool = True


class UserStub:
    """Shaped like the query namespace's ``user``: public methods, the state behind ``_``."""

    def __init__(self, records: list[Medication]) -> None:
        self._records = records

    def all(self, T: type[BaseModel] | str) -> list[Medication]:
        name = T if isinstance(T, str) else T.__name__
        return [r for r in self._records if type(r).__name__ == name]


MEDS = [
    Medication(key="m1", name="ibuprofen", dose_mg=400, start=date(2025, 1, 10)),
    Medication(key="m2", name="warfarin", dose_mg=5, start=date(2025, 2, 1)),
    Medication(key="m3", name="ibuprofen", dose_mg=200, start=date(2024, 12, 1), active=False),
]


def _namespace() -> dict[str, object]:
    return {
        "user": UserStub(MEDS),
        "Medication": Medication,
        "meds": MEDS,
        "rec": MEDS[0],
        "d": {"k": 1},
        "y": [1, 2],
        "_secret": "s3cret",
    }


@pytest.fixture
def ns() -> dict[str, object]:
    return _namespace()


@pytest.fixture(scope="module")
def warm() -> Iterator[WarmSandbox]:
    """One warm sandbox for the whole corpus: each attack meets the worker the previous attacks
    left (or the fresh one that replaced it after a limit)."""
    with WarmSandbox(_namespace()) as box:
        yield box


Run = Callable[..., object]


@pytest.fixture(params=["one-shot", "warm"])
def run(request: pytest.FixtureRequest, ns: dict[str, object], warm: WarmSandbox) -> Run:
    """``evaluate`` over ``ns`` in a one-shot child, or the same through the warm worker."""
    if request.param == "one-shot":
        return lambda expr, **kwargs: evaluate(expr, ns, **kwargs)
    return warm.evaluate


# --- escape attempts ------------------------------------------------------------------------
# PATH is replaced by the repr of a canary file in a fresh tmp dir: attacks that would write
# a file aim there, and every test asserts it does not exist afterwards.

Expected = type[Exception] | tuple[type[Exception], ...]

REFUSED: list[tuple[str, str]] = [
    ("import_dunder", "__import__('os').system('touch ' + PATH)"),
    ("builtins_by_name", "__builtins__['open'](PATH, 'w')"),
    ("builtins_via_self", "len.__self__.open(PATH, 'w')"),
    ("subclasses_walk", "().__class__.__base__.__subclasses__()"),
    ("subclasses_via_mro", "str.mro()[-1].__subclasses__()"),
    ("mro_of_record_class", "Medication.mro()"),
    ("open_read", "open('/etc/passwd').read()"),
    ("open_write", "open(PATH, 'w').write('pwned')"),
    ("getattr", "getattr(1, '__class__')"),
    ("setattr", "setattr(rec, 'name', 'x')"),
    ("eval", "eval('1')"),
    ("exec", "exec('import os')"),
    ("compile", "compile('1', 'f', 'eval')"),
    ("globals", "globals()"),
    ("vars", "vars()"),
    ("dir", "dir()"),
    ("type_of", "type(1)"),
    ("type_new_class", "type('X', (), {})"),
    ("object", "object()"),
    ("super", "super()"),
    ("breakpoint", "breakpoint()"),
    ("help", "help()"),
    ("input", "input()"),
    ("print", "print('x')"),
    ("exit", "exit()"),
    ("memoryview", "memoryview(b'abc')"),
    ("bytes_builtin", "bytes(10)"),
    ("fstring_dunder", 'f"{(1).__class__}"'),
    ("fstring_spec_dunder", 'f"{1:{rec.__class__}}"'),
    ("str_format_field", '"{0.__class__}".format(1)'),
    ("str_format_map", '"{x.__init__.__globals__}".format_map({"x": rec})'),
    ("str_format_unbound", 'str.format("{0.__globals__}", lambda: 0)'),
    ("generator_frame_globals", "(x for x in [1]).gi_frame.f_globals"),
    ("generator_code", "(x for x in [1]).gi_code"),
    ("lambda_globals", "(lambda: 0).__globals__"),
    ("lambda_code_consts", "(lambda: 0).__code__.co_consts"),
    ("func_globals_py2_name", "(lambda: 0).func_globals"),
    ("frame_back_name", "rec.f_back"),
    ("pydantic_parse_file", "Medication.parse_file(PATH)"),
    ("pydantic_parse_raw", "Medication.parse_raw('{}')"),
    ("pydantic_model_validate", "Medication.model_validate({'name': 'x'})"),
    ("pydantic_model_validate_json", "Medication.model_validate_json('{}')"),
    ("pydantic_model_fields", "Medication.model_fields['name'].annotation"),
    ("pydantic_model_rebuild", "Medication.model_rebuild(force=True)"),
    ("pydantic_model_dump", "rec.model_dump()"),
    ("pydantic_json", "rec.json()"),
    ("pydantic_dict_attr", "rec.dict()"),
    ("pydantic_copy", "rec.copy(update={'name': 'x'})"),
    ("pydantic_construct", "Medication.construct(name=1)"),
    ("pydantic_schema", "Medication.schema()"),
    ("pydantic_private_validator", "rec.__pydantic_validator__"),
    ("dunder_dict", "rec.__dict__"),
    ("walrus_builtins", "(__builtins__ := {'x': 1})"),
    ("walrus_private", "(_x := 1)"),
    ("private_name", "_secret"),
    ("private_attr", "user._records"),
    ("lambda_default_dunder", "(lambda x=__import__: x)()"),
    ("lambda_private_param", "(lambda __x: __x)(1)"),
    ("keyword_private", "dict(_x=1)"),
    ("comprehension_store_attr", "[0 for rec.name in ['x']]"),
    ("comprehension_store_subscript", "[0 for d['k'] in [1]]"),
    ("comprehension_name_leak", "[x for x in y] + [x]"),
    ("async_comprehension", "[x async for x in y]"),
    ("await", "await y"),
    ("yield", "(yield)"),
    ("yield_from", "(yield from y)"),
    ("unicode_name_nfkc", "ｏｐｅｎ(PATH, 'w')"),
    ("unicode_math_name", "𝓸𝓹𝓮𝓷(PATH, 'w')"),
    ("unicode_dunder_attr", "(1).__ｃlass__"),
    ("statement_import", "import os"),
    ("statement_smuggled", "1; open(PATH, 'w')"),
    ("null_byte", "1\x00"),
    ("deep_nesting", "[" * 150 + "]" * 150),
    ("deep_unary", "-" * 150 + "1"),
    ("deep_parentheses", "(" * 300 + "1" + ")" * 300),
    ("huge_expression", "1+" * 6000 + "1"),
    # -- unicode: identifiers are NFKC-normalised by the parser, so these are the names they
    #    spell (or not identifiers at all)
    ("fullwidth_underscore_attr", "(1).\uff3f\uff3fclass\uff3f\uff3f"),
    ("fullwidth_underscore_name", "\uff3f\uff3fimport\uff3f\uff3f('os')"),
    ("fullwidth_private_name", "\uff3fsecret"),
    (
        "math_bold_getattr",
        "\U0001d420\U0001d41e\U0001d42d\U0001d41a\U0001d42d\U0001d42d\U0001d42b(1, 'x')",
    ),
    ("math_mono_eval", "\U0001d68e\U0001d69f\U0001d68a\U0001d695('1')"),
    ("ligature_fi_filter", "\ufb01lter(None, y)"),
    ("nfkc_keyword_private", "dict(\uff3fx=1)"),
    ("nfkc_lambda_private_param", "(lambda \uff3f\uff3fx: 1)(1)"),
    ("nfkc_model_dump", "rec.\uff4dodel_dump()"),
    ("nfkc_format", "'{0.__class__}'.\uff46ormat(1)"),
    ("nfkc_gi_frame", "(x for x in y).\uff47i_frame"),
    ("nfkc_mro", "int.\uff4dro()"),
    ("unicode_escape_in_name", "\\u005f\\u005fimport\\u005f\\u005f('os')"),
    # -- frames, code and generators
    ("generator_frame_back", "(x for x in [1]).gi_frame.f_back"),
    ("generator_yieldfrom", "(x for x in y).gi_yieldfrom"),
    ("generator_running", "(x for x in y).gi_running"),
    ("coroutine_frame", "rec.cr_frame"),
    ("async_generator_frame", "rec.ag_frame"),
    ("traceback_frame", "rec.tb_frame"),
    ("lambda_f_back", "(lambda: 0).f_back"),
    ("code_bytes", "(lambda: 0).co_code"),
    ("frame_locals", "rec.f_locals"),
    ("frame_builtins", "rec.f_builtins"),
    ("code_replace", "(lambda: 0).__code__.replace(co_code=b'')"),
    ("lambda_closure", "(lambda: rec).__closure__"),
    ("lambda_defaults", "(lambda x=1: x).__defaults__"),
    ("lambda_kwdefaults", "(lambda *, x=1: x).__kwdefaults__"),
    ("yield_in_lambda", "lambda: (yield)"),
    ("await_in_lambda", "lambda: await y"),
    # -- format strings that walk attributes
    ("format_nested_globals", "'{0.__init__.__globals__[os]}'.format(rec)"),
    ("format_map_unbound", "str.format_map('{a.__class__}', {'a': 1})"),
    ("format_passed_as_value", "(lambda f: f('{0.__class__}', 1))(str.format)"),
    ("format_builtin", "format(rec, '')"),
    ("fstring_conversion_dunder", 'f"{rec.__class__!r}"'),
    ("fstring_spec_format", "f\"{1:{'{0.__class__}'.format(1)}}\""),
    # -- types, classes and the object graph
    ("type_three_args", "type('X', (object,), {'__init__': 1})"),
    ("class_bases", "rec.__class__.__bases__"),
    ("int_base_subclasses", "int.__base__.__subclasses__()"),
    ("int_mro", "int.mro()"),
    ("class_getitem", "list.__class_getitem__(int)"),
    ("init_subclass", "Medication.__init_subclass__()"),
    ("ellipsis_class", "....__class__"),
    ("bytes_class", "b'x'.__class__"),
    ("dict_view_mapping_class", "d.keys().mapping.__class__"),
    ("counter_missing", "Counter.__missing__"),
    ("datetime_module_name", "datetime.__module__"),
    ("timedelta_subclasses", "timedelta.__subclasses__()"),
    ("set_name_hook", "Medication.__set_name__"),
    # -- exceptions and their tracebacks
    ("exception_traceback", "ZeroDivisionError().__traceback__"),
    ("exception_with_traceback", "BaseException.with_traceback"),
    ("exception_context", "rec.__context__"),
    # -- modules, pickling and serialisation across the worker boundary
    ("sys_modules", "sys.modules"),
    ("pickle_loads", "pickle.loads(b'cos\\nsystem\\n(S\"id\"\\ntR.')"),
    ("copyreg", "copyreg.dispatch_table"),
    ("operator_attrgetter", "operator.attrgetter('__class__')(1)"),
    ("reduce_ex", "rec.__reduce_ex__(2)"),
    ("reduce", "rec.__reduce__()"),
    ("getstate", "rec.__getstate__()"),
    ("setstate", "rec.__setstate__({})"),
    ("date_reduce", "date(2025, 1, 1).__reduce__()"),
    # -- statements in every shape
    ("del_statement", "del rec"),
    ("assignment", "x = 1"),
    ("augmented_assignment", "y += [1]"),
    ("global_statement", "global y"),
    ("class_statement", "class X: pass"),
    ("def_statement", "def f(): pass"),
    ("try_statement", "try: 1\nexcept: 0"),
    ("with_statement", "with open(PATH) as f: 1"),
    ("raise_statement", "raise SystemExit"),
    ("assert_statement", "assert 0"),
    ("match_statement", "match 1:\n case 1: 0"),
    ("comment_then_statement", "1 #\nimport os"),
    ("walrus_private_in_comprehension", "[(_y := 1) for x in y]"),
    ("star_private", "[*_secret]"),
]

MEMORY = "memory limit of 256 MB"
RECURSION = "recursion depth limit"

STOPPED: list[tuple[str, str, Expected, str]] = [
    ("list_mult_1e9", "[0]*10**9", SandboxLimit, MEMORY),
    ("pow_tower", "10**10**10", SandboxLimit, "CPU time limit of 1.0 s|" + MEMORY),
    ("str_mult_1e10", "'a'*10**10", SandboxLimit, MEMORY),
    ("sum_range_1e12", "sum(range(10**12))", SandboxLimit, "CPU time limit of 1.0 s"),
    ("list_range_1e9", "list(range(10**9))", SandboxLimit, MEMORY),
    ("shift_1e10", "1 << 10**10", SandboxLimit, MEMORY),
    ("counter_elements_1e9", "list(Counter(a=10**9).elements())", SandboxLimit, MEMORY),
    ("y_combinator", "(lambda f: f(f))(lambda f: f(f))", SandboxLimit, RECURSION),
    (
        "y_combinator_factorial",
        "(lambda y: y(y, 10**5))(lambda s, n: 1 if n == 0 else n * s(s, n - 1))",
        SandboxLimit,
        RECURSION,
    ),
    (
        "recursion_through_sorted_key",
        "sorted([1], key=(lambda f: lambda x: f(f)(x))(lambda f: lambda x: f(f)(x)))",
        SandboxLimit,
        RECURSION,
    ),
    (
        "deeply_nested_result",
        "(z := [], [z := [z] for i in range(10**5)])[1][-1]",
        SandboxLimit,
        RECURSION,
    ),
    ("result_over_64mb", "'a' * (70 * 2**20)", SandboxLimit, "over the limit of 64 MB"),
    ("int_to_str_dos", "str(10**100000)", SandboxFailed, "^ValueError: Exceeds the limit"),
    ("counter_fromkeys", "Counter.fromkeys('ab')", SandboxFailed, "^NotImplementedError: "),
    ("codec_lookup", "b'x'.decode('zlib_codec')", SandboxFailed, "^LookupError: "),
    ("generator_throw", "(x for x in [1]).throw(1)", SandboxFailed, "^TypeError: exceptions"),
    (
        "pydantic_ctor_extra",
        "Medication(key=PATH, name=1, dose_mg='x', start=0, bogus=1)",
        SandboxFailed,
        r"^ValidationError: \d+ validation errors for Medication",
    ),
    ("bytes_mult_1e10", "b'a' * 10**10", SandboxLimit, MEMORY),
    ("set_range_1e9", "set(range(10**9))", SandboxLimit, "CPU time limit of 1.0 s|" + MEMORY),
    (
        "dict_comprehension_1e9",
        "{i: i for i in range(10**9)}",
        SandboxLimit,
        "CPU time limit of 1.0 s|" + MEMORY,
    ),
    ("join_1e9", "'x'.join(['y'] * 10**9)", SandboxLimit, MEMORY),
    (
        "counter_range_1e9",
        "Counter(range(10**9))",
        SandboxLimit,
        "CPU time limit of 1.0 s|" + MEMORY,
    ),
    ("pow_2_2_40", "2 ** (2 ** 40)", SandboxLimit, "CPU time limit of 1.0 s|" + MEMORY),
    (
        "zip_1e12_result",
        "list(zip(range(10**12), range(10**12)))",
        SandboxLimit,
        "CPU time limit of 1.0 s|" + MEMORY,
    ),
    (
        "lazy_result_1e12",
        "(x for x in range(10**12))",
        SandboxLimit,
        "CPU time limit of 1.0 s|" + MEMORY,
    ),
    (
        "recursion_through_max_key",
        "max([1], key=(lambda f: lambda x: f(f)(x))(lambda f: lambda x: f(f)(x)))",
        SandboxLimit,
        RECURSION,
    ),
    (
        "repr_of_deep_nesting",
        "str((z := [], [z := [z] for i in range(10**5)])[1][-1])",
        SandboxLimit,
        RECURSION,
    ),
    ("int_from_5000_digits", "int('9' * 5000)", SandboxFailed, "^ValueError: Exceeds the limit"),
    ("exception_is_one_line", "int('x\\ny')", SandboxFailed, "^ValueError: invalid literal"),
    (
        "exception_message_is_cut",
        "d['k' * 10**6]",
        SandboxFailed,
        "^KeyError: 'kkk.{900,}\\.\\.\\.$",
    ),
    (
        "exception_in_lazy_result",
        "(1 / 0 for _ in [1])",
        SandboxFailed,
        "^ZeroDivisionError: division by zero",
    ),
    ("division_by_zero", "1 / 0", SandboxFailed, "^ZeroDivisionError: division by zero$"),
]

# Escape attempts that pass both walls and run, but reach nothing: the exact value is asserted
# (a str pattern: the result is text that must match it). Pickling tricks end here: whatever the
# expression returns crosses back as plain data or as its repr.
HELD: list[tuple[str, str, object]] = [
    ("percent_format_dunder_key", "'%(__class__)s' % {'__class__': 1}", "1"),
    ("dict_unpack_private_key", "dict(**{'_x': 1})", {"_x": 1}),
    ("generator_send_starts_it", "(x for x in [1]).send(None)", 1),
    ("generator_close", "(x for x in [1]).close()", None),
    ("lambda_result_is_text", "(lambda: 0)", re.compile(r"<function <lambda> at 0x")),
    ("class_result_is_text", "Medication", "<class 'test_sandbox.Medication'>"),
    ("namespace_object_is_text", "user", re.compile(r"<test_sandbox\.UserStub object at 0x")),
    ("bound_method_is_text", "user.all", re.compile(r"<bound method UserStub\.all of ")),
    ("builtin_is_text", "len", "<built-in function len>"),
    (
        "lambda_default_closes_over_user",
        "(lambda u=user: u)()",
        re.compile(r"<test_sandbox\.UserStub"),
    ),
    (
        "record_becomes_data",
        "meds[1]",
        {
            "_type": "Medication",
            "key": "m2",
            "name": "warfarin",
            "dose_mg": 5.0,
            "start": date(2025, 2, 1),
            "active": True,
        },
    ),
    ("self_referential_list", "(z := [], z.append(z), z)[2]", ["[...]"]),
    ("range_becomes_list", "range(3)", [0, 1, 2]),
    ("dict_view_becomes_list", "d.keys()", ["k"]),
    ("counter_becomes_dict", "Counter('aab')", {"a": 2, "b": 1}),
    ("bytes_are_text", "b'\\x00'", "b'\\x00'"),
    ("complex_is_text", "1j", "1j"),
    ("generic_alias_is_text", "list[int]", "list[int]"),
    ("union_type_is_text", "int | str", "int | str"),
    ("ellipsis_is_text", "...", "Ellipsis"),
    ("nested_generators_become_lists", "((x for x in [1]) for _ in [0])", [[1]]),
    ("tuple_keys_stay_tuples", "{(1, 'a'): 2}", {(1, "a"): 2}),
    ("huge_timedelta", "timedelta(days=999999999)", timedelta(days=999999999)),
]


@pytest.fixture
def canary(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "pwned"
    yield path
    assert not path.exists(), "an attack left a file behind"


def _limits() -> list[tuple[int, int]]:
    kinds = [resource.RLIMIT_AS, resource.RLIMIT_CPU, resource.RLIMIT_FSIZE, resource.RLIMIT_CORE]
    return [resource.getrlimit(k) for k in kinds]


LIMITS_AT_IMPORT = _limits()


@pytest.mark.parametrize(("expr",), [pytest.param(e, id=i) for i, e in REFUSED])
def test_attack_is_refused(expr: str, run: Run, canary: Path) -> None:
    before = _limits()
    with pytest.raises(SandboxRefused) as info:
        run(expr.replace("PATH", repr(str(canary))), **FAST)
    message = str(info.value)
    assert message and "\n" not in message
    assert _limits() == before


@pytest.mark.parametrize(
    ("expr", "expected", "reason"), [pytest.param(e, x, r, id=i) for i, e, x, r in STOPPED]
)
def test_attack_is_stopped(
    expr: str, expected: Expected, reason: str, ns: dict[str, object], run: Run, canary: Path
) -> None:
    before = _limits()
    expr = expr.replace("PATH", repr(str(canary)))
    check(expr, ns)  # these pass the static check: the runtime has to stop them
    with pytest.raises(expected, match=reason) as info:
        run(expr, **FAST)
    assert "\n" not in str(info.value)
    assert _limits() == before
    assert run("len(meds)", **FAST) == 3  # and the next query still works


@pytest.mark.parametrize(("expr", "expected"), [pytest.param(e, x, id=i) for i, e, x in HELD])
def test_attack_runs_and_reaches_nothing(
    expr: str, expected: object, ns: dict[str, object], run: Run, canary: Path
) -> None:
    before = _limits()
    check(expr, ns)
    value = run(expr, **FAST)
    if isinstance(expected, re.Pattern):
        assert isinstance(value, str) and expected.match(value), value
    else:
        assert value == expected
    assert _limits() == before


# The whole sandbox escape corpus: refused statically, stopped at run time, or run harmlessly.
CORPUS = [i for i, _ in REFUSED] + [i for i, *_ in STOPPED] + [i for i, *_ in HELD]


def test_corpus_is_large_and_distinct() -> None:
    assert len(CORPUS) == len(set(CORPUS)) >= 150
    expressions = [e for _, e in REFUSED] + [e for _, e, *_ in STOPPED] + [e for _, e, _ in HELD]
    assert len(set(expressions)) == len(expressions)


def test_cpu_limit_message_names_the_limit(run: Run) -> None:
    with pytest.raises(SandboxLimit, match=r"CPU time limit of 1\.0 s.*narrow"):
        run("sum(range(10**12))", **FAST)


def test_memory_limit_message_names_the_limit(run: Run) -> None:
    with pytest.raises(SandboxLimit, match=r"memory limit of 256 MB.*narrow"):
        run("[0]*10**9", **FAST)


def test_wall_clock_limit(run: Run) -> None:
    with pytest.raises(SandboxLimit, match=r"wall-clock time limit of 0\.5 s"):
        run("sum(range(10**12))", cpu_seconds=30, memory_mb=256, wall_seconds=0.5)


def test_result_size_limit_message(run: Run) -> None:
    with pytest.raises(SandboxLimit, match=r"over the limit of 64 MB"):
        run("'a' * (70 * 2**20)", **FAST)


def test_static_messages_name_the_construct() -> None:
    cases = {
        "x.__class__": "attribute '__class__' is not allowed: dunder and private attributes "
        "are off limits",
        "x.gi_frame": "attribute 'gi_frame' is not allowed: it reaches interpreter internals",
        "'{0.a}'.format(x)": "attribute 'format' is not allowed: str.format",
        "x.mro()": "attribute 'mro' is not allowed",
        "x.model_dump()": "attribute 'model_dump' is not allowed: pydantic",
        "(_y := 1)": "assignment expression ':=' to '_y' is not allowed",
        "_y": "name '_y' is not allowed",
        "await x": "'await' is not allowed",
        "x +": "not a Python expression",
    }
    for expr, message in cases.items():
        with pytest.raises(SandboxRefused) as info:
            check(expr, {"x"})
        assert str(info.value).startswith(message), (expr, str(info.value))


def test_unknown_name_lists_what_is_available() -> None:
    with pytest.raises(SandboxRefused) as info:
        check("open('/etc/passwd')", {"user"})
    message = str(info.value)
    assert message.startswith("name 'open' is not defined in the query namespace; available: ")
    assert "user" in message and "Counter" in message and "sorted" in message


def test_limits_on_size_and_depth() -> None:
    with pytest.raises(SandboxRefused, match="over the limit of 10,000"):
        check("1+" * 5000 + "1")
    with pytest.raises(SandboxRefused, match="deeper than 100"):
        check("[" * 101 + "]" * 101)
    check("[" * 60 + "]" * 60)


def test_check_returns_a_fresh_tree_and_scopes_names() -> None:
    first = check("[m.name for m in meds if m.active]", {"meds"})
    assert isinstance(first, ast.Expression)
    assert check("[m.name for m in meds if m.active]", {"meds"}) is not first
    check("(lambda a, *b, c=1, **d: (a, b, c, d))(1)", set())
    check("[(i, j) for i in range(3) for j in range(i)]", set())
    check("{k: v for k, (v, *_) in d.items()}", {"d"})
    check("(n := 2, n * 2)", set())
    check("undefined_is_fine_without_names")
    with pytest.raises(SandboxRefused, match="name 'j'"):
        check("[i for i in range(j) for j in range(3)]", set())
    with pytest.raises(SandboxRefused, match="must be a str"):
        check(b"1+1")  # type: ignore[arg-type]


def test_every_public_basemodel_attribute_is_refused() -> None:
    """A new pydantic release adding a public method makes this fail until it is reviewed."""
    names = [n for n in dir(BaseModel) if not n.startswith("_")]
    names += [n for n in dir(type(BaseModel)) if not n.startswith("_") and n != "register"]
    assert "parse_file" in names
    for name in names:
        with pytest.raises(SandboxRefused):
            check(f"x.{name}", {"x"})


# What is reachable from a query through public attributes (without calling anything) must not
# include a way out. The crawl goes three attributes deep from every object a query can hold.
DANGEROUS = (types.ModuleType, types.FrameType, types.CodeType, types.TracebackType, io.IOBase)


def _allowed(name: str) -> bool:
    try:
        check(f"x.{name}", {"x"})
    except SandboxRefused:
        return False
    return True


def _roots() -> list[object]:
    Trip = record_class("Trip", {"destination": "str", "start": "date"})
    trip = Trip.model_validate({"key": "t1", "destination": "Tokyo", "start": "2025-02-20"})
    now = datetime.now(UTC)
    return [
        *safe_builtins().values(),
        "s",
        b"b",
        1,
        1.5,
        1j,
        True,
        None,
        ...,
        date.today(),
        now,
        now.isocalendar(),
        now.timetuple(),
        timedelta(1),
        UTC,
        Counter("ab"),
        Counter("ab").elements(),
        [1],
        (1,),
        {"a": 1},
        {1},
        frozenset({1}),
        range(3),
        enumerate([]),
        zip(),
        map(len, []),
        filter(None, []),
        reversed([1]),
        iter([1]),
        iter({}),
        {}.items(),
        {}.keys(),
        {}.values(),
        (x for x in range(0)),
        lambda: 0,
        "s".upper,
        [].append,
        slice(1),
        list[int],
        int | str,
        Medication,
        MEDS[0],
        Trip,
        trip,
        trip.fields(),
        UserStub(MEDS),
        UserStub(MEDS).all,
    ]


def test_public_attributes_reach_no_module_frame_code_or_file() -> None:
    safe_classes = {v for v in safe_builtins().values() if isinstance(v, type)}
    queue: list[tuple[str, object, int]] = [(repr(r)[:40], r, 0) for r in _roots()]
    seen: set[int] = set()
    reached_classes: set[type] = set()
    while queue:
        path, obj, depth = queue.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        assert not isinstance(obj, DANGEROUS), path
        assert obj is not builtins.__dict__ and obj is not vars(os), path
        if isinstance(obj, type):
            reached_classes.add(obj)
        if depth == 3:
            continue
        for name in dir(obj):
            if not _allowed(name):
                continue
            try:
                value = getattr(obj, name)
            except Exception:
                continue
            queue.append((f"{path}.{name}", value, depth + 1))
    unexpected = {c for c in reached_classes - safe_classes if not issubclass(c, (BaseModel, date))}
    # Reachable classes are the safe builtins, the date types and the record classes: never
    # `type`, `object`, or a class whose constructor opens files.
    assert unexpected <= {timezone}, unexpected


def test_unpickler_refuses_anything_but_plain_data(tmp_path: Path) -> None:
    """A subverted child could write any pickle into the pipe; the parent must not run it."""
    target = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (os.system, (f"touch {target}",))

    with pytest.raises(pickle.UnpicklingError):
        _child._PlainUnpickler(io.BytesIO(pickle.dumps(("ok", Exploit())))).load()
    assert not target.exists()
    plain = ("ok", [date(2025, 1, 1), datetime(2025, 1, 1, tzinfo=UTC), timedelta(2)])
    assert _child._PlainUnpickler(io.BytesIO(pickle.dumps(plain))).load() == plain


# --- what queries are for -----------------------------------------------------------------


def test_comprehension_over_records(run: Run) -> None:
    assert run("[m.name for m in meds if m.active]") == ["ibuprofen", "warfarin"]
    assert run("sum(m.dose_mg for m in user.all(Medication))") == 605.0
    assert run("len(user.all('Medication'))") == 3


def test_counter_and_sorting_with_lambdas(run: Run) -> None:
    assert run("Counter(m.name for m in meds).most_common(1)") == [["ibuprofen", 2]]
    assert run("Counter(m.name for m in meds)") == {"ibuprofen": 2, "warfarin": 1}
    by_dose = "[m.key for m in sorted(meds, key=lambda m: (m.dose_mg, m.name), reverse=True)]"
    assert run(by_dose) == ["m1", "m3", "m2"]
    assert run("max(meds, key=lambda m: m.start).name") == "warfarin"


def test_date_arithmetic(run: Run) -> None:
    assert run("(date(2025, 3, 1) - date(2025, 2, 1)).days") == 28
    assert run("max(m.start for m in meds) + timedelta(days=7)") == date(2025, 2, 8)
    assert run("datetime(2025, 1, 1, 12) - datetime(2025, 1, 1)") == timedelta(hours=12)
    assert run("datetime.strptime('2025-01-02', '%Y-%m-%d').date()") == date(2025, 1, 2)


def test_records_become_dicts_with_their_type(run: Run) -> None:
    assert run("meds[0]") == {
        "_type": "Medication",
        "key": "m1",
        "name": "ibuprofen",
        "dose_mg": 400.0,
        "start": date(2025, 1, 10),
        "active": True,
    }
    by_key = run("{m.key: m for m in meds}")
    assert isinstance(by_key, dict) and by_key["m2"]["_type"] == "Medication"


def test_everyday_syntax(run: Run) -> None:
    assert run("(n := len(meds), n * 2)") == [3, 6]
    assert run("[0 for _ in range(3)]") == [0, 0, 0]
    assert run('f"{rec.name!r:>12}|{rec.dose_mg:.1f}"') == " 'ibuprofen'|400.0"
    assert run("'%s takes %d mg' % (rec.name, rec.dose_mg)") == "ibuprofen takes 400 mg"
    assert run("[*y, *(v for v in d.values())]") == [1, 2, 1]
    assert run("{**d, 'z': y[-1:]}") == {"k": 1, "z": [2]}
    assert run("'x' if any(m.active for m in meds) else 'y'") == "x"
    assert run("round(abs(-2.567), 1), int('7'), float('1.5'), bool(0)") == [
        2.6,
        7,
        1.5,
        False,
    ]


def test_results_are_plain_data(run: Run) -> None:
    assert run("{3, 1, 2}") == [1, 2, 3]
    assert run("(x for x in range(3))") == [0, 1, 2]
    assert run("range(3)") == [0, 1, 2]
    assert run("zip('ab', range(2))") == [["a", 0], ["b", 1]]
    assert run("enumerate('ab')") == [[0, "a"], [1, "b"]]
    assert run("d.items()") == [["k", 1]]
    assert run("{(1, 'a'): 1}") == {(1, "a"): 1}
    assert str(run("lambda: 0")).startswith("<function <lambda>")
    assert run("b'abc'") == "b'abc'"


def test_errors_surface_as_one_line(run: Run) -> None:
    with pytest.raises(SandboxFailed, match=r"^ZeroDivisionError: division by zero$"):
        run("1/0")
    with pytest.raises(SandboxFailed, match=r"^AttributeError: 'Medication' object has no attr"):
        run("rec.nope")
    with pytest.raises(SandboxFailed, match=r"^KeyError: 'missing'$"):
        run("d['missing']")
    with pytest.raises(SandboxFailed, match=r"^NameError: name 'later' is not defined"):
        run("(later, (later := 1))")
    with pytest.raises(SandboxFailed, match=r"^ValidationError: \d+ validation errors? for Med"):
        run("Medication(key='k', name='n', dose_mg='lots', start='2025-01-01')")


def test_to_plain_normalises_subclasses_and_timezones() -> None:
    class Tag(str):
        def __str__(self) -> str:
            return "other"

    class Level(enum.IntEnum):
        HIGH = 3

    paris = datetime(2025, 7, 1, 12, tzinfo=ZoneInfo("Europe/Paris"))
    plain = to_plain({"tag": Tag("t"), "level": Level.HIGH, "when": paris})
    assert plain == {"tag": "t", "level": 3, "when": paris}
    assert isinstance(plain, dict)
    assert type(plain["tag"]) is str and type(plain["level"]) is int
    assert plain["when"].tzinfo == timezone(timedelta(hours=2))
    cycle: list[Any] = []
    cycle.append(cycle)
    assert to_plain(cycle) == ["[...]"]
    long = to_plain(object.__new__(type("Huge", (), {"__repr__": lambda self: "x" * 500})))
    assert isinstance(long, str) and len(long) == 200 and long.endswith("...")
    assert to_plain({1, "a"}) in (["a", 1], [1, "a"])  # unsortable: unsorted list


def test_safe_builtins_are_exactly_the_design_set() -> None:
    names = set(safe_builtins())
    assert names == {
        *("len", "sum", "min", "max", "sorted", "any", "all", "set", "list", "dict", "tuple"),
        *("range", "enumerate", "zip", "round", "abs", "str", "int", "float", "bool"),
        *("date", "datetime", "timedelta", "Counter"),
    }
    safe_builtins()["open"] = open
    assert "open" not in safe_builtins()


@pytest.mark.parametrize(
    ("source", "outcome"),
    [
        ("open", "NameError: name 'open' is not defined"),
        ("(lambda: getattr)()", "NameError: name 'getattr' is not defined"),
        ("[eval for _ in 'x']", "NameError: name 'eval' is not defined"),
        ("__builtins__['open']", "KeyError: 'open'"),
        ("__import__('antigravity')", "ImportError: import of 'antigravity' is not available"),
        ("__import__('os')", None),
    ],
)
def test_runtime_wall_holds_without_the_static_check(source: str, outcome: str | None) -> None:
    """Code that skipped check() still finds only the safe builtins, in lambdas and
    comprehensions too; the __import__ kept for C code hands back nothing."""
    code = compile(source, "<query>", "eval")
    budget = _child._Budget(cpu_seconds=1.0, memory_mb=256, wall_seconds=5.0)
    if outcome is None:
        assert _child._run_forked(code, {"__builtins__": builtins}, budget) is None
        return
    with pytest.raises(SandboxFailed) as info:
        _child._run_forked(code, {"__builtins__": builtins}, budget)
    assert str(info.value).startswith(outcome)


def test_bad_budgets_are_caller_errors(ns: dict[str, object]) -> None:
    for kwargs in ({"cpu_seconds": 0}, {"memory_mb": -1}, {"wall_seconds": float("nan")}):
        with pytest.raises(ValueError):
            evaluate("1", ns, **kwargs)


def test_works_from_a_thread_and_keeps_parent_resources(tmp_path: Path) -> None:
    con = duckdb.connect(str(tmp_path / "s.duckdb"))
    con.execute("create table t (x int)")
    log = (tmp_path / "log.txt").open("w")
    results: list[object] = []
    worker = threading.Thread(target=lambda: results.append(evaluate("sum(range(10))", {})))
    worker.start()
    worker.join()
    assert results == [45]
    for i in range(3):
        assert evaluate("1+1", {}) == 2
        con.execute("insert into t values (?)", [i])
        log.write(f"{i}\n")
    log.close()
    assert con.execute("select count(*) from t").fetchone() == (3,)
    assert (tmp_path / "log.txt").read_text() == "0\n1\n2\n"
    con.close()


def test_process_survives_and_leaves_no_children(ns: dict[str, object]) -> None:
    """Runs after the corpus (pytest keeps file order): the test process is intact, and no
    evaluation, stopped or not, leaves a process behind."""
    before = children()
    assert evaluate("1+1", {}) == 2
    for expr in ("[0]*10**9", "(lambda f: f(f))(lambda f: f(f))", "1/0", "'a' * (70 * 2**20)"):
        with pytest.raises((SandboxLimit, SandboxFailed)):
            evaluate(expr, ns, **FAST)
    with pytest.raises(SandboxLimit):
        evaluate("sum(range(10**12))", ns, cpu_seconds=30, memory_mb=256, wall_seconds=0.2)
    assert children() <= before
    assert _limits() == LIMITS_AT_IMPORT
    assert evaluate("1+1", {}) == 2


def test_ctrl_c_in_the_caller_kills_the_child() -> None:
    script = textwrap.dedent(
        """
        import os, signal, threading
        from uac_kernel.sandbox import evaluate
        threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
        try:
            evaluate("sum(range(10**12))", {}, cpu_seconds=30)
        except KeyboardInterrupt:
            print("interrupted")
        try:
            os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            print("no children")
        print(evaluate("1+1", {}))
        """
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=20
    )
    assert done.stdout.split() == ["interrupted", "no", "children", "2"], done.stderr


def test_non_posix_platforms_get_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "fork")
    with pytest.raises(UacError, match="needs Linux or macOS"):
        evaluate("1", {})
