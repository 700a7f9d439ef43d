"""``oci://HOST[:PORT]/REPOSITORY[:TAG | @sha256:HEX]``: where an artefact lives in a registry.

Parsed strictly (the distribution spec's repository and tag grammar), so a mistyped reference is
one line before anything is read or sent. Plain HTTP is spoken only to a loopback registry
(``localhost``, ``127.0.0.0/8``, ``::1``) unless the caller says ``insecure``.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from replaykit.core.errors import ConfigError

SCHEME = "oci://"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
REPOSITORY_RE = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
TAG_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")
HOST_RE = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)(?::([0-9]{1,5}))?")
EXAMPLE = "oci://127.0.0.1:5000/team/quickstart:1"


class ReferenceError(ConfigError):
    """An ``oci://`` reference that does not parse (a usage error: nothing was sent)."""


@dataclass(frozen=True)
class OciRef:
    """A parsed ``oci://`` reference: the registry host (``host[:port]`` as written), the
    repository, and a tag or a manifest digest."""

    host: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @property
    def reference(self) -> str:
        """What names the manifest in ``/v2/<repository>/manifests/<reference>``."""
        return self.digest or self.tag or "latest"

    @property
    def hostname(self) -> str:
        """The host without its port (and without IPv6 brackets)."""
        match = HOST_RE.fullmatch(self.host)
        name = match.group(1) if match else self.host
        return name.strip("[]")

    def loopback(self) -> bool:
        """Is the registry on this machine's loopback (where plain HTTP is allowed)?"""
        if self.hostname.lower() == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.hostname).is_loopback
        except ValueError:
            return False

    def with_digest(self, digest: str) -> OciRef:
        return OciRef(self.host, self.repository, self.tag, digest)

    def __str__(self) -> str:
        return f"{SCHEME}{self.host}/{self.repository}" + (
            f"@{self.digest}" if self.digest else f":{self.tag or 'latest'}"
        )


def is_oci(text: str) -> bool:
    return text.startswith(SCHEME)


def parse_ref(text: str) -> OciRef:
    """``oci://HOST[:PORT]/REPO[:TAG|@sha256:HEX]`` → :class:`OciRef`; one line naming what is wrong."""
    if not is_oci(text):
        raise ReferenceError(f"{text!r} is not an oci:// reference; expected e.g. {EXAMPLE}")
    rest = text[len(SCHEME) :]
    host, slash, path = rest.partition("/")
    match = HOST_RE.fullmatch(host)
    if not match or (match.group(2) and not 0 < int(match.group(2)) < 65536):
        raise ReferenceError(f"{text!r}: {host!r} is not a registry host[:port]; expected e.g. {EXAMPLE}")
    if not slash or not path:
        raise ReferenceError(f"{text!r} names no repository; expected e.g. {EXAMPLE}")
    digest = tag = None
    if "@" in path:
        path, _, digest = path.partition("@")
        if not DIGEST_RE.fullmatch(digest):
            raise ReferenceError(f"{text!r}: {digest!r} is not a sha256:<64 hex> digest")
    else:
        last = path.rsplit("/", 1)[-1]
        if ":" in last:
            path, _, tag = path.rpartition(":")
            if not TAG_RE.fullmatch(tag):
                raise ReferenceError(
                    f"{text!r}: tag {tag!r} is not a tag (letters, digits, '_', '.', '-'; at most 128)"
                )
    if not REPOSITORY_RE.fullmatch(path):
        raise ReferenceError(
            f"{text!r}: repository {path!r} is not a repository name (lowercase letters, digits, "
            "'.', '_', '-', components separated by '/')"
        )
    return OciRef(host, path, tag, digest)
