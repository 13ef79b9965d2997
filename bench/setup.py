"""How long the README's two commands spend setting up .venv on a fresh clone: pip before, uv after.

Side by side in one run, interleaved round by round, each command on its own fresh clone (no
.venv) of the repository at a given commit:

- ``pip``: the scripts before uv (``--before``, default 757509e, the last commit whose scripts
  installed with pip), with pip's cache empty, as on a new machine;
- ``uv, cold``: the scripts at ``--after`` (default HEAD) with no uv installed and uv's cache
  empty, so the run includes installing uv from PyPI;
- ``uv, warm``: the same with uv installed and its cache filled by an earlier sync (untimed), as
  for a developer's second clone.

A run's caches live in a temporary ``XDG_CACHE_HOME`` (pip's, uv's, the bootstrapped uv's and
uac's own), ``PIP_CACHE_DIR`` and ``UV_CACHE_DIR`` point into it, and PATH is stripped of any
``uv``. The machine's pip configuration is left as it is (PyPI, plus what pip.conf adds).

Setup time is from the start of the command to its first command after setup: the script runs
under ``bash -x`` and the clock stops at the trace line of ``.venv/bin/uac demo``,
``.venv/bin/ruff``, ``scripts/dependencies.py`` or ``uv lock --check``, whichever comes first.
``./scripts/demo`` then runs to the end (its total is recorded too, and its clone must be left
clean for ``git status``); ``./scripts/test`` is stopped there, so the test suite is not run.
Also recorded: the size of .venv and how many packages it holds.

    python3 bench/setup.py [--rounds 3] [--before REV] [--after REV] [--out bench/results/setup.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_OUT = HERE / "results" / "setup.json"
BEFORE = "757509e"
COMMANDS = ("demo", "test")
VARIANTS = ("pip", "uv, cold", "uv, warm")
# The first traced command that is not setup, in the scripts before and after uv.
AFTER_SETUP = re.compile(
    r"^\++ (?:exec )?(?:\.venv/bin/(?:uac|ruff|mypy|pytest)\b|\.venv/bin/python scripts/dependencies"
    r"|\S*uv lock --check)"
)
TIMEOUT = 900.0


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def path_without_uv() -> str:
    dirs = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(d for d in dirs if d and not (Path(d) / "uv").exists())


def clone(rev: str, dest: Path) -> None:
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(ROOT), str(dest)], check=True)
    subprocess.run(["git", "-C", str(dest), "checkout", "-q", rev], check=True)


def environment(cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "VIRTUAL_ENV"))}
    env.update(
        PATH=path_without_uv(),
        XDG_CACHE_HOME=str(cache),
        PIP_CACHE_DIR=str(cache / "pip"),
        UV_CACHE_DIR=str(cache / "uv"),
        UAC_CACHE_DIR=str(cache / "uac-vega"),
        PS4="+ ",
    )
    return env


def venv_facts(checkout: Path) -> dict[str, Any]:
    venv = checkout / ".venv"
    size = sum(f.stat().st_size for f in venv.rglob("*") if f.is_file() and not f.is_symlink())
    dists = list(venv.glob("lib/python*/site-packages/*.dist-info"))
    return {"venv_mb": round(size / 1e6, 1), "packages": len(dists)}


def run(command: str, checkout: Path, env: dict[str, str], full: bool) -> dict[str, Any]:
    """Time one README command: seconds to the end of setup, and to the end if ``full``."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        ["bash", "-x", f"scripts/{command}"],
        cwd=checkout,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    assert proc.stderr is not None
    setup = None
    tail: list[str] = []
    for line in proc.stderr:
        tail = [*tail[-40:], line.rstrip()]
        if setup is None and AFTER_SETUP.match(line):
            setup = time.perf_counter() - start
            if not full:
                os.killpg(proc.pid, signal.SIGTERM)
                break
        if time.perf_counter() - start > TIMEOUT:
            os.killpg(proc.pid, signal.SIGTERM)
            break
    code = proc.wait()
    total = time.perf_counter() - start
    if setup is None or (full and code != 0):
        raise RuntimeError(f"scripts/{command} in {checkout} failed ({code}):\n" + "\n".join(tail))
    result: dict[str, Any] = {"setup_s": round(setup, 2), **venv_facts(checkout)}
    if full:
        result["total_s"] = round(total, 2)
        dirty = git("status", "--porcelain", "--untracked-files=all", cwd=checkout)
        if dirty:
            raise RuntimeError(f"scripts/{command} left files that git status shows:\n{dirty}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", default=BEFORE, help="commit whose scripts use pip")
    parser.add_argument("--after", default="HEAD", help="commit whose scripts use uv")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--workdir", type=Path, help="default: a temporary directory")
    args = parser.parse_args(argv)

    revs = {"pip": git("rev-parse", args.before), "uv": git("rev-parse", args.after)}
    work = Path(tempfile.mkdtemp(prefix="uac-setup-", dir=args.workdir))
    runs: list[dict[str, Any]] = []
    load = [os.getloadavg()[0]]
    try:
        warm = work / "cache-warm"
        print("filling the warm uv cache (untimed) ...", file=sys.stderr)
        prime = work / "prime"
        clone(revs["uv"], prime)
        run("test", prime, environment(warm), full=False)
        shutil.rmtree(prime)
        for rnd in range(1, args.rounds + 1):
            for variant in VARIANTS:
                for command in COMMANDS:
                    checkout = work / f"clone-{rnd}-{variant.replace(', ', '-')}-{command}"
                    clone(revs["pip" if variant == "pip" else "uv"], checkout)
                    cache = warm if variant == "uv, warm" else work / f"cache-{checkout.name}"
                    result = run(command, checkout, environment(cache), full=command == "demo")
                    runs.append({"round": rnd, "variant": variant, "command": command, **result})
                    print(json.dumps(runs[-1]), file=sys.stderr)
                    shutil.rmtree(checkout)
                    if cache != warm:
                        shutil.rmtree(cache, ignore_errors=True)
                    load.append(os.getloadavg()[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)

    summary: dict[str, dict[str, Any]] = {}
    for command in COMMANDS:
        medians = {
            v: statistics.median(
                r["setup_s"] for r in runs if r["variant"] == v and r["command"] == command
            )
            for v in VARIANTS
        }
        summary[command] = {
            "setup_s_median": medians,
            "vs_pip": {v: round(medians[v] / medians["pip"], 3) for v in VARIANTS[1:]},
        }
    results = {
        "date": datetime.now().isoformat(timespec="minutes"),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average_1min": {"min": min(load), "max": max(load)},
        },
        "commits": revs,
        "rounds": args.rounds,
        "target": "uv's setup at most a third of pip's (issue 11)",
        "summary": summary,
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"{'setup seconds (median)':<24}" + "".join(f"{v:>12}" for v in VARIANTS))
    for command in COMMANDS:
        m = summary[command]["setup_s_median"]
        print(f"{'./scripts/' + command:<24}" + "".join(f"{m[v]:>12.1f}" for v in VARIANTS))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
