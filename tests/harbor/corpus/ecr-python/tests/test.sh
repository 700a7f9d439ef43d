#!/bin/bash
# a standard pytest verifier on a python base pulled from AWS's public mirror of Docker Hub
mkdir -p /logs/verifier
cd /app
if python3 -m pytest -q /tests/greet_check.py; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
