#!/usr/bin/env bash
cd /app
rm junk.txt
