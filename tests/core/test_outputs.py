"""Where a face may write a file (``uac_kernel.core.outputs``), run for real: the ``uac`` command in
subprocesses over real store files, ``save_chart`` in a real IPython kernel shell with the
store open, and the marimo export.

For each face that writes a file: the store itself, a symbolic link and a hard link to it, its
``.wal`` and another store are refused (with ``--force`` too) as one line, the store byte for
byte as it was and still verifying; an existing file of another kind is refused without
``--force`` and replaced with it; a file of the kind written is replaced atomically, no
temporary file left; a write that fails midway leaves the old file as it was.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.cli import one_line_error, uac_here
from helpers.cli import uac as uac_process
from helpers.events import jsonl
from helpers.magics import run
from helpers.maya import AMOXICILLIN, STORE
from helpers.store import fingerprint

from uac_kernel.core.errors import OutputRefused
from uac_kernel.core.outputs import JSON, TSV, Output

# What each face writes: its arguments before the output path, the option, the suffix of the
# file it writes. The store is Maya's (test_whatif_cli.STORE), with one checkpoint.
FACES: dict[str, tuple[list[str], str, str]] = {
    "eval": (["eval", "len(user.all(Medication))"], "--out", ".json"),
    "sql": (["sql", "SELECT * FROM Medication"], "--out", ".tsv"),
    "sql --json": (["sql", "--json", "SELECT * FROM Medication"], "--out", ".json"),
    "code": (["code"], "--out", ".py"),
    "whatif --chart": (["whatif", "amoxicillin.jsonl", "--as-of", "2024-03-01"], "--chart", ".svg"),
    "fleet sql": (["fleet", "sql", "fleet", "SELECT * FROM users"], "--out", ".tsv"),
}
# A file of the kind each suffix names, as it starts.
SAME_KIND = {".json": "[1]\n", ".tsv": "a\tb\n", ".py": "x = 1\n", ".svg": "<svg></svg>\n"}
# A file of another kind where each face would write: named otherwise, or named as the kind
# but holding something else (binary data in a .py, text in a .png).
OTHER_KIND = {
    ".json": ("notes.md", b"my notes\n"),
    ".tsv": ("notes.md", b"my notes\n"),
    ".py": ("notes_mod.py", b"\x00\x01binary"),
    ".svg": ("chart.png", b"not a png"),
}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with Maya's store (one checkpoint), a fleet of it, another store, and the
    what-if's events."""
    home = tmp_path_factory.mktemp("outputs")
    jsonl(home / "maya.jsonl", STORE)
    jsonl(home / "amoxicillin.jsonl", [AMOXICILLIN])
    for argv in (
        ["ingest", "maya.jsonl", "--user", "maya"],
        ["checkpoint"],
        ["export", "maya.duckdb", "fleet"],
    ):
        assert uac_here("--db", "maya.duckdb", *argv, cwd=home).returncode == 0
    assert uac_here("--db", "other.duckdb", "ingest", "maya.jsonl", cwd=home).returncode == 0
    return home


def run_face(home: Path, face: str, out: Path | str, *extra: str, process: bool = False) -> Any:
    """``uac`` writing ``face``'s output to ``out`` (in this process unless ``process``)."""
    argv, option, _suffix = FACES[face]
    uac = uac_process if process else uac_here
    return uac("--db", "maya.duckdb", *argv, option, str(out), *extra, cwd=home)


def store_intact(home: Path, before: dict[str, str]) -> None:
    assert fingerprint(home / "maya.duckdb") == before
    done = uac_here("--db", "maya.duckdb", "verify", cwd=home)
    assert done.returncode == 0, done.stderr


def no_temporary_file(folder: Path) -> None:
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]


# -- never a store ---------------------------------------------------------------------------

STORE_PATHS: dict[str, Callable[[Path, Path, str], Path]] = {
    "the store itself": lambda home, tmp, suffix: home / "maya.duckdb",
    "a symbolic link to it": lambda home, tmp, suffix: _link(tmp / f"link{suffix}", home),
    "a hard link to it": lambda home, tmp, suffix: _hard(tmp / f"hard{suffix}", home),
    "its .wal": lambda home, tmp, suffix: home / "maya.duckdb.wal",
    "another store": lambda home, tmp, suffix: _copy_of_other(tmp / f"other{suffix}", home),
}


def _link(path: Path, home: Path) -> Path:
    path.symlink_to(home / "maya.duckdb")
    return path


def _hard(path: Path, home: Path) -> Path:
    os.link(home / "maya.duckdb", path)
    return path


def _copy_of_other(path: Path, home: Path) -> Path:
    path.write_bytes((home / "other.duckdb").read_bytes())
    return path


@pytest.mark.parametrize("force", [False, True], ids=["", "--force"])
@pytest.mark.parametrize("where", list(STORE_PATHS))
@pytest.mark.parametrize("face", list(FACES))
def test_no_face_writes_over_a_store(
    home: Path, tmp_path: Path, face: str, where: str, force: bool
) -> None:
    before = fingerprint(home / "maya.duckdb")
    out = STORE_PATHS[where](home, tmp_path, FACES[face][2])
    other = out.read_bytes() if out.exists() else None
    done = run_face(home, face, out, *(["--force"] if force else []))
    assert out.name in one_line_error(done)
    assert (out.read_bytes() if out.exists() else None) == other
    store_intact(home, before)
    no_temporary_file(home)


def test_a_path_inside_a_fleet_directory_is_refused_even_with_force(home: Path) -> None:
    out = home / "fleet" / "rows.tsv"
    err = one_line_error(run_face(home, "sql", out, "--force"))
    assert "inside the fleet directory" in err and not out.exists()
    done = uac_here("--db", "maya.duckdb", "verify", "fleet", cwd=home)
    assert done.returncode == 0, done.stderr


def test_export_into_the_store_file_is_refused(home: Path) -> None:
    before = fingerprint(home / "maya.duckdb")
    assert "not a fleet directory" in one_line_error(
        uac_here("export", "maya.duckdb", "maya.duckdb", cwd=home)
    )
    store_intact(home, before)


# -- existing files: of the kind written, of another kind ------------------------------------


@pytest.mark.parametrize("face", list(FACES))
def test_a_file_of_another_kind_is_replaced_only_with_force(
    home: Path, tmp_path: Path, face: str
) -> None:
    before = fingerprint(home / "maya.duckdb")
    name, content = OTHER_KIND[FACES[face][2]]
    other = tmp_path / name
    other.write_bytes(content)
    err = one_line_error(run_face(home, face, other))
    assert name in err and "pass --force" in err and "exists and is not a" in err
    assert other.read_bytes() == content
    done = run_face(home, face, other, "--force")
    assert done.returncode == 0, done.stderr
    assert other.read_bytes() != content
    store_intact(home, before)
    no_temporary_file(tmp_path)


@pytest.mark.parametrize("face", list(FACES))
def test_a_file_of_the_kind_written_is_replaced_atomically(
    home: Path, tmp_path: Path, face: str
) -> None:
    suffix = FACES[face][2]
    out = tmp_path / f"result{suffix}"
    out.write_text(SAME_KIND[suffix])
    old = out.stat().st_ino
    done = run_face(home, face, out)
    assert done.returncode == 0, done.stderr
    assert out.read_text() != SAME_KIND[suffix]
    assert out.stat().st_ino != old  # a new file put in place, not the old one rewritten
    no_temporary_file(tmp_path)


def test_a_file_named_as_the_kind_but_holding_binary_data_needs_force(
    home: Path, tmp_path: Path
) -> None:
    out = tmp_path / "result.json"
    out.write_bytes(b"\x00\x01binary\xff")
    assert "pass --force" in one_line_error(run_face(home, "eval", out))
    assert out.read_bytes() == b"\x00\x01binary\xff"


def test_a_symbolic_link_to_a_result_file_keeps_the_link(home: Path, tmp_path: Path) -> None:
    real = tmp_path / "real.json"
    real.write_text("[]\n")
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    assert run_face(home, "eval", link).returncode == 0
    assert link.is_symlink() and json.loads(real.read_text()) == 1


def test_a_directory_is_refused(home: Path, tmp_path: Path) -> None:
    assert "is a directory" in one_line_error(run_face(home, "eval", tmp_path))


def test_a_pipe_is_written_straight_through(home: Path) -> None:
    done = run_face(home, "eval", "/dev/stdout", process=True)  # this process's stdout
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("1wrote /dev/stdout")


# -- a write that fails midway -----------------------------------------------------------------


CLI = (sys.executable, "-m", "uac_kernel.cli.main")


def _file_size_limit(limit: int) -> Callable[[], None]:
    def limit_size() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limit_size


def test_a_result_too_big_for_the_file_system_leaves_the_old_file(
    home: Path, tmp_path: Path
) -> None:
    out = tmp_path / "big.json"
    out.write_text("[1, 2, 3]\n")
    # files of this process may not grow past 64 kB: writing the 1 MB result fails midway
    done = subprocess.run(
        [*CLI, "--db", "maya.duckdb", "eval", "'x' * 1_000_000", "--out", str(out)],
        cwd=home,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_file_size_limit(65_536),
    )
    assert "big.json" in one_line_error(done) and "cannot write it" in done.stderr
    assert out.read_text() == "[1, 2, 3]\n"
    no_temporary_file(tmp_path)


def test_a_failure_inside_the_block_leaves_the_old_file_and_no_temporary(
    tmp_path: Path,
) -> None:
    out = tmp_path / "rows.tsv"
    out.write_text("old\n")

    def rows() -> Iterator[str]:
        yield "a\tb\n"
        raise KeyboardInterrupt  # an interrupt midway, as a user's Ctrl-C

    with pytest.raises(KeyboardInterrupt):
        Output(out, TSV).write_text(rows())
    assert out.read_text() == "old\n"
    no_temporary_file(tmp_path)


def test_a_new_file_gets_the_usual_mode_and_a_replaced_one_keeps_its_own(tmp_path: Path) -> None:
    new = tmp_path / "new.json"
    Output(new, JSON).write_text(["1"])
    umask = os.umask(0)
    os.umask(umask)
    assert new.stat().st_mode & 0o777 == 0o666 & ~umask
    kept = tmp_path / "kept.json"
    kept.write_text("0")
    kept.chmod(0o600)
    Output(kept, JSON).write_text(["1"])
    assert kept.stat().st_mode & 0o777 == 0o600 and kept.read_text() == "1"


# -- the notebook: save_chart with the store open ----------------------------------------------


def open_store_state(ip: Any, store: Path) -> tuple[object, ...]:
    """The open store's file (inode and kind) and what it holds. Its bytes are no measure
    here: the shell's own connection checkpoints its write-ahead log whenever it closes."""
    run(ip, "wb.store.release()")  # closed first: reading the file drops a lock held on it
    with store.open("rb") as f:
        magic = f.read(16)
    return store.stat().st_ino, magic, run(ip, "wb.store.head('maya')"), run(ip, "len(wb.log())")


def refused_in(ip: Any, source: str) -> str:
    result = ip.run_cell(source)
    assert isinstance(result.error_in_exec, OutputRefused), result.error_in_exec
    return str(result.error_in_exec)


def test_save_chart_in_a_notebook_never_writes_over_the_open_store(
    maya_ip: Any, tmp_path: Path
) -> None:
    run(maya_ip, "from uac_kernel.render.charts import events_over_time, save_chart")
    store = tmp_path / "maya.duckdb"
    os.link(store, tmp_path / "store.svg")  # named as a chart, the same file as the open store
    (tmp_path / "link.png").symlink_to(store)
    before = open_store_state(maya_ip, store)
    for name in ("store.svg", "link.png"):
        message = refused_in(maya_ip, f"save_chart(events_over_time(wb), {name!r}, force=True)")
        assert name in message and "\n" not in message
    assert open_store_state(maya_ip, store) == before
    (tmp_path / "page.html").write_bytes(b"\x00 not a page")
    message = refused_in(maya_ip, "save_chart(events_over_time(wb), 'page.html')")
    assert "pass force=True" in message
    run(maya_ip, "save_chart(events_over_time(wb), 'page.html', force=True)")
    assert "vega" in (tmp_path / "page.html").read_text()
    assert run(maya_ip, "wb.verify().ok")


# -- the marimo export ---------------------------------------------------------------------------


def test_the_marimo_export_refuses_a_store_or_a_fleet_before_it_runs(
    home: Path, tmp_path: Path
) -> None:
    from uac_kernel.notebook.marimo_export import export_offline, main

    notebook = Path(__file__).parents[2] / "notebooks" / "marimo_tour.py"
    before = fingerprint(home / "maya.duckdb")
    for out in (home / "maya.duckdb", home / "fleet", home / "fleet" / "pages"):
        with pytest.raises(OutputRefused):
            export_offline(notebook, out)
    store_intact(home, before)
    assert not (home / "fleet" / "pages").exists()
    (tmp_path / "index.html").write_bytes(b"\x00 not a page")
    assert main([str(notebook), "-o", str(tmp_path)]) == 1  # no --force: the notebook never ran
    assert (tmp_path / "index.html").read_bytes() == b"\x00 not a page"
