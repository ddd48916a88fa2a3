"""The operator's provisioning step: make the bus hold exactly what the plan says.

:func:`provision` creates every stream, bucket and durable consumer of a
:class:`~masa_platform.bus_plan.BusPlan` that is missing and brings the ones that differ to the
plan (a changed TTL, replicas, a consumer's ack wait); it runs as the operators' NATS user, the
only one allowed to (``masa-bus provision``). Running it again changes nothing. A difference
JetStream cannot apply in place (a stream's storage type) is reported, never papered over by
deleting the stream.

It also removes what nobody planned and what could move the bus's contents elsewhere: a
consumer on a planned stream that is not the plan's (say one a service user made before the
bus was provisioned, pushing table logs to its inbox), other than those the services make
as they run (matchmaking's watches of its own buckets, into its own inbox; the retention
sweep's reader), and a stream that sources or mirrors a planned stream. Any other stream it
does not know is reported, and left.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext, api

from masa_platform.bus_access import (
    MATCHMAKING,
    RETENTION_READER,
    TABLES_STREAM,
    WATCHED_BUCKETS,
)
from masa_platform.bus_plan import BusPlan, ConsumerPlan

__all__ = ["ProvisionFailed", "ProvisionReport", "differences", "provision"]

# The stream fields the plan sets and provisioning keeps equal; the rest are JetStream's.
_STREAM_FIELDS: Final = (
    "subjects",
    "storage",
    "num_replicas",
    "max_age",
    "max_bytes",
    "max_msgs_per_subject",
    "duplicate_window",
    "discard",
    "allow_direct",
    "allow_rollup_hdrs",
    "allow_msg_ttl",
    "deny_delete",
    "republish",
    "sources",
    "mirror",
)
_CONSUMER_FIELDS: Final = (
    "deliver_policy",
    "ack_policy",
    "ack_wait",
    "max_deliver",
    "max_ack_pending",
    "filter_subject",
    "deliver_subject",
)
# JetStream's page size for stream and consumer listings.
_LIST_PAGE: Final = 256
# Fields JetStream cannot change on an existing stream.
_FIXED: Final = frozenset({"storage"})


class ProvisionFailed(Exception):
    """The bus differs from the plan in a way provisioning may not fix by itself."""


@dataclass(slots=True)
class ProvisionReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    # Consumers and streams nobody planned that could read the bus out (removed).
    removed: list[str] = field(default_factory=list)
    # Streams nobody planned, left as they are.
    unknown: list[str] = field(default_factory=list)

    @property
    def differs(self) -> bool:
        return bool(self.created or self.updated or self.removed or self.unknown)

    def as_json(self) -> dict[str, list[str]]:
        return {
            "created": self.created,
            "updated": self.updated,
            "unchanged": self.unchanged,
            "removed": self.removed,
            "unknown": self.unknown,
        }


async def provision(nc: Client, plan: BusPlan, *, check_only: bool = False) -> ProvisionReport:
    """Apply ``plan`` (with ``check_only``, only report what applying it would change)."""
    js = nc.jetstream()
    report = ProvisionReport()
    for config in plan.stream_configs():
        await _stream(js, config, report, check_only=check_only)
    for consumer in plan.consumers:
        await _consumer(js, consumer, report, check_only=check_only)
    await _strays(js, plan, report, check_only=check_only)
    return report


async def _strays(
    js: JetStreamContext, plan: BusPlan, report: ProvisionReport, *, check_only: bool
) -> None:
    planned = {str(config.name) for config in plan.stream_configs()}
    consumers = {(consumer.stream, consumer.name) for consumer in plan.consumers}
    for stream in sorted(planned):
        for info in await _every(lambda offset, s=stream: js.consumers_info(s, offset)):
            name = str(info.name)
            if (stream, name) in consumers or _made_as_the_services_run(stream, info.config):
                continue
            if not check_only:
                await js.delete_consumer(stream, name)
            report.removed.append(f"consumer {stream}/{name}: not in the plan")
    for stream_info in await _every(js.streams_info):
        name = str(stream_info.config.name)
        if name in planned:
            continue
        copied = sorted(_copied(stream_info.config) & planned)
        if copied:
            if not check_only:
                await js.delete_stream(name)
            report.removed.append(f"stream {name}: copies {', '.join(copied)}")
        else:
            report.unknown.append(f"stream {name}")


async def _every(page: Any) -> list[Any]:
    """Every item of a JetStream listing, page after page."""
    found: list[Any] = []
    while True:
        items = await page(len(found))
        found.extend(items)
        if not items or len(items) < _LIST_PAGE:
            return found


def _made_as_the_services_run(stream: str, config: api.ConsumerConfig) -> bool:
    if stream == TABLES_STREAM:
        # The sweep's reader pulls; one pushing anywhere is not the sweep's.
        return RETENTION_READER in (config.name, config.durable_name) and not config.deliver_subject
    watched = {f"KV_{bucket}" for bucket in WATCHED_BUCKETS}
    own_inbox = f"_INBOX.{MATCHMAKING}."
    return (
        stream in watched
        and not config.durable_name
        and str(config.deliver_subject or "").startswith(own_inbox)
    )


def _copied(config: api.StreamConfig) -> set[str]:
    """The streams ``config`` takes messages from (its sources and its mirror)."""
    names = {str(source.name) for source in config.sources or []}
    if config.mirror is not None:
        names.add(str(config.mirror.name))
    return names


async def _stream(
    js: JetStreamContext, config: api.StreamConfig, report: ProvisionReport, *, check_only: bool
) -> None:
    name = str(config.name)
    try:
        info = await js.stream_info(name)
    except nats.js.errors.NotFoundError:
        if not check_only:
            await js.add_stream(config)
        report.created.append(f"stream {name}")
        return
    changed = differences(info.config, config, _STREAM_FIELDS)
    if not changed:
        report.unchanged.append(f"stream {name}")
        return
    fixed = sorted(_FIXED.intersection(changed))
    if fixed:
        raise ProvisionFailed(
            f"stream {name}: {', '.join(fixed)} differ from the plan and cannot be changed "
            "in place; move its data to a new stream by hand"
        )
    if not check_only:
        await js.update_stream(config)
    report.updated.append(f"stream {name}: {', '.join(changed)}")


async def _consumer(
    js: JetStreamContext, consumer: ConsumerPlan, report: ProvisionReport, *, check_only: bool
) -> None:
    label = f"consumer {consumer.stream}/{consumer.name}"
    try:
        existing = await js.consumer_info(consumer.stream, consumer.name)
    except nats.js.errors.NotFoundError:
        if not check_only:
            await js.add_consumer(consumer.stream, config=consumer.config)
        report.created.append(label)
        return
    changed = differences(existing.config, consumer.config, _CONSUMER_FIELDS)
    if not changed:
        report.unchanged.append(label)
        return
    if not check_only:
        await js.add_consumer(consumer.stream, config=consumer.config)
    report.updated.append(f"{label}: {', '.join(changed)}")


def differences(current: Any, wanted: Any, fields: Iterable[str]) -> list[str]:
    """The ``fields`` in which the bus's ``current`` config differs from the ``wanted`` one;
    a field the plan leaves unset takes JetStream's default and is not compared."""
    return [
        name
        for name in fields
        if not _same(getattr(current, name, None), getattr(wanted, name, None))
    ]


def _same(current: Any, wanted: Any) -> bool:
    if wanted is None:
        # Unset in the plan: JetStream's default, except a route the plan forbids (a
        # RePublish, Sources or a Mirror someone added), which provisioning removes.
        return not current or not _is_route(current)
    if isinstance(wanted, float) or isinstance(current, float):
        return math.isclose(float(current or 0.0), float(wanted), rel_tol=1e-9, abs_tol=1e-6)
    if isinstance(wanted, list):
        return sorted(map(str, current or [])) == sorted(map(str, wanted))
    return bool(current == wanted)


def _is_route(value: Any) -> bool:
    """A stream setting that moves messages elsewhere (RePublish, Sources, Mirror)."""
    return isinstance(value, api.RePublish | api.StreamSource | list)
