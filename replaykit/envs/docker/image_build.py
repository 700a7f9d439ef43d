"""Task image builds: a task's ``environment/Dockerfile`` built from a temporary context in
which every ``FROM`` is aliased (``images.py``), or the cached image reused. Images are cached
by a content digest of the environment folder, the rewritten Dockerfile, the IDs of the base
images and how the build reached the network, and tagged ``replaykit-task/<task-id>:<digest12>``;
what enters cassette keys is the image's recipe (``recipe.py``: what it is made of, never its
local ID), written on it as a label and checked when a cached image is used.

A task that may reach the internet builds through the frozen network (``network/build.py``):
an internal network whose only way out is the recording proxy, every ``RUN`` trusting its CA
(``network/build_trust.py``); its exchanges and the image's digest are kept beside the image.
With ``serve`` (a recording) the proxy serves only that: the image is rebuilt offline, and a
request the recording lacks is named in the failure. A failed build is one line naming the
task's Dockerfile, the step as the task wrote it, the error and the step's last lines.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replaykit.core.determinism import digest_of
from replaykit.core.errors import EnvError
from replaykit.envs.docker import images, recipe
from replaykit.envs.docker.heredoc import rewrite_heredocs
from replaykit.envs.docker.images import (
    FROM_LINE,
    BuildLog,
    alias_for,
    docker_client,
    missing_base_hint,
    plain,
    rewrite_dockerfile,
)
from replaykit.envs.docker.network.build import (
    BuildFacts,
    build_network,
    note_image,
    proxy_available,
    write_facts,
)
from replaykit.envs.docker.network.build_trust import trust_rewrite
from replaykit.envs.docker.network.image_digest import image_digest
from replaykit.envs.tasks import Task, task_digest

TASK_REPO = "replaykit-task"
IMAGE_FORMAT = 2  # bump to rebuild every task image (2: the recipe label)


@dataclass(frozen=True)
class TaskImage:
    """A built (or reused) task image."""

    id: str
    tag: str
    digest: str
    built: bool
    recipe: str = ""  # what it is made of (``recipe.py``), the label it carries
    fetches: str | None = None  # the digest of what its build fetched through the frozen network

    @property
    def key(self) -> str:
        """How a cassette key names this image (``recipe:…``)."""
        return recipe.image_key(self.recipe, self.fetches)


def image_tag(task: Task | str, digest: str) -> str:
    name = (
        re.sub(r"[^a-z0-9._-]+", "-", (task if isinstance(task, str) else task.id).lower()).strip(".-_")
        or "task"
    )
    return f"{TASK_REPO}/{name}:{digest[:12]}"


def ensure_task_image(
    task: Task,
    aliases: dict[str, str] | None = None,
    progress: BuildLog | None = None,
    serve: Path | None = None,
    build: bool = True,
) -> TaskImage:
    """Build ``environment/Dockerfile`` (no registry; with the network, as Harbor builds: through
    the frozen network's proxy for a task that may reach the internet, ``serve`` replaying a
    build's recording) or reuse the cached image (``build=False``: only that, else ``EnvError``)."""
    image = _ensure_task_image(task, aliases, progress, serve, build)
    note_image(image.id, image.key)  # a run recording on it keeps its build's recording
    return image


def _ensure_task_image(
    task: Task, aliases: dict[str, str] | None, progress: BuildLog | None, serve: Path | None, build: bool
) -> TaskImage:
    client = docker_client()
    dockerfile = task.environment_dir / "Dockerfile"
    env_table = task.config.get("environment")
    prebuilt = env_table.get("docker_image") if isinstance(env_table, dict) else None
    if dockerfile.is_file():
        try:
            original = rewrite_heredocs(dockerfile.read_text(encoding="utf-8"), str(dockerfile))
        except (OSError, UnicodeDecodeError) as exc:
            raise EnvError(f"{dockerfile}: unreadable: {exc}") from None
        source = str(dockerfile)
    elif isinstance(prebuilt, str) and prebuilt.strip():
        original = f"FROM {prebuilt.strip()}\n"  # Harbor's environment.docker_image: a prebuilt image
        source = f"{task.path / 'task.toml'}: environment.docker_image {prebuilt.strip()!r}"
    else:
        raise EnvError(
            f"{dockerfile}: missing; a task needs environment/Dockerfile (or environment.docker_image) to run in Docker"
        )
    return build_cached(
        client, task, task.environment_dir, original, source, task.id, aliases, progress, serve, build
    )


def build_cached(
    client: Any,
    task: Task,
    context_dir: Path,
    original: str,
    source: str,
    name: str,
    aliases: dict[str, str] | None = None,
    progress: BuildLog | None = None,
    serve: Path | None = None,
    build: bool = True,
) -> TaskImage:
    """Build ``original`` (a Dockerfile's text, heredocs already rewritten) in a copy of
    ``context_dir`` with every FROM aliased, or reuse the image cached under its digest
    (``build=False``: only reuse; a missing image is an ``EnvError``)."""

    aliases = dict(aliases or {})
    written: dict[str, str] = {}  # FROM as the task wrote it -> the local image it runs on

    def resolve(ref: str) -> str:
        written[ref] = alias_for(client, ref, aliases)
        return written[ref]

    text, bases = rewrite_dockerfile(original, resolve)
    if not any(FROM_LINE.match(line) for line in original.splitlines()):
        raise EnvError(f"{source}: field 'FROM' is missing; the Dockerfile names no base image")
    base_ids: dict[str, str] = {}
    for ref in bases:
        found = images.image_exists(client, ref)
        if found is None:
            raise EnvError(
                f"{source}: base image {ref!r} is not present locally and replaykit never pulls; "
                + missing_base_hint(ref)
            )
        base_ids[ref] = found
    # Harbor always builds with the network; here through the frozen network's proxy
    network = "frozen" if task.allow_internet and proxy_available() else "default"
    environment = task_digest(context_dir)
    made_of = recipe.recipe_of(
        environment, original, {ref: recipe.base_recipe(client, to) for ref, to in written.items()}, network
    )
    digest = digest_of(
        {
            "format": IMAGE_FORMAT,
            "environment": environment,
            "dockerfile": text,
            "bases": base_ids,
            "build_network": network,
        }
    )
    tag = image_tag(name, digest)
    existing = images.image_exists(client, tag)
    if existing is not None:
        _check_label(client, existing, tag, made_of, source)
        return TaskImage(existing, tag, digest, False, made_of, recipe.fetches_digest(existing))
    if not build:
        raise EnvError(f"{source}: image {tag} is not built on this machine (a replay builds none)")
    if progress:
        progress(f"building image {tag} for task {task.id}")
    image_id = build_image(client, task, context_dir, text, tag, digest, source, bases, serve, made_of)
    return TaskImage(image_id, tag, digest, True, made_of, recipe.fetches_digest(image_id))


def _check_label(client: Any, image_id: str, tag: str, made_of: str, source: str) -> None:
    """A cached image is used only when its recipe label is the recipe it stands for."""
    labels = images.image_config(client, image_id).get("Labels") or {}
    found = labels.get(recipe.RECIPE_LABEL)
    if found != made_of:
        raise EnvError(
            f"{source}: the local image {tag} carries recipe {found or 'none'}, not {made_of} (what the "
            f"task's files and base images make); remove it (docker rmi {tag}) and it is built again"
        )


_STEP = re.compile(r"^Step (\d+/\d+) : (.*)$", re.DOTALL)
_NOISE = re.compile(r"^\s*(---> |Removing intermediate container )")
#: Docker's error for a failed RUN, which quotes the command: replaykit's CA wrapper, many lines
_COMMAND_FAILED = re.compile(r"^The command '.*' returned a non-zero code: (\d+)$", re.DOTALL)


def step_error(error: str) -> str:
    """Docker's error as one line, a failed RUN's quoted command left out (the step names it)."""
    m = _COMMAND_FAILED.match(error.strip())
    return f"its command returned a non-zero code: {m.group(1)}" if m else " ".join(error.split())


def build_failure(source: str, step: str, error: str, log: list[str]) -> str:
    """One line: which task's Dockerfile, the build step that failed, the error, its last lines."""
    m = _STEP.match(step)  # (the step numbers count replaykit's rewritten Dockerfile: not shown)
    where = f" at step `{' '.join(m.group(2).split())[:160]}`" if m else ""
    said = " | ".join(line.strip() for line in log if not _NOISE.match(line))[-400:]
    return f"{source}: image build failed{where}: {step_error(error)}" + (f" ({said})" if said else "")


def _stream(client: Any, context: Path, tag: str, source: str, names: dict[str, str], **options: Any) -> None:
    """Run the build, raising one line at its first error."""
    step, log = "", list[str]()
    for chunk in client.api.build(
        path=str(context),
        dockerfile="Dockerfile",
        tag=tag,
        rm=True,
        forcerm=True,
        pull=False,
        decode=True,
        **options,
    ):
        if "stream" in chunk:
            text = plain(str(chunk["stream"]))
            m = _STEP.match(text.strip())
            if m:  # a step's line (a rewritten RUN is one long line: named as the task wrote it)
                shown = names.get(m.group(2).strip(), m.group(2).strip())
                step, log = f"Step {m.group(1)} : {shown}", []
                continue
            log.extend(line for line in text.splitlines() if line.strip())
        if "error" in chunk:
            raise EnvError(build_failure(source, step, plain(str(chunk["error"])).strip(), log))


def build_image(
    client: Any,
    task: Task,
    context_dir: Path,
    text: str,
    tag: str,
    digest: str,
    source: str,
    bases: list[str],
    serve: Path | None = None,
    made_of: str = "",
) -> str:
    """Build ``text`` in a copy of ``context_dir`` as ``tag``, labelled with its recipe; the image ID."""
    import docker.errors

    with (
        build_network(client, task.allow_internet, serve) as network,
        tempfile.TemporaryDirectory(prefix="replaykit-build-") as tmp,
    ):
        context = Path(tmp) / "context"
        if context_dir.is_dir():
            shutil.copytree(context_dir, context, symlinks=True)
        else:
            context.mkdir()
        names: dict[str, str] = {}
        if network is not None:
            text, names = trust_rewrite(text)
        (context / "Dockerfile").write_text(text, encoding="utf-8")
        options: dict[str, Any] = {
            "timeout": max(60, int(task.build_timeout_sec)),
            # as Harbor, builds have the network whatever the task's policy: here the proxy's
            "network_mode": network.name if network is not None else "default",
            "labels": {"replaykit.task": task.id, "replaykit.digest": digest, recipe.RECIPE_LABEL: made_of},
        }
        if network is not None:
            options["buildargs"] = network.buildargs
        try:
            _stream(client, context, tag, source, names, **options)
        except EnvError as exc:
            misses = network.misses() if network is not None and serve is not None else []
            if misses:
                first = misses[0]
                raise EnvError(
                    f"{exc}; rebuilding offline from the image's recorded build, unrecorded request "
                    f"{first['method']} {first['url']}"
                    + (f" (and {len(misses) - 1} more)" if len(misses) > 1 else "")
                ) from None
            raise
        except docker.errors.APIError as exc:
            raise EnvError(f"{source}: image build failed: {plain(str(exc.explanation or exc))}") from None
        except OSError as exc:
            raise EnvError(f"building the image of task {task.id!r} failed: {exc}") from None
        found = images.image_exists(client, tag)
        if found is None:
            raise EnvError(f"{source}: the build produced no image {tag}")
        if network is not None:  # what the build fetched belongs to the image it built
            facts: BuildFacts = {
                "image": found,
                "digest": image_digest(client, found, bases),
                "task": task.id,
                "bases": list(bases),
                "recorded": True,
            }
            write_facts(facts, network.spool, bodies=serve)
    return found
