"""What comes in: the Event JSONL format and its validation (events), other formats (adapters), and
the report of one batch (report)."""
