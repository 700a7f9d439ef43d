#!/bin/bash
mkdir -p /logs/verifier
# the verifier needs the network too: it fetches the package index
if apt-get update -qq > /dev/null 2>&1 && [ "$(jq -c . /app/pretty.json 2>/dev/null)" = '{"a":1}' ] && [ "$(wc -l < /app/pretty.json)" = 3 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
