#!/bin/bash
. /tests/helpers.sh
grade '[ "$(cat /app/list.txt)" = one ]'
