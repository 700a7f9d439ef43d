"""A compose file's top-level sections beside ``services`` and the service fields that use them:
named ``volumes``, ``networks`` (all one private network: aliases honoured) and file-based
``secrets`` and ``configs`` (read from ``environment/``, part of the task's content).

What Harbor's compose-go accepts and replaykit can run without reaching the host is taken:

* ``volumes:`` declares named volumes; a service mounts one (``NAME:/path[:ro]`` or the long
  form ``{type: volume, source, target, read_only}``), an anonymous one (``/path``) or a
  ``tmpfs``. Each episode gets its own fresh volumes (``compose.py`` creates and removes them):
  nothing is shared between episodes or kept after one. A volume's files are not part of the
  container's state digest or snapshot (Docker's diff does not see them).
* ``networks:`` declares networks; a service joins them (a list, or a mapping whose values
  may give ``aliases``). Every service shares the episode's one private network, reachable by
  its name, its ``hostname`` and its aliases.
* ``secrets:`` / ``configs:`` with ``file:`` (a file under ``environment/``) or, for configs,
  ``content:``; a service that lists one gets it at ``/run/secrets/NAME`` (secrets) or
  ``/NAME`` (configs), or at its ``target``.

Refused, one line each (a ``TaskError``): a bind mount of a host folder, an ``external``
volume or network, a volume driver other than ``local`` (or ``driver_opts``), a secret taken
from the host's environment, ``include`` and ``models``, and any other top-level field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replaykit.core.errors import TaskError

#: top-level fields taken (``x-`` extensions too); the rest are refused
TOP_LEVEL = frozenset({"services", "version", "name", "volumes", "networks", "secrets", "configs"})
_VOLUME_KEYS = frozenset({"driver", "name", "labels"})
_NETWORK_KEYS = frozenset({"driver", "name", "labels", "internal", "attachable", "enable_ipv6"})


@dataclass(frozen=True)
class Mount:
    """One mount of a service: a named volume (``source``), an anonymous one (``source`` None)
    or a tmpfs; ``target`` inside the container."""

    target: str
    source: str | None = None
    read_only: bool = False
    tmpfs: bool = False


@dataclass(frozen=True)
class FileMount:
    """A secret's or config's bytes, written at ``target`` in the service's container."""

    target: str
    data: bytes
    mode: int = 0o444


@dataclass(frozen=True)
class TopLevel:
    """The top-level declarations a service may use."""

    volumes: tuple[str, ...] = ()
    networks: tuple[str, ...] = ()
    secrets: dict[str, bytes] | None = None
    configs: dict[str, bytes] | None = None


def top_level(data: dict[str, object], path: Path, environment_dir: Path) -> TopLevel:
    """The file's top-level sections, checked (one line naming the field when refused)."""
    for top in sorted(set(data) - TOP_LEVEL):
        if not str(top).startswith("x-"):
            raise TaskError(
                f"{path}: top-level field {top!r} is not supported "
                "(services, volumes, networks, secrets and configs are; see replaykit/envs/docker/compose_top.py)"
            )
    volumes = _declared(data.get("volumes"), path, "volumes", _VOLUME_KEYS)
    for name, spec in volumes.items():
        if (spec.get("driver") or "local") != "local":
            raise TaskError(
                f"{path}: volume {name!r}: driver {spec['driver']!r} is not supported (local only)"
            )
    networks = _declared(data.get("networks"), path, "networks", _NETWORK_KEYS)
    return TopLevel(
        volumes=tuple(sorted(volumes)),
        networks=tuple(sorted(networks)),
        secrets=_files(data.get("secrets"), path, "secrets", environment_dir),
        configs=_files(data.get("configs"), path, "configs", environment_dir),
    )


def _declared(value: Any, path: Path, section: str, allowed: frozenset[str]) -> dict[str, dict[str, object]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TaskError(f"{path}: top-level field {section!r} must map names to their definitions")
    out: dict[str, dict[str, object]] = {}
    for name, spec in value.items():
        spec = spec or {}
        if not isinstance(spec, dict):
            raise TaskError(f"{path}: {section} {name!r} must be a mapping")
        if spec.get("external"):
            raise TaskError(f"{path}: {section} {name!r} is external (the host's): not supported")
        for key in spec:
            if key not in allowed and key != "external" and not str(key).startswith("x-"):
                raise TaskError(f"{path}: {section} {name!r}: field {key!r} is not supported")
        out[str(name)] = spec
    return out


def _files(value: Any, path: Path, section: str, environment_dir: Path) -> dict[str, bytes]:
    """A ``secrets``/``configs`` section: each name's bytes (``file:`` under environment/, or ``content:``)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TaskError(f"{path}: top-level field {section!r} must map names to their definitions")
    out: dict[str, bytes] = {}
    for name, spec in value.items():
        where = f"{path}: {section} {name!r}"
        if not isinstance(spec, dict):
            raise TaskError(f"{where} must be a mapping with 'file'")
        if section == "configs" and isinstance(spec.get("content"), str):
            out[str(name)] = spec["content"].encode()
            continue
        if not isinstance(spec.get("file"), str):
            raise TaskError(
                f"{where}: only 'file:' (a file under environment/) is supported (not the host's environment)"
            )
        source = (environment_dir / spec["file"]).resolve()
        if not source.is_relative_to(environment_dir.resolve()) or not source.is_file():
            raise TaskError(f"{where}: 'file' must name a file under environment/")
        out[str(name)] = source.read_bytes()
    return out


def mounts(value: Any, where: str, top: TopLevel) -> tuple[Mount, ...]:
    """A service's ``volumes``: named, anonymous or tmpfs mounts (a host folder is refused)."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise TaskError(f"{where}: field 'volumes' must be a list")
    found = []
    for entry in value:
        mount = _long(entry, where) if isinstance(entry, dict) else _short(str(entry), where)
        if mount.source is not None and mount.source not in top.volumes:
            raise TaskError(
                f"{where}: field 'volumes' names {mount.source!r}, which the top-level 'volumes' does not declare"
            )
        found.append(mount)
    return tuple(found)


def _bind(entry: object, where: str) -> TaskError:
    return TaskError(
        f"{where}: field 'volumes': {entry!r} mounts a host folder, which is not supported "
        "(use a named volume, or COPY the files in the Dockerfile)"
    )


def _short(entry: str, where: str) -> Mount:
    parts = entry.split(":")
    if len(parts) == 1:
        return Mount(target=parts[0])
    source, target, mode = parts[0], parts[1], parts[2] if len(parts) > 2 else "rw"
    if source.startswith((".", "/", "~", "$")) or len(parts) > 3:
        raise _bind(entry, where)
    if not set(mode.split(",")) <= {"ro", "rw", "z", "Z", "nocopy"}:
        raise TaskError(f"{where}: field 'volumes': {entry!r}: mode {mode!r} is not supported")
    return Mount(target=target, source=source, read_only="ro" in mode.split(","))


def _long(entry: dict[str, object], where: str) -> Mount:
    kind = entry.get("type", "volume")
    target = entry.get("target")
    if not isinstance(target, str) or not target.startswith("/"):
        raise TaskError(f"{where}: field 'volumes': {entry!r} needs an absolute 'target'")
    if kind == "bind":
        raise _bind(entry, where)
    if kind == "tmpfs":
        return Mount(target=target, tmpfs=True)
    if kind != "volume":
        raise TaskError(f"{where}: field 'volumes': type {kind!r} is not supported (volume or tmpfs)")
    source = entry.get("source")
    return Mount(
        target=target, source=str(source) if source else None, read_only=bool(entry.get("read_only"))
    )


def aliases(value: Any, where: str, top: TopLevel) -> tuple[str, ...]:
    """A service's ``networks``: the declared networks it joins (one private network for all),
    and the aliases it asks for there."""
    if value is None:
        return ()
    names = value if isinstance(value, list) else list(value) if isinstance(value, dict) else None
    if names is None:
        raise TaskError(f"{where}: field 'networks' must be a list or a mapping")
    found: list[str] = []
    for name in names:
        if name not in top.networks:
            raise TaskError(
                f"{where}: field 'networks' names {name!r}, which the top-level 'networks' does not declare"
            )
        spec = value.get(name) if isinstance(value, dict) else None
        for key in spec or {}:
            if key != "aliases":
                raise TaskError(f"{where}: networks {name!r}: field {key!r} is not supported (aliases only)")
        found += [str(a) for a in (spec or {}).get("aliases") or []]
    return tuple(found)


def file_mounts(
    value: Any, where: str, available: dict[str, bytes] | None, section: str
) -> tuple[FileMount, ...]:
    """A service's ``secrets``/``configs``: the declared ones it gets, where."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise TaskError(f"{where}: field {section!r} must be a list")
    found = []
    for entry in value:
        name = entry.get("source") if isinstance(entry, dict) else entry
        if not isinstance(name, str) or name not in (available or {}):
            raise TaskError(
                f"{where}: field {section!r} names {name!r}, which the top-level {section!r} does not declare"
            )
        default = f"/run/secrets/{name}" if section == "secrets" else f"/{name}"
        target = entry.get("target", default) if isinstance(entry, dict) else default
        if section == "secrets" and not str(target).startswith("/"):
            target = f"/run/secrets/{target}"
        mode = entry.get("mode", 0o444) if isinstance(entry, dict) else 0o444
        found.append(FileMount(target=str(target), data=(available or {})[name], mode=int(mode)))
    return tuple(found)
