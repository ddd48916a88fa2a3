// The public part of the table: the seats (cards are counts only, P-20), whose turn it is and
// its timer, and the middle of the table of each game: the stock, the discard pile or the
// Elevator pile and its direction, the melds with who laid them, a running query.

import { timestampMs } from "@bufbuild/protobuf/wkt";
import { cardCode, cardFace, cardKey, cardName } from "../cards";
import { h } from "../dom";
import type { Card } from "../gen/masa/common/v1/card_pb";
import { MeldKind } from "../gen/masa/common/v1/meld_pb";
import {
  Direction,
  type ElevatorTable,
  type FiftyOneTable,
  Opening,
  type SeatState,
  type TableView,
  TurnPhase,
} from "../gen/masa/table/v1/view_pb";
import { gameTitle } from "../lobbies";
import { count, seatName } from "../names";
import { countdown } from "../timing";
import { me, type TableState, usableBottom } from "./state";

const MELD_KINDS: Readonly<Record<number, string>> = { [MeldKind.RUN]: "run", [MeldKind.SET]: "set", [MeldKind.PAIR]: "pair" };
const OPENINGS: Readonly<Record<number, string>> = {
  [Opening.MELDS]: "opened",
  [Opening.PAIRS]: "opened with pairs",
  [Opening.PARTNER]: "partner opened",
};

export function title(view: TableView): string {
  const config = view.table?.config;
  return config === undefined ? "a table" : gameTitle(config.game, config.preset, config.gameName);
}

/** Whose turn it is and how long it has left; during a query, the query's deadline. */
export function turnTimer(state: TableState): HTMLElement {
  const view = state.view;
  const mine = me(state);
  if (view === undefined || state.ended) {
    return h("p", { class: "timer", "data-testid": "timer" }, "game over");
  }
  if (view.turnPhase === TurnPhase.QUERY && view.game.case === "fiftyone" && view.game.value.query?.deadline) {
    const query = view.game.value.query;
    return h(
      "p",
      { class: "timer", "data-testid": "timer", "data-phase": "QUERY" },
      `${seatName(view, query.takerSeat, mine)} asks for the discard: answers within `,
      countdown(timestampMs(query.deadline!)),
    );
  }
  if (view.turnSeat === undefined) {
    return h("p", { class: "timer", "data-testid": "timer" }, "between turns");
  }
  const who = view.turnSeat === mine ? "your turn" : `${seatName(view, view.turnSeat, mine)}'s turn`;
  return h(
    "p",
    { class: "timer", "data-testid": "timer", "data-phase": TurnPhase[view.turnPhase] },
    view.turnDeadline === undefined ? `${who}: the autopilot plays it (P-10)` : [`${who}: `, countdown(timestampMs(view.turnDeadline))],
  );
}

export function renderSeats(state: TableState): HTMLElement {
  const view = state.view!;
  return h(
    "ol",
    { class: "seats", "aria-label": "players" },
    view.seats.map((seat) => renderSeat(seat, view, me(state))),
  );
}

function renderSeat(seat: SeatState, view: TableView, mine: number | undefined): HTMLElement {
  const turn = view.turnSeat === seat.seat;
  const fiftyone = view.game.case === "fiftyone";
  const notes: (string | HTMLElement)[] = [count(seat.cardCount, "card")];
  if (fiftyone) {
    notes.push(`total ${seat.total}`);
    const opened = OPENINGS[seat.opening];
    if (opened) {
      notes.push(opened);
    }
    if (seat.pairStatus) {
      notes.push("going pairs");
    }
  }
  if (seat.left) {
    notes.push("left the table");
  }
  if (seat.forfeited) {
    notes.push("forfeited, a bot plays");
  } else if (seat.autopilot) {
    notes.push("autopilot");
  }
  if (seat.eliminated) {
    notes.push("out");
  }
  const presence =
    seat.playerId === ""
      ? h("span", { class: "presence bot" }, "bot")
      : seat.connected
        ? h("span", { class: "presence on" }, "connected")
        : h(
            "span",
            { class: "presence off" },
            "disconnected",
            seat.protectionDeadline && !seat.forfeited ? [", seat kept ", countdown(timestampMs(seat.protectionDeadline))] : null,
          );
  return h(
    "li",
    {
      class: ["seat", turn ? "turn" : "", seat.seat === mine ? "mine" : ""].join(" ").trim(),
      "data-testid": `seat-${seat.seat}`,
      "data-cards": seat.cardCount,
      "data-connected": seat.connected,
      "data-autopilot": seat.autopilot,
      "data-eliminated": seat.eliminated,
      "data-turn": turn,
      "aria-current": turn ? "true" : undefined,
    },
    h("span", { class: "turn-mark", "aria-hidden": "true" }, turn ? "▶" : ""),
    h("strong", {}, seatName(view, seat.seat, mine)),
    h("span", { class: "notes" }, notes.flatMap((note, index) => (index ? [", ", note] : [note]))),
    presence,
  );
}

/** The middle of the table: stock, pile and what the game shows publicly. */
export function renderMiddle(state: TableState, meldClicked: (meldId: number) => void, cardClicked: (key: string) => void): HTMLElement {
  const view = state.view!;
  switch (view.game.case) {
    case "fiftyone":
      return fiftyOneMiddle(view.game.value, state, meldClicked, cardClicked);
    case "elevator":
      return elevatorMiddle(view.game.value, view, me(state));
    default:
      return h("p", {}, "this client cannot show this game's table");
  }
}

function stock(stockCount: number): HTMLElement {
  return h("div", { class: "pile-box" }, h("span", { class: "label" }, "stock"), h("span", { "data-testid": "stock-count", class: "big" }, stockCount));
}

function elevatorMiddle(game: ElevatorTable, view: TableView, mine: number | undefined): HTMLElement {
  const top = game.pile.at(-1);
  const up = game.direction === Direction.ASCENDING;
  const rest = game.pile.slice(-6, -1);
  return h(
    "div",
    { class: "middle" },
    stock(game.stockCount),
    h(
      "div",
      { class: "pile-box" },
      h("span", { class: "label" }, "pile"),
      h(
        "span",
        { class: "pile-row" },
        h("span", { class: "under", "aria-label": "cards under the top" }, rest.map((card) => cardFace(card))),
        h("span", { "data-testid": "discard-top", class: "top", "data-code": top ? cardCode(top) : "" }, top ? cardFace(top) : "empty"),
      ),
    ),
    h(
      "div",
      { class: "pile-box" },
      h("span", { class: "label" }, "direction"),
      h("span", { "data-testid": "direction", class: "big", "data-direction": up ? "up" : "down" }, up ? "↑ up" : "↓ down"),
    ),
    h(
      "div",
      { class: "notes" },
      game.freePlay ? h("p", {}, "any card may follow (joker, E-7)") : null,
      game.kopileSeat === undefined ? null : h("p", { class: "warn" }, `kopile: ${seatName(view, game.kopileSeat, mine)} is owed ${count(game.kopileOwed, "card")} (E-9)`),
    ),
  );
}

function fiftyOneMiddle(game: FiftyOneTable, state: TableState, meldClicked: (meldId: number) => void, cardClicked: (key: string) => void): HTMLElement {
  const view = state.view!;
  const mine = me(state);
  const top = game.discardPile.at(-1);
  const query = game.query;
  return h(
    "div",
    { class: "middle fiftyone" },
    stock(game.stockCount),
    h(
      "div",
      { class: "pile-box" },
      h("span", { class: "label" }, "discard"),
      h("span", { "data-testid": "discard-top", class: "top", "data-code": top ? cardCode(top) : "" }, top ? cardFace(top) : "empty"),
      h("span", { class: "hint" }, count(game.discardPile.length, "card")),
    ),
    game.bottomCard ? h("div", { class: "pile-box" }, h("span", { class: "label" }, "bottom card"), bottomCard(game.bottomCard, state, cardClicked)) : null,
    h(
      "div",
      { class: "notes" },
      h("p", {}, `to open: ${game.effectiveThreshold} points` + (game.pairsNeeded ? ` or ${count(game.pairsNeeded, "pair")}` : "")),
      query && query.askedSeats.length
        ? h(
            "p",
            { class: "warn", "data-testid": "query" },
            `query (F-80): ${seatName(view, query.takerSeat, mine)} wants `,
            query.card ? cardFace(query.card) : "the discard",
            `; asked: ${query.askedSeats.map((seat) => seatName(view, seat, mine)).join(", ")}`,
          )
        : null,
    ),
    renderMelds(game, state, meldClicked),
  );
}

/** The face-up bottom card (F-34, F-35); in remi, while the player may finish the hand with
 * it, a card to select like one of the hand. */
function bottomCard(card: Card, state: TableState, cardClicked: (key: string) => void): HTMLElement {
  if (usableBottom(state) === undefined) {
    return h("span", { "data-testid": "bottom-card", "data-code": cardCode(card) }, cardFace(card));
  }
  const key = cardKey(card);
  // Put into a meld already, it is out of the selection, as a card of the hand would be.
  const staged = state.staged.some((meld) => meld.some((placed) => cardKey(placed) === key));
  return h(
    "button",
    {
      type: "button",
      class: ["card", staged ? "staged" : ""].join(" ").trim(),
      "data-testid": "bottom-card",
      "data-code": cardCode(card),
      "aria-pressed": state.selected.includes(key) ? "true" : "false",
      "aria-disabled": staged ? "true" : undefined,
      "aria-label": `bottom card, ${cardName(card)}: select it to finish the hand with it (F-35)`,
      onclick: () => {
        if (!staged) {
          cardClicked(key);
        }
      },
    },
    cardFace(card),
  );
}

function renderMelds(game: FiftyOneTable, state: TableState, meldClicked: (meldId: number) => void): HTMLElement {
  const view = state.view!;
  return h(
    "div",
    { class: "melds", "data-testid": "melds", role: "group", "aria-label": "melds on the table; choose one to lay off on" },
    game.melds.length === 0
      ? h("p", { class: "hint" }, "no melds on the table yet")
      : game.melds.map((meld) =>
          h(
            "button",
            {
              type: "button",
              class: "meld",
              "data-testid": `meld-${meld.meldId}`,
              "data-owner": meld.ownerSeat,
              "aria-pressed": state.targetMeld === meld.meldId ? "true" : "false",
              onclick: () => meldClicked(meld.meldId),
            },
            h("span", { class: "meld-id" }, `#${meld.meldId}`),
            meld.cards.map((placed) => (placed.card ? cardFace(placed.card, placed.standsFor) : null)),
            h("span", { class: "owner" }, `${MELD_KINDS[meld.kind] ?? "meld"}, ${meld.value} points, ${seatName(view, meld.ownerSeat, me(state))}`),
          ),
        ),
  );
}
