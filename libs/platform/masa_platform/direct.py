"""Reads of stored messages through JetStream's direct-get API: no consumer, no state left.

A service may read a stream without being allowed to make consumers on it (a consumer's name
is not a permission boundary: whoever may create one may also re-create another service's
durable under its name). Direct gets are plain requests:

- :func:`messages_after` asks for the messages of a subject filter after a stream sequence in
  batches (nats-server 2.11's batched direct get: one request, many replies, ended by a status
  204 "EOB" whose ``Nats-Num-Pending`` says what is left), so a long log costs a few round trips;
  :func:`batches_after` hands the same reads over one batch at a time, for a reader that must
  not hold them all at once;
- :func:`last_message` asks for a subject's last message with the subject in the API subject
  (``$JS.API.DIRECT.GET.<stream>.<subject>``), which a permission can allow for some subjects
  only;
- :func:`last_messages` asks for the last message of each of many subjects (2.11's
  ``multi_last``), a batch of subjects per request, instead of a request per subject.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg

__all__ = [
    "DirectGetFailed",
    "StoredMessage",
    "batches_after",
    "last_message",
    "last_messages",
    "messages_after",
]

_BATCH: Final = 256
_END_OF_BATCH: Final = "204"
_NOT_FOUND: Final = "404"
_SEQUENCE: Final = "Nats-Sequence"
_SUBJECT: Final = "Nats-Subject"
_PENDING: Final = "Nats-Num-Pending"


class DirectGetFailed(nats.errors.Error):
    """JetStream answered a direct get with an error status (no such stream, too many
    results, no responders); a NATS error, so callers that treat the bus as unavailable do."""


@dataclass(frozen=True, slots=True)
class StoredMessage:
    """A message as the stream stores it: its stream sequence, subject, payload and headers
    (the writer's and JetStream's own ``Nats-*`` ones)."""

    seq: int
    subject: str
    data: bytes
    headers: Mapping[str, str]


async def messages_after(
    nc: Client,
    stream: str,
    subjects: str,
    *,
    after: int = 0,
    timeout: float = 5.0,
) -> list[StoredMessage]:
    """Every message of ``stream`` on ``subjects`` (a filter, wildcards allowed) whose stream
    sequence is above ``after``, oldest first."""
    found: list[StoredMessage] = []
    async for batch in batches_after(nc, stream, subjects, after=after, timeout=timeout):
        found.extend(batch)
    return found


async def batches_after(
    nc: Client,
    stream: str,
    subjects: str,
    *,
    after: int = 0,
    batch: int = _BATCH,
    timeout: float = 5.0,
) -> AsyncIterator[list[StoredMessage]]:
    """The messages :func:`messages_after` reads, one batch of at most ``batch`` at a time."""
    start = after + 1
    while True:
        found, pending = await _batch(
            nc,
            f"$JS.API.DIRECT.GET.{stream}",
            json.dumps({"seq": start, "next_by_subj": subjects, "batch": batch}).encode(),
            timeout,
        )
        if found:
            yield found
        if not found or pending <= 0:
            return
        start = found[-1].seq + 1


async def last_message(
    nc: Client, stream: str, subject: str, *, timeout: float = 5.0
) -> StoredMessage | None:
    """The last message ``stream`` holds on ``subject`` (no wildcard), or None."""
    batch, _ = await _batch(nc, f"$JS.API.DIRECT.GET.{stream}.{subject}", b"", timeout, single=True)
    return batch[0] if batch else None


async def last_messages(
    nc: Client, stream: str, subjects: Sequence[str], *, timeout: float = 5.0
) -> list[StoredMessage]:
    """The last message ``stream`` holds on each of ``subjects`` (no wildcards) that has one,
    ``_BATCH`` subjects a request: the server refuses a request with too many results."""
    found: list[StoredMessage] = []
    for start in range(0, len(subjects), _BATCH):
        chunk = list(subjects[start : start + _BATCH])
        batch, pending = await _batch(
            nc,
            f"$JS.API.DIRECT.GET.{stream}",
            json.dumps({"multi_last": chunk, "batch": len(chunk)}).encode(),
            timeout,
        )
        if pending > 0:
            # Cut short (the server's byte limit): a key left out would read as absent.
            raise DirectGetFailed(f"{stream}: {pending} last messages left unanswered")
        found.extend(batch)
    return found


async def _batch(
    nc: Client, api_subject: str, request: bytes, timeout: float, *, single: bool = False
) -> tuple[list[StoredMessage], int]:
    """One direct-get request and its replies: the messages, and how many more match. A
    ``single`` get (not batched) is answered with one message and no end-of-batch marker."""
    inbox = nc.new_inbox()
    subscription = await nc.subscribe(inbox)
    try:
        await nc.publish(api_subject, request, reply=inbox)
        found: list[StoredMessage] = []
        while True:
            reply = await subscription.next_msg(timeout=timeout)
            headers = reply.headers or {}
            status = headers.get("Status")
            if status is None:
                found.append(_stored(reply, headers))
                if single:
                    return found, 0
                continue
            if status == _END_OF_BATCH:
                return found, int(headers.get(_PENDING, "0") or 0)
            if status == _NOT_FOUND:
                return found, 0
            raise DirectGetFailed(
                f"{api_subject}: status {status} {headers.get('Description', '')}"
            )
    finally:
        await subscription.unsubscribe()


def _stored(reply: Msg, headers: Mapping[str, str]) -> StoredMessage:
    return StoredMessage(
        seq=int(headers[_SEQUENCE]),
        subject=headers.get(_SUBJECT, ""),
        data=reply.data,
        headers=headers,
    )
