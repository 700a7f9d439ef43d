#!/bin/bash
app="${APP_DIR:-/app}"
logs="${LOGS_DIR:-/logs}/verifier"
mkdir -p "$logs"
got=$(python3 -c 'import sys, urllib.request; print(urllib.request.urlopen("http://127.0.0.1:" + open(sys.argv[1]).read().strip() + "/", timeout=10).read().decode())' "$app/port" 2>&1)
echo "got: $got"
if [ "$got" = "served in the background" ]; then echo 1 > "$logs/reward.txt"; else echo 0 > "$logs/reward.txt"; fi
