"""``./scripts/lab PATH``'s argument handling, before any sync: the real script copied into a
repository whose ``scripts/_venv.sh`` syncs nothing and whose ``.venv/bin/jupyter`` and
``marimo`` print the arguments they were given, so no environment is installed."""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
ECHO = "#!/usr/bin/env python3\nimport sys\nprint(repr(sys.argv[1:]))\n"


@pytest.fixture
def fake(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / ".venv" / "bin").mkdir(parents=True)
    (repo / "notebooks").mkdir()
    shutil.copy(ROOT / "scripts" / "lab", repo / "scripts" / "lab")
    (repo / "scripts" / "_venv.sh").write_text("uac_sync() { :; }\n")
    for name in ("jupyter", "marimo"):
        (repo / ".venv" / "bin" / name).write_text(ECHO)
        (repo / ".venv" / "bin" / name).chmod(0o755)
    return repo


def lab(repo: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(repo / "scripts" / "lab"), *args], cwd=cwd, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("name", ["my notes", "$(touch CANARY)", "a`touch CANARY`", 'it\'s "q"'])
def test_a_hostile_directory_name_is_one_argument_and_runs_nothing(
    fake: Path, tmp_path: Path, name: str
) -> None:
    (tmp_path / name).mkdir()
    done = lab(fake, tmp_path, name)
    assert done.returncode == 0, done.stderr
    argv = ast.literal_eval(done.stdout.splitlines()[-1])
    assert argv[:2] == ["lab", str(tmp_path / name)]
    assert not (tmp_path / "CANARY").exists() and not (fake / "CANARY").exists()


def test_a_missing_path_with_a_newline_and_an_escape_is_one_escaped_line(
    fake: Path, tmp_path: Path
) -> None:
    """``./scripts/lab $'bad\\nname\\e[31m'``: the error printed the path raw, over two lines
    and with the terminal's colour changed: 'error: no such directory or notebook:
    /tmp/…/bad' then 'name^[[31m'."""
    done = lab(fake, tmp_path, "bad\nname\x1b[31m")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, repr(done.stderr)
    assert "\x1b" not in done.stderr
