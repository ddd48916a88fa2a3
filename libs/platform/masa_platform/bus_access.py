"""Who may publish and subscribe to what on the bus: one NATS user per service, plus ops.

The table log and the snapshots hold every game's seed and every hand, so no client may read
them but the table-engine (and operators). Each service connects with its own user
(``MASA_NATS_USER``, ``MASA_NATS_PASSWORD``), and its permissions list exactly the subjects it
needs; everything else is denied. The same definitions render the ``authorization`` block of
``make run``, of the tests' nats-server and of ``deploy/nats/nats-server.conf``.

JetStream is reached through subjects too, so the permissions name the JetStream API per
stream: ``$JS.API.STREAM.MSG.GET.MASA_TABLES`` (read a stored message),
``$JS.API.DIRECT.GET.<stream>`` (the same, direct), ``$JS.API.CONSUMER.CREATE.<stream>.<name>.
<filter>`` (a consumer; nats-server checks that the filter in the subject is the consumer's),
``$JS.API.CONSUMER.MSG.NEXT.<stream>.<name>`` (fetch from it). A result consumer may therefore
be created only with a result filter, never on the log. Replies come back on a per-user inbox
(``_INBOX.<user>.>``), which no other user may subscribe to.

The plan for the four services:

- ``table-engine``: the ``MASA_TABLES`` stream (log and results), the buckets
  ``masa_table_snapshots``, ``masa_table_leases``, ``masa_table_index`` and the engine-node
  registry ``masa_engine_nodes`` (for the heartbeats matchmaking reads);
- ``ledger``: consumes ``masa.table.v1.*.result``, owns the ``MASA_LEDGER`` stream
  (``masa.ledger.v1.>``);
- ``matchmaking``: reads ``masa_engine_nodes`` and the results, owns the ``MASA_MATCHMAKING``
  stream (``masa.matchmaking.v1.>``) and its buckets: tickets, ratings, the lobby leases
  ``masa_matchmaking_leases`` and the tables in play;
- ``bot``: stateless, no subject at all (its user exists so that it can never borrow another's);
- ``admin``: operators, everything.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "ADMIN",
    "BOT",
    "LEDGER",
    "MATCHMAKING",
    "TABLE_ENGINE",
    "BusUser",
    "authorization_block",
    "bus_users",
    "deployment_authorization",
    "inbox_prefix",
    "password_variable",
]

TABLE_ENGINE: Final = "table-engine"
BOT: Final = "bot"
LEDGER: Final = "ledger"
MATCHMAKING: Final = "matchmaking"
ADMIN: Final = "admin"

TABLES_STREAM: Final = "MASA_TABLES"
LEDGER_STREAM: Final = "MASA_LEDGER"
MATCHMAKING_STREAM: Final = "MASA_MATCHMAKING"
TABLE_BUCKETS: Final = (
    "masa_table_snapshots",
    "masa_table_leases",
    "masa_table_index",
    "masa_engine_nodes",
)
ENGINE_NODES_BUCKET: Final = "masa_engine_nodes"
MATCHMAKING_BUCKETS: Final = (
    "masa_matchmaking_tickets",
    "masa_matchmaking_ratings",
    "masa_matchmaking_leases",
    "masa_matchmaking_tables",
)
RESULTS: Final = "masa.table.v1.*.result"


@dataclass(frozen=True, slots=True)
class BusUser:
    """A NATS user and the subjects it may publish and subscribe to (all else is denied)."""

    name: str
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]


def inbox_prefix(user: str) -> str:
    """The reply subjects of ``user``'s requests; only that user may subscribe to them."""
    return f"_INBOX.{user}" if user else "_INBOX"


def _stream_owner(
    stream: str, subjects: tuple[str, ...], *, purge: bool = False
) -> tuple[str, ...]:
    """Create, read and write a stream: its subjects, stored messages and consumers; with
    ``purge``, remove a subject's messages (KvBucket.forget)."""
    api = "$JS.API"
    return (
        *subjects,
        f"{api}.STREAM.CREATE.{stream}",
        f"{api}.STREAM.UPDATE.{stream}",
        f"{api}.STREAM.INFO.{stream}",
        *((f"{api}.STREAM.PURGE.{stream}",) if purge else ()),
        f"{api}.STREAM.MSG.GET.{stream}",
        f"{api}.DIRECT.GET.{stream}",
        f"{api}.DIRECT.GET.{stream}.>",
        # An unnamed consumer (a KV watch: nats-py's ordered push consumer) has no name in
        # its subject.
        f"{api}.CONSUMER.CREATE.{stream}",
        f"{api}.CONSUMER.CREATE.{stream}.>",
        f"{api}.CONSUMER.DURABLE.CREATE.{stream}.>",
        f"{api}.CONSUMER.INFO.{stream}.>",
        f"{api}.CONSUMER.DELETE.{stream}.>",
        f"{api}.CONSUMER.MSG.NEXT.{stream}.>",
        f"$JS.ACK.{stream}.>",
    )


def _bucket_owner(bucket: str) -> tuple[str, ...]:
    return _stream_owner(f"KV_{bucket}", (f"$KV.{bucket}.>",), purge=True)


def _bucket_reader(bucket: str) -> tuple[str, ...]:
    stream = f"KV_{bucket}"
    api = "$JS.API"
    return (
        f"{api}.STREAM.INFO.{stream}",
        f"{api}.STREAM.MSG.GET.{stream}",
        f"{api}.DIRECT.GET.{stream}",
        f"{api}.DIRECT.GET.{stream}.>",
        f"{api}.CONSUMER.CREATE.{stream}.>",
        f"{api}.CONSUMER.INFO.{stream}.>",
        f"{api}.CONSUMER.DELETE.{stream}.>",
        f"{api}.CONSUMER.MSG.NEXT.{stream}.>",
    )


def _results_consumer() -> tuple[str, ...]:
    """A consumer of the game results only: its filter must be the result subjects."""
    api = "$JS.API"
    return (
        f"{api}.CONSUMER.CREATE.{TABLES_STREAM}.*.{RESULTS}",
        f"{api}.CONSUMER.INFO.{TABLES_STREAM}.*",
        f"{api}.CONSUMER.DELETE.{TABLES_STREAM}.*",
        f"{api}.CONSUMER.MSG.NEXT.{TABLES_STREAM}.*",
        f"$JS.ACK.{TABLES_STREAM}.>",
    )


def _user(name: str, *publish: tuple[str, ...]) -> BusUser:
    # Every user may ask JetStream whether it is up (health probes) and answer the flow
    # control of its own push consumers; it hears only its own inbox.
    subjects = tuple(subject for group in publish for subject in group)
    return BusUser(name, (*subjects, "$JS.API.INFO", "$JS.FC.>"), (f"{inbox_prefix(name)}.>",))


def bus_users() -> tuple[BusUser, ...]:
    """Every masa user with its permissions."""
    return (
        _user(
            TABLE_ENGINE,
            _stream_owner(TABLES_STREAM, ("masa.table.v1.*.log", RESULTS)),
            *(_bucket_owner(bucket) for bucket in TABLE_BUCKETS),
        ),
        _user(BOT),
        _user(
            LEDGER,
            _results_consumer(),
            _stream_owner(LEDGER_STREAM, ("masa.ledger.v1.>",)),
        ),
        _user(
            MATCHMAKING,
            _results_consumer(),
            _bucket_reader(ENGINE_NODES_BUCKET),
            _stream_owner(MATCHMAKING_STREAM, ("masa.matchmaking.v1.>",)),
            *(_bucket_owner(bucket) for bucket in MATCHMAKING_BUCKETS),
        ),
        BusUser(ADMIN, (">",), (">",)),
    )


def authorization_block(passwords: Mapping[str, str]) -> str:
    """The nats-server ``authorization`` block for the users named in ``passwords``.

    A password starting with ``$`` is written as a variable reference (nats-server reads it
    from its environment, as the deployment config does); any other is written quoted.
    """
    lines = ["authorization {", "  users = ["]
    for user in bus_users():
        if user.name not in passwords:
            continue
        password = passwords[user.name]
        secret = password if password.startswith("$") else _quoted(password)
        lines += [
            "    {",
            f"      user: {_quoted(user.name)}",
            f"      password: {secret}",
            "      permissions: {",
            f"        publish: {{ allow: {_list(user.publish)} }}",
            f"        subscribe: {{ allow: {_list(user.subscribe)} }}",
            "      }",
            "    }",
        ]
    lines += ["  ]", "}"]
    return "\n".join(lines) + "\n"


def password_variable(user: str) -> str:
    """The environment variable a deployed nats-server reads ``user``'s password from."""
    return "MASA_NATS_" + user.upper().replace("-", "_") + "_PASSWORD"


def deployment_authorization() -> str:
    """The ``authorization`` block of ``deploy/nats/nats-server.conf``: every user, each
    password from the server's environment (a Kubernetes secret, an env file)."""
    return authorization_block(
        {user.name: f"${password_variable(user.name)}" for user in bus_users()}
    )


def _quoted(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _list(subjects: tuple[str, ...]) -> str:
    if len(subjects) == 1:
        return f"[{_quoted(subjects[0])}]"
    inner = "".join(f"\n            {_quoted(subject)}" for subject in subjects)
    return f"[{inner}\n          ]"
