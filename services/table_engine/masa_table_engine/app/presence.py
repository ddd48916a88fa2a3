"""Which seats have a player's watch stream open on this node, and since when the others have none.

A seat is connected while at least one ``WatchTable`` stream of its player is open (P-12). The
log records that as ``SeatChanged`` entries, and a client that reconnects in a loop would write
two for every stream it opens and drops, for ever. So the log holds presence as a fact that
lasted, not as connection noise: when a seat's last stream closes, a *grace window* starts,
and only a seat that has had no stream for the whole window is logged as disconnected (which
starts its seat protection). A stream opened within the window writes nothing; one opened when
the log has the seat disconnected is logged as a reconnection (by the table's driver, while the
stream stays open, when that write failed). A seat's presence changes at most twice per window,
however fast its player reconnects.

This is in memory, on the table driver's clock (a fake one in tests): a window still open when
the node stops is lost with it, and the node that takes the table over records the seat as
disconnected at once, as it does every seat whose streams died with the old node.
"""

from __future__ import annotations

__all__ = ["Presence"]


class Presence:
    """One table's open player streams by seat, and the grace windows of seats left without."""

    def __init__(self, grace_seconds: float) -> None:
        self._grace = grace_seconds
        # Keys are seat numbers the servicer checked against the table: a few at most.
        self._streams: dict[int, int] = {}
        self._since: dict[int, float] = {}

    def opened(self, seat: int) -> None:
        """A stream of the seat's player opened: its grace window, if any, is over."""
        self._streams[seat] = self._streams.get(seat, 0) + 1
        self._since.pop(seat, None)

    def closed(self, seat: int, now: float) -> None:
        """A stream of the seat's player closed; the last one starts the seat's grace window."""
        left = self._streams.get(seat, 0) - 1
        if left > 0:
            self._streams[seat] = left
            return
        self._streams.pop(seat, None)
        self._since[seat] = now

    def streams(self, seat: int) -> int:
        return self._streams.get(seat, 0)

    def watched(self) -> list[int]:
        """The seats with a stream of their player open now, in seat order."""
        return sorted(self._streams)

    def deadline(self) -> float | None:
        """When the earliest grace window ends; None while none is open."""
        if not self._since:
            return None
        return min(self._since.values()) + self._grace

    def due(self, now: float) -> list[int]:
        """The seats whose grace window has ended at ``now``, in seat order."""
        return sorted(seat for seat, since in self._since.items() if since + self._grace <= now)

    def settled(self, seat: int) -> None:
        """The seat's disconnection is logged, or there was none to log: its window is over."""
        self._since.pop(seat, None)
