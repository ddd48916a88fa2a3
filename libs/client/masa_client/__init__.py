"""masa_client: a typed async SDK for masa's gRPC API, plus the ``masa`` command line."""
