"""Terminal-Bench 1 task folders (``task.yaml``, ``run-tests.sh``, ``docker-compose.yaml``).

A TB1 folder loads natively: :func:`convert` writes the Harbor-layout folder that
``harbor tasks migrate`` (Harbor 0.25's ``mappers/terminal_bench.py``) would write, into
a cache keyed by the source folder's digest (``$XDG_CACHE_HOME/replaykit/tb1/``,
written atomically), and the task is loaded from there under the TB1 folder's name:

* ``task.yaml`` → ``instruction.md`` and task.toml (``[metadata]`` from its author,
  difficulty, category and tags; ``[verifier] timeout_sec`` = ``max_test_timeout_sec``
  (default 60), ``[agent] timeout_sec`` = ``max_agent_timeout_sec`` (default 360));
* the compose main service (``client``, else the first) → its build context's
  Dockerfile in ``environment/``, with ``ENV TEST_DIR=/tests`` and the service's
  ``environment``, ``working_dir``, ``expose`` and ``entrypoint`` appended;
* ``solution.sh`` → ``solution/solve.sh``; ``tests/`` → ``tests/``; ``run-tests.sh`` →
  ``tests/test.sh`` with ``$TEST_DIR`` → ``/tests`` and Harbor's reward lines (exit 0 →
  reward 1); every other file → ``environment/``.

A compose file that cannot collapse into one Dockerfile (several services, top-level keys,
other volumes) is kept as Harbor keeps it: ``environment/docker-compose.yaml`` with Harbor's
``main`` service (the task image) and the other services as they were, their build contexts
copied beside it; replaykit then runs them as sidecars (``envs/docker/compose_spec.py``, which
refuses what it cannot isolate in one line). ``solution.yaml`` is one line naming
``harbor tasks migrate``.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from replaykit.core.errors import TaskError

REWARD_SUFFIX = """
_EXIT_CODE=$?
if [ $_EXIT_CODE -eq 0 ]; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
exit $_EXIT_CODE
"""
_DEFAULT_ENV = {"TEST_DIR=${T_BENCH_TEST_DIR}"}
_SERVICE_KEYS = {"build", "image", "container_name", "command", "volumes", "environment"} | {
    "working_dir",
    "expose",
    "entrypoint",
    "platform",
}
_DEFAULT_VOLUMES = {
    "${T_BENCH_TASK_LOGS_PATH}:${T_BENCH_CONTAINER_LOGS_PATH}",
    "${T_BENCH_TASK_AGENT_LOGS_PATH}:${T_BENCH_CONTAINER_AGENT_LOGS_PATH}",
}
#: Harbor's own main service for a compose file it keeps (``mappers/terminal_bench.py``)
HARBOR_MAIN_SERVICE: dict[str, Any] = {
    "build": {"context": "${CONTEXT_DIR}"},
    "image": "${MAIN_IMAGE_NAME}",
    "command": ["sh", "-c", "sleep infinity"],
    "environment": ["TEST_DIR=${TEST_DIR}"],
    "deploy": {"resources": {"limits": {"cpus": "${CPUS}", "memory": "${MEMORY}"}}},
}
_HARBOR_REPLACES = {"build", "image", "container_name", "command", "environment", "volumes", "deploy"}
FORMAT_VERSION = "2"  # bump when the mapping changes: the cache is keyed by it


def is_tb1(folder: Path) -> bool:
    """A Terminal-Bench 1 task folder: ``task.yaml`` and no ``task.toml``."""
    return (folder / "task.yaml").is_file() and not (folder / "task.toml").exists()


def _refuse(folder: Path, why: str) -> TaskError:
    return TaskError(
        f"{folder}: a Terminal-Bench 1 task whose {why}; convert it with "
        f"`harbor tasks migrate -i {folder} -o OUT` and use OUT/{folder.name}"
    )


def _cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "replaykit" / "tb1"


def is_converted(folder: Path) -> bool:
    """``folder`` is the Harbor-layout conversion of a TB1 task (see :func:`convert`)."""
    return Path(folder).resolve().parent.parent == _cache_root().resolve()


def convert(folder: Path, digest: str) -> Path:
    """The Harbor-layout folder of TB1 task ``folder`` (``digest``: its content digest)."""
    key = hashlib.sha256(f"{FORMAT_VERSION}:{digest}".encode()).hexdigest()[:24]
    target = _cache_root() / key / folder.name
    if (target / "task.toml").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tb1-", dir=target.parent))
    try:
        _map(folder, tmp)
        try:
            os.replace(tmp, target)
        except OSError:
            if not (target / "task.toml").is_file():  # another process won the race: keep its copy
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _yaml(path: Path) -> Any:
    import yaml

    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise TaskError(f"{path}: invalid YAML: {str(exc).splitlines()[0]}") from None


def _compose(folder: Path) -> dict[str, Any]:
    path = folder / "docker-compose.yaml"
    data = _yaml(path) if path.is_file() else None
    return data if isinstance(data, dict) else {}


def _main_name(services: Mapping[str, Any]) -> str:
    return "client" if "client" in services else next(iter(services))


def _context(service: Mapping[str, Any]) -> str:
    build = service.get("build", {})
    return str(
        build.get("context", ".") if isinstance(build, dict) else build if isinstance(build, str) else "."
    )


def _collapsible(compose: Mapping[str, Any]) -> bool:
    """One service with only the fields a Dockerfile can hold (Harbor's ``can_collapse_to_dockerfile``)."""
    services = compose.get("services") or {}
    if len(services) != 1 or any(k not in ("services", "version") for k in compose):
        return False
    service = next(iter(services.values())) or {}
    volumes = service.get("volumes")
    if isinstance(volumes, list) and not set(map(str, volumes)) <= _DEFAULT_VOLUMES:
        return False
    return all(k in _SERVICE_KEYS for k in service)


def _harbor_compose(compose: Mapping[str, Any]) -> str:
    """The ``environment/docker-compose.yaml`` Harbor writes for a compose file it cannot collapse:
    its own ``main`` service (the task image) plus the other services as they were."""
    import yaml

    services: dict[str, Any] = compose.get("services") or {}
    main_name = _main_name(services)
    converted: dict[str, Any] = {"services": {}}
    converted.update({k: v for k, v in compose.items() if k not in ("services", "version")})
    main = copy.deepcopy(HARBOR_MAIN_SERVICE)
    main.update({k: v for k, v in (services[main_name] or {}).items() if k not in _HARBOR_REPLACES})
    converted["services"]["main"] = main
    converted["services"].update({n: svc for n, svc in services.items() if n != main_name})
    text = yaml.safe_dump(converted, sort_keys=False)
    return text.replace("${T_BENCH_TASK_DOCKER_NAME_PREFIX}", "hb")


def _additions(service: Mapping[str, object]) -> list[str]:
    lines = ["ENV TEST_DIR=/tests"]
    env = service.get("environment")
    pairs = (
        [str(e) for e in env]
        if isinstance(env, list)
        else [f"{k}={v}" for k, v in env.items()]
        if isinstance(env, dict)
        else []
    )
    lines += [f"ENV {pair}" for pair in pairs if pair not in _DEFAULT_ENV]
    workdir = service.get("working_dir")
    if isinstance(workdir, str) and "${" not in workdir:
        lines.append(f"WORKDIR {workdir}")
    expose = service.get("expose")
    if expose is not None:
        lines += [f"EXPOSE {p}" for p in (expose if isinstance(expose, list) else [expose])]
    entrypoint = service.get("entrypoint")
    if entrypoint is not None:
        lines.append(f"ENTRYPOINT {json.dumps(entrypoint if isinstance(entrypoint, list) else [entrypoint])}")
    return lines


def _map(folder: Path, out: Path) -> None:
    """A TB1 task folder mapped into a Harbor task at ``out``, as Harbor's own adapter maps it."""
    config = _task_config(folder)
    compose = _compose(folder)
    services: dict[str, Any] = compose.get("services") or {}
    service: dict[str, Any] = (services[_main_name(services)] or {}) if services else {}
    context = _context(service)
    env_dir = out / "environment"
    env_dir.mkdir(parents=True)
    handled = {"task.yaml", "solution.sh", "run-tests.sh", "tests", "docker-compose.yaml"}
    if services and not _collapsible(compose):  # several services: Harbor's compose file, beside
        handled |= _copy_other_contexts(folder, env_dir, services)
        (env_dir / "docker-compose.yaml").write_text(_harbor_compose(compose))
    handled.add(_copy_context(folder, env_dir, context))
    if (env_dir / "Dockerfile").is_file():
        _map_dockerfile(folder, env_dir, service)
    _map_solution_and_tests(folder, out)
    for item in sorted(folder.rglob("*")):
        rel = item.relative_to(folder)
        if rel.parts[0] in handled or item.is_dir():
            continue
        (env_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(item, env_dir / rel)
    instruction = config["instruction"]
    (out / "instruction.md").write_text(instruction if instruction.endswith("\n") else instruction + "\n")
    (out / "task.toml").write_text(_toml(config, folder / "task.yaml"))


def _task_config(folder: Path) -> dict[str, Any]:
    """task.yaml, with an instruction, beside run-tests.sh (a solution.yaml is refused)."""
    if (folder / "solution.yaml").exists():
        raise _refuse(folder, "solution is solution.yaml (Harbor maps solution.sh only)")
    config = _yaml(folder / "task.yaml")
    if not isinstance(config, dict) or not isinstance(config.get("instruction"), str):
        raise TaskError(f"{folder / 'task.yaml'}: field 'instruction' is missing; a TB1 task needs one")
    if not (folder / "run-tests.sh").is_file():
        raise TaskError(f"{folder / 'run-tests.sh'}: missing; a TB1 task's verifier")
    return config


def _copy_other_contexts(folder: Path, env_dir: Path, services: dict[str, Any]) -> set[str]:
    """The build folders of the services beside the main one, copied under environment/."""
    handled = set()
    for name, other in services.items():
        other_context = _context(other or {})
        if name != _main_name(services) and other_context != ".":
            if (folder / other_context).is_dir() and not (env_dir / other_context).exists():
                shutil.copytree(folder / other_context, env_dir / other_context)
            handled.add(other_context)
    return handled


def _copy_context(folder: Path, env_dir: Path, context: str) -> str:
    """The main service's build folder (or the task's Dockerfile) into environment/; the name
    of what it took from the task folder."""
    if context != ".":
        if (folder / context).is_dir():
            shutil.copytree(folder / context, env_dir, dirs_exist_ok=True)
        return Path(context).parts[0]
    if (folder / "Dockerfile").is_file():
        shutil.copy(folder / "Dockerfile", env_dir / "Dockerfile")
    return "Dockerfile"


def _map_dockerfile(folder: Path, env_dir: Path, service: Mapping[str, object]) -> None:
    """What the Dockerfile copies from the task folder brought along, and the compose service's
    settings appended to it."""
    dockerfile = env_dir / "Dockerfile"
    text = dockerfile.read_text(encoding="utf-8")
    for pattern, source in (("tests", "tests"), ("solution.sh", "solution.sh")):
        refs = (f"COPY {pattern}", f"COPY ./{pattern}", f"ADD {pattern}", f"ADD ./{pattern}")
        if any(r in text for r in refs) and (folder / source).exists() and not (env_dir / source).exists():
            copy = shutil.copytree if (folder / source).is_dir() else shutil.copy
            copy(folder / source, env_dir / source)
    text = text if text.endswith("\n") else text + "\n"
    dockerfile.write_text(
        text + "\n# Mapped from docker-compose.yaml\n" + "\n".join(_additions(service)) + "\n"
    )


def _map_solution_and_tests(folder: Path, out: Path) -> None:
    """solution.sh as solution/solve.sh; tests/ and run-tests.sh (writing the reward) as tests/test.sh."""
    if (folder / "solution.sh").is_file():
        (out / "solution").mkdir()
        shutil.copy(folder / "solution.sh", out / "solution" / "solve.sh")
        os.chmod(out / "solution" / "solve.sh", 0o755)
    (out / "tests").mkdir()
    if (folder / "tests").is_dir():
        shutil.copytree(folder / "tests", out / "tests", dirs_exist_ok=True)
    script = (folder / "run-tests.sh").read_text(encoding="utf-8")
    script = (script if script.endswith("\n") else script + "\n") + REWARD_SUFFIX
    (out / "tests" / "test.sh").write_text(script.replace("$TEST_DIR", "/tests"))
    os.chmod(out / "tests" / "test.sh", 0o755)


def _toml(config: Mapping[str, object], where: Path) -> str:
    def q(value: object) -> str:
        return json.dumps(str(value))

    def number(key: str, default: float) -> float:
        value = config.get(key, default)
        if not isinstance(value, (int, float, str)):
            raise TaskError(f"{where}: field {key!r} must be a number of seconds, not {value!r}")
        return float(value)

    raw_tags = config.get("tags")
    tags: list[object] = raw_tags if isinstance(raw_tags, list) else []
    lines = [
        'schema_version = "1.4"',
        "",
        "[metadata]",
        f"author_name = {q(config.get('author_name', 'unknown'))}",
        f"author_email = {q(config.get('author_email', 'unknown'))}",
        f"difficulty = {q(config.get('difficulty', 'unknown'))}",
        f"category = {q(config.get('category', 'software_engineering'))}",
        f"tags = [{', '.join(q(t) for t in tags)}]",
        "",
        "[verifier]",
        f"timeout_sec = {number('max_test_timeout_sec', 60.0)}",
        "",
        "[agent]",
        f"timeout_sec = {number('max_agent_timeout_sec', 360.0)}",
        "",
        "[environment]",
        'network_mode = "public"',
        "",
    ]
    return "\n".join(lines)
