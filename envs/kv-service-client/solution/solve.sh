#!/usr/bin/env bash
python3 -c "import os, urllib.request; open('release.txt', 'w').write(urllib.request.urlopen(os.environ['KV_URL'] + '/key/release').read().decode())"
