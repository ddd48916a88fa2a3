"""Versioned schema migrations, one directory per SQL dialect (``NNNN_name.sql``)."""
