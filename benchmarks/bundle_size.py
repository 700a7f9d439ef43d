"""Benchmark: exporting, verifying and importing a bundle in memory independent of its size.

Builds one store per size holding a run whose episodes each carry a large, incompressible
observation (a distinct blob of --blob-mb MB per episode, so the bundle's size is what grows),
then runs ``cassettes export``, ``cassettes verify BUNDLE`` and ``cassettes import`` through the
real CLI, each in its own child process, and prints each child's peak RSS and CPU time. The
sizes are measured round-robin (--repeats), so the ratios compare figures taken side by side:
the target is a peak RSS of the largest size within 1.25x of the smallest's (memory independent
of size) and CPU per MB within 1.5x (linear). Before streaming, a 3.9 GB bundle peaked at
3.9 GB RSS to verify and 4.1 GB to import.

    python benchmarks/bundle_size.py [--sizes 100,1000] [--blob-mb 8] [--repeats 1]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def build_store(root: Path, size_mb: int, blob_mb: int) -> str:
    """A store at ``root`` with one run of ``size_mb / blob_mb`` episodes; returns the run id."""
    from replaykit.cassette.events import EnvEvent, Episode, GradeEvent
    from replaykit.cassette.integrity import cassette_columns
    from replaykit.cassette.keys import CassetteKey, ModelId
    from replaykit.cassette.store import Store
    from replaykit.core.run_doc import EpisodeSummary, ModelRef, RunDoc
    from replaykit.envs.results import Grade, Observation

    store = Store(root)
    store.put_tree("a" * 40, {"harness.py": (0o644, b"def solve(task, env, llm, ctx):\n    pass\n")})
    summaries, ids = [], []
    for seed in range(max(1, size_mb // blob_mb)):
        text = base64.b64encode(os.urandom(blob_mb * 3 << 18)).decode()  # blob_mb MB of base64
        key = CassetteKey("a" * 40, "big-output", "d" * 64, ModelId("m", "http://e", "r"), seed, "cfg")
        episode = Episode(
            key, [EnvEvent("cat big", Observation(text, "", 0), "s" * 64), GradeEvent(Grade(1.0, True))], {}
        )
        store.put_episode(episode)
        c = cassette_columns(episode)
        summaries.append(
            EpisodeSummary(
                task_id="big-output",
                seed=seed,
                cassette_id=episode.id,
                reward=1.0,
                passed=True,
                steps=c["n_env"],
                llm_calls=c["n_llm"],
                tokens=c["tokens"],
                digest=c["digest"],
            )
        )
        ids.append(episode.id)
    run_id = f"big{size_mb}"
    store.put_run(
        RunDoc(
            run_id=run_id,
            name="big",
            harness_sha="a" * 40,
            model=ModelRef(name="m", endpoint="http://e"),
            config_digest="cfg",
            cassettes=ids,
            episodes=summaries,
        )
    )
    store.close()
    return run_id


def child(*args: str) -> dict[str, Any]:
    """``replaykit ARGS`` in a child process: exit code, peak RSS (MB), CPU seconds, stderr."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "replaykit.cli", *args], stdout=subprocess.DEVNULL, stderr=err
        )
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        return {
            "code": proc.returncode,
            "peak_mb": usage.ru_maxrss / 1024,
            "cpu_s": usage.ru_utime + usage.ru_stime,
            "stderr": err.read().decode(errors="replace").strip(),
        }


def measure(tmp: Path, size_mb: int, blob_mb: int) -> dict[str, Any]:
    work = tmp / f"s{size_mb}"
    shutil.rmtree(work, ignore_errors=True)
    run_id = build_store(work / "store", size_mb, blob_mb)
    bundle = work / "b.tar.gz"
    out: dict[str, Any] = {"size_mb": size_mb}
    out["export"] = child("cassettes", "export", run_id, "-o", str(bundle), "--store", str(work / "store"))
    out["bundle_mb"] = bundle.stat().st_size / 1e6 if bundle.exists() else 0.0
    out["verify"] = child("cassettes", "verify", str(bundle))
    out["import"] = child("cassettes", "import", str(bundle), "--store", str(work / "target"))
    shutil.rmtree(work, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,1000", help="store sizes in MB, the smallest first")
    parser.add_argument("--blob-mb", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows: dict[int, list[dict[str, Any]]] = {s: [] for s in sizes}
    with tempfile.TemporaryDirectory(prefix="replaykit-bundle-size-") as tmp:
        for _ in range(args.repeats):  # round-robin: the sizes side by side
            for size in sizes:
                rows[size].append(measure(Path(tmp), size, args.blob_mb))
    for size in sizes:
        for r in rows[size]:
            for op in ("export", "verify", "import"):
                if r[op]["code"] != 0:
                    raise SystemExit(f"{op} of the {size} MB bundle failed: {r[op]['stderr'][-300:]}")
    small, big = sizes[0], sizes[-1]

    def best(size: int, op: str, what: str) -> float:
        return min(r[op][what] for r in rows[size])

    report: dict[str, Any] = {"sizes_mb": sizes, "ops": {}}
    shown = ", ".join(f"{s} MB store -> {rows[s][0]['bundle_mb']:.0f} MB bundle" for s in sizes)
    print(f"bundle sizes: {shown}")
    head = " ".join(f"{str(s) + ' MB: RSS MB / CPU s':>24}" for s in sizes)
    print(f"{'op':8} {head}   RSS ratio  CPU/MB ratio")
    for op in ("export", "verify", "import"):
        rss_ratio = best(big, op, "peak_mb") / best(small, op, "peak_mb")
        cpu_ratio = (best(big, op, "cpu_s") / big) / max(best(small, op, "cpu_s") / small, 1e-9)
        cells = " ".join(f"{best(s, op, 'peak_mb'):>14.0f} / {best(s, op, 'cpu_s'):>6.2f}" for s in sizes)
        verdict = "met" if rss_ratio <= 1.25 and cpu_ratio <= 1.5 else "NOT met"
        print(f"{op:8} {cells}   {rss_ratio:9.2f}  {cpu_ratio:12.2f}  {verdict}")
        report["ops"][op] = {
            "peak_mb": {s: best(s, op, "peak_mb") for s in sizes},
            "cpu_s": {s: best(s, op, "cpu_s") for s in sizes},
            "rss_ratio": rss_ratio,
            "cpu_per_mb_ratio": cpu_ratio,
            "met": verdict == "met",
        }
    print("target: peak RSS of the largest within 1.25x of the smallest's; CPU per MB within 1.5x")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from measure import load_line

    print(load_line())
    if args.json:
        print(json.dumps(report))


if __name__ == "__main__":
    main()
