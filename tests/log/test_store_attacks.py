"""Adversarial cases against the store's integrity and forgetting: forgers who edit and re-hash
events, calls, checkpoints, salts and forget events; truncation, reordering, duplicates; hostile
user ids, sources and texts; forget matching; erased bytes left in the file; two workbenches in
one process; kill -9 at awkward moments; migration of hand-made old stores; garbage heads.

Every case uses real DuckDB files, real subprocesses for the CLI and no mocks (the crash points
kill a real ``uac`` process with SIGKILL at a chosen moment). The 16 bugs this pass found were
fixed; their cases, once strict xfails, now pass like the rest.
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
import unicodedata
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import pytest
from helpers.cli import uac_here
from helpers.events import fact
from helpers.store import check, tamper

from uac_kernel.core.chain import GENESIS, call_hash, content_hash, event_hash, new_salt
from uac_kernel.core.errors import StoreError
from uac_kernel.log.integrity import Head, heads, verify
from uac_kernel.log.migrations import MIGRATIONS, _v1_event_hash
from uac_kernel.log.store import NewEvent, Store
from uac_kernel.workbench import Workbench

UAC = [sys.executable, "-m", "uac_kernel.cli.main"]
SECRET = "Zyloprimarex"  # a made-up drug name: it appears nowhere else


# -- helpers ---------------------------------------------------------------------------------


def utt(i: int, text: str | None = None, source: str | None = None) -> dict[str, Any]:
    return {
        "kind": "utterance",
        "ts": f"2025-01-{1 + i % 28:02d}T09:00:00",
        "speaker": "user",
        "text": text if text is not None else f"message number {i}",
        "source": source or f"chat#{i}",
    }


def trip(key: str, **fields: Any) -> dict[str, Any]:
    return {
        **fact("2025-02-01T10:00:00", "add", "Trip", key, **(fields or {"destination": key})),
        "source": f"fact:{key}",
    }


def allergy(substance: str = SECRET, key: str = "a1") -> dict[str, Any]:
    return {
        **fact("2025-01-01T10:00:00", "add", "Allergy", key, substance=substance),
        "source": f"fact:{key}",
        "derived_from": ["chat#1"],
    }


def record_call(store: Store, user: str, text: str, **kw: Any) -> int:
    args: dict[str, Any] = dict(
        user=user,
        purpose="extraction",
        model="m",
        base_url="",
        request_key=hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
        request=json.dumps({"messages": [{"role": "user", "content": text}]}, ensure_ascii=False),
        response="{}",
        content=text,
        tokens_in=1,
        tokens_out=1,
        latency_ms=1.0,
        outcome="ok",
        error="",
    )
    args.update(kw)
    return store.record_call(**args)


def kept_heads(db: Path) -> dict[str, Head]:
    store = Store(db, read_only=True)
    try:
        return heads(store)
    finally:
        store.close()


def raw(db: Path) -> bytes:
    data = db.read_bytes()
    wal = Path(f"{db}.wal")
    return data + (wal.read_bytes() if wal.exists() else b"")


def cli(*args: str, cwd: Path, process: bool = False) -> subprocess.CompletedProcess[str]:
    """``uac ARGS`` (in this process unless ``process``: another process, to meet a lock)."""
    if process:
        return subprocess.run([*UAC, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    return uac_here(*args, cwd=cwd)


def one_line_error(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("uac: error: ")
    return lines[0]


def rehash_events(con: duckdb.DuckDBPyConnection, user: str) -> None:
    """Re-compute ``user``'s whole event chain from the rows as they are (the strong forger)."""
    rows = con.execute(
        "SELECT seq, user_seq, recorded_at, ts, kind, source, payload, salt, payload_hash "
        "FROM events WHERE user_id = ? ORDER BY seq",
        [user],
    ).fetchall()
    prev = GENESIS
    for seq, user_seq, rec, ts, kind, src, payload, salt, old in rows:
        ph = content_hash(salt, payload, src or "") if salt else old
        prev = event_hash(prev, user_seq, rec, ts, kind, user, ph)
        con.execute("UPDATE events SET payload_hash = ?, hash = ? WHERE seq = ?", [ph, prev, seq])


def raw_append(db: Path, user: str, kind: str, payload: str, salt: str | None = None) -> None:
    """Append an event to ``user``'s chain as a forger with write access would: correctly
    hashed, straight into the table."""
    con = duckdb.connect(str(db))
    last = con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()
    head = con.execute(
        "SELECT user_seq, hash FROM events WHERE user_id = ? ORDER BY seq DESC LIMIT 1", [user]
    ).fetchone()
    user_seq, prev = head if head else (0, GENESIS)
    salt = new_salt() if salt is None else salt
    ph = content_hash(salt, payload, "")
    now, ts = datetime(2025, 6, 1), datetime(2025, 6, 1)
    h = event_hash(prev, user_seq + 1, now, ts, kind, user, ph)
    con.execute(
        "INSERT INTO events VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [last[0] + 1 if last else 1, user_seq + 1, now, ts, kind, user, None, payload, salt, ph, h],
    )
    con.close()


@pytest.fixture
def two_users(db: Path) -> Path:
    """alice (facts, an allergy holding SECRET, two checkpoints, two model calls) and bob."""
    with Workbench(db, user="alice") as a, Workbench(db, user="bob") as b:
        a.ingest([utt(1, f"I am allergic to {SECRET}"), allergy(), trip("lisbon")])
        b.ingest([trip("bob-1"), trip("bob-2")])
        a.checkpoint()
        record_call(a.store, "alice", f"allergic to {SECRET}")
        a.ingest([trip("porto"), trip("rome")])
        record_call(a.store, "alice", "the trip to rome")
        a.checkpoint()
        b.ingest([trip("bob-3")])
    return db


# -- forgers: edits, re-hashes, reorderings, duplicates, truncations -------------------------

TAMPER: list[tuple[str, str, str]] = [
    (
        "salt-replaced",
        "UPDATE events SET salt = 'ff' || salt WHERE user_id = 'alice' AND user_seq = 3",
        "event {seq} was changed after it was written",
    ),
    (
        "salts-swapped",
        "UPDATE events SET salt = CASE user_seq WHEN 3 THEN (SELECT salt FROM events WHERE "
        "user_id = 'alice' AND user_seq = 4) ELSE (SELECT salt FROM events WHERE user_id = "
        "'alice' AND user_seq = 3) END WHERE user_id = 'alice' AND user_seq IN (3, 4)",
        "was changed after it was written",
    ),
    (
        "payload-hashes-swapped",
        "UPDATE events SET payload_hash = CASE user_seq WHEN 3 THEN (SELECT payload_hash FROM "
        "events WHERE user_id = 'alice' AND user_seq = 4) ELSE (SELECT payload_hash FROM events "
        "WHERE user_id = 'alice' AND user_seq = 3) END WHERE user_id = 'alice' "
        "AND user_seq IN (3, 4)",
        "was changed after it was written",
    ),
    (
        "user-seqs-swapped",
        "UPDATE events SET user_seq = 7 - user_seq WHERE user_id = 'alice' AND user_seq IN (3, 4)",
        "missing or repeated",
    ),
    (
        "seqs-of-one-user-swapped",
        "UPDATE events SET seq = CASE WHEN user_seq = 3 THEN (SELECT seq FROM events WHERE "
        "user_id = 'alice' AND user_seq = 4) ELSE (SELECT seq FROM events WHERE user_id = "
        "'alice' AND user_seq = 3) END WHERE user_id = 'alice' AND user_seq IN (3, 4)",
        "missing or repeated",
    ),
    (
        "event-row-duplicated",
        "INSERT INTO events SELECT * FROM events WHERE user_id = 'alice' AND user_seq = 2",
        "missing or repeated",
    ),
    (
        "whole-user-renamed",
        "UPDATE events SET user_id = 'mallory' WHERE user_id = 'alice'",
        "user 'alice': model call 1 was made when the user's log held 7 events, but it holds 0",
    ),
    (
        "recorded-at-moved",
        "UPDATE events SET recorded_at = recorded_at - INTERVAL 1 SECOND WHERE user_id = 'alice' "
        "AND user_seq = 2",
        "changed after it was written",
    ),
    (
        "source-renamed",
        "UPDATE events SET source = 'other' WHERE user_id = 'alice' AND user_seq = 3",
        "changed after it was written",
    ),
    (
        "call-moved-to-bob",
        "UPDATE model_calls SET user_id = 'bob' WHERE call_id = 1",
        "model call 2 was changed, removed or re-ordered",
    ),
    (
        "calls-reordered",
        "UPDATE model_calls SET call_id = 3 - call_id",
        "model call",
    ),
    (
        "call-tokens-edited",
        "UPDATE model_calls SET tokens_in = 0 WHERE call_id = 2",
        "model call 2 was changed",
    ),
    (
        "call-erased-by-hand",
        "UPDATE model_calls SET salt = '', request = '', response = '', content = '' "
        "WHERE call_id = 1",
        "model call 1 was erased, but no forget event after it names it",
    ),
    (
        "checkpoint-moved-to-bob",
        "UPDATE checkpoints SET user_id = 'bob' WHERE user_id = 'alice' AND version = 2",
        "checkpoint",
    ),
    (
        "checkpoint-segment-erased-by-hand",
        "UPDATE checkpoint_segments SET salt = '' WHERE user_id = 'alice' AND version = 1 "
        "AND segment = '0'",
        "checkpoint 1's code was erased, but no forget event after it names it",
    ),
    (
        "checkpoint-segment-moved-to-v2",
        "UPDATE checkpoint_segments SET version = 2 WHERE user_id = 'alice' AND version = 1 "
        "AND segment = '0'",
        "checkpoint",
    ),
    (
        "checkpoint-records-edited",
        "UPDATE checkpoints SET records = records + 1 WHERE user_id = 'alice' AND version = 1",
        "checkpoint 1 was changed after it was taken",
    ),
    (
        "forged-duplicate-segment",
        "INSERT INTO checkpoint_segments SELECT user_id, version, segment, "
        "replace(text, 'lisbon', 'EVIL'), 'aa', '' FROM checkpoint_segments WHERE "
        "user_id = 'alice' AND version = 1 AND contains(text, 'lisbon')",
        "checkpoint 1",
    ),
]


@pytest.mark.parametrize(("sql", "expect"), [pytest.param(s, e, id=i) for i, s, e in TAMPER])
def test_a_forgers_edit_is_named(two_users: Path, sql: str, expect: str) -> None:
    store = Store(two_users, read_only=True)
    row = store.con.execute(
        "SELECT seq FROM events WHERE user_id = 'alice' AND user_seq = 3"
    ).fetchone()
    store.close()
    seq = row[0] if row else None
    tamper(two_users, sql)
    problem = check(two_users)
    assert problem, "the forgery went unnoticed"
    assert expect.format(seq=seq) in problem, problem


def test_a_forged_duplicate_segment_does_not_reach_the_code(two_users: Path) -> None:
    tamper(
        two_users,
        "INSERT INTO checkpoint_segments SELECT user_id, version, segment, "
        "replace(text, 'lisbon', 'EVIL'), salt, text_hash FROM checkpoint_segments WHERE "
        "user_id = 'alice' AND version = 1 AND contains(text, 'lisbon')",
    )
    # the same salt and hash over a different text: the copy's own hash does not hold
    assert "code of checkpoint 1 was changed" in check(two_users, "alice")


def test_a_duplicate_seq_across_users_is_caught_store_wide(two_users: Path) -> None:
    tamper(
        two_users,
        "UPDATE events SET seq = (SELECT min(seq) FROM events WHERE user_id = 'alice') "
        "WHERE seq = (SELECT max(seq) FROM events)",
    )
    problem = check(two_users)
    assert "missing or repeated" in problem or "once each" in problem, problem


@pytest.mark.parametrize("chain", ["events", "model_calls", "checkpoints"])
def test_truncation_at_each_chain_end_is_caught_by_the_kept_head(
    two_users: Path, chain: str
) -> None:
    kept = kept_heads(two_users)
    order = {"events": "seq", "model_calls": "call_id", "checkpoints": "version"}[chain]
    tamper(
        two_users,
        f"DELETE FROM {chain} WHERE user_id = 'alice' AND {order} = "
        f"(SELECT max({order}) FROM {chain} WHERE user_id = 'alice')",
    )
    if chain == "checkpoints":
        tamper(
            two_users,
            "DELETE FROM checkpoint_segments WHERE user_id = 'alice' AND version = 2",
        )
    what = {"events": "events", "model_calls": "model calls", "checkpoints": "checkpoints"}
    problem = check(two_users, "alice", kept={"alice": kept["alice"]})
    if chain == "events":  # the last call and checkpoint name the removed event first
        assert "removed from the end" in problem, problem
    else:
        assert f"the kept head counts 2 {what[chain]}, the store holds 1" in problem, problem
        assert "some were removed" in problem


def test_the_whole_log_of_a_user_truncated_to_nothing(two_users: Path) -> None:
    kept = kept_heads(two_users)
    for table in ("events", "model_calls", "checkpoints", "checkpoint_segments"):
        tamper(two_users, f"DELETE FROM {table} WHERE user_id = 'alice'")
    assert "user 'alice' of the kept head has no events" in check(two_users, kept=kept)


def test_a_call_naming_more_events_than_the_log_holds(two_users: Path) -> None:
    """Events removed from the end of alice's log, the call's own link re-hashed."""
    tamper(two_users, "DELETE FROM checkpoints WHERE user_id = 'alice'")
    tamper(two_users, "DELETE FROM checkpoint_segments WHERE user_id = 'alice'")
    tamper(
        two_users,
        "DELETE FROM events WHERE user_id = 'alice' AND user_seq > "
        "(SELECT event_seq FROM model_calls WHERE call_id = 2) - 1",
    )
    problem = check(two_users, "alice")
    assert "model call 2 was made when the user's log held" in problem
    assert "removed from the end" in problem


def test_a_rehashed_call_chain_is_caught_by_the_kept_head(two_users: Path) -> None:
    kept = kept_heads(two_users)
    con = duckdb.connect(str(two_users))
    prev = GENESIS
    rows = con.execute(
        "SELECT call_id, created_at, purpose, model, base_url, tokens_in, tokens_out, "
        "latency_ms, outcome, event_seq, event_hash, salt FROM model_calls "
        "WHERE user_id = 'alice' ORDER BY call_id"
    ).fetchall()
    for call_id, created, purpose, model, base, ti, to, lat, outcome, es, eh, salt in rows:
        chash = content_hash(salt, "{}", "{}", "forged answer", "")
        prev = call_hash(
            prev, call_id, created, "alice", purpose, model, base, ti, to, lat, outcome, es, eh,
            chash,
        )  # fmt: skip
        con.execute(
            "UPDATE model_calls SET request = '{}', response = '{}', content = 'forged answer', "
            "content_hash = ?, hash = ? WHERE call_id = ?",
            [chash, prev, call_id],
        )
    con.close()
    assert check(two_users, "alice") == ""  # consistent: only a kept head can tell
    problem = check(two_users, "alice", kept={"alice": kept["alice"]})
    assert "the model calls chain does not pass through the kept head" in problem


# -- forget events: forged, edited, laundered ------------------------------------------------


@pytest.fixture
def forgotten(two_users: Path) -> Path:
    with Workbench(two_users, user="alice") as wb:
        wb.forget(type="Allergy", key="a1")
    return two_users


def test_a_forget_event_edited_and_its_payload_rehashed_breaks_the_chain(
    forgotten: Path,
) -> None:
    con = duckdb.connect(str(forgotten))
    found = con.execute("SELECT seq, salt, payload FROM events WHERE kind = 'forget'").fetchone()
    assert found is not None
    seq, salt, payload = found
    body = json.loads(payload)
    body["events"] = list(range(1, 9))  # launder erasures of more events
    forged = json.dumps(body, separators=(",", ":"), sort_keys=True)
    con.execute(
        "UPDATE events SET payload = ?, payload_hash = ? WHERE seq = ?",
        [forged, content_hash(salt, forged, ""), seq],
    )
    con.close()
    assert f"event {seq} was changed after it was written" in check(forgotten, "alice")


def test_a_forget_event_whose_salt_is_erased_is_not_trusted(forgotten: Path) -> None:
    tamper(forgotten, "UPDATE events SET salt = '' WHERE kind = 'forget'")
    assert "was changed after it was written" in check(forgotten, "alice")


def test_a_forget_event_rewritten_with_a_rehashed_chain_fails_the_kept_head(
    forgotten: Path,
) -> None:
    kept = kept_heads(forgotten)
    con = duckdb.connect(str(forgotten))
    found = con.execute("SELECT seq, payload FROM events WHERE kind = 'forget'").fetchone()
    assert found is not None
    seq, payload = found
    body = json.loads(payload)
    body["events"] = sorted({*body["events"], 6, 7})
    forged = json.dumps(body, separators=(",", ":"), sort_keys=True)
    con.execute("UPDATE events SET payload = ? WHERE seq = ?", [forged, seq])
    con.execute(
        "UPDATE events SET payload = '{\"forgotten\":true}', salt = '' WHERE user_id = 'alice' "
        "AND user_seq IN (6, 7)"
    )
    rehash_events(con, "alice")
    con.close()
    problem = check(forgotten, "alice", kept={"alice": kept["alice"]})
    assert "events chain does not pass through the kept head" in problem


def test_a_forget_event_moved_to_another_user_breaks_both(forgotten: Path) -> None:
    tamper(forgotten, "UPDATE events SET user_id = 'bob' WHERE kind = 'forget'")
    problem = check(forgotten)
    assert any(
        s in problem
        for s in ("changed after it was written", "missing or repeated", "no forget event after")
    ), problem


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param('{"events":[1e999]}', id="overflowing-number"),
        pytest.param('{"events":{"a":1}}', id="events-an-object"),
        pytest.param('{"segments":[[1]]}', id="segment-not-a-pair"),
        pytest.param("[1,2,3]", id="payload-a-list"),
        pytest.param("null", id="payload-null"),
        pytest.param('{"events":["x"]}', id="position-not-a-number"),
        pytest.param("{" * 5000, id="unparsable"),
    ],
)
def test_a_malformed_forget_event_fails_verify_in_one_line(
    two_users: Path, tmp_path: Path, payload: str
) -> None:
    raw_append(two_users, "alice", "forget", payload)
    assert "forget event" in check(two_users, "alice") and "is not one uac wrote" in check(
        two_users, "alice"
    )
    line = one_line_error(cli("verify", "--db", str(two_users), cwd=tmp_path))
    assert "integrity check failed" in line and "is not one uac wrote" in line


def test_a_forget_event_cannot_name_events_that_came_after_it(db: Path) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([utt(1), utt(2)])
        wb.store.append(
            [
                NewEvent(
                    datetime(2025, 1, 3),
                    "forget",
                    "u",
                    {
                        "by": "text",
                        "events": [6],
                        "calls": [],
                        "records": 0,
                        "segments": [],
                        "added_segments": [],
                    },
                )
            ]
        )
        wb.ingest([utt(4), utt(5), utt(6, "something I later want to hide"), utt(7)])
    kept = kept_heads(db)
    tamper(db, "UPDATE events SET payload = '{\"forgotten\":true}', salt = '' WHERE user_seq = 6")
    problem = check(db, "u", kept=kept)
    assert "forget event" in problem and "after" in problem


def test_an_erased_event_holds_only_the_tombstone(forgotten: Path) -> None:
    tamper(
        forgotten,
        'UPDATE events SET payload = \'{"text":"forged after the forget"}\' '
        "WHERE user_id = 'alice' AND salt = '' AND kind = 'fact'",
    )
    assert "erased" in check(forgotten, "alice")


def test_an_erased_model_call_cannot_be_refilled(forgotten: Path) -> None:
    tamper(
        forgotten,
        "UPDATE model_calls SET request_key = 'K', content = '{\"forged\": true}' WHERE salt = ''",
    )
    store = Store(forgotten, read_only=True)
    served = store.con.execute(
        "SELECT count(*) FROM model_calls WHERE request_key = 'K'"
    ).fetchone()
    store.close()
    assert served == (1,)  # the row a replay would answer from
    assert "model call" in check(forgotten, "alice")


def test_re_rendered_checkpoint_code_cannot_be_replaced(forgotten: Path) -> None:
    tamper(
        forgotten,
        "UPDATE checkpoint_segments SET text = text || '\nimport os  # injected\n' "
        "WHERE user_id = 'alice' AND salt = ''",
    )
    with Workbench(forgotten, user="alice", read_only=True) as wb:
        assert any("injected" in wb.code(v) for v in (1, 2))
    assert "checkpoint" in check(forgotten, "alice")


# -- forget matching -------------------------------------------------------------------------


def forget_and_grep(db: Path, user: str, needle: bytes, **what: Any) -> tuple[bool, Any]:
    with Workbench(db, user=user) as wb:
        wb.store.con.execute("CHECKPOINT")
        before = needle in raw(db)
        plan = wb.forget(**what)
        assert wb.verify().ok
    assert before, "the grep cannot see the text even before the forget"
    return needle in raw(db), plan


@pytest.mark.parametrize(
    "asked",
    [
        pytest.param(SECRET.upper(), id="upper"),
        pytest.param(SECRET.lower(), id="lower"),
        pytest.param("yLoPrImAr", id="mixed-part"),
    ],
)
def test_forget_by_text_matches_any_case(db: Path, asked: str) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([utt(1, f"I take {SECRET} daily"), trip("x")])
    left, plan = forget_and_grep(db, "u", SECRET.encode(), text=asked)
    assert not left and [e.kind for e in plan.events] == ["utterance"]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param('the "Zylo" pill', id="quotes"),
        pytest.param("C:\\Zylo\\pill", id="backslashes"),
        pytest.param("Zylo\nprimarex", id="newline"),
        pytest.param("Zylo\tprimarex", id="tab"),
        pytest.param("Zylöprimarex 💊", id="unicode"),
        pytest.param("Zylo" + "x" * 10_000, id="10k-chars"),
    ],
)
def test_forget_by_text_finds_it_in_events_and_json_escaped_in_model_calls(
    db: Path, text: str
) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([utt(1, f"note: {text}"), trip("x")])
        content = json.dumps({"note": text}, ensure_ascii=False)
        record_call(
            wb.store,
            "u",
            text,
            request=json.dumps({"messages": [{"content": f"note: {text}"}]}, ensure_ascii=False),
            response=json.dumps({"choices": [{"message": {"content": content}}]}),
            content=content,
        )
        wb.store.con.execute("CHECKPOINT")
        plan = wb.forget(text=text)
        assert plan.calls == [1] and [e.kind for e in plan.events] == ["utterance"]
        rows = repr(wb.store.con.execute("SELECT * FROM model_calls").fetchall())
        assert "Zylo" not in rows
        assert wb.verify().ok
    assert b"Zylo" not in raw(db)


def test_a_text_held_only_by_a_model_call_is_erased(db: Path) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([utt(1, "nothing special")])
        record_call(wb.store, "u", f"the model mentioned {SECRET}")
    left, plan = forget_and_grep(db, "u", SECRET.encode(), text=SECRET)
    assert not left and plan.calls == [1] and plan.events == []


def test_a_text_in_a_record_key_is_erased(db: Path) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([{**trip(f"trip-{SECRET}"), "source": "f1"}, trip("other")])
        wb.checkpoint()
    left, plan = forget_and_grep(db, "u", SECRET.encode(), text=SECRET)
    assert not left and plan.records == [("Trip", f"trip-{SECRET}")]
    with Workbench(db, user="u", read_only=True) as wb:
        assert SECRET not in wb.code(1) and "other" in wb.code(1)


def test_a_value_in_a_checkpoints_history_is_re_rendered(db: Path) -> None:
    """An updated field's old value lives in the checkpoint's history section."""
    with Workbench(db, user="u") as wb:
        wb.ingest([trip("t1", destination=SECRET)])
        wb.ingest(
            [
                {
                    **fact("2025-03-01T10:00:00", "update", "Trip", "t1", destination="Lima"),
                    "source": "upd",
                }
            ]
        )
        wb.ingest([trip("t2")])
        cp = wb.checkpoint()
        assert SECRET in cp.code
    left, plan = forget_and_grep(db, "u", SECRET.encode(), text=SECRET)
    assert not left and plan.checkpoints == [1]
    with Workbench(db, user="u", read_only=True) as wb:
        assert SECRET not in wb.code(1) and "t2" in wb.code(1)


def test_an_alert_naming_a_forgotten_record_goes_with_it(db: Path) -> None:
    from uac import Finding, rule

    @rule(watch=["Allergy"])
    def allergy_note(user: Any) -> Any:
        for a in user.all("Allergy"):
            yield Finding(f"remember the allergy to {a.substance}", [a])

    with Workbench(db, user="u") as wb:
        wb.ingest([utt(1, "hello"), allergy()])
        wb.add_rule(allergy_note)
        assert any(SECRET in a.message for a in wb.alerts())
    left, plan = forget_and_grep(db, "u", SECRET.encode(), type="Allergy", key="a1")
    assert not left and sorted(e.kind for e in plan.events) == ["alert", "fact", "utterance"]


def test_a_text_in_a_rule_events_source_is_erased(db: Path) -> None:
    from uac import Finding, rule

    @rule(watch=["Trip"])
    def note(user: Any) -> Any:
        return [Finding("x", [t]) for t in user.all("Trip") if t.destination == "never"]

    with Workbench(db, user="u") as wb:
        wb.ingest([utt(1, f"I take {SECRET}"), trip("x")])
        wb.define_rule(note, f"# a rule about {SECRET}\n")
    left, _ = forget_and_grep(db, "u", SECRET.encode(), text=SECRET)
    assert not left


def test_a_text_held_by_a_source_name_is_not_silently_kept(db: Path, tmp_path: Path) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([utt(1, "hello there", source=f"chat-with-{SECRET}#1")])
    out = cli("forget", "--db", str(db), "--user", "u", "--text", SECRET, cwd=tmp_path)
    assert SECRET.encode() not in raw(db) or "source" in out.stdout + out.stderr


def test_forget_by_text_matches_across_unicode_normal_forms(db: Path) -> None:
    name = "José Zyloprimarex"
    with Workbench(db, user="u") as wb:
        wb.ingest([utt(1, "I met " + unicodedata.normalize("NFD", name))])
        plan = wb.forget(text=unicodedata.normalize("NFC", name))
    assert [e.kind for e in plan.events] == ["utterance"]


def test_forget_finds_the_text_in_a_model_answer_with_unicode_escapes(db: Path) -> None:
    secret = "Zylöprimarex"
    with Workbench(db, user="u") as wb:
        wb.ingest([utt(1, f"I take {secret}")])
        content = json.dumps({"substance": secret})  # ensure_ascii: "Zyl\u00f6primarex"
        record_call(wb.store, "u", "x", request="{}", content=content, response="{}")
        plan = wb.forget(text=secret)
        assert plan.calls == [1]


def test_a_forgotten_payload_leaves_no_unsalted_hash_to_confirm_a_guess(db: Path) -> None:
    from uac_kernel.ingest.events import parse_objects

    event = {"kind": "utterance", "ts": "2025-01-01T09:00:00", "speaker": "user"}
    event["text"] = f"I am allergic to {SECRET}"
    with Workbench(db, user="u") as wb:
        wb.ingest([event, trip("x")])
        wb.forget(text=SECRET)
    guess = next(iter(parse_objects([event]))).source  # what an attacker computes from a guess
    assert guess is not None
    assert guess.encode() not in raw(db)


def test_forget_of_a_fact_takes_its_origin_utterance_and_keeps_the_rest(
    two_users: Path,
) -> None:
    kept = kept_heads(two_users)
    left, plan = forget_and_grep(two_users, "alice", SECRET.encode(), type="Allergy", key="a1")
    assert not left
    assert sorted(e.kind for e in plan.events) == ["fact", "utterance"] and plan.calls == [1]
    assert check(two_users, kept=kept) == ""  # a head kept before still verifies
    with Workbench(two_users, user="alice", read_only=True) as wb:
        assert wb.eval("sorted(t.key for t in user.all(Trip))") == ["lisbon", "porto", "rome"]
    with Workbench(two_users, user="bob", read_only=True) as wb:
        assert wb.eval("len(user.all(Trip))") == 3


def test_forget_never_reaches_another_users_events(two_users: Path) -> None:
    with Workbench(two_users, user="bob") as wb:
        wb.ingest([utt(1, f"bob also mentions {SECRET}")])
    with Workbench(two_users, user="alice") as wb:
        wb.forget(text=SECRET)
    store = Store(two_users, read_only=True)
    rows = store.con.execute(
        "SELECT count(*) FROM events WHERE user_id = 'bob' AND contains(payload, ?)", [SECRET]
    ).fetchone()
    store.close()
    assert rows == (1,)
    assert check(two_users) == ""


# -- hostile user ids, sources and texts -----------------------------------------------------

HOSTILE_USERS = [
    pytest.param("al\tice", id="tab"),
    pytest.param("al\nice", id="newline"),
    pytest.param("a\x00b", id="nul"),
    pytest.param("q\"'\\", id="quotes-backslash"),
    pytest.param("Zoë 🙂 ユーザー", id="unicode"),
    pytest.param("u" * 10_000, id="10k-chars"),
    pytest.param('x"\tfake', id="quote-then-tab"),
]


@pytest.mark.parametrize("user", HOSTILE_USERS)
def test_uac_head_file_survives_a_hostile_user_id(db: Path, tmp_path: Path, user: str) -> None:
    with Workbench(db, user=user) as wb:
        wb.ingest([trip("x")])
    with Workbench(db, user="plain") as wb:
        wb.ingest([trip("y")])
    out = cli("head", "--db", str(db), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.splitlines()) == 2  # one line a user, whatever the id holds
    (tmp_path / "heads.txt").write_text(out.stdout, encoding="utf-8")
    ok = cli("verify", "--db", str(db), "--head", "heads.txt", cwd=tmp_path)
    assert ok.returncode == 0 and "passes through 2 kept head(s)" in ok.stdout, ok.stderr
    tamper(db, "UPDATE events SET ts = ts + INTERVAL 1 DAY WHERE user_id = ?", [user])
    bad = cli("verify", "--db", str(db), "--head", "heads.txt", cwd=tmp_path)
    assert "integrity check failed" in one_line_error(bad)


@pytest.mark.parametrize(
    ("command", "flag", "value"),
    [
        pytest.param("forget", "--user", b"bad\xff\xfeuser", id="forget-user"),
        pytest.param("forget", "--text", b"hel\xffxx", id="forget-text"),
        pytest.param("forget", "--source", b"src\xff", id="forget-source"),
        pytest.param("head", "--user", b"x\xff", id="head-user"),
    ],
)
def test_invalid_utf8_arguments_are_one_line(
    db: Path, tmp_path: Path, command: str, flag: str, value: bytes
) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([utt(1, "hello world")])
    arg = value.decode("utf-8", "surrogateescape")
    args = [command, "--db", str(db)]
    if command == "forget":
        args += ["--user", "u"] if flag != "--user" else []
        args += [flag, arg] if flag != "--user" else ["--user", arg, "--text", "hello"]
    else:
        args += ["--user", arg]
    out = subprocess.run([*UAC, *args], capture_output=True, timeout=120, cwd=tmp_path)
    err = out.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    if out.returncode:
        assert len(err.strip().splitlines()) == 1 and err.startswith("uac: error: ")
    else:
        assert b"nothing" in out.stdout  # nothing can match text DuckDB cannot hold
    assert check(db) == ""


# -- kept heads from garbage -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        pytest.param(bytes(range(256)) * 4, "not", id="binary"),
        pytest.param(b"e1.abc-c0.def-k0.ghi\n", "not a head printed", id="short-hashes"),
        pytest.param(
            b"e99999999999999999999." + b"a" * 64 + b"-c0." + b"0" * 64 + b"-k0." + b"0" * 64,
            "some were removed",
            id="huge-count",
        ),
        pytest.param(b"x" * 5_000_000, "not a head printed", id="5MB-line"),
        pytest.param(b"\n\n\n", "the heads name no user 'u'", id="blank-lines"),
        pytest.param(b'garbage\t"u"\nmore\t"u"\n', "not a head printed", id="two-bad-lines"),
        pytest.param(b'e0.x\t{"not": "a string"}\n', "not `HEAD<TAB>", id="user-not-string"),
    ],
)
def test_verify_head_from_a_garbage_file_is_one_line(
    db: Path, tmp_path: Path, content: bytes, expect: str
) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([trip("x")])
    (tmp_path / "heads.txt").write_bytes(content)
    # a hang, not a slow machine, fails this: cli's timeout is 120 s, some 50 times a verify
    out = cli("verify", "--db", str(db), "--user", "u", "--head", "heads.txt", cwd=tmp_path)
    line = one_line_error(out)
    assert expect in line
    assert len(line) < 400  # a 5 MB head is not echoed back


def test_verify_head_naming_a_directory_or_a_missing_file(db: Path, tmp_path: Path) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([trip("x")])
    for value in (str(tmp_path), "no-such-heads.txt"):
        line = one_line_error(
            cli("verify", "--db", str(db), "--user", "u", "--head", value, cwd=tmp_path)
        )
        assert "not a head printed by `uac head`" in line


def test_a_head_file_with_crlf_line_ends_still_verifies(db: Path, tmp_path: Path) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([trip("x")])
    out = cli("head", "--db", str(db), cwd=tmp_path)
    (tmp_path / "h.txt").write_bytes(out.stdout.replace("\n", "\r\n").encode())
    ok = cli("verify", "--db", str(db), "--head", "h.txt", cwd=tmp_path)
    assert ok.returncode == 0 and "passes through 1 kept head(s)" in ok.stdout, ok.stderr


def test_a_head_file_with_a_byte_order_mark_still_verifies(db: Path, tmp_path: Path) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([trip("x")])
        head = wb.head()
    (tmp_path / "h.txt").write_text("\ufeff" + head + "\n", encoding="utf-8")
    ok = cli("verify", "--db", str(db), "--user", "u", "--head", "h.txt", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr


def test_verify_head_file_of_one_user_still_checks_every_user(db: Path, tmp_path: Path) -> None:
    with Workbench(db, user="alice") as wb:
        wb.ingest([trip("x")])
    out = cli("head", "--db", str(db), cwd=tmp_path)
    (tmp_path / "heads.txt").write_text(out.stdout)
    with Workbench(db, user="bob") as wb:
        wb.ingest([trip("y"), trip("z")])
    tamper(db, "UPDATE events SET payload = '{}' WHERE user_id = 'bob'")
    bad = cli("verify", "--db", str(db), "--head", "heads.txt", cwd=tmp_path)
    assert "user 'bob'" in one_line_error(bad)


# -- several workbenches, processes, file names ----------------------------------------------


def test_two_writers_in_one_process_keep_working_after_a_forget(db: Path) -> None:
    a, b = Workbench(db, user="alice"), Workbench(db, user="bob")
    try:
        a.ingest([utt(1, f"I take {SECRET}"), trip("x")])
        b.ingest([trip("y")])
        a.store.con.execute("CHECKPOINT")
        assert SECRET.encode() in raw(db)
        a.forget(text=SECRET)
        assert SECRET.encode() not in raw(db)
        assert b.ingest([trip("z")]).appended >= 1
        assert b.eval("sorted(t.key for t in user.all(Trip))") == ["y", "z"]
        assert a.ingest([trip("v")]).appended >= 1
        assert a.eval("sorted(t.key for t in user.all(Trip))") == ["v", "x"]
        assert b.verify(all_users=True).ok
        seqs = [r[0] for r in a.store.con.execute("SELECT seq FROM events ORDER BY seq").fetchall()]
        assert seqs == list(range(1, len(seqs) + 1))
    finally:
        a.close()
        b.close()


def test_forget_beside_a_read_only_workbench_in_the_same_process(db: Path) -> None:
    writer = Workbench(db, user="u")
    writer.ingest([utt(1, f"I take {SECRET}"), trip("x")])
    reader = Workbench(db, user="u", read_only=True)
    try:
        writer.forget(text=SECRET)
        assert reader.eval("len(user.all(Trip))") == 1
        assert writer.verify().ok
    finally:
        reader.close()
        writer.close()


def test_forget_in_a_store_whose_file_name_holds_a_double_quote(tmp_path: Path) -> None:
    db = tmp_path / 'we"ird.duckdb'
    with Workbench(db, user="u") as wb:
        wb.ingest([utt(1, f"I take {SECRET}"), trip("x")])
        plan = wb.forget(text=SECRET)
        assert not plan.empty and wb.verify().ok


def test_forget_in_a_store_whose_path_holds_a_single_quote_and_spaces(tmp_path: Path) -> None:
    folder = tmp_path / "it's a dir"
    folder.mkdir()
    db = folder / "o'brien store.duckdb"
    with Workbench(db, user="u") as wb:
        wb.ingest([utt(1, f"I take {SECRET}"), trip("x")])
        wb.store.con.execute("CHECKPOINT")
        assert SECRET.encode() in raw(db)
        assert not wb.forget(text=SECRET).empty
    assert SECRET.encode() not in raw(db)
    assert not Path(f"{db}.compact").exists()


READER = (
    "import sys, time\n"
    "from uac_kernel.log.store import Store\n"
    "s = Store(sys.argv[1], read_only=True)\n"
    "print('open', flush=True)\n"
    "time.sleep(60)\n"
)


def test_forget_while_another_process_reads_is_one_line_and_changes_nothing(
    db: Path, tmp_path: Path
) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([utt(1, f"I take {SECRET}"), trip("x")])
    before = db.read_bytes()
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(db)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "open"
        out = cli("forget", "--db", str(db), "--user", "u", "--text", SECRET, cwd=tmp_path)
        line = one_line_error(out)
        assert f"process {reader.pid}" in line
    finally:
        reader.kill()
        reader.wait()
    assert db.read_bytes() == before
    assert check(db) == ""


def test_the_lock_message_tells_a_reader_from_a_writer(db: Path, tmp_path: Path) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([trip("x")])
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(db)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert reader.stdout is not None and reader.stdout.readline().strip() == "open"
        out = cli("forget", "--db", str(db), "--user", "u", "--text", "xxxx", cwd=tmp_path)
        line = one_line_error(out)
        assert "read-write" not in line
    finally:
        reader.kill()
        reader.wait()


# -- kill -9 ----------------------------------------------------------------------------------


def _secret_store(db: Path, trips: int = 300) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([utt(1, f"I am allergic to {SECRET}"), allergy()])
        wb.ingest([trip(f"t{i}") for i in range(trips)])
        wb.checkpoint()
        record_call(wb.store, "u", f"allergic to {SECRET}")
        wb.ingest([trip("late")])
        wb.checkpoint()


OWES_REWRITE = "the file may still hold bytes a forget erased"


def _after_crash(db: Path, tmp_path: Path, *, owed: bool | None) -> None:
    """The store opens; it verifies, or (killed after the erasure committed, before the file
    was rewritten) fails verify with the one line that says the file owes its rewrite — never
    a tamper report. ``owed`` None: either, by when the kill landed. Re-running forget
    finishes the job."""
    found = check(db)
    if owed is None:
        assert found == "" or found.startswith(OWES_REWRITE), found
    else:
        assert found.startswith(OWES_REWRITE) if owed else found == "", found
    again = cli("forget", "--db", str(db), "--user", "u", "--text", SECRET, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert SECRET.encode() not in raw(db)
    assert SECRET.lower().encode() not in raw(db).lower()
    assert check(db) == ""
    with Workbench(db, user="u", read_only=True) as wb:
        assert wb.eval("len(user.all(Trip))") == 301
        assert wb.eval("len(user.all('Allergy'))") == 0


@pytest.fixture(scope="module")
def secret_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("tpl") / "secret.duckdb"
    _secret_store(path)
    return path


@pytest.mark.parametrize("fraction", [0.15, 0.35, 0.55, 0.75, 0.95])
def test_kill_9_of_forget_at_random_moments(
    secret_template: Path, tmp_path: Path, fraction: float
) -> None:
    db = tmp_path / "k.duckdb"
    db.write_bytes(secret_template.read_bytes())
    start = time.monotonic()
    full = cli(
        "forget", "--db", str(db), "--user", "u", "--text", SECRET, "--dry-run", cwd=tmp_path
    )
    assert full.returncode == 0
    span = (time.monotonic() - start) * 1.6  # a real forget takes longer than a dry run
    proc = subprocess.Popen(
        [*UAC, "forget", "--db", str(db), "--user", "u", "--text", SECRET],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    time.sleep(span * fraction)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    _after_crash(db, tmp_path, owed=None)


CRASH = """
import os, sys
import uac_kernel.log.store as st
point = sys.argv[1]
if point == "before-compact":
    st.Store.compact = lambda self: os.kill(os.getpid(), 9)
elif point == "before-replace":
    real = os.replace
    def replace(a, b):
        if str(a).endswith(".compact"):
            os.kill(os.getpid(), 9)
        return real(a, b)
    st.os.replace = replace
elif point == "before-wal-unlink":
    real_unlink = st.Path.unlink
    def unlink(self, missing_ok=False):
        if str(self).endswith(".wal"):
            os.kill(os.getpid(), 9)
        return real_unlink(self, missing_ok=missing_ok)
    st.Path.unlink = unlink
from uac_kernel.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("point", ["before-compact", "before-replace", "before-wal-unlink"])
def test_kill_9_of_forget_at_each_crash_point(
    secret_template: Path, tmp_path: Path, point: str
) -> None:
    db = tmp_path / "k.duckdb"
    db.write_bytes(secret_template.read_bytes())
    proc = subprocess.run(
        [sys.executable, "-c", CRASH, point, "forget", "--db", str(db), "--user", "u",
         "--text", SECRET],
        cwd=tmp_path,
        capture_output=True,
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    # the erasure committed before the crash: nothing readable through uac ...
    store = Store(db, read_only=True)
    rows = repr(store.con.execute("SELECT * FROM events").fetchall())
    store.close()
    assert SECRET not in rows
    _after_crash(db, tmp_path, owed=point != "before-wal-unlink")
    assert not Path(f"{db}.compact").exists()


@pytest.mark.parametrize("fraction", [0.2, 0.5, 0.8])
def test_kill_9_during_ingest_leaves_all_or_nothing(tmp_path: Path, fraction: float) -> None:
    db = tmp_path / "i.duckdb"
    with Workbench(db, user="u") as wb:
        wb.ingest([trip("first")])
    events = tmp_path / "big.jsonl"
    with events.open("w") as f:
        for i in range(20_000):
            f.write(json.dumps(utt(i, f"line {i}", source=f"big#{i}")) + "\n")
    start = time.monotonic()
    probe = tmp_path / "probe.duckdb"
    cli("ingest", str(events), "--db", str(probe), "--user", "u", cwd=tmp_path)
    span = time.monotonic() - start
    proc = subprocess.Popen(
        [*UAC, "ingest", str(events), "--db", str(db), "--user", "u"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    time.sleep(span * fraction)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert check(db) == ""
    store = Store(db, read_only=True)
    n = store.con.execute("SELECT count(*) FROM events WHERE kind = 'utterance'").fetchone()
    store.close()
    assert n in ((0,), (20_000,))
    done = cli("ingest", str(events), "--db", str(db), "--user", "u", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert check(db) == ""


# -- migration of hand-made old stores ------------------------------------------------------


def _v1(
    path: Path,
    events: list[tuple[str, str]] = (),  # type: ignore[assignment]
    calls: int = 0,
    checkpoints: list[tuple[str, int, int]] = (),  # type: ignore[assignment]
    break_at: int | None = None,
) -> None:
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE uac_migrations (name VARCHAR NOT NULL, applied_at TIMESTAMP)")
    for name, fn in MIGRATIONS[:3]:
        fn(con)
        con.execute("INSERT INTO uac_migrations VALUES (?, current_timestamp)", [name])
    prev, now = GENESIS, datetime(2025, 6, 1, 12)
    for seq, (user, text) in enumerate(events, 1):
        payload = json.dumps({"speaker": "user", "text": text}, separators=(",", ":"))
        ts = datetime(2025, 1, 1)
        h = _v1_event_hash(prev, seq, now, ts, "utterance", user, f"s{seq}", payload)
        if seq == break_at:
            h = "f" * 64
        con.execute(
            "INSERT INTO events VALUES (?, ?, ?, 'utterance', ?, ?, ?, ?)",
            [seq, now, ts, user, f"s{seq}", payload, h],
        )
        prev = h
    for i in range(calls):
        con.execute(
            "INSERT INTO model_calls VALUES (?, ?, 'ghost', 'ask', 'm', '', 'k', '{}', '{}', "
            "'a', 1, 1, 1.0, 'ok', '')",
            [i + 1, now],
        )
    for user, version, seq in checkpoints:
        con.execute("INSERT INTO checkpoints VALUES (?, ?, ?, ?, 0, 1)", [user, version, seq, now])
        con.execute("INSERT INTO checkpoint_segments VALUES (?, ?, '0', 'x = 1')", [user, version])
    con.close()


@pytest.mark.parametrize(
    ("spec", "counts"),
    [
        pytest.param({}, (0, 0, 0), id="empty"),
        pytest.param({"calls": 3}, (0, 3, 0), id="only-model-calls"),
        pytest.param({"checkpoints": [("ghost", 1, 0)]}, (0, 0, 1), id="only-a-checkpoint"),
        pytest.param(
            {"events": [("a\tb", "x"), ("a\nb", "y"), ("a\tb", "z")]}, (3, 0, 0), id="tab-users"
        ),
        pytest.param(
            {
                "events": [("a", "x"), ("b", "y"), ("a", "z")],
                "calls": 2,
                "checkpoints": [("a", 1, 3)],
            },
            (3, 2, 1),
            id="mixed",
        ),
    ],
)
def test_a_hand_made_old_store_migrates_and_verifies(
    tmp_path: Path, spec: dict[str, Any], counts: tuple[int, int, int]
) -> None:
    path = tmp_path / "old.duckdb"
    _v1(path, **spec)
    out = cli("verify", "--db", str(path), cwd=tmp_path)
    # a read-only open does not migrate: the old store says how to upgrade, in one line
    if out.returncode:
        one_line_error(out)
    store = Store(path)
    report = verify(store)
    store.close()
    assert report.ok, report.problem
    assert (report.events, report.calls, report.checkpoints) == counts
    ok = cli("verify", "--db", str(path), cwd=tmp_path)
    assert ok.returncode == 0 and "hash chains intact" in ok.stdout, ok.stderr


@pytest.mark.parametrize("break_at", [1, 3])
def test_an_old_store_with_a_broken_chain_is_refused_everywhere(
    tmp_path: Path, break_at: int
) -> None:
    path = tmp_path / "old.duckdb"
    _v1(path, events=[("a", "x"), ("b", "y"), ("a", "z")], break_at=break_at)
    before = path.read_bytes()
    with pytest.raises(StoreError, match=f"broken at seq {break_at}, so it is not upgraded"):
        Store(path)
    out = cli("forget", "--db", str(path), "--user", "a", "--text", "xxxx", cwd=tmp_path)
    assert f"broken at seq {break_at}" in one_line_error(out)
    assert path.read_bytes() == before or check_old_tables(path)


def check_old_tables(path: Path) -> bool:
    con = duckdb.connect(str(path), read_only=True)
    columns = [r[0] for r in con.execute("DESCRIBE events").fetchall()]
    con.close()
    return "payload_hash" not in columns


# -- damaged files ----------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["truncated", "zeroed-block"])
@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["forget", "--user", "u", "--text", "xxxx"], id="forget"),
        pytest.param(["forget", "--user", "u", "--text", "xxxx", "--dry-run"], id="dry-run"),
        pytest.param(["head"], id="head"),
        pytest.param(["verify"], id="verify"),
    ],
)
def test_a_damaged_store_is_one_line_for_forget_head_verify(
    db: Path, tmp_path: Path, how: str, args: list[str]
) -> None:
    with Workbench(db, user="u") as wb:
        wb.ingest([trip(f"t{i}") for i in range(1500)])
        wb.checkpoint()
    data = db.read_bytes()
    half = len(data) // 2
    bad = tmp_path / "bad.duckdb"
    bad.write_bytes(data[:half] if how == "truncated" else data[:half] + bytes(len(data) - half))
    out = cli(*args, "--db", str(bad), cwd=tmp_path)
    if out.returncode == 0:
        # the damaged half may hold no block the command reads (the snapshot tables written
        # at the checkpoint come last): then its answer is the intact store's, word for word
        assert out.stdout == cli(*args, "--db", str(db), cwd=tmp_path).stdout, args
        return
    line = one_line_error(out)
    assert "damaged" in line or "integrity check failed" in line


# Timings (forget and verify as the store grows) are measured in bench/forget.py and
# bench/verify.py: tests assert no wall-clock times.
