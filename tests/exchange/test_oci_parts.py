"""The OCI client's parts without a registry: references, the scheme it speaks, where credentials
come from (and that they never show), signatures, and which manifests a pull accepts."""

from __future__ import annotations

import base64
import json
import stat
from pathlib import Path

import pytest

from replaykit.core.errors import ConfigError
from replaykit.exchange.oci import signing
from replaykit.exchange.oci.client import Registry, RegistryError
from replaykit.exchange.oci.credentials import Credentials, find_credentials
from replaykit.exchange.oci.layout import BLOB_TYPE, CONFIG_TYPE, INDEX_TYPE, TITLE, parse_manifest
from replaykit.exchange.oci.reference import OciRef, ReferenceError, parse_ref

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("oci://127.0.0.1:5000/rk/qs:1", OciRef("127.0.0.1:5000", "rk/qs", "1")),
        ("oci://ghcr.io/team/replaykit/runs:v1.2", OciRef("ghcr.io", "team/replaykit/runs", "v1.2")),
        ("oci://localhost/a", OciRef("localhost", "a")),
        (
            "oci://[::1]:5000/a_b/c-d@sha256:" + "a" * 64,
            OciRef("[::1]:5000", "a_b/c-d", None, "sha256:" + "a" * 64),
        ),
    ],
)
def test_references_parse(text: str, ref: OciRef) -> None:
    assert parse_ref(text) == ref
    assert str(parse_ref(text)) == (text if ref.tag or ref.digest else text + ":latest")


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("https://ghcr.io/a:1", "is not an oci:// reference"),
        ("oci://ghcr.io", "names no repository"),
        ("oci://ghcr.io/", "names no repository"),
        ("oci://gh cr.io/a", "is not a registry host"),
        ("oci://host:99999/a", "is not a registry host"),
        ("oci://host/A/b:1", "is not a repository name"),
        ("oci://host/a:b:c", "is not a repository name"),
        ("oci://host/a:" + "t" * 129, "is not a tag"),
        ("oci://host/a@sha256:xyz", "is not a sha256"),
    ],
)
def test_bad_references_are_one_line(text: str, says: str) -> None:
    with pytest.raises(ReferenceError, match=says):
        parse_ref(text)


@pytest.mark.parametrize(
    ("host", "insecure", "scheme"),
    [
        ("127.0.0.1:5000", False, "http"),
        ("127.5.6.7", False, "http"),
        ("localhost:5000", False, "http"),
        ("[::1]:5000", False, "http"),
        ("10.0.0.1:5000", False, "https"),
        ("registry.example:5000", False, "https"),
        ("registry.example:5000", True, "http"),
    ],
)
def test_plain_http_only_to_loopback_unless_insecure(host: str, insecure: bool, scheme: str) -> None:
    with Registry(OciRef(host, "a", "1"), None, insecure=insecure) as registry:  # no request is sent
        assert registry.scheme == scheme and registry.base == f"{scheme}://{host}/v2/a"


def config(tmp_path: Path, doc: dict[str, object]) -> dict[str, str]:
    (tmp_path / "config.json").write_text(json.dumps(doc))
    return {"DOCKER_CONFIG": str(tmp_path), "PATH": str(tmp_path)}


def test_credentials_from_the_variables_first(tmp_path: Path) -> None:
    env = config(tmp_path, {"auths": {"h:1": {"auth": base64.b64encode(b"u:p").decode()}}})
    found = find_credentials(
        "h:1", {**env, "REPLAYKIT_REGISTRY_USER": "me", "REPLAYKIT_REGISTRY_PASSWORD": "pw"}
    )
    assert found is not None and (found.username, found.secret) == ("me", "pw")
    with pytest.raises(ConfigError, match="REPLAYKIT_REGISTRY_PASSWORD is not set"):
        find_credentials("h:1", {**env, "REPLAYKIT_REGISTRY_USER": "me"})


def test_credentials_from_docker_auths(tmp_path: Path) -> None:
    auth = base64.b64encode(b"user:pass:with:colons").decode()
    env = config(tmp_path, {"auths": {"https://h.example:5000/v1/": {"auth": auth}, "other": {"auth": "x"}}})
    found = find_credentials("h.example:5000", env)
    assert found is not None and (found.username, found.secret) == ("user", "pass:with:colons")
    assert "pass" not in repr(found) and "auths[h.example:5000]" in found.source
    assert find_credentials("nowhere:1", env) is None
    with pytest.raises(ConfigError, match="is not base64"):
        find_credentials("other", env)


def helper(tmp_path: Path, name: str, body: str) -> None:
    path = tmp_path / f"docker-credential-{name}"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_credentials_from_helpers(tmp_path: Path) -> None:
    helper(tmp_path, "fake", 'read h; echo "{\\"Username\\": \\"hu-$h\\", \\"Secret\\": \\"hs\\"}"')
    helper(tmp_path, "none", "echo 'credentials not found in native keychain'; exit 1")
    env = config(tmp_path, {"credHelpers": {"h:1": "fake"}, "credsStore": "none"})
    found = find_credentials("h:1", env)
    assert found is not None and (found.username, found.secret) == ("hu-h:1", "hs")
    assert find_credentials("other:2", env) is None  # the store's helper knows none: anonymous
    env = config(tmp_path, {"credsStore": "missing"})
    with pytest.raises(ConfigError, match="docker-credential-missing is not on PATH"):
        find_credentials("h:1", env)


def test_unreadable_docker_config_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        find_credentials("h", {"DOCKER_CONFIG": str(tmp_path)})


def test_basic_header_and_repr_keep_the_secret_out() -> None:
    cred = Credentials("u", "top-secret", "somewhere")
    assert "top-secret" not in repr(cred) and "top-secret" not in str(cred)
    assert cred.basic() == "Basic " + base64.b64encode(b"u:top-secret").decode()


def test_signatures(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    ssh = tmp_path / "id_ed25519"
    ssh.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
    )
    loaded = signing.load_private_key(ssh)
    notes = signing.sign(loaded, "sha256:" + "1" * 64, "root")
    public = signing.load_public_key(ssh)  # a private key file gives its public half
    assert signing.check(notes, public, "sha256:" + "1" * 64, "root", "x") == notes[signing.SIGNER]
    with pytest.raises(signing.SignatureError, match="does not verify"):
        signing.check(notes, public, "sha256:" + "2" * 64, "root", "x")
    with pytest.raises(signing.SignatureError, match="does not verify"):
        signing.check(notes, public, "sha256:" + "1" * 64, "another root", "x")
    encrypted = tmp_path / "enc.pem"
    encrypted.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"pw"),
        )
    )
    with pytest.raises(ConfigError, match="is encrypted"):
        signing.load_private_key(encrypted)


def descriptor(media: str, digest: str, size: int = 1, title: str | None = None) -> dict[str, object]:
    out: dict[str, object] = {"mediaType": media, "digest": digest, "size": size}
    if title:
        out["annotations"] = {TITLE: title}
    return out


GOOD_CONFIG = descriptor(CONFIG_TYPE, "sha256:" + "c" * 64)


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        (
            {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json"},
            "not an OCI image manifest",
        ),
        (
            {
                "schemaVersion": 2,
                "config": descriptor("application/vnd.oci.image.config.v1+json", "sha256:" + "c" * 64),
                "layers": [],
            },
            "is not a replaykit artefact",
        ),
        (
            {"schemaVersion": 2, "config": GOOD_CONFIG, "layers": [descriptor(BLOB_TYPE, "md5:abc")]},
            "not sha256",
        ),
        (
            {
                "schemaVersion": 2,
                "config": GOOD_CONFIG,
                "layers": [descriptor(INDEX_TYPE, "sha256:" + "d" * 64, title="../x")],
            },
            "not a replaykit bundle member",
        ),
        (
            {
                "schemaVersion": 2,
                "config": GOOD_CONFIG,
                "layers": [descriptor(INDEX_TYPE, "sha256:" + "d" * 64, title="manifest.json")],
            },
            "not a replaykit bundle member",
        ),
        (
            {
                "schemaVersion": 2,
                "config": GOOD_CONFIG,
                "layers": [descriptor(BLOB_TYPE, "sha256:" + "d" * 64, size=-1)],
            },
            "no valid size",
        ),
        (
            {
                "schemaVersion": 2,
                "config": GOOD_CONFIG,
                "layers": [descriptor(BLOB_TYPE, "sha256:" + "d" * 64)] * 2,
            },
            "twice",
        ),
    ],
)
def test_pull_refuses_manifests_that_are_not_replaykit_artefacts(doc: dict[str, object], says: str) -> None:
    with pytest.raises(RegistryError, match=says):
        parse_manifest(json.dumps(doc).encode(), "oci://h/a:1")
