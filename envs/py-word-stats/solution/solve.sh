#!/bin/bash
python3 - <<'PY'
import json
text = open("text.txt", encoding="utf-8").read()
stats = {"lines": text.count("\n"), "words": len(text.split()), "chars": len(text)}
with open("stats.json", "w", encoding="utf-8") as f:
    json.dump(stats, f)
PY
