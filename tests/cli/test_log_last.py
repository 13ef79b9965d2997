"""`uac log --last N`: the N newest events, oldest first, like a tail; with --kind of that kind,
with --after the newest N after that seq; not with --limit. `--limit 0` is every event."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import one_line_error, uac, uac_here

TRIP = {"kind": "fact", "op": "add", "type": "Trip", "fields": {"city": "Tokyo"}}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A store of 12 utterances and 3 facts, interleaved."""
    lines = []
    for i in range(1, 16):
        ts = f"2025-01-{i:02d}"
        if i % 5 == 0:
            lines.append({**TRIP, "ts": ts, "key": f"t{i}"})
        else:
            lines.append({"kind": "utterance", "ts": ts, "speaker": "user", "text": f"hello {i}"})
    (tmp_path / "e.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    env = {"UAC_DB": str(tmp_path / "s.duckdb"), "UAC_USER": "maya"}
    assert uac_here("ingest", str(tmp_path / "e.jsonl"), cwd=tmp_path, env=env).returncode == 0
    return env


def _seqs(out: str) -> list[int]:
    return [int(line.split("\t")[0]) for line in out.splitlines()[1:]]


def test_last_is_the_newest_oldest_first(tmp_path: Path, env: dict[str, str]) -> None:
    every = _seqs(uac_here("log", "--limit", "0", cwd=tmp_path, env=env).stdout)
    assert len(every) > 15  # the events and their schema events: --limit 0 is no limit
    assert _seqs(uac_here("log", "--limit", "5", cwd=tmp_path, env=env).stdout) == every[:5]
    done = uac_here("log", "--last", "3", cwd=tmp_path, env=env)
    assert _seqs(done.stdout) == every[-3:]
    assert done.stderr == "the newest 3 events, oldest first\n"
    facts = uac_here("log", "--last", "2", "--kind", "fact", cwd=tmp_path, env=env)
    rows = facts.stdout.splitlines()[1:]
    assert len(rows) == 2 and all("\tfact\t" in r for r in rows) and "t15" in rows[-1]
    assert "t10" in rows[0] and facts.stderr == "the newest 2 events of kind fact, oldest first\n"
    # with --after: the newest N of those after the seq, and the note says when they are all
    after = uac_here("log", "--last", "4", "--after", str(every[-2]), cwd=tmp_path, env=env)
    assert _seqs(after.stdout) == every[-1:]
    assert (
        after.stderr == f"the newest 1 event after seq {every[-2]} (all there are), oldest first\n"
    )
    got = json.loads(uac_here("log", "--last", "2", "--json", cwd=tmp_path, env=env).stdout)
    assert [e["seq"] for e in got] == every[-2:]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--last", "0"], "argument --last: must be positive, got 0; see uac log --help"),
        (["--last", "-3"], "argument --last: must be positive, got -3"),
        (["--last", "ten"], "argument --last: expected a whole number, got 'ten'"),
        (["--last", "3", "--limit", "2"], "argument --limit: not allowed with argument --last"),
        (["--limit", "2", "--last", "3"], "argument --last: not allowed with argument --limit"),
    ],
)
def test_a_bad_last_is_one_line(
    argv: list[str], message: str, tmp_path: Path, env: dict[str, str]
) -> None:
    assert message in one_line_error(uac_here("log", *argv, cwd=tmp_path, env=env))


def test_last_in_a_real_process(tmp_path: Path, env: dict[str, str]) -> None:
    done = uac("log", "--last", "1", "--kind", "fact", cwd=tmp_path, env=env)
    assert done.returncode == 0 and "t15" in done.stdout and len(done.stdout.splitlines()) == 2
    assert "--last N" in uac("log", "--help", cwd=tmp_path, env=env).stdout
