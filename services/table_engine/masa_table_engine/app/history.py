"""A live table's recent entries and the player requests they answered.

A table keeps its latest entries (``kept`` of them) for resuming watchers and answering
retries; a watcher further behind gets a fresh snapshot, and an older retry meets its stale
expected sequence. Each entry holds the game states it led to, so a 51 game's whole history
would hold megabytes per table: only the latest are kept. The entry of each ``(seat,
request_id)`` among them is indexed, so that a retry is found without scanning; requests known
only from the snapshot a table was rebuilt from (their entries were not replayed) are kept by
the sequence each produced, so that their retries are answered, not applied again.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from masa_table_engine.domain.model import Entry, PlayerAction
from masa_table_engine.domain.table import Table

__all__ = ["History", "WatchItem"]

# What a watch stream sends: the table as it stands, then entries.
WatchItem = Table | Entry


class History:
    def __init__(
        self,
        kept: int,
        entries: Iterable[Entry] = (),
        requests: tuple[tuple[int, str, int], ...] = (),
    ) -> None:
        self._kept = kept
        self._entries: deque[Entry] = deque()
        self._requests: dict[tuple[int, str], Entry] = {}
        self._requests_before: dict[tuple[int, str], int] = {
            (seat, request_id): sequence for seat, request_id, sequence in requests
        }
        for entry in entries:
            self.keep(entry)

    def keep(self, entry: Entry) -> None:
        """The newest entry; the oldest goes once more than ``kept`` are held."""
        self._entries.append(entry)
        item = entry.input
        if isinstance(item, PlayerAction) and item.request_id:
            # The latest entry wins, as it did when the history was searched from the end.
            self._requests[item.seat, item.request_id] = entry
        while len(self._entries) > self._kept:
            old = self._entries.popleft()
            item = old.input
            if isinstance(item, PlayerAction) and item.request_id:
                key = (item.seat, item.request_id)
                if self._requests.get(key) is old:
                    del self._requests[key]

    def accepted(self, seat: int, request_id: str) -> Entry | None:
        """The entry a request of ``seat`` already produced, found in the log-backed history.

        The gRPC layer de-duplicates retries in memory; this survives a restart too, because
        the log records each action's request_id and recovery replays it.
        """
        if not request_id:
            return None
        return self._requests.get((seat, request_id))

    def accepted_before(self, seat: int, request_id: str) -> int | None:
        """The sequence a request produced before the snapshot this table was rebuilt from."""
        if not request_id:
            return None
        return self._requests_before.get((seat, request_id))

    def recent_requests(self) -> tuple[tuple[int, str, int], ...]:
        """The player requests a snapshot keeps, for retries after a takeover."""
        recent = [
            (seat, request_id, entry.sequence)
            for (seat, request_id), entry in self._requests.items()
        ]
        if len(recent) < self._kept:
            recent.extend(
                (seat, request_id, sequence)
                for (seat, request_id), sequence in self._requests_before.items()
                if (seat, request_id) not in self._requests
            )
        recent.sort(key=lambda request: request[2])
        return tuple(recent[-self._kept :])

    def first_items(self, table: Table, after_sequence: int | None) -> tuple[list[WatchItem], int]:
        """What a new stream is sent first: the entries after ``after_sequence`` while the
        history still holds them, else ``table``; and the sequence the stream is at before."""
        first_kept = self._entries[0].sequence if self._entries else table.sequence + 1
        if after_sequence is not None and first_kept - 1 <= after_sequence:
            return [e for e in self._entries if e.sequence > after_sequence], after_sequence
        return [table], table.sequence
