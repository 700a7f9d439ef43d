"""Building the base image says how far debootstrap is (a stage line every 25 packages) and
an honest estimate, instead of one "about a minute" line and minutes of silence."""

from __future__ import annotations

from pathlib import Path

import pytest

from replaykit.envs.docker.base_image import _debootstrap

pytestmark = pytest.mark.unit


def test_debootstrap_progress_names_each_stage_with_a_count(tmp_path: Path) -> None:
    script = tmp_path / "debootstrap"  # debootstrap's own output shape: I: <Verb> <package>
    script.write_text(
        "#!/bin/sh\n"
        "echo 'I: Retrieving InRelease'\n"
        'for i in $(seq 1 60); do echo "I: Retrieving pkg$i 1.0"; done\n'
        'for i in $(seq 1 30); do echo "I: Unpacking pkg$i..."; done\n'
        "echo 'I: Base system installed successfully.'\n"
    )
    script.chmod(0o755)
    said: list[str] = []
    code, tail = _debootstrap([str(script)], said.append)
    assert code == 0 and tail[-1] == "I: Base system installed successfully."
    assert said == [
        "debootstrap: retrieving packages (1 so far)",
        "debootstrap: retrieving packages (25 so far)",
        "debootstrap: retrieving packages (50 so far)",
        "debootstrap: unpacking packages (1 so far)",
        "debootstrap: unpacking packages (25 so far)",
    ]
    failing = tmp_path / "failing"
    failing.write_text('#!/bin/sh\necho "E: Could not download packages" >&2\nexit 1\n')
    failing.chmod(0o755)
    assert _debootstrap([str(failing)], None) == (1, ["E: Could not download packages"])


class Rebuilt(Exception):
    """What the test's debootstrap raises: the build went past the cache check."""


def test_an_image_built_with_other_packages_is_rebuilt_not_reused(monkeypatch: pytest.MonkeyPatch) -> None:
    from replaykit.envs.docker import base_image

    labels: dict[str, str] = {}
    monkeypatch.setattr(base_image, "docker_client", lambda: object())
    monkeypatch.setattr(base_image, "image_exists", lambda client, tag: "sha256:old")
    monkeypatch.setattr(base_image, "image_config", lambda client, tag: {"Labels": dict(labels)})

    def rebuild() -> str:
        raise Rebuilt

    monkeypatch.setattr(base_image, "_debootstrap_program", rebuild)
    said: list[str] = []
    with pytest.raises(Rebuilt):  # an image from before tmux was in the base: no packages label
        base_image.build_base_image(progress=said.append)
    assert said == [
        "replaykit/base:bookworm was built with other packages than python3,python-is-python3,python3-pytest,tmux: rebuilding it"
    ]
    labels[base_image.PACKAGES_LABEL] = "python3,python-is-python3,python3-pytest"
    with pytest.raises(Rebuilt):
        base_image.build_base_image()
    labels[base_image.PACKAGES_LABEL] = ",".join(base_image.BASE_PACKAGES)
    assert base_image.build_base_image() == {
        "tag": "replaykit/base:bookworm",
        "id": "sha256:old",
        "built": False,
    }
    assert "tmux" in base_image.BASE_PACKAGES


def test_a_python_flavour_on_a_root_without_tmux_is_rebuilt(monkeypatch: pytest.MonkeyPatch) -> None:
    from replaykit.envs.docker import base_image, flavours, images

    labels = {
        "replaykit.flavour-version": flavours.FLAVOUR_VERSION,
        "replaykit.flavour-wheels": ",".join(flavours.WHEEL_PINS),
        base_image.PACKAGES_LABEL: "python3,python-is-python3,python3-pytest,python3-pip,python3-venv,ca-certificates",
    }
    monkeypatch.setattr(images, "docker_client", lambda: object())
    monkeypatch.setattr(images, "image_exists", lambda client, tag: "sha256:flavour")
    monkeypatch.setattr(images, "image_config", lambda client, tag: {"Labels": dict(labels)})
    monkeypatch.setattr(base_image, "image_config", images.image_config)

    def root(**kwargs: object) -> dict[str, object]:
        raise Rebuilt

    monkeypatch.setattr(base_image, "build_base_image", root)
    with pytest.raises(Rebuilt):  # its label (inherited from the root) lacks tmux: the root is made again
        flavours.build_python_image()
    labels[base_image.PACKAGES_LABEL] = ",".join(flavours.PYTHON_PACKAGES)
    assert flavours.build_python_image()["built"] is False
