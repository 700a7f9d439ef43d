"""The ``docker`` kind's own ``env`` keys (``env: {kind: docker, image_aliases: {…}}``).

The shared keys (``timeout_sec``, ``max_output_bytes``, ``snapshot``) live in the
config's ``EnvConfig``; these are validated by the kind when a config is loaded, so an
unknown key under ``kind: docker`` is one line naming it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

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
