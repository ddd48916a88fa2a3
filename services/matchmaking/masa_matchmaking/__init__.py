"""masa matchmaking: lobbies, tickets, ratings, and placing tables on engine nodes."""
