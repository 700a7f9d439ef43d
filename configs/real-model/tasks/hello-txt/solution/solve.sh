#!/usr/bin/env bash
cd /app
echo hello > hello.txt
