// What the table screen holds: the server's latest view (the only source of cards shown), and
// the player's own choices on it (cards selected, melds put together, the meld aimed at).

import { cardKey, type HandOrder, sortHand } from "../cards";
import type { Card } from "../gen/masa/common/v1/card_pb";
import { Preset } from "../gen/masa/common/v1/game_pb";
import type { HandFinished } from "../gen/masa/table/v1/event_pb";
import { Opening, type SeatState, type SeatView, type TableView, TurnPhase } from "../gen/masa/table/v1/view_pb";

export interface TableState {
  readonly tableId: string;
  readonly spectating: boolean;
  /** The public view; undefined until the first snapshot. */
  view: TableView | undefined;
  /** The seat's own view, when the player sits at the table and does not spectate. */
  seat: SeatView | undefined;
  /** Keys (cardKey) of the selected cards of the hand, in the order chosen. */
  selected: string[];
  /** Melds put together for an opening or a lay-down (51), each a list of cards of the hand. */
  staged: Card[][];
  /** The meld on the table a lay-off or a joker retrieval goes to (51). */
  targetMeld: number | undefined;
  order: HandOrder;
  /** The card of the hand that has the keyboard focus, by its key. */
  focusKey: string | undefined;
  /** What happened, newest last. */
  log: string[];
  /** The result of the last hand scored, shown until the next hand is dealt. */
  lastHand: HandFinished | undefined;
  /** The game ended (finished or voided): the stream ends, the result stays. */
  ended: boolean;
  /** What the ledger paid this player, once known. */
  chips: string;
  /** A move is on its way: the buttons wait for its answer. */
  busy: boolean;
}

export function sequence(state: TableState): bigint {
  return state.view?.table?.sequence ?? 0n;
}

export function me(state: TableState): number | undefined {
  return state.seat?.seat;
}

export function mySeat(state: TableState): SeatState | undefined {
  const seat = me(state);
  return seat === undefined ? undefined : state.view?.seats.find((candidate) => candidate.seat === seat);
}

/** Whether the autopilot (P-11) or, after a forfeit, a bot (P-12) plays the player's seat. */
export function onAutopilot(state: TableState): boolean {
  const seat = mySeat(state);
  return seat !== undefined && (seat.autopilot || seat.forfeited);
}

/** Whether a salon query asks this seat now and it has not answered (F-80). */
export function queryAsksMe(state: TableState): boolean {
  const view = state.view;
  const seat = me(state);
  if (view === undefined || seat === undefined || view.turnPhase !== TurnPhase.QUERY || view.game.case !== "fiftyone") {
    return false;
  }
  const query = view.game.value.query;
  return (
    query !== undefined &&
    query.askedSeats.includes(seat) &&
    !query.givenSeats.includes(seat) &&
    !query.refusedSeats.includes(seat)
  );
}

/** Whether the player must act now: its turn (with a deadline: one without timed out and the
 * autopilot plays it, P-10), or a query that asks it. */
export function myMove(state: TableState): boolean {
  const view = state.view;
  if (view === undefined || state.ended || onAutopilot(state) || me(state) === undefined) {
    return false;
  }
  if (view.turnPhase === TurnPhase.QUERY) {
    return queryAsksMe(state);
  }
  return view.turnSeat === me(state) && view.turnDeadline !== undefined;
}

export function hand(state: TableState): Card[] {
  return sortHand(state.seat?.hand ?? [], state.order);
}

/** F-35: remi's face-up bottom card while the player may finish the hand with it (on its
 * draw, never opened): it is then selected and put into melds like a card of the hand. */
export function usableBottom(state: TableState): Card | undefined {
  const view = state.view;
  if (view?.game.case !== "fiftyone" || view.table?.config?.preset !== Preset.REMI || view.turnPhase !== TurnPhase.DRAW) {
    return undefined;
  }
  const seat = mySeat(state);
  return myMove(state) && seat !== undefined && seat.opening === Opening.UNSPECIFIED ? view.game.value.bottomCard : undefined;
}

/** The cards the player may select: the hand, and remi's bottom card while it may finish. */
export function selectable(state: TableState): Card[] {
  const bottom = usableBottom(state);
  const held = state.seat?.hand ?? [];
  return bottom === undefined ? held : [...held, bottom];
}

/** The selected cards that the player may still select, in the order chosen. */
export function selectedCards(state: TableState): Card[] {
  const held = new Map(selectable(state).map((card) => [cardKey(card), card]));
  return state.selected.flatMap((key) => held.get(key) ?? []);
}

/** Drop choices the new view no longer supports: cards that left the hand, staged melds
 * whose cards did, a meld that is gone. */
export function pruneChoices(state: TableState): void {
  const held = new Set(selectable(state).map(cardKey));
  state.selected = state.selected.filter((key) => held.has(key));
  state.staged = state.staged.filter((meld) => meld.every((card) => held.has(cardKey(card))));
  const melds = state.view?.game.case === "fiftyone" ? state.view.game.value.melds : [];
  if (!melds.some((meld) => meld.meldId === state.targetMeld)) {
    state.targetMeld = undefined;
  }
}
