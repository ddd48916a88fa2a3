"""The operator's provisioning step: make the bus hold exactly what the plan says.

:func:`provision` creates every stream, bucket and durable consumer of a
:class:`~masa_platform.bus_plan.BusPlan` that is missing and brings the ones that differ to the
plan (a changed TTL, replicas, a consumer's ack wait); it runs as the operators' NATS user, the
only one allowed to (``masa-bus provision``). Running it again changes nothing. A difference
JetStream cannot apply in place (a stream's storage type) is reported, never papered over by
deleting the stream.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext, api

from masa_platform.bus_plan import BusPlan, ConsumerPlan

__all__ = ["ProvisionFailed", "ProvisionReport", "differences", "provision"]

# The stream fields the plan sets and provisioning keeps equal; the rest are JetStream's.
_STREAM_FIELDS: Final = (
    "subjects",
    "storage",
    "num_replicas",
    "max_age",
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
# Fields JetStream cannot change on an existing stream.
_FIXED: Final = frozenset({"storage"})


class ProvisionFailed(Exception):
    """The bus differs from the plan in a way provisioning may not fix by itself."""


@dataclass(slots=True)
class ProvisionReport:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, list[str]]:
        return {"created": self.created, "updated": self.updated, "unchanged": self.unchanged}


async def provision(nc: Client, plan: BusPlan, *, check_only: bool = False) -> ProvisionReport:
    """Apply ``plan`` (with ``check_only``, only report what applying it would change)."""
    js = nc.jetstream()
    report = ProvisionReport()
    for config in plan.stream_configs():
        await _stream(js, config, report, check_only=check_only)
    for consumer in plan.consumers:
        await _consumer(js, consumer, report, check_only=check_only)
    return report


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
