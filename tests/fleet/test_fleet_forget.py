"""A forget reaches every file uac wrote in a fleet directory: the run inputs, results and
summaries of `uac fleet run`, not only the partitions; `uac verify DIR` fails while one of
them still predates a forget; a kill during the export that carries a forget leaves the
directory as it was before or failing verify, never half-forgotten and verifying. Real `uac`
subprocesses on real files throughout."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

SECRET = "Quixotrelline"  # a made-up word: it appears nowhere else
USERS = ["ana", "bob"]


def uac(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "uac_kernel.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "UAC_LOCK_TIMEOUT": "30"},
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


def source(path: Path) -> Path:
    """One JSONL whose objects name their user: ana's allergy holds the secret."""
    lines: list[dict[str, Any]] = []
    for user in USERS:
        lines += [
            {"user": user, "kind": "fact", "ts": "2025-03-01T09:00:00", "op": "add",
             "type": "Trip", "key": "lisbon", "fields": {"destination": "Lisbon"},
             "source": f"{user}#1"},
            {"user": user, "kind": "utterance", "ts": "2025-03-01T09:01:00", "speaker": "user",
             "text": "see you in Lisbon", "source": f"{user}#2"},
        ]  # fmt: skip
    lines.append(
        {"user": "ana", "kind": "fact", "ts": "2025-03-02T09:00:00", "op": "add",
         "type": "Allergy", "key": "a1", "fields": {"substance": SECRET}, "source": "ana#3"}
    )  # fmt: skip
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def holding(root: Path, text: str = SECRET) -> list[str]:
    """Every file under ``root`` whose bytes hold ``text``."""
    needle = text.encode()
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and needle in p.read_bytes()
    )


@pytest.fixture
def fleet(tmp_path: Path) -> Path:
    """A fleet after `fleet run ingest` and `fleet run eval` whose answer holds the secret."""
    root = tmp_path / "fleet"
    uac("fleet", "run", str(root), "ingest", str(source(tmp_path / "all.jsonl")))
    uac("fleet", "run", str(root), "eval", "[a.substance for a in user.all('Allergy')]")
    assert {"input", "results", "summary"} <= {
        Path(p).parts[2].split(".")[0] for p in holding(root) if p.startswith("runs/")
    }
    return root


def forgotten_in_store(fleet: Path, tmp_path: Path) -> Path:
    """The `uac import` of the fleet into a store, then `uac forget --text` of the secret."""
    store = tmp_path / "s.duckdb"
    uac("import", str(fleet), str(store))
    uac("forget", "--db", str(store), "--user", "ana", "--text", SECRET)
    return store


def test_a_forget_carried_by_export_reaches_run_inputs_results_and_summaries(
    fleet: Path, tmp_path: Path
) -> None:
    store = forgotten_in_store(fleet, tmp_path)
    assert SECRET.encode() not in store.read_bytes()
    out = uac("export", str(store), str(fleet)).stdout
    assert holding(fleet) == []
    # the report names what it deleted and rewrote, and what it cannot reach
    assert "deleted" in out and "rewrote" in out and "summary.parquet" in out
    lines = out.splitlines()  # one line each, as printed, not escaped into one
    assert len(lines) > 3 and "\\n" not in out
    assert any(line.startswith("  deleted ") for line in lines)
    assert "run.json" in out  # the job's arguments, as typed: not reached
    assert uac("verify", str(fleet)).returncode == 0
    # bob's results stay; ana is run again by the next run of the same job, on what is left
    rerun = uac("fleet", "run", str(fleet), "eval", "[a.substance for a in user.all('Allergy')]")
    assert "1 ok" in rerun.stdout and holding(fleet) == []


def test_verify_fails_while_a_run_file_predates_a_forget(fleet: Path, tmp_path: Path) -> None:
    kept = {p: (fleet / p).read_bytes() for p in holding(fleet) if p.startswith("runs/")}
    records = {
        json.loads(r.read_text())["path"]: (r.relative_to(fleet), r.read_bytes())
        for r in fleet.glob("_written/*/*.json")
    }
    store = forgotten_in_store(fleet, tmp_path)
    uac("export", str(store), str(fleet))
    # put one copy back with its record, as a forget cut short after the base commit leaves it
    for rel, data in kept.items():
        record, body = records[rel]
        for path, content in ((fleet / rel, data), (fleet / record, body)):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        bad = uac("verify", str(fleet), check=False)
        assert bad.returncode != 0 and rel in bad.stderr, (rel, bad.stderr)
        assert "before a forget" in bad.stderr
        (fleet / rel).unlink()
        (fleet / record).unlink()
    assert uac("verify", str(fleet)).returncode == 0


def test_a_kill_during_the_export_of_a_forget_leaves_before_or_failing(
    fleet: Path, tmp_path: Path
) -> None:
    store = forgotten_in_store(fleet, tmp_path)
    for delay in (0.0, 0.3, 0.6, 0.9, 1.2, 1.5, 2.0, 3.0):
        proc = subprocess.Popen(
            [sys.executable, "-m", "uac_kernel.cli.main", "export", str(store), str(fleet)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        verified = uac("verify", str(fleet), check=False).returncode == 0
        leaked = bool(holding(fleet))
        # a directory that verifies is the one before the forget (whole) or after it (clean)
        assert not (verified and leaked and not _before(fleet)), holding(fleet)
        if not leaked:
            break
    uac("export", str(store), str(fleet))  # a later export finishes what a killed one began
    assert holding(fleet) == [] and uac("verify", str(fleet)).returncode == 0


def _before(root: Path) -> bool:
    """Whether ana's partition is still as before the forget: no base commit past the first."""
    commits = sorted(root.glob("_commits/bucket=*/user=ana/*.json"))
    return not any(json.loads(p.read_text())["base"] for p in commits[1:])


def test_an_input_split_cut_short_fails_verify_and_goes_with_the_next_export(
    fleet: Path, tmp_path: Path
) -> None:
    """A `fleet run ingest` killed while it split its input leaves a `.split-*` directory of
    users' events beside the splits: uac's own (not listed as a file it did not write), a
    failure of `uac verify DIR` while it stays, deleted by the next export (or split)."""
    (done,) = fleet.glob("runs/*/input/*")
    left = done.parent / ".split-dead0001"
    shutil.copytree(done, left)  # as a split killed before its rename leaves it
    assert any(p.startswith(str(left.relative_to(fleet))) for p in holding(fleet))
    bad = uac("verify", str(fleet), check=False)
    assert bad.returncode != 0 and ".split-dead0001" in bad.stderr, bad.stderr
    store = forgotten_in_store(fleet, tmp_path)
    out = uac("export", str(store), str(fleet)).stdout
    assert ".split-" not in out  # not listed as a file uac did not write
    assert not left.exists() and holding(fleet) == []
    assert uac("verify", str(fleet)).returncode == 0
