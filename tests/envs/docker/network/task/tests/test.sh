#!/usr/bin/env bash
# six installed by the agent, tree by the image build, a file fetched over HTTPS
mkdir -p /logs/verifier
python3 - <<'PY'
import os, pathlib, shutil, urllib.request
ok = shutil.which("tree") is not None
try:
    import six
    ok = ok and six.__version__ == "1.16.0"
except ImportError:
    ok = False
body = urllib.request.urlopen(os.environ["FILE_URL"], timeout=60).read()
print("fetched", len(body), "bytes")
ok = ok and body.startswith(b"frozen file")
pathlib.Path("/logs/verifier/reward.txt").write_text("1" if ok else "0")
PY
