// Cards as the player sees them: their code (C-1), colour, order in the hand, and the order
// of an Elevator play.

import { create } from "@bufbuild/protobuf";
import { type Card, CardSchema, Colour, Rank, Suit } from "./gen/masa/common/v1/card_pb";
import { h } from "./dom";

const RANK_CODES: Readonly<Record<number, string>> = {
  [Rank.TEN]: "10",
  [Rank.JACK]: "J",
  [Rank.QUEEN]: "Q",
  [Rank.KING]: "K",
  [Rank.ACE]: "A",
};
const SUIT_CODES: Readonly<Record<number, string>> = {
  [Suit.SPADES]: "S",
  [Suit.HEARTS]: "H",
  [Suit.DIAMONDS]: "D",
  [Suit.CLUBS]: "C",
};
const SUIT_SYMBOLS: Readonly<Record<number, string>> = {
  [Suit.SPADES]: "♠",
  [Suit.HEARTS]: "♥",
  [Suit.DIAMONDS]: "♦",
  [Suit.CLUBS]: "♣",
};
const SUIT_NAMES: Readonly<Record<number, string>> = {
  [Suit.SPADES]: "spades",
  [Suit.HEARTS]: "hearts",
  [Suit.DIAMONDS]: "diamonds",
  [Suit.CLUBS]: "clubs",
};
// Suits in the hand alternate colours, so that neighbouring runs are easy to tell apart.
const SUIT_ORDER: Readonly<Record<number, number>> = {
  [Suit.SPADES]: 0,
  [Suit.HEARTS]: 1,
  [Suit.CLUBS]: 2,
  [Suit.DIAMONDS]: 3,
};

export function isJoker(card: Card): boolean {
  return card.jokerColour !== Colour.UNSPECIFIED;
}

/** The canonical code of C-1: "7H", "10S", "XR". */
export function cardCode(card: Card): string {
  if (isJoker(card)) {
    return card.jokerColour === Colour.RED ? "XR" : "XB";
  }
  return (RANK_CODES[card.rank] ?? String(card.rank)) + (SUIT_CODES[card.suit] ?? "?");
}

/** Identifies one physical card: two decks hold two 7H, told apart by their copy (C-4). */
export function cardKey(card: Card): string {
  return `${cardCode(card)}.${card.copy}`;
}

export function isRed(card: Card): boolean {
  return isJoker(card) ? card.jokerColour === Colour.RED : card.suit === Suit.HEARTS || card.suit === Suit.DIAMONDS;
}

/** What a screen reader says for a card: "7 of hearts", "red joker". */
export function cardName(card: Card): string {
  if (isJoker(card)) {
    return isRed(card) ? "red joker" : "black joker";
  }
  const rank = { J: "jack", Q: "queen", K: "king", A: "ace" }[RANK_CODES[card.rank] ?? ""] ?? String(card.rank);
  return `${rank} of ${SUIT_NAMES[card.suit] ?? "?"}`;
}

export type HandOrder = "suit" | "rank";

/** The hand in the order the player chose: by suit then rank, or by rank then suit; jokers
 * last either way. */
export function sortHand(cards: readonly Card[], order: HandOrder): Card[] {
  const suit = (card: Card): number => (isJoker(card) ? 9 : SUIT_ORDER[card.suit] ?? 8);
  const rank = (card: Card): number => (isJoker(card) ? 99 : card.rank);
  return [...cards].sort((a, b) => {
    const jokers = Number(isJoker(a)) - Number(isJoker(b));
    if (jokers !== 0) {
      return jokers;
    }
    const first = order === "suit" ? suit(a) - suit(b) : rank(a) - rank(b);
    const second = order === "suit" ? rank(a) - rank(b) : suit(a) - suit(b);
    return first || second || a.jokerColour - b.jokerColour || a.copy - b.copy;
  });
}

/** The cards of an Elevator play in the order they go on the pile: alternating colours (E-5),
 * the first of the colour the top card allows (E-4). Cards that cannot alternate keep the
 * order they were chosen in, and the server says which rule that breaks. */
export function playOrder(chosen: readonly Card[], top: Card | undefined): Card[] {
  const red = chosen.filter(isRed);
  const black = chosen.filter((card) => !isRed(card));
  if (Math.abs(red.length - black.length) > 1) {
    return [...chosen];
  }
  let redFirst = red.length > black.length;
  if (red.length === black.length && top !== undefined) {
    redFirst = !isRed(top);
  }
  const ordered: Card[] = [];
  for (let i = 0; i < chosen.length; i++) {
    const fromRed = (i % 2 === 0) === redFirst;
    const next = (fromRed ? red : black).shift();
    if (next === undefined) {
      return [...chosen];
    }
    ordered.push(next);
  }
  return ordered;
}

/** A card for a request: face and copy only, as the server expects them. */
export function plainCard(card: Card): Card {
  return create(CardSchema, { rank: card.rank, suit: card.suit, jokerColour: card.jokerColour, copy: card.copy });
}

/** A card face drawn in text: "7♥" in red, a joker "★" in its colour (system fonts all have
 * the star, not all have the playing-card glyphs). */
export function cardFace(card: Card, standsFor?: Card): HTMLSpanElement {
  const text = isJoker(card)
    ? "★"
    : (RANK_CODES[card.rank] ?? String(card.rank)) + (SUIT_SYMBOLS[card.suit] ?? "?");
  return h(
    "span",
    { class: `face ${isRed(card) ? "red" : "black"}`, title: cardName(card), "data-code": cardCode(card) },
    text,
    standsFor === undefined ? null : h("small", { class: "stands" }, `=${cardCode(standsFor)}`),
  );
}
