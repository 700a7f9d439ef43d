"""Installable as a wheel: build it, install it into a fresh virtualenv outside the
checkout, and run the quickstart training and its offline replay from a project folder
that only holds the quickstart config and the sample tasks (passed in, as a user would).

The fresh venv gets replaykit from the wheel only; its dependencies are borrowed from
the running environment through a ``.pth`` path entry (so nothing is downloaded and
the editable install of the checkout stays invisible: ``.pth`` files of a path entry
are not processed).
"""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


REPO = Path(__file__).resolve().parents[1]


def run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src)
    shutil.copytree(
        REPO / "replaykit", src / "replaykit", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    dist = tmp / "dist"
    built = run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--quiet",
            "--disable-pip-version-check",
            "-w",
            str(dist),
            str(src),
        ],
        tmp,
    )
    assert built.returncode == 0, built.stderr
    wheel = next(dist.glob("replaykit-*.whl"))

    venv = tmp / "venv"
    made = run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp)
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    inst = run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--quiet",
            "--disable-pip-version-check",
            str(wheel),
        ],
        tmp,
    )
    assert inst.returncode == 0, inst.stderr
    venv_site = Path(
        run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp
        ).stdout.strip()
    )
    paths = dict.fromkeys(
        [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()]
    )
    (venv_site / "_replaykit_test_deps.pth").write_text("".join(f"{p}\n" for p in paths))

    project = tmp / "project"
    (project / "configs").mkdir(parents=True)
    shutil.copy(REPO / "configs" / "quickstart.yaml", project / "configs")
    shutil.copytree(REPO / "envs", project / "envs")
    return {"tmp": tmp, "wheel": wheel, "venv": venv, "project": project}


def clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "REPLAYKIT_PROJECT", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(sys.prefix)
    )
    return env


def test_wheel_ships_package_data(installed: dict[str, Path]) -> None:
    names = set(zipfile.ZipFile(installed["wheel"]).namelist())
    assert {
        "replaykit/py.typed",
        "replaykit/templates/quickstart/harness.py",
        "replaykit/templates/terminus/prompt.txt",  # read by the terminus harness at import
        "replaykit/agents/codex/template/harness.py",  # a named agent's harness template
        "replaykit/agents/templates/mini_swe_agent/mswea_env.py",  # the mini-swe-agent template's env module
        "replaykit/train/README.md",
        "replaykit/view/templates/episode.html.j2",  # replaykit view's pages and its two static files
        "replaykit/view/static/view.js",
        "replaykit/view/static/view.css",
    } <= names
    assert not any(n.startswith(("tests/", "envs/", "configs/")) for n in names)


def test_installed_package_is_the_wheel_not_the_checkout(installed: dict[str, Path]) -> None:
    python = installed["venv"] / "bin" / "python"
    out = run(
        [str(python), "-c", "import replaykit.cli, replaykit; print(replaykit.__file__)"],
        installed["tmp"],
        clean_env(),
    )
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()).is_relative_to(installed["venv"]) and not Path(
        out.stdout.strip()
    ).is_relative_to(REPO)


def test_quickstart_training_and_replay_from_the_wheel(installed: dict[str, Path]) -> None:
    exe = str(installed["venv"] / "bin" / "replaykit")
    project = installed["project"]
    trained = run([exe, "train", "configs/quickstart.yaml", "--epochs", "1", "--json"], project, clean_env())
    assert trained.returncode == 0, trained.stderr
    summary = json.loads(trained.stdout)
    assert len(summary["epochs"]) == 1 and summary["epochs"][0]["decision"] in ("accepted", "rejected")
    assert (project / "cassettes" / "index.db").is_file()  # the config's store, inside the project
    replayed = run([exe, "replay", summary["training_id"], "--json"], project, clean_env())
    assert replayed.returncode == 0, replayed.stderr
    assert json.loads(replayed.stdout)["identical"] is True
