// The end of a hand (its scores and the cards left, revealed to all then) and of the game
// (why it ended, the ranking, and the chips the ledger paid this player).

import { ledger } from "../api";
import { cardFace } from "../cards";
import { h } from "../dom";
import { TransferKind } from "../gen/masa/common/v1/chips_pb";
import { GameKind, Preset } from "../gen/masa/common/v1/game_pb";
import type { HandFinished } from "../gen/masa/table/v1/event_pb";
import { Table_State, type TableView } from "../gen/masa/table/v1/view_pb";
import { count, seatName } from "../names";
import { pause } from "../timing";
import { handEnd } from "./events";

// The ledger settles a game from the engine's result a moment after it ends.
const SETTLEMENT_POLLS = 30;
const SETTLEMENT_POLL_MS = 1000;

export function renderHandResult(hand: HandFinished, view: TableView, me: number | undefined): HTMLElement {
  const elevator = view.table?.config?.game === GameKind.ELEVATOR;
  return h(
    "section",
    { class: "result", "data-testid": "hand-result", "aria-labelledby": "hand-result-title" },
    h("h3", { id: "hand-result-title" }, `Hand ${hand.handNo}: ${handEnd(hand, view, me)}`),
    h(
      "table",
      {},
      h("thead", {}, h("tr", {}, h("th", {}, "place"), h("th", {}, "player"), h("th", {}, elevator ? "cards left" : "points"), h("th", {}, elevator ? "rank sum" : "total"), h("th", {}, "cards left in hand"))),
      h(
        "tbody",
        {},
        [...hand.scores]
          .sort((a, b) => a.place - b.place)
          .map((score) =>
            h(
              "tr",
              { class: score.seat === me ? "mine" : "" },
              h("td", {}, score.place),
              h("td", {}, seatName(view, score.seat, me)),
              h("td", {}, elevator ? score.score : score.score > 0 ? `+${score.score}` : score.score),
              h("td", {}, elevator ? score.rankSum : score.total),
              h("td", { class: "cards-inline" }, score.remaining.map((card) => cardFace(card))),
            ),
          ),
      ),
    ),
  );
}

/** Why the game ended, from the final view alone, so that a spectator arriving late sees it. */
function gameEndReason(view: TableView, me: number | undefined): string {
  if (view.table?.state === Table_State.VOIDED) {
    return "the game was voided: it could not be completed, so it ended without a result and every stake went back (P-30)";
  }
  const ranking = [...view.ranking].sort((a, b) => a.place - b.place);
  const players = ranking.filter((standing) => standing.playerId);
  if (players.length && players.every((standing) => standing.forfeited)) {
    return "every player left the table, so it ended at once, ranked as it stood (P-12)";
  }
  const config = view.table?.config;
  if (config?.game === GameKind.ELEVATOR) {
    const winner = ranking.find((standing) => standing.place === 1);
    const out = winner !== undefined && view.seats.find((seat) => seat.seat === winner.seat)?.cardCount === 0;
    return out
      ? `${seatName(view, winner.seat, me)} went out: no cards left (E-11)`
      : "nobody could play on with the stock empty: ranked by cards left, then by the sum of their ranks (E-9, E-11)";
  }
  const hands = view.game.case === "fiftyone" ? count(view.game.value.handsScored, "hand") : "the last hand";
  return config?.preset === Preset.SALON || config?.preset === Preset.UNSPECIFIED
    ? `after ${hands}, the last player under the elimination limit wins (F-96)`
    : `after ${hands}, the lowest total wins (F-95)`;
}

export function renderGameOver(view: TableView, me: number | undefined, chips: string, actions: HTMLElement): HTMLElement {
  const elevator = view.table?.config?.game === GameKind.ELEVATOR;
  return h(
    "section",
    { class: "result game-over", "data-testid": "game-over", "aria-labelledby": "game-over-title", "data-state": Table_State[view.table?.state ?? 0] },
    h("h3", { id: "game-over-title" }, "Game over"),
    h("p", {}, gameEndReason(view, me)),
    h(
      "ol",
      { class: "ranking" },
      [...view.ranking]
        .sort((a, b) => a.place - b.place)
        .map((standing) =>
          h(
            "li",
            { class: standing.seat === me ? "mine" : "", "data-place": standing.place },
            `${standing.place}. ${seatName(view, standing.seat, me)} — ${elevator ? `${count(standing.total, "card")} left` : `total ${standing.total} points`}${standing.forfeited ? ", forfeited (P-12)" : ""}`,
          ),
        ),
    ),
    h("p", { "data-testid": "payout", class: "payout" }, chips),
    actions,
  );
}

/** What the game's stakes came to: for a seated player, its own stake and payout as the ledger
 * posted them, waiting for the settlement; for a spectator, the stake only. */
export async function chipsPaid(view: TableView, me: number | undefined, signal: AbortSignal): Promise<string> {
  const table = view.table;
  const stake = table?.config?.stake ?? 0n;
  if (table === undefined || stake === 0n) {
    return "a training table: no chips at stake (P-1)";
  }
  if (table.state === Table_State.VOIDED) {
    return `every stake of ${stake} chips went back (P-30)`;
  }
  if (me === undefined) {
    return `each player staked ${stake} chips; the pot is paid by the ranking (P-30)`;
  }
  for (let poll = 0; poll < SETTLEMENT_POLLS && !signal.aborted; poll++) {
    const { transfers } = await ledger.listTransfers({ tableId: table.tableId, gameNo: table.gameNo }, { signal });
    const staked = transfers.filter((transfer) => transfer.kind === TransferKind.STAKE).reduce((sum, transfer) => sum + transfer.amount, 0n);
    if (staked > 0n) {
      const won = transfers.filter((transfer) => transfer.kind === TransferKind.PAYOUT).reduce((sum, transfer) => sum + transfer.amount, 0n);
      const net = won - staked;
      const { account } = await ledger.getBalance({}, { signal });
      return (
        `you staked ${staked} chips and were paid ${won}: ${net >= 0n ? "+" : ""}${net} chips` +
        (account === undefined ? "" : `; your balance is ${account.balance} chips`)
      );
    }
    await pause(SETTLEMENT_POLL_MS, signal);
  }
  return "the ledger has not settled this game yet: your balance on the home screen will show it";
}
