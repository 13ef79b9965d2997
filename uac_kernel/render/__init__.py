"""What faces draw: Altair charts, the offline Vega bundle, and the text of summaries, fleet and
what-if reports."""
