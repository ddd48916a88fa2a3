"""Every option of the 51 rule book (rules.md §2.9) and the three presets.

No rule constant of 51 may live anywhere else: engines, solver, bots and services read them
from a :class:`RuleSet`. Options marked *(decision)* in rules.md carry the book's default.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Any

from masa_rules.errors import RuleViolation

__all__ = [
    "BottomCardRule",
    "DeckExhausted",
    "GameLength",
    "IslekRule",
    "OpenedTakeDiscard",
    "RuleSet",
    "RuleSetError",
]


class RuleSetError(RuleViolation):
    """An option value the rule book does not allow. ``rule`` names the rule id."""

    def __init__(self, message: str, rule: str) -> None:
        super().__init__(rule, message)


class OpenedTakeDiscard(enum.Enum):
    """F-33: may an opened player take the discard without using it this turn?"""

    MUST_USE = "must_use"
    FREE = "free"


class IslekRule(enum.Enum):
    """F-61: what discarding a card that could be laid off costs."""

    ILLEGAL = "illegal"
    PENALTY = "penalty"
    ALLOWED = "allowed"


class DeckExhausted(enum.Enum):
    """F-63: what happens when the stock is empty and a player must draw."""

    REPLAY_IF_NONE_OPENED = "replay_if_none_opened"
    SCORE = "score"
    RESHUFFLE = "reshuffle"


class GameLength(enum.Enum):
    """F-95 (a fixed number of hands) or F-96 (elimination over a rising limit)."""

    HANDS = "hands"
    ELIMINATION = "elimination"


class BottomCardRule(enum.Enum):
    """F-34 (classic: a pair-goer claims it) and F-35 (remi: only with a hand finish)."""

    NONE = "none"
    CLAIM_BY_PAIR_GOER = "claim_by_pair_goer"
    HAND_FINISH_ONLY = "hand_finish_only"


@dataclass(frozen=True, slots=True)
class RuleSet:
    """The options of one 51 table. Build it with :meth:`classic`, :meth:`salon` or :meth:`remi`.

    >>> RuleSet.salon().open_threshold, RuleSet.remi().ace_low
    (51, True)
    >>> RuleSet.salon(open_threshold=81).open_threshold
    81
    """

    preset: str
    # F-2: allowed player counts; team mode (F-2, F-46, F-93) where the preset has it.
    player_counts: tuple[int, ...]
    teams_allowed: bool
    # F-4: the cut, with jokers to the cutter and the bottom card face up.
    cut: bool
    # F-40, F-41, F-42: opening thresholds.
    open_threshold: int
    allowed_thresholds: tuple[int, ...]
    escalating_threshold: bool
    threshold_after_pair_opening: int | None
    # F-43: pair openings; None where the preset has none.
    pairs_to_open: int | None
    pairs_with_meld: int | None
    # F-11, F-14: aces.
    ace_low: bool
    ace_high_value: int
    ace_low_value: int
    # F-13: jokers per meld laid down in the opening turn.
    max_jokers_per_meld_at_opening: int
    # F-15 (decision): two jokers are not a pair.
    joker_pair_allowed: bool
    # F-30..F-33r: taking the discard.
    opened_take_discard: OpenedTakeDiscard
    first_turn_free_take: bool
    # F-34, F-35: the face-up bottom card.
    bottom_card: BottomCardRule
    # F-44 (decision): cards laid off while opening never count toward the threshold.
    layoff_counts_toward_threshold: bool
    # F-44, F-62: a remi hand finish may not lay off on others' melds.
    hand_finish_forbids_layoff: bool
    # F-55 (decision): a retrieved joker must be laid down or laid off in the same turn.
    retrieved_joker_must_be_used: bool
    # F-61: işlek discards.
    islek: IslekRule
    islek_penalty: int
    islek_free_in_pair_status: int
    # F-63: deck exhaustion; how many times the discard pile may be reshuffled into a stock.
    deck_exhausted: DeckExhausted
    reshuffles: int
    # F-70, F-71, F-80: pairs status, gösterge, sorgu.
    gosterge: bool
    gosterge_pairs: int
    sorgu: bool
    query_seconds: int
    query_skip_max_hand: int
    # F-90..F-94: scoring.
    unopened_penalty: int
    kafa_penalty: int | None
    joker_hand_penalty: int
    joker_finish_multiplier: int
    pairs_finish_multiplier: int
    hand_finish_multiplier: int
    pair_status_multiplier: int
    finisher_score: int
    hand_finish_score: int | None
    hand_finish_bottom_card_score: int | None
    hand_finish_doubles_losers: bool
    # F-95, F-96: game length.
    game_length: GameLength
    hands_per_game: int
    elimination_base: int
    elimination_step: int
    team_elimination_factor: int
    # F-61 (engine reading, a table choice): a joker that fits a meld on the table is işlek.
    islek_joker: bool = False
    # F-61 salon (engine reading, a table choice): the finisher and partner pay işlek penalties.
    islek_penalty_for_finisher: bool = True
    # F-64 (decision): full rounds without a card drawn from the stock that end a hand.
    stall_rounds: int = 10
    # F-63 classic (decision): how many hands of one game may be replayed because nobody opened;
    # past that a hand nobody opened is scored without a finisher like any other, so a game
    # deals at most ``hands_per_game + max_replays`` hands.
    max_replays: int = 11
    # F-96 (decision): an elimination game also ends after this many scored hands, the players
    # still in ranked by total: the limit rises 10 a hand, so players who keep their scores low
    # could otherwise play on for ever.
    elimination_max_hands: int = 100

    def __post_init__(self) -> None:
        if self.open_threshold <= 0:
            raise RuleSetError(
                f"open_threshold must be positive, not {self.open_threshold}", "F-40"
            )
        if self.allowed_thresholds and self.open_threshold not in self.allowed_thresholds:
            raise RuleSetError(
                f"{self.preset} tables open at {self.allowed_thresholds}, not {self.open_threshold}",
                "F-40",
            )
        if self.game_length is GameLength.HANDS and (
            self.hands_per_game < 1 or self.hands_per_game % 2 == 0
        ):
            raise RuleSetError(
                f"hands_per_game must be a positive odd number, not {self.hands_per_game}", "F-95"
            )
        if not 1 <= self.max_jokers_per_meld_at_opening <= 2:
            raise RuleSetError("max_jokers_per_meld_at_opening must be 1 or 2", "F-13")
        if (self.pairs_to_open is None) != (self.pairs_with_meld is None):
            raise RuleSetError("pairs_to_open and pairs_with_meld come together", "F-43")
        if self.stall_rounds < 1:
            raise RuleSetError(f"stall_rounds must be positive, not {self.stall_rounds}", "F-64")
        if self.elimination_max_hands < 1:
            raise RuleSetError(
                f"elimination_max_hands must be positive, not {self.elimination_max_hands}", "F-96"
            )
        if self.max_replays < 0:
            raise RuleSetError(f"max_replays must not be negative, not {self.max_replays}", "F-63")

    @property
    def players_text(self) -> str:
        """The allowed player counts (F-2) as a person writes them: "4", "2, 3 or 4".

        >>> RuleSet.classic().players_text, RuleSet.salon().players_text
        ('2, 3 or 4', '4')
        """
        *rest, last = (str(count) for count in self.player_counts)
        return f"{', '.join(rest)} or {last}" if rest else last

    @property
    def pair_opening(self) -> bool:
        """F-43: whether this preset has pair openings at all."""
        return self.pairs_to_open is not None

    def ace_value(self, low: bool = False) -> int:
        """F-14: an ace's value, high or low."""
        return self.ace_low_value if low else self.ace_high_value

    def with_options(self, **changes: Any) -> RuleSet:
        """A copy with some options changed; invalid values raise :class:`RuleSetError`."""
        return replace(self, **changes)

    @staticmethod
    def preset_named(name: str, **changes: Any) -> RuleSet:
        """The preset called ``classic``, ``salon`` or ``remi``."""
        builders = {"classic": RuleSet.classic, "salon": RuleSet.salon, "remi": RuleSet.remi}
        try:
            builder = builders[name]
        except KeyError:
            raise RuleSetError(
                f"unknown preset {name!r}; use classic, salon or remi", "F-2"
            ) from None
        return builder(**changes)

    @staticmethod
    def classic(**changes: Any) -> RuleSet:
        """Traditional table rules (seed 000)."""
        base = RuleSet(
            preset="classic",
            player_counts=(2, 3, 4),
            teams_allowed=True,
            cut=True,
            open_threshold=51,
            allowed_thresholds=(51, 71, 75, 81, 101),
            escalating_threshold=False,
            threshold_after_pair_opening=None,
            pairs_to_open=5,
            pairs_with_meld=4,
            ace_low=False,
            ace_high_value=11,
            ace_low_value=1,
            max_jokers_per_meld_at_opening=2,
            joker_pair_allowed=False,
            opened_take_discard=OpenedTakeDiscard.MUST_USE,
            first_turn_free_take=False,
            bottom_card=BottomCardRule.CLAIM_BY_PAIR_GOER,
            layoff_counts_toward_threshold=False,
            hand_finish_forbids_layoff=False,
            retrieved_joker_must_be_used=True,
            islek=IslekRule.ILLEGAL,
            islek_penalty=0,
            islek_free_in_pair_status=0,
            deck_exhausted=DeckExhausted.REPLAY_IF_NONE_OPENED,
            reshuffles=0,
            gosterge=False,
            gosterge_pairs=4,
            sorgu=False,
            query_seconds=15,
            query_skip_max_hand=2,
            unopened_penalty=100,
            kafa_penalty=None,
            joker_hand_penalty=25,
            joker_finish_multiplier=2,
            pairs_finish_multiplier=2,
            hand_finish_multiplier=2,
            pair_status_multiplier=2,
            finisher_score=0,
            hand_finish_score=None,
            hand_finish_bottom_card_score=None,
            hand_finish_doubles_losers=False,
            game_length=GameLength.HANDS,
            hands_per_game=11,
            elimination_base=111,
            elimination_step=10,
            team_elimination_factor=2,
        )
        return replace(base, **changes)

    @staticmethod
    def salon(**changes: Any) -> RuleSet:
        """The online salon with chips (seed 001); the platform default."""
        base = replace(
            RuleSet.classic(),
            preset="salon",
            player_counts=(4,),
            cut=False,
            allowed_thresholds=(51, 81),
            threshold_after_pair_opening=101,
            bottom_card=BottomCardRule.NONE,
            islek=IslekRule.PENALTY,
            islek_penalty=51,
            islek_free_in_pair_status=1,
            deck_exhausted=DeckExhausted.SCORE,
            gosterge=True,
            sorgu=True,
            kafa_penalty=200,
            hand_finish_multiplier=1,
            game_length=GameLength.ELIMINATION,
        )
        return replace(base, **changes)

    @staticmethod
    def remi(**changes: Any) -> RuleSet:
        """Balkan "Remi 51" scoring (seed 003)."""
        base = replace(
            RuleSet.classic(),
            preset="remi",
            teams_allowed=False,
            allowed_thresholds=(51,),
            pairs_to_open=None,
            pairs_with_meld=None,
            ace_low=True,
            ace_high_value=10,
            max_jokers_per_meld_at_opening=1,
            opened_take_discard=OpenedTakeDiscard.FREE,
            first_turn_free_take=True,
            bottom_card=BottomCardRule.HAND_FINISH_ONLY,
            hand_finish_forbids_layoff=True,
            islek=IslekRule.ALLOWED,
            deck_exhausted=DeckExhausted.RESHUFFLE,
            reshuffles=1,
            joker_hand_penalty=20,
            joker_finish_multiplier=1,
            pairs_finish_multiplier=1,
            hand_finish_multiplier=1,
            pair_status_multiplier=1,
            finisher_score=-40,
            hand_finish_score=-80,
            hand_finish_bottom_card_score=-120,
            hand_finish_doubles_losers=True,
        )
        return replace(base, **changes)
