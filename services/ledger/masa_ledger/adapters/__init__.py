"""The ledger's adapters: SQL stores, gRPC, the JetStream consumer and relay, Prometheus."""
