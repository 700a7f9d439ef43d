#!/usr/bin/env bash
cat extra.csv >> inventory.csv
awk -F, 'NR > 1 { s += $2 } END { print s }' inventory.csv > total.txt
