"""Normalisation rules a user adds: the built-in ``cwd`` rule and rule files of named
regex replacements (``replaykit proxy --rule-file FILE``).

An agent that puts volatile text into its requests (a working directory, a job id, a
host name) replays only where that text is the same — unless a rule rewrites it, in the
recorded requests and in the replayed ones alike, before they are compared.

* ``cwd`` (built in: ``capture.matchers``): every occurrence of the proxy's working directory (and of ``$PWD``, where it
  names the same folder another way) becomes ``<cwd>``. Start the proxy in the folder the
  agent works in (OpenHands, aider, …): a replay from another folder then matches.
* a rule file (YAML) names its rules; each is a regex and its replacement, applied to every
  string of the request body in file order::

      rules:
        job-id: {pattern: 'job-[0-9a-f]{8}', replace: '<job>'}
        home:   {pattern: '/home/[^/]+', replace: '/home/<user>'}

A session stores its rules' names and, for file rules, their definitions (data, never run
from the store): the replay is handed the same file again and its definitions must be the
recorded ones.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from replaykit.capture.matchers import _walk_strings, known_rules, register_rule
from replaykit.core.errors import ConfigError
from replaykit.core.meta import RuleDef

#: rule names a file may not take: the built-ins
BUILTIN_RULES = frozenset({"uuids", "timestamps", "codex-session", "cwd"})
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def load_rule_file(path: Path) -> dict[str, RuleDef]:
    """The named rules of a YAML rule file, checked: one line naming the file and the rule
    when something is wrong (never a traceback)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"rule file {path}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise ConfigError(f"rule file {path}: not UTF-8 text") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"rule file {path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    rules = data.get("rules") if isinstance(data, dict) else None
    if not isinstance(rules, dict) or not rules:
        raise ConfigError(
            f"rule file {path}: expected a mapping 'rules: {{NAME: {{pattern: REGEX, replace: TEXT}}}}'"
        )
    return {name: _rule(path, name, spec) for name, spec in rules.items()}


def _rule(path: Path, name: object, spec: object) -> RuleDef:
    """One named rule of a rule file: a free name, a non-empty regex and its replacement."""
    where = f"rule file {path}: rule {name!r}"
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"{where}: a name is letters, digits, '.', '_' or '-' (at most 64)")
    if name in BUILTIN_RULES:
        raise ConfigError(f"{where}: the name is a built-in rule's; choose another")
    if not isinstance(spec, dict) or set(spec) != {"pattern", "replace"}:
        raise ConfigError(f"{where}: expected {{pattern: REGEX, replace: TEXT}}")
    pattern, replace = spec["pattern"], spec["replace"]
    if not isinstance(pattern, str) or not pattern or not isinstance(replace, str):
        raise ConfigError(f"{where}: pattern must be a non-empty string and replace a string")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"{where}: pattern {pattern!r} is not a regex ({exc})") from None
    return {"pattern": pattern, "replace": replace}


def install(defs: dict[str, RuleDef]) -> tuple[str, ...]:
    """Register a rule file's rules under their names (the file's own order); their names."""
    for name, spec in defs.items():
        compiled, replace = re.compile(spec["pattern"]), spec["replace"]

        def rule(body: Any, compiled: re.Pattern[str] = compiled, replace: str = replace) -> Any:
            return _walk_strings(body, lambda text: compiled.sub(lambda _m: replace, text))

        register_rule(name, rule)
    return tuple(defs)


def check_recorded(recorded: dict[str, RuleDef], given: dict[str, RuleDef], names: tuple[str, ...]) -> None:
    """A replay applies the very rules its session recorded: every file rule it names is given
    again (``--rule-file``) with the recorded definition."""
    for name in names:
        if name in BUILTIN_RULES or (name in known_rules() and name not in recorded):
            continue
        if name not in given:
            raise ConfigError(
                f"the session was recorded with rule {name!r} from a rule file; pass that file with --rule-file"
            )
        if name in recorded and given[name] != recorded[name]:
            raise ConfigError(
                f"rule {name!r} in the rule file is not the one the session was recorded with "
                f"(recorded: pattern {recorded[name]['pattern']!r}, replace {recorded[name]['replace']!r})"
            )
