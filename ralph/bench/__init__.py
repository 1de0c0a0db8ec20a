"""`ralph bench`: fresh laps against one long session, with the same model and the same budget,
on jobs built at bench time from real packages' sdists (docs/bench.md)."""
