"""The proposer's workspace (issue 41 items 3 and 6): each epoch a read-only folder of the
baseline's failed training-panel transcripts, every prior candidate's diff, verdict, movement and
attribution, per-task scores and the visible harness and task files (never a task's tests/ or
solution/, never a val or test task); its tree digest keys the epoch's proposal and is recorded,
so the training replays identical; the openai proposer's request quotes a bounded rendering of it,
and the built-in proposer reads that rendering."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import git
import pytest

from replaykit.cassette.events import LlmEvent
from replaykit.cassette.store import Store
from replaykit.models.reference.proposer import CURRICULUM, next_change
from replaykit.testing import REPO_ROOT, write_config
from replaykit.train.state import TrainingState
from replaykit.train.workspace import task_files
from replaykit.train.workspace_tree import render_workspace, tree_digest, write_workspace
from tests.cli_runner import cli
from tests.models.test_proposer import SOURCE, brief

pytestmark = pytest.mark.e2e  # drives the CLI and the built-in proposer's loopback server

TRAIN = ["hello-file", "organize-files", "checksum-release", "count-error-lines"]
VAL = ["csv-active-emails", "fix-config-port"]
TEST = ["json-release-tag", "run-build-script"]


def envs(names: list[str]) -> list[str]:
    return [str(REPO_ROOT / "envs" / n) for n in names]


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("workspace")
    config = write_config(
        tmp,
        {
            "panel.tasks": envs(TRAIN),
            "train.epochs": 2,
            "train.panels": {"val": envs(VAL), "test": envs(TEST)},
            # everything of each task: its tests/ and solution/ must stay out all the same
            "train.proposer_visible": ["harness/*", "tasks/*"],
        },
    )
    proc = cli("train", str(config), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    return {"tmp": tmp, "doc": doc, "store": tmp / "store"}


def folder(trained: dict[str, Any], epoch: int) -> Path:
    digest: str = trained["doc"]["epochs"][epoch]["workspace_digest"]
    return Path(str(trained["store"])) / "cache" / "workspaces" / digest[:16]


def files_of(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_the_workspace_holds_failed_transcripts_and_prior_candidates(trained: dict[str, Any]) -> None:
    doc, store = trained["doc"], Store(trained["store"], readonly=True)
    e0, e1 = doc["epochs"]
    root = folder(trained, 1)
    files = files_of(root)
    train_run = store.get_run(e1["panels"]["train"]["baseline_run"])
    failed = {f"episodes/failed/{e.task_id}#{e.seed}.txt": e for e in train_run.episodes if not e.passed}
    assert failed and failed.keys() <= files.keys()
    for path, e in failed.items():
        text = files[path].decode()
        assert e.cassette_id[:16] in text and "$ " in text and "grade: reward" in text
    proposal = json.loads(files["candidates/epoch-0/proposal.json"])
    assert proposal["decision"] == e0["decision"] and proposal["description"] == e0["description"]
    assert {"movement", "attribution"} <= proposal.keys()
    repo = git.Repo(trained["tmp"] / "harness")
    diff = repo.git.diff(e0["baseline_sha"], e0["candidate_sha"], "--no-color", "--no-ext-diff")
    assert files["candidates/epoch-0/diff.patch"].decode() == diff + "\n"
    scores = json.loads(files["scores.json"])
    assert set(scores) == set(TRAIN)
    assert "harness/harness.py" in files and "tasks/hello-file/instruction.md" in files
    # never a task's tests/ or solution/ (the globs admit all of it), never a held-out task
    assert not [p for p in files if p.split("/")[2:3] in (["tests"], ["solution"])]
    for held_out in (*VAL, *TEST):
        assert not [p for p, data in files.items() if held_out in p or held_out.encode() in data]
    # read-only: files 0444, folders 0555
    assert stat.S_IMODE((root / "scores.json").stat().st_mode) == 0o444
    assert stat.S_IMODE((root / "candidates").stat().st_mode) == 0o555


def test_the_digest_is_recorded_keys_the_proposal_and_the_training_replays(trained: dict[str, Any]) -> None:
    doc, store = trained["doc"], Store(trained["store"], readonly=True)
    for e in doc["epochs"]:
        assert tree_digest(files_of(folder(trained, e["epoch"]))) == e["workspace_digest"]
        episode = store.get_episode(e["proposal_cassette"])
        assert ("workspace", e["workspace_digest"][:16]) in episode.key.extra
        assert episode.meta["workspace"]["digest"] == e["workspace_digest"]
    assert doc["epochs"][0]["workspace_digest"] != doc["epochs"][1]["workspace_digest"]
    proc = cli("replay", doc["training_id"], "--store", str(trained["store"]), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["identical"] and all(e["identical"] for e in report["epochs"]), report["epochs"]


def test_the_openai_proposer_request_quotes_a_bounded_rendering(trained: dict[str, Any]) -> None:
    doc, store = trained["doc"], Store(trained["store"], readonly=True)
    e1 = doc["epochs"][1]
    (call,) = [ev for ev in store.get_episode(e1["proposal_cassette"]).events if isinstance(ev, LlmEvent)]
    user = call.body["messages"][-1]["content"]
    rendering = render_workspace(files_of(folder(trained, 1)))
    assert user.endswith(rendering)
    assert "--- workspace: candidates/epoch-0/proposal.json ---" in rendering
    assert "--- workspace: episodes/failed/" in rendering
    assert len(rendering.encode()) <= 24 * 1024 + 200  # the cap, and its last line


def test_the_digest_moves_with_content_only() -> None:
    files = {"a.txt": b"one", "b/c.txt": b"two"}
    assert tree_digest(files) == tree_digest(dict(reversed(list(files.items()))))
    assert tree_digest({**files, "a.txt": b"one!"}) != tree_digest(files)
    assert tree_digest({"a2.txt": b"one", "b/c.txt": b"two"}) != tree_digest(files)
    assert tree_digest({"a.tx": b"tone", "b/c.txt": b"two"}) != tree_digest(files)


def test_written_once_read_only_and_found_by_digest(tmp_path: Path) -> None:
    files = {"README.md": b"x", "episodes/failed/t#0.txt": b"y"}
    first = write_workspace(files, tmp_path)
    again = write_workspace(files, tmp_path)
    assert first.path == again.path == tmp_path / first.digest[:16]
    assert files_of(first.path) == files
    assert [p.name for p in tmp_path.iterdir()] == [first.digest[:16]]  # no temporary left behind


def test_task_tests_and_solution_never_copied_whatever_the_globs(tmp_path: Path) -> None:
    task = tmp_path / "tasks" / "demo"
    for rel in ("instruction.md", "task.toml", "tests/test.sh", "solution/solve.sh", "data/in.txt"):
        (task / rel).parent.mkdir(parents=True, exist_ok=True)
        (task / rel).write_text(rel)
    state = SimpleNamespace(
        config=SimpleNamespace(panel=SimpleNamespace(tasks=[str(task)]), base_dir=tmp_path)
    )
    got = task_files(cast(TrainingState, state), ["tasks/*", "tasks/*/tests/*", "tasks/demo/solution/*"])
    assert sorted(got) == ["tasks/demo/data/in.txt", "tasks/demo/instruction.md", "tasks/demo/task.toml"]
    assert task_files(cast(TrainingState, state), ["harness/*"]) == {}


def failed_transcript(exit_code: int) -> dict[str, bytes]:
    return {"episodes/failed/t#0.txt": f"$ make\nexit {exit_code}\ngrade: reward 0 passed False".encode()}


def test_the_builtin_proposer_reads_the_workspace() -> None:
    retry, second = CURRICULUM[0].id, CURRICULUM[1].id
    # no workspace: the curriculum's first change, as before
    found = next_change(brief(SOURCE))
    assert found is not None and found[0].id == retry
    # a failed command in a transcript: the retry change answers it
    found = next_change(brief(SOURCE) + "\n\n" + render_workspace(failed_transcript(2)))
    assert found is not None and found[0].id == retry
    # no failed command in any transcript: nothing for a retry to answer
    found = next_change(brief(SOURCE) + "\n\n" + render_workspace(failed_transcript(0)))
    assert found is not None and found[0].id == second
    # a prior candidate in the workspace counts as tried
    prior = {"candidates/epoch-0/proposal.json": json.dumps({"description": f"[{retry}] x"}).encode()}
    found = next_change(brief(SOURCE) + "\n\n" + render_workspace({**failed_transcript(2), **prior}))
    assert found is not None and found[0].id == second


def test_audit_shows_what_the_proposer_saw(trained: dict[str, Any], tmp_path: Path) -> None:
    doc, store = trained["doc"], str(trained["store"])
    proc = cli("audit", doc["training_id"], "--workspace", "--epoch", "1", "--store", store, "--json")
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)
    assert row["workspace_digest"] == doc["epochs"][1]["workspace_digest"]
    assert [f[0] for f in row["files"]] == sorted(files_of(folder(trained, 1)))
    text = cli("audit", doc["training_id"], "--workspace", "--store", store, env={"COLUMNS": "80"})
    assert text.returncode == 0, text.stderr
    assert f"epoch 1: workspace {row['workspace_digest'][:16]}" in text.stdout
    assert "episodes/failed/" in text.stdout
    bad = cli("audit", doc["training_id"], "--epoch", "1", "--store", store)
    assert bad.returncode == 1 and "--epoch goes with --workspace" in bad.stderr
    # a training recorded before workspaces: its proposals read the brief only
    shipped = tmp_path / "shipped"
    imported = cli(
        "cassettes",
        "import",
        str(REPO_ROOT / "cassettes" / "quickstart-training.tar.gz"),
        "--store",
        str(shipped),
        "--json",
    )
    old = json.loads(imported.stdout)["root"]["id"]
    proc = cli("audit", old, "--workspace", "--store", str(shipped), "--json")
    assert proc.returncode == 0 and all(r["workspace_digest"] is None for r in json.loads(proc.stdout))


def test_only_a_proposer_that_reads_it_gets_a_workspace() -> None:
    from replaykit.models.codex import CodexAgentBackend
    from replaykit.train.estimators import AgenticEstimator, PatchQueue
    from replaykit.train.openai_backend import OpenAIBackend
    from replaykit.train.workspace_tree import reads_workspace

    assert reads_workspace(AgenticEstimator(OpenAIBackend()))
    assert reads_workspace(AgenticEstimator(cast(Any, CodexAgentBackend.__new__(CodexAgentBackend))))
    assert not reads_workspace(PatchQueue([]))


def test_codex_reads_a_read_only_copy_that_is_gone_before_the_edit_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from replaykit.models.codex import WORKSPACE_DIR, CodexAgentBackend, CodexRun

    workspace = write_workspace(
        {"README.md": b"r", "episodes/failed/t#0.txt": b"$ make\nexit 2"}, tmp_path / "ws"
    )
    workdir = tmp_path / "worktree"
    workdir.mkdir()
    seen: dict[str, Any] = {}

    def run(self: CodexAgentBackend, where: Path, prompt: str, session: Any) -> CodexRun:
        copy = where / WORKSPACE_DIR
        seen["files"] = files_of(copy)
        seen["mode"] = stat.S_IMODE((copy / "episodes" / "failed" / "t#0.txt").stat().st_mode)
        seen["prompt"] = prompt
        return CodexRun(0, [], "")

    monkeypatch.setattr(CodexAgentBackend, "run", run)
    CodexAgentBackend().propose(workdir, "BRIEF", cast(Any, None), workspace=workspace)
    assert seen["files"] == dict(workspace.files) and seen["mode"] == 0o444
    assert seen["prompt"].startswith("BRIEF\n\n") and f"./{WORKSPACE_DIR}/" in seen["prompt"]
    assert list(workdir.iterdir()) == []  # removed: never part of a candidate
