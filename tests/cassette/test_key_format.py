"""Key format 2: a key names what an episode ran, never where. The same engine on another port,
host or machine, a hosted API with or without its port, a model file kept in another folder and
a task copied into another folder make the same key; a format-1 key reads and verifies as it
was stored."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, cast

import pytest

from replaykit.cassette.keys import KEY_FORMAT, CassetteKey, ModelId
from replaykit.core.determinism import digest_of
from replaykit.envs.tasks import load_panel
from replaykit.episodes.config import load_config
from replaykit.episodes.panel_keys import episode_keys
from replaykit.models.config import ModelConfig
from replaykit.models.endpoint import model_id
from replaykit.models.identity import measure_identity
from tests.models.test_identity import LLAMA_CPP, serve

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
ENGINE: dict[str, Any] = {"engine": "llama.cpp", "n_ctx": 4096, "model_path": "m.gguf", "canary": "0123abcd"}


def cfg(base_url: str, name: str = "smollm2") -> ModelConfig:
    return ModelConfig(name=name, base_url=base_url, api_key_env="")


def test_a_measured_engine_is_named_by_its_identity_on_any_port_or_host() -> None:
    here = model_id(cfg("http://127.0.0.1:8080/v1"), ENGINE)
    there = model_id(cfg("http://10.0.0.7:9191/v1/"), ENGINE)
    assert here == there and here.endpoint.startswith("engine:") and "8080" not in here.label()
    other = model_id(cfg("http://127.0.0.1:8080/v1"), {**ENGINE, "n_ctx": 2048})
    assert other.endpoint != here.endpoint  # another engine is another model


def test_a_hosted_api_is_named_by_its_host_without_the_port_and_builtin_stays_builtin() -> None:
    hosted = {"model": "gpt-4o"}  # a hosted API's listed model: no canary
    a = model_id(cfg("https://api.example.com:443/v1"), hosted)
    b = model_id(cfg("https://API.example.com/v1/"), None)
    assert a == b and a.endpoint == "https://api.example.com/v1"
    assert (
        model_id(cfg("http://127.0.0.1:8000/v1")).endpoint == model_id(cfg("http://localhost:9/v1")).endpoint
    )
    builtin = model_id(cfg("builtin", "reference-strong"))
    assert (builtin.endpoint, builtin.revision) == ("builtin", "sim-1")


def test_a_model_file_reported_by_its_absolute_path_is_kept_by_its_name() -> None:
    identities = []
    for folder in ("/models", "/root/.cache/replaykit/models"):
        props = cast(dict[str, Any], LLAMA_CPP["/props"])
        routes = {**LLAMA_CPP, "/props": {**props, "model_path": f"{folder}/qwen3-4b.gguf"}}
        for url in serve(routes):
            identities.append(measure_identity(url))
    assert identities[0] == identities[1] and identities[0] is not None
    assert identities[0]["model_path"] == "qwen3-4b.gguf"
    assert model_id(cfg("http://a:1/v1"), identities[0]) == model_id(cfg("http://b:2/v1"), identities[1])


def _keys(root: Path, base_url: str) -> list[str]:
    config = load_config(root / "configs" / "quickstart.yaml")
    model = config.model.model_copy(update={"base_url": base_url, "api_key_env": ""})
    tasks = load_panel(config.panel.tasks, config.base_dir)
    return [k.id for k, _ in episode_keys(config, "a" * 40, tasks, model, mid=model_id(model, ENGINE))]


def test_the_same_panel_from_another_folder_and_port_has_the_same_keys(tmp_path: Path) -> None:
    for name in ("a", "b"):
        for folder in ("configs", "envs"):
            shutil.copytree(REPO / folder, tmp_path / name / folder)
    here = _keys(tmp_path / "a", "http://127.0.0.1:8080/v1")
    there = _keys(tmp_path / "b", "http://127.0.0.1:18081/v1")
    assert here == there and len(here) >= 16


def test_a_format1_key_reads_and_verifies_as_it_was_stored() -> None:
    stored = {
        "harness_sha": "3d8e7799a1d95a28ba55fd05c0b9a7cdf72492ee",
        "task_id": "copy-file",
        "task_digest": "2b5cf4d13855056fceee9340bfe2d3b33acefdf6e53bec389511f59990cf317b",
        "model": {"name": "smollm2", "endpoint": "http://127.0.0.1:8080/v1", "revision": ""},
        "seed": 0,
        "config_digest": "dffc76b67ddeb491",
        "kind": "episode",
        "extra": [["env", "docker"], ["image", "sha256:" + "1" * 64]],
        "format": 1,
    }
    key = CassetteKey.from_canonical(json.loads(json.dumps(stored)))
    assert key.format == 1 and dict(key.canonical()) == stored
    assert key.id == digest_of(stored)[:24]
    assert KEY_FORMAT == 2 and key.in_format(2).id != key.id
    fresh = CassetteKey("s", "t", "d", ModelId("m", "builtin", "sim-1"), 0, "c")
    assert fresh.canonical()["format"] == 2 and CassetteKey.from_canonical(fresh.canonical()) == fresh
