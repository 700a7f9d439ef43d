#!/usr/bin/env bash
set -euo pipefail
PIP_NO_INDEX=0 pip install --no-cache-dir --disable-pip-version-check six==1.16.0
