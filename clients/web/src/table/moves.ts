// The moves the game offers the player now, as buttons (data-testid "action-<kind>", the
// Action oneof's field name, with a suffix where one move has two buttons). The client offers what the phase allows and the view's own
// obligations suggest; the engine alone judges a move, and a refusal names its rule.

import type { MessageInitShape } from "@bufbuild/protobuf";
import { cardCode, cardFace, isJoker, playOrder, plainCard } from "../cards";
import { h } from "../dom";
import type { Card } from "../gen/masa/common/v1/card_pb";
import { Preset } from "../gen/masa/common/v1/game_pb";
import { MeldEnd, MeldKind, type ProposedMeldSchema } from "../gen/masa/common/v1/meld_pb";
import { type ActionSchema, QueryAnswer } from "../gen/masa/table/v1/action_pb";
import { type ElevatorTable, type FiftyOneTable, Opening, TurnPhase } from "../gen/masa/table/v1/view_pb";
import { count, seatName } from "../names";
import { meldProblem, openEnds } from "./melds";
import { me, mySeat, myMove, onAutopilot, queryAsksMe, selectedCards, type TableState, usableBottom } from "./state";

export type ActionInit = MessageInitShape<typeof ActionSchema>;
type MeldInit = MessageInitShape<typeof ProposedMeldSchema>;

export interface MoveHandlers {
  readonly submit: (action: ActionInit) => void;
  /** Put the selected cards aside as one meld of an opening or a lay-down. */
  readonly stage: () => void;
  readonly unstage: (index: number) => void;
}

interface Move {
  readonly kind: string;
  readonly label: string;
  /** Why the move cannot be made yet ("select one card"); "" when it can. */
  readonly missing?: string;
  readonly run: () => void;
}

/** What the player should know before moving: whose move it is and the view's obligations. */
export function hint(state: TableState): string {
  const view = state.view;
  const seat = mySeat(state);
  if (view === undefined || seat === undefined || state.ended) {
    return "";
  }
  if (seat.forfeited) {
    return "your seat is forfeited (P-12): a bot plays it to the end";
  }
  if (seat.eliminated) {
    return "you are out of the game (F-96): the others play on to the end";
  }
  if (onAutopilot(state)) {
    return "the autopilot is playing for you (P-11): take back control to play";
  }
  if (queryAsksMe(state)) {
    return "you are asked whether you give the discard (F-80): answer before the time runs out, or you give it";
  }
  if (!myMove(state)) {
    return view.turnSeat === undefined ? "" : `waiting for ${seatName(view, view.turnSeat, me(state))}`;
  }
  if (view.game.case === "elevator") {
    const game = view.game.value;
    if (view.turnPhase === TurnPhase.GIVE) {
      return `kopile: give one card to ${seatName(view, game.kopileSeat ?? -1, me(state))} (E-9)`;
    }
    const must = game.mustPlay ? " — you must play if you can (E-8)" : "";
    const free = game.freePlay ? " — any card may follow the joker (E-7)" : "";
    return `your turn: select cards of one rank and play them, or pass${must}${free}`;
  }
  if (view.game.case === "fiftyone") {
    const game = view.game.value;
    const notes: string[] = [];
    if (view.turnPhase === TurnPhase.DRAW) {
      notes.push("your turn: draw from the stock or take the discard");
      if (usableBottom(state) !== undefined) {
        notes.push("or finish the hand with the bottom card: put it and your cards together as melds, then select the one card to discard (F-35)");
      }
    } else {
      notes.push("your turn: open, lay down or lay off if you like, then discard one card");
    }
    if (game.turn?.mustOpen) {
      notes.push("you must open this turn (F-30)");
    }
    if (state.seat?.mustUse.length) {
      notes.push(`must use this turn: ${state.seat.mustUse.map(cardCode).join(" ")}${game.turn?.tookRule ? ` (${game.turn.tookRule})` : ""}`);
    }
    return notes.join(" — ");
  }
  return "";
}

export function renderMoves(state: TableState, handlers: MoveHandlers): HTMLElement {
  const moves = state.view !== undefined && !state.busy ? available(state, handlers) : [];
  const problem = selectionProblem(state);
  return h(
    "div",
    { class: "moves" },
    state.staged.length ? renderStaged(state, handlers) : null,
    problem ? h("p", { class: "error", "data-testid": "meld-check" }, `✗ the selection is no meld: ${problem}`) : null,
    h(
      "div",
      { class: "row actions", role: "group", "aria-label": "your moves", "data-testid": "actions" },
      moves.map((move) =>
        h(
          "button",
          {
            type: "button",
            "data-testid": `action-${move.kind}`,
            disabled: Boolean(move.missing),
            title: move.missing || undefined,
            onclick: move.run,
          },
          move.label,
        ),
      ),
    ),
  );
}

function renderStaged(state: TableState, handlers: MoveHandlers): HTMLElement {
  return h(
    "div",
    { class: "staged", "data-testid": "staged" },
    h("span", { class: "label" }, "melds put together:"),
    state.staged.map((meld, index) =>
      h(
        "span",
        { class: "staged-meld" },
        meld.map((card) => cardFace(card)),
        h("button", { type: "button", class: "quiet", "data-testid": `unstage-${index}`, "aria-label": `take back meld ${index + 1}`, onclick: () => handlers.unstage(index) }, "✕"),
      ),
    ),
  );
}

/** Why the selected cards are no meld or pair, while the player melds in 51 and has selected
 * more than one card; "" otherwise. */
function selectionProblem(state: TableState): string {
  const chosen = selectedCards(state);
  const melding = state.view?.turnPhase === TurnPhase.MELD || usableBottom(state) !== undefined;
  if (chosen.length < 2 || state.view?.game.case !== "fiftyone" || !melding || !myMove(state)) {
    return "";
  }
  // Eight cards may be a gösterge's four pairs (F-71), which the engine judges.
  if (chosen.length === 8 && mayShowGosterge(state)) {
    return "";
  }
  return meldProblem(chosen, aceLow(state));
}

// F-71: salon's gösterge is for a seat not yet opened nor in pair status.
function mayShowGosterge(state: TableState): boolean {
  const seat = mySeat(state);
  const preset = state.view?.table?.config?.preset ?? Preset.SALON;
  const salon = preset === Preset.SALON || preset === Preset.UNSPECIFIED;
  return salon && seat !== undefined && !seat.pairStatus && seat.opening === Opening.UNSPECIFIED;
}

// F-11: the ace may also be low in remi only.
function aceLow(state: TableState): boolean {
  return state.view?.table?.config?.preset === Preset.REMI;
}

function available(state: TableState, handlers: MoveHandlers): Move[] {
  const view = state.view!;
  if (queryAsksMe(state) && view.game.case === "fiftyone") {
    const queryId = view.game.value.query?.queryId ?? 0;
    return [
      { kind: "query_give", label: "Give the discard", run: () => handlers.submit({ kind: { case: "answerQuery", value: { queryId, answer: QueryAnswer.GIVE } } }) },
      { kind: "query_refuse", label: "Refuse (go pairs)", run: () => handlers.submit({ kind: { case: "answerQuery", value: { queryId, answer: QueryAnswer.REFUSE } } }) },
    ];
  }
  if (!myMove(state)) {
    return [];
  }
  switch (view.game.case) {
    case "elevator":
      return elevatorMoves(view.game.value, view.turnPhase, state, handlers);
    case "fiftyone":
      return fiftyOneMoves(view.game.value, view.turnPhase, state, handlers);
    default:
      return [];
  }
}

function exactly(n: number, chosen: Card[]): string {
  return chosen.length === n ? "" : `select ${count(n, "card")} first`;
}

function elevatorMoves(game: ElevatorTable, phase: TurnPhase, state: TableState, handlers: MoveHandlers): Move[] {
  const chosen = selectedCards(state);
  if (phase === TurnPhase.GIVE) {
    return [
      {
        kind: "give_card",
        label: "Give the selected card",
        missing: exactly(1, chosen),
        run: () => handlers.submit({ kind: { case: "giveCard", value: { card: plainCard(chosen[0]!) } } }),
      },
    ];
  }
  return [
    {
      kind: "play",
      label: chosen.length > 1 ? `Play ${chosen.length} cards` : "Play",
      missing: chosen.length ? "" : "select the cards to play first",
      run: () => handlers.submit({ kind: { case: "play", value: { cards: playOrder(chosen, game.pile.at(-1)).map(plainCard) } } }),
    },
    {
      kind: "pass_turn",
      label: game.stockCount ? "Pass and draw" : "Pass",
      run: () => handlers.submit({ kind: { case: "passTurn", value: {} } }),
    },
  ];
}

function fiftyOneMoves(game: FiftyOneTable, phase: TurnPhase, state: TableState, handlers: MoveHandlers): Move[] {
  const chosen = selectedCards(state);
  const seat = mySeat(state);
  const preset = state.view?.table?.config?.preset ?? Preset.SALON;
  const top = game.discardPile.at(-1);
  const moves: Move[] = [];
  // F-70: only an unopened seat not yet in pair status goes pairs, where the table has pair
  // openings (F-43: not remi) for it to go to.
  const mayGoPairs = game.pairsNeeded > 0 && seat !== undefined && !seat.pairStatus && seat.opening === Opening.UNSPECIFIED;
  const melds = (): MeldInit[] => proposed([...state.staged, ...(chosen.length ? [chosen] : [])]);
  // On the draw, melds are put together only for remi's finish, which lays down no pairs.
  const fewest = phase === TurnPhase.DRAW ? 3 : 2;
  const stageMove: Move = {
    kind: "stage",
    label: "Put together a meld",
    missing:
      chosen.length >= fewest
        ? meldProblem(chosen, aceLow(state))
        : fewest === 3
          ? "select the cards of a run or set first: a hand finish lays down no pairs (F-35)"
          : "select the cards of a meld or pair first",
    run: handlers.stage,
  };
  // The selection joins the melds put together as one more; each of those was checked when it
  // was put together.
  const meldsMissing = (): string =>
    chosen.length ? meldProblem(chosen, aceLow(state)) : state.staged.length ? "" : "select or put together the melds first";
  if (phase === TurnPhase.DRAW) {
    moves.push({ kind: "draw_from_stock", label: "Draw from the stock", run: () => handlers.submit({ kind: { case: "drawFromStock", value: {} } }) });
    if (top !== undefined) {
      moves.push({
        kind: "take_discard",
        label: `Take the discard`,
        run: () => handlers.submit({ kind: { case: "takeDiscard", value: { expectedCard: plainCard(top) } } }),
      });
      if (mayGoPairs) {
        moves.push({
          kind: "take_discard_pairs",
          label: "Take it, going pairs",
          run: () => handlers.submit({ kind: { case: "takeDiscard", value: { expectedCard: plainCard(top), pairs: true } } }),
        });
      }
    }
    if (game.bottomCard !== undefined && preset === Preset.CLASSIC && game.bottomCardClaimant === me(state)) {
      moves.push({ kind: "take_bottom_card", label: "Take the bottom card", run: () => handlers.submit({ kind: { case: "takeBottomCard", value: {} } }) });
    }
    if (usableBottom(state) !== undefined) {
      // F-35: the bottom card only finishes the hand, in one action: the melds put together
      // (the bottom card among their cards) lay down the rest of the hand, and the one card
      // selected is the finishing discard.
      moves.push(stageMove, {
        kind: "take_bottom_card",
        label: "Finish with the bottom card",
        missing: state.staged.length === 0 ? "put the melds together first" : exactly(1, chosen),
        run: () => handlers.submit({ kind: { case: "takeBottomCard", value: { melds: proposed(state.staged), discard: plainCard(chosen[0]!) } } }),
      });
    }
  } else {
    moves.push(stageMove);
    const opened = seat !== undefined && seat.opening !== Opening.UNSPECIFIED;
    moves.push(
      opened
        ? {
            kind: "lay_down",
            label: "Lay down",
            missing: meldsMissing(),
            run: () => handlers.submit({ kind: { case: "layDown", value: { melds: melds() } } }),
          }
        : {
            kind: "open",
            label: "Open",
            missing: meldsMissing(),
            run: () => handlers.submit({ kind: { case: "open", value: { melds: melds() } } }),
          },
    );
    const target = state.targetMeld;
    const onto = game.melds.find((meld) => meld.meldId === target);
    const ends = onto === undefined ? { low: false, high: false } : openEnds(onto, aceLow(state));
    if (chosen.length === 1 && isJoker(chosen[0]!) && ends.low && ends.high) {
      // A joker fits both ends of the run: the player says which (F-50), as the card it
      // stands for is then one a later retrieval needs (F-55).
      for (const [kind, end, label] of [
        ["lay_off_low", MeldEnd.LOW, "at the low end"],
        ["lay_off_high", MeldEnd.HIGH, "at the high end"],
      ] as const) {
        moves.push({
          kind,
          label: `Lay off on #${target} ${label}`,
          run: () => handlers.submit({ kind: { case: "layOff", value: { meldId: target!, cards: chosen.map(plainCard), end } } }),
        });
      }
    } else {
      moves.push({
        kind: "lay_off",
        label: target === undefined ? "Lay off" : `Lay off on #${target}`,
        missing: target === undefined ? "choose a meld on the table" : chosen.length === 1 || chosen.length === 2 ? "" : "select one card (two on a pair)",
        run: () => handlers.submit({ kind: { case: "layOff", value: { meldId: target!, cards: chosen.map(plainCard) } } }),
      });
    }
    moves.push({
      kind: "retrieve_joker",
      label: "Take back a joker",
      missing: target === undefined ? "choose the meld that holds the joker" : exactly(1, chosen),
      run: () => handlers.submit({ kind: { case: "retrieveJoker", value: { meldId: target!, natural: plainCard(chosen[0]!) } } }),
    });
    moves.push({
      kind: "discard",
      label: "Discard",
      missing: exactly(1, chosen),
      run: () => handlers.submit({ kind: { case: "discard", value: { card: plainCard(chosen[0]!) } } }),
    });
  }
  if (game.bottomCard !== undefined && preset === Preset.CLASSIC && seat?.pairStatus && game.bottomCardClaimant === undefined) {
    moves.push({
      kind: "claim_bottom_card",
      label: "Claim the bottom card",
      missing: exactly(1, chosen),
      run: () => handlers.submit({ kind: { case: "claimBottomCard", value: { shown: plainCard(chosen[0]!) } } }),
    });
  }
  if (mayGoPairs) {
    moves.push({ kind: "declare_pairs", label: "Go pairs", run: () => handlers.submit({ kind: { case: "declarePairs", value: {} } }) });
  }
  if (mayShowGosterge(state)) {
    moves.push({
      kind: "show_gosterge",
      label: "Show four pairs",
      missing: exactly(8, chosen),
      run: () => handlers.submit({ kind: { case: "showGosterge", value: { cards: chosen.map(plainCard) } } }),
    });
  }
  return moves;
}

/** Melds as proposals; the kind is read from the cards as the terminal client reads it (two
 * cards a pair, one rank a set, else a run), and jokers are left for the engine to read. */
function proposed(groups: Card[][]): MeldInit[] {
  return groups.map((cards) => {
    const naturals = cards.filter((card) => !isJoker(card));
    const kind =
      cards.length === 2 ? MeldKind.PAIR : naturals.length && new Set(naturals.map((card) => card.rank)).size === 1 ? MeldKind.SET : MeldKind.RUN;
    return { kind, cards: cards.map((card) => ({ card: plainCard(card) })) };
  });
}
