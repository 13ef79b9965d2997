"""SQL over the typed state: one read-only DuckDB table per record type (view), built from the log
in SQL (build), with the column types both write (types)."""
