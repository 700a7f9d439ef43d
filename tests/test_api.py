"""The seed's Python API, exactly as the README shows it."""

from __future__ import annotations

from pathlib import Path

from replaykit.testing import write_config


def test_readme_loop(tmp_path: Path) -> None:
    from replaykit import AgenticEstimator, GreedyMonotonic, OpenAIBackend, StrictPareto, Trainer

    config_path = write_config(
        tmp_path,
        {
            "panel.tasks": [
                str(Path(__file__).parents[1] / "envs" / t) for t in ("hello-file", "fix-config-port")
            ]
        },
    )
    criterion = StrictPareto()
    optimizer = GreedyMonotonic()
    trainer = Trainer(
        config_path=config_path,
        estimator=AgenticEstimator(backend=OpenAIBackend(model="reference-proposer", base_url="builtin")),
        criterion=criterion,
        optimizer=optimizer,
    )
    decisions = []
    for loss in trainer.epochs(2):
        loss.backward()
        optimizer.step()
        decisions.append((loss.epoch, loss.promoted, loss.item()))
    assert [d[0] for d in decisions] == [0, 1]
    assert decisions[0][1] is True and decisions[0][2] < 0  # the retry nudge solves more: negative loss
    assert trainer.summary().final_baseline == trainer.losses[0].candidate_sha


# -- the public API (docs/api.md) and deprecated aliases ------------------------------


def _public_modules() -> list[str]:
    import re

    text = (Path(__file__).parents[1] / "docs" / "api.md").read_text().split("## When a public name moves")[0]
    return re.findall(r"^\| `(replaykit[\w.]*)` \|", text, flags=re.M)


def test_every_public_name_and_module_resolves() -> None:
    import importlib

    import replaykit

    assert replaykit.__all__ == sorted(replaykit.__all__)
    for name in replaykit.__all__:
        assert getattr(replaykit, name) is not None, name
    modules = _public_modules()
    assert "replaykit.envs.base" in modules and "replaykit.capture.tape" in modules
    for module in modules:
        importlib.import_module(module)


def test_a_moved_module_keeps_a_deprecated_alias_that_warns_on_import() -> None:
    """``replaykit.cassette.tape`` moved to ``replaykit.capture.tape``: a script importing the
    old name still runs, warned (at its own import line) where the name went."""
    import subprocess
    import sys

    script = "from replaykit.cassette.tape import Tape\nimport replaykit.capture.tape as new\nprint(Tape is new.Tape)\n"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr
    assert (
        "<string>:1: DeprecationWarning: replaykit.cassette.tape moved to replaykit.capture.tape"
        in out.stderr
    )
    assert "goes in replaykit 0.2.0" in out.stderr
    strict = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert strict.returncode != 0  # it is a real DeprecationWarning


def test_aliases_are_dropped_when_their_version_comes() -> None:
    from packaging.version import Version

    import replaykit
    from replaykit.core.deprecation import MOVED, MOVED_NAMES

    moved = [*MOVED.items(), *((f"{m}.{n}", v) for (m, n), v in MOVED_NAMES.items())]
    for alias, (target, removed_in) in moved:
        assert Version(replaykit.__version__) < Version(removed_in), (
            f"remove the deprecated alias {alias} (moved to {target}) and its docs/api.md row"
        )


def test_a_moved_name_keeps_a_deprecated_alias_that_warns_on_import() -> None:
    """``ProposalSession`` moved from ``replaykit.train.backends`` to ``replaykit.models.session``:
    the old import still gives the same class, warned at the script's own line; any other
    missing name is still an AttributeError/ImportError."""
    import subprocess
    import sys

    script = (
        "from replaykit.train.backends import ProposalSession\n"
        "import replaykit.models.session as new\n"
        "print(ProposalSession is new.ProposalSession)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr
    assert (
        "<string>:1: DeprecationWarning: replaykit.train.backends.ProposalSession moved to "
        "replaykit.models.session.ProposalSession" in out.stderr
    )
    missing = subprocess.run(
        [sys.executable, "-c", "from replaykit.train.backends import Nope"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert missing.returncode == 1 and "ImportError: cannot import name 'Nope'" in missing.stderr
    assert "DeprecationWarning" not in missing.stderr


def test_envs_grading_is_a_deprecated_alias_of_the_verifier() -> None:
    """``replaykit.envs.grading`` (its public ``oracle_grades``) moved to ``replaykit.envs.verifier``."""
    import subprocess
    import sys

    script = "from replaykit.envs.grading import oracle_grades\nimport replaykit.envs.verifier as new\nprint(oracle_grades is new.oracle_grades)\n"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "True", out.stderr
    assert "DeprecationWarning: replaykit.envs.grading moved to replaykit.envs.verifier" in out.stderr
