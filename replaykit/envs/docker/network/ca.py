"""The store's mitm certificate authority: generated once, kept in the store folder.

``<store>/network/ca.pem`` holds the private key and the certificate (mode 0600, in a
0700 folder); ``ca-cert.pem`` the certificate alone, which is all a task container ever
gets. The key is a secret: it lives nowhere else — bundles carry rows and blobs, never
this folder — and each proxy gets a private copy in its own temporary folder (mitmproxy
writes beside its CA, and a store must not change under a read).
"""

from __future__ import annotations

import datetime
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from replaykit.core.errors import EnvError

KEY_FILE = "ca.pem"
CERT_FILE = "ca-cert.pem"


@dataclass(frozen=True)
class StoreCA:
    folder: Path

    @property
    def key_and_cert(self) -> Path:
        return self.folder / KEY_FILE

    @property
    def cert(self) -> Path:
        return self.folder / CERT_FILE

    def cert_pem(self) -> bytes:
        return self.cert.read_bytes()

    def private_key_pem(self) -> bytes:
        """The key block of ``ca.pem`` (tests look for it where it must never be)."""
        text = self.key_and_cert.read_bytes()
        end = text.index(b"-----END PRIVATE KEY-----") + len(b"-----END PRIVATE KEY-----")
        return text[:end] + b"\n"

    def confdir(self) -> Path:
        """A private copy for one proxy (mitmproxy's ``confdir``); the caller removes it."""
        tmp = Path(tempfile.mkdtemp(prefix="replaykit-mitm-ca-"))
        target = tmp / "mitmproxy-ca.pem"
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(self.key_and_cert.read_bytes())
        (tmp / "mitmproxy-ca-cert.pem").write_bytes(self.cert_pem())
        return tmp


def network_folder(store_root: Path) -> Path:
    return Path(store_root) / "network"


def ensure_ca(store_root: Path) -> StoreCA:
    """The store's CA, generated on first use."""
    folder = network_folder(store_root)
    ca = StoreCA(folder)
    if ca.key_and_cert.is_file() and ca.cert.is_file():
        return ca
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(folder, 0o700)
        key_pem, cert_pem = _generate(str(store_root))
        _write_private(ca.key_and_cert, key_pem + cert_pem)
        _write_private(ca.cert, cert_pem, mode=0o644)
    except OSError as exc:
        raise EnvError(f"cannot create the frozen network's CA in {folder}: {exc}") from None
    return ca


def _write_private(path: Path, data: bytes, mode: int = 0o600) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _generate(label: str) -> tuple[bytes, bytes]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name(
        [
            x509.NameAttribute(NameOID.COMMON_NAME, "replaykit frozen network CA"),
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "replaykit"),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, label[-60:] or "store"),
        ]
    )
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=2))
        .not_valid_after(now + datetime.timedelta(days=3650))
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
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return key_pem, cert.public_bytes(serialization.Encoding.PEM)
