#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/blocked.txt 2>/dev/null)" = "$(sort /srv/blocked.txt)" ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
