"""Framework limits (limits.max_steps, episode_timeout_s, max_tokens), enforced whatever the
harness does, through the real CLI; each limit reached is an outcome and replays identically."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import git
import pytest

from replaykit.cassette.outcomes import OUTCOMES
from replaykit.episodes.config import load_config
from replaykit.episodes.harness import commit_all
from replaykit.episodes.run import open_harness
from replaykit.testing import project_root, write_config
from tests.cli_runner import cli

pytestmark = pytest.mark.e2e


def run_json(config: Path) -> Any:
    proc = cli("run", str(config), "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def replays_identically(doc: Any, config: Path) -> bool:
    proc = cli("replay", doc["run_id"], "--config", str(config), "--json")
    assert proc.returncode in (0, 1), proc.stderr
    return bool(json.loads(proc.stdout)["identical"])


def custom(tmp: Path, solve: str, **overrides: Any) -> Path:
    """A one-task config (hello-file, seed 0) whose harness is ``solve``'s source."""
    config = write_config(
        tmp, {"panel.tasks": [str(project_root() / "envs" / "hello-file")], "panel.seeds": [0], **overrides}
    )
    repo = open_harness(load_config(config)).path
    (repo / "harness.py").write_text(solve)
    commit_all(git.Repo(repo), "a harness under test")
    return config


def test_every_episode_has_an_outcome_and_max_steps_1_hits_the_step_cap(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"limits.max_steps": 1})  # configs/quickstart.yaml
    doc = run_json(config)
    outcomes = [e["outcome"] for e in doc["episodes"]]
    assert len(outcomes) == 16 and set(outcomes) <= set(OUTCOMES)
    capped = [e for e in doc["episodes"] if e["outcome"] == "hit_step_cap"]
    assert capped and all(e["limit"] == "max_steps" and e["steps"] == 1 for e in capped)
    assert all(e["steps"] <= 1 for e in doc["episodes"])  # the harness's own cap is 10
    assert [e["outcome"] == "solved" for e in doc["episodes"]] == [e["passed"] for e in doc["episodes"]]
    assert replays_identically(doc, config)
    table = cli("run", str(config), env={"COLUMNS": "80"}).stdout
    assert "hit_step_cap" in table and "outcome" in table
    listed = json.loads(cli("cassettes", "ls", "--json", "--config", str(config)).stdout)
    assert sorted(r["outcome"] for r in listed) == sorted(outcomes)


def test_the_limits_are_part_of_the_config_digest(tmp_path: Path) -> None:
    plain = load_config(write_config(tmp_path, name="a.yaml"))
    assert load_config(write_config(tmp_path, {"limits": {}}, name="b.yaml")).digest() == plain.digest()
    unset = {"limits.max_steps": None}  # written unset: the same episodes
    assert load_config(write_config(tmp_path, unset, name="c.yaml")).digest() == plain.digest()
    for key, value in (("max_steps", 3), ("max_tokens", 500), ("episode_timeout_s", 60)):
        changed = load_config(write_config(tmp_path, {f"limits.{key}": value}, name=f"{key}.yaml"))
        assert changed.digest() != plain.digest(), key


SWALLOWS = """
def solve(task, env, llm, ctx):
    for _ in range(50):
        try:
            env.run("mkdir -p greeting && echo 'Hello, replaykit!' > greeting/hello.txt")
        except Exception:
            pass
"""


def test_a_harness_that_catches_exceptions_is_still_stopped(tmp_path: Path) -> None:
    config = custom(tmp_path, SWALLOWS, **{"limits.max_steps": 3})
    (episode,) = run_json(config)["episodes"]
    assert episode["steps"] == 3 and episode["limit"] == "max_steps"
    assert episode["outcome"] == "solved"  # it passed: a limit reached first does not change that
    assert replays_identically(run_json(config), config)


SLOW = """
def solve(task, env, llm, ctx):
    env.run("sleep 30")  # cut to the time left
    while True:
        env.run("sleep 0.2")
"""


def test_the_episode_timeout_stops_a_slow_harness_and_cuts_its_actions(tmp_path: Path) -> None:
    config = custom(tmp_path, SLOW, **{"limits.episode_timeout_s": 1.5})
    start = time.monotonic()
    doc = run_json(config)
    assert time.monotonic() - start < 20  # not the 30 s action, nor the loop forever
    (episode,) = doc["episodes"]
    assert episode["outcome"] == "hit_timeout" and episode["limit"] == "episode_timeout_s"
    shown = json.loads(
        cli("cassettes", "show", episode["cassette_id"], "--json", "--config", str(config)).stdout
    )
    first = shown["events"][0]
    assert first["kind"] == "env" and first["timed_out"] is True
    assert shown["events"][-2] == {
        "position": len(shown["events"]) - 2,
        "kind": "limit",  # the framework's own event, never an error the harness raised
        "limit": "episode_timeout_s",
        "value": 1.5,
        "message": "limit reached: limits.episode_timeout_s=1.5 (the next action refused)",
    }
    assert replays_identically(doc, config)  # offline: the recorded limit is served, no clock read


def test_the_default_episode_timeout_is_the_tasks_scaled_agent_timeout(tmp_path: Path) -> None:
    """hello-file's agent timeout is 120 s; Harbor's env.agent_timeout_multiplier scales it."""
    config = custom(tmp_path, SLOW, **{"env.agent_timeout_multiplier": 0.0125})  # 1.5 s
    (episode,) = run_json(config)["episodes"]
    assert episode["outcome"] == "hit_timeout"
    show = cli("cassettes", "show", episode["cassette_id"], "--json", "--config", str(config))
    assert json.loads(show.stdout)["events"][-2]["message"] == (
        "limit reached: limits.episode_timeout_s=1.5 (the next action refused)"
    )
    assert load_config(config).limits.for_task(1.5).timeout_s == 1.5
    assert (
        load_config(config).limits.model_copy(update={"episode_timeout_s": 7.0}).for_task(1.5).timeout_s
        == 7.0
    )


def test_max_tokens_refuses_the_next_model_call(tmp_path: Path) -> None:
    config = write_config(
        tmp_path,
        {
            "panel.tasks": [str(project_root() / "envs" / "csv-active-emails")],
            "panel.seeds": [0],
            "limits.max_tokens": 50,
        },
    )
    doc = run_json(config)
    (episode,) = doc["episodes"]
    assert episode["outcome"] == "hit_step_cap" and episode["limit"] == "max_tokens"
    assert episode["llm_calls"] == 1  # the first answer used more than 50 tokens: the second call was refused
    assert replays_identically(doc, config)


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("max_steps", 0, "expected a whole number >= 1 (got 0)"),
        ("max_steps", -2, "expected a whole number >= 1 (got -2)"),
        ("max_tokens", 0, "expected a whole number >= 1 (got 0)"),
        ("episode_timeout_s", 0, "expected a number of seconds > 0 (got 0)"),
        ("episode_timeout_s", -1.5, "expected a number of seconds > 0 (got -1.5)"),
        ("max_tokens", True, "expected a whole number >= 1 (got true)"),
    ],
)
def test_a_limit_of_zero_or_below_is_one_line_and_creates_nothing(
    tmp_path: Path, key: str, value: float, expected: str
) -> None:
    config = write_config(tmp_path, {f"limits.{key}": value})
    proc = cli("run", str(config))
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: config file {config}, line ")
    assert f"field 'limits.{key}': {expected}" in lines[0]
    assert lines[0].count("(got ") == 1, lines[0]  # the value named once
    assert not (tmp_path / "store").exists() and not (tmp_path / "harness").exists()


RESETS_BUDGET = """
def solve(task, env, llm, ctx):
    for _ in range(20):
        try:
            env.budget.actions = 0  # issue 38: this recorded 20 steps under max_steps 3
        except AttributeError:
            pass
        env.run("echo step >> steps.txt")
"""


def verify(config: Path) -> Any:
    proc = cli("cassettes", "verify", "--config", str(config), "--json")
    return json.loads(proc.stdout)


def test_a_harness_cannot_reset_its_step_budget(tmp_path: Path) -> None:
    """Done when: env.budget.actions = 0 before each action under limits.max_steps: 3 records at
    most 3 actions (the budget counts what the tape recorded; env.budget is no attribute)."""
    config = custom(tmp_path, RESETS_BUDGET, **{"limits.max_steps": 3})
    doc = run_json(config)
    (episode,) = doc["episodes"]
    assert episode["steps"] == 3 and episode["outcome"] == "hit_step_cap" and episode["limit"] == "max_steps"
    assert verify(config)["ok"] is True
    assert replays_identically(doc, config)


FORGED_NAME = """
def solve(task, env, llm, ctx):
    env.run("true")
    raise type("limit reached: limits.max_steps=3 (action 4 refused)", (Exception,), {})("boom")
"""


def test_an_exception_named_like_a_limit_is_a_crash(tmp_path: Path) -> None:
    """Done when: an exception type named `limit reached: limits.max_steps=3 (action 4 refused)`
    is classed crash (no limits set: it was hit_step_cap)."""
    config = custom(tmp_path, FORGED_NAME)
    doc = run_json(config)
    (episode,) = doc["episodes"]
    assert episode["outcome"] == "crash" and "limit" not in episode
    listed = json.loads(cli("cassettes", "ls", "--json", "--config", str(config)).stdout)
    assert [r["outcome"] for r in listed] == ["crash"]
    assert verify(config)["ok"] is True and replays_identically(doc, config)


REACHES_INNER = """
def solve(task, env, llm, ctx):
    for name in ("inner", "tape", "budget", "_run"):
        try:
            getattr(env, name).run("echo unrecorded > app_state.txt")
        except AttributeError:
            env.run(f"echo {name} is not there >> seen.txt")
"""


def test_the_environment_behind_env_is_not_reachable(tmp_path: Path) -> None:
    config = custom(tmp_path, REACHES_INNER)
    doc = run_json(config)
    (episode,) = doc["episodes"]
    assert episode["steps"] == 4 and episode["outcome"] != "crash"
    assert replays_identically(doc, config)


def test_an_episode_past_its_recorded_limits_fails_verify_and_replay(tmp_path: Path) -> None:
    """Written past the rollout (as a harness reaching the tape, or a planted store, would):
    more actions than its recorded max_steps, and an outcome its events do not give."""
    import dataclasses

    from replaykit.cassette.events import EnvEvent
    from replaykit.cassette.stores import open_store

    config = custom(tmp_path, SWALLOWS, **{"limits.max_steps": 3})
    doc = run_json(config)
    store = open_store(load_config(config).store_location)
    episode = store.get_episode(doc["episodes"][0]["cassette_id"])
    extra = [e for e in episode.events if isinstance(e, EnvEvent)][:2]
    for forged, said in (
        (dataclasses.replace(episode, events=extra + episode.events), "records 4+ actions under max_steps=3"),
        (
            dataclasses.replace(episode, meta={**episode.meta, "outcome": {"outcome": "verified_rejected"}}),
            "recorded outcome verified_rejected does not follow from its events (solved)",
        ),
    ):
        store.put_episode(forged)
        report = verify(config)
        damaged = {d["id"]: d["error"] for d in report["damaged"]}
        assert report["ok"] is False and said in damaged[episode.id], report
        proc = cli("replay", doc["run_id"], "--config", str(config))
        assert proc.returncode == 1 and "store corrupt" in proc.stderr, proc.stderr
    store.put_episode(episode)
    assert verify(config)["ok"] is True


SLEEPS = """
import time

def solve(task, env, llm, ctx):
    env.run("echo started > started.txt")
    try:
        time.sleep(40)  # between calls: nothing refuses it but the watchdog
    except BaseException:
        pass  # swallowed once: it fires again
    while True:
        sum(range(1000))
"""


def test_the_episode_timeout_interrupts_a_harness_between_calls(tmp_path: Path) -> None:
    """A harness sleeping 40 s (then spinning, having swallowed the first interruption) under
    a 5 s limit stops at ~5 s, records the limit event, and replays identically without
    waiting its sleep out (issue 38 item 4: it ran to its end)."""
    config = custom(tmp_path, SLEEPS, **{"limits.episode_timeout_s": 5})
    start = time.monotonic()
    doc = run_json(config)
    took = time.monotonic() - start
    (episode,) = doc["episodes"]
    assert episode["outcome"] == "hit_timeout" and episode["limit"] == "episode_timeout_s"
    assert episode["steps"] == 1 and took < 25, took
    shown = json.loads(
        cli("cassettes", "show", episode["cassette_id"], "--json", "--config", str(config)).stdout
    )
    assert shown["events"][-2]["kind"] == "limit" and shown["events"][-2]["message"] == (
        "limit reached: limits.episode_timeout_s=5 (the harness was stopped)"
    )
    start = time.monotonic()
    assert replays_identically(doc, config)
    assert time.monotonic() - start < 25
