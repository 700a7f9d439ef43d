"""SQL views over the index (for datasette and plain sqlite3): episodes, runs, verdicts, trainings."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

from replaykit.cassette.store import Store
from replaykit.cassette.store.sqlite import VIEWS
from replaykit.testing import small_config
from replaykit.train.trainer import Trainer


def query(db: Path, sql: str) -> list[dict[str, object]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)  # a reader needs nothing but SQLite
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(sql).fetchall()]
    finally:
        conn.close()


def test_views_show_runs_episodes_verdicts_and_trainings(tmp_path: Path) -> None:
    cfg = small_config(
        tmp_path, tasks=["fix-config-port", "hello-file"], seeds=[0, 1], **{"model.name": "reference-weak"}
    )
    trainer = Trainer(config=cfg)
    for loss in trainer.epochs(1):
        loss.backward()
        trainer.optimizer.step()
    summary = trainer.summary()
    db = Path(cfg.store_path) / "index.db"
    names = {r["name"] for r in query(db, "SELECT name FROM sqlite_master WHERE type = 'view'")}
    assert names == set(VIEWS)

    store = Store(cfg.store_path)
    epoch = summary.epochs[0]
    assert epoch.baseline_run is not None
    base = store.get_run(epoch.baseline_run).to_json()
    runs = {r["run_id"]: r for r in query(db, "SELECT * FROM run_summaries")}
    assert (
        runs[base["run_id"]]["solved"] == base["solved"]
        and runs[base["run_id"]]["total"] == base["total"] == 4
    )
    assert (
        runs[base["run_id"]]["harness_sha"] == base["harness_sha"] and runs[base["run_id"]]["episodes"] == 4
    )
    members = query(
        db, f"SELECT * FROM run_episodes WHERE run_id = '{base['run_id']}' ORDER BY task_id, seed"
    )
    expected = sorted(base["episodes"], key=lambda e: (e["task_id"], e["seed"]))
    assert [(m["task_id"], m["seed"], m["cassette_id"], m["reward"], m["tokens"]) for m in members] == [
        (e["task_id"], e["seed"], e["cassette_id"], e["reward"], e["tokens"]) for e in expected
    ]
    episodes = query(db, "SELECT * FROM episodes")
    assert {e["cassette_id"] for e in episodes} >= set(base["cassettes"])
    assert all(e["model"] == "reference-weak" and e["steps"] is not None for e in episodes)

    verdicts = query(db, "SELECT * FROM verdicts")
    assert len(verdicts) == 1
    v = verdicts[0]
    verdict = epoch.verdict
    assert verdict is not None
    assert v["verdict_id"] == epoch.verdict_id and v["training_id"] == summary.training_id and v["epoch"] == 0
    assert v["candidate_sha"] == epoch.candidate_sha and bool(v["accept"]) == (epoch.decision == "accepted")
    assert json.loads(str(v["new_solves"])) == verdict["new_solves"] and v["reason"] == verdict["reason"]
    trainings = query(db, "SELECT * FROM trainings")
    assert [(t["training_id"], t["epochs"], t["accepted"]) for t in trainings] == [
        (summary.training_id, 1, int(epoch.decision == "accepted"))
    ]

    # views are made with the schema: opening the store again and reading leaves index.db as it was
    store.close()
    trainer.store.close()  # the last connection checkpoints the WAL into index.db
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    again = Store(cfg.store_path)
    again.list_runs()
    again.close()
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
