"""``replaykit doctor``: is this machine ready to run a config? One check per line, each
with the fix. Reading only: it never creates a store, pulls an image or writes a repo."""

from __future__ import annotations

import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

OK, WARN, FAIL = "ok", "warn", "fail"


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str = ""


def check_docker(needed: bool, kind: str | None = None) -> list[Check]:
    """The engine, then the local base image; ``kind``: the config's ``env.kind`` (None: no
    config). Each line says one fix, and only one that applies."""
    from replaykit.envs.docker.images import BASE_IMAGE, docker_client, image_exists

    missing = FAIL if needed else WARN
    why = "" if needed else f" (only Docker tasks need it{f'; env.kind is {kind}' if kind else ''})"
    try:
        client = docker_client()
    except Exception as exc:  # EnvError, ImportError: one line either way
        first = str(exc).splitlines()[0].split("; ")[0] if str(exc) else type(exc).__name__  # its fix: below
        start = "start the Docker daemon (scripts/setup-docker.sh)"
        return [
            Check(
                "docker engine",
                missing,
                f"not reachable: {first}{why}",
                f"{start}, or use env.kind: local" if needed else start,
            ),
            Check("base image", missing, f"{BASE_IMAGE}: unknown until the engine answers{why}"),
        ]
    version = client.version().get("Version", "?")
    engine = Check("docker engine", OK, f"Docker {version} answers")
    if image_exists(client, BASE_IMAGE):
        return [engine, Check("base image", OK, f"{BASE_IMAGE} present")]
    return [
        engine,
        Check("base image", missing, f"{BASE_IMAGE} is not built{why}", "replaykit images build-base"),
    ]


def check_network(needed: bool) -> Check:
    """The frozen network's proxy: installed, and it starts and listens (with a throwaway CA)."""
    import shutil
    import tempfile

    from replaykit.core.errors import EnvError
    from replaykit.envs.docker.network import server
    from replaykit.envs.docker.network.ca import ensure_ca

    missing = FAIL if needed else WARN
    why = "" if needed else " (only Docker tasks that reach the internet need it)"
    fix = "bash scripts/setup-network.sh (or set REPLAYKIT_MITMDUMP to a mitmdump 11.0)"
    problem = server.check()
    if problem:  # its own "; run …" is the fix column's: said once
        return Check("frozen network proxy", missing, problem.split("; run ", 1)[0] + why, fix)
    if not needed:
        return Check("frozen network proxy", OK, f"mitmdump installed at {server.mitmdump_path()}")
    scratch = Path(tempfile.mkdtemp(prefix="replaykit-doctor-net-"))
    try:
        with server.ProxyServer(ensure_ca(scratch), "replay", scratch / "spool") as proxy:
            return Check("frozen network proxy", OK, f"mitmdump starts and listens ({proxy.url})")
    except EnvError as exc:
        return Check("frozen network proxy", missing, f"{exc}{why}", fix)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def check_store(root: Path | str) -> Check:
    """The store at ``root`` (a folder or a backend URL), opened read-only: never created."""
    from replaykit.cassette.stores import open_store
    from replaykit.cassette.urls import redact
    from replaykit.core.errors import ReplaykitError

    where = redact(str(root))
    try:
        store = open_store(root, readonly=True)
        if not store.exists():
            return Check(
                "store",
                WARN,
                f"no store at {where} yet (the first run creates it)",
                "run `replaykit run CONFIG`, or pass --store",
            )
        runs, cassettes = len(store.list_runs()), store.count_cassettes()
    except (ReplaykitError, OSError) as exc:
        return Check(
            "store",
            FAIL,
            f"{where}: {exc}",
            "check the path (or URL, server and password) and permissions; `replaykit cassettes verify` checks a bundle",
        )
    return Check("store", OK, f"{where}: {runs} run document(s), {cassettes} cassette(s)")


def check_harness(config: Any) -> Check:
    import git

    path = config.path(config.harness.repo)
    entry = config.harness.entry
    if not path.exists():
        if config.harness.agent:
            return Check(
                "harness repo",
                OK,
                f"{path} will be made from agent {config.harness.agent!r}'s template on the first run",
            )
        if config.harness.template:
            return Check(
                "harness repo",
                OK,
                f"{path} will be made from template {config.harness.template!r} on the first run",
            )
        return Check(
            "harness repo",
            FAIL,
            f"{path} does not exist and harness.template is null",
            f"create a git repo there with {entry} defining solve(), or `replaykit init DIR`",
        )
    try:
        repo = git.Repo(path)
        head = repo.commit(config.harness.branch)
    except Exception as exc:  # not a repo, no such branch
        return Check(
            "harness repo",
            FAIL,
            f"{path}: not a git repo with branch {config.harness.branch!r} ({type(exc).__name__})",
            f"git init there and commit {entry} on {config.harness.branch}",
        )
    try:
        head.tree[entry]
        committed = True
    except KeyError:
        committed = False
    if not committed:
        return Check(
            "harness repo",
            FAIL,
            f"{path}@{config.harness.branch}: {entry} is not committed",
            f"git add {entry} && git commit",
        )
    if repo.is_dirty(untracked_files=False):
        return Check(
            "harness repo",
            FAIL,
            f"{path} has uncommitted changes (a dirty harness is refused)",
            "commit or stash them",
        )
    return Check(
        "harness repo", OK, f"{path}@{config.harness.branch} = {head.hexsha[:10]}, {entry} committed"
    )


def check_agent(name: str) -> Check:
    """A named agent's program (``harness.agent``): its installed version, or its install command."""
    from replaykit.agents.registry import get_agent
    from replaykit.core.errors import HarnessError

    agent = get_agent(name)
    try:
        program, version = agent.program(), agent.check()
    except HarnessError as exc:
        fix = agent.requires.install if agent.requires is not None else ""
        return Check("agent", FAIL, str(exc), fix)
    where = f" at {program}" if program is not None else ""
    return Check("agent", OK, f"{name} {version}{where}")


def _reach(base_url: str, key: str, timeout: float) -> Check:
    """GET ``/models`` of the endpoint: does it answer?"""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    request = urllib.request.Request(base_url.rstrip("/") + "/models", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # the user's configured endpoint
            return Check("endpoint", OK, f"{base_url} answers (HTTP {response.status})")
    except urllib.error.HTTPError as exc:  # it answered: reachable, maybe unauthorised
        if exc.code in (401, 403):
            return Check(
                "endpoint", WARN, f"{base_url} answers HTTP {exc.code} on /models", "check the API key"
            )
        return Check("endpoint", OK, f"{base_url} answers (HTTP {exc.code} on /models)")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Check(
            "endpoint",
            FAIL,
            f"{base_url} is not reachable: {reason}",
            "start the server or fix model.base_url",
        )


def check_endpoint(config: Any, timeout: float = 3.0) -> list[Check]:
    """Reachability of ``model.base_url`` (GET /models) and whether its key is set."""
    base_url, key_env = config.model.base_url, config.model.api_key_env
    if base_url == "builtin":
        return [
            Check("endpoint", OK, "builtin reference model server (started in-process)"),
            Check("api key", OK, "not needed for the builtin model"),
        ]
    if not key_env:
        return [
            _reach(base_url, "", timeout),
            Check("api key", OK, "model.api_key_env is empty: no key is sent"),
        ]
    key = os.environ.get(key_env, "")
    if key:
        key_check = Check("api key", OK, f"${key_env} is set")
    else:
        key_check = Check(
            "api key",
            FAIL,
            f"${key_env} is not set (a run would stop)",
            f'export {key_env}=…, or set model.api_key_env: "" for a server that needs no key',
        )
    return [_reach(base_url, key, timeout), key_check]


class CheckRow(TypedDict):
    name: str
    status: str  # ok | warn | fail
    detail: str
    fix: str


class DoctorReport(TypedDict):
    """``replaykit doctor``: every check in order; ``ok`` is False when any failed."""

    ok: bool
    checks: list[CheckRow]


def diagnose(config_path: Path | None = None, store: str | None = None) -> DoctorReport:
    """Every check, in order; ``ok`` is False when any check failed."""
    checks: list[Check] = []
    config = None
    if config_path is not None:
        from replaykit.episodes.config import load_config

        config = load_config(config_path)
    from replaykit.envs.registry import uses_docker

    checks += check_docker(
        needed=config is not None and uses_docker(config.env.kind), kind=config.env.kind if config else None
    )
    checks.append(check_network(needed=config is not None and uses_docker(config.env.kind)))
    root = store or (config.store_location if config else os.environ.get("REPLAYKIT_STORE", "cassettes"))
    checks.append(check_store(root))
    if config is not None:
        checks.append(check_harness(config))
        if config.harness.agent:
            checks.append(check_agent(config.harness.agent))
        checks += check_endpoint(config)
    else:
        checks.append(
            Check(
                "config", WARN, "no config given: harness and endpoint not checked", "replaykit doctor CONFIG"
            )
        )
    rows: list[CheckRow] = [
        {"name": c.name, "status": c.status, "detail": c.detail, "fix": c.fix} for c in checks
    ]
    return {"ok": all(c.status != FAIL for c in checks), "checks": rows}
