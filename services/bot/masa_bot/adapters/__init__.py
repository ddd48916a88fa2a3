"""The bot's edges: the gRPC BotService (protobuf stops here) and Prometheus metrics."""
