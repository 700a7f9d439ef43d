#!/bin/bash
mkdir -p /logs/verifier
if grep -qx "port = 8080" /app/config.ini && [ -f /app/README ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
