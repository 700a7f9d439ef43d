"""A small client of the OCI distribution API over httpx2 (what the openai client rides on).

What replaykit needs and no more: ``HEAD``/``GET`` a blob, a monolithic blob upload
(``POST`` then ``PUT ?digest=``), ``PUT``/``GET`` a manifest. Authentication answers the
registry's challenge: ``Basic`` (htpasswd) with the credentials, ``Bearer realm=…,service=…``
by asking the realm for a token (with the credentials, or anonymously) for the repository's
scope. A redirect to another host (blob storage) is followed without the ``Authorization``
header. Every failure is one :class:`RegistryError` line naming the registry and what to do;
no credential or token ever appears in one.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import urljoin, urlsplit

import httpx2

from replaykit.core.errors import ReplaykitError
from replaykit.exchange.oci.credentials import Credentials
from replaykit.exchange.oci.reference import OciRef

TIMEOUT = httpx2.Timeout(60.0, connect=10.0)
MAX_REDIRECTS = 5
#: a manifest larger than this is refused before it is parsed
MAX_MANIFEST_BYTES = 32 << 20
CHALLENGE_RE = re.compile(r'(\w+)="([^"]*)"')
#: requests in flight at once when many blobs are asked for or fetched
WORKERS = 8
T = TypeVar("T")
U = TypeVar("U")


class RegistryError(ReplaykitError):
    """The registry cannot be reached, refuses the credentials, lacks what was asked, or answers
    something that is not the distribution protocol."""


def _detail(response: httpx2.Response) -> str:
    """The registry's own error code and message (``{"errors": [...]}``), cut short."""
    try:
        errors = json.loads(response.read()).get("errors") or []
        first = errors[0]
        return f": {first.get('code', '')} {str(first.get('message', ''))[:120]}".rstrip()
    except (ValueError, AttributeError, IndexError, TypeError, httpx2.HTTPError):
        return ""


class Registry:
    """One repository of one registry, spoken to over one connection pool."""

    def __init__(
        self, ref: OciRef, credentials: Credentials | None, push: bool = False, insecure: bool = False
    ) -> None:
        self.ref, self.credentials = ref, credentials
        self.scheme = "http" if insecure or ref.loopback() else "https"
        self.root = f"{self.scheme}://{ref.host}"
        self.base = f"{self.root}/v2/{ref.repository}"
        self.scope = f"repository:{ref.repository}:{'pull,push' if push else 'pull'}"
        self.authorization: str | None = None
        # TCP_NODELAY: a request's body (a PUT's blob) leaves at once, not after the server's
        # delayed ACK of its headers (~40 ms a request on loopback without it)
        nodelay = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
        local = ref.loopback()
        self.http = httpx2.Client(
            timeout=TIMEOUT,
            trust_env=not local,  # proxies from the environment, never for loopback
            follow_redirects=False,
            transport=httpx2.HTTPTransport(socket_options=nodelay, trust_env=not local),
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests ------------------------------------------------------------------
    def _request(
        self,
        method: str,
        url: str,
        headers: dict[str, str] | None = None,
        content: Callable[[], Iterable[bytes] | bytes] | None = None,
        stream: bool = False,
    ) -> httpx2.Response:
        """One request, answered through an auth challenge (once) and redirects."""
        for attempt in range(2):
            response = self._send(method, url, headers, content() if content else None, stream)
            if response.status_code != 401 or attempt:
                return response
            response.close()
            self._authenticate(response)
        raise AssertionError("unreachable")  # pragma: no cover

    def _send(
        self, method: str, url: str, headers: dict[str, str] | None, body: Any, stream: bool
    ) -> httpx2.Response:
        own = urlsplit(self.root).netloc
        for _ in range(MAX_REDIRECTS + 1):
            sent = dict(headers or {})
            if self.authorization and urlsplit(url).netloc == own:
                sent["Authorization"] = self.authorization  # never to another host
            with self._reaching():
                request = self.http.build_request(method, url, headers=sent, content=body)
                response = self.http.send(request, stream=stream)
            if response.status_code not in (301, 302, 303, 307, 308) or method not in ("GET", "HEAD"):
                return response
            response.close()
            url = urljoin(url, response.headers.get("location", ""))
        raise RegistryError(f"registry {self.ref.host} redirected {method} more than {MAX_REDIRECTS} times")

    @contextmanager
    def _reaching(self) -> Iterator[None]:
        """Transport failures as one line."""
        try:
            yield
        except httpx2.ConnectError as exc:
            tls = "SSL" in str(exc) or "certificate" in str(exc).lower()
            hint = (
                "; it may speak plain HTTP: pass --insecure if you trust the network to it"
                if tls and self.scheme == "https"
                else "; is it running, and is the host:port right?"
            )
            raise RegistryError(f"cannot reach registry {self.ref.host} over {self.scheme}{hint}") from None
        except httpx2.TimeoutException:
            raise RegistryError(f"registry {self.ref.host} did not answer in time; try again later") from None
        except httpx2.HTTPError as exc:
            raise RegistryError(
                f"registry {self.ref.host}: the connection failed ({type(exc).__name__}); try again"
            ) from None

    # -- authentication ------------------------------------------------------------
    def _authenticate(self, response: httpx2.Response) -> None:
        """Answer a 401's challenge: basic credentials, or a bearer token from the realm."""
        challenge = response.headers.get("www-authenticate", "")
        kind, _, params = challenge.partition(" ")
        if kind.lower() == "basic":
            if self.credentials is None:
                raise self._needs_credentials()
            self.authorization = self.credentials.basic()
        elif kind.lower() == "bearer":
            self.authorization = f"Bearer {self._token(dict(CHALLENGE_RE.findall(params)))}"
        else:
            raise RegistryError(
                f"registry {self.ref.host} asks for authentication replaykit does not speak ({kind or 'none'!r})"
            )

    def _token(self, params: dict[str, str]) -> str:
        realm = params.get("realm", "")
        if not realm.startswith(("https://", "http://")):
            raise RegistryError(f"registry {self.ref.host} names no token realm in its challenge")
        query = {"scope": params.get("scope") or self.scope}
        if params.get("service"):
            query["service"] = params["service"]
        headers = {"Authorization": self.credentials.basic()} if self.credentials else {}
        with self._reaching():
            answer = self.http.get(realm, params=query, headers=headers)
        if answer.status_code in (401, 403):
            raise self._refused(answer.status_code) if self.credentials else self._needs_credentials()
        try:
            body = answer.json()
            token = body.get("token") or body.get("access_token")
        except (ValueError, AttributeError):
            token = None
        if answer.status_code != 200 or not isinstance(token, str) or not token:
            raise RegistryError(
                f"the token service of registry {self.ref.host} answered HTTP {answer.status_code} without a token"
            )
        return token

    def _needs_credentials(self) -> RegistryError:
        return RegistryError(
            f"registry {self.ref.host} needs credentials; `docker login {self.ref.host}`, or set "
            "REPLAYKIT_REGISTRY_USER and REPLAYKIT_REGISTRY_PASSWORD"
        )

    def _refused(self, status: int) -> RegistryError:
        source = self.credentials.source if self.credentials else "none"
        return RegistryError(
            f"registry {self.ref.host} refused the credentials (HTTP {status}; from {source}); "
            "check the user and password"
        )

    def _check(self, response: httpx2.Response, what: str, ok: tuple[int, ...]) -> httpx2.Response:
        if response.status_code in ok:
            return response
        if response.status_code == 401:
            raise self._refused(401) if self.credentials else self._needs_credentials()
        if response.status_code == 403:
            raise RegistryError(
                f"registry {self.ref.host} denies {what} on {self.ref.repository} (HTTP 403{_detail(response)}); "
                "check the account's rights"
            )
        raise RegistryError(
            f"registry {self.ref.host}: {what} failed (HTTP {response.status_code}{_detail(response)})"
        )

    # -- the protocol --------------------------------------------------------------
    def has_blob(self, digest: str) -> bool:
        response = self._request("HEAD", f"{self.base}/blobs/{digest}")
        response.close()
        if response.status_code == 404:
            return False
        self._check(response, f"looking up blob {digest[7:19]}", (200,))
        return True

    def held(self, digests: list[str]) -> set[str]:
        """Which of ``digests`` the registry holds: the first asked alone (it settles the
        authentication), the rest ``WORKERS`` at a time (a far registry costs a round trip each)."""
        if not digests:
            return set()
        found = {digests[0]} if self.has_blob(digests[0]) else set()
        answers = in_parallel(self.has_blob, digests[1:])
        return found | {d for d, held in zip(digests[1:], answers, strict=True) if held}

    def upload_blob(self, digest: str, size: int, chunks: Callable[[], Iterable[bytes]]) -> None:
        """A monolithic upload: ``POST`` a session, ``PUT`` the bytes with their digest."""
        started = self._check(
            self._request("POST", f"{self.base}/blobs/uploads/"),
            f"starting an upload of {digest[7:19]}",
            (202,),
        )
        location = started.headers.get("location")
        if not location:
            raise RegistryError(f"registry {self.ref.host} started an upload without a Location")
        url = urljoin(f"{self.root}/", location)
        url += ("&" if "?" in url else "?") + f"digest={digest}"
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(size)}
        self._check(self._request("PUT", url, headers, chunks), f"uploading blob {digest[7:19]}", (201, 204))

    def put_manifest(self, data: bytes, media_type: str) -> str:
        """Put the manifest under the reference's tag; its digest (as the registry says, else ours)."""
        response = self._request(
            "PUT", f"{self.base}/manifests/{self.ref.reference}", {"Content-Type": media_type}, lambda: data
        )
        self._check(response, f"putting manifest {self.ref.reference}", (201, 200))
        return response.headers.get("docker-content-digest", "")

    def get_manifest(self, accept: str) -> bytes:
        response = self._request(
            "GET", f"{self.base}/manifests/{self.ref.reference}", {"Accept": accept}, stream=True
        )
        try:
            if response.status_code == 404:
                raise RegistryError(
                    f"{self.ref} does not exist (HTTP 404{_detail(response)}); check the repository and tag"
                )
            self._check(response, f"reading manifest {self.ref.reference}", (200,))
            return _capped(response, MAX_MANIFEST_BYTES, f"the manifest of {self.ref}")
        finally:
            response.close()

    @contextmanager
    def blob(self, digest: str) -> Iterator[Iterator[bytes]]:
        """A blob's bytes as they arrive (never whole in memory)."""
        response = self._request("GET", f"{self.base}/blobs/{digest}", stream=True)
        try:
            if response.status_code == 404:
                raise RegistryError(f"{self.ref} lists blob {digest[7:19]} which the registry does not hold")
            self._check(response, f"reading blob {digest[7:19]}", (200,))
            yield self._chunks(response)
        finally:
            response.close()

    def _chunks(self, response: httpx2.Response) -> Iterator[bytes]:
        with self._reaching():
            yield from response.iter_raw(1 << 20)


def in_parallel(fn: Callable[[U], T], items: list[U]) -> list[T]:
    """``fn`` over ``items`` on ``WORKERS`` threads, results in order; Ctrl-C cancels what has
    not started (and waits for no more than what is in flight)."""
    pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="replaykit-oci")
    try:
        return list(pool.map(fn, items))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def _capped(response: httpx2.Response, cap: int, what: str) -> bytes:
    data = bytearray()
    for chunk in response.iter_raw(1 << 16):
        data += chunk
        if len(data) > cap:
            raise RegistryError(f"{what} is larger than {cap} bytes; refusing")
    return bytes(data)
