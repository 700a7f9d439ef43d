"""Differential test against Harbor itself: Harbor 0.25's oracle (``harbor run -a oracle
-e docker``) and replaykit's ``tasks check`` on every task in ``envs/`` and on the corpus
of task shapes in ``tests/harbor/corpus/`` (multi-step with shared tests, entrypoint
service, env tables, compose sidecar, partial credit, multi-key reward, heredoc
Dockerfile, network at build and test time, TB1 layout, TB1 with several compose services,
docker_image with no Dockerfile, a build that pip-installs over TLS (through the frozen
network's proxy in replaykit, its exchanges kept with the image), a python base from AWS's public mirror of Docker Hub, a
solution serving itself on localhost, a solution that leaves a server running in the background
for the verifier to query, a compose task whose services share a named volume, an image that
never builds) must reach the same verdict
(solved or not) and the same reward on every task but those in :data:`ALLOWED`, each with its
reason (a known Harbor-side or replaykit-documented difference); ``MIN_AGREEMENT`` is a second
guard against the allowed list growing unnoticed.

How Harbor is run here (local base images, public network, TB1 migrated first) is in
``harbor_cli.py``; replaykit loads the TB1 folder itself, and its conversion is checked
file by file against ``harbor tasks migrate``'s. Harbor and replaykit run side by side (Harbor with 2 trials at a
time); the whole test takes about 5-8 minutes on 2 cores.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from replaykit.envs.docker import image_build, images
from replaykit.envs.docker.network.build import read_recording
from replaykit.envs.tasks import load_task
from tests.cli_runner import cli
from tests.harbor import harbor_cli

pytestmark = [pytest.mark.harbor, pytest.mark.docker]
REPO = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"
TB1S = ("tb1-layout", "tb1-multi-service")  # Terminal-Bench 1 folders (no task.toml)

#: Tasks where the two may disagree, and why. Each is a case where replaykit is knowingly
#: more capable or stricter, or where Harbor cannot run the task on this machine.
ALLOWED: dict[str, str] = {
    "heredoc-dockerfile": (
        "Harbor builds with `docker compose build`, which on this engine (no BuildKit/buildx) "
        "cannot parse Dockerfile heredocs (`RUN <<EOF`, `COPY <<EOF`); replaykit rewrites them "
        "into classic instructions first (replaykit/envs/docker/heredoc.py), so it solves the task"
    ),
}
ALLOWED["tb1-multi-service"] = (
    "Harbor 0.25 cannot run its own conversion: `harbor tasks migrate` writes the main service with "
    "`deploy.resources.limits` {cpus: ${CPUS}, memory: ${MEMORY}}, which its docker environment leaves "
    "unset (cpu/memory enforcement 'auto'), so `docker compose build` fails ('strconv.ParseFloat: parsing "
    '""\'); replaykit runs the same converted files (checked byte for byte above) with the sidecar'
)
ALLOWED["tls-build"] = (
    "this machine's outbound TLS is re-signed by a certificate authority only the host trusts, so pip in "
    "Harbor's direct build fails certificate verification (checked below: only that failure is allowed); "
    "replaykit's build goes through its recording proxy, which trusts the host's store, and the build's "
    "containers trust the proxy's CA (issue 31 item 1). Where the network is not intercepted both solve it"
)
MIN_AGREEMENT = 0.89  # 27 of 30: the three ALLOWED above


def _same(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and abs(a - b) < 1e-6)


def _assert_mapped_as_harbor_maps(harbor_side: Path) -> None:
    """replaykit's native load of a TB1 folder holds Harbor's migration's files, byte for byte
    (task.toml aside: its layout differs), and no other file."""
    our_side = load_task(CORPUS / harbor_side.name).path
    for rel in sorted(p.relative_to(harbor_side) for p in harbor_side.rglob("*") if p.is_file()):
        if rel.as_posix() != "task.toml":
            assert (our_side / rel).read_bytes() == (harbor_side / rel).read_bytes(), (harbor_side.name, rel)
    assert sorted(p.relative_to(our_side) for p in our_side.rglob("*")) == sorted(
        p.relative_to(harbor_side) for p in harbor_side.rglob("*")
    ), harbor_side.name


def _disagreements(ids: list[str], rows: dict[str, Any], harbor: dict[str, Any]) -> dict[str, str]:
    """Each task whose oracle replaykit and Harbor grade differently (the table printed); tls-build
    may differ for one reason only."""
    table, disagreements = [], {}
    for task_id in ids:
        row = rows[task_id]
        ours = row["solved"]
        theirs, why = harbor_cli.outcome(harbor[task_id]) if task_id in harbor else (None, "no trial")
        agree = _same(ours, theirs) and ((ours or 0) >= 1) == ((theirs or 0) >= 1)
        table.append(f"{task_id:28} replaykit {ours!s:6} harbor {theirs!s:6} {'=' if agree else 'DIFFERENT'}")
        if not agree:
            disagreements[task_id] = f"replaykit {ours} ({row['problem'][:200]}); harbor {theirs} ({why})"
        if not agree and task_id == "tls-build":  # allowed for this one reason only
            said = str((harbor.get(task_id, {}).get("exception_info") or {}).get("exception_message", ""))
            assert "CERTIFICATE_VERIFY_FAILED" in said, disagreements[task_id]
    print("\n".join(table))
    return disagreements


def test_replaykit_agrees_with_harbor(docker_base: str, tmp_path: Path) -> None:
    reason = harbor_cli.missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"the Harbor differential test must run in CI: {reason}", pytrace=False)
        pytest.skip(reason)
    from replaykit.envs.docker.flavours import build_python_image

    build_python_image()  # python:* tasks run on it, under both frameworks
    client = images.docker_client()

    def resolve(ref: str) -> str:
        return images.alias_for(client, ref, {})

    tasks = sorted(p for p in (REPO / "envs").iterdir() if (p / "task.toml").is_file())
    tasks += sorted(p for p in CORPUS.iterdir() if (p / "task.toml").is_file())
    # TB1: replaykit loads the folder natively with the mapping `harbor tasks migrate` applies
    # (the same files, byte for byte, but task.toml's layout); Harbor runs its own conversion
    migrated = [harbor_cli.migrate(CORPUS / name, tmp_path / "migrated") for name in TB1S]
    for harbor_side in migrated:
        _assert_mapped_as_harbor_maps(harbor_side)
    ids = [t.name for t in tasks] + list(TB1S)
    assert len(set(ids)) == len(ids) and len(ids) >= 30, ids
    assert {"background-server", "compose-volume"} <= set(ids)

    dataset = tmp_path / "harbor-tasks"
    dataset.mkdir()
    for task in [*tasks, *migrated]:
        harbor_cli.harbor_copy(task, dataset, resolve)
    harbor: dict[str, Any] = {}
    failure: list[BaseException] = []

    def run_harbor() -> None:
        try:
            harbor.update(harbor_cli.run_oracle(dataset, tmp_path / "jobs", concurrent=2))
        except BaseException as exc:  # reported below, in the test's thread
            failure.append(exc)

    thread = threading.Thread(target=run_harbor)
    thread.start()
    checked = cli(
        "tasks", "check", *map(str, tasks), *(str(CORPUS / n) for n in TB1S), "--json", timeout=1800
    )
    thread.join()
    if failure:
        raise failure[0]
    assert checked.stdout.strip(), checked.stderr
    rows = {r["task_id"]: r for r in json.loads(checked.stdout)["tasks"]}

    disagreements = _disagreements(ids, rows, harbor)
    unexplained = {k: v for k, v in disagreements.items() if k not in ALLOWED}
    assert not unexplained, unexplained
    agreement = 1 - len(disagreements) / len(ids)
    print(f"agreement {agreement:.1%} over {len(ids)} tasks; allowed: {sorted(disagreements)}")
    assert agreement >= MIN_AGREEMENT, disagreements
    # issue 31 item 1: replaykit's build of tls-build fetched PyPI over TLS through the proxy
    built = image_build.ensure_task_image(load_task(CORPUS / "tls-build"))
    fetched = [(r["url"], r["status"]) for r in read_recording(built.id)]
    assert not built.built and ("https://pypi.org/simple/six/", 200) in fetched, fetched
