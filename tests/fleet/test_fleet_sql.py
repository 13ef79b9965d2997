"""``uac fleet sql`` / ``summary``, ``%uac fleet``, ``uac.marimo.fleet``: tables across the users
of a real fleet directory (partitions committed from real stores), checked cell for cell against
each user's own ``uac sql`` and ``eval`` on the same store, with hostile user ids and field
names, a query that tries to reach files or settings, and erased rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from uac_kernel import Workbench
from uac_kernel.core.errors import FleetError, QueryError
from uac_kernel.demo.life import demo_events
from uac_kernel.fleet.export import export_store
from uac_kernel.fleet.partition import Fleet
from uac_kernel.fleet.sql import FleetSql, fleet_sql, fleet_summary

os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")

# Ids that are SQL, a path, a long name (hashed directory), non-ASCII and '.'/'~'/'%'.
USERS = [
    "maya",
    'o\'brien "q"); DROP TABLE users; --',
    "../../etc/passwd",
    "ユーザー\tnaïve",
    "x" * 200,
    "a.b~c%2E",
]
FORGOTTEN = "Kyoto ryokan 4417"  # text only the erased record holds
# Field names that are SQL keywords or the names of the build's own working columns.
HOSTILE_FIELDS = {
    "select": "x",
    "seq": -1,
    "ts": "t",
    "op": "o",
    "before": 3,
    "x": 1.5,
    "v0": True,
    "start": "s",
}


def _note(user_index: int) -> list[dict[str, Any]]:
    """A type with field names that are SQL keywords and one named ``user_id``, and a type
    named like a fleet table."""
    return [
        {
            "kind": "fact",
            "ts": f"2024-03-0{1 + user_index % 8}T10:00:00",
            "op": "add",
            "type": "Note",
            "key": f"n'{user_index}",
            "fields": {"user_id": f"inner-{user_index}", **HOSTILE_FIELDS, "order": user_index},
        },
        {
            "kind": "fact",
            "ts": "2024-03-09T09:00:00",
            "op": "update",
            "type": "Note",
            "key": f"n'{user_index}",
            "fields": {"seq": user_index, "before": None},
        },
        *(
            {
                "kind": "fact",
                "ts": "2024-03-02T10:00:00",
                "op": "add",
                "type": "Task",
                "key": f"t{n}",
                "fields": {"title": f"task {n}", "due": due},
            }
            for n, due in enumerate(("2024-03-05", f"2024-03-1{2 + user_index % 6}"))
        ),  # deadline_approaching raises an alert for each: one overdue, one ahead
        {
            "kind": "fact",
            "ts": "2024-03-09T10:00:00",
            "op": "add",
            "type": "Users",
            "key": "k",
            "fields": {"seen": True},
        },
    ]


def test_hostile_field_names_build_as_the_fold_reads_them(tmp_path: Path) -> None:
    """The one generator behind uac sql and fleet sql against the Python build from the fold
    (test_sqlbuild's check), on field names like its working columns."""
    from helpers.sql import assert_sql_build_matches

    wb = Workbench(tmp_path / "s.duckdb", user="u")
    try:
        wb.ingest(_note(0))
        assert assert_sql_build_matches(wb) > 20
    finally:
        wb.close()


def _build_store(db: Path) -> None:
    for i, user in enumerate(USERS):
        wb = Workbench(db, user=user)
        try:
            wb.ingest(demo_events(seed=i, days=40 + 2 * i))
            wb.ingest(_note(i))
            if i == 0:  # maya
                wb.ingest(
                    [
                        {
                            "kind": "fact",
                            "ts": "2024-03-10T10:00:00",
                            "op": "add",
                            "type": "Trip",
                            "key": "secret",
                            "fields": {"destination": FORGOTTEN},
                        }
                    ]
                )
                wb.forget(type="Trip", key="secret")
            wb.checkpoint()
        finally:
            wb.close()


def export(db: Path, root: Path, users: list[str]) -> None:
    export_store(db, root, users=users)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("fleet")
    db = tmp / "store.duckdb"
    _build_store(db)
    root = tmp / "fleet dir 'q'"
    export(db, root, USERS)
    return db, root


@pytest.fixture(scope="module")
def fsql(fleet: tuple[Path, Path]) -> Iterator[FleetSql]:
    with FleetSql(fleet[1]) as db:
        yield db


def lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def same(x: Any, y: Any) -> bool:
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(same(a, b) for a, b in zip(x, y, strict=True))
    return type(x) is type(y) and x == y


def test_every_cell_equals_each_users_own_sql(fleet: tuple[Path, Path], fsql: FleetSql) -> None:
    db, _ = fleet
    assert fsql.users == sorted(USERS)
    fleet_names = {t: cur for t, cur, _ in fsql.query("FROM uac_tables").rows}
    # Each fleet table read once, its rows by user (each user's in the table's order).
    tables: dict[str, tuple[list[str], dict[str, list[tuple[Any, ...]]]]] = {}
    for current in fleet_names.values():
        for name in (current, current + "_history"):
            result = fsql.query(f'FROM "{name}"')
            assert result.columns[0] == "user_id"
            by_user: dict[str, list[tuple[Any, ...]]] = {}
            for row in result.rows:
                by_user.setdefault(row[0], []).append(row)
            tables[name] = (result.columns, by_user)
    cells = alerts = 0
    for user in USERS:
        wb = Workbench(db, user=user, read_only=True)
        try:
            for type_name, current, history in wb.sql("FROM uac_tables").rows:
                if type_name == "Users":
                    assert current == "Users" and fleet_names["Users"] == "Users_2"
                for own, theirs in (
                    (current, fleet_names[type_name]),
                    (history, fleet_names[type_name] + "_history"),
                ):
                    want = wb.sql(f'FROM "{own}"')
                    columns, by_user = tables[theirs]
                    got = by_user.get(user, [])
                    assert len(got) == len(want.rows), (user, own)
                    for column in want.columns:
                        j = columns.index("user_id_2" if column == "user_id" else column)
                        i = want.columns.index(column)
                        for a, b in zip(want.rows, got, strict=True):
                            assert same(b[j], a[i]), (user, own, column, a[i], b[j])
                            cells += 1
            # eval over the fold agrees with the fleet's tables: the records of every type
            types = list(wb.state.types)
            keys = wb.eval(f"[sorted(r.key for r in user.all(t)) for t in {types!r}]")
            for type_name, want_keys in zip(types, keys, strict=True):
                columns, by_user = tables[fleet_names[type_name]]
                got_keys = sorted(r[columns.index("key")] for r in by_user.get(user, []))
                assert got_keys == want_keys, (user, type_name)
            # The message is the logged one: the live one may count days to a later clock.
            standing = [(a.rule, a.id, a.severity) for a in wb.alerts()]
            rows = fsql.query(
                f"SELECT rule, id, severity FROM alerts WHERE user_id = {lit(user)} ORDER BY rowid"
            ).rows
            assert rows == standing
            alerts += len(rows)
            counts = wb.store.user_kind_counts()[user]
            (events, facts, checkpoints) = fsql.query(
                f"SELECT events, facts, checkpoints FROM users WHERE user_id = {lit(user)}"
            ).rows[0]
            erased = wb.store.con.execute(
                "SELECT count(*), count(*) FILTER (kind = 'fact') FROM events "
                "WHERE user_id = ? AND salt = ''",
                [user],
            ).fetchone()
            assert erased is not None
            assert (events, facts) == (
                sum(counts.values()) - erased[0],
                counts.get("fact", 0) - erased[1],
            )
            assert checkpoints == len(wb.checkpoints.all()) == 1
        finally:
            wb.close()
    assert cells > 4000 and alerts >= 2 * len(USERS)


def test_erased_rows_are_absent(fleet: tuple[Path, Path], fsql: FleetSql) -> None:
    import duckdb

    from uac_kernel.fleet.partition import parquet_source

    # the partition holds the forget's erased rows (salt ''); no fleet table shows them
    files = Fleet(fleet[1]).files("events", ["maya"])
    (raw,) = duckdb.sql(
        f"SELECT count(*) FILTER (salt = ''), count(*) FILTER (salt <> '') "
        f"FROM {parquet_source(files)}"
    ).fetchall()
    assert raw[0] > 0
    assert fsql.query("SELECT count(*) FROM events WHERE user_id = 'maya'").rows == [(raw[1],)]
    assert fsql.query("SELECT count(*) FROM Trip_history WHERE key = 'secret'").rows == [(0,)]
    hits = fsql.query(f"SELECT count(*) FROM events WHERE contains(payload, {lit(FORGOTTEN)})").rows
    assert hits == [(0,)]
    # nothing of the store's salts, hashes or raw tables is reachable
    tables = {r[0] for r in fsql.query("SELECT table_name FROM duckdb_tables()").rows}
    assert {"users", "alerts", "events", "uac_tables", "Trip", "Trip_history"} <= tables
    assert not {"model_calls", "checkpoints", "checkpoint_segments"} & tables
    assert "salt" not in fsql.query("FROM events LIMIT 0").columns


@pytest.mark.parametrize(
    "query",
    [
        "SELECT * FROM read_parquet('/etc/passwd')",
        "SELECT * FROM read_csv('/etc/passwd')",
        "SELECT * FROM read_text('/etc/passwd')",
        "ATTACH '/tmp/uac-fleet-attack.duckdb' AS x",
        "COPY (SELECT * FROM users) TO '/tmp/uac-fleet-attack.csv'",
        "SET enable_external_access = true",
        "SET memory_limit = '100GB'",
        "DROP TABLE users",
        "SELECT 1; SELECT 2",
        "WITH d AS (DELETE FROM users RETURNING *) SELECT * FROM d",
    ],
)
def test_a_query_that_reaches_outside_is_refused(fsql: FleetSql, query: str) -> None:
    with pytest.raises(QueryError) as err:
        fsql.query(query)
    assert "\n" not in str(err.value)
    assert not Path("/tmp/uac-fleet-attack.csv").exists()
    assert fsql.query("SELECT count(*) FROM users").rows == [(len(USERS),)]


def test_field_typed_differently_by_users_is_text(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    for user, value in (("a", 7), ("b", "seven"), ("c", [1, 2])):
        wb = Workbench(db, user=user)
        wb.ingest(
            [
                {
                    "kind": "fact",
                    "ts": "2024-01-01T00:00:00",
                    "op": "add",
                    "type": "Thing",
                    "key": "k",
                    "fields": {"size": value, "name": user},
                }
            ]
        )
        wb.close()
    root = tmp_path / "fleet"
    export(db, root, ["a", "b", "c"])
    got = fleet_sql(root, "SELECT user_id, size, name FROM Thing ORDER BY user_id")
    assert got.rows == [("a", "7", "a"), ("b", "seven", "b"), ("c", "[1,2]", "c")]
    # only the users asked for
    assert fleet_sql(root, "SELECT user_id FROM users", users=["b"]).rows == [("b",)]
    with pytest.raises(FleetError, match="no user 'd' in the fleet"):
        fleet_sql(root, "SELECT 1", users=["b", "d"])


def test_uncommitted_part_files_are_not_read(tmp_path: Path, fleet: tuple[Path, Path]) -> None:
    db, _ = fleet
    root = tmp_path / "f"
    export(db, root, ["maya"])
    before = fleet_sql(root, "SELECT count(*) FROM events").rows
    stray = Fleet(root).dir("events", "maya") / "part-000002-deadbeef.parquet"
    (committed,) = Fleet(root).files("events", ["maya"])
    stray.write_bytes(committed.read_bytes())
    assert fleet_sql(root, "SELECT count(*) FROM events").rows == before


def test_not_a_fleet_directory_or_a_damaged_file(tmp_path: Path, fleet: tuple[Path, Path]) -> None:
    with pytest.raises(FleetError, match="not a fleet directory"):
        fleet_sql(tmp_path, "SELECT 1")
    empty = Fleet(tmp_path / "empty", create=True).root  # no user yet: empty tables
    assert fleet_sql(empty, "SELECT count(*) FROM users, events, alerts").rows == [(0,)]
    assert fleet_summary(empty).to_json()["users"] == 0
    root = tmp_path / "f"
    export(fleet[0], root, ["maya"])
    (committed,) = Fleet(root).files("events", ["maya"])
    committed.write_bytes(b"not parquet")
    with pytest.raises(FleetError, match="cannot read a committed events file") as err:
        fleet_sql(root, "SELECT 1")
    assert "\n" not in str(err.value) and "uac verify" in str(err.value)


def test_summary(fleet: tuple[Path, Path], fsql: FleetSql) -> None:
    summary = fleet_summary(fleet[1])
    (events, facts) = fsql.query("SELECT sum(events), sum(facts) FROM users").rows[0]
    assert (summary.users, summary.events, summary.facts) == (len(USERS), events, facts)
    by_rule = dict(fsql.query("SELECT rule, count(*) FROM alerts GROUP BY rule").rows)
    assert summary.alerts_by_rule == by_rule and summary.alerts == sum(by_rule.values()) > 0
    assert sorted(summary.events_per_user) == sorted(
        fsql.query("SELECT user_id, events FROM users").rows
    )


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "uac_kernel.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )


def test_cli(
    fleet: tuple[Path, Path],
    fsql: FleetSql,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from uac_kernel.cli.main import main

    root = str(fleet[1])
    out = _cli("fleet", "sql", root, "SELECT user_id, events FROM users ORDER BY user_id", "--json")
    assert out.returncode == 0, out.stderr
    assert [(r["user_id"], r["events"]) for r in json.loads(out.stdout)] == fsql.query(
        "SELECT user_id, events FROM users ORDER BY user_id"
    ).rows
    out = _cli("fleet", "sql", root, "SELECT * FROM read_csv('/etc/passwd')")
    assert out.returncode == 1 and out.stderr.startswith("uac: error: ")
    assert len(out.stderr.strip().splitlines()) == 1
    # the rest in process (main is what the console script runs)
    assert main(["fleet", "summary", root, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == fleet_summary(root).to_json()
    assert main(["fleet", "summary", root]) == 0
    text = capsys.readouterr().out
    assert f"users\t{len(USERS)}" in text and "alerts\t" in text
    assert main(["fleet", "sql", root, "SELECT user_id FROM users", "--users", "maya"]) == 0
    assert capsys.readouterr().out == "user_id\nmaya\n"
    assert main(["fleet", "sql", str(tmp_path), "SELECT 1"]) == 1
    assert "not a fleet directory" in capsys.readouterr().err


@pytest.fixture(scope="module")
def shell() -> Iterator[Any]:
    pytest.importorskip("ipykernel", reason="pip install -e '.[dev]'")
    from ipykernel.inprocess.manager import InProcessKernelManager

    km = InProcessKernelManager()
    km.start_kernel()
    kernel = km.kernel
    ip = kernel.shell
    ip.run_cell("%load_ext uac").raise_error()
    yield ip
    ip.run_cell("%unload_ext uac")
    km.shutdown_kernel()
    # Process-wide singletons: leave none behind for other test modules (as test_magics does).
    type(kernel.shell).clear_instance()
    type(kernel).clear_instance()
    _RETIRED.append(kernel)


_RETIRED: list[Any] = []


def test_magics(shell: Any, fleet: tuple[Path, Path], fsql: FleetSql, tmp_path: Path) -> None:
    import altair as alt
    from IPython.core.error import UsageError

    from uac_kernel.sql.view import SqlResult

    root = fleet[1]
    quoted = '"' + str(root) + '"'
    result = shell.run_cell(f"%uac fleet sql {quoted} SELECT user_id FROM users ORDER BY 1")
    result.raise_error()
    assert isinstance(result.result, SqlResult)
    assert result.result.rows == [(u,) for u in sorted(USERS)]
    cell = shell.run_cell(f"%%uac fleet sql --timeout 5 {quoted}\nSELECT count(*) FROM alerts\n")
    cell.raise_error()
    assert cell.result.rows == fsql.query("SELECT count(*) FROM alerts").rows
    chart = shell.run_cell(f"%uac fleet {quoted}")
    chart.raise_error()
    assert isinstance(chart.result, alt.HConcatChart)
    for bad, says in (
        (f"%uac fleet sql {quoted} COPY users TO '/tmp/uac-fleet-attack.csv'", "read-only"),
        (f"%uac fleet sql {quoted} SELECT * FROM read_parquet('/etc/passwd')", "SQL failed"),
        (f"%uac fleet {str(tmp_path)!r}", "not a fleet directory"),
        ("%uac fleet", "usage"),
    ):
        failed = shell.run_cell(bad)
        assert isinstance(failed.error_in_exec, UsageError), bad
        assert says in str(failed.error_in_exec) and "\n" not in str(failed.error_in_exec)


def test_magic_fleet_run(shell: Any, fleet: tuple[Path, Path], tmp_path: Path) -> None:
    """``%uac fleet run`` calls fleet.run (real worker processes) and returns its summary rows;
    each user's answer is the one their own eval gives."""
    from IPython.core.error import UsageError

    db, _ = fleet
    users = USERS[1:3]
    root = tmp_path / "run fleet"
    export(db, root, users)
    expr = "sorted(n.key for n in user.all('Note'))"
    result = shell.run_cell(f'%uac fleet run --jobs 1 --retries=0 "{root}" eval {expr}')
    result.raise_error()
    rows = result.result.records()
    assert [(r["user_id"], r["status"]) for r in rows] == [(u, "ok") for u in sorted(users)]
    for row in rows:
        wb = Workbench(db, user=row["user_id"], read_only=True)
        try:
            assert json.loads(row["value"]) == wb.eval(expr)
        finally:
            wb.close()
    failed = shell.run_cell(f'%uac fleet run --jobz 1 "{root}" eval 1')
    assert isinstance(failed.error_in_exec, UsageError)
    assert "unknown option --jobz" in str(failed.error_in_exec)


def test_run_line_parsing() -> None:
    from uac_kernel.notebook.fleet_magic import parse_run

    assert parse_run("--engine ray --jobs=3 --users a,b 'my dir' eval len(user.all('T')) > 2") == (
        "my dir",
        "eval",
        ("len(user.all('T')) > 2",),
        {"engine": "ray", "jobs": 3, "users": ["a", "b"]},
    )
    assert parse_run("d call mod:fn 'two words' x") == (
        "d",
        "call",
        ("mod:fn", "two words", "x"),
        {},
    )
    with pytest.raises(FleetError, match="--jobs 'x' is not a number"):
        parse_run("--jobs x d eval 1")
    # as on the command line, options may also follow DIR; after JOB they are the job's
    assert parse_run("--engine ray d --jobs 1 eval --jobs 2") == (
        "d",
        "eval",
        ("--jobs 2",),
        {"engine": "ray", "jobs": 1},
    )


def test_marimo(fleet: tuple[Path, Path]) -> None:
    pytest.importorskip("marimo")
    import marimo as mo

    import uac.marimo as um

    view = um.fleet(fleet[1])
    assert isinstance(view, mo.Html) and "standing alerts" in view.text
    assert view.text.count("marimo-ui-element") >= 2  # the two charts, as UI elements
