"""Who may publish and subscribe to what on the bus: one NATS user per service, plus operators.

The table log and the snapshots hold every game's seed and every hand, so no user may read
them but the table-engine (and operators). Each service connects with its own user
(``MASA_NATS_USER``, ``MASA_NATS_PASSWORD``), and its permissions list exactly the subjects it
needs; everything else is denied. The same definitions render the ``authorization`` block of
``make run``, of the tests' nats-server and of ``deploy/nats/nats-server.conf``.

JetStream is reached through subjects too, so the permissions name the JetStream API per stream
and per consumer. What no service user may do, whatever its streams (:mod:`masa_platform.
bus_plan` says why): create, update, delete or purge a stream or bucket (``STREAM.CREATE``,
``.UPDATE``, ``.DELETE``, ``.PURGE``: a stream's RePublish, Sources and Mirror are not checked
against the user's subjects), make or remove a durable consumer, or touch another service's
consumer. What is left:

- reads through the direct-get API (``$JS.API.DIRECT.GET.<stream>``, which needs no consumer;
  with the subject in the API subject it reads only that subject's last message, so the ledger
  may read a table's last result and nothing else of the table stream);
- the provisioned durable consumer of its own, by name: fetch (``CONSUMER.MSG.NEXT``), info and
  acks (``$JS.ACK.<stream>.<name>.>``);
- for matchmaking, which mirrors two buckets of its own through KV watches, ephemeral consumers
  on those two buckets only;
- publishing to its own subjects (KV writes are publishes to ``$KV.<bucket>.<key>``) and to its
  own dead-letter subject ``masa.deadletter.v1.<user>.>``.

Replies come back on a per-user inbox (``_INBOX.<user>.>``), which no other user may subscribe
to, and no service user may subscribe to anything else. A push consumer's deliver subject is
not checked against permissions: aimed at a stream subject it stores nothing, and aimed at
another service's fetch inbox its messages are dropped there (:mod:`masa_platform.consumer`
takes only its own durable's).

The plan for the four services:

- ``table-engine``: writes and reads the ``MASA_TABLES`` stream (logs and results) and the
  buckets ``masa_table_snapshots``, ``masa_table_leases``, ``masa_table_index`` and the
  engine-node registry ``masa_engine_nodes``;
- ``ledger``: consumes the results through ``ledger-settlement``, reads a table's last result,
  writes the ``MASA_LEDGER`` stream (``masa.ledger.v1.>``);
- ``matchmaking``: consumes the results through ``matchmaking-ratings``, reads
  ``masa_engine_nodes``, writes the ``MASA_MATCHMAKING`` stream (``masa.matchmaking.v1.>``) and
  its buckets: tickets, ratings, the lobby leases and the tables in play;
- ``bot``: stateless, no subject at all (its user exists so that it can never borrow another's);
- ``retention``: the operators' sweep of finished tables (``masa-bus sweep``,
  :mod:`masa_platform.retention`), no service's: it reads how far the two result consumers
  have acknowledged (their info, not their messages), reads the results through a consumer of
  its own whose filter the API subject names (nats-server refuses a config whose filter differs,
  so it can read no table log), reads the dead letters, and purges ``MASA_TABLES`` and the
  buckets ``masa_table_snapshots`` and ``masa_table_index``. It may publish to no masa subject
  and create, update or delete no stream. A purge's subject filter is in the request's body,
  which permissions do not see: the user may purge any table's subjects, not only a finished
  one's, so its password is kept like the operators';
- ``admin``: operators, everything (the provisioning step and ``masa admin`` run as it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

__all__ = [
    "ADMIN",
    "BOT",
    "DEAD_LETTER_STREAM",
    "ENGINE_NODES_BUCKET",
    "LEDGER",
    "LEDGER_RESULTS_CONSUMER",
    "LEDGER_STREAM",
    "MATCHMAKING",
    "MATCHMAKING_RESULTS_CONSUMER",
    "MATCHMAKING_STREAM",
    "RESULTS",
    "RETENTION",
    "RETENTION_READER",
    "SERVICE_USERS",
    "SWEPT_BUCKETS",
    "TABLES_STREAM",
    "TABLE_ENGINE",
    "BusUser",
    "authorization_block",
    "bus_users",
    "dead_letter_subject",
    "deployment_authorization",
    "inbox_prefix",
    "password_variable",
]

TABLE_ENGINE: Final = "table-engine"
BOT: Final = "bot"
LEDGER: Final = "ledger"
MATCHMAKING: Final = "matchmaking"
RETENTION: Final = "retention"
ADMIN: Final = "admin"
SERVICE_USERS: Final = (TABLE_ENGINE, BOT, LEDGER, MATCHMAKING)

TABLES_STREAM: Final = "MASA_TABLES"
LEDGER_STREAM: Final = "MASA_LEDGER"
MATCHMAKING_STREAM: Final = "MASA_MATCHMAKING"
DEAD_LETTER_STREAM: Final = "MASA_DEAD_LETTERS"
TABLE_BUCKETS: Final = (
    "masa_table_snapshots",
    "masa_table_leases",
    "masa_table_index",
    "masa_engine_nodes",
)
# The buckets that keep a table's entries after it finished (a lease expires by itself).
SWEPT_BUCKETS: Final = ("masa_table_snapshots", "masa_table_index")
ENGINE_NODES_BUCKET: Final = "masa_engine_nodes"
MATCHMAKING_BUCKETS: Final = (
    "masa_matchmaking_tickets",
    "masa_matchmaking_ratings",
    "masa_matchmaking_leases",
    "masa_matchmaking_tables",
)
# The buckets matchmaking mirrors through KV watches (ephemeral ordered consumers).
WATCHED_BUCKETS: Final = ("masa_matchmaking_tickets", "masa_matchmaking_tables")
RESULTS: Final = "masa.table.v1.*.result"
LEDGER_RESULTS_CONSUMER: Final = "ledger-settlement"
MATCHMAKING_RESULTS_CONSUMER: Final = "matchmaking-ratings"
# The retention user's own consumer of the results, made and removed by each sweep.
RETENTION_READER: Final = "retention-sweep"

_API: Final = "$JS.API"


@dataclass(frozen=True, slots=True)
class BusUser:
    """A NATS user and the subjects it may publish and subscribe to (all else is denied)."""

    name: str
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]


def inbox_prefix(user: str) -> str:
    """The reply subjects of ``user``'s requests; only that user may subscribe to them."""
    return f"_INBOX.{user}" if user else "_INBOX"


def dead_letter_subject(user: str, consumer: str) -> str:
    """Where ``user``'s consumer ``consumer`` sets aside a message it can never handle."""
    return f"masa.deadletter.v1.{user}.{consumer}"


def _reader(stream: str) -> tuple[str, ...]:
    """Read a stream's stored messages and its configuration; nothing else."""
    return (
        f"{_API}.STREAM.INFO.{stream}",
        f"{_API}.STREAM.MSG.GET.{stream}",
        f"{_API}.DIRECT.GET.{stream}",
        f"{_API}.DIRECT.GET.{stream}.>",
    )


def _writer(stream: str, subjects: tuple[str, ...]) -> tuple[str, ...]:
    """Publish to a stream's subjects and read it back."""
    return (*subjects, *_reader(stream))


def _bucket(bucket: str) -> tuple[str, ...]:
    return _writer(f"KV_{bucket}", (f"$KV.{bucket}.>",))


def _watcher(bucket: str) -> tuple[str, ...]:
    """Ephemeral consumers on one bucket (a KV watch: nats-py's ordered push consumer, whose
    create subject names neither the consumer nor its filter). Only that subject: on it the
    server refuses a durable name, so no consumer made here outlives its connection."""
    stream = f"KV_{bucket}"
    return (
        f"{_API}.CONSUMER.CREATE.{stream}",
        f"{_API}.CONSUMER.INFO.{stream}.>",
        f"{_API}.CONSUMER.DELETE.{stream}.>",
    )


def _durable(stream: str, name: str) -> tuple[str, ...]:
    """Fetch from, ask about and acknowledge one provisioned durable consumer."""
    return (
        f"{_API}.CONSUMER.INFO.{stream}.{name}",
        f"{_API}.CONSUMER.MSG.NEXT.{stream}.{name}",
        f"$JS.ACK.{stream}.{name}.>",
    )


def _results_reader(name: str) -> tuple[str, ...]:
    """Make, read and remove a consumer called ``name`` of the table results only: the filter
    is part of the create subject, and nats-server refuses a config whose filter differs (or
    that names several), so no consumer of this name can see a table's log."""
    return (
        f"{_API}.CONSUMER.CREATE.{TABLES_STREAM}.{name}.{RESULTS}",
        f"{_API}.CONSUMER.MSG.NEXT.{TABLES_STREAM}.{name}",
        f"{_API}.CONSUMER.DELETE.{TABLES_STREAM}.{name}",
    )


def _user(name: str, *publish: tuple[str, ...]) -> BusUser:
    # Every user may ask JetStream whether it is up (health probes); it hears only its own
    # inbox.
    subjects = tuple(subject for group in publish for subject in group)
    return BusUser(name, (*subjects, f"{_API}.INFO"), (f"{inbox_prefix(name)}.>",))


def bus_users() -> tuple[BusUser, ...]:
    """Every masa user with its permissions."""
    return (
        _user(
            TABLE_ENGINE,
            _writer(TABLES_STREAM, ("masa.table.v1.*.log", RESULTS)),
            *(_bucket(bucket) for bucket in TABLE_BUCKETS),
        ),
        _user(BOT),
        _user(
            LEDGER,
            _durable(TABLES_STREAM, LEDGER_RESULTS_CONSUMER),
            # One table's last result (SettleGame by hand), by subject: never the log.
            (f"{_API}.DIRECT.GET.{TABLES_STREAM}.{RESULTS}",),
            ("masa.ledger.v1.>", dead_letter_subject(LEDGER, ">")),
        ),
        _user(
            MATCHMAKING,
            _durable(TABLES_STREAM, MATCHMAKING_RESULTS_CONSUMER),
            _reader(f"KV_{ENGINE_NODES_BUCKET}"),
            ("masa.matchmaking.v1.>", dead_letter_subject(MATCHMAKING, ">")),
            *(_bucket(bucket) for bucket in MATCHMAKING_BUCKETS),
            *(_watcher(bucket) for bucket in WATCHED_BUCKETS),
            # Flow control of those watches' push consumers.
            ("$JS.FC.>",),
        ),
        _user(
            RETENTION,
            # How far each result consumer has acknowledged: its info, never its messages.
            tuple(
                f"{_API}.CONSUMER.INFO.{TABLES_STREAM}.{name}"
                for name in (LEDGER_RESULTS_CONSUMER, MATCHMAKING_RESULTS_CONSUMER)
            ),
            _results_reader(RETENTION_READER),
            # The results a consumer set aside are kept for an operator.
            (f"{_API}.DIRECT.GET.{DEAD_LETTER_STREAM}",),
            (
                f"{_API}.STREAM.PURGE.{TABLES_STREAM}",
                *(f"{_API}.STREAM.PURGE.KV_{bucket}" for bucket in SWEPT_BUCKETS),
            ),
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
