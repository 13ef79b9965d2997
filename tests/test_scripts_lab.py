"""``./scripts/lab`` as a person runs it: it syncs .venv, starts JupyterLab on notebooks/ or on
the directory it is given (or marimo on the tour or on a file of yours), and the server answers;
a path that is not there is one line of error, before any sync. The real script runs in a subprocess with a port
and a token of the test's, and is stopped once it has answered; it leaves git's files as they
were."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

# the two tests sync the same .venv: one worker runs both, one after the other
pytestmark = pytest.mark.xdist_group("scripts_lab")

ROOT = Path(__file__).parent.parent
# only a hang fails on this: a server that never says it is up
STARTUP_TIMEOUT = 240.0


def git_status() -> str:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return ""
    return subprocess.run(
        ["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def lab(args: list[str], ready: re.Pattern[str], tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Run ./scripts/lab ARGS until a line of its output matches ``ready``; yield (that match's
    first group, everything printed until then); stop it."""
    env = dict(os.environ)
    # Jupyter's and marimo's own files go to the test's directory, not the user's
    for var in ("JUPYTER_RUNTIME_DIR", "JUPYTER_DATA_DIR", "JUPYTER_CONFIG_DIR", "XDG_CONFIG_HOME"):
        env[var] = str(tmp_path / var.lower())
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    env.pop("VIRTUAL_ENV", None)
    proc = subprocess.Popen(
        [str(ROOT / "scripts" / "lab"), *args],
        cwd=tmp_path,  # the script finds the repository by its own path
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    seen: list[str] = []
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        match = None
        while match is None:
            if time.monotonic() > deadline:
                pytest.fail(f"no server after {STARTUP_TIMEOUT:.0f} s:\n{''.join(seen)}")
            line = proc.stdout.readline()
            if not line:
                if proc.poll() is not None:
                    pytest.fail(f"scripts/lab exited {proc.returncode}:\n{''.join(seen)}")
                time.sleep(0.1)
                continue
            seen.append(line)
            match = ready.search(line)
        yield match.group(1), "".join(seen)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def get(url: str, token: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"token {token}")
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status, response.read()


def test_lab_serves_the_notebooks_in_jupyterlab(tmp_path: Path) -> None:
    before = git_status()
    token = "uac-test-" + os.urandom(8).hex()
    args = ["--no-browser", "--ServerApp.port=0", f"--IdentityProvider.token={token}"]
    running = re.compile(r"(http://127\.0\.0\.1:\d+)/lab")
    with lab(args, running, tmp_path) as (base, printed):
        # the one line on the marimo tour comes first
        assert "./scripts/lab marimo" in printed and "notebooks/marimo_tour.py" in printed
        assert get(f"{base}/api")[0] == 200
        status, body = get(f"{base}/api/contents/tour.ipynb?content=0", token)
        assert status == 200 and b'"type": "notebook"' in body.replace(b'"type":"', b'"type": "')
        # the server's root is notebooks/: every teaching notebook is there
        status, body = get(f"{base}/api/contents?content=1", token)
        assert status == 200 and b"marimo_tour.py" in body and b"rules_and_alerts.ipynb" in body
    assert git_status() == before


def test_lab_marimo_opens_the_tour(tmp_path: Path) -> None:
    before = git_status()
    port = free_port()
    args = ["marimo", "--headless", "--port", str(port), "--no-token"]
    with lab(args, re.compile(rf"(http://\S+:{port})"), tmp_path) as (url, printed):
        assert "JupyterLab" not in printed
        assert url.endswith(f":{port}")
        status, body = get(f"http://127.0.0.1:{port}/")
        assert status == 200 and b"marimo" in body
    assert git_status() == before


def notebook_json() -> str:
    """The smallest notebook JupyterLab lists as one."""
    return '{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}'


def test_lab_serves_the_directory_it_is_given(tmp_path: Path) -> None:
    mine = tmp_path / "my-notebooks"
    mine.mkdir()
    (mine / "mine.ipynb").write_text(notebook_json())
    token = "uac-test-" + os.urandom(8).hex()
    # relative to where it is run (the script itself works from the repository)
    args = [
        "my-notebooks",
        "--no-browser",
        "--ServerApp.port=0",
        f"--IdentityProvider.token={token}",
    ]
    running = re.compile(r"(http://127\.0\.0\.1:\d+)/lab")
    with lab(args, running, tmp_path) as (base, _):
        status, body = get(f"{base}/api/contents?content=1", token)
        assert status == 200 and b"mine.ipynb" in body
        assert b"rules_and_alerts.ipynb" not in body


def test_lab_marimo_creates_a_new_notebook_beside_the_users(tmp_path: Path) -> None:
    mine = tmp_path / "my-notebooks"
    mine.mkdir()
    port = free_port()
    args = ["marimo", "my-notebooks/mine.py", "--headless", "--port", str(port), "--no-token"]
    with lab(args, re.compile(rf"(http://\S+:{port})"), tmp_path):
        status, body = get(f"http://127.0.0.1:{port}/")
        assert status == 200 and b"mine.py" in body
    assert (mine / "mine.py").exists()


@pytest.mark.parametrize(
    "args",
    [["no-such-dir"], ["no-such.ipynb", "--no-browser"], ["marimo", "no-such-dir/new.py"]],
)
def test_lab_refuses_a_path_that_is_not_there_in_one_line(tmp_path: Path, args: list[str]) -> None:
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    done = subprocess.run(
        [str(ROOT / "scripts" / "lab"), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    # before the sync: uv said nothing, and nothing was started
    assert done.stdout == ""
    wanted = args[1] if args[0] == "marimo" else args[0]
    assert done.stderr == f"error: no such directory or notebook: {tmp_path / wanted}\n"
