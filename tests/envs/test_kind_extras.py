"""An env kind's extras (``EnvKind.extras``) through the episode layer, with no Docker: a
kind that is not docker records exchanges beside its episodes, keeps a build's exchanges
under its own document, is served its recording back on certify, and shows in ``net ls``."""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from replaykit.cassette.store import Store
from replaykit.core.records import JSON
from replaykit.envs.base import EnvKind, EnvRequest, EnvSection
from replaykit.envs.extras import ExchangeRecord, Extras, KindStore, Miss, StoredExchange
from replaykit.envs.local import LocalEnv
from replaykit.envs.local import factory as local_factory
from replaykit.envs.registry import ENVIRONMENTS
from replaykit.episodes.certificate_lookup import DETERMINISTIC
from replaykit.episodes.certify import certify_run
from replaykit.episodes.network import net_listing
from replaykit.episodes.run import measure
from replaykit.testing import small_config

BODY = b"fetched bytes\n" * 100
SEEN: dict[str, list[Any]] = {"extras": [], "served": []}


def record(spool: Path, url: str) -> ExchangeRecord:
    (spool / "bodies").mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(BODY).hexdigest()
    (spool / "bodies" / digest).write_bytes(BODY)
    return {
        "method": "GET",
        "url": url,
        "request_body": hashlib.sha256(b"").hexdigest(),
        "status": 200,
        "reason": "OK",
        "headers": [["content-type", "text/plain"]],
        "body": digest,
        "size": len(BODY),
        "source": "upstream",
        "body_path": str(spool / "bodies" / digest),
        "spool": str(spool),
    }


class FetchingEnv(LocalEnv):
    """The local sandbox, plus one recorded fetch per action (a real kind would proxy them)."""

    kind = "fetching"
    extras: Mapping[str, JSON] = {}
    pending: list[ExchangeRecord]

    def run(self, command: str, timeout_sec: float | None = None) -> Any:
        obs = super().run(command, timeout_sec)
        if "serve" not in self.extras:  # recording: the fetch is reported, its body in a spool
            spool = Path(tempfile.mkdtemp(prefix="fetching-spool-"))
            self.pending.append(record(spool, "http://example.test/data"))
        return obs

    def network_exchanges(self) -> list[ExchangeRecord]:
        out, self.pending = self.pending, []
        return out

    def network_misses(self) -> list[Miss]:
        return []


def factory(request: EnvRequest) -> FetchingEnv:
    env = local_factory(request)
    sandbox = FetchingEnv(env.task, env.workspace, env.timeout_sec, env.max_output_bytes)
    sandbox.extras, sandbox.pending = request.extras, []
    SEEN["extras"].append(dict(request.extras))
    return sandbox


class Extras_:
    @contextlib.contextmanager
    def recording(self, store: KindStore, env: EnvSection, tasks: Sequence[Any]) -> Iterator[Extras]:
        spool = Path(tempfile.mkdtemp(prefix="fetching-build-"))
        store.put_exchanges(
            "fetch-build-1",
            "fetch-build",
            [record(spool, "http://example.test/build")],
            "b1",
            {"built": "b1"},
        )
        yield {"recording": True}

    @contextlib.contextmanager
    def serving(
        self, store: KindStore, environment: Mapping[str, JSON], exchanges: list[StoredExchange]
    ) -> Iterator[Extras]:
        bodies = [b"".join(store.get_blob(c) for c in e["chunks"]) for e in exchanges]
        SEEN["served"].append(([e["url"] for e in exchanges], bodies))
        yield {"serve": True}

    def forked_reason(self, environment: Mapping[str, JSON]) -> str | None:
        return None

    def build_exchanges(
        self, store: KindStore, extra: Sequence[tuple[str, str]]
    ) -> list[tuple[str, list[StoredExchange]]]:
        return [("b1", store.get_exchanges("fetch-build-1", "fetch-build"))]

    def documents(self, extra: Sequence[tuple[str, str]]) -> list[str]:
        return ["fetch-build-1"]


def test_a_kind_records_serves_and_lists_its_exchanges_through_its_hooks(tmp_path: Path) -> None:
    ENVIRONMENTS.register("fetching", EnvKind("fetching", factory, extras=Extras_()))
    SEEN["extras"].clear()
    SEEN["served"].clear()
    try:
        cfg = small_config(tmp_path, tasks=["hello-file"], seeds=[0], **{"env.kind": "fetching"})
        store = Store(cfg.store_path)
        result = measure(cfg, store=store)
        assert SEEN["extras"] == [{"recording": True}]  # what the recording hook yielded
        episode = store.get_episode(result.run.cassettes[0])
        nets = episode.net_events
        assert nets and all(e.chunks and e.body_path is None for e in nets)  # bodies into blobs
        assert b"".join(store.get_blob(c) for c in nets[0].chunks) == BODY
        assert not list(Path(tempfile.gettempdir()).glob("fetching-spool-*"))  # spools removed
        listing = net_listing(store, result.run.run_id)
        assert listing["total"] == len(nets) and listing["bytes"] == len(nets) * len(BODY)
        assert [(b["image"], b["url"]) for b in listing["image_builds"]] == [
            ("b1", "http://example.test/build")
        ]

        report = certify_run(store, result.run.run_id)
        assert report["tasks"][0]["status"] == DETERMINISTIC, report
        assert SEEN["served"] == [(["http://example.test/data"] * len(nets), [BODY] * len(nets))]
        assert SEEN["extras"][-1] == {"serve": True}  # the re-execution got what serving yielded
    finally:
        ENVIRONMENTS.unregister("fetching")
