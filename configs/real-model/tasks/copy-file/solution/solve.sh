#!/usr/bin/env bash
cd /app
cp notes.txt backup.txt
