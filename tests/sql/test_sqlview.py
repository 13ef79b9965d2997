"""The SQL view cannot be changed by a query, and no record type's table hides another's."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from helpers.events import fact
from helpers.store import append_as_before

from uac_kernel import Workbench
from uac_kernel.core.errors import QueryError
from uac_kernel.sql import view as sqlview
from uac_kernel.sql.view import table_names

ONE_ONLY = "only one SELECT/WITH query is allowed"


@pytest.fixture
def wb(tmp_path: Path) -> Workbench:
    wb = Workbench(tmp_path / "u.duckdb", user="maya")
    wb.ingest(
        [
            fact("2025-02-20", "add", "Trip", "tokyo", destination="Tokyo", start="2025-02-20"),
            fact("2025-04-10", "add", "Trip", "york", destination="York", start="2025-04-10"),
            fact("2025-05-01", "add", "Medication", "amox", name="amoxicillin", active=True),
            fact("2025-05-02", "add", "Transaction", "t1", amount=12.5, payee="cafe"),
        ]
    )
    return wb


def counts(wb: Workbench) -> tuple[int, int, int]:
    rows = wb.sql(
        "SELECT (SELECT count(*) FROM Trip), (SELECT count(*) FROM Medication),"
        " (SELECT count(*) FROM Transaction)"
    ).rows
    return rows[0]


@pytest.mark.parametrize(
    "attack",
    [
        "DELETE FROM Trip",
        "UPDATE Trip SET destination = 'Nowhere'",
        "INSERT INTO Transaction (key, amount, payee) VALUES ('fake', 1e6, 'me')",
        "SELECT 1; DROP TABLE Medication",
        "SELECT 1 /* ; */; DELETE FROM Trip",
        "SELECT 1 -- harmless\n; DELETE FROM Trip",
        "DROP TABLE Medication",
        "CREATE MACRO destination(x) AS 'forged'",
        "CREATE TABLE Trip2 AS SELECT * FROM Trip",
        "CREATE OR REPLACE TABLE Trip AS SELECT * FROM Trip LIMIT 0",
        "CREATE VIEW v AS SELECT 1",
        "ALTER TABLE Trip RENAME TO Gone",
        "ATTACH ':memory:' AS other",
        "COPY Trip TO 'leak.csv'",
        "EXPORT DATABASE 'leak'",
        "SET enable_external_access = true",
        "RESET lock_configuration",
        "PRAGMA enable_profiling",
        "CALL pragma_version()",
        "INSTALL httpfs",
        "LOAD httpfs",
        "BEGIN TRANSACTION",
        "EXPLAIN SELECT 1",
        "PIVOT Trip ON destination",
        "",
        ";",
    ],
)
def test_a_query_cannot_change_the_view(wb: Workbench, attack: str, tmp_path: Path) -> None:
    before = counts(wb)
    with pytest.raises(QueryError, match=ONE_ONLY) as err:
        wb.sql(attack)
    assert "\n" not in str(err.value)
    assert counts(wb) == before == (2, 1, 1)
    assert wb.sql("SELECT destination FROM Trip ORDER BY key").rows == [("Tokyo",), ("York",)]
    fns = "SELECT count(*) FROM duckdb_functions() WHERE function_name = 'destination'"
    assert wb.sql(fns).rows == [(0,)]
    assert not list(tmp_path.glob("leak*"))


def test_changes_that_slip_past_the_parser_check_are_rolled_back(
    wb: Workbench, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the second wall: a query runs in a transaction that is always rolled back
    monkeypatch.setattr(sqlview, "check_read_only", lambda statements: None)
    wb.sql("DELETE FROM Trip")
    wb.sql("INSERT INTO Transaction (key, amount, payee) VALUES ('fake', 1e6, 'me')")
    wb.sql("DROP TABLE Medication")
    wb.sql("CREATE MACRO destination(x) AS 'forged'")
    monkeypatch.undo()
    assert counts(wb) == (2, 1, 1)
    assert wb.sql("SELECT destination FROM Trip ORDER BY key").rows == [("Tokyo",), ("York",)]
    fns = "SELECT count(*) FROM duckdb_functions() WHERE function_name = 'destination'"
    assert wb.sql(fns).rows == [(0,)]
    # side-effecting table functions inside a SELECT leave the tables as they were
    wb.sql("SELECT * FROM checkpoint()")
    with pytest.raises(QueryError, match="SQL failed"):
        wb.sql("SELECT * FROM query('DELETE FROM Trip')")
    assert counts(wb) == (2, 1, 1)


def test_ordinary_queries_still_work(wb: Workbench) -> None:
    assert wb.sql("SELECT key FROM trip ORDER BY key;").rows == [("tokyo",), ("york",)]
    assert wb.sql("WITH t AS (SELECT * FROM Trip) SELECT count(*), min(start) FROM t").rows == [
        (2, date(2025, 2, 20))
    ]
    assert wb.sql("FROM Trip_history SELECT count(*)").rows == [(2,)]
    assert wb.sql("SELECT destination, count(*) FROM Trip GROUP BY ALL ORDER BY 1").rows == [
        ("Tokyo", 1),
        ("York", 1),
    ]
    assert wb.sql("VALUES (1)").rows == [(1,)]
    assert "Trip" in {r[0] for r in wb.sql("SHOW TABLES").rows}
    assert wb.sql("DESCRIBE Trip").rows[0][:2] == ("key", "VARCHAR")
    assert wb.sql("SELECT 1 UNION ALL SELECT 2 ORDER BY 1").rows == [(1,), (2,)]


def test_a_syntax_error_is_one_line(wb: Workbench) -> None:
    with pytest.raises(QueryError, match="SQL failed") as err:
        wb.sql("SELEC 1")
    assert "\n" not in str(err.value)


def test_names_that_differ_in_case_or_end_in_history_get_distinct_tables() -> None:
    assert table_names(["Trip", "TRIP", "Trip_history", "Uac_tables", "Trip_2"]) == {
        "Trip": ("Trip", "Trip_history"),
        "TRIP": ("TRIP_3", "TRIP_3_history"),  # not TRIP_2: that is a type's name
        "Trip_history": ("Trip_history_2", "Trip_history_2_history"),
        "Uac_tables": ("Uac_tables_2", "Uac_tables_2_history"),
        "Trip_2": ("Trip_2", "Trip_2_history"),
    }
    # the earlier type keeps its name, whichever it is
    assert table_names(["Trip_history", "Trip"]) == {
        "Trip_history": ("Trip_history", "Trip_history_history"),
        "Trip": ("Trip_2", "Trip_2_history"),
    }


def test_no_type_silently_hides_another(tmp_path: Path) -> None:
    append_as_before(
        tmp_path / "u.duckdb",
        "maya",
        [
            fact("2025-01-01", "add", "Trip", "a", destination="Tokyo"),
            fact("2025-01-02", "add", "TRIP", "b", code="XX", legs=3),
            fact("2025-01-03", "add", "Trip_history", "c", note="old"),
        ],
    )
    wb = Workbench(tmp_path / "u.duckdb", user="maya")
    assert wb.sql("SELECT key, destination FROM Trip").rows == [("a", "Tokyo")]
    assert wb.sql("SELECT key, retracted FROM Trip_history").rows == [("a", False)]
    assert wb.sql("SELECT key, code, legs FROM TRIP_2").rows == [("b", "XX", 3)]
    assert wb.sql("SELECT key FROM TRIP_2_history").rows == [("b",)]
    assert wb.sql("SELECT key, note FROM Trip_history_2").rows == [("c", "old")]
    assert wb.sql("FROM uac_tables ORDER BY type").rows == [
        ("TRIP", "TRIP_2", "TRIP_2_history"),
        ("Trip", "Trip", "Trip_history"),
        ("Trip_history", "Trip_history_2", "Trip_history_2_history"),
    ]
    assert wb.sql_tables()["TRIP"] == ("TRIP_2", "TRIP_2_history")
    with pytest.raises(QueryError, match="TRIP is TRIP_2, Trip_history is Trip_history_2"):
        wb.sql("SELECT * FROM Nope")
    # names stay as types are added
    wb.close()
    append_as_before(tmp_path / "u.duckdb", "maya", [fact("2025-01-04", "add", "TRip", "d", x=1)])
    wb = Workbench(tmp_path / "u.duckdb", user="maya")
    assert wb.sql("SELECT key FROM trip_3").rows == [("d",)]
    assert wb.sql("SELECT key FROM TRIP_2").rows == [("b",)]


# Column and table names as written, whatever they hold: every build of the view quotes them.
ODD_FIELDS = ["from", "dose mg", 'q"uote', "back\\slash", "');--", "Größe", "drugName"]


def test_names_in_any_style_are_columns_as_written_in_every_build(tmp_path: Path) -> None:
    db = tmp_path / "odd.duckdb"
    adds = [
        fact("2025-01-01", "add", "flight_leg", "f1", **{f: i for i, f in enumerate(ODD_FIELDS)})
    ]
    columns = ", ".join('"' + f.replace('"', '""') + '"' for f in ODD_FIELDS)  # SQL's quoting
    select = f"SELECT {columns} FROM flight_leg"
    with Workbench(db, user="u") as wb:
        wb.ingest(adds)
        first = wb.sql("SELECT * FROM flight_leg")  # built from the log
        assert first.columns[1:8] == ODD_FIELDS and first.rows[0][1:8] == tuple(range(7))
        wb.ingest([fact("2025-01-02", "update", "flight_leg", "f1", **{"dose mg": 70})])
        assert wb.sql(select).rows == [(0, 70, 2, 3, 4, 5, 6)]  # the changed type rebuilt
        history = wb.sql('SELECT "dose mg" FROM flight_leg_history ORDER BY valid_from').rows
        assert history == [(1,), (70,)]
    with Workbench(db, user="u") as wb:  # and again from a reopened store
        assert wb.sql(select).rows == [(0, 70, 2, 3, 4, 5, 6)]
        assert wb.sql("SELECT * FROM uac_tables").rows[0][:3] == (
            "flight_leg",
            "flight_leg",
            "flight_leg_history",
        )


def built(wb: Workbench) -> set[str]:
    """The tables of record types the view holds now."""
    assert wb._sql is not None
    rows = wb._sql.con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
    return {name for (name,) in rows} - {"uac_tables", "uac_constraints", "uac_vocabulary"}


def test_a_query_builds_only_the_tables_it_names(wb: Workbench) -> None:
    assert wb.sql("SELECT count(*) FROM trip").rows == [(2,)]  # names ignore case
    assert built(wb) == {"Trip"}  # no history table unless a query names it
    assert wb.sql("SELECT * FROM uac_tables").rows  # the index: no type's table needed
    assert built(wb) == {"Trip"}
    got = wb.sql("SELECT h.key FROM Medication_history h JOIN Trip t ON false").rows
    assert got == [] and built(wb) == {"Trip", "Medication", "Medication_history"}
    assert wb.sql("SELECT count(*) FROM trip_history").rows == [(2,)]
    assert built(wb) == {"Trip", "Trip_history", "Medication", "Medication_history"}


@pytest.mark.parametrize(
    "query",
    [
        "SHOW TABLES",
        "SELECT table_name FROM duckdb_tables()",
        "SELECT table_name FROM information_schema.tables",
        "SELECT 1",
    ],
)
def test_a_query_that_names_no_type_sees_every_types_table(wb: Workbench, query: str) -> None:
    wb.sql("SELECT count(*) FROM Trip")
    wb.sql(query)
    assert built(wb) == {
        f"{t}{end}" for t in ("Trip", "Medication", "Transaction") for end in ("", "_history")
    }


def test_a_misspelt_table_is_suggested_from_every_type(wb: Workbench) -> None:
    wb.sql("SELECT count(*) FROM Trip")
    with pytest.raises(QueryError) as err:
        wb.sql("SELECT count(*) FROM Transactio")
    assert 'Did you mean "Transaction"?' in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(QueryError) as err:
        wb.sql("SELECT amout FROM Transaction")
    assert 'Candidate bindings: "amount"' in str(err.value)


def test_a_table_built_earlier_is_rebuilt_when_its_type_changed(wb: Workbench) -> None:
    assert wb.sql("SELECT count(*) FROM Transaction").rows == [(1,)]
    wb.ingest([fact("2025-05-03", "add", "Transaction", "t2", amount=3.0, payee="bus")])
    assert wb.sql("SELECT count(*) FROM Trip").rows == [(2,)]  # Transaction not rebuilt yet
    assert wb.sql("SELECT count(*) FROM Transaction").rows == [(2,)]
