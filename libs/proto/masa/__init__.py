"""Generated protobuf and gRPC stubs of the masa contracts (``protos/masa/**``).

Everything below this package is produced by ``make proto`` (``scripts/gen_proto.py``) and is
not tracked in git: ``masa.common.v1``, ``masa.table.v1``, ``masa.matchmaking.v1``,
``masa.ledger.v1``, ``masa.bot.v1`` and ``masa.events.v1``, each with ``*_pb2.py``,
``*_pb2.pyi`` (mypy-protobuf) and, for services, ``*_pb2_grpc.py`` and ``*_pb2_grpc.pyi``.
"""
