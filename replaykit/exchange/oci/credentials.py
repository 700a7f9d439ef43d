"""Registry credentials, found where Docker keeps them, never written anywhere.

In order: ``REPLAYKIT_REGISTRY_USER`` + ``REPLAYKIT_REGISTRY_PASSWORD``; then Docker's client
configuration (``$DOCKER_CONFIG/config.json``, else ``~/.docker/config.json``): a
``credHelpers`` entry for the host, else the ``credsStore`` helper (each a
``docker-credential-NAME get`` program), else the host's ``auths`` entry (``auth``: base64 of
``user:password``, or ``username``/``password``). :class:`Credentials` never shows its secret
(``repr``, errors and reports name only where it came from).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from replaykit.core.errors import ConfigError

USER_VAR, PASSWORD_VAR = "REPLAYKIT_REGISTRY_USER", "REPLAYKIT_REGISTRY_PASSWORD"
HELPER_TIMEOUT = 30


@dataclass(frozen=True)
class Credentials:
    """A user name and its secret (a password or a token), and where they were found."""

    username: str
    secret: str = field(repr=False)
    source: str = ""  # what to check when the registry refuses them (no secret in it)

    def basic(self) -> str:
        """The ``Authorization`` header value of HTTP basic auth."""
        token = base64.b64encode(f"{self.username}:{self.secret}".encode()).decode("ascii")
        return f"Basic {token}"


def docker_config_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    folder = env.get("DOCKER_CONFIG")
    return (Path(folder) if folder else Path.home() / ".docker") / "config.json"


def find_credentials(host: str, environ: Mapping[str, str] | None = None) -> Credentials | None:
    """The credentials for registry ``host`` (``host[:port]``), or None (anonymous)."""
    env = os.environ if environ is None else environ
    user, password = env.get(USER_VAR), env.get(PASSWORD_VAR)
    if user or password:
        if not (user and password):
            missing = PASSWORD_VAR if user else USER_VAR
            raise ConfigError(f"{missing} is not set; set both {USER_VAR} and {PASSWORD_VAR}, or neither")
        return Credentials(user, password, f"{USER_VAR}/{PASSWORD_VAR}")
    path = docker_config_path(env)
    config = _read_config(path)
    helper = _for_host(config.get("credHelpers"), host) or config.get("credsStore")
    if isinstance(helper, str) and helper:
        return _from_helper(helper, host, path, env)
    entry = _for_host(config.get("auths"), host)
    return _from_auths(entry, host, path) if isinstance(entry, dict) else None


def _read_config(path: Path) -> dict[str, object]:
    """Docker's client configuration as read (unchecked: each field is checked where it is used)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not valid JSON"
        raise ConfigError(
            f"cannot read Docker's client configuration {path}: {reason}; fix or move it"
        ) from None
    return data if isinstance(data, dict) else {}


def _host_of(key: str) -> str:
    """A config key as a host: ``https://ghcr.io/v1/`` → ``ghcr.io``."""
    key = key.split("://", 1)[-1]
    return key.split("/", 1)[0].lower()


def _for_host(table: object, host: str) -> object:
    if not isinstance(table, dict):
        return None
    wanted = host.lower()
    for key, value in table.items():
        if isinstance(key, str) and _host_of(key) == wanted:
            return value
    return None


def _from_auths(entry: dict[str, object], host: str, path: Path) -> Credentials | None:
    where = f"{path} auths[{host}]"
    auth, token = entry.get("auth"), entry.get("identitytoken")
    username, password = entry.get("username"), entry.get("password")
    if isinstance(auth, str) and auth:
        try:
            user, sep, secret = base64.b64decode(auth, validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise ConfigError(
                f"{where}: 'auth' is not base64 of user:password; log in again (docker login {host})"
            ) from None
        if not sep:
            raise ConfigError(f"{where}: 'auth' holds no ':'; log in again (docker login {host})")
        return Credentials(user, secret, where)
    if isinstance(token, str) and token:
        return Credentials("<token>", token, where)
    if isinstance(username, str) and isinstance(password, str):
        return Credentials(username, password, where)
    return None


def _from_helper(helper: str, host: str, path: Path, env: Mapping[str, str]) -> Credentials | None:
    """``docker-credential-HELPER get`` with the host on stdin: its Username and Secret."""
    program = f"docker-credential-{helper}"
    try:
        proc = subprocess.run(
            [program, "get"],
            input=host,
            capture_output=True,
            text=True,
            timeout=HELPER_TIMEOUT,
            check=False,
            env=dict(env),  # its PATH finds the helper
        )
    except FileNotFoundError:
        raise ConfigError(
            f"{path} names credential helper {helper!r} for {host}, but {program} is not on PATH; install it,"
            f" or set {USER_VAR}/{PASSWORD_VAR}"
        ) from None
    except subprocess.TimeoutExpired:
        raise ConfigError(f"{program} get did not answer for {host} within {HELPER_TIMEOUT} s") from None
    if proc.returncode != 0:
        return None  # "credentials not found in native keychain": anonymous, as docker does
    try:
        answer = json.loads(proc.stdout)
        return Credentials(str(answer["Username"]), str(answer["Secret"]), f"{program} ({path})")
    except (ValueError, KeyError, TypeError):
        raise ConfigError(f"{program} get answered something other than its JSON for {host}") from None
