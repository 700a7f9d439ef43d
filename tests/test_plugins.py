"""Extension points through entry points: a third-party package (tests/plugin) adds an
environment kind (with its own env settings), an executor kind, a criterion, an
optimizer and an agent backend, and the CLI uses them by name.

The package is "installed" the way pip leaves it: its module plus a ``.dist-info``
folder whose ``entry_points.txt`` comes from the package's own pyproject.toml, on
PYTHONPATH of the CLI processes. Nothing in replaykit is edited or configured.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from replaykit.cassette.store import Store
from replaykit.testing import write_config

pytestmark = pytest.mark.e2e  # drives the CLI or servers on loopback


PLUGIN = Path(__file__).parent / "plugin"
REPO = Path(__file__).resolve().parents[1]


def install_plugin(site: Path) -> None:
    meta = tomllib.loads((PLUGIN / "pyproject.toml").read_text())["project"]
    site.mkdir(parents=True)
    shutil.copy(PLUGIN / "replaykit_example_plugin.py", site)
    dist = site / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {meta['name']}\nVersion: {meta['version']}\n"
    )
    lines = []
    for group, entries in meta["entry-points"].items():
        lines.append(f"[{group}]")
        lines.extend(f"{name} = {ref}" for name, ref in entries.items())
    (dist / "entry_points.txt").write_text("\n".join(lines) + "\n")


def cli(args: list[str], site: Path | None, cwd: Path) -> tuple[int, Any, str]:
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(site), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run(
        [sys.executable, "-m", "replaykit.cli", *args, "--json"],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=600,
    )
    try:
        doc = json.loads(proc.stdout) if proc.stdout.strip() else None
    except json.JSONDecodeError:
        doc = None
    return proc.returncode, doc, proc.stderr


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("plugin")
    site = tmp / "site"
    install_plugin(site)
    config = write_config(
        tmp,
        {
            "panel.tasks": [str(REPO / "envs" / "hello-file")],
            "panel.seeds": [0],
            "env.kind": "example",
            "train.epochs": 2,
            "train.estimator": {"kind": "agentic", "backend": {"kind": "append_note"}},
            "train.criterion": {"name": "no_worse"},
            "train.optimizer": {"name": "even_epochs"},
        },
    )
    code, summary, err = cli(["train", str(config)], site, tmp)
    assert code == 0, err
    return {"tmp": tmp, "site": site, "config": config, "summary": summary}


def test_plugin_env_kind_runs_and_keys_its_cassettes(plugin: dict[str, Any]) -> None:
    summary = plugin["summary"]
    store = Store(plugin["tmp"] / "store")
    run = store.get_run(summary["runs"][0])
    episode = store.get_episode(run.cassettes[0])
    assert dict(episode.key.extra) == {"env": "example", "sandbox": "example-v1"}
    assert episode.meta["environment"]["kind"] == "example"


def test_plugin_backend_criterion_and_optimizer_drive_the_training(plugin: dict[str, Any]) -> None:
    epochs = plugin["summary"]["epochs"]
    assert [e["description"][:12] for e in epochs] == ["append note ", "append note "]
    assert all(e["verdict"]["criterion"] == "no_worse" and e["decision"] == "accepted" for e in epochs)
    assert [e["promoted"] for e in epochs] == [
        True,
        False,
    ]  # even_epochs: the criterion accepts both, epoch 1 is odd
    assert plugin["summary"]["chain"][1:] == [epochs[0]["candidate_sha"]]


def test_plugin_criterion_in_audit_and_training_replay(plugin: dict[str, Any]) -> None:
    site, tmp = plugin["site"], plugin["tmp"]
    store = str(tmp / "store")
    verdict = plugin["summary"]["verdicts"][0]
    code, report, err = cli(["audit", verdict, "--store", store, "--criterion", "strict_pareto"], site, tmp)
    assert code == 0 and report["reproduced"], err
    assert report["counterfactual"][
        "differs"
    ]  # a comment-only change is an exact tie: strict Pareto rejects it
    code, report, err = cli(["replay", plugin["summary"]["training_id"], "--store", store], site, tmp)
    assert code == 0 and report["identical"], err


def test_tasks_check_with_the_plugin_env(plugin: dict[str, Any]) -> None:
    code, report, err = cli(
        ["tasks", "check", str(REPO / "envs" / "hello-file"), "--env", "example"],
        plugin["site"],
        plugin["tmp"],
    )
    assert code == 0 and report["env"] == "example" and report["ok"], err


def test_without_the_plugin_names_are_one_line_errors(plugin: dict[str, Any]) -> None:
    tmp = plugin["tmp"]
    code, _, err = cli(["audit", plugin["summary"]["verdicts"][0], "--store", str(tmp / "store")], None, tmp)
    verdict = plugin["summary"]["verdicts"][0]
    assert code == 1 and err.strip().startswith(f"Error: verdict {verdict}: cannot recompute it: "), err
    assert (
        "unknown criterion 'no_worse'; known: mean_reward, paired_test, strict_pareto" in err
    )  # names what it can use
    assert len(err.strip().splitlines()) == 1


def test_plugin_env_kind_takes_its_own_settings_through_run(plugin: dict[str, Any]) -> None:
    """``env.socket`` is the plugin kind's own key: `run` validates it with the kind's model
    and hands it to the kind's factory; the same key under another kind, or a misspelt key
    under this one, is one line naming it."""
    site, tmp = plugin["site"], plugin["tmp"] / "settings"
    base = {"panel.tasks": [str(REPO / "envs" / "hello-file")], "panel.seeds": [0], "env.kind": "example"}
    for folder in ("", "env-sockett", "env-socket", "local"):
        (tmp / folder).mkdir(parents=True, exist_ok=True)
    config = write_config(
        tmp,
        {
            **base,
            "env.socket": str(tmp / "sandbox.sock"),
            "executor": {"kind": "counting", "label": "counted"},
        },
    )
    code, run, err = cli(["run", str(config)], site, tmp)
    assert code == 0, err
    assert "counted: 1 job(s)" in err  # the plugin's executor kind ran the panel, its own key typed
    episode = Store(tmp / "store").get_episode(run["cassettes"][0])
    assert episode.meta["environment"]["socket"] == str(tmp / "sandbox.sock")
    assert episode.meta["env"]["socket"] == str(tmp / "sandbox.sock")
    for override, wrong in (({"env.sockett": "x"}, "env.sockett"), ({"env.socket": 3}, "env.socket")):
        bad = write_config(tmp / wrong.replace(".", "-"), {**base, **override})
        code, _, err = cli(["run", str(bad)], site, tmp)
        assert code == 1 and len(err.strip().splitlines()) == 1, err
        assert err.startswith("Error: ") and f"field '{wrong}'" in err, err
    local = write_config(tmp / "local", {**base, "env.kind": "local", "env.socket": "x"})
    code, _, err = cli(["run", str(local)], site, tmp)
    assert code == 1 and "field 'env.socket' is a setting of env kind 'example', not of 'local'" in err, err


def test_plugins_lists_every_registry_and_where_each_name_comes_from(plugin: dict[str, Any]) -> None:
    code, report, err = cli(["plugins"], plugin["site"], plugin["tmp"])
    assert code == 0, err
    rows = {(r["what"], e["name"]): e for r in report["registries"] for e in r["entries"]}
    dist = "replaykit-example-plugin 0.1.0"
    for what, name, ref in [
        ("environment kind", "example", "replaykit_example_plugin:ENV"),
        ("executor kind", "counting", "replaykit_example_plugin:COUNTING"),
        ("criterion", "no_worse", "replaykit_example_plugin:NoWorse"),
        ("optimizer", "even_epochs", "replaykit_example_plugin:EvenEpochs"),
        ("agent backend", "append_note", "replaykit_example_plugin:AppendNote"),
        ("agent", "example-agent", "replaykit_example_plugin:AGENT"),
    ]:
        assert rows[(what, name)] == {
            "name": name,
            "source": "entry point",
            "ref": ref,
            "distribution": dist,
            "shadows": "",
        }
    assert rows[("environment kind", "docker")]["source"] == "built-in"
    assert rows[("executor kind", "ray")]["ref"] == "replaykit.execution.ray_executor:RAY"
    assert report["plugins"] == 6
    code, _, err = cli(["plugins"], None, plugin["tmp"])
    code_text = subprocess.run(
        [sys.executable, "-m", "replaykit.cli", "plugins"],
        capture_output=True,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(plugin["site"]), os.environ.get("PYTHONPATH", "")]),
        },
        timeout=120,
    )
    assert code == 0 and code_text.returncode == 0, err + code_text.stderr
    assert "entry point (replaykit-example-plugin 0.1.0)" in code_text.stdout
    assert "6 from installed package(s)" in code_text.stdout


def test_plugin_env_kind_gets_grading_and_its_oracle_from_the_verifier_alone() -> None:
    """The plugin's environment implements the verifier's primitives and nothing of grading:
    no ``grade``, no ``run_solution``, no oracle; run, train and tasks check above graded it."""
    import ast

    tree = ast.parse((PLUGIN / "replaykit_example_plugin.py").read_text())
    env = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ExampleEnv")
    methods = {n.name for n in env.body if isinstance(n, ast.FunctionDef)}
    assert {"exec", "upload_dir", "download_file", "add_secrets", "broken"} <= methods
    assert not methods & {"grade", "run_solution"}
    assert [b.id for b in env.bases if isinstance(b, ast.Name)] == ["Sandbox"]
    call = next(
        n.value for n in tree.body if isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "ENV"
    )
    assert isinstance(call, ast.Call) and len(call.args) == 3  # kind, factory, key_extra: no oracle
    assert [k.arg for k in call.keywords] == ["settings"]


def test_plugin_named_agent_runs_with_its_version_and_replays(plugin: dict[str, Any]) -> None:
    """``run --agent NAME`` of an agent an installed package declares: its template is the
    harness repo, its name and version are in the run's --json and in each episode's meta."""
    site, tmp = plugin["site"], plugin["tmp"]
    config = write_config(
        tmp, {"panel.tasks": [str(REPO / "envs" / "hello-file")], "panel.seeds": [0]}, name="agent.yaml"
    )
    code, doc, err = cli(["run", str(config), "--agent", "example-agent"], site, tmp)
    assert code == 0, err
    version = ".".join(str(v) for v in sys.version_info[:3])
    assert doc["agent"] == {"name": "example-agent", "version": version}
    repo = Path(doc["harness_repo"])  # named by the agent and its template's digest
    assert repo.parent == tmp / ".replaykit" / "agents" and repo.name.startswith("example-agent-"), repo
    episode = Store(tmp / "store").get_episode(doc["cassettes"][0])
    assert episode.meta["agent"] == {"name": "example-agent", "version": version}
    code, report, err = cli(["replay", doc["run_id"], "--store", str(tmp / "store")], site, tmp)
    assert code == 0 and report["identical"] and "agent_note" not in report, err
    code, _, err = cli(["run", str(config), "--agent", "example-agent"], None, tmp)
    assert code == 1 and err.count("\n") == 1 and "unknown agent 'example-agent'; known:" in err, err
