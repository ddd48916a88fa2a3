"""masa table-engine."""
