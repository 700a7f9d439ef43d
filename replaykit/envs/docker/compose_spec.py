"""A task's ``environment/docker-compose.yaml``, read and validated (no Docker here).

``load_compose`` reads the file (``compose_file``: the names compose accepts) into a
``Compose``: the service ``main`` (the agent's container: only its ``environment`` and
``depends_on``, ``volumes``, ``networks``, ``secrets`` and ``configs`` are read) and each
sidecar's ``Service`` (``build`` or ``image``, ``command``, ``entrypoint``, ``environment``,
``working_dir``, ``hostname``, a compose ``healthcheck`` as Docker's API takes it, its mounts,
aliases and files: ``compose_top.py``), with ``${VAR}`` / ``${VAR:-default}``
interpolated from ``[environment.env]``. Refused fields and unknown ones are a
``TaskError`` naming the file, the service and the field; ``Compose.sidecars`` orders
the sidecars by ``depends_on`` (a cycle is a ``TaskError``). Running them is ``compose.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from replaykit.core.errors import TaskError
from replaykit.envs.docker.compose_top import FileMount, Mount, aliases, file_mounts, mounts, top_level
from replaykit.envs.tasks import Task

MAIN = "main"
FILES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")
_REFUSED = (
    "privileged",
    "cap_add",
    "network_mode",
    "devices",
    "pid",
    "ipc",
    "extends",
    "volumes_from",
    "runtime",
)
_KNOWN = {
    "image",
    "build",
    "command",
    "entrypoint",
    "environment",
    "healthcheck",
    "depends_on",
    "working_dir",
    "hostname",
    "ports",
    "expose",
    "container_name",
    "restart",
    "init",
    "tty",
    "stdin_open",
    "labels",
    "pull_policy",
    "platform",
    "mem_limit",
    "cpus",
    "deploy",
    "env_file",
    "user",
    "volumes",
    "networks",
    "secrets",
    "configs",
}
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|us|h|m|s)")


@dataclass(frozen=True)
class Service:
    name: str
    image: str | None
    build_context: Path | None
    dockerfile: str
    command: Any
    entrypoint: Any
    environment: dict[str, str]
    healthcheck: ComposeHealthcheck | None
    depends_on: tuple[str, ...]
    working_dir: str | None
    hostname: str | None
    mounts: tuple[Mount, ...] = ()
    aliases: tuple[str, ...] = ()
    files: tuple[FileMount, ...] = ()


@dataclass
class Compose:
    path: Path
    services: dict[str, Service]
    main_env: dict[str, str] = field(default_factory=dict)
    main_depends: tuple[str, ...] = ()
    main_mounts: tuple[Mount, ...] = ()
    main_aliases: tuple[str, ...] = ()
    main_files: tuple[FileMount, ...] = ()
    volumes: tuple[str, ...] = ()  # the named volumes declared (each episode gets its own)

    @property
    def sidecars(self) -> list[Service]:
        """Sidecars in start order (dependencies first; ties by name)."""
        ordered: list[Service] = []
        seen: set[str] = set()

        def visit(name: str, trail: tuple[str, ...]) -> None:
            if name in seen or name == MAIN:
                return
            if name in trail:
                raise TaskError(
                    f"{self.path}: services depend on each other in a cycle: {' -> '.join((*trail, name))}"
                )
            service = self.services[name]
            for dep in service.depends_on:
                visit(dep, (*trail, name))
            seen.add(name)
            ordered.append(service)

        for name in sorted(self.services):
            visit(name, ())
        return ordered


def compose_file(task: Task) -> Path | None:
    return next((task.environment_dir / f for f in FILES if (task.environment_dir / f).is_file()), None)


def duration_ns(value: Any, where: str) -> int:
    """Compose durations (``"1m30s"``, ``"500ms"``, a number of seconds) in nanoseconds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value * 1e9)
    text = str(value).strip()
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise TaskError(f'{where}: {value!r} is not a duration such as "5s", "500ms" or "1m30s"')
    scale = {"h": 3600e9, "m": 60e9, "s": 1e9, "ms": 1e6, "us": 1e3}
    return int(sum(float(n) * scale[u] for n, u in parts))


def _interpolate(value: Any, env: dict[str, str]) -> Any:
    if isinstance(value, str):
        return _VAR.sub(lambda m: env.get(m.group(1), m.group(2) or ""), value).replace("$$", "$")
    if isinstance(value, list):
        return [_interpolate(v, env) for v in value]
    if isinstance(value, dict):
        return {k: _interpolate(v, env) for k, v in value.items()}
    return value


def _env_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): "" if v is None else str(v) for k, v in value.items()}
    if isinstance(value, list):
        return dict(str(item).partition("=")[::2] for item in value)
    raise TaskError(f"{where}: field 'environment' must be a mapping or a list of NAME=value")


class ComposeHealthcheck(TypedDict):
    """A service's healthcheck as Docker's API takes it (durations in nanoseconds)."""

    test: list[str]  # ["CMD", ...] | ["CMD-SHELL", command] | ["NONE"]
    interval: int
    timeout: int
    start_period: int
    retries: int


def _healthcheck(value: Any, where: str) -> ComposeHealthcheck | None:
    if value is None or (isinstance(value, dict) and value.get("disable")):
        return None
    if not isinstance(value, dict) or "test" not in value:
        raise TaskError(f"{where}: field 'healthcheck' needs a 'test'")
    test = value["test"]
    if isinstance(test, str):
        test = ["CMD-SHELL", test]
    if not isinstance(test, list) or not test or test[0] not in ("CMD", "CMD-SHELL", "NONE"):
        raise TaskError(f'{where}: field \'healthcheck.test\' must be a string or ["CMD"|"CMD-SHELL", ...]')

    def ns(key: str, default: str) -> int:
        return duration_ns(value.get(key, default), f"{where}: field 'healthcheck.{key}'")

    return ComposeHealthcheck(
        test=[str(t) for t in test],
        interval=ns("interval", "5s"),
        timeout=ns("timeout", "30s"),
        start_period=ns("start_period", "0s"),
        retries=int(value.get("retries", 3)),
    )


def load_compose(task: Task, env: dict[str, str]) -> Compose | None:
    """The task's compose file, validated; None when it has none."""
    path = compose_file(task)
    if path is None:
        return None
    data = _interpolate(_document(path), env)
    raw = data["services"]
    top = top_level(data, path, task.environment_dir)
    compose = Compose(path, {}, volumes=top.volumes)
    for name, spec in raw.items():
        where = f"{path}: service {name!r}"
        spec = spec or {}
        _check_keys(spec, where)
        depends = spec.get("depends_on") or []
        depends = tuple(sorted(depends)) if isinstance(depends, (list, dict)) else ()
        for dep in depends:
            if dep not in raw:
                raise TaskError(f"{where}: depends_on names {dep!r}, which is not a service")
        environment = _env_map(spec.get("environment"), where)
        used = (
            mounts(spec.get("volumes"), where, top),
            aliases(spec.get("networks"), where, top),
            file_mounts(spec.get("secrets"), where, top.secrets, "secrets")
            + file_mounts(spec.get("configs"), where, top.configs, "configs"),
        )
        if name == MAIN:
            compose.main_env, compose.main_depends = environment, depends
            compose.main_mounts, compose.main_aliases, compose.main_files = used
            continue
        context, dockerfile = _build(task, spec.get("build"), where)
        image = spec.get("image") if context is None else None
        if context is None and not isinstance(image, str):
            raise TaskError(f"{where}: needs 'build' or 'image'")
        compose.services[name] = Service(
            name=name,
            image=image,
            build_context=context,
            dockerfile=dockerfile,
            command=spec.get("command"),
            entrypoint=spec.get("entrypoint"),
            environment=environment,
            healthcheck=_healthcheck(spec.get("healthcheck"), where),
            depends_on=tuple(d for d in depends if d != MAIN),
            working_dir=spec.get("working_dir"),
            hostname=spec.get("hostname"),
            mounts=used[0],
            aliases=used[1],
            files=used[2],
        )
    compose.sidecars  # noqa: B018  (validates the dependency graph)
    return compose


def _document(path: Path) -> dict[str, object]:
    """The compose file as a mapping with a non-empty ``services`` (its other top-level
    fields: ``compose_top.top_level``)."""
    import yaml

    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise TaskError(f"{path}: invalid YAML: {str(exc).splitlines()[0]}") from None
    raw = data.get("services") if isinstance(data, dict) else None
    if not isinstance(raw, dict) or not raw:
        raise TaskError(f"{path}: field 'services' must map service names to their definitions")
    return {str(k): v for k, v in data.items()}


def _check_keys(spec: object, where: str) -> None:
    """A service is a mapping of the fields replaykit supports (``x-`` extensions aside)."""
    if not isinstance(spec, dict):
        raise TaskError(f"{where}: must be a mapping")
    for key in spec:
        if key in _REFUSED:
            raise TaskError(
                f"{where}: field {key!r} is not supported (replaykit runs services isolated, on a private network)"
            )
        if key not in _KNOWN and not str(key).startswith("x-"):
            raise TaskError(f"{where}: field {key!r} is not supported")


def _build(task: Task, build: object, where: str) -> tuple[Path | None, str]:
    """A service's build context (a folder under environment/ holding its Dockerfile; None for an
    image) and its Dockerfile's name."""
    context: Path | None = None
    dockerfile = "Dockerfile"
    if isinstance(build, str):
        context = task.environment_dir / build
    elif isinstance(build, dict):
        context = task.environment_dir / str(build.get("context", "."))
        dockerfile = str(build.get("dockerfile", "Dockerfile"))
    if context is None:
        return None, dockerfile
    context = context.resolve()
    if not context.is_relative_to(task.environment_dir.resolve()) or not (context / dockerfile).is_file():
        raise TaskError(f"{where}: field 'build' must name a folder under environment/ holding {dockerfile}")
    return context, dockerfile
