#!/bin/bash
# reward 1 when the container's memory limit is 512 MB or less (cgroup v2, else v1)
mkdir -p /logs/verifier
limit=$(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || echo max)
echo "memory limit: $limit"
if [ "$(cat /app/out.txt 2>/dev/null)" = done ] && [ "$limit" != max ] && [ "$limit" -le $((512 * 1024 * 1024)) ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
