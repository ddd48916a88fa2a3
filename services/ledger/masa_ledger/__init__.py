"""masa ledger service: chips in a double-entry ledger, stake holds and exactly-once settlement.

- :mod:`masa_ledger.domain`: accounts, holds, transfers and settlements as frozen values, the
  validation of every input, and the pure split of a pot by the ranking (P-30);
- :mod:`masa_ledger.app`: the use cases (grant, hold, bind, release, expire, settle, void,
  reads), the invariant check, and the ports they need (a store, the table results);
- :mod:`masa_ledger.adapters`: PostgreSQL and SQLite stores, gRPC (protobuf stops here), the
  JetStream settlement consumer, the outbox relay, Prometheus;
- :mod:`masa_ledger.bootstrap` wires them; ``python -m masa_ledger`` serves, and
  ``masa-ledger check`` verifies a database.
"""
