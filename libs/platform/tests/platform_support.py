"""Shared by the masa_platform tests: the test service name, the serve factory type and test
certificates (a module with a unique name, so the tests never import ``conftest``)."""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeAlias

import grpc.aio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from masa_platform.auth import AuthPolicy, Role
from masa_platform.server import GrpcServer

# Test modules address methods as f"/{TEST_SERVICE}/Name".
TEST_SERVICE = "masa.test.v1.TestService"
# The test service is a player's to call, as a game's API is (access is deny-by-default).
PLAYERS_POLICY = AuthPolicy(allowed={TEST_SERVICE: frozenset({Role.PLAYER})})

ServeFactory = Callable[..., AbstractAsyncContextManager[GrpcServer]]


# The test service's methods by name, served with no serializers: raw bytes both ways.
Handlers: TypeAlias = "dict[str, grpc.RpcMethodHandler[bytes, bytes]]"


# The test service's methods, as a client calls them: raw bytes both ways, as they are served
# with no serializers.
def unary_unary(
    channel: grpc.aio.Channel, name: str
) -> grpc.aio.UnaryUnaryMultiCallable[bytes, bytes]:
    return channel.unary_unary(f"/{TEST_SERVICE}/{name}")


def unary_stream(
    channel: grpc.aio.Channel, name: str
) -> grpc.aio.UnaryStreamMultiCallable[bytes, bytes]:
    return channel.unary_stream(f"/{TEST_SERVICE}/{name}")


def stream_stream(
    channel: grpc.aio.Channel, name: str
) -> grpc.aio.StreamStreamMultiCallable[bytes, bytes]:
    return channel.stream_stream(f"/{TEST_SERVICE}/{name}")


@dataclass(frozen=True)
class Certificates:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    rogue_cert: Path
    rogue_key: Path


def make_certificates(directory: Path) -> Certificates:
    """A CA with a server cert for localhost/127.0.0.1 and a client cert; plus a rogue client."""
    ca_key, ca_cert = _self_signed("masa test CA")
    rogue_ca_key, rogue_ca_cert = _self_signed("rogue CA")
    server_key, server_cert = _issued("localhost", ca_key, ca_cert, server=True)
    client_key, client_cert = _issued("table-engine", ca_key, ca_cert, server=False)
    rogue_key, rogue_cert = _issued("rogue", rogue_ca_key, rogue_ca_cert, server=False)

    def write(name: str, data: bytes) -> Path:
        path = directory / name
        path.write_bytes(data)
        return path

    return Certificates(
        ca=write("ca.pem", _pem(ca_cert)),
        server_cert=write("server.pem", _pem(server_cert)),
        server_key=write("server.key", _key_pem(server_key)),
        client_cert=write("client.pem", _pem(client_cert)),
        client_key=write("client.key", _key_pem(client_key)),
        rogue_cert=write("rogue.pem", _pem(rogue_cert)),
        rogue_key=write("rogue.key", _key_pem(rogue_key)),
    )


def _self_signed(name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _issued(
    name: str, ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate, *, server: bool
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    return key, builder.sign(ca_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
