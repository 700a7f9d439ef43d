#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ] && python3 -c "import urllib.request as u; assert u.urlopen('http://127.0.0.1:8080/answer', timeout=5).read().strip() == b'42'"; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
