#!/bin/bash
# the container's own traffic: a server on its loopback, fetched with the usual proxy variables set
cd /srv/site && nohup python3 -m http.server 8765 --bind 127.0.0.1 >/tmp/server.log 2>&1 &
for i in $(seq 1 50); do python3 -c 'import socket; socket.create_connection(("127.0.0.1", 8765), 1)' 2>/dev/null && break; sleep 0.2; done
python3 - <<'PY'
import urllib.request
with urllib.request.urlopen("http://localhost:8765/greeting.txt", timeout=10) as reply:
    open("/app/got.txt", "wb").write(reply.read())
PY
