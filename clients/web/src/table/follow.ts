// A table's watch stream kept alive across dropped connections, node restarts and token
// renewals, as masa_client/client.py's watch() keeps it: every reopening resumes after the
// last sequence delivered, so no update is lost or shown twice.

import { Code } from "@connectrpc/connect";
import { tables } from "../api";
import { failureOf, type Failure } from "../errors";
import type { WatchTableResponse } from "../gen/masa/table/v1/table_pb";
import { bearerToken } from "../identity";
import { pause } from "../timing";

export interface FollowHandlers {
  /** One snapshot or update, in order; an update at or below the last sequence is dropped. */
  readonly message: (message: WatchTableResponse) => void;
  /** The stream broke and is being reopened; `attempt` counts the failures in a row. */
  readonly trouble: (failure: Failure, attempt: number) => void;
  /** Whether the table is over, so that a stream the server ended normally is not reopened. */
  readonly finished: () => boolean;
}

// Failures no retry mends: the table does not exist, or the caller may not watch it so.
const FATAL = new Set([Code.NotFound, Code.PermissionDenied, Code.InvalidArgument]);
const FIRST_BACKOFF_MS = 500;
const MAX_BACKOFF_MS = 8000;

/** The sequence a watch message reflects: a snapshot's table sequence, or an update's own. */
export function sequenceOf(message: WatchTableResponse): bigint {
  switch (message.payload.case) {
    case "seatView":
      return message.payload.value.table?.table?.sequence ?? 0n;
    case "spectatorView":
      return message.payload.value.table?.sequence ?? 0n;
    case "update":
      return message.payload.value.sequence;
    default:
      return 0n;
  }
}

/** Follow `tableId` until the game ends or `signal` aborts; rejects with the error no retry
 * can mend (read it with failureOf). */
export async function followTable(
  tableId: string,
  spectate: boolean,
  handlers: FollowHandlers,
  signal: AbortSignal,
): Promise<void> {
  let last: bigint | undefined;
  let failures = 0;
  let renewed = false;
  while (!signal.aborted) {
    try {
      const stream = tables.watchTable({ tableId, spectate, afterSequence: last }, { signal });
      for await (const message of stream) {
        failures = 0;
        renewed = false;
        const sequence = sequenceOf(message);
        if (message.payload.case === "update" && last !== undefined && sequence <= last) {
          continue;
        }
        last = sequence;
        handlers.message(message);
      }
      if (handlers.finished()) {
        return;
      }
      // Ended without the end of the game (a node let the stream go as it handed the table
      // over): resume like after a failure, so that a quick loop still backs off.
      failures += 1;
    } catch (error) {
      // Only the page's own abort means it left: a CANCELLED from the server (an engine pod
      // killed, the gateway's handler cancelled) is trouble like any other.
      if (signal.aborted) {
        return;
      }
      let failure = failureOf(error);
      if (FATAL.has(failure.code)) {
        throw error;
      }
      // A token that expired with the stream open is renewed at once, but only once in a
      // row: a fresh token refused again is not fixed by a third.
      if (failure.code === Code.Unauthenticated && !renewed) {
        try {
          await bearerToken(true);
          renewed = true;
          continue;
        } catch (refused) {
          // The renewal failed (the token rate, the network): back off and try it again.
          failure = failureOf(refused);
        }
      }
      failures += 1;
      handlers.trouble(failure, failures);
    }
    await pause(Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** (failures - 1)), signal);
  }
}
