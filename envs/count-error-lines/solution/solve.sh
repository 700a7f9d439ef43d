#!/usr/bin/env bash
awk '$2 == "ERROR"' server.log | wc -l > error_count.txt
cat error_count.txt
