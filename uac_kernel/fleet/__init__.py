"""Many users at once: a fleet directory of Parquet partitions (partition, checkout, export,
importing, verify), jobs run on every user (run, engines), and SQL across them (sql)."""
