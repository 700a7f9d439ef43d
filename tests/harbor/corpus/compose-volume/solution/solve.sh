#!/bin/bash
echo "hello volume" > /shared/request
for _ in $(seq 100); do [ -f /shared/response ] && break; sleep 0.1; done
cp /shared/response /app/answer.txt
