"""The ledger's use cases and the ports they need; no I/O of their own."""
