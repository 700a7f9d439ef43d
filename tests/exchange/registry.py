"""A real OCI registry on loopback for the push/pull tests: Debian's ``docker-registry`` (the CNCF
distribution registry, installed by ``scripts/setup-registry.sh``), one instance per test module
on a free port with its own storage folder, and either htpasswd (bcrypt) basic auth or token auth
(``Bearer realm=…``) answered by :class:`TokenServer`, a small loopback token service that
signs ES256 JWTs with a certificate the registry trusts."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest

from replaykit.models.engines import free_port

USER, PASSWORD = "alice", "correct horse battery staple"
SERVICE, ISSUER = "replaykit-test-registry", "replaykit-test-issuer"


def registry_binary() -> str:
    """``docker-registry``, or the test fails under CI (skips elsewhere) naming the set-up."""
    found = shutil.which("docker-registry")
    if found:
        return found
    why = "docker-registry is not installed (bash scripts/setup-registry.sh)"
    if os.environ.get("CI"):
        pytest.fail(f"registry tests must run in CI: {why}", pytrace=False)
    pytest.skip(why)


def htpasswd_line(user: str, password: str) -> str:
    """A bcrypt htpasswd line (``htpasswd -nbB``, apache2-utils)."""
    tool = shutil.which("htpasswd")
    if tool is None:
        pytest.fail(
            "htpasswd is not installed (apache2-utils; bash scripts/setup-registry.sh)", pytrace=False
        )
    out = subprocess.run([tool, "-nbB", user, password], capture_output=True, text=True, check=True)
    return out.stdout.strip() + "\n"


@dataclass
class Running:
    """A started registry: where it listens and where it keeps its blobs."""

    host: str  # 127.0.0.1:PORT
    storage: Path

    def ref(self, path: str) -> str:
        return f"oci://{self.host}/{path}"

    def blob_file(self, digest: str) -> Path:
        hexa = digest.removeprefix("sha256:")
        return self.storage / "docker/registry/v2/blobs/sha256" / hexa[:2] / hexa / "data"


@contextmanager
def registry(root: Path, auth: str = "htpasswd", token: TokenServer | None = None) -> Iterator[Running]:
    """A ``docker-registry`` on a free loopback port, stopped (and its process gone) after."""
    binary = registry_binary()
    root.mkdir(parents=True, exist_ok=True)
    storage = root / "storage"
    port = free_port()
    if auth == "htpasswd":
        (root / "htpasswd").write_text(htpasswd_line(USER, PASSWORD))
        auth_yaml = f"  htpasswd:\n    realm: replaykit-test\n    path: {root / 'htpasswd'}\n"
    else:
        assert token is not None
        auth_yaml = (
            f"  token:\n    realm: {token.realm}\n    service: {SERVICE}\n    issuer: {ISSUER}\n"
            f"    rootcertbundle: {token.cert_file}\n"
        )
    (root / "config.yml").write_text(
        "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\n"
        f"storage:\n  filesystem:\n    rootdirectory: {storage}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n  secret: {uuid.uuid4().hex}\nauth:\n{auth_yaml}"
    )
    log = open(root / "registry.log", "wb")
    proc = subprocess.Popen([binary, "serve", str(root / "config.yml")], stdout=log, stderr=log)
    try:
        _wait(port, proc, root / "registry.log")
        yield Running(f"127.0.0.1:{port}", storage)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def _wait(port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"docker-registry exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            httpx2.get(f"http://127.0.0.1:{port}/v2/", timeout=1)
            return
        except httpx2.HTTPError:
            time.sleep(0.1)
    raise AssertionError(f"docker-registry did not answer on port {port}: {log.read_text()[-2000:]}")


class TokenServer:
    """A loopback token service: ``GET /token?service=…&scope=repository:NAME:ACTIONS`` with the
    right basic credentials answers an ES256 JWT granting those actions; anything else, 401."""

    def __init__(self, root: Path) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ISSUER)])
        now = time.time()
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(_utc(now - 3600))
            .not_valid_after(_utc(now + 86400))
            .sign(self.key, hashes.SHA256())
        )
        self.cert_der = cert.public_bytes(serialization.Encoding.DER)
        root.mkdir(parents=True, exist_ok=True)
        self.cert_file = root / "token-cert.pem"
        self.cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self.asked: list[str] = []  # the scopes asked for
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.realm = f"http://127.0.0.1:{self.server.server_address[1]}/token"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def token(self, scope: str) -> str:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

        _, name, actions = scope.split(":", 2)
        now = int(time.time())
        header = {"typ": "JWT", "alg": "ES256", "x5c": [base64.b64encode(self.cert_der).decode()]}
        claims = {
            "iss": ISSUER,
            "sub": USER,
            "aud": SERVICE,
            "exp": now + 300,
            "nbf": now - 10,
            "iat": now,
            "jti": uuid.uuid4().hex,
            "access": [{"type": "repository", "name": name, "actions": actions.split(",")}],
        }
        signing = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        r, s = decode_dss_signature(self.key.sign(signing.encode(), ec.ECDSA(hashes.SHA256())))
        return f"{signing}.{_b64(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self
        expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                query = parse_qs(urlsplit(self.path).query)
                scope = (query.get("scope") or [""])[0]
                owner.asked.append(scope)
                if self.headers.get("Authorization") != expected or query.get("service") != [SERVICE]:
                    self.send_response(401)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = json.dumps({"token": owner.token(scope), "expires_in": 300}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)
