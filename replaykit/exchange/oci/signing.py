"""Signing a pushed artefact with an ed25519 key file, and checking it on pull.

What is signed is the artefact's config digest (the bundle's ``manifest.json``, which lists the
sha256 and size of every other member) with its root id, under a fixed context line: so the
signature covers every byte a pull imports, and a pull checks it before downloading anything
else. The signature and the signer's key fingerprint travel as manifest annotations. Key files:
PEM (``openssl genpkey -algorithm ed25519``; the public half ``openssl pkey -pubout``) or
OpenSSH (``ssh-keygen -t ed25519 -N ''``; the public half the ``.pub`` line). Unencrypted only.
Needs the ``cryptography`` package (``pip install 'replaykit[sign]'``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replaykit.core.errors import ConfigError, ReplaykitError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

SIGNATURE, SIGNER = "replaykit.signature.ed25519", "replaykit.signature.key"
CONTEXT = b"replaykit oci artefact signature v1\n"
HOW = "ed25519 key file: PEM (openssl genpkey -algorithm ed25519) or OpenSSH (ssh-keygen -t ed25519 -N '')"


class SignatureError(ReplaykitError):
    """An artefact that is unsigned, signed by another key, or whose signature does not verify."""


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
    except ImportError:
        raise ConfigError("signing needs the cryptography package: pip install 'replaykit[sign]'") from None
    return serialization


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """An unencrypted ed25519 private key (PEM or OpenSSH)."""
    serialization = _crypto()
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    data = _read(path, "signing key")
    for load in (serialization.load_pem_private_key, serialization.load_ssh_private_key):
        try:
            key = load(data, password=None)
        except TypeError:
            raise ConfigError(f"signing key {path} is encrypted; give an unencrypted {HOW}") from None
        except (ValueError, binascii.Error, UnsupportedAlgorithm):
            continue
        if isinstance(key, Ed25519PrivateKey):
            return key
        raise ConfigError(f"signing key {path} is not an ed25519 key; give an {HOW}")
    raise ConfigError(f"{path} is not a private key replaykit reads; give an {HOW}")


def load_public_key(path: Path) -> Ed25519PublicKey:
    """An ed25519 public key (PEM, an OpenSSH ``.pub`` line), or the public half of a private key file."""
    serialization = _crypto()
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    data = _read(path, "public key")
    from cryptography.exceptions import UnsupportedAlgorithm

    for load in (serialization.load_pem_public_key, serialization.load_ssh_public_key):
        try:
            key = load(data)
        except (ValueError, binascii.Error, TypeError, UnsupportedAlgorithm):
            continue
        if isinstance(key, Ed25519PublicKey):
            return key
        raise ConfigError(f"public key {path} is not an ed25519 key; give the public half of an {HOW}")
    return load_private_key(path).public_key()


def fingerprint(key: Ed25519PublicKey) -> str:
    """``sha256:`` + the first 32 hex digits of the sha256 of the raw public key."""
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    raw = key.public_bytes(Encoding.Raw, PublicFormat.Raw)
    return "sha256:" + hashlib.sha256(raw).hexdigest()[:32]


def _payload(config_digest: str, root_id: str) -> bytes:
    return CONTEXT + f"{config_digest}\n{root_id}\n".encode("ascii")


def sign(key: Ed25519PrivateKey, config_digest: str, root_id: str) -> dict[str, str]:
    """The manifest annotations that sign this artefact."""
    signature = key.sign(_payload(config_digest, root_id))
    return {SIGNATURE: base64.b64encode(signature).decode("ascii"), SIGNER: fingerprint(key.public_key())}


def check(
    annotations: Mapping[str, str], key: Ed25519PublicKey, config_digest: str, root_id: str, source: str
) -> str:
    """Refuse an artefact not signed by ``key`` over this config and root; its signer's fingerprint."""
    from cryptography.exceptions import InvalidSignature

    wanted = fingerprint(key)
    signature, signer = annotations.get(SIGNATURE), annotations.get(SIGNER)
    if not signature:
        raise SignatureError(f"{source} is not signed; refusing (--verify-key wants one signed by {wanted})")
    if signer != wanted:
        raise SignatureError(f"{source} is signed by key {signer}, not by {wanted}; refusing")
    try:
        key.verify(base64.b64decode(signature, validate=True), _payload(config_digest, root_id))
    except (InvalidSignature, binascii.Error, ValueError):
        raise SignatureError(
            f"{source}: its signature does not verify with key {wanted} (tampered or re-signed); refusing"
        ) from None
    return wanted
