"""Who may call what (issue 19): every RPC of every masa service, called by every identity on the
real servers, answers as the tables of docs/security.md say, so the page cannot drift from the
code.

The table engine, the bot, the ledger (on SQLite) and matchmaking run in this process on port
0, over a real nats-server with the masa users and the bus plan provisioned. The methods are
read from the generated service descriptors, so a method added to a .proto fails here until
docs/security.md gives it a row and this module a request for it (``cases``). Every identity
makes the same call about one player's seat, chips, holds and ticket (ayse's), and the answer
is classified as docs/security.md defines its cells:

- unauthenticated: UNAUTHENTICATED;
- denied: PERMISSION_DENIED, reason PERMISSION_DENIED;
- own only: PERMISSION_DENIED, reason NOT_YOUR_SEAT or NOT_YOUR_ACCOUNT; NOT_FOUND with the
  reason a service hides another's resource behind (matchmaking's TICKET_NOT_FOUND); or an
  answer that holds the caller's own data and not ayse's (a ticket or a list of its own);
- spectator: the spectator view of ayse's table, without her hand (P-20);
- allowed: an answer that holds ayse's data (her seat view, her balance, her ticket ...), or
  the one refusal a call that got through is expected to meet (a stale move is ABORTED,
  SEQUENCE_MISMATCH: the engine took it as her seat's and judged it).

Any other answer is a mismatch too, so a request that stopped being valid cannot pass for
an allowed call. Health and reflection are open to every caller by design and have no row.
"""

from __future__ import annotations

import importlib
import pkgutil
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import jwt
import masa
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from google.protobuf import duration_pb2, message_factory
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message
from masa.bot.v1 import bot_pb2
from masa.common.v1 import chips_pb2, error_pb2, game_pb2
from masa.ledger.v1 import ledger_pb2, ledger_pb2_grpc
from masa.matchmaking.v1 import matchmaking_pb2 as mm
from masa.matchmaking.v1 import matchmaking_pb2_grpc
from masa.table.v1 import action_pb2, admin_pb2, table_pb2, table_pb2_grpc, view_pb2
from masa_bot.bootstrap import bootstrap as start_bot
from masa_bot.settings import BotSettings
from masa_client.errors import from_rpc_error
from masa_ledger.bootstrap import start_ledger
from masa_ledger.settings import LedgerSettings
from masa_matchmaking.bootstrap import start_matchmaking
from masa_matchmaking.settings import MatchmakingSettings
from masa_platform.auth import Role, TokenSigner
from masa_platform.bus_access import LEDGER, MATCHMAKING, TABLE_ENGINE
from masa_platform.errors import reason_name
from masa_platform.keys import (
    ISSUER,
    RESULTS,
    SERVICE_IDENTITIES,
    KeyFileError,
    SigningKey,
    key_id,
    load_jwks,
)
from masa_platform.server import GrpcServer
from masa_platform.settings import AuthSettings, PlatformSettings
from masa_platform.testing import NatsServer, keyring, service_settings, token
from masa_rules.elevator import ElevatorRules, new_game
from masa_table_engine.bootstrap import start_node
from masa_table_engine.settings import EngineSettings
from masa_wire import elevator as wire_elevator
from prometheus_client import CollectorRegistry

# The payout table a table binds its holds under: the winner takes all, no rake.
WINNER_TAKES_ALL_PROTO = chips_pb2.PayoutRule(place_shares=[10_000])

SECURITY = Path(__file__).resolve().parents[1] / "docs" / "security.md"
SECTION = "## Who may call what"
COLUMNS = ("player", "other player", "admin", "table-engine", "matchmaking", "none/forged")
ALLOWED, OWN_ONLY, SPECTATOR = "allowed", "own only", "spectator"
DENIED, UNAUTHENTICATED = "denied", "unauthenticated"
CELLS = frozenset({ALLOWED, OWN_ONLY, SPECTATOR, DENIED, UNAUTHENTICATED})

OWNER, OTHER = "ayse", "bora"
OWNER_SEAT = 0
# Ayse's tables: one she plays at, one she leaves, one an operator voids.
PLAYED, LEFT, VOIDED = "perm-played", "perm-left", "perm-voided"
# Her chips: a hold of hers, and a game of hers that was bound and voided (its settlement).
STAKE = 10
HOLD = "perm-hold"
SETTLED = "perm-settled"
# A chip lobby of four seats: her ticket searches there, as two players never fill a table.
LOBBY = "salon-51"
CALL_SECONDS = 10.0

_CODES = {code.value[0]: code for code in grpc.StatusCode}


NOT_YOURS = frozenset(
    {
        reason_name(error_pb2.ERROR_REASON_NOT_YOUR_SEAT),
        reason_name(error_pb2.ERROR_REASON_NOT_YOUR_ACCOUNT),
    }
)


# --- the page ---------------------------------------------------------------------------


def documented() -> dict[str, dict[str, str]]:
    """Method -> column -> cell, from the tables of the section "Who may call what"."""
    text = SECURITY.read_text(encoding="utf-8")
    start = text.index(SECTION) + len(SECTION)
    following = text.find("\n## ", start)
    section = text[start : following if following != -1 else len(text)]
    matrix: dict[str, dict[str, str]] = {}
    header: list[str] | None = None
    for line in section.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            if tuple(header) != ("RPC", *COLUMNS):
                raise ValueError(f"a table's columns must be RPC, {', '.join(COLUMNS)}: {line}")
            continue
        if all(set(cell) <= {"-", ":"} for cell in cells):
            continue
        method = cells[0].strip("`")
        if method in matrix:
            raise ValueError(f"{method} has two rows")
        if len(cells) != len(header):
            raise ValueError(f"{method}: {len(cells) - 1} cells, not {len(COLUMNS)}")
        unknown = set(cells[1:]) - CELLS
        if unknown:
            raise ValueError(f"{method}: cells {sorted(unknown)} are none of {sorted(CELLS)}")
        matrix[method] = dict(zip(COLUMNS, cells[1:], strict=True))
    return matrix


def masa_methods() -> dict[str, MethodDescriptor]:
    """Every method of every service of the generated masa.* modules, by full name."""
    found: dict[str, MethodDescriptor] = {}
    for module in pkgutil.walk_packages(masa.__path__, "masa."):
        if not module.name.endswith("_pb2"):
            continue
        generated = importlib.import_module(module.name)
        for service in generated.DESCRIPTOR.services_by_name.values():
            for method in service.methods:
                found[f"/{service.full_name}/{method.name}"] = method
    return found


def test_docs_security_md_has_one_row_for_every_rpc_and_no_other() -> None:
    methods = masa_methods()
    services = {method.containing_service.full_name for method in methods.values()}
    assert {
        "masa.table.v1.TableService",
        "masa.table.v1.TableAdminService",
        "masa.bot.v1.BotService",
        "masa.ledger.v1.LedgerService",
        "masa.matchmaking.v1.MatchmakingService",
    } <= services
    rows = documented()
    assert sorted(set(methods) - set(rows)) == [], "RPCs without a row in docs/security.md"
    assert sorted(set(rows) - set(methods)) == [], "rows of docs/security.md naming no RPC"
    # Nobody gets anything without a valid token: only health and reflection are open.
    assert {cells["none/forged"] for cells in rows.values()} == {UNAUTHENTICATED}


# --- identities ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Identity:
    """A caller: its name (which also keeps its request ids apart), its column of the page and
    its token (None: no authorization header at all)."""

    name: str
    column: str
    token: str | None

    @property
    def metadata(self) -> tuple[tuple[str, str], ...]:
        return () if self.token is None else (("authorization", f"Bearer {self.token}"),)


def _signed(private: Ed25519PrivateKey, kid: str, subject: str, roles: list[str]) -> str:
    """A well-formed token with the claims a real one has, signed by ``private`` as ``kid``."""
    settings = AuthSettings()
    now = int(time.time())
    claims = {
        "sub": subject,
        "iss": settings.jwt_issuer,
        "aud": settings.jwt_audience,
        "iat": now,
        "exp": now + 3600,
        "roles": roles,
    }
    return jwt.encode(claims, private, algorithm="EdDSA", headers={"kid": kid})


def identities() -> tuple[Identity, ...]:
    """Every caller, ayse last: the calls that change her things (she leaves a table, cancels
    her ticket) come after everyone else's calls about them."""
    issuer = keyring().signer(ISSUER)
    results = keyring().signer(RESULTS)
    stranger = Ed25519PrivateKey.generate()
    unknown = key_id(stranger.public_key(), ISSUER)
    forged = "none/forged"
    return (
        Identity("anonymous", forged, None),
        Identity("garbage", forged, "not-a-token"),
        # A key of its own, named as a key the servers were never given.
        Identity("stranger", forged, _signed(stranger, unknown, "ops", ["admin"])),
        # Another key, passing itself off as the issuer's by its kid.
        Identity("impostor", forged, _signed(stranger, issuer.kid, "ops", ["admin"])),
        # The engines' results key signs results, and is no token key.
        Identity("results-key", forged, _signed(results.private, results.kid, "ops", ["admin"])),
        # Roles no key can grant, even the issuer's: the bot's, and the retired service role.
        Identity("bot", forged, _signed(issuer.private, issuer.kid, "bot", ["bot"])),
        Identity("service", forged, _signed(issuer.private, issuer.kid, "service", ["service"])),
        Identity("table-engine", "table-engine", token("table-engine", Role.TABLE_ENGINE)),
        Identity("matchmaking", "matchmaking", token("matchmaking", Role.MATCHMAKING)),
        Identity("ops", "admin", token("ops", Role.ADMIN)),
        Identity(OTHER, "other player", token(OTHER)),
        Identity(OWNER, "player", token(OWNER)),
    )


def test_the_bot_has_no_identity_to_call_anything_with() -> None:
    """The bot calls nobody: no key of the keyring signs for it, the issuer grants no bot or
    service role, a service's key signs for nobody else, and a key made for the bot would
    sign nothing (the tokens claiming those roles are refused on the wire, in the table test)."""
    assert "bot" not in SERVICE_IDENTITIES
    trusted = {identity for _, identity in load_jwks(keyring().jwks).keys.values()}
    assert trusted == {ISSUER, *SERVICE_IDENTITIES}
    with pytest.raises(KeyFileError):
        keyring().signer("bot")
    issuer = TokenSigner(keyring().signer(ISSUER), AuthSettings())
    for role in ("bot", "service", "table-engine"):
        with pytest.raises(ValueError, match=r"bot|service|grants"):
            issuer.mint("bot", [role])
    for role in ("bot", "service"):
        with pytest.raises(ValueError, match=role):
            token("bot", role)
    engine = TokenSigner(keyring().signer("table-engine"), AuthSettings())
    with pytest.raises(ValueError, match="signs the table-engine identity only"):
        engine.mint("bot", [Role.TABLE_ENGINE])
    own = Ed25519PrivateKey.generate()
    made = SigningKey(own, "bot", key_id(own.public_key(), "bot"))
    with pytest.raises(ValueError, match="bot"):
        TokenSigner(made, AuthSettings()).mint("bot", [Role.PLAYER])


# --- the services ---------------------------------------------------------------------------


def _platform(nats: NatsServer, service: str, user: str = "") -> PlatformSettings:
    return service_settings(nats, service, user)


@asynccontextmanager
async def running_services(directory: Path) -> AsyncIterator[dict[str, str]]:
    """Every masa service, each as its own NATS user; the address of each gRPC service."""
    with NatsServer(directory / "nats", secure=True) as nats:
        async with AsyncExitStack() as stack:
            bot = start_bot(BotSettings(platform=_platform(nats, "bot")), CollectorRegistry())
            await bot.start()
            stack.push_async_callback(bot.stop, 0)
            ledger = await start_ledger(
                LedgerSettings(
                    platform=_platform(nats, "ledger", LEDGER),
                    database_url=f"sqlite:///{directory / 'ledger.sqlite3'}",
                    result_keys_file=keyring().results_jwks,
                ),
                CollectorRegistry(),
            )
            stack.push_async_callback(ledger.stop, 0.2)
            node = await start_node(
                EngineSettings(
                    platform=_platform(nats, "table-engine", TABLE_ENGINE),
                    node_id="permissions",
                    bot_address=bot.address,
                    ledger_address=ledger.server.address,
                    result_signing_key_file=keyring().results_key,
                    log_mac_key_file=keyring().log_mac,
                ),
                registry=CollectorRegistry(),
            )
            stack.push_async_callback(node.stop, 0.2)
            matchmaking = await start_matchmaking(
                MatchmakingSettings(
                    platform=_platform(nats, "matchmaking", MATCHMAKING),
                    instance_id="permissions",
                    ledger_address=ledger.server.address,
                    result_keys_file=keyring().results_jwks,
                ),
                CollectorRegistry(),
            )
            stack.push_async_callback(matchmaking.stop, 0)
            servers: Iterable[GrpcServer] = (bot, ledger.server, node.server, matchmaking.server)
            yield {name: server.address for server in servers for name in server.service_names}


def _training() -> game_pb2.TableConfig:
    """An Elevator training table: ayse and two bots. Her turn lasts long enough that no
    timeout moves her seat while the test runs."""
    seats = [
        game_pb2.SeatAssignment(
            seat=OWNER_SEAT, kind=game_pb2.SEAT_KIND_HUMAN, player_id=OWNER, display_name=OWNER
        ),
        *(game_pb2.SeatAssignment(seat=n, kind=game_pb2.SEAT_KIND_BOT) for n in (1, 2)),
    ]
    return game_pb2.TableConfig(
        game=game_pb2.GAME_KIND_ELEVATOR,
        mode=game_pb2.MODE_TRAINING,
        seats=seats,
        turn_time=duration_pb2.Duration(seconds=600),
    )


def _auth(name: str, *roles: Role) -> tuple[tuple[str, str]]:
    return (("authorization", f"Bearer {token(name, *roles)}"),)


async def _prepare(channels: Mapping[str, grpc.aio.Channel], callers: Iterable[str]) -> str:
    """Ayse's things, made by those who make them in a deployment: her tables (matchmaking),
    her chips (an operator), her holds (matchmaking), a game of hers bound (the table-engine)
    and voided (an operator), and her ticket (she). Her ticket's id."""
    engine = table_pb2_grpc.TableServiceStub(channels["masa.table.v1.TableService"])
    for table_id in (PLAYED, LEFT, VOIDED):
        await engine.CreateTable(
            table_pb2.CreateTableRequest(
                request_id=table_id, table_id=table_id, config=_training()
            ),
            metadata=_auth(MATCHMAKING, Role.MATCHMAKING),
        )
    ledger = ledger_pb2_grpc.LedgerServiceStub(channels["masa.ledger.v1.LedgerService"])
    operator = _auth("ops", Role.ADMIN)
    await ledger.GrantChips(
        ledger_pb2.GrantChipsRequest(request_id="perm-welcome", player_id=OWNER, amount=10_000),
        metadata=operator,
    )
    # Ayse's own, one her settled game is bound with, and one for each caller to bind or release.
    holds = [HOLD, SETTLED]
    holds += [f"{kind}-{caller}" for caller in callers for kind in ("bind", "release")]
    for hold in holds:
        # One stake a call: a HoldStakes holds one table's, each player's once.
        await ledger.HoldStake(
            ledger_pb2.HoldStakeRequest(
                request_id=hold, player_id=OWNER, amount=STAKE, payout=WINNER_TAKES_ALL_PROTO
            ),
            metadata=_auth(MATCHMAKING, Role.MATCHMAKING),
        )
    await ledger.BindHolds(
        ledger_pb2.BindHoldsRequest(
            request_id=SETTLED,
            table_id=SETTLED,
            game_no=1,
            stake=STAKE,
            hold_ids=[SETTLED],
            payout=WINNER_TAKES_ALL_PROTO,
        ),
        metadata=_auth(TABLE_ENGINE, Role.TABLE_ENGINE),
    )
    await ledger.VoidGame(
        ledger_pb2.VoidGameRequest(request_id=SETTLED, table_id=SETTLED, game_no=1, reason="test"),
        metadata=operator,
    )
    tickets = matchmaking_pb2_grpc.MatchmakingServiceStub(
        channels["masa.matchmaking.v1.MatchmakingService"]
    )
    made = await tickets.CreateTicket(
        mm.CreateTicketRequest(request_id="perm-ticket", lobby_id=LOBBY), metadata=_auth(OWNER)
    )
    return made.ticket.ticket_id


# --- the calls ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Refusal:
    code: grpc.StatusCode
    reason: str


def _got_through(answer: Any) -> str:
    return ALLOWED


def _owned_by(player: str) -> str:
    """A call answered with a player's data: ayse's is the call she allowed; the caller's own
    is all it may see."""
    return ALLOWED if player == OWNER else OWN_ONLY


def _view(answer: Any) -> str:
    """A GetTable or WatchTable answer: her seat's view, or the spectator's."""
    if answer.HasField("seat_view"):
        seat = answer.seat_view.seat
        return ALLOWED if seat == OWNER_SEAT else f"the view of seat {seat}"
    return SPECTATOR if answer.HasField("spectator_view") else "no view"


def _streamed_move(answer: Any) -> str | Refusal:
    """A SubmitActions answer: a refusal inside the stream is judged as SubmitAction's."""
    if answer.HasField("refused"):
        return Refusal(_CODES[answer.refused.code], answer.refused.error.reason)
    return ALLOWED


@dataclass(frozen=True, slots=True)
class Case:
    """How to call one method about ayse's things, and what its answer shows.

    ``request`` makes the request of a caller (by name: the ids of writes differ per caller, so
    that one caller's retry never answers another's); ``answered`` judges an answer; ``refused``
    is the refusal a call that got through meets; ``hidden`` the NOT_FOUND reason that hides
    another player's resource."""

    request: Callable[[str], Message]
    answered: Callable[[Any], str | Refusal] = _got_through
    refused: tuple[grpc.StatusCode, error_pb2.ErrorReason.ValueType] | None = None
    hidden: error_pb2.ErrorReason.ValueType | None = None


def _stale_move(caller: str) -> table_pb2.SubmitActionRequest:
    """A move at a sequence the table never reaches: the engine judges it for the caller's seat
    and refuses it without changing the table the other calls read."""
    return table_pb2.SubmitActionRequest(
        request_id=f"move-{caller}",
        table_id=PLAYED,
        expected_sequence=1 << 40,
        action=action_pb2.Action(pass_turn=action_pb2.Pass()),
    )


def _decision() -> bot_pb2.DecideRequest:
    """An observation of the seat whose turn it is, at a fresh Elevator game."""
    state = new_game(ElevatorRules(), 3, "permissions")
    table = view_pb2.TableView(seats=[view_pb2.SeatState(seat=s) for s in range(state.players)])
    wire_elevator.fill_table_view(table, state)
    view = wire_elevator.seat_view(table, state, state.turn)
    return bot_pb2.DecideRequest(observation=bot_pb2.Observation(view=view), seed=7)


def cases(ticket_id: str) -> dict[str, Case]:
    """A request for every RPC, by full method name."""
    table, admin = "/masa.table.v1.TableService", "/masa.table.v1.TableAdminService"
    ledger, match = "/masa.ledger.v1.LedgerService", "/masa.matchmaking.v1.MatchmakingService"
    wallet = f"player:{OWNER}"
    hidden_ticket = error_pb2.ERROR_REASON_TICKET_NOT_FOUND
    decision = _decision()
    return {
        f"{table}/CreateTable": Case(
            lambda caller: table_pb2.CreateTableRequest(
                request_id=f"create-{caller}", table_id=f"create-{caller}", config=_training()
            )
        ),
        f"{table}/GetTable": Case(lambda _: table_pb2.GetTableRequest(table_id=PLAYED), _view),
        f"{table}/WatchTable": Case(lambda _: table_pb2.WatchTableRequest(table_id=PLAYED), _view),
        f"{table}/SubmitAction": Case(
            _stale_move, refused=(grpc.StatusCode.ABORTED, error_pb2.ERROR_REASON_SEQUENCE_MISMATCH)
        ),
        f"{table}/SubmitActions": Case(
            lambda caller: table_pb2.SubmitActionsRequest(action=_stale_move(caller)),
            _streamed_move,
            refused=(grpc.StatusCode.ABORTED, error_pb2.ERROR_REASON_SEQUENCE_MISMATCH),
        ),
        f"{table}/ResumeControl": Case(
            lambda caller: table_pb2.ResumeControlRequest(
                request_id=f"resume-{caller}", table_id=PLAYED
            ),
            lambda answer: _view(answer) if answer.HasField("seat_view") else "no seat view",
        ),
        f"{table}/LeaveTable": Case(
            lambda caller: table_pb2.LeaveTableRequest(request_id=f"leave-{caller}", table_id=LEFT),
            lambda answer: ALLOWED if answer.table.table_id == LEFT else "another table",
        ),
        f"{admin}/DrainNode": Case(
            # Another node's id: the node judges the drain and drains nothing.
            lambda _: admin_pb2.DrainNodeRequest(node_id="another-node"),
            refused=(grpc.StatusCode.FAILED_PRECONDITION, error_pb2.ERROR_REASON_NODE_MISMATCH),
        ),
        f"{admin}/ResumeNode": Case(
            # Another node's id: the node judges the call and resumes nothing.
            lambda _: admin_pb2.ResumeNodeRequest(node_id="another-node"),
            refused=(grpc.StatusCode.FAILED_PRECONDITION, error_pb2.ERROR_REASON_NODE_MISMATCH),
        ),
        f"{admin}/VoidTable": Case(
            lambda caller: admin_pb2.VoidTableRequest(
                request_id=f"void-{caller}", table_id=VOIDED, reason="the permissions test"
            ),
            lambda answer: ALLOWED if answer.table.table_id == VOIDED else "another table",
        ),
        "/masa.bot.v1.BotService/Decide": Case(
            lambda _: decision,
            lambda answer: ALLOWED if answer.HasField("action") else "no action",
        ),
        f"{ledger}/GetBalance": Case(
            lambda _: ledger_pb2.GetBalanceRequest(player_id=OWNER),
            lambda answer: _owned_by(answer.account.player_id),
        ),
        f"{ledger}/ListTransfers": Case(
            lambda _: ledger_pb2.ListTransfersRequest(player_id=OWNER),
            lambda answer: _owned_by(
                OWNER if any(t.credit_account_id == wallet for t in answer.transfers) else ""
            ),
        ),
        f"{ledger}/GetHold": Case(
            lambda _: ledger_pb2.GetHoldRequest(hold_id=HOLD),
            lambda answer: _owned_by(answer.hold.player_id),
        ),
        f"{ledger}/ListHolds": Case(
            lambda _: ledger_pb2.ListHoldsRequest(player_id=OWNER),
            lambda answer: _owned_by(
                OWNER if any(hold.hold_id == HOLD for hold in answer.holds) else ""
            ),
        ),
        f"{ledger}/GetSettlement": Case(
            lambda _: ledger_pb2.GetSettlementRequest(table_id=SETTLED, game_no=1),
            lambda answer: ALLOWED if answer.settlement.table_id == SETTLED else "another game",
        ),
        f"{ledger}/GetAccount": Case(
            lambda _: ledger_pb2.GetAccountRequest(account_id=wallet),
            lambda answer: _owned_by(answer.account.player_id),
        ),
        f"{ledger}/HoldStake": Case(
            lambda caller: ledger_pb2.HoldStakeRequest(
                request_id=f"hold-{caller}",
                player_id=OWNER,
                amount=STAKE,
                payout=WINNER_TAKES_ALL_PROTO,
            ),
            lambda answer: _owned_by(answer.hold.player_id),
        ),
        f"{ledger}/HoldStakes": Case(
            lambda caller: ledger_pb2.HoldStakesRequest(
                request_id=f"holds-{caller}",
                stakes=[
                    ledger_pb2.HoldStakeRequest(
                        request_id=f"holds-{caller}",
                        player_id=OWNER,
                        amount=STAKE,
                        payout=WINNER_TAKES_ALL_PROTO,
                    )
                ],
            ),
            lambda answer: _owned_by(answer.holds[0].player_id),
        ),
        f"{ledger}/BindHolds": Case(
            lambda caller: ledger_pb2.BindHoldsRequest(
                request_id=f"bind-{caller}",
                table_id=f"bound-{caller}",
                game_no=1,
                stake=STAKE,
                hold_ids=[f"bind-{caller}"],
                payout=WINNER_TAKES_ALL_PROTO,
            ),
            lambda answer: _owned_by(answer.holds[0].player_id),
        ),
        f"{ledger}/ReleaseHold": Case(
            lambda caller: ledger_pb2.ReleaseHoldRequest(
                request_id=f"release-{caller}", hold_id=f"release-{caller}", reason="test"
            ),
            lambda answer: _owned_by(answer.hold.player_id),
        ),
        f"{ledger}/GrantChips": Case(
            lambda caller: ledger_pb2.GrantChipsRequest(
                request_id=f"grant-{caller}", player_id=OWNER, amount=1
            ),
            lambda answer: ALLOWED if answer.transfer.credit_account_id == wallet else "another",
        ),
        f"{ledger}/SettleGame": Case(
            # A game nobody played: the ledger looks for its result in the table log.
            lambda caller: ledger_pb2.SettleGameRequest(
                request_id=f"settle-{caller}", table_id="perm-unplayed", game_no=1
            ),
            refused=(
                grpc.StatusCode.FAILED_PRECONDITION,
                error_pb2.ERROR_REASON_GAME_NOT_FINISHED,
            ),
        ),
        f"{ledger}/VoidGame": Case(
            # A game no stake was bound to: the ledger judges the void and voids nothing.
            lambda caller: ledger_pb2.VoidGameRequest(
                request_id=f"void-{caller}", table_id=f"voided-{caller}", game_no=1, reason="test"
            ),
            refused=(grpc.StatusCode.NOT_FOUND, error_pb2.ERROR_REASON_NOT_FOUND),
        ),
        f"{match}/ListLobbies": Case(
            lambda _: mm.ListLobbiesRequest(),
            lambda answer: ALLOWED if any(lob.lobby_id == LOBBY for lob in answer.lobbies) else "",
        ),
        f"{match}/GetLobby": Case(
            lambda _: mm.GetLobbyRequest(lobby_id=LOBBY),
            lambda answer: ALLOWED if answer.lobby.lobby_id == LOBBY else "another lobby",
        ),
        f"{match}/CreateTicket": Case(
            # Ayse has her ticket already; another player gets a ticket of its own.
            lambda caller: mm.CreateTicketRequest(request_id=f"ticket-{caller}", lobby_id=LOBBY),
            lambda answer: _owned_by(answer.ticket.player_id),
            refused=(grpc.StatusCode.FAILED_PRECONDITION, error_pb2.ERROR_REASON_TICKET_OPEN),
        ),
        f"{match}/GetTicket": Case(
            lambda _: mm.GetTicketRequest(ticket_id=ticket_id),
            lambda answer: _owned_by(answer.ticket.player_id),
            hidden=hidden_ticket,
        ),
        f"{match}/ListTickets": Case(
            lambda _: mm.ListTicketsRequest(),
            lambda answer: _owned_by(
                OWNER if any(t.ticket_id == ticket_id for t in answer.tickets) else ""
            ),
        ),
        f"{match}/CancelTicket": Case(
            lambda caller: mm.CancelTicketRequest(
                request_id=f"cancel-{caller}", ticket_id=ticket_id
            ),
            lambda answer: _owned_by(answer.ticket.player_id),
            hidden=hidden_ticket,
        ),
        f"{match}/WatchTicket": Case(
            lambda _: mm.WatchTicketRequest(ticket_id=ticket_id),
            lambda answer: _owned_by(answer.ticket.player_id),
            hidden=hidden_ticket,
        ),
        f"{match}/GetRating": Case(
            lambda _: mm.GetRatingRequest(player_id=OWNER, game=game_pb2.GAME_KIND_FIFTYONE),
            lambda answer: ALLOWED if answer.rating.player_id == OWNER else "another rating",
        ),
    }


# How many times a client-streaming call is made when the client's own send fails: its write
# can race the server's refusal, and grpc.aio then reports INTERNAL (its core's failed send on
# a call the server already closed) in place of the status the server sent.
CLIENT_STREAM_TRIES = 3


async def _call(
    channel: grpc.aio.Channel,
    method: MethodDescriptor,
    request: Message,
    metadata: tuple[tuple[str, str], ...],
) -> Message | Refusal:
    """The answer to one call (a stream's first message), or its refusal: the server's, not
    a failure of the client's own write (``CLIENT_STREAM_TRIES``)."""
    for _ in range(CLIENT_STREAM_TRIES - 1):
        result = await _call_once(channel, method, request, metadata)
        raced = (
            method.client_streaming
            and isinstance(result, Refusal)
            and result.code is grpc.StatusCode.INTERNAL
        )
        if not raced:
            return result
    return await _call_once(channel, method, request, metadata)


async def _call_once(
    channel: grpc.aio.Channel,
    method: MethodDescriptor,
    request: Message,
    metadata: tuple[tuple[str, str], ...],
) -> Message | Refusal:
    path = f"/{method.containing_service.full_name}/{method.name}"
    reply = message_factory.GetMessageClass(method.output_type)
    codec: dict[str, Any] = {
        "request_serializer": lambda message: message.SerializeToString(),
        "response_deserializer": reply.FromString,
    }
    options: dict[str, Any] = {"metadata": metadata, "timeout": CALL_SECONDS}
    try:
        if not method.client_streaming and not method.server_streaming:
            answer: Message = await channel.unary_unary(path, **codec)(request, **options)
            return answer
        if not method.client_streaming:
            stream = channel.unary_stream(path, **codec)(request, **options)
            return await _first(stream)
        if not method.server_streaming:
            upload = channel.stream_unary(path, **codec)(**options)
            await upload.write(request)
            await upload.done_writing()
            uploaded: Message = await upload
            return uploaded
        both = channel.stream_stream(path, **codec)(**options)
        await both.write(request)
        return await _first(both)
    except grpc.aio.AioRpcError as error:
        failed = from_rpc_error(error)
        return Refusal(failed.code, failed.reason)


async def _first(stream: Any) -> Message | Refusal:
    first = await stream.read()
    if first is grpc.aio.EOF:
        return Refusal(await stream.code(), "the stream ended without a message")
    stream.cancel()
    answer: Message = first
    return answer


def _outcome(case: Case, result: Message | Refusal) -> str:
    """The cell of the page an answer shows (see the module's docstring), else what it was."""
    judged = case.answered(result) if isinstance(result, Message) else result
    return judged if isinstance(judged, str) else _refused(case, judged)


def _refused(case: Case, refusal: Refusal) -> str:
    code, why = refusal.code, refusal.reason
    if code is grpc.StatusCode.UNAUTHENTICATED:
        return UNAUTHENTICATED
    if code is grpc.StatusCode.PERMISSION_DENIED and why == reason_name(
        error_pb2.ERROR_REASON_PERMISSION_DENIED
    ):
        return DENIED
    hidden = case.hidden is not None and why == reason_name(case.hidden)
    if (code is grpc.StatusCode.PERMISSION_DENIED and why in NOT_YOURS) or (
        code is grpc.StatusCode.NOT_FOUND and hidden
    ):
        return OWN_ONLY
    if case.refused is not None and (code, why) == (case.refused[0], reason_name(case.refused[1])):
        return ALLOWED
    return f"{code.name} {why}"


async def test_every_rpc_answers_every_identity_as_docs_security_md_says(tmp_path: Path) -> None:
    """Each mismatch reads "service/Method identity (column): expected X got Y"."""
    expected = documented()
    methods = masa_methods()
    callers = identities()
    mismatches: list[str] = []
    async with running_services(tmp_path) as addresses:
        services = {method.containing_service.full_name for method in methods.values()}
        assert sorted(services - set(addresses)) == [], "services no server started here serves"
        async with AsyncExitStack() as stack:
            channels = {
                service: await stack.enter_async_context(grpc.aio.insecure_channel(address))
                for service, address in addresses.items()
            }
            ticket_id = await _prepare(channels, (caller.name for caller in callers))
            requests = cases(ticket_id)
            mismatches += [
                f"{name[1:]}: a request for no RPC" for name in requests.keys() - methods
            ]
            for name, method in methods.items():
                case, cells = requests.get(name), expected.get(name)
                if case is None or cells is None:
                    missing = "a request in this test" if case is None else "a row in the page"
                    mismatches.append(f"{name[1:]}: has no {missing}")
                    continue
                channel = channels[method.containing_service.full_name]
                for caller in callers:
                    request = case.request(caller.name)
                    got = _outcome(case, await _call(channel, method, request, caller.metadata))
                    if got != cells[caller.column]:
                        mismatches.append(
                            f"{name[1:]} {caller.name} ({caller.column}): "
                            f"expected {cells[caller.column]} got {got}"
                        )
    assert not mismatches, "\n".join(mismatches)
