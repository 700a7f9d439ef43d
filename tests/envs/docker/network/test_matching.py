"""Matching and scrubbing of frozen-network exchanges, and the doctor's proxy check."""

from __future__ import annotations

from pathlib import Path

import pytest

from replaykit.core.errors import EnvError
from replaykit.envs.docker.network.matching import match_key, scrub_url, stored_headers
from replaykit.envs.docker.network.wiring import container_env, resolve_mode
from replaykit.testing import write_config
from replaykit.workspace.doctor import check_network
from tests.cli_runner import cli

pytestmark = pytest.mark.unit


def test_credentials_leave_the_url_and_the_key_ignores_them() -> None:
    url = "https://user:pw@Files.Example:8443/a/b.whl?token=s3cret&v=2&X-Amz-Signature=abc"
    scrubbed = scrub_url(url)
    assert "s3cret" not in scrubbed and "pw" not in scrubbed and "abc" not in scrubbed
    assert scrubbed.startswith("https://files.example:8443/a/b.whl?") and "v=2" in scrubbed
    assert scrub_url(scrubbed) == scrubbed  # stored URLs re-key the same way
    assert match_key("GET", url) == match_key("get", url.replace("s3cret", "other"))
    assert match_key("GET", url) != match_key("GET", url.replace("v=2", "v=3"))


def test_bodies_are_normalised_before_matching() -> None:
    a = match_key("POST", "http://h/x", b'{"b": 1, "a": [1, 2]}', "application/json")
    b = match_key("POST", "http://h/x", b'{"a":[1,2],"b":1}', "application/json; charset=utf-8")
    assert a == b != match_key("POST", "http://h/x", b'{"a":[2,1],"b":1}', "application/json")
    f1 = match_key("POST", "http://h/f", b"b=2&a=1&password=x", "application/x-www-form-urlencoded")
    f2 = match_key("POST", "http://h/f", b"a=1&password=y&b=2", "application/x-www-form-urlencoded")
    assert f1 == f2
    assert match_key("POST", "http://h/x", b"raw") != match_key("POST", "http://h/x", b"raw2")


def test_volatile_and_credential_headers_are_not_stored() -> None:
    kept = stored_headers(
        [("Date", "now"), ("Set-Cookie", "sid=1"), ("Content-Type", "text/plain"), ("ETag", "x")]
    )
    assert kept == [("content-type", "text/plain"), ("etag", "x")]


def test_modes_and_the_containers_variables() -> None:
    assert resolve_mode(None, True) == "frozen" and resolve_mode("live", True) == "live"
    assert resolve_mode("frozen", False) == "none" and resolve_mode(None, False) == "none"
    with pytest.raises(EnvError, match=r"env\.network is 'open'"):
        resolve_mode("open", True)
    env = container_env("http://replaykit-proxy:3128")
    assert env["HTTPS_PROXY"] == env["http_proxy"] == "http://replaykit-proxy:3128"
    assert env["no_proxy"] == env["NO_PROXY"] == "localhost,127.0.0.1,::1,replaykit"  # its own traffic
    # a host upstream on the loopback that env.network_allow names goes through the proxy (to the host)
    assert container_env("http://p:1", allow=["127.0.0.1:8443"])["NO_PROXY"] == "localhost,::1,replaykit"
    assert container_env("http://p:1", ["db", "localhost"])["NO_PROXY"].endswith(",replaykit,db")
    for name in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "PIP_CERT", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS"):
        assert env[name] == "/etc/replaykit/mitm-ca.pem"
    assert env["UV_NATIVE_TLS"] == "1" and env["SSL_CERT_DIR"]


def test_doctor_says_how_to_install_the_proxy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLAYKIT_MITMDUMP", str(tmp_path / "missing" / "mitmdump"))
    check = check_network(needed=True)
    assert check.status == "fail" and "scripts/setup-network.sh" in check.fix and "\n" not in check.detail
    assert check_network(needed=False).status == "warn"


def test_network_allow_must_name_host_and_port(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"env.network_allow": ["127.0.0.1"]}, base="quickstart-docker.yaml")
    proc = cli("run", str(config), cwd=tmp_path)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "network_allow" in proc.stderr and "'127.0.0.1' is not host:port" in proc.stderr, proc.stderr
    assert not (tmp_path / "store").exists()  # nothing created before the config is valid


def test_the_proxy_judges_addresses_as_the_host_would_reach_them() -> None:
    from replaykit.envs.docker.network.policy import judge

    assert judge("127.0.0.1", 5432, ()).refused
    assert judge("localhost", 5432, ()).refused  # a name is judged by what it resolves to
    assert judge("::ffff:127.0.0.1", 80, ()).refused
    assert judge("0.0.0.0", 80, ()).refused
    assert judge("172.17.0.1", 2375, ()).refused  # the Docker bridge's gateway: the host
    assert judge("127.0.0.1", 8443, ("127.0.0.1:8443",)).refused is None
    assert judge("127.0.0.1", 8444, ("127.0.0.1:8443",)).refused  # the port is part of the name
    assert judge("93.184.215.14", 443, ()).refused is None
    assert judge("203.0.113.80", 443, ()).refused is None  # a documentation range is not the host's
    assert judge("fd00::1", 80, ()).refused and judge("fe80::1", 80, ()).refused
