"""The words replaykit's tables use, each explained in one sentence a newcomer understands.

One source for the viewer's tooltips and legend, the HTML report and the CLI tables'
footnotes, so the same word means the same thing everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable

TERMS: dict[str, str] = {
    "training": "A loop of epochs: each proposes one change to the harness and keeps it only if the criterion accepts it.",
    "epoch": "One round of a training: propose a candidate harness, measure it, compare it with the baseline.",
    "baseline": "The harness the training currently keeps (the baseline branch's HEAD).",
    "candidate": "The proposed harness commit (one child commit of the baseline) being judged in an epoch.",
    "final baseline": "The harness commit the training ended with: every accepted change applied.",
    "decision": "accepted: the candidate became the baseline; rejected: kept under a ref, baseline unchanged; skipped: not measured (empty diff, edits outside the patch surface, or no longer imports).",
    "accepted epochs": "How many epochs' candidates were accepted, and which ones (e0 = epoch 0).",
    "loss": "The criterion's score of candidate against baseline: negative is better (−0.375 = 6 of 16 more solved), 0 is a tie, positive is worse.",
    "verdict": "The criterion's recorded judgement of one epoch: accept or not, why, and which task instances moved.",
    "criterion": "The rule that turns two runs into a verdict (e.g. strict_pareto: more solved, none lost).",
    "new solve": "A task instance (task#seed) the candidate solves and the baseline did not.",
    "regression": "A task instance (task#seed) the baseline solved and the candidate does not.",
    "run": "One measurement of a harness commit with a model on a panel: every task × seed once.",
    "panel": "The tasks × seeds a run measures.",
    "task": "One environment with a goal and a grader (a folder under envs/).",
    "seed": "The seed of one attempt at a task; task#seed is one task instance.",
    "model": "The frozen LLM the harness talks to (name as the endpoint knows it).",
    "harness": "Your agent code (a git repo): prompts, tool loop, retries. Its value is a commit SHA.",
    "harness SHA": "The commit of the harness that ran (first 10 characters shown).",
    "call facet": "What a model call's answer was, derived from its bytes: tool_calls, stop, length (cut at the token limit), empty, reasoning_only, malformed_tool_call, refusal. The episode list's filter keeps the episodes with at least one such call.",
    "solved": "Task instances whose grade passed, of those measured (e.g. 13/16).",
    "pass rate": "Of a task's graded instances (task#seed) across the runs shown, the share solved; infra failures are not graded, so not counted.",
    "solve rate": "Solved task instances divided by the panel's size.",
    "replicates": "Statistics over each task's k seeds: pass@k (at least one of the k solves it), pass^k (all k do), disagree (of every two seeds of a task, the share whose outcomes differ) and, where certified, forked N of M certified (the tasks whose re-execution differed, of those certified).",
    "outcome": "What became of the episode, derived from its events: solved; verified_rejected (it acted, the grader said no); hit_step_cap or hit_timeout (a framework limit stopped it: limits.max_steps or max_tokens, limits.episode_timeout_s); verify_timeout (the grader timed out); no_valid_action (it ended without acting); crash (the harness raised); infra (not graded: the endpoint or the environment failed). The viewer's pass / fail / infra group them.",
    "infra": "Infrastructure failures: episodes not graded because the model endpoint or the environment failed (re-recorded on the next run), never counted as a harness's failure.",
    "reward": "The grader's score of the episode's end state, 0 to 1.",
    "actions": "Environment actions: commands the harness ran in the task's environment (a model call is not one).",
    "model calls": "Requests the harness sent to the model, served from a donor or live; a transcript counts them from 1.",
    "paid calls": "Model calls that reached the model endpoint when these episodes were recorded: the calls paid for (model calls minus those served from a donor).",
    "event": "One entry of a cassette, in order: a model call, an environment action, a network fetch, an error, a limit or the grade.",
    "reused events": "Events served from a donor cassette instead of recorded live: the same task, seed, model and config under another harness commit (prefix reuse), or a fork's parent.",
    "fork": "An episode continued live from call N+1 of another (its parent; shown as 'call N+1 of M', M the parent's model calls, counted from 1): its first N model calls served from the parent, the rest live with a change.",
    "duration": "How long the episode took when it was recorded, from its environment's start to its grade (wall clock; never part of its key or digest, so a replay takes its own time).",
    "tokens": "Tokens the model endpoint reported (prompt + completion), summed over the episode.",
    "episode": "One attempt at one task instance, recorded as a cassette: every model call and environment action, in order (its events).",
    "cassette": "The recording of one episode; replaying it needs no network, Docker or key.",
    "state digest": "A hash of the environment's files after an action: two replays agree on it or they diverged.",
    "digest": "A hash of the episode's events (never of times): equal digests, equal episodes.",
    "first difference": "The first event where two episodes part: everything before it is identical.",
    "compare": "The same panel measured for several harnesses × models.",
    "transfer": "A training's harness, untrained (its first baseline) and trained (its final baseline), measured on other panels and models: does the training carry over?",
    "gap": "The baseline's solve rate on one panel minus another's: val − train (does what it learnt on the training panel hold on tasks the proposer never saw?), test − val (did choosing on val overfit it?), with a 95% interval over both panels' tasks.",
    "trained vs untrained": "The solve-rate change from the first harness (untrained) to the last (trained), per model.",
    "recorded": "When this was written to the store (UTC).",
    "pass@k": "The chance that at least one of k attempts (seeds) at a task solves it, averaged over tasks.",
    "pass^k": "The chance that all k attempts (seeds) at a task solve it, averaged over tasks: how reliably it is solved.",
    "disagree": "Of every two seeds of the same task in one run, the share whose outcomes differ: how often a rerun of the unchanged agent disagrees with itself.",
    "forked N of M certified": "Of the M certified tasks, the N certify found forked: re-running the recorded actions gave other observations or another grade (not a fork of an episode).",
    "bootstrap interval": "The 95% range of the candidate-minus-baseline score over resamplings of the tasks (seeded, so it replays).",
    "noise floor": "The margin noise alone reaches here: the larger of the seeds' disagree rate and the bootstrap interval's half-width toward 0.",
    "within noise": "The margin is no larger than the noise floor: reruns of the same agent move that much.",
    "McNemar p": "The exact McNemar test of two runs over the same task instances: from the instances only one of them solved, how likely so lopsided a split is if the change did nothing.",
    "minimum detectable effect": "The smallest solve-rate change this panel detects 80% of the time at α 0.05, given how often its seeds disagree and how much a task's seeds move together.",
    "BH q": "A p-value adjusted for the other cells of the sweep (Benjamini–Hochberg): of the cells that look better, the share expected to be so by chance stays below q.",
    "Holm p": "A p-value adjusted for the other epochs of the training (Holm): each accept is one more test.",
    "movement": "A task instance whose outcome moved between baseline and candidate: a new solve or a regression (seeds of one run that differ disagree; they do not move).",
    "attributed": "A movement (new solve or regression) where the candidate's changed lines ran before its episode parted from the baseline's.",
    "incidental": "A movement where the episodes parted before any changed line ran: noise or a shared nondeterminism, not the change.",
}


#: The same words in a few words each, for the one-line legend under a CLI table.
SHORT: dict[str, str] = {
    "reward": "the grader's score, 0 to 1",
    "outcome": "solved, verified_rejected, hit_step_cap, hit_timeout, verify_timeout, no_valid_action, crash (its exception) or infra (not graded: the endpoint or the environment failed; re-recorded next run)",
    "cassette": "the episode's recording (replaykit cassettes show ID)",
    "source": "recorded now, or reused from the store (no model call)",
    "calls": "model calls the episode made (served from a donor or live)",
    "actions": "environment actions: commands the harness ran",
    "paid": "model calls that reached the endpoint when its episodes were recorded (a training's: its runs' and its proposer's)",
    "reused": "events served from donor cassettes instead of recorded live",
    "pass rate": "Of a task's graded instances (task#seed) across the runs shown, the share solved; infra failures are not graded, so not counted.",
    "solve rate": "task instances solved / panel size",
    "loss": "negative is better, 0 a tie, positive worse",
    "solved": "task instances passed, baseline → candidate",
    "margin": "the candidate-minus-baseline score (solve rate, or mean reward) over the paired task instances",
    "noise floor": "the margin noise reaches: the larger of the seeds' disagree rate and the 95% interval's half-width toward 0",
    "k": "seeds per task (the fewest any task has)",
    "pass@k": "share of tasks one of k seeds solves",
    "pass^k": "share of tasks all k seeds solve",
    "disagree": "of every two seeds of a task, the share whose outcomes differ",
    "forked": "N/M: N certified tasks whose re-execution differed, of M certified",
    "solved/total": "task instances solved, of the panel's",
    "gap": "the baseline's solve rate on one panel minus another's (val − train: does it generalise; test − val: did choosing on val overfit it), with a 95% interval [low, high] over both panels' tasks",
    "− untrained": "a harness's solve rate minus the untrained harness's, paired on the same task instances, with its 95% interval [low, high]",
    "floor": "the noise floor: the margin noise reaches, the larger of the seeds' disagree rate and the 95% interval's half-width toward 0",
    "within": "the margin is within the noise floor",
    "p": "exact McNemar p (one-sided) that the candidate solves more task instances",
    "Holm p": "p adjusted for every judged epoch of the training (Holm)",
    "a/i": "movements (new solves, regressions) attributed to the change / incidental: two counts",
}


def legend(*words: str) -> str:
    """``legend: reward = the grader's score, 0 to 1 · …`` for the words given."""
    return "legend: " + " · ".join(f"{w} = {SHORT[w]}" for w in words)


def fork_call(served: int, total: int | None) -> str:
    """Where a fork went live, as every command and page names it: ``call 2 of 3`` (the fork's
    first live model call, counted from 1, of its parent's model calls; ``call 2`` when the
    parent is not in the store). ``served`` is the ``--at`` it was made with: the calls served."""
    return f"call {served + 1}" + (f" of {total}" if total is not None else "")


def term(word: str) -> str:
    """The explanation of ``word`` (empty if the glossary does not know it)."""
    return TERMS.get(word, "")


def epoch_names(epochs: Iterable[int]) -> str:
    """Epochs as every table names them: ``e0, e2`` (``none`` for no epoch), never a bare
    ``0`` that reads as a count."""
    return ", ".join(f"e{e}" for e in epochs) or "none"
