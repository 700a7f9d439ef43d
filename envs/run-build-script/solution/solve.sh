#!/usr/bin/env bash
chmod +x build.sh
./build.sh
