"""The SQL view's tables built over the log, compared cell for cell with the build from the fold."""

from __future__ import annotations

from typing import Any

from uac_kernel import Workbench
from uac_kernel.sql.view import SqlView
from uac_kernel.state.fold import State

Tables = dict[str, tuple[list[Any], list[tuple[Any, ...]]]]


def read_tables(view: SqlView) -> Tables:
    out = {}
    for current, history in view.tables.values():
        for table in (current, history):
            columns = view.con.execute(f'DESCRIBE "{table}"').fetchall()
            out[table] = (columns, view.con.execute(f'FROM "{table}"').fetchall())
    return out


def python_tables(state: State) -> Tables:
    view = SqlView()
    view.refresh(state)
    return read_tables(view)


def same(x: Any, y: Any) -> bool:
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(same(a, b) for a, b in zip(x, y, strict=True))
    return type(x) is type(y) and x == y


def assert_same_tables(built: Tables, expected: Tables) -> int:
    """Every table, column type and cell equal; the number of cells compared."""
    assert built.keys() == expected.keys()
    cells = 0
    for table, (columns, rows) in expected.items():
        got_columns, got_rows = built[table]
        assert got_columns == columns, table
        assert len(got_rows) == len(rows), table
        for n, (want, got) in enumerate(zip(rows, got_rows, strict=True)):
            for column, a, b in zip(columns, want, got, strict=True):
                assert same(b, a), (table, n, column[0], a, b)
                cells += 1
    return cells


def assert_sql_build_matches(wb: Workbench) -> int:
    """The workbench's SQL tables (built by SQL over its store) equal the Python build's; the
    number of cells compared."""
    wb.sql("SELECT 1")
    view = wb._sql
    assert view is not None and view.store is wb.store
    return assert_same_tables(read_tables(view), python_tables(wb.state))
