#!/usr/bin/env bash
mkdir -p greeting
printf 'Hello, replaykit!\n' > greeting/hello.txt
