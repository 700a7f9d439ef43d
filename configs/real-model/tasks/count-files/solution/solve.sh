#!/usr/bin/env bash
cd /app
ls data | wc -l > count.txt
