"""TLS and mTLS credentials from :class:`TlsSettings`, for servers and for the channels they dial.

One set of files serves both sides: a service presents ``tls_cert``/``tls_key`` as a server and,
under mTLS, as a client, and trusts peers signed by ``tls_ca``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import grpc
import grpc.aio

from masa_platform import tracing
from masa_platform.settings import TlsSettings

__all__ = ["channel_credentials", "open_channel", "server_credentials"]


def server_credentials(tls: TlsSettings) -> grpc.ServerCredentials:
    """Server credentials; with ``tls_require_client_cert`` clients must present a cert."""
    if tls.tls_cert is None or tls.tls_key is None:
        raise ValueError("TLS is not configured: set MASA_TLS_CERT and MASA_TLS_KEY")
    root = _read(tls.tls_ca) if tls.tls_ca is not None else None
    return grpc.ssl_server_credentials(
        [(_read(tls.tls_key), _read(tls.tls_cert))],
        root_certificates=root,
        require_client_auth=tls.tls_require_client_cert,
    )


def channel_credentials(tls: TlsSettings) -> grpc.ChannelCredentials:
    """Client credentials: trust ``tls_ca`` (or the system roots) and present our own cert."""
    return grpc.ssl_channel_credentials(
        root_certificates=_read(tls.tls_ca) if tls.tls_ca is not None else None,
        private_key=_read(tls.tls_key) if tls.tls_key is not None else None,
        certificate_chain=_read(tls.tls_cert) if tls.tls_cert is not None else None,
    )


def open_channel(
    target: str,
    tls: TlsSettings | None = None,
    *,
    max_message_bytes: int = 4 * 1024 * 1024,
    options: Sequence[tuple[str, str | int]] = (),
) -> grpc.aio.Channel:
    """A ``grpc.aio`` channel to ``target``, secure when ``tls`` has a CA or a certificate."""
    all_options = [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
        *options,
    ]
    # Traced calls carry their context to the server (when tracing is on).
    interceptors = tracing.client_interceptors()
    if tls is not None and (tls.tls_ca is not None or tls.enabled):
        return grpc.aio.secure_channel(
            target, channel_credentials(tls), options=all_options, interceptors=interceptors
        )
    return grpc.aio.insecure_channel(target, options=all_options, interceptors=interceptors)


def _read(path: Path) -> bytes:
    return path.read_bytes()
