"""Attacks on the faces of what-ifs (issue 16): `uac whatif`, `%%uac whatif` / `%uac whatif VAR`,
`%%uac cell --dry-run`, the WhatIfWidget and its Apply path, `uac.marimo.whatif`, and the
`whatif_timeline` chart. Real store files, a real IPython shell, real subprocesses.

Each test that fails here exposes a defect; the others hold and stay as regression tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import subprocess
import sys
import xml.dom.minidom
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.events import jsonl, retract
from helpers.magics import change, edit_cell, logged, run, run_out, usage_error
from helpers.maya import AMOXICILLIN, MEDICATIONS, RULE, STORE
from helpers.processes import suite_path
from helpers.whatif import spans_whatif

os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")

from uac_kernel.workbench import Workbench

ROOT = Path(__file__).resolve().parents[2]
CONTROL = ("\x1b", "\x07", "\u202e", "\x9b")


def fingerprint(db: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in (db, db.with_name(db.name + ".wal"))
        if p.exists()
    }


def cli(
    *args: str, cwd: Path, timeout: float = 120, limit_mb: int | None = None
) -> subprocess.CompletedProcess[str]:
    """`uac ARGS` in a real subprocess; a hang is a TimeoutExpired the caller turns into a failure."""

    def limits() -> None:
        if limit_mb is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit_mb << 20, limit_mb << 20))

    env = {**os.environ, "PYTHONPATH": suite_path(), "UAC_LOCK_TIMEOUT": "2"}
    return subprocess.run(
        [sys.executable, "-m", "uac_kernel.cli.main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        preexec_fn=limits,
    )


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 1, (done.returncode, done.stdout[-500:], done.stderr[-2000:])
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("uac: error: "), done.stderr[-2000:]
    assert not any(c in done.stderr for c in CONTROL), done.stderr
    return lines[0]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    db = tmp_path / "maya.duckdb"
    with Workbench(db, user="maya") as wb:
        wb.ingest(STORE)
    return db


HOSTILE_KEY = "k\x1b]0;pwn\x07</script><script>alert(1)</script>\u202e\x9b31m"


def hostile_amoxicillin() -> dict[str, Any]:
    """Amoxicillin under a hostile key: the drug-allergy alert's message quotes the key."""
    return {**AMOXICILLIN, "key": HOSTILE_KEY}


# -- the command line: hostile files -------------------------------------------------------------


@pytest.mark.parametrize("name", ["events.jsonl", "events.yaml"])
def test_cli_fifo_does_not_hang(store: Path, tmp_path: Path, name: str) -> None:
    fifo = tmp_path / name
    os.mkfifo(fifo)
    before = fingerprint(store)
    try:
        done = cli("whatif", str(fifo), "--db", str(store), cwd=tmp_path, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"`uac whatif {name}` on a FIFO with no writer hung (120 s)")
    one_line_error(done)
    assert fingerprint(store) == before


def test_cli_dev_zero_named_yaml_is_refused_not_read_whole(store: Path, tmp_path: Path) -> None:
    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")
    before = fingerprint(store)
    try:
        done = cli(
            "whatif", str(link), "--db", str(store), cwd=tmp_path, timeout=120, limit_mb=1500
        )
    except subprocess.TimeoutExpired:
        pytest.fail("`uac whatif zero.yaml` (-> /dev/zero) read for 120 s without a bound")
    one_line_error(done)
    assert fingerprint(store) == before


def test_cli_huge_yaml_file_is_refused_as_a_file_not_a_cell(store: Path, tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * (9 << 20) + "\n", encoding="utf-8")
    before = fingerprint(store)
    line = one_line_error(cli("whatif", str(big), "--db", str(store), cwd=tmp_path))
    # the refusal speaks of the file it was given, not of a notebook cell
    assert "cell" not in line, line
    assert fingerprint(store) == before


def test_cli_hostile_files_are_one_line_errors(store: Path, tmp_path: Path) -> None:
    (tmp_path / "dir.jsonl").mkdir()
    (tmp_path / "u16.jsonl").write_bytes("\ufeff{}\n".encode("utf-16"))
    (tmp_path / "u16.yaml").write_text("- kind: fact\n", encoding="utf-16")
    (tmp_path / "bin.jsonl").write_bytes(bytes(range(256)) * 20)
    (tmp_path / "deep.json").write_text("[" * 100_000)
    (tmp_path / "deep.jsonl").write_text('{"a":' * 100_000)
    (tmp_path / "deep.yaml").write_text("- " * 5_000 + "1\n")
    (tmp_path / "bomb.yaml").write_text(
        "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    )
    (tmp_path / "py.yaml").write_text("- !!python/object/apply:os.system ['touch pwned']\n")
    (tmp_path / "zero.jsonl").symlink_to("/dev/zero")
    (tmp_path / "\x1b[31mevil\u202e.jsonl").write_text("not json\n")
    (tmp_path / "scalar.json").write_text('"events.jsonl"')
    before = fingerprint(store)
    names = [
        "dir.jsonl",
        "u16.jsonl",
        "u16.yaml",
        "bin.jsonl",
        "deep.json",
        "deep.jsonl",
        "deep.yaml",
        "bomb.yaml",
        "py.yaml",
        "zero.jsonl",
        "\x1b[31mevil\u202e.jsonl",
        "scalar.json",
        "missing.jsonl",
    ]
    for name in names:
        one_line_error(cli("whatif", name, "--db", str(store), cwd=tmp_path, timeout=60))
    assert not (tmp_path / "pwned").exists()
    assert fingerprint(store) == before


def test_cli_as_of_garbage_is_one_line(store: Path, tmp_path: Path) -> None:
    whatif = jsonl(tmp_path / "a.jsonl", [AMOXICILLIN])
    before = fingerprint(store)
    for as_of in ["March", "\x1b[31m2024", "99999-01-01", "0001-01-01T00:00+01:00", "", "--"]:
        done = cli("whatif", str(whatif), "--as-of=" + as_of, "--db", str(store), cwd=tmp_path)
        one_line_error(done)
    assert fingerprint(store) == before


def test_cli_hostile_expressions_run_nothing_and_print_escaped(store: Path, tmp_path: Path) -> None:
    whatif = jsonl(tmp_path / "a.jsonl", [AMOXICILLIN])
    before = fingerprint(store)
    args = ["whatif", str(whatif), "--db", str(store)]
    for expr in [
        "__import__('os').system('touch pwned')",
        "open('pwned', 'w')",
        '"\\x1b[31m" + "\\u202e"',
        "'a' * 10**10",
        "",
        "import os",
        "\x1b[31m1",
    ]:
        args += ["--expr", expr]
    done = cli(*args, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert not any(c in done.stdout for c in CONTROL), done.stdout
    assert not (tmp_path / "pwned").exists()
    assert fingerprint(store) == before


def test_cli_hostile_data_is_printed_escaped_text_and_json(store: Path, tmp_path: Path) -> None:
    whatif = jsonl(tmp_path / "h.jsonl", [hostile_amoxicillin()])
    before = fingerprint(store)
    for extra in ([], ["--json"], ["--as-of", "2024-01-01"]):
        done = cli("whatif", str(whatif), "--db", str(store), *extra, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert not any(c in done.stdout for c in CONTROL), done.stdout
        assert RULE in done.stdout
    assert (
        json.loads(cli("whatif", str(whatif), "--db", str(store), "--json", cwd=tmp_path).stdout)[
            "records"
        ][0]["key"]
        == HOSTILE_KEY
    )
    assert fingerprint(store) == before


# -- the command line: --chart -----------------------------------------------------------------


def test_cli_chart_paths(store: Path, tmp_path: Path) -> None:
    whatif = jsonl(tmp_path / "a.jsonl", [AMOXICILLIN])
    (tmp_path / "adir.svg").mkdir()
    (tmp_path / "old.svg").write_text("old")
    before = fingerprint(store)
    base = ["whatif", str(whatif), "--db", str(store), "--as-of", "2024-01-01", "--chart"]
    for out in ["adir.svg", "noext", "x.pdf", ".svg", "nodir/x.png", "x.SVG.exe"]:
        one_line_error(cli(*base, out, cwd=tmp_path))
    # no --as-of: refused before anything runs
    one_line_error(cli("whatif", str(whatif), "--db", str(store), "--chart", "x.svg", cwd=tmp_path))
    # an existing file is replaced by the chart
    done = cli(*base, "old.svg", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "old.svg").read_text().startswith("<svg")
    # the chart never lands on the store
    one_line_error(cli(*base, str(store), cwd=tmp_path))
    assert fingerprint(store) == before


def chart(
    whatif: Path, store: Path, out: str, cwd: Path, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`uac whatif WHATIF --as-of 2024-01-01 --chart OUT` on ``store``."""
    return cli(
        "whatif",
        str(whatif),
        "--db",
        str(store),
        "--as-of",
        "2024-01-01",
        "--chart",
        out,
        cwd=cwd,
        timeout=timeout,
    )


def test_cli_chart_path_with_control_characters_is_printed_escaped(
    store: Path, tmp_path: Path
) -> None:
    whatif = jsonl(tmp_path / "a.jsonl", [AMOXICILLIN])
    out = "a\x1b[31m\u202e.svg"
    done = chart(whatif, store, out, tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / out).exists()
    # "wrote <name>" quotes the file name: escaped, as every other line is
    assert not any(c in done.stdout for c in CONTROL), done.stdout.splitlines()[-1]


def test_cli_chart_html_keeps_hostile_text_inside_its_script(store: Path, tmp_path: Path) -> None:
    whatif = jsonl(tmp_path / "h.jsonl", [hostile_amoxicillin()])
    out = tmp_path / "timeline.html"
    done = chart(whatif, store, str(out), tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    page = out.read_text(encoding="utf-8")
    # the alert's message (it quotes the key) is data in the page's <script>: a `</script>` in
    # it must not end that script and start the attacker's
    assert "<script>alert(1)</script>" not in page


def test_cli_chart_svg_with_control_characters_is_well_formed(store: Path, tmp_path: Path) -> None:
    whatif = jsonl(tmp_path / "h.jsonl", [hostile_amoxicillin()])
    out = tmp_path / "timeline.svg"
    done = chart(whatif, store, str(out), tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    svg = out.read_bytes()
    assert b"<script" not in svg
    xml.dom.minidom.parseString(svg)  # a control character in an SVG is an XML error: no image


@pytest.mark.parametrize("suffix", [".svg", ".png", ".html"])
def test_cli_chart_with_a_control_character_in_a_label_does_not_abort(
    store: Path, tmp_path: Path, suffix: str
) -> None:
    # a short key with an ESC: the row label ("rule: Medication 'a\x1b[31mb' ...") holds it
    whatif = jsonl(tmp_path / "h.jsonl", [{**AMOXICILLIN, "key": "a\x1b[31mb"}])
    before = fingerprint(store)
    done = chart(whatif, store, str(tmp_path / f"timeline{suffix}"), tmp_path, timeout=300)
    # vl-convert panics on the \x1b while measuring the label's text and aborts the process
    # (SIGABRT, a Rust backtrace on stderr)
    assert done.returncode in (0, 1), (done.returncode, done.stderr[-800:])
    if done.returncode == 1:
        one_line_error(done)
    assert fingerprint(store) == before


def test_cli_store_held_read_write_by_another_process(store: Path, tmp_path: Path) -> None:
    whatif = jsonl(tmp_path / "a.jsonl", [AMOXICILLIN])
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
            "print('held', flush=True); time.sleep(60)",
            str(store),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        before = fingerprint(store)
        line = one_line_error(cli("whatif", str(whatif), "--db", str(store), cwd=tmp_path))
        assert str(holder.pid) in line or "another" in line or "lock" in line.lower(), line
        assert fingerprint(store) == before
    finally:
        holder.kill()
        holder.wait()


def test_cli_every_whatif_leaves_the_store_byte_for_byte(store: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({**AMOXICILLIN, "fields": {"dose_mg": "lots"}}) + "\n")
    good = jsonl(
        tmp_path / "a.jsonl", [AMOXICILLIN, retract("2024-03-02", "Allergy", "allergy-penicillin")]
    )
    before = fingerprint(store)
    one_line_error(cli("whatif", str(bad), "--db", str(store), cwd=tmp_path))
    assert cli("whatif", str(good), "--db", str(store), cwd=tmp_path).returncode == 0
    assert (
        cli("whatif", str(good), "--db", str(store), "--as-of", "2024-03-01", cwd=tmp_path)
    ).returncode == 0
    assert fingerprint(store) == before


# -- the magics --------------------------------------------------------------------------------

pytest.importorskip("ipykernel", reason="pip install -e '.[dev]'")

from IPython.utils.capture import capture_output  # noqa: E402


def shown(ip: Any, source: str) -> str:
    with capture_output() as cap:
        run(ip, source)
    return cap.stdout + "".join(o.data.get("text/plain", "") for o in cap.outputs)


def test_whatif_cell_hostile_bodies_are_one_line_usage_errors(maya_ip: Any, tmp_path: Path) -> None:
    before = logged(maya_ip)
    bodies = [
        "\x1b[31m\u202e",
        "- !!python/object/apply:os.system ['touch pwned']",
        "a: &a [x, x]\nb: [*a, *a]",
        "- " * 5_000 + "1",
        "[" * 100_000,
        '{"a":' * 100_000,
        "x" * (9 << 20),
        "[1, 2]",
        "- kind: fact\n  ts: 2024-01-01\n  op: add\n  type: Record\n  key: k\n  fields: {}",
        '{"kind": "fact"}\n\x00',
        "---\n- 1\n---\n{",
        "- kind: fact\n  kind: fact",
    ]
    for body in bodies:
        message = usage_error(maya_ip, "%%uac whatif\n" + body)
        assert not any(c in message for c in CONTROL), message
    assert not (tmp_path / "pwned").exists()
    assert logged(maya_ip) == before


def test_whatif_options_in_odd_places_are_one_line_usage_errors(maya_ip: Any) -> None:
    before = logged(maya_ip)
    body = "\n" + json.dumps(AMOXICILLIN)
    for line in [
        "%%uac whatif --expr",
        "%%uac whatif --as-of",
        "%%uac whatif --bogus",
        "%%uac whatif --as-of 2024-01-01 --as-of Mar",
        "%%uac whatif --as-of '\x1b[31m'",
        "%%uac whatif --as-of '2024-01-01",
        "%%uac whatif var --expr 1",
    ]:
        message = usage_error(maya_ip, line + body)
        assert not any(c in message for c in CONTROL), message
    # an option after the events is part of the events (YAML/JSON), not an option
    usage_error(maya_ip, "%%uac whatif" + body + "\n--as-of 2024-01-01")
    assert logged(maya_ip) == before


class Raising(list):  # type: ignore[type-arg]
    def __iter__(self) -> Any:
        raise RuntimeError("__iter__ ran")

    def __getitem__(self, i: Any) -> Any:
        raise RuntimeError("__getitem__ ran")

    def __len__(self) -> int:
        raise RuntimeError("__len__ ran")


class RaisingEvent(dict):  # type: ignore[type-arg]
    def __getitem__(self, k: Any) -> Any:
        raise RuntimeError("__getitem__ ran")

    def get(self, k: Any, default: Any = None) -> Any:
        raise RuntimeError("get ran")

    def keys(self) -> Any:
        raise RuntimeError("keys ran")

    def items(self) -> Any:
        raise RuntimeError("items ran")


def test_whatif_var_of_the_wrong_kind_is_a_one_line_usage_error(maya_ip: Any) -> None:
    before = logged(maya_ip)
    ns = maya_ip.user_ns
    ns["gen"] = (e for e in [AMOXICILLIN])
    ns["text"] = json.dumps(AMOXICILLIN)
    ns["num"] = 3
    ns["nothing"] = None
    ns["mod"] = os
    ns["nested"] = [[AMOXICILLIN]]
    ns["hostile_name_\u202e"] = [AMOXICILLIN]
    for var in ["gen", "text", "num", "nothing", "mod", "nested"]:
        message = usage_error(maya_ip, f"%uac whatif {var}")
        assert var in message
    # the generator was not consumed by the refusal
    assert next(ns["gen"]) == AMOXICILLIN
    message = usage_error(maya_ip, "%uac whatif 'x\x1b[31m'")
    assert not any(c in message for c in CONTROL), message
    assert logged(maya_ip) == before


def test_whatif_var_whose_iter_raises_is_a_one_line_usage_error(maya_ip: Any) -> None:
    before = logged(maya_ip)
    maya_ip.user_ns["evil"] = Raising([AMOXICILLIN])
    usage_error(maya_ip, "%uac whatif evil")
    assert logged(maya_ip) == before


def test_whatif_var_holding_events_whose_methods_raise_is_a_one_line_usage_error(
    maya_ip: Any,
) -> None:
    before = logged(maya_ip)
    maya_ip.user_ns["evil"] = [RaisingEvent(AMOXICILLIN)]
    usage_error(maya_ip, "%uac whatif evil")
    assert logged(maya_ip) == before


def test_whatif_var_tuple_and_huge_list(maya_ip: Any) -> None:
    before = logged(maya_ip)
    maya_ip.user_ns["pair"] = (AMOXICILLIN,)
    assert "1 raised" in shown(maya_ip, "%uac whatif pair")
    # 200,000 copies of one event: one new event and the rest repeats of it, skipped
    # (there is no bound on a batch's length), and nothing appended. The bound is a count, not
    # a time: past the copy and the skip, the what-if folds and checks one event.
    maya_ip.user_ns["huge"] = [AMOXICILLIN] * 200_000
    with capture_output() as cap:
        result = maya_ip.run_cell("%uac whatif huge")
    if result.error_in_exec is not None:
        from IPython.core.error import UsageError

        assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
    else:
        text = cap.stdout + "".join(o.data.get("text/plain", "") for o in cap.outputs)
        assert "1 raised" in text and "what-if: 1 event;" in text, text[:500]
        assert f"({200_000 - 1} repeated in the file)" in text, text[:500]
    del maya_ip.user_ns["huge"]
    assert logged(maya_ip) == before


def test_whatif_cell_leaves_the_store_file_unchanged(maya_ip: Any, tmp_path: Path) -> None:
    db = tmp_path / "maya.duckdb"
    run(
        maya_ip,
        "wb.store.con.execute('CHECKPOINT')"
        if hasattr(maya_ip.user_ns["wb"].store, "con")
        else "1",
    )
    before = fingerprint(db)
    shown(maya_ip, f"%%uac whatif --expr {MEDICATIONS!r}\n{json.dumps(AMOXICILLIN)}\n")
    shown(maya_ip, f"%%uac whatif --as-of 2024-03-01\n{json.dumps(AMOXICILLIN)}\n")
    usage_error(maya_ip, '%%uac whatif\n{"kind": "fact"}')
    assert fingerprint(db) == before


HOSTILE_CELL_CODE = """
import os
os.system("touch pwned_top")
open("pwned_open", "w").write("x")

@rule(watches=[__import__("os").system("touch pwned_deco") or "Medication"])
def evil(user, f=__import__("os").system("touch pwned_default")):
    __import__("os").system("touch pwned_body")
    return []
"""


def test_cell_dry_run_with_hostile_code_runs_nothing(maya_ip: Any, tmp_path: Path) -> None:
    run_out(maya_ip, "%uac checkpoint")
    text = edit_cell(maya_ip, "%uac edit Medication")
    text = change(text, "name='ibuprofen'", "name='amoxicillin'")
    header, body = text.split("\n", 1)
    before = logged(maya_ip)
    with capture_output() as cap:
        result = maya_ip.run_cell(f"{header} --dry-run\n{body}{HOSTILE_CELL_CODE}")
    # either refused in one line or shown as a dry run; never run
    if result.error_in_exec is not None:
        from IPython.core.error import UsageError

        assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
        assert "\n" not in str(result.error_in_exec)
    else:
        assert "dry run" in cap.stdout
    assert sorted(p.name for p in tmp_path.glob("pwned*")) == []
    assert "evil" not in maya_ip.user_ns
    assert logged(maya_ip) == before


def test_cell_dry_run_wrong_version_or_part_is_one_line(maya_ip: Any) -> None:
    run_out(maya_ip, "%uac checkpoint")
    text = edit_cell(maya_ip, "%uac edit Medication")
    header, body = text.split("\n", 1)
    before = logged(maya_ip)
    for bad in [
        header.replace("--version 1", "--version 99") + " --dry-run",
        header.replace("--version 1", "--version -1") + " --dry-run",
        header.replace("--version 1", "--version x") + " --dry-run",
        header.replace("--part Medication", "--part Nope") + " --dry-run",
        header.replace("--part Medication", "--part '\x1b[31m'") + " --dry-run",
        header + " --dry-run --dry-run --bogus",
    ]:
        assert bad != header + " --dry-run" or "bogus" in bad
        message = usage_error(maya_ip, f"{bad}\n{body}")
        assert not any(c in message for c in CONTROL), message
    message = usage_error(maya_ip, f"{header} --dry-run\n{body}\nthis is ( not python")
    assert logged(maya_ip) == before


# -- the widget --------------------------------------------------------------------------------

pytest.importorskip("anywidget", reason="pip install anywidget")

from uac_kernel.notebook.widgets_act import WhatIfWidget  # noqa: E402


@pytest.fixture
def wb(store: Path) -> Iterator[Workbench]:
    with Workbench(store, user="maya") as wb:
        yield wb


def test_widget_state_holds_hostile_strings_as_plain_text(wb: Workbench) -> None:
    w = wb.whatif([hostile_amoxicillin()], expressions={"<img src=x onerror=alert(1)>": "1"})
    widget = WhatIfWidget(wb, w)
    assert widget.error == ""
    state = json.dumps(widget.report)
    assert json.dumps(HOSTILE_KEY)[1:-1] in state  # as it is: the front end sets it as text
    js = (ROOT / "widgets" / "whatif_view.js").read_text() + (
        ROOT / "widgets" / "_common.js"
    ).read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in js, sink


WIDGET_TIMELINE = """
import sys, xml.dom.minidom
from helpers.maya import AMOXICILLIN
from uac_kernel.workbench import Workbench
from uac_kernel.notebook.widgets_act import WhatIfWidget
with Workbench(sys.argv[1], user="maya") as wb:
    w = wb.whatif([{**AMOXICILLIN, "key": sys.argv[2]}], as_of="2024-01-01")
    widget = WhatIfWidget(wb, w)
    assert widget.error == "", widget.error
    assert "<script" not in widget.timeline_svg
    xml.dom.minidom.parseString(widget.timeline_svg.encode("utf-8"))
print("ok")
"""


@pytest.mark.parametrize("key", ["a\x1b[31mb", HOSTILE_KEY, "a</text><script>x</script>b"])
def test_widget_timeline_svg_with_hostile_labels(store: Path, key: str) -> None:
    # in a subprocess: the kernel is what dies when vl-convert aborts
    done = subprocess.run(
        [sys.executable, "-c", WIDGET_TIMELINE, str(store), key],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": suite_path()},
        timeout=300,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", (
        done.returncode,
        done.stderr[-800:],
    )


def test_widget_apply_twice_appends_once(wb: Workbench) -> None:
    w = wb.whatif([AMOXICILLIN])
    widget = WhatIfWidget(wb, w)
    n = len(wb.log())
    widget._on_msg(widget, {"action": "apply"}, [])
    assert widget.applied and widget.error == ""
    grown = len(wb.log())
    assert grown > n
    widget._on_msg(widget, {"action": "apply"}, [])
    assert "applied already" in widget.error
    # a second widget of the same what-if: skipped by source, nothing appended
    again = WhatIfWidget(wb, w)
    again.apply()
    assert again.error == "" and len(wb.log()) == grown
    assert [a.rule for a in wb.alerts()] == [RULE]


def test_widget_unknown_messages_change_nothing(wb: Workbench) -> None:
    widget = WhatIfWidget(wb, wb.whatif([AMOXICILLIN]))
    n = len(wb.log())
    for content in [
        None,
        "apply",
        {"action": "Apply"},
        {"action": ["apply"]},
        [1] * 10_000,
        {"action": "apply\x1b"},
        {"x": "y" * 1_000_000},
    ]:
        widget._on_msg(widget, content, [])
        assert widget.error.startswith("not a what-if action"), widget.error
        assert len(widget.error) < 200
    assert len(wb.log()) == n and not widget.applied


def test_widget_apply_after_the_store_moved(store: Path, wb: Workbench) -> None:
    w = wb.whatif([AMOXICILLIN])
    widget = WhatIfWidget(wb, w)
    # meanwhile the allergy is retracted and the same prescription logged by another process
    other = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys; from uac_kernel.workbench import Workbench\n"
            "wb = Workbench(sys.argv[1], user='maya'); wb.ingest(json.loads(sys.argv[2])); wb.close()",
            str(store),
            json.dumps([retract("2024-03-05", "Allergy", "allergy-penicillin")]),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": suite_path()},
        timeout=120,
    )
    if other.returncode != 0:  # the store is held by this process: write through it instead
        wb.ingest([retract("2024-03-05", "Allergy", "allergy-penicillin")])
    n = len(wb.log())
    widget.apply()
    assert widget.error == "" and widget.applied
    assert len(wb.log()) > n
    # the prediction (1 raised) is stale: no allergy now, so no alert
    assert [a.rule for a in wb.alerts() if a.rule == RULE] == []


def test_widget_apply_after_a_conflicting_change_is_an_error_line(wb: Workbench) -> None:
    w = wb.whatif(
        [
            update_ibuprofen := {
                **AMOXICILLIN,
                "op": "update",
                "key": "med-ibuprofen",
                "fields": {"dose_mg": 400.0},
            }
        ]
    )
    assert update_ibuprofen
    widget = WhatIfWidget(wb, w)
    wb.ingest([retract("2024-03-05", "Medication", "med-ibuprofen")])
    n = len(wb.log())
    widget.apply()
    assert widget.error and "\n" not in widget.error and not widget.applied
    assert len(wb.log()) == n


def test_widget_apply_on_a_read_only_workbench(store: Path) -> None:
    with Workbench(store, user="maya") as rw:
        w = rw.whatif([AMOXICILLIN])
    before = fingerprint(store)
    with Workbench(store, user="maya", read_only=True) as ro:
        widget = WhatIfWidget(ro, ro.whatif([AMOXICILLIN]))
        assert "read-only" in widget.readonly  # the button is off, and says why beside it
        widget.apply()
        assert widget.error and "\n" not in widget.error and not widget.applied
        widget2 = WhatIfWidget(ro, w)
        widget2.apply()
        assert widget2.error and not widget2.applied
    assert fingerprint(store) == before


def test_widget_apply_after_the_workbench_closed(store: Path) -> None:
    wb = Workbench(store, user="maya")
    widget = WhatIfWidget(wb, wb.whatif([AMOXICILLIN]))
    wb.close()
    before = fingerprint(store)
    widget._on_msg(widget, {"action": "apply"}, [])  # a comm message: must not raise
    assert widget.error and "\n" not in widget.error and not widget.applied
    assert fingerprint(store) == before


# -- marimo ------------------------------------------------------------------------------------


@pytest.fixture
def mwb() -> Iterator[Workbench]:
    pytest.importorskip("marimo", reason="pip install marimo")
    import uac

    wb = uac.open(":memory:", user="maya")
    wb.ingest(STORE)
    yield wb
    wb.close()


def callout_text(view: Any) -> str:
    import marimo as mo

    assert not isinstance(view, mo.ui.anywidget), "a widget where an error was expected"
    return str(view.text)


def test_marimo_hostile_text_is_an_escaped_callout(mwb: Workbench) -> None:
    import uac.marimo as um

    n = len(mwb.log())
    for text in [
        "- kind: fact\n  ts: '<img src=x onerror=alert(1)>'",
        '{"kind": "fact"}\n<script>alert(1)</script>',
        "- !!python/object/apply:os.system ['touch pwned']",
        "[" * 100_000,
        "x" * (9 << 20),
    ]:
        page = callout_text(um.whatif(mwb, text))
        assert "<script>" not in page and "<img" not in page
    assert len(mwb.log()) == n


def test_marimo_str_that_names_a_file_says_to_pass_a_path(mwb: Workbench, tmp_path: Path) -> None:
    import uac.marimo as um

    path = jsonl(tmp_path / "events.jsonl", [AMOXICILLIN])
    page = callout_text(um.whatif(mwb, str(path)))
    # a str is the events' text; a file is a Path: the callout should say so, not report
    # "line 1 must be a JSON object" of an origin the user never wrote
    assert "Path" in page or "file" in page, page
    # given as a Path, it works
    import marimo as mo

    assert isinstance(um.whatif(mwb, path), mo.ui.anywidget)


def test_marimo_wrong_types_are_callouts_not_exceptions(mwb: Workbench) -> None:
    import uac.marimo as um

    for events in [42, None, 3.5]:
        try:
            view = um.whatif(mwb, events)  # type: ignore[arg-type]
        except Exception as exc:
            pytest.fail(f"um.whatif(wb, {events!r}) raised {type(exc).__name__}: {exc}")
        callout_text(view)
    for as_of in ["<b>x</b>", 5, "garbage"]:
        callout_text(um.whatif(mwb, [AMOXICILLIN], as_of=as_of))  # type: ignore[arg-type]


# -- the chart ---------------------------------------------------------------------------------


def test_chart_spans_ending_before_they_start(tmp_path: Path) -> None:
    from uac_kernel.render import charts

    chart = charts.whatif_timeline(spans_whatif(5, backwards=True, message="m"))
    rows = [r for d in chart.to_dict()["datasets"].values() for r in d if "instant" in r]
    assert rows and all(r["instant"] for r in rows)
    charts.save_chart(chart, tmp_path / "b.svg")


def test_chart_hostile_labels_stay_data(tmp_path: Path) -> None:
    from uac_kernel.render import charts

    chart = charts.whatif_timeline(spans_whatif(3, message="<b>m</b>"))
    spec = chart.to_dict()
    # labels are data, not field names or expressions of the spec
    assert "<script>" not in json.dumps({k: v for k, v in spec.items() if k != "datasets"})
    out = charts.save_chart(chart, tmp_path / "t.html")
    assert "<script>alert(1)</script>" not in out.read_text(encoding="utf-8")


def test_chart_of_thousands_of_spans_is_bounded(tmp_path: Path) -> None:
    from uac_kernel.render import charts

    chart = charts.whatif_timeline(spans_whatif(3000, message="m"))
    spec = chart.to_dict()
    size = len(json.dumps(spec))
    out = charts.save_chart(chart, tmp_path / "big.svg")
    # the widget draws this SVG in the kernel when it is made: thousands of alert rows give
    # a chart nobody can read, megabytes large and tens of seconds to draw. Bounded by what is
    # drawn (rows and bytes), not by how long this machine takes to draw it.
    rows = sum(len(v) for v in spec.get("datasets", {}).values())
    assert rows <= 200 + 1, rows  # the 200 alerts a timeline draws at most, and one more row
    assert size < 1 << 20 and out.stat().st_size < 2 << 20, (size, out.stat().st_size)


CHART_OF = """
import sys
from helpers.whatif import spans_whatif
from uac_kernel.render import charts
charts.save_chart(charts.whatif_timeline(spans_whatif(3, user=sys.argv[2])), sys.argv[1])
print("ok")
"""


@pytest.mark.parametrize("suffix", [".svg", ".png"])
@pytest.mark.parametrize("user", ["maya", "maya\x1b[31m"])
def test_chart_with_control_characters_in_labels_does_not_abort(
    tmp_path: Path, suffix: str, user: str
) -> None:
    # the row labels hold the messages' ESC; with user "maya\x1b[31m" the title holds one too
    done = subprocess.run(
        [sys.executable, "-c", CHART_OF, str(tmp_path / f"c{suffix}"), user],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": suite_path()},
        timeout=300,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", (
        done.returncode,
        done.stderr[-800:],
    )
