"""``masa-rules``: the command-line contract over the rules library.

Other tools depend on this interface; change it only compatibly.

    masa-rules meld  [--preset P] [--opening] [--readings] CARD...
    masa-rules solve [--preset P] [--threshold N] CARD...
    masa-rules meld --batch | masa-rules solve --batch      (JSON lines in, JSON lines out)
    masa-rules simulate --game fiftyone|elevator ... --seed S
    masa-rules tournament --game fiftyone|elevator [--preset P] [--teams]
        --seats hard,normal,normal,normal (--hands N | --games N) --seed S
        [--budget-ms B] [--jobs J]                        (one JSON document)

Exit codes: 0 for every answered query (``"valid": false`` included), 2 for unusable input
with a one-line message on standard error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn, TextIO

from .cards import Card, CardError, parse_card
from .errors import RuleViolation
from .melds import MeldError, Placed, parse_placed, readings
from .ruleset import RuleSet, RuleSetError
from .solver import PairsWithMeld, best_opening, can_open, max_pairs, pairs_with_meld
from .table_config import PayoutRule

__all__ = ["main"]

PRESETS = ("classic", "salon", "remi")


class UsageError(Exception):
    """Input the command cannot answer at all (exit code 2)."""


def _rules(preset: str) -> RuleSet:
    try:
        return RuleSet.preset_named(preset)
    except RuleSetError as exc:
        raise UsageError(str(exc)) from None


def _codes(placed: Sequence[Placed]) -> list[str]:
    return [p.code for p in placed]


def meld_answer(
    codes: Sequence[str], preset: str, *, opening: bool = False, all_readings: bool = False
) -> dict[str, Any]:
    """The JSON answer of ``masa-rules meld`` for one group of cards.

    >>> meld_answer(["QS", "KS", "AS"], "salon")
    {'valid': True, 'kind': 'run', 'value': 31, 'cards': ['QS', 'KS', 'AS']}
    """
    rules = _rules(preset)
    try:
        items = [parse_placed(code) for code in codes]
    except CardError as exc:
        raise UsageError(str(exc)) from None
    except MeldError as exc:
        return {"valid": False, "reason": exc.rule, "message": exc.message}
    try:
        found = readings(items, rules, opening=opening)
    except MeldError as exc:
        return {"valid": False, "reason": exc.rule, "message": exc.message}
    best = found[0]
    answer: dict[str, Any] = {
        "valid": True,
        "kind": best.kind.value,
        "value": best.value(rules),
        "cards": _codes(best.cards),
    }
    if all_readings:
        answer["readings"] = [
            {"kind": m.kind.value, "value": m.value(rules), "cards": _codes(m.cards)} for m in found
        ]
    return answer


def _hand(codes: Sequence[str]) -> list[Card]:
    try:
        hand = [parse_card(code) for code in codes]
    except CardError as exc:
        raise UsageError(str(exc)) from None
    too_many = [card.code for card, n in Counter(hand).items() if n > (1 if card.is_joker else 2)]
    if too_many:
        raise UsageError(
            f"C-4: the 51 pack holds two copies of a natural and one of each joker: {too_many}"
        )
    return hand


def solve_answer(codes: Sequence[str], preset: str, threshold: int | None = None) -> dict[str, Any]:
    """The JSON answer of ``masa-rules solve`` for one hand."""
    rules = _rules(preset)
    hand = _hand(codes)
    if threshold is None:
        threshold = rules.open_threshold
    arrangement = best_opening(hand, rules)
    pairs = max_pairs(hand, rules)
    with_meld = pairs_with_meld(hand, rules)
    return {
        "best_value": arrangement.value,
        "melds": [_codes(m.cards) for m in arrangement.melds],
        "leftover": [c.code for c in arrangement.leftover],
        "max_pairs": pairs,
        "pairs_with_meld": with_meld is not None,
        "can_open": can_open(hand, rules, threshold) or _pairs_open(hand, rules, pairs, with_meld),
        "threshold": threshold,
    }


def _pairs_open(
    hand: Sequence[Card], rules: RuleSet, pairs: int, with_meld: PairsWithMeld | None
) -> bool:
    """F-43 and F-52: a pair opening that keeps a card to discard."""
    if rules.pairs_to_open is None:
        return False
    if pairs >= rules.pairs_to_open and len(hand) > 2 * rules.pairs_to_open:
        return True
    return with_meld is not None and len(hand) > 2 * len(with_meld.pairs) + len(
        with_meld.meld.cards
    )


def _batch(lines: TextIO, command: str, out: TextIO) -> None:
    for line in lines:
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise UsageError("each line must be a JSON object")
            cards = request.get("cards")
            if not isinstance(cards, list) or not all(isinstance(c, str) for c in cards):
                raise UsageError('"cards" must be a list of card codes')
            preset = request.get("preset", "salon")
            if not isinstance(preset, str):
                raise UsageError('"preset" must be a string')
            if command == "meld":
                answer = meld_answer(
                    cards,
                    preset,
                    opening=bool(request.get("opening", False)),
                    all_readings=bool(request.get("readings", False)),
                )
            else:
                threshold = request.get("threshold")
                if threshold is not None and (type(threshold) is not int or threshold <= 0):
                    raise UsageError('"threshold" must be a positive integer')
                answer = solve_answer(cards, preset, threshold)
        except (UsageError, RuleViolation) as exc:
            answer = {"error": str(exc)}
        except json.JSONDecodeError as exc:
            answer = {"error": f"not JSON: {exc.msg}"}
        out.write(json.dumps(answer) + "\n")
        out.flush()


def _simulate(args: argparse.Namespace) -> Iterator[dict[str, object]]:
    # The engines load only for this command, so batch validation starts as fast as it can.
    if args.game == "elevator":
        from .elevator.simulate import simulate as simulate_elevator  # noqa: PLC0415

        return simulate_elevator(args.players or 4, args.seed, args.policy)
    from .fiftyone.simulate import simulate as simulate_fiftyone  # noqa: PLC0415

    return simulate_fiftyone(
        args.preset,
        args.players or 4,
        args.seed,
        teams=args.teams,
        hands=args.hands,
        policy=args.policy,
    )


def _shares(text: str) -> tuple[int, ...]:
    """``--payout``: basis points by place, comma-separated; empty is the winner taking all."""
    try:
        return tuple(int(part) for part in text.split(",")) if text.strip() else ()
    except ValueError:
        raise UsageError(f"--payout is basis points by place, e.g. 7000,3000: {text!r}") from None


def _tournament(args: argparse.Namespace) -> dict[str, object]:
    """Play the units, over ``--jobs`` processes (each unit is a function of its number, so the
    split changes nothing but the time), and sum them up."""
    from concurrent.futures import ProcessPoolExecutor  # noqa: PLC0415
    from functools import partial  # noqa: PLC0415

    from .tournament import Tournament, play_unit, summary  # noqa: PLC0415

    units = args.hands if args.hands is not None else args.games
    if units is None or not 1 <= units <= 1_000_000:
        raise UsageError("give --hands N or --games N, N from 1 to 1000000")
    if not 1 <= args.jobs <= 64:
        raise UsageError("--jobs is 1 to 64")
    try:
        tournament = Tournament(
            game=args.game,
            seats=tuple(level.strip() for level in args.seats.split(",")),
            seed=args.seed,
            hands=args.hands is not None,
            preset=args.preset,
            teams=args.teams,
            budget_seconds=args.budget_ms / 1000,
            stake=args.stake,
            payout=PayoutRule(args.rake, _shares(args.payout)),
        )
    except RuleViolation as exc:
        raise UsageError(str(exc)) from None
    if args.game == "fiftyone":
        rules = RuleSet.preset_named(args.preset)
        if len(tournament.seats) not in rules.player_counts:
            raise UsageError(f"{args.preset} is played by {rules.players_text} players")
    elif not 3 <= len(tournament.seats) <= 6:
        raise UsageError("Elevator is played by 3 to 6 players")
    play = partial(play_unit, tournament)
    if args.jobs == 1:
        outcomes = [play(unit) for unit in range(units)]
    else:
        with ProcessPoolExecutor(args.jobs) as pool:
            outcomes = list(
                pool.map(play, range(units), chunksize=max(1, units // (8 * args.jobs)))
            )
    return summary(tournament, outcomes)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"masa-rules: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="masa-rules", description="The rules of masa: melds, solver, simulator.")
    commands = parser.add_subparsers(dest="command", required=True)
    meld = commands.add_parser("meld", help="validate a meld (C-2, F-10..F-16)")
    meld.add_argument("--preset", choices=PRESETS, default="salon")
    meld.add_argument("--opening", action="store_true", help="apply the F-13 opening joker limit")
    meld.add_argument("--readings", action="store_true", help="list every reading, best first")
    meld.add_argument("--batch", action="store_true", help="JSON lines on stdin")
    meld.add_argument("cards", nargs="*", metavar="CARD")
    solve = commands.add_parser("solve", help="best opening, pairs and whether the hand can open")
    solve.add_argument("--preset", choices=PRESETS, default="salon")
    solve.add_argument("--threshold", type=int)
    solve.add_argument("--batch", action="store_true", help="JSON lines on stdin")
    solve.add_argument("cards", nargs="*", metavar="CARD")
    simulate = commands.add_parser("simulate", help="play a whole game with built-in policies")
    simulate.add_argument("--game", choices=("fiftyone", "elevator"), required=True)
    simulate.add_argument("--preset", choices=PRESETS, default="salon")
    simulate.add_argument("--players", type=int)
    simulate.add_argument("--teams", action="store_true")
    simulate.add_argument("--hands", type=int)
    simulate.add_argument("--seed", required=True)
    simulate.add_argument("--policy", choices=("random", "greedy"), default="random")
    tournament = commands.add_parser(
        "tournament", help="bots of several levels against each other; one JSON document"
    )
    tournament.add_argument("--game", choices=("fiftyone", "elevator"), required=True)
    tournament.add_argument("--preset", choices=PRESETS, default="salon")
    tournament.add_argument("--teams", action="store_true")
    tournament.add_argument(
        "--seats", required=True, help="the level of each seat, e.g. hard,normal,normal,normal"
    )
    length = tournament.add_mutually_exclusive_group(required=True)
    length.add_argument("--hands", type=int, help="single 51 hands (Elevator: games)")
    length.add_argument("--games", type=int, help="whole games")
    tournament.add_argument("--seed", required=True)
    tournament.add_argument("--budget-ms", type=float, default=50.0, help="hard's budget")
    tournament.add_argument("--jobs", type=int, default=1, help="processes to play on")
    tournament.add_argument(
        "--stake", type=int, default=0, help="chips every seat stakes on a whole game (P-30)"
    )
    tournament.add_argument(
        "--payout",
        default="",
        help="the payout table by place in basis points, e.g. 7000,3000 (default: winner takes all)",
    )
    tournament.add_argument("--rake", type=int, default=0, help="the house rake in basis points")
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Run the command line; returns the exit code."""
    stdout = out or sys.stdout
    args = _parser().parse_args(argv)
    try:
        if args.command == "simulate":
            for event in _simulate(args):
                stdout.write(json.dumps(event) + "\n")
            return 0
        if args.command == "tournament":
            stdout.write(json.dumps(_tournament(args), indent=2) + "\n")
            return 0
        if args.batch:
            if args.cards:
                raise UsageError("--batch reads cards from stdin; give none on the command line")
            _batch(sys.stdin, args.command, stdout)
            return 0
        if not args.cards:
            raise UsageError(f"{args.command} needs at least one CARD")
        if args.command == "meld":
            answer = meld_answer(
                args.cards, args.preset, opening=args.opening, all_readings=args.readings
            )
        else:
            if args.threshold is not None and args.threshold <= 0:
                raise UsageError("--threshold must be positive")
            answer = solve_answer(args.cards, args.preset, args.threshold)
    except (UsageError, ValueError) as exc:
        sys.stderr.write(f"masa-rules: {exc}\n")
        return 2
    stdout.write(json.dumps(answer) + "\n")
    return 0
