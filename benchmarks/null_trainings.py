"""Benchmark: how often does each criterion accept a change that does nothing, and how often
does it accept one that helps? (issue 37 item 4)

N *null* trainings, each E epochs whose proposals change nothing the harness does (each adds a
sentence to its prompt: the requests change, so the task model samples anew), and M *real*
trainings whose first proposal is a real improvement (retry after a failed command) and whose
later ones are null. The task model is the reference server's per-task noise mode,
``reference-noisy``: each task has its own solve probability, each conversation draws anew.
Training ``i`` measures seeds ``S*i .. S*i+S-1`` of the eight one-step tasks of
``null_world.py`` (S = ``--seeds``), so trainings are independent samples; null training ``i``
and real training ``i`` share their initial baseline run.

Every training is a real one (``Trainer``: the harness repo, the patch queue, the reference
server, the local environment, the store); each criterion trains on the same seeds and
replays from cassettes every run another criterion already measured (a null training that
accepts nothing measures the same candidates under every criterion). The store is kept in
``--cache``: a second invocation replays everything.

Printed per criterion (``strict_pareto``, ``mean_reward`` at its default alpha 0.1,
``paired_test`` with ``train.error_budget`` = ``--alpha``): the false-accept rate (null
trainings that accepted any epoch; and per judged epoch) and the power (real trainings whose
real change was accepted), each with its exact 95% interval (Clopper–Pearson); then what it
cost. Figures only; ``docs/training.md`` keeps the ones measured for the docs.

Usage: python benchmarks/null_trainings.py [--trainings 200] [--real 50] [--epochs 3]
       [--seeds 2] [--criteria strict_pareto,mean_reward,paired_test] [--alpha 0.05]
       [--workers 2] [--cache DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import null_world as world

KNOWN = ("strict_pareto", "mean_reward", "paired_test")


def criterion_spec(name: str, alpha: float) -> tuple[dict[str, Any], float | None]:
    """(``train.criterion``, ``train.error_budget``) of a criterion as the benchmark runs it."""
    if name == "paired_test":
        return {"name": "paired_test", "alpha": alpha}, alpha
    return {"name": name}, None


def bad(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trainings", type=int, default=200, help="null trainings (N)")
    parser.add_argument("--real", type=int, default=50, help="trainings with one real improvement (M)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs per training (E)")
    parser.add_argument("--seeds", type=int, default=2, help="seeds per task in each training's panel")
    parser.add_argument("--criteria", default=",".join(KNOWN), help="comma-separated, of " + ", ".join(KNOWN))
    parser.add_argument("--alpha", type=float, default=0.05, help="paired_test's alpha and error budget")
    parser.add_argument("--workers", type=int, default=2, help="processes, each a shard of the trainings")
    parser.add_argument("--cache", type=Path, default=None, help="where the store and repos are kept")
    parser.add_argument("--json", action="store_true", help="one JSON document instead of the table")
    args = parser.parse_args(argv)
    args.criteria = [c.strip() for c in args.criteria.split(",") if c.strip()]
    unknown = [c for c in args.criteria if c not in KNOWN]
    if unknown or not args.criteria:
        bad(f"--criteria {','.join(unknown) or repr('')}: the benchmark knows {', '.join(KNOWN)}")
    if not 0 < args.alpha < 1:
        bad(f"--alpha {args.alpha}: give a level strictly between 0 and 1, e.g. 0.05")
    for flag, value, low, high in (
        ("--trainings", args.trainings, 0, 100_000),
        ("--real", args.real, 0, 100_000),
        ("--epochs", args.epochs, 1, 16),
        ("--seeds", args.seeds, 1, 64),
        ("--workers", args.workers, 1, 64),
    ):
        if not low <= value <= high:
            bad(f"{flag} {value}: give a whole number from {low} to {high}")
    if args.trainings + args.real == 0:
        bad("--trainings 0 --real 0: nothing to measure")
    return args


def jobs(args: argparse.Namespace) -> list[dict[str, Any]]:
    """One job per (training, criterion); a training's jobs share one shard (one store)."""
    out = []
    for kind, count in (("null", args.trainings), ("real", args.real)):
        for i in range(count):
            for name in args.criteria:
                out.append({"kind": kind, "index": i, "criterion": name, "shard": i % args.workers})
    return out


def prepare(cache: Path) -> tuple[list[Path], Path]:
    """The tasks and the materialised harness repo, made once in ``cache``."""
    from replaykit.episodes.harness import materialise_template

    tasks = world.make_tasks(cache / "tasks")
    repo = cache / "template-repo"
    if not (repo / ".git").exists():
        materialise_template(world.make_template(cache / "template"), repo, "main")
    return tasks, repo


def run_job(
    job: dict[str, Any], args: argparse.Namespace, cache: Path, tasks: list[Path], template: Path
) -> dict[str, Any]:
    """One training, recorded or replayed from the shard's store; what each epoch decided."""
    from replaykit.train.trainer import Trainer

    name = f"{job['kind']}-{job['index']:05d}-{job['criterion']}"
    repo = cache / "repos" / name
    if not (repo / ".git").exists():
        world.fresh_repo(template, repo)
    diffs = [world.null_diff(e) for e in range(args.epochs)]
    if job["kind"] == "real":
        diffs[0] = world.real_diff()
    criterion, budget = criterion_spec(job["criterion"], args.alpha)
    seeds = list(range(args.seeds * job["index"], args.seeds * (job["index"] + 1)))
    store = cache / "shards" / f"shard-{job['shard']}" / "store"
    data = world.config(cache, store, repo, tasks, seeds, args.epochs, diffs, criterion, budget)
    path = cache / "configs" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    trainer = Trainer(config_path=path)
    for loss in trainer.epochs(args.epochs):
        loss.backward()
        trainer.optimizer.step()
    summary = trainer.summary()
    epochs = [
        {
            "decision": "skipped"
            if e.skipped
            else ("accepted" if (e.verdict or {}).get("accept") else "rejected"),
            "p_value": ((e.verdict or {}).get("metrics") or {}).get("p_value"),
        }
        for e in summary.epochs
    ]
    return {
        **job,
        "training_id": summary.training_id,
        "epochs": epochs,
        "calls": trainer.paid.task_model_calls,
    }


def shard_main(
    shard: int, todo: list[dict[str, Any]], args: argparse.Namespace, cache: Path, queue: Any
) -> None:
    tasks, template = prepare(cache)
    for job in todo:
        try:
            queue.put(("done", run_job(job, args, cache, tasks, template)))
        except Exception as exc:  # the parent says which training failed, and stops
            queue.put(("failed", {**job, "error": f"{type(exc).__name__}: {exc}"}))
            return
    queue.put(("shard", shard))


def run_all(args: argparse.Namespace, cache: Path) -> list[dict[str, Any]]:
    """Every job, one process per shard; a line of progress as trainings finish."""
    prepare(cache)  # once, before the shards fork
    todo = jobs(args)
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    shards = sorted({j["shard"] for j in todo})
    procs = [
        context.Process(target=shard_main, args=(s, [j for j in todo if j["shard"] == s], args, cache, queue))
        for s in shards
    ]
    for p in procs:
        p.start()
    results: list[dict[str, Any]] = []
    finished, start, step = 0, time.monotonic(), max(1, len(todo) // 20)
    try:
        while finished < len(procs):
            kind, item = queue.get()
            if kind == "failed":
                bad(f"{item['kind']} training {item['index']} ({item['criterion']}) failed: {item['error']}")
            if kind == "shard":
                finished += 1
                continue
            results.append(item)
            if len(results) % step == 0 or len(results) == len(todo):
                print(
                    f"  {len(results)}/{len(todo)} training(s) · {time.monotonic() - start:.0f} s",
                    file=sys.stderr,
                )
    except KeyboardInterrupt:
        print(
            f"interrupted after {len(results)} of {len(todo)} training(s); {cache} keeps what was recorded "
            "(the same command continues from there)",
            file=sys.stderr,
        )
        raise SystemExit(130) from None
    finally:
        for p in procs:
            if p.is_alive() and finished < len(procs):
                p.terminate()
            p.join()
    return results


def rate(k: int, n: int) -> dict[str, Any]:
    from replaykit.train.significance import rate_interval

    low, high = rate_interval(k, n)
    return {"count": k, "of": n, "rate": k / n if n else None, "interval": [low, high]}


def summarise(args: argparse.Namespace, results: list[dict[str, Any]]) -> dict[str, Any]:
    per: dict[str, Any] = {}
    for name in args.criteria:
        null = [r for r in results if r["kind"] == "null" and r["criterion"] == name]
        real = [r for r in results if r["kind"] == "real" and r["criterion"] == name]
        judged = [e for r in null for e in r["epochs"] if e["decision"] != "skipped"]
        per[name] = {
            "spec": criterion_spec(name, args.alpha)[0],
            "error_budget": criterion_spec(name, args.alpha)[1],
            "false_accept": rate(
                sum(any(e["decision"] == "accepted" for e in r["epochs"]) for r in null), len(null)
            ),
            "false_accept_per_epoch": rate(sum(e["decision"] == "accepted" for e in judged), len(judged)),
            "power": rate(sum(r["epochs"][0]["decision"] == "accepted" for r in real), len(real)),
        }
    return {
        "kind": "null_trainings",
        "trainings": args.trainings,
        "real": args.real,
        "epochs": args.epochs,
        "panel": {"tasks": len(world.WORDS), "seeds": args.seeds, "model": "reference-noisy"},
        "alpha": args.alpha,
        "criteria": per,
        "model_calls": sum(r["calls"] for r in results),
    }


def cell(r: dict[str, Any]) -> str:
    """A rate as the benchmarks print it: count/of, the rate and its interval ("-" of none)."""
    if not r["of"]:
        return "-"
    low, high = r["interval"]
    return f"{r['count']}/{r['of']} {r['rate']:.3f} [{low:.3f}, {high:.3f}]"


def show(report: dict[str, Any]) -> None:
    panel = report["panel"]
    print(
        f"{report['trainings']} null and {report['real']} real training(s) of {report['epochs']} epoch(s), "
        f"{panel['tasks']} tasks x {panel['seeds']} seed(s), {panel['model']}"
    )
    for name, c in report["criteria"].items():
        budget = f" (error_budget {c['error_budget']})" if c["error_budget"] is not None else ""
        print(f"{name}{budget}")
        print(f"  false accepts, per training: {cell(c['false_accept'])}")
        print(f"  false accepts, per epoch:    {cell(c['false_accept_per_epoch'])}")
        print(f"  power on the real change:    {cell(c['power'])}")
    cost = report["cost"]
    print(
        f"cost: {report['model_calls']} model call(s) recorded, {cost['cpu_s']:.0f} s CPU, "
        f"{cost['wall_s']:.0f} s wall ({cost['workers']} worker(s)); rates: 95% exact intervals"
    )


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    cache = args.cache or Path(tempfile.gettempdir()) / f"replaykit-bench-null-{args.epochs}x{args.seeds}"
    start = time.monotonic()
    results = run_all(args, cache)
    report = summarise(args, results)
    usage = [resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    report["cost"] = {
        "cpu_s": sum(u.ru_utime + u.ru_stime for u in usage),
        "wall_s": time.monotonic() - start,
        "workers": args.workers,
        "cache": str(cache),
    }
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        show(report)


if __name__ == "__main__":
    main()
