"""A loopback HTTPS file server with its own certificate authority, for the frozen-network
tests: the proxy is told to trust it (``REPLAYKIT_NET_UPSTREAM_CA``), nothing else does.

It listens on the host's ``127.0.0.2``: a container reaches it only through the proxy (which runs
on the host), as it would a remote server; ``127.0.0.1`` inside a container is the container's own
loopback, which its ``NO_PROXY`` keeps local."""

from __future__ import annotations

import datetime
import http.server
import ssl
import threading
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

HOST = "127.0.0.2"  # the host's loopback, not a container's own address (see the module)


def _cert(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for the upstream's address and localhost (its own CA)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "replaykit test upstream")])
    now = datetime.datetime.now(datetime.UTC)
    import ipaddress

    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=7))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address(HOST))]
            ),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "upstream-cert.pem", folder / "upstream-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


class FileServer:
    """``with FileServer(root, tmp) as srv:`` serves ``root`` at ``srv.url`` (HTTPS, loopback)."""

    def __init__(self, root: Path, tmp: Path) -> None:
        self.root = root
        tmp.mkdir(parents=True, exist_ok=True)
        self.cert, key = _cert(tmp)
        handler = _handler(root)
        self.server = http.server.ThreadingHTTPServer((HOST, 0), handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.requests: list[str] = []
        self.server.requests = self.requests  # type: ignore[attr-defined]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"https://{HOST}:{self.server.server_address[1]}"

    def __enter__(self) -> FileServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _handler(root: Path) -> type[http.server.SimpleHTTPRequestHandler]:
    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kw: Any) -> None:
            super().__init__(*args, directory=str(root), **kw)

        def do_GET(self) -> None:
            self.server.requests.append(self.path)  # type: ignore[attr-defined]
            super().do_GET()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
