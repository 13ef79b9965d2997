"""A store opened from its snapshot answers as one folded without: the answers, the demo store."""

from __future__ import annotations

import atexit
import shutil
import tempfile
import warnings
from pathlib import Path
from typing import Any

import duckdb

from helpers.constraints import TAX
from uac_kernel.checkpoints.snapshot import drop_snapshots
from uac_kernel.checkpoints.snaptypes import SnapTypeState
from uac_kernel.core.errors import SnapshotIgnored
from uac_kernel.demo.life import write_demo_jsonl
from uac_kernel.log.store import Store
from uac_kernel.workbench import Workbench


def answers(path: Path, user: str) -> dict[str, Any]:
    """Everything a workbench on ``path`` answers, ending with the next checkpoint's code."""
    with Workbench(path, user=user) as wb:
        st = wb.state
        out: dict[str, Any] = {
            "seq": st.seq,
            "now": st.now,
            "type_seq": dict(st.type_seq),
            "schema": st.schema.types,
            "dirty": sorted(st.dirty),
            "alerts": wb.alerts(),
            "constraints": wb.constraints(history=True),
            "in_force": sorted(wb._constraint_rules.items()),
        }
        for name, ts in st.types.items():
            out[f"{name}:current"] = [
                (k, r.__dict__, type(r).__name__) for k, r in ts.current.items()
            ]
            out[f"{name}:history"] = [r.__dict__ for r in ts.history]
            out[f"{name}:order"] = list(ts.order)
            out[f"{name}:position"] = dict(ts.position)
            out[f"{name}:fields"] = list(ts.cls.model_fields)
            out[f"{name}:eval"] = wb.eval(f"[(r.key, r.valid_from) for r in user.all({name!r})]")
        for name, (cur, hist) in wb.sql_tables().items():
            out[f"sql:{name}"] = wb.sql(f'SELECT * FROM "{cur}" ORDER BY key').rows
            out[f"sql:{name}:h"] = wb.sql(f'SELECT * FROM "{hist}" ORDER BY key, valid_from').rows
        cp = wb.checkpoint()
        out["checkpoint"] = (cp.version, cp.new, wb.code(cp.version))
    return out


def opened_from_snapshot(path: Path, user: str) -> bool:
    with Workbench(path, user=user, read_only=True) as wb:
        return any(isinstance(ts, SnapTypeState) for ts in wb.state.types.values())


def compare(path: Path, user: str, tmp_path: Path, *, ignored: bool = False) -> None:
    """Open a copy of ``path`` with its snapshot and one without: every answer is the same."""
    with_snap, without = tmp_path / "with.duckdb", tmp_path / "without.duckdb"
    shutil.copy(path, with_snap)
    shutil.copy(path, without)
    store = Store(without)
    assert drop_snapshots(store.con, user) == 1
    store.close()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        if not ignored:
            assert opened_from_snapshot(with_snap, user)
        got = answers(with_snap, user)
    warned = [str(w.message) for w in seen if issubclass(w.category, SnapshotIgnored)]
    if ignored:
        assert warned and all(m.startswith(f"snapshot of {user} ignored: ") for m in warned)
        assert warned[0].endswith("; folding the log")
    else:
        assert warned == []
    with warnings.catch_warnings():
        warnings.simplefilter("error", SnapshotIgnored)
        want = answers(without, user)
    assert got.keys() == want.keys()
    for k in want:
        assert got[k] == want[k], k


def split_demo(tmp_path: Path) -> tuple[Path, list[str]]:
    src = tmp_path / "demo.jsonl"
    write_demo_jsonl(src)
    lines = src.read_text().splitlines(keepends=True)
    return src, lines


def demo_store(tmp_path: Path) -> Path:
    """The demo's first 600 events, a constraint and a checkpoint (the snapshot), then the rest
    of the demo and a changed constraint (the new events the open folds): ``demo.duckdb`` in
    ``tmp_path``, with the demo's JSONL (``demo.jsonl``, ``first.jsonl``, ``rest.jsonl``).

    Built once per test process and copied for each test, which may change its copy at will."""
    if "root" not in _BUILT:
        root = Path(tempfile.mkdtemp(prefix="uac-demo-store-"))
        atexit.register(shutil.rmtree, root, ignore_errors=True)
        _build_demo_store(root)
        _BUILT["root"] = root
    for p in _BUILT["root"].iterdir():
        shutil.copy(p, tmp_path / p.name)
    return tmp_path / "demo.duckdb"


_BUILT: dict[str, Path] = {}


def _build_demo_store(root: Path) -> None:
    _, lines = split_demo(root)
    first, rest = root / "first.jsonl", root / "rest.jsonl"
    first.write_text("".join(lines[:600]))
    rest.write_text("".join(lines[600:]))
    db = root / "demo.duckdb"
    with Workbench(db, user="demo") as wb:
        wb.ingest(first)
        wb.constrain(TAX, key="tax")
        wb.checkpoint()
    with Workbench(db, user="demo") as wb:
        assert isinstance(next(iter(wb.state.types.values())), SnapTypeState)
        wb.ingest(rest)
        wb.constrain({**TAX, "lead_days": 10}, key="tax")


def snapshot_of(db: Path) -> Path:
    """A copy of the store at ``db`` (``kept.duckdb`` beside it), its snapshot to put back."""
    keep = db.with_name("kept.duckdb")
    shutil.copy(db, keep)
    return keep


def put_back(db: Path, kept: Path) -> None:
    """The snapshots of ``kept`` (``snapshot_of``) written back into the store at ``db``."""
    con = duckdb.connect(str(db))
    try:
        con.execute(f"ATTACH '{kept}' AS kept (READ_ONLY)")
        con.execute("DELETE FROM snapshots")
        con.execute("INSERT INTO snapshots SELECT * FROM kept.snapshots")
        for (name,) in con.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_schema = 'uac_snap' AND table_catalog = 'kept'"
        ).fetchall():
            con.execute(f'CREATE OR REPLACE TABLE uac_snap."{name}" AS FROM kept.uac_snap."{name}"')
    finally:
        con.close()
