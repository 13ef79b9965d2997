"""Leaf modules every wing reads: errors, limits, settings, names and schema, records, the hash
chain, display, outputs, word normalisation and the knowledge tables."""
