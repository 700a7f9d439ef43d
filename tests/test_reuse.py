"""When prefix reuse is sound (``model.reuse``'s default by engine determinism) and which
recorded episodes may donate (``episodes/reuse.py``): the baseline's first, the same key but
for the SHA, the same engine identity, graded, verified (a damaged one is one warning line)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from replaykit.cassette.events import EnvEvent, Episode, Event, GradeEvent, LlmEvent
from replaykit.cassette.keys import CassetteKey, ModelId
from replaykit.cassette.store import Store
from replaykit.envs.results import Grade, Observation
from replaykit.episodes.reuse import find_donors, reuse_policy
from replaykit.models.config import ModelConfig
from replaykit.models.identity import identity_digest
from tests.store_sql import raw_sql

URL = "http://127.0.0.1:9/v1"
ENGINE: dict[str, Any] = {"model_file": "tiny.gguf", "n_ctx": 2048}


def test_the_built_in_server_reuses_by_default() -> None:
    policy = reuse_policy(Store("unused"), ModelConfig(), None, "once")
    assert (policy.policy, policy.basis) == ("prefix", "exact")
    assert "built-in reference server is deterministic" in policy.reason


def test_record_mode_all_and_an_explicit_none_send_every_call() -> None:
    assert reuse_policy(Store("unused"), ModelConfig(), None, "all").policy == "none"
    assert reuse_policy(Store("unused"), ModelConfig(reuse="none"), None, "once").policy == "none"


def probe(store: Store, verdict: str, temperature: float = 0.0) -> None:
    store.put_doc(
        "p1",
        "probe",
        {"probe_id": "p1", "verdict": verdict, "temperature": temperature, "base_url": URL, "model": "tiny"},
        model="tiny",
        endpoint=URL,
        config_digest=identity_digest(ENGINE),
    )


def test_a_real_engine_reuses_only_when_a_saved_probe_found_it_deterministic(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    model = ModelConfig(name="tiny", base_url=URL, api_key_env="")
    unprobed = reuse_policy(store, model, ENGINE, "once")
    assert unprobed.policy == "none" and "no saved probe" in unprobed.reason
    assert reuse_policy(store, model, None, "once").policy == "none"  # identity not measured
    probe(store, "nondeterministic")
    assert reuse_policy(store, model, ENGINE, "once").policy == "none"
    forced = reuse_policy(store, model.model_copy(update={"reuse": "prefix"}), ENGINE, "once")
    assert (forced.policy, forced.basis) == ("prefix", "shared sample") and "shared sample" in forced.reason
    probe(store, "deterministic")
    assert (
        reuse_policy(store, model, ENGINE, "once").policy,
        reuse_policy(store, model, ENGINE, "once").basis,
    ) == (
        "prefix",
        "exact",
    )
    hot = model.model_copy(update={"temperature": 0.7})  # probed at 0.0: says nothing of 0.7
    assert reuse_policy(store, hot, ENGINE, "once").policy == "none"


def key(sha: str, seed: int = 0) -> CassetteKey:
    return CassetteKey(
        sha, "task", "digest", ModelId("m", "builtin", "sim-1"), seed, "cfg", extra=(("env", "local"),)
    )


def episode(sha: str, text: str = "x", meta: dict[str, Any] | None = None, passed: bool = True) -> Episode:
    body = {"messages": [{"role": "user", "content": text}]}
    events: list[Event] = [
        LlmEvent("POST", "/v1/chat/completions", body, 200, "OK", [], text.encode(), [len(text)]),
        EnvEvent("ls", Observation(text, "", 0), "s"),
        GradeEvent(Grade(1.0 if passed else 0.0, passed, infra_failure=not passed)),
    ]
    return Episode(key(sha), events, meta or {})  # type: ignore[arg-type]


def test_donors_come_the_baseline_first_then_the_newest_each_recording_once(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    recorded = (("b", "base"), ("c", "older"), ("d", "newer"), ("e", "newer"), ("f", "newest"))
    for n, (sha, text) in enumerate(recorded):
        one = episode(sha * 40, text, passed=sha != "f")  # f: an infra failure never donates
        store.put_episode(one)
        raw_sql(store).execute(
            "UPDATE cassettes SET created_at = ? WHERE id = ?", (f"2026-01-0{n + 1}", one.id)
        )
    donors = find_donors(store, key("a" * 40), None, baseline_sha="b" * 40)
    assert [d.key.harness_sha[0] for d in donors] == ["b", "e", "c"]  # e and d are the same recording: once


def test_a_donor_of_another_engine_or_seed_does_not_donate(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.put_episode(episode("b" * 40, meta={"model": {"name": "m", "temperature": 0.0, "engine": ENGINE}}))
    store.put_episode(Episode(key("c" * 40, seed=1), episode("c" * 40).events, {}))
    assert (
        find_donors(store, key("a" * 40), None) == []
    )  # recorded under an engine identity; this one has none
    assert [d.key.harness_sha[0] for d in find_donors(store, key("a" * 40), ENGINE)] == ["b"]


def test_a_damaged_donor_is_one_warning_line_and_is_not_used(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    good, bad = episode("b" * 40, "good"), episode("c" * 40, "bad")
    store.put_episode(good)
    store.put_episode(bad)
    doc = store.cassette_row(bad.id)["doc"]
    raw_sql(store).execute("UPDATE blobs SET data = ? WHERE hash = ?", (b'{"damaged": true}', doc))
    warnings: list[str] = []
    donors = find_donors(store, key("a" * 40), None, warn=warnings.append)
    assert [d.id for d in donors] == [good.id]
    assert len(warnings) == 1 and "\n" not in warnings[0]
    assert warnings[0].startswith(
        f"warning: donor cassette {bad.id} (task#0, harness cccccccccc) fails verification"
    )
