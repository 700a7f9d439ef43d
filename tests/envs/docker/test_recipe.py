"""A task image is named by its recipe, never by this engine's image ID: the same task built
again (another image ID), or on a base image of the same recipe under another tag namespace,
has the same cassette key; a cached image whose recipe label is not what the task makes is
refused in one line; a run recorded on one image reuses its cassettes on the other."""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from replaykit.core.errors import EnvError
from replaykit.envs.base import EnvSection
from replaykit.envs.docker import image_build, images, recipe
from replaykit.envs.docker.kind import ENV, key_extra
from replaykit.envs.docker.settings import DockerSettings
from replaykit.envs.section import recorded_env
from replaykit.envs.tasks import Task, load_task
from replaykit.episodes.config import load_config
from tests.cli_runner import cli

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def own_task(tmp_path: Path, docker_base: str) -> Iterator[Task]:
    """hello-file with a file of its own: an image no other test builds (removed after)."""
    folder = tmp_path / "hello-recipe"
    shutil.copytree(REPO / "envs" / "hello-file", folder)
    (folder / "environment" / "unique.txt").write_text(uuid.uuid4().hex)
    task = load_task(folder)
    yield task
    client = images.docker_client()
    for image in client.images.list(filters={"label": f"replaykit.task={task.id}"}):
        if any(str(t).startswith(image_build.TASK_REPO) for t in image.tags) or not image.tags:
            client.images.remove(image.id, force=True)


def env() -> EnvSection[DockerSettings]:
    return ENV.section(recorded_env({"kind": "docker"}))


def test_the_same_recipe_built_again_is_the_same_key(own_task: Task) -> None:
    first = image_build.ensure_task_image(own_task)
    extra = dict(key_extra(env(), own_task))
    assert extra["image"] == first.key and recipe.is_recipe(first.key)
    client = images.docker_client()
    client.images.remove(first.tag, force=True)
    again = image_build.ensure_task_image(own_task)
    assert again.built and again.id != first.id  # another image ID ...
    assert dict(key_extra(env(), own_task))["image"] == extra["image"]  # ... the same key
    assert recipe.find_image(client, extra["image"]) == again.id


def test_a_base_of_the_same_recipe_under_another_namespace_is_the_same_key(own_task: Task) -> None:
    client = images.docker_client()
    other = f"rk-test-{uuid.uuid4().hex[:8]}/base"
    client.images.get(images.BASE_IMAGE).tag(other, "bookworm")  # same image, another name
    try:
        here = image_build.ensure_task_image(own_task)
        there = image_build.ensure_task_image(own_task, {"debian:bookworm-slim": f"{other}:bookworm"})
        assert there.tag != here.tag  # another build (another FROM) ...
        assert there.key == here.key  # ... of the same recipe
    finally:
        client.images.remove(f"{other}:bookworm")


def test_a_cached_image_of_another_recipe_is_refused_in_one_line(own_task: Task) -> None:
    built = image_build.ensure_task_image(own_task)
    client = images.docker_client()
    client.images.remove(built.tag, force=True)
    repository, _, tag = built.tag.rpartition(":")
    client.images.get(images.BASE_IMAGE).tag(repository, tag)  # not the task's image
    try:
        with pytest.raises(EnvError) as caught:
            image_build.ensure_task_image(own_task, build=False)
    finally:
        client.images.remove(built.tag)
    line = str(caught.value)
    assert len(line.splitlines()) == 1 and f"carries recipe none, not {built.recipe}" in line
    assert f"docker rmi {built.tag}" in line


def test_a_run_reuses_its_cassettes_on_another_image_of_its_recipe(
    own_task: Task, docker_config: Callable[..., Path], tmp_path: Path
) -> None:
    config = docker_config(tmp_path, {"panel.tasks": [str(own_task.path)], "panel.seeds": [0]})
    first = json.loads(cli("run", str(config), "--json", check=True).stdout)
    client = images.docker_client()
    image = dict(json.loads(key_json(config, first["cassettes"][0])).items())["extra"]
    (value,) = [v for k, v in image if k == "image"]
    before = recipe.find_image(client, value)
    assert before is not None
    client.images.remove(before, force=True)  # this machine's image gone: rebuilt, another ID
    again = json.loads(cli("run", str(config), "--json", check=True).stdout)
    assert again["reused_count"] == 1 and again["model_calls"] == 0 and again["run_id"] == first["run_id"]
    rebuilt = recipe.find_image(client, value)
    assert rebuilt is not None and rebuilt != before
    certified = json.loads(
        cli("certify", first["run_id"], "--config", str(config), "--json", check=True).stdout
    )
    assert certified["deterministic"] == 1 and certified["tasks"][0]["image"] == value


def key_json(config: Path, cassette: str) -> str:
    from replaykit.cassette.store import Store

    store = Store(load_config(config).store_location, readonly=True)
    try:
        return store.cassette_row(cassette)["key_json"]
    finally:
        store.close()
