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
from helpers.events import fact
from helpers.processes import alive, descendants, suite_path

from uac_kernel.core.errors import FleetError, QueryError, UacError
from uac_kernel.fleet.checkout import checkout
from uac_kernel.fleet.export import export_store
from uac_kernel.fleet.importing import import_fleet
from uac_kernel.fleet.partition import Fleet, bucket, encode, parquet_source
from uac_kernel.fleet.verify import verify_fleet
from uac_kernel.log.integrity import verify
from uac_kernel.log.store import Store
from uac_kernel.workbench import Workbench

ROOT = Path(__file__).resolve().parents[2]
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
        }
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
        [PY, "-m", "uac_kernel.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": suite_path()},
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
            assert verify(store, user).ok
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


def test_import_refuses_a_commit_naming_another_users_file(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    [bobs] = Fleet(root).files("events", ["bob"])
    edit_commit(root, "ann", lambda m: m["files"].update(events=bobs.relative_to(root).as_posix()))
    refused_import(root, tmp_path)


def test_absolute_path_in_files_is_refused(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    [part] = Fleet(root).files("events", ["ann"])
    outside = tmp_path / "outside.parquet"
    shutil.copy(part, outside)  # the same rows, so only the path is wrong
    edit_commit(root, "ann", lambda m: m["files"].update(events=str(outside)))
    assert one_line_problem(root)


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


def test_symlinked_part_file_outside_dir_is_refused(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    [part] = Fleet(root).files("events", ["ann"])
    outside = tmp_path / "outside.parquet"
    shutil.copy(part, outside)
    part.unlink()
    part.symlink_to(outside)
    assert one_line_problem(root)


def test_symlinked_partition_dir_outside_dir_is_refused(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    pdir = Fleet(root).dir("events", "ann")
    shutil.copytree(pdir, tmp_path / "elsewhere")
    shutil.rmtree(pdir)
    pdir.symlink_to(tmp_path / "elsewhere")
    assert one_line_problem(root)


def test_symlinked_commit_json_outside_dir_is_refused(two: Path, tmp_path: Path) -> None:
    root = fresh(two, tmp_path)
    cpath = commit_path(root, "ann")
    shutil.copy(cpath, tmp_path / "forged.json")
    cpath.unlink()
    cpath.symlink_to(tmp_path / "forged.json")
    assert one_line_problem(root)


DEEP = "[" * 100_000 + "]" * 100_000


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


@pytest.mark.parametrize(
    "case",
    [name for name, _ in BAD_FIELDS],
)
def test_malformed_commit_fields_are_one_line_problems(
    two: Path, tmp_path: Path, case: str
) -> None:
    root = fresh(two, tmp_path)
    edit_commit(root, "ann", dict(BAD_FIELDS)[case])
    problems = one_line_problem(root)
    assert problems


@pytest.mark.parametrize("reader", ["import", "checkout", "sql"])
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
            from uac_kernel.fleet.sql import fleet_sql

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


# --- uac fleet run -------------------------------------------------------------------------

RUN_USERS = ["ana", "bo.b/x", "~chi's", "dé ja", "eve", "fay"]


def run_events(i: int, n: int = 40) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for k in range(n):
        day = f"2025-0{1 + k % 9}-{10 + k % 18}T09:00:00"
        out.append({**fact(day, "add", "Note", f"n{k}", text=f"note {i}.{k}"), "source": f"n#{k}"})
        out.append({"kind": "utterance", "ts": day, "speaker": "user", "text": f"said {i}.{k}",
                    "source": f"u#{k}"})  # fmt: skip
    return out


def write_src(src: Path, users: list[str] = RUN_USERS, n: int = 40) -> Path:
    src.mkdir()
    for i, user in enumerate(users):
        lines = [json.dumps(e, ensure_ascii=False) for e in run_events(i, n)]
        (src / f"{urllib.parse.quote(user, safe='')}.jsonl").write_text("\n".join(lines) + "\n")
    return src


def event_counts(root: Path) -> dict[str, int]:
    fleet = Fleet(root)
    out = {}
    with duckdb.connect() as con:
        for user in fleet.users():
            files = fleet.files("events", [user])
            row = con.execute(
                f"SELECT count(*), count(DISTINCT user_seq), count(DISTINCT payload_hash) "
                f"FROM {parquet_source(files)}"
            ).fetchone()
            assert row is not None and row[0] == row[1], (user, row)  # no user_seq twice
            out[user] = int(row[2])
    return out


def fleet_cli(*args: str) -> list[str]:
    return [PY, "-m", "uac_kernel.cli.main", "fleet", "run", *args]


ENV = {**os.environ, "PYTHONPATH": suite_path()}


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    """The source and each user's distinct events after one undisturbed ingest."""
    from uac_kernel.fleet.run import Job, run

    base = tmp_path_factory.mktemp("ref")
    src = write_src(base / "src")
    run(base / "fleet", Job("ingest", (str(src),)), jobs=2, progress=lambda p: None)
    return src, event_counts(base / "fleet")


def results(root: Path) -> list[Path]:
    return list(root.glob("runs/*/results/bucket=*/*.json"))


def test_kill_9_of_the_whole_run_then_rerun(
    tmp_path: Path, reference: tuple[Path, dict[str, int]]
) -> None:
    src, expected = reference
    root = tmp_path / "fleet"
    proc = subprocess.Popen(
        fleet_cli(str(root), "--jobs", "2", "ingest", str(src)),
        env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while not results(root) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver, its workers and the budget manager
    proc.wait()
    done_before = len(results(root))
    assert done_before < len(RUN_USERS), "the run finished before it was killed"
    one_line_problem(root)  # whatever the kill left, verify reports it in lines, not a crash
    again = subprocess.run(
        fleet_cli(str(root), "--jobs", "2", "ingest", str(src)),
        env=ENV, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    assert verify_fleet(root).ok
    assert event_counts(root) == expected  # every user's events, each exactly once
    third = subprocess.run(
        fleet_cli(str(root), "ingest", str(src)), env=ENV, capture_output=True, text=True,
        timeout=180,
    )  # fmt: skip
    assert third.returncode == 0 and "nothing to do" in third.stdout + third.stderr


def test_two_runs_of_the_same_job_at_once(
    tmp_path: Path, reference: tuple[Path, dict[str, int]]
) -> None:
    src, expected = reference
    root = tmp_path / "fleet"
    procs = [
        subprocess.Popen(
            fleet_cli(str(root), "--jobs", "1", "ingest", str(src)),
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert "Traceback" not in err, err[-2000:]
        assert p.returncode in (0, 1), err[-2000:]
    assert verify_fleet(root).ok
    assert event_counts(root) == expected
    again = subprocess.run(
        fleet_cli(str(root), "ingest", str(src)), env=ENV, capture_output=True, text=True,
        timeout=180,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    assert event_counts(root) == expected


def test_job_over_a_user_whose_history_fails_verify(two: Path, tmp_path: Path) -> None:
    from uac_kernel.fleet.run import Job, run

    root = fresh(two, tmp_path)
    [part] = Fleet(root).files("events", ["ann"])
    rewrite_part(part, "SELECT * REPLACE (replace(payload, 'ann-1', 'EVIL') AS payload) FROM {src}")
    assert not verify_fleet(root).ok
    report = run(root, Job("checkpoint"), jobs=1, progress=lambda p: None)
    status = {r["user_id"]: r["status"] for r in report.rows}
    assert status == {"ann": "failed", "bob": "ok"}, report.rows
    assert len(Fleet(root).commits("ann")) == 1  # nothing committed on top of the damage


def test_job_over_a_user_with_bad_data_is_a_failed_row(tmp_path: Path) -> None:
    from uac_kernel.fleet.run import Job, run

    src = tmp_path / "src"
    src.mkdir()
    (src / "good.jsonl").write_text(json.dumps(trips("good")[0]) + "\n")
    # a fact updating a record that was never added, a retract of nothing, a bad op
    bad = [fact("2025-01-01T09:00:00", "update", "Trip", "ghost", city="x"),
           {"kind": "fact", "ts": "2025-01-02T09:00:00", "op": "explode", "type": "Trip",
            "key": "k", "fields": {}}]  # fmt: skip
    (src / "bad.jsonl").write_text("\n".join(json.dumps(e) for e in bad) + "\n")
    root = tmp_path / "fleet"
    report = run(root, Job("ingest", (str(src),)), jobs=1, progress=lambda p: None)
    status = {r["user_id"]: (r["status"], r["error"]) for r in report.rows}
    assert status["good"] == ("ok", "")
    assert status["bad"][0] == "failed" and status["bad"][1] and "\n" not in status["bad"][1]
    assert Fleet(root).users() == ["good"]  # nothing of bad was committed
    assert verify_fleet(root).ok


# One fleet run each (a process pool per run): a few of each kind of escape.
ESCAPES = [
    "__import__('os').system('touch ESCAPED')",
    "[c for c in ().__class__.__mro__[1].__subclasses__() if c.__name__ == 'Popen']",
    "open('/etc/passwd').read()",
    "'x' * 10**12",
]


def test_eval_escapes_stay_sandboxed_as_uac_eval(
    two: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each expression fails in the fleet exactly as `Workbench.eval` fails on the same user."""
    from uac_kernel.fleet.run import Job, run

    root = fresh(two, tmp_path)
    own = tmp_path / "ann.duckdb"
    checkout(Fleet(root), "ann", own)
    monkeypatch.chdir(tmp_path)
    for expr in ESCAPES:
        with Workbench(own, user="ann") as wb:
            try:
                wb.eval(expr)
                alone = ""
            except UacError as exc:
                alone = str(exc).splitlines()[0]
        report = run(root, Job("eval", (expr,)), jobs=1, users=["ann"], retries=0,
                     progress=lambda p: None)  # fmt: skip
        [row] = report.rows
        assert alone, f"uac eval ran {expr!r}"
        assert (row["status"], row["error"][: len(alone)]) == ("failed", alone[:2000]), expr
    assert not (tmp_path / "ESCAPED").exists() and not list(root.rglob("ESCAPED"))
    assert verify_fleet(root).ok


def test_ingest_file_names_that_unquote_to_the_same_user(tmp_path: Path) -> None:
    from uac_kernel.fleet.run import Job, run

    src = tmp_path / "src"
    src.mkdir()
    (src / "a.jsonl").write_text(json.dumps(trips("first")[0]) + "\n")
    (src / "%61.jsonl").write_text(json.dumps(trips("second")[1]) + "\n")
    root = tmp_path / "fleet"
    try:
        run(root, Job("ingest", (str(src),)), jobs=1, progress=lambda p: None)
    except FleetError as exc:
        assert "a.jsonl" in str(exc) or "%61.jsonl" in str(exc)
        return
    checkout(Fleet(root), "a", tmp_path / "a2.duckdb")
    with Workbench(tmp_path / "a2.duckdb", user="a", read_only=True) as wb:
        assert sorted(wb.eval("[r.key for r in user.all('Trip')]")) == ["t1", "t2"]


def test_ingest_file_name_not_utf8(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "ok.jsonl").write_text(json.dumps(trips("ok")[0]) + "\n")
    with open(os.fsencode(src) + b"/\xff\xfe.jsonl", "wb") as handle:
        handle.write((json.dumps(trips("bin")[0]) + "\n").encode())
    root = tmp_path / "fleet"
    out = subprocess.run(fleet_cli(str(root), "--jobs", "1", "ingest", str(src)), env=ENV,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert "Traceback" not in out.stderr, out.stderr[-1500:]
    assert out.returncode in (0, 1) and list(root.glob("runs/*/summary.parquet"))
    assert "ok" in Fleet(root).users() and verify_fleet(root).ok


def test_ingest_hostile_names_and_symlinks_in_src(tmp_path: Path) -> None:
    from uac_kernel.fleet.run import Job, run

    src = tmp_path / "src"
    src.mkdir()
    names = {"%2E%2E%2F%2E%2E%2Fetc": "../../etc", "..%2Fx": "../x", "%2Fabs": "/abs",
             "%00nul": "\x00nul", "%7E": "~", "q%27%22": "q'\""}  # fmt: skip
    for name in names:
        (src / f"{name}.jsonl").write_text(json.dumps(trips(name)[0]) + "\n")
    (src / "pw.jsonl").symlink_to("/etc/passwd")  # not JSON: a failed row, nothing read out
    (src / "sub.jsonl").mkdir()  # a directory named like a source: not a user
    root = tmp_path / "fleet"
    report = run(root, Job("ingest", (str(src),)), jobs=2, progress=lambda p: None)
    status = {r["user_id"]: r["status"] for r in report.rows}
    assert status == {**dict.fromkeys(names.values(), "ok"), "pw": "failed"}
    fleet = Fleet(root)
    assert fleet.users() == sorted(names.values())
    assert verify_fleet(root).ok
    assert not (tmp_path / "etc").exists() and not (tmp_path / "x").exists()
    for path in root.rglob("*"):
        assert path.resolve().is_relative_to(root.resolve()), path
    text = b"".join(p.read_bytes() for p in root.rglob("*") if p.is_file())
    assert b"root:x:0:0" not in text  # /etc/passwd's lines were not copied into DIR


@pytest.mark.parametrize("kind", ["missing", "devnull", "empty-dir", "binary", "array-lines",
                                  "no-user", "user-int", "user-empty"])  # fmt: skip
def test_ingest_src_not_a_dir_of_jsonl(tmp_path: Path, kind: str) -> None:
    """A SRC that is no source: one line naming it, nothing committed, no traceback."""
    src: Path = tmp_path / "src.jsonl"
    if kind == "missing":
        src = tmp_path / "nope"
    elif kind == "devnull":
        src = Path("/dev/null")
    elif kind == "empty-dir":
        src = tmp_path / "empty"
        src.mkdir()
    elif kind == "binary":
        src.write_bytes(bytes(range(256)) * 10)
    elif kind == "array-lines":
        src.write_text("[1, 2]\n")
    elif kind == "no-user":
        src.write_text(json.dumps(trips("x")[0]) + "\n")
    elif kind == "user-int":
        src.write_text(json.dumps({**trips("x")[0], "user": 5}) + "\n")
    else:
        src.write_text(json.dumps({**trips("x")[0], "user": ""}) + "\n")
    root = tmp_path / "fleet"
    if kind in ("missing", "binary"):  # the command line
        out = subprocess.run(fleet_cli(str(root), "ingest", str(src)), env=ENV,
                             capture_output=True, text=True, timeout=120)  # fmt: skip
        assert out.returncode != 0
        assert out.stderr.startswith("uac: error: "), out.stderr[-1500:]
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr[-1500:]
    else:  # the Python API: the same error, before any worker starts
        from uac_kernel.fleet.run import Job, run

        with pytest.raises(FleetError) as err:
            run(root, Job("ingest", (str(src),)), jobs=1, progress=lambda p: None)
        assert "\n" not in str(err.value)
    assert not (root / "_commits").exists()


def test_ingest_one_jsonl_with_hostile_user_fields(tmp_path: Path) -> None:
    from uac_kernel.fleet.run import Job, run

    src = tmp_path / "all.jsonl"
    ids = ["../../x", "/etc/passwd", "a" * 400, "é/..", "%2E", "."]
    src.write_text("".join(json.dumps({**trips(u)[0], "user": u}) + "\n" for u in ids))
    root = tmp_path / "fleet"
    report = run(root, Job("ingest", (str(src),)), jobs=2, progress=lambda p: None)
    assert {r["user_id"] for r in report.rows if r["status"] == "ok"} == set(ids)
    assert Fleet(root).users() == sorted(ids) and verify_fleet(root).ok
    for path in root.rglob("*"):
        assert path.resolve().is_relative_to(root.resolve()), path


# --- hostile model answers in extract ------------------------------------------------------


def wipe_answer(body: dict[str, Any]) -> str:
    """Retract every record the prompt names, and overwrite the rest: a wipe of memory."""
    prompt = " ".join(m["content"] for m in body["messages"] if m["role"] == "user")
    sources = sorted({s.split("]")[0] for s in prompt.split("[")[1:] if "#" in s.split("]")[0]})
    ops: list[dict[str, Any]] = [
        {"op": "retract", "type": "Note", "key": f"n{k}", "fields": [], "utterances": sources[:1]}
        for k in range(6)
    ]
    ops += [
        {"op": "update", "type": "Note", "key": f"n{k}",
         "fields": [{"name": "text", "value": "gone"}], "utterances": sources[:1]}
        for k in range(6, 12)
    ]  # fmt: skip
    return json.dumps({"operations": ops})


def note_texts(db: Path, user: str) -> list[str]:
    with Workbench(db, user=user, read_only=True) as wb:
        return list(wb.eval("sorted(r.text for r in user.all('Note'))"))


def test_hostile_model_answer_is_held_for_review_as_for_one_user(tmp_path: Path) -> None:
    from uac_kernel.fleet.run import Job, run
    from uac_kernel.model.client import ModelSettings
    from uac_kernel.model.testing import ChatServer

    src = tmp_path / "src"
    src.mkdir()
    for user in ("ann", "bob"):
        notes = [{**fact(f"2025-01-{10 + k}T09:00:00", "add", "Note", f"n{k}", text=f"note {k}"),
                  "source": f"n#{k}"} for k in range(12)]  # fmt: skip
        said = [{"kind": "utterance", "ts": f"2025-06-{10 + k}T09:00:00", "speaker": "user",
                 "text": f"{user} said {k}", "source": f"u#{k}"} for k in range(4)]  # fmt: skip
        (src / f"{user}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in notes + said))
    root = tmp_path / "fleet"
    run(root, Job("ingest", (str(src),)), jobs=1, progress=lambda p: None)
    alone = tmp_path / "alone.duckdb"
    checkout(Fleet(root), "ann", alone)
    before = {u: note_texts(alone, "ann") for u in ["ann"]}["ann"]
    with ChatServer(wipe_answer) as server:
        model = ModelSettings(model="stand-in", base_url=server.base_url, timeout=10,
                              max_retries=0)  # fmt: skip
        with Workbench(alone, user="ann", model=model) as wb:
            single = wb.extract(progress=False)
        assert single.held >= 1 and note_texts(alone, "ann") == before  # one user: held
        report = run(root, Job("extract"), jobs=2, model=model, progress=lambda p: None)
    rows = {r["user_id"]: r for r in report.rows}
    assert {u: r["status"] for u, r in rows.items()} == {"ann": "ok", "bob": "ok"}
    value = json.loads(rows["ann"]["value"])
    assert value["held"] == single.held and value["applied"] == single.applied
    for user in ("ann", "bob"):
        mine = tmp_path / f"{user}.duckdb"
        checkout(Fleet(root), user, mine)
        assert len(note_texts(mine, user)) == 12 and "gone" not in note_texts(mine, user)
        with Workbench(mine, user=user, read_only=True) as wb:
            assert wb.review()  # the held batch waits for a person
    assert verify_fleet(root).ok


# --- uac fleet sql -------------------------------------------------------------------------

OUTSIDE_QUERIES = [
    "INSTALL httpfs",
    "LOAD httpfs",
    "SELECT * FROM glob('/etc/*')",
    "EXPORT DATABASE '{tmp}/exported'",
    "SET lock_configuration = false",
    "RESET memory_limit",
    "PRAGMA memory_limit = '100GB'",
    "PRAGMA database_list",
    "CALL pragma_version()",
    "SELECT * FROM read_blob('/etc/passwd')",
    "SELECT * FROM parquet_metadata('{root}/uac-fleet.json')",
    "SELECT * FROM read_text('{root}/uac-fleet.json')",
    "SELECT * FROM read_json('/proc/self/environ')",
    "SELECT * FROM 'https://example.com/x.parquet'",
    "SELECT * FROM '{part}'",
    "ATTACH ':memory:' AS m",
    "ATTACH '{tmp}/attached.duckdb' AS a",
    "DETACH memory",
    "USE system",
    "CREATE SECRET s (TYPE s3)",
    "SELECT * FROM duckdb_secrets()",
    "CHECKPOINT",
    "CREATE TEMP TABLE t AS SELECT 1",
    "CREATE MACRO m() AS 1",
    "BEGIN",
    "INSERT INTO users SELECT * FROM users",
    "UPDATE users SET events = 0",
    "FROM query('COPY users TO ''{tmp}/copied.csv''')",
    "COPY users TO '{tmp}/copied.csv'",
    "COPY (SELECT 1) TO '{tmp}/copied.parquet' (FORMAT parquet)",
    "SELECT count(*) FROM range(10000000000000)",
    "SELECT list(repeat('x', 100000)) FROM range(100000)",
    "SELECT count(*) FROM range(100000) a, range(100000) b, range(100000) c",
    "SELECT 1; ATTACH '{tmp}/attached.duckdb' AS a",
]


@pytest.fixture(scope="module")
def sql_fleet(two: Path) -> Iterator[Any]:
    from uac_kernel.fleet.sql import FleetSql

    db = FleetSql(two, timeout=1, memory_mb=256)
    yield db
    db.close()


@pytest.mark.parametrize("query", OUTSIDE_QUERIES)
def test_fleet_sql_cannot_reach_out_or_exhaust(
    sql_fleet: Any, two: Path, tmp_path: Path, query: str
) -> None:
    [part] = Fleet(two).files("events", ["ann"])
    sql = query.format(tmp=tmp_path, root=two, part=part)
    with pytest.raises(QueryError) as err:
        sql_fleet.query(sql)
    assert "\n" not in str(err.value)
    assert not list(tmp_path.iterdir()), "the query wrote a file"
    assert sql_fleet.query("SELECT current_setting('memory_limit')").rows[0][0].startswith("2")
    assert sql_fleet.query("SELECT count(*) FROM users").rows == [(2,)]


def test_fleet_sql_cli_refuses_in_one_line(two: Path, tmp_path: Path) -> None:
    out = cli("fleet", "sql", str(two), f"COPY users TO '{tmp_path}/x.csv'")
    assert out.returncode == 1 and out.stderr.startswith("uac: error: ")
    assert len(out.stderr.strip().splitlines()) == 1 and not (tmp_path / "x.csv").exists()
    out = cli("fleet", "sql", str(two), "SELECT count(*) FROM range(10000000000000)",
              "--timeout", "1")  # fmt: skip
    assert out.returncode == 1 and "time limit" in out.stderr


def test_fleet_sql_tables_from_hostile_type_and_field_names(tmp_path: Path) -> None:
    """Types named like the fleet's own tables, SQL keywords, field user_id: each its table."""
    from uac_kernel.fleet.sql import fleet_sql

    db = tmp_path / "s.duckdb"
    names = ["Users", "Alerts", "Events", "Select", "Trip", "Trip_history_history"]
    fields = {"user_id": "bob", "user_id_2": 2, "select": 3, "seq": 4, "user": 5, "payload": 6}
    with Workbench(db, user="ann") as wb:
        wb.ingest([fact("2025-01-01T09:00:00", "add", t, "k1", **fields) for t in names])
    export_store(db, tmp_path / "fleet")
    root = tmp_path / "fleet"
    tables = dict((t, cur) for t, cur, _h in fleet_sql(root, "SELECT * FROM uac_tables").rows)
    assert set(tables) == set(names)
    assert len(set(tables.values()) | {"users", "alerts", "events"}) == len(names) + 3
    for t, cur in tables.items():
        quoted = '"' + cur.replace('"', '""') + '"'
        res = fleet_sql(root, f"SELECT * FROM {quoted}")
        assert res.columns[0] == "user_id" and res.rows[0][0] == "ann", t
        row = dict(zip(res.columns, res.rows[0], strict=True))
        assert [row[c] for c in ("select", "seq", "user", "payload", "user_id_2")] == [
            3,
            4,
            5,
            6,
            2,
        ]
        assert "bob" in row.values()  # the field user_id kept under another column name
    assert fleet_sql(root, "SELECT user_id, events FROM users").rows[0][0] == "ann"


@pytest.mark.parametrize("what", ["sql", "summary"])
def test_fleet_sql_on_a_fleet_with_no_users(tmp_path: Path, what: str) -> None:
    from uac_kernel.fleet.sql import fleet_sql, fleet_summary

    Fleet(tmp_path / "fleet", create=True)
    if what == "sql":
        assert fleet_sql(tmp_path / "fleet", "SELECT count(*) FROM users").rows == [(0,)]
    else:
        assert fleet_summary(tmp_path / "fleet").to_json()["users"] == 0


# --- %uac fleet in a real IPython shell ----------------------------------------------------


def magic_cases(root: Path, tmp_path: Path, deep: Path) -> list[str]:
    q = f'"{root}"'
    return [
        f"%uac fleet run {q} ingest {tmp_path}/nope",
        f"%uac fleet run {q} eval",
        f"%uac fleet run {q} explode",
        f"%uac fleet run {q} --jobs 0 eval 1",
        f"%uac fleet run {q} --rate -1 eval 1",
        f"%uac fleet run {q} --users nobody eval 1",
        f"%uac fleet run {q} --engine mars eval 1",
        f"%uac fleet run {q} --limit 0 eval 1",
        f"%uac fleet run {tmp_path}/not-a-fleet eval 1",
        "%uac fleet run",
        f"%uac fleet sql {q}",
        f"%uac fleet sql {q} SELECT * FROM read_csv('/etc/passwd')",
        f"%uac fleet sql {q} ATTACH '{tmp_path}/a.duckdb' AS a",
        f"%uac fleet sql --timeout 0.5 {q} SELECT count(*) FROM range(10000000000000)",
        f"%uac fleet sql --timeout -1 {q} SELECT 1",
        f"%uac fleet sql {tmp_path}/not-a-fleet SELECT 1",
        f"%uac fleet {tmp_path}/not-a-fleet",
        f'%uac fleet "{deep}"',
        f'%uac fleet sql "{deep}" SELECT 1',
        f'%uac fleet run --jobs 1 "{deep}" eval 1',  # ann's commit is damaged: 1 user failed
        "%uac fleet summary",
        '%uac fleet "unterminated',
    ]


def test_magic_fleet_errors_are_usage_errors(
    uac_shell: Any, two: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from IPython.core.error import UsageError

    monkeypatch.chdir(tmp_path)
    deep = tmp_path / "deep"
    shutil.copytree(two, deep)
    commit_path(deep, "ann").write_text('{"user": 5}')
    for line in magic_cases(two, tmp_path, deep):
        result = uac_shell.run_cell(line)
        err = result.error_in_exec or result.error_before_exec
        assert isinstance(err, UsageError), (line, type(err).__name__, str(err)[:300])
        assert "\n" not in str(err).strip(), line
    assert not (tmp_path / "a.duckdb").exists()


def test_magic_fleet_on_a_deeply_nested_commit_is_a_usage_error(
    uac_shell: Any, two: Path, tmp_path: Path
) -> None:
    from IPython.core.error import UsageError

    root = fresh(two, tmp_path)
    commit_path(root, "ann").write_text(DEEP)
    for line in (f'%uac fleet "{root}"', f'%uac fleet sql "{root}" SELECT 1'):
        result = uac_shell.run_cell(line)
        assert isinstance(result.error_in_exec, UsageError), (line, result.error_in_exec)


# --- more of fleet run ---------------------------------------------------------------------


def test_kill_9_of_the_driver_alone_leaves_no_orphans_and_rerun_is_whole(
    tmp_path: Path, reference: tuple[Path, dict[str, int]]
) -> None:
    src, expected = reference
    root = tmp_path / "fleet"
    proc = subprocess.Popen(
        fleet_cli(str(root), "--jobs", "2", "ingest", str(src)),
        env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while not results(root) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    below = descendants(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)  # the driver only: its workers and manager are orphaned
    proc.wait()
    try:
        assert below, "no worker was started"
        deadline = time.monotonic() + 5
        while any(alive(p) for p in below) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = {p for p in below if alive(p)}
    finally:
        for p in below:  # started by this test: end them by id
            if alive(p):
                os.kill(p, signal.SIGKILL)
    again = subprocess.run(fleet_cli(str(root), "--jobs", "2", "ingest", str(src)), env=ENV,
                           capture_output=True, text=True, timeout=180)  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    assert verify_fleet(root).ok and event_counts(root) == expected
    assert not left, f"{len(left)} worker processes outlived their killed driver by 5 s"


def test_run_over_hostile_user_ids(tmp_path: Path) -> None:
    from uac_kernel.fleet.run import Job, run

    db = tmp_path / "s.duckdb"
    ids = [u for u in HOSTILE if u not in ("ann", "bob", "a" * 150, "/abs/olute", "..")]
    make_store(db, ids)
    root = tmp_path / "fleet"
    export_store(db, root)
    report = run(root, Job("eval", ("len(user.all('Trip'))",)), jobs=2, progress=lambda p: None)
    assert sorted((r["user_id"], r["status"], r["value"]) for r in report.rows) == sorted(
        (u, "ok", "3") for u in ids
    )
    with duckdb.connect() as con:
        got = con.execute(
            "SELECT user_id FROM read_parquet(?) ORDER BY user_id", [str(report.summary_path)]
        ).fetchall()
    assert [u for (u,) in got] == sorted(ids)
    for path in root.rglob("*"):
        assert path.resolve().is_relative_to(root.resolve()), path
        assert len(path.name.encode()) < 255
    again = run(root, Job("eval", ("len(user.all('Trip'))",)), progress=lambda p: None)
    assert again.ran == 0


def test_ask_job_with_hostile_model_expressions_stays_sandboxed(
    two: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from uac_kernel.fleet.run import Job, run
    from uac_kernel.model.client import ModelSettings
    from uac_kernel.model.testing import ChatServer

    monkeypatch.chdir(tmp_path)
    root = fresh(two, tmp_path)
    marker = tmp_path / "ESCAPED"

    def model(body: dict[str, Any]) -> str:
        expr = f"__import__('os').system('touch {marker}') or ().__class__.__base__"
        return json.dumps({"expression": expr, "explanation": "x"})

    with ChatServer(model) as server:
        settings = ModelSettings(model="hostile", base_url=server.base_url, timeout=10.0)
        report = run(root, Job("ask", ("how many trips?",)), jobs=2, model=settings,
                     progress=lambda p: None)  # fmt: skip
    assert {r["status"] for r in report.rows} == {"failed"}
    assert all(r["error"] and "\n" not in r["error"] for r in report.rows)
    assert not marker.exists()
    assert [len(Fleet(root).commits(u)) for u in ("ann", "bob")] == [1, 1]
    assert verify_fleet(root).ok


def test_rerun_over_a_damaged_result_file(two: Path, tmp_path: Path) -> None:
    from uac_kernel.fleet.run import Job, run

    root = fresh(two, tmp_path)
    job = Job("eval", ("len(user.all('Trip'))",))
    first = run(root, job, jobs=1, progress=lambda p: None)
    [result] = list(first.run_dir.glob("results/bucket=*/" + encode("ann") + ".json"))
    result.write_text('{"status": "ok", "user_id": ')
    try:
        again = run(root, job, jobs=1, progress=lambda p: None)
    except UacError as exc:
        assert "\n" not in str(exc) and result.name in str(exc)
        return
    assert {r["user_id"]: r["status"] for r in again.rows} == {"ann": "ok", "bob": "ok"}


def test_eval_answer_with_a_lone_surrogate(two: Path, tmp_path: Path) -> None:
    from uac_kernel.fleet.run import Job, run

    root = fresh(two, tmp_path)
    expr = '"\\ud800"'
    own = tmp_path / "ann.duckdb"
    checkout(Fleet(root), "ann", own)
    with Workbench(own, user="ann") as wb:
        assert wb.eval(expr) == "\ud800"  # one user: an answer
    report = run(root, Job("eval", (expr,)), jobs=1, retries=1, progress=lambda p: None)
    assert [r["status"] for r in report.rows] == ["ok", "ok"], report.rows[0]["error"]


def test_terminal_hostile_user_ids_are_printed_escaped(tmp_path: Path) -> None:
    src = tmp_path / "all.jsonl"
    evil = "evil\x1b[2J\nuac: fake line\r"
    bad = {"kind": "fact", "ts": "2025-01-01T09:00:00", "op": "add", "type": "Trip"}  # no key
    src.write_text(json.dumps({**bad, "user": evil}) + "\n"
                   + json.dumps({**trips("ok")[0], "user": "ok"}) + "\n")  # fmt: skip
    root = tmp_path / "fleet"
    out = subprocess.run(fleet_cli(str(root), "--jobs", "1", "ingest", str(src)), env=ENV,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 1
    for text in (out.stdout, out.stderr):
        assert "\x1b" not in text and "\r" not in text and "\nuac: fake line" not in text
    sql = cli("fleet", "sql", str(root), "SELECT user_id FROM users")
    assert sql.returncode == 0 and "\x1b" not in sql.stdout


def test_two_exports_of_diverged_stores_at_once_leave_one_whole_partition(
    tmp_path: Path,
) -> None:
    """Two stores grew ann apart; exported into one DIR at the same time, one wins, the other
    says so in one line, and the partition is whole."""
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    make_store(a, ["ann"])
    shutil.copy(a, b)
    root = tmp_path / "fleet"
    export_store(a, root)
    for db, tag in ((a, "left"), (b, "right")):
        with Workbench(db, user="ann") as wb:
            wb.ingest([{**fact("2025-02-01T09:00:00", "add", "Trip", f"x-{tag}", city=tag),
                        "source": f"{tag}#1"}])  # fmt: skip
    procs = [
        subprocess.Popen(
            [PY, "-m", "uac_kernel.cli.main", "export", str(db), str(root)],
            env=ENV,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for db in (a, b)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 1], outs
    loser = next(err for p, (_o, err) in zip(procs, outs, strict=True) if p.returncode)
    assert loser.startswith("uac: error: ") and len(loser.strip().splitlines()) == 1
    assert "ann" in loser
    assert verify_fleet(root).ok and len(Fleet(root).commits("ann")) == 2


@pytest.mark.parametrize(
    "argv",
    [
        ["verify", "{tmp}/missing"],
        ["verify", "{tmp}/afile"],
        ["verify", "{tmp}"],
        ["import", "{tmp}/afile", "{tmp}/s.duckdb"],
        ["import", "{fleet}", "{fleet}"],
        ["import", "{fleet}", "{tmp}/afile"],
        ["export", "{tmp}/afile", "{tmp}/out"],
        ["export", "{tmp}/missing.duckdb", "{tmp}/out"],
        ["export", "{store}", "{tmp}"],
        ["export", "{store}", "{tmp}/afile"],
        ["fleet", "summary", "{tmp}/afile"],
        ["fleet", "run", "{tmp}/afile", "eval", "1"],
    ],
)
def test_cli_on_wrong_paths_is_one_line(two: Path, tmp_path: Path, argv: list[str]) -> None:
    (tmp_path / "afile").write_text("not a store, not a fleet")
    store = two.parent / "s.duckdb"
    args = [a.format(tmp=tmp_path, fleet=two, store=store) for a in argv]
    before = sorted(p.name for p in tmp_path.iterdir())
    out = cli(*args)
    assert out.returncode != 0
    assert out.stderr.startswith("uac: error: ") and len(out.stderr.strip().splitlines()) == 1, (
        out.stderr[-1500:]
    )
    assert (tmp_path / "afile").read_text() == "not a store, not a fleet"
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert verify_fleet(two).ok


def test_forged_empty_base_commit_is_reported(two: Path, tmp_path: Path) -> None:
    from uac_kernel.core.chain import GENESIS

    root = fresh(two, tmp_path)
    first = Fleet(root).commits("ann")[0]
    zero = [0, GENESIS]
    forged = {**first, "commit": 2, "base": True, "files": {}, "rows": {},
              "heads": {"events": zero, "model_calls": zero, "checkpoints": zero}}  # fmt: skip
    commit_path(root, "ann", 2).write_text(json.dumps(forged))
    assert one_line_problem(root)


SCHEMA_EDITS = {
    "extra-column": "SELECT *, 1 AS evil FROM {src}",
    "dropped-column": "SELECT * EXCLUDE (salt) FROM {src}",
    "retyped-column": "SELECT * REPLACE (user_seq::VARCHAR || 'x' AS user_seq) FROM {src}",
}


@pytest.mark.parametrize(
    ("reader", "edit"),
    [(r, e) for r in ("verify", "checkout", "sql") for e in SCHEMA_EDITS],
)
def test_part_file_of_another_schema(two: Path, tmp_path: Path, reader: str, edit: str) -> None:
    root = fresh(two, tmp_path)
    [part] = Fleet(root).files("events", ["ann"])
    rewrite_part(part, SCHEMA_EDITS[edit])
    if reader == "verify":
        assert one_line_problem(root)
        return
    with pytest.raises(UacError) as err:
        if reader == "checkout":
            checkout(Fleet(root), "ann", tmp_path / "c.duckdb")
        else:
            from uac_kernel.fleet.sql import fleet_sql

            fleet_sql(root, "SELECT count(*) FROM users")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(
    "reader",
    [
        "verify",
        "import",
        "sql",
        "checkout",
    ],
)
def test_truncated_part_file(two: Path, tmp_path: Path, reader: str) -> None:
    root = fresh(two, tmp_path)
    [part] = Fleet(root).files("events", ["ann"])
    data = part.read_bytes()
    part.write_bytes(data[: len(data) // 2])
    if reader == "verify":
        problems = one_line_problem(root)
        assert any("'ann'" in p and "cannot be read" in p for p in problems), problems
    elif reader == "import":
        refused_import(root, tmp_path)
    else:
        with pytest.raises(UacError) as err:
            if reader == "checkout":
                checkout(Fleet(root), "ann", tmp_path / "c.duckdb")
            else:
                from uac_kernel.fleet.sql import fleet_sql

                fleet_sql(root, "SELECT count(*) FROM users")
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("damage", ["gap", "no-user", "not-json"])
def test_one_damaged_user_does_not_stop_the_others(two: Path, tmp_path: Path, damage: str) -> None:
    from uac_kernel.fleet.run import Job, run

    root = fresh(two, tmp_path)
    if damage == "gap":
        os.rename(commit_path(root, "ann"), commit_path(root, "ann", 2))
    elif damage == "no-user":
        commit_path(root, "ann").write_text('{"user": 5}')
    else:
        commit_path(root, "ann").write_text("{not json")
    report = run(root, Job("eval", ("len(user.all('Trip'))",)), jobs=1, retries=0,
                 progress=lambda p: None)  # fmt: skip
    rows = {r["user_id"]: r for r in report.rows}
    assert rows["bob"]["status"] == "ok" and rows["bob"]["value"] == "3"
    assert rows["ann"]["status"] == "failed" and "restore it from a copy" in rows["ann"]["error"]
    assert (report.ok, report.failed) == (1, 1)
    # a rerun tries the failed user again and still runs nobody twice
    again = run(root, Job("eval", ("len(user.all('Trip'))",)), jobs=1, retries=0,
                progress=lambda p: None)  # fmt: skip
    assert (again.ok, again.failed, again.skipped) == (0, 1, 1)


def all_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


def test_erased_text_left_by_a_killed_rewrite_is_cleared_or_reported(tmp_path: Path) -> None:
    secret = "zyxwvut-amoxicillin"
    db = tmp_path / "s.duckdb"
    with Workbench(db, user="ann") as wb:
        wb.ingest([{**fact("2025-03-01T09:00:00", "add", "Allergy", "a1", substance=secret),
                    "source": "f#1"}])  # fmt: skip
        wb.checkpoint()
    root = tmp_path / "fleet"
    export_store(db, root)
    kept = tmp_path / "kept"
    shutil.copytree(root, kept)
    with Workbench(db, user="ann") as wb:
        assert not wb.forget(text=secret).empty
    export_store(db, root)  # the base rewrite: the older files are deleted
    assert secret.encode() not in all_bytes(root)
    # the state a kill after the base commit, before the deletion, leaves: older files back
    for old in kept.rglob("*.parquet"):
        target = root / old.relative_to(kept)
        if not target.exists():
            shutil.copy(old, target)
    assert secret.encode() in all_bytes(root)
    export_store(db, root)  # a later export (nothing new)
    problems = verify_fleet(root).problems
    assert problems or secret.encode() not in all_bytes(root)


def test_kill_9_leaves_no_user_copies_in_the_temp_dir(
    tmp_path: Path, reference: tuple[Path, dict[str, int]]
) -> None:
    src, _expected = reference
    root = tmp_path / "fleet"
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**ENV, "TMPDIR": str(tmp)}
    proc = subprocess.Popen(
        fleet_cli(str(root), "--jobs", "2", "ingest", str(src)),
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and proc.poll() is None:
        if results(root) and list(tmp.glob("uac-fleet-*/user.duckdb")):
            break  # a task is mid-way: its checkout is there
        time.sleep(0.01)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    again = subprocess.run(fleet_cli(str(root), "--jobs", "2", "ingest", str(src)), env=env,
                           capture_output=True, text=True, timeout=180)  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    left = [p for p in tmp.rglob("*.duckdb*")]
    assert not left, f"{len(left)} store copies left: {left[:3]}"


def test_erased_text_in_a_killed_exports_staging_dir_is_cleared(tmp_path: Path) -> None:
    secret = "zyxwvut-penicillin"
    db = tmp_path / "s.duckdb"
    with Workbench(db, user="ann") as wb:
        wb.ingest([{**fact("2025-03-01T09:00:00", "add", "Allergy", "a1", substance=secret),
                    "source": "f#1"}])  # fmt: skip
    root = tmp_path / "fleet"
    export_store(db, root)
    # what an export killed before its finally leaves: its staged copy of ann's rows
    [part] = Fleet(root).files("events", ["ann"])
    staged = root / ".staging-deadbeef" / "events-0" / "uac_idx=1"
    staged.mkdir(parents=True)
    shutil.copy(part, staged / "data_0.parquet")
    with Workbench(db, user="ann") as wb:
        assert not wb.forget(text=secret).empty
    export_store(db, root)
    assert verify_fleet(root).ok
    assert secret.encode() not in all_bytes(root)


def test_verify_names_terminal_hostile_users_escaped(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    evil = "evil\n/tmp/fleet: 0 problems\x1b[2J\r"
    make_store(db, [evil])
    root = tmp_path / "fleet"
    export_store(db, root)
    [part] = Fleet(root).files("events", [evil])
    rewrite_part(part, "SELECT * REPLACE (replace(payload, 'evil', 'EVIL') AS payload) FROM {src}")
    assert one_line_problem(root)
    out = cli("verify", str(root))
    assert out.returncode == 1
    for text in (out.stdout, out.stderr):
        assert "\x1b" not in text and "\r" not in text and "\n/tmp/fleet: 0 problems" not in text


@pytest.mark.parametrize(
    "limits",
    [
        {"memory_mb": 1},
        {"memory_mb": 0},
        {"memory_mb": -5},
        {"timeout": 0},
        {"timeout": float("nan")},
        {"timeout": float("inf")},
    ],
)
def test_fleet_sql_limits_out_of_range_are_one_line(two: Path, limits: dict[str, Any]) -> None:
    from uac_kernel.fleet.sql import FleetSql

    with pytest.raises(QueryError) as err:
        FleetSql(two, **limits).query("SELECT 1")
    assert "\n" not in str(err.value)


def test_a_stray_damaged_commit_dir_named_like_a_user_does_not_stop_that_user(
    two: Path, tmp_path: Path
) -> None:
    """A damaged commit in a directory named for ann but in another bucket: ann still runs from
    her own directory, and the stray is failed under its path in the fleet."""
    from uac_kernel.fleet.run import Job, run

    root = fresh(two, tmp_path)
    other = next(f"{n:02x}" for n in range(256) if f"{n:02x}" != bucket("ann"))
    stray = root / "_commits" / f"bucket={other}" / f"user={encode('ann')}"
    stray.mkdir(parents=True)
    (stray / "000001.json").write_text('{"user": ["ann"]}')
    report = run(root, Job("eval", ("len(user.all('Trip'))",)), jobs=1, retries=0,
                 progress=lambda p: None)  # fmt: skip
    rows = {r["user_id"]: r for r in report.rows}
    assert rows["ann"]["status"] == rows["bob"]["status"] == "ok"
    label = f"_commits/bucket={other}/user=ann"
    assert rows[label]["status"] == "failed" and "names no user" in rows[label]["error"]
