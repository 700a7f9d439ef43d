"""YAML run configs, validated with pydantic.

Relative paths in a config resolve against the folder holding the config file.
A bad config is one clear ``ConfigError`` line naming the file and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from replaykit.determinism import digest_of
from replaykit.errors import ConfigError

RECORD_MODES = ("once", "new_episodes", "none", "all")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HarnessConfig(_Strict):
    repo: str = "../.replaykit/harnesses/quickstart"
    template: str | None = "quickstart"
    branch: str = "main"
    entry: str = "harness.py"
    params: dict[str, Any] = Field(default_factory=dict)


class ModelConfig(_Strict):
    name: str = "reference-strong"
    base_url: str = "builtin"
    revision: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0


class PanelConfig(_Strict):
    tasks: list[str] = Field(default_factory=lambda: ["../envs/*"])
    seeds: list[int] = Field(default_factory=lambda: [0, 1])


class EnvConfig(_Strict):
    kind: str = "local"
    timeout_sec: float = 30.0
    max_output_bytes: int = 65536
    snapshot: Literal["digest", "full"] = "digest"
    image_aliases: dict[str, str] = Field(default_factory=dict)


class RecordConfig(_Strict):
    secrets: list[str] = Field(default_factory=list)  # env var names whose values never reach a cassette
    rules: list[str] = Field(default_factory=list)  # normalisation rules (replaykit.cassette.matchers)


class ExecutorConfig(_Strict):
    workers: int = Field(default=1, ge=1)
    oversubscribe: bool = False  # allow more local workers than cores (I/O-bound episodes)


class RunConfig(_Strict):
    name: str = "run"
    store: str = "../cassettes"
    harness: HarnessConfig = Field(default_factory=HarnessConfig)
    model: ModelConfig = Field(default_factory=ModelConfig)
    panel: PanelConfig = Field(default_factory=PanelConfig)
    env: EnvConfig = Field(default_factory=EnvConfig)
    record: RecordConfig = Field(default_factory=RecordConfig)
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    train: dict[str, Any] | None = None

    #: the folder relative paths resolve against (set by load_config)
    base_dir: Path = Field(default=Path("."), exclude=True)

    def path(self, value: str) -> Path:
        p = Path(value).expanduser()
        return p if p.is_absolute() else (self.base_dir / p).resolve()

    @property
    def store_path(self) -> Path:
        return self.path(self.store)

    @property
    def repo_path(self) -> Path:
        return self.path(self.harness.repo)

    def digest(self) -> str:
        """What, besides the key's other parts, changes an episode's behaviour."""
        return digest_of(
            {
                "entry": self.harness.entry,
                "params": self.harness.params,
                "temperature": self.model.temperature,
                "env": {"timeout_sec": self.env.timeout_sec, "max_output_bytes": self.env.max_output_bytes,
                        "snapshot": self.env.snapshot},
                "rules": self.record.rules,
            }
        )[:16]


def load_config(path: str | Path, overrides: dict[str, Any] | None = None) -> RunConfig:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist; pass a YAML file such as configs/quickstart.yaml")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {str(exc).splitlines()[0]}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping at the top level")
    for dotted, value in (overrides or {}).items():
        node = data
        *parents, last = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    try:
        config = RunConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"])
        raise ConfigError(f"config file {path}: field {field!r}: {err['msg']}") from None
    config.base_dir = path.resolve().parent
    return config
