"""What faces draw: one renderer per report an engine call returns (its text for a terminal and
a notebook's text/plain, its HTML where a notebook shows one), Altair charts and the offline
Vega bundle."""
