"""The ledger's pure core: values, validation and the split of a pot (no I/O)."""
