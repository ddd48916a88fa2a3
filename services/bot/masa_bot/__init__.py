"""masa bot service: stateless move choice for bot seats and the autopilot (``Decide``).

- :mod:`masa_bot.domain`: the pure choice of an action from a seat's rebuilt state, per level;
- :mod:`masa_bot.app`: the Decide use case (time budget, fallback, metrics port);
- :mod:`masa_bot.adapters`: gRPC (protobuf stops here) and Prometheus;
- ``python -m masa_bot``: the service, configured from ``MASA_*``.
"""
