"""Docker environment pieces that need no Docker engine: Dockerfile rewriting, image
references, change roots, the mirror lookup, the unreachable-daemon error, Harbor sizes."""

from __future__ import annotations

from pathlib import Path

import pytest

from replaykit.core.errors import EnvError
from replaykit.envs.docker import base_image, images
from replaykit.envs.docker.images import BASE_IMAGE, DEFAULT_ALIAS_SOURCES, normalise_ref, rewrite_dockerfile
from replaykit.envs.docker.snapshot import ADDED, DELETED, MODIFIED, change_roots
from replaykit.envs.task_schema import size_mb
from replaykit.envs.tasks import load_task


def test_rewrite_from_lines_keeps_stages_flags_and_scratch() -> None:
    text = (
        "# syntax=docker/dockerfile:1\n"
        "FROM --platform=linux/amd64 python:3.12-slim AS build\n"
        "RUN echo hi\n"
        "from build as final\n"
        "FROM scratch\n"
        "FROM ${BASE}\n"
        "FROM ubuntu:24.04\n"
    )
    mapping = {"python:3.12-slim": "local/py", "ubuntu:24.04": "local/ub"}
    out, bases = rewrite_dockerfile(text, lambda ref: mapping.get(ref, ref))
    assert "FROM --platform=linux/amd64 local/py AS build" in out
    assert "from build as final" in out  # a stage name is not an image
    assert "FROM scratch" in out and "FROM ${BASE}" in out
    assert "FROM local/ub" in out
    assert bases == ["local/py", "local/ub"]


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("debian:bookworm-slim", "debian:bookworm-slim"),
        ("docker.io/library/debian:12", "debian:12"),
        ("python:3.12-slim@sha256:" + "a" * 64, "python:3.12-slim"),
        ("ubuntu", "ubuntu:latest"),
        ("registry.local:5000/team/img", "registry.local:5000/team/img:latest"),
        ("public.ecr.aws/docker/library/python:3.11-slim", "python:3.11-slim"),
        ("mirror.gcr.io/library/ubuntu:24.04", "ubuntu:24.04"),
    ],
)
def test_normalise_ref(ref: str, expected: str) -> None:
    assert normalise_ref(ref) == expected


def test_defaults_cover_the_sample_and_harbor_bases() -> None:
    for ref in ("debian:bookworm-slim", "debian:bookworm", "ubuntu:24.04", "python:3.12-slim"):
        assert ref in DEFAULT_ALIAS_SOURCES


class _NoImages:
    """A client stand-in on which no image exists."""

    class images:
        @staticmethod
        def get(ref: str) -> None:
            import docker.errors

            raise docker.errors.ImageNotFound(ref)


def test_alias_resolution_order() -> None:
    client = _NoImages()
    assert images.alias_for(client, "ubuntu:24.04", {}) == BASE_IMAGE  # default, absent locally
    assert images.alias_for(client, "ubuntu:24.04", {"ubuntu:24.04": "mine:1"}) == "mine:1"
    digest_ref = "python:3.12-slim@sha256:" + "b" * 64
    assert images.alias_for(client, digest_ref, {"python:3.12-slim": "mine:py"}) == "mine:py"
    assert images.alias_for(client, "alpine:3.20", {}) == "alpine:3.20"  # unknown: left as is


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("public.ecr.aws/docker/library/python:3.11-slim", images.PYTHON_FLAVOUR),
        ("public.ecr.aws/docker/library/python:3.13-slim-bookworm", images.PYTHON_FLAVOUR),
        ("public.ecr.aws/docker/library/debian:bookworm-slim", BASE_IMAGE),
        ("ghcr.io/laude-institute/t-bench/python-3-13:20250620", images.PYTHON_FLAVOUR),
        ("ghcr.io/laude-institute/t-bench/ubuntu-24-04:latest", BASE_IMAGE),
        ("ghcr.io/someone-else/t-bench/python-3-13:1", "ghcr.io/someone-else/t-bench/python-3-13:1"),
    ],
)
def test_mirrors_and_tbench_bases_alias_by_default(ref: str, expected: str) -> None:
    assert images.alias_for(_NoImages(), ref, {}) == expected


def test_missing_python_base_hint_names_the_pip_flavour() -> None:
    hint = images.missing_base_hint("registry.local/team/python-ml:2")
    assert images.PYTHON_FLAVOUR in hint and "pip" in hint
    assert "--alias registry.local/team/python-ml:2=" + images.PYTHON_FLAVOUR in hint
    other = images.missing_base_hint("registry.local/team/node:22")
    assert "--alias registry.local/team/node:22=" + BASE_IMAGE in other and images.PYTHON_FLAVOUR in other
    assert "--flavor python" in images.missing_base_hint(images.PYTHON_FLAVOUR)


def test_change_roots() -> None:
    entries = sorted(
        [
            ("/app", MODIFIED),
            ("/app/new", ADDED),
            ("/app/new/a.txt", ADDED),
            ("/app/new/sub", ADDED),
            ("/app/new/sub/b", ADDED),
            ("/app/edited.txt", MODIFIED),
            ("/etc", MODIFIED),
            ("/etc/issue", DELETED),
            ("/tmp", MODIFIED),
        ]
    )
    # /tmp is a changed leaf (e.g. its mode changed); /app and /etc only hold changes.
    assert change_roots(entries) == ["/app/edited.txt", "/app/new", "/tmp"]


def test_host_mirror_override_and_lookup(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REPLAYKIT_DEBIAN_MIRROR", "http://mirror.invalid/debian")
    assert base_image.host_mirror() == "http://mirror.invalid/debian"
    monkeypatch.delenv("REPLAYKIT_DEBIAN_MIRROR")
    found = base_image.host_mirror()  # whatever this host's apt uses for bookworm, or None
    assert found is None or found.rstrip("/").endswith("/debian")


def test_unreachable_daemon_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.setattr(images, "_clients", {})
    with pytest.raises(EnvError) as info:
        images.docker_client()
    message = str(info.value)
    assert "\n" not in message
    assert "cannot reach the Docker daemon at unix:///nonexistent/docker.sock" in message


@pytest.mark.parametrize(
    ("text", "mb"),
    [
        ("2G", 2048),
        ("512M", 512),
        ("512Mi", 512),
        ("1.5GB", 1536),
        ("4096", 4096),
        ("lots", None),
        ("0G", None),
    ],
)
def test_harbor_size_strings(text: str, mb: int | None) -> None:
    assert size_mb(text) == mb


def _task(folder: Path, toml: str) -> Path:
    (folder / "tests").mkdir(parents=True)
    (folder / "task.toml").write_text(toml)
    (folder / "instruction.md").write_text("Do it.\n")
    (folder / "tests" / "test.sh").write_text("exit 0\n")
    return folder


def test_harbor_published_forms_load(tmp_path: Path) -> None:
    v1 = load_task(
        _task(tmp_path / "v1", 'version = "1.0"\n[environment]\nmemory = "1G"\nstorage = "10G"\ncpus = 2\n')
    )
    assert v1.memory_mb == 1024 and v1.cpus == 2
    schema = load_task(
        _task(
            tmp_path / "s",
            'schema_version = "1.3"\n[task]\nname = "org/s"\nkeywords = ["x"]\n'
            '[verifier]\ntimeout_sec = 60.0\nenv = { K = "v" }\n',
        )
    )
    assert schema.verifier_timeout_sec == 60.0 and schema.memory_mb == 2048


def test_harbor_folder_of_tasks_is_a_panel(tmp_path: Path) -> None:
    from replaykit.envs.tasks import load_panel

    for name in ("b-task", "a-task"):
        _task(tmp_path / "suite" / name, 'version = "1.0"\n')
    assert [t.id for t in load_panel(["suite"], tmp_path)] == ["a-task", "b-task"]
