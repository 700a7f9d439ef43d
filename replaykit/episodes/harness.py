"""The harness contract: a git repository with a Python entry point.

``solve(task, env, llm, ctx)`` lives in ``harness.py`` (configurable). A rollout
runs the files of one exact commit, materialised from the store, never the
working tree; a dirty tree is refused. Templates are materialised into a fresh
repository with fixed commit metadata, so their SHAs are the same everywhere.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import random
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Callable

import git

from replaykit.cassette.keys import CassetteKey
from replaykit.core.determinism import ENV_PINS, SOURCE_DATE_EPOCH, derive_seed
from replaykit.core.errors import HarnessError
from replaykit.core.meta import ForkMeta
from replaykit.core.records import JSON
from replaykit.core.stale import clean_dead_scratch, scratch_dir
from replaykit.episodes.config_paths import TEMPLATES, known_templates

GIT_DATE = f"{SOURCE_DATE_EPOCH} +0000"
ACTOR = git.Actor(ENV_PINS["GIT_AUTHOR_NAME"], ENV_PINS["GIT_AUTHOR_EMAIL"])


@dataclass
class Context:
    """What a harness gets besides the task, the environment and the client."""

    seed: int
    task_id: str
    model: str
    temperature: float = 0.0
    #: the config's ``harness.params``, as the harness's own code reads them (``int(ctx.params["max_steps"])``)
    params: dict[str, Any] = field(default_factory=dict)
    calls: int = 0
    #: the config's ``model.params`` (max_tokens, tool_choice, seed, ...), sent with every call
    model_params: dict[str, JSON] = field(default_factory=dict)
    #: a fork: the model names of the calls before ``switch_at`` (its parent's), as (from call, name)
    fork_models: tuple[tuple[int, str], ...] = ()
    switch_at: int = 0
    #: what the harness notes of its run (a named agent's bounded stdout/stderr), kept in the
    #: recorded episode's meta (``notes``), never in its key or digest
    notes: dict[str, JSON] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rng = random.Random(derive_seed(self.seed, self.task_id, "rng"))

    def now(self) -> datetime:
        """The frozen clock."""
        return datetime.fromtimestamp(SOURCE_DATE_EPOCH, tz=UTC)

    def call_seed(self) -> int:
        self.calls += 1
        return derive_seed(self.seed, self.task_id, self.calls)

    @classmethod
    def of(
        cls,
        key: CassetteKey,
        temperature: float,
        params: Mapping[str, Any],
        model_params: Mapping[str, JSON],
        fork: ForkMeta | None = None,
    ) -> Context:
        """An episode's context (a fork with another model: its parent's names before its step)."""
        return cls(
            seed=key.seed,
            task_id=key.task_id,
            model=key.model.name,
            temperature=temperature,
            params=dict(params),
            model_params=dict(model_params),
            fork_models=tuple((m["step"], m["model"]) for m in fork["models"]) if fork else (),
            switch_at=fork["step"] if fork else 0,
        )

    def model_of(self, call: int) -> str:
        """The model named in call ``call`` (0-based): a fork's parent's before its step."""
        name = self.model
        if call < self.switch_at:
            for start, model in self.fork_models:
                if call >= start:
                    name = model
        return name

    def llm_kwargs(self) -> dict[str, Any]:
        """model, temperature, a per-call seed derived from (run seed, task, call number) and
        the config's ``model.params`` (its ``seed``, when set, instead of the per-call one).
        Any: splatted into the openai client's ``create()``, whose keywords each have their own type."""
        kwargs: dict[str, Any] = {
            "model": self.model_of(self.calls),
            "temperature": self.temperature,
            "seed": self.call_seed(),
        }
        kwargs.update(self.model_params)
        return kwargs


def commit_all(repo: git.Repo, message: str, date: str = GIT_DATE) -> str:
    """Commit the whole work tree with fixed author and dates; return the SHA."""
    repo.git.add(A=True)
    commit = repo.index.commit(message, author=ACTOR, committer=ACTOR, author_date=date, commit_date=date)
    return commit.hexsha


class HarnessRepo:
    """A harness repository and its baseline branch."""

    def __init__(self, path: Path, branch: str = "main") -> None:
        self.path = Path(path)
        self.branch = branch
        try:
            self.repo = git.Repo(self.path)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            raise HarnessError(
                f"harness repo {self.path} is not a git repository; set harness.repo or harness.template"
            ) from None

    @classmethod
    def open(cls, path: Path, branch: str = "main", template: str | Path | None = None) -> "HarnessRepo":
        if not path.exists() and template:
            materialise_template(template, path, branch)
        else:
            clean_dead_scratch(path.parent, path.name)  # a killed first run's half-made repo
        return cls(path, branch)

    def resolve(self, ref: str | None = None) -> str:
        ref = ref or self.branch
        try:
            return self.repo.commit(ref).hexsha
        except (git.BadName, ValueError, git.GitCommandError):
            raise HarnessError(
                f"harness ref {ref!r} does not exist in {self.path}; give a branch, tag or SHA"
            ) from None

    def ensure_clean(self) -> None:
        if self.repo.is_dirty(untracked_files=True):
            raise HarnessError(
                f"harness repo {self.path} has uncommitted changes; commit or stash them (rollouts run exact commits)"
            )

    def check_entry(self, sha: str, entry: str) -> None:
        """``entry`` is a file of commit ``sha``; else one line naming this repo (not a cache folder)."""
        try:
            item = self.repo.commit(sha).tree / entry
        except KeyError:
            item = None
        if not isinstance(item, git.Blob):
            top = sorted(str(i.path) for i in self.repo.commit(sha).tree if str(i.path).endswith(".py"))
            raise HarnessError(
                f"harness entry {entry!r} is not in commit {sha[:10]} of the harness repo {self.path} "
                f"(its Python files: {', '.join(top) or 'none'}); set harness.entry, or commit {entry} there"
            )

    def tree_files(self, sha: str) -> dict[str, tuple[int, bytes]]:
        files: dict[str, tuple[int, bytes]] = {}
        for item in self.repo.commit(sha).tree.traverse():
            if isinstance(item, git.Blob):
                files[str(item.path)] = (item.mode, item.data_stream.read())
        return files


def materialise_template(template: str | Path, path: Path, branch: str = "main") -> str:
    """A fresh repo at ``path`` holding ``template`` (a name of ``replaykit/templates/``, or a
    folder: a named agent's), committed with fixed author and dates: the same SHA everywhere."""
    source = template if isinstance(template, Path) else TEMPLATES / template
    name = source.name
    if not source.is_dir():
        known = ", ".join(known_templates())
        raise HarnessError(f"unknown harness template {template!r}; known: {known}")
    clean_dead_scratch(path.parent, path.name)  # what killed first runs left
    tmp = scratch_dir(path.parent, path.name)  # this process's own: concurrent first runs never share one
    try:
        shutil.copytree(
            source, tmp, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
        repo = git.Repo.init(tmp, initial_branch=branch)
        with repo.config_writer() as cw:
            cw.set_value("user", "name", ACTOR.name)
            cw.set_value("user", "email", ACTOR.email)
        sha = commit_all(repo, f"harness template {name}")
        repo.close()
        try:
            os.rename(tmp, path)  # atomic: the repo appears whole or not at all
        except OSError:
            if not (path / ".git").exists():
                raise HarnessError(
                    f"cannot create harness repo {path}: it exists and is not a git repository"
                ) from None
            # another process materialised it first: the same template gives the same commit
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return sha


_CODE: dict[tuple[str, str], Any] = {}


def _compiled(module_path: Path) -> Any:
    """The entry file's code object, compiled once per content (replays run the same
    harness commit thousands of times); each episode still executes it in a fresh module."""
    source = module_path.read_bytes()
    key = (str(module_path), hashlib.sha256(source).hexdigest())
    code = _CODE.get(key)
    if code is None:
        code = compile(source, str(module_path), "exec", dont_inherit=True)
        if len(_CODE) > 256:
            _CODE.clear()
        _CODE[key] = code
    return code


def load_solve(tree: Path, entry: str = "harness.py") -> Callable[..., Any]:
    """Import the entry point (``file.py`` or ``file.py:function``) of a materialised tree."""
    filename, _, func = entry.partition(":")
    func = func or "solve"
    module_path = tree / filename
    if not module_path.is_file():
        raise HarnessError(
            f"harness entry {filename!r} is not in the harness commit {tree.name[:10]}; set harness.entry"
        )
    name = f"replaykit_harness_{tree.name[:12]}"
    spec = importlib.util.spec_from_file_location(name, module_path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(tree))
    old = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        exec(_compiled(module_path), module.__dict__)
    except Exception as exc:
        raise HarnessError(f"harness {filename} does not import: {type(exc).__name__}: {exc}") from exc
    finally:
        sys.dont_write_bytecode = old
        if sys.path and sys.path[0] == str(tree):
            sys.path.pop(0)
    solve: object = getattr(module, func, None)
    if not callable(solve):
        raise HarnessError(f"harness {filename} has no function {func}(task, env, llm, ctx)")
    return solve
