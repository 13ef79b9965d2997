"""The state as code: rendered into a Python module (codegen), versioned (checkpoint), kept as a
snapshot (snapshot, snaptypes), edited back (edits), and erased from (forget)."""
