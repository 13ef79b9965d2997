"""An outside pass over issue 25 part 7: a snapshot never changes nor slows what it caches.

Every case opens the same store twice: once from the snapshot an ingest's close left (a few
thousand records over nine types), once with the snapshot rows dropped (a plain fold). Both must
answer byte for byte alike, and the snapshot-opened one must make a number of DuckDB queries
(``_Source.reads``) bounded by the number of types (and their fields), never by the keys it
reads. Real parts only: DuckDB files in ``tmp_path``, ``uac`` subprocesses, the openai client
against the local ChatServer; no wall-clock assertion (timeouts catch a hang only).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import uac_kernel.checkpoints.snapshot as snapshot
import uac_kernel.checkpoints.snaptypes as snaptypes
from uac_kernel.checkpoints.snapshot import drop_snapshots
from uac_kernel.checkpoints.snaptypes import SnapTypeState
from uac_kernel.core.errors import SnapshotIgnored
from uac_kernel.log.store import Store
from uac_kernel.model.client import ModelSettings
from uac_kernel.model.testing import ChatServer
from uac_kernel.rules.engine import Finding, rule
from uac_kernel.rules.library import LIBRARY
from uac_kernel.workbench import Workbench

ROOT = Path(__file__).resolve().parents[2]
UAC = [sys.executable, "-m", "uac_kernel.cli.main"]
N = 3000
HANG = 600  # a timeout that only catches a hang


# -- the store ----------------------------------------------------------------------------------


def _scale() -> ModuleType:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        return importlib.import_module("scale")
    finally:
        sys.path.remove(str(ROOT / "bench"))


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``History(3000)`` ingested by one workbench whose close wrote the snapshot (as a big
    ``uac ingest`` leaves it: nothing checkpointed, every block to render)."""
    import uac_kernel.workbench as workbench

    scale = _scale()
    history = scale.History(N)
    db = tmp_path_factory.mktemp("base") / "base.duckdb"
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(workbench, "CLOSE_AFTER", 1000)
        with Workbench(db, user="me") as wb:
            wb.ingest([history.next() for _ in range(N)])
    assert lazy_types(db)
    return db


def lazy_types(db: Path) -> bool:
    with Workbench(db, user="me", read_only=True, rules=()) as wb:
        return all(isinstance(ts, SnapTypeState) for ts in wb.state.types.values())


def pair(base: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the store with its snapshot, and one without (a plain fold)."""
    snap, plain = tmp_path / "snap.duckdb", tmp_path / "plain.duckdb"
    shutil.copy(base, snap)
    shutil.copy(base, plain)
    drop(plain)
    return snap, plain


def drop(db: Path) -> None:
    store = Store(db)
    drop_snapshots(store.con)
    store.close()


def reads(wb: Workbench) -> int:
    return sum(ts._src.reads for ts in wb.state.types.values() if isinstance(ts, SnapTypeState))


def bound(wb: Workbench, *, per_field: bool = False) -> int:
    """Queries a snapshot-opened store may make: a few per type (plus, for readers that build
    field indexes, one per field), never one per key."""
    st = wb.state
    extra = sum(len(f) for f in st.schema.types.values()) if per_field else 0
    return (snaptypes.BY_KEY_QUERIES + 4) * len(st.types) + extra


def keys_of(wb: Workbench, t: str, every: int = 1) -> list[str]:
    ts = wb.state.types[t]
    return [k for k in ts.order if k in ts.current][::every]


def retracted_of(wb: Workbench, t: str) -> list[str]:
    ts = wb.state.types[t]
    return sorted({r.key for r in ts.history if r.retracted} - set(ts.current))


def both(
    snap: Path,
    plain: Path,
    run: Callable[[Workbench], Any],
    *,
    rules: Any = LIBRARY,
    per_field: bool = False,
    checkpoint: bool = True,
    **kw: Any,
) -> list[Any]:
    """``run`` then a checkpoint on each store; the answers, the checkpoint and its code must be
    the same and the snapshot-opened one's queries bounded. Returns both results."""
    got = []
    for path in (snap, plain):
        with warnings.catch_warnings():
            warnings.simplefilter("error", SnapshotIgnored)
            with Workbench(path, user="me", rules=rules, **kw) as wb:
                lazy = isinstance(wb.state.types["Transaction"], SnapTypeState)
                assert lazy == (path == snap)
                answer = run(wb)
                if lazy:
                    assert reads(wb) <= bound(wb, per_field=per_field), "the operation"
                out: tuple[Any, ...] = (answer,)
                if checkpoint:
                    cp = wb.checkpoint()
                    if lazy:
                        assert reads(wb) <= bound(wb, per_field=per_field), "its checkpoint"
                    out = (answer, cp.version, cp.new, wb.code(cp.version))
                got.append(out)
    assert got[0] == got[1]
    return got


def everything(db: Path) -> dict[str, Any]:
    """Every answer of a read-only workbench (no checkpoint: read-only)."""
    with Workbench(db, user="me", read_only=True) as wb:
        st = wb.state
        out: dict[str, Any] = {"seq": st.seq, "now": st.now, "schema": st.schema.types}
        for name, ts in st.types.items():
            out[name] = (
                [(k, r.__dict__) for k, r in ts.current.items()],
                [r.__dict__ for r in ts.history],
                list(ts.order),
                dict(ts.position),
                list(ts.cls.model_fields),
            )
        out["alerts"] = [a.model_dump() for a in wb.alerts()]
        for name, (cur, _) in wb.sql_tables().items():
            out[f"sql:{name}"] = wb.sql(f'SELECT * FROM "{cur}" ORDER BY key').rows
    return out


def plain_copy(db: Path, tmp_path: Path, name: str = "plain-after.duckdb") -> Path:
    out = tmp_path / name
    shutil.copy(db, out)
    wal = db.with_name(db.name + ".wal")  # a process killed leaves its last commits there
    if wal.exists():
        shutil.copy(wal, out.with_name(out.name + ".wal"))
    drop(out)
    return out


def same_as_plain(db: Path, tmp_path: Path, name: str = "cmp.duckdb") -> None:
    """``db`` answers (and checkpoints) as its plain fold, whatever snapshot it now holds."""
    plain = plain_copy(db, tmp_path, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SnapshotIgnored)
        a, b = everything(db), everything(plain)
    assert a.keys() == b.keys()
    for k in a:
        assert a[k] == b[k], k
    codes = []
    for path in (db, plain):
        cp_db = path.with_name(path.stem + "-cp.duckdb")
        shutil.copy(path, cp_db)
        wal = path.with_name(path.name + ".wal")
        if wal.exists():
            shutil.copy(wal, cp_db.with_name(cp_db.name + ".wal"))
        with Workbench(cp_db, user="me") as wb:
            cp = wb.checkpoint()
            codes.append((cp.version, cp.new, wb.code(cp.version)))
    assert codes[0] == codes[1]


def uac(db: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [*UAC, "--db", str(db), "--user", "me", *args],
        capture_output=True,
        text=True,
        timeout=HANG,
        cwd=db.parent,
    )
    if check:
        assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "ignored" not in done.stderr, done.stderr[-3000:]
    return done


def update(t: str, key: str, i: int, **fields: Any) -> dict[str, Any]:
    ts = f"2030-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}"
    return {"kind": "fact", "ts": ts, "op": "update", "type": t, "key": key,
            "fields": fields or {"note": f"n{i}"}}  # fmt: skip


def retract(t: str, key: str, i: int) -> dict[str, Any]:
    ev = update(t, key, i)
    del ev["fields"]
    return {**ev, "op": "retract"}


def jsonl(path: Path, events: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


# == readers ====================================================================================


def test_single_lookup_reads_one_key_not_the_type(base: Path, tmp_path: Path) -> None:
    """One small lookup on a snapshot-opened store makes one query by key and does not read
    the type whole; nor does an ingest of one update."""
    snap, _ = pair(base, tmp_path)
    with Workbench(snap, user="me", rules=()) as wb:
        ts = wb.state.types["Transaction"]
        assert isinstance(ts, SnapTypeState)
        k = keys_of_unread(wb)
        before = reads(wb)
        assert wb.state.get("Transaction", k) is not None
        assert reads(wb) - before == 1 and "current" not in ts._loaded
        before = reads(wb)
        wb.ingest([update("Transaction", k, 1)])
        assert reads(wb) - before <= 1 and not ts._loaded


def keys_of_unread(wb: Workbench) -> str:
    store = wb.store
    table = wb.state.types["Transaction"]._src.tables[0]  # type: ignore[attr-defined]
    row = store.con.execute(f"SELECT key FROM {table} ORDER BY pos DESC LIMIT 1").fetchone()
    assert row is not None
    return str(row[0])


def test_user_get_of_every_key_in_process(base: Path, tmp_path: Path) -> None:
    """``state.get`` / ``in current`` / ``position`` key after key (a notebook loop)."""
    snap, plain = pair(base, tmp_path)
    with Workbench(plain, user="me", read_only=True, rules=()) as wb:
        keys = {t: keys_of(wb, t) + retracted_of(wb, t) + ["nope"] for t in wb.state.types}

    def run(wb: Workbench) -> Any:
        st = wb.state
        out = []
        for t, ks in keys.items():
            ts = st.types[t]
            for k in ks:
                r = st.get(t, k)
                out.append((t, k, r and r.__dict__, k in ts.current))
                with contextlib.suppress(KeyError):
                    out.append(ts.position[k])
        return out

    both(snap, plain, run, rules=())


def test_eval_get_in_a_comprehension_and_where(base: Path, tmp_path: Path) -> None:
    snap, plain = pair(base, tmp_path)
    exprs = [
        "[user.get('Transaction', r.key).amount for r in user.all('Transaction')][:50]",
        "sorted(r.key for t in ('Meal','Workout','SleepLog') for r in user.all(t))[-20:]",
        "[r.key for r in user.where('Transaction', 'amount', since=10, before=50)][:40]",
        "len(user.unset('Meal', 'calories'))",
    ]
    both(snap, plain, lambda wb: [wb.eval(e) for e in exprs], per_field=True)


def test_where_and_unset_on_every_field_in_process(base: Path, tmp_path: Path) -> None:
    snap, plain = pair(base, tmp_path)

    def run(wb: Workbench) -> Any:
        st = wb.state
        out = []
        for t, fields in st.schema.types.items():
            for f in fields:
                ents = st.types[t].index(f).entries
                for q in (0.1, 0.3, 0.5, 0.7, 0.9):
                    mid = ents[int(len(ents) * q)][0] if ents else None
                    out.append([r.__dict__ for r in st.where(t, f, lo=mid)])
                out.append([r.__dict__ for r in st.unset(t, f)])
        return out

    both(snap, plain, run, rules=(), per_field=True)


def test_versions_and_history_of_many_keys(base: Path, tmp_path: Path) -> None:
    snap, plain = pair(base, tmp_path)

    def run(wb: Workbench) -> Any:
        out = []
        for t in wb.state.types:
            for k in keys_of(wb, t, 7) + retracted_of(wb, t):
                out.append([r.__dict__ for r in wb.versions(t, k)])
        return out

    both(snap, plain, run)


def test_as_of_in_the_past_and_present(base: Path, tmp_path: Path) -> None:
    snap, plain = pair(base, tmp_path)

    def run(wb: Workbench) -> Any:
        out = []
        now = wb.state.now
        assert now is not None
        for when in (now - timedelta(days=400), now - timedelta(days=3), now):
            st = wb.as_of(when)
            out.append({t: [r.__dict__ for r in st.all(t)] for t in st.types})
        return out

    both(snap, plain, run)


def test_sql_of_every_type(base: Path, tmp_path: Path) -> None:
    snap, plain = pair(base, tmp_path)

    def run(wb: Workbench) -> Any:
        return [
            wb.sql(f'SELECT * FROM "{cur}" ORDER BY key').rows
            + wb.sql(f'SELECT * FROM "{hist}" ORDER BY key, valid_from').rows
            for cur, hist in wb.sql_tables().values()
        ]

    both(snap, plain, run)


KEYS: list[str] = []


@rule(watch=None, clock=True, severity="info")
def every_key(user: Any) -> Iterator[Finding]:
    """A clock rule that looks records up key by key (a loop over a list it was given)."""
    for k in KEYS:
        r = user.get("Transaction", k)
        if r is not None and (r.amount or 0) > 150:
            yield Finding(f"{k} big", [r])


@rule(watch=["Meal", "Workout"], severity="warning")
def ranges(user: Any) -> Iterator[Finding]:
    for m in user.where("Meal", "calories", since=700):
        yield Finding(f"{m.key} heavy", [m])
    for w in user.unset("Workout", "activity"):
        if w.minutes and w.minutes > 88:
            yield Finding(f"{w.key} long", [w])


def test_rules_clock_rules_and_constraints(base: Path, tmp_path: Path) -> None:
    snap, plain = pair(base, tmp_path)
    with Workbench(plain, user="me", read_only=True, rules=()) as wb:
        KEYS[:] = keys_of(wb, "Transaction", 3)
        meals = keys_of(wb, "Meal", 5)
    trips = {"kind": "window_limit", "title": "At most 90 days of trips in any 180",
             "subject": {"type": "Trip"}, "measure": "days", "window_days": 180, "limit": 90}  # fmt: skip
    try:

        def run(wb: Workbench) -> Any:
            out: list[Any] = [sorted(a.id for a in wb.alerts())]
            out.append([a.message for a in wb.constrain(trips, key="trips").raised])
            ev = [update("Meal", k, i, calories=900) for i, k in enumerate(meals)]
            ev.append({**update("Trip", "x", 0), "ts": "2031-06-01T00:00:00", "op": "add",
                       "key": "trip-late", "fields": {"destination": "Far"}})  # fmt: skip
            r = wb.ingest(ev)
            out.append(([a.message for a in r.raised], [c.id for c in r.cleared]))
            out.append(sorted((a.rule, a.message) for a in wb.alerts()))
            return out

        both(snap, plain, run, rules=[*LIBRARY, every_key, ranges], per_field=True)
        # reopened: the kept alerts of the clock rule and the constraint are the fold's
        a, b = (everything(p) for p in (snap, plain))
        assert a["alerts"] == b["alerts"]
    finally:
        KEYS.clear()


def test_whatif_present_and_past(base: Path, tmp_path: Path) -> None:
    snap, plain = pair(base, tmp_path)
    with Workbench(plain, user="me", read_only=True, rules=()) as wb:
        ks = [(t, k) for t in wb.state.types for k in keys_of(wb, t, 4)]
        now = wb.state.now
        assert now is not None
        then = wb.as_of(now - timedelta(days=30))
        old = [(t, k) for t, k in ks if then.get(t, k) is not None]
    events = [update(t, k, i) for i, (t, k) in enumerate(ks)]
    past = [{**update(t, k, i), "ts": (now - timedelta(days=30)).isoformat()}
            for i, (t, k) in enumerate(old[:200])]  # fmt: skip

    def run(wb: Workbench) -> Any:
        out = []
        for evs, as_of in ((events, None), (past, now - timedelta(days=30))):
            w = wb.whatif(evs, as_of=as_of, expressions=["len(user.all('Transaction'))"])
            out.append([repr(x) for x in (w.records, w.raised, w.cleared, w.updated, w.answers)])
        return out

    both(snap, plain, run)


def test_uac_whatif_past_as_subprocess(base: Path, tmp_path: Path) -> None:
    snap, plain = pair(base, tmp_path)
    with Workbench(plain, user="me", read_only=True, rules=()) as wb:
        then = wb.as_of("2024-06-01T00:00:00")
        ks = [(t, k) for t in wb.state.types for k in keys_of(wb, t, 9) if then.get(t, k)]
    f = jsonl(tmp_path / "w.jsonl", [update(t, k, i) for i, (t, k) in enumerate(ks)])
    for args in (["whatif", str(f)], ["whatif", str(f), "--as-of", "2024-06-01"]):
        a, b = (uac(p, *args).stdout for p in (snap, plain))
        assert a == b


def test_edit_of_a_cell_applies_as_on_the_plain_fold(base: Path, tmp_path: Path) -> None:
    snap, plain = pair(base, tmp_path)

    def run(wb: Workbench) -> Any:
        cp = wb.checkpoint()
        code = wb.cell("Meal", cp.version)
        edited = code.replace("'greek yogurt'", "'skyr'")
        assert edited != code
        plan, report = wb.apply_edit(edited, version=cp.version, part="Meal")
        return (code, repr(plan.facts), report.appended, [r.__dict__ for r in wb.state.all("Meal")])

    both(snap, plain, run)


# == writes =====================================================================================


def test_ingest_many_keys_one_batch_and_many_small_batches(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snap, plain = pair(base, tmp_path)
    with Workbench(plain, user="me", read_only=True, rules=()) as wb:
        ks = [(t, k) for t in wb.state.types for k in keys_of(wb, t)]
    big = [update(t, k, i) for i, (t, k) in enumerate(ks[::2])]
    small = [update(t, k, 5000 + i) for i, (t, k) in enumerate(ks[1::3])]

    def run(wb: Workbench) -> Any:
        out = [wb.ingest(big).appended]
        out += [wb.ingest([e]).appended for e in small[:150]]  # one key a batch
        out += [wb.ingest(small[i : i + 7]).appended for i in range(150, len(small), 7)]
        return out

    both(snap, plain, run)
    monkeypatch.setattr(snaptypes, "PREFETCH_MAX", 50)  # the batch past PREFETCH_MAX
    snap2, plain2 = pair(base, tmp_path / "b" if (tmp_path / "b").mkdir() is None else tmp_path)
    both(snap2, plain2, run)


def test_retract_then_re_add_across_and_after_the_snapshot(base: Path, tmp_path: Path) -> None:
    """A key retracted before the snapshot re-added after it; a key retracted and re-added
    after it in one batch, and in two; then updated: positions, order, code as the fold's."""
    snap, plain = pair(base, tmp_path)
    with Workbench(plain, user="me", read_only=True, rules=()) as wb:
        gone = retracted_of(wb, "Transaction")[:3]
        live = keys_of(wb, "Transaction")[:2] + keys_of(wb, "Meal")[:1]
    assert gone and len(live) == 3

    def add(t: str, k: str, i: int) -> dict[str, Any]:
        return {**update(t, k, i), "op": "add", "fields": {"amount": 1.5, "merchant": f"m{i}"}}

    def run(wb: Workbench) -> Any:
        out = [wb.ingest([add("Transaction", k, i) for i, k in enumerate(gone)]).appended]
        t0, t1, m = live
        out.append(wb.ingest([retract("Transaction", t0, 10), add("Transaction", t0, 11)]).appended)
        out.append(wb.ingest([retract("Transaction", t1, 12)]).appended)
        out.append(wb.ingest([add("Transaction", t1, 13)]).appended)
        out.append(wb.ingest([retract("Meal", m, 14)]).appended)
        out.append(wb.ingest([{**add("Meal", m, 15), "fields": {"item": "again"}}]).appended)
        out.append(wb.ingest([update("Transaction", k, 20 + i) for i, k in
                              enumerate([*gone, t0, t1])]).appended)  # fmt: skip
        st = wb.state
        out.append([(t, k, st.types[t].position[k]) for t, k in
                    [*(("Transaction", k) for k in [*gone, t0, t1]), ("Meal", m)]])  # fmt: skip
        out.append([r.__dict__ for r in st.unset("Transaction", "note")])
        return out

    both(snap, plain, run)
    same_as_plain(snap, tmp_path)


def test_fields_widened_and_new_types_after_the_snapshot(base: Path, tmp_path: Path) -> None:
    """A new field, then values a column cannot hold (a huge int, an aware date-time, text in
    a list), new types; a second snapshot over them, more events, a third; reopen: the fold."""
    snap, _ = pair(base, tmp_path)
    with Workbench(snap, user="me") as wb:
        ks = keys_of(wb, "Meal", 3)
        wb.ingest([update("Meal", k, i, stamp="2025-01-01T10:00:00", big=5, tags=[1, 2])
                   for i, k in enumerate(ks[:40])])  # fmt: skip
        wb.ingest([{"kind": "fact", "ts": "2030-02-01T00:00:00", "op": "add", "type": "Gizmo",
                    "key": f"g{i}", "fields": {"n": i}} for i in range(30)])  # fmt: skip
        wb.checkpoint()  # snapshot 2: a delta with new columns and a new type
    same_as_plain(snap, tmp_path, "one.duckdb")
    with Workbench(snap, user="me") as wb:
        ks = keys_of(wb, "Meal", 3)
        before = reads(wb)
        wb.ingest([update("Meal", k, 100 + i, stamp="2025-01-01T10:00:00+02:00",
                          big=2**63 - 1 - i, calories=-(2**63) + i)
                   for i, k in enumerate(ks[20:80])])  # fmt: skip
        wb.ingest([{"kind": "fact", "ts": "2030-03-01T00:00:00", "op": "update", "type": "Gizmo",
                    "key": f"g{i}", "fields": {"n": 2**63 - 1, "m": "x"}} for i in range(10)])  # fmt: skip
        assert reads(wb) - before <= bound(wb)
        wb.checkpoint()  # snapshot 3: widened columns rewrite their types
    same_as_plain(snap, tmp_path, "two.duckdb")
    with Workbench(snap, user="me") as wb:
        wb.ingest([update("Meal", k, 300 + i) for i, k in enumerate(keys_of(wb, "Meal", 2))])
    same_as_plain(snap, tmp_path, "three.duckdb")


def test_second_snapshot_after_more_events_then_reopen(base: Path, tmp_path: Path) -> None:
    snap, _ = pair(base, tmp_path)
    for rnd in range(3):
        with Workbench(snap, user="me") as wb:
            ks = [(t, k) for t in wb.state.types for k in keys_of(wb, t, 5 + rnd)]
            wb.ingest([update(t, k, rnd * 3000 + i) for i, (t, k) in enumerate(ks)])
            n = reads(wb)
            wb.checkpoint()
            assert reads(wb) <= bound(wb) and n <= bound(wb)
        same_as_plain(snap, tmp_path, f"r{rnd}.duckdb")


# == processes ==================================================================================


def test_two_processes_one_writes_after_the_other_opened(base: Path, tmp_path: Path) -> None:
    """A workbench opened from the snapshot (lazy, some keys read); another process ingests
    updates to many keys and checkpoints (a new snapshot); the first then answers as the fold."""
    snap, _ = pair(base, tmp_path)
    with Workbench(snap, user="me") as wb:
        ks = [(t, k) for t in wb.state.types for k in keys_of(wb, t, 3)]
        wb.state.get("Meal", ks[0][1])
        f = jsonl(tmp_path / "u.jsonl", [update(t, k, i) for i, (t, k) in enumerate(ks)])
        uac(snap, "ingest", str(f))
        uac(snap, "checkpoint")
        ev = wb.eval("sorted((r.key, r.note) for r in user.all('Transaction'))")
        sq = wb.sql("SELECT key, note FROM Transaction ORDER BY key").rows
        wb.ingest([update("Meal", ks[0][1], 9999)])
        cp = wb.checkpoint()
        mine = (ev, sq, cp.version, wb.code(cp.version))
    plain = plain_copy(snap, tmp_path)
    with Workbench(plain, user="me") as wb:
        theirs_ev = wb.eval("sorted((r.key, r.note) for r in user.all('Transaction'))")
        assert theirs_ev == ev
        assert wb.sql("SELECT key, note FROM Transaction ORDER BY key").rows == sq
        assert wb.code(cp.version) == mine[3]
    same_as_plain(snap, tmp_path)


def test_uac_checkpoint_and_code_byte_for_byte(base: Path, tmp_path: Path) -> None:
    snap, plain = pair(base, tmp_path)
    for args in (["checkpoint"], ["code"], ["state"], ["eval", "len(user.all('Meal'))"],
                 ["sql", "SELECT count(*), sum(amount) FROM Transaction"]):  # fmt: skip
        a, b = (uac(p, *args).stdout for p in (snap, plain))
        assert a == b, args


def test_forget_text_reaches_snapshot_and_answers_as_fold(base: Path, tmp_path: Path) -> None:
    snap, plain = pair(base, tmp_path)
    needle = "greek yogurt"
    assert needle.encode() in snap.read_bytes()
    for p in (snap, plain):
        uac(p, "forget", "--text", needle)
    assert needle.encode() not in snap.read_bytes()
    for args in (["checkpoint"], ["code"], ["eval", "sorted(r.item for r in user.all('Meal'))"]):
        a, b = (uac(p, *args).stdout for p in (snap, plain))
        assert a == b, args
    assert needle.encode() not in snap.read_bytes()
    same_as_plain(snap, tmp_path)


def test_forget_record_in_process_then_checkpoint(base: Path, tmp_path: Path) -> None:
    snap, plain = pair(base, tmp_path)

    def run(wb: Workbench) -> Any:
        ks = keys_of(wb, "Transaction", 97)
        for k in ks[:3]:
            wb.forget(type="Transaction", key=k)
        return [r.__dict__ for r in wb.state.all("Transaction")][-30:]

    both(snap, plain, run)


def test_review_accept_on_a_snapshot_opened_store(base: Path, tmp_path: Path) -> None:
    snap, plain = pair(base, tmp_path)
    with Workbench(plain, user="me", read_only=True, rules=()) as wb:
        ts = keys_of(wb, "Transaction", 50)[:6]
    turn = {"kind": "utterance", "ts": "2030-05-01T09:00:00", "speaker": "user",
            "text": "Our Lisbon flight moved to the eighteenth.", "source": "t#1"}  # fmt: skip
    ops = [
        {
            "op": "update",
            "type": "Transaction",
            "key": k,
            "fields": [{"name": "note", "value": "moved"}],
            "utterances": ["t#1"],
        }
        for k in ts
    ]
    ops.append({"op": "retract", "type": "Transaction", "key": ts[0], "reason": "x",
                "utterances": ["t#1"]})  # fmt: skip
    content = json.dumps({"operations": ops})
    got = []
    for path in (snap, plain):
        with ChatServer() as server:
            settings = ModelSettings(model="stand-in", base_url=server.base_url, timeout=5.0,
                                     max_retries=0, deadline=30.0)  # fmt: skip
            with Workbench(path, user="me", model=settings) as wb:
                wb.ingest([turn])
                server.enqueue(content)
                rep = wb.extract(progress=False)
                held = [b.id for b in wb.review()]
                out: list[Any] = [rep.held, held]
                if held:
                    out.append(wb.accept(held[0]).appended)
                if isinstance(wb.state.types["Transaction"], SnapTypeState):
                    assert reads(wb) <= bound(wb)
                cp = wb.checkpoint()
                out.append((cp.version, wb.code(cp.version)))
                out.append([(r := wb.state.get("Transaction", k)) and r.__dict__ for k in ts])
                got.append(out)
    assert got[0][1], "the batch was held (the case needs a held batch)"
    assert got[0] == got[1]


# == kill -9 during the snapshot write ===========================================================

WRITER = """
import sys, json
from uac_kernel.workbench import Workbench
db, events = sys.argv[1], sys.argv[2]
with Workbench(db, user="me") as wb:
    wb.ingest(events)
    print("writing", flush=True)
    wb.checkpoint()
    print("done", flush=True)
"""


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.15, 0.3, 0.6, 1.0])
def test_kill_9_during_the_snapshot_write(base: Path, tmp_path: Path, delay: float) -> None:
    """A process killed while its checkpoint writes the snapshot: the next open answers as the
    plain fold (from the old snapshot, the new one, or none) and the log verifies."""
    snap, _ = pair(base, tmp_path)
    with Workbench(snap, user="me", read_only=True, rules=()) as wb:
        ks = [(t, k) for t in wb.state.types for k in keys_of(wb, t, 2)]
    f = jsonl(tmp_path / "e.jsonl", [update(t, k, i, big=2**63 - 1 - i, when="2025-01-01T10:00:00+02:00") for i, (t, k) in
                                     enumerate(ks)])  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(snap), str(f)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "writing", proc.stderr.read() if proc.stderr else ""
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=HANG)
    done = uac(snap, "verify", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    same_as_plain(snap, tmp_path)


# == more seams ==================================================================================


def test_a_refused_batch_leaves_the_snapshot_state_as_the_fold(base: Path, tmp_path: Path) -> None:
    """A batch of many updates whose last names a key that does not exist is refused whole;
    what its check read (and marked missing) must not change any later answer."""
    from uac_kernel.core.errors import EventError

    snap, plain = pair(base, tmp_path)
    with Workbench(plain, user="me", read_only=True, rules=()) as wb:
        ks = [(t, k) for t in wb.state.types for k in keys_of(wb, t, 3)]
        gone = retracted_of(wb, "Transaction")[0]
    bad = [update(t, k, i) for i, (t, k) in enumerate(ks)] + [update("Transaction", gone, 9)]

    def run(wb: Workbench) -> Any:
        with pytest.raises(EventError):
            wb.ingest(bad)
        with pytest.raises(EventError):
            wb.ingest([update("Transaction", "no-such-key", 1)])
        return wb.ingest(bad[:-1]).appended, [r.__dict__ for r in wb.state.all("Meal")][-5:]

    both(snap, plain, run)


def test_a_type_whose_records_were_all_retracted(base: Path, tmp_path: Path) -> None:
    snap, _ = pair(base, tmp_path)
    with Workbench(snap, user="me") as wb:
        ks = keys_of(wb, "Medication")
        wb.ingest([retract("Medication", k, i) for i, k in enumerate(ks)])
        wb.ingest([{"kind": "fact", "ts": "2029-12-31T00:00:00", "op": "add", "type": "Empty",
                    "key": "e1", "fields": {"n": 1}}, retract("Empty", "e1", 99)])  # fmt: skip
        wb.checkpoint()
    plain = plain_copy(snap, tmp_path)
    got = []
    for p in (snap, plain):
        with Workbench(p, user="me", rules=()) as wb:
            got.append([
                wb.state.get("Medication", ks[0]), len(wb.state.all("Medication")),
                [r.__dict__ for r in wb.versions("Medication", ks[-1])],
                wb.state.types["Empty"].position["e1"], list(wb.state.types["Empty"].order),
                wb.eval("len(user.all('Empty'))"),
            ])  # fmt: skip
            wb.ingest([{"kind": "fact", "ts": "2030-03-01T00:00:00", "op": "add",
                        "type": "Medication", "key": ks[0], "fields": {}}])  # fmt: skip
            cp = wb.checkpoint()
            got[-1].append(wb.code(cp.version))
    assert got[0] == got[1]
    same_as_plain(snap, tmp_path)


def test_uac_history_and_state_of_one_record(base: Path, tmp_path: Path) -> None:
    snap, plain = pair(base, tmp_path)
    with Workbench(plain, user="me", read_only=True, rules=()) as wb:
        k = keys_of(wb, "Transaction")[5]
        gone = retracted_of(wb, "Transaction")[0]
    for args in (["history", "Transaction", k], ["history", "Transaction", gone],
                 ["eval", f"user.get('Transaction', {k!r})"]):  # fmt: skip
        a, b = (uac(p, *args).stdout for p in (snap, plain))
        assert a == b, args


def test_a_big_uac_ingest_then_uac_checkpoint_as_processes(tmp_path: Path) -> None:
    """The issue's case as a user meets it: ``uac ingest`` of a file past CLOSE_AFTER leaves
    a snapshot, the next ``uac checkpoint`` and ``uac code`` print what the plain fold does."""
    scale = _scale()
    history = scale.History(snapshot.CLOSE_AFTER + 500)
    f = jsonl(tmp_path / "big.jsonl", [history.next() for _ in range(snapshot.CLOSE_AFTER + 500)])
    snap = tmp_path / "snap.duckdb"
    uac(snap, "ingest", str(f))
    assert lazy_types(snap)
    plain = plain_copy(snap, tmp_path, "plain.duckdb")
    live = [(t, k) for t, ks in history.live.items() for k in ks[::5]]
    g = jsonl(tmp_path / "upd.jsonl", [update(t, k, i) for i, (t, k) in enumerate(live)])
    for args in (["checkpoint"], ["code"], ["ingest", str(g)], ["checkpoint"], ["code"],
                 ["forget", "--record", *live[0]], ["code"]):  # fmt: skip
        a, b = (uac(p, *args).stdout.replace(str(p), "DB") for p in (snap, plain))
        assert a == b, args


def test_a_window_of_a_long_table_reads_its_rows_not_the_table(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A range of a field index holding at most a quarter of the table is read by its keys,
    even past ``PREFETCH_MAX`` (a rule's 90-day window of a long history); a wider one reads the
    table whole. Either way the records are the fold's."""
    monkeypatch.setattr(snaptypes, "PREFETCH_MAX", 10)
    snap, plain = pair(base, tmp_path)
    with Workbench(plain, user="me", read_only=True, rules=()) as wb:
        dates = sorted(r.date for r in wb.state.all("Transaction") if r.date is not None)
    narrow, wide = dates[-len(dates) // 10], dates[len(dates) // 2]
    got = []
    for path in (snap, plain):
        with Workbench(path, user="me", read_only=True, rules=()) as wb:
            ts = wb.state.types["Transaction"]
            first = [r.__dict__ for r in wb.state.where("Transaction", "date", narrow)]
            assert len(first) > 10
            whole = "current" in ts._loaded if isinstance(ts, SnapTypeState) else None
            second = [r.__dict__ for r in wb.state.where("Transaction", "date", wide)]
            wider = "current" in ts._loaded if isinstance(ts, SnapTypeState) else None
            got.append((first, second))
            if path == snap:
                assert (whole, wider) == (False, True)
    assert got[0] == got[1]


def test_keys_missed_in_a_long_table_are_read_by_key_not_the_table(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long table allows more queries by key than ``BY_KEY_QUERIES`` (one per
    ``ROWS_PER_QUERY`` rows) before a missed key reads it whole: an alert cleared names a few
    records of a table of 500k rows."""
    snap, plain = pair(base, tmp_path)
    with Workbench(plain, user="me", read_only=True, rules=()) as wb:
        keys = keys_of(wb, "Transaction", every=7)[:12]
        want = [wb.state.get("Transaction", k).__dict__ for k in keys]  # type: ignore[union-attr]
    # Rows per query so large that the long-table allowance is nothing: past BY_KEY_QUERIES
    # misses the table is read whole; at 10 rows per query, 12 misses stay queries by key.
    for per_query, read_whole in ((10**9, True), (10, False)):
        monkeypatch.setattr(snaptypes, "ROWS_PER_QUERY", per_query)
        with Workbench(snap, user="me", read_only=True, rules=()) as wb:
            ts = wb.state.types["Transaction"]
            assert isinstance(ts, SnapTypeState) and ts._rows // 10 > len(keys)
            got = [wb.state.get("Transaction", k).__dict__ for k in keys]  # type: ignore[union-attr]
            assert got == want
            assert ("current" in ts._loaded) == read_whole
