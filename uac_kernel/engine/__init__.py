"""The engine's one path after events are appended (fold, constraints, rules, alerts), the plan
of a batch before it is, and what-ifs."""
