"""`uac history TYPE KEY`: a header (whose record, how many versions), then how each version
came — asserted, updated, retracted — with the seq, time and reason of its event; a hostile
reason prints escaped on one line, cut in the table and whole in --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cli import uac, uac_here

from uac_kernel.render.history import REASON_CHARS

HOSTILE = (
    "the user said so\n\x1b[31mred\x1b[0m \u202etxt.exe\r" + "word " * 199_990
)  # 1 MB, the most a reason holds


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    trip = {"kind": "fact", "type": "Trip", "key": "tokyo"}
    lines = [
        {**trip, "ts": "2025-03-02", "op": "add", "fields": {"city": "Tokyo"}},
        {**trip, "ts": "2025-04-01", "op": "update", "fields": {"end": "2025-03-01"},
         "reason": HOSTILE},
        {**trip, "ts": "2025-05-01", "op": "retract", "reason": "never happened"},
        {**trip, "ts": "2025-05-02", "op": "add", "key": "kyoto", "fields": {"city": "Kyoto"}},
    ]  # fmt: skip
    (tmp_path / "e.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    env = {"UAC_DB": str(tmp_path / "s.duckdb"), "UAC_USER": "maya"}
    assert uac_here("ingest", str(tmp_path / "e.jsonl"), cwd=tmp_path, env=env).returncode == 0
    return env


def test_history_says_how_each_version_came(tmp_path: Path, env: dict[str, str]) -> None:
    done = uac_here("history", "Trip", "tokyo", cwd=tmp_path, env=env)
    assert done.returncode == 0 and done.stderr == ""
    header, columns, *rows = done.stdout.splitlines()
    assert header == "Trip 'tokyo' of user 'maya': 2 versions, retracted"
    assert columns.split("\t")[:5] == ["how", "seq", "at", "reason", "version"]
    cells = [r.split("\t") for r in rows]
    assert [c[0] for c in cells] == ["asserted", "updated", "retracted"]
    assert [c[4] for c in cells] == ["1", "2", ""]
    assert [c[2] for c in cells] == ["2025-03-02 00:00", "2025-04-01 00:00", "2025-05-01 00:00"]
    seqs = [int(c[1]) for c in cells]
    assert seqs == sorted(seqs) and cells[2][3] == "never happened" and cells[0][3] == ""
    # the hostile reason: one line, no raw control character, cut at a word
    reason = cells[1][3]
    assert reason.startswith("the user said so \\u001b[31mred\\u001b[0m \\u202etxt.exe")
    assert reason.endswith("…") and len(reason) < REASON_CHARS + 40
    assert not any(ch in done.stdout for ch in "\x1b\r\u202e")
    assert len(rows) == 3 and all(len(r) < 1000 for r in rows)
    one = uac_here("history", "Trip", "kyoto", cwd=tmp_path, env=env).stdout.splitlines()
    assert one[0] == "Trip 'kyoto' of user 'maya': 1 version" and one[2].startswith("asserted\t")


def test_history_json_holds_every_reason_whole(tmp_path: Path, env: dict[str, str]) -> None:
    done = uac("history", "Trip", "tokyo", "--json", cwd=tmp_path, env=env)  # a real process
    assert done.returncode == 0 and done.stderr == ""
    assert "\x1b" not in done.stdout and done.stdout.count("\n") == 1
    got = json.loads(done.stdout)
    assert (got["type"], got["key"], got["user"], got["versions"], got["retracted"]) == (
        "Trip", "tokyo", "maya", 2, True,
    )  # fmt: skip
    steps = got["steps"]
    assert [s["how"] for s in steps] == ["asserted", "updated", "retracted"]
    assert [s["reason"] for s in steps] == [None, HOSTILE, "never happened"]
    assert steps[1]["fields"] == {"city": "Tokyo", "end": "2025-03-01"}
    assert steps[1]["sources"] == [steps[0]["seq"], steps[1]["seq"]]
    assert steps[2]["version"] is None and steps[2]["at"] == "2025-05-01T00:00:00"


def test_history_of_an_unknown_key_is_one_line(tmp_path: Path, env: dict[str, str]) -> None:
    done = uac_here("history", "Trip", "tokio", cwd=tmp_path, env=env)
    assert done.returncode == 1 and "Did you mean 'tokyo'" in done.stderr
    assert done.stderr.count("\n") == 1


def test_history_shows_the_asserted_fields_then_only_what_each_update_changed(
    tmp_path: Path, env: dict[str, str]
) -> None:
    trip = {"kind": "fact", "type": "Trip", "key": "lisbon"}
    lines = [
        {**trip, "ts": "2025-06-01", "op": "add",
         "fields": {"city": "Lisbon", "start": "2025-09-05", "end": "2025-09-12"}},
        {**trip, "ts": "2025-06-02", "op": "update", "fields": {"end": "2025-09-15"},
         "reason": "ferry moved"},
    ]  # fmt: skip
    (tmp_path / "l.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert uac_here("ingest", str(tmp_path / "l.jsonl"), cwd=tmp_path, env=env).returncode == 0
    done = uac_here("history", "Trip", "lisbon", cwd=tmp_path, env=env)
    assert done.returncode == 0 and done.stderr == ""
    _, columns, *rows = done.stdout.splitlines()
    assert columns.split("\t") == [
        "how", "seq", "at", "reason", "version", "valid_from", "valid_to", "fields",
    ]  # fmt: skip
    asserted, updated = (r.split("\t") for r in rows)
    assert asserted[0] == "asserted" and asserted[-1] == (
        "city=Lisbon, end=2025-09-12, start=2025-09-05"  # the type's field order
    )
    assert updated[0] == "updated" and updated[-1] == "end=2025-09-15"
    # --json keeps every field of each version
    steps = json.loads(
        uac_here("history", "Trip", "lisbon", "--json", cwd=tmp_path, env=env).stdout
    )
    assert steps["steps"][1]["fields"] == {
        "city": "Lisbon", "end": "2025-09-15", "start": "2025-09-05",
    }  # fmt: skip


def test_a_plain_update_without_a_reason_is_updated_not_corrected(
    tmp_path: Path, env: dict[str, str]
) -> None:
    entry = {"kind": "fact", "type": "RaceEntry", "key": "roma"}
    lines = [
        {**entry, "ts": "2026-03-01", "op": "add", "fields": {"deadline": "2026-03-05"}},
        {**entry, "ts": "2026-03-03", "op": "update", "fields": {"entryPaid": True}},
    ]
    (tmp_path / "r.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert uac_here("ingest", str(tmp_path / "r.jsonl"), cwd=tmp_path, env=env).returncode == 0
    done = uac_here("history", "RaceEntry", "roma", cwd=tmp_path, env=env)
    _, _, *rows = done.stdout.splitlines()
    assert [r.split("\t")[0] for r in rows] == ["asserted", "updated"]
    assert rows[1].split("\t")[3] == ""  # it gave no reason
