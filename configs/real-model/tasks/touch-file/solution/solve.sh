#!/usr/bin/env bash
cd /app
touch done.txt
