"""Outside attacks on issue 15's fleet directories: hostile partitions (tampered, swapped,
duplicated part files; forged or malformed commit json; paths and symlinks leading out of
DIR; hostile user ids), `uac fleet run` killed whole and run twice at once, sandbox escapes
through `eval`, hostile ingest sources and model answers, `uac fleet sql` reaching outside,
and `%uac fleet` errors in a real IPython shell.

A case marked ``xfail(strict=True)`` shows a defect: it passes today and flips when fixed."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from conftest import fact

from uac_kernel.errors import FleetError, QueryError, UacError
from uac_kernel.partition import (
    Fleet,
    bucket,
    checkout,
    encode,
    export_store,
    import_fleet,
    parquet_source,
    verify_fleet,
)
from uac_kernel.store import Store
from uac_kernel.workbench import Workbench

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
# Hostile ids: a path's specials, quotes, SQL, a NUL, percent-escapes that decode to another
# user's id, a long id (the ~hash form) and one a character longer.
HOSTILE = [
    "ann",
    "bob",
    "../../etc/passwd",
    "/abs/olute",
    "%2E%2E",
    "..",
    "~7E",
    "x'); DROP TABLE events; --",
    'q"uote',
    "nul\x00byte",
    "ü" * 26,  # 156 chars percent-encoded: the ~hash form
    "a" * 150,
    "a" * 151,
]


def trips(user: str, n: int = 3) -> list[dict[str, Any]]:
    return [
        {
            **fact(f"2025-01-0{i}T09:00:00", "add", "Trip", f"t{i}", city=f"{user[:8]}-{i}"),
            "source": f"s#{i}",
        }  # fmt: skip
        for i in range(1, n + 1)
    ]


def make_store(db: Path, users: list[str]) -> None:
    for user in users:
        with Workbench(db, user=user) as wb:
            wb.ingest(trips(user))
            wb.checkpoint()


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fleet of ann and bob, exported from a store (copied by each test that damages it)."""
    base = tmp_path_factory.mktemp("two")
    make_store(base / "s.duckdb", ["ann", "bob"])
    export_store(base / "s.duckdb", base / "fleet")
    return base / "fleet"


def fresh(two: Path, tmp_path: Path) -> Path:
    root = tmp_path / "fleet"
    shutil.copytree(two, root, symlinks=True)
    return root


def commit_path(root: Path, user: str, n: int = 1) -> Path:
    return Fleet(root).dir("_commits", user) / f"{n:06d}.json"


def edit_commit(root: Path, user: str, change: Callable[[dict[str, Any]], None]) -> None:
    path = commit_path(root, user)
    meta = json.loads(path.read_text())
    change(meta)
    path.write_text(json.dumps(meta))


def rewrite_part(path: Path, select: str) -> None:
    """Replace a part file by ``select`` over it (``{src}``), as an attacker with DuckDB would."""
    out = path.with_name("edited.parquet.x")
    with duckdb.connect() as con:
        con.execute(
            f"COPY ({select.format(src=parquet_source([path]))}) TO '{out}' (FORMAT parquet)"
        )
    os.replace(out, path)


def one_line_problem(root: Path) -> tuple[str, ...]:
    """verify_fleet's problems; it must report, not raise anything but a FleetError."""
    try:
        report = verify_fleet(root)
    except FleetError as exc:
        assert "\n" not in str(exc)
        return (str(exc),)
    assert all("\n" not in p for p in report.problems)
    return report.problems


def cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PY, "-m", "uac_kernel.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def refused_import(root: Path, tmp_path: Path) -> None:
    """import must refuse the damaged fleet with one line, leaving the store without a row."""
    store = tmp_path / "imported.duckdb"
    with pytest.raises(UacError) as err:
        import_fleet(root, store)
    assert "\n" not in str(err.value)
    if store.exists():
        with duckdb.connect(str(store), read_only=True) as con:
            assert con.execute("SELECT count(*) FROM events").fetchone() == (0,)


# --- hostile partitions: export / import / verify ------------------------------------------


def test_hostile_user_ids_round_trip_each_in_its_own_partition(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    make_store(db, HOSTILE)
    root = tmp_path / "fleet"
    export_store(db, root)
    fleet = Fleet(root)
    assert fleet.users() == sorted(HOSTILE)
    dirs = {fleet.dir("events", u) for u in HOSTILE}
    assert len(dirs) == len(HOSTILE)  # no two ids share a directory
    for d in dirs:
        assert d.resolve().is_relative_to(root.resolve()) and d.is_dir()
        assert len(d.name.encode()) < 255
    # nothing was written outside DIR's layout
    top = {p.name for p in root.iterdir()}
    assert top <= {"uac-fleet.json", "_commits", "events", "checkpoints", "checkpoint_segments"}
    assert verify_fleet(root).ok
    back = tmp_path / "back.duckdb"
    import_fleet(root, back)
    store = Store(back)
    try:
        for user in HOSTILE:
            assert store.verify(user).ok
    finally:
        store.close()
    for user in HOSTILE:
        with Workbench(back, user=user, read_only=True) as wb:
            assert wb.eval("sorted(r.city for r in user.all('Trip'))") == [
                f"{user[:8]}-{i}" for i in (1, 2, 3)
            ]


def test_percent_escapes_and_hash_form_do_not_collide() -> None:
    ids = ["a.b", "a%2Eb", "a%252Eb", "~x", "%7Ex", "ü" * 26, "ü" * 25 + "u", "A", "%41"]
    encs = [encode(u) for u in ids]
    assert len(set(encs)) == len(ids)
    assert all(e not in (".", "..") and "/" not in e for e in encs)
    long = encode("ü" * 26)
    assert long.startswith("~") and all(not encode(u).startswith("~") for u in ids[:5])
    assert bucket("nul\x00") != "" and encode("\ud800") != encode("\ufffd")  # lone surrogate


def test_tampered_part_file_is_reported_by_verify(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    [part] = Fleet(root).files("events", ["ann"])
    rewrite_part(part, "SELECT * REPLACE (replace(payload, 'ann-1', 'EVIL') AS payload) FROM {src}")
    problems = one_line_problem(root)
    assert any("'ann'" in p and "changed" in p for p in problems), problems
    out = cli("verify", str(root))
    assert out.returncode == 1 and "ann" in out.stdout + out.stderr


@pytest.mark.xfail(
    strict=True,
    reason="import_fleet checks no chain: a tampered part file is imported silently",
)
def test_import_refuses_a_tampered_part_file(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    [part] = Fleet(root).files("events", ["ann"])
    rewrite_part(part, "SELECT * REPLACE (replace(payload, 'ann-1', 'EVIL') AS payload) FROM {src}")
    refused_import(root, tmp_path)


def test_duplicated_rows_are_reported_by_verify(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    [part] = Fleet(root).files("events", ["ann"])
    rewrite_part(part, "SELECT * FROM {src} UNION ALL SELECT * FROM {src} ORDER BY user_seq")
    edit_commit(root, "ann", lambda m: m["rows"].update(events=m["rows"]["events"] * 2))
    problems = one_line_problem(root)
    assert any("'ann'" in p and "repeated" in p for p in problems), problems


@pytest.mark.xfail(
    strict=True,
    reason="import_fleet imports duplicated rows (row counts forged to match) into the store",
)
def test_import_refuses_duplicated_rows(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    [part] = Fleet(root).files("events", ["ann"])
    rewrite_part(part, "SELECT * FROM {src} UNION ALL SELECT * FROM {src} ORDER BY user_seq")
    edit_commit(root, "ann", lambda m: m["rows"].update(events=m["rows"]["events"] * 2))
    refused_import(root, tmp_path)


def swap_parts(root: Path) -> None:
    fleet = Fleet(root)
    [a] = fleet.files("events", ["ann"])
    [b] = fleet.files("events", ["bob"])
    tmp = a.with_name("swap.tmp")
    os.replace(a, tmp)
    os.replace(b, a)
    os.replace(tmp, b)


def test_part_files_swapped_between_users_are_reported(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    swap_parts(root)
    problems = one_line_problem(root)
    for user in ("ann", "bob"):
        assert any(f"'{user}'" in p and "another user" in p for p in problems), problems


@pytest.mark.xfail(
    strict=True,
    reason="import_fleet of both users accepts part files swapped between them (verify rejects)",
)
def test_import_refuses_swapped_part_files(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    swap_parts(root)
    refused_import(root, tmp_path)


def test_commit_naming_another_users_file_is_reported(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    [bobs] = Fleet(root).files("events", ["bob"])
    edit_commit(root, "ann", lambda m: m["files"].update(events=bobs.relative_to(root).as_posix()))
    problems = one_line_problem(root)
    assert any("'ann'" in p and "another user" in p for p in problems), problems
    # importing ann alone is refused
    with pytest.raises(FleetError, match="another user"):
        import_fleet(root, tmp_path / "ann.duckdb", users=["ann"])


@pytest.mark.xfail(
    strict=True,
    reason="import of both users takes bob's file twice (ann's commit names it): bob's events "
    "duplicated, ann's missing, store verify fails",
)
def test_import_refuses_a_commit_naming_another_users_file(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    [bobs] = Fleet(root).files("events", ["bob"])
    edit_commit(root, "ann", lambda m: m["files"].update(events=bobs.relative_to(root).as_posix()))
    refused_import(root, tmp_path)


@pytest.mark.xfail(
    strict=True,
    reason="a commit's 'files' entry with an absolute path outside DIR passes verify and is read",
)
def test_absolute_path_in_files_is_refused(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    [part] = Fleet(root).files("events", ["ann"])
    outside = tmp_path / "outside.parquet"
    shutil.copy(part, outside)  # the same rows, so only the path is wrong
    edit_commit(root, "ann", lambda m: m["files"].update(events=str(outside)))
    assert one_line_problem(root)


@pytest.mark.xfail(
    strict=True,
    reason="a commit's 'files' entry '../outside.parquet' leading out of DIR passes verify",
)
def test_relative_traversal_in_files_is_refused(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    [part] = Fleet(root).files("events", ["ann"])
    shutil.copy(part, tmp_path / "outside.parquet")
    edit_commit(root, "ann", lambda m: m["files"].update(events="../outside.parquet"))
    assert one_line_problem(root)


def test_traversal_to_etc_passwd_is_reported_and_not_imported(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    edit_commit(root, "ann", lambda m: m["files"].update(events="../" * 30 + "etc/passwd"))
    assert one_line_problem(root)
    refused_import(root, tmp_path)
    out = cli("fleet", "sql", str(root), "SELECT count(*) FROM events")
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "root:" not in out.stdout + out.stderr


@pytest.mark.xfail(
    strict=True,
    reason="a part file replaced by a symlink to a file outside DIR passes verify",
)
def test_symlinked_part_file_outside_dir_is_refused(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    [part] = Fleet(root).files("events", ["ann"])
    outside = tmp_path / "outside.parquet"
    shutil.copy(part, outside)
    part.unlink()
    part.symlink_to(outside)
    assert one_line_problem(root)


@pytest.mark.xfail(
    strict=True,
    reason="a user's partition directory symlinked to a directory outside DIR passes verify",
)
def test_symlinked_partition_dir_outside_dir_is_refused(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    pdir = Fleet(root).dir("events", "ann")
    shutil.copytree(pdir, tmp_path / "elsewhere")
    shutil.rmtree(pdir)
    pdir.symlink_to(tmp_path / "elsewhere")
    assert one_line_problem(root)


@pytest.mark.xfail(
    strict=True,
    reason="a commit json that is a symlink to a file outside DIR passes verify",
)
def test_symlinked_commit_json_outside_dir_is_refused(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    cpath = commit_path(root, "ann")
    shutil.copy(cpath, tmp_path / "forged.json")
    cpath.unlink()
    cpath.symlink_to(tmp_path / "forged.json")
    assert one_line_problem(root)


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.xfail(
    strict=True,
    reason="a deeply nested commit json raises RecursionError out of verify/users/import "
    "(a traceback, not a one-line FleetError)",
)
@pytest.mark.parametrize("what", ["verify", "users", "import", "cli-verify"])
def test_deeply_nested_commit_json_is_one_line(two: Path, tmp_path: Path, what: str) -> None:
    root = fresh(two, tmp_path)
    commit_path(root, "ann").write_text(DEEP)
    if what == "verify":
        assert one_line_problem(root)
    elif what == "users":
        with pytest.raises(FleetError):
            Fleet(root).users()
    elif what == "import":
        refused_import(root, tmp_path)
    else:
        out = cli("verify", str(root))
        assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr[-500:]


@pytest.mark.xfail(
    strict=True,
    reason="a deeply nested uac-fleet.json raises RecursionError, not a one-line FleetError",
)
def test_deeply_nested_fleet_marker_is_one_line(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    (root / "uac-fleet.json").write_text(DEEP)
    with pytest.raises(FleetError):
        Fleet(root)


def test_huge_commit_json_is_reported(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    edit_commit(root, "ann", lambda m: m.update(junk="x" * 20_000_000))
    # still ann's valid commit 1 with junk: verify may pass, but must not fail other than in one line
    one_line_problem(root)
    commit_path(root, "bob").write_text('{"user": "bob", ' + '"k": 1, ' * 2_000_000)
    assert one_line_problem(root)


BAD_FIELDS: list[tuple[str, Callable[[dict[str, Any]], None]]] = [
    ("rows-not-int", lambda m: m["rows"].update(events="x")),
    ("rows-list", lambda m: m.update(rows=[1])),
    ("heads-int", lambda m: m["heads"].update(events=5)),
    ("heads-str", lambda m: m.update(heads="x")),
    ("files-int", lambda m: m["files"].update(events=5)),
    ("files-null", lambda m: m["files"].update(events=None)),
    ("files-list", lambda m: m["files"].update(events=["a", "b"])),
    ("commit-str", lambda m: m.update(commit="1")),
    ("commit-true", lambda m: m.update(commit=True)),
    ("commit-float", lambda m: m.update(commit=1.0)),
    ("user-int", lambda m: m.update(user=5)),
    ("user-bob", lambda m: m.update(user="bob")),
    ("base-str", lambda m: m.update(base="no")),
    ("format-99", lambda m: m.update(format=99)),
    ("table-unknown", lambda m: m["files"].update(snapshots=m["files"]["events"])),
]
# Cases where verify (or a reader) crashes with a traceback, or accepts a wrongly typed field.
BAD_FIELD_DEFECTS = {
    "rows-not-int": "verify raises ValueError on a commit whose rows.events is a string",
    "heads-int": "verify raises TypeError on a commit whose heads.events is an int",
    "commit-true": 'verify accepts "commit": true as commit 1 (True == 1)',
    "commit-float": 'verify accepts "commit": 1.0 as commit 1',
    "base-str": 'a commit with "base": "no" (a string) passes verify',
    "format-99": 'a commit json of "format": 99 passes verify (its format is never checked)',
}


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=BAD_FIELD_DEFECTS[name]))
        if name in BAD_FIELD_DEFECTS
        else name
        for name, _ in BAD_FIELDS
    ],
)
def test_malformed_commit_fields_are_one_line_problems(
    two: Path, tmp_path: Path, case: str
) -> None:
    root = fresh(two, tmp_path)
    edit_commit(root, "ann", dict(BAD_FIELDS)[case])
    problems = one_line_problem(root)
    assert problems


FILES_DEFECTS = {
    "import": "import_fleet raises TypeError (Path / int) on a commit whose files.events is 5",
    "checkout": "checkout raises TypeError (Path / int) on a commit whose files.events is 5",
    "sql": "uac fleet sql raises TypeError (Path / int) on a commit whose files.events is 5",
}


@pytest.mark.parametrize(
    "reader",
    [pytest.param(r, marks=pytest.mark.xfail(strict=True, reason=FILES_DEFECTS[r]))
     for r in FILES_DEFECTS],
)  # fmt: skip
def test_readers_give_one_line_on_a_non_string_file_entry(
    two: Path, tmp_path: Path, reader: str
) -> None:
    root = fresh(two, tmp_path)
    edit_commit(root, "ann", lambda m: m["files"].update(events=5))
    with pytest.raises(UacError) as err:
        if reader == "import":
            import_fleet(root, tmp_path / "i.duckdb")
        elif reader == "checkout":
            checkout(Fleet(root), "ann", tmp_path / "c.duckdb")
        else:
            from uac_kernel.fleetsql import fleet_sql

            fleet_sql(root, "SELECT 1")
    assert "\n" not in str(err.value)


def test_stray_uncommitted_part_file_is_ignored(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    [part] = Fleet(root).files("events", ["ann"])
    stray = part.with_name("part-000002-deadbeef.parquet")
    rewrite_part(part, "SELECT * FROM {src}")
    shutil.copy(part, stray)
    assert verify_fleet(root).ok
    assert Fleet(root).files("events", ["ann"]) == [part]
    store = tmp_path / "i.duckdb"
    import_fleet(root, store)
    with duckdb.connect(str(store), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM events WHERE user_id='ann'").fetchone() == (5,)


def test_gap_in_commits_and_missing_file_are_reported(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    os.rename(commit_path(root, "ann"), commit_path(root, "ann", 2))
    [part] = Fleet(root).files("events", ["bob"])
    part.unlink()
    problems = one_line_problem(root)
    assert any("'ann'" in p for p in problems) and any("'bob'" in p for p in problems), problems
