"""Reading the verifier's reward file, as Harbor does, into one scalar.

The verifier writes ``$LOGS_DIR/verifier/reward.json`` or ``reward.txt``; like
Harbor, ``reward.json`` wins when both exist. ``reward.txt`` holds one finite
number. ``reward.json`` holds a number or an object of finite numbers (Harbor's
multi-reward recipe: several named rewards). The scalar reward replaykit grades
with is:

* the ``"reward"`` key when present (Harbor's one-dimensional convention);
* else the single key's value when there is one;
* else the **mean** of all keys (Harbor's default ``mean`` aggregation, each key
  weighted equally).

The detail names the keys and their values, and any error names the keys found.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def reward_values(folder: Path) -> dict[str, float]:
    """Every named reward of ``folder``'s reward file, as Harbor keeps them (reward.json's numeric
    keys, or ``{"reward": x}`` for a number); {} when there is none or it is unusable."""
    try:
        js, txt = folder / "reward.json", folder / "reward.txt"
        data: Any = json.loads(js.read_text(encoding="utf-8")) if js.is_file() else None
        if data is None and txt.is_file():
            data = float(txt.read_text(encoding="utf-8").strip())
    except (OSError, UnicodeDecodeError, ValueError):
        return {}
    if isinstance(data, (int, float)) and not isinstance(data, bool):
        data = {"reward": data}
    if not isinstance(data, dict) or scalar_reward(data)[0] is None:
        return {}
    return {str(k): float(v) for k, v in data.items()}


def scalar_reward(data: Any) -> tuple[float | None, str]:
    """(scalar, explanation) from a parsed reward.json; (None, problem) when unusable."""
    if isinstance(data, (int, float)) and not isinstance(data, bool):
        value = float(data)
        return (value, "") if math.isfinite(value) else (None, f"reward.json is not finite: {data!r}")
    if not isinstance(data, dict):
        return None, f"reward.json must be a number or an object of numbers, got {type(data).__name__}"
    keys = ", ".join(sorted(data)) or "none"
    if not data:
        return None, 'reward.json is an empty object; write {"reward": x} or named rewards'
    for key, value in data.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None, f"reward.json key {key!r} is not a number ({value!r}); keys found: {keys}"
        if not math.isfinite(float(value)):
            return None, f"reward.json key {key!r} is not finite ({value!r}); keys found: {keys}"
    if "reward" in data:
        extra = (
            f" (other keys: {', '.join(sorted(k for k in data if k != 'reward'))})" if len(data) > 1 else ""
        )
        return float(data["reward"]), f"key 'reward'{extra}"
    if len(data) == 1:
        ((key, value),) = data.items()
        return float(value), f"key {key!r}"
    mean = sum(float(v) for v in data.values()) / len(data)
    parts = ", ".join(f"{k}={float(data[k]):g}" for k in sorted(data))
    return mean, f"mean of keys {parts}"


def read_reward(folder: Path) -> tuple[float | None, str, str]:
    """(reward, source, problem) from ``folder``'s reward.json, else reward.txt."""
    txt, js = folder / "reward.txt", folder / "reward.json"
    try:
        if js.is_file():
            try:
                data = json.loads(js.read_text(encoding="utf-8"))
            except ValueError as exc:
                return None, "reward.json", f"reward.json is not valid JSON: {exc}"
            value, how = scalar_reward(data)
            if value is None:
                return None, "reward.json", how
            return value, f"reward.json {how}".strip(), ""
        if txt.is_file():
            raw = txt.read_text(encoding="utf-8").strip()
            try:
                value = float(raw)
            except ValueError:
                return None, "reward.txt", f"reward.txt is not a number: {raw[:80]!r}"
            if not math.isfinite(value):
                return None, "reward.txt", f"reward.txt is not finite: {value!r}"
            return value, "reward.txt", ""
        return None, "", "the verifier wrote no reward.txt or reward.json"
    except (OSError, UnicodeDecodeError) as exc:
        return None, "", f"cannot read the reward: {exc}"
