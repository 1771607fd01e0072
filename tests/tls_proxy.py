"""A TLS-terminating TCP proxy in front of the dev server, and the certificates it needs, made
on the spot with `cryptography`: what Temporal Cloud or a TLS-fronted server looks like to the
worker and client.py, on loopback.

`make_pki(dir)` writes a CA, a server certificate (localhost and 127.0.0.1) and a client
certificate it signed. `TLSProxy(upstream, server_cert, server_key, client_ca=None)` runs in
threads of its own (the processes under test are subprocesses that block the test's loop); with
`client_ca` it requires a client certificate signed by that CA (mTLS)."""

from __future__ import annotations

import datetime
import ipaddress
import select
import socket
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def _issue(
    name: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
    **kind: bool,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer_name, signer = issuer or (subject, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if issuer is None:
        usage = x509.KeyUsage(False, False, False, False, False, True, True, False, False)  # cert and CRL signing
        builder = builder.add_extension(usage, critical=True)
    if kind.get("server"):
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    if kind.get("client"):
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return builder.sign(signer, hashes.SHA256())


def make_pki(root: Path) -> Pki:
    root.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _issue("durable-agent-runner test CA", ca_key, None)
    files: dict[str, Path] = {}

    def write(name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey | None = None) -> None:
        files[f"{name}_cert"] = root / f"{name}.pem"
        files[f"{name}_cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        if key is not None:
            files[f"{name}_key"] = root / f"{name}.key"
            files[f"{name}_key"].write_bytes(
                key.private_bytes(
                    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
                )
            )

    write("ca", ca)
    for name, kind in (("server", {"server": True}), ("client", {"client": True})):
        key = ec.generate_private_key(ec.SECP256R1())
        write(name, _issue(f"{name}.test", key, (ca.subject, ca_key), **kind), key)
    return Pki(**files)


class TLSProxy:
    """TLS on the outside, plain TCP to `upstream` ("host:port") inside:
    `with TLSProxy(...) as proxy:` and connect to `proxy.target`.

    Threads and blocking sockets, not asyncio: a failed handshake then reaches the client as
    OpenSSL's alert (`certificate required`, as Temporal Cloud sends it), where asyncio's TLS
    drops the connection without one. One thread per connection relays both ways."""

    def __init__(self, upstream: str, cert: Path, key: Path, client_ca: Path | None = None) -> None:
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(cert, key)
        self.context.set_alpn_protocols(["h2"])  # gRPC is HTTP/2
        if client_ca is not None:
            self.context.verify_mode = ssl.CERT_REQUIRED
            self.context.load_verify_locations(client_ca)
        self.refused = 0  # handshakes that failed: a client without a valid certificate, say
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self._listener.getsockname()[1]}"

    def __enter__(self) -> TLSProxy:
        self._spawn(self._accept)
        return self

    def __exit__(self, *exc: object) -> None:
        self._closed.set()
        self._listener.close()
        for thread in self._threads:
            thread.join(5)

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        self._listener.settimeout(0.2)
        while not self._closed.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._spawn(self._serve, conn)

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(10)
        try:
            tls = self.context.wrap_socket(conn, server_side=True)
        except (ssl.SSLError, OSError):
            self.refused += 1
            _linger(conn)
            return
        with tls, socket.create_connection(self.upstream, timeout=10) as up:
            tls.settimeout(None)
            up.settimeout(None)
            while not self._closed.is_set():
                ready = [tls] if tls.pending() else select.select([tls, up], [], [], 0.2)[0]
                try:
                    for source, sink in ((tls, up), (up, tls)):
                        if source in ready:
                            data = source.recv(65536)
                            if not data:
                                return
                            sink.sendall(data)
                except (OSError, ssl.SSLError):
                    return


def _linger(conn: socket.socket) -> None:
    """Close after the client has read our alert: closing with its next bytes unread would send a
    reset, which can discard the alert before the client reads it."""
    try:
        conn.shutdown(socket.SHUT_WR)
        conn.settimeout(1)
        while conn.recv(65536):
            pass
    except OSError:
        pass
    finally:
        conn.close()
