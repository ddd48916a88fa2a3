from __future__ import annotations

import grpc
import grpc.aio
import pytest
from masa_platform.settings import TlsSettings
from masa_platform.tls import open_channel
from platform_support import Certificates, Handlers, ServeFactory, unary_unary


async def echo(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
    return request


HANDLERS: Handlers = {"Echo": grpc.unary_unary_rpc_method_handler(echo)}


async def test_tls_serves_clients_that_trust_the_ca(
    serve: ServeFactory, certificates: Certificates
) -> None:
    server_tls = TlsSettings(certificates.server_cert, certificates.server_key)
    async with serve(HANDLERS, tls=server_tls) as server:
        async with open_channel(server.address, TlsSettings(tls_ca=certificates.ca)) as channel:
            assert await unary_unary(channel, "Echo")(b"hi", timeout=5) == b"hi"
        async with grpc.aio.insecure_channel(server.address) as plain:
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await unary_unary(plain, "Echo")(b"hi", timeout=2)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_mtls_requires_a_client_certificate_signed_by_the_ca(
    serve: ServeFactory, certificates: Certificates
) -> None:
    server_tls = TlsSettings(
        certificates.server_cert,
        certificates.server_key,
        certificates.ca,
        tls_require_client_cert=True,
    )
    client = TlsSettings(certificates.client_cert, certificates.client_key, certificates.ca)
    no_cert = TlsSettings(tls_ca=certificates.ca)
    rogue = TlsSettings(certificates.rogue_cert, certificates.rogue_key, certificates.ca)
    async with serve(HANDLERS, tls=server_tls) as server:
        async with open_channel(server.address, client) as channel:
            assert await unary_unary(channel, "Echo")(b"hi", timeout=5) == b"hi"
        for refused_client in (no_cert, rogue):
            async with open_channel(server.address, refused_client) as channel:
                with pytest.raises(grpc.aio.AioRpcError) as refused:
                    await unary_unary(channel, "Echo")(b"hi", timeout=2)
                assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
