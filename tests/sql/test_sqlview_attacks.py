"""Attacks on the SQL view: a query must not change the view, write, read files or hide a table."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest
from helpers.events import fact
from helpers.store import append_as_before

from uac_kernel import Workbench
from uac_kernel.core.errors import QueryError

ONE_ONLY = "only one SELECT/WITH query is allowed"


@pytest.fixture
def wb(tmp_path: Path) -> Workbench:
    wb = Workbench(tmp_path / "u.duckdb", user="u")
    wb.ingest([fact("2025-01-01", "add", "Trip", "a", n=1)])
    return wb


def unchanged(wb: Workbench) -> None:
    assert wb.sql("SELECT key, n FROM Trip").rows == [("a", 1)]
    assert wb.sql("SELECT count(*) FROM Trip_history").rows == [(1,)]
    assert wb.sql("FROM uac_tables").rows == [("Trip", "Trip", "Trip_history")]


DATA_MODIFYING_CTES = [
    "WITH d AS (DELETE FROM Trip RETURNING *) SELECT * FROM d",
    "WITH d AS MATERIALIZED (DELETE FROM Trip RETURNING key) SELECT * FROM d",
    "WITH d AS (UPDATE Trip SET n = 99 RETURNING *) SELECT * FROM d",
    "WITH d AS (INSERT INTO uac_tables VALUES ('X', 'X', 'X') RETURNING *) SELECT * FROM d",
    "WITH d AS (DELETE FROM uac_tables RETURNING *) SELECT * FROM uac_tables",
]


@pytest.mark.parametrize("sql", DATA_MODIFYING_CTES)
def test_data_modifying_cte_leaves_the_view_alone(wb: Workbench, sql: str) -> None:
    """DuckDB labels a WITH whose body is DELETE/UPDATE/INSERT as SELECT; the rollback must hold."""
    with contextlib.suppress(QueryError):
        wb.sql(sql)
    unchanged(wb)


# Found by the attack: DuckDB calls these SELECT; the parse tree's query nodes give them away.
@pytest.mark.parametrize("sql", DATA_MODIFYING_CTES)
def test_data_modifying_cte_is_refused_before_it_runs(wb: Workbench, sql: str) -> None:
    with pytest.raises(QueryError, match=ONE_ONLY):
        wb.sql(sql)


def test_a_data_modifying_cte_never_runs_even_within_the_query(wb: Workbench) -> None:
    sql = (
        "WITH d AS (DELETE FROM Trip RETURNING *)"
        " SELECT (SELECT count(*) FROM d), (SELECT count(*) FROM Trip)"
    )
    with pytest.raises(QueryError, match="got DELETE in a WITH"):
        wb.sql(sql)
    unchanged(wb)


@pytest.mark.parametrize(
    "sql",
    [
        "WITH d AS (COPY Trip TO '{out}') SELECT 1",
        "FROM read_csv('/etc/passwd')",
        "FROM read_text('/etc/passwd')",
        "FROM read_blob('/etc/hostname')",
        "FROM read_json_auto('/etc/hostname')",
        "FROM glob('/*')",
        "SELECT * FROM 'data.csv'",
        "FROM read_parquet('https://example.com/x.parquet')",
        "FROM duckdb_secrets()",
        "FROM sqlite_scan('/etc/passwd', 'x')",
    ],
)
def test_no_file_or_network_access(wb: Workbench, tmp_path: Path, sql: str) -> None:
    out = tmp_path / "leak.csv"
    with pytest.raises(QueryError) as err:
        wb.sql(sql.format(out=out))
    assert "\n" not in str(err.value)
    assert not out.exists()
    unchanged(wb)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM (DELETE FROM Trip RETURNING *)",
        "SELECT * FROM (WITH d AS (DELETE FROM Trip RETURNING *) SELECT * FROM d)",
        "FROM query('DELETE FROM Trip')",
        "FROM query('SELECT 1; DELETE FROM Trip')",
        "WITH m AS (CREATE MACRO x() AS 1) SELECT 1",
        "SELECT * FROM Trip\uff1b DELETE FROM Trip",
        "SELECT * FROM Trip\u037e DELETE FROM Trip",
        "SELECT * FROM Trip; DELETE FROM Trip",
        "SELECT 1; SELECT 2",
        "PIVOT Trip ON n",
        "USE memory",
        "CREATE TEMP TABLE t AS SELECT 1",
        "CREATE MACRO x() AS 1",
        "EXPLAIN ANALYZE SELECT 1",
        "CALL pragma_version()",
        "SET VARIABLE x = 1",
        "PREPARE p AS SELECT 1",
        "LOAD json",
        "ATTACH ':memory:' AS x",
        "EXPORT DATABASE '/tmp/uac_sqlview_attack_export'",
        "SELECT * FROM Trip FOR UPDATE",
        "FROM force_checkpoint()",
        "",
        "  ;  ",
        "-- only a comment",
        "SELECT " + "1+" * 50_000 + "1",
    ],
)
def test_refused_with_a_one_line_query_error(wb: Workbench, sql: str) -> None:
    with pytest.raises(QueryError) as err:
        wb.sql(sql)
    assert "\n" not in str(err.value)
    unchanged(wb)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM Trip; -- ;",
        "SELECT * FROM Trip;;",
        "SELECT * FROM Trip /* ; DELETE FROM Trip */",
        "FROM query_table('Trip')",
        "SUMMARIZE Trip",
        "DESCRIBE Trip",
        "SHOW TABLES",
        "SELECT setseed(0.5)",
        "SELECT getvariable('x')",
        "SELECT current_setting('enable_external_access')",
        "FROM checkpoint()",
        "SELECT * FROM memory.main.Trip",
        "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 10)"
        " SELECT count(*) FROM r",
    ],
)
def test_harmless_reads_run_and_change_nothing(wb: Workbench, sql: str) -> None:
    wb.sql(sql)
    unchanged(wb)


def test_external_access_stays_off(wb: Workbench) -> None:
    assert wb.sql("SELECT current_setting('enable_external_access')").rows == [(False,)]
    assert wb.sql("SELECT current_setting('lock_configuration')").rows == [(True,)]


@pytest.mark.parametrize(
    "sql",
    ["SELECT error('boom\nsecond line')", "SELECT error('')", "SELECT error('\nx')"],
)
def test_runtime_errors_are_one_line(wb: Workbench, sql: str) -> None:
    with pytest.raises(QueryError) as err:
        wb.sql(sql)
    assert "\n" not in str(err.value)
    unchanged(wb)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT '10000-01-01'::DATE",
        "SELECT 'infinity'::DATE",
        "SELECT '290000-01-01'::TIMESTAMP",
        "SELECT 1::HUGEINT << 100",
        "SELECT 'NaN'::DOUBLE",
        "SELECT '101'::BIT",
        "SELECT 1::UNION(a INT)",
    ],
)
def test_odd_result_types_do_not_escape_as_other_errors(wb: Workbench, sql: str) -> None:
    with contextlib.suppress(QueryError):
        wb.sql(sql)
    unchanged(wb)


def test_case_and_suffix_collisions_never_hide_a_table(tmp_path: Path) -> None:
    # Ingest refuses such types now (test_input_attacks); a store from before may hold them.
    types = ["Trip", "TRIP", "Trip_2", "TRIP_2_history", "Trip_history", "TRIP_HISTORY_2"]
    events = [fact("2025-01-01", "add", t, "a", n=i) for i, t in enumerate(types)]
    append_as_before(tmp_path / "u.duckdb", "u", events)
    wb = Workbench(tmp_path / "u.duckdb", user="u")
    tables = wb.sql_tables()
    assert list(tables) == types
    lowered = [name.lower() for pair in tables.values() for name in pair]
    assert len(set(lowered)) == len(lowered)
    assert "uac_tables" not in lowered
    for i, t in enumerate(types):
        current, history = tables[t]
        assert wb.sql(f'SELECT n FROM "{current}"').rows == [(i,)]
        assert wb.sql(f'SELECT n FROM "{history}"').rows == [(i,)]
    with pytest.raises(QueryError):
        wb.sql("WITH d AS (DELETE FROM uac_tables RETURNING *) SELECT 1")
    assert wb.sql("SELECT count(*) FROM uac_tables").rows == [(len(types),)]


def test_a_type_named_like_the_index_table_does_not_hide_it(tmp_path: Path) -> None:
    append_as_before(
        tmp_path / "u.duckdb", "u", [fact("2025-01-01", "add", "UAC_TABLES", "a", n=1)]
    )
    wb = Workbench(tmp_path / "u.duckdb", user="u")
    assert wb.sql("FROM uac_tables").rows == [
        ("UAC_TABLES", "UAC_TABLES_2", "UAC_TABLES_2_history")
    ]
    assert wb.sql("SELECT n FROM UAC_TABLES_2").rows == [(1,)]


def test_nul_in_strings_loads_and_reads_back(tmp_path: Path) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="u")
    wb.ingest([fact("2025-01-01", "add", "Note", "a\x00b", text="x\x00y")])
    assert wb.sql("SELECT key, text FROM Note").rows == [("a\x00b", "x\x00y")]


# --- limits: time, memory, numbers that do not fit --------------------------------------------

LIMITED = "SQL time limit of 1 s|SQL memory limit"


@pytest.mark.parametrize(
    "sql",
    [
        pytest.param(
            "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r",
            id="recursive_cte_without_end",
        ),
        pytest.param(
            "SELECT count(*) FROM range(100000000) a, range(100000000) b", id="huge_cross_join"
        ),
        pytest.param(
            "SELECT count(*) FROM Trip, range(10000000000) a, range(10000000000) b",
            id="cross_join_with_a_table",
        ),
        pytest.param("SELECT * FROM range(1000000000)", id="billion_rows_fetched"),
        pytest.param(
            "SELECT string_agg(repeat('x', 1000), '') FROM range(100000000)", id="huge_string"
        ),
        pytest.param("SELECT list(i) FROM range(10000000000) t(i)", id="list_of_ten_billion"),
        pytest.param(
            "SELECT max(md5(i::VARCHAR)) FROM range(10000000000) t(i)", id="cpu_bound_scan"
        ),
    ],
)
def test_a_runaway_query_is_stopped_by_a_limit(wb: Workbench, sql: str) -> None:
    with pytest.raises(QueryError, match=LIMITED) as err:
        wb.sql(sql, timeout=1)
    message = str(err.value)
    assert "\n" not in message
    if "time limit" in message:
        assert "--timeout S" in message and "timeout=S" in message
    unchanged(wb)


def test_the_time_limit_defaults_to_30_seconds_and_is_configurable(
    wb: Workbench, monkeypatch: pytest.MonkeyPatch
) -> None:
    from uac_kernel.sql.view import SqlView

    assert SqlView().timeout == 30.0
    monkeypatch.setenv("UAC_SQL_TIMEOUT", "0.5")
    view = SqlView()
    assert view.timeout == 0.5
    with pytest.raises(QueryError, match=r"time limit of 0\.5 s"):
        view.query(wb.state, "SELECT count(*) FROM range(100000000) a, range(100000000) b")
    monkeypatch.setenv("UAC_SQL_TIMEOUT", "soon")
    with pytest.raises(QueryError, match="UAC_SQL_TIMEOUT='soon' is not a number of seconds"):
        SqlView()
    monkeypatch.delenv("UAC_SQL_TIMEOUT")
    for bad in (0, -1, float("nan")):
        with pytest.raises(QueryError, match="must be a positive number"):
            wb.sql("SELECT 1", timeout=bad)


def test_memory_and_threads_leave_the_machine_usable(
    wb: Workbench, monkeypatch: pytest.MonkeyPatch
) -> None:
    from uac_kernel.sql.view import SqlView, default_memory_mb

    ram_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    assert default_memory_mb() == min(2048, ram_mb // 4)
    (limit,) = wb.sql("SELECT current_setting('memory_limit')").rows[0]
    assert (
        limit.endswith(("MiB", "GiB", "MB", "GB"))
        and wb.sql("SELECT current_setting('threads')").rows[0][0] <= 4
    )
    monkeypatch.setenv("UAC_SQL_MEMORY_MB", "64")
    monkeypatch.setenv("UAC_SQL_THREADS", "1")
    small = SqlView()
    (row,) = small.query(
        wb.state, "SELECT current_setting('memory_limit'), current_setting('threads')"
    ).rows
    assert row[1] == 1 and row[0].startswith(("61", "64"))
    with pytest.raises(QueryError, match=r"SQL memory limit of 64 MB.*UAC_SQL_MEMORY_MB"):
        small.query(wb.state, "SELECT list(i ORDER BY i DESC) FROM range(100000000) t(i)")
    with pytest.raises(QueryError, match="only one SELECT"):
        small.query(wb.state, "SET memory_limit = '100GB'")


@pytest.mark.parametrize(("name", "value"), [("threads", 10**9), ("memory_mb", 2**40)])
def test_the_python_api_bounds_threads_and_memory_as_the_environment_does(
    name: str, value: int
) -> None:
    from uac_kernel.sql.view import SqlView

    # DuckDB starts as many threads as it is told: 10**9 hung the machine through the variable
    with pytest.raises(QueryError, match=rf"SQL {name} must be a positive number up to"):
        SqlView(**{name: value})


@pytest.mark.parametrize(
    ("values", "column"),
    [
        pytest.param([2**63 - 1, -(2**63)], "BIGINT", id="int64_bounds"),
        # Ingest refuses ints past 64 bits (test_input_attacks); a store written before that
        # may hold them, and their columns are checked on sql_type below.
    ],
)
def test_ints_beyond_int64_get_a_column_that_holds_them(
    tmp_path: Path, values: list[int], column: str
) -> None:
    wb = Workbench(tmp_path / "u.duckdb", user="u")
    events = [fact("2025-01-01", "add", "Count", f"k{i}", n=v) for i, v in enumerate(values)]
    events.append(fact("2025-01-01", "add", "Trip", "a", n=1))
    events.append(fact("2025-01-02", "add", "Many", "a", ns=values))
    wb.ingest(events)
    assert wb.sql("SELECT n, typeof(n) FROM Count ORDER BY key").rows == [
        (v, column) for v in values
    ]
    assert wb.sql("SELECT typeof(n) FROM Count_history LIMIT 1").rows == [(column,)]
    assert wb.sql("SELECT ns FROM Many").rows == [(values,)]
    assert wb.sql("SELECT sum(n) FROM Count").rows == [(sum(values),)]
    assert wb.sql("SELECT key, n FROM Trip").rows == [("a", 1)]  # other types are untouched


@pytest.mark.parametrize(
    ("ftype", "values", "column"),
    [
        pytest.param("int", [None, 0], "BIGINT", id="none_and_zero"),
        pytest.param("int", [-(2**63) - 1], "HUGEINT", id="just_below_int64"),
        pytest.param("int", [2**127 - 1, -(2**127)], "HUGEINT", id="int128_bounds"),
        pytest.param("int", [2**127], "VARCHAR", id="past_int128"),
        pytest.param("list[int]", [[1, -(10**60)], None], "VARCHAR[]", id="list_past_int128"),
        pytest.param("list[int]", [[2**64], []], "HUGEINT[]", id="list_past_int64"),
        pytest.param("float", [1e308], "DOUBLE", id="float_untouched"),
    ],
)
def test_column_types_fit_the_values(ftype: str, values: list[object], column: str) -> None:
    from uac_kernel.sql.types import sql_type
    from uac_kernel.sql.view import _cell

    assert sql_type(ftype, values) == column
    if column.startswith("VARCHAR"):  # the exact digits, not a rounded double
        first = values[0]
        want = [str(v) for v in first] if isinstance(first, list) else str(first)
        assert _cell(first, column) == want
