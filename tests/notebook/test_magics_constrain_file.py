"""``%uac constrain FILE`` on hostile paths and contents (``constraints.files.constraints_of_file``):
each refusal a one-line UsageError naming the file, nothing appended, and no cell left hanging."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
pytest.importorskip("ipykernel", reason="pip install -e '.[dev]'")

from helpers.magics import run, usage_error

from uac_kernel.workbench import Workbench


def wb_of(ip: Any) -> Workbench:
    wb = ip.user_ns["wb"]
    assert isinstance(wb, Workbench)
    return wb


def test_a_fifo_no_one_writes_to_is_refused_not_waited_on(ip: Any, tmp_path: Path) -> None:
    """``%uac constrain fifo.yaml`` on a named pipe with no writer blocked the kernel in
    ``open()``: the cell never ended, and no message said why. It is refused before it is
    opened; a writer thread stands by to unblock the test should it be opened all the same."""
    run(ip, "%uac open")
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    done = threading.Event()

    def release() -> None:
        if not done.wait(5):
            with open(fifo, "wb"):  # unblock a reader stuck in open(), write nothing
                pass

    threading.Thread(target=release, daemon=True).start()
    message = usage_error(ip, "%uac constrain fifo.yaml")
    done.set()
    assert message.startswith("fifo.yaml: not a regular file"), message
    assert wb_of(ip).state.constraints == {}


@pytest.mark.parametrize(
    ("make", "line", "words"),
    [
        (
            lambda d: (d / "dir.yaml").mkdir(),
            "%uac constrain dir.yaml",
            "dir.yaml: not a regular file",
        ),
        (lambda d: None, "%uac constrain /dev/zero", "/dev/zero: not a regular file"),
        (
            lambda d: ((d / "l1").symlink_to(d / "l2"), (d / "l2").symlink_to(d / "l1")),
            "%uac constrain l1",
            "cannot read l1: Too many levels of symbolic links",
        ),
        (
            lambda d: (d / "latin1.yaml").write_bytes(b"title: caf\xe9\n"),
            "%uac constrain latin1.yaml",
            "cannot read latin1.yaml: it is not UTF-8 text",
        ),
        (
            lambda d: (d / "bin.yaml").write_bytes(b"\x00\x01\x02kind: x\n"),
            "%uac constrain bin.yaml",
            "bin.yaml: line 1: invalid YAML",
        ),
        (
            lambda d: (d / "big.yaml").write_bytes(b"# x\n" * 300_000),
            "%uac constrain big.yaml",
            "big.yaml: more than 1,048,576 bytes",
        ),
        (
            lambda d: (d / "lol.yaml").write_text(
                'a: &a ["lol","lol"]\nb: &b [*a,*a,*a]\nc: [*b,*b,*b]\n'
            ),
            "%uac constrain lol.yaml",
            "lol.yaml: line 2: a YAML alias",
        ),
        (
            lambda d: (d / "py.yaml").write_text(
                "!!python/object/apply:os.system ['touch CANARY']\n"
            ),
            "%uac constrain py.yaml",
            "py.yaml: line 1: invalid YAML",
        ),
        (
            lambda d: (d / "twice.yaml").write_text(
                "kind: obligation\ntitle: x\ntitle: y\ndue: {date: 2024-01-01}\n"
            ),
            "%uac constrain twice.yaml",
            "twice.yaml: line 3: key 'title' is given twice (first on line 2)",
        ),
        (
            lambda d: (d / "ok.yaml").write_text(
                "- {kind: obligation, title: x, due: {date: 2024-01-01}}\n"
                "- {kind: obligation, title: y, due: {date: 2024-01-01}}\n"
            ),
            "%uac constrain ok.yaml --key 'a\"b'",
            "--key names one constraint but the text holds 2",
        ),
    ],
)
def test_hostile_constraint_files_are_one_line_usage_errors_and_append_nothing(
    ip: Any, tmp_path: Path, make: Any, line: str, words: str
) -> None:
    run(ip, "%uac open")
    make(tmp_path)
    before = wb_of(ip).state.seq
    assert words in usage_error(ip, line)
    assert wb_of(ip).state.seq == before and wb_of(ip).state.constraints == {}
    assert not (tmp_path / "CANARY").exists()


def test_a_yaml_syntax_error_says_what_to_do_as_a_json_one_does(ip: Any, tmp_path: Path) -> None:
    """A JSON file's syntax error ends '…; fix it or write YAML'; a YAML file's was only
    'bad.yaml: line 2: invalid YAML (mapping values are not allowed here)',
    saying neither what to do nor where the constraint format is described."""
    run(ip, "%uac open")
    (tmp_path / "bad.yaml").write_text("kind: obligation\n  title: x\n due: 1\n")
    message = usage_error(ip, "%uac constrain bad.yaml")
    assert message.startswith("bad.yaml: line ")
    assert "; " in message.split("invalid YAML", 1)[1], message
