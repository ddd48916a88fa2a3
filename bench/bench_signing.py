"""What authenticity costs: signing and verifying per result, sealing per action, a token per
call, beside the persist floor each of them rides on.

Prints one JSON document. The baseline, measured in the same run on the same machine, is one
JetStream publish acknowledged by a local nats-server (a stream of the table-log's shape): the
floor every action of a table pays to be logged before it is answered, and every result to be
published. Then, each timed over ``ROUNDS`` rounds of ``N`` and reported as the best round's
mean (the machine is shared; the best round is the least disturbed):

- ``result_sign_us``: the engine signs one game result (Ed25519, masa_platform.signing);
- ``result_verify_us``: the ledger (and, once more, matchmaking) verifies it;
- ``action_seal_us``: the engine seals one log entry (HMAC-SHA256) as it appends it, and
  ``action_check_us`` checks the seal when it reads it back (recovery, a takeover);
- ``token_verify_us``: a server verifies a token it has not seen (EdDSA), and
  ``token_cached_us`` one it has (the verified-token cache every later call hits).

Each cost is also given as a fraction of the persist floor.
"""

from __future__ import annotations

import asyncio
import json
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from masa.common.v1 import game_pb2
from masa.events.v1 import result_pb2
from masa_platform.auth import Role, TokenSigner, TokenVerifier, VerifiedTokens
from masa_platform.bus import connect
from masa_platform.bus_access import TABLE_ENGINE
from masa_platform.keys import ISSUER, RESULTS, Keyring, load_mac_keys
from masa_platform.settings import AuthSettings
from masa_platform.signing import ResultSigner, ResultVerifier, Sealer
from masa_platform.testing import NatsServer

N = 2000
ROUNDS = 5
PUBLISHES = 2000
SUBJECT = "masa.table.v1.bench.result"
LOG_SUBJECT = "masa.table.v1.bench.log"


def best_mean_us(work: Callable[[], object], n: int = N) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for _ in range(n):
            work()
        best = min(best, (time.perf_counter() - started) / n)
    return best * 1e6


def _result() -> bytes:
    """A four-seat salon-51 game's end, as the engine publishes it."""
    table = "0123456789abcdef0123456789abcdef"
    finished = result_pb2.GameFinished(
        event_id=f"{table}:1:game",
        table_id=table,
        game_no=1,
        game=game_pb2.GAME_KIND_FIFTYONE,
        preset=game_pb2.PRESET_SALON,
        mode=game_pb2.MODE_SINGLES,
        stake=100,
        hands_played=7,
        lobby_id="salon-51",
    )
    for seat in range(4):
        finished.ranking.add(seat=seat, player_id=f"player-{seat:04d}", place=seat + 1)
    return result_pb2.TableResult(game_finished=finished).SerializeToString()


async def persist_floor_us(server: NatsServer) -> float:
    """One acknowledged publish to the table-log stream (the engine's own user), best round."""
    nc = await connect(
        server.url, user=TABLE_ENGINE, password=server.password(TABLE_ENGINE), name="bench"
    )
    js = nc.jetstream()
    entry = b"x" * 300
    best = float("inf")
    try:
        for _ in range(ROUNDS):
            started = time.perf_counter()
            for _ in range(PUBLISHES // ROUNDS):
                await js.publish(LOG_SUBJECT, entry)
            best = min(best, (time.perf_counter() - started) / (PUBLISHES // ROUNDS))
    finally:
        await nc.drain()
    return best * 1e6


def crypto_costs(ring: Keyring) -> dict[str, float]:
    payload = _result()
    signer = ResultSigner(ring.signer(RESULTS))
    verifier = ResultVerifier(ring.results_jwks)
    header = signer.header(SUBJECT, payload)
    sealer = Sealer(load_mac_keys(ring.log_mac))
    entry = b"e" * 300
    seal = sealer.seal(LOG_SUBJECT, entry)
    auth = AuthSettings(jwt_jwks_file=ring.jwks)
    issuer = TokenSigner(ring.signer(ISSUER), auth)
    tokens = iter([issuer.mint(f"p{n}", (Role.PLAYER,)) for n in range(N * ROUNDS)])
    fresh = TokenVerifier(auth)
    cached = VerifiedTokens(TokenVerifier(auth))
    one = issuer.mint("cached", (Role.PLAYER,))
    cached.principal(one)
    return {
        "result_sign_us": best_mean_us(lambda: signer.header(SUBJECT, payload)),
        "result_verify_us": best_mean_us(lambda: verifier.verify(SUBJECT, payload, header)),
        "action_seal_us": best_mean_us(lambda: sealer.seal(LOG_SUBJECT, entry)),
        "action_check_us": best_mean_us(lambda: sealer.holds(LOG_SUBJECT, entry, seal)),
        "token_verify_us": best_mean_us(lambda: fresh.verify(next(tokens))),
        "token_cached_us": best_mean_us(lambda: cached.principal(one)),
        "result_bytes": len(payload),
        "result_signature_header_bytes": len(header),
    }


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="masa-bench-signing-") as folder:
        ring = Keyring.generate(Path(folder) / "keys")
        with NatsServer(Path(folder) / "nats", secure=True) as server:
            floor = asyncio.run(persist_floor_us(server))
        costs = crypto_costs(ring)
    per_result = costs["result_sign_us"] + 2 * costs["result_verify_us"]
    per_action = costs["action_seal_us"]
    print(
        json.dumps(
            {
                "benchmark": "signing",
                "machine": platform.machine(),
                "python": platform.python_version(),
                "persist_floor_us": round(floor, 1),
                **{k: round(v, 2) for k, v in costs.items()},
                "per_result_us": round(per_result, 1),
                "per_result_of_floor": round(per_result / floor, 3),
                "per_action_us": round(per_action, 2),
                "per_action_of_floor": round(per_action / floor, 4),
                "token_verify_of_floor": round(costs["token_verify_us"] / floor, 3),
            },
            sort_keys=True,
        )
    )


if __name__ == "__main__":
    main()
