"""``masa-load``: drives live tables against a running deployment through the public API."""
