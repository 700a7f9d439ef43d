"""The environment kind is always part of the cassette key (and so of the run id)."""

from __future__ import annotations

from pathlib import Path

from replaykit.cassette.store import Store
from replaykit.envs.registry import ENVIRONMENTS, env_key_extra, get_env_kind, register_env
from replaykit.envs.section import EnvConfig
from replaykit.envs.tasks import load_task
from replaykit.episodes.run import measure
from replaykit.testing import project_root, small_config


def test_a_new_env_kind_never_reuses_local_cassettes(tmp_path: Path) -> None:
    register_env("local-twin", get_env_kind("local").factory)  # same behaviour, different kind, no key extra
    try:
        local_cfg = small_config(tmp_path, tasks=["hello-file"], seeds=[0])
        twin_cfg = small_config(tmp_path, tasks=["hello-file"], seeds=[0], **{"env.kind": "local-twin"})
        store = Store(local_cfg.store_path)
        local = measure(local_cfg, store=store)
        twin = measure(twin_cfg, store=store)
        assert local.recorded and twin.recorded and not twin.reused  # recorded afresh, not reused
        assert set(local.run.cassettes).isdisjoint(twin.run.cassettes)
        assert local.run.run_id != twin.run.run_id
        again = measure(twin_cfg, store=store)  # the new kind's own cassettes are reused
        assert again.reused == twin.run.cassettes and again.run.run_id == twin.run.run_id
        key = store.get_episode(twin.run.cassettes[0]).key
        assert dict(key.extra)["env"] == "local-twin"
    finally:
        ENVIRONMENTS.unregister("local-twin")


def test_kind_comes_first_and_is_not_duplicated() -> None:
    register_env(
        "extra-kind", get_env_kind("local").factory, lambda env, task: (("env", "spoof"), ("image", "x"))
    )
    try:
        task = load_task(project_root() / "envs" / "hello-file")
        assert env_key_extra(EnvConfig(kind="extra-kind"), task) == (("env", "extra-kind"), ("image", "x"))
        assert env_key_extra(EnvConfig(kind="local"), task) == (("env", "local"),)
    finally:
        ENVIRONMENTS.unregister("extra-kind")
