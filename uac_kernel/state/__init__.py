"""The typed state folded from the log (fold), the query namespace over it (query), a layer to try
events on (trial) and what a text mentions (mentions)."""
