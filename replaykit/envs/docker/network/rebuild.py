"""Replay of an image build: a machine without a recorded image rebuilds it from its recorded
build alone (the proxy serves only that recording, on a network with no other way out), then
compares the rebuilt image's digest (``image_digest.py``) with the recorded one. Equal: the
re-execution runs in the rebuilt image. Different: the build is not reproducible, said in one
line (the bundle's ``--with-images`` carries the image itself).
"""

from __future__ import annotations

from pathlib import Path

from replaykit.core.errors import EnvError
from replaykit.envs.docker import image_build
from replaykit.envs.docker.network.build import read_facts
from replaykit.envs.tasks import Task


def rebuild_image(
    task: Task, aliases: dict[str, str], recorded: str, serve: Path, digest: object
) -> image_build.TaskImage:
    """``recorded`` (a key's image: its recipe, or a format-1 ID) rebuilt here from its build's
    recording in ``serve``, its content digest the recorded one."""
    built = image_build.ensure_task_image(task, aliases, serve=serve)
    facts = read_facts(built.id)
    got = facts["digest"] if facts else None
    if not isinstance(digest, str) or got is None:
        raise EnvError(
            f"the image of task {task.id!r} was rebuilt from its recorded build, but its digest cannot "
            f"be compared with the recorded image {recorded[:19]}'s (an image digest needs the engine's "
            "overlay2 layers); import the run's bundle --with-images"
        )
    if got != digest:
        raise EnvError(
            f"the image of task {task.id!r} rebuilt offline from its recorded build differs from the recorded "
            f"image {recorded[:19]} (image digest {got[:12]}, recorded {digest[:12]}): its build is not "
            "reproducible; import the run's bundle --with-images to certify it"
        )
    return built
