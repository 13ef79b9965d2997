"""The append-only event log in DuckDB: the store, its migrations, integrity of the hash chains,
which users it holds, and sharing it between processes."""
