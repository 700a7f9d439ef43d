"""A config is validated whole before anything is created (issue 32 item 1, issue 30 item 5):
an empty file, a missing section, every referenced path, the ``train:`` section and the
factories it names; replay-only modes never create a store; nothing is written outside the
config's folder unless the config names the place."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from replaykit.core.errors import ConfigError
from replaykit.episodes.config import RunConfig, load_config
from replaykit.testing import QUICKSTART_TASKS, REPO_ROOT
from replaykit.train.config import train_config
from tests.cli_runner import cli

QUICKSTART = yaml.safe_load((REPO_ROOT / "configs" / "quickstart.yaml").read_text())
TASKS = [str(REPO_ROOT / "envs" / t) for t in QUICKSTART_TASKS]


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def written(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return path


def quickstart(tmp: Path, **train: object) -> Path:
    """The quickstart config in ``tmp`` (its own store and harness repo), ``train`` keys replaced."""
    data = dict(QUICKSTART, store="store", panel={"tasks": TASKS, "seeds": [0]})
    data["harness"] = dict(QUICKSTART["harness"], repo="harness")
    data["train"] = dict(QUICKSTART["train"], **train)
    return written(tmp / "config.yaml", data)


def line(path: Path, text: str) -> int:
    return next(i for i, row in enumerate(path.read_text().splitlines(), 1) if text in row)


@pytest.mark.e2e
def test_an_empty_config_fails_in_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    config = written(tmp_path / "x" / "sub" / "empty.yaml", "")
    before = tree(tmp_path)
    proc = cli("run", "x/sub/empty.yaml", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == (
        "Error: config file x/sub/empty.yaml is empty; a config names at least its panel (panel.tasks): "
        "start from configs/quickstart.yaml, or `replaykit init DIR` writes one\n"
    )
    assert tree(tmp_path) == before == ["x", "x/sub", "x/sub/empty.yaml"], config


@pytest.mark.e2e
def test_record_mode_none_on_a_missing_store_creates_nothing(tmp_path: Path) -> None:
    config = written(
        tmp_path / "c.yaml", {"store": "missing-store", "harness": {"repo": "h"}, "panel": {"tasks": TASKS}}
    )
    before = tree(tmp_path)
    for command in ("run", "train"):
        proc = cli(command, str(config), "--record-mode", "none")
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr == (
            f"Error: config file {config}, line 1: field 'store': no store at {tmp_path / 'missing-store'}; "
            "record mode none replays only and never creates one (check store:, or record it first "
            "with --record-mode once)\n"
        )
        assert tree(tmp_path) == before


@pytest.mark.unit
def test_what_a_config_does_not_name_stays_in_its_folder(tmp_path: Path) -> None:
    config = load_config(written(tmp_path / "x" / "sub" / "c.yaml", {"panel": {"tasks": TASKS}}))
    folder = tmp_path / "x" / "sub"
    assert config.store_path.parent == folder and config.repo_path.is_relative_to(folder)
    nopanel = written(tmp_path / "nopanel.yaml", {"name": "x"})
    with pytest.raises(ConfigError) as caught:
        load_config(nopanel)
    assert str(caught.value) == f"config file {nopanel}: field 'panel': required; add it"


@pytest.mark.unit
@pytest.mark.parametrize(
    ("data", "marker", "expected"),
    [
        (
            {"panel": {"tasks": [TASKS[0], "nowhere/*"]}},
            "nowhere",
            "field 'panel.tasks.1': panel pattern 'nowhere/*' matches no task folder under {tmp}",
        ),
        (
            {"harness": {"repo": "absent", "template": None}, "panel": {"tasks": TASKS}},
            "repo: absent",
            (
                "field 'harness.repo': {tmp}/absent does not exist and harness.template is null; name an "
                "existing git repository, or a template to create it from (e.g. quickstart)"
            ),
        ),
        (
            {"harness": {"repo": "absent", "template": "quickstrat"}, "panel": {"tasks": TASKS}},
            "template: quickstrat",
            "field 'harness.template': unknown template 'quickstrat'; known: quickstart, shell-text, terminus",
        ),
        (
            {"env": {"kind": "dokcer"}, "panel": {"tasks": TASKS}},
            "kind: dokcer",
            "field 'env.kind': unknown environment kind 'dokcer'; known: docker, local",
        ),
    ],
)
def test_every_referenced_path_and_name_is_checked_at_load(
    tmp_path: Path, data: dict[str, object], marker: str, expected: str
) -> None:
    path = written(tmp_path / "c.yaml", data)
    before = tree(tmp_path)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert (
        str(caught.value) == f"config file {path}, line {line(path, marker)}: {expected.format(tmp=tmp_path)}"
    )
    assert tree(tmp_path) == before


TRAIN_CASES = [
    (
        {"criterion": {"name": "strict_pareto", "bogus": 1}},
        "bogus",
        (
            "field 'train.criterion.bogus': criterion 'strict_pareto': unknown parameter 'bogus' "
            "(takes: secondary_metrics, min_margin)"
        ),
    ),
    (
        {"optimizer": {"name": "margin_greedy", "margin": "2"}},
        "margin:",
        (
            "field 'train.optimizer.margin': optimizer 'margin_greedy': parameter 'margin': Input should "
            "be a valid integer (got '2')"
        ),
    ),
    (
        {"optimizer": {"name": "margin_greedy", "margin": -1}},
        "  optimizer:",
        "field 'train.optimizer': optimizer margin_greedy: margin must be ≥ 0, got -1",
    ),
    (
        {"estimator": {"kind": "agentik"}},
        "kind: agentik",
        (
            "field 'train.estimator.kind': unknown estimator 'agentik'; known: agentic, patch_queue, "
            "recorded_proposals"
        ),
    ),
    (
        {"estimator": {"kind": "agentic", "backend": {"kind": "openai", "modle": "x"}}},
        "backend:",
        (
            "field 'train.estimator.backend': estimator 'agentic': parameter 'backend': agent backend "
            "'openai': unknown parameter 'modle' (takes: model, base_url, api_key_env, temperature)"
        ),
    ),
    (
        {"estimator": {"kind": "patch_queue", "diffs": ["nothere.diff"]}},
        "  estimator:",
        (
            "field 'train.estimator': train.estimator.diffs: cannot read {tmp}/nothere.diff: No such file "
            "or directory; paths are relative to the config file's folder"
        ),
    ),
    ({"epochz": 3}, "epochz", "field 'train.epochz': unknown key; known: epochs, seed, patch_surface"),
]


@pytest.mark.unit
@pytest.mark.parametrize(("train", "marker", "expected"), TRAIN_CASES)
def test_the_train_section_is_validated_at_load(
    tmp_path: Path, train: dict[str, object], marker: str, expected: str
) -> None:
    path = quickstart(tmp_path, **train)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert message.startswith(
        f"config file {path}, line {line(path, marker)}: {expected.format(tmp=tmp_path)}"
    ), message
    assert "\n" not in message and "Value error" not in message


@pytest.mark.unit
def test_validated_values_reach_the_factories(tmp_path: Path) -> None:
    config = load_config(quickstart(tmp_path, optimizer={"name": "margin_greedy", "margin": 2, "alpha": 1}))
    spec = train_config(config).optimizer
    assert spec == {"name": "margin_greedy", "margin": 2, "alpha": 1.0} and isinstance(spec["alpha"], float)
    assert config.train is not None and config.train["optimizer"] == {
        "name": "margin_greedy",
        "margin": 2,
        "alpha": 1,
    }  # the section as written is what documents keep


@pytest.mark.unit
def test_a_recorded_config_that_no_longer_validates_is_one_line() -> None:
    data = {"panel": {"tasks": ["t"]}, "train": {"criterion": {"name": "gone_plugin"}}}
    with pytest.raises(ConfigError) as caught:
        RunConfig.recorded(data, "training abc")
    assert str(caught.value).startswith(
        "the config recorded with training abc: field 'train.criterion.name': unknown criterion 'gone_plugin'"
    )


@pytest.mark.unit
def test_the_shipped_configs_load(tmp_path: Path) -> None:
    for path in sorted((REPO_ROOT / "configs").glob("*.yaml")):
        assert load_config(path).panel.tasks, path
    assert os.listdir(tmp_path) == []


@pytest.mark.unit
def test_docs_training_states_the_defaults() -> None:
    """docs/training.md's table of defaults is what TrainConfig fills in."""
    from replaykit.train.config import TrainConfig

    text = (REPO_ROOT / "docs" / "training.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| `([^`]+)`", text, flags=re.M))
    defaults = TrainConfig()
    assert set(rows) == set(TrainConfig.model_fields)  # every key of the section, certify included
    for key, written in rows.items():
        value = getattr(defaults, key)  # a section (panels, smoke) as its YAML would write it
        dumped = value.model_dump(exclude_none=True) if isinstance(value, BaseModel) else value
        assert yaml.safe_load(written) == dumped, key


@pytest.mark.e2e
def test_a_bad_harness_entry_names_the_repo_not_a_cache_folder(tmp_path: Path) -> None:
    from replaykit.testing import write_config

    config = write_config(
        tmp_path, {"harness.entry": "nope.py", "panel.tasks": TASKS[:1], "panel.seeds": [0]}
    )
    for command in ("run", "train"):
        proc = cli(command, str(config))
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.startswith("Error: harness entry 'nope.py' is not in commit "), proc.stderr
        assert f"of the harness repo {tmp_path / 'harness'} (its Python files: harness.py)" in proc.stderr
        assert "cache" not in proc.stderr
