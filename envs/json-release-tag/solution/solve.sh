#!/usr/bin/env bash
python3 -c "import json; d = json.load(open('package.json')); print(d['name'] + '@' + d['version'])" > release_tag.txt
cat release_tag.txt
