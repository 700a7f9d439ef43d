"""``executor.address: local`` starts a private Ray instance even when another cluster is
known on this machine (a shared machine: another user's ``ray start --head`` or RAY_ADDRESS)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.ray  # starts a Ray instance

CODE = """
import ray
from replaykit.execution.ray_executor import connect
connect("local", num_cpus=1)
print("cpus", int(ray.cluster_resources()["CPU"]))
ray.shutdown()
"""


def test_local_starts_a_private_instance_beside_a_known_cluster() -> None:
    env = dict(os.environ, RAY_ADDRESS="127.0.0.1:1")  # a cluster this driver must not join
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "cpus 1" in proc.stdout
