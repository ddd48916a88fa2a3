"""Shell helpers shared by masa services: settings, JSON logs, the grpc.aio server, interceptors,
auth, errors, metrics and NATS/JetStream.

Import from the submodules (``masa_platform.server``, ``masa_platform.bus`` ...): each one holds
one concern, and the pure rules library never needs any of them.
"""
