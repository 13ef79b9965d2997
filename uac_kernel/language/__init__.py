"""The constraint language: seven kinds of constraint as typed data (spec) and the cited knowledge
tables they name (knowledge)."""
