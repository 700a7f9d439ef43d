"""Push and pull through a real OCI registry (Debian's docker-registry on loopback, htpasswd or
token auth): a training pushed, pulled into a new store and replayed identical; a second push
uploads nothing; every bad input is one line and writes nothing."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from replaykit.models.engines import free_port
from replaykit.testing import REPO_ROOT
from tests.cli_runner import cli
from tests.exchange.registry import PASSWORD, USER, Running, TokenServer, registry

pytestmark = pytest.mark.e2e  # the real CLI against a real registry on loopback

SHIPPED = REPO_ROOT / "cassettes" / "quickstart-training.tar.gz"


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The shipped quickstart training imported into a store of its own."""
    root = tmp_path_factory.mktemp("oci-source")
    store = root / "store"
    imported = json.loads(
        cli("cassettes", "import", str(SHIPPED), "--store", str(store), "--json", check=True).stdout
    )
    runs = json.loads(cli("runs", "--store", str(store), "--json", check=True).stdout)
    run = next(r["id"] for r in runs if r["kind"] == "measure")
    return {"root": root, "store": str(store), "training": imported["root"]["id"], "run": run}


@pytest.fixture(scope="module")
def reg(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with registry(tmp_path_factory.mktemp("registry")) as running:
        yield running


def env(tmp: Path, user: str = USER, password: str = PASSWORD) -> dict[str, str]:
    """Credentials from the variables, and a Docker config folder of the test's own (empty)."""
    (tmp / "docker-config").mkdir(exist_ok=True)
    out = {"DOCKER_CONFIG": str(tmp / "docker-config"), "REPLAYKIT_REGISTRY_USER": user}
    out["REPLAYKIT_REGISTRY_PASSWORD"] = password
    return out


def rk(*args: str, tmp: Path, ok: bool = True, cwd: Path | None = None, **environ: Any) -> Any:
    proc = cli(*args, "--json", env={**env(tmp), **environ}, cwd=cwd or tmp)
    if ok:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert PASSWORD not in proc.stdout + proc.stderr
        return json.loads(proc.stdout)
    return proc


def one_line(proc: subprocess.CompletedProcess[str], *words: str) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and PASSWORD not in proc.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def test_push_pull_replay_and_a_second_push_uploads_nothing(
    source: dict[str, Any], reg: Running, tmp_path: Path
) -> None:
    ref = reg.ref("rk/qs:1")
    pushed = rk("cassettes", "push", source["training"], ref, "--store", source["store"], tmp=tmp_path)
    assert pushed["reference"] == ref and pushed["root"]["id"] == source["training"]
    layers = pushed["counts"]["blobs"] + 5  # the blobs, three index members, certificates? no: + the config
    assert pushed["blobs_uploaded"] + pushed["blobs_present"] in (layers - 1, layers)
    assert pushed["blobs_uploaded"] > pushed["counts"]["blobs"] // 2
    again = rk("cassettes", "push", source["training"], ref, "--store", source["store"], tmp=tmp_path)
    assert again["blobs_uploaded"] == 0 and again["bytes_uploaded"] == 0
    assert again["blobs_present"] == pushed["blobs_uploaded"] + pushed["blobs_present"]
    assert again["digest"] == pushed["digest"]  # the same content is the same manifest
    store = tmp_path / "pulled"
    pulled = rk("cassettes", "pull", ref, "--store", str(store), tmp=tmp_path)
    assert pulled["root"]["id"] == source["training"] and pulled["digest"] == pushed["digest"]
    assert pulled["noop"] is False and pulled["imported"]["runs"] == pushed["counts"]["runs"]
    # from the checkout: a training finds its tasks there until bundles carry them (issue 36 item 2)
    replayed = rk("replay", source["training"], "--store", str(store), tmp=tmp_path, cwd=REPO_ROOT)
    assert replayed["identical"] is True
    assert rk("cassettes", "pull", ref, "--store", str(store), tmp=tmp_path)["noop"] is True
    secret = PASSWORD.encode()
    assert not [p for p in store.rglob("*") if p.is_file() and secret in p.read_bytes()]
    assert not [p for p in reg.storage.rglob("*") if p.is_file() and secret in p.read_bytes()]


def test_a_run_after_its_training_uploads_nothing_new(
    source: dict[str, Any], reg: Running, tmp_path: Path
) -> None:
    """Blobs are addressed by their digest, so a run of a pushed training adds only its index."""
    rk(
        "cassettes",
        "push",
        source["training"],
        reg.ref("rk/dedup:t"),
        "--store",
        source["store"],
        tmp=tmp_path,
    )
    run = rk(
        "cassettes", "push", source["run"], reg.ref("rk/dedup:r"), "--store", source["store"], tmp=tmp_path
    )
    assert run["blobs_uploaded"] <= 5 and run["blobs_present"] >= run["counts"]["blobs"]


def test_a_pull_downloads_only_the_blobs_the_store_lacks(
    source: dict[str, Any], reg: Running, tmp_path: Path
) -> None:
    """A store that holds the training's baseline run already fetches only the other layers; what
    it fetched and the manifest are verified as before, what it held is read back from it."""
    ref = reg.ref("rk/skip:1")
    rk("cassettes", "push", source["training"], ref, "--store", source["store"], tmp=tmp_path)
    fresh = rk("cassettes", "pull", ref, "--store", str(tmp_path / "fresh"), tmp=tmp_path)
    assert fresh["blobs_skipped"] == 0
    bundle = tmp_path / "run.tar.gz"
    run = rk(
        "cassettes", "export", source["run"], "-o", str(bundle), "--store", source["store"], tmp=tmp_path
    )
    partial = tmp_path / "partial"
    rk("cassettes", "import", str(bundle), "--store", str(partial), tmp=tmp_path)
    pulled = rk("cassettes", "pull", ref, "--store", str(partial), tmp=tmp_path)
    assert pulled["noop"] is False and pulled["blobs_skipped"] == run["counts"]["blobs"] > 0
    assert pulled["bytes_downloaded"] < fresh["bytes_downloaded"]
    assert pulled["imported"]["blobs"] == fresh["imported"]["blobs"] - run["counts"]["blobs"]
    replayed = rk("replay", source["training"], "--store", str(partial), tmp=tmp_path)
    assert replayed["identical"] is True
    again = rk("cassettes", "pull", ref, "--store", str(partial), tmp=tmp_path)
    assert again["noop"] is True and again["blobs_skipped"] == fresh["counts"]["blobs"]


def test_token_auth(source: dict[str, Any], tmp_path: Path) -> None:
    token = TokenServer(tmp_path / "token")
    try:
        with registry(tmp_path / "registry", auth="token", token=token) as reg:
            ref = reg.ref("rk/tok:1")
            pushed = rk("cassettes", "push", source["run"], ref, "--store", source["store"], tmp=tmp_path)
            granted = [
                set(scope.split(":")[2].split(","))
                for scope in token.asked
                if scope.startswith("repository:rk/tok:")
            ]
            assert {"pull", "push"} in granted, token.asked  # the scope the registry's challenge named
            pulled = rk("cassettes", "pull", ref, "--store", str(tmp_path / "pulled"), tmp=tmp_path)
            assert pulled["digest"] == pushed["digest"] and "repository:rk/tok:pull" in token.asked
            replayed = rk(
                "replay", source["run"], "--store", str(tmp_path / "pulled"), tmp=tmp_path, cwd=REPO_ROOT
            )
            assert replayed["identical"]
            wrong = rk(
                "cassettes",
                "pull",
                ref,
                "--store",
                str(tmp_path / "x"),
                tmp=tmp_path,
                ok=False,
                REPLAYKIT_REGISTRY_PASSWORD="not it",
            )
            one_line(wrong, "refused the credentials", "REPLAYKIT_REGISTRY_USER")
            assert "not it" not in wrong.stderr and not (tmp_path / "x").exists()
    finally:
        token.close()


def keypair(tmp: Path, name: str) -> tuple[Path, Path]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private, public = tmp / f"{name}.pem", tmp / f"{name}.pub"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    public.write_bytes(  # the OpenSSH form (ssh-keygen's .pub line)
        key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    )
    return private, public


def test_signed_pushes_pull_only_with_their_key(source: dict[str, Any], reg: Running, tmp_path: Path) -> None:
    a_key, a_pub = keypair(tmp_path, "a")
    _, b_pub = keypair(tmp_path, "b")
    signed, unsigned = reg.ref("rk/signed:1"), reg.ref("rk/unsigned:1")
    pushed = rk(
        "cassettes",
        "push",
        source["run"],
        signed,
        "--sign",
        str(a_key),
        "--store",
        source["store"],
        tmp=tmp_path,
    )
    assert pushed["signed_by"].startswith("sha256:")
    rk("cassettes", "push", source["run"], unsigned, "--store", source["store"], tmp=tmp_path)
    store = tmp_path / "pulled"
    ok = rk("cassettes", "pull", signed, "--verify-key", str(a_pub), "--store", str(store), tmp=tmp_path)
    assert ok["signed_by"] == pushed["signed_by"]
    other = tmp_path / "other"
    cases = {
        (signed, str(b_pub)): ("is signed by key", "not by"),
        (unsigned, str(a_pub)): ("is not signed",),
        (forge_signature(reg, "rk/signed:1", "rk/forged:1"), str(a_pub)): ("signature does not verify",),
    }
    for (ref, pub), words in cases.items():
        proc = rk(
            "cassettes", "pull", ref, "--verify-key", pub, "--store", str(other), tmp=tmp_path, ok=False
        )
        one_line(proc, *words)
        assert not other.exists()


def forge_signature(reg: Running, have: str, put: str) -> str:
    """The signed manifest with its signature's last byte changed, put under another tag."""
    auth = (USER, PASSWORD)
    name, tag = have.split(":")
    accept = {"Accept": "application/vnd.oci.image.manifest.v1+json"}
    doc = httpx2.get(f"http://{reg.host}/v2/{name}/manifests/{tag}", headers=accept, auth=auth).json()
    sig = doc["annotations"]["replaykit.signature.ed25519"]
    doc["annotations"]["replaykit.signature.ed25519"] = sig[:-4] + ("AAA=" if sig[-4:] != "AAA=" else "BBB=")
    new_name, new_tag = put.split(":")
    for layer in [doc["config"], *doc["layers"]]:  # the blobs, mounted into the other repository
        httpx2.post(
            f"http://{reg.host}/v2/{new_name}/blobs/uploads/?mount={layer['digest']}&from={name}", auth=auth
        )
    answer = httpx2.put(
        f"http://{reg.host}/v2/{new_name}/manifests/{new_tag}",
        content=json.dumps(doc).encode(),
        headers={"Content-Type": doc["mediaType"]},
        auth=auth,
    )
    assert answer.status_code == 201, answer.text
    return reg.ref(put)


def test_bad_input_is_one_line_and_writes_nothing(
    source: dict[str, Any], reg: Running, tmp_path: Path
) -> None:
    ref = reg.ref("rk/bad:1")
    pushed = rk("cassettes", "push", source["run"], ref, "--store", source["store"], tmp=tmp_path)
    store = tmp_path / "target"

    def pull(target: str, **environ: Any) -> subprocess.CompletedProcess[str]:
        proc: subprocess.CompletedProcess[str] = rk(
            "cassettes", "pull", target, "--store", str(store), tmp=tmp_path, ok=False, **environ
        )
        assert not store.exists(), proc.stderr
        return proc

    one_line(pull(f"oci://127.0.0.1:{free_port()}/rk/bad:1"), "cannot reach registry", "is it running")
    one_line(pull(ref, REPLAYKIT_REGISTRY_PASSWORD="wrong password"), "refused the credentials")
    one_line(
        pull(ref, REPLAYKIT_REGISTRY_USER="", REPLAYKIT_REGISTRY_PASSWORD=""),
        "needs credentials",
        "docker login",
    )
    one_line(pull(reg.ref("rk/bad:2")), "does not exist", "rk/bad:2")
    one_line(pull(reg.ref("rk/never:1")), "does not exist")
    blob = reg.blob_file(largest_layer(reg, "rk/bad", "1"))  # one of the artefact's store blobs
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 1
    blob.write_bytes(bytes(data))
    try:
        one_line(pull(ref), "does not match its digest", "refusing")
    finally:
        data[len(data) // 2] ^= 1
        blob.write_bytes(bytes(data))
    bad_ref = cli(
        "cassettes", "pull", "oci://127.0.0.1/Upper/Case:1", "--store", str(store), env=env(tmp_path)
    )
    assert bad_ref.returncode == 2 and "is not a repository name" in bad_ref.stderr and not store.exists()
    assert pushed["blobs_uploaded"] > 0


def largest_layer(reg: Running, name: str, tag: str) -> str:
    accept = {"Accept": "application/vnd.oci.image.manifest.v1+json"}
    doc = httpx2.get(
        f"http://{reg.host}/v2/{name}/manifests/{tag}", headers=accept, auth=(USER, PASSWORD)
    ).json()
    return str(max(doc["layers"], key=lambda layer: layer["size"])["digest"])


class SlowRelay:
    """A loopback TCP relay to ``target`` that passes at most ``rate`` bytes a second each way."""

    def __init__(self, target: str, rate: int = 20_000) -> None:
        self.target, self.rate = target, rate
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            host, port = self.target.split(":")
            upstream = socket.create_connection((host, int(port)))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(2048):
                b.sendall(data)
                time.sleep(len(data) / self.rate)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_an_interrupted_pull_writes_nothing(
    source: dict[str, Any], reg: Running, tmp_path: Path, sig: int
) -> None:
    rk(
        "cassettes",
        "push",
        source["training"],
        reg.ref("rk/slow:1"),
        "--store",
        source["store"],
        tmp=tmp_path,
    )
    relay = SlowRelay(reg.host)
    store = tmp_path / "target"
    tmpdir = tmp_path / "tmp"  # where it spools
    tmpdir.mkdir()
    try:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "replaykit.cli",
                "cassettes",
                "pull",
                f"oci://127.0.0.1:{relay.port}/rk/slow:1",
                "--store",
                str(store),
            ],
            env={**os.environ, **env(tmp_path), "TMPDIR": str(tmpdir)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 120  # until it is fetching layers (its folder in $TMPDIR)
        while not list(tmpdir.glob(f"replaykit-pull-{proc.pid}-*")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        time.sleep(1)  # some layers are in
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        relay.close()
    if sig == signal.SIGINT:
        assert proc.returncode == 130 and "Traceback" not in err, err
    assert not store.exists()
    left = list(tmpdir.glob(f"replaykit-*-{proc.pid}-*"))
    assert bool(left) == (sig == signal.SIGKILL), left  # Ctrl-C cleans up; kill -9 cannot
    again = cli(
        "cassettes", "pull", reg.ref("rk/slow:1"), "--store", str(store), "--json",
        env={**env(tmp_path), "TMPDIR": str(tmpdir)}, process=True,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert not list(tmpdir.iterdir())  # the next pull swept what the killed one left


def test_reproduce_from_the_registry(source: dict[str, Any], reg: Running, tmp_path: Path) -> None:
    ref = reg.ref("rk/repro:1")
    pushed = rk("cassettes", "push", source["training"], ref, "--store", source["store"], tmp=tmp_path)
    done = rk("reproduce", ref, tmp=tmp_path, cwd=REPO_ROOT)  # the checkout: see the replay above
    assert done["identical"] is True and done["digest"] == pushed["digest"]
    assert done["roots"][0]["id"] == source["training"] and done["roots"][0]["charts"]
