"""Integrity of a real store file: per-user chains of events, model calls and checkpoints, kept
heads, one writer per process, and the migration of stores written with the old single chain.

Each tampering is done as an outside tool would: a second DuckDB connection editing the file.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import duckdb
import pytest
from helpers.events import fact
from helpers.store import check, tamper

from uac_kernel.core.errors import StoreError
from uac_kernel.log.integrity import Head, heads, verify
from uac_kernel.log.store import NewEvent, Store
from uac_kernel.workbench import Workbench

UAC = [sys.executable, "-m", "uac_kernel.cli.main"]


def facts(user: str, n: int, start: int = 0) -> list[dict[str, object]]:
    return [
        fact(f"2025-01-{1 + (i % 28):02d}T10:00:00", "add", "Trip", f"{user}-{i}", city=f"c{i}")
        for i in range(start, start + n)
    ]


def record_call(store: Store, user: str, text: str) -> int:
    return store.record_call(
        user=user,
        purpose="extraction",
        model="m",
        base_url="",
        request_key=hashlib.sha256(text.encode()).hexdigest(),
        request=json.dumps({"messages": [{"role": "user", "content": text}]}),
        response="{}",
        content=text,
        tokens_in=1,
        tokens_out=1,
        latency_ms=1.0,
        outcome="ok",
        error="",
    )


@pytest.fixture
def store_file(db: Path) -> Path:
    """alice and bob interleaved, each with checkpoints and a model call."""
    with Workbench(db, user="alice") as a, Workbench(db, user="bob") as b:
        a.ingest(facts("alice", 5))
        b.ingest(facts("bob", 5))
        a.checkpoint()
        record_call(a.store, "alice", "alice said something")
        a.ingest(facts("alice", 3, 5))
        a.checkpoint()
        b.ingest(facts("bob", 2, 5))
    return db


def test_an_untouched_store_verifies_per_user_and_store_wide(store_file: Path) -> None:
    assert check(store_file) == ""
    assert check(store_file, "alice") == check(store_file, "bob") == ""
    store = Store(store_file, read_only=True)
    report = verify(store)
    total = store.con.execute("SELECT count(*) FROM events").fetchone()
    assert (report.users, report.calls, report.checkpoints) == (2, 1, 2)
    assert total is not None and report.events == total[0]
    assert verify(store, "alice").events < report.events
    store.close()


def test_two_workbenches_on_one_file_in_one_process_keep_every_chain(db: Path) -> None:
    """The issue's case: `a = uac.open(f, user="alice"); b = uac.open(f, user="bob")`, each
    ingesting, wrote the same seqs; now they share the process's writer lock and re-read the
    heads the other moved."""
    a, b = Workbench(db, user="alice"), Workbench(db, user="bob")
    for i in range(4):
        a.ingest(facts("alice", 2, 2 * i))
        b.ingest(facts("bob", 2, 2 * i))
    seqs = [r[0] for r in a.store.con.execute("SELECT seq FROM events ORDER BY seq").fetchall()]
    assert seqs == list(range(1, len(seqs) + 1))
    assert a.verify(all_users=True).ok
    a.close()
    b.close()


def test_two_stores_appending_from_threads_never_repeat_a_seq(db: Path) -> None:
    import threading

    stores = [Store(db), Store(db)]

    def write(store: Store, user: str) -> None:
        for i in range(30):
            store.append([NewEvent(datetime(2025, 1, 1), "utterance", user, {"t": i}, None)])

    threads = [
        threading.Thread(target=write, args=(s, u)) for s, u in zip(stores, "ab", strict=True)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    report = verify(stores[0])
    assert report.ok and report.events == 60
    for s in stores:
        s.close()


TAMPERING: list[tuple[str, str, str]] = [
    ("edited payload", "UPDATE events SET payload = '{}' WHERE seq = 3", "changed after"),
    (
        "payload and its hash replaced",
        "UPDATE events SET payload = '{}', payload_hash = repeat('0', 64) WHERE seq = 3",
        "changed after",
    ),
    ("erased without a forget event", "UPDATE events SET salt = '' WHERE seq = 3", "no forget"),
    ("event deleted", "DELETE FROM events WHERE seq = 4", "missing or repeated"),
    ("kind changed", "UPDATE events SET kind = 'utterance' WHERE seq = 2", "changed after"),
    ("ts moved", "UPDATE events SET ts = ts + INTERVAL 1 DAY WHERE seq = 2", "changed after"),
    (
        "event moved to another user",
        "UPDATE events SET user_id = 'bob' WHERE user_id = 'alice' AND user_seq = 2",
        "missing or repeated",
    ),
    (
        "model call answer edited",
        "UPDATE model_calls SET content = 'forged'",
        "model call 1 was changed",
    ),
    ("model call deleted", "DELETE FROM model_calls", ""),
    (
        "checkpoint code edited",
        "UPDATE checkpoint_segments SET text = text || '# x' WHERE version = 1 AND segment = '0'",
        "code of checkpoint 1 was changed",
    ),
    (
        "checkpoint deleted",
        "DELETE FROM checkpoints WHERE version = 1",
        "checkpoint 1 is missing",
    ),
    (
        "last events of alice truncated past a checkpoint",
        "DELETE FROM events WHERE user_id = 'alice' AND user_seq > 6",
        "removed from the end",
    ),
]


@pytest.mark.parametrize(("sql", "expect"), [pytest.param(s, e, id=i) for i, s, e in TAMPERING])
def test_tampering_is_caught(store_file: Path, sql: str, expect: str) -> None:
    store = Store(store_file, read_only=True)
    kept = heads(store)
    store.close()
    tamper(store_file, sql)
    problem = check(store_file, "alice", kept={"alice": kept["alice"]})
    assert problem, "the tampering went unnoticed"
    assert expect in problem
    if "SET user_id" not in sql:
        assert check(store_file, "bob") == ""  # the other user's chains are untouched


def rehash_user(db: Path, user: str) -> None:
    """The strongest forger: edits an event of ``user`` and re-computes their whole chain."""
    from uac_kernel.core.chain import GENESIS, content_hash, event_hash

    con = duckdb.connect(str(db))
    con.execute(
        'UPDATE events SET payload = \'{"text":"forged"}\' WHERE user_id = ? AND user_seq = 2',
        [user],
    )
    rows = con.execute(
        "SELECT seq, user_seq, recorded_at, ts, kind, source, payload, salt FROM events "
        "WHERE user_id = ? ORDER BY seq",
        [user],
    ).fetchall()
    prev = GENESIS
    for seq, user_seq, rec, ts, kind, src, payload, salt in rows:
        ph = content_hash(salt, payload, src or "")
        prev = event_hash(prev, user_seq, rec, ts, kind, user, ph)
        con.execute("UPDATE events SET payload_hash = ?, hash = ? WHERE seq = ?", [ph, prev, seq])
    con.close()


def test_a_rehashed_chain_is_caught_by_a_kept_head_and_by_checkpoints(store_file: Path) -> None:
    store = Store(store_file, read_only=True)
    kept = heads(store)
    store.close()
    rehash_user(store_file, "alice")
    # The checkpoints and the model call name alice's event head at their time.
    assert "rewritten" in check(store_file, "alice")
    # Without checkpoints or calls, only the kept head can tell.
    tamper(store_file, "DELETE FROM checkpoints")
    tamper(store_file, "DELETE FROM checkpoint_segments")
    tamper(store_file, "DELETE FROM model_calls")
    assert check(store_file, "alice") == ""
    problem = check(store_file, "alice", kept={"alice": kept["alice"]})
    assert "does not pass through the kept head" in problem


def test_truncation_of_the_last_events_is_caught_by_the_kept_head(store_file: Path) -> None:
    store = Store(store_file, read_only=True)
    kept = heads(store)
    store.close()
    tamper(store_file, "DELETE FROM events WHERE user_id = 'bob' AND user_seq > 5")
    assert check(store_file, "bob") == ""  # a shorter chain is still a chain
    assert "some were removed" in check(store_file, "bob", kept={"bob": kept["bob"]})
    # store-wide, the gap in seq shows it even without a head
    assert "not 1.." in check(store_file)


def test_a_head_of_a_user_that_was_removed_fails(store_file: Path) -> None:
    store = Store(store_file, read_only=True)
    kept = heads(store)
    store.close()
    for table in ("events", "model_calls", "checkpoints", "checkpoint_segments"):
        tamper(store_file, f"DELETE FROM {table} WHERE user_id = 'bob'")
    assert "has no events" in check(store_file, kept=kept)


def test_an_older_head_still_verifies_after_the_store_grew(store_file: Path) -> None:
    store = Store(store_file, read_only=True)
    kept = heads(store)
    store.close()
    with Workbench(store_file, user="alice") as wb:
        wb.ingest(facts("alice", 4, 20))
        wb.checkpoint()
    assert check(store_file, kept=kept) == ""


def test_head_parses_back_and_refuses_garbage() -> None:
    head = Head(3, "a" * 64, 0, "0" * 64, 1, "b" * 64)
    assert Head.parse(str(head)) == head
    for bad in ("", "e3", str(head)[:-1], str(head).replace("-c", "-x"), "e1.x-c1.y-k1.z"):
        with pytest.raises(StoreError, match="not a head printed by `uac head`"):
            Head.parse(bad)


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*UAC, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_cli_head_and_verify_against_a_kept_head(store_file: Path, tmp_path: Path) -> None:
    db = str(store_file)
    out = cli("head", "--db", db, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    (tmp_path / "heads.txt").write_text(out.stdout)
    assert len(out.stdout.splitlines()) == 2 and '\t"alice"' in out.stdout
    one = cli("head", "--db", db, "--user", "bob", cwd=tmp_path).stdout.strip()
    ok = cli("verify", "--db", db, "--head", "heads.txt", cwd=tmp_path)
    assert ok.returncode == 0 and "passes through 2 kept head(s)" in ok.stdout, ok.stderr
    ok = cli("verify", "--db", db, "--user", "bob", "--head", one, cwd=tmp_path)
    assert ok.returncode == 0 and "1 user(s)" in ok.stdout, ok.stderr
    tamper(store_file, "DELETE FROM events WHERE user_id = 'bob' AND user_seq > 6")
    bad = cli("verify", "--db", db, "--head", "heads.txt", cwd=tmp_path)
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1
    assert "user 'bob'" in bad.stderr and "removed" in bad.stderr
    bare = cli("verify", "--db", db, "--head", one, cwd=tmp_path)
    assert bare.returncode == 1 and "pass --user USER" in bare.stderr


# -- migration from the single store-wide chain -------------------------------------------


def _v1_store(path: Path, break_at: int | None = None) -> None:
    """A store as uac wrote it before per-user chains (migrations m001-m003, one chain)."""
    from uac_kernel.log.migrations import MIGRATIONS, _v1_event_hash

    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE uac_migrations (name VARCHAR NOT NULL, applied_at TIMESTAMP)")
    for name, fn in MIGRATIONS[:3]:
        fn(con)
        con.execute("INSERT INTO uac_migrations VALUES (?, current_timestamp)", [name])
    prev, now = "0" * 64, datetime(2025, 6, 1, 12)
    for seq in range(1, 7):
        user = "alice" if seq % 2 else "bob"
        payload = json.dumps({"speaker": "user", "text": f"t{seq}"}, separators=(",", ":"))
        ts = datetime(2025, 1, seq)
        h = _v1_event_hash(prev, seq, now, ts, "utterance", user, f"s{seq}", payload)
        if seq == break_at:
            payload = payload.replace("t", "T")
        con.execute(
            "INSERT INTO events VALUES (?, ?, ?, 'utterance', ?, ?, ?, ?)",
            [seq, now, ts, user, f"s{seq}", payload, h],
        )
        prev = h
    con.execute(
        "INSERT INTO model_calls VALUES (1, ?, 'alice', 'ask', 'm', '', 'k', '{}', '{}', 'a', "
        "1, 1, 1.0, 'ok', '')",
        [now],
    )
    con.close()


def test_an_old_store_is_migrated_to_per_user_chains(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    _v1_store(path)
    with Workbench(path, user="alice") as wb:
        assert wb.verify(all_users=True).ok
        assert [e.payload["text"] for e in wb.log()] == ["t1", "t3", "t5"]
        wb.ingest(facts("alice", 2))
        report = wb.verify(all_users=True)
        total = wb.store.con.execute("SELECT count(*) FROM events").fetchone()
    assert report.ok and report.calls == 1 and total is not None and report.events == total[0]


def test_an_old_store_with_a_broken_chain_is_not_rehashed_into_a_valid_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "old.duckdb"
    _v1_store(path, break_at=4)
    with pytest.raises(StoreError, match="broken at seq 4, so it is not upgraded"):
        Store(path)
    # nothing was changed: the old tables are as they were
    con = duckdb.connect(str(path), read_only=True)
    columns = [r[0] for r in con.execute("DESCRIBE events").fetchall()]
    con.close()
    assert "payload_hash" not in columns


def _damaged_copies(src: Path, tmp_path: Path) -> dict[str, Path]:
    data = src.read_bytes()
    half = len(data) // 2
    blobs = {
        "truncated to half": data[:half],
        "truncated to 4 KiB": data[:4096],
        "a block overwritten": data[:half] + bytes(4096) + data[half + 4096 :],
        "random bytes after the magic": data[:12] + bytes(range(256)) * ((len(data) - 12) // 256),
        "one header byte flipped": data[:20] + bytes([data[20] ^ 0xFF]) + data[21:],
    }
    out = {}
    for name, blob in blobs.items():
        path = tmp_path / f"{name.replace(' ', '-')}.duckdb"
        path.write_bytes(blob)
        out[name] = path
    return out


def test_a_damaged_store_file_is_one_line_on_every_command(db: Path, tmp_path: Path) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest(facts("u", 1500))
        wb.checkpoint()
    for name, path in _damaged_copies(db, tmp_path).items():
        for args in (["eval", "len(user.all('Trip'))"], ["verify"], ["log", "--limit", "3"]):
            out = cli("--db", str(path), "--user", "u", *args, cwd=tmp_path)
            # a damaged block the command never reads does not stop it: `log --limit 3` reads
            # three events and an open from the checkpoint's snapshot its tables and the log's
            # last event, so they may answer from a truncated file; verify reads every event
            if name.startswith("truncated") and args[0] == "verify":
                assert out.returncode, name
            if not out.returncode and args[0] == "eval":
                assert out.stdout.strip() == "1500", (name, out.stdout)
            assert "Traceback" not in out.stderr
            if out.returncode:
                assert len(out.stderr.strip().splitlines()) == 1, (name, args, out.stderr)
                assert "Traceback" not in out.stderr
                assert "damaged" in out.stderr or "not a uac store" in out.stderr, out.stderr


def test_a_reader_beside_a_writer_in_one_process(db: Path) -> None:
    writer = Workbench(db, user="u")
    writer.ingest(facts("u", 2))
    reader = Workbench(db, user="u", read_only=True)
    writer.ingest(facts("u", 1, 2))
    # a reader in the same process folds what the writer appended since it opened
    assert reader.store.read_only and reader.eval("len(user.all(Trip))") == 3
    with pytest.raises(StoreError, match="read-only"):
        reader.store.append([NewEvent(datetime(2025, 1, 1), "utterance", "u", {}, None)])
    reader.close()
    writer.close()
    reader = Workbench(db, user="u", read_only=True)
    with pytest.raises(StoreError, match="open read-only in this process; close that workbench"):
        Workbench(db, user="u")
    reader.close()
    with Workbench(db, user="u") as again:
        assert again.verify().ok
