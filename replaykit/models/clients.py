"""One ``openai.OpenAI`` client per process and endpoint.

Building a client costs an SSL context (~20 ms: the system CA bundle is parsed),
even for the offline loopback address; a replay of a training builds thousands.
``openai_client`` keeps one per (process, base URL, key). The process id is part
of the key, so a forked worker never reuses its parent's client (nor its pooled
connections); a client the harness closed is replaced. vcrpy patches httpx2's
transport classes, not instances, so a cached client is intercepted like a new one.
Every client of the process shares one SSL context (the one httpx2 would build, per
``SSL_CERT_FILE``/``SSL_CERT_DIR``), so a client made after ``clear_clients`` costs
~0.2 ms instead of ~25.
"""

from __future__ import annotations

import functools
import os
import ssl
import threading
from typing import Any

#: what the client sends to an endpoint declared keyless (``model.api_key_env: ""``): the
#: openai client insists on a value; an unset key variable is an error before this is reached
NO_KEY = "no-key"
_CLIENTS: dict[tuple[int, str, str, float, int], Any] = {}
_LOCK = threading.Lock()


def openai_client(base_url: str, api_key: str, timeout: float = 300, max_retries: int = 0) -> Any:
    """The process's client for this endpoint (created on first use)."""
    import openai

    key = (os.getpid(), base_url, api_key or NO_KEY, float(timeout), int(max_retries))
    with _LOCK:
        client = _CLIENTS.get(key)
        if client is None or client.is_closed():
            http = openai.DefaultHttpxClient(verify=_ssl_context(*_ssl_env()))  # openai's defaults
            client = openai.OpenAI(
                base_url=base_url, api_key=key[2], max_retries=max_retries, timeout=timeout, http_client=http
            )
            _CLIENTS[key] = client
        return client


def clear_clients() -> None:
    """Forget every cached client of this process (tests; long-lived servers)."""
    with _LOCK:
        for (pid, *_), client in list(_CLIENTS.items()):
            if pid == os.getpid():
                client.close()
        _CLIENTS.clear()


def _ssl_env() -> tuple[str, str]:
    return os.environ.get("SSL_CERT_FILE", ""), os.environ.get("SSL_CERT_DIR", "")


@functools.lru_cache(maxsize=4)
def _ssl_context(cert_file: str, cert_dir: str) -> ssl.SSLContext:
    """The context httpx2 builds for ``verify=True`` (it reads the variables itself), once
    per value of the variables: an SSLContext is safe to share between clients and threads."""
    import httpx2

    return httpx2.create_ssl_context(verify=True)
