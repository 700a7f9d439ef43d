"""What names a ``replaykit proxy`` session in the store and finds it again: its cassette key
(``proxy_key``: the session name, the upstream as a service, the digest of its rules), the rules
an outside agent needs (``AGENT_RULES``), the stored sessions of a name (``find_sessions``) and
whether one may be replayed (``reusable_session``), the rules a session runs and was recorded with.
The session itself is ``proxy_session.py``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

from replaykit.capture import rule_files
from replaykit.capture.failures import stored_endpoint_failure
from replaykit.capture.matchers import get_rule
from replaykit.capture.upstream import upstream_identity
from replaykit.cassette.backend import BlobStore, EpisodeStore
from replaykit.cassette.keys import CassetteKey, ModelId
from replaykit.core.determinism import digest_of
from replaykit.core.errors import ConfigError
from replaykit.core.meta import EpisodeMeta, RuleDef

Line = Callable[[str], None]  # one line for the user while the session runs


def endpoint_identity(upstream: str) -> str:
    return upstream_identity(upstream)


#: Normalisation rules an external agent needs so its replay matches its recording
#: (``replaykit proxy --agent NAME``): Codex puts a fresh session id, UUIDs and times
#: into every request.
AGENT_RULES: dict[str, tuple[str, ...]] = {
    "codex": ("uuids", "timestamps", "codex-session"),
}


def rules_for(agent: str | None, rules: tuple[str, ...] = ()) -> tuple[str, ...]:
    """``rules`` plus the agent's, in order, each once."""
    extra = AGENT_RULES[agent] if agent else ()
    return tuple(dict.fromkeys((*extra, *rules)))


def proxy_key(
    name: str,
    upstream: str,
    rules: tuple[str, ...],
    model: str = "",
    rule_defs: Mapping[str, RuleDef] | None = None,
) -> CassetteKey:
    rules_part: dict[str, object] = {"rules": list(rules)}
    if rule_defs:  # a rule file's definitions are identity too (absent: the keys of older sessions)
        rules_part["rule_defs"] = {n: dict(d) for n, d in sorted(rule_defs.items())}
    return CassetteKey(
        harness_sha="",
        task_id=name,
        task_digest="",
        model=ModelId(name=model, endpoint=endpoint_identity(upstream)),
        seed=0,
        config_digest=digest_of(rules_part)[:16],
        kind="proxy",
    )


def find_sessions(
    store: EpisodeStore, name: str, upstream: str | None, note: Line | None = None
) -> list[Mapping[str, object]]:
    """The stored sessions called ``name``, oldest first (for this upstream, when given: compared
    as services, so ``localhost:8080`` finds one recorded against ``127.0.0.1:9090``)."""
    groups: dict[str, list[Mapping[str, object]]] = {}
    for row in store.find_proxy_sessions(name):
        groups.setdefault(endpoint_identity(str(row["endpoint"])), []).append(row)
    if upstream is None:
        if len(groups) > 1:
            raise ConfigError(
                f"proxy session {name!r} was recorded against several upstreams "
                f"({', '.join(sorted(groups))}); pass --upstream to pick one"
            )
        return next(iter(groups.values()), [])
    wanted = endpoint_identity(upstream)
    others = sorted(u for u in groups if u != wanted)
    if others and note is not None:
        note(
            f"proxy session {name!r} is also recorded against {', '.join(others)}; this one is for "
            f"{wanted} (a replay without --upstream will ask which)"
        )
    return groups.get(wanted, [])


def reusable_session(store: BlobStore, row: Mapping[str, object], upstream: str | None) -> bool:
    """A stored session may be replayed as the answer unless it recorded no call (older
    versions stored empty sessions) or, when it could be re-recorded, an endpoint error."""
    doc = store.get_json(str(row["doc"]))
    if not any(isinstance(e, dict) and e.get("kind") == "llm" for e in doc.get("events", [])):
        return False
    return not (upstream and stored_endpoint_failure(doc))


def session_rules(
    rules: tuple[str, ...], rule_file: Path | None
) -> tuple[tuple[str, ...], dict[str, RuleDef]]:
    """The session's rules: the named ones, then a rule file's (installed), each checked."""
    defs = rule_files.load_rule_file(rule_file) if rule_file is not None else {}
    rules = tuple(dict.fromkeys((*rules, *rule_files.install(defs))))
    for rule in rules:
        get_rule(rule)
    return rules, defs


def recorded_rules(meta: EpisodeMeta) -> tuple[tuple[str, ...], dict[str, RuleDef]]:
    proxy = meta.get("proxy")
    if proxy is None:
        return (), {}
    defs = proxy.get("rule_defs") or {}
    return tuple(proxy.get("rules", ())), {
        str(k): {"pattern": str(v.get("pattern", "")), "replace": str(v.get("replace", ""))}
        for k, v in defs.items()
    }
