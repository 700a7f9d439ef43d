"""A canary API key (and configured secrets) never reach the store."""

from __future__ import annotations

from pathlib import Path

import pytest

from replaykit.episodes.run import measure
from replaykit.models.reference.server import ReferenceServer
from replaykit.testing import small_config

CANARY_KEY = "sk-canary-4b1d2e9f0c7a"
CANARY_SECRET = "hunter2-canary-secret"


def test_canary_key_appears_nowhere_under_the_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CANARY_API_KEY", CANARY_KEY)
    monkeypatch.setenv("CANARY_SECRET", CANARY_SECRET)
    with ReferenceServer() as server:
        config = small_config(
            tmp_path,
            tasks=["hello-file", "count-error-lines"],
            seeds=[0],
            **{
                "model.base_url": server.base_url,
                "model.api_key_env": "CANARY_API_KEY",
                "record.secrets": ["CANARY_SECRET"],
            },
        )
        result = measure(config)
    assert result.recorded and result.run.total == 2
    found = []
    for path in tmp_path.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if CANARY_KEY.encode() in data or CANARY_SECRET.encode() in data:
                found.append(str(path))
    assert found == []
