// What a group of cards can be on a 51 table, read as the engine reads it (F-10..F-15,
// masa_rules.melds), so that the page says why a meld would be refused before it is sent; the
// engine still judges every move, and the limits of an opening (F-13's jokers, F-40's
// threshold) are its alone. tests/web_client checks both readings agree on every group.

import { isJoker } from "../cards";
import { type Card, Rank } from "../gen/masa/common/v1/card_pb";
import { type Meld, MeldKind } from "../gen/masa/common/v1/meld_pb";

// Run positions: a low ace is 1 (ace_low, remi), a high ace 14, the other ranks their number.
const LOW_ACE = 1;
const HIGH_ACE = 14;

/** Why ``cards`` are no pair (two cards) or meld (three or more), with the rule's id; "" when
 * they are one. ``aceLow``: the table's ace may also be low (remi). */
export function meldProblem(cards: readonly Card[], aceLow: boolean): string {
  const naturals = cards.filter((card) => !isJoker(card));
  const jokers = cards.length - naturals.length;
  if (cards.length === 2) {
    if (jokers === 2) {
      return "two jokers are no pair (F-15)";
    }
    const [first, second] = naturals;
    return jokers === 1 || (first!.rank === second!.rank && first!.suit === second!.suit)
      ? ""
      : "a pair is two identical cards, or a card and a joker (F-15)";
  }
  if (cards.length < 3) {
    return `a meld has at least 3 cards, not ${cards.length} (F-10)`;
  }
  if (naturals.length === 0) {
    return "a meld needs at least one natural card (F-13)";
  }
  if (couldBeRun(naturals, cards.length, aceLow) || couldBeSet(naturals, cards.length)) {
    return "";
  }
  return explain(naturals, cards.length, aceLow);
}

function couldBeRun(naturals: readonly Card[], length: number, aceLow: boolean): boolean {
  const suit = naturals[0]!.suit;
  if (naturals.some((card) => card.suit !== suit)) {
    return false;
  }
  const lowest = aceLow ? LOW_ACE : 2;
  const aces = naturals.filter((card) => card.rank === Rank.ACE).length;
  const others = naturals.filter((card) => card.rank !== Rank.ACE).map((card) => card.rank as number);
  const aceChoices: number[][] =
    aces === 0 ? [[]] : aces === 1 ? (aceLow ? [[HIGH_ACE], [LOW_ACE]] : [[HIGH_ACE]]) : aces === 2 && aceLow ? [[LOW_ACE, HIGH_ACE]] : [];
  return aceChoices.some((acePositions) => {
    const positions = [...others, ...acePositions].sort((a, b) => a - b);
    if (new Set(positions).size !== positions.length) {
      return false;
    }
    // A window of ``length`` positions within the suit's row holds every natural; the jokers
    // fill the rest of it.
    const first = Math.max(lowest, positions.at(-1)! - length + 1);
    const last = Math.min(positions[0]!, HIGH_ACE - length + 1);
    return first <= last;
  });
}

function couldBeSet(naturals: readonly Card[], length: number): boolean {
  const rank = naturals[0]!.rank;
  const suits = new Set(naturals.map((card) => card.suit));
  return naturals.every((card) => card.rank === rank) && suits.size === naturals.length && length <= 4;
}

function explain(naturals: readonly Card[], length: number, aceLow: boolean): string {
  const sameSuit = new Set(naturals.map((card) => card.suit)).size === 1;
  const ranks = new Set(naturals.map((card) => card.rank));
  if (ranks.size === 1 && !sameSuit) {
    return length > 4 ? "a set has at most 4 cards, one of each suit (F-12)" : "a set holds each suit only once (F-12)";
  }
  if (!sameSuit) {
    return "a meld is a run (one suit, consecutive) or a set (one rank) (F-10)";
  }
  if (ranks.has(Rank.ACE) && ranks.has(Rank.TWO) && ranks.has(Rank.KING)) {
    return "a run never wraps from K over A to 2 (F-11)";
  }
  if (ranks.has(Rank.ACE) && !aceLow && (ranks.has(Rank.TWO) || ranks.has(Rank.THREE))) {
    return "the ace is high at this table: A 2 3 is not a run (F-11)";
  }
  if (ranks.size === 1) {
    return "identical cards form neither a run nor a set (F-12)";
  }
  return "a run needs consecutive ranks of one suit (F-11)";
}

/** The ends of a run on the table a joker could still go to (F-11, F-50): a run ends at the
 * high ace, and at the 2 or, where the ace may be low, at the low ace. None for a set or pair. */
export function openEnds(meld: Meld, aceLow: boolean): { readonly low: boolean; readonly high: boolean } {
  if (meld.kind !== MeldKind.RUN || meld.cards.length === 0) {
    return { low: false, high: false };
  }
  const rankOf = (index: number): Rank => {
    const placed = meld.cards[index]!;
    return (placed.standsFor ?? placed.card)?.rank ?? Rank.UNSPECIFIED;
  };
  // A run lists its cards lowest first, so an ace first is a low ace and an ace last a high one.
  const first = rankOf(0) === Rank.ACE ? LOW_ACE : rankOf(0);
  const last = rankOf(meld.cards.length - 1) === Rank.ACE ? HIGH_ACE : rankOf(meld.cards.length - 1);
  return { low: first > (aceLow ? LOW_ACE : 2), high: last < HIGH_ACE };
}
