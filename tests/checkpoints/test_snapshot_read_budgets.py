"""Snapshot read budgets, attacked: ranges of a field index read by their keys, long tables
allowing more queries by key, keys that are not text; every answer as the plain fold gives it."""

from __future__ import annotations

import random
import shutil
import warnings
from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import uac_kernel.checkpoints.snaptypes as snaptypes
import uac_kernel.workbench as workbench
from uac_kernel.checkpoints.snapshot import drop_snapshots
from uac_kernel.checkpoints.snaptypes import SnapTypeState
from uac_kernel.core.errors import SnapshotIgnored
from uac_kernel.log.store import Store
from uac_kernel.rules.engine import Finding, rule
from uac_kernel.workbench import Workbench

N = 400


def ev(i: int, op: str, t: str, key: str, **fields: Any) -> dict[str, Any]:
    ts = (datetime(2030, 1, 1) + timedelta(minutes=i)).isoformat()
    e: dict[str, Any] = {"kind": "fact", "ts": ts, "op": op, "type": t, "key": key}
    if op != "retract":
        e["fields"] = fields
    return e


def history(seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    out = []
    for i in range(N):
        f: dict[str, Any] = {"note": f"n{i}"}
        if rng.random() < 0.8:
            f["d"] = (date(2029, 1, 1) + timedelta(days=rng.randint(0, 300))).isoformat()
        if rng.random() < 0.8:
            f["n"] = rng.choice((rng.randint(0, 100), rng.randint(0, 100) + 0.5))
        if rng.random() < 0.5:
            f["at"] = (datetime(2029, 1, 1) + timedelta(hours=rng.randint(0, 9000))).isoformat()
        out.append(ev(i, "add", "Tx", f"k{i:04d}", **f))
    for i in range(N, N + 60):  # updates and retracts before the snapshot
        k = f"k{rng.randrange(N):04d}"
        if rng.random() < 0.3:
            out.append(ev(i, "retract", "Tx", k))
            out.append(ev(i, "add", "Tx", k, d="2029-05-05", n=7))
        else:
            out.append(ev(i, "update", "Tx", k, n=rng.randint(0, 100)))
    return out


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    db = tmp_path / "base.duckdb"
    monkeypatch.setattr(workbench, "CLOSE_AFTER", 1)
    with Workbench(db, user="me", rules=()) as wb:
        wb.ingest(history())
    return db


def pair(base: Path, tmp_path: Path) -> tuple[Path, Path]:
    snap, plain = tmp_path / "snap.duckdb", tmp_path / "plain.duckdb"
    shutil.copy(base, snap)
    shutil.copy(base, plain)
    store = Store(plain)
    drop_snapshots(store.con)
    store.close()
    return snap, plain


def reads(wb: Workbench) -> int:
    return sum(ts._src.reads for ts in wb.state.types.values() if isinstance(ts, SnapTypeState))


def small(monkeypatch: pytest.MonkeyPatch, per_query: int = 20, prefetch: int = 3,
          ranges: int = 2) -> None:  # fmt: skip
    monkeypatch.setattr(snaptypes, "ROWS_PER_QUERY", per_query)
    monkeypatch.setattr(snaptypes, "PREFETCH_MAX", prefetch)
    monkeypatch.setattr(snaptypes, "RANGE_QUERIES", ranges)


def both(snap: Path, plain: Path, run: Callable[[Workbench], Any]) -> list[Any]:
    got = []
    for path in (snap, plain):
        with warnings.catch_warnings():
            warnings.simplefilter("error", SnapshotIgnored)
            with Workbench(path, user="me", rules=()) as wb:
                assert isinstance(wb.state.types["Tx"], SnapTypeState) == (path == snap)
                got.append(run(wb))
    assert got[0] == got[1]
    return got


def dump(recs: list[Any]) -> list[Any]:
    return [(r.key, r.__dict__) for r in recs]


def everything(wb: Workbench) -> Any:
    ts = wb.state.types["Tx"]
    return (
        [(k, r.__dict__) for k, r in ts.current.items()],
        [r.__dict__ for r in ts.history],
        list(ts.order),
        dict(ts.position),
        [dump(wb.state.where("Tx", f)) for f in wb.state.schema.types["Tx"] if f != "note"],
    )


D = [datetime(2029, 1, 1) + timedelta(days=x) for x in range(0, 320, 20)]


def test_ranges_then_fold_changes_and_retracts_those_keys_then_all(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small(monkeypatch)
    snap, plain = pair(base, tmp_path)

    def run(wb: Workbench) -> Any:
        out = []
        st = wb.state
        i = 10_000
        for lo, hi in zip(D, D[2:], strict=False):
            got = st.where("Tx", "d", lo, hi)
            out.append(dump(got))
            batch = []
            for r in got[:3]:
                i += 1
                batch.append(ev(i, "update", "Tx", r.key, d="2029-02-02", n=1))
            for r in got[3:5]:
                i += 1
                batch.append(ev(i, "retract", "Tx", r.key))
            for r in got[5:6]:
                i += 1
                batch.append(ev(i, "retract", "Tx", r.key))
                batch.append(ev(i, "add", "Tx", r.key, n=3))
            if batch:
                wb.ingest(batch)
            out.append(dump(st.where("Tx", "d", lo, hi)))
            out.append(dump(st.where("Tx", "n", 10, 60)))
            out.append(dump(st.unset("Tx", "d")))
        out.append(everything(wb))
        return out

    both(snap, plain, run)


def test_settle_between_a_range_read_and_a_whole_read(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small(monkeypatch)
    snap, plain = pair(base, tmp_path)

    def run(wb: Workbench) -> Any:
        st = wb.state
        out = [dump(st.where("Tx", "d", D[3], D[5]))]
        keys = [r.key for r in st.where("Tx", "at", datetime(2029, 3, 1), datetime(2029, 5, 1))]
        wb.ingest([ev(20_000, "update", "Tx", keys[0], extra="x", big=5)])  # new fields: settle
        out.append(dump(st.where("Tx", "d", D[3], D[5])))
        out.append(dump(st.where("Tx", "big", 0)))
        out.append(dump(st.unset("Tx", "big"))[:50])
        wb.ingest([ev(20_001, "update", "Tx", k, big=i) for i, k in enumerate(keys[1:6])])
        out.append(dump(st.where("Tx", "big", 1, 4)))
        out.append(dump(wb.view.all("Tx")))
        out.append(everything(wb))
        return out

    both(snap, plain, run)


def test_rebase_after_a_checkpoint_then_ranges_and_changes(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small(monkeypatch)
    snap, plain = pair(base, tmp_path)

    def run(wb: Workbench) -> Any:
        st = wb.state
        out: list[Any] = [dump(st.where("Tx", "d", D[1], D[3]))]
        got = st.where("Tx", "n", 20, 30)
        wb.ingest([ev(30_000 + j, "update", "Tx", r.key, n=99, fresh=j)
                   for j, r in enumerate(got[:4])])  # fmt: skip
        wb.ingest([ev(30_100, "retract", "Tx", got[4].key)] if len(got) > 4 else [])
        cp = wb.checkpoint()
        out.append((cp.version, cp.new))
        out.append(dump(st.where("Tx", "n", 20, 100)))
        out.append(dump(st.where("Tx", "d", D[6], D[9])))
        wb.ingest([ev(30_200 + j, "update", "Tx", f"k{j:04d}", n=j % 3) for j in range(0, 80, 7)])
        out.append(dump(st.where("Tx", "n", 0, 3)))
        out.append(dump(st.where("Tx", "fresh", 0)))
        cp = wb.checkpoint()
        out.append((cp.version, cp.new))
        out.append(everything(wb))
        return out

    both(snap, plain, run)


@pytest.mark.parametrize("seed", range(6))
def test_random_mix_of_ranges_gets_changes_and_checkpoints(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    small(monkeypatch, per_query=random.Random(seed).choice((3, 20, 100)),
          prefetch=random.Random(seed).choice((1, 3, 50)), ranges=seed % 3)  # fmt: skip
    snap, plain = pair(base, tmp_path)

    def run(wb: Workbench) -> Any:
        rng = random.Random(seed)
        st = wb.state
        out: list[Any] = []
        for step in range(30):
            roll = rng.random()
            if roll < 0.3:
                f = rng.choice(("d", "at", "n"))
                lo, hi = sorted(rng.sample(range(0, 110) if f == "n" else D, 2))  # type: ignore[type-var]
                out.append(dump(st.where("Tx", f, lo, hi)))
            elif roll < 0.45:
                k = f"k{rng.randrange(N + 20):04d}"
                r = st.get("Tx", k)
                out.append((k, r and r.__dict__))
            elif roll < 0.75:
                b = []
                for j in range(rng.randint(1, 4)):
                    k = f"k{rng.randrange(N + 20):04d}"
                    i = 40_000 + step * 10 + j
                    if st.get("Tx", k) is None:
                        b.append(ev(i, "add", "Tx", k, n=rng.randint(0, 100)))
                    elif rng.random() < 0.3:
                        b.append(ev(i, "retract", "Tx", k))
                    else:
                        fields = rng.choice(({"n": rng.randint(0, 100)}, {"d": None},
                                             {"d": "2029-04-04"}, {f"new{step}": 1}))  # fmt: skip
                        b.append(ev(i, "update", "Tx", k, **fields))
                try:
                    wb.ingest(b)
                    out.append("ok")
                except Exception as exc:  # a refused batch: the same on both
                    out.append(type(exc).__name__)
            elif roll < 0.85:
                out.append(dump(st.unset("Tx", rng.choice(("d", "n", "at")))))
            elif roll < 0.95:
                cp = wb.checkpoint()
                out.append((cp.version, cp.new))
            else:
                out.append(dump(wb.view.all("Tx")))
        out.append(everything(wb))
        return out

    both(snap, plain, run)


def test_a_reader_key_by_key_makes_queries_bounded_by_rows_not_keys(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ROWS_PER_QUERY = 20 the 400-row table allows 20 queries by key: a reader that gets
    every key one by one (a notebook loop, a rule going through keys) makes at most that many
    before it reads the table whole (and no more after)."""
    small(monkeypatch)
    snap, _plain = pair(base, tmp_path)
    with Workbench(snap, user="me", rules=()) as wb:
        ts = wb.state.types["Tx"]
        assert isinstance(ts, SnapTypeState)
        before = reads(wb)
        for i in range(N):
            wb.state.get("Tx", f"k{i:04d}")
        made = reads(wb) - before
        assert "current" in ts._loaded
        assert made <= ts._rows // snaptypes.ROWS_PER_QUERY + 2, made


@pytest.fixture
def mixed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    rng = random.Random(3)
    db = tmp_path / "mixed.duckdb"
    evs = []
    for i in range(300):
        f: dict[str, Any] = {}
        roll = rng.random()
        if roll < 0.3:
            f["big"] = rng.randint(0, 10) * 10**17 + i
        elif roll < 0.6:
            f["big"] = rng.randint(-5, 5)
        if rng.random() < 0.3:
            f["tm"] = (datetime(2029, 1, 1) + timedelta(hours=i * 7)).isoformat() + "+05:00"
        elif rng.random() < 0.5:
            f["tm"] = (datetime(2029, 1, 1) + timedelta(hours=i * 5)).isoformat()
        if rng.random() < 0.5:
            f["w"] = (datetime(2029, 1, 1) + timedelta(days=i % 50)).date().isoformat()
        elif rng.random() < 0.5:
            f["w"] = (datetime(2029, 1, 1) + timedelta(days=i % 50, hours=3)).isoformat()
        f["x"] = "y"
        evs.append(ev(i, "add", "Tx", f"k{i:04d}", **f))
    monkeypatch.setattr(workbench, "CLOSE_AFTER", 1)
    with Workbench(db, user="me", rules=()) as wb:
        wb.ingest(evs)
    return db


def test_ranges_over_text_columns_of_numbers_and_times_as_the_fold(
    mixed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    small(monkeypatch, per_query=10, prefetch=2, ranges=3)
    snap, plain = pair(mixed, tmp_path)
    got = []
    for path in (snap, plain):
        with Workbench(path, user="me", rules=()) as wb:
            st = wb.state
            assert isinstance(st.types["Tx"], SnapTypeState) == (path == snap)
            out: list[Any] = [st.schema.types["Tx"]]
            for f, bounds in (
                ("big", [(0, 10**18), (10**17, 5 * 10**17), (-3, 3), (None, 0)]),
                (
                    "tm",
                    [(datetime(2029, 2, 1), datetime(2029, 3, 1)), (None, datetime(2029, 2, 1))],
                ),
                (
                    "w",
                    [(datetime(2029, 1, 10), datetime(2029, 1, 20)), (datetime(2029, 2, 1), None)],
                ),
            ):
                for lo, hi in bounds:
                    out.append([(r.key, r.__dict__) for r in st.where("Tx", f, lo, hi)])
                    wb.ingest([ev(9000 + len(out), "update", "Tx", "k0007", x=str(len(out)))])
                out.append(sorted(r.key for r in st.unset("Tx", f)))
            out.append([(r.key, r.__dict__) for r in wb.view.all("Tx")])
            got.append(out)
    assert got[0] == got[1]


@rule(watch=["Tx"], severity="info")
def window(user: Any) -> Iterator[Finding]:
    for r in user.where("Tx", "d", since=date(2029, 3, 1), before=date(2029, 4, 1)):
        if (r.n or 0) > 50:
            yield Finding(f"{r.key} big in march", [r])
    for r in user.where("Tx", "n", since=95):
        yield Finding(f"{r.key} huge", [r])


def run(wb: Workbench) -> Any:
    out: list[Any] = [sorted((a.id, a.message) for a in wb.alerts())]
    march = [r.key for r in wb.state.where("Tx", "d", datetime(2029, 3, 1), datetime(2029, 4, 1))]
    evs = [ev(60_000 + i, "update", "Tx", k, n=77 if i % 2 else 3) for i, k in enumerate(march[:6])]
    evs += [ev(60_100, "retract", "Tx", march[6])]
    w = wb.whatif(evs, expressions=["len(user.all('Tx'))"])
    out.append([repr(x) for x in (w.records, w.raised, w.cleared, w.updated, w.answers)])
    r = wb.ingest(evs[:3])
    out.append((sorted(a.message for a in r.raised), sorted(c.id for c in r.cleared)))
    w = wb.whatif([ev(60_200, "update", "Tx", march[7], d="2029-03-15", n=96, newf=1)])
    out.append([repr(x) for x in (w.records, w.raised, w.cleared, w.updated)])
    wb.forget(type="Tx", key=march[8])
    out.append(sorted((a.id, a.message) for a in wb.alerts()))
    out.append([(r.key, r.__dict__) for r in wb.state.where("Tx", "d", datetime(2029, 3, 1))])
    cp = wb.checkpoint()
    out.append((cp.version, cp.new, wb.code(cp.version)))
    return out


@pytest.mark.parametrize("per_query", [5, 20, 10**9])
def test_window_rule_whatif_and_forget_as_the_fold(
    base: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, per_query: int
) -> None:
    small(monkeypatch, per_query=per_query)
    snap, plain = pair(base, tmp_path)
    got = []
    for path in (snap, plain):
        with warnings.catch_warnings():
            warnings.simplefilter("error", SnapshotIgnored)
            with Workbench(path, user="me", rules=[window]) as wb:
                assert isinstance(wb.state.types["Tx"], SnapTypeState) == (path == snap)
                got.append(run(wb))
    assert got[0] == got[1]


ODD: list[Any] = [5, 5.0, None, True, 10**30, ("k0001",), b"k0001", frozenset()]


def answer(wb: Workbench, k: Any) -> Any:
    try:
        r = wb.state.get("Tx", k)
        return ("ok", r and r.__dict__)
    except Exception as exc:
        return (type(exc).__name__,)


@pytest.mark.parametrize("k", ODD, ids=repr)
def test_state_get_of_a_key_that_is_not_text_answers_as_the_fold(
    base: Path, tmp_path: Path, k: Any
) -> None:
    snap, plain = pair(base, tmp_path)
    got = []
    for path in (snap, plain):
        with Workbench(path, user="me", rules=()) as wb:
            got.append((answer(wb, k), answer(wb, "k0001")))
    assert got[0] == got[1]


@pytest.mark.parametrize("expr", ["user.get('Tx', 5)", "user.get('Tx', None)",
                                  "[user.get('Tx', i) for i in range(3)]"])  # fmt: skip
def test_eval_get_of_a_number_key_answers_as_the_fold(
    base: Path, tmp_path: Path, expr: str
) -> None:
    snap, plain = pair(base, tmp_path)
    got = []
    for path in (snap, plain):
        with Workbench(path, user="me", rules=()) as wb:
            try:
                got.append(repr(wb.eval(expr)))
            except Exception as exc:
                got.append(f"{type(exc).__name__}: {exc}")
    assert got[0] == got[1]


@rule(watch=["Tx"], severity="info")
def linked_by_number(user: Any) -> Iterator[Finding]:
    """A rule that follows a link field holding a number (``n``) to a record by key: no record
    has a key that is a number, so it finds nothing (and must not fail)."""
    for r in user.where("Tx", "n", 99, 100):
        if user.get("Tx", r.n) is not None:
            yield Finding(f"{r.key} links", [r])


def test_rule_get_by_a_number_key_on_a_snapshot_opened_store_fails_as_the_fold_does_not(
    base: Path, tmp_path: Path
) -> None:
    snap, plain = pair(base, tmp_path)
    got = []
    for path in (snap, plain):
        with Workbench(path, user="me", rules=[linked_by_number]) as wb:
            r = wb.ingest([ev(50_000, "update", "Tx", "k0001", n=99)])
            got.append(([a.message for a in r.raised], [a.message for a in wb.alerts()]))
    assert got[0] == got[1]
