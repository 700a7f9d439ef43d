"""The ``docker`` kind's own ``env`` keys (``env: {kind: docker, image_aliases: {…}}``).

The shared keys (``timeout_sec``, ``max_output_bytes``, ``snapshot``) live in the
config's ``EnvConfig``; these are validated by the kind when a config is loaded, so an
unknown key under ``kind: docker`` is one line naming it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from replaykit.envs.base import EnvSettings


class DockerSettings(EnvSettings):
    image_aliases: dict[str, str] = Field(
        default_factory=dict,
        description="Base images to replace (`FROM python:3.12-slim` → a local image); replaykit never pulls.",
    )
    network: Literal["frozen", "live", "none"] | None = Field(
        default=None,
        description=(
            "Tasks that may reach the internet (`allow_internet`): `frozen` (default) records what a"
            " container fetches through replaykit's proxy during run/train and serves only that to"
            " certify; `live` fetches for real (never certified deterministic); `none` cuts the network."
        ),
    )
    network_allow: list[str] = Field(
        default_factory=list,
        description=(
            "`host:port` entries the frozen network's proxy may reach although they are the host's"
            " loopback, link-local or private addresses (refused otherwise), e.g. a local test"
            ' upstream: `["127.0.0.1:8443"]`.'
        ),
    )

    @field_validator("network_allow")
    @classmethod
    def _host_ports(cls, entries: list[str]) -> list[str]:
        out = []
        for item in entries:
            host, sep, port = item.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{item!r} is not host:port (e.g. 127.0.0.1:8443, [::1]:8443)")
            out.append(f"{host.lower()}:{int(port)}")
        return out
