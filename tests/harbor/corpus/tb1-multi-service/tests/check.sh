#!/bin/bash
test "$(cat /app/answer.txt)" = "42"
