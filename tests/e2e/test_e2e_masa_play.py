"""``masa play`` on a real pseudo-terminal against the real stack, as a player meets it.

The board and hand appear when a move is the player's (a new turn, a new hand they start, and
again after their own draw); the prompt shows only then and never in the middle of other
lines; players are named; an illegal move is explained with its rule; ``resume`` takes the
seat back from the autopilot; the game's end shows the result and ends the session without
waiting for Enter; ``quit`` leaves the table, which ends a training table (P-1, P-12).
"""

from __future__ import annotations

import asyncio
import os
import re

import pytest
from e2e_stack import Stack
from e2e_terminal import Terminal, assert_reads_well, masa
from masa.bot.v1 import bot_pb2, bot_pb2_grpc
from masa.common.v1 import game_pb2
from masa.table.v1 import view_pb2
from masa_client.client import TableClient, sequence_of
from masa_client.errors import MasaCallError
from masa_platform.testing import token
from masa_platform.tls import open_channel

ENV = {**os.environ, "NO_COLOR": "1", "TERM": "dumb"}


def play(stack: dict[str, str], player: str, *options: str) -> Terminal:
    """``masa play`` beside the stack: its run folder holds the issuer key the player's tokens
    are signed with."""
    return Terminal(
        [masa(), "play", "--player", player, "--address", stack["table-engine"], *options],
        {**ENV, "MASA_RUN_DIR": stack["run_dir"]},
    )


def test_masa_play_elevator_in_a_terminal_explains_refusals_and_quit_ends_the_table(
    stack: dict[str, str],
) -> None:
    terminal = play(stack, "pty", "--game", "elevator")
    typed: list[str] = []

    def send(line: str) -> None:
        typed.append(line)
        terminal.send(line)

    try:
        table_id = terminal.expect(r"table (\w+) created").group(1)
        hand = terminal.expect(r"your hand: ([^\n]+)\n").group(1).split()
        terminal.expect(r"your turn")
        send("help")
        terminal.expect(r"resume\s+take your seat back from the autopilot")
        send("dance")
        terminal.expect(r"unknown command 'dance'")
        send("play 8Q")
        terminal.expect(r"'8Q' is not a card")
        # Try each card of the hand: illegal ones are explained with their rule, the first
        # legal one is played (or, if none goes, the pass is legal).
        played = None
        for card in hand:
            send(f"play {card}")
            outcome = terminal.expect(
                rf"(not allowed \((E-\d+)\)[^\n]*\n  rule E-\d+: \w)|(pty \(you\) plays {card})"
            )
            if outcome.group(3):
                played = card
                break
        if played is None:
            send("pass")
            terminal.expect(r"pty \(you\) passes")
        send("look")
        terminal.expect(r"Elevator · table")
        send("quit")
        terminal.expect(r"you left the table, and it ended: no other player is left")
        terminal.expect(r"bye")
        assert terminal.wait() == 0
    finally:
        terminal.close()
    assert_reads_well(terminal.transcript, typed)
    # Finished, not voided: the bots ranked as they stood, the player who left last (P-12).
    assert asyncio.run(_state(stack, table_id, "pty")) == view_pb2.Table.STATE_FINISHED


async def _state(stack: dict[str, str], table_id: str, player: str) -> int:
    async with TableClient(stack["table-engine"], token(player)) as client:
        return (await client.get_table(table_id)).seat_view.table.table.state


def test_masa_play_fiftyone_salon_in_a_terminal(stack: dict[str, str]) -> None:
    terminal = play(stack, "pty51", "--game", "fiftyone", "--preset", "salon")
    typed = ["draw", "open 2H"]
    try:
        terminal.expect(r"51 salon · table \w+")
        terminal.expect(r"to open: 51 points or 5 pairs")
        hand = terminal.expect(r"your hand: ([^\n]+)\n").group(1).split()
        # Seat 0 starts the first hand: it discards without drawing (F-20).
        terminal.send("draw")
        terminal.expect(r"not allowed \(F-2\d\)[^\n]*\n  rule F-2\d: \w")
        terminal.send("open 2H")
        terminal.expect(r"not a valid move \(F-10\)[^\n]*\n  rule F-10: a meld has at least 3")
        typed.append(f"discard {hand[0]}")
        terminal.send(typed[-1])
        terminal.expect(rf"pty51 \(you\) discards {re.escape(hand[0])}")
        typed.append("quit")
        terminal.send("quit")
        terminal.expect(r"bye")
        assert terminal.wait() == 0
    finally:
        terminal.close()
    assert_reads_well(terminal.transcript, typed)


def test_a_draw_redraws_the_board_and_the_prompt_waits_for_the_players_move(
    stack: dict[str, str],
) -> None:
    terminal = play(stack, "drawer", "--game", "fiftyone", "--preset", "remi", "--players", "2")
    typed: list[str] = []
    try:
        first = terminal.expect(r"your hand: ([^\n]+)\n").group(1).split()
        terminal.expect(r"your turn: 'open'[^\n]*\n> ")
        typed.append(f"discard {first[0]}")
        terminal.send(typed[-1])
        terminal.expect(r"drawer \(you\) discards")
        # The bot moves, then the board comes back for the next turn, then the prompt.
        terminal.expect(r"hand 1 · turn: drawer")
        before = terminal.expect(r"your hand: ([^\n]+)\n").group(1).split()
        terminal.expect(r"your turn: 'draw' or 'take'[^\n]*\n> ")
        typed.append("draw")
        terminal.send("draw")
        drawn = terminal.expect(r"drawer \(you\) draws (\S+)\n").group(1)
        # Redrawn at once, with the drawn card in the hand, and the prompt after it.
        terminal.expect(r"hand 1 · turn: drawer")
        after = terminal.expect(r"your hand: ([^\n]+)\n").group(1).split()
        assert sorted([*before, drawn]) == sorted(after)
        terminal.expect(r"your turn: 'open', 'down', 'lay', then 'discard'\n> ")
        typed.append("quit")
        terminal.send("quit")
        terminal.expect(r"bye")
        assert terminal.wait() == 0
    finally:
        terminal.close()
    assert_reads_well(terminal.transcript, typed)


def test_resume_takes_the_seat_back_from_the_autopilot_and_the_board_says_how(
    stack: dict[str, str],
) -> None:
    """P-11: three timeouts hand the seat to the autopilot; the board says so and how to stop
    it, and ``resume`` (ResumeControl) gives it back."""
    # Classic with four players is the longest game, so the autopilot has plenty to play.
    terminal = play(
        stack, "sleeper", "--game", "fiftyone", "--preset", "classic", "--turn-seconds", "1"
    )
    typed = ["look", "resume", "quit"]
    try:
        terminal.expect(r"ran out of time; the autopilot plays this turn \(P-10\)")
        terminal.expect(r"the autopilot plays for you after 3 timeouts \(P-11\): type 'resume'")
        terminal.send("look")
        terminal.send("resume")
        terminal.expect(r"sleeper \(you\)\s+\d+ cards?, total -?\d+[^\n]*autopilot")
        terminal.expect(r"the autopilot is playing for you \(P-11\): type 'resume' to take")
        terminal.expect(r"you have your seat back")
        terminal.send("quit")
        terminal.expect(r"bye")
        assert terminal.wait() == 0
    finally:
        terminal.close()
    assert_reads_well(terminal.transcript, typed)


def test_the_end_of_the_game_shows_the_result_with_its_reason_and_ends_the_session(
    stack: dict[str, str],
) -> None:
    """Nothing is typed: the autopilot plays the seat after its timeouts, the game ends, and
    the client shows why and exits by itself (E-9, E-11)."""
    terminal = play(stack, "idle", "--game", "elevator", "--turn-seconds", "1")
    try:
        reason = terminal.expect(
            r"game over: (.+ went out: no cards left \(E-11\)|nobody could play on[^\n]+)\n"
        )
        # Four places, best first; tied players share a place (1, 1, 3).
        rows = [terminal.expect(r"  ([1-4])\. [^\n]+ (\d+) cards? left\n") for _ in range(4)]
        assert rows[0].group(1) == "1"
        assert int(rows[0].group(2)) == 0 or "nobody" in reason.group(1)
        terminal.expect(r"bye")
        assert terminal.wait() == 0
    finally:
        terminal.close()
    assert_reads_well(terminal.transcript, [])


def test_masa_play_finds_the_running_stack_from_a_folder_below_it(running_stack: Stack) -> None:
    """No --address and no MASA_RUN_DIR: run.json is found in a folder above this one."""
    below = running_stack.run_dir.parent / "some" / "folder"
    below.mkdir(parents=True, exist_ok=True)
    env = {key: value for key, value in ENV.items() if key != "MASA_RUN_DIR"}
    terminal = Terminal(
        [masa(), "play", "--game", "elevator", "--player", "finder"], env, cwd=below
    )
    try:
        address = terminal.expect(r"table \w+ created at (\S+)\n").group(1)
        assert address == running_stack.addresses["table-engine"]
        terminal.expect(r"your hand")
        terminal.send("quit")
        terminal.expect(r"bye")
        assert terminal.wait() == 0
    finally:
        terminal.close()


def test_a_player_whose_connection_dropped_comes_back_with_table_and_leaves_with_ctrl_d(
    stack: dict[str, str],
) -> None:
    """P-12: the seat waits for its player, who comes back with ``--table``; Ctrl-D leaves."""
    first = play(stack, "returner", "--game", "elevator")
    try:
        table_id = first.expect(r"table (\w+) created").group(1)
        first.expect(r"your hand: ")
    finally:
        first.close()  # killed: the connection drops without leaving
    again = play(stack, "returner", "--table", table_id)
    try:
        again.expect(rf"Elevator · table {table_id}")
        again.expect(r"returner \(you\)")
        again.expect(r"your hand: ")
        again.send_eof()
        again.expect(r"you left the table, and it ended: no other player is left")
        assert again.wait() == 0
    finally:
        again.close()
    assert_reads_well(again.transcript, [])


def test_every_option_of_every_command_has_a_help_text() -> None:
    for command in ("token", "play", "practice", "watch"):
        terminal = Terminal([masa(), command, "--help"], ENV)
        try:
            assert terminal.wait() == 0
        finally:
            terminal.close()
        text = terminal.transcript.split("options:", 1)[1]
        entries = re.split(r"\n(?=  -)", text.strip())
        assert len(entries) >= 2, text
        for entry in entries:
            option, _, rest = entry.strip().partition("  ")
            assert rest.strip(), f"masa {command}: {option} has no help text"


@pytest.mark.timeout(300)
async def test_a_player_who_finishes_a_hand_and_starts_the_next_gets_the_board_and_prompt(
    stack: dict[str, str],
) -> None:
    """The finishing discard and the next hand's deal arrive in one update, and the move stays
    the player's: the client must still show the new hand's board and prompt, so that the
    player, not the turn timer, makes the first move of that hand.

    The test plays the seat itself (as the same player, through the SDK, with the bot
    service's normal-level moves) against an easy bot until the seat finishes a hand and
    starts the next (remi, 2 players: the starters alternate), then hands over to the
    terminal."""
    terminal = play(
        stack,
        "finisher",
        "--game",
        "fiftyone",
        "--preset",
        "remi",
        "--players",
        "2",
        "--level",
        "easy",
        "--turn-seconds",
        "600",
    )
    try:
        table_id = terminal.expect(r"table (\w+) created").group(1)
        terminal.expect(r"your turn")
        hand_no = await _play_until_the_seat_finishes_and_starts_again(stack, table_id)
        terminal.expect(rf"— hand {hand_no} dealt —")
        terminal.expect(rf"51 remi · table {table_id} · hand {hand_no} · turn: finisher")
        hand = terminal.expect(r"your hand: ([^\n]+)\n").group(1).split()
        terminal.expect(r"your turn: 'open', 'down', 'lay', then 'discard'\n> ")
        terminal.send(f"discard {hand[0]}")
        terminal.expect(rf"finisher \(you\) discards {re.escape(hand[0])}")
        terminal.send("quit")
        terminal.expect(r"bye")
        assert await asyncio.to_thread(terminal.wait) == 0
    finally:
        terminal.close()


async def _play_until_the_seat_finishes_and_starts_again(
    stack: dict[str, str], table_id: str
) -> int:
    """Play seat 0 until it finishes a hand and starts the next; that next hand's number."""
    player = TableClient(stack["table-engine"], token("finisher"))
    bot = open_channel(stack["bot"], None)
    decide = bot_pb2_grpc.BotServiceStub(bot).Decide
    # The bot answers the table-engine alone: the test asks as the engine does.
    engine = (("authorization", f"Bearer {token('table-engine', 'table-engine')}"),)
    finisher: int | None = None
    try:
        async for message in player.watch(table_id):
            for event in message.update.events:
                kind = event.WhichOneof("kind")
                if kind == "hand_finished":
                    finisher = (
                        event.hand_finished.finisher_seat
                        if event.hand_finished.HasField("finisher_seat")
                        else None
                    )
                elif kind == "hand_dealt" and event.hand_dealt.starter_seat == 0 and finisher == 0:
                    return event.hand_dealt.hand_no
                elif kind == "game_finished":
                    raise AssertionError("the game ended before the seat finished a hand it")
            view = (await player.get_table(table_id)).seat_view
            table = view.table
            # Act on the newest state only once the stream has caught up with it, so that no
            # move is made in a hand whose deal the loop has not read yet.
            caught_up = table.table.sequence == sequence_of(message)
            if not (caught_up and table.HasField("turn_seat") and table.turn_seat == 0):
                continue
            answer = await decide(
                bot_pb2.DecideRequest(
                    observation=bot_pb2.Observation(view=view),
                    level=game_pb2.BOT_LEVEL_NORMAL,
                    seed=table.table.sequence,
                ),
                metadata=engine,
            )
            try:
                await player.submit_action(table_id, answer.action, table.table.sequence)
            except MasaCallError as error:
                if error.reason != "SEQUENCE_MISMATCH":
                    raise
    finally:
        await player.close()
        await bot.close()
    raise AssertionError("the watch ended before the seat finished a hand")
