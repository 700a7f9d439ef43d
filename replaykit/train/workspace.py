"""The proposer's workspace: what a proposer may read in an epoch, as a read-only folder.

Each epoch (format 2, an estimator that reads one: ``workspace_tree.reads_workspace``) gets a folder of plain
files, built from the store and the harness repository only, so a replay builds the same one:

    README.md                          what is here
    scores.json                        per training-panel task: each measured harness's solved seeds
    episodes/failed/TASK#SEED.txt      the baseline's failed training-panel episodes, as transcripts
    episodes/flipped/epoch-N/TASK#SEED.txt   each prior candidate's flipped episodes (its side)
    candidates/epoch-N/proposal.json   a prior candidate: description, decision, skip reason,
                                       movement and where each flip's episodes part (attribution)
    candidates/epoch-N/diff.patch      its diff against its baseline
    harness/PATH                       the baseline's files that ``train.proposer_visible`` admits
    tasks/TASK/PATH                    training-panel tasks' files it admits; never tests/, solution/

Only training-panel episodes and tasks appear (``panels.py``: val and test never). Each
transcript file is cut to ``TRANSCRIPT_CAP`` bytes. The folder is written atomically under the
store's ``cache/workspaces/`` (a temporary folder for a read-only store), files 0444 and folders
0555, named by its digest: ``tree_digest`` (sorted paths and contents), which keys the epoch's
proposal (``proposal.py``) and is recorded in its epoch (``workspace_digest``).
"""

from __future__ import annotations

import json
from typing import Mapping, Sequence, TypedDict

from replaykit.cassette.backend import StoreBackend
from replaykit.cassette.events import EnvEvent, ErrorEvent, Event, GradeEvent, LimitEvent, LlmEvent
from replaykit.cassette.facets import answer_of
from replaykit.core.run_doc import RunDoc
from replaykit.train.attribution import parting
from replaykit.train.loss import Loss
from replaykit.train.state import TrainingState
from replaykit.train.workspace_tree import Workspace, visible, workspace_root, write_workspace

#: bytes of one transcript file (a longer one is cut, saying so); each output in it: OUTPUT_CAP
TRANSCRIPT_CAP = 16 * 1024
OUTPUT_CAP = 2048

README = """\
# The proposer's workspace (read-only)

Built by replaykit for one epoch of a training, from the training panel only.

- scores.json: per task, each measured harness's solved seeds (baseline and candidates so far)
- episodes/failed/: the baseline's failed episodes, as transcripts
- episodes/flipped/epoch-N/: the episodes a prior candidate flipped (the candidate's side)
- candidates/epoch-N/: each prior candidate's proposal.json (decision, movement, attribution)
  and diff.patch
- harness/: the baseline harness's files (train.proposer_visible)
- tasks/: the training-panel tasks' visible files (never tests/ or solution/)
"""


def _cut(text: str, cap: int = OUTPUT_CAP) -> str:
    return text if len(text) <= cap else f"{text[:cap]}\n… {len(text) - cap} more characters cut"


def _content(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in value)
    return "" if value is None else json.dumps(value, sort_keys=True)


def _messages(items: object) -> list[str]:
    lines = []
    for m in items if isinstance(items, list) else []:
        if isinstance(m, dict):
            lines.append(f"[{m.get('role', m.get('type', '?'))}]")
            lines.append(_cut(_content(m.get("content") if "content" in m else m.get("output"))))
            for call in m.get("tool_calls") or []:
                fn = call.get("function", {}) if isinstance(call, dict) else {}
                lines.append(f"-> {fn.get('name')}({_cut(str(fn.get('arguments')))})")
    return lines


def _event_lines(event: Event, first_call: bool) -> list[str]:
    if isinstance(event, LlmEvent):
        body = event.body if isinstance(event.body, dict) else {}
        lines = _messages(body.get("messages", body.get("input"))) if first_call else []
        answer = answer_of(event)
        choices = answer.get("choices") if answer else None
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            return lines + _messages([choices[0].get("message")])
        return lines + (
            [f"[model reply] {_cut(json.dumps(answer, sort_keys=True))}"]
            if answer
            else [f"[model call: status {event.status}]"]
        )
    if isinstance(event, EnvEvent):
        obs = event.observation
        out = [f"$ {event.action}", f"exit {obs.exit_code}" + (" (timed out)" if obs.timed_out else "")]
        return out + [
            f"{name}:\n{_cut(text)}"
            for name, text in (("stdout", obs.stdout), ("stderr", obs.stderr))
            if text
        ]
    if isinstance(event, (ErrorEvent, LimitEvent)):
        return [f"{event.kind}: {_cut(event.message)}"]
    if isinstance(event, GradeEvent):
        return [f"grade: reward {event.grade.reward:g} passed {event.grade.passed}"]
    return []


def episode_text(store: StoreBackend, cassette_id: str, label: str) -> bytes:
    """An episode as plain text (the task's first request, each reply, command and output, the
    grade; each text cut to ``OUTPUT_CAP`` characters), cut to ``TRANSCRIPT_CAP`` bytes."""
    episode = store.get_episode(cassette_id)
    lines = [f"# {label} · cassette {cassette_id[:16]} · harness {episode.key.harness_sha[:10]}", ""]
    calls = 0
    for event in episode.events:
        lines += _event_lines(event, first_call=isinstance(event, LlmEvent) and calls == 0)
        calls += isinstance(event, LlmEvent)
    data = "\n".join(lines).encode("utf-8")
    if len(data) > TRANSCRIPT_CAP:
        more = len(data) - TRANSCRIPT_CAP
        data = (
            data[:TRANSCRIPT_CAP].decode("utf-8", "ignore").encode() + f"\n… {more} more bytes cut\n".encode()
        )
    return data


def _unit(task_id: str, seed: int | str) -> str:
    return f"{task_id}#{seed}"


def train_runs(store: StoreBackend, loss: Loss) -> tuple[RunDoc | None, RunDoc | None]:
    """A prior epoch's training-panel runs (baseline, candidate): never another panel's."""
    if loss.panels is not None:
        runs = loss.panels.get("train")
        ids = (runs["baseline_run"], runs["candidate_run"]) if runs else (None, None)
    else:  # format 1: the training panel is the only one
        ids = (loss.baseline_run, loss.candidate_run)
    return tuple(store.get_run(i) if i else None for i in ids)  # type: ignore[return-value]


def _candidate(
    state: TrainingState, loss: Loss, files: dict[str, bytes], scores: dict[str, dict[str, str]]
) -> None:
    store, base = state.store, f"candidates/epoch-{loss.epoch}"
    decision = "skipped" if loss.skipped else ("accepted" if loss.accept else "rejected")
    record: dict[str, object] = {
        "epoch": loss.epoch,
        "description": loss.description,
        "decision": decision,
        "skipped": loss.skipped,
        "changed": list(loss.changed),
        "baseline_sha": loss.baseline_sha,
        "candidate_sha": loss.candidate_sha,
    }
    if loss.candidate_sha:
        diff = state.harness.repo.git.diff(
            loss.baseline_sha, loss.candidate_sha, "--no-color", "--no-ext-diff"
        )
        files[f"{base}/diff.patch"] = (diff + "\n").encode("utf-8")
    baseline, candidate = train_runs(store, loss)
    if baseline is not None and candidate is not None:
        before = {_unit(e.task_id, e.seed): e for e in baseline.episodes}
        after = {_unit(e.task_id, e.seed): e for e in candidate.episodes}
        flips = []
        for unit in sorted(before.keys() & after.keys()):
            b, c = before[unit], after[unit]
            if b.passed == c.passed:
                continue
            parted = parting(store.get_episode(b.cassette_id), store.get_episode(c.cassette_id))
            flips.append(
                {"unit": unit, "movement": "new_solve" if c.passed else "regression", "parted": parted}
            )
            files[f"episodes/flipped/epoch-{loss.epoch}/{unit}.txt"] = episode_text(
                store, c.cassette_id, f"{unit} on candidate epoch {loss.epoch} ({flips[-1]['movement']})"
            )
        record["movement"] = {
            "baseline_solved": f"{baseline.solved}/{baseline.total}",
            "candidate_solved": f"{candidate.solved}/{candidate.total}",
            "new_solves": [f["unit"] for f in flips if f["movement"] == "new_solve"],
            "regressions": [f["unit"] for f in flips if f["movement"] == "regression"],
        }
        record["attribution"] = flips
        _score(scores, candidate, f"epoch {loss.epoch} candidate {(loss.candidate_sha or '')[:10]}")
    files[f"{base}/proposal.json"] = _json(record)


def _score(scores: dict[str, dict[str, str]], run: RunDoc, column: str) -> None:
    by_task: dict[str, list[int]] = {}
    for e in run.episodes:
        by_task.setdefault(e.task_id, [0, 0])
        by_task[e.task_id][0] += int(bool(e.passed))
        by_task[e.task_id][1] += 1
    for task, (solved, seeds) in sorted(by_task.items()):
        scores.setdefault(task, {})[column] = f"{solved}/{seeds}"


def _json(value: object) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def task_files(state: TrainingState, globs: Sequence[str]) -> dict[str, bytes]:
    """The training-panel tasks' files the globs admit (``tasks/TASK/PATH``), read from their folders."""
    from replaykit.episodes.config_paths import task_folders

    out: dict[str, bytes] = {}
    if not any(g.startswith("tasks/") for g in globs):
        return out
    for folder in task_folders(list(state.config.panel.tasks), state.config.base_dir):
        for path in sorted(folder.rglob("*")):
            rel = f"tasks/{folder.name}/{path.relative_to(folder).as_posix()}"
            if path.is_file() and not path.is_symlink() and visible(rel, globs):
                out[rel] = path.read_bytes()
    return out


def workspace_files(
    state: TrainingState,
    baseline_sha: str,
    train_run: RunDoc,
    tried: Sequence[Loss],
    tasks: Mapping[str, bytes] | None = None,
) -> dict[str, bytes]:
    """Every file of an epoch's workspace (path → bytes); ``tasks``: the task files as recorded
    (a replay on a machine without the task folders), else read from the panel's folders."""
    globs = state.train_cfg.proposer_visible
    files: dict[str, bytes] = {"README.md": README.encode()}
    for e in train_run.episodes:
        if not e.passed:
            unit = _unit(e.task_id, e.seed)
            files[f"episodes/failed/{unit}.txt"] = episode_text(
                state.store, e.cassette_id, f"{unit} failed on the baseline"
            )
    scores: dict[str, dict[str, str]] = {}
    for loss in tried:
        baseline, _ = train_runs(state.store, loss)
        if baseline is not None:
            _score(scores, baseline, f"epoch {loss.epoch} baseline {loss.baseline_sha[:10]}")
        _candidate(state, loss, files, scores)
    _score(scores, train_run, f"epoch {len(tried)} baseline {baseline_sha[:10]}")
    files["scores.json"] = _json(scores)
    for path, (_, data) in state.harness.tree_files(baseline_sha).items():
        if visible(f"harness/{path}", globs):
            files[f"harness/{path}"] = data
    files.update(
        task_files(state, globs) if tasks is None else {p: d for p, d in tasks.items() if visible(p, globs)}
    )
    return files


def build_workspace(
    state: TrainingState, baseline_sha: str, train_run: RunDoc, tasks: Mapping[str, bytes] | None = None
) -> Workspace:
    """The epoch's workspace written read-only (``workspace_tree.write_workspace``); the prior
    candidates are the epochs this process judged (a resume recomputes every one of them)."""
    files = workspace_files(state, baseline_sha, train_run, state.losses, tasks)
    return write_workspace(files, workspace_root(state.store))


class EpochWorkspace(TypedDict):
    """``audit TRAINING --workspace``: what the proposer of one epoch saw."""

    epoch: int
    workspace_digest: str | None  # None: its proposal read no workspace (recorded before, or no proposer)
    proposal_cassette: str | None
    files: list[list[str | int]]  # [path, size, sha256[:16]] from the proposal's metadata


def workspace_audit(store: StoreBackend, training_id: str, epoch: int | None = None) -> list[EpochWorkspace]:
    """Each epoch's workspace (or ``epoch``'s) as its proposal cassette recorded it: offline, read-only."""
    from replaykit.core.errors import ConfigError

    doc = store.get_training(training_id)
    epochs = doc.epochs
    if epoch is not None and not 0 <= epoch < len(epochs):
        raise ConfigError(f"--epoch {epoch}: training {doc.training_id} has epochs 0..{len(epochs) - 1}")
    out: list[EpochWorkspace] = []
    for e in epochs if epoch is None else [epochs[epoch]]:
        cassette, digest = e.proposal_cassette, e.workspace_digest
        meta = store.get_episode(cassette).meta if digest and cassette and store.has(cassette) else {}
        ws = meta.get("workspace") or {}
        rows = ws.get("files") if isinstance(ws, dict) else None
        files: list[list[str | int]] = (
            [[str(r[0]), int(r[1]), str(r[2])] for r in rows if isinstance(r, list)]
            if isinstance(rows, list)
            else []
        )
        out.append(
            {"epoch": e.epoch, "workspace_digest": digest, "proposal_cassette": cassette, "files": files}
        )
    return out
