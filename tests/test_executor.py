"""The executor seam: episodes recorded in a process pool equal those recorded inline."""

from __future__ import annotations

from pathlib import Path

from replaykit.run import measure
from replaykit.testing import small_config

TASKS = ["hello-file", "fix-config-port", "count-error-lines"]


def test_pool_records_the_same_episodes_as_inline(tmp_path: Path) -> None:
    (tmp_path / "pool").mkdir()
    (tmp_path / "inline").mkdir()
    pooled = measure(small_config(tmp_path / "pool", tasks=TASKS, **{"executor.workers": 2}))
    inline = measure(small_config(tmp_path / "inline", tasks=TASKS, **{"executor.workers": 1}))
    assert len(pooled.recorded) == len(inline.recorded) == 6
    assert pooled.run["run_id"] == inline.run["run_id"]
    assert [e["digest"] for e in pooled.run["episodes"]] == [e["digest"] for e in inline.run["episodes"]]
