"""The ``docker`` environment kind: what the registry knows of it (``ENV``) — the
cassette-key extras (the task image's recipe, a live network, sidecar images' recipes:
``recipe.py``), the factory that builds a ``DockerEnv`` for an episode (an image of the
recorded recipe, checked, never another), the oracle check, its settings, its worker-node
hook, its episode extras (the frozen network, ``network/extras.py``) and its bundle
artefacts (task images, ``bundled.py``). The environment itself is ``env.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from replaykit.core.errors import EnvError
from replaykit.envs import task_env
from replaykit.envs.base import EnvKind, EnvRequest, EnvSection
from replaykit.envs.docker import compose, image_build, images, node_images, recipe
from replaykit.envs.docker.bundled import IMAGES
from replaykit.envs.docker.env import DockerEnv
from replaykit.envs.docker.flavours import substitutions
from replaykit.envs.docker.network import NetworkRequest
from replaykit.envs.docker.network.ca import ensure_ca
from replaykit.envs.docker.network.extras import FROZEN_NETWORK
from replaykit.envs.docker.network.wiring import resolve_mode
from replaykit.envs.docker.settings import DockerSettings
from replaykit.envs.limits import with_limits
from replaykit.envs.results import Grade
from replaykit.envs.tasks import Task, load_task
from replaykit.envs.verifier import oracle_grades


def key_extra(env: EnvSection[DockerSettings], task: Task, build: bool = True) -> tuple[tuple[str, str], ...]:
    """Build or reuse the task image; its recipe enters the cassette key, never its local ID
    (``build=False``: an image already built here, else ``EnvError``)."""
    aliases = env.settings.image_aliases
    # a compose file replaykit refuses is said before any image is built
    spec = compose.load_compose(task, task_env.task_env(task.path, task.config, "environment").values)
    scaled = with_limits(task, env.limits())  # the build's timeout scaled
    image = image_build.ensure_task_image(scaled, aliases, build=build)
    extra: tuple[tuple[str, str], ...] = (("image", image.key),)
    if task.allow_internet and env.settings.network == "live":  # never reuses a frozen recording
        extra += (("network", "live"),)
    if spec is not None:  # sidecar images enter the key too (only for multi-container tasks)
        services = compose.service_keys(task, spec, aliases, build=build)
        extra += (("services", ",".join(f"{k}={v}" for k, v in sorted(services.items()))),)
    return extra


def replay_key_extra(env: EnvSection[DockerSettings], task: Task) -> tuple[tuple[str, str], ...]:
    """A replay's key: the task image's ID where it is built here; a replay never builds one."""
    return key_extra(env, task, build=False)


def factory(spec: EnvRequest[DockerSettings]) -> DockerEnv:
    task = with_limits(load_task(Path(spec.task_path)), spec.env.limits())
    settings = spec.env.settings
    aliases = settings.image_aliases
    image = dict(spec.key.extra).get("image")
    extras = dict(spec.extras)
    rebuild = extras.pop("rebuild", None)  # the image's recorded build, when the engine lacks it
    if image and not recipe.is_recipe(image):  # format 1: the recorder's local image ID
        if images.image_exists(images.docker_client(), image) is None:
            image = rebuilt_image(task, aliases, image, rebuild)
    elif image:
        image = recipe_image(task, aliases, image, rebuild)
    else:
        image = image_build.ensure_task_image(task, aliases).id
    return DockerEnv(
        task,
        image,
        image_key=str(dict(spec.key.extra).get("image") or ""),
        warnings=substitutions(task, aliases),  # aliases applied, pins swapped: stored with the episode
        timeout_sec=spec.env.timeout_sec,
        max_output_bytes=spec.env.max_output_bytes,
        snapshot_mode=spec.env.snapshot,
        episode=spec.key.id,
        aliases=aliases,
        network_mode=settings.network,
        network_request=cast(NetworkRequest, extras),
        network_allow=settings.network_allow,
    )


def rebuilt_image(task: Task, aliases: dict[str, str], image: str, rebuild: object) -> str:
    """The recorded image, rebuilt offline from its recorded build (``network/rebuild.py``)."""
    if not isinstance(rebuild, dict):
        raise EnvError(
            f"the recorded image {image[:19]} of task {task.id!r} is not on this Docker engine and its "
            "build was not recorded; import the run's bundle --with-images, or re-record the run"
        )
    from replaykit.envs.docker.network.rebuild import rebuild_image

    return rebuild_image(task, aliases, image, Path(str(rebuild["serve"])), rebuild.get("digest")).id


def recipe_image(task: Task, aliases: dict[str, str], wanted: str, rebuild: object) -> str:
    """This engine's image of the recipe a key names: built here (from the image's recorded build
    when the store has it and the engine lacks the image), and checked to be that recipe."""
    found = recipe.find_image(images.docker_client(), wanted)
    if found is not None:
        return found
    if isinstance(rebuild, dict):  # its recorded build, served back; its content digest compared
        from replaykit.envs.docker.network.rebuild import rebuild_image

        serve = Path(str(rebuild["serve"]))
        built = rebuild_image(task, aliases, wanted, serve, rebuild.get("digest"))
    else:
        built = image_build.ensure_task_image(task, aliases)
    if built.key != wanted:
        made, fetched = recipe.parse_key(built.key)
        recorded, fetches = recipe.parse_key(wanted)
        what = (
            f"recipe {made}, recorded {recorded}: its files, base images or aliases differ"
            if made != recorded
            else f"its build fetched other content (fetches {fetched}, recorded {fetches}); import the "
            "run's bundle with its image's recorded build"
        )
        raise EnvError(f"the image of task {task.id!r} built here is not the one recorded ({what})")
    return built.id


def task_warnings(task: Task, env: EnvSection[DockerSettings]) -> list[str]:
    """The aliases and swapped pins the task's image gets (``tasks check`` shows them)."""
    return substitutions(task, env.settings.image_aliases)


def oracle(task: Task, env: EnvSection[DockerSettings]) -> tuple[Grade, Grade]:
    """Grade an untouched container, then a fresh one where solution/solve.sh ran."""
    task = with_limits(task, env.limits())
    settings = env.settings
    image = image_build.ensure_task_image(task, settings.image_aliases)
    return oracle_grades(
        DockerEnv(
            task,
            image.id,
            episode=f"oracle-{task.id}",
            aliases=settings.image_aliases,
            network_mode=settings.network,  # run's policy: frozen unless the config says live or none
            network_request=check_network(task, settings.network),
            keep_network_spool=False,  # a check keeps nothing it fetched
            network_allow=settings.network_allow,
        )
    )


def check_network(task: Task, setting: str | None) -> NetworkRequest:
    """The frozen network a ``tasks check`` episode gets, as ``run`` would give it: the proxy
    with a CA of its own (``~/.cache/replaykit/network-ca/tasks-check``; nothing is stored)."""
    if resolve_mode(setting, task.allow_internet) == "none":
        return {}
    home = Path.home() / ".cache" / "replaykit" / "network-ca" / "tasks-check"
    ensure_ca(home)
    return {"store": str(home)}


ENV = EnvKind(
    "docker",
    factory,
    key_extra,
    oracle,
    uses_docker=True,
    settings=DockerSettings,
    node_resource=node_images.DOCKER_RESOURCE,
    prepare_nodes=node_images.prepare_nodes,
    extras=FROZEN_NETWORK,
    task_warnings=task_warnings,
    artefacts=IMAGES,
    replay_key_extra=replay_key_extra,
)
