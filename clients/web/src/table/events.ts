// One line per event of the table, as the terminal client prints them (masa_client/render.py):
// what the viewer may see of each move, with every player named.

import type { Card, PlacedCard } from "../gen/masa/common/v1/card_pb";
import { QueryAnswer } from "../gen/masa/table/v1/action_pb";
import {
  AutopilotReason,
  FinishKind,
  type HandFinished,
  HandEndReason,
  type TableEvent,
} from "../gen/masa/table/v1/event_pb";
import { GameKind } from "../gen/masa/common/v1/game_pb";
import type { TableView } from "../gen/masa/table/v1/view_pb";
import { cardCode } from "../cards";
import { count, seatName } from "../names";

const FINISHES: Readonly<Record<number, string>> = {
  [FinishKind.BY_HAND]: "by hand",
  [FinishKind.WITH_JOKER]: "with a joker",
  [FinishKind.FROM_PAIRS]: "from pairs",
  [FinishKind.WITH_BOTTOM_CARD]: "with the bottom card",
};

function cards(list: readonly Card[]): string {
  return list.map(cardCode).join(" ") || "-";
}

function placed(card: PlacedCard): string {
  const face = card.card === undefined ? "?" : cardCode(card.card);
  return card.standsFor === undefined ? face : `${face}=${cardCode(card.standsFor)}`;
}

/** A line for one event, or "" for events not worth one (timers, reconnections); `table` is
 * the latest view, which names the players. */
export function describe(event: TableEvent, table: TableView, me?: number): string {
  const name = (seat: number): string => seatName(table, seat, me);
  const { kind } = event;
  switch (kind.case) {
    case "handDealt":
      return `— hand ${kind.value.handNo} dealt —`;
    case "drew":
      return `${name(kind.value.seat)} draws` + (kind.value.card ? ` ${cardCode(kind.value.card)}` : "");
    case "tookDiscard":
      return `${name(kind.value.seat)} takes the discard ${kind.value.card ? cardCode(kind.value.card) : ""}`;
    case "opened":
      return `${name(kind.value.seat)} opens${kind.value.withPairs ? " with pairs" : ""}: ${kind.value.melds.map((meld) => meld.cards.map(placed).join(" ")).join(" / ")}`;
    case "laidDown":
      return `${name(kind.value.seat)} lays down: ${kind.value.melds.map((meld) => meld.cards.map(placed).join(" ")).join(" / ")}`;
    case "laidOff":
      return `${name(kind.value.seat)} lays ${kind.value.card ? placed(kind.value.card) : "a card"} on #${kind.value.meld?.meldId ?? "?"}`;
    case "jokerRetrieved":
      return `${name(kind.value.seat)} takes ${kind.value.joker ? cardCode(kind.value.joker) : "a joker"} back from #${kind.value.meld?.meldId ?? "?"}`;
    case "discarded":
      return `${name(kind.value.seat)} discards ${kind.value.card ? cardCode(kind.value.card) : ""}${kind.value.islek ? " (işlek)" : ""}`;
    case "pairsDeclared":
      return `${name(kind.value.seat)} goes pairs`;
    case "gostergeShown":
      return `${name(kind.value.seat)} shows four pairs: ${cards(kind.value.cards)}`;
    case "queryStarted":
      return `${name(kind.value.takerSeat)} asks for ${kind.value.card ? cardCode(kind.value.card) : "the discard"} (F-80)`;
    case "queryAnswered":
      return `${name(kind.value.seat)} ${kind.value.answer === QueryAnswer.REFUSE ? "refuses" : "gives"}${kind.value.timedOut ? " (no answer in time)" : ""}`;
    case "bottomCardClaimed":
      return `${name(kind.value.seat)} claims the bottom card`;
    case "tookBottomCard":
      return `${name(kind.value.seat)} takes the bottom card ${kind.value.card ? cardCode(kind.value.card) : ""}`;
    case "stockReshuffled":
      return `the discard pile becomes the new stock: ${count(kind.value.stockCount, "card")}`;
    case "played":
      return `${name(kind.value.seat)} plays ${cards(kind.value.cards)}`;
    case "passed":
      return `${name(kind.value.seat)} passes` + (kind.value.drawn ? `, draws ${cardCode(kind.value.drawn)}` : kind.value.drew ? " and draws" : "");
    case "kopileStarted":
      // The word alone says nothing to a newcomer: say what happened, with its rule.
      return `kopile! everyone passed since ${name(kind.value.seat)}'s last play, so they are owed ${count(kind.value.owed, "card")} (E-9)`;
    case "cardGiven":
      return `${name(kind.value.fromSeat)} gives ${kind.value.card ? cardCode(kind.value.card) : "a card"} to ${name(kind.value.toSeat)}`;
    case "turnTimedOut":
      return `${name(kind.value.seat)} ran out of time; the autopilot plays this turn (P-10)`;
    case "autopilotChanged":
      if (kind.value.reason === AutopilotReason.FORFEIT) {
        return "";
      }
      return kind.value.on
        ? `${name(kind.value.seat)}: the autopilot plays after 3 timeouts (P-11)`
        : `${name(kind.value.seat)} plays again; the autopilot is off`;
    case "seatConnectionChanged":
      if (kind.value.left) {
        return `${name(kind.value.seat)} left the table`;
      }
      return kind.value.connected ? `${name(kind.value.seat)} is back` : `${name(kind.value.seat)} lost the connection`;
    case "seatForfeited":
      return `${name(kind.value.seat)} forfeited (P-12): a bot plays the seat to the end`;
    case "handFinished":
      return `— hand ${kind.value.handNo} over: ${handEnd(kind.value, table, me)} —`;
    case "errorOccurred":
      return `error: ${kind.value.message}`;
    default:
      // The game's end (gameFinished, gameAbandoned) has a panel of its own.
      return "";
  }
}

/** Why a hand ended, in words. */
export function handEnd(hand: HandFinished, table: TableView, me?: number): string {
  const finisher = hand.finisherSeat === undefined ? "" : seatName(table, hand.finisherSeat, me);
  switch (hand.endReason) {
    case HandEndReason.BLOCKED:
      return "nobody could play on: ranked by cards left, then rank sum (E-11)";
    case HandEndReason.STOCK_EXHAUSTED:
      return hand.replayed
        ? "the stock ran out before anyone opened: the hand is replayed (F-63)"
        : "the stock ran out and nobody finished (F-63)";
    case HandEndReason.STALLED:
      return "rounds went by without a draw from the stock: nobody finished (F-64)";
    default:
      break;
  }
  if (!finisher) {
    return "the hand ended without a finisher (F-63, F-64)";
  }
  if (table.table?.config?.game === GameKind.ELEVATOR) {
    return `${finisher} went out (E-11)`;
  }
  const kinds = hand.finishKinds.map((kind) => FINISHES[kind]).filter((text) => text !== undefined);
  return `${finisher} finished${kinds.length ? ` ${kinds.join(" and ")}` : ""}${hand.kafa ? " (kafa)" : ""}`;
}
