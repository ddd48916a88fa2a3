// The queue: one ticket watched until it is seated (then on to the table) or ends, with what it
// waits for and a Cancel button.

import { timestampMs } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { matchmaking, newRequestId } from "../api";
import { h, patchContent } from "../dom";
import { explain, failureOf } from "../errors";
import type { Lobby, Ticket } from "../gen/masa/matchmaking/v1/matchmaking_pb";
import { Ticket_State } from "../gen/masa/matchmaking/v1/matchmaking_pb";
import { describeLobby, ticketState, waitingLine } from "../lobbies";
import { go, href } from "../router";
import { say, sayNext } from "../status";
import { countdown, pause } from "../timing";

const FIRST_BACKOFF_MS = 500;
const MAX_BACKOFF_MS = 8000;
const CLOSED = new Set([Ticket_State.MATCHED, Ticket_State.CANCELLED, Ticket_State.EXPIRED, Ticket_State.FAILED]);

export function queueScreen(root: HTMLElement, ticketId: string, signal: AbortSignal): void {
  const status = h("div", { "data-testid": "ticket-status", class: "ticket-status", "aria-live": "polite" }, "…");
  const about = h("p", { class: "hint" });
  const cancel = h("button", { "data-testid": "cancel-ticket" }, "Cancel");
  const back = h("a", { href: href({ screen: "home" }), "data-testid": "back-home" }, "Back to the lobbies");
  const title = h("h2", { id: "queue-title" }, "Looking for a table");
  root.replaceChildren(
    h(
      "section",
      { class: "panel narrow", "aria-labelledby": "queue-title" },
      title,
      about,
      status,
      h("div", { class: "row" }, cancel, back),
    ),
  );
  let lobby: Lobby | undefined;
  let latest: Ticket | undefined;
  const show = (ticket: Ticket): void => {
    latest = ticket;
    cancel.hidden = CLOSED.has(ticket.state);
    patchContent(status, ...ticketLines(ticket, lobby));
    if (CLOSED.has(ticket.state) && ticket.state !== Ticket_State.MATCHED) {
      // The search is over: the heading and the announced message say so, not just a line.
      title.textContent = "No longer looking for a table";
      say(`the search ended: ${ticketState(ticket.state)}`, ticket.state === Ticket_State.CANCELLED ? "info" : "error");
    }
  };
  cancel.addEventListener("click", () => {
    cancel.disabled = true;
    matchmaking
      .cancelTicket({ requestId: newRequestId(), ticketId })
      .then(({ ticket }) => ticket !== undefined && show(ticket))
      .catch((error: unknown) => {
        const failure = failureOf(error);
        say(
          failure.reason === "TICKET_PLACING"
            ? "your table is being made and the ticket cannot be cancelled now: you will be seated within seconds"
            : explain(failure),
          "error",
        );
      })
      .finally(() => {
        cancel.disabled = false;
      });
  });
  cancel.focus();
  matchmaking
    .getTicket({ ticketId }, { signal })
    .then(async ({ ticket }) => {
      if (ticket === undefined) {
        return;
      }
      lobby = (await matchmaking.getLobby({ lobbyId: ticket.lobbyId }, { signal })).lobby;
      about.textContent = lobby === undefined ? ticket.lobbyId : `${lobby.displayName}: ${describeLobby(lobby)}`;
      show(latest ?? ticket);
    })
    .catch((error: unknown) => {
      if (!signal.aborted) {
        say(explain(failureOf(error)), "error");
      }
    });
  watch(ticketId, show, signal).catch((error: unknown) => say(explain(failureOf(error)), "error"));
}

function ticketLines(ticket: Ticket, lobby: Lobby | undefined): HTMLElement[] {
  const lines = [h("p", { class: "state", "data-state": Ticket_State[ticket.state] }, ticketState(ticket.state))];
  if (ticket.state === Ticket_State.SEARCHING) {
    lines.push(h("p", {}, waitingLine(ticket.playersNeeded, lobby?.recentWaits)));
    if (ticket.expireTime !== undefined) {
      lines.push(h("p", { class: "hint" }, "the search gives up in ", countdown(timestampMs(ticket.expireTime))));
    }
  }
  if (ticket.partyCode) {
    lines.push(h("p", {}, `party code ${ticket.partyCode}: your partners join with it`));
  }
  if (ticket.state === Ticket_State.EXPIRED || ticket.state === Ticket_State.FAILED) {
    const why = ticket.error?.metadata["message"] || ticket.error?.reason || "no reason given";
    lines.push(h("p", { class: "error" }, `no seat: ${why}`));
  }
  return lines;
}

/** Follow the ticket, reopening the stream after a failure, until it closes; a matched ticket
 * goes on to its table. */
async function watch(ticketId: string, show: (ticket: Ticket) => void, signal: AbortSignal): Promise<void> {
  let failures = 0;
  while (!signal.aborted) {
    try {
      for await (const { ticket } of matchmaking.watchTicket({ ticketId }, { signal })) {
        failures = 0;
        if (ticket === undefined) {
          continue;
        }
        show(ticket);
        if (ticket.state === Ticket_State.MATCHED) {
          sayNext(`seated at table ${ticket.tableId}, seat ${ticket.seat ?? "?"}`, "ok");
          go({ screen: "table", id: ticket.tableId }, true);
          return;
        }
        if (CLOSED.has(ticket.state)) {
          return;
        }
      }
    } catch (error) {
      // Only the page's own abort means it left: a CANCELLED from the server is a break to
      // reconnect after, like any other.
      if (signal.aborted) {
        return;
      }
      const failure = failureOf(error);
      if (failure.code === Code.NotFound || failure.code === Code.PermissionDenied) {
        throw error;
      }
      say("the connection to matchmaking dropped: reconnecting…", "error");
    }
    failures += 1;
    await pause(Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** (failures - 1)), signal);
  }
}
