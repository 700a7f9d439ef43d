"""The frozen network: what a task container fetches, recorded and served back (issue 19).

| module | concern |
| --- | --- |
| ``ca.py`` | the store's mitm CA, generated once, kept in the store folder (its key never leaves it) |
| ``matching.py`` | match key (method + scrubbed URL + normalised body), URL/header scrubbing (stdlib only) |
| ``addon.py`` | the mitmproxy addon: record, serve, refuse; bodies streamed to content-addressed files |
| ``server.py`` | one ``mitmdump`` child process: start, wait, stop; host trust and proxy for the upstream side |
| ``wiring.py`` | one episode: internal Docker network, proxy on its gateway (the host's only port the container reaches), CA and variables in the container |
| ``policy.py`` | what the proxy may connect to: never the host's loopback, link-local or private addresses unless ``env.network_allow`` names them |
| ``build.py`` | image builds on an internal network through the proxy; their recordings kept beside the image |
| ``build_trust.py`` | the Dockerfile rewrite that trusts the proxy's CA in every ``RUN`` |
| ``image_digest.py`` | an image's content digest (its own layers' files, its run configuration) |
| ``rebuild.py`` | replay of a build: rebuild offline from its recording, digests compared |
| ``extras.py`` | the kind's episode extras (``EnvKind.extras``): recording, serving a recording back, ``net ls``'s builds |

This package may not import the store: it gets a narrow one (``envs.extras.KindStore``);
``replaykit/episodes/network.py`` streams the bodies into blobs and lists exchanges.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict


class NetworkRequest(TypedDict, total=False):
    """What an episode's environment gets of the frozen network (``EnvRequest.extras``; ``{}``:
    none), from ``extras.py``'s ``recording`` (a run) or ``serving`` (a re-execution)."""

    store: str  # the folder holding the store's CA (``extras.ca_home``)
    serve: str  # a folder serving a recording (``index.json`` + ``bodies/``)
    serve_only: bool  # refuse what the recording does not hold (a re-execution)


def attach(
    client: Any,
    request: NetworkRequest | None,
    mode: str,
    episode: str,
    labels: dict[str, str],
    allow: Sequence[str] = (),
) -> Any:
    """An :class:`~replaykit.envs.docker.network.wiring.EpisodeNetwork` for this episode, or None
    when it has no network (mode ``none``) or no store to keep what it fetches."""
    from replaykit.envs.docker.network.ca import StoreCA, network_folder
    from replaykit.envs.docker.network.wiring import EpisodeNetwork

    if mode == "none" or not request or not request.get("store"):
        return None
    serve = request.get("serve")
    return EpisodeNetwork(
        client,
        StoreCA(network_folder(Path(request["store"]))),
        mode,
        episode,
        labels,
        serve=Path(serve) if serve else None,
        serve_only=bool(request.get("serve_only")),
        allow=allow,
    )
