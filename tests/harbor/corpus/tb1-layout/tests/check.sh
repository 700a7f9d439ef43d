[ "$(cat /app/done.txt 2>/dev/null)" = done ]
