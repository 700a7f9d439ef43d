#!/bin/bash
python3 -c "import os, urllib.request as u; print(u.urlopen(os.environ['SVC_URL'] + '/ping').read().decode().strip())" > /app/pong.txt
