#!/bin/bash
echo "$GREETING $SUFFIX" > /app/greeting.txt
