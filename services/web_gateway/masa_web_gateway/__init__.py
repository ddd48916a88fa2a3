"""The masa web gateway: the player's public APIs to browsers over Connect and gRPC-Web."""
