#!/bin/bash
for i in $(seq 50); do python3 -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:8080/answer', timeout=2).read().decode().strip())" > /app/answer.txt 2>/dev/null && break; sleep 0.2; done
