#!/bin/bash
# the image's service: started by the entrypoint, then the container's command runs
python3 -m http.server 8080 --bind 127.0.0.1 --directory /srv/kv > /tmp/kv.log 2>&1 &
exec "$@"
