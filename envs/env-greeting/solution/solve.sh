#!/usr/bin/env bash
# GREETING_STYLE comes from [solution.env], GREETING_NAME from [environment.env].
[ "$GREETING_STYLE" = formal ] || exit 1
echo "Good day, $GREETING_NAME." > greeting.txt
