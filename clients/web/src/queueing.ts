// Queueing for a lobby (CreateTicket), from the lobby list or after a game ("play again").

import { matchmaking, newRequestId } from "./api";
import { explain, failureOf } from "./errors";
import type { BotLevel } from "./gen/masa/common/v1/game_pb";
import { identity } from "./identity";
import { go } from "./router";
import { say, sayNext } from "./status";

/** Ask for a seat in `lobbyId` and go to the ticket's queue; a ticket already open is shown
 * instead, since a player holds one at a time. */
export async function queueFor(lobbyId: string, botLevel?: BotLevel): Promise<void> {
  try {
    const { ticket } = await matchmaking.createTicket({
      requestId: newRequestId(),
      lobbyId,
      displayName: identity()?.player ?? "",
      botLevel,
    });
    if (ticket !== undefined) {
      go({ screen: "ticket", id: ticket.ticketId });
    }
  } catch (error) {
    const failure = failureOf(error);
    const open = failure.metadata["ticket_id"];
    if (failure.reason === "TICKET_OPEN" && open) {
      sayNext(`you already have an open ticket in ${failure.metadata["lobby_id"] ?? "another lobby"}: here it is; cancel it to pick another lobby`, "error");
      go({ screen: "ticket", id: open });
      return;
    }
    say(explain(failure), "error");
  }
}
