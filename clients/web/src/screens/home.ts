// Home: the player's chips, the way back to an open ticket or a table in play, the lobbies
// with a Play button each, and spectating a table by its id.

import { ledger, matchmaking, newRequestId, tables } from "../api";
import { h, patchContent } from "../dom";
import { explain, failureOf } from "../errors";
import type { BotLevel } from "../gen/masa/common/v1/game_pb";
import { Mode } from "../gen/masa/common/v1/game_pb";
import { type Lobby, type Ticket, Ticket_State } from "../gen/masa/matchmaking/v1/matchmaking_pb";
import { Table_State } from "../gen/masa/table/v1/view_pb";
import { LEVELS, describeLobby, lobbyActivity, ticketState } from "../lobbies";
import { go, href } from "../router";
import { queueFor } from "../queueing";
import { say } from "../status";
import { pause } from "../timing";

// The lobbies' queues and waits change while the player reads them.
const REFRESH_MS = 5000;
// After a failed refresh the next waits twice as long, up to this: every open page asking
// every 5 s would press a gateway already in trouble.
const MAX_REFRESH_MS = 40000;
// Matched tickets looked at for a table still in play: the player's last few games.
const RECENT_MATCHES = 3;
// Play waits for that look: a table that does not answer in time counts as not held.
const LOOK_TIMEOUT_MS = 5000;

// What the home screen knows while the player reads it: the tables the player still holds a
// seat at, and the lobbies whose Play asked the player what to do with that seat.
interface Seated {
  tables: Ticket[];
  // Settles once ``tables`` has been looked up (or the look failed): Play waits for it.
  looked: Promise<void>;
  readonly asking: Set<string>;
  // A leave or a ticket asked for from this screen and not answered yet: its buttons stay
  // disabled across the lobby list's refreshes.
  busy: boolean;
  // Aborted when the player leaves the screen: a Play still waiting then queues nothing.
  readonly signal: AbortSignal;
  redraw: () => void;
}

export function homeScreen(root: HTMLElement, signal: AbortSignal): void {
  const seated: Seated = { tables: [], looked: Promise.resolve(), asking: new Set(), busy: false, signal, redraw: () => {} };
  const balance = h("p", { "data-testid": "balance", class: "balance" }, "…");
  const comeBack = h("div", { "data-testid": "open-tickets" });
  const lobbies = h("div", { class: "lobbies", "data-testid": "lobbies" }, "…");
  root.replaceChildren(
    h(
      "section",
      { class: "panel", "aria-labelledby": "chips-title" },
      h("h2", { id: "chips-title" }, "Your chips"),
      balance,
      comeBack,
    ),
    h("section", { class: "panel", "aria-labelledby": "lobbies-title" }, h("h2", { id: "lobbies-title" }, "Lobbies"), lobbies),
    spectateForm(),
  );
  showBalance(balance).catch(reportUnlessLeft(signal));
  seated.looked = showOpen(comeBack, seated).catch(reportUnlessLeft(signal));
  void keepLobbies(lobbies, seated, signal);
}

function reportUnlessLeft(signal: AbortSignal): (error: unknown) => void {
  return (error) => {
    if (!signal.aborted) {
      say(explain(failureOf(error)), "error");
    }
  };
}

async function showBalance(target: HTMLElement): Promise<void> {
  const { account } = await ledger.getBalance({});
  if (account === undefined) {
    target.textContent = "no wallet yet";
    return;
  }
  target.textContent = `${account.balance} chips`;
  if (account.held > 0n) {
    target.append(h("span", { class: "hint" }, ` (${account.available} free, ${account.held} held for a table)`));
  }
}

/** The player's open ticket and the tables of its recent matches where it still holds a
 * seat; those go into ``seated`` too. */
async function showOpen(target: HTMLElement, seated: Seated): Promise<void> {
  const { tickets } = await matchmaking.listTickets({ pageSize: 20 });
  const links: HTMLElement[] = [];
  for (const ticket of tickets) {
    if (ticket.state === Ticket_State.SEARCHING || ticket.state === Ticket_State.PLACING) {
      links.push(
        h(
          "li",
          {},
          h("a", { href: href({ screen: "ticket", id: ticket.ticketId }), "data-testid": `open-ticket-${ticket.ticketId}` }, `Back to your ticket in ${ticket.lobbyId}`),
          ` (${ticketState(ticket.state)})`,
        ),
      );
    }
  }
  const matched = tickets.filter((ticket) => ticket.state === Ticket_State.MATCHED && ticket.tableId).slice(0, RECENT_MATCHES);
  seated.tables = await inPlay(matched);
  seated.redraw();
  for (const ticket of seated.tables) {
    links.push(
      h(
        "li",
        {},
        h("a", { href: href({ screen: "table", id: ticket.tableId }), "data-testid": `open-table-${ticket.tableId}` }, `Back to your seat at table ${ticket.tableId}`),
        ` (${ticket.lobbyId})`,
      ),
    );
  }
  patchContent(target, links.length ? h("ul", { class: "come-back" }, links) : null);
}

/** The matched tickets whose table still plays with the player's seat in it: a seat left
 * (LeaveTable) is kept until it forfeits (P-12), a forfeited one is a bot's for good, and an
 * eliminated one (F-96) only watches the others play on. */
async function inPlay(matched: Ticket[]): Promise<Ticket[]> {
  const holding = await Promise.all(
    matched.map((ticket) =>
      tables.getTable({ tableId: ticket.tableId }, { timeoutMs: LOOK_TIMEOUT_MS }).then(
        (answer) => {
          if (answer.view.case !== "seatView") {
            return false;
          }
          const view = answer.view.value;
          const mine = view.table?.seats.find((seat) => seat.seat === view.seat);
          return view.table?.table?.state === Table_State.PLAYING && mine !== undefined && !mine.forfeited && !mine.eliminated;
        },
        () => false,
      ),
    ),
  );
  return matched.filter((_, index) => holding[index]);
}

async function keepLobbies(target: HTMLElement, seated: Seated, signal: AbortSignal): Promise<void> {
  // Levels chosen in the selects survive the refreshes that rebuild the list.
  const levels = new Map<string, BotLevel>();
  const report = reportUnlessLeft(signal);
  let failures = 0;
  while (!signal.aborted) {
    // A failed refresh (the gateway restarting, a dropped network) is reported and tried
    // again: the list must not freeze for the rest of the visit.
    try {
      const { lobbies } = await matchmaking.listLobbies({ pageSize: 200 }, { signal });
      if (failures > 0) {
        say("the lobbies are up to date again", "ok");
      }
      failures = 0;
      seated.redraw = () => patchContent(target, lobbies.length ? lobbies.map((lobby) => lobbyCard(lobby, levels, seated)) : "no lobbies are open");
      seated.redraw();
    } catch (error) {
      failures += 1;
      report(error);
    }
    await pause(Math.min(MAX_REFRESH_MS, REFRESH_MS * 2 ** failures), signal);
  }
}

function lobbyCard(lobby: Lobby, levels: Map<string, BotLevel>, seated: Seated): HTMLElement {
  const id = lobby.lobbyId;
  const choosesLevel = lobby.mode === Mode.TRAINING && lobby.botLevels.length > 1;
  const level = choosesLevel
    ? h(
        "select",
        {
          "data-testid": `level-${id}`,
          "aria-label": `bot level in ${lobby.displayName}`,
          onchange: (event: Event) => levels.set(id, Number((event.target as HTMLSelectElement).value) as BotLevel),
        },
        lobby.botLevels.map((option) =>
          h("option", { value: option, selected: (levels.get(id) ?? lobby.botFill?.level) === option }, LEVELS[option] ?? "?"),
        ),
      )
    : null;
  const queue = (): void => {
    seated.busy = true;
    seated.redraw();
    queueFor(id, choosesLevel ? levels.get(id) ?? lobby.botFill?.level : undefined).finally(() => {
      seated.busy = false;
      seated.redraw();
    });
  };
  const elsewhere = seated.tables[0];
  const play = h(
    "button",
    {
      "data-testid": `play-${id}`,
      "aria-label": `Play in ${lobby.displayName}`,
      disabled: seated.busy,
      onclick: () => {
        seated.busy = true;
        seated.redraw();
        // One seat at a time: a second table would play the first seat by its timer. So
        // Play waits for the look at the player's tables, and asks while one holds a seat.
        void seated.looked.then(() => {
          seated.busy = false;
          if (seated.signal.aborted) {
            return;
          }
          if (seated.tables.length === 0) {
            queue();
            return;
          }
          seated.asking.add(id);
          seated.redraw();
        });
      },
    },
    "Play",
  );
  return h(
    "article",
    { class: "lobby", "data-testid": `lobby-${id}`, "data-lobby-id": id },
    h("h3", {}, lobby.displayName || id),
    h("p", {}, describeLobby(lobby)),
    h("p", { class: "hint", "data-testid": `lobby-activity-${id}` }, lobbyActivity(lobby)),
    h("div", { class: "row" }, level, play),
    elsewhere !== undefined && seated.asking.has(id) ? seatedElsewhere(elsewhere, seated, id, queue) : null,
  );
}

/** What a player who still holds a seat may do before queueing again: go back to it, or leave
 * it (LeaveTable: the seat is kept until it forfeits, P-12, its turns played by the timer
 * meanwhile, P-10) and queue. */
function seatedElsewhere(elsewhere: Ticket, seated: Seated, lobbyId: string, queue: () => void): HTMLElement {
  const tableId = elsewhere.tableId;
  return h(
    "div",
    { class: "row seated-elsewhere", role: "group", "data-testid": `seated-elsewhere-${lobbyId}` },
    h("p", { class: "error" }, `you still hold a seat at table ${tableId} (${elsewhere.lobbyId})`),
    h("button", { type: "button", "data-testid": `back-to-seat-${lobbyId}`, onclick: () => go({ screen: "table", id: tableId }) }, "Back to that seat"),
    h(
      "button",
      {
        type: "button",
        class: "quiet",
        "data-testid": `leave-and-play-${lobbyId}`,
        disabled: seated.busy,
        onclick: () => {
          seated.busy = true;
          seated.redraw();
          tables
            .leaveTable({ requestId: newRequestId(), tableId })
            .then(() => {
              seated.tables = seated.tables.filter((ticket) => ticket.tableId !== tableId);
              say(`you left table ${tableId}: its seat is kept until it forfeits (P-12), and its turns time out meanwhile (P-10)`, "info");
              seated.busy = false;
              if (seated.tables.length) {
                // Another seat is still held: the prompt now names that one.
                seated.redraw();
                return;
              }
              seated.asking.delete(lobbyId);
              queue();
            })
            .catch((error: unknown) => {
              seated.busy = false;
              seated.redraw();
              say(explain(failureOf(error)), "error");
            });
        },
      },
      "Leave it and play here",
    ),
  );
}

function spectateForm(): HTMLElement {
  const input = h("input", { id: "spectate-id", "data-testid": "spectate-input", required: true, autocomplete: "off" });
  const form = h(
    "form",
    { class: "row" },
    h("label", { for: "spectate-id" }, "Table id"),
    input,
    h("button", { type: "submit", "data-testid": "spectate-submit" }, "Watch"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const id = input.value.trim();
    if (id) {
      go({ screen: "watch", id });
    }
  });
  return h("section", { class: "panel", "aria-labelledby": "watch-title" }, h("h2", { id: "watch-title" }, "Watch a table"), form);
}
