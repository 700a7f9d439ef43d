"""Adaptive seeds (issue 37 item 5): ``panel.seeds: {adaptive: {min, max}}``.

Bad ranges are one line before anything is made; the rule measures another seed only for the
discordant tasks while the paired decision is open; a training records its stopping points,
its verdict judges the extended runs, and its replay (record mode none) takes the same rounds
from the same cassettes, recording nothing; ``audit VERDICT`` shows the stopping points.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from replaykit.cassette.store import Store
from replaykit.core.errors import ConfigError
from replaykit.episodes.config import AdaptiveRange, load_config
from replaykit.testing import REPO_ROOT, run_doc
from replaykit.train.adaptive import open_tasks
from tests.cli_runner import cli

QUICKSTART = (REPO_ROOT / "configs" / "quickstart.yaml").read_text().replace("../envs/", f"{REPO_ROOT}/envs/")


def _world() -> ModuleType:
    spec = importlib.util.spec_from_file_location("null_world", REPO_ROOT / "benchmarks" / "null_world.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def edited(tmp: Path, seeds: str) -> Path:
    path = tmp / "config.yaml"
    path.write_text(
        QUICKSTART.replace("  seeds: [0, 1]", f"  seeds: {seeds}", 1).replace("../cassettes", "store")
    )
    return path


@pytest.mark.unit
@pytest.mark.parametrize(
    ("seeds", "message"),
    [
        (
            "{adaptive: {min: 5, max: 3}}",
            "field 'panel.seeds.adaptive': min 5 is above max 3; give min <= max, e.g. {adaptive: {min: 2, max: 8}}",
        ),
        (
            "{adaptive: {min: 2, max: 65}}",
            "field 'panel.seeds.adaptive.max': 65 is over 64, the most seeds an adaptive panel measures a task on",
        ),
        (
            "{adaptive: {min: 0, max: 4}}",
            "field 'panel.seeds.adaptive.min': Input should be greater than or equal to 1",
        ),
        (
            "{adaptive: {min: 2, max: 4, most: 3}}",
            "field 'panel.seeds.adaptive.most': unknown key; known: min, max, start",
        ),
    ],
)
def test_bad_adaptive_ranges_are_one_line(tmp_path: Path, seeds: str, message: str) -> None:
    path = edited(tmp_path, seeds)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    text = str(caught.value)
    assert text.startswith(f"config file {path}, line ") and message in text and "\n" not in text


@pytest.mark.e2e
def test_the_cli_refuses_them_before_anything_is_made(tmp_path: Path) -> None:
    for seeds in ("{adaptive: {min: 5, max: 3}}", "{adaptive: {min: 2, max: 100}}"):
        path = edited(tmp_path, seeds)
        proc = cli("train", str(path))
        assert proc.returncode == 1 and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "panel.seeds.adaptive" in proc.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]  # no store, no harness repo


@pytest.mark.unit
def test_a_fixed_list_loads_and_dumps_as_before(tmp_path: Path) -> None:
    config = load_config(edited(tmp_path, "[0, 1]"))
    assert config.panel.seeds == [0, 1] and config.panel.adaptive is None and config.panel.seed_list == [0, 1]
    assert config.panel.model_dump()["seeds"] == [0, 1]  # a training's identity names it as before
    adaptive = load_config(edited(tmp_path, "{adaptive: {min: 2, max: 8, start: 10}}")).panel
    assert adaptive.seed_list == [10, 11] and adaptive.adaptive == AdaptiveRange(min=2, max=8, start=10)


def _run(results: dict[str, bool]) -> Any:
    return run_doc(
        [
            {"task_id": u.split("#")[0], "seed": int(u.split("#")[1]), "passed": r, "reward": float(r)}
            for u, r in results.items()
        ]
    )


@pytest.mark.unit
def test_only_discordant_tasks_stay_open_while_the_decision_is() -> None:
    rng = AdaptiveRange(min=2, max=8)
    # t0 discordant (candidate solves one seed more), t1 solved by both, t2 by neither
    base = _run({"t0#0": False, "t0#1": False, "t1#0": True, "t1#1": True, "t2#0": False, "t2#1": False})
    cand = _run({"t0#0": True, "t0#1": False, "t1#0": True, "t1#1": True, "t2#0": False, "t2#1": False})
    assert open_tasks(base, cand, rng, 0.05) == (["t0"], "")
    assert open_tasks(base, base, rng, 0.05) == ([], "concordant")
    # t0 could take 6 more seeds: even all of them to the candidate (7 of 0, p = 1/128) reach 0.05;
    # at alpha 0.001 they cannot: futile
    assert open_tasks(base, cand, rng, 0.001) == ([], "futile")
    assert open_tasks(base, cand, AdaptiveRange(min=2, max=2), 0.05) == ([], "max")
    # 6 of 0 (p = 1/64) looks significant, yet its discordant tasks stay open: stopping at the
    # first significant look would accept a change that does nothing more often than alpha
    wins = {f"t{t}#{s}": True for t in range(3) for s in range(2)}
    assert open_tasks(_run(dict.fromkeys(wins, False)), _run(wins), rng, 0.05) == (["t0", "t1", "t2"], "")


def _training(root: Path, kind: str, epochs: int) -> Path:
    """A null-world training (benchmarks/null_world.py) with adaptive seeds {min 2, max 8}."""
    from replaykit.episodes.harness import materialise_template

    world = _world()
    tasks = world.make_tasks(root / "tasks")
    template = root / "template-repo"
    materialise_template(world.make_template(root / "template"), template, "main")
    repo = world.fresh_repo(template, root / "repo")
    diffs = [world.null_diff(e) for e in range(epochs)]
    if kind == "real":
        diffs[0] = world.real_diff()
    seeds = {"adaptive": {"min": 2, "max": 8}}
    criterion = {"name": "paired_test", "alpha": 0.05}
    data = world.config(root, root / "store", repo, tasks, seeds, epochs, diffs, criterion, None)
    path = root / "train.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.e2e
def test_an_adaptive_training_records_and_replays_its_stopping_points(
    tmp_path: Path, no_network: Any, store_state: Any
) -> None:
    path = _training(tmp_path, "real", 2)
    proc = cli("train", str(path), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    store = Store(tmp_path / "store")
    extended = 0
    for epoch in doc["epochs"]:
        points = epoch["adaptive"]
        assert points["min"] == 2 and points["max"] == 8 and points["stopped"]
        baseline = store.get_run(epoch["baseline_run"])
        candidate = store.get_run(epoch["candidate_run"])
        assert epoch["panels"]["train"]["baseline_run"] == baseline.run_id  # the deciding panel names them
        verdict = store.get_doc(epoch["verdict_id"], kind="verdict")
        assert (verdict["baseline_run"], verdict["candidate_run"]) == (baseline.run_id, candidate.run_id)
        for run in (baseline, candidate):  # each task measured on seeds 0 .. its stopping point - 1
            seeds: dict[str, list[int]] = {}
            for e in run.episodes:
                seeds.setdefault(e.task_id, []).append(int(e.seed))
            assert {t: sorted(s) for t, s in seeds.items()} == {
                t: list(range(n)) for t, n in points["seeds"].items()
            }
        assert points["episodes"] == len(baseline.episodes) + len(candidate.episodes)
        # a task that took more than min seeds was discordant in its first two
        both = {(e.task_id, e.seed): e.passed for e in baseline.episodes}
        for task, n in points["seeds"].items():
            first = [
                (both[(task, s)], c.passed)
                for c in candidate.episodes
                for s in (0, 1)
                if c.task_id == task and c.seed == s
            ]
            if n > 2:
                extended += 1
                assert any(b != c for b, c in first), task
        assert points["rounds"] == max(points["seeds"].values()) - 2
    assert extended > 0  # the null epoch's discordant tasks took more seeds (its deterministic draws)
    audit = json.loads(
        cli("audit", doc["epochs"][1]["verdict_id"], "--store", str(tmp_path / "store"), "--json").stdout
    )
    assert audit["adaptive"] == doc["epochs"][1]["adaptive"] and audit["reproduced"]
    text = cli("audit", doc["epochs"][1]["verdict_id"], "--store", str(tmp_path / "store")).stdout
    assert "adaptive seeds (min 2, max 8)" in text and "seeds per task:" in text

    before = store_state(store)
    no_network()
    replay = cli("replay", doc["training_id"], "--store", str(tmp_path / "store"), "--json")
    assert replay.returncode == 0, replay.stderr
    report = json.loads(replay.stdout)
    assert report["identical"] and all(e["identical"] for e in report["epochs"])
    assert store_state(store) == before  # no new episode, run or document
